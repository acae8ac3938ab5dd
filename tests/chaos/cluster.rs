//! The cluster under test: a store (a ZooKeeper server or ensemble, an etcd server or cluster), four
//! `loadmgr broker` processes with synthetic hosts that write serving logs, each reaching the store through
//! its own TCP proxies (so one broker can be cut off), and a direct store session for the checks.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loadmgr::model::NamespaceEphemeralData;
use loadmgr::paths;
use loadmgr::runtime::identity::owner_of;
use loadmgr::runtime::{admin, AssignmentState, BundleAssignment};
use loadmgr::store::{self, DynStore, MetadataStoreExt, StoreOptions};
use loadmgr::testing::proxy::FaultProxy;
use loadmgr::testing::servers::{
    free_ports, EtcdCluster, EtcdServer, TempDir, ZkEnsemble, ZkServer,
};
use tokio::time::Instant;

pub const NS: &str = "public/chaos";
pub const BUNDLES: usize = 16;
pub const BROKERS: usize = 4;
/// The brokers' session timeout (ZooKeeper session, etcd lease TTL).
pub const SESSION: Duration = Duration::from_millis(3_000);

const CONFIG: &str = "\
metadataStoreSessionTimeoutMillis=3000
metadataStoreOperationTimeoutSeconds=5
loadBalancerReportUpdateMinIntervalMillis=250
loadmgrReportUpdateMaxIntervalMillis=3000
loadmgrSheddingIntervalMillis=2000
loadmgrResourceQuotaUpdateIntervalMillis=2000
loadmgrHostUsageCheckIntervalMillis=500
loadBalancerAutoBundleSplitEnabled=false
namespaceBundleUnloadingTimeoutMs=5000
";

/// 64 topics over the 16 bundles; unloads take 200 ms (topics closing), batches every 20 ms.
const PROFILE: &str = r#"{
  "cores": 1, "cpuBasePercent": 5, "cpuPercentPer1000Msgs": 10,
  "unloadDelayMs": 200, "batchIntervalMs": 20,
  "topics": [{"name": "persistent://public/chaos/t-{0..63}", "msgRateIn": 50, "msgRateOut": 50}]
}"#;

/// Which store, and its servers.
pub enum Servers {
    Zk(ZkServer),
    ZkEnsemble(ZkEnsemble),
    Etcd(EtcdServer),
    EtcdCluster(EtcdCluster),
}

/// The kinds of store setups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Setup {
    Zk,
    ZkEnsemble,
    Etcd,
    EtcdCluster,
}

impl Setup {
    pub fn name(self) -> &'static str {
        match self {
            Setup::Zk => "ZooKeeper",
            Setup::ZkEnsemble => "ZooKeeper ×3",
            Setup::Etcd => "etcd",
            Setup::EtcdCluster => "etcd ×3",
        }
    }

    pub fn is_ensemble(self) -> bool {
        matches!(self, Setup::ZkEnsemble | Setup::EtcdCluster)
    }
}

impl Servers {
    pub fn start(setup: Setup) -> Servers {
        match setup {
            Setup::Zk => Servers::Zk(ZkServer::start()),
            Setup::ZkEnsemble => Servers::ZkEnsemble(ZkEnsemble::start(3)),
            Setup::Etcd => Servers::Etcd(EtcdServer::start()),
            Setup::EtcdCluster => Servers::EtcdCluster(EtcdCluster::start(3)),
        }
    }

    /// Every member's client address.
    pub fn members(&self) -> Vec<SocketAddr> {
        let parse = |s: &str| -> SocketAddr {
            s.trim_start_matches("http://")
                .parse()
                .expect("a loopback address")
        };
        match self {
            Servers::Zk(s) => vec![parse(&s.address())],
            Servers::ZkEnsemble(e) => e.connect_string().split(',').map(parse).collect(),
            Servers::Etcd(s) => vec![parse(&s.endpoint())],
            Servers::EtcdCluster(c) => (0..3).map(|i| parse(&c.endpoint(i))).collect(),
        }
    }

    /// The store URL for the given member addresses (direct, or proxies).
    pub fn url_for(&self, members: &[SocketAddr]) -> String {
        let list = |scheme: &str| {
            members
                .iter()
                .map(|a| format!("{scheme}{a}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            Servers::Zk(_) | Servers::ZkEnsemble(_) => format!("zk:{}", list("")),
            Servers::Etcd(_) | Servers::EtcdCluster(_) => format!("etcd:{}", list("http://")),
        }
    }
}

/// One broker: its port, its current process, and every incarnation's serving log and end.
pub struct Broker {
    pub port: u16,
    pub id: String,
    child: Option<Child>,
    pub incarnations: Vec<Incarnation>,
    /// One proxy per store member; cutting them all cuts the broker off the store.
    pub proxies: Vec<FaultProxy>,
    pub paused: bool,
}

/// One process of a broker.
pub struct Incarnation {
    pub serving_log: PathBuf,
    pub log: PathBuf,
    /// When it was SIGKILLed (µs since the epoch): its open intervals end there.
    pub killed_us: Option<i64>,
}

/// The cluster; see the module docs.
pub struct Cluster {
    pub servers: Arc<Mutex<Servers>>,
    pub dir: TempDir,
    pub brokers: Vec<Broker>,
    /// A direct session for checks and lookups.
    pub store: DynStore,
}

/// Now, µs since the Unix epoch (the clock of the serving logs).
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

fn signal(child: &Child, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .stderr(Stdio::null())
        .status();
}

impl Cluster {
    /// Starts the store, the namespace and four brokers, and waits until every bundle is owned.
    pub async fn start(setup: Setup) -> Cluster {
        let servers = tokio::task::spawn_blocking(move || Servers::start(setup))
            .await
            .unwrap();
        let dir = TempDir::new("chaos");
        std::fs::write(dir.path().join("broker.conf"), CONFIG).unwrap();
        std::fs::write(dir.path().join("profile.json"), PROFILE).unwrap();
        let members = servers.members();
        let direct = servers.url_for(&members);
        let store = store::connect(
            &direct,
            StoreOptions::default()
                .with_session_timeout(Duration::from_secs(30))
                .with_operation_timeout(Duration::from_secs(10)),
        )
        .await
        .unwrap();
        admin::create_namespace(&store, NS, BUNDLES as u64, None)
            .await
            .unwrap();
        let mut brokers = Vec::new();
        for port in free_ports(BROKERS) {
            let mut proxies = Vec::new();
            for m in &members {
                proxies.push(FaultProxy::start(*m).await.unwrap());
            }
            brokers.push(Broker {
                port,
                id: format!("127.0.0.1:{port}"),
                child: None,
                incarnations: Vec::new(),
                proxies,
                paused: false,
            });
        }
        let mut cluster = Cluster {
            servers: Arc::new(Mutex::new(servers)),
            dir,
            brokers,
            store,
        };
        for i in 0..BROKERS {
            cluster.spawn(i);
            // The first one leads; the others join it.
            if i == 0 {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        cluster
            .settle(Duration::from_secs(60))
            .await
            .expect("the cluster settles at start");
        cluster
    }

    /// The URL broker `i` uses: its proxies.
    fn broker_url(&self, i: usize) -> String {
        let addrs: Vec<SocketAddr> = self.brokers[i]
            .proxies
            .iter()
            .map(|p| p.address())
            .collect();
        self.servers.lock().unwrap().url_for(&addrs)
    }

    /// Starts a new process for broker `i`.
    pub fn spawn(&mut self, i: usize) {
        let url = self.broker_url(i);
        let b = &mut self.brokers[i];
        let n = b.incarnations.len();
        let serving_log = self
            .dir
            .path()
            .join(format!("serving-{}-{n}.jsonl", b.port));
        let log = self.dir.path().join(format!("broker-{}-{n}.log", b.port));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
            .args(["broker", "--store", &url])
            .arg("--config")
            .arg(self.dir.path().join("broker.conf"))
            .args(["--advertised-address", "127.0.0.1", "--web-port"])
            .arg(b.port.to_string())
            .arg("--synthetic")
            .arg(self.dir.path().join("profile.json"))
            .arg("--serving-log")
            .arg(&serving_log)
            .env(
                "LOADMGR_LOG",
                "info,loadmgr::store::zookeeper::session=debug,loadmgr::store::etcd::session=debug",
            )
            .env("NO_COLOR", "1")
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn loadmgr broker");
        b.child = Some(child);
        b.paused = false;
        b.incarnations.push(Incarnation {
            serving_log,
            log,
            killed_us: None,
        });
    }

    /// SIGKILL broker `i`'s process (resumed first if paused, so that it dies at once).
    pub fn kill(&mut self, i: usize) {
        let b = &mut self.brokers[i];
        if let Some(mut c) = b.child.take() {
            let _ = c.kill();
            let at = now_us();
            if b.paused {
                signal(&c, "CONT");
            }
            let _ = c.wait();
            b.incarnations.last_mut().unwrap().killed_us = Some(at);
            b.paused = false;
        }
    }

    /// SIGTERM broker `i` and wait (at most 30 s, then SIGKILL) until it exits.
    pub async fn terminate(&mut self, i: usize) {
        let b = &mut self.brokers[i];
        let Some(mut c) = b.child.take() else { return };
        signal(&c, "TERM");
        let start = Instant::now();
        loop {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = c.kill();
                let at = now_us();
                let _ = c.wait();
                b.incarnations.last_mut().unwrap().killed_us = Some(at);
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn pause(&mut self, i: usize) {
        if let Some(c) = &self.brokers[i].child {
            signal(c, "STOP");
            self.brokers[i].paused = true;
        }
    }

    pub fn resume(&mut self, i: usize) {
        if let Some(c) = &self.brokers[i].child {
            signal(c, "CONT");
            self.brokers[i].paused = false;
        }
    }

    pub fn cut(&self, i: usize) {
        for p in &self.brokers[i].proxies {
            p.partition();
        }
    }

    pub fn heal(&self, i: usize) {
        for p in &self.brokers[i].proxies {
            p.heal();
        }
    }

    /// Whether broker `i` has a running process.
    pub fn is_up(&self, i: usize) -> bool {
        self.brokers[i].child.is_some()
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.brokers.iter().position(|b| b.id == id)
    }

    /// The leader's broker id, if a leader node exists.
    pub async fn leader(&self) -> Option<String> {
        admin::leader(&self.store)
            .await
            .ok()
            .flatten()
            .and_then(|(l, _)| l.broker_id().map(str::to_owned))
    }

    pub async fn registered(&self) -> BTreeSet<String> {
        self.store
            .get_children(paths::BROKERS)
            .await
            .map(|v| v.into_iter().collect())
            .unwrap_or_default()
    }

    /// Owner of each bundle of the namespace (bundles without a live ownership node are absent).
    pub async fn owners(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let Ok((info, _)) = admin::namespace_bundles(&self.store, NS).await else {
            return out;
        };
        for b in info.bundle_names() {
            if let Ok(Some((d, _))) = self
                .store
                .get_json::<NamespaceEphemeralData>(&paths::ownership(&b))
                .await
            {
                if let Some(o) = owner_of(&d).filter(|_| !d.disabled) {
                    out.insert(b, o);
                }
            }
        }
        out
    }

    async fn moves_in_flight(&self) -> usize {
        let Ok((info, _)) = admin::namespace_bundles(&self.store, NS).await else {
            return usize::MAX;
        };
        let mut n = 0;
        for b in info.bundle_names() {
            if let Ok(Some((r, _))) = self
                .store
                .get_json::<BundleAssignment>(&paths::assignment(&b))
                .await
            {
                if r.state == AssignmentState::Assigning {
                    n += 1;
                }
            }
        }
        n
    }

    /// Waits until every running broker is registered, a running broker leads, every bundle is owned by a
    /// registered broker, and no move is in flight; the time it took, or what was still wrong.
    pub async fn settle(&self, limit: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        let running: BTreeSet<String> = (0..self.brokers.len())
            .filter(|i| self.is_up(*i))
            .map(|i| self.brokers[i].id.clone())
            .collect();
        loop {
            let registered = self.registered().await;
            let leader = self.leader().await;
            let owners = self.owners().await;
            let in_flight = self.moves_in_flight().await;
            let wrong = if !running.iter().all(|b| registered.contains(b)) {
                Some(format!("registered {registered:?}, running {running:?}"))
            } else if !leader.as_ref().is_some_and(|l| running.contains(l)) {
                Some(format!("leader {leader:?}"))
            } else if owners.len() != BUNDLES || !owners.values().all(|o| registered.contains(o)) {
                Some(format!(
                    "{} of {BUNDLES} bundles owned by registered brokers",
                    owners.len()
                ))
            } else if in_flight > 0 {
                Some(format!("{in_flight} moves in flight"))
            } else {
                None
            };
            match wrong {
                None => return Ok(start.elapsed()),
                Some(w) if start.elapsed() > limit => {
                    return Err(format!("not settled after {limit:?}: {w}"))
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Every incarnation's serving log, with its broker id and when it was killed.
    pub fn serving_logs(&self) -> Vec<(String, usize, PathBuf, Option<i64>)> {
        let mut out = Vec::new();
        for b in &self.brokers {
            for (n, inc) in b.incarnations.iter().enumerate() {
                out.push((b.id.clone(), n, inc.serving_log.clone(), inc.killed_us));
            }
        }
        out
    }

    /// The last lines of every broker log, for failure messages.
    pub fn tail_logs(&self) -> String {
        let mut out = String::new();
        for b in &self.brokers {
            if let Some(inc) = b.incarnations.last() {
                let text = std::fs::read_to_string(&inc.log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(25)..];
                out.push_str(&format!(
                    "---- {} ({})\n{}\n",
                    b.id,
                    inc.log.display(),
                    tail.join("\n")
                ));
            }
        }
        out
    }

    /// Stops every broker (SIGKILL) and keeps the logs for the report.
    pub fn shutdown(&mut self) {
        for i in 0..self.brokers.len() {
            self.kill(i);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}
