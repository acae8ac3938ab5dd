//! The etcd backend (`etcd-client` 0.21; server etcd 3.4 and later). Nothing else in loadmgr knows that crate.
//!
//! # Layout
//!
//! The key is the node path, the value the node's bytes — exactly what ZooKeeper holds — so
//! `etcdctl get --prefix /loadbalance/brokers/` lists what `zkCli.sh ls /loadbalance/brokers` does. Parents
//! are not keys (no placeholder values): `get_children(p)` reads the keys under `p + "/"` and keeps their
//! first segments, 5,000 keys a page, skipping the rest of a child's subtree once a page ends inside it
//! (one answer of every key under a folder of 65,000 records was 4.8 MB, over the client's 4 MiB limit, and
//! a new leader could not load); `exists(p)` is true only for a key written explicitly.
//!
//! # Mapping
//!
//! | contract | etcd |
//! |---|---|
//! | version | etcd `version − 1` (etcd counts from 1) |
//! | get_many | read-only txns of 100 gets each (a txn allows 128 operations): one request per hundred keys |
//! | get_leaves | one range of key-values under `path/`, in key order, in pages of about 4 MiB (32 to 10,000 keys): no listing, one request per page |
//! | children | keys-only pages of 5,000 keys under `path/`, each starting after the subtree the last one ended in; no sort order asked for (etcd would read the whole rest of the range for one) |
//! | creation / modification revision | `create_revision` / `mod_revision`; no timestamps (0) |
//! | put, no version | put with `ignore_lease` (an update keeps an ephemeral key's lease; a plain put would detach it) and `prev_kv` (the new stat follows from the previous key-value, no read-back); if the key is missing etcd refuses `ignore_lease`, and the put is re-sent as a create guarded by `create_revision == 0` |
//! | put -1 / put n | txn comparing `create_revision == 0` / `version == n + 1` |
//! | delete | txn: key exists, (`version == n + 1`), and no key under `path/` (a range compare), so a node with children is `NotEmpty` as on ZooKeeper |
//! | sequential | suffix = a revision ≥ every sibling's creation revision, created only if absent and no sibling was created later (a range compare) — increasing, unique among live siblings (a deleted node's suffix can come again), 10 digits, and the parent key is not touched |
//! | ephemeral | one lease per store, TTL = the session timeout (whole seconds, ≥ 2); keep-alive every TTL/3 by a task of this store |
//! | batch | one txn: all conditions in `If`, all writes in `Then`, reads of the conditioned keys in `Else` to name the failing op; split to ≤ 128 ops per branch, < 1 MiB, and no key written twice per txn; each part carries every guard |
//! | guard | `create_revision == guard.creation_revision` and `version == guard.version + 1` |
//! | notifications | one etcd watch per watched root (a subscribed prefix no earlier root covers, as on ZooKeeper), all on one watch stream, each resumed from its last seen revision after any failure; `version == 1` puts are `Created` |
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
//! reported as [`Error::ConnectionLost`](crate::store::Error::ConnectionLost).
//!
//! Session events: a failed keep-alive is `ConnectionLost`; a renewal after it is `Reconnected`; the server
//! saying the lease is gone, or 9/10 of the TTL passing since the last renewal the server acknowledged, is
//! `SessionLost`; the store then grants a new lease, re-creates its ephemerals on it and emits
//! `SessionReestablished`. Keep-alives go out every TTL/15; while disconnected a new stream is tried every
//! TTL/20 on a fresh connection. The 9/10 are counted by a timer of their own from the moment the
//! acknowledged keep-alive request was *sent* (the server renewed the lease after that, so it cannot expire
//! it before that moment + TTL), whatever the keep-alive stream or an endpoint switch is doing at the time;
//! hosts stop serving at that deadline through their leases ([`crate::store::SessionValidity`]), at least
//! TTL/10 before the server can hand the store's ephemerals to someone else.
//! The flags, the deadline rule and the events are those of `store::session::SessionState`, which
//! the ZooKeeper backend shares.
//!
//! # Pitfalls handled
//!
//! * gRPC keepalive pings faster than 5 s make etcd answer `too_many_pings`: the HTTP/2 keepalive is 10 s.
//! * A watch must have a start revision or its first events can be lost (the server registers it
//!   asynchronously): the store always passes one.
//! * etcd rejects a txn that writes one key twice, has more than 128 ops per branch, or exceeds 1.5 MiB.
//! * etcd fails a keep-alive that has waited a second for the applied index, so a server sent requests faster
//!   than it applies them lets every session's lease lapse: each store limits its own writes at the server
//!   by how fast they come back (`throttle.rs`), and watches only the prefixes it subscribed to (`watch.rs`).
//! * `ignore_lease` on a missing key fails the whole txn ("key not found"): unconditional puts in a batch
//!   are first sent that way (the common update case costs one round trip) and re-planned with existence
//!   compares if the txn is refused.
//!
//! # Files
//!
//! | file | concern |
//! |---|---|
//! | `connect.rs` | connecting, one endpoint at a time, failover of requests, endpoint rotation |
//! | `session.rs` | the lease and its keep-alive loop (on `store::session`), re-establishment |
//! | `kv.rs` | reads, single writes and batches |
//! | `txn.rs` | txn planning: splitting, compares/writes/reads per op, diagnosis of a failed txn |
//! | `watch.rs` | the watches of the subscribed roots and their resumption |
//! | `throttle.rs` | back-pressure: the writes at the server at once, adapted to their latency |
//! | `errors.rs` | client errors → retry classes and [`Error`](crate::store::Error) |
//! | `raw_bench.rs` | the raw client for `loadmgr bench store` |

mod connect;
mod errors;
mod kv;
mod leaves;
pub mod raw_bench;
mod session;
mod throttle;
mod txn;
mod watch;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client as etcd;
use tokio::task::JoinHandle;

use super::fanout::Fanout;
use super::session::SessionState;
use super::{
    subscribe, validate_path, Backend, CreateOptions, GetResult, IsLeaf, MetadataStore,
    Notification, NotificationStream, Op, OpResult, Result, SessionEventStream, Stat, StoreOptions,
};

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
    /// Connection and session flags, the last acknowledged keep-alive and the session event subscribers.
    session: SessionState,
    ephemerals: Mutex<BTreeMap<String, Vec<u8>>>,
    /// Highest revision seen in any response.
    revision: AtomicI64,
    /// The watched roots (see `watch.rs`).
    watch_roots: tokio::sync::Mutex<watch::WatchRoots>,
    /// The writes at the server at once (see `throttle.rs`).
    throttle: throttle::Throttle,
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

impl EtcdStore {
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

impl Drop for EtcdStore {
    fn drop(&mut self) {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        for task in self.inner.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
        self.inner.notifications.close();
        self.inner.session.close_streams();
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

    async fn get_many(&self, paths: &[String]) -> Result<Vec<Option<GetResult>>> {
        self.inner.get_many(paths).await
    }

    async fn get_children(&self, path: &str) -> Result<Vec<String>> {
        self.inner.get_children(path).await
    }

    async fn get_leaves(&self, path: &str, is_leaf: IsLeaf) -> Result<Vec<(String, GetResult)>> {
        self.inner.get_leaves(path, is_leaf).await
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
        self.inner.delete(path, expected_version).await
    }

    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        self.inner.batch(ops).await
    }

    async fn watch(&self, prefix: &str) -> Result<NotificationStream> {
        validate_path(prefix)?;
        self.inner.conn()?;
        let stream = subscribe(&self.inner.notifications, prefix)?;
        self.inner.ensure_watch(prefix).await?;
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
        self.inner.session.mark_down();
        self.inner.notifications.close();
        self.inner.session.close_streams();
        revoked
    }
}
