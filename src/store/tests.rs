//! Tests of the store layer itself: options from broker configuration keys, and error messages.

use super::*;

#[test]
fn options_from_broker_conf_keys() {
    let conf = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.to_string())
        }
    };
    let o = StoreOptions::from_conf(
        "zk:h:2181",
        conf(&[("metadataStoreSessionTimeoutMillis", "5000")]),
    )
    .unwrap();
    assert_eq!(o.session_timeout, Duration::from_millis(5000));
    assert_eq!(o.operation_timeout, Duration::from_secs(30));
    let o = StoreOptions::from_conf(
        "zk:h:2181",
        conf(&[
            ("metadataStoreSessionTimeoutMillis", "5000"),
            ("zooKeeperSessionTimeoutMillis", "7000"),
            ("metadataStoreOperationTimeoutSeconds", "4"),
        ]),
    )
    .unwrap();
    assert_eq!(o.session_timeout, Duration::from_millis(7000));
    assert_eq!(o.operation_timeout, Duration::from_secs(4));
    let o = StoreOptions::from_conf(
        "zk:h:2181",
        conf(&[("zooKeeperSessionTimeoutMillis", "-1")]),
    )
    .unwrap();
    assert_eq!(o.session_timeout, Duration::from_millis(30_000));
    assert_eq!((o.credentials, o.zk_acl, o.tls), (None, ZkAcl::Open, None));
}

/// Writes `text` to a file of a fresh temporary directory; returns the directory (kept alive) and the path.
fn file(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn credentials_acl_and_etcd_tls_from_broker_conf() {
    let (_d, pw) = file("pw", "s3cret\nignored second line\n");
    let (_d2, yaml) = file(
        "etcd.yaml",
        "# Pulsar's etcd client settings\nuseTls: true\ntlsProvider: JDK\ntlsTrustCertsFilePath: \"/etc/ca.pem\"\n\
         tlsCertificateFilePath=/etc/client.pem\ntlsKeyFilePath: /etc/client.key\nauthority: etcd.internal\n",
    );
    let pw_path = pw.display().to_string();
    let yaml_path = yaml.display().to_string();
    let conf = |pairs: Vec<(&'static str, String)>| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.clone())
        }
    };
    let o = StoreOptions::from_conf(
        "etcd:https://h:2379",
        conf(vec![
            ("loadmgrMetadataStoreUser", "broker".into()),
            ("loadmgrMetadataStorePasswordFile", pw_path.clone()),
            ("loadmgrZookeeperAcl", "creator-all-world-read".into()),
            ("metadataStoreConfigPath", yaml_path.clone()),
        ]),
    )
    .unwrap();
    assert_eq!(
        o.credentials,
        Some(Credentials {
            user: "broker".into(),
            password: "s3cret".into()
        })
    );
    assert_eq!(o.zk_acl, ZkAcl::CreatorAllWorldRead);
    assert_eq!(
        o.tls,
        Some(TlsFiles {
            ca_file: Some("/etc/ca.pem".into()),
            cert_file: Some("/etc/client.pem".into()),
            key_file: Some("/etc/client.key".into()),
            domain: Some("etcd.internal".into()),
        })
    );
    // On a ZooKeeper store the file is ZooKeeper's client properties: TLS is refused, the rest ignored.
    let o = StoreOptions::from_conf(
        "zk:h:2181",
        conf(vec![("metadataStoreConfigPath", yaml_path)]),
    )
    .unwrap();
    assert_eq!(o.tls, None);
    let (_d3, secure) = file("zk.conf", "zookeeper.client.secure=true\n");
    let err = |pairs: Vec<(&'static str, String)>| {
        StoreOptions::from_conf("etcd:http://h:2379", conf(pairs))
            .unwrap_err()
            .to_string()
    };
    assert!(StoreOptions::from_conf(
        "zk:h:2181",
        conf(vec![(
            "metadataStoreConfigPath",
            secure.display().to_string()
        )])
    )
    .unwrap_err()
    .to_string()
    .contains("zookeeper.client.secure=true: loadmgr does not speak TLS to ZooKeeper"));
    assert!(err(vec![("loadmgrMetadataStoreUser", "u".into())])
        .contains("loadmgrMetadataStoreUser is set without"));
    assert!(err(vec![("loadmgrMetadataStorePassword", "p".into())])
        .contains("without loadmgrMetadataStoreUser"));
    assert!(err(vec![
        ("loadmgrMetadataStoreUser", "u".into()),
        ("loadmgrMetadataStorePassword", "p".into()),
        ("loadmgrMetadataStorePasswordFile", pw_path),
    ])
    .contains("not both"));
    assert!(err(vec![("loadmgrZookeeperAcl", "creator-only".into())])
        .contains("needs loadmgrMetadataStoreUser"));
    assert!(err(vec![("loadmgrZookeeperAcl", "closed".into())]).contains("unknown ACL 'closed'"));
    assert!(err(vec![
        ("loadmgrMetadataStoreUser", "u".into()),
        ("loadmgrMetadataStorePasswordFile", "/no/such/file".into()),
    ])
    .contains("loadmgrMetadataStorePasswordFile /no/such/file: cannot read"));
    let (_d4, typo) = file("etcd.yaml", "useTls: true\ntlsTrustCertFilePath: /ca\n");
    let e = err(vec![(
        "metadataStoreConfigPath",
        typo.display().to_string(),
    )]);
    assert!(e.contains(":2: unknown key 'tlsTrustCertFilePath'"), "{e}");
    let (_d5, nested) = file("etcd.yaml", "useTls: yes\n");
    let e = err(vec![(
        "metadataStoreConfigPath",
        nested.display().to_string(),
    )]);
    assert!(
        e.contains(":1: useTls must be true or false, found 'yes'"),
        "{e}"
    );
    let (_d6, half) = file("etcd.yaml", "useTls: true\ntlsCertificateFilePath: /c\n");
    let e = err(vec![(
        "metadataStoreConfigPath",
        half.display().to_string(),
    )]);
    assert!(e.contains("go together"), "{e}");
}

#[test]
fn error_messages_name_what_matters() {
    let e = Error::Unavailable {
        address: "zk:127.0.0.1:1".into(),
        elapsed: Duration::from_millis(2500),
        reason: "connection refused".into(),
    };
    assert_eq!(
        e.to_string(),
        "store zk:127.0.0.1:1 unreachable after 2.5s: connection refused"
    );
    assert!(e.is_transient());
    assert_eq!(
        Error::bad_version("/a", -1).to_string(),
        "/a: version conflict (create-only put, but the node exists)"
    );
    assert_eq!(
        Error::bad_version("/a", 3).to_string(),
        "/a: version conflict (expected version 3)"
    );
    assert!(!Error::not_found("/a").is_transient());
    let c = Credentials {
        user: "u".into(),
        password: "secret".into(),
    };
    assert!(!format!("{c:?}").contains("secret"));
}
