//! The ZooKeeper backend (`zookeeper-client` 0.11 with its tokio feature; server ≥ 3.6, tested on 3.8).
//! Nothing else in loadmgr knows that crate.
//!
//! # Mapping
//!
//! | contract | ZooKeeper |
//! |---|---|
//! | get / exists / children | `getData` / `exists` / `getChildren` (sorted); NONODE → absent / empty |
//! | get_many | one `multiRead` of `getData`s (ZooKeeper 3.6+); per-path NONODE → absent; a server that answers UNIMPLEMENTED gets one `getData` per path |
//! | get_leaves | the trait's default: `getChildren` of every directory, 64 at a time, then `get_many` of 100 leaves, 16 at a time |
//! | put, no version | `setData(-1)`; on NONODE `create` with missing parents as **CONTAINER** znodes (as Pulsar does); a lost create race retries `setData` |
//! | put -1 | `create`; NODEEXISTS → `BadVersion` |
//! | put n | `setData(n)`; NONODE or BADVERSION → `BadVersion` |
//! | delete | `delete(n or -1)`; NONODE → `NotFound`, NOTEMPTY → `NotEmpty` |
//! | ephemeral / sequential | `EPHEMERAL`, `*_SEQUENTIAL` (10-digit suffix from the parent's counter) |
//! | batch | one `multi` (atomic); an unconditional put is first tried as `setData` and turned into a `create` if the multi reports NONODE for it; missing parents are created before a retry; split above ~900 KiB (jute.maxbuffer is ~1 MiB) |
//! | guard ([`super::Op::Check`]) | `check(path, version)` in the multi, which runs in this store's session; for an ephemeral this store created, the guard's `czxid` must also still be the one this session created (see below) |
//! | Stat | `dataVersion`, `czxid`, `mzxid`, `ctime`, `mtime`; ephemeral = `ephemeralOwner ≠ 0` (Pulsar tests `≠ -1`, which marks every node ephemeral); created-by-self = owner is our session |
//! | notifications | one **persistent recursive watch per watched root**: `watch(prefix)` adds one on the prefix itself unless a watched root covers it, a batch guarded by an owned ephemeral one on that node (so the server sends a session only the events of what it watches); all are re-added in every new session **and after every reconnection**, see below; `ChildrenChanged` is synthesised for the parent of a created or deleted node (recursive watches never deliver NodeChildrenChanged) |
//! | ACL | `world:anyone` all (Pulsar's OPEN_ACL_UNSAFE) or, with digest credentials, creator-only / creator-all + world-read ([`super::ZkAcl`]) |
//!
//! # Sessions
//!
//! A supervisor task follows the client's state: `Disconnected` → `ConnectionLost`; still disconnected 9/10
//! of the negotiated session timeout after the server last answered → `SessionLost`. Pulsar's
//! `ZKSessionWatcher` counts 5/6 from the disconnection, but the client notices one only after hearing
//! nothing for 2/5 of the timeout, so that rule fires at 1.23× the timeout, after the server may have expired
//! the session and handed its ephemerals to another broker (the client itself declares expiry only after 7/5
//! of it). The store therefore probes the server every 1/15 of the timeout while connected (an `exists` of
//! `/`) and counts from the *send time* of the last answered request: the server heard from the session
//! after that moment, so it cannot expire it before that moment + the timeout. Hosts stop serving at the same
//! deadline through their leases ([`crate::store::SessionValidity`]), a tenth of the timeout before the
//! server can give the session's ephemerals to someone else.
//!
//! While disconnected, the store tries every 1/20 of the timeout to **resume the same session on a new
//! client**: `zookeeper-client` backs off exponentially between its own attempts (0.1, 0.2, … 3.2 s), so after
//! a store restart of half the session timeout it may try again only after the session was declared lost.
//! Whichever client gets through first wins; every client is *detached* (dropping it never closes the
//! session), and the store closes its session explicitly when it is closed or expired on purpose
//! (`session::close_session`). Operations pending on a replaced client fail with `ConnectionLost`.
//! `SyncConnected` or a resumed session → `Reconnected` (+ `SessionReestablished` after a `SessionLost`);
//! `Expired` (or a resumption the server refuses as expired) → a new client (new session, retried with
//! backoff), the recursive watches re-added, this store's ephemerals re-created with their last values, then
//! `Reconnected`, `SessionReestablished`. The flags, the deadline rule, the session terms and the events are
//! those of `store::session::SessionState`, which the etcd backend shares.
//!
//! [`MetadataStore::expire_session`] ends the session from the store itself: it forgets its client, then
//! takes the session over with a short-lived client that is not detached and drops it, which sends
//! `CloseSession` (the server deletes the ephemerals at once), and re-establishes as after an expiry. It
//! takes milliseconds on a reachable server.
//!
//! # Pitfalls handled
//!
//! * An expired `zookeeper_client::Client` cannot be revived: the store swaps in a new one.
//! * **`zookeeper-client` 0.11 does not restore persistent watches after a reconnection.** On every new
//!   connection of a session it re-sends the watches as `SetWatches`, whose request has no persistent-watch
//!   lists (`WatchManager::resend_watches` computes `index.max(index)` instead of `index.max(i)`, so it never
//!   picks `SetWatches2`): the server forgets the recursive watch, the client keeps the watcher, and
//!   notifications silently stop (a standalone server restart, a lost connection, a move to another
//!   ensemble member). The event loop therefore sees each `Disconnected` → `SyncConnected` in its watcher
//!   streams (the client puts state changes into every watcher's stream in order with node events; the loop
//!   follows the first watcher's, so once per reconnection) and re-adds the watch of every root with
//!   `addWatch` (idempotent on the server), dropping the second client-side watcher each creates (which
//!   removes nothing on the server while the first remains); the attempt is retried while connected. A
//!   client that does restore the watches is handled the same way.
//! * The client hands each event to every recursive watcher above its path, so a root added after a
//!   narrower one (which stays watched) receives the narrower one's events too: each node's events are taken
//!   from the watcher of the oldest root covering it only (no duplicate, none missed while the new root was
//!   being added). Events are ordered per watcher: with several roots, events under different roots are
//!   delivered in the order the event loop reads their streams, which may differ from the servers' order.
//! * Persistent watches lose the events of a disconnection (ZOOKEEPER-4698). For every subscribed prefix the
//!   store keeps the set of existing nodes and the highest zxid it has seen (from the stat of each notified
//!   node and of its own writes); after a reconnection (once the watches are back) or a new session it
//!   rescans the prefixes and emits `Created`, `Deleted` (+ `ChildrenChanged`) and `Modified` (a node whose `mzxid`
//!   is above the high-water mark *as it was when the connection dropped*: answers on the new connection
//!   may carry later zxids before the watches are back) for what changed meanwhile. A node changed just
//!   before the cut may be reported twice. Owned ephemerals (below) are checked again too. The set of a new
//!   prefix is filled by its first scan: `watch` waits for it, except that a scan that has run 250 ms and
//!   listed 2,000 nodes goes on in the background with few requests in flight (a new leader's watches of
//!   100,000 bundles took 8 s, and its state read competed with them), and a resync waits for the scans still
//!   running. A scan cut by a disconnection leaves the nodes it had not reached unknown: the resync reports
//!   them created, and cannot report one of them deleted. A node deleted while its prefix is first scanned
//!   may be reported deleted again by a later resync.
//! * A persistent and a one-shot watch on the same path in one session are not supported by the server
//!   (ZOOKEEPER-4466): the store uses no one-shot watches.
//! * A polled watcher after a terminal session state panics in the crate: the event loop stops at it.
//! * Errors during failover are not always `ConnectionLoss` (an I/O error may surface as a custom error):
//!   both map to [`Error::ConnectionLost`].
//! * `ephemeralOwner` is 0 for persistent and container nodes.
//! * Containers vanish about a minute after their last child: never rely on a parent persisting (use
//!   `MetadataStoreExt::create_parents` for explicit persistent parents).
//! * A multi's create may return an invalid Stat (ZOOKEEPER-4026): it is then read back.
//! * A multi can check only a node's *version*, and a node deleted and re-created restarts at version 0, so
//!   a version check alone would let a deposed holder's write through once a successor's node reaches the
//!   holder's version. The store therefore also remembers the `czxid` of every ephemeral it created in its
//!   current session and marks it gone when it deletes it, when a recursive watch (on the node itself,
//!   installed with the first batch it guards, which then checks the node once more, or on a watched root
//!   above it) reports it deleted, when the check after a reconnection finds it gone or replaced, and
//!   when the session ends; a guard on such a path must match it. The remaining windows are a deletion by
//!   another session whose notification has not arrived yet (about a millisecond on loopback) and the
//!   round trips between a reconnection and that check. etcd has no such window (it compares the create
//!   revision in the txn).
//!
//! # Files
//!
//! | file | concern |
//! |---|---|
//! | `connect.rs` | ACLs, create modes, the first session and the chroot |
//! | `session.rs` | the session supervisor and probe (on `store::session`), expiry and re-establishment |
//! | `nodes.rs` | single-node writes, stats, the ephemerals this store created |
//! | `multi.rs` | batches: splitting, multi planning and re-planning |
//! | `watch.rs` | the recursive watches (one per root), their event loop and re-arming, the resync after a disconnection |
//! | `errors.rs` | client errors → [`Error`] |
//! | `raw_bench.rs` | the raw client for `loadmgr bench store` |

mod connect;
mod errors;
mod multi;
mod nodes;
pub mod raw_bench;
mod session;
mod task;
mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use tokio::task::JoinHandle;
use zookeeper_client as zk;

use super::fanout::Fanout;
use super::session::SessionState;
use super::{
    subscribe, validate_path, Backend, CreateOptions, Error, GetResult, MetadataStore,
    Notification, NotificationStream, Op, OpResult, Result, SessionEventStream, Stat, StoreOptions,
};

/// A ZooKeeper session; see the module docs.
#[derive(Debug)]
pub struct ZkStore {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Tracking {
    /// Subscribed prefixes whose nodes are tracked for resynchronisation.
    roots: Vec<String>,
    /// Nodes known to exist under the roots.
    known: BTreeSet<String>,
}

/// The persistent recursive watches of this store: one per watched root, none covered by an earlier one.
#[derive(Debug, Default)]
struct Watches {
    /// Watched roots in the order they were first installed: a root is added only when no earlier one
    /// covers it (a later one may cover earlier ones; each node's events are taken from the oldest root
    /// covering it, see `watch.rs`).
    roots: Vec<String>,
    /// Generation whose client has a watch on every root; 0 = none.
    generation: u64,
    /// Hands the watchers of roots added later to that generation's event loop.
    added: Option<tokio::sync::mpsc::UnboundedSender<(String, zk::PersistentWatcher)>>,
}

#[derive(Debug)]
struct Inner {
    servers: String,
    chroot: Option<String>,
    options: StoreOptions,
    acls: Vec<zk::Acl>,
    client: RwLock<Option<zk::Client>>,
    /// The background task of the current client: replaced (and so aborted) with it, so that a client
    /// the store let go of can never take the session back (see `task.rs`).
    session_task: Mutex<Option<task::SessionTask>>,
    /// Increments with every new client (session).
    generation: AtomicU64,
    /// The watched roots and the generation whose client has them (see `watch.rs`).
    watches: tokio::sync::Mutex<Watches>,
    tracking: Mutex<Tracking>,
    /// How many first scans of newly tracked roots are still running (see [`Inner::track`]); a resync waits
    /// for 0, so that it compares against every node of every root.
    scans: tokio::sync::watch::Sender<usize>,
    /// Highest zxid seen as delivered (see the module docs).
    hwm: AtomicI64,
    /// `hwm` when the current disconnection (or session loss) began; taken by the resync that follows it.
    /// Later zxids may come from answers on the new connection before the watch is back, so the resync
    /// compares against this one.
    resync_floor: Mutex<Option<i64>>,
    notifications: Fanout<Notification>,
    /// Connection and session flags, the last answered send time and the session event subscribers.
    session: SessionState,
    /// Ephemerals this store created and has not deleted, with their last values.
    ephemerals: Mutex<BTreeMap<String, Vec<u8>>>,
    /// czxid of each ephemeral this store created in its current session; -1 once it is gone (deleted by
    /// anyone, or its session ended). Guards on these paths must match it (see the module docs).
    owned: Mutex<HashMap<String, i64>>,
    /// Every session id this store has had (its old ephemerals may outlive a local expiry for a while).
    sessions: Mutex<Vec<i64>>,
    closed: AtomicBool,
    /// Background tasks, each with the generation it belongs to (0: none); a new client aborts the tasks of
    /// older generations, which hold handles of the old client.
    tasks: Mutex<Vec<(u64, JoinHandle<()>)>>,
    /// Woken whenever a new client is installed: operations still running on the old one give up
    /// (see [`Inner::timed`]).
    replaced: tokio::sync::Notify,
    /// Parents of created nodes seen to exist: a multi's plan need not read them again (see
    /// `multi.rs`). Only a hint: a parent reaped since fails the multi once, and the recovery creates it.
    parents: Mutex<std::collections::HashSet<String>>,
}

fn address(servers: &str, chroot: &Option<String>) -> String {
    format!("zk:{servers}{}", chroot.as_deref().unwrap_or(""))
}

impl Inner {
    fn address(&self) -> String {
        address(&self.servers, &self.chroot)
    }

    /// Remembers where the live watch stopped: the first call after a resync wins.
    fn note_disconnected(&self) {
        let mut floor = self.resync_floor.lock().unwrap();
        if floor.is_none() {
            *floor = Some(self.hwm.load(Ordering::Relaxed));
        }
    }

    /// Runs `task`, a task of client `generation` (0: of no client), until it ends, the store is closed (or
    /// expires its session on purpose), or a newer client replaces that generation's.
    fn spawn_task(
        &self,
        generation: u64,
        task: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let handle = tokio::spawn(task);
        let mut tasks = self.tasks.lock().unwrap();
        tasks.retain(|(_, t)| !t.is_finished());
        tasks.push((generation, handle));
    }

    /// Aborts every background task (the store is closed, or its session is ended on purpose).
    fn abort_tasks(&self) {
        for (_, task) in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    /// Aborts the tasks of client generations before `generation` (their client is replaced; a task of
    /// an older generation that is running this call stops at its next await).
    fn abort_older_tasks(&self, generation: u64) {
        let mut tasks = self.tasks.lock().unwrap();
        tasks.retain(|(g, t)| {
            let old = *g != 0 && *g < generation;
            if old {
                t.abort();
            }
            !old && !t.is_finished()
        });
    }

    fn client(&self) -> Result<zk::Client> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        self.client
            .read()
            .unwrap()
            .clone()
            .ok_or_else(|| Error::SessionLost {
                reason: format!("re-establishing the session with {}", self.address()),
            })
    }

    /// The current client with its generation (read together: a new client and its generation are
    /// installed under the same lock).
    fn client_and_generation(&self) -> Result<(zk::Client, u64)> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        let slot = self.client.read().unwrap();
        let generation = self.generation.load(Ordering::SeqCst);
        slot.clone()
            .map(|c| (c, generation))
            .ok_or_else(|| Error::SessionLost {
                reason: format!("re-establishing the session with {}", self.address()),
            })
    }

    /// Runs `fut` within the operation timeout. If a new client replaces the current one meanwhile (a
    /// session resumed on a new connection, or a new session), `fut` is dropped with the old client's handle
    /// and the operation fails with `ConnectionLost` (it may or may not have been applied); so does one that
    /// failed while the client was replaced (the old client's task is aborted, see `task.rs`, and what it
    /// had pending fails with an error that is not the server's answer).
    async fn timed<T>(
        &self,
        operation: &str,
        path: &str,
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let generation = self.generation.load(Ordering::SeqCst);
        let replaced = async {
            loop {
                let notified = self.replaced.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.generation.load(Ordering::SeqCst) != generation {
                    return;
                }
                notified.await;
            }
        };
        tokio::select! {
            r = tokio::time::timeout(self.options.operation_timeout, fut) => match r {
                // The old client's task is aborted when it is replaced, which fails what it had pending
                // with an error that says nothing of the request: the request raced the replacement.
                Ok(Err(e)) if self.generation.load(Ordering::SeqCst) != generation => {
                    Err(Error::ConnectionLost {
                        address: self.address(),
                        operation: format!("{operation} {path}"),
                        reason: format!("the connection was replaced while the request was pending ({e})"),
                    })
                }
                Ok(r) => r,
                Err(_) => Err(Error::Timeout {
                    operation: format!("{operation} {path}"),
                    after: self.options.operation_timeout,
                }),
            },
            () = replaced => Err(Error::ConnectionLost {
                address: self.address(),
                operation: format!("{operation} {path}"),
                reason: "the connection was replaced while the request was pending".into(),
            }),
        }
    }
}

impl ZkStore {
    /// The current session id (changes with every new session).
    pub fn session_id(&self) -> Option<i64> {
        self.inner
            .client
            .read()
            .unwrap()
            .as_ref()
            .map(|c| c.session_id().0)
    }
}

impl Drop for ZkStore {
    fn drop(&mut self) {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.inner.abort_tasks();
        // The client is detached (see "Sessions"): dropping it leaves the session to expire on the server.
        // Close it now where a runtime can run that.
        if let Some(client) = self.inner.client.write().unwrap().take() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let inner = self.inner.clone();
                runtime.spawn(async move { session::close_session(&inner, client).await });
            }
        }
        self.inner.session.mark_down();
        self.inner.notifications.close();
        self.inner.session.close_streams();
    }
}

#[async_trait]
impl MetadataStore for ZkStore {
    fn backend(&self) -> Backend {
        Backend::ZooKeeper
    }

    fn address(&self) -> String {
        self.inner.address()
    }

    async fn get(&self, path: &str) -> Result<Option<GetResult>> {
        validate_path(path)?;
        let inner = &self.inner;
        inner
            .timed("get", path, async {
                let client = inner.client()?;
                let session = client.session_id().0;
                match client.get_data(path).await {
                    Ok((value, stat)) => Ok(Some(GetResult {
                        value,
                        stat: inner.stat(path, &stat, session),
                    })),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(e) => Err(inner.map_err(e, "get", path)),
                }
            })
            .await
    }

    async fn get_many(&self, paths: &[String]) -> Result<Vec<Option<GetResult>>> {
        for p in paths {
            validate_path(p)?;
        }
        match self.inner.multi_read(paths).await? {
            Some(read) => Ok(read),
            // A server older than 3.6.
            None => futures::future::try_join_all(paths.iter().map(|p| self.get(p))).await,
        }
    }

    async fn get_children(&self, path: &str) -> Result<Vec<String>> {
        validate_path(path)?;
        let inner = &self.inner;
        inner
            .timed("children", path, async {
                let client = inner.client()?;
                match client.list_children(path).await {
                    Ok(mut children) => {
                        if path == "/" && inner.chroot.is_none() {
                            children.retain(|c| c != "zookeeper");
                        }
                        children.sort();
                        Ok(children)
                    }
                    Err(zk::Error::NoNode) => Ok(Vec::new()),
                    Err(e) => Err(inner.map_err(e, "children", path)),
                }
            })
            .await
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        validate_path(path)?;
        let inner = &self.inner;
        inner
            .timed("exists", path, async {
                let client = inner.client()?;
                client
                    .check_stat(path)
                    .await
                    .map(|s| s.is_some())
                    .map_err(|e| inner.map_err(e, "exists", path))
            })
            .await
    }

    async fn put(
        &self,
        path: &str,
        value: &[u8],
        expected_version: Option<i64>,
        options: CreateOptions,
    ) -> Result<Stat> {
        self.inner
            .timed(
                "put",
                path,
                self.inner.put(path, value, expected_version, options),
            )
            .await
            .map_err(|e| errors::too_large(e, path, value.len()))
    }

    async fn delete(&self, path: &str, expected_version: Option<i64>) -> Result<()> {
        self.inner
            .timed("delete", path, self.inner.delete(path, expected_version))
            .await
    }

    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        let first = ops
            .first()
            .map(|o| o.path().to_string())
            .unwrap_or_default();
        self.inner
            .timed("batch", &first, self.inner.batch(ops))
            .await
    }

    async fn watch(&self, prefix: &str) -> Result<NotificationStream> {
        validate_path(prefix)?;
        self.inner.client()?;
        // Subscribe first so nothing between the watch and the scan is missed.
        let stream = subscribe(&self.inner.notifications, prefix)?;
        self.inner.ensure_watch(prefix).await?;
        if let Some(scan) = self.inner.track(prefix)? {
            scan.wait().await;
        }
        Ok(stream)
    }

    fn session_events(&self) -> SessionEventStream {
        self.inner.session.subscribe()
    }

    fn is_connected(&self) -> bool {
        !self.inner.closed.load(Ordering::SeqCst) && self.inner.session.is_up()
    }

    fn session_validity(&self) -> super::SessionValidity {
        self.inner.session.validity()
    }

    /// Ends the session from this store's own client: the store lets go of every handle of it (its tasks
    /// are stopped, the current client forgotten), so the crate sends `CloseSession` and the server ends the
    /// session at once, deleting its ephemerals, as an expiry would. Returns once the client reports the
    /// session closed (at most twice the session timeout; an unreachable server expires it itself), with
    /// `ConnectionLost`, `SessionLost` sent; a new session follows in the background (`Reconnected`,
    /// `SessionReestablished`).
    ///
    /// (Taking the session over from a second connection and closing it there does not work reliably: the
    /// server drops the store's connection when the second one takes the session, the store's client
    /// reconnects at once and takes it back before the second client's `CloseSession` is processed, and
    /// the two clients can push each other off for seconds.)
    async fn expire_session(&self) -> Result<()> {
        session::expire(&self.inner).await
    }

    async fn close(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.delete_own_ephemerals().await;
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.abort_tasks();
        let client = self.inner.client.write().unwrap().take();
        self.inner.session.mark_down();
        if let Some(client) = client {
            session::close_session(&self.inner, client).await;
        }
        self.inner.notifications.close();
        self.inner.session.close_streams();
        Ok(())
    }
}
