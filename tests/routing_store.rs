//! The store-fed load source (`routing::StoreLoadSource`) on the in-memory store and on a real ZooKeeper
//! (started once for this binary; every test gets its own chroot).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use loadmgr::model::{LocalBrokerData, ResourceUsage};
use loadmgr::routing::{
    Location, RouterConfig, Scope, SourceStatus, StoreLoadSource, StoreSourceOptions, TargetId,
    BROKERS_PATH,
};
use loadmgr::store::memory::MemoryStore;
use loadmgr::store::{CreateOptions, DynStore, MetadataStoreExt, StoreOptions};
use loadmgr::testing::conformance::{unique_root, MemorySessions, Sessions, UrlSessions};
use loadmgr::testing::servers::ZkServer;

/// Upper bound for anything the tests wait for; never reached when things work.
const WAIT: Duration = Duration::from_secs(15);

fn zk() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(ZkServer::start)
}

/// Sessions on the shared ZooKeeper under a chroot of their own.
fn zk_sessions() -> UrlSessions {
    UrlSessions {
        url: format!("{}{}", zk().url(), unique_root("routing-store")),
        options: StoreOptions::default()
            .with_session_timeout(Duration::from_secs(4))
            .with_operation_timeout(Duration::from_secs(10)),
    }
}

fn broker_path(broker: &str) -> String {
    format!("{BROKERS_PATH}/{broker}")
}

/// A modular report for `broker` (`host:port`) with the given CPU usage in percent.
fn report(broker: &str, cpu_percent: f64) -> LocalBrokerData {
    LocalBrokerData {
        web_service_url: Some(format!("http://{broker}")),
        cpu: ResourceUsage::new(cpu_percent, 100.0),
        ..LocalBrokerData::default()
    }
}

/// Writes a broker report as the broker does: an ephemeral node of its session.
async fn publish(store: &DynStore, broker: &str, cpu_percent: f64) {
    store
        .put_json(
            &broker_path(broker),
            &report(broker, cpu_percent),
            None,
            CreateOptions::EPHEMERAL,
        )
        .await
        .unwrap();
}

async fn set_domain(store: &DynStore, cluster: &str, domain: &str, brokers: &[&str]) {
    let body = serde_json::json!({ "brokers": brokers });
    store
        .put_json(
            &format!("{}/{domain}", loadmgr::paths::failure_domains(cluster)),
            &body,
            None,
            CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
}

/// A client (not a broker) on its own host; rack as given.
fn client(rack: Option<&str>) -> Location {
    Location {
        host: "client.example".to_string(),
        worker: "client".to_string(),
        rack: rack.map(str::to_string),
    }
}

/// Options for tests that refresh the router themselves.
fn manual(source: Location) -> StoreSourceOptions {
    StoreSourceOptions::new(source)
        .with_router(RouterConfig {
            seed: Some(1),
            ..RouterConfig::default()
        })
        .without_refresh_loop()
}

async fn wait_status(
    source: &StoreLoadSource,
    what: &str,
    pred: impl Fn(&SourceStatus) -> bool,
) -> SourceStatus {
    let mut rx = source.subscribe();
    let found = tokio::time::timeout(WAIT, rx.wait_for(|s| pred(s))).await;
    match found {
        Ok(Ok(status)) => status.clone(),
        _ => panic!("{what}: not reached; status now {:?}", source.status()),
    }
}

fn id(source: &StoreLoadSource, broker: &str) -> TargetId {
    source
        .target_id(broker)
        .unwrap_or_else(|| panic!("{broker} has no target id"))
}

fn scopes(source: &StoreLoadSource) -> Vec<(String, Scope)> {
    source
        .router()
        .expect("a router")
        .target_scopes()
        .into_iter()
        .map(|(t, s)| (source.broker_id(t).unwrap(), s))
        .collect()
}

fn weight(source: &StoreLoadSource, broker: &str) -> u8 {
    let target = id(source, broker);
    source
        .router()
        .unwrap()
        .weights()
        .into_iter()
        .find(|(t, _)| *t == target)
        .unwrap_or_else(|| panic!("{broker} is no target"))
        .1
}

fn close_to(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// Reports present at start become targets with their loads; a broker that appears later is added.
async fn reports_become_targets_and_loads(sessions: &dyn Sessions) {
    let (a, b, c) = (
        sessions.open().await,
        sessions.open().await,
        sessions.open().await,
    );
    publish(&a, "a.example:8080", 20.0).await;
    publish(&b, "b.example:8080", 60.0).await;
    let store = sessions.open().await;
    let source = StoreLoadSource::start(store.clone(), None, manual(client(None)))
        .await
        .unwrap();

    let status = source.status();
    assert_eq!(
        status.brokers.keys().collect::<Vec<_>>(),
        vec!["a.example:8080", "b.example:8080"],
        "the first read is done when start returns"
    );
    assert!(close_to(status.brokers["a.example:8080"], 0.2));
    assert_eq!(status.malformed, 0);
    // No failure domains: every broker and the client are in the default domain, on other hosts.
    assert_eq!(
        scopes(&source),
        vec![
            ("a.example:8080".to_string(), Scope::RackLocal),
            ("b.example:8080".to_string(), Scope::RackLocal),
        ]
    );
    let loads = source.loads();
    assert!(close_to(loads.get(id(&source, "a.example:8080")), 0.2));
    assert!(close_to(loads.get(id(&source, "b.example:8080")), 0.6));

    publish(&c, "c.example:8080", 40.0).await;
    wait_status(&source, "c reported", |s| {
        s.brokers.contains_key("c.example:8080")
    })
    .await;
    assert_eq!(source.router().unwrap().target_scopes().len(), 3);
    assert!(close_to(loads.get(id(&source, "c.example:8080")), 0.4));
    let picked = source.choose_broker().unwrap();
    assert!(picked.ends_with(".example:8080"), "{picked}");

    source.shutdown().await;
    for s in [a, b, c, store] {
        s.close().await.unwrap();
    }
}

/// A broker whose load rises loses weight over the next refreshes; the other keeps its full weight.
async fn rising_load_lowers_the_weight(sessions: &dyn Sessions) {
    let (a, b) = (sessions.open().await, sessions.open().await);
    publish(&a, "a.example:8080", 10.0).await;
    publish(&b, "b.example:8080", 10.0).await;
    let store = sessions.open().await;
    let source = StoreLoadSource::start(store.clone(), None, manual(client(None)))
        .await
        .unwrap();
    let router = source.router().unwrap();
    let loads = source.loads();
    router.refresh(&loads);
    assert_eq!(weight(&source, "a.example:8080"), 100);
    assert_eq!(weight(&source, "b.example:8080"), 100);

    publish(&a, "a.example:8080", 90.0).await;
    wait_status(&source, "a's load rose", |s| {
        close_to(s.brokers["a.example:8080"], 0.9)
    })
    .await;
    for _ in 0..3 {
        router.refresh(&loads);
    }
    assert_eq!(
        weight(&source, "a.example:8080"),
        70,
        "three refreshes at -10"
    );
    assert_eq!(weight(&source, "b.example:8080"), 100);
    let counts = router.ring_counts();
    assert!(counts[&id(&source, "a.example:8080")] < counts[&id(&source, "b.example:8080")]);

    publish(&a, "a.example:8080", 10.0).await;
    wait_status(&source, "a's load fell", |s| {
        close_to(s.brokers["a.example:8080"], 0.1)
    })
    .await;
    router.refresh(&loads);
    assert_eq!(weight(&source, "a.example:8080"), 71, "recovering by 1");

    source.shutdown().await;
    for s in [a, b, store] {
        s.close().await.unwrap();
    }
}

/// A deleted report, or one that vanishes with its broker's session, removes the target; with no broker
/// left there is nothing to choose; a broker coming back keeps its target id.
async fn vanished_brokers_are_removed(sessions: &dyn Sessions) {
    let (a, b, c) = (
        sessions.open().await,
        sessions.open().await,
        sessions.open().await,
    );
    publish(&a, "a.example:8080", 10.0).await;
    publish(&b, "b.example:8080", 20.0).await;
    publish(&c, "c.example:8080", 30.0).await;
    let store = sessions.open().await;
    let source = StoreLoadSource::start(store.clone(), None, manual(client(None)))
        .await
        .unwrap();
    let a_id = id(&source, "a.example:8080");

    a.delete(&broker_path("a.example:8080"), None)
        .await
        .unwrap();
    wait_status(&source, "a deleted", |s| {
        !s.brokers.contains_key("a.example:8080")
    })
    .await;
    let router = source.router().unwrap();
    assert!(router.target_scopes().iter().all(|(t, _)| *t != a_id));
    assert_eq!(
        source.loads().get(a_id),
        1.0,
        "no load: not connected, fully loaded"
    );
    assert!((0..2000).all(|_| router.choose() != a_id));

    c.close().await.unwrap();
    wait_status(&source, "c's session closed", |s| {
        !s.brokers.contains_key("c.example:8080")
    })
    .await;
    assert_eq!(
        scopes(&source),
        vec![("b.example:8080".to_string(), Scope::RackLocal)]
    );

    b.delete(&broker_path("b.example:8080"), None)
        .await
        .unwrap();
    wait_status(&source, "every broker gone", |s| s.brokers.is_empty()).await;
    assert_eq!(source.choose(), None);
    assert!(source.router().is_some(), "the router is kept");

    publish(&a, "a.example:8080", 10.0).await;
    wait_status(&source, "a back", |s| {
        s.brokers.contains_key("a.example:8080")
    })
    .await;
    assert_eq!(source.target_id("a.example:8080"), Some(a_id), "same id");
    assert_eq!(source.choose(), Some(a_id));

    source.shutdown().await;
    for s in [a, b, store] {
        s.close().await.unwrap();
    }
}

/// Malformed reports and domains are skipped and counted; a broker whose report turns malformed keeps its
/// last good load; a fixed node is read again.
async fn malformed_nodes_are_skipped_and_counted(sessions: &dyn Sessions) {
    let cluster = "c1";
    let (a, admin) = (sessions.open().await, sessions.open().await);
    publish(&a, "a.example:8080", 30.0).await;
    admin
        .put(
            &broker_path("x.example:8080"),
            b"{not json",
            None,
            CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
    set_domain(&admin, cluster, "dc-1", &["a.example:8080"]).await;
    admin
        .put(
            &format!("{}/broken", loadmgr::paths::failure_domains(cluster)),
            br#"{"brokers":"not a list"}"#,
            None,
            CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
    let store = sessions.open().await;
    let source = StoreLoadSource::start(
        store.clone(),
        Some(cluster.to_string()),
        manual(client(Some("dc-1"))),
    )
    .await
    .unwrap();
    let status = source.status();
    assert_eq!(status.malformed, 2, "{status:?}");
    assert_eq!(
        status.brokers.keys().collect::<Vec<_>>(),
        vec!["a.example:8080"]
    );
    assert_eq!(status.domains["a.example:8080"], "dc-1");
    assert_eq!(source.target_id("x.example:8080"), None);

    // A report that turns malformed: counted, and the last good one stays.
    a.put(
        &broker_path("a.example:8080"),
        br#"{"cpu":"high"}"#,
        None,
        CreateOptions::EPHEMERAL,
    )
    .await
    .unwrap();
    let status = wait_status(&source, "a malformed", |s| s.malformed == 3).await;
    assert!(close_to(status.brokers["a.example:8080"], 0.3));

    // Fixed nodes are read again.
    admin
        .put_json(
            &broker_path("x.example:8080"),
            &report("x.example:8080", 50.0),
            None,
            CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
    set_domain(&admin, cluster, "broken", &["x.example:8080"]).await;
    let status = wait_status(&source, "x fixed", |s| {
        s.brokers.contains_key("x.example:8080")
            && s.domains.get("x.example:8080").map(String::as_str) == Some("broken")
    })
    .await;
    assert_eq!(status.malformed, 3);
    assert_eq!(
        scopes(&source),
        vec![
            ("a.example:8080".to_string(), Scope::RackLocal),
            ("x.example:8080".to_string(), Scope::Everything),
        ]
    );

    source.shutdown().await;
    admin
        .delete(&broker_path("x.example:8080"), None)
        .await
        .unwrap();
    for s in [a, admin, store] {
        s.close().await.unwrap();
    }
}

/// Failure domains become racks: brokers in the client's domain are rack-local, the others (and brokers in
/// no domain) are not; domain changes move brokers between scopes.
async fn failure_domains_become_racks(sessions: &dyn Sessions) {
    let cluster = "east";
    let brokers = [
        "a.example:8080",
        "b.example:8080",
        "c.example:8080",
        "d.example:8080",
    ];
    let mut sessions_held = Vec::new();
    for (i, broker) in brokers.iter().enumerate() {
        let s = sessions.open().await;
        publish(&s, broker, 10.0 * (i + 1) as f64).await;
        sessions_held.push(s);
    }
    let admin = sessions.open().await;
    set_domain(
        &admin,
        cluster,
        "dc-1",
        &["a.example:8080", "b.example:8080"],
    )
    .await;
    set_domain(&admin, cluster, "dc-2", &["c.example:8080"]).await;
    let store = sessions.open().await;
    let source = StoreLoadSource::start(
        store.clone(),
        Some(cluster.to_string()),
        manual(client(Some("dc-1"))),
    )
    .await
    .unwrap();
    let expect = |a: Scope, b: Scope, c: Scope, d: Scope| {
        brokers
            .iter()
            .map(|s| s.to_string())
            .zip([a, b, c, d])
            .collect::<Vec<_>>()
    };
    use Scope::{Everything, RackLocal};
    assert_eq!(
        scopes(&source),
        expect(RackLocal, RackLocal, Everything, Everything),
        "d is in the default domain"
    );
    assert_eq!(source.router().unwrap().scope(), RackLocal);
    assert!((0..2000).all(|_| {
        let t = source.choose().unwrap();
        t == id(&source, "a.example:8080") || t == id(&source, "b.example:8080")
    }));

    // c moves to dc-1.
    set_domain(&admin, cluster, "dc-1", &brokers[..3]).await;
    set_domain(&admin, cluster, "dc-2", &[]).await;
    wait_status(&source, "c in dc-1", |s| {
        s.domains.get("c.example:8080").map(String::as_str) == Some("dc-1")
    })
    .await;
    assert_eq!(
        scopes(&source),
        expect(RackLocal, RackLocal, RackLocal, Everything)
    );

    // A new domain for d, then dc-1 deleted: nobody shares the client's domain any more.
    set_domain(&admin, cluster, "dc-3", &["d.example:8080"]).await;
    admin
        .delete(
            &format!("{}/dc-1", loadmgr::paths::failure_domains(cluster)),
            None,
        )
        .await
        .unwrap();
    let status = wait_status(&source, "dc-1 deleted", |s| {
        !s.domains.values().any(|d| d == "dc-1") && s.domains.contains_key("d.example:8080")
    })
    .await;
    assert_eq!(status.domains["d.example:8080"], "dc-3");
    assert_eq!(
        scopes(&source),
        expect(Everything, Everything, Everything, Everything)
    );

    source.shutdown().await;
    admin
        .delete_recursive(&format!("/admin/clusters/{cluster}"))
        .await
        .unwrap();
    for s in sessions_held.into_iter().chain([admin, store]) {
        s.close().await.unwrap();
    }
}

/// After the source's own session expires (and is re-established) it reads everything again. (In-memory
/// only: on ZooKeeper `expire_session` takes a session over from a second client, and the two clients can
/// fight over it for seconds; `a_zookeeper_restart_is_followed_by_a_full_read` covers ZooKeeper.)
async fn session_reestablished_reads_everything_again(sessions: &dyn Sessions) {
    let (a, b) = (sessions.open().await, sessions.open().await);
    publish(&a, "a.example:8080", 10.0).await;
    let store = sessions.open().await;
    let source = StoreLoadSource::start(store.clone(), None, manual(client(None)))
        .await
        .unwrap();
    assert_eq!(source.status().resyncs, 0);
    store.expire_session().await.unwrap();
    wait_status(&source, "re-read after expiry", |s| s.resyncs >= 1).await;
    publish(&b, "b.example:8080", 20.0).await;
    let status = wait_status(&source, "b after the expiry", |s| {
        s.brokers.contains_key("b.example:8080")
    })
    .await;
    assert_eq!(
        status.brokers.keys().collect::<Vec<_>>(),
        vec!["a.example:8080", "b.example:8080"]
    );
    source.shutdown().await;
    for s in [a, b, store] {
        s.close().await.unwrap();
    }
}

/// `shutdown` ends every task (the status channel closes with it); dropping the source does too.
async fn shutdown_and_drop_stop_the_source(sessions: &dyn Sessions) {
    let a = sessions.open().await;
    publish(&a, "a.example:8080", 10.0).await;
    let store = sessions.open().await;
    // With the refresh loop, so that both tasks must end.
    let options = StoreSourceOptions::new(client(None));
    let source = StoreLoadSource::start(store.clone(), None, options.clone())
        .await
        .unwrap();
    let rx = source.subscribe();
    let router = source.router().unwrap();
    source.shutdown().await;
    assert!(
        rx.has_changed().is_err(),
        "every task has ended and released the source"
    );
    assert_eq!(router.target_scopes().len(), 1, "the router stays usable");

    let source = StoreLoadSource::start(store.clone(), None, options)
        .await
        .unwrap();
    let mut rx = source.subscribe();
    drop(source);
    tokio::time::timeout(WAIT, async { while rx.changed().await.is_ok() {} })
        .await
        .expect("the tasks of a dropped source end");
    for s in [a, store] {
        s.close().await.unwrap();
    }
}

macro_rules! store_source_tests {
    ($name:ident, $sessions:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn reports_become_targets_and_loads() {
                super::reports_become_targets_and_loads(&$sessions).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rising_load_lowers_the_weight() {
                super::rising_load_lowers_the_weight(&$sessions).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn vanished_brokers_are_removed() {
                super::vanished_brokers_are_removed(&$sessions).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn malformed_nodes_are_skipped_and_counted() {
                super::malformed_nodes_are_skipped_and_counted(&$sessions).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn failure_domains_become_racks() {
                super::failure_domains_become_racks(&$sessions).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn shutdown_and_drop_stop_the_source() {
                super::shutdown_and_drop_stop_the_source(&$sessions).await;
            }
        }
    };
}

store_source_tests!(memory, MemorySessions::default());
store_source_tests!(zookeeper, zk_sessions());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_session_reestablished_reads_everything_again() {
    session_reestablished_reads_everything_again(&MemorySessions::default()).await;
}

/// A ZooKeeper server restart (a server of this test's own): the source's session reconnects and it reads
/// everything again. (Notifications after such a restart are not asserted: the ZooKeeper backend currently
/// delivers none once a standalone server restarted within the session.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zookeeper_restart_is_followed_by_a_full_read() {
    let mut server = ZkServer::start();
    let sessions = UrlSessions {
        url: server.url(),
        options: zk_sessions().options,
    };
    let broker = sessions.open().await;
    publish(&broker, "a.example:8080", 10.0).await;
    let store = sessions.open().await;
    let source = StoreLoadSource::start(store.clone(), None, manual(client(None)))
        .await
        .unwrap();
    let mut events = store.session_events();
    server.restart();
    loadmgr::testing::conformance::wait_session_event(&mut events, WAIT, |e| e.is_connected())
        .await;
    let status = wait_status(&source, "re-read after the restart", |s| s.resyncs >= 1).await;
    assert_eq!(
        status.brokers.keys().collect::<Vec<_>>(),
        vec!["a.example:8080"],
        "the broker's session and report survived the restart"
    );
    assert_eq!(source.choose_broker().as_deref(), Some("a.example:8080"));
    source.shutdown().await;
    broker.close().await.unwrap();
    store.close().await.unwrap();
}

/// With its own refresh loop (virtual time), the router follows a load change without help.
#[tokio::test(start_paused = true)]
async fn the_refresh_loop_follows_the_store() {
    let brokers = MemoryStore::new();
    let store: DynStore = Arc::new(brokers.new_session());
    let brokers: DynStore = Arc::new(brokers);
    publish(&brokers, "a.example:8080", 10.0).await;
    publish(&brokers, "b.example:8080", 10.0).await;
    let options = StoreSourceOptions::new(client(None)).with_router(RouterConfig {
        seed: Some(2),
        ..RouterConfig::default()
    });
    let source = StoreLoadSource::start(store, None, options).await.unwrap();
    publish(&brokers, "a.example:8080", 95.0).await;
    wait_status(&source, "a hot", |s| {
        close_to(s.brokers["a.example:8080"], 0.95)
    })
    .await;
    let router = source.router().unwrap();
    let before = router.refresh_count();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let refreshes = router.refresh_count() - before;
    assert!(refreshes >= 6, "{refreshes} refreshes in 10 s");
    assert!(weight(&source, "a.example:8080") <= 40);
    assert_eq!(weight(&source, "b.example:8080"), 100);
    source.shutdown().await;
}

/// A store cut off from its server: reads fail and are retried, and after reconnecting the source has the
/// changes made meanwhile (memory store's simulated network cut).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_store_catches_up_after_reconnecting() {
    let memory = MemoryStore::new();
    let brokers: DynStore = Arc::new(memory.new_session());
    let own = memory.new_session();
    publish(&brokers, "a.example:8080", 10.0).await;
    let source = StoreLoadSource::start(Arc::new(own.clone()), None, manual(client(None)))
        .await
        .unwrap();
    own.disconnect();
    publish(&brokers, "a.example:8080", 80.0).await;
    publish(&brokers, "b.example:8080", 20.0).await;
    let status = wait_status(&source, "a failed read", |s| s.read_errors >= 1).await;
    assert!(
        close_to(status.brokers["a.example:8080"], 0.1),
        "the last loads read stay while cut off"
    );
    own.reconnect();
    let status = wait_status(&source, "caught up", |s| {
        s.brokers.contains_key("b.example:8080") && close_to(s.brokers["a.example:8080"], 0.8)
    })
    .await;
    assert!(status.resyncs >= 1);
    source.shutdown().await;
}

#[tokio::test]
async fn bad_arguments_are_rejected() {
    let store: DynStore = Arc::new(MemoryStore::new());
    for cluster in ["", "a/b"] {
        let err = StoreLoadSource::start(
            store.clone(),
            Some(cluster.to_string()),
            manual(client(None)),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("one path segment"), "{err}");
    }
    let bad = StoreSourceOptions::new(client(None)).with_router(RouterConfig {
        lower_bound: 0.9,
        higher_bound: 0.5,
        ..RouterConfig::default()
    });
    assert!(StoreLoadSource::start(store, None, bad).await.is_err());
}
