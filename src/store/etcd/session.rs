//! The etcd session: one lease per store, kept alive by the session loop, and replaced (with the store's
//! ephemerals re-created on the new one) when it is lost.
//!
//! # Contract
//!
//! See "Sessions and failover" in the module docs of [`super`]. The lease's TTL is the session timeout
//! (whole seconds, at least 2); a keep-alive goes out every TTL/15 (as Pulsar's session watcher probes), so
//! the deadline below counts from a recent answer. A failed keep-alive stream is `ConnectionLost` (the store
//! moves to the next endpoint and tries a new stream there every TTL/20, at least 50 ms, until one opens); a
//! renewal after it `Reconnected`. A keep-alive the server refuses as too busy (its apply loop behind) is no
//! disconnection: it is retried on the same connection every renewal period, with no event. The server
//! saying the lease is gone, or [`crate::store::session::lost_after`] of the TTL passing since the send time
//! of the last acknowledged keep-alive (a timer of its own, whatever the stream or an endpoint switch is
//! doing), is `SessionLost`: the loop grants a new lease (retried until it works or the store closes),
//! re-creates the ephemerals on it while keeping it alive (taking over keys still on an earlier lease of the
//! session, giving up keys someone else holds) and sends `Reconnected`, `SessionReestablished`.

use std::sync::atomic::Ordering;
use std::sync::Weak;
use std::time::Duration;

use etcd_client::{
    Compare, CompareOp, GetOptions, LeaseKeepAliveStream, LeaseKeeper, PutOptions, Txn, TxnOp,
    TxnOpResponse,
};
use tokio::time::Instant;

use super::errors::{classify, is_busy, Failure};
use super::{Conn, Inner};
use crate::store::{Error, Result};

impl Inner {
    /// The lease for a new ephemeral, or `SessionLost` while none exists.
    pub(super) fn lease_for_create(&self) -> Result<i64> {
        match self.lease.load(Ordering::SeqCst) {
            0 => Err(Error::SessionLost {
                reason: format!("no lease with {} yet (re-establishing)", self.address()),
            }),
            id => Ok(id),
        }
    }

    /// Re-creates registered ephemerals on the current lease; see [`Inner::restore_one`]. `ours` are the
    /// session's earlier leases: a node still on one of them is moved to the current lease.
    async fn restore_ephemerals(&self, ours: &[i64]) {
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
            self.restore_one(&path, &value, lease, ours).await;
        }
    }

    /// Re-creates one ephemeral on `lease`: created if absent; moved if it is still on one of `ours` (not yet
    /// expired by the server); left as it is if already on `lease`; given up (and forgotten) if anyone else
    /// holds it. A node that changes between the read and the move (its old lease expiring just then) is
    /// read again, up to [`RESTORE_ATTEMPTS`] times.
    async fn restore_one(&self, path: &str, value: &[u8], lease: i64, ours: &[i64]) {
        for _ in 0..RESTORE_ATTEMPTS {
            let txn = Txn::new()
                .when([Compare::create_revision(path, CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    path,
                    value.to_vec(),
                    Some(PutOptions::new().with_lease(lease)),
                )])
                .or_else([TxnOp::get(path, Some(GetOptions::new().with_keys_only()))]);
            let found = match self.txn("restore", path, txn).await {
                Ok(r) if r.succeeded() => {
                    tracing::info!("re-created ephemeral {path}");
                    return;
                }
                Ok(r) => r.op_responses().into_iter().find_map(|o| match o {
                    TxnOpResponse::Get(g) => g.kvs().first().cloned(),
                    _ => None,
                }),
                Err(e) => {
                    tracing::warn!("cannot re-create ephemeral {path}: {e}");
                    return;
                }
            };
            // Gone between the compare and the read: create it again.
            let Some(kv) = found else { continue };
            if kv.lease() == lease {
                return;
            }
            if kv.lease() == 0 || !ours.contains(&kv.lease()) {
                tracing::warn!("ephemeral {path} is held by someone else; not re-created");
                self.ephemerals.lock().unwrap().remove(path);
                return;
            }
            let moved = Txn::new()
                .when([Compare::mod_revision(
                    path,
                    CompareOp::Equal,
                    kv.mod_revision(),
                )])
                .and_then([TxnOp::put(
                    path,
                    value.to_vec(),
                    Some(PutOptions::new().with_lease(lease)),
                )]);
            match self.txn("restore", path, moved).await {
                Ok(r) if r.succeeded() => return,
                // Changed meanwhile (most likely the old lease expired and took it): look again.
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!("cannot move ephemeral {path} to the new lease: {e}");
                    return;
                }
            }
        }
        tracing::warn!(
            "ephemeral {path} kept changing; not re-created after {RESTORE_ATTEMPTS} attempts"
        );
    }

    /// Grants a lease with the session timeout as TTL (whole seconds, at least 2); returns its id and the
    /// TTL the server granted.
    pub(super) async fn grant_lease(&self) -> Result<(i64, i64)> {
        let ttl = self.options.session_timeout.as_secs_f64().ceil().max(2.0) as i64;
        let resp = self
            .call("lease grant", "", false, |mut c| async move {
                c.lease_grant(ttl, None).await
            })
            .await?;
        Ok((resp.id(), resp.ttl().max(1)))
    }
}

/// The session timeout of a lease with `ttl` seconds.
fn ttl_timeout(ttl: i64) -> Duration {
    Duration::from_secs(ttl as u64)
}

/// Keeps the lease alive, following endpoints; turns failures into session events and re-establishes.
pub(super) async fn session_loop(weak: Weak<Inner>, mut ttl: i64) {
    // The session's deadline counts from the send time of the last keep-alive request the server answered
    // with a live lease; the lease was granted just now.
    if let Some(inner) = weak.upgrade() {
        inner.session.set_timeout(ttl_timeout(ttl));
        inner.session.acknowledged_now();
    }
    let mut busy_warned: Option<Instant> = None;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        let lease = inner.lease.load(Ordering::SeqCst);
        let period = renewal_period(ttl);
        let retry = Duration::from_millis((ttl as u64 * 1000 / 20).max(50));
        let Ok(conn) = inner.conn() else { return };
        // One keep-alive stream, and on its failure an endpoint switch and a pause, raced against the
        // session's deadline.
        let attempt = async {
            // While disconnected, a stream that does not open quickly is given up for a fresh connection: a
            // channel to a server that was down may wait out its own reconnection backoff after the server
            // is back.
            let open_within = if inner.session.is_connected() {
                period * 15 / 4
            } else {
                retry.max(Duration::from_millis(500))
            };
            match keep_alive(&inner, conn.clone(), lease, period, open_within).await {
                KeepAlive::Disconnected(reason) => {
                    if inner.session.connection_lost() {
                        tracing::warn!(store = %inner.address(), "keep-alive failed: {reason}");
                    }
                    inner.rotate(conn.dial).await;
                    tokio::time::sleep(retry).await;
                    None
                }
                KeepAlive::Busy(reason) => {
                    // The connection works: no new one, and no more keep-alives than a healthy server gets.
                    // The deadline above still decides whether this costs the session.
                    let now = Instant::now();
                    if busy_warned.map_or(true, |at| now.duration_since(at) >= BUSY_WARNING_EVERY) {
                        busy_warned = Some(now);
                        tracing::warn!(store = %inner.address(), "keep-alive refused by a busy server: {reason}");
                    }
                    tokio::time::sleep(period).await;
                    None
                }
                other => Some(other),
            }
        };
        tokio::pin!(attempt);
        let outcome = loop {
            let deadline = inner.session.lost_at(ttl_timeout(ttl));
            tokio::select! {
                o = &mut attempt => break o,
                _ = tokio::time::sleep_until(deadline) => {
                    if let Some(since) = inner.session.overdue(ttl_timeout(ttl)) {
                        break Some(KeepAlive::Lost(format!(
                            "no renewal acknowledged for {since:?} (TTL {ttl} s)"
                        )));
                    }
                }
            }
        };
        match outcome {
            // A disconnection or a busy answer was handled in the attempt: the next one starts.
            None | Some(KeepAlive::Disconnected(_) | KeepAlive::Busy(_)) => continue,
            Some(KeepAlive::Closed) => return,
            Some(KeepAlive::Lost(reason)) => {
                tracing::warn!(store = %inner.address(), "lease lost: {reason}");
                inner.session.lost();
                inner.lease.store(0, Ordering::SeqCst);
                // A new lease, retried until it works or the store closes; the ephemerals are re-created on it
                // while it is kept alive, since on a busy server re-creating a broker's hundred ownership nodes
                // one by one can outlast the TTL (then every later re-creation failed with "lease not found",
                // the session was lost again, and a whole cluster's restart never settled). Nodes on any
                // earlier lease of this session are ours to move.
                let mut ours = vec![lease];
                loop {
                    if inner.closed.load(Ordering::SeqCst) {
                        return;
                    }
                    match inner.grant_lease().await {
                        Ok((id, granted)) => {
                            inner.lease.store(id, Ordering::SeqCst);
                            ttl = granted;
                            inner.session.set_timeout(ttl_timeout(ttl));
                        }
                        Err(e) => {
                            tracing::warn!("etcd lease grant failed: {e}");
                            let dial = inner.conn.lock().unwrap().dial;
                            inner.rotate(dial).await;
                            tokio::time::sleep(Duration::from_millis(500)).await;
                            continue;
                        }
                    }
                    inner.session.acknowledged_now();
                    let Ok(conn) = inner.conn() else { return };
                    let new_lease = inner.lease.load(Ordering::SeqCst);
                    let period = renewal_period(ttl);
                    let renewing = async {
                        match open_stream(&inner, conn, new_lease, patience(period)).await {
                            Ok((keeper, stream)) => {
                                renew(&inner, keeper, stream, new_lease, period).await
                            }
                            Err(failed) => failed,
                        }
                    };
                    let why = tokio::select! {
                        _ = inner.restore_ephemerals(&ours) => break,
                        failed = renewing => match failed {
                            KeepAlive::Closed => return,
                            KeepAlive::Lost(why)
                            | KeepAlive::Disconnected(why)
                            | KeepAlive::Busy(why) => why,
                        },
                    };
                    tracing::warn!(
                        store = %inner.address(),
                        "the new lease was not kept alive while ephemerals were re-created ({why}); granting another"
                    );
                    ours.push(new_lease);
                    inner.lease.store(0, Ordering::SeqCst);
                }
                inner.session.mark_up();
                inner.session.reestablished();
                tracing::info!(store = %inner.address(), "etcd session re-established with a new lease");
            }
        }
    }
}

enum KeepAlive {
    Lost(String),
    Disconnected(String),
    /// The server answered that it is too busy (see [`is_busy`]); the connection is fine.
    Busy(String),
    Closed,
}

/// Reads of one ephemeral that changed between the read and its move before the restore gives up on it.
const RESTORE_ATTEMPTS: usize = 5;

/// How often a store warns that a busy server refused its keep-alives.
const BUSY_WARNING_EVERY: Duration = Duration::from_secs(10);

/// How often a lease with `ttl` seconds is renewed.
fn renewal_period(ttl: i64) -> Duration {
    Duration::from_millis((ttl as u64 * 1000 / 15).max(100))
}

/// How long an answer may take before the connection counts as lost: longer than the period, so that a slow
/// answer on a loaded machine does not make the store dial again; a quarter of the TTL.
fn patience(period: Duration) -> Duration {
    (period * 15 / 4).max(period)
}

/// Runs a keep-alive stream on one connection until it fails. The session's acknowledged send time is moved
/// to the send time of every request the server answers with a live lease; whether a failure has cost the
/// session is decided by the caller's deadline on it, not here.
async fn keep_alive(
    inner: &Inner,
    conn: Conn,
    lease: i64,
    period: Duration,
    open_within: Duration,
) -> KeepAlive {
    let (keeper, stream) = match open_stream(inner, conn, lease, open_within).await {
        Ok(pair) => pair,
        Err(failed) => return failed,
    };
    // (The session is never lost here: the session loop declares it lost and re-establishes it before it
    // keeps a lease alive again, so this sends `Reconnected` alone.)
    if inner.session.reconnected() {
        tracing::info!(store = %inner.address(), "keep-alive restored");
    }
    renew(inner, keeper, stream, lease, period).await
}

/// Opens a keep-alive stream for `lease`; opening it sends one keep-alive and waits for an answer with a live
/// lease, which counts as acknowledged.
async fn open_stream(
    inner: &Inner,
    conn: Conn,
    lease: i64,
    open_within: Duration,
) -> Result<(LeaseKeeper, LeaseKeepAliveStream), KeepAlive> {
    let mut client = conn.client;
    let sent = Instant::now();
    let opened = tokio::time::timeout(open_within, client.lease_keep_alive(lease)).await;
    let pair = match opened {
        Ok(Ok(pair)) => pair,
        Ok(Err(e)) if is_busy(&e) => return Err(KeepAlive::Busy(e.to_string())),
        Ok(Err(e)) => {
            return Err(
                match classify(e, "keep-alive", &inner.endpoints[conn.index]) {
                    Failure::Fatal(Error::SessionLost { reason }) => KeepAlive::Lost(reason),
                    Failure::Fatal(e) => KeepAlive::Disconnected(e.to_string()),
                    Failure::NotSent(r) | Failure::Ambiguous(r) => KeepAlive::Disconnected(r),
                },
            )
        }
        Err(_) => {
            return Err(KeepAlive::Disconnected(
                "keep-alive stream did not open".into(),
            ))
        }
    };
    inner.session.acknowledged(sent);
    Ok(pair)
}

/// Renews `lease` on an open stream every `period` until a renewal fails or the store closes.
async fn renew(
    inner: &Inner,
    mut keeper: LeaseKeeper,
    mut stream: LeaseKeepAliveStream,
    lease: i64,
    period: Duration,
) -> KeepAlive {
    let patience = patience(period);
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
        match tokio::time::timeout(patience, stream.message()).await {
            Ok(Ok(Some(resp))) if resp.ttl() > 0 => {
                inner.session.acknowledged(sent);
            }
            Ok(Ok(Some(_))) => {
                return KeepAlive::Lost("the server reports the lease expired".into())
            }
            Ok(Ok(None)) => return KeepAlive::Disconnected("keep-alive stream ended".into()),
            Ok(Err(e)) if is_busy(&e) => return KeepAlive::Busy(e.to_string()),
            Ok(Err(e)) => return KeepAlive::Disconnected(e.to_string()),
            Err(_) => return KeepAlive::Disconnected("no keep-alive answer".into()),
        }
    }
}
