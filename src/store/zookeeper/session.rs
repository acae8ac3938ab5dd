//! The ZooKeeper session loop: the supervisor that follows the client's state, the probe that keeps the
//! deadline of [`crate::store::session`] fed, and the replacement of an expired session (new client, watch
//! re-added, ephemerals re-created).
//!
//! # Contract
//!
//! See "Sessions" in the module docs of [`super`]. In short: `Disconnected` → `ConnectionLost`; still
//! disconnected 5/6 of the negotiated session timeout after the send time of the last answered request →
//! `SessionLost` (the probe asks the server an `exists` of `/` every 1/6 of the timeout while connected, so
//! that time is recent); `SyncConnected` → `Reconnected` (+ `SessionReestablished` after a `SessionLost`);
//! `Expired` or a requested expiry → a new session, retried with backoff, the recursive watch re-added, this
//! store's ephemerals re-created with their last values, then `Reconnected`, `SessionReestablished`.
//!
//! Each session's tasks carry its *generation* and stop once the store moves on to a newer one.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use tokio::time::Instant;
use zookeeper_client as zk;

use super::Inner;
use crate::store::{CreateOptions, Error, Result};

/// Makes `client` current and starts its supervisor.
pub(super) fn install_client(inner: &Arc<Inner>, client: zk::Client) {
    let generation = inner.generation.fetch_add(1, Ordering::SeqCst) + 1;
    let states = client.state_watcher();
    let timeout = client.session_timeout();
    inner.sessions.lock().unwrap().push(client.session_id().0);
    *inner.client.write().unwrap() = Some(client);
    for czxid in inner.owned.lock().unwrap().values_mut() {
        *czxid = -1;
    }
    // The session was just established or found again: the server answered a moment ago.
    inner.session.acknowledged_now();
    inner.session.mark_up();
    let weak = Arc::downgrade(inner);
    inner.spawn_task(supervise(weak.clone(), states, timeout, generation));
    inner.spawn_task(probe(weak, timeout, generation));
}

/// While connected, asks the server something cheap every 1/6 of the session timeout and records the send
/// time of each answered request (see the module docs).
async fn probe(weak: Weak<Inner>, timeout: Duration, generation: u64) {
    let every = (timeout / 6).max(Duration::from_millis(50));
    loop {
        tokio::time::sleep(every).await;
        let client = {
            let Some(inner) = weak.upgrade() else { return };
            if inner.closed.load(Ordering::SeqCst)
                || inner.generation.load(Ordering::SeqCst) != generation
            {
                return;
            }
            if !inner.session.is_connected() {
                continue;
            }
            match inner.client() {
                Ok(c) => c,
                Err(_) => return,
            }
        };
        let sent = Instant::now();
        let answered = matches!(
            tokio::time::timeout(every, client.check_stat("/")).await,
            Ok(Ok(_))
        );
        // No handle may outlive the request: `expire_session` closes the session by dropping them all.
        drop(client);
        if answered {
            let Some(inner) = weak.upgrade() else { return };
            if inner.generation.load(Ordering::SeqCst) == generation {
                inner.session.acknowledged(sent);
            }
        }
    }
}

/// Follows one client's session state; on expiry opens a new session and restores the store's state.
async fn supervise(
    weak: Weak<Inner>,
    mut states: zk::StateWatcher,
    timeout: Duration,
    generation: u64,
) {
    let mut lost_timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        let state = tokio::select! {
            s = states.changed() => s,
            _ = async { lost_timer.as_mut().expect("armed").await }, if lost_timer.is_some() => {
                lost_timer = None;
                let Some(inner) = weak.upgrade() else { return };
                if inner.session.session_lost() {
                    tracing::warn!(store = %inner.address(), "no answer for 5/6 of the session timeout: session lost");
                }
                continue;
            }
        };
        let Some(inner) = weak.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst)
            || inner.generation.load(Ordering::SeqCst) != generation
        {
            return;
        }
        match state {
            zk::SessionState::Disconnected => {
                inner.note_disconnected();
                if inner.session.connection_lost() {
                    tracing::warn!(store = %inner.address(), "connection lost");
                    let deadline = inner.session.lost_at(timeout);
                    lost_timer = Some(Box::pin(tokio::time::sleep_until(deadline)));
                }
            }
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                lost_timer = None;
                // The server accepted the session on the new connection just now.
                inner.session.acknowledged_now();
                if inner.session.reconnected() {
                    tracing::info!(store = %inner.address(), "reconnected");
                    // The watch is re-added and the missed changes rescanned by the event loop, which sees
                    // the reconnection in order with the notifications (see `after_reconnect`).
                }
            }
            zk::SessionState::Expired | zk::SessionState::AuthFailed => {
                tracing::warn!(store = %inner.address(), ?state, "session ended; opening a new one");
                lose_session(&inner);
                drop(inner);
                reestablish(weak).await;
                return;
            }
            zk::SessionState::Closed => return,
        }
    }
}

/// The session is gone (expired, or ended by `expire_session`): announces it and forgets the client; nothing
/// of this session is used again.
fn lose_session(inner: &Inner) {
    inner.note_disconnected();
    // Retires the session's supervisor, event loop and re-arm tasks.
    inner.generation.fetch_add(1, Ordering::SeqCst);
    inner.client.write().unwrap().take();
    for czxid in inner.owned.lock().unwrap().values_mut() {
        *czxid = -1;
    }
    inner.session.lost();
}

/// Ends the session from this store's own client (see `MetadataStore::expire_session` of
/// [`super::ZkStore`]): lets go of every handle, waits until the client reports the session closed (at most
/// twice the session timeout), then re-establishes in the background.
pub(super) async fn expire(inner: &Arc<Inner>) -> Result<()> {
    let client = inner.client()?;
    let mut states = client.state_watcher();
    let limit = client.session_timeout() * 2;
    let session = client.session_id();
    // In-flight operations keep their handles until they finish (their requests are already sent).
    for task in inner.tasks.lock().unwrap().drain(..) {
        task.abort();
    }
    lose_session(inner);
    drop(client);
    let deadline = Instant::now() + limit;
    loop {
        let state = states.peek_state();
        if state.is_terminated() {
            tracing::info!(store = %inner.address(), %session, ?state, "session ended on request");
            break;
        }
        if tokio::time::timeout_at(deadline, states.changed())
            .await
            .is_err()
        {
            tracing::warn!(
                store = %inner.address(),
                %session,
                "the session was not closed within {limit:?}; the server will expire it"
            );
            break;
        }
    }
    inner.spawn_task(reestablish(Arc::downgrade(inner)));
    Ok(())
}

/// Opens a new session (retrying with backoff until it works or the store is closed), re-adds the watch,
/// re-creates the ephemerals, announces it and resynchronises notifications.
async fn reestablish(weak: Weak<Inner>) {
    let attempt = || async {
        let inner = weak.upgrade().ok_or(Error::Closed)?;
        if inner.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        let timeout = inner.options.session_timeout;
        match tokio::time::timeout(timeout, new_client(&inner)).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout {
                operation: "connect".into(),
                after: timeout,
            }),
        }
    };
    let client = attempt
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(100))
                .with_max_delay(Duration::from_secs(5))
                .without_max_times(),
        )
        .when(|e| !matches!(e, Error::Closed))
        .notify(|e, d| tracing::warn!("new ZooKeeper session failed ({e}); retrying in {d:?}"))
        .await;
    let Ok(client) = client else { return };
    let Some(inner) = weak.upgrade() else { return };
    if inner.closed.load(Ordering::SeqCst) {
        return;
    }
    install_client(&inner, client);
    let generation = inner.generation.load(Ordering::SeqCst);
    let watched = if *inner.watch_generation.lock().await != 0 {
        match inner.ensure_watch().await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("re-adding the recursive watch failed ({e}); retrying");
                inner.spawn_task(rewatch(Arc::downgrade(&inner), generation));
                false
            }
        }
    } else {
        true
    };
    inner.restore_ephemerals().await;
    inner.session.reestablished();
    tracing::info!(store = %inner.address(), "session re-established");
    if watched {
        inner.resync().await;
    }
}

/// Keeps trying to add the recursive watch to session `generation` (until it works, the session ends or the
/// store is closed), then reports what changed meanwhile.
async fn rewatch(weak: Weak<Inner>, generation: u64) {
    let mut pause = Duration::from_millis(100);
    loop {
        tokio::time::sleep(pause).await;
        let Some(inner) = weak.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst)
            || inner.generation.load(Ordering::SeqCst) != generation
        {
            return;
        }
        match inner.ensure_watch().await {
            Ok(()) => {
                inner.resync().await;
                return;
            }
            Err(e) => {
                pause = (pause * 2).min(Duration::from_secs(5));
                tracing::warn!("re-adding the recursive watch failed ({e}); retrying in {pause:?}");
            }
        }
    }
}

impl Inner {
    /// Re-creates registered ephemerals in the current session (skipping nodes someone else holds).
    async fn restore_ephemerals(&self) {
        let Ok(client) = self.client() else { return };
        let entries: Vec<(String, Vec<u8>)> = self
            .ephemerals
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let current = client.session_id().0;
        for (path, value) in entries {
            for _ in 0..3 {
                match self
                    .create(&client, &path, &value, CreateOptions::EPHEMERAL)
                    .await
                {
                    Ok((_, stat)) => {
                        self.owned.lock().unwrap().insert(path.clone(), stat.czxid);
                        tracing::info!("re-created ephemeral {path}");
                        break;
                    }
                    Err(zk::Error::NodeExists) => {
                        // Still held by one of our earlier sessions (the server has not expired it yet, e.g.
                        // after a server restart): take it over; held by anyone else: give it up.
                        let stat = client.check_stat(&path).await.ok().flatten();
                        let old_session = stat.as_ref().is_some_and(|s| {
                            s.ephemeral_owner != current
                                && self.sessions.lock().unwrap().contains(&s.ephemeral_owner)
                        });
                        match stat {
                            Some(s) if old_session => {
                                let _ = client.delete(&path, Some(s.version)).await;
                            }
                            Some(_) => {
                                tracing::warn!(
                                    "ephemeral {path} is held by another session; not re-created"
                                );
                                self.ephemerals.lock().unwrap().remove(&path);
                                break;
                            }
                            None => {}
                        }
                    }
                    Err(e) => {
                        tracing::warn!("cannot re-create ephemeral {path}: {e}");
                        break;
                    }
                }
            }
        }
    }
}

/// Opens a client (a new session) and ensures the chroot exists.
pub(super) async fn new_client(inner: &Inner) -> Result<zk::Client> {
    let mut connector = zk::Client::connector().with_session_timeout(inner.options.session_timeout);
    if let Some(c) = &inner.options.credentials {
        connector = connector.with_auth("digest", format!("{}:{}", c.user, c.password).as_bytes());
    }
    let client = connector
        .connect(&inner.servers)
        .await
        .map_err(|e| inner.map_err(e, "connect", ""))?;
    let Some(chroot) = &inner.chroot else {
        return Ok(client);
    };
    client
        .mkdir(chroot, &zk::CreateMode::Persistent.with_acls(inner.acls()))
        .await
        .map_err(|e| inner.map_err(e, "create chroot", chroot))?;
    client
        .chroot(chroot.as_str())
        .map_err(|_| Error::InvalidUrl {
            url: inner.address(),
            reason: format!("bad chroot {chroot}"),
        })
}
