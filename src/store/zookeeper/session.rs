//! The ZooKeeper session loop: the supervisor that follows the client's state, the probe that keeps the
//! deadline of [`crate::store::session`] fed, the resumption of the session on a new client while the old
//! one is disconnected, and the replacement of an expired session (new client, watch re-added, ephemerals
//! re-created).
//!
//! # Contract
//!
//! See "Sessions" in the module docs of [`super`]. In short: `Disconnected` → `ConnectionLost`; from then on
//! the supervisor tries every 1/20 of the session timeout (at least 50 ms) to resume the same session on a
//! new client, since `zookeeper-client` 0.11 backs off exponentially between its own attempts (0.1, 0.2,
//! 0.4, … 1.6, 3.2 s: after a short server restart it may wait longer than the session can live); whichever
//! connects first wins, the other is dropped. Still disconnected 9/10 of the negotiated session timeout
//! after the send time of the last answered request → `SessionLost` (the probe asks the server an `exists`
//! of `/` every 1/15 of the timeout while connected, so that time is recent); back in the same session →
//! `Reconnected` (+ `SessionReestablished` after a `SessionLost`); `Expired` or a requested expiry → a new
//! session, retried with backoff, the recursive watch of every watched root re-added, this store's
//! ephemerals re-created with their last values, then `Reconnected`, `SessionReestablished`.
//!
//! Every client is **detached**: dropping it never sends `CloseSession`; the store closes its session
//! explicitly instead ([`close_session`]). Each client is installed with its session task (`task.rs`), and
//! installing the next client aborts the previous client's task: a client the store let go of stops
//! reconnecting at once, so it cannot take the session's connection from the current client (the server
//! keeps one connection per session). A resumption that connects after the crate's own reconnection wins
//! too: its connection is the one the server kept.
//!
//! Each client's tasks carry its *generation* and are aborted once the store moves on to a newer one.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use tokio::time::Instant;
use zookeeper_client as zk;

use super::task::{self, SessionTask};
use super::Inner;
use crate::store::{CreateOptions, Error, Result};

/// How a client comes to be installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Install {
    /// A new session (the first, or one after an expiry).
    New,
    /// The current session, resumed on a new connection by a new client.
    Resumed,
}

/// Makes `client` current and starts its supervisor and probe; the tasks of older clients (the crate's
/// session task included) are aborted and operations pending on them fail (see `Inner::timed`).
pub(super) fn install_client(
    inner: &Arc<Inner>,
    client: zk::Client,
    session_task: SessionTask,
    how: Install,
) {
    let states = client.state_watcher();
    let timeout = client.session_timeout();
    let info = client.session().clone();
    {
        let mut sessions = inner.sessions.lock().unwrap();
        if !sessions.contains(&client.session_id().0) {
            sessions.push(client.session_id().0);
        }
    }
    // The client and its generation change together (see `Inner::client_and_generation`).
    let generation = {
        let mut slot = inner.client.write().unwrap();
        let generation = inner.generation.fetch_add(1, Ordering::SeqCst) + 1;
        *slot = Some(client);
        generation
    };
    // The previous client's task stops here (see the module docs).
    drop(inner.session_task.lock().unwrap().replace(session_task));
    inner.replaced.notify_waiters();
    inner.abort_older_tasks(generation);
    if how == Install::New {
        for czxid in inner.owned.lock().unwrap().values_mut() {
            *czxid = -1;
        }
    }
    inner.session.set_timeout(timeout);
    // The session was just established or found again: the server answered a moment ago.
    inner.session.acknowledged_now();
    match how {
        Install::New => inner.session.mark_up(),
        Install::Resumed => {
            if inner.session.reconnected() {
                tracing::info!(store = %inner.address(), "reconnected (session resumed on a new connection)");
            }
        }
    }
    let weak = Arc::downgrade(inner);
    inner.spawn_task(
        generation,
        supervise(weak.clone(), states, info, timeout, generation),
    );
    inner.spawn_task(generation, probe(weak, timeout, generation));
}

/// While connected, asks the server something cheap every 1/15 of the session timeout and records the send
/// time of each answered request (see the module docs).
async fn probe(weak: Weak<Inner>, timeout: Duration, generation: u64) {
    let every = (timeout / 15).max(Duration::from_millis(50));
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
        // No handle may outlive the request: an abandoned client must have none (see the module docs).
        drop(client);
        if answered {
            let Some(inner) = weak.upgrade() else { return };
            if inner.generation.load(Ordering::SeqCst) == generation {
                inner.session.acknowledged(sent);
            }
        }
    }
}

type Pending<T> = Option<Pin<Box<dyn Future<Output = T> + Send>>>;

/// Waits for a pending future, or forever when there is none (for `select!` branches guarded on it).
async fn pending<T>(slot: &mut Pending<T>) -> T {
    match slot.as_mut() {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// Follows one client's session state: announces connection changes, declares the session lost at its
/// deadline, resumes it on a new client while disconnected, and on expiry opens a new session.
async fn supervise(
    weak: Weak<Inner>,
    mut states: zk::StateWatcher,
    info: zk::SessionInfo,
    timeout: Duration,
    generation: u64,
) {
    let retry = (timeout / 20).max(Duration::from_millis(50));
    let mut lost_timer: Pending<()> = None;
    let mut resume_timer: Pending<()> = None;
    let mut resuming: Pending<Result<(zk::Client, SessionTask)>> = None;
    let mut connected = false;
    loop {
        let state = tokio::select! {
            s = states.changed() => s,
            () = pending(&mut lost_timer) => {
                lost_timer = None;
                let Some(inner) = weak.upgrade() else { return };
                if inner.session.session_lost() {
                    tracing::warn!(store = %inner.address(), "no answer for 9/10 of the session timeout: session lost");
                }
                continue;
            }
            () = pending(&mut resume_timer) => {
                resume_timer = None;
                let Some(inner) = weak.upgrade() else { return };
                let attempt = resume_client(inner, info.clone());
                resuming = Some(Box::pin(async move {
                    match tokio::time::timeout(retry, attempt).await {
                        Ok(r) => r,
                        Err(_) => Err(Error::Timeout { operation: "resume the session".into(), after: retry }),
                    }
                }));
                continue;
            }
            r = pending(&mut resuming) => {
                resuming = None;
                let Some(inner) = weak.upgrade() else { return };
                if inner.closed.load(Ordering::SeqCst)
                    || inner.generation.load(Ordering::SeqCst) != generation
                {
                    return;
                }
                match r {
                    Ok((client, task)) => {
                        install_client(&inner, client, task, Install::Resumed);
                        let generation = inner.generation.load(Ordering::SeqCst);
                        inner.spawn_task(generation, after_resume(Arc::downgrade(&inner), generation));
                        return;
                    }
                    Err(Error::SessionLost { reason }) => {
                        tracing::warn!(store = %inner.address(), "the session expired while disconnected ({reason}); opening a new one");
                        lose_session(&inner);
                        inner.spawn_task(0, reestablish(weak));
                        return;
                    }
                    Err(e) if !connected => {
                        tracing::debug!(store = %inner.address(), "resuming the session failed: {e}");
                        resume_timer = Some(Box::pin(tokio::time::sleep(retry)));
                    }
                    Err(_) => {}
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
                connected = false;
                inner.note_disconnected();
                if inner.session.connection_lost() {
                    tracing::warn!(store = %inner.address(), "connection lost");
                    let deadline = inner.session.lost_at(timeout);
                    lost_timer = Some(Box::pin(tokio::time::sleep_until(deadline)));
                }
                if resume_timer.is_none() && resuming.is_none() {
                    resume_timer = Some(Box::pin(tokio::time::sleep(retry)));
                }
            }
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                connected = true;
                lost_timer = None;
                resume_timer = None;
                // A resumption in flight is left to finish: if it gets through, the server has moved the
                // session to its connection, and it is installed like any other.

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
                inner.spawn_task(0, reestablish(weak));
                return;
            }
            zk::SessionState::Closed => return,
        }
    }
}

/// A new client on the session `info` (the same session id and password), or `SessionLost` when the server
/// says the session expired.
async fn resume_client(
    inner: Arc<Inner>,
    info: zk::SessionInfo,
) -> Result<(zk::Client, SessionTask)> {
    let connector = inner.connector().with_session(info).with_fail_eagerly();
    match task::connect(connector, &inner.servers).await {
        Ok((client, task)) => Ok((inner.chrooted(client)?, task)),
        Err(zk::Error::SessionExpired) => Err(Error::SessionLost {
            reason: "the server expired it".into(),
        }),
        Err(e) => Err(inner.map_err(e, "resume the session", "")),
    }
}

/// After a session was resumed on a new client: the recursive watches on the new connection, owned ephemerals
/// checked, missed changes reported.
async fn after_resume(weak: Weak<Inner>, generation: u64) {
    let Some(inner) = weak.upgrade() else { return };
    if inner.has_watches().await {
        if let Err(e) = inner.restore_watches().await {
            tracing::warn!("re-adding the recursive watches failed ({e}); retrying");
            drop(inner);
            rewatch(weak, generation).await;
            return;
        }
    }
    if let Ok(client) = inner.client() {
        if let Err(e) = inner.verify_owned(&client).await {
            tracing::warn!("checking owned ephemerals after resuming failed: {e}");
        }
    }
    inner.resync().await;
}

/// The session is gone (expired, or ended by `expire_session`): announces it and forgets the client; nothing
/// of this session is used again. The tasks of its client are aborted (a caller that is one of them must
/// not await afterwards) and operations pending on it fail.
fn lose_session(inner: &Inner) {
    inner.note_disconnected();
    let generation = {
        let mut slot = inner.client.write().unwrap();
        slot.take();
        inner.generation.fetch_add(1, Ordering::SeqCst) + 1
    };
    inner.replaced.notify_waiters();
    inner.abort_older_tasks(generation);
    for czxid in inner.owned.lock().unwrap().values_mut() {
        *czxid = -1;
    }
    inner.session.lost();
}

/// Ends the session from this store (see `MetadataStore::expire_session` of [`super::ZkStore`]): forgets
/// its client, closes the session on the server ([`close_session`]), then re-establishes in the background.
pub(super) async fn expire(inner: &Arc<Inner>) -> Result<()> {
    let client = inner.client()?;
    inner.abort_tasks();
    lose_session(inner);
    close_session(inner, client).await;
    inner.spawn_task(0, reestablish(Arc::downgrade(inner)));
    Ok(())
}

/// Closes `client`'s session on the server, so its ephemerals go at once: drops the client (detached, it
/// closes only its connection, once no other handle is left), then takes the session over with a
/// short-lived client that is not detached and drops it, which sends `CloseSession`. Waits for each step at
/// most the session timeout; a server that cannot be reached expires the session itself.
pub(super) async fn close_session(inner: &Inner, client: zk::Client) {
    let info = client.session().clone();
    let session = client.session_id();
    let limit = client.session_timeout();
    let mut states = client.state_watcher();
    drop(client);
    if wait_terminated(&mut states, limit / 4).await.is_none() {
        tracing::debug!(store = %inner.address(), %session, "the old connection is still open; closing the session over it");
    }
    let closer = inner
        .closing_connector()
        .with_session(info)
        .with_fail_eagerly()
        .connect(&inner.servers);
    let closer = match tokio::time::timeout(limit, closer).await {
        Ok(Ok(c)) => c,
        Ok(Err(zk::Error::SessionExpired)) => return,
        Ok(Err(e)) => {
            tracing::warn!(store = %inner.address(), %session, "could not close the session ({e}); the server will expire it");
            return;
        }
        Err(_) => {
            tracing::warn!(store = %inner.address(), %session, "could not reach the server to close the session; it will expire");
            return;
        }
    };
    let mut states = closer.state_watcher();
    drop(closer);
    match wait_terminated(&mut states, limit).await {
        Some(state) => {
            tracing::info!(store = %inner.address(), %session, ?state, "session closed")
        }
        None => tracing::warn!(
            store = %inner.address(),
            %session,
            "the session was not closed within {limit:?}; the server will expire it"
        ),
    }
}

/// Waits until a client's session state is terminal (closed, expired, auth failed), at most `limit`.
async fn wait_terminated(
    states: &mut zk::StateWatcher,
    limit: Duration,
) -> Option<zk::SessionState> {
    let deadline = Instant::now() + limit;
    loop {
        let state = states.peek_state();
        if state.is_terminated() {
            return Some(state);
        }
        if tokio::time::timeout_at(deadline, states.changed())
            .await
            .is_err()
        {
            return None;
        }
    }
}

/// Opens a new session (retrying with backoff until it works or the store is closed), re-adds the watches,
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
    let Ok((client, task)) = client else { return };
    let Some(inner) = weak.upgrade() else { return };
    if inner.closed.load(Ordering::SeqCst) {
        return;
    }
    install_client(&inner, client, task, Install::New);
    let generation = inner.generation.load(Ordering::SeqCst);
    let watched = if inner.has_watches().await {
        match inner.restore_watches().await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("re-adding the recursive watches failed ({e}); retrying");
                inner.spawn_task(generation, rewatch(Arc::downgrade(&inner), generation));
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

/// Keeps trying to add the recursive watches of every watched root to session `generation` (until it works,
/// the session ends or the store is closed), then reports what changed meanwhile.
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
        match inner.restore_watches().await {
            Ok(()) => {
                inner.resync().await;
                return;
            }
            Err(e) => {
                pause = (pause * 2).min(Duration::from_secs(5));
                tracing::warn!(
                    "re-adding the recursive watches failed ({e}); retrying in {pause:?}"
                );
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

impl Inner {
    /// A connector with this store's session timeout and credentials; every client the store keeps is
    /// detached (see the module docs).
    pub(super) fn connector(&self) -> zk::Connector {
        self.closing_connector().with_detached()
    }

    /// A connector whose client sends `CloseSession` when its last handle is dropped (for
    /// [`close_session`] only).
    fn closing_connector(&self) -> zk::Connector {
        let mut connector =
            zk::Client::connector().with_session_timeout(self.options.session_timeout);
        if let Some(c) = &self.options.credentials {
            connector =
                connector.with_auth("digest", format!("{}:{}", c.user, c.password).as_bytes());
        }
        connector
    }

    /// `client` rooted at the store's chroot, if any.
    pub(super) fn chrooted(&self, client: zk::Client) -> Result<zk::Client> {
        let Some(chroot) = &self.chroot else {
            return Ok(client);
        };
        client
            .chroot(chroot.as_str())
            .map_err(|_| Error::InvalidUrl {
                url: self.address(),
                reason: format!("bad chroot {chroot}"),
            })
    }
}

/// Opens a client (a new session) with its session task and ensures the chroot exists.
pub(super) async fn new_client(inner: &Inner) -> Result<(zk::Client, SessionTask)> {
    let (client, task) = task::connect(inner.connector(), &inner.servers)
        .await
        .map_err(|e| inner.map_err(e, "connect", ""))?;
    if let Some(chroot) = &inner.chroot {
        client
            .mkdir(chroot, &zk::CreateMode::Persistent.with_acls(inner.acls()))
            .await
            .map_err(|e| inner.map_err(e, "create chroot", chroot))?;
    }
    Ok((inner.chrooted(client)?, task))
}
