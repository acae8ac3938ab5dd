//! The metadata store: one async [`MetadataStore`] trait with Pulsar's (PIP-45) contract, and three backends.
//!
//! * [`memory`] — in-process, the embedded default; sessions, ephemerals, notifications and session expiry
//!   that tests and the simulator trigger explicitly.
//! * [`zookeeper`] — ZooKeeper ≥ 3.6 through `zookeeper-client`; the same znodes Pulsar writes.
//! * [`etcd`] — etcd v3 through `etcd-client`; keys are the same paths, values the same bytes.
//!
//! [`connect`] picks a backend from a Pulsar-style URL (`memory:`, `zk:`, `etcd:`; see [`StoreUrl`]).
//!
//! # The contract (what every backend does, checked by `testing::conformance`)
//!
//! * Paths are `/` or `/seg/seg...` (no trailing `/`, no empty, `.` or `..` segment); anything else is
//!   [`Error::InvalidPath`].
//! * [`MetadataStore::get`] of a missing node is `Ok(None)`; [`MetadataStore::get_children`] of a missing node
//!   is an empty list; children are names (not paths), sorted.
//! * [`MetadataStore::put`] with `expected_version`:
//!   `None` writes unconditionally (creating the node, version 0, or bumping the version);
//!   `Some(-1)` creates only — an existing node is [`Error::BadVersion`] (not AlreadyExists, as in Pulsar);
//!   `Some(n)` is compare-and-set — a missing node or another version is [`Error::BadVersion`].
//!   [`CreateOptions`] apply only when the call creates the node; an update keeps an ephemeral node ephemeral
//!   (on etcd that means keeping its lease).
//! * [`MetadataStore::delete`] of a missing node is [`Error::NotFound`] even with an expected version; a wrong
//!   version is [`Error::BadVersion`]; a node with children is [`Error::NotEmpty`].
//! * Versions start at 0 and grow by one per write.
//! * Notifications ([`Notification`]): `Created`, `Modified`, `Deleted` for a node, and `ChildrenChanged` for
//!   the direct parent of a created or deleted node (none for `/`). Delivery is ordered per store (on
//!   ZooKeeper and etcd per watched root, see their module docs); events missed while disconnected are
//!   re-derived after reconnecting (see each backend) and may repeat. A notification may also carry the
//!   node's state right after the change ([`NodeAfter`]) when the server sent it anyway (etcd's watch events
//!   hold the key-value); a consumer that would read the node next can use it instead, since a later change
//!   comes with a later notification. ZooKeeper's and the memory store's notifications carry none.
//! * Session events ([`SessionEvent`]) follow Pulsar's `ZKSessionTest` sequences: a short outage is
//!   `ConnectionLost`, `Reconnected`; a long one (or an expiry) `ConnectionLost`, `SessionLost`, then
//!   `Reconnected`, `SessionReestablished`. After `SessionReestablished` every ephemeral node this store
//!   created (and did not delete) exists again with its last value.
//!
//! Differences that remain between backends are listed in [`Capabilities`].

pub mod concurrent;
pub mod etcd;
mod ext;
mod fanout;
mod leaves;
pub(crate) use leaves::list_leaves;
pub mod memory;
mod options;
mod path;
mod reach;
mod retry;
mod session;
mod url;
mod validity;
pub mod zookeeper;

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use futures::Stream;
use tokio::sync::mpsc;

pub use ext::MetadataStoreExt;
pub use options::{Credentials, StoreOptions, TlsFiles, ZkAcl};
pub use path::{parent, validate_path};
pub use retry::retry_transient;
pub use url::StoreUrl;
pub use validity::SessionValidity;

/// Result alias of the store layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A store shared between tasks.
pub type DynStore = Arc<dyn MetadataStore>;

/// `expected_version` value that means "create only, fail if the node exists".
pub const CREATE_ONLY: i64 = -1;

/// Everything a store call can fail with. Backend errors are mapped into these variants; no client-crate type
/// leaks out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path is not a valid node path.
    #[error("invalid path '{path}': {reason}")]
    InvalidPath {
        /// The path given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The node does not exist.
    #[error("{path}: no such node")]
    NotFound {
        /// The node.
        path: String,
    },
    /// The version condition did not hold: the node exists for a create-only put (`expected` -1), or it is
    /// missing or at another version for a compare-and-set.
    #[error("{path}: version conflict ({})", bad_version_detail(*.expected))]
    BadVersion {
        /// The node.
        path: String,
        /// The expected version given (-1: create only).
        expected: i64,
    },
    /// The node exists (from conveniences such as [`MetadataStoreExt::create`]; the raw store reports
    /// `BadVersion` for a create-only put, as Pulsar does).
    #[error("{path}: node already exists")]
    AlreadyExists {
        /// The node.
        path: String,
    },
    /// The node has children and cannot be deleted.
    #[error("{path}: node has children")]
    NotEmpty {
        /// The node.
        path: String,
    },
    /// A fenced write was rejected: the guard node is gone or changed (leadership or lock lost).
    #[error(
        "{path}: fenced write rejected, the guard node is no longer the one this holder created"
    )]
    Fenced {
        /// The guard node (leader or lock path).
        path: String,
    },
    /// A lock is held by someone else.
    #[error("{path}: lock is held by another owner")]
    LockBusy {
        /// The lock node.
        path: String,
    },
    /// The session (ZooKeeper session, etcd lease) is gone; ephemerals of it may have been deleted.
    #[error("session lost: {reason}")]
    SessionLost {
        /// Why.
        reason: String,
    },
    /// The store cannot be reached.
    #[error("store {address} unreachable after {:.1}s: {reason}", .elapsed.as_secs_f64())]
    Unavailable {
        /// The address(es) tried.
        address: String,
        /// How long we tried.
        elapsed: Duration,
        /// The last error seen.
        reason: String,
    },
    /// The connection dropped while the operation was in flight; it may or may not have been applied.
    #[error("connection to {address} lost during {operation}: {reason}")]
    ConnectionLost {
        /// The server address.
        address: String,
        /// The operation (with its path).
        operation: String,
        /// The client's message.
        reason: String,
    },
    /// The operation did not finish in time; it may or may not have been applied.
    #[error("{operation} timed out after {:.1}s", .after.as_secs_f64())]
    Timeout {
        /// The operation (with its path).
        operation: String,
        /// The time limit.
        after: Duration,
    },
    /// Authentication failed or the credentials lack a permission.
    #[error("not authorized at {address}: {reason}")]
    Unauthorized {
        /// The server address.
        address: String,
        /// The server's message.
        reason: String,
    },
    /// The store URL could not be understood.
    #[error("invalid store URL '{url}': {reason}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// A request the store cannot serve as asked (for example a child under an ephemeral node on ZooKeeper,
    /// or a value over the server's size limit).
    #[error("invalid request: {reason}")]
    InvalidArgument {
        /// What is wrong.
        reason: String,
    },
    /// A node's content could not be decoded as the expected JSON type.
    #[error("{path}: cannot decode content: {reason}")]
    Content {
        /// The node.
        path: String,
        /// The decoder's message.
        reason: String,
    },
    /// The store handle was closed.
    #[error("the store is closed")]
    Closed,
    /// Anything else the backend reported.
    #[error("{backend} error: {message}")]
    Backend {
        /// `memory`, `zookeeper` or `etcd`.
        backend: &'static str,
        /// The client's message.
        message: String,
    },
}

fn bad_version_detail(expected: i64) -> String {
    if expected == CREATE_ONLY {
        "create-only put, but the node exists".to_string()
    } else {
        format!("expected version {expected}")
    }
}

impl Error {
    /// Whether retrying later may succeed (connection trouble, timeouts, a lost session).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Unavailable { .. }
                | Error::ConnectionLost { .. }
                | Error::Timeout { .. }
                | Error::SessionLost { .. }
        )
    }

    pub(crate) fn not_found(path: &str) -> Self {
        Error::NotFound {
            path: path.to_string(),
        }
    }

    pub(crate) fn bad_version(path: &str, expected: i64) -> Self {
        Error::BadVersion {
            path: path.to_string(),
            expected,
        }
    }
}

/// Metadata of a node, filled as each backend can (see the backend modules).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stat {
    /// The node's path; for a sequential create, the path actually created.
    pub path: String,
    /// Data version, 0 after creation, +1 per write.
    pub version: i64,
    /// Identifies this incarnation of the node: ZooKeeper `czxid`, etcd `create_revision`, memory's revision
    /// counter. A node deleted and created again gets a new value.
    pub creation_revision: i64,
    /// ZooKeeper `mzxid`, etcd `mod_revision`, memory's revision of the last write.
    pub modification_revision: i64,
    /// Creation time, ms since the epoch (0 on etcd, which has none).
    pub created_ms: i64,
    /// Last modification time, ms since the epoch (0 on etcd).
    pub modified_ms: i64,
    /// The node vanishes with its session (ZooKeeper ephemeral owner ≠ 0, etcd lease ≠ 0).
    pub ephemeral: bool,
    /// The node is ephemeral and belongs to this store's current session.
    pub created_by_self: bool,
}

impl Stat {
    /// A guard that holds while this exact node (this incarnation, at this version) still exists; see
    /// [`Op::Check`].
    pub fn guard(&self) -> Guard {
        Guard {
            path: self.path.clone(),
            version: self.version,
            creation_revision: self.creation_revision,
        }
    }
}

/// A node's value and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetResult {
    /// The raw bytes.
    pub value: Vec<u8>,
    /// Its metadata.
    pub stat: Stat,
}

/// Options that apply when a put creates the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct CreateOptions {
    /// The node disappears when the session that created it ends.
    pub ephemeral: bool,
    /// The store appends a 10-digit suffix to the path, higher than that of every sibling that exists, so
    /// names are unique among live nodes and increase in creation order; the real path is in [`Stat::path`].
    /// The suffix of a node that is gone may come again (etcd derives it from the revision; a ZooKeeper
    /// container parent that vanished restarts its counter): tell incarnations apart by
    /// [`Stat::creation_revision`].
    pub sequential: bool,
}

impl CreateOptions {
    /// A plain persistent node.
    pub const PERSISTENT: CreateOptions = CreateOptions {
        ephemeral: false,
        sequential: false,
    };
    /// An ephemeral node.
    pub const EPHEMERAL: CreateOptions = CreateOptions {
        ephemeral: true,
        sequential: false,
    };
    /// A persistent sequential node.
    pub const SEQUENTIAL: CreateOptions = CreateOptions {
        ephemeral: false,
        sequential: true,
    };
    /// An ephemeral sequential node.
    pub const EPHEMERAL_SEQUENTIAL: CreateOptions = CreateOptions {
        ephemeral: true,
        sequential: true,
    };
}

/// A condition for a batch: the node at `path` is still the incarnation `creation_revision` at `version`.
///
/// ZooKeeper checks the version inside the multi (the multi runs in the session that owns an ephemeral guard,
/// so a guard whose session expired cannot pass); etcd compares the create revision (and the version);
/// memory compares both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// The guard node.
    pub path: String,
    /// Its version when the guard was taken.
    pub version: i64,
    /// Its creation revision ([`Stat::creation_revision`]).
    pub creation_revision: i64,
}

/// One operation of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A put with the semantics of [`MetadataStore::put`].
    Put {
        /// The node.
        path: String,
        /// The new value.
        value: Vec<u8>,
        /// `None`, [`CREATE_ONLY`] or a version.
        expected_version: Option<i64>,
        /// Applied when the node is created.
        options: CreateOptions,
    },
    /// A delete with the semantics of [`MetadataStore::delete`].
    Delete {
        /// The node.
        path: String,
        /// `None` or a version.
        expected_version: Option<i64>,
    },
    /// Fails the whole batch with [`Error::Fenced`] unless the guard holds.
    Check(Guard),
}

impl Op {
    /// An unconditional put of a persistent node.
    pub fn put(path: impl Into<String>, value: impl Into<Vec<u8>>) -> Op {
        Op::Put {
            path: path.into(),
            value: value.into(),
            expected_version: None,
            options: CreateOptions::PERSISTENT,
        }
    }

    /// An unconditional delete.
    pub fn delete(path: impl Into<String>) -> Op {
        Op::Delete {
            path: path.into(),
            expected_version: None,
        }
    }

    /// The path the operation touches.
    pub fn path(&self) -> &str {
        match self {
            Op::Put { path, .. } | Op::Delete { path, .. } => path,
            Op::Check(guard) => &guard.path,
        }
    }

    /// Bytes of the value a put writes (0 for a delete or a guard).
    pub fn value_len(&self) -> usize {
        match self {
            Op::Put { value, .. } => value.len(),
            Op::Delete { .. } | Op::Check(_) => 0,
        }
    }
}

/// The outcome of one operation of a successful batch, in the order of the operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// The put's new metadata.
    Put(Stat),
    /// The node was deleted.
    Delete,
    /// The guard held.
    Check,
}

/// What happened to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NotificationType {
    /// The node was created.
    Created,
    /// The node's value was written.
    Modified,
    /// The node was deleted (also when its session ended).
    Deleted,
    /// A direct child of the node was created or deleted.
    ChildrenChanged,
}

impl fmt::Display for NotificationType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotificationType::Created => "Created",
            NotificationType::Modified => "Modified",
            NotificationType::Deleted => "Deleted",
            NotificationType::ChildrenChanged => "ChildrenChanged",
        })
    }
}

/// A change notification.
///
/// Two notifications are equal when they report the same kind of change of the same path: [`Self::after`] is
/// what the server happened to send with it, not part of what happened, and is not compared.
#[derive(Debug, Clone)]
pub struct Notification {
    /// What happened.
    pub kind: NotificationType,
    /// The node it happened to.
    pub path: String,
    /// The node's state right after this change, when the store knows it without a read.
    pub after: NodeAfter,
}

impl Notification {
    /// Builds a notification that carries no state ([`NodeAfter::Unknown`]).
    pub fn new(kind: NotificationType, path: impl Into<String>) -> Self {
        Self::with_after(kind, path, NodeAfter::Unknown)
    }

    /// Builds a notification that carries the node's state after the change.
    pub fn with_after(kind: NotificationType, path: impl Into<String>, after: NodeAfter) -> Self {
        Notification {
            kind,
            path: path.into(),
            after,
        }
    }
}

impl PartialEq for Notification {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.path == other.path
    }
}

impl Eq for Notification {}

impl std::hash::Hash for Notification {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
        self.path.hash(state);
    }
}

/// A node's state right after the change a [`Notification`] reports, as the server sent it with the change.
///
/// Contract: `Value` is exactly what a [`MetadataStore::get`] at the change's revision would have answered
/// (value and stat; `created_by_self` as this store's session sees it when the notification is delivered),
/// `Gone` that such a get would have answered `None`. A later change of the node always comes with a later
/// notification, so a consumer that handles a path's notifications in order may use the last one's state
/// instead of reading the node.
#[derive(Debug, Clone, Default)]
pub enum NodeAfter {
    /// The store did not send it (ZooKeeper, the memory store, `ChildrenChanged`): read the node.
    #[default]
    Unknown,
    /// The node exists with this value and stat.
    Value(Arc<GetResult>),
    /// The node does not exist.
    Gone,
}

impl NodeAfter {
    /// The state as a get would answer it, or `None` when unknown.
    pub fn known(&self) -> Option<Option<GetResult>> {
        match self {
            NodeAfter::Unknown => None,
            NodeAfter::Value(found) => Some(Some(GetResult::clone(found))),
            NodeAfter::Gone => Some(None),
        }
    }
}

/// The session's connection state changes (Pulsar's `SessionEvent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionEvent {
    /// The connection dropped; the session (and its ephemerals) probably still exist.
    ConnectionLost,
    /// The connection is back in the same session.
    Reconnected,
    /// The session is (or must be assumed) gone: its ephemeral nodes may have been deleted.
    SessionLost,
    /// A new session exists and this store's ephemerals were re-created in it.
    SessionReestablished,
}

impl SessionEvent {
    /// True for the events after which the store serves again.
    pub fn is_connected(self) -> bool {
        matches!(
            self,
            SessionEvent::Reconnected | SessionEvent::SessionReestablished
        )
    }
}

/// A stream of items from a store; ends when the store is closed. Dropping it unsubscribes.
pub struct EventStream<T> {
    receiver: mpsc::UnboundedReceiver<T>,
    /// Called with each item as it is taken (see [`EventStream::observed`]).
    observer: Option<Observer<T>>,
}

/// What [`EventStream::observed`] calls with each item.
type Observer<T> = Box<dyn Fn(&T) + Send + Sync>;

impl<T> std::fmt::Debug for EventStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("queued", &self.receiver.len())
            .field("observed", &self.observer.is_some())
            .finish()
    }
}

/// Change notifications for a path prefix.
pub type NotificationStream = EventStream<Notification>;
/// Session events.
pub type SessionEventStream = EventStream<SessionEvent>;

impl<T> EventStream<T> {
    pub(crate) fn new(receiver: mpsc::UnboundedReceiver<T>) -> Self {
        EventStream {
            receiver,
            observer: None,
        }
    }

    /// The same stream, with `observer` called on each item as the consumer takes it (to count them).
    ///
    /// The items stay in the store's own queue: unlike a task that forwards them into a new channel, this keeps
    /// the order the store delivered them in across the streams of one session. A consumer that prefers one
    /// stream's items (the leader takes ownership changes before requests) relies on that order.
    pub fn observed(mut self, observer: impl Fn(&T) + Send + Sync + 'static) -> Self {
        self.observer = Some(Box::new(observer));
        self
    }

    fn taken(&self, item: Option<T>) -> Option<T> {
        if let (Some(observe), Some(item)) = (&self.observer, &item) {
            observe(item);
        }
        item
    }

    /// The next item, or `None` once the store is closed.
    pub async fn next(&mut self) -> Option<T> {
        let item = self.receiver.recv().await;
        self.taken(item)
    }

    /// The next item if one is already queued.
    pub fn try_next(&mut self) -> Option<T> {
        let item = self.receiver.try_recv().ok();
        self.taken(item)
    }
}

impl<T> Stream for EventStream<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        match self.receiver.poll_recv(cx) {
            Poll::Ready(item) => Poll::Ready(self.taken(item)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Which backend a store is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// [`memory::MemoryStore`].
    Memory,
    /// [`zookeeper::ZkStore`].
    ZooKeeper,
    /// [`etcd::EtcdStore`].
    Etcd,
}

/// Behaviour that differs between backends (everything else is the same contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Creating `/a/b` makes `/a` exist (ZooKeeper: container parents; memory: empty parents). On etcd parents
    /// are not keys: `exists("/a")` is false while `get_children("/a")` lists `b`.
    pub implicit_parents: bool,
    /// Creation and modification times are filled (etcd has none).
    pub timestamps: bool,
    /// An ephemeral node may not have children (ZooKeeper and memory).
    pub ephemeral_parents_forbidden: bool,
    /// [`Op::Check`] tells a deleted-and-recreated guard node from the original even at the same version
    /// (etcd compares the create revision in the txn; memory under its lock; ZooKeeper, whose multi can only
    /// check versions, for ephemerals this store created — see `zookeeper`'s module docs).
    pub guard_checks_incarnation: bool,
    /// A node's own notifications carry its state after the change ([`NodeAfter`]; etcd sends the key-value
    /// with each event). Elsewhere they carry none and consumers read the node.
    pub notifications_carry_state: bool,
}

impl Backend {
    /// The behaviour differences of this backend.
    pub fn capabilities(self) -> Capabilities {
        match self {
            Backend::Memory => Capabilities {
                implicit_parents: true,
                timestamps: true,
                ephemeral_parents_forbidden: true,
                guard_checks_incarnation: true,
                notifications_carry_state: false,
            },
            Backend::ZooKeeper => Capabilities {
                implicit_parents: true,
                timestamps: true,
                ephemeral_parents_forbidden: true,
                guard_checks_incarnation: true,
                notifications_carry_state: false,
            },
            Backend::Etcd => Capabilities {
                implicit_parents: false,
                timestamps: false,
                ephemeral_parents_forbidden: false,
                guard_checks_incarnation: true,
                notifications_carry_state: true,
            },
        }
    }

    /// `memory`, `zookeeper` or `etcd`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::ZooKeeper => "zookeeper",
            Backend::Etcd => "etcd",
        }
    }
}

/// Which names [`MetadataStore::get_leaves`] takes for leaves (a bundle range, for the runtime's trees).
pub type IsLeaf = fn(&str) -> bool;

/// The metadata store (Pulsar's `MetadataStoreExtended`), with a small required surface. Conveniences
/// (typed JSON, recursive delete, create-only with `AlreadyExists`, explicit parents) are in
/// [`MetadataStoreExt`].
///
/// A store value is one client session: ephemerals belong to it and vanish when it is closed or dropped.
#[async_trait]
pub trait MetadataStore: Send + Sync + fmt::Debug {
    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// Where it is connected (for messages): the URL without credentials.
    fn address(&self) -> String;

    /// The node's value and metadata, `None` if missing.
    async fn get(&self, path: &str) -> Result<Option<GetResult>>;

    /// [`MetadataStore::get`] of each of `paths`, in order. One round trip per call where the backend can read
    /// many nodes in one request (ZooKeeper's `multiRead`, 3.6 and later, where an older server gets one `get`
    /// per path; etcd's read-only txn, 100 keys each); otherwise every `get` is in flight at once. Each read is
    /// of the node as it is when the server reaches it; the call is not a snapshot. Callers keep a call to a
    /// few hundred paths (a ZooKeeper answer must stay under `jute.maxbuffer`, 1 MiB by default).
    async fn get_many(&self, paths: &[String]) -> Result<Vec<Option<GetResult>>> {
        futures::future::try_join_all(paths.iter().map(|p| self.get(p))).await
    }

    /// Names of the direct children, sorted; empty for a missing node.
    async fn get_children(&self, path: &str) -> Result<Vec<String>>;

    /// The leaves below `path` with their values and metadata, sorted by path: the nodes whose name passes
    /// `is_leaf` and that lie below no other such node (`path` itself is never one), as listing every node
    /// whose name does not pass, from `path` down, would find them. For loading a whole tree of records at
    /// once, such as a new leader's assignment records and ownership nodes. Each node is read as the server
    /// finds it, as with [`MetadataStore::get_many`]; a read that fails fails the call, so an answer never
    /// leaves out a node that exists for any other reason than its deletion meanwhile. ZooKeeper and memory
    /// list the directories, then read the leaves with `get_many`; etcd reads the tree as one range of
    /// key-values, one request per page of about 4 MiB.
    async fn get_leaves(&self, path: &str, is_leaf: IsLeaf) -> Result<Vec<(String, GetResult)>> {
        leaves::list_then_read(self, path, is_leaf).await
    }

    /// Whether the node exists.
    async fn exists(&self, path: &str) -> Result<bool>;

    /// Writes a value with the version semantics of the module docs; returns the new metadata.
    async fn put(
        &self,
        path: &str,
        value: &[u8],
        expected_version: Option<i64>,
        options: CreateOptions,
    ) -> Result<Stat>;

    /// Deletes a node: `NotFound` if missing (even with a version), `BadVersion`, `NotEmpty`.
    async fn delete(&self, path: &str, expected_version: Option<i64>) -> Result<()>;

    /// Applies several operations atomically (ZooKeeper multi, etcd txn, memory under one lock) and returns
    /// their results in order, or the error of the first failing operation with nothing applied. Batches over
    /// a server limit (ZooKeeper ~1 MiB per multi; etcd 128 operations or 1.5 MiB per txn, and no key written
    /// twice) are split into several atomic parts, each carrying every [`Op::Check`] of the batch.
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>>;

    /// Notifications for `prefix` and every node below it (`/` for all). Events after this call returns are
    /// delivered; the stream ends when the store is closed.
    async fn watch(&self, prefix: &str) -> Result<NotificationStream>;

    /// Session events from now on.
    fn session_events(&self) -> SessionEventStream;

    /// Whether the store currently believes it is connected with a live session.
    fn is_connected(&self) -> bool;

    /// The validity of the current session term: whether the server may have expired the session by now,
    /// answered from the clock (see [`SessionValidity`]). Ownership leases handed to hosts are built on it.
    fn session_validity(&self) -> SessionValidity;

    /// Ends the current session as a server-side expiry would (its ephemerals are deleted), then establishes a
    /// new one and re-creates this store's ephemerals: `SessionLost` then `SessionReestablished`. For tests,
    /// the simulator and operators rehearsing a failover.
    async fn expire_session(&self) -> Result<()>;

    /// Closes the session: this store's ephemerals are deleted, streams end, later calls fail with
    /// [`Error::Closed`].
    async fn close(&self) -> Result<()>;
}

/// Opens a store from a URL with the given options; see [`StoreUrl`] for the forms. Waits until the store
/// answers (at most the connect timeout) and reports [`Error::Unavailable`] naming the address otherwise.
pub async fn connect(url: &str, options: StoreOptions) -> Result<DynStore> {
    match StoreUrl::parse(url)? {
        StoreUrl::Memory { name } => Ok(Arc::new(match name {
            Some(name) => memory::MemoryStore::named(&name, options),
            None => memory::MemoryStore::with_options(options),
        })),
        StoreUrl::ZooKeeper { servers, chroot } => Ok(Arc::new(
            zookeeper::ZkStore::connect(&servers, chroot.as_deref(), options).await?,
        )),
        StoreUrl::Etcd { endpoints } => Ok(Arc::new(
            etcd::EtcdStore::connect(&endpoints, options).await?,
        )),
    }
}

/// Helper for backends: validates `prefix` and produces a notification stream registered in `fanout`.
pub(crate) fn subscribe(
    fanout: &fanout::Fanout<Notification>,
    prefix: &str,
) -> Result<NotificationStream> {
    validate_path(prefix)?;
    Ok(fanout.subscribe(prefix))
}

#[cfg(test)]
mod tests;
