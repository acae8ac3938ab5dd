//! The runtime in one process on the in-memory store (each agent its own session on shared data), under paused
//! tokio time: registration and reports, lookups and the hand-over, flushes, orphans, leader failover, manual
//! operations, splits, the shedding switch, malformed reports, session loss, AvgShedder rebalancing and the
//! reports of extensible reporting and of settled reporting with the Linux sampler.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loadmgr::config::{Settings, ShedderKind};
use loadmgr::model::{BundleData, LocalBrokerData, NamespaceEphemeralData, TimeAverageBrokerData};
use loadmgr::paths;
use loadmgr::runtime::admin;
use loadmgr::runtime::identity::owner_of;
use loadmgr::runtime::{
    AgentOptions, AssignmentCause, AssignmentState, BrokerAgent, BrokerHost, BrokerIdentity,
    BundleAssignment, LeaderStatus, RuntimeError, SyntheticHost, SyntheticProfile,
};
use loadmgr::store::memory::MemoryStore;
use loadmgr::store::{DynStore, MetadataStoreExt, StoreOptions};

const NS: &str = "public/demo";

fn settings() -> Settings {
    let mut s = Settings::default();
    s.load_balancer_report_update_min_interval_millis = 100;
    s.loadmgr_report_update_max_interval_millis = 2_000;
    s.loadmgr_shedding_interval_millis = 500;
    s.loadmgr_resource_quota_update_interval_millis = 1_000;
    s.loadmgr_host_usage_check_interval_millis = 500;
    s.metadata_store_session_timeout_millis = 2_000;
    s.load_balancer_auto_bundle_split_enabled = false;
    s
}

fn profile(unload_delay_ms: u64) -> SyntheticProfile {
    SyntheticProfile::from_json(
        &format!(
            r#"{{"cores": 1, "cpuBasePercent": 5, "cpuPercentPer1000Msgs": 12, "unloadDelayMs": {unload_delay_ms},
                "topics": [{{"name": "persistent://{NS}/t-{{0..31}}", "msgRateIn": 100, "msgRateOut": 100, "msgSizeBytes": 1024}}]}}"#
        ),
        "test",
    )
    .unwrap()
}

fn store_name() -> String {
    loadmgr::testing::log_to_test_output();
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "runtime-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn session(name: &str) -> (DynStore, MemoryStore) {
    let m = MemoryStore::named(
        name,
        StoreOptions::default().with_session_timeout(Duration::from_secs(2)),
    );
    (Arc::new(m.clone()) as DynStore, m)
}

struct Node {
    agent: Option<BrokerAgent>,
    store: DynStore,
    memory: MemoryStore,
    host: Arc<SyntheticHost>,
    id: String,
}

async fn start(name: &str, port: u16, settings: &Settings, profile: &SyntheticProfile) -> Node {
    start_at(name, "127.0.0.1", port, settings, profile).await
}

async fn start_at(
    name: &str,
    address: &str,
    port: u16,
    settings: &Settings,
    profile: &SyntheticProfile,
) -> Node {
    let (store, memory) = session(name);
    let mut s = settings.clone();
    s.advertised_address = Some(address.into());
    s.web_service_port = Some(port as i32);
    let identity = BrokerIdentity::from_settings(&s).unwrap();
    let id = identity.broker_id();
    let host = Arc::new(SyntheticHost::new(profile.clone()).unwrap());
    let agent = BrokerAgent::start(
        store.clone(),
        s,
        identity,
        host.clone(),
        AgentOptions {
            seed: Some(7),
            clock: None,
        },
    )
    .await
    .unwrap();
    Node {
        agent: Some(agent),
        store,
        memory,
        host,
        id,
    }
}

impl Node {
    fn agent(&self) -> &BrokerAgent {
        self.agent.as_ref().unwrap()
    }

    /// A crash: the tasks stop without cleaning up, then the session ends (its ephemerals vanish).
    async fn crash(&mut self) {
        drop(self.agent.take());
        self.store.close().await.unwrap();
    }
}

async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the leader has skipped at least `n` registrations that are no brokers.
async fn until_skipped(leader: &Node, n: u64, what: &str) {
    eventually(what, Duration::from_secs(5), || async {
        leader
            .agent()
            .metrics()
            .malformed_reports
            .load(Ordering::Relaxed)
            >= n
    })
    .await;
}

/// Unloads the namespace and checks that every bundle landed on one of the agents (never on a bogus broker).
async fn unload_lands_on_agents(store: &DynStore, nodes: &[Node]) {
    admin::unload(store, NS, None, None, "test", Duration::from_secs(10))
        .await
        .unwrap();
    assert!(owners(store)
        .await
        .values()
        .all(|o| nodes.iter().any(|n| n.id == *o)));
}

/// Bundle → owner, from the ownership nodes.
async fn owners(store: &DynStore) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let (info, _) = admin::namespace_bundles(store, NS).await.unwrap();
    for b in info.bundle_names() {
        if let Some((d, _)) = store
            .get_json::<NamespaceEphemeralData>(&paths::ownership(&b))
            .await
            .unwrap()
        {
            if !d.disabled {
                out.insert(b, owner_of(&d).unwrap());
            }
        }
    }
    out
}

async fn record(store: &DynStore, bundle: &str) -> Option<BundleAssignment> {
    store
        .get_json::<BundleAssignment>(&paths::assignment(bundle))
        .await
        .unwrap()
        .map(|(r, _)| r)
}

async fn leader_id(store: &DynStore) -> Option<String> {
    admin::leader(store)
        .await
        .unwrap()
        .and_then(|(l, _)| l.broker_id().map(str::to_owned))
}

async fn look_up_all(node: &Node) {
    for t in node.host.profile().topic_names() {
        node.agent()
            .lookup(&t, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("lookup of {t}: {e}"));
    }
}

async fn all_owned(store: &DynStore, n: usize) -> bool {
    owners(store).await.len() == n
}

async fn settled(store: &DynStore) -> bool {
    for b in admin::namespace_bundles(store, NS)
        .await
        .unwrap()
        .0
        .bundle_names()
    {
        match record(store, &b).await {
            Some(r) if r.state == AssignmentState::Assigned => {}
            _ => return false,
        }
    }
    true
}

#[tokio::test(start_paused = true)]
async fn lookups_reports_flush_and_orphans() {
    let name = store_name();
    let s = settings();
    let p = profile(0);
    let mut nodes = Vec::new();
    for port in [8081, 8082, 8083] {
        nodes.push(start(&name, port, &s, &p).await);
    }
    let admin_store = session(&name).0;
    admin::create_namespace(&admin_store, NS, 4, None)
        .await
        .unwrap();
    // Exactly one leader.
    let leaders = nodes.iter().filter(|n| n.agent().is_leader()).count();
    assert_eq!(leaders, 1);
    let leader = leader_id(&admin_store).await.unwrap();
    // Lookups from a follower assign every bundle.
    let follower = nodes.iter().find(|n| n.id != leader).unwrap();
    look_up_all(follower).await;
    assert!(all_owned(&admin_store, 4).await);
    eventually("all records assigned", Duration::from_secs(5), || {
        settled(&admin_store)
    })
    .await;
    // The same lookup again answers the owner without moving anything.
    let t0 = "persistent://public/demo/t-0";
    let first = nodes[0]
        .agent()
        .lookup(t0, Duration::from_secs(5))
        .await
        .unwrap();
    let again = nodes[2]
        .agent()
        .lookup(t0, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(first, again);
    // Each broker serves what it owns, and reports it.
    let o = owners(&admin_store).await;
    for n in &nodes {
        let mine: BTreeSet<String> = o
            .iter()
            .filter(|(_, b)| **b == n.id)
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(n.host.served(), mine, "{}", n.id);
        assert_eq!(n.agent().owned_bundles(), mine, "{}", n.id);
    }
    eventually(
        "reports list the served bundles",
        Duration::from_secs(5),
        || async {
            for n in &nodes {
                let (r, _) = admin_store
                    .get_json::<LocalBrokerData>(&paths::broker(&n.id))
                    .await
                    .unwrap()
                    .unwrap();
                if r.bundles != n.host.served() {
                    return false;
                }
            }
            true
        },
    )
    .await;
    // Flush: bundle data of served bundles and every broker's time average.
    eventually("a flush", Duration::from_secs(5), || async {
        let mut ok = true;
        for b in o.keys() {
            ok &= admin_store
                .get_json::<BundleData>(&paths::bundle_data(b))
                .await
                .unwrap()
                .is_some_and(|(d, _)| d.short_term_data.num_samples > 0);
        }
        for n in &nodes {
            ok &= admin_store
                .get_json::<TimeAverageBrokerData>(&paths::time_average(&n.id))
                .await
                .unwrap()
                .is_some_and(|(t, _)| n.host.served().is_empty() || t.short_term_msg_rate_in > 0.0);
        }
        ok
    })
    .await;
    let (status, _) = admin_store
        .get_json::<LeaderStatus>(paths::LEADER_STATUS)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.leader, leader);
    assert!(
        status.flushes >= 1 && status.moves_completed >= 4,
        "{status:?}"
    );

    // A follower that owns something crashes: its bundles go to the others as soon as its session ends.
    let victim = o
        .values()
        .find(|b| **b != leader)
        .cloned()
        .expect("a follower owns a bundle");
    let victims: Vec<String> = o
        .iter()
        .filter(|(_, b)| **b == victim)
        .map(|(k, _)| k.clone())
        .collect();
    let i = nodes.iter().position(|n| n.id == victim).unwrap();
    nodes[i].crash().await;
    eventually("orphans reassigned", Duration::from_secs(2), || async {
        let now = owners(&admin_store).await;
        victims
            .iter()
            .all(|b| now.get(b).is_some_and(|o| *o != victim))
    })
    .await;
    for b in &victims {
        let r = record(&admin_store, b).await.unwrap();
        assert_ne!(r.destination, victim);
        assert!(matches!(r.cause, AssignmentCause::Orphan), "{r:?}");
    }
    // The gone broker's time average is deleted with the next flush.
    eventually(
        "time average of the gone broker deleted",
        Duration::from_secs(5),
        || async {
            !admin_store
                .exists(&paths::time_average(&victim))
                .await
                .unwrap()
        },
    )
    .await;
    for n in nodes.iter_mut().filter(|n| n.agent.is_some()) {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

/// A web service started while its store is cut off for a moment (a broker started just as its store
/// restarts: a chaos trial saw the broker exit) waits for the store instead of failing the broker.
#[tokio::test(start_paused = true)]
async fn the_web_service_waits_out_a_short_store_outage_at_start() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut s = settings();
    s.bind_address = "127.0.0.1".into();
    let node = start(&store_name(), port, &s, &profile(0)).await;
    node.memory.disconnect();
    let memory = node.memory.clone();
    let back = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        memory.reconnect();
    });
    let mut web_settings = s.clone();
    web_settings.advertised_address = Some("127.0.0.1".into());
    web_settings.web_service_port = Some(port as i32);
    let web = loadmgr::runtime::http::WebService::start(node.agent(), &web_settings)
        .await
        .expect("the web service waits for the store");
    assert!(back.is_finished(), "started only once the store was back");
    assert_eq!(web.addresses().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn lookup_without_leader_or_namespace_is_a_clear_error() {
    let name = store_name();
    let store = session(&name).0;
    let e = admin::lookup(
        &store,
        "persistent://public/demo/x",
        "t",
        Duration::from_secs(1),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, RuntimeError::NoLeader { .. }), "{e}");
    assert!(e.to_string().contains("no leader is running"), "{e}");
    let node = start(&name, 8090, &settings(), &profile(0)).await;
    let e = node
        .agent()
        .lookup("persistent://nope/ns/x", Duration::from_secs(2))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("namespace nope/ns does not exist"), "{e}");
    let e = node
        .agent()
        .lookup("persistent://bad", Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("persistent://bad"), "{e}");
    node.agent.unwrap().shutdown().await.unwrap();
    drop(node.memory);
}

/// Starts three agents, creates the namespace with `bundles` bundles and assigns them from `first`.
async fn cluster(
    name: &str,
    s: &Settings,
    p: &SyntheticProfile,
    bundles: u64,
) -> (Vec<Node>, DynStore) {
    let mut nodes = Vec::new();
    for port in [8081, 8082, 8083] {
        nodes.push(start(name, port, s, p).await);
    }
    let admin_store = session(name).0;
    admin::create_namespace(&admin_store, NS, bundles, None)
        .await
        .unwrap();
    look_up_all(&nodes[0]).await;
    eventually("settled", Duration::from_secs(10), || settled(&admin_store)).await;
    (nodes, admin_store)
}

#[tokio::test(start_paused = true)]
async fn leader_failover_finishes_moves_in_flight() {
    let name = store_name();
    let mut s = settings();
    s.load_balancer_shedding_enabled = false;
    let (mut nodes, store) = cluster(&name, &s, &profile(1_000), 8).await;
    let leader = leader_id(&store).await.unwrap();
    let o = owners(&store).await;
    let followers: Vec<String> = nodes
        .iter()
        .map(|n| n.id.clone())
        .filter(|i| *i != leader)
        .collect();
    // Two moves in flight when the leader dies: one between followers, one to the leader itself.
    let (b1, src1) = o
        .iter()
        .find(|(_, b)| **b != leader)
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    let dst1 = followers.iter().find(|f| **f != src1).unwrap().clone();
    let (b2, _) = o
        .iter()
        .find(|(k, b)| **b != leader && **k != b1)
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap_or_else(|| panic!("followers own two bundles: {o:?}"));
    let range = |b: &str| b.rsplit('/').next().unwrap().to_owned();
    let s1 = store.clone();
    let (r1, d1) = (range(&b1), dst1.clone());
    let m1 = tokio::spawn(async move {
        admin::unload(
            &s1,
            NS,
            Some(&r1),
            Some(&d1),
            "test",
            Duration::from_secs(20),
        )
        .await
    });
    let s2 = store.clone();
    let (r2, d2) = (range(&b2), leader.clone());
    let m2 = tokio::spawn(async move {
        admin::unload(
            &s2,
            NS,
            Some(&r2),
            Some(&d2),
            "test",
            Duration::from_secs(3),
        )
        .await
    });
    eventually("both moves in flight", Duration::from_secs(5), || async {
        let a = record(&store, &b1).await.unwrap();
        let b = record(&store, &b2).await.unwrap();
        a.state == AssignmentState::Assigning && b.state == AssignmentState::Assigning
    })
    .await;
    let li = nodes.iter().position(|n| n.id == leader).unwrap();
    nodes[li].crash().await;
    // A new leader, and both moves finished: b1 where asked, b2 (whose destination died) elsewhere.
    eventually("a new leader", Duration::from_secs(5), || async {
        leader_id(&store).await.is_some_and(|l| l != leader)
    })
    .await;
    let moved = m1.await.unwrap().unwrap();
    assert_eq!(moved.1[0].destination, dst1);
    assert!(m2.await.unwrap().is_err(), "the dead leader never takes b2");
    eventually("both records settled", Duration::from_secs(10), || async {
        let a = record(&store, &b1).await.unwrap();
        let b = record(&store, &b2).await.unwrap();
        a.state == AssignmentState::Assigned
            && a.destination == dst1
            && b.state == AssignmentState::Assigned
            && b.destination != leader
    })
    .await;
    let b = record(&store, &b2).await.unwrap();
    assert_eq!(b.cause, AssignmentCause::Replaced, "{b:?}");
    eventually(
        "everything owned by live brokers",
        Duration::from_secs(10),
        || async {
            let now = owners(&store).await;
            now.len() == 8 && now.values().all(|o| *o != leader)
        },
    )
    .await;
    for n in nodes.iter_mut().filter(|n| n.agent.is_some()) {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn manual_operations_splits_and_the_shedding_switch() {
    let name = store_name();
    let mut s = settings();
    s.load_balancer_shedding_enabled = false;
    let (nodes, store) = cluster(&name, &s, &profile(0), 4).await;
    let o = owners(&store).await;
    // Unload to a chosen destination.
    let (b, src) = o
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    let dst = nodes
        .iter()
        .map(|n| n.id.clone())
        .find(|i| *i != src)
        .unwrap();
    let range = b.rsplit('/').next().unwrap().to_owned();
    let (msg, moved) = admin::unload(
        &store,
        NS,
        Some(&range),
        Some(&dst),
        "test",
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert!(msg.contains(&format!("from {src} to {dst}")), "{msg}");
    assert_eq!(moved[0].destination, dst);
    assert_eq!(owners(&store).await[&b], dst);
    let r = record(&store, &b).await.unwrap();
    assert_eq!(
        (r.cause, r.source.as_deref()),
        (AssignmentCause::Unload, Some(src.as_str()))
    );
    // Clear errors.
    let e = admin::unload(
        &store,
        NS,
        Some(&range),
        Some(&dst),
        "test",
        Duration::from_secs(5),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("already owned by"), "{e}");
    let e = admin::unload(
        &store,
        NS,
        Some(&range),
        Some("nobody:1"),
        "test",
        Duration::from_secs(5),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("destination broker nobody:1 is not registered"),
        "{e}"
    );
    let e = admin::unload(
        &store,
        NS,
        Some("0x00000000_0x00000010"),
        None,
        "test",
        Duration::from_secs(5),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("is not a bundle of public/demo"), "{e}");
    // Unload the whole namespace: every bundle moves somewhere else.
    let before = owners(&store).await;
    let (_, moved) = admin::unload(&store, NS, None, None, "test", Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(moved.len(), 4);
    for m in &moved {
        assert_eq!(before[&m.bundle], m.source);
        assert_ne!(m.source, m.destination);
    }
    // Split with the default algorithm (range_equally_divide): both children stay with the owner.
    let parent = "public/demo/0x00000000_0x40000000".to_owned();
    let owner = owners(&store).await[&parent].clone();
    let (msg, children) = admin::split(
        &store,
        &admin::SplitArgs {
            namespace: NS.into(),
            range: "0x00000000_0x40000000".into(),
            algorithm: None,
            positions: vec![],
            unload: false,
        },
        "test",
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(
        children,
        vec![
            "public/demo/0x00000000_0x20000000",
            "public/demo/0x20000000_0x40000000"
        ],
        "{msg}"
    );
    eventually(
        "children owned by the parent's owner",
        Duration::from_secs(5),
        || async {
            let now = owners(&store).await;
            children.iter().all(|c| now.get(c) == Some(&owner)) && !now.contains_key(&parent)
        },
    )
    .await;
    assert!(!store.exists(&paths::ownership(&parent)).await.unwrap());
    assert!(!store.exists(&paths::assignment(&parent)).await.unwrap());
    let (info, _) = admin::namespace_bundles(&store, NS).await.unwrap();
    assert_eq!(info.bundles.len(), 5);
    // The children keep the parent's data, divided.
    for c in &children {
        assert!(store.exists(&paths::bundle_data(c)).await.unwrap(), "{c}");
    }
    // Split by topic count, computed by the owner from its topics; the children are placed anew.
    let big = "public/demo/0x40000000_0x80000000";
    let owner = owners(&store).await[big].clone();
    let (_, children) = admin::split(
        &store,
        &admin::SplitArgs {
            namespace: NS.into(),
            range: "0x40000000_0x80000000".into(),
            algorithm: Some("topic_count_equally_divide".into()),
            positions: vec![],
            unload: true,
        },
        "test",
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(children.len(), 2);
    assert!(children.iter().all(|c| c.starts_with("public/demo/")));
    eventually(
        "split children settled",
        Duration::from_secs(10),
        || async {
            let mut ok = true;
            for c in &children {
                ok &= record(&store, c)
                    .await
                    .is_some_and(|r| r.state == AssignmentState::Assigned);
            }
            ok
        },
    )
    .await;
    let now = owners(&store).await;
    assert_eq!(now.len(), 6);
    let _ = owner;
    // An unknown algorithm and a bad position are refused with the reason.
    let e = admin::split(
        &store,
        &admin::SplitArgs {
            namespace: NS.into(),
            range: "0x80000000_0xc0000000".into(),
            algorithm: Some("half".into()),
            positions: vec![],
            unload: false,
        },
        "test",
        Duration::from_secs(5),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("half"), "{e}");
    // The shedding switch reaches every broker through /admin/configuration.
    for n in &nodes {
        assert!(!n.agent().settings().load_balancer_shedding_enabled);
    }
    let map = admin::set_shedding(&store, true).await.unwrap();
    assert_eq!(map["loadBalancerSheddingEnabled"], "true");
    eventually(
        "shedding enabled everywhere",
        Duration::from_secs(5),
        || async {
            nodes
                .iter()
                .all(|n| n.agent().settings().load_balancer_shedding_enabled)
        },
    )
    .await;
    admin::set_shedding(&store, false).await.unwrap();
    eventually(
        "shedding disabled everywhere",
        Duration::from_secs(5),
        || async {
            nodes
                .iter()
                .all(|n| !n.agent().settings().load_balancer_shedding_enabled)
        },
    )
    .await;
    let e = admin::set_dynamic_config(
        &store,
        "loadBalancerResourceQuotaUpdateIntervalMinutes",
        "1",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("not a dynamic setting"), "{e}");
    for mut n in nodes {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_persistent_copy_of_a_report_is_no_broker() {
    // A registration counts only while it is an ephemeral of a live session: a persistent copy of a real
    // broker's report (left behind by a tool, or written by hand) is skipped and counted, and never chosen.
    let name = store_name();
    let s = settings();
    let (nodes, store) = cluster(&name, &s, &profile(0), 4).await;
    let leader = nodes.iter().find(|n| n.agent().is_leader()).unwrap();
    let real = store
        .get(&paths::broker(&nodes[0].id))
        .await
        .unwrap()
        .unwrap();
    assert!(real.stat.ephemeral);
    store
        .put(
            &paths::broker("ghost:9"),
            &real.value,
            None,
            Default::default(),
        )
        .await
        .unwrap();
    until_skipped(leader, 1, "the ghost counted").await;
    for k in 0..16 {
        let found = nodes[1]
            .agent()
            .lookup(
                &format!("persistent://public/demo/g-{k}"),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert!(nodes.iter().any(|n| n.id == found.broker), "{found:?}");
    }
    unload_lands_on_agents(&store, &nodes).await;
    for mut n in nodes {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_lookup_never_answers_an_owner_that_is_no_broker() {
    // An ownership node naming a broker without a live registration (left behind, or forged) on a bundle
    // nobody owns: the client's lookup waits until the leader removed it (after the session timeout) and a
    // real broker took the bundle; it never answers the ghost.
    let name = store_name();
    let s = settings();
    let (nodes, store) = cluster(&name, &s, &profile(0), 4).await;
    admin::create_namespace(&store, "public/ghosts", 2, None)
        .await
        .unwrap();
    let topic = "persistent://public/ghosts/t-0";
    let (info, _) = admin::namespace_bundles(&store, "public/ghosts")
        .await
        .unwrap();
    let bundle = info
        .bundle_names()
        .into_iter()
        .find(|b| {
            let t = loadmgr::bundle::TopicName::parse(topic).unwrap();
            b.ends_with(&info.bundles.find_topic(&t).to_string())
        })
        .unwrap();
    let ghost = NamespaceEphemeralData {
        native_url: Some("pulsar://ghost:6650".into()),
        http_url: Some("http://ghost:8080".into()),
        ..Default::default()
    };
    store
        .put_json(&paths::ownership(&bundle), &ghost, None, Default::default())
        .await
        .unwrap();
    let start = tokio::time::Instant::now();
    let found = nodes[1]
        .agent()
        .lookup(topic, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(nodes.iter().any(|n| n.id == found.broker), "{found:?}");
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "answered after the leader removed the ghost's node (session timeout 2 s), not before"
    );
    for mut n in nodes {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn malformed_reports_are_counted_and_skipped() {
    let name = store_name();
    let s = settings();
    let (nodes, store) = cluster(&name, &s, &profile(0), 4).await;
    let leader = nodes.iter().find(|n| n.agent().is_leader()).unwrap();
    store
        .put(
            &paths::broker("10.0.0.9:8080"),
            b"{not json",
            None,
            Default::default(),
        )
        .await
        .unwrap();
    store
        .put(
            &paths::broker("10.0.0.8:8080"),
            br#"{"cpu":{"usage":"high"}}"#,
            None,
            Default::default(),
        )
        .await
        .unwrap();
    until_skipped(leader, 2, "both counted").await;
    // The leader keeps working: lookups, moves and flushes go on.
    let found = nodes[1]
        .agent()
        .lookup("persistent://public/demo/t-3", Duration::from_secs(5))
        .await
        .unwrap();
    assert!(nodes.iter().any(|n| n.id == found.broker));
    eventually(
        "the counter flushed to the leader status",
        Duration::from_secs(5),
        || async {
            store
                .get_json::<LeaderStatus>(paths::LEADER_STATUS)
                .await
                .unwrap()
                .is_some_and(|(st, _)| st.malformed_reports >= 2)
        },
    )
    .await;
    // The bogus brokers are never chosen.
    unload_lands_on_agents(&store, &nodes).await;
    for mut n in nodes {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_cut_off_leader_stops_and_a_cut_off_owner_stops_serving() {
    let name = store_name();
    let mut s = settings();
    s.load_balancer_shedding_enabled = false;
    let (nodes, store) = cluster(&name, &s, &profile(0), 4).await;
    let leader = leader_id(&store).await.unwrap();
    let li = nodes.iter().position(|n| n.id == leader).unwrap();
    let served_before = nodes[li].host.served();
    let cut = tokio::time::Instant::now();
    nodes[li].memory.disconnect();
    // A lost connection alone costs no leadership: it leads while its session can be alive on the server
    // (9/10 of the 2 s session timeout), and its hosts serve under leases of that session until then.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert!(
        nodes[li].agent().is_leader(),
        "still leading 1 s into a 2 s session"
    );
    assert_eq!(nodes[li].host.served(), served_before);
    // Then it stops leading, and its leases lapse at 1.8 s, before the session expires (2 s) and another
    // broker can take a bundle.
    eventually(
        "old leader stops leading",
        Duration::from_millis(1_000),
        || async { !nodes[li].agent().is_leader() },
    )
    .await;
    assert!(cut.elapsed() < Duration::from_millis(2_000));
    assert!(
        nodes[li].host.served().is_empty(),
        "no bundle served past the lease"
    );
    // Its session expires: another broker leads, its bundles are owned by others, and it serves nothing.
    eventually("a new leader", Duration::from_secs(5), || async {
        leader_id(&store).await.is_some_and(|l| l != leader)
    })
    .await;
    eventually("its bundles moved", Duration::from_secs(5), || async {
        let o = owners(&store).await;
        o.len() == 4 && o.values().all(|b| *b != leader)
    })
    .await;
    assert!(served_before.is_empty() || nodes[li].host.served().is_empty());
    // Back: it registers again and follows; it does not take anything back.
    nodes[li].memory.reconnect();
    eventually("re-registered", Duration::from_secs(5), || async {
        store.exists(&paths::broker(&leader)).await.unwrap()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!nodes[li].agent().is_leader());
    let o = owners(&store).await;
    assert!(o.values().all(|b| *b != leader), "{o:?}");
    assert!(nodes[li].host.served().is_empty());
    for mut n in nodes {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn avg_shedder_rebalances_an_imbalanced_cluster() {
    let name = store_name();
    let s = settings();
    let p = profile(0);
    // One broker takes every bundle, then two empty brokers join.
    let first = start(&name, 8081, &s, &p).await;
    let store = session(&name).0;
    admin::create_namespace(&store, NS, 8, None).await.unwrap();
    look_up_all(&first).await;
    assert!(owners(&store).await.values().all(|o| *o == first.id));
    let mut nodes = vec![first];
    for port in [8082, 8083] {
        nodes.push(start(&name, port, &s, &p).await);
    }
    // The loaded broker sheds to the idle ones until it no longer carries most of the traffic.
    let share = |nodes: &[Node]| {
        let rates: Vec<f64> = nodes
            .iter()
            .map(|n| {
                n.host
                    .bundle_stats()
                    .values()
                    .map(|s| s.msg_rate_in + s.msg_rate_out)
                    .sum()
            })
            .collect();
        rates[0] / rates.iter().sum::<f64>()
    };
    eventually(
        "the loaded broker shed",
        Duration::from_secs(30),
        || async { share(&nodes) < 0.75 && settled(&store).await },
    )
    .await;
    let moves: Vec<BundleAssignment> = {
        let mut v = Vec::new();
        for b in owners(&store).await.keys() {
            v.push(record(&store, b).await.unwrap());
        }
        v
    };
    let shed: Vec<&BundleAssignment> = moves
        .iter()
        .filter(|r| r.cause == AssignmentCause::Shedding)
        .collect();
    assert!(!shed.is_empty());
    for r in shed {
        assert!(r.reason.contains("AvgShedder"), "{}", r.reason);
        assert_eq!(r.source.as_deref(), Some(nodes[0].id.as_str()));
    }
    assert!(share(&nodes) < 0.75);
    for mut n in nodes {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn graceful_shutdown_hands_bundles_over() {
    let name = store_name();
    let mut s = settings();
    s.load_balancer_shedding_enabled = false;
    let (mut nodes, store) = cluster(&name, &s, &profile(0), 4).await;
    let o = owners(&store).await;
    let victim = o.values().next().unwrap().clone();
    let i = nodes.iter().position(|n| n.id == victim).unwrap();
    let node = nodes.remove(i);
    node.agent.unwrap().shutdown().await.unwrap();
    assert!(!store.exists(&paths::broker(&victim)).await.unwrap());
    assert!(node.host.served().is_empty());
    eventually(
        "its bundles owned by the others",
        Duration::from_secs(5),
        || async {
            let now = owners(&store).await;
            now.len() == 4 && now.values().all(|b| *b != victim)
        },
    )
    .await;
    for mut n in nodes {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn hot_bundles_are_split_automatically_and_their_children_placed() {
    let name = store_name();
    let mut s = settings();
    s.load_balancer_shedding_enabled = false;
    s.load_balancer_auto_bundle_split_enabled = true;
    s.load_balancer_auto_unload_split_bundles_enabled = true;
    s.load_balancer_namespace_bundle_max_topics = 10;
    s.load_balancer_namespace_maximum_bundles = 4;
    let (nodes, store) = cluster(&name, &s, &profile(0), 2).await;
    // 32 topics over 2 bundles: both exceed 10 topics and are split once each (4 bundles is the maximum).
    eventually("two splits", Duration::from_secs(20), || async {
        admin::namespace_bundles(&store, NS)
            .await
            .unwrap()
            .0
            .bundles
            .len()
            == 4
    })
    .await;
    eventually(
        "every child owned and assigned",
        Duration::from_secs(20),
        || async { all_owned(&store, 4).await && settled(&store).await },
    )
    .await;
    let (info, _) = admin::namespace_bundles(&store, NS).await.unwrap();
    for b in info.bundle_names() {
        let r = record(&store, &b).await.unwrap();
        assert_eq!(r.cause, AssignmentCause::Split, "{r:?}");
        assert!(
            r.reason.contains("loadBalancerNamespaceBundleMaxTopics"),
            "{}",
            r.reason
        );
    }
    // The parents are gone everywhere: ownership, records, bundle data.
    for parent in [
        "public/demo/0x00000000_0x80000000",
        "public/demo/0x80000000_0xffffffff",
    ] {
        assert!(!store.exists(&paths::ownership(parent)).await.unwrap());
        assert!(!store.exists(&paths::assignment(parent)).await.unwrap());
        eventually(
            "parent bundle data deleted",
            Duration::from_secs(5),
            || async { !store.exists(&paths::bundle_data(parent)).await.unwrap() },
        )
        .await;
    }
    // Every topic is still served, by exactly one broker.
    let served: usize = nodes
        .iter()
        .map(|n| {
            n.host
                .bundle_stats()
                .values()
                .map(|s| s.topics as usize)
                .sum::<usize>()
        })
        .sum();
    assert_eq!(served, 32);
    eventually(
        "the splits counted in the leader status",
        Duration::from_secs(5),
        || async {
            store
                .get_json::<LeaderStatus>(paths::LEADER_STATUS)
                .await
                .unwrap()
                .is_some_and(|(st, _)| st.splits == 2)
        },
    )
    .await;
    for mut n in nodes {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

/// An agent at `127.0.0.1:<port>` with no traffic, on the test settings.
async fn start_idle(store: &DynStore, port: u16) -> Result<BrokerAgent, RuntimeError> {
    let mut s = settings();
    s.advertised_address = Some("127.0.0.1".into());
    s.web_service_port = Some(port as i32);
    let identity = BrokerIdentity::from_settings(&s).unwrap();
    BrokerAgent::start(
        store.clone(),
        s,
        identity,
        Arc::new(loadmgr::runtime::IdleHost::default()),
        AgentOptions::default(),
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn an_agent_without_traffic_reports_the_machine() {
    let name = store_name();
    let (store, _memory) = session(&name);
    let agent = start_idle(&store, 8099).await.unwrap();
    let (r, stat) = store
        .get_json::<LocalBrokerData>(&paths::broker("127.0.0.1:8099"))
        .await
        .unwrap()
        .unwrap();
    assert!(stat.ephemeral);
    assert!(r.cpu.limit >= 100.0, "{:?}", r.cpu);
    assert!(r.memory.limit > 0.0, "{:?}", r.memory);
    assert_eq!(
        r.broker_version_string.as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert!(agent.is_leader());
    // A second process with the same id is refused with a clear error.
    let (other, _m2) = session(&name);
    let mut s2 = settings();
    s2.advertised_address = Some("127.0.0.1".into());
    s2.web_service_port = Some(8099);
    let e = BrokerAgent::start(
        other,
        s2.clone(),
        BrokerIdentity::from_settings(&s2).unwrap(),
        Arc::new(loadmgr::runtime::IdleHost::default()),
        AgentOptions {
            seed: None,
            clock: Some(loadmgr::runtime::Clock::starting_at(1)),
        },
    )
    .await
    .unwrap_err();
    assert!(matches!(e, RuntimeError::AlreadyRegistered { .. }), "{e}");
    agent.shutdown().await.unwrap();
    assert!(!store
        .exists(&paths::broker("127.0.0.1:8099"))
        .await
        .unwrap());
    assert!(!store.exists(paths::LEADER).await.unwrap());
}

/// A store that cannot be reached when the broker starts (a whole cluster restarting at once leaves it too busy
/// to answer in time): the registration is tried again until the store answers, instead of failing the start.
#[tokio::test(start_paused = true)]
async fn a_broker_registers_once_its_store_answers_again() {
    let name = store_name();
    let (store, memory) = session(&name);
    memory.disconnect();
    let cut = memory.clone();
    let back = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        cut.reconnect();
    });
    let agent = start_idle(&store, 8098)
        .await
        .expect("registered once the store answered");
    back.await.unwrap();
    let (_, stat) = store
        .get_json::<LocalBrokerData>(&paths::broker("127.0.0.1:8098"))
        .await
        .unwrap()
        .expect("registered");
    assert!(stat.ephemeral && stat.created_by_self);
    agent.shutdown().await.unwrap();
}

/// Extensible reporting (TransferShedder configured): a broker whose load moves by less than
/// `loadBalancerReportUpdateThresholdPercentage` when it loses a bundle still rewrites its report at its next
/// check (its bundle set changed), and again at its first check `loadBalanceSheddingDelayInSeconds` after the
/// loss. Settled reporting (BandShedder) writes at the next check too, and no more: this host reports current
/// usage, so that write is settled already. With the modular manager's AvgShedder (the control) it writes
/// neither.
#[tokio::test(start_paused = true)]
async fn extensible_reporting_writes_after_a_loss_and_after_the_shedding_delay() {
    for strategy in [
        ShedderKind::AvgShedder,
        ShedderKind::TransferShedder,
        ShedderKind::BandShedder,
    ] {
        let extensible = strategy == ShedderKind::TransferShedder;
        let name = store_name();
        let mut s = settings();
        s.load_balancer_shedding_enabled = false;
        s.loadmgr_report_update_max_interval_millis = 600_000;
        s.load_balance_shedding_delay_in_seconds = 1;
        s.load_balancer_load_shedding_strategy = strategy;
        s.load_balancer_load_placement_strategy = strategy.default_placement();
        // 96 topics over 16 bundles: every bundle has some, none much traffic.
        let p = SyntheticProfile::from_json(
            &format!(
                r#"{{"cores": 1, "cpuBasePercent": 5, "cpuPercentPer1000Msgs": 12,
                    "topics": [{{"name": "persistent://{NS}/t-{{0..95}}", "msgRateIn": 20, "msgRateOut": 20}}]}}"#
            ),
            "test",
        )
        .unwrap();
        let a = start(&name, 8081, &s, &p).await;
        let store = session(&name).0;
        admin::create_namespace(&store, NS, 16, None).await.unwrap();
        look_up_all(&a).await;
        let b = start(&name, 8082, &s, &p).await;
        let report = |id: String| {
            let store = store.clone();
            async move {
                store
                    .get_json::<LocalBrokerData>(&paths::broker(&id))
                    .await
                    .unwrap()
                    .unwrap()
            }
        };
        let owned = a.host.served();
        assert!(
            owned.len() > 10,
            "one bundle is less than 10 % of them: {owned:?}"
        );
        eventually("a reports its bundles", Duration::from_secs(5), || async {
            report(a.id.clone()).await.0.bundles == owned
        })
        .await;
        // The bundle with the least traffic: a's msg rate, throughput and W move by less than 10 %.
        let (bundle, stats) = a
            .host
            .bundle_stats()
            .into_iter()
            .min_by(|x, y| {
                (x.1.msg_rate_in + x.1.msg_rate_out)
                    .total_cmp(&(y.1.msg_rate_in + y.1.msg_rate_out))
            })
            .unwrap();
        let total: f64 = a
            .host
            .bundle_stats()
            .values()
            .map(|s| s.msg_rate_in + s.msg_rate_out)
            .sum();
        assert!((stats.msg_rate_in + stats.msg_rate_out) / total < 0.08);
        let (before, stat) = report(a.id.clone()).await;
        let range = bundle.rsplit('/').next().unwrap().to_owned();
        admin::unload(
            &store,
            NS,
            Some(&range),
            Some(&b.id),
            "test",
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert!(!a.host.served().contains(&bundle));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (after_loss, loss_stat) = report(a.id.clone()).await;
        if strategy == ShedderKind::BandShedder {
            assert_eq!(
                loss_stat.version,
                stat.version + 1,
                "one write at the next check"
            );
            assert!(!after_loss.bundles.contains(&bundle));
            tokio::time::sleep(Duration::from_millis(3_000)).await;
            assert_eq!(
                report(a.id.clone()).await.1.version,
                loss_stat.version,
                "settled at once: a host reporting current usage"
            );
        } else if !extensible {
            assert_eq!(
                loss_stat.version, stat.version,
                "no write below the threshold"
            );
            assert!(after_loss.bundles.contains(&bundle), "the stale report");
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            assert_eq!(report(a.id.clone()).await.1.version, stat.version);
        } else {
            assert_eq!(
                loss_stat.version,
                stat.version + 1,
                "one write at the next check"
            );
            assert!(!after_loss.bundles.contains(&bundle));
            assert_eq!(
                after_loss.last_bundle_losses,
                BTreeSet::from([bundle.clone()])
            );
            assert!(after_loss.last_update - before.last_update < 2_000);
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            let (follow_up, follow_stat) = report(a.id.clone()).await;
            assert_eq!(
                follow_stat.version,
                stat.version + 2,
                "one more write after the delay"
            );
            // The loss was at most one check (100 ms) before the first write; the follow-up is the first check
            // at least 1 s after the loss.
            let gap = follow_up.last_update - after_loss.last_update;
            assert!((900..=1_100).contains(&gap), "{gap} ms");
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            assert_eq!(
                report(a.id.clone()).await.1.version,
                follow_stat.version,
                "once"
            );
        }
        for n in [b, a] {
            n.agent.unwrap().shutdown().await.unwrap();
        }
    }
}

/// A host that reports no usage of its own, so the agent samples the Linux host (one window per
/// `loadmgrHostUsageCheckIntervalMillis`), serving one bundle at a rate the test sets.
#[derive(Debug)]
struct SampledHost {
    rate: std::sync::Mutex<f64>,
}

#[async_trait::async_trait]
impl BrokerHost for SampledHost {
    fn bundle_stats(&self) -> BTreeMap<String, loadmgr::model::NamespaceBundleStats> {
        let rate = *self.rate.lock().unwrap();
        let stats = loadmgr::model::NamespaceBundleStats {
            msg_rate_in: rate,
            msg_rate_out: rate,
            msg_throughput_in: rate * 1024.0,
            msg_throughput_out: rate * 1024.0,
            topics: 4,
            ..Default::default()
        };
        BTreeMap::from([(format!("{NS}/0x00000000_0xffffffff"), stats)])
    }

    fn bundle_topics(&self, _bundle: &str) -> BTreeMap<String, loadmgr::bundle::TopicTraffic> {
        BTreeMap::new()
    }

    async fn load_bundle(
        &self,
        _lease: loadmgr::runtime::OwnershipLease,
    ) -> Result<(), loadmgr::runtime::HostError> {
        Ok(())
    }

    async fn unload_bundle(&self, _bundle: &str) -> Result<(), loadmgr::runtime::HostError> {
        Ok(())
    }
}

/// Settled reports with the Linux sampler (BandShedder configured): a write that shows a traffic change carries
/// host usage sampled over a window from before the change, so the broker writes once more at the first check
/// whose sample's window began after that write, and then no more. With AvgShedder (the control) it writes
/// only the change.
#[tokio::test(start_paused = true)]
async fn a_sampled_host_writes_its_settled_usage_once_after_a_traffic_change() {
    for band in [false, true] {
        let name = store_name();
        let (store, _memory) = session(&name);
        let mut s = settings();
        s.load_balancer_shedding_enabled = false;
        s.loadmgr_report_update_max_interval_millis = 600_000;
        // The sampled usage is the whole test machine's, as busy as other tests make it: weighed at 0, so that
        // only the traffic decides when Pulsar's rule writes.
        s.load_balancer_cpu_resource_weight = 0.0;
        s.load_balancer_direct_memory_resource_weight = 0.0;
        s.load_balancer_bandwidth_in_resource_weight = 0.0;
        s.load_balancer_bandwidth_out_resource_weight = 0.0;
        s.load_balancer_bandwith_in_resource_weight = 0.0;
        s.load_balancer_bandwith_out_resource_weight = 0.0;
        if band {
            s.load_balancer_load_shedding_strategy = ShedderKind::BandShedder;
            s.load_balancer_load_placement_strategy = ShedderKind::BandShedder.default_placement();
        }
        s.advertised_address = Some("127.0.0.1".into());
        s.web_service_port = Some(8097);
        let host = Arc::new(SampledHost {
            rate: std::sync::Mutex::new(100.0),
        });
        let agent = BrokerAgent::start(
            store.clone(),
            s.clone(),
            BrokerIdentity::from_settings(&s).unwrap(),
            host.clone(),
            AgentOptions::default(),
        )
        .await
        .unwrap();
        let node = paths::broker("127.0.0.1:8097");
        let read = || {
            let store = store.clone();
            let node = node.clone();
            async move {
                let (r, stat) = store
                    .get_json::<LocalBrokerData>(&node)
                    .await
                    .unwrap()
                    .unwrap();
                (stat.version, r.last_update, r.msg_rate_in)
            }
        };
        eventually(
            "the first rate is reported",
            Duration::from_secs(5),
            || async { read().await.2 == 100.0 },
        )
        .await;
        // Several sample windows with steady traffic: nothing more to write.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let steady = read().await;
        *host.rate.lock().unwrap() = 300.0;
        let mut writes = Vec::new();
        let mut last = steady.0;
        for _ in 0..60 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let r = read().await;
            if r.0 != last {
                assert_eq!(r.0, last + 1, "every write seen");
                last = r.0;
                writes.push(r);
            }
        }
        assert!(!writes.is_empty(), "the change is written");
        assert_eq!(writes[0].2, 300.0, "{writes:?}");
        if band {
            assert_eq!(
                writes.len(),
                2,
                "the change and its settled usage: {writes:?}"
            );
            assert_eq!(writes[1].2, 300.0);
            // Samples come every 500 ms, at checks 100 ms apart: the first window that begins at or after the
            // change's write is the next sample's but one, 500–900 ms after it.
            let gap = writes[1].1 - writes[0].1;
            assert!((500..=900).contains(&gap), "{gap} ms");
        } else {
            assert_eq!(writes.len(), 1, "only the change: {writes:?}");
        }
        agent.shutdown().await.unwrap();
    }
}

/// The leader reads the cluster's namespace isolation policies from where Pulsar keeps them and follows
/// changes: an isolated namespace is placed on its primary brokers only, other namespaces on shared brokers
/// only, and a policy rewritten at run time governs the next placement.
#[tokio::test(start_paused = true)]
async fn isolation_policies_in_the_store_govern_placement() {
    let name = store_name();
    let mut s = settings();
    s.load_balancer_shedding_enabled = false;
    s.cluster_name = Some("c1".into());
    let admin_store = session(&name).0;
    let policy = |primary: &str| {
        format!(
            r#"{{"iso":{{"namespaces":["public/iso"],"primary":["{primary}"],"secondary":[],
                "auto_failover_policy":{{"policy_type":"min_available","parameters":{{"min_limit":"1","usage_threshold":"100"}}}}}}}}"#
        )
    };
    admin_store
        .put(
            &paths::isolation_policies("c1"),
            policy("broker-a").as_bytes(),
            None,
            loadmgr::store::CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
    let mut nodes = Vec::new();
    for host in ["broker-a", "broker-b", "broker-c"] {
        nodes.push(start_at(&name, host, 8080, &s, &profile(0)).await);
    }
    for ns in ["public/iso", NS] {
        admin::create_namespace(&admin_store, ns, 4, None)
            .await
            .unwrap();
    }
    let lookup_all = |ns: &'static str| {
        let agent = nodes[1].agent();
        async move {
            for i in 0..32 {
                agent
                    .lookup(&format!("persistent://{ns}/t-{i}"), Duration::from_secs(10))
                    .await
                    .unwrap();
            }
        }
    };
    lookup_all("public/iso").await;
    lookup_all(NS).await;
    let owners_of = |ns: &'static str| {
        let store = admin_store.clone();
        async move {
            let (info, _) = admin::namespace_bundles(&store, ns).await.unwrap();
            let mut out = BTreeMap::new();
            for b in info.bundle_names() {
                let (d, _) = store
                    .get_json::<NamespaceEphemeralData>(&paths::ownership(&b))
                    .await
                    .unwrap()
                    .unwrap();
                out.insert(b, owner_of(&d).unwrap());
            }
            out
        }
    };
    let iso = owners_of("public/iso").await;
    assert!(iso.values().all(|o| o == "broker-a:8080"), "{iso:?}");
    let shared = owners_of(NS).await;
    assert!(shared.values().all(|o| o != "broker-a:8080"), "{shared:?}");
    // The policy moves to broker-b: bundles stay where they are (Pulsar moves nothing on a policy change),
    // and an unloaded one is placed on the new primary.
    admin_store
        .put(
            &paths::isolation_policies("c1"),
            policy("broker-b").as_bytes(),
            None,
            loadmgr::store::CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(owners_of("public/iso").await, iso);
    let (msg, moved) = admin::unload(
        &admin_store,
        "public/iso",
        None,
        None,
        "test",
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(moved.len(), 4, "{msg}");
    eventually(
        "re-placed on the new primary",
        Duration::from_secs(10),
        || async {
            owners_of("public/iso")
                .await
                .values()
                .all(|o| o == "broker-b:8080")
        },
    )
    .await;
    for mut n in nodes {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

/// A request whose name comes again after the first node of that name was answered and deleted (etcd names
/// sequential nodes by revision; a ZooKeeper container parent restarts its counter) is a new request: the
/// leader answers it too.
#[tokio::test(start_paused = true)]
async fn a_request_name_used_again_is_answered_again() {
    use loadmgr::model::records::{AdminRequest, RequestOp};
    let name = store_name();
    let mut s = settings();
    s.load_balancer_shedding_enabled = false;
    let (nodes, store) = cluster(&name, &s, &profile(0), 4).await;
    let path = format!("{}0000000042", paths::REQUEST_PREFIX);
    for round in 0..2 {
        let request = AdminRequest {
            op: RequestOp::Lookup {
                topic: format!("persistent://{NS}/t-{round}"),
            },
            target: None,
            requester: "test".into(),
            created_ms: 0,
            response: None,
        };
        store
            .put_json(
                &path,
                &request,
                Some(-1),
                loadmgr::store::CreateOptions::PERSISTENT,
            )
            .await
            .unwrap();
        eventually("the request answered", Duration::from_secs(5), || async {
            store
                .get_json::<AdminRequest>(&path)
                .await
                .unwrap()
                .is_some_and(|(r, _)| r.response.is_some_and(|a| a.ok))
        })
        .await;
        store.delete(&path, None).await.unwrap();
    }
    for mut n in nodes {
        n.agent.take().unwrap().shutdown().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn one_bad_dynamic_key_skips_only_that_key() {
    let name = store_name();
    let (store, _) = session(&name);
    let put = |text: &'static str| {
        let store = store.clone();
        async move {
            let version = store
                .get(paths::DYNAMIC_CONFIGURATION)
                .await
                .unwrap()
                .map_or(-1, |got| got.stat.version);
            store
                .put(
                    paths::DYNAMIC_CONFIGURATION,
                    text.as_bytes(),
                    Some(version),
                    loadmgr::store::CreateOptions::PERSISTENT,
                )
                .await
                .unwrap();
        }
    };
    // A number where Pulsar writes strings: that key is skipped, the valid key applies at start.
    put(r#"{"loadBalancerSheddingEnabled": "false", "loadBalancerBrokerOverloadedThresholdPercentage": 70}"#)
        .await;
    let mut node = start(&name, 8080, &settings(), &profile(0)).await;
    let s = node.agent().settings();
    assert!(!s.load_balancer_shedding_enabled);
    assert_eq!(s.load_balancer_broker_overloaded_threshold_percentage, 85);
    // A change with a value that does not parse for its key: the others still apply.
    put(r#"{"loadBalancerSheddingEnabled": "false", "maxUnloadPercentage": "7", "loadBalancerAvgShedderLowThreshold": "20"}"#)
        .await;
    eventually("the valid key applied", Duration::from_secs(5), || async {
        node.agent()
            .settings()
            .load_balancer_avg_shedder_low_threshold
            == 20
    })
    .await;
    assert_eq!(node.agent().settings().max_unload_percentage, 0.5);
    // The admin path rewrites one key and keeps the others, a skipped one included.
    put(r#"{"loadBalancerSheddingEnabled": "false", "loadBalancerBrokerOverloadedThresholdPercentage": 70}"#)
        .await;
    let map = admin::set_dynamic_config(&store, "maxUnloadPercentage", "0.25")
        .await
        .unwrap();
    assert_eq!(map["loadBalancerBrokerOverloadedThresholdPercentage"], 70);
    eventually("the admin key applied", Duration::from_secs(5), || async {
        node.agent().settings().max_unload_percentage == 0.25
    })
    .await;
    // A node that is not a JSON object keeps the current settings.
    put(r#"["loadBalancerSheddingEnabled", "true"]"#).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = node.agent().settings();
    assert!(!s.load_balancer_shedding_enabled);
    assert_eq!(s.max_unload_percentage, 0.25);
    node.agent.take().unwrap().shutdown().await.unwrap();
}
