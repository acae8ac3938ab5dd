//! Batches and guards: a batch applies all its operations or none and names the one that failed, a guard
//! fences it on another node's incarnation, and unconditional puts in a batch report the node's real state
//! after other sessions changed it.

use crate::store::{CreateOptions, Error, Op, OpResult, CREATE_ONLY};

use super::{cleanup, Sessions};

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
    // A created node's stat is its own (some ZooKeeper servers answer the creates of a multi without it).
    for (path, s) in [(&a, &stats[0]), (&b, &stats[1])] {
        let read = store.get(path).await.unwrap().unwrap().stat;
        assert_eq!(
            (s.creation_revision, s.modification_revision),
            (read.creation_revision, read.modification_revision),
            "{path}"
        );
        assert!(s.creation_revision > 0, "{path}: {s:?}");
    }
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
