//! The figures of one `loadmgr bench cluster` run, printed as a table or as JSON.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::json;

/// Median, minimum and maximum of some samples.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    pub(super) fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        Spread {
            median: percentile(&v, 0.5),
            min: v[0],
            max: v[v.len() - 1],
        }
    }

    fn json(&self) -> serde_json::Value {
        json!({"median": self.median, "min": self.min, "max": self.max})
    }
}

/// The `p` quantile of sorted values (nearest rank).
pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Where the slowest reports' lag went: the median of each part ([`crate::runtime::meters::LagSample`]) over
/// the reports whose whole lag is at or above the p99.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LagTail {
    pub(super) store_ms: Option<f64>,
    pub(super) notify_ms: f64,
    pub(super) read_ms: f64,
    pub(super) core_ms: f64,
}

impl LagTail {
    /// `None` without samples.
    pub(super) fn of(samples: &[crate::runtime::meters::LagSample]) -> Option<LagTail> {
        let mut totals: Vec<f64> = samples.iter().map(|s| s.total_ms as f64).collect();
        totals.sort_by(f64::total_cmp);
        let p99 = percentile(&totals, 0.99);
        let tail: Vec<_> = samples
            .iter()
            .filter(|s| s.total_ms as f64 >= p99)
            .collect();
        if tail.is_empty() {
            return None;
        }
        let median = |part: &dyn Fn(&crate::runtime::meters::LagSample) -> i64| {
            let mut v: Vec<f64> = tail.iter().map(|s| part(s) as f64).collect();
            v.sort_by(f64::total_cmp);
            percentile(&v, 0.5)
        };
        let mut stored: Vec<f64> = tail
            .iter()
            .filter_map(|s| s.store_ms)
            .map(|v| v as f64)
            .collect();
        stored.sort_by(f64::total_cmp);
        Some(LagTail {
            // Known only when every one of them has it (a store with modification times).
            store_ms: (stored.len() == tail.len()).then(|| percentile(&stored, 0.5)),
            notify_ms: median(&|s| s.notify_ms),
            read_ms: median(&|s| s.read_ms),
            core_ms: median(&|s| s.core_ms),
        })
    }
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Everything the run measured.
#[derive(Debug, Default)]
pub(super) struct Figures {
    pub(super) store: String,
    pub(super) brokers: usize,
    pub(super) bundles: u64,
    pub(super) namespaces: u64,
    pub(super) session_timeout_ms: u64,
    pub(super) registration_s: f64,
    pub(super) cold_start_s: f64,
    pub(super) lookups_per_s: f64,
    pub(super) lookup_p50_ms: f64,
    pub(super) lookup_p99_ms: f64,
    pub(super) lookup_retries: u64,
    /// During the cold start, this process's threads on a CPU, % of one core (every agent and the leader).
    pub(super) cold_cpu_percent: f64,
    /// During the cold start, this process's threads runnable but waiting for a CPU, % of one core.
    pub(super) cold_wait_percent: f64,
    pub(super) writes_per_lookup: f64,
    pub(super) bytes_per_lookup: f64,
    pub(super) steady_s: f64,
    pub(super) report_writes_per_s: f64,
    pub(super) lag_p50_ms: f64,
    pub(super) lag_p99_ms: f64,
    pub(super) lag_samples: usize,
    /// The slowest 1 % of the reports (at or above p99): the median of each part of their lag.
    pub(super) lag_tail: Option<LagTail>,
    pub(super) leader_cpu_percent: f64,
    pub(super) process_cpu_percent: f64,
    pub(super) rss_mib: f64,
    pub(super) peak_rss_mib: f64,
    pub(super) reads_per_s: f64,
    pub(super) writes_per_s: f64,
    pub(super) watch_events_per_s: f64,
    pub(super) flush_ms: Spread,
    pub(super) raw_ms: Spread,
    pub(super) flush_nodes: usize,
    pub(super) flush_bytes: usize,
    pub(super) flush_over_raw: Spread,
    pub(super) no_change_flush_nodes: Option<usize>,
    pub(super) no_change_flush_wrote: Option<bool>,
    pub(super) shedding_ms: Option<f64>,
    pub(super) shedding_moves: Option<u64>,
    pub(super) shedding_ticks: usize,
    pub(super) failover: Option<Failover>,
    pub(super) restart_s: Option<f64>,
    /// Deleting the bench's namespaces, records, bundle data and ownership folders at the end: seconds, and
    /// whether every tree went within its limit.
    pub(super) cleanup: Option<(f64, bool)>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Failover {
    pub(super) elected_s: f64,
    pub(super) loaded_s: f64,
    pub(super) first_decision_s: f64,
    pub(super) recovered_s: f64,
    pub(super) orphaned: usize,
}

impl Figures {
    pub(super) fn to_json(&self) -> serde_json::Value {
        json!({
            "store": self.store,
            "brokers": self.brokers,
            "bundles": self.bundles,
            "namespaces": self.namespaces,
            "sessionTimeoutMs": self.session_timeout_ms,
            "registrationSeconds": self.registration_s,
            "coldStart": {
                "seconds": self.cold_start_s,
                "lookupsPerSecond": self.lookups_per_s,
                "p50Ms": self.lookup_p50_ms,
                "p99Ms": self.lookup_p99_ms,
                "retries": self.lookup_retries,
                "processCpuPercent": self.cold_cpu_percent,
                "processRunQueueWaitPercent": self.cold_wait_percent,
                "writesPerLookup": self.writes_per_lookup,
                "bytesPerLookup": self.bytes_per_lookup,
            },
            "steady": {
                "seconds": self.steady_s,
                "reportWritesPerSecond": self.report_writes_per_s,
                "lagP50Ms": self.lag_p50_ms,
                "lagP99Ms": self.lag_p99_ms,
                "lagSamples": self.lag_samples,
                "lagSlowestPercentMedianMs": self.lag_tail.as_ref().map(|t| serde_json::json!({
                    "store": t.store_ms,
                    "notify": t.notify_ms,
                    "read": t.read_ms,
                    "core": t.core_ms,
                })),
                "leaderCpuPercent": self.leader_cpu_percent,
                "processCpuPercent": self.process_cpu_percent,
                "processRssMiB": self.rss_mib,
                "processPeakRssMiB": self.peak_rss_mib,
                "readsPerSecond": self.reads_per_s,
                "writesPerSecond": self.writes_per_s,
                "watchEventsPerSecond": self.watch_events_per_s,
            },
            "flush": {
                "nodes": self.flush_nodes,
                "bytes": self.flush_bytes,
                "flushMs": self.flush_ms.json(),
                "rawBatchMs": self.raw_ms.json(),
                "flushOverRaw": self.flush_over_raw.json(),
                "noChangeNodes": self.no_change_flush_nodes,
                "noChangeWroteToStore": self.no_change_flush_wrote,
            },
            "shedding": {
                "longestTickMs": self.shedding_ms,
                "movesInThatTick": self.shedding_moves,
                "ticks": self.shedding_ticks,
            },
            "failover": self.failover.map(|f| json!({
                "electedSeconds": f.elected_s,
                "loadedSeconds": f.loaded_s,
                "firstDecisionSeconds": f.first_decision_s,
                "recoveredSeconds": f.recovered_s,
                "orphanedBundles": f.orphaned,
            })),
            "fullRestartSeconds": self.restart_s,
            "cleanup": self.cleanup.map(|(seconds, complete)| json!({
                "seconds": seconds,
                "complete": complete,
            })),
        })
    }

    pub(super) fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "cluster on {} — {} brokers, {} bundles in {} namespaces, session timeout {} ms",
            self.store, self.brokers, self.bundles, self.namespaces, self.session_timeout_ms
        );
        let mut row = |name: &str, value: String| {
            let _ = writeln!(t, "  {name:<38} {value}");
        };
        row("registration", format!("{:.2} s", self.registration_s));
        row(
            "cold start: all owned",
            format!(
                "{:.2} s ({:.0} lookups/s, p50 {:.0} ms, p99 {:.0} ms, {} retries)",
                self.cold_start_s,
                self.lookups_per_s,
                self.lookup_p50_ms,
                self.lookup_p99_ms,
                self.lookup_retries
            ),
        );
        row(
            "cold start: this process's threads",
            format!(
                "on a CPU {:.0} %, runnable waiting for one {:.0} % (of one core)",
                self.cold_cpu_percent, self.cold_wait_percent
            ),
        );
        row(
            "cold start: store per lookup",
            format!(
                "{:.2} transactions, {:.0} bytes",
                self.writes_per_lookup, self.bytes_per_lookup
            ),
        );
        row(
            "steady: report writes",
            format!(
                "{:.1}/s over {:.0} s",
                self.report_writes_per_s, self.steady_s
            ),
        );
        row(
            "steady: aggregation lag",
            format!(
                "p50 {:.1} ms, p99 {:.1} ms ({} reports)",
                self.lag_p50_ms, self.lag_p99_ms, self.lag_samples
            ),
        );
        if let Some(t) = &self.lag_tail {
            row(
                "steady: slowest 1 % of lags",
                format!(
                    "medians: broker to store {}, to the leader {:.0} ms, read {:.0} ms, core {:.0} ms",
                    t.store_ms
                        .map_or_else(|| "unknown".to_owned(), |v| format!("{v:.0} ms")),
                    t.notify_ms,
                    t.read_ms,
                    t.core_ms
                ),
            );
        }
        row(
            "steady: CPU",
            format!(
                "leader thread {:.1} %, whole process {:.1} % of one core",
                self.leader_cpu_percent, self.process_cpu_percent
            ),
        );
        row(
            "steady: resident memory (all agents)",
            format!(
                "{:.0} MiB (peak {:.0} MiB)",
                self.rss_mib, self.peak_rss_mib
            ),
        );
        row(
            "steady: store traffic",
            format!(
                "{:.0} reads/s, {:.0} writes/s, {:.0} watch events/s",
                self.reads_per_s, self.writes_per_s, self.watch_events_per_s
            ),
        );
        row(
            "flush (after a traffic change)",
            format!(
                "{} nodes, {} KiB: {:.1} ms (min {:.1}, max {:.1})",
                self.flush_nodes,
                self.flush_bytes / 1024,
                self.flush_ms.median,
                self.flush_ms.min,
                self.flush_ms.max
            ),
        );
        row(
            "raw batched write of as many nodes",
            format!(
                "{:.1} ms (min {:.1}, max {:.1}); flush/raw {:.2} (min {:.2}, max {:.2})",
                self.raw_ms.median,
                self.raw_ms.min,
                self.raw_ms.max,
                self.flush_over_raw.median,
                self.flush_over_raw.min,
                self.flush_over_raw.max
            ),
        );
        row(
            "flush after no change",
            match (self.no_change_flush_nodes, self.no_change_flush_wrote) {
                (Some(n), Some(wrote)) => format!(
                    "{n} nodes written, store {}",
                    if wrote { "called" } else { "not called" }
                ),
                _ => "not observed".into(),
            },
        );
        row(
            "shedding: longest live tick",
            match (self.shedding_ms, self.shedding_moves) {
                (Some(d), Some(m)) => {
                    format!(
                        "{d:.1} ms, {m} moves started ({} ticks seen)",
                        self.shedding_ticks
                    )
                }
                _ => "no tick seen".into(),
            },
        );
        match self.failover {
            Some(f) => row(
                "failover (crash → …)",
                format!(
                    "elected {:.2} s, loaded {:.2} s, first decision {:.2} s, {} orphans owned {:.2} s",
                    f.elected_s, f.loaded_s, f.first_decision_s, f.orphaned, f.recovered_s
                ),
            ),
            None => row("failover", "skipped".into()),
        }
        row(
            "full restart: all owned again",
            self.restart_s
                .map_or("skipped".into(), |s| format!("{s:.2} s")),
        );
        if let Some((seconds, complete)) = self.cleanup {
            row(
                "clean-up: the bench's nodes deleted",
                if complete {
                    format!("{seconds:.2} s")
                } else {
                    format!("{seconds:.2} s, not all (see the warnings)")
                },
            );
        }
        t
    }
}
