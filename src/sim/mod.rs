//! `loadmgr simulate`: replay clusters and scenarios through the real decision core in virtual time, compare
//! strategies, and report with tables and charts.
//!
//! # Layout
//!
//! * [`scenario`] — the scenario file format (JSON, schema `metadata-schemas/Scenario.schema.json`) and the
//!   built-in scenarios (`scenarios/*.json`, compiled in).
//! * [`world`] — the starting state of a run (brokers, namespaces, topics with traffic, owners, timeline),
//!   from a scenario and a seed, or from a decision-core snapshot of a live cluster.
//! * [`model`] — the cost model (traffic → CPU and NIC usage), the *score*, noise and random streams.
//! * [`engine`] — the discrete-event simulation of one run (brokers' reporters, moves, membership, traffic),
//!   and the executor of the leader's state machine ([`crate::core::leader::Leader`]: reports → aggregation →
//!   shedding cycle → placement → moves with their delay → split → flush), playing the store and the
//!   brokers' ownership agents in virtual time.
//! * [`metrics`] — what a run measures, with exact definitions.
//! * [`suite`] — many runs on a thread pool, with a progress bar.
//! * [`report`] — text tables, JSON, HTML with SVG and PNG charts.
//! * [`chart`] — the charts, drawn once with plotters for an SVG and a PNG backend (embedded font).
//!
//! # Score
//!
//! A broker's *score* is its weighted max resource usage in percent, 0–100: `100 × max over cpu, direct
//! memory, NIC in, NIC out of usage/limit × weight` with the configured `loadBalancer*ResourceWeight`s (heap
//! memory ignored) — exactly what AvgShedder scores. The metrics use each broker's true usage; the leader
//! sees what the brokers report (sampled, noisy, written only when Pulsar's rules say so).
//!
//! # Decisions are the core's
//!
//! Nothing here decides: shedding ([`crate::core::run_shedding_cycle`]), placement
//! ([`crate::core::placement::assign_bundle`]), split selection ([`crate::core::split::find_bundles_to_split`])
//! and aggregation ([`crate::core::LoadData::apply_report`]) are called unchanged, with the strategies'
//! cross-cycle state kept by the leader as the runtime keeps it.
//!
//! # Determinism
//!
//! A run is a function of its world, settings and seed: time is virtual, every random draw comes from a stream
//! seeded by `(seed, stream, index)` ([`crate::core::random::stream_rng`]), iteration is over ordered maps or vectors, and
//! runs share nothing, so the thread that runs them does not matter. Only the wall-clock fields
//! (`decisionMicrosPerCycle`, `wallSeconds`, `simulatedCyclesPerSecond`) vary.

pub mod chart;
pub mod engine;
pub mod metrics;
pub mod model;
pub mod report;
pub mod scenario;
pub mod suite;
pub mod world;

pub use engine::{effective_settings, run, RunOptions, RunResult, Series};
pub use metrics::Metrics;
pub use scenario::Scenario;
pub use suite::{run_suite, SuiteOptions, SuiteResult};
pub use world::World;

/// Errors of the simulator: bad input, never a decision.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// A scenario that does not parse, validate or make sense.
    #[error("scenario {origin}: {message}")]
    Scenario {
        /// File or built-in name.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// Bad settings.
    #[error("{0}")]
    Config(String),
    /// A snapshot that does not read.
    #[error("snapshot {file}: {message}")]
    Snapshot {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A file could not be written or read.
    #[error("{0}")]
    Io(String),
    /// A chart could not be drawn.
    #[error("chart: {0}")]
    Chart(String),
}
