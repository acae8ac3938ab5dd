//! The multi-process cluster scenario, shared by `cluster_zk.rs` and `cluster_etcd.rs`: real `loadmgr broker`
//! processes with synthetic hosts on a real store, `loadmgr admin` as operators run it, the store's own command
//! line tool (`zkCli.sh` / `etcdctl`) to read what was written, and an ownership checker watching every
//! ownership node for the whole run.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loadmgr::bundle::{BundleName, BundleRange};
use loadmgr::model::{LeaderBroker, LocalBrokerData, NamespaceEphemeralData};
use loadmgr::paths;
use loadmgr::runtime::identity::owner_of;
use loadmgr::runtime::{AssignmentCause, AssignmentState, BundleAssignment, LeaderStatus};
use loadmgr::store::{self, DynStore, MetadataStoreExt, NotificationType, StoreOptions};
use loadmgr::testing::servers::{free_ports, TempDir};
use tokio::time::Instant;

pub const NS: &str = "public/demo";
/// The agents' session timeout: ZooKeeper session / etcd lease TTL.
pub const SESSION: Duration = Duration::from_millis(2_000);

const CONFIG: &str = "\
# loadmgr test cluster: second-scale periods, 2 s sessions
metadataStoreSessionTimeoutMillis=2000
loadBalancerReportUpdateMinIntervalMillis=200
loadmgrReportUpdateMaxIntervalMillis=3000
loadmgrSheddingIntervalMillis=500
loadmgrResourceQuotaUpdateIntervalMillis=1000
loadmgrHostUsageCheckIntervalMillis=500
loadBalancerAutoBundleSplitEnabled=false
defaultNumberOfNamespaceBundles=8
";

const PROFILE: &str = r#"{
  "cores": 1,
  "cpuBasePercent": 5,
  "cpuPercentPer1000Msgs": 12,
  "unloadDelayMs": 1000,
  "topics": [
    {"name": "persistent://public/demo/t-{0..31}", "msgRateIn": 100, "msgRateOut": 100, "msgSizeBytes": 1024}
  ]
}"#;

/// Reads a node with the store's own command-line tool, returning its text.
pub type ToolRead = Box<dyn Fn(&str) -> String + Send + Sync>;
/// Writes a node with the store's own command-line tool.
pub type ToolWrite = Box<dyn Fn(&str, &str) + Send + Sync>;

/// One `loadmgr broker` process.
pub struct Agent {
    pub id: String,
    child: Option<Child>,
    pub log: PathBuf,
}

impl Agent {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: no cleanup, the session expires on the server.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("SIGKILL the agent");
            c.wait().expect("reap the agent");
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            let st = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status()
                .expect("run kill");
            assert!(st.success());
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                if let Some(status) = c.try_wait().expect("wait") {
                    assert!(
                        status.success(),
                        "{} exited with {status}:\n{}",
                        self.id,
                        self.log_text()
                    );
                    return;
                }
                if std::time::Instant::now() > deadline {
                    let _ = c.kill();
                    panic!(
                        "{} did not stop after SIGTERM:\n{}",
                        self.id,
                        self.log_text()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("agent logs of the failed run:\n{}", self.all_logs());
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The test cluster: config files, agents, a store session for checks.
pub struct Cluster {
    pub url: String,
    dir: TempDir,
    pub store: DynStore,
    pub agents: Vec<Agent>,
}

fn log_line(what: &str, t0: Instant) {
    eprintln!("[{:>7.3}s] {what}", t0.elapsed().as_secs_f64());
}

pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return start.elapsed();
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

impl Cluster {
    pub async fn new(url: &str) -> Cluster {
        let dir = TempDir::new("cluster");
        std::fs::write(dir.path().join("broker.conf"), CONFIG).unwrap();
        std::fs::write(dir.path().join("profile.json"), PROFILE).unwrap();
        let store = store::connect(
            url,
            StoreOptions::default()
                .with_session_timeout(Duration::from_secs(10))
                .with_operation_timeout(Duration::from_secs(10)),
        )
        .await
        .unwrap();
        Cluster {
            url: url.to_owned(),
            dir,
            store,
            agents: Vec::new(),
        }
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("broker.conf")
    }

    pub fn spawn(&mut self, port: u16) -> usize {
        let n = self.agents.len();
        let log = self.dir.path().join(format!("agent-{port}-{n}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
            .args(["broker", "--store", &self.url])
            .arg("--config")
            .arg(self.conf())
            .args([
                "--advertised-address",
                "127.0.0.1",
                "--web-port",
                &port.to_string(),
            ])
            .arg("--synthetic")
            .arg(self.dir.path().join("profile.json"))
            .env("LOADMGR_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn loadmgr broker");
        self.agents.push(Agent {
            id: format!("127.0.0.1:{port}"),
            child: Some(child),
            log,
        });
        self.agents.len() - 1
    }

    /// Starts `loadmgr monitor` with its output in a file.
    pub fn spawn_monitor(&self) -> (Child, PathBuf) {
        let path = self.dir.path().join("monitor.out");
        let out = std::fs::File::create(&path).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
            .args([
                "monitor",
                "--store",
                &self.url,
                "--global-interval-ms",
                "1000",
            ])
            .stdout(out)
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn loadmgr monitor");
        (child, path)
    }

    /// Runs a `loadmgr` command and returns (success, stdout, stderr).
    pub async fn loadmgr(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_loadmgr"))
            .args(args)
            .output()
            .await
            .expect("run loadmgr");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs `loadmgr admin` and returns (success, stdout, stderr).
    pub async fn admin(&self, args: &[&str]) -> (bool, String, String) {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_loadmgr"));
        cmd.args(["admin", "--store", &self.url])
            .arg("--config")
            .arg(self.conf())
            .args(args);
        let out = cmd.output().await.expect("run loadmgr admin");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub async fn admin_ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.admin(args).await;
        assert!(ok, "loadmgr admin {args:?} failed: {out}{err}");
        out
    }

    pub fn agent(&self, id: &str) -> &Agent {
        self.agents
            .iter()
            .find(|a| a.id == id && a.child.is_some())
            .unwrap()
    }

    pub fn agent_mut(&mut self, id: &str) -> &mut Agent {
        self.agents
            .iter_mut()
            .find(|a| a.id == id && a.child.is_some())
            .unwrap()
    }

    pub fn all_logs(&self) -> String {
        self.agents
            .iter()
            .map(|a| format!("==== {} ({})\n{}", a.id, a.log.display(), a.log_text()))
            .collect()
    }

    pub async fn leader(&self) -> Option<String> {
        self.store
            .get_json::<LeaderBroker>(paths::LEADER)
            .await
            .ok()
            .flatten()
            .and_then(|(l, _)| l.broker_id().map(str::to_owned))
    }

    pub async fn registered(&self) -> Vec<String> {
        self.store.get_children(paths::BROKERS).await.unwrap()
    }

    /// Bundle → owner, from the ownership nodes of the namespace.
    pub async fn owners(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for range in self
            .store
            .get_children(&paths::ownership_namespace(NS))
            .await
            .unwrap()
        {
            let b = format!("{NS}/{range}");
            if let Ok(Some((d, _))) = self
                .store
                .get_json::<NamespaceEphemeralData>(&paths::ownership(&b))
                .await
            {
                if !d.disabled {
                    out.insert(b, owner_of(&d).unwrap_or_default());
                }
            }
        }
        out
    }

    pub async fn record(&self, bundle: &str) -> Option<BundleAssignment> {
        self.store
            .get_json::<BundleAssignment>(&paths::assignment(bundle))
            .await
            .unwrap()
            .map(|(r, _)| r)
    }

    /// Bundles of the namespace whose assignment record is still `Assigning`.
    pub async fn records_in_flight(&self) -> Vec<String> {
        let mut out = Vec::new();
        let parent = paths::assignment(NS);
        for range in self.store.get_children(&parent).await.unwrap_or_default() {
            let b = format!("{NS}/{range}");
            if self
                .record(&b)
                .await
                .is_some_and(|r| r.state == AssignmentState::Assigning)
            {
                out.push(b);
            }
        }
        out
    }

    pub async fn report(&self, broker: &str) -> Option<LocalBrokerData> {
        self.store
            .get_json::<LocalBrokerData>(&paths::broker(broker))
            .await
            .ok()
            .flatten()
            .map(|(r, _)| r)
    }
}

/// Watches every ownership node and records any instant at which a bundle (or an overlapping range of the
/// same namespace) would have two owners: a node created while the checker still knows it as owned, an
/// incarnation whose owner changes, or a range created while another broker owns an overlapping one.
pub struct OwnershipChecker {
    violations: Arc<Mutex<Vec<String>>>,
    events: Arc<Mutex<u64>>,
    task: tokio::task::JoinHandle<()>,
}

impl OwnershipChecker {
    pub async fn start(url: &str) -> OwnershipChecker {
        let store = store::connect(
            url,
            StoreOptions::default().with_session_timeout(Duration::from_secs(10)),
        )
        .await
        .unwrap();
        let violations = Arc::new(Mutex::new(Vec::new()));
        let events = Arc::new(Mutex::new(0u64));
        let mut notifications = store.watch(paths::OWNERSHIP).await.unwrap();
        let (v, e) = (violations.clone(), events.clone());
        let task = tokio::spawn(async move {
            // path → (owner, incarnation)
            let mut known: HashMap<String, (String, i64)> = HashMap::new();
            while let Some(n) = notifications.next().await {
                let Some(bundle) = paths::bundle_below(paths::OWNERSHIP, &n.path) else {
                    continue;
                };
                *e.lock().unwrap() += 1;
                let read = store
                    .get_json::<NamespaceEphemeralData>(&n.path)
                    .await
                    .ok()
                    .flatten()
                    .map(|(d, s)| (owner_of(&d).unwrap_or_default(), s.creation_revision));
                match n.kind {
                    NotificationType::Created => {
                        if let Some((old, _)) = known.get(&n.path) {
                            v.lock()
                                .unwrap()
                                .push(format!("{} created while still owned by {old}", n.path));
                        }
                        let Some((owner, rev)) = read else {
                            // Already gone again; its Deleted event follows.
                            known.insert(n.path.clone(), ("?".into(), -1));
                            continue;
                        };
                        let ns = bundle.namespace().to_string();
                        for (path, (other, _)) in &known {
                            let Some(ob) = paths::bundle_below(paths::OWNERSHIP, path) else {
                                continue;
                            };
                            if ob.namespace().to_string() == ns
                                && ob.range() != bundle.range()
                                && overlaps(ob.range(), bundle.range())
                                && *other != owner
                                && other != "?"
                            {
                                v.lock().unwrap().push(format!(
                                    "{bundle} owned by {owner} while {other} owns the overlapping {ob}"
                                ));
                            }
                        }
                        known.insert(n.path.clone(), (owner, rev));
                    }
                    NotificationType::Modified => {
                        if let (Some((owner, rev)), Some((was, was_rev))) =
                            (read, known.get(&n.path))
                        {
                            if rev == *was_rev && owner != *was {
                                v.lock().unwrap().push(format!(
                                    "{} changed owner from {was} to {owner} without being released",
                                    n.path
                                ));
                            }
                        }
                    }
                    NotificationType::Deleted => {
                        known.remove(&n.path);
                    }
                    NotificationType::ChildrenChanged => {}
                }
            }
        });
        OwnershipChecker {
            violations,
            events,
            task,
        }
    }

    /// Stops watching; fails on any violation, and when it saw nothing at all.
    pub fn finish(self) -> u64 {
        self.task.abort();
        let v = self.violations.lock().unwrap().clone();
        assert!(v.is_empty(), "two owners observed:\n{}", v.join("\n"));
        let n = *self.events.lock().unwrap();
        assert!(n > 0, "the ownership checker saw no event");
        n
    }
}

fn overlaps(a: BundleRange, b: BundleRange) -> bool {
    let end = |r: BundleRange| {
        if r.upper_closed() {
            r.upper() + 1
        } else {
            r.upper()
        }
    };
    a.lower() < end(b) && b.lower() < end(a)
}

fn range_of(bundle: &str) -> String {
    BundleName::parse(bundle).unwrap().range().to_string()
}

/// The whole scenario of issue 5's test list on one store.
pub async fn scenario(url: &str, read_tool: ToolRead, write_tool: ToolWrite) {
    let t0 = Instant::now();
    let checker = OwnershipChecker::start(url).await;
    let mut c = Cluster::new(url).await;
    let ports = free_ports(3);
    let ids: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();

    // A namespace with the configured 8 bundles, as Pulsar stores it.
    let out = c.admin_ok(&["namespaces", "create", NS]).await;
    assert!(out.contains("created public/demo with 8 bundles"), "{out}");
    let policies = read_tool(&paths::local_policies(NS));
    assert!(policies.contains(r#""numBundles":8"#), "{policies}");

    // The broker monitor watches from the start.
    let (mut monitor, monitor_out) = c.spawn_monitor();

    // One agent first: it leads and, looking its profile's topics up, takes every bundle.
    c.spawn(ports[0]);
    eventually("the first agent leads", Duration::from_secs(20), || async {
        c.leader().await.as_deref() == Some(ids[0].as_str())
    })
    .await;
    eventually(
        "all bundles owned by the first agent",
        Duration::from_secs(20),
        || async {
            let o = c.owners().await;
            o.len() == 8 && o.values().all(|b| *b == ids[0])
        },
    )
    .await;
    log_line("one agent owns the 8 bundles", t0);

    // Two more join: three registrations, three reports, one leader.
    c.spawn(ports[1]);
    c.spawn(ports[2]);
    eventually("three reports", Duration::from_secs(20), || async {
        let mut ok = c.registered().await.len() == 3;
        for id in &ids {
            ok &= c
                .report(id)
                .await
                .is_some_and(|r| r.web_service_url.is_some());
        }
        ok
    })
    .await;
    assert_eq!(c.leader().await.as_deref(), Some(ids[0].as_str()));
    let list = c.admin_ok(&["brokers", "list"]).await;
    for id in &ids {
        assert!(list.contains(id.as_str()), "{list}");
    }
    assert!(list.contains(&format!("{} (leader)", ids[0])), "{list}");
    let report = read_tool(&paths::broker(&ids[0]));
    assert!(
        report.contains(r#""loadReportType":"LocalBrokerData""#),
        "{report}"
    );
    assert!(
        report.contains(r#""loadManagerClassName":"org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl""#),
        "{report}"
    );
    log_line("three agents registered and reporting", t0);

    // The loaded agent sheds to the idle ones (AvgShedder): its share of the traffic drops.
    eventually(
        "AvgShedder rebalanced the cluster",
        Duration::from_secs(30),
        || async {
            let mut rates = Vec::new();
            for id in &ids {
                rates.push(c.report(id).await.map_or(0.0, |r| r.total_msg_rate()));
            }
            let total: f64 = rates.iter().sum();
            total > 0.0 && rates[0] < 0.75 * total
        },
    )
    .await;
    let mut shed = 0;
    for b in c.owners().await.keys() {
        if let Some(r) = c.record(b).await {
            if r.cause == AssignmentCause::Shedding {
                assert!(r.reason.contains("AvgShedder"), "{}", r.reason);
                shed += 1;
            }
        }
    }
    assert!(shed > 0, "no bundle was moved by shedding");
    log_line(&format!("AvgShedder moved {shed} bundle(s)"), t0);

    // Bundle data and time averages flushed, readable with the store's own tool.
    eventually(
        "bundle data and time averages flushed",
        Duration::from_secs(20),
        || async {
            let mut ok = true;
            for id in &ids {
                ok &= c.store.exists(&paths::time_average(id)).await.unwrap();
            }
            let owned = c.owners().await;
            for b in owned.keys() {
                ok &= c.store.exists(&paths::bundle_data(b)).await.unwrap();
            }
            ok
        },
    )
    .await;
    let any = c.owners().await.keys().next().unwrap().clone();
    let data = read_tool(&paths::bundle_data(&any));
    assert!(
        data.contains("shortTermData") && data.contains("longTermData"),
        "{data}"
    );
    let ta = read_tool(&paths::time_average(&ids[1]));
    assert!(ta.contains("longTermMsgRateIn"), "{ta}");
    log_line("flush readable by the store's tool", t0);

    // The live data as a snapshot, and the plan the configured strategy would apply now (nothing changes).
    let snap = c.dir.path().join("live.json");
    let (ok, _, err) = c
        .loadmgr(&[
            "snapshot",
            "--store",
            &c.url,
            "--output",
            snap.to_str().unwrap(),
        ])
        .await;
    assert!(ok, "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&snap).unwrap()).unwrap();
    assert_eq!(v["brokers"].as_object().unwrap().len(), 3, "{v}");
    assert_eq!(
        v["namespaces"][NS]["boundaries"].as_array().unwrap().len(),
        9,
        "{v}"
    );
    let before = c.owners().await;
    let (ok, out, err) = c
        .loadmgr(&[
            "explain",
            "--store",
            &c.url,
            "--config",
            c.conf().to_str().unwrap(),
            "--cycles",
            "3",
        ])
        .await;
    assert!(
        ok && out.starts_with("loadmgr explain: AvgShedder shedding"),
        "{out}{err}"
    );
    assert_eq!(c.owners().await, before, "explain changed ownership");
    log_line("snapshot and explain --store read the live data", t0);

    // A manual unload with a destination lands there.
    let owned = c.owners().await;
    let (bundle, source) = owned
        .iter()
        .find(|(_, o)| **o != ids[2])
        .map(|(b, o)| (b.clone(), o.clone()))
        .unwrap();
    let out = c
        .admin_ok(&[
            "namespaces",
            "unload",
            NS,
            "--bundle",
            &range_of(&bundle),
            "--destination-broker",
            &ids[2],
        ])
        .await;
    assert!(
        out.contains(&format!("unloaded {bundle}: {source} -> {}", ids[2])),
        "{out}"
    );
    assert_eq!(c.owners().await.get(&bundle), Some(&ids[2]));
    let r = c.record(&bundle).await.unwrap();
    assert_eq!(r.cause, AssignmentCause::Unload);
    log_line("manual unload landed on its destination", t0);

    // Malformed JSON written by hand into a broker node: logged, counted, skipped; the leader keeps working.
    let bogus = paths::broker("10.9.9.9:1");
    write_tool(&bogus, "{oops");
    eventually(
        "the malformed report counted",
        Duration::from_secs(10),
        || async {
            c.store
                .get_json::<LeaderStatus>(paths::LEADER_STATUS)
                .await
                .ok()
                .flatten()
                .is_some_and(|(s, _)| s.malformed_reports >= 1)
        },
    )
    .await;
    assert!(
        c.agent(&ids[0])
            .log_text()
            .contains("malformed broker report skipped"),
        "{}",
        c.agent(&ids[0]).log_text()
    );
    let out = c
        .admin_ok(&["topics", "lookup", "persistent://public/demo/t-7"])
        .await;
    assert!(out.contains("owned by 127.0.0.1:"), "{out}");
    let leader_out = c.admin_ok(&["brokers", "leader"]).await;
    assert!(leader_out.contains("malformed reports 1"), "{leader_out}");
    c.store.delete(&bogus, None).await.unwrap();
    log_line("malformed report skipped, leader still answers", t0);

    // SIGKILL the leader while a move is in flight (the source takes 1 s to unload).
    let leader = c.leader().await.unwrap();
    let owned = c.owners().await;
    let followers: Vec<&String> = ids.iter().filter(|i| **i != leader).collect();
    let (moving, from) = owned
        .iter()
        .find(|(_, o)| **o != leader)
        .map(|(b, o)| (b.clone(), o.clone()))
        .expect("a follower owns a bundle");
    let to = followers.iter().find(|f| ***f != from).unwrap().to_string();
    let range = range_of(&moving);
    let (url2, conf2) = (c.url.clone(), c.conf());
    let to2 = to.clone();
    let unload = tokio::spawn(async move {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_loadmgr"))
            .args(["admin", "--store", &url2])
            .arg("--config")
            .arg(conf2)
            .args([
                "namespaces",
                "unload",
                NS,
                "--bundle",
                &range,
                "--destination-broker",
                &to2,
            ])
            .output()
            .await
            .unwrap()
    });
    eventually("the move in flight", Duration::from_secs(10), || async {
        c.record(&moving)
            .await
            .is_some_and(|r| r.state == AssignmentState::Assigning && r.destination == to)
    })
    .await;
    let leader_bundles: Vec<String> = c
        .owners()
        .await
        .into_iter()
        .filter(|(_, o)| *o == leader)
        .map(|(b, _)| b)
        .collect();
    c.agent_mut(&leader).kill();
    let took = eventually(
        "a new leader",
        SESSION + Duration::from_secs(10),
        || async { c.leader().await.is_some_and(|l| l != leader) },
    )
    .await;
    log_line(
        &format!("leader {leader} killed; new leader after {took:?}"),
        t0,
    );
    assert!(
        took <= SESSION + Duration::from_secs(2),
        "new leader {took:?} after the kill, more than the session timeout {SESSION:?} + 2 s"
    );
    let out = unload.await.unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eventually(
        "the new leader finished the move",
        Duration::from_secs(10),
        || async {
            c.record(&moving)
                .await
                .is_some_and(|r| r.state == AssignmentState::Assigned && r.destination == to)
        },
    )
    .await;
    eventually(
        "the dead leader's bundles owned by the others",
        Duration::from_secs(10),
        || async {
            let o = c.owners().await;
            leader_bundles
                .iter()
                .all(|b| o.get(b).is_some_and(|x| *x != leader))
        },
    )
    .await;
    log_line("move finished and the dead leader's bundles reassigned", t0);

    // The killed broker comes back as a follower.
    let port = ports[ids.iter().position(|i| *i == leader).unwrap()];
    c.spawn(port);
    eventually(
        "the old leader registered again",
        Duration::from_secs(20),
        || async { c.registered().await.len() == 3 },
    )
    .await;

    // SIGKILL a non-leader: once its session expires, its bundles are owned by the others within 2 s.
    // Shedding is switched off first (as an operator would, through the dynamic configuration) and the
    // cluster left to settle, so that the victim's bundles are the ones it owns at the kill: a shedding
    // move that started just before the kill would otherwise legitimately carry one of them away.
    c.admin_ok(&["shedding", "disable"]).await;
    // The leader sees the switch through a watch; a cycle already running may still start a move.
    tokio::time::sleep(Duration::from_secs(1)).await;
    eventually("no move in flight", Duration::from_secs(20), || async {
        c.records_in_flight().await.is_empty()
    })
    .await;
    let current = c.leader().await.unwrap();
    let owned = c.owners().await;
    let victim = ids
        .iter()
        .filter(|i| **i != current)
        .max_by_key(|i| owned.values().filter(|o| o == i).count())
        .unwrap()
        .clone();
    let victim_bundles: Vec<String> = owned
        .iter()
        .filter(|(_, o)| **o == victim)
        .map(|(b, _)| b.clone())
        .collect();
    assert!(
        !victim_bundles.is_empty(),
        "{victim} owns nothing: {owned:?}"
    );
    let mut gone = c.store.watch(&paths::broker(&victim)).await.unwrap();
    c.agent_mut(&victim).kill();
    tokio::time::timeout(SESSION + Duration::from_secs(10), async {
        loop {
            let n = gone.next().await.expect("watch");
            if n.path == paths::broker(&victim) && n.kind == NotificationType::Deleted {
                return;
            }
        }
    })
    .await
    .expect("the victim's session expired");
    // Measured from the moment the registration's deletion (the session's expiry) was seen.
    let took = eventually(
        "the victim's bundles reassigned",
        Duration::from_secs(10),
        || async {
            let o = c.owners().await;
            victim_bundles
                .iter()
                .all(|b| o.get(b).is_some_and(|x| *x != victim))
        },
    )
    .await;
    log_line(
        &format!(
            "{} bundle(s) of {victim} owned by others {took:?} after its session expired",
            victim_bundles.len()
        ),
        t0,
    );
    assert!(
        took <= Duration::from_secs(2),
        "bundles reassigned {took:?} after the session expired"
    );
    for b in &victim_bundles {
        let r = c.record(b).await.unwrap();
        assert_eq!(r.cause, AssignmentCause::Orphan, "{r:?}");
    }

    // Everyone left stops cleanly and deregisters.
    for a in c.agents.iter_mut() {
        a.terminate();
    }
    eventually("no broker registered", Duration::from_secs(10), || async {
        c.registered().await.is_empty()
    })
    .await;
    let _ = monitor.kill();
    let _ = monitor.wait();
    let printed = std::fs::read_to_string(&monitor_out).unwrap();
    for id in &ids {
        assert!(
            printed.contains(&format!("Gained broker: {id}")),
            "{printed}"
        );
        assert!(
            printed.contains(&format!("Broker Data for {id}:")),
            "{printed}"
        );
    }
    assert!(
        printed.contains(&format!("Lost broker: {victim}")),
        "{printed}"
    );
    assert!(printed.contains("||SYSTEM        "), "{printed}");
    assert!(printed.contains("Overall Broker Data:"), "{printed}");
    let events = checker.finish();
    log_line(
        &format!("ownership checker: {events} events, never two owners"),
        t0,
    );
    if std::env::var_os("LOADMGR_SHOW_LOGS").is_some() {
        eprintln!("{}", c.all_logs());
    }
}
