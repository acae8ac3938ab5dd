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
    let o = StoreOptions::from_conf(conf(&[("metadataStoreSessionTimeoutMillis", "5000")]));
    assert_eq!(o.session_timeout, Duration::from_millis(5000));
    assert_eq!(o.operation_timeout, Duration::from_secs(30));
    let o = StoreOptions::from_conf(conf(&[
        ("metadataStoreSessionTimeoutMillis", "5000"),
        ("zooKeeperSessionTimeoutMillis", "7000"),
        ("metadataStoreOperationTimeoutSeconds", "4"),
    ]));
    assert_eq!(o.session_timeout, Duration::from_millis(7000));
    assert_eq!(o.operation_timeout, Duration::from_secs(4));
    let o = StoreOptions::from_conf(conf(&[("zooKeeperSessionTimeoutMillis", "-1")]));
    assert_eq!(o.session_timeout, Duration::from_millis(30_000));
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
