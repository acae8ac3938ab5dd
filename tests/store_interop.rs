//! Interoperability with the servers' own tools: what loadmgr writes, `zkCli.sh` and `etcdctl` read back
//! unchanged, and the other way round; `loadmgr store` end to end on both.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use loadmgr::model::json::to_json_string;
use loadmgr::model::LeaderBroker;
use loadmgr::store::{self, CreateOptions, DynStore, StoreOptions};
use loadmgr::testing::servers::{etcdctl_binary, zkcli_binary, EtcdServer, ZkServer};

const REPORT: &str = r#"{"webServiceUrl":"http://broker-1:8080","pulsarServiceUrl":"pulsar://broker-1:6650","cpu":{"usage":7.31,"limit":800.0},"bandwidthIn":{"usage":0.83,"limit":10000000.0},"numBundles":3}"#;

async fn open(url: &str) -> DynStore {
    store::connect(
        url,
        StoreOptions::default().with_session_timeout(Duration::from_secs(4)),
    )
    .await
    .unwrap()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run tool");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn zkcli(server: &ZkServer, args: &[&str]) -> String {
    run(Command::new(zkcli_binary())
        .arg("-server")
        .arg(server.address())
        .args(args))
}

fn etcdctl(server: &EtcdServer, args: &[&str]) -> String {
    run(Command::new(etcdctl_binary())
        .env("ETCDCTL_API", "3")
        .arg("--endpoints")
        .arg(server.endpoint())
        .args(args))
}

fn loadmgr(url: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .args(["store", "--store", url])
        .args(args)
        .output()
        .expect("run loadmgr");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_and_zkcli_read_each_other() {
    let server = ZkServer::start();
    let store = open(&server.url()).await;
    let leader = LeaderBroker::new("broker-1:8080", "http://broker-1:8080");
    let leader_json = to_json_string(&leader);
    store
        .put(
            "/loadbalance/leader",
            leader_json.as_bytes(),
            None,
            CreateOptions::EPHEMERAL,
        )
        .await
        .unwrap();
    store
        .put(
            "/loadbalance/brokers/broker-1:8080",
            REPORT.as_bytes(),
            None,
            CreateOptions::EPHEMERAL,
        )
        .await
        .unwrap();
    store
        .put(
            "/loadbalance/brokers/broker-2:8080",
            b"{}",
            None,
            CreateOptions::EPHEMERAL,
        )
        .await
        .unwrap();

    let got = zkcli(&server, &["get", "/loadbalance/leader"]);
    assert!(
        got.lines().any(|l| l == leader_json),
        "zkCli get printed:\n{got}"
    );
    let ls = zkcli(&server, &["ls", "/loadbalance/brokers"]);
    assert!(
        ls.lines().any(|l| l == "[broker-1:8080, broker-2:8080]"),
        "zkCli ls printed:\n{ls}"
    );
    let stat = zkcli(&server, &["stat", "/loadbalance/brokers/broker-1:8080"]);
    assert!(
        stat.lines()
            .any(|l| l.starts_with("ephemeralOwner = 0x") && l != "ephemeralOwner = 0x0"),
        "{stat}"
    );

    zkcli(&server, &["create", "/from-cli", REPORT]);
    let back = store.get("/from-cli").await.unwrap().unwrap();
    assert_eq!(back.value, REPORT.as_bytes());

    // The loadmgr command reads both and validates the report against its schema.
    let (ok, out, err) = loadmgr(&server.url(), &["get", "--check", "/from-cli"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("\"webServiceUrl\": \"http://broker-1:8080\""),
        "{out}"
    );
    assert!(err.contains("valid LocalBrokerData"), "{err}");
    let (ok, out, _) = loadmgr(&server.url(), &["ls", "/loadbalance/brokers"]);
    assert!(ok);
    assert_eq!(out, "broker-1:8080\nbroker-2:8080\n");
    let (ok, _, err) = loadmgr(&server.url(), &["get", "/nope"]);
    assert!(!ok && err.contains("/nope: no such node"), "{err}");
    let (ok, _, err) = loadmgr(&server.url(), &["put", "--version", "7", "/from-cli", "x"]);
    assert!(
        !ok && err.contains("version conflict (expected version 7)"),
        "{err}"
    );

    // `put -` reads the value from stdin (without the newline `echo` adds).
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .args(["store", "--store", &server.url(), "put", "/stdin/node", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{REPORT}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "/stdin/node version 0\n"
    );
    assert_eq!(
        store.get("/stdin/node").await.unwrap().unwrap().value,
        REPORT.as_bytes()
    );

    // `put --ephemeral` holds the node until the process exits (SIGTERM: it deletes the node on the way out).
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .args([
            "store",
            "--store",
            &server.url(),
            "put",
            "--ephemeral",
            "/held",
            "mine",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "/held version 0\n");
    let held = store.get("/held").await.unwrap().unwrap();
    assert!(held.stat.ephemeral && !held.stat.created_by_self);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        store.exists("/held").await.unwrap(),
        "still held while the process runs"
    );
    run(Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string()));
    assert!(child.wait().unwrap().success());
    assert!(
        !store.exists("/held").await.unwrap(),
        "released when the process exits"
    );
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_and_etcdctl_read_each_other() {
    let server = EtcdServer::start();
    let store = open(&server.url()).await;
    let leader_json = to_json_string(&LeaderBroker::new("broker-1:8080", "http://broker-1:8080"));
    store
        .put(
            "/loadbalance/leader",
            leader_json.as_bytes(),
            None,
            CreateOptions::EPHEMERAL,
        )
        .await
        .unwrap();
    store
        .put(
            "/loadbalance/brokers/broker-1:8080",
            REPORT.as_bytes(),
            None,
            CreateOptions::EPHEMERAL,
        )
        .await
        .unwrap();
    store
        .put(
            "/loadbalance/brokers/broker-2:8080",
            b"{}",
            None,
            CreateOptions::EPHEMERAL,
        )
        .await
        .unwrap();
    store
        .put(
            "/loadbalance/brokers-extra/x",
            b"",
            None,
            CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();

    let got = etcdctl(
        &server,
        &["get", "--print-value-only", "/loadbalance/leader"],
    );
    assert_eq!(got.trim_end_matches('\n'), leader_json);
    // What `zkCli.sh ls /loadbalance/brokers` lists, and nothing else (no placeholder parent keys).
    let keys = etcdctl(
        &server,
        &["get", "--prefix", "--keys-only", "/loadbalance/brokers/"],
    );
    let keys: Vec<&str> = keys.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        keys,
        vec![
            "/loadbalance/brokers/broker-1:8080",
            "/loadbalance/brokers/broker-2:8080"
        ]
    );
    let all = etcdctl(&server, &["get", "--prefix", "/loadbalance/brokers/"]);
    assert_eq!(
        all,
        format!("/loadbalance/brokers/broker-1:8080\n{REPORT}\n/loadbalance/brokers/broker-2:8080\n{{}}\n")
    );
    // Ephemerals are on the store's lease.
    let json = etcdctl(&server, &["get", "-w", "json", "/loadbalance/leader"]);
    assert!(
        json.contains("\"lease\":") && !json.contains("\"lease\":0"),
        "{json}"
    );

    etcdctl(&server, &["put", "/from-cli", REPORT]);
    let back = store.get("/from-cli").await.unwrap().unwrap();
    assert_eq!(back.value, REPORT.as_bytes());
    assert_eq!(back.stat.version, 0);

    let (ok, out, err) = loadmgr(&server.url(), &["get", "--check", "/from-cli"]);
    assert!(ok, "{err}");
    assert!(out.contains("\"numBundles\": 3"), "{out}");
    let (ok, out, _) = loadmgr(&server.url(), &["ls", "/loadbalance"]);
    assert!(ok);
    assert_eq!(out, "brokers\nbrokers-extra\nleader\n");
    let (ok, _, err) = loadmgr(&server.url(), &["rm", "/loadbalance/nope"]);
    assert!(
        !ok && err.contains("/loadbalance/nope: no such node"),
        "{err}"
    );
    store.close().await.unwrap();
    // Closing the store revoked its lease: the ephemerals are gone for etcdctl too.
    let keys = etcdctl(
        &server,
        &["get", "--prefix", "--keys-only", "/loadbalance/brokers/"],
    );
    assert!(keys.trim().is_empty(), "{keys}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_digest_credentials_and_acls() {
    use loadmgr::store::{Error, ZkAcl};
    let server = ZkServer::start();
    let owner = store::connect(
        &server.url(),
        StoreOptions::default()
            .with_session_timeout(Duration::from_secs(4))
            .with_credentials("loadmgr", "secret")
            .with_zk_acl(ZkAcl::CreatorAllWorldRead),
    )
    .await
    .unwrap();
    owner
        .put("/secured/leader", b"v1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    let acl = zkcli(&server, &["getAcl", "/secured/leader"]);
    assert!(
        acl.contains("'digest,'loadmgr:") && acl.contains("'world,'anyone\n: r"),
        "{acl}"
    );
    // Anyone reads; only the owner writes.
    let anonymous = open(&server.url()).await;
    assert_eq!(
        anonymous
            .get("/secured/leader")
            .await
            .unwrap()
            .unwrap()
            .value,
        b"v1"
    );
    let denied = anonymous
        .put("/secured/leader", b"x", None, CreateOptions::PERSISTENT)
        .await;
    assert!(
        matches!(denied, Err(Error::Unauthorized { .. })),
        "{denied:?}"
    );
    let other = store::connect(
        &server.url(),
        StoreOptions::default().with_credentials("loadmgr", "secret"),
    )
    .await
    .unwrap();
    other
        .put("/secured/leader", b"v2", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    // A creator ACL without credentials is refused up front.
    let refused = store::connect(
        &server.url(),
        StoreOptions::default().with_zk_acl(ZkAcl::CreatorOnly),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(refused, Error::InvalidArgument { .. }),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_user_and_password() {
    use loadmgr::store::Error;
    let server = EtcdServer::start();
    etcdctl(&server, &["user", "add", "root:rootpw"]);
    etcdctl(&server, &["auth", "enable"]);
    let creds = StoreOptions::default()
        .with_session_timeout(Duration::from_secs(4))
        .with_credentials("root", "rootpw");
    let store = store::connect(&server.url(), creds).await.unwrap();
    store
        .put("/auth/x", b"1", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    assert_eq!(store.get("/auth/x").await.unwrap().unwrap().value, b"1");
    let wrong = store::connect(
        &server.url(),
        StoreOptions::default().with_credentials("root", "nope"),
    )
    .await
    .unwrap_err();
    assert!(matches!(wrong, Error::Unauthorized { .. }), "{wrong}");
    let anonymous = store::connect(&server.url(), StoreOptions::default()).await;
    match anonymous {
        Err(e) => assert!(matches!(e, Error::Unauthorized { .. }), "{e}"),
        Ok(s) => {
            let r = s.get("/auth/x").await;
            assert!(matches!(r, Err(Error::Unauthorized { .. })), "{r:?}");
        }
    }
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_over_tls() {
    use loadmgr::store::{Error, TlsFiles};
    let server = EtcdServer::start_tls();
    assert!(server.url().starts_with("etcd:https://"));
    let tls = TlsFiles {
        ca_file: server.ca_file().map(|p| p.to_path_buf()),
        ..TlsFiles::default()
    };
    let store = store::connect(
        &server.url(),
        StoreOptions::default()
            .with_session_timeout(Duration::from_secs(4))
            .with_tls(tls),
    )
    .await
    .unwrap();
    store
        .put("/tls/x", b"secret", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    assert_eq!(store.get("/tls/x").await.unwrap().unwrap().value, b"secret");
    store.close().await.unwrap();
    // Without the CA the server's certificate is not trusted.
    let untrusted = store::connect(
        &server.url(),
        StoreOptions::default().with_connect_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(untrusted, Error::Unavailable { .. }),
        "{untrusted}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_names_a_value_too_large() {
    // ZooKeeper drops the connection of a request above its jute.maxbuffer (1 MiB by default) instead of
    // answering: the store says so instead of reporting a lost connection.
    let server = ZkServer::start();
    let store = open(&server.url()).await;
    let big = vec![b'x'; 5 * 1024 * 1024];
    let err = store
        .put("/too-large", &big, None, CreateOptions::PERSISTENT)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("value of 5242880 bytes") && text.contains("jute.maxbuffer"),
        "{text}"
    );
    // The store still works.
    store
        .put("/small", b"{}", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
}
