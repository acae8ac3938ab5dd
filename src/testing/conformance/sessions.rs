//! Sessions and ephemerals: ephemeral nodes live as long as the session that owns them, come back owned by
//! the new session after an expiry, and a closed store refuses work and ends its streams.

use crate::store::{CreateOptions, Error, NotificationType, Op, SessionEvent, CREATE_ONLY};

use super::{
    cleanup, expect_notifications, n, prepare_root, wait_session_event, Sessions, EVENT_TIMEOUT,
};

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
