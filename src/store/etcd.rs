//! The etcd backend (`etcd-client` 0.21; server etcd 3.4 and later). Nothing else in loadmgr knows that crate.
//!
//! # Layout
//!
//! The key is the node path, the value the node's bytes — exactly what ZooKeeper holds — so
//! `etcdctl get --prefix /loadbalance/brokers/` lists what `zkCli.sh ls /loadbalance/brokers` does. Parents
//! are not keys (no placeholder values): `get_children(p)` reads the keys under `p + "/"` and keeps their
//! first segments; `exists(p)` is true only for a key written explicitly.
//!
//! # Mapping
//!
//! | contract | etcd |
//! |---|---|
//! | version | etcd `version − 1` (etcd counts from 1) |
//! | creation / modification revision | `create_revision` / `mod_revision`; no timestamps (0) |
//! | put, no version | put with `ignore_lease` (an update keeps an ephemeral key's lease; a plain put would detach it) and `prev_kv` (the new stat follows from the previous key-value, no read-back); if the key is missing etcd refuses `ignore_lease`, and the put is re-sent as a create guarded by `create_revision == 0` |
//! | put -1 / put n | txn comparing `create_revision == 0` / `version == n + 1` |
//! | delete | txn: key exists, (`version == n + 1`), and no key under `path/` (a range compare), so a node with children is `NotEmpty` as on ZooKeeper |
//! | sequential | suffix = a revision ≥ every sibling's creation revision, created only if absent and no sibling was created later (a range compare) — increasing, unique among live siblings (a deleted node's suffix can come again), 10 digits, and the parent key is not touched |
//! | ephemeral | one lease per store, TTL = the session timeout (whole seconds, ≥ 2); keep-alive every TTL/3 by a task of this store |
//! | batch | one txn: all conditions in `If`, all writes in `Then`, reads of the conditioned keys in `Else` to name the failing op; split to ≤ 128 ops per branch, < 1 MiB, and no key written twice per txn; each part carries every guard |
//! | guard | `create_revision == guard.creation_revision` and `version == guard.version + 1` |
//! | notifications | one watch over every key under `/`, started with the first subscription and resumed from the last seen revision after any failure; `version == 1` puts are `Created` |
//!
//! On etcd a batch's conditions are all evaluated against the state before the batch (ZooKeeper's multi
//! sees earlier ops of the same multi), and a batch that deletes a node and its children fails `NotEmpty`.
//!
//! # Sessions and failover
//!
//! `etcd-client` alone, given several endpoints, keeps dialling a dead one and lets a keep-alive stream that
//! was on it die, so the lease lapses (measured). This store therefore talks to **one endpoint at a time**:
//! any transport failure, timeout or "no leader" answer moves it to the next endpoint, and the keep-alive
//! stream and the watch are re-opened there (the watch from the last seen revision). Requests that surely
//! did not reach a server are retried within the operation timeout; writes that may have been applied are
//! reported as [`Error::ConnectionLost`].
//!
//! Session events: a failed keep-alive is `ConnectionLost`; a renewal after it is `Reconnected`; the server
//! saying the lease is gone, or 5/6 of the TTL passing since the last renewal the server acknowledged, is
//! `SessionLost`; the store then grants a new lease, re-creates its ephemerals on it and emits
//! `SessionReestablished`. The 5/6 are counted by a timer of their own from the moment the acknowledged
//! keep-alive request was *sent* (the server renewed the lease after that, so it cannot expire it before
//! that moment + TTL), whatever the keep-alive stream or an endpoint switch is doing at the time: a broker
//! cut off from etcd hears `SessionLost` at least TTL/6 before the server can hand its ephemerals to someone
//! else (a partitioned broker stops serving its bundles in that margin).
//!
//! # Pitfalls handled
//!
//! * gRPC keepalive pings faster than 5 s make etcd answer `too_many_pings`: the HTTP/2 keepalive is 10 s.
//! * A watch must have a start revision or its first events can be lost (the server registers it
//!   asynchronously): the store always passes one.
//! * etcd rejects a txn that writes one key twice, has more than 128 ops per branch, or exceeds 1.5 MiB.
//! * `ignore_lease` on a missing key fails the whole txn ("key not found"): unconditional puts in a batch
//!   are first sent that way (the common update case costs one round trip) and re-planned with existence
//!   compares if the txn is refused.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client as etcd;
use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::fanout::Fanout;
use super::path::{parent, sequence_suffix};
use super::{
    subscribe, validate_path, Backend, CreateOptions, Error, GetResult, MetadataStore,
    Notification, NotificationStream, NotificationType, Op, OpResult, Result, SessionEvent,
    SessionEventStream, Stat, StoreOptions, CREATE_ONLY,
};

/// etcd's default `--max-txn-ops`.
const MAX_TXN_OPS: usize = 128;
/// Stay well under etcd's default `--max-request-bytes` (1.5 MiB).
const MAX_TXN_BYTES: usize = 1024 * 1024;

/// An etcd client session (one lease); see the module docs.
#[derive(Debug)]
pub struct EtcdStore {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Conn {
    index: usize,
    /// Counts the connections made; a failure on an older one does not move the store again.
    dial: u64,
    client: etcd::Client,
}

struct Inner {
    endpoints: Vec<String>,
    options: StoreOptions,
    conn: Mutex<Conn>,
    rotate_lock: tokio::sync::Mutex<()>,
    lease: AtomicI64,
    notifications: Fanout<Notification>,
    events: Fanout<SessionEvent>,
    ephemerals: Mutex<BTreeMap<String, Vec<u8>>>,
    /// Highest revision seen in any response.
    revision: AtomicI64,
    watch_started: tokio::sync::Mutex<bool>,
    connected: AtomicBool,
    lost: AtomicBool,
    closed: AtomicBool,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .field("lease", &self.lease.load(Ordering::Relaxed))
            .finish()
    }
}

/// What a failed request means for retrying.
enum Failure {
    /// Surely not applied (no connection, no leader): retry elsewhere.
    NotSent(String),
    /// Perhaps applied (the connection broke mid-request): retry reads only.
    Ambiguous(String),
    /// A definite answer.
    Fatal(Error),
}

fn classify(e: etcd::Error, operation: &str, address: &str) -> Failure {
    match e {
        etcd::Error::GRpcStatus(status) => {
            let msg = status.message().to_string();
            if msg.contains("authentication failed")
                || msg.contains("permission denied")
                || msg.contains("user name is empty")
                || msg.contains("invalid auth token")
            {
                return Failure::Fatal(Error::Unauthorized {
                    address: address.to_string(),
                    reason: format!("{operation}: {msg}"),
                });
            }
            match status.code() as i32 {
                tonic_code::UNAVAILABLE
                    if msg.contains("connect")
                        || msg.contains("no leader")
                        || msg.contains("not capable") =>
                {
                    Failure::NotSent(msg)
                }
                tonic_code::UNAVAILABLE
                | tonic_code::DEADLINE_EXCEEDED
                | tonic_code::UNKNOWN
                | tonic_code::CANCELLED
                | tonic_code::ABORTED
                | tonic_code::INTERNAL => Failure::Ambiguous(msg),
                tonic_code::PERMISSION_DENIED | tonic_code::UNAUTHENTICATED => {
                    Failure::Fatal(Error::Unauthorized {
                        address: address.to_string(),
                        reason: format!("{operation}: {msg}"),
                    })
                }
                tonic_code::NOT_FOUND if msg.contains("lease not found") => {
                    Failure::Fatal(Error::SessionLost {
                        reason: format!("{operation}: {msg}"),
                    })
                }
                tonic_code::INVALID_ARGUMENT
                | tonic_code::FAILED_PRECONDITION
                | tonic_code::OUT_OF_RANGE
                | tonic_code::RESOURCE_EXHAUSTED => Failure::Fatal(Error::InvalidArgument {
                    reason: format!("{operation}: {msg}"),
                }),
                _ => Failure::Fatal(Error::Backend {
                    backend: "etcd",
                    message: format!("{operation}: {msg}"),
                }),
            }
        }
        etcd::Error::TransportError(e) => Failure::NotSent(e.to_string()),
        etcd::Error::IoError(e) => Failure::Ambiguous(e.to_string()),
        etcd::Error::LeaseKeepAliveError(m) if m.contains("not found") => {
            Failure::Fatal(Error::SessionLost {
                reason: format!("{operation}: {m}"),
            })
        }
        etcd::Error::WatchError(m) | etcd::Error::LeaseKeepAliveError(m) => Failure::Ambiguous(m),
        other => Failure::Fatal(Error::Backend {
            backend: "etcd",
            message: format!("{operation}: {other}"),
        }),
    }
}

/// gRPC status codes (`tonic::Code` discriminants; etcd-client does not re-export tonic).
mod tonic_code {
    pub(super) const CANCELLED: i32 = 1;
    pub(super) const UNKNOWN: i32 = 2;
    pub(super) const INVALID_ARGUMENT: i32 = 3;
    pub(super) const DEADLINE_EXCEEDED: i32 = 4;
    pub(super) const NOT_FOUND: i32 = 5;
    pub(super) const PERMISSION_DENIED: i32 = 7;
    pub(super) const RESOURCE_EXHAUSTED: i32 = 8;
    pub(super) const FAILED_PRECONDITION: i32 = 9;
    pub(super) const ABORTED: i32 = 10;
    pub(super) const OUT_OF_RANGE: i32 = 11;
    pub(super) const INTERNAL: i32 = 13;
    pub(super) const UNAVAILABLE: i32 = 14;
    pub(super) const UNAUTHENTICATED: i32 = 16;
}

impl Inner {
    fn address(&self) -> String {
        format!("etcd:{}", self.endpoints.join(","))
    }

    fn conn(&self) -> Result<Conn> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        Ok(self.conn.lock().unwrap().clone())
    }

    fn seen(&self, header: Option<&etcd::ResponseHeader>) {
        if let Some(h) = header {
            self.revision.fetch_max(h.revision(), Ordering::Relaxed);
        }
    }

    /// How long one attempt may take before the store tries another endpoint.
    fn attempt_timeout(&self) -> Duration {
        (self.options.session_timeout / 3)
            .max(Duration::from_secs(1))
            .min(self.options.operation_timeout)
    }

    /// Moves to the endpoint after `from` (unless someone already moved). With a single endpoint it dials
    /// that one again: a connection whose peer vanished in a partition is not noticed by HTTP/2 before its
    /// keepalive gives up (15 s), while a fresh one works as soon as the network does.
    async fn rotate(&self, failed: u64) {
        let _guard = self.rotate_lock.lock().await;
        let (from, dial) = {
            let conn = self.conn.lock().unwrap();
            (conn.index, conn.dial)
        };
        if dial != failed {
            return;
        }
        let next = (from + 1) % self.endpoints.len();
        match connect_endpoint(&self.endpoints[next], &self.options, self.attempt_timeout()).await {
            Ok(client) => {
                if next == from {
                    tracing::info!(endpoint = %self.endpoints[next], "etcd: reconnected");
                } else {
                    tracing::info!(from = %self.endpoints[from], to = %self.endpoints[next], "etcd: switching endpoint");
                }
                *self.conn.lock().unwrap() = Conn {
                    index: next,
                    dial: dial + 1,
                    client,
                };
            }
            Err(e) => {
                tracing::warn!(endpoint = %self.endpoints[next], "etcd: cannot connect: {e}");
                // Still move on, so the next failure tries the one after.
                let client = self.conn.lock().unwrap().client.clone();
                *self.conn.lock().unwrap() = Conn {
                    index: next,
                    dial: dial + 1,
                    client,
                };
            }
        }
    }

    /// Runs one request with failover: retried on another endpoint while it surely did not reach a
    /// server (or always, for `idempotent` requests), within the operation timeout.
    async fn call<T, F, Fut>(
        &self,
        operation: &str,
        path: &str,
        idempotent: bool,
        f: F,
    ) -> Result<T>
    where
        F: Fn(etcd::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd::Error>>,
    {
        let start = Instant::now();
        let deadline = start + self.options.operation_timeout;
        let what = format!("{operation} {path}");
        let mut pause = Duration::from_millis(50);
        loop {
            let conn = self.conn()?;
            let remaining = deadline.saturating_duration_since(Instant::now());
            let reason =
                match tokio::time::timeout(self.attempt_timeout().min(remaining), f(conn.client))
                    .await
                {
                    Ok(Ok(v)) => return Ok(v),
                    Ok(Err(e)) => match classify(e, &what, &self.address()) {
                        Failure::Fatal(e) => return Err(e),
                        Failure::NotSent(reason) => reason,
                        Failure::Ambiguous(reason) if idempotent => reason,
                        Failure::Ambiguous(reason) => {
                            self.rotate(conn.dial).await;
                            return Err(Error::ConnectionLost {
                                address: self.endpoints[conn.index].clone(),
                                operation: what,
                                reason,
                            });
                        }
                    },
                    Err(_) if idempotent => "no answer".to_string(),
                    Err(_) => {
                        self.rotate(conn.dial).await;
                        return Err(Error::Timeout {
                            operation: what,
                            after: start.elapsed(),
                        });
                    }
                };
            self.rotate(conn.dial).await;
            if Instant::now() + pause >= deadline {
                return Err(Error::Unavailable {
                    address: self.address(),
                    elapsed: start.elapsed(),
                    reason,
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    fn stat(&self, path: &str, kv: &etcd::KeyValue) -> Stat {
        let lease = self.lease.load(Ordering::SeqCst);
        Stat {
            path: path.to_string(),
            version: kv.version() - 1,
            creation_revision: kv.create_revision(),
            modification_revision: kv.mod_revision(),
            created_ms: 0,
            modified_ms: 0,
            ephemeral: kv.lease() != 0,
            created_by_self: kv.lease() != 0 && kv.lease() == lease,
        }
    }

    /// The lease for a new ephemeral, or `SessionLost` while none exists.
    fn lease_for_create(&self) -> Result<i64> {
        match self.lease.load(Ordering::SeqCst) {
            0 => Err(Error::SessionLost {
                reason: format!("no lease with {} yet (re-establishing)", self.address()),
            }),
            id => Ok(id),
        }
    }

    async fn txn(&self, operation: &str, path: &str, txn: Txn) -> Result<etcd::TxnResponse> {
        let resp = self
            .call(operation, path, false, |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await?;
        self.seen(resp.header());
        Ok(resp)
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
        if expected.is_none() && !options.sequential {
            // The common case, an update: one plain put that keeps the lease and returns the previous
            // key-value (etcd reads it for ignore_lease anyway); a missing key falls through to a create.
            let put = self
                .call("put", path, false, |mut c| async move {
                    c.put(
                        path,
                        value,
                        Some(PutOptions::new().with_ignore_lease().with_prev_key()),
                    )
                    .await
                })
                .await;
            match put {
                Ok(resp) => {
                    self.seen(resp.header());
                    if let Some(prev) = resp.prev_key() {
                        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
                        let lease = self.lease.load(Ordering::SeqCst);
                        if let Some(v) = self.ephemerals.lock().unwrap().get_mut(path) {
                            *v = value.to_vec();
                        }
                        return Ok(Stat {
                            path: path.to_string(),
                            version: prev.version(),
                            creation_revision: prev.create_revision(),
                            modification_revision: revision,
                            created_ms: 0,
                            modified_ms: 0,
                            ephemeral: prev.lease() != 0,
                            created_by_self: prev.lease() != 0 && prev.lease() == lease,
                        });
                    }
                }
                Err(Error::InvalidArgument { reason }) if reason.contains("key not found") => {}
                Err(e) => return Err(e),
            }
        }
        let results = self
            .batch(vec![Op::Put {
                path: path.to_string(),
                value: value.to_vec(),
                expected_version: expected,
                options,
            }])
            .await?;
        match results.into_iter().next() {
            Some(OpResult::Put(stat)) => Ok(stat),
            other => Err(Error::Backend {
                backend: "etcd",
                message: format!("put answered {other:?}"),
            }),
        }
    }

    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        for op in &ops {
            validate_path(op.path())?;
            if op.path() == "/" && !matches!(op, Op::Check(_)) {
                return Err(Error::InvalidArgument {
                    reason: "the root cannot be written or deleted".into(),
                });
            }
        }
        self.conn()?;
        let mut out = Vec::with_capacity(ops.len());
        for chunk in split(&ops) {
            out.extend(self.run_chunk(&chunk).await?);
        }
        Ok(out)
    }

    /// One atomic txn (see [`split`] for the limits), re-planned when unconditional puts meet missing keys or
    /// sequential names meet a race.
    async fn run_chunk(&self, ops: &[&Op]) -> Result<Vec<OpResult>> {
        // Existence of unconditional-put keys: unknown at first (optimistic `ignore_lease`).
        let mut known: Option<HashMap<String, bool>> = None;
        for attempt in 0..8 {
            let candidate = self.revision.load(Ordering::Relaxed) + 1;
            let plan = Plan::build(ops, known.as_ref(), candidate, self)?;
            let first = ops.first().map(|o| o.path()).unwrap_or("");
            let resp = match self.txn("batch", first, plan.txn.clone()).await {
                Ok(r) => r,
                Err(Error::InvalidArgument { reason })
                    if reason.contains("key not found") && known.is_none() =>
                {
                    known = Some(self.existence(ops).await?);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if resp.succeeded() {
                return self.decode_success(ops, &plan, &resp);
            }
            match self.diagnose(ops, &plan, &resp)? {
                Retry::Replan => {
                    known = Some(self.existence(ops).await?);
                }
                Retry::Sequence => {}
            }
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(5 << attempt)).await;
            }
        }
        Err(Error::Backend {
            backend: "etcd",
            message: "batch kept conflicting with concurrent writers".into(),
        })
    }

    /// Which unconditional-put keys exist now.
    async fn existence(&self, ops: &[&Op]) -> Result<HashMap<String, bool>> {
        let keys: Vec<String> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Put {
                    path,
                    expected_version: None,
                    options,
                    ..
                } if !options.sequential => Some(path.clone()),
                _ => None,
            })
            .collect();
        let gets: Vec<TxnOp> = keys
            .iter()
            .map(|k| TxnOp::get(k.as_str(), Some(GetOptions::new().with_count_only())))
            .collect();
        let resp = self
            .call(
                "read",
                keys.first().map(String::as_str).unwrap_or(""),
                true,
                |mut c| {
                    let t = Txn::new().and_then(gets.clone());
                    async move { c.txn(t).await }
                },
            )
            .await?;
        self.seen(resp.header());
        Ok(keys
            .into_iter()
            .zip(resp.op_responses())
            .map(|(k, r)| {
                let exists = matches!(r, TxnOpResponse::Get(g) if g.count() > 0);
                (k, exists)
            })
            .collect())
    }

    fn decode_success(
        &self,
        ops: &[&Op],
        plan: &Plan,
        resp: &etcd::TxnResponse,
    ) -> Result<Vec<OpResult>> {
        let responses = resp.op_responses();
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        let mut out = Vec::with_capacity(ops.len());
        let mut eph = self.ephemerals.lock().unwrap();
        for (i, op) in ops.iter().enumerate() {
            match (op, &plan.success_index[i]) {
                (Op::Check(_), _) => out.push(OpResult::Check),
                (Op::Delete { path, .. }, Some(_)) => {
                    eph.remove(path.as_str());
                    out.push(OpResult::Delete);
                }
                (Op::Put { value, options, .. }, Some(at)) => {
                    let key = &plan.keys[i];
                    let stat = if plan.created[i] {
                        Stat {
                            path: key.clone(),
                            version: 0,
                            creation_revision: revision,
                            modification_revision: revision,
                            created_ms: 0,
                            modified_ms: 0,
                            ephemeral: options.ephemeral,
                            created_by_self: options.ephemeral,
                        }
                    } else {
                        let prev = match responses.get(*at) {
                            Some(TxnOpResponse::Put(p)) => p.prev_key().cloned(),
                            _ => None,
                        };
                        let prev = prev.ok_or_else(|| Error::Backend {
                            backend: "etcd",
                            message: format!("no previous value of {key} in the txn answer"),
                        })?;
                        let lease = self.lease.load(Ordering::SeqCst);
                        Stat {
                            path: key.clone(),
                            version: prev.version(),
                            creation_revision: prev.create_revision(),
                            modification_revision: revision,
                            created_ms: 0,
                            modified_ms: 0,
                            ephemeral: prev.lease() != 0,
                            created_by_self: prev.lease() != 0 && prev.lease() == lease,
                        }
                    };
                    if plan.created[i] && options.ephemeral {
                        eph.insert(key.clone(), value.clone());
                    } else if let Some(v) = eph.get_mut(key.as_str()) {
                        *v = value.clone();
                    }
                    out.push(OpResult::Put(stat));
                }
                (op, None) => {
                    return Err(Error::Backend {
                        backend: "etcd",
                        message: format!("no txn result for {op:?}"),
                    })
                }
            }
        }
        Ok(out)
    }

    /// Names the first failing op from the `Else` reads, or asks for a retry.
    fn diagnose(&self, ops: &[&Op], plan: &Plan, resp: &etcd::TxnResponse) -> Result<Retry> {
        let responses = resp.op_responses();
        let read = |at: usize| -> Option<etcd::KeyValue> {
            match responses.get(at) {
                Some(TxnOpResponse::Get(g)) => g.kvs().first().cloned(),
                _ => None,
            }
        };
        let count = |at: usize| -> i64 {
            match responses.get(at) {
                Some(TxnOpResponse::Get(g)) => g.count(),
                _ => 0,
            }
        };
        let mut replan = false;
        let mut sequence = false;
        for (i, op) in ops.iter().enumerate() {
            let Some(at) = plan.failure_index[i] else {
                continue;
            };
            let kv = read(at);
            match op {
                Op::Check(g) => {
                    let holds = kv.as_ref().is_some_and(|kv| {
                        kv.create_revision() == g.creation_revision && kv.version() == g.version + 1
                    });
                    if !holds {
                        return Err(Error::Fenced {
                            path: g.path.clone(),
                        });
                    }
                }
                Op::Delete {
                    path,
                    expected_version,
                    ..
                } => match kv {
                    None => return Err(Error::not_found(path)),
                    Some(kv) if expected_version.is_some_and(|v| kv.version() != v + 1) => {
                        return Err(Error::bad_version(path, expected_version.unwrap_or(-1)))
                    }
                    Some(_) if count(at + 1) > 0 => {
                        return Err(Error::NotEmpty { path: path.clone() })
                    }
                    Some(_) => {}
                },
                Op::Put {
                    path,
                    expected_version,
                    options,
                    ..
                } => match expected_version {
                    _ if options.sequential && (kv.is_some() || count(at + 1) > 0) => {
                        sequence = true;
                    }
                    _ if options.sequential => {}
                    Some(CREATE_ONLY) if kv.is_some() => {
                        return Err(Error::bad_version(path, CREATE_ONLY))
                    }
                    Some(v)
                        if *v != CREATE_ONLY
                            && kv.as_ref().map_or(true, |kv| kv.version() != v + 1) =>
                    {
                        return Err(Error::bad_version(path, *v))
                    }
                    None => {
                        let exists = kv.is_some();
                        if plan.assumed_exists[i] != Some(exists) {
                            replan = true;
                        }
                    }
                    _ => {}
                },
            }
        }
        if sequence {
            return Ok(Retry::Sequence);
        }
        if replan {
            return Ok(Retry::Replan);
        }
        // Every condition read back as holding: a concurrent change between the txn and its Else branch.
        Ok(Retry::Replan)
    }

    async fn delete(&self, path: &str, expected: Option<i64>) -> Result<()> {
        validate_path(path)?;
        self.batch(vec![Op::Delete {
            path: path.to_string(),
            expected_version: expected,
        }])
        .await
        .map(|_| ())
    }

    async fn get(&self, path: &str) -> Result<Option<GetResult>> {
        validate_path(path)?;
        let resp = self
            .call(
                "get",
                path,
                true,
                |mut c| async move { c.get(path, None).await },
            )
            .await?;
        self.seen(resp.header());
        Ok(resp.kvs().first().map(|kv| GetResult {
            value: kv.value().to_vec(),
            stat: self.stat(path, kv),
        }))
    }

    async fn get_children(&self, path: &str) -> Result<Vec<String>> {
        validate_path(path)?;
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        let resp = self
            .call("children", path, true, |mut c| {
                let prefix = prefix.clone();
                async move {
                    c.get(
                        prefix,
                        Some(
                            GetOptions::new()
                                .with_prefix()
                                .with_keys_only()
                                .with_sort(etcd::SortTarget::Key, etcd::SortOrder::Ascend),
                        ),
                    )
                    .await
                }
            })
            .await?;
        self.seen(resp.header());
        let mut children: Vec<String> = Vec::new();
        for kv in resp.kvs() {
            let Some(rest) = kv.key().strip_prefix(prefix.as_bytes()) else {
                continue;
            };
            let first = rest.split(|b| *b == b'/').next().unwrap_or_default();
            if first.is_empty() {
                continue;
            }
            let name = String::from_utf8_lossy(first).into_owned();
            if children.last() != Some(&name) {
                children.push(name);
            }
        }
        children.sort();
        children.dedup();
        Ok(children)
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        validate_path(path)?;
        if path == "/" {
            return Ok(true);
        }
        let resp = self
            .call("exists", path, true, |mut c| async move {
                c.get(path, Some(GetOptions::new().with_count_only())).await
            })
            .await?;
        self.seen(resp.header());
        Ok(resp.count() > 0)
    }

    /// Re-creates registered ephemerals on the current lease (skipping keys someone else holds).
    async fn restore_ephemerals(&self, old_lease: i64) {
        let entries: Vec<(String, Vec<u8>)> = self
            .ephemerals
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let Ok(lease) = self.lease_for_create() else {
            return;
        };
        for (path, value) in entries {
            let txn = Txn::new()
                .when([Compare::create_revision(path.as_str(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    path.as_str(),
                    value.clone(),
                    Some(PutOptions::new().with_lease(lease)),
                )])
                .or_else([TxnOp::get(
                    path.as_str(),
                    Some(GetOptions::new().with_keys_only()),
                )]);
            match self.txn("restore", &path, txn).await {
                Ok(r) if r.succeeded() => tracing::info!("re-created ephemeral {path}"),
                Ok(r) => {
                    // Still there on the old lease (not yet expired server-side): move it to the new one.
                    let old = r.op_responses().into_iter().find_map(|o| match o {
                        TxnOpResponse::Get(g) => g.kvs().first().cloned(),
                        _ => None,
                    });
                    match old {
                        Some(kv) if kv.lease() == old_lease && old_lease != 0 => {
                            let t = Txn::new()
                                .when([Compare::mod_revision(
                                    path.as_str(),
                                    CompareOp::Equal,
                                    kv.mod_revision(),
                                )])
                                .and_then([TxnOp::put(
                                    path.as_str(),
                                    value.clone(),
                                    Some(PutOptions::new().with_lease(lease)),
                                )]);
                            if let Err(e) = self.txn("restore", &path, t).await {
                                tracing::warn!(
                                    "cannot move ephemeral {path} to the new lease: {e}"
                                );
                            }
                        }
                        _ => {
                            tracing::warn!(
                                "ephemeral {path} is held by someone else; not re-created"
                            );
                            self.ephemerals.lock().unwrap().remove(&path);
                        }
                    }
                }
                Err(e) => tracing::warn!("cannot re-create ephemeral {path}: {e}"),
            }
        }
    }

    async fn grant_lease(&self) -> Result<(i64, i64)> {
        let ttl = self.options.session_timeout.as_secs_f64().ceil().max(2.0) as i64;
        let resp = self
            .call("lease grant", "", false, |mut c| async move {
                c.lease_grant(ttl, None).await
            })
            .await?;
        Ok((resp.id(), resp.ttl().max(1)))
    }

    /// Starts the watch over every key (once).
    async fn ensure_watch(self: &Arc<Self>) -> Result<()> {
        let mut started = self.watch_started.lock().await;
        if *started {
            return Ok(());
        }
        // The current revision: events after it are delivered.
        let resp = self
            .call("watch", "/", true, |mut c| async move {
                c.get("/", Some(GetOptions::new().with_count_only())).await
            })
            .await?;
        self.seen(resp.header());
        let from = resp.header().map(|h| h.revision()).unwrap_or(0) + 1;
        let task = tokio::spawn(watch_loop(Arc::downgrade(self), from));
        self.tasks.lock().unwrap().push(task);
        *started = true;
        Ok(())
    }
}

enum Retry {
    Replan,
    Sequence,
}

/// A txn built from ops, with where each op's results sit.
struct Plan {
    txn: Txn,
    /// The key each op writes (sequential: the chosen name).
    keys: Vec<String>,
    /// Index of the op's first response in `Then`.
    success_index: Vec<Option<usize>>,
    /// Index of the op's first read in `Else`.
    failure_index: Vec<Option<usize>>,
    /// For unconditional puts planned with existence known: what was assumed.
    assumed_exists: Vec<Option<bool>>,
    /// Whether each put creates its key (else it updates it, keeping its lease, and returns the previous
    /// key-value, from which the new stat follows).
    created: Vec<bool>,
}

impl Plan {
    fn build(
        ops: &[&Op],
        known: Option<&HashMap<String, bool>>,
        candidate: i64,
        inner: &Inner,
    ) -> Result<Plan> {
        let keys_only = || Some(GetOptions::new().with_keys_only());
        let mut compares = Vec::new();
        let mut then = Vec::new();
        let mut otherwise = Vec::new();
        let mut keys = Vec::with_capacity(ops.len());
        let mut success_index = Vec::with_capacity(ops.len());
        let mut failure_index = Vec::with_capacity(ops.len());
        let mut assumed_exists = Vec::with_capacity(ops.len());
        let mut created = vec![false; ops.len()];
        for op in ops {
            let mut assumed = None;
            match op {
                Op::Check(g) => {
                    compares.push(Compare::create_revision(
                        g.path.as_str(),
                        CompareOp::Equal,
                        g.creation_revision,
                    ));
                    compares.push(Compare::version(
                        g.path.as_str(),
                        CompareOp::Equal,
                        g.version + 1,
                    ));
                    keys.push(g.path.clone());
                    success_index.push(None);
                    failure_index.push(Some(otherwise.len()));
                    otherwise.push(TxnOp::get(g.path.as_str(), keys_only()));
                }
                Op::Delete {
                    path,
                    expected_version,
                    ..
                } => {
                    let children = format!("{path}/");
                    compares.push(Compare::create_revision(
                        path.as_str(),
                        CompareOp::Greater,
                        0,
                    ));
                    compares.push(
                        Compare::create_revision(children.as_str(), CompareOp::Equal, 0)
                            .with_prefix(),
                    );
                    if let Some(v) = expected_version {
                        compares.push(Compare::version(path.as_str(), CompareOp::Equal, v + 1));
                    }
                    keys.push(path.clone());
                    success_index.push(Some(then.len()));
                    then.push(TxnOp::delete(path.as_str(), None));
                    failure_index.push(Some(otherwise.len()));
                    otherwise.push(TxnOp::get(path.as_str(), keys_only()));
                    otherwise.push(TxnOp::get(
                        children.as_str(),
                        Some(GetOptions::new().with_prefix().with_count_only()),
                    ));
                }
                Op::Put {
                    path,
                    value,
                    expected_version,
                    options,
                } => {
                    let new_put = || -> Result<TxnOp> {
                        let opts = if options.ephemeral {
                            Some(PutOptions::new().with_lease(inner.lease_for_create()?))
                        } else {
                            None
                        };
                        Ok(TxnOp::put(path_key(op, candidate), value.clone(), opts))
                    };
                    let keep_put = || {
                        TxnOp::put(
                            path.as_str(),
                            value.clone(),
                            Some(PutOptions::new().with_ignore_lease().with_prev_key()),
                        )
                    };
                    let key = path_key(op, candidate);
                    let mut creates = false;
                    let failure = match (expected_version, options.sequential) {
                        (_, true) => {
                            creates = true;
                            compares.push(Compare::create_revision(
                                key.as_str(),
                                CompareOp::Equal,
                                0,
                            ));
                            compares.push(
                                Compare::create_revision(path.as_str(), CompareOp::Less, candidate)
                                    .with_prefix(),
                            );
                            then.push(new_put()?);
                            Some((key.clone(), true))
                        }
                        (Some(CREATE_ONLY), false) => {
                            creates = true;
                            compares.push(Compare::create_revision(
                                path.as_str(),
                                CompareOp::Equal,
                                0,
                            ));
                            then.push(new_put()?);
                            Some((path.clone(), false))
                        }
                        (Some(v), false) => {
                            compares.push(Compare::version(path.as_str(), CompareOp::Equal, v + 1));
                            then.push(keep_put());
                            Some((path.clone(), false))
                        }
                        (None, false) => match known.and_then(|k| k.get(path.as_str())) {
                            None => {
                                then.push(keep_put());
                                None
                            }
                            Some(true) => {
                                assumed = Some(true);
                                compares.push(Compare::create_revision(
                                    path.as_str(),
                                    CompareOp::Greater,
                                    0,
                                ));
                                then.push(keep_put());
                                Some((path.clone(), false))
                            }
                            Some(false) => {
                                creates = true;
                                assumed = Some(false);
                                compares.push(Compare::create_revision(
                                    path.as_str(),
                                    CompareOp::Equal,
                                    0,
                                ));
                                then.push(new_put()?);
                                Some((path.clone(), false))
                            }
                        },
                    };
                    success_index.push(Some(then.len() - 1));
                    match failure {
                        Some((k, sequential)) => {
                            failure_index.push(Some(otherwise.len()));
                            otherwise.push(TxnOp::get(k.as_str(), keys_only()));
                            if sequential {
                                otherwise.push(TxnOp::get(
                                    path.as_str(),
                                    Some(
                                        GetOptions::new()
                                            .with_prefix()
                                            .with_count_only()
                                            .with_min_create_revision(candidate),
                                    ),
                                ));
                            }
                        }
                        None => failure_index.push(None),
                    }
                    keys.push(key);
                    created[keys.len() - 1] = creates;
                }
            }
            assumed_exists.push(assumed);
        }
        Ok(Plan {
            txn: Txn::new().when(compares).and_then(then).or_else(otherwise),
            keys,
            success_index,
            failure_index,
            assumed_exists,
            created,
        })
    }
}

/// The key a put writes: its path, or for a sequential put the path plus the candidate suffix.
fn path_key(op: &Op, candidate: i64) -> String {
    match op {
        Op::Put { path, options, .. } if options.sequential => {
            format!("{path}{}", sequence_suffix(candidate))
        }
        other => other.path().to_string(),
    }
}

/// Splits a batch so each txn stays within etcd's limits and writes no key twice; guards go into every
/// part.
fn split(ops: &[Op]) -> Vec<Vec<&Op>> {
    let checks: Vec<&Op> = ops.iter().filter(|op| matches!(op, Op::Check(_))).collect();
    // Per op: (compares, then-ops, else-ops, bytes).
    let cost = |op: &Op| -> (usize, usize, usize, usize) {
        let bytes = op.path().len() * 3
            + 32
            + match op {
                Op::Put { value, .. } => value.len(),
                _ => 0,
            };
        match op {
            Op::Check(_) => (2, 0, 1, bytes),
            Op::Delete { .. } => (3, 1, 2, bytes),
            Op::Put { .. } => (2, 1, 2, bytes),
        }
    };
    let base = checks.iter().fold((0, 0, 0, 0), |acc, op| {
        let c = cost(op);
        (acc.0 + c.0, acc.1 + c.1, acc.2 + c.2, acc.3 + c.3)
    });
    let mut parts: Vec<Vec<&Op>> = Vec::new();
    let mut current: Vec<&Op> = Vec::new();
    let mut used = base;
    let mut written: HashSet<&str> = HashSet::new();
    for op in ops.iter().filter(|op| !matches!(op, Op::Check(_))) {
        let c = cost(op);
        let over = used.0 + c.0 > MAX_TXN_OPS
            || used.1 + c.1 > MAX_TXN_OPS
            || used.2 + c.2 > MAX_TXN_OPS
            || used.3 + c.3 > MAX_TXN_BYTES;
        let duplicate = written.contains(op.path())
            && !matches!(op, Op::Put { options, .. } if options.sequential);
        if !current.is_empty() && (over || duplicate) {
            parts.push(std::mem::take(&mut current));
            used = base;
            written.clear();
        }
        used = (used.0 + c.0, used.1 + c.1, used.2 + c.2, used.3 + c.3);
        written.insert(op.path());
        current.push(op);
    }
    parts.push(current);
    if parts.len() == 1 {
        return vec![ops.iter().collect()];
    }
    parts
        .into_iter()
        .map(|part| checks.iter().copied().chain(part).collect())
        .collect()
}

async fn connect_endpoint(
    endpoint: &str,
    options: &StoreOptions,
    timeout: Duration,
) -> Result<etcd::Client> {
    let mut opts = etcd::ConnectOptions::new()
        .with_connect_timeout(timeout)
        .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
        .with_require_leader(true);
    if let Some(c) = &options.credentials {
        opts = opts.with_user(c.user.clone(), c.password.clone());
    }
    if let Some(tls) = &options.tls {
        let mut config = etcd::TlsOptions::new();
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| Error::InvalidArgument {
                reason: format!("cannot read {}: {e}", p.display()),
            })
        };
        if let Some(ca) = &tls.ca_file {
            config = config.ca_certificate(etcd::Certificate::from_pem(read(ca)?));
        }
        if let (Some(cert), Some(key)) = (&tls.cert_file, &tls.key_file) {
            config = config.identity(etcd::Identity::from_pem(read(cert)?, read(key)?));
        }
        if let Some(domain) = &tls.domain {
            config = config.domain_name(domain.clone());
        }
        opts = opts.with_tls(config);
    }
    let connect = etcd::Client::connect([endpoint], Some(opts));
    match tokio::time::timeout(timeout, connect).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(match classify(e, "connect", endpoint) {
            Failure::Fatal(e) => e,
            Failure::NotSent(reason) | Failure::Ambiguous(reason) => Error::Unavailable {
                address: endpoint.to_string(),
                elapsed: timeout,
                reason,
            },
        }),
        Err(_) => Err(Error::Unavailable {
            address: endpoint.to_string(),
            elapsed: timeout,
            reason: "no answer".into(),
        }),
    }
}

impl EtcdStore {
    /// Connects to the first endpoint that answers (trying each in turn until the connect timeout), grants
    /// the session lease and starts its keep-alive.
    pub async fn connect(endpoints: &[String], options: StoreOptions) -> Result<EtcdStore> {
        if endpoints.is_empty() {
            return Err(Error::InvalidUrl {
                url: "etcd:".into(),
                reason: "no endpoint".into(),
            });
        }
        let started = Instant::now();
        let deadline = started + options.first_connect_timeout();
        let attempt = (options.session_timeout / 3).max(Duration::from_secs(1));
        let mut last;
        let mut index = 0;
        let client = loop {
            let endpoint = &endpoints[index % endpoints.len()];
            let remaining = deadline.saturating_duration_since(Instant::now());
            match connect_endpoint(endpoint, &options, attempt.min(remaining)).await {
                Ok(mut c) => {
                    let probe = c.get("/", Some(GetOptions::new().with_count_only()));
                    match tokio::time::timeout(attempt.min(remaining), probe).await {
                        Ok(Ok(_)) => break c,
                        Ok(Err(e)) => match classify(e, "connect", endpoint) {
                            Failure::Fatal(e) => return Err(e),
                            Failure::NotSent(r) | Failure::Ambiguous(r) => {
                                last = format!("{endpoint}: {r}")
                            }
                        },
                        Err(_) => last = format!("{endpoint}: no answer"),
                    }
                }
                Err(e @ (Error::Unauthorized { .. } | Error::InvalidArgument { .. })) => {
                    return Err(e)
                }
                Err(e) => last = e.to_string(),
            }
            index += 1;
            if Instant::now() >= deadline {
                return Err(Error::Unavailable {
                    address: format!("etcd:{}", endpoints.join(",")),
                    elapsed: started.elapsed(),
                    reason: last,
                });
            }
            if index % endpoints.len() == 0 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        let inner = Arc::new(Inner {
            endpoints: endpoints.to_vec(),
            options,
            conn: Mutex::new(Conn {
                index: index % endpoints.len(),
                dial: 0,
                client,
            }),
            rotate_lock: tokio::sync::Mutex::new(()),
            lease: AtomicI64::new(0),
            notifications: Fanout::default(),
            events: Fanout::default(),
            ephemerals: Mutex::new(BTreeMap::new()),
            revision: AtomicI64::new(0),
            watch_started: tokio::sync::Mutex::new(false),
            connected: AtomicBool::new(true),
            lost: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
        });
        let (lease, ttl) = inner.grant_lease().await?;
        inner.lease.store(lease, Ordering::SeqCst);
        let task = tokio::spawn(session_loop(Arc::downgrade(&inner), ttl));
        inner.tasks.lock().unwrap().push(task);
        Ok(EtcdStore { inner })
    }

    /// The current lease id (0 while re-establishing).
    pub fn lease_id(&self) -> i64 {
        self.inner.lease.load(Ordering::SeqCst)
    }

    /// The endpoint currently used.
    pub fn current_endpoint(&self) -> String {
        let conn = self.inner.conn.lock().unwrap();
        self.inner.endpoints[conn.index].clone()
    }
}

/// How long after the send time of the last acknowledged renewal the session counts as lost.
fn lost_after(ttl: i64) -> Duration {
    Duration::from_millis(ttl as u64 * 1000 * 5 / 6)
}

/// Keeps the lease alive, following endpoints; turns failures into session events and re-establishes.
async fn session_loop(weak: Weak<Inner>, mut ttl: i64) {
    // The send time of the last keep-alive request the server answered with a live lease.
    let renewed = Mutex::new(Instant::now());
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        let lease = inner.lease.load(Ordering::SeqCst);
        let period = Duration::from_millis((ttl as u64 * 1000 / 3).max(300));
        let Ok(conn) = inner.conn() else { return };
        // One keep-alive stream, and on its failure an endpoint switch and a pause, raced against the
        // session's deadline.
        let attempt = async {
            match keep_alive(&inner, conn.clone(), lease, period, &renewed).await {
                KeepAlive::Disconnected(reason) => {
                    if inner.connected.swap(false, Ordering::SeqCst) {
                        tracing::warn!(store = %inner.address(), "keep-alive failed: {reason}");
                        inner.events.send(&SessionEvent::ConnectionLost);
                    }
                    inner.rotate(conn.dial).await;
                    tokio::time::sleep(period / 2).await;
                    None
                }
                other => Some(other),
            }
        };
        tokio::pin!(attempt);
        let outcome = loop {
            let deadline = *renewed.lock().unwrap() + lost_after(ttl);
            tokio::select! {
                o = &mut attempt => break o,
                _ = tokio::time::sleep_until(deadline) => {
                    let since = renewed.lock().unwrap().elapsed();
                    if since >= lost_after(ttl) {
                        break Some(KeepAlive::Lost(format!(
                            "no renewal acknowledged for {since:?} (TTL {ttl} s)"
                        )));
                    }
                }
            }
        };
        match outcome {
            // A disconnection was handled in the attempt: the next one starts.
            None | Some(KeepAlive::Disconnected(_)) => continue,
            Some(KeepAlive::Closed) => return,
            Some(KeepAlive::Lost(reason)) => {
                tracing::warn!(store = %inner.address(), "lease lost: {reason}");
                if inner.connected.swap(false, Ordering::SeqCst) {
                    inner.events.send(&SessionEvent::ConnectionLost);
                }
                if !inner.lost.swap(true, Ordering::SeqCst) {
                    inner.events.send(&SessionEvent::SessionLost);
                }
                inner.lease.store(0, Ordering::SeqCst);
                // A new lease, retried until it works or the store closes.
                loop {
                    if inner.closed.load(Ordering::SeqCst) {
                        return;
                    }
                    match inner.grant_lease().await {
                        Ok((id, granted)) => {
                            inner.lease.store(id, Ordering::SeqCst);
                            ttl = granted;
                            break;
                        }
                        Err(e) => {
                            tracing::warn!("etcd lease grant failed: {e}");
                            let dial = inner.conn.lock().unwrap().dial;
                            inner.rotate(dial).await;
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                    }
                }
                *renewed.lock().unwrap() = Instant::now();
                inner.restore_ephemerals(lease).await;
                inner.connected.store(true, Ordering::SeqCst);
                inner.lost.store(false, Ordering::SeqCst);
                inner.events.send(&SessionEvent::Reconnected);
                inner.events.send(&SessionEvent::SessionReestablished);
                tracing::info!(store = %inner.address(), "etcd session re-established with a new lease");
            }
        }
    }
}

enum KeepAlive {
    Lost(String),
    Disconnected(String),
    Closed,
}

/// Runs a keep-alive stream on one connection until it fails. `renewed` is moved to the send time of every
/// request the server answers with a live lease; whether a failure has cost the session is decided by the
/// caller's deadline on `renewed`, not here.
async fn keep_alive(
    inner: &Inner,
    conn: Conn,
    lease: i64,
    period: Duration,
    renewed: &Mutex<Instant>,
) -> KeepAlive {
    let mut client = conn.client;
    let sent = Instant::now();
    let opened = tokio::time::timeout(period, client.lease_keep_alive(lease)).await;
    let (mut keeper, mut stream) = match opened {
        Ok(Ok(pair)) => pair,
        Ok(Err(e)) => {
            return match classify(e, "keep-alive", &inner.endpoints[conn.index]) {
                Failure::Fatal(Error::SessionLost { reason }) => KeepAlive::Lost(reason),
                Failure::Fatal(e) => KeepAlive::Disconnected(e.to_string()),
                Failure::NotSent(r) | Failure::Ambiguous(r) => KeepAlive::Disconnected(r),
            }
        }
        Err(_) => return KeepAlive::Disconnected("keep-alive stream did not open".into()),
    };
    // Opening the stream sent one keep-alive and waited for an answer with a live lease.
    *renewed.lock().unwrap() = sent;
    if !inner.connected.swap(true, Ordering::SeqCst) {
        tracing::info!(store = %inner.address(), "keep-alive restored");
        inner.events.send(&SessionEvent::Reconnected);
    }
    loop {
        tokio::time::sleep(period).await;
        if inner.closed.load(Ordering::SeqCst) {
            return KeepAlive::Closed;
        }
        if inner.lease.load(Ordering::SeqCst) != lease {
            return KeepAlive::Disconnected("lease replaced".into());
        }
        let sent = Instant::now();
        if let Err(e) = keeper.keep_alive().await {
            return KeepAlive::Disconnected(e.to_string());
        }
        match tokio::time::timeout(period, stream.message()).await {
            Ok(Ok(Some(resp))) if resp.ttl() > 0 => {
                *renewed.lock().unwrap() = sent;
            }
            Ok(Ok(Some(_))) => {
                return KeepAlive::Lost("the server reports the lease expired".into())
            }
            Ok(Ok(None)) => return KeepAlive::Disconnected("keep-alive stream ended".into()),
            Ok(Err(e)) => return KeepAlive::Disconnected(e.to_string()),
            Err(_) => return KeepAlive::Disconnected("no keep-alive answer".into()),
        }
    }
}

/// Delivers every change under `/` as notifications, resuming from the last seen revision.
async fn watch_loop(weak: Weak<Inner>, mut next: i64) {
    let mut pause = Duration::from_millis(100);
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let Ok(conn) = inner.conn() else { return };
        let mut client = conn.client.clone();
        drop(inner);
        let opened = client
            .watch(
                "/",
                Some(
                    etcd::WatchOptions::new()
                        .with_prefix()
                        .with_start_revision(next),
                ),
            )
            .await;
        let mut stream = match opened {
            Ok(s) => s,
            Err(e) => {
                let Some(inner) = weak.upgrade() else { return };
                tracing::warn!("etcd watch failed to open: {e}");
                inner.rotate(conn.dial).await;
                drop(inner);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        loop {
            let message = stream.message().await;
            let Some(inner) = weak.upgrade() else { return };
            if inner.closed.load(Ordering::SeqCst) {
                return;
            }
            match message {
                Ok(Some(resp)) => {
                    pause = Duration::from_millis(100);
                    if resp.canceled() {
                        if resp.compact_revision() > 0 {
                            tracing::warn!(
                                "etcd watch resumed after compaction: changes between revisions {next} and {} are lost",
                                resp.compact_revision()
                            );
                            next = resp.compact_revision();
                        }
                        break;
                    }
                    inner.seen(resp.header());
                    for event in resp.events() {
                        let Some(kv) = event.kv() else { continue };
                        next = next.max(kv.mod_revision() + 1);
                        let Ok(path) = std::str::from_utf8(kv.key()) else {
                            continue;
                        };
                        if validate_path(path).is_err() || path == "/" {
                            continue;
                        }
                        let (kind, children) = match event.event_type() {
                            etcd::EventType::Put if kv.version() == 1 => {
                                (NotificationType::Created, true)
                            }
                            etcd::EventType::Put => (NotificationType::Modified, false),
                            etcd::EventType::Delete => (NotificationType::Deleted, true),
                        };
                        inner.notifications.notify(Notification::new(kind, path));
                        if children {
                            if let Some(p) = parent(path) {
                                inner.notifications.notify(Notification::new(
                                    NotificationType::ChildrenChanged,
                                    p,
                                ));
                            }
                        }
                    }
                }
                Ok(None) | Err(_) => {
                    tracing::warn!("etcd watch stream broke; resuming from revision {next}");
                    inner.rotate(conn.dial).await;
                    break;
                }
            }
        }
        tokio::time::sleep(pause).await;
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        for task in self.inner.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
        self.inner.notifications.close();
        self.inner.events.close();
        // Revoke the lease so our ephemerals go now rather than after the TTL.
        let lease = self.inner.lease.load(Ordering::SeqCst);
        let mut client = self.inner.conn.lock().unwrap().client.clone();
        if lease != 0 {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ =
                        tokio::time::timeout(Duration::from_secs(2), client.lease_revoke(lease))
                            .await;
                });
            }
        }
    }
}

#[async_trait]
impl MetadataStore for EtcdStore {
    fn backend(&self) -> Backend {
        Backend::Etcd
    }

    fn address(&self) -> String {
        self.inner.address()
    }

    async fn get(&self, path: &str) -> Result<Option<GetResult>> {
        self.inner.get(path).await
    }

    async fn get_children(&self, path: &str) -> Result<Vec<String>> {
        self.inner.get_children(path).await
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        self.inner.exists(path).await
    }

    async fn put(
        &self,
        path: &str,
        value: &[u8],
        expected_version: Option<i64>,
        options: CreateOptions,
    ) -> Result<Stat> {
        self.inner.put(path, value, expected_version, options).await
    }

    async fn delete(&self, path: &str, expected_version: Option<i64>) -> Result<()> {
        if path == "/" {
            return Err(Error::InvalidArgument {
                reason: "the root cannot be deleted".into(),
            });
        }
        self.inner.delete(path, expected_version).await
    }

    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        self.inner.batch(ops).await
    }

    async fn watch(&self, prefix: &str) -> Result<NotificationStream> {
        validate_path(prefix)?;
        self.inner.conn()?;
        let stream = subscribe(&self.inner.notifications, prefix)?;
        self.inner.ensure_watch().await?;
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

    /// Revokes the lease: its keys go at once, the keep-alive task sees the lease gone and re-establishes.
    async fn expire_session(&self) -> Result<()> {
        let lease = self.inner.lease_for_create()?;
        self.inner
            .call("lease revoke", "", false, |mut c| async move {
                c.lease_revoke(lease).await
            })
            .await
            .map(|_| ())
    }

    async fn close(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let lease = self.inner.lease.load(Ordering::SeqCst);
        for task in self.inner.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
        let revoked = if lease != 0 {
            self.inner
                .call("lease revoke", "", false, |mut c| async move {
                    c.lease_revoke(lease).await
                })
                .await
                .map(|_| ())
        } else {
            Ok(())
        };
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.connected.store(false, Ordering::SeqCst);
        self.inner.notifications.close();
        self.inner.events.close();
        revoked
    }
}

/// The raw client, driven the way the store drives it, for `loadmgr bench store` (trait vs raw).
pub mod raw_bench {
    use std::time::Duration;

    use etcd_client as etcd;

    use crate::store::concurrent::run_in_flight;
    use crate::store::{Error, Result};

    fn err(e: impl std::fmt::Display) -> Error {
        Error::Backend {
            backend: "etcd",
            message: e.to_string(),
        }
    }

    /// A raw client on one endpoint.
    pub struct RawEtcd {
        client: etcd::Client,
    }

    impl RawEtcd {
        /// Connects to the first endpoint.
        pub async fn connect(endpoints: &[String]) -> Result<RawEtcd> {
            let client = etcd::Client::connect(&endpoints[..1], None)
                .await
                .map_err(err)?;
            Ok(RawEtcd { client })
        }

        /// `count` puts on `keys` (round robin), `in_flight` at a time; `prev_kv` asks for the previous
        /// key-value (what the store needs to report the new version, and what etcd reads anyway to keep a
        /// lease).
        pub async fn single_puts(
            &self,
            keys: &[String],
            value: &[u8],
            count: usize,
            in_flight: usize,
            prev_kv: bool,
        ) -> Result<Duration> {
            run_in_flight(count, in_flight, |i| {
                let mut c = self.client.clone();
                let key = keys[i % keys.len()].clone();
                let value = value.to_vec();
                let options = prev_kv.then(|| etcd::PutOptions::new().with_prev_key());
                Ok(async move { c.put(key, value, options).await.map_err(err) })
            })
            .await
        }

        /// `batches` txns of `batch` puts each, `in_flight` txns at a time (`prev_kv` as for single puts).
        pub async fn batched_puts(
            &self,
            keys: &[String],
            value: &[u8],
            batches: usize,
            batch: usize,
            in_flight: usize,
            prev_kv: bool,
        ) -> Result<Duration> {
            run_in_flight(batches, in_flight, |issued| {
                let ops: Vec<etcd::TxnOp> = (0..batch)
                    .map(|i| {
                        etcd::TxnOp::put(
                            keys[(issued * batch + i) % keys.len()].clone(),
                            value.to_vec(),
                            prev_kv.then(|| etcd::PutOptions::new().with_prev_key()),
                        )
                    })
                    .collect();
                let mut c = self.client.clone();
                Ok(async move { c.txn(etcd::Txn::new().and_then(ops)).await.map_err(err) })
            })
            .await
        }
    }
}
