//! The ZooKeeper backend (`zookeeper-client` 0.11 with its tokio feature; server ≥ 3.6, tested on 3.8).
//! Nothing else in loadmgr knows that crate.
//!
//! # Mapping
//!
//! | contract | ZooKeeper |
//! |---|---|
//! | get / exists / children | `getData` / `exists` / `getChildren` (sorted); NONODE → absent / empty |
//! | put, no version | `setData(-1)`; on NONODE `create` with missing parents as **CONTAINER** znodes (as Pulsar does); a lost create race retries `setData` |
//! | put -1 | `create`; NODEEXISTS → `BadVersion` |
//! | put n | `setData(n)`; NONODE or BADVERSION → `BadVersion` |
//! | delete | `delete(n or -1)`; NONODE → `NotFound`, NOTEMPTY → `NotEmpty` |
//! | ephemeral / sequential | `EPHEMERAL`, `*_SEQUENTIAL` (10-digit suffix from the parent's counter) |
//! | batch | one `multi` (atomic); an unconditional put is first tried as `setData` and turned into a `create` if the multi reports NONODE for it; missing parents are created before a retry; split above ~900 KiB (jute.maxbuffer is ~1 MiB) |
//! | guard ([`super::Op::Check`]) | `check(path, version)` in the multi, which runs in this store's session; for an ephemeral this store created, the guard's `czxid` must also still be the one this session created (see below) |
//! | Stat | `dataVersion`, `czxid`, `mzxid`, `ctime`, `mtime`; ephemeral = `ephemeralOwner ≠ 0` (Pulsar tests `≠ -1`, which marks every node ephemeral); created-by-self = owner is our session |
//! | notifications | one **persistent recursive watch** on `/` (installed with the first subscription; re-added in every new session **and after every reconnection**, see below); `ChildrenChanged` is synthesised for the parent of a created or deleted node (recursive watches never deliver NodeChildrenChanged) |
//! | ACL | `world:anyone` all (Pulsar's OPEN_ACL_UNSAFE) or, with digest credentials, creator-only / creator-all + world-read ([`super::ZkAcl`]) |
//!
//! # Sessions
//!
//! A supervisor task follows the client's state: `Disconnected` → `ConnectionLost`; still disconnected 5/6 of
//! the negotiated session timeout after the server last answered → `SessionLost`. Pulsar's `ZKSessionWatcher`
//! counts the 5/6 from the disconnection, but the client notices one only after hearing nothing for 2/5 of
//! the timeout, so that rule fires at 1.23× the timeout, after the server may have expired the session and
//! handed its ephemerals to another broker (the client itself declares expiry only after 7/5 of it). The
//! store therefore probes the server every 1/6 of the timeout while connected (an `exists` of `/`) and counts
//! from the *send time* of the last answered request: the server heard from the session after that moment,
//! so it cannot expire it before that moment + the timeout, and a broker cut off from ZooKeeper hears
//! `SessionLost` at least 1/6 of the timeout before then. `SyncConnected` → `Reconnected` (+ `SessionReestablished` after a
//! `SessionLost`); `Expired` → a new client (new session, retried with backoff), the recursive watch re-added,
//! this store's ephemerals re-created with their last values, then `Reconnected`, `SessionReestablished`.
//!
//! [`MetadataStore::expire_session`] ends the session from the store's own client (it drops every handle,
//! so the client sends `CloseSession`; the server deletes the ephemerals at once), waits until the client
//! reports it closed, then re-establishes as after an expiry. It takes milliseconds on a reachable server.
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
//!   stream (the client puts state changes there in order with node events) and re-adds the watch with
//!   `addWatch` (idempotent on the server), dropping the second client-side watcher this creates (which
//!   removes nothing on the server while the first remains); the attempt is retried while connected. A
//!   client that does restore the watch is handled the same way.
//! * Persistent watches lose the events of a disconnection (ZOOKEEPER-4698). For every subscribed prefix the
//!   store keeps the set of existing nodes and the highest zxid it has seen (from the stat of each notified
//!   node and of its own writes); after a reconnection (once the watch is back) or a new session it rescans
//!   the prefixes and emits `Created`, `Deleted` (+ `ChildrenChanged`) and `Modified` (a node whose `mzxid`
//!   is above the high-water mark *as it was when the connection dropped*: answers on the new connection
//!   may carry later zxids before the watch is back) for what changed meanwhile. A node changed just before
//!   the cut may be reported twice. Owned ephemerals (below) are checked again too.
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
//!   current session and marks it gone when it deletes it, when the recursive watch (installed for any batch
//!   with a guard) reports it deleted, when the check after a reconnection finds it gone or replaced, and
//!   when the session ends; a guard on such a path must match it. The remaining windows are a deletion by
//!   another session whose notification has not arrived yet (about a millisecond on loopback) and the
//!   round trips between a reconnection and that check. etcd has no such window (it compares the create
//!   revision in the txn).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zookeeper_client as zk;

use super::fanout::Fanout;
use super::path::{is_under, join, parent, parent_or_root};
use super::{
    subscribe, validate_path, Backend, CreateOptions, Error, GetResult, MetadataStore,
    Notification, NotificationStream, NotificationType, Op, OpResult, Result, SessionEvent,
    SessionEventStream, Stat, StoreOptions, ZkAcl, CREATE_ONLY,
};

/// Largest payload of one multi; ZooKeeper's packet limit (jute.maxbuffer) is just under 1 MiB.
const MAX_MULTI_BYTES: usize = 900 * 1024;

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

#[derive(Debug)]
struct Inner {
    servers: String,
    chroot: Option<String>,
    options: StoreOptions,
    acls: Vec<zk::Acl>,
    client: RwLock<Option<zk::Client>>,
    /// Increments with every new client (session).
    generation: AtomicU64,
    /// Generation whose client has the recursive watch; 0 = none.
    watch_generation: tokio::sync::Mutex<u64>,
    tracking: Mutex<Tracking>,
    /// Highest zxid seen as delivered (see the module docs).
    hwm: AtomicI64,
    /// `hwm` when the current disconnection (or session loss) began; taken by the resync that follows it.
    /// Later zxids may come from answers on the new connection before the watch is back, so the resync
    /// compares against this one.
    resync_floor: Mutex<Option<i64>>,
    notifications: Fanout<Notification>,
    events: Fanout<SessionEvent>,
    /// Ephemerals this store created and has not deleted, with their last values.
    ephemerals: Mutex<BTreeMap<String, Vec<u8>>>,
    /// czxid of each ephemeral this store created in its current session; -1 once it is gone (deleted by
    /// anyone, or its session ended). Guards on these paths must match it (see the module docs).
    owned: Mutex<HashMap<String, i64>>,
    /// Every session id this store has had (its old ephemerals may outlive a local expiry for a while).
    sessions: Mutex<Vec<i64>>,
    /// Send time of the last request the server answered in the current session (see the module docs).
    answered: Mutex<Instant>,
    connected: AtomicBool,
    lost: AtomicBool,
    closed: AtomicBool,
    tasks: Mutex<Vec<JoinHandle<()>>>,
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

    /// Runs `task` until it ends or the store is closed (or expires its session on purpose).
    fn spawn_task(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(task);
        let mut tasks = self.tasks.lock().unwrap();
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle);
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

    fn acls(&self) -> zk::Acls<'_> {
        zk::Acls::new(&self.acls)
    }

    fn mode(&self, options: CreateOptions) -> zk::CreateOptions<'_> {
        let mode = match (options.ephemeral, options.sequential) {
            (false, false) => zk::CreateMode::Persistent,
            (false, true) => zk::CreateMode::PersistentSequential,
            (true, false) => zk::CreateMode::Ephemeral,
            (true, true) => zk::CreateMode::EphemeralSequential,
        };
        mode.with_acls(self.acls())
    }

    fn map_err(&self, e: zk::Error, operation: &str, path: &str) -> Error {
        match e {
            zk::Error::NoNode => Error::not_found(path),
            zk::Error::NodeExists => Error::AlreadyExists {
                path: path.to_string(),
            },
            zk::Error::NotEmpty => Error::NotEmpty {
                path: path.to_string(),
            },
            zk::Error::NoChildrenForEphemerals => Error::InvalidArgument {
                reason: format!("{path}: the parent is ephemeral and cannot have children"),
            },
            zk::Error::SessionExpired | zk::Error::SessionMoved => Error::SessionLost {
                reason: format!("ZooKeeper session expired during {operation} {path}"),
            },
            zk::Error::ClientClosed if self.closed.load(Ordering::SeqCst) => Error::Closed,
            zk::Error::ClientClosed => Error::SessionLost {
                reason: format!("the ZooKeeper client for {} is closed", self.address()),
            },
            zk::Error::NoAuth | zk::Error::AuthFailed | zk::Error::InvalidAcl => {
                Error::Unauthorized {
                    address: self.address(),
                    reason: format!("{operation} {path}: {e}"),
                }
            }
            zk::Error::BadArguments(reason) => Error::InvalidArgument {
                reason: format!("{operation} {path}: {reason}"),
            },
            zk::Error::Timeout => Error::Timeout {
                operation: format!("{operation} {path}"),
                after: self.options.operation_timeout,
            },
            zk::Error::ConnectionLoss | zk::Error::Custom(_) | zk::Error::NoHosts => {
                Error::ConnectionLost {
                    address: self.address(),
                    operation: format!("{operation} {path}"),
                    reason: e.to_string(),
                }
            }
            other => Error::Backend {
                backend: "zookeeper",
                message: format!("{operation} {path}: {other}"),
            },
        }
    }

    async fn timed<T>(
        &self,
        operation: &str,
        path: &str,
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.options.operation_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout {
                operation: format!("{operation} {path}"),
                after: self.options.operation_timeout,
            }),
        }
    }

    fn stat(&self, path: &str, s: &zk::Stat, session: i64) -> Stat {
        self.hwm.fetch_max(s.mzxid.max(s.czxid), Ordering::Relaxed);
        Stat {
            path: path.to_string(),
            version: i64::from(s.version),
            creation_revision: s.czxid,
            modification_revision: s.mzxid,
            created_ms: s.ctime,
            modified_ms: s.mtime,
            ephemeral: s.ephemeral_owner != 0,
            created_by_self: s.ephemeral_owner != 0 && s.ephemeral_owner == session,
        }
    }

    /// Creates missing ancestors of `path` as containers.
    async fn create_parents(&self, client: &zk::Client, path: &str) -> Result<()> {
        match parent_or_root(path) {
            None | Some("/") => Ok(()),
            Some(p) => client
                .mkdir(p, &zk::CreateMode::Container.with_acls(self.acls()))
                .await
                .map_err(|e| self.map_err(e, "create parents of", path)),
        }
    }

    /// `create` with parents; returns the created path and its stat.
    async fn create(
        &self,
        client: &zk::Client,
        path: &str,
        value: &[u8],
        options: CreateOptions,
    ) -> std::result::Result<(String, zk::Stat), zk::Error> {
        let mut parents_made = false;
        loop {
            match client.create(path, value, &self.mode(options)).await {
                Ok((stat, seq)) => {
                    let created = if options.sequential {
                        format!("{path}{seq}")
                    } else {
                        path.to_string()
                    };
                    return Ok((created, stat));
                }
                Err(zk::Error::NoNode) if !parents_made => {
                    parents_made = true;
                    if let Some(p) = parent_or_root(path).filter(|p| *p != "/") {
                        client
                            .mkdir(p, &zk::CreateMode::Container.with_acls(self.acls()))
                            .await?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn put(
        &self,
        path: &str,
        value: &[u8],
        expected: Option<i64>,
        options: CreateOptions,
    ) -> Result<Stat> {
        validate_path(path)?;
        if path == "/" {
            return Err(Error::InvalidArgument {
                reason: "the root cannot be written".into(),
            });
        }
        let client = self.client()?;
        let session = client.session_id().0;
        let stat = match expected {
            Some(CREATE_ONLY) => match self.create(&client, path, value, options).await {
                Ok((created, stat)) => {
                    self.created(&client, &created, value, options, stat, session)
                        .await?
                }
                Err(zk::Error::NodeExists) => return Err(Error::bad_version(path, CREATE_ONLY)),
                Err(e) => return Err(self.map_err(e, "create", path)),
            },
            Some(v) => match client.set_data(path, value, Some(v as i32)).await {
                Ok(stat) => self.stat(path, &stat, session),
                Err(zk::Error::NoNode | zk::Error::BadVersion) => {
                    return Err(Error::bad_version(path, v))
                }
                Err(e) => return Err(self.map_err(e, "set", path)),
            },
            None if options.sequential => match self.create(&client, path, value, options).await {
                Ok((created, stat)) => {
                    self.created(&client, &created, value, options, stat, session)
                        .await?
                }
                Err(e) => return Err(self.map_err(e, "create", path)),
            },
            None => {
                let mut attempts = 0;
                loop {
                    attempts += 1;
                    match client.set_data(path, value, None).await {
                        Ok(stat) => break self.stat(path, &stat, session),
                        Err(zk::Error::NoNode) => {}
                        Err(e) => return Err(self.map_err(e, "set", path)),
                    }
                    match self.create(&client, path, value, options).await {
                        Ok((created, stat)) => {
                            break self
                                .created(&client, &created, value, options, stat, session)
                                .await?
                        }
                        Err(zk::Error::NodeExists) if attempts < 5 => continue,
                        Err(e) => return Err(self.map_err(e, "create", path)),
                    }
                }
            }
        };
        let mut eph = self.ephemerals.lock().unwrap();
        if let Some(v) = eph.get_mut(&stat.path) {
            *v = value.to_vec();
        }
        Ok(stat)
    }

    /// The stat of a node this store just created, registering it if ephemeral.
    async fn created(
        &self,
        client: &zk::Client,
        path: &str,
        value: &[u8],
        options: CreateOptions,
        stat: zk::Stat,
        session: i64,
    ) -> Result<Stat> {
        if options.ephemeral {
            self.ephemerals
                .lock()
                .unwrap()
                .insert(path.to_string(), value.to_vec());
        }
        let stat = if stat.is_invalid() {
            match client.check_stat(path).await {
                Ok(Some(s)) => s,
                Ok(None) => return Err(Error::not_found(path)),
                Err(e) => return Err(self.map_err(e, "stat", path)),
            }
        } else {
            stat
        };
        if options.ephemeral {
            self.owned
                .lock()
                .unwrap()
                .insert(path.to_string(), stat.czxid);
        }
        Ok(self.stat(path, &stat, session))
    }

    async fn delete(&self, path: &str, expected: Option<i64>) -> Result<()> {
        validate_path(path)?;
        if path == "/" {
            return Err(Error::InvalidArgument {
                reason: "the root cannot be deleted".into(),
            });
        }
        let client = self.client()?;
        match client.delete(path, expected.map(|v| v as i32)).await {
            Ok(()) => {
                self.ephemerals.lock().unwrap().remove(path);
                self.disown(path);
                Ok(())
            }
            Err(zk::Error::BadVersion) => Err(Error::bad_version(path, expected.unwrap_or(-1))),
            Err(e) => Err(self.map_err(e, "delete", path)),
        }
    }

    async fn batch(self: &Arc<Self>, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        for op in &ops {
            validate_path(op.path())?;
            if op.path() == "/" && !matches!(op, Op::Check(_)) {
                return Err(Error::InvalidArgument {
                    reason: "the root cannot be written or deleted".into(),
                });
            }
        }
        if ops.is_empty() {
            self.client()?;
            return Ok(Vec::new());
        }
        let mut results = Vec::with_capacity(ops.len());
        for chunk in split_by_size(&ops) {
            results.extend(self.multi(chunk).await?);
        }
        Ok(results)
    }

    /// One atomic multi.
    async fn multi(self: &Arc<Self>, ops: Vec<&Op>) -> Result<Vec<OpResult>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Plan {
            Set(Option<i32>),
            Create(bool),
            Delete(Option<i32>),
            Check(i32),
        }
        if ops.iter().any(|op| matches!(op, Op::Check(_))) {
            // Deletions of owned nodes are learnt from the recursive watch.
            self.ensure_watch().await?;
        }
        for op in &ops {
            if let Op::Check(g) = op {
                match self.owned.lock().unwrap().get(&g.path) {
                    Some(czxid) if *czxid != g.creation_revision => {
                        return Err(Error::Fenced {
                            path: g.path.clone(),
                        })
                    }
                    _ => {}
                }
            }
        }
        let client = self.client()?;
        let session = client.session_id().0;
        let mut plans: Vec<Plan> = ops
            .iter()
            .map(|op| match op {
                Op::Put {
                    expected_version: None,
                    options,
                    ..
                } if !options.sequential => Plan::Set(None),
                Op::Put {
                    expected_version: Some(v),
                    ..
                } if *v != CREATE_ONLY => Plan::Set(Some(*v as i32)),
                Op::Put { .. } => Plan::Create(false),
                Op::Delete {
                    expected_version, ..
                } => Plan::Delete(expected_version.map(|v| v as i32)),
                Op::Check(g) => Plan::Check(g.version as i32),
            })
            .collect();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut writer = client.new_multi_writer();
            for (op, plan) in ops.iter().zip(&plans) {
                let added = match (op, plan) {
                    (Op::Put { path, value, .. }, Plan::Set(v)) => {
                        writer.add_set_data(path, value, *v)
                    }
                    (
                        Op::Put {
                            path,
                            value,
                            options,
                            ..
                        },
                        Plan::Create(_),
                    ) => writer.add_create(path, value, &self.mode(*options)),
                    (Op::Delete { path, .. }, Plan::Delete(v)) => writer.add_delete(path, *v),
                    (Op::Check(g), Plan::Check(v)) => writer.add_check_version(&g.path, *v),
                    _ => unreachable!("plan matches op"),
                };
                added.map_err(|e| self.map_err(e, "batch", op.path()))?;
            }
            match writer.commit().await {
                Ok(done) => {
                    let mut out = Vec::with_capacity(done.len());
                    for (op, result) in ops.iter().zip(done) {
                        out.push(match (op, result) {
                            (
                                Op::Put { value, options, .. },
                                zk::MultiWriteResult::Create { path, stat },
                            ) => OpResult::Put(
                                self.created(&client, &path, value, *options, stat, session)
                                    .await?,
                            ),
                            (
                                Op::Put { path, value, .. },
                                zk::MultiWriteResult::SetData { stat },
                            ) => {
                                if let Some(v) =
                                    self.ephemerals.lock().unwrap().get_mut(path.as_str())
                                {
                                    *v = value.clone();
                                }
                                OpResult::Put(self.stat(path, &stat, session))
                            }
                            (Op::Delete { path, .. }, zk::MultiWriteResult::Delete) => {
                                self.ephemerals.lock().unwrap().remove(path.as_str());
                                self.disown(path);
                                OpResult::Delete
                            }
                            (Op::Check(_), zk::MultiWriteResult::Check) => OpResult::Check,
                            (op, r) => {
                                return Err(Error::Backend {
                                    backend: "zookeeper",
                                    message: format!("multi answered {r:?} for {op:?}"),
                                })
                            }
                        });
                    }
                    return Ok(out);
                }
                Err(zk::MultiWriteError::RequestFailed { source }) => {
                    return Err(self.map_err(source, "batch", ops[0].path()))
                }
                Err(zk::MultiWriteError::OperationFailed { index, source }) => {
                    let op = ops[index];
                    let path = op.path();
                    let retry = attempts <= 2 * ops.len() + 2;
                    match (op, plans[index], source) {
                        (
                            Op::Put {
                                expected_version: None,
                                ..
                            },
                            Plan::Set(None),
                            zk::Error::NoNode,
                        ) if retry => {
                            plans[index] = Plan::Create(false);
                        }
                        (
                            Op::Put {
                                expected_version: None,
                                options,
                                ..
                            },
                            Plan::Create(_),
                            zk::Error::NodeExists,
                        ) if retry && !options.sequential => {
                            plans[index] = Plan::Set(None);
                        }
                        (_, Plan::Create(false), zk::Error::NoNode) if retry => {
                            self.create_parents(&client, path).await?;
                            plans[index] = Plan::Create(true);
                        }
                        (_, Plan::Create(_), zk::Error::NodeExists) => {
                            return Err(Error::bad_version(path, CREATE_ONLY))
                        }
                        (_, Plan::Set(Some(v)), zk::Error::NoNode | zk::Error::BadVersion) => {
                            return Err(Error::bad_version(path, i64::from(v)))
                        }
                        (_, Plan::Delete(v), zk::Error::BadVersion) => {
                            return Err(Error::bad_version(path, v.map(i64::from).unwrap_or(-1)))
                        }
                        (_, Plan::Check(_), zk::Error::NoNode | zk::Error::BadVersion) => {
                            return Err(Error::Fenced {
                                path: path.to_string(),
                            })
                        }
                        (_, _, e) => return Err(self.map_err(e, "batch", path)),
                    }
                }
            }
        }
    }

    /// Marks an owned node as gone, so guards on it fail.
    fn disown(&self, path: &str) {
        if let Some(czxid) = self.owned.lock().unwrap().get_mut(path) {
            *czxid = -1;
        }
    }

    /// Deletes this store's registered ephemerals that still belong to its session (used by `close`).
    async fn delete_own_ephemerals(&self) {
        let Ok(client) = self.client() else { return };
        let session = client.session_id().0;
        let paths: Vec<String> = self.ephemerals.lock().unwrap().keys().cloned().collect();
        for path in paths.into_iter().rev() {
            if let Ok(Some(stat)) = client.check_stat(&path).await {
                if stat.ephemeral_owner == session {
                    let _ = client.delete(&path, Some(stat.version)).await;
                }
            }
        }
    }
}

/// Splits a batch into multis under the packet limit.
fn split_by_size(ops: &[Op]) -> Vec<Vec<&Op>> {
    let checks: Vec<&Op> = ops.iter().filter(|op| matches!(op, Op::Check(_))).collect();
    let size = |op: &Op| {
        op.path().len()
            + 64
            + match op {
                Op::Put { value, .. } => value.len(),
                _ => 0,
            }
    };
    let base: usize = checks.iter().map(|op| size(op)).sum();
    let mut chunks: Vec<Vec<&Op>> = Vec::new();
    let mut current: Vec<&Op> = Vec::new();
    let mut bytes = base;
    for op in ops.iter().filter(|op| !matches!(op, Op::Check(_))) {
        if !current.is_empty() && bytes + size(op) > MAX_MULTI_BYTES {
            chunks.push(std::mem::take(&mut current));
            bytes = base;
        }
        bytes += size(op);
        current.push(op);
    }
    chunks.push(current);
    if chunks.len() == 1 {
        // Keep the caller's order (checks where they were).
        return vec![ops.iter().collect()];
    }
    chunks
        .into_iter()
        .map(|chunk| checks.iter().copied().chain(chunk).collect())
        .collect()
}

impl ZkStore {
    /// Connects to `servers` (`host:port,...`), creating the chroot if missing. Fails with
    /// [`Error::Unavailable`] after the connect timeout.
    pub async fn connect(
        servers: &str,
        chroot: Option<&str>,
        options: StoreOptions,
    ) -> Result<ZkStore> {
        let chroot = chroot.map(str::to_string);
        let acls = match (&options.credentials, options.zk_acl) {
            (_, ZkAcl::Open) => vec![zk::Acl::new(zk::Permission::ALL, zk::AuthId::anyone())],
            (None, _) => {
                return Err(Error::InvalidArgument {
                    reason: "a creator ACL needs credentials".into(),
                })
            }
            (Some(_), ZkAcl::CreatorAllWorldRead) => vec![
                zk::Acl::new(zk::Permission::ALL, zk::AuthId::new("auth", "")),
                zk::Acl::new(zk::Permission::READ, zk::AuthId::anyone()),
            ],
            (Some(_), ZkAcl::CreatorOnly) => vec![zk::Acl::new(
                zk::Permission::ALL,
                zk::AuthId::new("auth", ""),
            )],
        };
        let inner = Arc::new(Inner {
            servers: servers.to_string(),
            chroot,
            options,
            acls,
            client: RwLock::new(None),
            generation: AtomicU64::new(0),
            watch_generation: tokio::sync::Mutex::new(0),
            tracking: Mutex::new(Tracking::default()),
            hwm: AtomicI64::new(0),
            resync_floor: Mutex::new(None),
            notifications: Fanout::default(),
            events: Fanout::default(),
            ephemerals: Mutex::new(BTreeMap::new()),
            owned: Mutex::new(HashMap::new()),
            sessions: Mutex::new(Vec::new()),
            answered: Mutex::new(Instant::now()),
            connected: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
        });
        let started = Instant::now();
        let timeout = inner.options.first_connect_timeout();
        let client = match tokio::time::timeout(timeout, new_client(&inner)).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                return Err(match e {
                    Error::ConnectionLost { reason, .. }
                    | Error::Timeout {
                        operation: reason, ..
                    } => Error::Unavailable {
                        address: inner.address(),
                        elapsed: started.elapsed(),
                        reason,
                    },
                    other => other,
                })
            }
            Err(_) => {
                return Err(Error::Unavailable {
                    address: inner.address(),
                    elapsed: started.elapsed(),
                    reason: "no server answered".into(),
                })
            }
        };
        install_client(&inner, client);
        Ok(ZkStore { inner })
    }

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

/// Opens a client (a new session) and ensures the chroot exists.
async fn new_client(inner: &Inner) -> Result<zk::Client> {
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

/// Makes `client` current and starts its supervisor.
fn install_client(inner: &Arc<Inner>, client: zk::Client) {
    let generation = inner.generation.fetch_add(1, Ordering::SeqCst) + 1;
    let states = client.state_watcher();
    let timeout = client.session_timeout();
    inner.sessions.lock().unwrap().push(client.session_id().0);
    *inner.client.write().unwrap() = Some(client);
    for czxid in inner.owned.lock().unwrap().values_mut() {
        *czxid = -1;
    }
    // The session was just established or found again: the server answered a moment ago.
    *inner.answered.lock().unwrap() = Instant::now();
    inner.connected.store(true, Ordering::SeqCst);
    inner.lost.store(false, Ordering::SeqCst);
    let weak = Arc::downgrade(inner);
    inner.spawn_task(supervise(weak.clone(), states, timeout, generation));
    inner.spawn_task(probe(weak, timeout, generation));
}

/// While connected, asks the server something cheap every 1/6 of the session timeout and records the send
/// time of each answered request in `answered` (see the module docs).
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
            if !inner.connected.load(Ordering::SeqCst) {
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
                let mut last = inner.answered.lock().unwrap();
                *last = (*last).max(sent);
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
                if !inner.lost.swap(true, Ordering::SeqCst) {
                    tracing::warn!(store = %inner.address(), "no answer for 5/6 of the session timeout: session lost");
                    inner.events.send(&SessionEvent::SessionLost);
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
                if inner.connected.swap(false, Ordering::SeqCst) {
                    tracing::warn!(store = %inner.address(), "connection lost");
                    inner.events.send(&SessionEvent::ConnectionLost);
                    let deadline = *inner.answered.lock().unwrap() + timeout * 5 / 6;
                    lost_timer = Some(Box::pin(tokio::time::sleep_until(deadline)));
                }
            }
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                lost_timer = None;
                // The server accepted the session on the new connection just now.
                *inner.answered.lock().unwrap() = Instant::now();
                if !inner.connected.swap(true, Ordering::SeqCst) {
                    tracing::info!(store = %inner.address(), "reconnected");
                    inner.events.send(&SessionEvent::Reconnected);
                    if inner.lost.swap(false, Ordering::SeqCst) {
                        inner.events.send(&SessionEvent::SessionReestablished);
                    }
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
    if inner.connected.swap(false, Ordering::SeqCst) {
        inner.events.send(&SessionEvent::ConnectionLost);
    }
    if !inner.lost.swap(true, Ordering::SeqCst) {
        inner.events.send(&SessionEvent::SessionLost);
    }
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
    inner.events.send(&SessionEvent::Reconnected);
    inner.events.send(&SessionEvent::SessionReestablished);
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

    /// Installs the recursive watch on the current session if it lacks one.
    async fn ensure_watch(self: &Arc<Self>) -> Result<()> {
        let mut installed = self.watch_generation.lock().await;
        let generation = self.generation.load(Ordering::SeqCst);
        if *installed == generation {
            return Ok(());
        }
        let client = self.client()?;
        let watcher = self
            .timed("watch", "/", async {
                client
                    .watch("/", zk::AddWatchMode::PersistentRecursive)
                    .await
                    .map_err(|e| self.map_err(e, "watch", "/"))
            })
            .await?;
        *installed = generation;
        self.spawn_task(event_loop(
            Arc::downgrade(self),
            client,
            watcher,
            generation,
        ));
        Ok(())
    }

    /// Adds the recursive watch to the server again and drops the client-side watcher this creates: the
    /// event loop's watcher, registered on the same path, stays and receives everything from then on.
    ///
    /// Needed after every reconnection within a session: `zookeeper-client` 0.11 re-sends the session's
    /// watches with a `SetWatches` request that has no room for persistent watches (its `resend_watches`
    /// never switches to `SetWatches2`), so the server forgets the recursive watch on every new connection.
    /// `addWatch` is idempotent on the server, so this is also right with a client that does re-send it.
    /// Dropping the duplicate removes nothing on the server while another watcher of the path remains.
    async fn rearm_watch(&self, client: &zk::Client) -> Result<()> {
        let duplicate = self
            .timed("watch", "/", async {
                client
                    .watch("/", zk::AddWatchMode::PersistentRecursive)
                    .await
                    .map_err(|e| self.map_err(e, "watch", "/"))
            })
            .await?;
        drop(duplicate);
        Ok(())
    }

    /// After a reconnection in the same session: marks owned ephemerals that were deleted (or deleted and
    /// created again) while the watch was not delivering as gone, so guards on them fail.
    async fn verify_owned(&self, client: &zk::Client) -> Result<()> {
        let owned: Vec<(String, i64)> = self
            .owned
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, czxid)| **czxid != -1)
            .map(|(p, c)| (p.clone(), *c))
            .collect();
        for (path, czxid) in owned {
            let current = client
                .check_stat(&path)
                .await
                .map_err(|e| self.map_err(e, "stat", &path))?;
            if !matches!(current, Some(s) if s.czxid == czxid) {
                let mut owned = self.owned.lock().unwrap();
                if let Some(c) = owned.get_mut(&path).filter(|c| **c == czxid) {
                    tracing::info!("owned ephemeral {path} changed while disconnected");
                    *c = -1;
                }
            }
        }
        Ok(())
    }

    fn tracked(&self, path: &str) -> bool {
        self.tracking
            .lock()
            .unwrap()
            .roots
            .iter()
            .any(|r| is_under(path, r))
    }

    /// Every node under `root` with its stat (skipping ZooKeeper's own `/zookeeper`).
    async fn scan(&self, client: &zk::Client, root: &str) -> Result<BTreeMap<String, zk::Stat>> {
        let mut out = BTreeMap::new();
        let mut queue = vec![root.to_string()];
        while let Some(p) = queue.pop() {
            if p == "/zookeeper" && self.chroot.is_none() {
                continue;
            }
            match client.get_children(&p).await {
                Ok((children, stat)) => {
                    for c in children {
                        queue.push(join(&p, &c));
                    }
                    if p != "/" {
                        out.insert(p, stat);
                    }
                }
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(self.map_err(e, "scan", &p)),
            }
        }
        Ok(out)
    }

    /// Adds `prefix` to the tracked roots (scanning it) unless a root covers it.
    async fn track(&self, prefix: &str) -> Result<()> {
        if self.tracked(prefix) {
            return Ok(());
        }
        let client = self.client()?;
        let nodes = self.scan(&client, prefix).await?;
        let mut t = self.tracking.lock().unwrap();
        for (p, s) in &nodes {
            self.hwm
                .fetch_max(s.mzxid.max(s.czxid).max(s.pzxid), Ordering::Relaxed);
            t.known.insert(p.clone());
        }
        t.roots.retain(|r| !is_under(r, prefix));
        t.roots.push(prefix.to_string());
        Ok(())
    }

    /// After a reconnection: rescans the tracked roots and emits what changed unseen.
    ///
    /// Runs once the watch delivers again, so what changes after the scan is notified live; a node modified
    /// after [`Inner::note_disconnected`]'s zxid is reported `Modified`.
    async fn resync(&self) {
        let floor = self.resync_floor.lock().unwrap().take();
        let hwm = floor.unwrap_or_else(|| self.hwm.load(Ordering::Relaxed));
        // A failed resync leaves the floor for the one after the next reconnection.
        let keep_floor = || {
            let mut f = self.resync_floor.lock().unwrap();
            *f = Some(f.map_or(hwm, |x| x.min(hwm)));
        };
        let roots = self.tracking.lock().unwrap().roots.clone();
        if roots.is_empty() {
            return;
        }
        let Ok(client) = self.client() else {
            keep_floor();
            return;
        };
        let mut current = BTreeMap::new();
        for root in &roots {
            match self.scan(&client, root).await {
                Ok(nodes) => current.extend(nodes),
                Err(e) => {
                    tracing::warn!("resync scan of {root} failed: {e}");
                    keep_floor();
                    return;
                }
            }
        }
        let mut deleted = Vec::new();
        let mut created = Vec::new();
        let mut modified = Vec::new();
        {
            let mut t = self.tracking.lock().unwrap();
            let known_under: Vec<String> = t
                .known
                .iter()
                .filter(|p| roots.iter().any(|r| is_under(p, r)))
                .cloned()
                .collect();
            for p in &known_under {
                if !current.contains_key(p) {
                    deleted.push(p.clone());
                    t.known.remove(p);
                }
            }
            for (p, s) in &current {
                if t.known.insert(p.clone()) {
                    created.push(p.clone());
                } else if s.mzxid > hwm {
                    modified.push(p.clone());
                }
                self.hwm
                    .fetch_max(s.mzxid.max(s.czxid).max(s.pzxid), Ordering::Relaxed);
            }
        }
        let mut changed_parents = BTreeSet::new();
        for p in deleted.iter().rev() {
            self.notifications
                .notify(Notification::new(NotificationType::Deleted, p.clone()));
            if let Some(parent) = parent(p) {
                changed_parents.insert(parent.to_string());
            }
        }
        for p in &created {
            self.notifications
                .notify(Notification::new(NotificationType::Created, p.clone()));
            if let Some(parent) = parent(p) {
                changed_parents.insert(parent.to_string());
            }
        }
        for p in changed_parents {
            self.notifications
                .notify(Notification::new(NotificationType::ChildrenChanged, p));
        }
        for p in modified {
            self.notifications
                .notify(Notification::new(NotificationType::Modified, p));
        }
        if !(deleted.is_empty() && created.is_empty()) {
            tracing::info!(
                store = %self.address(),
                created = created.len(),
                deleted = deleted.len(),
                "resynchronised notifications after reconnecting"
            );
        }
    }
}

/// Turns the recursive watch's events into notifications, tracking nodes and the zxid high-water mark.
///
/// The client also puts the session's state changes into the watcher's stream, in order with the node
/// events (no change is coalesced, unlike the state watcher): after `Disconnected` nothing more arrives from
/// the old connection, and at the following `SyncConnected` [`after_reconnect`] re-adds the watch on the
/// server and rescans what was missed.
async fn event_loop(
    weak: Weak<Inner>,
    client: zk::Client,
    mut watcher: zk::PersistentWatcher,
    generation: u64,
) {
    let mut stats = FuturesUnordered::new();
    let mut disconnected = false;
    loop {
        tokio::select! {
            event = watcher.changed() => {
                let Some(inner) = weak.upgrade() else { return };
                if event.event_type == zk::EventType::Session {
                    match (event.session_state, disconnected) {
                        (state, _) if state.is_terminated() => return,
                        (zk::SessionState::Disconnected, false) => {
                            disconnected = true;
                            inner.note_disconnected();
                        }
                        (
                            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly,
                            true,
                        ) => {
                            disconnected = false;
                            let rearm = after_reconnect(weak.clone(), client.clone(), generation);
                            inner.spawn_task(rearm);
                        }
                        _ => {}
                    }
                    continue;
                }
                let path = event.path;
                if path == "/" || (inner.chroot.is_none() && is_under(&path, "/zookeeper")) {
                    continue;
                }
                let tracked = inner.tracked(&path);
                let mut out = Vec::with_capacity(2);
                match event.event_type {
                    zk::EventType::NodeCreated => {
                        out.push(Notification::new(NotificationType::Created, path.clone()));
                        if let Some(p) = parent(&path) {
                            out.push(Notification::new(NotificationType::ChildrenChanged, p));
                        }
                        if tracked {
                            inner.tracking.lock().unwrap().known.insert(path.clone());
                            stats.push(client.check_stat(&path));
                        }
                    }
                    zk::EventType::NodeDeleted => {
                        out.push(Notification::new(NotificationType::Deleted, path.clone()));
                        if let Some(p) = parent(&path) {
                            out.push(Notification::new(NotificationType::ChildrenChanged, p));
                        }
                        if tracked {
                            inner.tracking.lock().unwrap().known.remove(&path);
                        }
                        inner.disown(&path);
                    }
                    zk::EventType::NodeDataChanged => {
                        out.push(Notification::new(NotificationType::Modified, path.clone()));
                        if tracked {
                            stats.push(client.check_stat(&path));
                        }
                    }
                    zk::EventType::NodeChildrenChanged => {
                        out.push(Notification::new(NotificationType::ChildrenChanged, path.clone()));
                    }
                    zk::EventType::Session => {}
                }
                for n in out {
                    inner.notifications.notify(n);
                }
            }
            Some(result) = stats.next(), if !stats.is_empty() => {
                if let (Ok(Some(stat)), Some(inner)) = (result, weak.upgrade()) {
                    inner.hwm.fetch_max(stat.mzxid.max(stat.czxid), Ordering::Relaxed);
                }
            }
        }
    }
}

/// Back on a connection of the same session: re-adds the recursive watch (retried while connected; a later
/// reconnection starts another attempt), then reports what changed while it was missing.
async fn after_reconnect(weak: Weak<Inner>, client: zk::Client, generation: u64) {
    let mut pause = Duration::from_millis(100);
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst)
            || inner.generation.load(Ordering::SeqCst) != generation
        {
            return;
        }
        match inner.rearm_watch(&client).await {
            Ok(()) => break,
            Err(e)
                if matches!(
                    client.state(),
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
                ) =>
            {
                tracing::warn!("re-adding the recursive watch failed ({e}); retrying in {pause:?}");
            }
            // Disconnected again (the next reconnection re-arms) or the session ended.
            Err(_) => return,
        }
        drop(inner);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
    let Some(inner) = weak.upgrade() else { return };
    tracing::debug!(store = %inner.address(), "recursive watch re-added after reconnecting");
    if let Err(e) = inner.verify_owned(&client).await {
        tracing::warn!("checking owned ephemerals after reconnecting failed: {e}");
    }
    inner.resync().await;
}

impl Drop for ZkStore {
    fn drop(&mut self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        for task in self.inner.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
        // Dropping the last client handle closes the session; the server deletes its ephemerals.
        self.inner.client.write().unwrap().take();
        self.inner.notifications.close();
        self.inner.events.close();
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
        let client = inner.client()?;
        let session = client.session_id().0;
        inner
            .timed("get", path, async {
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

    async fn get_children(&self, path: &str) -> Result<Vec<String>> {
        validate_path(path)?;
        let inner = &self.inner;
        let client = inner.client()?;
        inner
            .timed("children", path, async {
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
        let client = inner.client()?;
        inner
            .timed("exists", path, async {
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
        self.inner.ensure_watch().await?;
        self.inner
            .timed("watch", prefix, self.inner.track(prefix))
            .await?;
        Ok(stream)
    }

    fn session_events(&self) -> SessionEventStream {
        self.inner.events.subscribe("")
    }

    fn is_connected(&self) -> bool {
        !self.inner.closed.load(Ordering::SeqCst)
            && self.inner.connected.load(Ordering::SeqCst)
            && !self.inner.lost.load(Ordering::SeqCst)
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
        let inner = &self.inner;
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

    async fn close(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.delete_own_ephemerals().await;
        self.inner.closed.store(true, Ordering::SeqCst);
        for task in self.inner.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
        self.inner.client.write().unwrap().take();
        self.inner.connected.store(false, Ordering::SeqCst);
        self.inner.notifications.close();
        self.inner.events.close();
        Ok(())
    }
}

/// The raw client, driven the way the store drives it, for `loadmgr bench store` (trait vs raw).
pub mod raw_bench {
    use std::sync::Arc;
    use std::time::Duration;

    use zookeeper_client as zk;

    use crate::store::concurrent::run_in_flight;
    use crate::store::{Error, Result};

    fn err(e: impl std::fmt::Display) -> Error {
        Error::Backend {
            backend: "zookeeper",
            message: e.to_string(),
        }
    }

    /// A raw client on `servers` (no chroot handling: pass paths with it).
    pub struct RawZk {
        client: Arc<zk::Client>,
    }

    impl RawZk {
        /// Connects.
        pub async fn connect(servers: &str) -> Result<RawZk> {
            let client = zk::Client::connector()
                .with_session_timeout(Duration::from_secs(10))
                .connect(servers)
                .await
                .map_err(err)?;
            Ok(RawZk {
                client: Arc::new(client),
            })
        }

        /// `count` unconditional `setData` calls on `keys` (round robin), `in_flight` at a time; returns the
        /// elapsed time.
        pub async fn single_puts(
            &self,
            keys: &[String],
            value: &[u8],
            count: usize,
            in_flight: usize,
        ) -> Result<Duration> {
            run_in_flight(count, in_flight, |i| {
                let put = self.client.set_data(&keys[i % keys.len()], value, None);
                Ok(async move { put.await.map_err(err) })
            })
            .await
        }

        /// `batches` multis of `batch` unconditional `setData` each, `in_flight` multis at a time.
        pub async fn batched_puts(
            &self,
            keys: &[String],
            value: &[u8],
            batches: usize,
            batch: usize,
            in_flight: usize,
        ) -> Result<Duration> {
            run_in_flight(batches, in_flight, |issued| {
                let mut writer = self.client.new_multi_writer();
                for i in 0..batch {
                    writer
                        .add_set_data(&keys[(issued * batch + i) % keys.len()], value, None)
                        .map_err(err)?;
                }
                let commit = writer.commit();
                Ok(async move { commit.await.map_err(err) })
            })
            .await
        }
    }
}
