//! Notifications: what a watch on a prefix delivers, in which order, to the writer's own session and to
//! others, and that a watch sees nothing outside its prefix.

use std::time::Duration;

use crate::store::{CreateOptions, NodeAfter, NotificationType};

use super::{cleanup, expect_notifications, n, next_notification, prepare_root, Sessions};

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

/// A prefix watched after a narrower one that it covers (a backend may watch them as separate roots): every
/// change reaches each subscriber whose prefix covers it exactly once, and a sibling whose name extends a
/// watched prefix (`…/bc` beside `…/b`) is not under it.
pub async fn nested_roots(sessions: &dyn Sessions, root: &str) {
    let writer = sessions.open().await;
    let watcher = sessions.open().await;
    prepare_root(&*writer, root).await;
    let a = format!("{root}/a");
    let b = format!("{a}/b");
    let bc = format!("{a}/bc");
    let x = format!("{b}/x");
    for p in [&a, &b] {
        writer
            .put(p, b"", None, CreateOptions::PERSISTENT)
            .await
            .unwrap();
    }
    let mut narrow = watcher.watch(&b).await.unwrap();
    let mut wide = watcher.watch(&a).await.unwrap();
    for (path, value) in [(&x, b"1"), (&bc, b"1"), (&x, b"2")] {
        writer
            .put(path, value, None, CreateOptions::PERSISTENT)
            .await
            .unwrap();
    }
    let under_b = [
        n(NotificationType::Created, &x),
        n(NotificationType::ChildrenChanged, &b),
        n(NotificationType::Modified, &x),
    ];
    let beside_b = [
        n(NotificationType::Created, &bc),
        n(NotificationType::ChildrenChanged, &a),
    ];
    expect_notifications(&mut narrow, &under_b, true).await;
    // Delivery is ordered per watched root: the changes under `b` and those beside it each come in order,
    // but a backend that watches `a` beside `b` may interleave the two.
    let mut seen = Vec::new();
    for _ in 0..under_b.len() + beside_b.len() {
        seen.push(next_notification(&mut wide).await);
    }
    let (from_b, rest): (Vec<_>, Vec<_>) = seen.iter().cloned().partition(|e| under_b.contains(e));
    assert_eq!(from_b, under_b, "the changes under b, in order: {seen:?}");
    assert_eq!(rest, beside_b, "the changes beside b, in order: {seen:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        narrow.try_next(),
        None,
        "a change came twice or from outside the prefix"
    );
    assert_eq!(wide.try_next(), None, "a change came twice");
    cleanup(&*writer, root).await;
    writer.close().await.unwrap();
    watcher.close().await.unwrap();
}

/// The state a notification carries ([`NodeAfter`]): when given, exactly what a get right after that change
/// answered (value, version, revisions, ephemerality, and `created_by_self` as the receiving session sees it);
/// `Gone` only for a deletion; never on `ChildrenChanged`. A backend whose capabilities say it carries state
/// carries it on every change of the node itself.
pub async fn notifications_carry_the_state_after_the_change(sessions: &dyn Sessions, root: &str) {
    let writer = sessions.open().await;
    let watcher = sessions.open().await;
    prepare_root(&*writer, root).await;
    let key = format!("{root}/key");
    let mut theirs = watcher.watch(root).await.unwrap();
    let mut own = writer.watch(root).await.unwrap();
    let first = writer
        .put(&key, b"one", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let second = writer
        .put(&key, b"two", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    writer.delete(&key, None).await.unwrap();
    let carries = writer.backend().capabilities().notifications_carry_state;
    let written = [(b"one".as_slice(), &first), (b"two".as_slice(), &second)];
    for (stream, is_writer) in [(&mut theirs, false), (&mut own, true)] {
        let expected = [
            n(NotificationType::Created, &key),
            n(NotificationType::ChildrenChanged, root),
            n(NotificationType::Modified, &key),
            n(NotificationType::Deleted, &key),
            n(NotificationType::ChildrenChanged, root),
        ];
        let seen = expect_notifications(stream, &expected, true).await;
        let mut puts = written.iter();
        for got in &seen {
            match (&got.after, got.kind) {
                (NodeAfter::Unknown, NotificationType::ChildrenChanged) => {}
                (NodeAfter::Unknown, kind) => assert!(
                    !carries,
                    "{kind} of {} carried no state on a backend that carries it",
                    got.path
                ),
                (
                    NodeAfter::Value(found),
                    NotificationType::Created | NotificationType::Modified,
                ) => {
                    let (value, stat) = puts.next().expect("one state per put");
                    assert_eq!(found.value, *value, "the value after {}", got.kind);
                    let s = &found.stat;
                    assert_eq!(
                        (
                            s.version,
                            s.creation_revision,
                            s.modification_revision,
                            s.ephemeral
                        ),
                        (
                            stat.version,
                            stat.creation_revision,
                            stat.modification_revision,
                            true
                        ),
                        "the stat after {}",
                        got.kind
                    );
                    assert_eq!(
                        s.created_by_self, is_writer,
                        "created_by_self as this session sees it"
                    );
                }
                (NodeAfter::Gone, NotificationType::Deleted) => {}
                (after, kind) => panic!("{kind} of {} carried {after:?}", got.path),
            }
        }
        if carries {
            assert!(puts.next().is_none(), "every put's state was carried");
        }
    }
    cleanup(&*writer, root).await;
    writer.close().await.unwrap();
    watcher.close().await.unwrap();
}
