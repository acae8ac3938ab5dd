//! The agent's meters: counters and histograms the agent, its leader task and its web service update as they
//! work, exposed by the web service at `/metrics` (`http::metrics`). Every type here is cheap to clone (the
//! values are shared).
//!
//! Units: durations in seconds, as Prometheus names them (`_seconds`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use tokio::time::Instant;

use crate::store::{
    DynStore, IsLeaf, MetadataStore, NotificationStream, Op, OpResult, Result, SessionEventStream,
    SessionValidity, Stat,
};

/// A label set with one `cause` (of a move).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CauseLabels {
    /// `lookup`, `shedding`, `unload`, `orphan`, `replaced`, `split`, `adopted`.
    pub cause: String,
}

/// A label set with one `outcome` (of a lookup).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `owned` (answered from what the broker watches), `placed` (the leader placed it), `forwarded` (asked
    /// the leader), `not_found`, `unavailable`, `error`.
    pub outcome: String,
}

/// A label set with the `operation` of a store call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// `get`, `children`, `exists`, `put`, `delete`, `batch`, `watch`.
    pub operation: String,
}

fn seconds_histogram() -> Histogram {
    // 1 ms .. ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn histogram_family<L: Clone + std::hash::Hash + Eq>() -> Family<L, Histogram> {
    Family::new_with_constructor(seconds_histogram)
}

/// Every meter of one agent; see the module docs.
#[derive(Debug, Clone)]
pub struct Meters {
    /// Reports the leader applied.
    pub reports_applied: Counter,
    /// From a report's `lastUpdate` to the leader applying it.
    pub report_lag: Histogram,
    /// A shedding cycle: the decision and starting its moves.
    pub shedding_cycle: Histogram,
    /// Moves the leader started, by cause.
    pub moves_started: Family<CauseLabels, Counter>,
    /// Moves that completed (the destination took the bundle), by cause.
    pub moves_completed: Family<CauseLabels, Counter>,
    /// From a move's record to its completion.
    pub move_duration: Histogram,
    /// Bundles unloaded by shedding (Pulsar's `pulsar_lb_unload_bundle_total`).
    pub unload_bundles: Counter,
    /// Brokers shedding unloaded bundles from, one per broker and cycle (`pulsar_lb_unload_broker_total`).
    pub unload_brokers: Counter,
    /// Bundles split (`pulsar_lb_bundles_split_total`).
    pub splits: Counter,
    /// A flush batch.
    pub flush_duration: Histogram,
    /// Nodes written or deleted by flushes.
    pub flush_nodes: Counter,
    /// Lookups the web service answered, by outcome.
    pub lookups: Family<OutcomeLabels, Counter>,
    /// A lookup through the web service, from request to answer.
    pub lookup_latency: Family<OutcomeLabels, Histogram>,
    /// Store calls, by operation.
    pub store_operations: Family<OperationLabels, Counter>,
    /// Store calls that failed, by operation.
    pub store_errors: Family<OperationLabels, Counter>,
    /// Store call latency, by operation.
    pub store_latency: Family<OperationLabels, Histogram>,
    /// Times the store session was declared lost.
    pub session_losses: Counter,
    /// Bytes of the values this agent put (single puts and batches), the store's payload.
    pub store_bytes_written: Counter,
    /// Notifications delivered to this agent's watches.
    pub watch_events: Counter,
    /// The latest individual figures, for `loadmgr bench cluster` (histograms above are too coarse for
    /// percentiles); not exported.
    pub recent: Arc<Recent>,
}

/// How many of the latest samples [`Recent`] keeps per kind.
pub const RECENT_SAMPLES: usize = 100_000;

/// One flush as the leader executed it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlushSample {
    /// Nodes written or deleted (the status node not counted).
    pub nodes: usize,
    /// Bytes of the values written.
    pub bytes: usize,
    /// From the start of the batch to its outcome; zero when nothing was written.
    pub duration: Duration,
    /// Whether the store was called at all.
    pub wrote: bool,
}

/// One shedding tick: the decision and starting its moves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SheddingSample {
    /// From the tick to its decision made and its moves' record writes handed to the store (they are written
    /// in the background, while the leader goes on).
    pub duration: Duration,
    /// Moves the tick decided (record writes asked for).
    pub moves: u64,
}

/// One report's way from its broker to the leader's core, in ms of this host's clock. The parts add up to
/// `total_ms` (each is at least 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LagSample {
    /// From the report's `lastUpdate` to the leader having aggregated it: the whole lag.
    pub total_ms: i64,
    /// From `lastUpdate` to the store's modification time of the node: the broker's write. `None` on a store
    /// that keeps no modification time (etcd), where the next part starts at `lastUpdate`.
    pub store_ms: Option<i64>,
    /// From the node's modification to the leader taking its notification: the store's delivery, and the
    /// wait behind whatever the leader's loop was doing.
    pub notify_ms: i64,
    /// Reading the nodes of the notifications taken together.
    pub read_ms: i64,
    /// Handing the batch's events to the core, up to and including this report's.
    pub core_ms: i64,
}

/// The latest individual samples of what the leader did, bounded to [`RECENT_SAMPLES`] each.
#[derive(Debug, Default)]
pub struct Recent {
    /// Reports' aggregation lags.
    pub report_lags: std::sync::Mutex<std::collections::VecDeque<LagSample>>,
    /// Flushes.
    pub flushes: std::sync::Mutex<Vec<FlushSample>>,
    /// Shedding ticks.
    pub shedding: std::sync::Mutex<Vec<SheddingSample>>,
}

impl Recent {
    /// Notes one report's aggregation lag.
    pub fn report_lag(&self, sample: LagSample) {
        let mut q = self.report_lags.lock().unwrap();
        if q.len() == RECENT_SAMPLES {
            q.pop_front();
        }
        q.push_back(sample);
    }

    fn push<T>(list: &std::sync::Mutex<Vec<T>>, value: T) {
        let mut l = list.lock().unwrap();
        if l.len() == RECENT_SAMPLES {
            l.remove(0);
        }
        l.push(value);
    }

    /// Notes one flush.
    pub fn flush(&self, sample: FlushSample) {
        Self::push(&self.flushes, sample);
    }

    /// Notes one shedding tick.
    pub fn shedding(&self, sample: SheddingSample) {
        Self::push(&self.shedding, sample);
    }
}

impl Default for Meters {
    fn default() -> Self {
        Meters {
            reports_applied: Counter::default(),
            report_lag: seconds_histogram(),
            shedding_cycle: seconds_histogram(),
            moves_started: Family::default(),
            moves_completed: Family::default(),
            move_duration: seconds_histogram(),
            unload_bundles: Counter::default(),
            unload_brokers: Counter::default(),
            splits: Counter::default(),
            flush_duration: seconds_histogram(),
            flush_nodes: Counter::default(),
            lookups: Family::default(),
            lookup_latency: histogram_family(),
            store_operations: Family::default(),
            store_errors: Family::default(),
            store_latency: histogram_family(),
            session_losses: Counter::default(),
            store_bytes_written: Counter::default(),
            watch_events: Counter::default(),
            recent: Arc::default(),
        }
    }
}

impl Meters {
    /// Counts a lookup with its outcome and how long it took.
    pub fn lookup(&self, outcome: &str, took: Duration) {
        let labels = OutcomeLabels {
            outcome: outcome.to_owned(),
        };
        self.lookups.get_or_create(&labels).inc();
        self.lookup_latency
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    fn store_call<T>(&self, operation: &str, started: Instant, result: &Result<T>) {
        let labels = OperationLabels {
            operation: operation.to_owned(),
        };
        self.store_operations.get_or_create(&labels).inc();
        if result.is_err() {
            self.store_errors.get_or_create(&labels).inc();
        }
        self.store_latency
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
    }
}

/// A store that counts and times every call of the one it wraps (see [`Meters::store_operations`]).
#[derive(Debug)]
pub struct MeteredStore {
    inner: DynStore,
    meters: Meters,
}

impl MeteredStore {
    /// Wraps `inner`.
    pub fn wrap(inner: DynStore, meters: Meters) -> DynStore {
        Arc::new(MeteredStore { inner, meters })
    }
}

#[async_trait]
impl MetadataStore for MeteredStore {
    fn backend(&self) -> crate::store::Backend {
        self.inner.backend()
    }

    fn address(&self) -> String {
        self.inner.address()
    }

    async fn get(&self, path: &str) -> Result<Option<crate::store::GetResult>> {
        let t = Instant::now();
        let r = self.inner.get(path).await;
        self.meters.store_call("get", t, &r);
        r
    }

    async fn get_many(&self, paths: &[String]) -> Result<Vec<Option<crate::store::GetResult>>> {
        let t = Instant::now();
        let r = self.inner.get_many(paths).await;
        self.meters.store_call("get_many", t, &r);
        r
    }

    async fn get_children(&self, path: &str) -> Result<Vec<String>> {
        let t = Instant::now();
        let r = self.inner.get_children(path).await;
        self.meters.store_call("children", t, &r);
        r
    }

    async fn get_leaves(
        &self,
        path: &str,
        is_leaf: IsLeaf,
    ) -> Result<Vec<(String, crate::store::GetResult)>> {
        let t = Instant::now();
        let r = self.inner.get_leaves(path, is_leaf).await;
        self.meters.store_call("leaves", t, &r);
        r
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        let t = Instant::now();
        let r = self.inner.exists(path).await;
        self.meters.store_call("exists", t, &r);
        r
    }

    async fn put(
        &self,
        path: &str,
        value: &[u8],
        expected_version: Option<i64>,
        options: crate::store::CreateOptions,
    ) -> Result<Stat> {
        let t = Instant::now();
        let r = self.inner.put(path, value, expected_version, options).await;
        self.meters.store_call("put", t, &r);
        self.meters.store_bytes_written.inc_by(value.len() as u64);
        r
    }

    async fn delete(&self, path: &str, expected_version: Option<i64>) -> Result<()> {
        let t = Instant::now();
        let r = self.inner.delete(path, expected_version).await;
        self.meters.store_call("delete", t, &r);
        r
    }

    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        let t = Instant::now();
        let bytes: usize = ops.iter().map(Op::value_len).sum();
        self.meters.store_bytes_written.inc_by(bytes as u64);
        let r = self.inner.batch(ops).await;
        self.meters.store_call("batch", t, &r);
        r
    }

    async fn watch(&self, prefix: &str) -> Result<NotificationStream> {
        let t = Instant::now();
        let r = self.inner.watch(prefix).await;
        self.meters.store_call("watch", t, &r);
        // Counted as the consumer takes them. A task forwarding them into a channel of its own per watch let
        // the leader see a request before the ownership change that came first (see `EventStream::observed`).
        let counter = self.meters.watch_events.clone();
        Ok(r?.observed(move |_| {
            counter.inc();
        }))
    }

    fn session_events(&self) -> SessionEventStream {
        self.inner.session_events()
    }

    fn is_connected(&self) -> bool {
        self.inner.is_connected()
    }

    fn session_validity(&self) -> SessionValidity {
        self.inner.session_validity()
    }

    async fn expire_session(&self) -> Result<()> {
        self.inner.expire_session().await
    }

    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::CreateOptions;

    /// The leader takes ownership changes before requests: that is only sound if a metered store hands each
    /// watch's notifications out in the order the store delivered them across watches. A forwarding task per
    /// watch broke it (an unload's new owner was not yet known when the split that followed it came in).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn notifications_of_two_watches_keep_the_store_order() {
        let meters = Meters::default();
        let store = MeteredStore::wrap(Arc::new(MemoryStore::new()), meters.clone());
        let mut first = store.watch("/first").await.unwrap();
        let mut second = store.watch("/second").await.unwrap();
        let mut taken = 0;
        for i in 0..500 {
            let v = i.to_string().into_bytes();
            store
                .put(&format!("/first/{i}"), &v, None, CreateOptions::PERSISTENT)
                .await
                .unwrap();
            store
                .put(&format!("/second/{i}"), &v, None, CreateOptions::PERSISTENT)
                .await
                .unwrap();
            // (Parents' notifications come too.)
            loop {
                let n = second.next().await.unwrap();
                taken += 1;
                if n.path == format!("/second/{i}") {
                    break;
                }
            }
            // Everything written under /first before it is already there to take.
            loop {
                match first.try_next() {
                    Some(n) if n.path == format!("/first/{i}") => {
                        taken += 1;
                        break;
                    }
                    Some(_) => taken += 1,
                    None => panic!("/second/{i} was handed out before /first/{i}"),
                }
            }
        }
        assert!(meters.watch_events.get() >= taken);
    }
}
