//! The conformance suite: the same test functions for every [`MetadataStore`] backend.
//!
//! Each function takes a [`Sessions`] (a way to open more sessions on the store under test) and a root path no
//! other test uses, and panics with a message on the first contract violation. Backend differences are read
//! from [`Backend::capabilities`], never special-cased by name. The functions write only under their root
//! and delete it at the end, so one live server can serve every test of a binary in parallel.
//!
//! The tests follow Pulsar's `MetadataStoreTest` (`emptyStoreTest`, `insertionTestWithExpectedVersion`,
//! `notificationListeners`, ...) and add what the Rust contract promises on top (batches, guards, session
//! re-establishment, typed JSON).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::model::json::to_json_vec;
use crate::model::{LeaderBroker, LocalBrokerData};
use crate::store::{
    memory::MemoryStore, Backend, CreateOptions, DynStore, Error, MetadataStore, MetadataStoreExt,
    Notification, NotificationStream, NotificationType, Op, OpResult, SessionEvent,
    SessionEventStream, StoreOptions, CREATE_ONLY,
};

/// How long a test waits for an expected notification or session event.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(15);

/// Opens sessions on the store under test.
#[async_trait]
pub trait Sessions: Send + Sync {
    /// A new, independent session (another client / broker).
    async fn open(&self) -> DynStore;
}

/// Sessions on one in-memory tree.
#[derive(Debug, Clone, Default)]
pub struct MemorySessions {
    first: MemoryStore,
}

#[async_trait]
impl Sessions for MemorySessions {
    async fn open(&self) -> DynStore {
        Arc::new(self.first.new_session())
    }
}

/// Sessions opened with [`crate::store::connect`] on a URL.
#[derive(Debug, Clone)]
pub struct UrlSessions {
    /// The store URL.
    pub url: String,
    /// Options for every session.
    pub options: StoreOptions,
}

#[async_trait]
impl Sessions for UrlSessions {
    async fn open(&self) -> DynStore {
        crate::store::connect(&self.url, self.options.clone())
            .await
            .unwrap_or_else(|e| panic!("connect {}: {e}", self.url))
    }
}

/// A root path unique to this process and call, named after the test.
pub fn unique_root(test: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000_000)
        .unwrap_or(0);
    format!(
        "/conformance/{test}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Waits for the next notification.
pub async fn next_notification(stream: &mut NotificationStream) -> Notification {
    tokio::time::timeout(EVENT_TIMEOUT, stream.next())
        .await
        .unwrap_or_else(|_| panic!("no notification within {EVENT_TIMEOUT:?}"))
        .expect("notification stream ended")
}

/// Waits until `expected` arrived in this order (other notifications in between are allowed only if
/// `strict` is false) and returns everything seen.
pub async fn expect_notifications(
    stream: &mut NotificationStream,
    expected: &[Notification],
    strict: bool,
) -> Vec<Notification> {
    let mut seen = Vec::new();
    let mut i = 0;
    while i < expected.len() {
        let n = tokio::time::timeout(EVENT_TIMEOUT, stream.next())
            .await
            .unwrap_or_else(|_| panic!("waiting for {:?}; saw only {seen:?}", &expected[i..]))
            .expect("notification stream ended");
        if n == expected[i] {
            i += 1;
        } else if strict {
            panic!(
                "expected {:?} next, got {n:?}; before it: {seen:?}",
                expected[i]
            );
        }
        seen.push(n);
    }
    seen
}

/// Waits for a session event matching `pred`, returning every event seen up to it.
pub async fn wait_session_event(
    stream: &mut SessionEventStream,
    timeout: Duration,
    pred: impl Fn(SessionEvent) -> bool,
) -> Vec<SessionEvent> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let e = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| {
                panic!("no matching session event within {timeout:?}; saw {seen:?}")
            })
            .expect("session event stream ended");
        seen.push(e);
        if pred(e) {
            return seen;
        }
    }
}

fn n(kind: NotificationType, path: &str) -> Notification {
    Notification::new(kind, path)
}

async fn prepare_root(store: &dyn MetadataStore, root: &str) {
    store
        .create_parents(&format!("{root}/x"))
        .await
        .expect("create the test root");
}

async fn cleanup(store: &dyn MetadataStore, root: &str) {
    store
        .delete_recursive(root)
        .await
        .expect("delete the test root");
}

/// Invalid paths fail everywhere; missing nodes read as absent; deletes of missing nodes are `NotFound` even
/// with a version (Pulsar `emptyStoreTest`, `emptyKeyTest`).
pub async fn paths_and_missing_nodes(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    for bad in ["", "no-slash", "/trailing/", "/a//b"] {
        let is_invalid = |r: Result<(), Error>| matches!(r, Err(Error::InvalidPath { .. }));
        assert!(is_invalid(store.get(bad).await.map(|_| ())), "get {bad:?}");
        assert!(
            is_invalid(store.exists(bad).await.map(|_| ())),
            "exists {bad:?}"
        );
        assert!(
            is_invalid(store.get_children(bad).await.map(|_| ())),
            "children {bad:?}"
        );
        assert!(
            is_invalid(
                store
                    .put(bad, b"v", None, CreateOptions::PERSISTENT)
                    .await
                    .map(|_| ())
            ),
            "put {bad:?}"
        );
        assert!(is_invalid(store.delete(bad, None).await), "delete {bad:?}");
    }
    let missing = format!("{root}/missing");
    assert_eq!(store.get(&missing).await.unwrap(), None);
    assert!(!store.exists(&missing).await.unwrap());
    assert_eq!(
        store.get_children(&missing).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        store.delete(&missing, None).await,
        Err(Error::not_found(&missing))
    );
    assert_eq!(
        store.delete(&missing, Some(1)).await,
        Err(Error::not_found(&missing))
    );
    assert!(store.exists("/").await.unwrap() || store.backend() == Backend::Etcd);
    store.close().await.unwrap();
}

/// Pulsar's `insertionTestWithExpectedVersion` plus unconditional writes.
pub async fn put_version_semantics(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let key = format!("{root}/key");
    let p = CreateOptions::PERSISTENT;
    assert_eq!(
        store.put(&key, b"a", Some(0), p).await,
        Err(Error::bad_version(&key, 0))
    );
    assert_eq!(
        store.put(&key, b"a", Some(1), p).await,
        Err(Error::bad_version(&key, 1))
    );
    let stat = store.put(&key, b"a", Some(CREATE_ONLY), p).await.unwrap();
    assert_eq!((stat.version, stat.path.as_str()), (0, key.as_str()));
    assert_eq!(
        store.put(&key, b"b", Some(CREATE_ONLY), p).await,
        Err(Error::bad_version(&key, CREATE_ONLY))
    );
    assert_eq!(
        store.put(&key, b"b", Some(1), p).await,
        Err(Error::bad_version(&key, 1))
    );
    let stat = store.put(&key, b"b", Some(0), p).await.unwrap();
    assert_eq!(stat.version, 1);
    let got = store.get(&key).await.unwrap().unwrap();
    assert_eq!((got.value.as_slice(), got.stat.version), (&b"b"[..], 1));
    let stat = store.put(&key, b"c", None, p).await.unwrap();
    assert_eq!(stat.version, 2);
    let fresh = format!("{root}/fresh");
    let stat = store.put(&fresh, b"", None, p).await.unwrap();
    assert_eq!(stat.version, 0, "an unconditional put creates at version 0");
    assert_eq!(store.get(&fresh).await.unwrap().unwrap().value, b"");
    // Binary values survive untouched.
    let bin: Vec<u8> = (0..=255u8).collect();
    store.put(&fresh, &bin, Some(0), p).await.unwrap();
    assert_eq!(store.get(&fresh).await.unwrap().unwrap().value, bin);
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}

/// Deletes: versions, children, success.
pub async fn delete_semantics(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let key = format!("{root}/d");
    let child = format!("{key}/child");
    store
        .put(&key, b"x", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    store
        .put(&key, b"y", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert_eq!(
        store.delete(&key, Some(0)).await,
        Err(Error::bad_version(&key, 0))
    );
    store
        .put(&child, b"c", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert_eq!(
        store.delete(&key, None).await,
        Err(Error::NotEmpty { path: key.clone() })
    );
    assert_eq!(
        store.delete(&key, Some(1)).await,
        Err(Error::NotEmpty { path: key.clone() })
    );
    store.delete(&child, Some(0)).await.unwrap();
    assert!(!store.exists(&child).await.unwrap());
    store.delete(&key, Some(1)).await.unwrap();
    assert!(!store.exists(&key).await.unwrap());
    assert_eq!(store.get(&key).await.unwrap(), None);
    assert!(!store.delete_if_exists(&key, None).await.unwrap());
    // A re-created node starts again at version 0 with a new creation revision.
    let first = store
        .put(&key, b"1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    store.delete(&key, None).await.unwrap();
    let second = store
        .put(&key, b"2", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert_eq!(second.version, 0);
    assert_ne!(first.creation_revision, second.creation_revision);
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}

/// Children are direct, sorted names; parents exist where the backend has implicit parents.
pub async fn children_listing(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let caps = store.backend().capabilities();
    let base = format!("{root}/brokers");
    for name in ["b:8080", "a:8080", "c-1", "c"] {
        store
            .put(
                &format!("{base}/{name}"),
                b"{}",
                None,
                CreateOptions::PERSISTENT,
            )
            .await
            .unwrap();
    }
    store
        .put(
            &format!("{base}/a:8080/deep/er"),
            b"",
            None,
            CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
    store
        .put(
            &format!("{root}/brokers-extra/x"),
            b"",
            None,
            CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
    assert_eq!(
        store.get_children(&base).await.unwrap(),
        vec!["a:8080", "b:8080", "c", "c-1"]
    );
    assert_eq!(
        store.get_children(&format!("{base}/a:8080")).await.unwrap(),
        vec!["deep"]
    );
    assert_eq!(
        store.get_children(&format!("{base}/c")).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(store.exists(&base).await.unwrap(), caps.implicit_parents);
    assert_eq!(
        store.exists(&format!("{base}/a:8080/deep")).await.unwrap(),
        caps.implicit_parents
    );
    let top = store.get_children(root).await.unwrap();
    assert_eq!(top, vec!["brokers", "brokers-extra"]);
    assert!(store
        .get_children("/")
        .await
        .unwrap()
        .contains(&"conformance".to_string()));
    cleanup(&*store, root).await;
    assert!(store.get_children(root).await.unwrap().is_empty());
    store.close().await.unwrap();
}

/// Stat fields: versions, revisions, times, ephemeral flags, created-by-self.
pub async fn stat_fields(sessions: &dyn Sessions, root: &str) {
    let a = sessions.open().await;
    let b = sessions.open().await;
    let caps = a.backend().capabilities();
    let key = format!("{root}/stat");
    let created = a
        .put(&key, b"1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    let updated = a
        .put(&key, b"2", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert_eq!(updated.creation_revision, created.creation_revision);
    assert!(updated.modification_revision > created.modification_revision);
    let got = a.get(&key).await.unwrap().unwrap().stat;
    assert_eq!(got, updated, "get returns what the put returned");
    assert!(!got.ephemeral && !got.created_by_self);
    if caps.timestamps {
        assert!(got.created_ms > 1_600_000_000_000, "{got:?}");
        assert!(got.modified_ms >= got.created_ms);
    } else {
        assert_eq!((got.created_ms, got.modified_ms), (0, 0));
    }
    let eph = format!("{root}/eph");
    let s = a
        .put(&eph, b"e", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    assert!(s.ephemeral && s.created_by_self, "{s:?}");
    let seen_by_b = b.get(&eph).await.unwrap().unwrap().stat;
    assert!(
        seen_by_b.ephemeral && !seen_by_b.created_by_self,
        "{seen_by_b:?}"
    );
    assert_eq!(a.get(&eph).await.unwrap().unwrap().stat, s);
    a.delete(&eph, None).await.unwrap();
    cleanup(&*a, root).await;
    a.close().await.unwrap();
    b.close().await.unwrap();
}

/// Ephemerals: updates keep them ephemeral (etcd: the lease), they vanish when their session closes, and
/// another session is notified.
pub async fn ephemeral_lifecycle(sessions: &dyn Sessions, root: &str) {
    let owner = sessions.open().await;
    let observer = sessions.open().await;
    prepare_root(&*observer, root).await;
    let key = format!("{root}/broker-1:8080");
    let mut watch = observer.watch(root).await.unwrap();
    owner
        .put(&key, b"v0", Some(CREATE_ONLY), CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let s = owner
        .put(&key, b"v1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert!(
        s.ephemeral && s.version == 1,
        "an update keeps the node ephemeral: {s:?}"
    );
    let s = owner
        .put(&key, b"v2", Some(1), CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert!(
        s.ephemeral && s.version == 2,
        "a CAS update keeps the node ephemeral: {s:?}"
    );
    let seen = observer.get(&key).await.unwrap().unwrap();
    assert!(seen.stat.ephemeral && !seen.stat.created_by_self);
    assert_eq!(seen.value, b"v2");
    expect_notifications(
        &mut watch,
        &[
            n(NotificationType::Created, &key),
            n(NotificationType::ChildrenChanged, root),
            n(NotificationType::Modified, &key),
            n(NotificationType::Modified, &key),
        ],
        true,
    )
    .await;
    owner.close().await.unwrap();
    expect_notifications(
        &mut watch,
        &[
            n(NotificationType::Deleted, &key),
            n(NotificationType::ChildrenChanged, root),
        ],
        true,
    )
    .await;
    assert_eq!(observer.get(&key).await.unwrap(), None);
    assert_eq!(owner.get(&key).await, Err(Error::Closed));
    if observer
        .backend()
        .capabilities()
        .ephemeral_parents_forbidden
    {
        let parent = format!("{root}/eph-parent");
        observer
            .put(&parent, b"", None, CreateOptions::EPHEMERAL)
            .await
            .unwrap();
        let r = observer
            .put(
                &format!("{parent}/child"),
                b"",
                None,
                CreateOptions::PERSISTENT,
            )
            .await;
        assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
        observer.delete(&parent, None).await.unwrap();
    }
    cleanup(&*observer, root).await;
    observer.close().await.unwrap();
}

/// Sequential nodes: ZooKeeper's 10-digit suffix, increasing, with and without ephemeral.
pub async fn sequential_nodes(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let prefix = format!("{root}/seq/n-");
    let mut paths = Vec::new();
    for (i, options) in [
        CreateOptions::SEQUENTIAL,
        CreateOptions::EPHEMERAL_SEQUENTIAL,
        CreateOptions::SEQUENTIAL,
    ]
    .into_iter()
    .enumerate()
    {
        let stat = store
            .put(&prefix, format!("{i}").as_bytes(), None, options)
            .await
            .unwrap();
        let suffix = stat
            .path
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{} under {prefix}", stat.path));
        assert_eq!(suffix.len(), 10, "{}", stat.path);
        assert!(suffix.bytes().all(|c| c.is_ascii_digit()), "{}", stat.path);
        assert_eq!(stat.ephemeral, options.ephemeral);
        assert_eq!(stat.version, 0);
        assert_eq!(
            store.get(&stat.path).await.unwrap().unwrap().value,
            format!("{i}").as_bytes()
        );
        paths.push(stat.path);
    }
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted, "suffixes increase");
    sorted.dedup();
    assert_eq!(sorted.len(), 3);
    let children = store.get_children(&format!("{root}/seq")).await.unwrap();
    assert_eq!(children.len(), 3);
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}

/// Pulsar's `notificationListeners` sequence, and prefix filtering.
pub async fn notification_sequence(sessions: &dyn Sessions, root: &str) {
    let writer = sessions.open().await;
    let watcher = sessions.open().await;
    prepare_root(&*writer, root).await;
    let key = format!("{root}/key");
    let child = format!("{key}/xx");
    let mut all = watcher.watch(root).await.unwrap();
    let mut only_other = watcher.watch(&format!("{root}/other")).await.unwrap();
    let mut own = writer.watch(&key).await.unwrap();
    writer
        .put(&key, b"1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    writer
        .put(&key, b"2", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    writer
        .put(&child, b"", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    writer.delete(&child, None).await.unwrap();
    writer.delete(&key, None).await.unwrap();
    let other = format!("{root}/other");
    writer
        .put(&other, b"", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    let expected = [
        n(NotificationType::Created, &key),
        n(NotificationType::ChildrenChanged, root),
        n(NotificationType::Modified, &key),
        n(NotificationType::Created, &child),
        n(NotificationType::ChildrenChanged, &key),
        n(NotificationType::Deleted, &child),
        n(NotificationType::ChildrenChanged, &key),
        n(NotificationType::Deleted, &key),
        n(NotificationType::ChildrenChanged, root),
        n(NotificationType::Created, &other),
        n(NotificationType::ChildrenChanged, root),
    ];
    expect_notifications(&mut all, &expected, true).await;
    // The writer's own store notifies it too, filtered to its prefix.
    expect_notifications(
        &mut own,
        &expected[..8]
            .iter()
            .filter(|e| e.path != *root)
            .cloned()
            .collect::<Vec<_>>(),
        true,
    )
    .await;
    // A subscriber of a sibling prefix saw only its node.
    assert_eq!(
        next_notification(&mut only_other).await,
        n(NotificationType::Created, &other)
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(only_other.try_next(), None);
    assert_eq!(own.try_next(), None);
    cleanup(&*writer, root).await;
    writer.close().await.unwrap();
    watcher.close().await.unwrap();
}

/// Unconditional puts in batches report the key's real new version, creation revision and lease after other
/// sessions wrote, deleted or re-created it between them (a backend that remembers what it last wrote must
/// notice that it is stale).
pub async fn batch_updates_after_others_wrote(sessions: &dyn Sessions, root: &str) {
    let (a, b) = (sessions.open().await, sessions.open().await);
    let key = format!("{root}/k");
    let put = |value: &'static str| {
        let a = a.clone();
        let key = key.clone();
        async move {
            match a.batch(vec![Op::put(&key, value)]).await.unwrap().pop() {
                Some(OpResult::Put(stat)) => stat,
                other => panic!("a put answered {other:?}"),
            }
        }
    };
    let first = put("a-0").await;
    assert_eq!(first.version, 0);
    assert_eq!(put("a-1").await.version, 1);
    // Another session writes in between.
    let theirs = b
        .put(&key, b"b-2", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert_eq!(theirs.version, 2);
    let after = put("a-3").await;
    assert_eq!(after.version, 3);
    assert_eq!(after.creation_revision, first.creation_revision);
    assert_eq!(b.get(&key).await.unwrap().unwrap().value, b"a-3");
    // Deleted and created again by the other session: a new node.
    b.delete(&key, None).await.unwrap();
    let again = b
        .put(&key, b"b-0", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert_eq!(again.version, 0);
    assert_ne!(again.creation_revision, first.creation_revision);
    let over = put("a-1").await;
    assert_eq!(over.version, 1);
    assert_eq!(over.creation_revision, again.creation_revision);
    assert!(!over.ephemeral);
    // Replaced by the other session's ephemeral: the update keeps that node, and its owner.
    b.delete(&key, None).await.unwrap();
    let eph = b
        .put(&key, b"b-eph", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let kept = put("a-on-eph").await;
    assert_eq!(kept.version, 1);
    assert_eq!(kept.creation_revision, eph.creation_revision);
    assert!(kept.ephemeral && !kept.created_by_self, "{kept:?}");
    let seen = b.get(&key).await.unwrap().unwrap();
    assert_eq!(seen.value, b"a-on-eph");
    assert!(seen.stat.ephemeral && seen.stat.created_by_self);
    // Gone: the put creates it again.
    b.delete(&key, None).await.unwrap();
    let created = put("a-new").await;
    assert_eq!(created.version, 0);
    assert!(!created.ephemeral);
    cleanup(&*a, root).await;
    a.close().await.unwrap();
    b.close().await.unwrap();
}

/// Batches: all-or-nothing, per-op errors, guards.
pub async fn batch_semantics(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let (a, b, c) = (
        format!("{root}/a"),
        format!("{root}/b"),
        format!("{root}/c"),
    );
    store
        .put(&c, b"c0", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    let results = store
        .batch(vec![
            Op::put(&a, "a0"),
            Op::Put {
                path: b.clone(),
                value: b"b0".to_vec(),
                expected_version: Some(CREATE_ONLY),
                options: CreateOptions::EPHEMERAL,
            },
            Op::Put {
                path: c.clone(),
                value: b"c1".to_vec(),
                expected_version: Some(0),
                options: CreateOptions::PERSISTENT,
            },
        ])
        .await
        .unwrap();
    let stats: Vec<_> = results
        .iter()
        .map(|r| match r {
            OpResult::Put(s) => s.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        stats.iter().map(|s| s.version).collect::<Vec<_>>(),
        vec![0, 0, 1]
    );
    assert_eq!(
        stats.iter().map(|s| s.path.clone()).collect::<Vec<_>>(),
        vec![a.clone(), b.clone(), c.clone()]
    );
    assert!(stats[1].ephemeral && !stats[0].ephemeral);
    let guard = store.get(&b).await.unwrap().unwrap().stat.guard();

    // A failing op applies nothing; the error names it.
    let err = store
        .batch(vec![
            Op::put(&a, "a1"),
            Op::Put {
                path: c.clone(),
                value: b"c2".to_vec(),
                expected_version: Some(0),
                options: CreateOptions::PERSISTENT,
            },
        ])
        .await
        .unwrap_err();
    assert_eq!(err, Error::bad_version(&c, 0));
    assert_eq!(store.get(&a).await.unwrap().unwrap().value, b"a0");
    let err = store
        .batch(vec![
            Op::put(&a, "a1"),
            Op::delete(format!("{root}/missing")),
        ])
        .await
        .unwrap_err();
    assert_eq!(err, Error::not_found(&format!("{root}/missing")));
    assert_eq!(store.get(&a).await.unwrap().unwrap().stat.version, 0);

    // Guards.
    let ok = store
        .batch(vec![
            Op::Check(guard.clone()),
            Op::put(&a, "fenced"),
            Op::delete(&c),
        ])
        .await
        .unwrap();
    assert_eq!(ok[0], OpResult::Check);
    assert_eq!(ok[2], OpResult::Delete);
    if store.backend().capabilities().guard_checks_incarnation {
        store.delete(&b, None).await.unwrap();
        store
            .put(&b, b"b0", Some(CREATE_ONLY), CreateOptions::EPHEMERAL)
            .await
            .unwrap();
        let err = store
            .batch(vec![Op::Check(guard.clone()), Op::put(&a, "stale")])
            .await
            .unwrap_err();
        assert_eq!(err, Error::Fenced { path: b.clone() });
        assert_eq!(store.get(&a).await.unwrap().unwrap().value, b"fenced");
    }
    let s = store
        .put(&b, b"b1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    let err = store
        .batch(vec![Op::Check(guard), Op::put(&a, "x")])
        .await
        .unwrap_err();
    assert_eq!(err, Error::Fenced { path: b.clone() });
    assert_eq!(store.get(&a).await.unwrap().unwrap().value, b"fenced");
    store.delete(&b, None).await.unwrap();
    let err = store
        .batch(vec![Op::Check(s.guard()), Op::put(&a, "x")])
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::Fenced { path: b.clone() },
        "a deleted guard fails"
    );
    let s = store
        .put(&b, b"b0", Some(CREATE_ONLY), CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    store
        .batch(vec![Op::Check(s.guard()), Op::put(&a, "x")])
        .await
        .unwrap();
    assert_eq!(store.batch(vec![]).await.unwrap(), vec![]);

    // Large batches (over etcd's 128 operations per txn) still apply every op.
    let many: Vec<Op> = (0..300)
        .map(|i| Op::put(format!("{root}/many/k{i:03}"), vec![b'x'; 100]))
        .collect();
    let results = store.batch(many).await.unwrap();
    assert_eq!(results.len(), 300);
    assert_eq!(
        store
            .get_children(&format!("{root}/many"))
            .await
            .unwrap()
            .len(),
        300
    );
    store.delete(&b, None).await.unwrap();
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}

/// Session expiry: `SessionLost`, `SessionReestablished`, and the store's ephemerals exist again, owned by
/// the new session; another session sees the node go and come back.
pub async fn session_expiry_restores_ephemerals(sessions: &dyn Sessions, root: &str) {
    let owner = sessions.open().await;
    let observer = sessions.open().await;
    prepare_root(&*observer, root).await;
    let key = format!("{root}/lock");
    let gone = format!("{root}/deleted-before");
    owner
        .put(&key, b"mine", Some(CREATE_ONLY), CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    owner
        .put(&key, b"mine-2", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    owner
        .put(&gone, b"", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    owner.delete(&gone, None).await.unwrap();
    let before = owner.get(&key).await.unwrap().unwrap().stat;
    let mut events = owner.session_events();
    let mut watch = observer.watch(&key).await.unwrap();
    owner.expire_session().await.unwrap();
    let seen = wait_session_event(&mut events, EVENT_TIMEOUT, |e| {
        e == SessionEvent::SessionReestablished
    })
    .await;
    let lost = seen.iter().position(|e| *e == SessionEvent::SessionLost);
    assert!(
        lost.is_some(),
        "SessionLost before SessionReestablished: {seen:?}"
    );
    expect_notifications(
        &mut watch,
        &[
            n(NotificationType::Deleted, &key),
            n(NotificationType::Created, &key),
        ],
        false,
    )
    .await;
    let after = owner.get(&key).await.unwrap().unwrap();
    assert_eq!(after.value, b"mine-2");
    assert!(
        after.stat.ephemeral && after.stat.created_by_self,
        "{:?}",
        after.stat
    );
    assert_ne!(after.stat.creation_revision, before.creation_revision);
    assert!(
        !observer
            .get(&key)
            .await
            .unwrap()
            .unwrap()
            .stat
            .created_by_self
    );
    assert_eq!(
        owner.get(&gone).await.unwrap(),
        None,
        "deleted ephemerals stay deleted"
    );
    assert!(owner.is_connected());
    owner.close().await.unwrap();
    assert_eq!(observer.get(&key).await.unwrap(), None);
    cleanup(&*observer, root).await;
    observer.close().await.unwrap();
}

/// Typed JSON: model types round-trip, stored bytes are the Java-compatible JSON, bad content is reported.
pub async fn typed_json_round_trip(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let leader_path = format!("{root}/leader");
    let leader = LeaderBroker::new("broker-1:8080", "http://broker-1:8080");
    store
        .put_json(
            &leader_path,
            &leader,
            Some(CREATE_ONLY),
            CreateOptions::EPHEMERAL,
        )
        .await
        .unwrap();
    let raw = store.get(&leader_path).await.unwrap().unwrap().value;
    assert_eq!(
        String::from_utf8(raw).unwrap(),
        r#"{"brokerId":"broker-1:8080","serviceUrl":"http://broker-1:8080"}"#
    );
    let (back, stat) = store
        .get_json::<LeaderBroker>(&leader_path)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back, leader);
    assert!(stat.ephemeral);
    let report: LocalBrokerData = serde_json::from_str(
        r#"{"webServiceUrl":"http://b1:8080","pulsarServiceUrl":"pulsar://b1:6650",
            "cpu":{"usage":12.5,"limit":100.0},"numBundles":3,"msgRateIn":1.0E7}"#,
    )
    .unwrap();
    let report_path = format!("{root}/brokers/b1:8080");
    store
        .put_json(&report_path, &report, None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let raw = store.get(&report_path).await.unwrap().unwrap().value;
    assert_eq!(raw, to_json_vec(&report));
    let (back, _) = store
        .get_json::<LocalBrokerData>(&report_path)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back, report);
    assert_eq!(
        store
            .get_json::<LeaderBroker>(&format!("{root}/none"))
            .await
            .unwrap(),
        None
    );
    store
        .put(&leader_path, b"not json", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    let err = store
        .get_json::<LeaderBroker>(&leader_path)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Content { path, .. } if *path == leader_path),
        "{err:?}"
    );
    assert_eq!(
        store
            .create(&leader_path, b"x", CreateOptions::PERSISTENT)
            .await
            .unwrap_err(),
        Error::AlreadyExists {
            path: leader_path.clone()
        }
    );
    store.delete(&leader_path, None).await.unwrap();
    store.delete(&report_path, None).await.unwrap();
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}

/// `create_parents` makes explicit parents; `delete_recursive` removes a tree.
pub async fn parents_and_recursive_delete(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let deep = format!("{root}/p/q/r");
    store.create_parents(&deep).await.unwrap();
    assert!(store.exists(&format!("{root}/p/q")).await.unwrap());
    assert!(!store.exists(&deep).await.unwrap());
    store.create_parents(&deep).await.unwrap();
    for leaf in ["r", "s", "t/u"] {
        store
            .put(
                &format!("{root}/p/q/{leaf}"),
                b"",
                None,
                CreateOptions::PERSISTENT,
            )
            .await
            .unwrap();
    }
    store
        .put(&format!("{root}/p/e"), b"", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    store.delete_recursive(&format!("{root}/p")).await.unwrap();
    assert!(!store.exists(&format!("{root}/p")).await.unwrap());
    assert!(store
        .get_children(&format!("{root}/p"))
        .await
        .unwrap()
        .is_empty());
    store
        .delete_recursive(&format!("{root}/never"))
        .await
        .unwrap();
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}

/// A closed store refuses work and ends its streams.
pub async fn closed_store(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let mut watch = store.watch(root).await.unwrap();
    let mut events = store.session_events();
    store.close().await.unwrap();
    assert_eq!(store.get(root).await, Err(Error::Closed));
    assert_eq!(
        store.put(root, b"", None, CreateOptions::PERSISTENT).await,
        Err(Error::Closed)
    );
    assert_eq!(
        store.batch(vec![Op::put(root, "x")]).await,
        Err(Error::Closed)
    );
    let end = tokio::time::timeout(EVENT_TIMEOUT, watch.next())
        .await
        .expect("stream ends");
    assert_eq!(end, None);
    let end = tokio::time::timeout(EVENT_TIMEOUT, events.next())
        .await
        .expect("stream ends");
    assert_eq!(end, None);
    assert!(!store.is_connected());
    store.close().await.unwrap();
}
