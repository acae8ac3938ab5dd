//! `loadmgr bench cluster --store URL --brokers N --bundles M`: N broker agents in this process, each with its
//! own store session, through the same runtime code `loadmgr broker` runs, against one real store — what the
//! live system does at a size the decision core's benchmarks cannot show.
//!
//! # Phases, in one run
//!
//! 1. **Registration**: the first agent starts alone on a thread of its own (so its CPU time can be read) and
//!    becomes the leader; the other N − 1 start concurrently. Timed until the leader has applied N reports.
//! 2. **Cold start**: all M bundles (of K namespaces) looked up at once, unowned, `--lookup-concurrency` in
//!    flight, each handed to the leader as its web service does and complete when the ownership node appears:
//!    time until all are owned, lookups/s, latency p50/p99, store transactions and bytes per lookup.
//! 3. **Steady state** for `--steady-seconds`: report writes/s, report-to-aggregation lag p50/p99 at the
//!    leader, the leader thread's CPU, the process's resident memory (an upper bound of the leader's: every
//!    agent lives in it), store traffic per second.
//! 4. **Flush**: a flush after nothing changed (the traffic is constant from the cold start on); then
//!    `--flush-rounds` flushes after the traffic of every bundle changed by half, each against a raw batched
//!    write of as many nodes with the same values in the same run.
//! 5. **Shedding**: the longest live shedding tick (decision and starting its moves) seen at N × M.
//! 6. **Leader failover**: the leader's thread stops dead (its connection drops, its session lives on until
//!    the server expires it, as after a crash): new leader elected → everything loaded → first decision (the
//!    dead broker's bundles re-placed) → all of them owned again.
//! 7. **Full restart**: every agent stopped hard (sessions closed, so their ephemerals go at once, as after the
//!    expiry) and started again with the same identities: time until all M bundles are owned again.
//!
//! Reports are written once per broker per `--report-interval-ms` (one per minute by default; the traffic is
//! constant between changes, so only the maximum interval writes them).

mod figures;
mod fleet;
mod host;
mod measure;
mod procfs;

use std::time::Duration;

use clap::Args;

use super::{CliError, CliResult};

/// `loadmgr bench cluster` flags.
#[derive(Debug, Clone, Args)]
pub struct ClusterBench {
    /// Store URL (zk:, etcd:, memory:).
    #[arg(long)]
    pub(crate) store: String,
    /// Broker agents (N), each with its own store session.
    #[arg(long, default_value_t = 100)]
    pub(crate) brokers: usize,
    /// Bundles in all (M), spread evenly over the namespaces.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) bundles: u64,
    /// Namespaces (K); default: as many as keep each at Pulsar's default maximum of 128 bundles.
    #[arg(long)]
    pub(crate) namespaces: Option<u64>,
    /// Lookups in flight during the cold start and the restart.
    #[arg(long, default_value_t = 2_000)]
    pub(crate) lookup_concurrency: usize,
    /// Agents started at once.
    #[arg(long, default_value_t = 100)]
    pub(crate) start_concurrency: usize,
    /// Length of the steady-state measurement.
    #[arg(long, default_value_t = 30)]
    pub(crate) steady_seconds: u64,
    /// Each broker writes its report at least this often (loadmgrReportUpdateMaxIntervalMillis).
    #[arg(long, default_value_t = 60_000)]
    pub(crate) report_interval_ms: i64,
    /// Flush period (loadmgrResourceQuotaUpdateIntervalMillis).
    #[arg(long, default_value_t = 10_000)]
    pub(crate) flush_interval_ms: i64,
    /// Shedding period (loadmgrSheddingIntervalMillis).
    #[arg(long, default_value_t = 20_000)]
    pub(crate) shedding_interval_ms: i64,
    /// Flushes measured after a traffic change (each against a raw batched write).
    #[arg(long, default_value_t = 3)]
    pub(crate) flush_rounds: usize,
    /// Store session timeout (metadataStoreSessionTimeoutMillis).
    #[arg(long, default_value_t = 10_000)]
    pub(crate) session_timeout_ms: u64,
    /// Average msg/s in per bundle (skewed per bundle from 0.25× to 4×).
    #[arg(long, default_value_t = 100.0)]
    pub(crate) msg_rate_per_bundle: f64,
    /// Give up on a phase after this long.
    #[arg(long, default_value_t = 600)]
    pub(crate) phase_timeout_seconds: u64,
    /// Skip the failover and restart phases.
    #[arg(long)]
    pub(crate) no_restart: bool,
    /// Print the figures as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

impl ClusterBench {
    /// The namespaces used: `--namespaces`, or enough for ≤ 128 bundles each.
    fn namespace_count(&self) -> u64 {
        self.namespaces
            .unwrap_or_else(|| self.bundles.div_ceil(128))
            .clamp(1, self.bundles.max(1))
    }

    fn phase_timeout(&self) -> Duration {
        Duration::from_secs(self.phase_timeout_seconds.max(1))
    }
}

/// Runs `loadmgr bench cluster`.
pub fn run(b: ClusterBench) -> CliResult {
    if b.brokers < 2 {
        return Err(CliError::new(
            "--brokers must be at least 2 (the failover needs a successor)",
        ));
    }
    if b.bundles == 0 || b.lookup_concurrency == 0 || b.start_concurrency == 0 {
        return Err(CliError::new(
            "--bundles, --lookup-concurrency and --start-concurrency must be at least 1",
        ));
    }
    if b.namespaces == Some(0) {
        return Err(CliError::new("--namespaces must be at least 1"));
    }
    if b.report_interval_ms < 1000 || b.flush_interval_ms < 1000 || b.shedding_interval_ms < 1000 {
        return Err(CliError::new(
            "--report-interval-ms, --flush-interval-ms and --shedding-interval-ms must be at least 1000",
        ));
    }
    let json = b.json;
    super::block_on(async move {
        let (figures, stopped) = measure::run(b).await.map_err(CliError::new)?;
        if json {
            let mut v = figures.to_json();
            v["stoppedEarly"] = serde_json::json!(stopped);
            println!("{}", serde_json::to_string_pretty(&v).expect("JSON"));
        } else {
            print!("{}", figures.table());
        }
        match stopped {
            None => Ok(()),
            Some(why) => Err(CliError::new(format!(
                "the run stopped early (the figures above are of the phases before): {why}"
            ))),
        }
    })
}
