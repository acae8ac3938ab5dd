//! `loadmgr broker` and `loadmgr admin` on secured stores, configured as an operator would, from broker.conf:
//! ZooKeeper with digest credentials and creator ACLs, etcd with a user and password over TLS. Each test starts
//! its own server and broker processes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use loadmgr::model::NamespaceEphemeralData;
use loadmgr::paths;
use loadmgr::runtime::identity::owner_of;
use loadmgr::store::{
    self, CreateOptions, DynStore, Error, MetadataStoreExt, StoreOptions, TlsFiles,
};
use loadmgr::testing::servers::{etcdctl_binary, free_ports, EtcdServer, TempDir, ZkServer};
use tokio::time::Instant;

const NS: &str = "public/demo";
const BUNDLES: usize = 4;

const PROFILE: &str = r#"{"cores": 1, "topics": [
  {"name": "persistent://public/demo/t-{0..15}", "msgRateIn": 10, "msgRateOut": 10}]}"#;

/// The periods of a test cluster (second-scale), with the store settings given.
fn broker_conf(url: &str, extra: &str) -> String {
    format!(
        "metadataStoreUrl={url}\nmetadataStoreSessionTimeoutMillis=4000\n\
         loadBalancerReportUpdateMinIntervalMillis=200\nloadmgrReportUpdateMaxIntervalMillis=3000\n\
         loadmgrSheddingIntervalMillis=1000\nloadmgrResourceQuotaUpdateIntervalMillis=1000\n\
         loadmgrHostUsageCheckIntervalMillis=500\nloadBalancerAutoBundleSplitEnabled=false\n{extra}"
    )
}

struct Brokers {
    children: Vec<Child>,
    logs: Vec<PathBuf>,
}

impl Drop for Brokers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Brokers {
    fn logs(&self) -> String {
        self.logs
            .iter()
            .map(|l| std::fs::read_to_string(l).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n----\n")
    }
}

/// `loadmgr COMMAND --config CONF REST...`.
fn loadmgr(args: &[&str], conf: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .arg(args[0])
        .arg("--config")
        .arg(conf)
        .args(&args[1..])
        .output()
        .expect("run loadmgr")
}

/// Starts `n` brokers with the configuration at `conf`.
fn start_brokers(dir: &Path, conf: &Path, n: usize) -> Brokers {
    std::fs::write(dir.join("profile.json"), PROFILE).unwrap();
    let mut brokers = Brokers {
        children: Vec::new(),
        logs: Vec::new(),
    };
    for port in free_ports(n) {
        let log = dir.join(format!("broker-{port}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
            .arg("broker")
            .arg("--config")
            .arg(conf)
            .args(["--advertised-address", "127.0.0.1", "--web-port"])
            .arg(port.to_string())
            .arg("--synthetic")
            .arg(dir.join("profile.json"))
            .env("LOADMGR_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn loadmgr broker");
        brokers.children.push(child);
        brokers.logs.push(log);
    }
    brokers
}

/// Owner of every bundle of the namespace, once all are owned by registered brokers.
async fn all_owned(store: &DynStore) -> Option<Vec<String>> {
    let (info, _) = loadmgr::runtime::admin::namespace_bundles(store, NS)
        .await
        .ok()?;
    let registered = store.get_children(paths::BROKERS).await.ok()?;
    let mut owners = Vec::new();
    for b in info.bundle_names() {
        let (data, _) = store
            .get_json::<NamespaceEphemeralData>(&paths::ownership(&b))
            .await
            .ok()??;
        let owner = owner_of(&data)?;
        if !registered.contains(&owner) {
            return None;
        }
        owners.push(owner);
    }
    (owners.len() == BUNDLES).then_some(owners)
}

async fn wait_owned(store: &DynStore, brokers: &Brokers) -> Vec<String> {
    let start = Instant::now();
    loop {
        if let Some(o) = all_owned(store).await {
            return o;
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "bundles not all owned; brokers' logs:\n{}",
            brokers.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every node below `root` (depth first), with the raw ZooKeeper client: the ACL of each is checked.
async fn zk_nodes(client: &zookeeper_client::Client, root: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(p) = stack.pop() {
        let Ok(children) = client.list_children(&p).await else {
            continue;
        };
        for c in children {
            let child = if p == "/" {
                format!("/{c}")
            } else {
                format!("{p}/{c}")
            };
            stack.push(child);
        }
        out.push(p);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_on_zookeeper_with_digest_credentials_and_creator_acls() {
    let server = ZkServer::start();
    let dir = TempDir::new("security-zk");
    let pw = dir.path().join("password");
    std::fs::write(&pw, "s3cret\n").unwrap();
    let conf = dir.path().join("broker.conf");
    std::fs::write(
        &conf,
        broker_conf(
            &server.url(),
            &format!(
                "loadmgrMetadataStoreUser=loadmgr\nloadmgrMetadataStorePasswordFile={}\n\
                 loadmgrZookeeperAcl=creator-all-world-read\n",
                pw.display()
            ),
        ),
    )
    .unwrap();
    // `config check` shows the keys, never the password.
    let check = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .args(["config", "check"])
        .arg(&conf)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(
        text.contains("loadmgrZookeeperAcl=creator-all-world-read"),
        "{text}"
    );
    assert!(!text.contains("s3cret"));

    let out = loadmgr(
        &["admin", "namespaces", "create", NS, "--bundles", "4"],
        &conf,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let brokers = start_brokers(dir.path(), &conf, 2);
    let anonymous = store::connect(&server.url(), StoreOptions::default())
        .await
        .unwrap();
    let owners = wait_owned(&anonymous, &brokers).await;
    eprintln!("owners: {owners:?}");

    // Every node loadmgr created carries the ACL broker.conf asked for: the user may do everything, anyone
    // may read.
    let raw = zookeeper_client::Client::connect(&server.address())
        .await
        .unwrap();
    let mut checked = 0;
    for root in ["/loadbalance", "/namespace", "/loadmgr", "/admin"] {
        for node in zk_nodes(&raw, root).await {
            use zookeeper_client::{Acl, AuthId, Permission};
            // A node may go between the listing and this read (an inbox entry or a request the leader
            // cleaned up): only the nodes that are still there are checked.
            let (acl, _) = match raw.get_acl(&node).await {
                Err(zookeeper_client::Error::NoNode) => continue,
                r => r.unwrap(),
            };
            let creator = acl.iter().any(|a| {
                a.scheme() == "digest"
                    && a.id().starts_with("loadmgr:")
                    && a.permission() == Permission::ALL
            });
            let world_read = acl.contains(&Acl::new(Permission::READ, AuthId::anyone()));
            assert!(acl.len() == 2 && creator && world_read, "{node}: {acl:?}");
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} nodes");
    // Anyone reads; nobody without the user writes or deletes.
    let leader = anonymous.get(paths::LEADER).await.unwrap();
    assert!(leader.is_some());
    let broker_node = paths::broker(&owners[0]);
    let denied = anonymous
        .put(&broker_node, b"{}", None, CreateOptions::PERSISTENT)
        .await;
    assert!(
        matches!(denied, Err(Error::Unauthorized { .. })),
        "{denied:?}"
    );
    let denied = anonymous.delete(paths::LEADER, None).await;
    assert!(
        matches!(denied, Err(Error::Unauthorized { .. })),
        "{denied:?}"
    );

    // A broker without the user cannot join, and says why.
    let bare = dir.path().join("bare.conf");
    std::fs::write(&bare, broker_conf(&server.url(), "")).unwrap();
    let err = broker_refused(&bare);
    assert!(err.contains("not authorized"), "{err}");
    // With the user on the command line instead, it joins.
    let mut late = start_brokers_with_flags(
        dir.path(),
        &bare,
        &["--user", "loadmgr", "--password-file", pw.to_str().unwrap()],
    );
    let id = format!("127.0.0.1:{}", late.1);
    let start = Instant::now();
    while !anonymous.exists(&paths::broker(&id)).await.unwrap() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{}",
            late.0.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    late.0.children.iter_mut().for_each(|c| {
        let _ = c.kill();
    });
}

/// One broker with extra command-line flags; returns it and its port.
/// Runs `loadmgr broker` with `conf`, which must fail at start; its standard error.
fn broker_refused(conf: &Path) -> String {
    let port = free_ports(1)[0].to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .arg("broker")
        .arg("--config")
        .arg(conf)
        .args(["--advertised-address", "127.0.0.1", "--web-port", &port])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    err
}

fn start_brokers_with_flags(dir: &Path, conf: &Path, flags: &[&str]) -> (Brokers, u16) {
    std::fs::write(dir.join("profile.json"), PROFILE).unwrap();
    let port = free_ports(1)[0];
    let log = dir.join(format!("broker-{port}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .arg("broker")
        .arg("--config")
        .arg(conf)
        .args(["--advertised-address", "127.0.0.1", "--web-port"])
        .arg(port.to_string())
        .args(flags)
        .env("NO_COLOR", "1")
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn loadmgr broker");
    (
        Brokers {
            children: vec![child],
            logs: vec![log],
        },
        port,
    )
}

/// `etcdctl` against a TLS server, as root once auth is on.
fn etcdctl(server: &EtcdServer, root: bool, args: &[&str]) {
    let mut cmd = Command::new(etcdctl_binary());
    cmd.env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", server.endpoint()))
        .arg(format!("--cacert={}", server.ca_file().unwrap().display()));
    if root {
        cmd.arg("--user=root:rootpw");
    }
    let out = cmd.args(args).output().expect("run etcdctl");
    assert!(
        out.status.success(),
        "etcdctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_on_etcd_with_a_user_over_tls() {
    let server = EtcdServer::start_tls();
    // A root user to turn auth on, and the brokers' own user with read-write on every key.
    etcdctl(&server, false, &["user", "add", "root:rootpw"]);
    etcdctl(&server, false, &["user", "add", "loadmgr:s3cret"]);
    etcdctl(&server, false, &["role", "add", "loadmgr"]);
    etcdctl(
        &server,
        false,
        &[
            "role",
            "grant-permission",
            "--prefix=true",
            "loadmgr",
            "readwrite",
            "/",
        ],
    );
    etcdctl(
        &server,
        false,
        &["user", "grant-role", "loadmgr", "loadmgr"],
    );
    etcdctl(&server, false, &["auth", "enable"]);

    let dir = TempDir::new("security-etcd");
    let pw = dir.path().join("password");
    std::fs::write(&pw, "s3cret\n").unwrap();
    // Pulsar's metadata store configuration file, as a Pulsar broker of the cluster would use it.
    let yaml = dir.path().join("etcd.yaml");
    std::fs::write(
        &yaml,
        format!(
            "useTls: true\ntlsProvider: JDK\ntlsTrustCertsFilePath: {}\nauthority: 127.0.0.1\n",
            server.ca_file().unwrap().display()
        ),
    )
    .unwrap();
    let conf = dir.path().join("broker.conf");
    std::fs::write(
        &conf,
        broker_conf(
            &server.url(),
            &format!(
                "loadmgrMetadataStoreUser=loadmgr\nloadmgrMetadataStorePasswordFile={}\n\
                 metadataStoreConfigPath={}\n",
                pw.display(),
                yaml.display()
            ),
        ),
    )
    .unwrap();
    let out = loadmgr(
        &["admin", "namespaces", "create", NS, "--bundles", "4"],
        &conf,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let brokers = start_brokers(dir.path(), &conf, 2);
    let checker = store::connect(
        &server.url(),
        StoreOptions::default()
            .with_credentials("loadmgr", "s3cret")
            .with_tls(TlsFiles {
                ca_file: server.ca_file().map(Path::to_path_buf),
                ..TlsFiles::default()
            }),
    )
    .await
    .unwrap();
    let owners = wait_owned(&checker, &brokers).await;
    eprintln!("owners: {owners:?}");

    // Without the user the broker is refused, and says why.
    let no_user = dir.path().join("no-user.conf");
    std::fs::write(
        &no_user,
        broker_conf(
            &server.url(),
            &format!("metadataStoreConfigPath={}\n", yaml.display()),
        ),
    )
    .unwrap();
    let err = broker_refused(&no_user);
    assert!(err.contains("not authorized"), "{err}");
    // Without the CA the server's certificate is not trusted.
    let no_tls = dir.path().join("no-tls.conf");
    std::fs::write(
        &no_tls,
        broker_conf(
            &server.url(),
            &format!(
                "loadmgrMetadataStoreUser=loadmgr\nloadmgrMetadataStorePasswordFile={}\n",
                pw.display()
            ),
        ),
    )
    .unwrap();
    let out = loadmgr(&["admin", "brokers", "list"], &no_tls);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("cannot open the store"), "{err}");
    drop(brokers);
    checker.close().await.unwrap();
}
