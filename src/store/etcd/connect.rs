//! Connecting to etcd and moving between endpoints: the store talks to **one endpoint at a time**, and any
//! transport failure, timeout or "no leader" answer moves it to the next.
//!
//! # Contract
//!
//! * [`EtcdStore::connect`] tries each endpoint in turn (a connection, then a count-only read of `/`) until
//!   one answers or the first-connect timeout passes ([`Error::Unavailable`] naming every endpoint);
//!   authentication and argument errors end it at once. It then grants the session lease and starts the
//!   session loop.
//! * [`Inner::call`] runs one request with failover: a request that surely did not reach a server (or any
//!   request marked idempotent) is retried on the next endpoint within the operation timeout, each attempt
//!   limited to [`Inner::attempt_timeout`]; one that may have been applied moves the store on and fails
//!   with `ConnectionLost` (or `Timeout`). Every attempt of a request that may write (not idempotent) first
//!   waits for a place in the store's throttle (`throttle.rs`), which limits the writes at the server at
//!   once by how fast they come back; a wait that uses up the operation timeout fails with `Timeout` and
//!   moves nothing. Reads never wait there: they add nothing etcd must apply, and a new leader reads a lot.
//! * [`Inner::rotate`] moves to the endpoint after the failed one, once per failed connection (a failure of
//!   an older connection moves nothing); with a single endpoint it dials it again, since a connection whose
//!   peer vanished in a partition is noticed by HTTP/2 only after its keepalive gives up.
//! * [`connect_endpoint`]: HTTP/2 keepalive 10 s (etcd answers faster pings with `too_many_pings`), leader
//!   required, credentials and TLS from the options.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client as etcd;
use etcd_client::GetOptions;
use tokio::time::Instant;

use super::errors::{classify, is_busy, Failure};
use super::session::session_loop;
use super::{Conn, EtcdStore, Inner};
use crate::store::fanout::Fanout;
use crate::store::session::SessionState;
use crate::store::{Error, Result, StoreOptions};

impl Inner {
    pub(super) fn address(&self) -> String {
        format!("etcd:{}", self.endpoints.join(","))
    }

    pub(super) fn conn(&self) -> Result<Conn> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        Ok(self.conn.lock().unwrap().clone())
    }

    pub(super) fn seen(&self, header: Option<&etcd::ResponseHeader>) {
        if let Some(h) = header {
            self.revision.fetch_max(h.revision(), Ordering::Relaxed);
        }
    }

    /// How long one attempt may take before the store tries another endpoint.
    pub(super) fn attempt_timeout(&self) -> Duration {
        (self.options.session_timeout / 3)
            .max(Duration::from_secs(1))
            .min(self.options.operation_timeout)
    }

    /// Moves to the endpoint after `from` (unless someone already moved). With a single endpoint it dials
    /// that one again: a connection whose peer vanished in a partition is not noticed by HTTP/2 before its
    /// keepalive gives up (15 s), while a fresh one works as soon as the network does.
    pub(super) async fn rotate(&self, failed: u64) {
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
                // The client connects lazily: only an answer says the server is back, so the log says what
                // is known (it used to report "reconnected" every fraction of a second while etcd was down).
                // The probe runs aside: it must not delay the calls waiting for this rotation.
                let mut probe = client.clone();
                let wait = self.attempt_timeout();
                let endpoint = self.endpoints[next].clone();
                let switched = (next != from).then(|| self.endpoints[from].clone());
                tokio::spawn(async move {
                    let answered =
                        matches!(tokio::time::timeout(wait, probe.status()).await, Ok(Ok(_)));
                    match (answered, switched) {
                        (true, None) => tracing::info!(endpoint = %endpoint, "etcd: reconnected"),
                        (true, Some(from)) => {
                            tracing::info!(from = %from, to = %endpoint, "etcd: switched endpoint")
                        }
                        (false, _) => {
                            tracing::debug!(endpoint = %endpoint, "etcd: dialled again, no answer yet")
                        }
                    }
                });
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
    pub(super) async fn call<T, F, Fut>(
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
            // Only requests that may write wait: they are what etcd must apply before a keep-alive.
            let ticket = if idempotent {
                None
            } else {
                Some(self.throttle.acquire().await)
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                // The wait for a place took the whole operation timeout: nothing was sent.
                if let Some(t) = ticket {
                    t.unused();
                }
                return Err(Error::Timeout {
                    operation: what,
                    after: start.elapsed(),
                });
            }
            let outcome =
                tokio::time::timeout(self.attempt_timeout().min(remaining), f(conn.client)).await;
            if let Some(t) = ticket {
                t.done(matches!(outcome, Ok(Ok(_))));
            }
            // A server too busy to answer keeps its connection (see `is_busy`); the pause below still
            // applies.
            let mut busy = false;
            let reason = match outcome {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => {
                    busy = is_busy(&e);
                    match classify(e, &what, &self.address()) {
                        Failure::Fatal(e) => return Err(e),
                        Failure::NotSent(reason) => reason,
                        Failure::Ambiguous(reason) if idempotent => reason,
                        Failure::Ambiguous(reason) => {
                            if !busy {
                                self.rotate(conn.dial).await;
                            }
                            return Err(Error::ConnectionLost {
                                address: self.endpoints[conn.index].clone(),
                                operation: what,
                                reason,
                            });
                        }
                    }
                }
                Err(_) if idempotent => "no answer".to_string(),
                Err(_) => {
                    self.rotate(conn.dial).await;
                    return Err(Error::Timeout {
                        operation: what,
                        after: start.elapsed(),
                    });
                }
            };
            if !busy {
                self.rotate(conn.dial).await;
            }
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
}

pub(super) async fn connect_endpoint(
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
                let elapsed = started.elapsed();
                let why = crate::store::reach::diagnose(
                    endpoints.iter().map(|e| e.to_string()).collect(),
                    std::time::Duration::from_secs(2),
                )
                .await;
                return Err(Error::Unavailable {
                    address: format!("etcd:{}", endpoints.join(",")),
                    elapsed,
                    reason: format!("{last} ({why})"),
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
            session: SessionState::new(true),
            ephemerals: Mutex::new(BTreeMap::new()),
            revision: AtomicI64::new(0),
            watch_roots: tokio::sync::Mutex::default(),
            throttle: super::throttle::Throttle::default(),
            closed: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
        });
        let (lease, ttl) = inner.grant_lease().await?;
        inner.lease.store(lease, Ordering::SeqCst);
        let task = tokio::spawn(session_loop(Arc::downgrade(&inner), ttl));
        inner.tasks.lock().unwrap().push(task);
        Ok(EtcdStore { inner })
    }
}
