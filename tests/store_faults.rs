//! Fault tests on real servers: servers killed and restarted, ensemble members lost (including the one the
//! client talks to), a leader process SIGKILLed, events missed during a disconnection reported afterwards.
//! Each test owns its servers (they are killed on drop).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use loadmgr::coordination::{LeaderElection, LeaderState};
use loadmgr::model::LeaderBroker;
use loadmgr::store::etcd::EtcdStore;
use loadmgr::store::zookeeper::ZkStore;
use loadmgr::store::{
    self, CreateOptions, DynStore, Notification, NotificationType, Op, SessionEvent, StoreOptions,
};
use loadmgr::testing::conformance::{expect_notifications, wait_session_event};
use loadmgr::testing::proxy::FaultProxy;
use loadmgr::testing::servers::{zk_four_letter, EtcdCluster, EtcdServer, ZkEnsemble, ZkServer};
use tokio::time::Instant;

const WAIT: Duration = Duration::from_secs(30);

fn options(session: Duration) -> StoreOptions {
    StoreOptions::default()
        .with_session_timeout(session)
        .with_operation_timeout(Duration::from_secs(10))
        .with_connect_timeout(Duration::from_secs(10))
}

async fn connect(url: &str, session: Duration) -> DynStore {
    store::connect(url, options(session))
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

/// Retries `put` until it succeeds (operations continue after a failover), returning how long it took.
async fn put_eventually(store: &DynStore, path: &str, value: &[u8]) -> Duration {
    let start = Instant::now();
    loop {
        match store
            .put(path, value, None, CreateOptions::PERSISTENT)
            .await
        {
            Ok(_) => return start.elapsed(),
            Err(e) if e.is_transient() && start.elapsed() < WAIT => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("put {path} kept failing: {e}"),
        }
    }
}

/// The writes the cut-off client must learn about afterwards (retried through transient errors).
async fn write_while_cut_off(writer: &DynStore) {
    put_eventually(writer, "/m/new", b"1").await;
    let start = Instant::now();
    loop {
        match writer.delete("/m/del", None).await {
            Ok(()) => break,
            // A retry after a delete that was applied but not acknowledged.
            Err(loadmgr::store::Error::NotFound { .. }) => break,
            Err(e) if e.is_transient() && start.elapsed() < WAIT => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("delete kept failing: {e}"),
        }
    }
    put_eventually(writer, "/m/mod", b"1").await;
}

/// A store on a follower of `ensemble` (so losing that member does not stall the ensemble), the one to cut off,
/// and a writer on another member; with the index of the member to cut.
async fn cut_off_pair(ensemble: &ZkEnsemble) -> (usize, DynStore, DynStore) {
    let cut = ensemble.follower().expect("a follower");
    let other = (cut + 1) % 3;
    let a = connect(
        &format!("zk:127.0.0.1:{}", ensemble.port(cut)),
        Duration::from_secs(8),
    )
    .await;
    let writer = connect(
        &format!("zk:127.0.0.1:{}", ensemble.port(other)),
        Duration::from_secs(8),
    )
    .await;
    (cut, a, writer)
}

fn n(kind: NotificationType, path: &str) -> Notification {
    Notification::new(kind, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_restart_within_the_session_keeps_session_and_ephemerals() {
    let mut server = ZkServer::start();
    let zk = Arc::new(
        ZkStore::connect(&server.address(), None, options(Duration::from_secs(6)))
            .await
            .unwrap(),
    );
    let session = zk.session_id();
    let store: DynStore = zk.clone();
    store
        .put("/f/eph", b"mine", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let mut events = store.session_events();
    server.kill();
    wait_session_event(&mut events, WAIT, |e| e == SessionEvent::ConnectionLost).await;
    server.restart();
    let seen = wait_session_event(&mut events, WAIT, |e| e == SessionEvent::Reconnected).await;
    assert_eq!(seen, vec![SessionEvent::Reconnected], "no session loss");
    let got = store.get("/f/eph").await.unwrap().expect("ephemeral kept");
    assert!(got.stat.created_by_self);
    assert!(store.is_connected());
    assert_eq!(zk.session_id(), session, "same session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_outage_longer_than_the_session_restores_ephemerals() {
    let mut server = ZkServer::start();
    let store = connect(&server.url(), Duration::from_secs(2)).await;
    store
        .put("/f/eph", b"mine", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    store
        .put("/f/eph", b"mine-2", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    let mut events = store.session_events();
    server.kill();
    let start = Instant::now();
    let seen = wait_session_event(&mut events, WAIT, |e| e == SessionEvent::SessionLost).await;
    assert_eq!(
        seen,
        vec![SessionEvent::ConnectionLost, SessionEvent::SessionLost]
    );
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "SessionLost after {:?}",
        start.elapsed()
    );
    assert!(!store.is_connected());
    tokio::time::sleep(Duration::from_secs(3)).await;
    server.restart();
    let seen = wait_session_event(&mut events, WAIT, |e| {
        e == SessionEvent::SessionReestablished
    })
    .await;
    assert!(seen.contains(&SessionEvent::Reconnected), "{seen:?}");
    let got = store
        .get("/f/eph")
        .await
        .unwrap()
        .expect("ephemeral restored");
    assert_eq!(got.value, b"mine-2");
    assert!(
        got.stat.ephemeral && got.stat.created_by_self,
        "{:?}",
        got.stat
    );
    // It really belongs to the new session: it outlives the old one's server-side expiry.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        store
            .get("/f/eph")
            .await
            .unwrap()
            .unwrap()
            .stat
            .created_by_self
    );
}

/// A prefix too large for `watch` to wait for its first scan (12,000 nodes): the scan goes on in the
/// background, and the changes a later disconnection hides are still reported, deletions included (the
/// scan filled what the resync compares with).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_changes_missed_under_a_large_prefix_scanned_in_the_background_are_reported() {
    let mut ensemble = ZkEnsemble::start(3);
    let (cut, a, writer) = cut_off_pair(&ensemble).await;
    for d in 0..120 {
        let ops: Vec<Op> = (0..100)
            .map(|i| Op::put(format!("/m/bulk/d{d:03}/n{i:03}"), b"0".to_vec()))
            .collect();
        writer.batch(ops).await.unwrap();
    }
    for p in ["/m/keep", "/m/del", "/m/mod"] {
        writer
            .put(p, b"0", None, CreateOptions::PERSISTENT)
            .await
            .unwrap();
    }
    // The member A uses may not have applied the writer's writes yet, and would then report those nodes
    // live as created: the watch starts once A sees the last of them.
    let start = Instant::now();
    while !a.exists("/m/mod").await.unwrap() {
        assert!(
            start.elapsed() < WAIT,
            "A's member never applied the writes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut watch = a.watch("/m").await.unwrap();
    // However long the background scan takes here, it is long done after this (a few hundred ms for 12,000
    // nodes at 8 requests in flight on loopback).
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mut events = a.session_events();
    ensemble.kill(cut);
    wait_session_event(&mut events, WAIT, |e| e == SessionEvent::ConnectionLost).await;
    write_while_cut_off(&writer).await;
    ensemble.restart(cut);
    wait_session_event(&mut events, WAIT, |e| e == SessionEvent::Reconnected).await;
    let mut expected = vec![
        n(NotificationType::Created, "/m/new"),
        n(NotificationType::Deleted, "/m/del"),
        n(NotificationType::Modified, "/m/mod"),
    ];
    let deadline = Instant::now() + WAIT;
    while !expected.is_empty() {
        let got = tokio::time::timeout_at(deadline, watch.next())
            .await
            .unwrap_or_else(|_| panic!("missed changes not reported: {expected:?}"))
            .unwrap();
        if got.kind == NotificationType::Created {
            assert_eq!(
                got.path, "/m/new",
                "a node that existed before the watch reported as created: the scan did not fill the known nodes"
            );
        }
        expected.retain(|e| *e != got);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_changes_missed_while_disconnected_are_reported() {
    let mut ensemble = ZkEnsemble::start(3);
    let (cut, a, writer) = cut_off_pair(&ensemble).await;
    for p in ["/m/keep", "/m/del", "/m/mod"] {
        writer
            .put(p, b"0", None, CreateOptions::PERSISTENT)
            .await
            .unwrap();
    }
    // A's own ephemeral, guarding fenced writes.
    let guard = a
        .put("/m/lock", b"a", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap()
        .guard();
    let mut watch = a.watch("/m").await.unwrap();
    let mut events = a.session_events();
    ensemble.kill(cut);
    wait_session_event(&mut events, WAIT, |e| e == SessionEvent::ConnectionLost).await;
    write_while_cut_off(&writer).await;
    // Someone else replaces the guard node with one at the same version.
    writer.delete("/m/lock", None).await.unwrap();
    writer
        .put("/m/lock", b"b", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    ensemble.restart(cut);
    wait_session_event(&mut events, WAIT, |e| e == SessionEvent::Reconnected).await;
    let mut expected = vec![
        n(NotificationType::Created, "/m/new"),
        n(NotificationType::Deleted, "/m/del"),
        n(NotificationType::Modified, "/m/mod"),
        n(NotificationType::ChildrenChanged, "/m"),
    ];
    let deadline = Instant::now() + WAIT;
    while !expected.is_empty() {
        let got = tokio::time::timeout_at(deadline, watch.next())
            .await
            .unwrap_or_else(|_| panic!("missed changes not reported: {expected:?}"))
            .unwrap();
        expected.retain(|e| *e != got);
    }
    // The replacement passes a version check, but the store learnt that its node went away unseen.
    let fenced = a
        .batch(vec![Op::Check(guard), Op::put("/m/fenced", "x")])
        .await;
    assert!(
        matches!(fenced, Err(loadmgr::store::Error::Fenced { .. })),
        "{fenced:?}"
    );
    assert!(!writer.exists("/m/fenced").await.unwrap());
    // And changes after the reconnection arrive live again.
    writer
        .put("/m/live", b"1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    expect_notifications(
        &mut watch,
        &[
            n(NotificationType::Created, "/m/live"),
            n(NotificationType::ChildrenChanged, "/m"),
        ],
        false,
    )
    .await;
}

/// The paths session `session` watches on the server at `port`, sorted (from `wchc`, the watches by
/// session: a `0x…` session id line, then one tab-indented line per watched path).
fn server_watches(port: u16, session: i64) -> Vec<String> {
    let out = zk_four_letter(port, "wchc").expect("wchc answered");
    let id = format!("0x{:x}", session as u64);
    let mut paths = Vec::new();
    let mut mine = false;
    for line in out.lines() {
        if line.starts_with(char::is_whitespace) {
            if mine {
                paths.push(line.trim().to_string());
            }
        } else {
            mine = line.trim() == id;
        }
    }
    paths.sort();
    paths
}

/// Polls `server_watches` until it is `expected` (the re-arming after a reconnection is asynchronous).
async fn wait_server_watches(port: u16, session: i64, expected: &[&str]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = server_watches(port, session);
        if got == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "session {session:#x} watches {got:?} on the server, expected {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How the watching store loses its connection in [`watches_only_its_roots_and_rearms_them_all`].
enum Cut {
    /// The server restarts (the session survives; the store may resume it on a new client).
    ServerRestart,
    /// A proxy between the store and the server closes the connection: the client reconnects itself at
    /// once, in the same session, and the store re-arms the watches on that client.
    ConnectionReset,
}

/// A session watches only the roots it subscribed to (and the nodes its guards check), so the server sends it
/// nothing for the rest of the tree; nested roots notify once; a reconnection re-arms every root.
async fn watches_only_its_roots_and_rearms_them_all(cut: Cut) {
    use NotificationType::*;
    loadmgr::testing::log_to_test_output();
    let mut server = ZkServer::start();
    let port: u16 = server
        .address()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let proxy = FaultProxy::start(server.address().parse().unwrap())
        .await
        .unwrap();
    let (address, session_timeout) = match cut {
        Cut::ServerRestart => (server.address(), Duration::from_secs(8)),
        // A long session: the store tries to resume it on a new client only after 1/20 of it.
        Cut::ConnectionReset => (proxy.address().to_string(), Duration::from_secs(16)),
    };
    let zk = Arc::new(
        ZkStore::connect(&address, None, options(session_timeout))
            .await
            .unwrap(),
    );
    let a: DynStore = zk.clone();
    let writer_zk = Arc::new(
        ZkStore::connect(&server.address(), None, options(Duration::from_secs(8)))
            .await
            .unwrap(),
    );
    let writer: DynStore = writer_zk.clone();
    writer
        .put("/a/inbox/m0", b"0", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    // A narrower root first, then one covering it, then one the first covers (no watch of its own).
    let mut inbox = a.watch("/a/inbox").await.unwrap();
    let mut all = a.watch("/a").await.unwrap();
    let _covered = a.watch("/a/inbox/x").await.unwrap();
    // An owned ephemeral guarding a batch is watched on the node itself.
    let guard = a
        .put("/g/lock", b"a", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap()
        .guard();
    a.batch(vec![Op::Check(guard.clone()), Op::put("/g/data", "1")])
        .await
        .unwrap();
    let session = zk.session_id().unwrap();
    let roots = ["/a", "/a/inbox", "/g/lock"];
    assert_eq!(server_watches(port, session), roots);
    // Writes elsewhere, even beside a guarded node, reach no watch of this session (nor of the writer).
    for p in ["/b/1", "/b/2/3", "/g/other"] {
        writer
            .put(p, b"x", None, CreateOptions::PERSISTENT)
            .await
            .unwrap();
    }
    assert!(server_watches(port, writer_zk.session_id().unwrap()).is_empty());
    // A write under both /a/inbox and /a is notified once on each stream.
    writer
        .put("/a/inbox/m1", b"1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    let m1 = [n(Created, "/a/inbox/m1"), n(ChildrenChanged, "/a/inbox")];
    expect_notifications(&mut inbox, &m1, true).await;
    expect_notifications(&mut all, &m1, true).await;
    writer
        .put("/a/z", b"1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    // Nothing repeated /a/inbox/m1 before this.
    expect_notifications(
        &mut all,
        &[n(Created, "/a/z"), n(ChildrenChanged, "/a")],
        true,
    )
    .await;
    writer
        .put("/a/inbox/m2", b"1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    expect_notifications(&mut inbox, &[n(Created, "/a/inbox/m2")], true).await;

    let mut events = a.session_events();
    match cut {
        Cut::ServerRestart => server.restart(),
        Cut::ConnectionReset => proxy.reset(),
    }
    let seen = wait_session_event(&mut events, WAIT, |e| e == SessionEvent::Reconnected).await;
    assert!(!seen.contains(&SessionEvent::SessionLost), "{seen:?}");
    assert_eq!(zk.session_id(), Some(session));
    wait_server_watches(port, session, &roots).await;
    // Live again on every root: the nested ones ...
    put_eventually(&writer, "/a/inbox/m3", b"1").await;
    put_eventually(&writer, "/a/y", b"1").await;
    expect_notifications(&mut inbox, &[n(Created, "/a/inbox/m3")], false).await;
    expect_notifications(
        &mut all,
        &[n(Created, "/a/inbox/m3"), n(Created, "/a/y")],
        false,
    )
    .await;
    // ... and the guard's: its replacement at the same version is learnt live (the check after the
    // reconnection ran before it), so the guard no longer passes.
    writer.delete("/g/lock", None).await.unwrap();
    writer
        .put("/g/lock", b"b", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let fenced = a
        .batch(vec![Op::Check(guard), Op::put("/g/fenced", "x")])
        .await;
    assert!(
        matches!(fenced, Err(loadmgr::store::Error::Fenced { .. })),
        "{fenced:?}"
    );
    assert_eq!(server_watches(port, session), roots);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_sessions_watch_only_their_roots_and_rearm_them_after_a_server_restart() {
    watches_only_its_roots_and_rearms_them_all(Cut::ServerRestart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_sessions_watch_only_their_roots_and_rearm_them_after_a_connection_reset() {
    watches_only_its_roots_and_rearms_them_all(Cut::ConnectionReset).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_ensemble_survives_losing_the_member_the_client_uses() {
    let mut ensemble = ZkEnsemble::start(3);
    let zk = ZkStore::connect(
        &ensemble.connect_string(),
        None,
        options(Duration::from_secs(4)),
    )
    .await
    .unwrap();
    let session = zk.session_id().unwrap();
    let store: DynStore = Arc::new(zk);
    store
        .put("/e/eph", b"x", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let mut events = store.session_events();
    let serving = ensemble.members_serving_session(session);
    assert_eq!(serving.len(), 1, "one member serves the session");
    ensemble.kill(serving[0]);
    let took = put_eventually(&store, "/e/data", b"after").await;
    assert!(
        took < Duration::from_secs(4),
        "writes resumed after {took:?}"
    );
    // Another member of the same session, no session loss, the ephemeral survived.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let now_serving = ensemble.members_serving_session(session);
    assert!(
        now_serving.len() == 1 && now_serving[0] != serving[0],
        "{now_serving:?}"
    );
    let mut seen = Vec::new();
    while let Some(e) = events.try_next() {
        seen.push(e);
    }
    assert!(!seen.contains(&SessionEvent::SessionLost), "{seen:?}");
    assert!(
        store
            .get("/e/eph")
            .await
            .unwrap()
            .unwrap()
            .stat
            .created_by_self
    );
    // Losing a member the client does not use changes nothing.
    let other = (0..3)
        .find(|i| *i != serving[0] && *i != now_serving[0])
        .unwrap();
    ensemble.restart(serving[0]);
    ensemble.kill(other);
    put_eventually(&store, "/e/data", b"again").await;
    assert!(
        store
            .get("/e/eph")
            .await
            .unwrap()
            .unwrap()
            .stat
            .created_by_self
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_outage_longer_than_the_lease_restores_ephemerals() {
    let mut server = EtcdServer::start();
    let store = connect(&server.url(), Duration::from_secs(3)).await;
    store
        .put("/f/eph", b"mine", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let mut events = store.session_events();
    server.kill();
    let seen = wait_session_event(&mut events, WAIT, |e| e == SessionEvent::SessionLost).await;
    assert_eq!(
        seen,
        vec![SessionEvent::ConnectionLost, SessionEvent::SessionLost]
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.restart();
    let seen = wait_session_event(&mut events, WAIT, |e| {
        e == SessionEvent::SessionReestablished
    })
    .await;
    assert!(seen.contains(&SessionEvent::Reconnected), "{seen:?}");
    let got = store
        .get("/f/eph")
        .await
        .unwrap()
        .expect("ephemeral restored");
    assert!(
        got.stat.ephemeral && got.stat.created_by_self,
        "{:?}",
        got.stat
    );
    // The old lease (kept alive by the restarted server for one more TTL) expires; the node stays.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let got = store.get("/f/eph").await.unwrap().expect("still there");
    assert!(got.stat.created_by_self);
}

/// A server so slow that re-creating a session's ephemerals outlasts the lease's TTL (what a whole cluster
/// restarting did to etcd at 1,000 brokers): the new lease is kept alive while they are re-created, so every
/// one comes back and stays, and the session is not lost again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_ephemerals_restored_more_slowly_than_the_lease_ttl_all_stay() {
    const COUNT: usize = 40;
    let session = Duration::from_secs(2);
    let server = EtcdServer::start();
    let target = server
        .endpoint()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let proxy = FaultProxy::start(target).await.unwrap();
    let store = connect(&format!("etcd:http://{}", proxy.address()), session).await;
    for i in 0..COUNT {
        store
            .put(
                &format!("/slow/e{i:02}"),
                b"mine",
                None,
                CreateOptions::EPHEMERAL,
            )
            .await
            .unwrap();
    }
    let mut events = store.session_events();
    proxy.partition();
    wait_session_event(&mut events, WAIT, |e| e == SessionEvent::SessionLost).await;
    // Every request and its answer now take 200 ms or more: re-creating 40 ephemerals one transaction at a
    // time takes at least 8 s, four TTLs.
    proxy.set_latency(Duration::from_millis(100));
    proxy.heal();
    let began = Instant::now();
    wait_session_event(&mut events, Duration::from_secs(90), |e| {
        e == SessionEvent::SessionReestablished
    })
    .await;
    assert!(
        began.elapsed() > session,
        "the re-creation was meant to outlast the TTL ({:?})",
        began.elapsed()
    );
    // Two more TTLs: a lease that expired during the re-creation would have taken its nodes with it by now.
    tokio::time::sleep(session * 2 + Duration::from_secs(1)).await;
    let observer = connect(&server.url(), Duration::from_secs(5)).await;
    let held = observer.get_children("/slow").await.unwrap();
    assert_eq!(held.len(), COUNT, "ephemerals still there: {held:?}");
    for i in 0..COUNT {
        let got = store
            .get(&format!("/slow/e{i:02}"))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("/slow/e{i:02} restored"));
        assert!(
            got.stat.ephemeral && got.stat.created_by_self,
            "{:?}",
            got.stat
        );
    }
    let later: Vec<SessionEvent> = std::iter::from_fn(|| events.try_next()).collect();
    assert!(
        !later.contains(&SessionEvent::SessionLost),
        "the session was lost again: {later:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_changes_missed_while_disconnected_are_reported() {
    let mut cluster = EtcdCluster::start(3);
    let cut = cluster.follower().expect("a follower");
    let other = (cut + 1) % 3;
    let a = connect(
        &format!("etcd:{}", cluster.endpoint(cut)),
        Duration::from_secs(8),
    )
    .await;
    let writer = connect(
        &format!("etcd:{}", cluster.endpoint(other)),
        Duration::from_secs(8),
    )
    .await;
    for p in ["/m/keep", "/m/del", "/m/mod"] {
        writer
            .put(p, b"0", None, CreateOptions::PERSISTENT)
            .await
            .unwrap();
    }
    let mut watch = a.watch("/m").await.unwrap();
    cluster.kill(cut);
    write_while_cut_off(&writer).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.restart(cut);
    expect_notifications(
        &mut watch,
        &[
            n(NotificationType::Created, "/m/new"),
            n(NotificationType::ChildrenChanged, "/m"),
            n(NotificationType::Deleted, "/m/del"),
            n(NotificationType::ChildrenChanged, "/m"),
            n(NotificationType::Modified, "/m/mod"),
        ],
        true,
    )
    .await;
    assert!(a.get("/m/new").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_cluster_survives_losing_the_endpoint_the_client_uses() {
    let mut cluster = EtcdCluster::start(3);
    let endpoints: Vec<String> = (0..3).map(|i| cluster.endpoint(i)).collect();
    let etcd = Arc::new(
        // A 6 s lease: killing the member may also cost an etcd leader election, and on a loaded 2-core CI
        // machine failover plus election can approach a 3 s TTL's client-side deadline (5/6 of it).
        EtcdStore::connect(&endpoints, options(Duration::from_secs(6)))
            .await
            .unwrap(),
    );
    let lease = etcd.lease_id();
    assert_eq!(etcd.current_endpoint(), endpoints[0]);
    let store: DynStore = etcd.clone();
    let observer = connect(&format!("etcd:{}", endpoints[1]), Duration::from_secs(10)).await;
    store
        .put("/e/eph", b"x", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let mut events = store.session_events();
    cluster.kill(0);
    let took = put_eventually(&store, "/e/data", b"after").await;
    assert!(
        took < Duration::from_secs(3),
        "writes resumed after {took:?}"
    );
    // A lease TTL and more later the lease still lives: the keep-alive moved with the store.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let mut seen = Vec::new();
    while let Some(e) = events.try_next() {
        seen.push(e);
    }
    assert!(!seen.contains(&SessionEvent::SessionLost), "{seen:?}");
    let got = observer
        .get("/e/eph")
        .await
        .unwrap()
        .expect("ephemeral survived");
    assert!(got.stat.ephemeral);
    assert!(
        store
            .get("/e/eph")
            .await
            .unwrap()
            .unwrap()
            .stat
            .created_by_self
    );
    assert!(store.is_connected());
    assert_eq!(etcd.lease_id(), lease, "same lease");
    assert_ne!(etcd.current_endpoint(), endpoints[0]);
}

/// Runs `loadmgr store ... elect` as a separate process and waits until it leads.
fn spawn_leader(url: &str, path: &str, session_ms: u64) -> std::process::Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .args([
            "store",
            "--store",
            url,
            "--session-timeout-ms",
            &session_ms.to_string(),
            "elect",
            path,
            "--broker-id",
            "proc-1:8080",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start loadmgr");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        match rx.recv_timeout(WAIT) {
            Ok(line) if line == "leading" => return child,
            Ok(_) => continue,
            Err(e) => {
                let _ = child.kill();
                panic!("the leader process did not lead: {e}");
            }
        }
    }
}

async fn leader_process_sigkill(url: &str) {
    let session = Duration::from_secs(2);
    let path = "/faults/leader";
    let mut child = spawn_leader(url, path, session.as_millis() as u64);
    let store = connect(url, session).await;
    let me = LeaderElection::start(
        store.clone(),
        path,
        LeaderBroker::new("test:8080", "http://test:8080"),
    )
    .await
    .unwrap();
    assert_eq!(
        me.state(),
        LeaderState::Following(LeaderBroker::new("proc-1:8080", "http://proc-1:8080"))
    );
    let killed = Instant::now();
    child.kill().expect("SIGKILL the leader");
    let _ = child.wait();
    assert!(
        me.wait_leading(session + Duration::from_secs(8)).await,
        "no takeover"
    );
    let took = killed.elapsed();
    assert!(
        took <= session + Duration::from_secs(2),
        "takeover after {took:?}"
    );
    eprintln!("{url}: takeover {took:?} after SIGKILL (session {session:?})");
    me.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_leader_process_killed_is_replaced_within_the_session_timeout() {
    let server = ZkServer::start();
    leader_process_sigkill(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_leader_process_killed_is_replaced_within_the_session_timeout() {
    let server = EtcdServer::start();
    leader_process_sigkill(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_store_names_address_and_time() {
    let t = Instant::now();
    let err = store::connect(
        "zk:127.0.0.1:1",
        options(Duration::from_secs(2)).with_connect_timeout(Duration::from_millis(1500)),
    )
    .await
    .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5));
    let text = err.to_string();
    assert!(
        text.contains("zk:127.0.0.1:1") && text.contains("unreachable after 1."),
        "{text}"
    );
    // And why: nothing listens there.
    assert!(text.contains("127.0.0.1:1: connection refused"), "{text}");
    let err = store::connect(
        "etcd:http://127.0.0.1:1",
        options(Duration::from_secs(2)).with_connect_timeout(Duration::from_millis(1500)),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("etcd:http://127.0.0.1:1") && text.contains("unreachable after 1."),
        "{text}"
    );
    assert!(text.contains("127.0.0.1:1: connection refused"), "{text}");
    // An unknown host is named as one.
    let err = store::connect(
        "zk:no-such-host.invalid:2181",
        options(Duration::from_secs(2)).with_connect_timeout(Duration::from_millis(1500)),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("no-such-host.invalid:2181: no such host"),
        "{text}"
    );
}

/// Restarts a store's server (same data and port) while the sessions stay valid, then checks that changes made
/// AFTER the watching store reconnected are notified live (not only by the rescan that follows a reconnect).
async fn notifications_continue_after_restart(url: &str, restart: impl FnOnce()) {
    loadmgr::testing::log_to_test_output();
    let session = Duration::from_secs(8);
    let a = connect(url, session).await;
    let writer = connect(url, session).await;
    writer
        .put("/x/0", b"0", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    let mut watch = a.watch("/x").await.unwrap();
    writer
        .put("/x/1", b"1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    expect_notifications(
        &mut watch,
        &[
            n(NotificationType::Created, "/x/1"),
            n(NotificationType::ChildrenChanged, "/x"),
        ],
        true,
    )
    .await;
    let mut events = a.session_events();
    restart();
    let seen = wait_session_event(&mut events, WAIT, |e| e == SessionEvent::Reconnected).await;
    assert!(!seen.contains(&SessionEvent::SessionLost), "{seen:?}");
    // The writer is back once this write passes; the rescan that follows a reconnect may report it too (and
    // repeat earlier events), so only its arrival is awaited. The writes after it must arrive live: no
    // reconnect (hence no rescan) follows them.
    put_eventually(&writer, "/x/0", b"sync").await;
    let deadline = Instant::now() + WAIT;
    loop {
        let got = tokio::time::timeout_at(deadline, watch.next())
            .await
            .unwrap_or_else(|_| {
                panic!("{url}: no notification for a write made after the reconnect")
            })
            .unwrap();
        if got == n(NotificationType::Modified, "/x/0") {
            break;
        }
    }
    writer
        .put("/x/1", b"2", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    writer
        .put("/x/2", b"2", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    writer.delete("/x/0", None).await.unwrap();
    expect_notifications(
        &mut watch,
        &[
            n(NotificationType::Modified, "/x/1"),
            n(NotificationType::Created, "/x/2"),
            n(NotificationType::ChildrenChanged, "/x"),
            n(NotificationType::Deleted, "/x/0"),
            n(NotificationType::ChildrenChanged, "/x"),
        ],
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_notifications_continue_after_a_server_restart() {
    let mut server = ZkServer::start();
    let url = server.url();
    notifications_continue_after_restart(&url, || server.restart()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_notifications_continue_after_a_member_restart() {
    let mut server = EtcdServer::start();
    let url = server.url();
    notifications_continue_after_restart(&url, || server.restart()).await;
}

/// `expire_session` on ZooKeeper ends the session promptly and exactly once: every round sees exactly
/// `ConnectionLost, SessionLost, Reconnected, SessionReestablished` (no connection flapping between two
/// clients sharing the session), the old session's ephemeral is gone when the call returns, and each round
/// ends well within a few session timeouts (a generous bound; it takes milliseconds). A reader keeps
/// operations in flight meanwhile, and the store's own watch keeps delivering in the new sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_expire_session_is_prompt_and_does_not_flap() {
    const ROUNDS: usize = 5;
    let session = Duration::from_secs(2);
    let server = ZkServer::start();
    let zk = Arc::new(
        ZkStore::connect(&server.address(), None, options(session))
            .await
            .unwrap(),
    );
    let store: DynStore = zk.clone();
    let observer = connect(&server.url(), session).await;
    store
        .put("/exp/eph", b"mine", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let mut watch = store.watch("/w").await.unwrap();
    let reader = {
        let store = store.clone();
        tokio::spawn(async move {
            loop {
                // Fails while the session is being replaced; only the in-flight handles matter here.
                let _ = store.get("/exp/eph").await;
                tokio::task::yield_now().await;
            }
        })
    };
    for round in 0..ROUNDS {
        let old_session = zk.session_id();
        let before = observer
            .get("/exp/eph")
            .await
            .unwrap()
            .expect("the ephemeral exists")
            .stat;
        let mut events = store.session_events();
        let start = Instant::now();
        store.expire_session().await.unwrap();
        let now = observer.get("/exp/eph").await.unwrap();
        assert!(
            !matches!(now, Some(g) if g.stat.creation_revision == before.creation_revision),
            "round {round}: the old session's ephemeral outlived expire_session"
        );
        let seen = wait_session_event(&mut events, WAIT, |e| {
            e == SessionEvent::SessionReestablished
        })
        .await;
        let took = start.elapsed();
        assert_eq!(
            seen,
            vec![
                SessionEvent::ConnectionLost,
                SessionEvent::SessionLost,
                SessionEvent::Reconnected,
                SessionEvent::SessionReestablished
            ],
            "round {round}"
        );
        assert!(
            took < 3 * session,
            "round {round}: expiry took {took:?} (session {session:?})"
        );
        assert_ne!(zk.session_id(), old_session, "round {round}: a new session");
        let got = store.get("/exp/eph").await.unwrap().expect("re-created");
        assert!(got.stat.created_by_self, "round {round}: {:?}", got.stat);
    }
    reader.abort();
    observer
        .put("/w/after", b"1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    expect_notifications(
        &mut watch,
        &[
            n(NotificationType::Created, "/w/after"),
            n(NotificationType::ChildrenChanged, "/w"),
        ],
        false,
    )
    .await;
}

/// The outages a store restart may last, as fractions of the session timeout, and how long the test's
/// session is.
const OUTAGES: [f64; 3] = [0.25, 0.5, 0.75];
const RIDE_OUT_SESSION: Duration = Duration::from_secs(6);

/// Kills the server, keeps it down so that kill → serving again lasts about `fraction` of the session
/// timeout (`startup`: how long a restart takes to serve), restarts it, and checks that the session rode it
/// out: `ConnectionLost`, `Reconnected`, nothing else, the same session and its ephemeral still there.
/// Returns (outage, reconnected after the server served again), or `None` when the server took so long to
/// start that the outage reached 80 % of the session, where losing the session is right and nothing can be
/// judged (the store has settled again when it returns, and the caller tries once more, aiming with the
/// slowest start-up seen).
async fn ride_out_restart(
    store: &DynStore,
    fraction: f64,
    startup: &mut Duration,
    kill: &mut dyn FnMut(),
    restart: &mut dyn FnMut(),
) -> Option<(Duration, Duration)> {
    let mut events = store.session_events();
    let before = store
        .get("/ride/eph")
        .await
        .unwrap()
        .expect("ephemeral")
        .stat;
    let validity = store.session_validity();
    let t0 = Instant::now();
    kill();
    let target = RIDE_OUT_SESSION.mul_f64(fraction);
    tokio::time::sleep(target.saturating_sub(*startup)).await;
    let t1 = Instant::now();
    restart();
    // Restarts get slower as the data grows: aim the next one with the slowest seen.
    *startup = (*startup).max(t1.elapsed());
    let outage = t0.elapsed();
    let seen = wait_session_event(&mut events, WAIT, |e| e == SessionEvent::Reconnected).await;
    let reconnect = t0.elapsed().saturating_sub(outage);
    eprintln!(
        "{}: outage {:.2} s ({:.0} % of the session), reconnected {} ms after the server served again",
        store.address(),
        outage.as_secs_f64(),
        100.0 * outage.as_secs_f64() / RIDE_OUT_SESSION.as_secs_f64(),
        reconnect.as_millis()
    );
    if outage >= RIDE_OUT_SESSION.mul_f64(0.8) {
        eprintln!("  the restart took too long to judge: once more");
        // Settled: the session rode it out or was re-established, and the ephemeral is there again.
        let deadline = Instant::now() + WAIT;
        while !matches!(store.get("/ride/eph").await, Ok(Some(n)) if n.stat.created_by_self) {
            assert!(Instant::now() < deadline, "the ephemeral never came back");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        return None;
    }
    assert_eq!(
        seen,
        vec![SessionEvent::ConnectionLost, SessionEvent::Reconnected],
        "an outage of {outage:?} must cost no session"
    );
    assert!(
        validity.is_valid(),
        "leases of the session stay valid across the outage"
    );
    let after = store
        .get("/ride/eph")
        .await
        .unwrap()
        .expect("ephemeral kept");
    assert_eq!(after.stat.creation_revision, before.creation_revision);
    assert!(after.stat.created_by_self);
    Some((outage, reconnect))
}

/// Up to three tries of [`ride_out_restart`], until one can be judged.
async fn ride_out_restart_judged(
    store: &DynStore,
    fraction: f64,
    startup: &mut Duration,
    kill: &mut dyn FnMut(),
    restart: &mut dyn FnMut(),
    before_each: &mut dyn FnMut(),
    after_each: &mut dyn FnMut(),
) {
    for _ in 0..3 {
        before_each();
        if ride_out_restart(store, fraction, startup, kill, restart)
            .await
            .is_some()
        {
            after_each();
            return;
        }
    }
    panic!("three restarts aimed at {fraction} of the session all took too long to judge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_restarts_shorter_than_the_session_cost_no_session() {
    let mut server = ZkServer::start();
    let zk = Arc::new(
        ZkStore::connect(&server.address(), None, options(RIDE_OUT_SESSION))
            .await
            .unwrap(),
    );
    let session = zk.session_id();
    let store: DynStore = zk.clone();
    store
        .put("/ride/eph", b"mine", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    // A restart's startup (JVM), measured once.
    let t = Instant::now();
    server.restart();
    let mut startup = t.elapsed();
    wait_until_connected(&store).await;
    let server = std::sync::Mutex::new(server);
    let session = std::sync::Mutex::new(session);
    for fraction in OUTAGES {
        ride_out_restart_judged(
            &store,
            fraction,
            &mut startup,
            &mut || server.lock().unwrap().kill(),
            &mut || server.lock().unwrap().restart(),
            &mut || *session.lock().unwrap() = zk.session_id(),
            &mut || assert_eq!(zk.session_id(), *session.lock().unwrap(), "same session"),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_restarts_shorter_than_the_session_cost_no_session() {
    let mut server = EtcdServer::start();
    let store = connect(&server.url(), RIDE_OUT_SESSION).await;
    store
        .put("/ride/eph", b"mine", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let t = Instant::now();
    server.restart();
    let mut startup = t.elapsed();
    wait_until_connected(&store).await;
    let server = std::sync::Mutex::new(server);
    for fraction in OUTAGES {
        ride_out_restart_judged(
            &store,
            fraction,
            &mut startup,
            &mut || server.lock().unwrap().kill(),
            &mut || server.lock().unwrap().restart(),
            &mut || {},
            &mut || {},
        )
        .await;
    }
}

/// Waits until the store answers again after a restart used for measuring.
async fn wait_until_connected(store: &DynStore) {
    let start = Instant::now();
    while !(store.is_connected() && store.get("/ride/eph").await.is_ok()) {
        assert!(start.elapsed() < WAIT, "the store did not come back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
