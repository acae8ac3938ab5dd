//! Network partitions between a client and its real ZooKeeper or etcd server, made by a TCP proxy that stops
//! forwarding without closing anything ([`FaultProxy`]): what a cut cable or a dropped route looks like.
//!
//! * The store declares `SessionLost` before the server can expire the session (and hand its ephemerals to
//!   another client), measured against a second client that watches the ephemeral vanish.
//! * Three broker agents, one cut off: the bundles it served are served by another broker only after it
//!   stopped serving them (the timeline of every host's loads and unloads never shows two brokers serving
//!   one bundle), and after the heal it comes back as a follower.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use loadmgr::bundle::TopicTraffic;
use loadmgr::config::Settings;
use loadmgr::model::{NamespaceBundleStats, NamespaceEphemeralData};
use loadmgr::paths;
use loadmgr::runtime::admin;
use loadmgr::runtime::identity::owner_of;
use loadmgr::runtime::{
    AgentOptions, BrokerAgent, BrokerHost, BrokerIdentity, HostError, OwnershipLease,
};
use loadmgr::store::{
    self, CreateOptions, DynStore, MetadataStoreExt, NotificationType, SessionEvent, StoreOptions,
};
use loadmgr::testing::proxy::FaultProxy;
use loadmgr::testing::servers::{EtcdServer, ZkServer};
use tokio::time::Instant;

const NS: &str = "public/cut";
const BUNDLES: u64 = 12;

fn options(session: Duration) -> StoreOptions {
    StoreOptions::default()
        .with_session_timeout(session)
        .with_operation_timeout(Duration::from_secs(5))
        .with_connect_timeout(Duration::from_secs(10))
}

fn socket(address: &str) -> SocketAddr {
    let hostport = address
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    hostport.parse().unwrap()
}

async fn next_event(
    events: &mut store::SessionEventStream,
    within: Duration,
) -> Option<SessionEvent> {
    tokio::time::timeout(within, events.next())
        .await
        .ok()
        .flatten()
}

/// A client behind `proxy` holds an ephemeral; the link is cut. Returns (SessionLost after the cut, the
/// ephemeral's deletion after the cut as another client saw it).
async fn session_lost_before_expiry(
    behind_proxy: DynStore,
    observer: DynStore,
    proxy: &FaultProxy,
    session: Duration,
) -> (Duration, Duration) {
    let path = "/partition/eph";
    behind_proxy
        .put(path, b"mine", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let mut events = behind_proxy.session_events();
    let mut watch = observer.watch("/partition").await.unwrap();
    // Let a few renewals happen, so the cut falls at an arbitrary point of the renewal cycle.
    tokio::time::sleep(session / 2 + Duration::from_millis(137)).await;
    let cut = Instant::now();
    proxy.partition();
    let lost = async {
        loop {
            match next_event(&mut events, session * 3).await {
                Some(SessionEvent::SessionLost) => return cut.elapsed(),
                Some(_) => {}
                None => panic!("no SessionLost within {:?} of the cut", session * 3),
            }
        }
    };
    let expired = async {
        loop {
            let n = tokio::time::timeout(session * 3, watch.next())
                .await
                .expect("the server expires the session")
                .expect("watch");
            if n.path == path && n.kind == NotificationType::Deleted {
                return cut.elapsed();
            }
        }
    };
    let (lost, expired) = tokio::join!(lost, expired);
    // Healed: the session is re-established and the ephemeral is back.
    proxy.heal();
    let start = Instant::now();
    loop {
        match next_event(&mut events, Duration::from_secs(30)).await {
            Some(SessionEvent::SessionReestablished) => break,
            Some(_) => {}
            None => panic!("no SessionReestablished after the heal"),
        }
    }
    let back = async {
        loop {
            if let Ok(Some(v)) = observer.get(path).await {
                return v.value;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let data = tokio::time::timeout(Duration::from_secs(15), back)
        .await
        .expect("the ephemeral is re-created after the heal");
    assert_eq!(data, b"mine");
    eprintln!(
        "cut at 0; SessionLost after {lost:?}; server expired the session after {expired:?}; re-established {:?} after the heal",
        start.elapsed()
    );
    (lost, expired)
}

fn assert_margin(lost: Duration, expired: Duration, session: Duration) {
    assert!(
        lost + session / 12 <= expired,
        "SessionLost {lost:?} after the cut is not well before the server's expiry {expired:?} (session {session:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_session_lost_before_the_server_expires_it() {
    loadmgr::testing::log_to_test_output();
    let server = ZkServer::start();
    let proxy = FaultProxy::start(socket(&server.address())).await.unwrap();
    let session = Duration::from_secs(4);
    let cut_off = store::connect(&format!("zk:{}", proxy.address()), options(session))
        .await
        .unwrap();
    let observer = store::connect(&server.url(), options(Duration::from_secs(10)))
        .await
        .unwrap();
    let (lost, expired) = session_lost_before_expiry(cut_off, observer, &proxy, session).await;
    assert_margin(lost, expired, session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_session_lost_before_the_server_expires_it() {
    loadmgr::testing::log_to_test_output();
    let server = EtcdServer::start();
    let proxy = FaultProxy::start(socket(&server.endpoint())).await.unwrap();
    let session = Duration::from_secs(3);
    let cut_off = store::connect(
        &format!("etcd:http://{}", proxy.address()),
        options(session),
    )
    .await
    .unwrap();
    let observer = store::connect(&server.url(), options(Duration::from_secs(10)))
        .await
        .unwrap();
    let (lost, expired) = session_lost_before_expiry(cut_off, observer, &proxy, session).await;
    assert_margin(lost, expired, session);
}

/// What a host did, in order, across all hosts of a test.
#[derive(Debug, Default)]
struct Timeline {
    /// (when, broker, bundle, true = load / false = unload).
    events: Mutex<Vec<(Instant, String, String, bool)>>,
}

impl Timeline {
    /// Fails on any instant where two brokers serve one bundle.
    fn check_never_two_servers(&self) -> usize {
        let events = self.events.lock().unwrap();
        let mut serving: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (at, broker, bundle, load) in events.iter() {
            let now = serving.entry(bundle).or_default();
            if *load {
                if !now.contains(&broker.as_str()) {
                    now.push(broker);
                }
                assert!(
                    now.len() == 1,
                    "{bundle} served by {now:?} at once ({at:?}); timeline: {events:#?}"
                );
            } else {
                now.retain(|b| *b != broker);
            }
        }
        events.len()
    }
}

/// A host without traffic that records every load and unload (the agent revokes a bundle's lease before it
/// unloads it, so the unloads bound the leases too).
#[derive(Debug)]
struct RecordingHost {
    broker: String,
    timeline: Arc<Timeline>,
    served: Mutex<BTreeSet<String>>,
}

impl RecordingHost {
    /// Records a change of what this host serves; the timeline lock is held across the change, so the
    /// timeline's order is the order of the hosts' states.
    fn record(&self, bundle: &str, load: bool) {
        let mut events = self.timeline.events.lock().unwrap();
        let mut served = self.served.lock().unwrap();
        if served.contains(bundle) != load {
            if load {
                served.insert(bundle.to_owned());
            } else {
                served.remove(bundle);
            }
            events.push((Instant::now(), self.broker.clone(), bundle.to_owned(), load));
        }
    }
}

#[async_trait]
impl BrokerHost for RecordingHost {
    fn bundle_stats(&self) -> BTreeMap<String, NamespaceBundleStats> {
        self.served
            .lock()
            .unwrap()
            .iter()
            .map(|b| (b.clone(), NamespaceBundleStats::default()))
            .collect()
    }

    fn resource_usage(&self) -> Option<loadmgr::model::SystemResourceUsage> {
        Some(Default::default())
    }

    fn bundle_topics(&self, _bundle: &str) -> BTreeMap<String, TopicTraffic> {
        BTreeMap::new()
    }

    async fn load_bundle(&self, lease: OwnershipLease) -> Result<(), HostError> {
        self.record(lease.bundle(), true);
        Ok(())
    }

    async fn unload_bundle(&self, bundle: &str) -> Result<(), HostError> {
        self.record(bundle, false);
        Ok(())
    }
}

async fn owners(store: &DynStore) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok((info, _)) = admin::namespace_bundles(store, NS).await else {
        return out;
    };
    for b in info.bundle_names() {
        if let Ok(Some((d, _))) = store
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

async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Three agents, each on its own connection through its own proxy; the one serving the most bundles is cut
/// off, its bundles go to the others, the link heals and it follows again.
async fn cut_off_broker_stops_serving_before_others_serve(
    url_behind: impl Fn(SocketAddr) -> String,
    server: SocketAddr,
    direct: &str,
    session: Duration,
) {
    loadmgr::testing::log_to_test_output();
    let timeline = Arc::new(Timeline::default());
    let mut settings = Settings::default();
    settings.load_balancer_report_update_min_interval_millis = 200;
    settings.loadmgr_shedding_interval_millis = 1_000;
    settings.loadmgr_resource_quota_update_interval_millis = 2_000;
    settings.load_balancer_shedding_enabled = false;
    settings.load_balancer_auto_bundle_split_enabled = false;
    settings.metadata_store_session_timeout_millis = session.as_millis() as i64;
    let admin_store = store::connect(direct, options(Duration::from_secs(10)))
        .await
        .unwrap();
    let mut agents = Vec::new();
    let mut proxies = Vec::new();
    for port in [9081, 9082, 9083] {
        let proxy = FaultProxy::start(server).await.unwrap();
        let store = store::connect(&url_behind(proxy.address()), options(session))
            .await
            .unwrap();
        let mut s = settings.clone();
        s.advertised_address = Some("127.0.0.1".into());
        s.web_service_port = Some(port);
        let identity = BrokerIdentity::from_settings(&s).unwrap();
        let host = Arc::new(RecordingHost {
            broker: identity.broker_id(),
            timeline: timeline.clone(),
            served: Mutex::default(),
        });
        let agent = BrokerAgent::start(
            store,
            s,
            identity,
            host,
            AgentOptions {
                seed: Some(port as u64),
                clock: None,
            },
        )
        .await
        .unwrap();
        agents.push(agent);
        proxies.push(proxy);
    }
    admin::create_namespace(&admin_store, NS, BUNDLES, None)
        .await
        .unwrap();
    // Spread the bundles: each agent looks up topics until every bundle is owned.
    let mut i = 0u32;
    eventually("every bundle owned", Duration::from_secs(30), || {
        i += 1;
        let agent = &agents[i as usize % agents.len()];
        let topic = format!("persistent://{NS}/t-{i}");
        let admin_store = &admin_store;
        async move {
            let _ = agent.lookup(&topic, Duration::from_secs(5)).await;
            owners(admin_store).await.len() == BUNDLES as usize
        }
    })
    .await;
    let owned = owners(&admin_store).await;
    let count = |id: &str| owned.values().filter(|o| *o == id).count();
    let victim = (0..agents.len())
        .max_by_key(|&i| count(agents[i].broker_id()))
        .unwrap();
    let victim_id = agents[victim].broker_id().to_owned();
    let its_bundles: Vec<String> = owned
        .iter()
        .filter(|(_, o)| **o == victim_id)
        .map(|(b, _)| b.clone())
        .collect();
    assert!(!its_bundles.is_empty(), "{owned:?}");
    eprintln!("cutting off {victim_id}, owner of {its_bundles:?}");
    proxies[victim].partition();
    let cut = Instant::now();
    eventually(
        "the cut-off broker's bundles owned by others",
        session * 4,
        || async {
            let o = owners(&admin_store).await;
            its_bundles
                .iter()
                .all(|b| o.get(b).is_some_and(|x| *x != victim_id))
        },
    )
    .await;
    eprintln!(
        "its bundles owned by others {:?} after the cut",
        cut.elapsed()
    );
    // Served by their new owners too.
    eventually(
        "the new owners serve them",
        Duration::from_secs(10),
        || async {
            let events = timeline.events.lock().unwrap();
            its_bundles.iter().all(|b| {
                events
                    .iter()
                    .any(|(_, broker, bundle, load)| *load && bundle == b && *broker != victim_id)
            })
        },
    )
    .await;
    proxies[victim].heal();
    eventually(
        "the cut-off broker registered again",
        Duration::from_secs(30),
        || async {
            admin_store
                .exists(&paths::broker(&victim_id))
                .await
                .unwrap_or(false)
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let n = timeline.check_never_two_servers();
    let o = owners(&admin_store).await;
    for b in &its_bundles {
        assert_ne!(
            o.get(b),
            Some(&victim_id),
            "{b} went back to the cut-off broker"
        );
    }
    eprintln!("{n} load/unload events, never two brokers serving one bundle");
    for a in agents {
        a.shutdown().await.unwrap();
    }
    timeline.check_never_two_servers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_cut_off_broker_stops_serving_before_others_serve() {
    let server = ZkServer::start();
    cut_off_broker_stops_serving_before_others_serve(
        |proxy| format!("zk:{proxy}"),
        socket(&server.address()),
        &server.url(),
        Duration::from_secs(4),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_cut_off_broker_stops_serving_before_others_serve() {
    let server = EtcdServer::start();
    cut_off_broker_stops_serving_before_others_serve(
        |proxy| format!("etcd:http://{proxy}"),
        socket(&server.endpoint()),
        &server.url(),
        Duration::from_secs(3),
    )
    .await;
}
