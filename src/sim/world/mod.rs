//! The starting state of a run — brokers, namespaces, topics with their traffic, initial owners and the
//! timeline — built from a [`Scenario`](crate::sim::Scenario) and a seed, or from a decision-core
//! [`Snapshot`](crate::core::snapshot::Snapshot) of a live cluster.
//!
//! # Layout
//!
//! * this file — the types a run starts from ([`World`] and its parts) and what both builders share;
//! * `from_scenario.rs` — [`World::from_scenario`]: generation from a scenario file and a seed;
//! * `from_snapshot.rs` — [`World::from_snapshot`]: a live cluster's snapshot, with the cost model calibrated
//!   to its reports.

use std::collections::BTreeMap;

use super::SimError;
use crate::bundle::{BundleRange, NamespaceBundles};
use crate::core::extensible::ExtensibleEma;
use crate::model::BundleData;
use crate::runtime::synthetic::{Capacity, CostModel, Rates};

mod from_scenario;
mod from_snapshot;

/// Virtual epoch of a scenario run: `now` of the first instant, epoch milliseconds (2023-11-14T22:13:20Z).
pub const SIM_EPOCH_MS: i64 = 1_700_000_000_000;

/// One broker.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerSpec {
    /// `host:port`.
    pub id: String,
    /// Hardware and base load.
    pub capacity: Capacity,
    /// When it first starts, ms after the start.
    pub join_ms: i64,
    /// Its failure domain (`None`: Pulsar's `default`), which placement uses with `failureDomainsEnabled`.
    pub failure_domain: Option<String>,
}

/// A traffic wave of one namespace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wave {
    /// Relative amplitude.
    pub amplitude: f64,
    /// Period, ms.
    pub period_ms: f64,
    /// Phase shift, ms.
    pub phase_ms: f64,
}

impl Wave {
    /// The multiplier at `t` ms after the start.
    pub fn at(&self, t: i64) -> f64 {
        1.0 + self.amplitude
            * (2.0 * std::f64::consts::PI * (t as f64 - self.phase_ms) / self.period_ms).sin()
    }
}

/// One namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceSpec {
    /// `tenant/ns`.
    pub name: String,
    /// Initial bundles.
    pub bundles: NamespaceBundles,
    /// Daily wave, if any.
    pub wave: Option<Wave>,
    /// `namespaceAntiAffinityGroup` of its local policies, if any.
    pub anti_affinity_group: Option<String>,
}

/// One topic.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicSpec {
    /// Full name `persistent://tenant/ns/topic`.
    pub name: String,
    /// CRC32 of the name.
    pub hash: u64,
    /// Namespace index.
    pub ns: usize,
    /// Traffic at multiplier 1.
    pub base: Rates,
    /// Producers connected to it; its bundle reports the sum over its topics as `producerCount`.
    pub producers: i32,
    /// Consumers connected to it; its bundle reports the sum over its topics as `consumerCount`.
    pub consumers: i32,
}

/// A bundle at the start and its owner (broker index), if any.
#[derive(Debug, Clone, PartialEq)]
pub struct InitialBundle {
    /// Namespace index (into [`World::namespaces`]).
    pub ns: usize,
    /// The bundle's hash range, one of its namespace's initial bundles.
    pub range: BundleRange,
    /// The owning broker's index (into [`World::brokers`]); `None` for a bundle nobody owns at the start,
    /// which the leader places when it is looked up.
    pub owner: Option<usize>,
}

/// A timeline entry.
#[derive(Debug, Clone, PartialEq)]
pub enum WorldEvent {
    /// Broker leaves for good.
    Stop {
        /// Broker index.
        broker: usize,
        /// Graceful (else a crash).
        graceful: bool,
    },
    /// Broker restarts: down for `down_ms`, back empty.
    Restart {
        /// Broker index.
        broker: usize,
        /// Downtime, ms (a crashed broker also waits for its session to expire).
        down_ms: i64,
        /// Graceful (else a crash).
        graceful: bool,
    },
    /// Topics ramp linearly to `factor` over `ramp_ms`.
    Ramp {
        /// Topic indices.
        topics: Vec<usize>,
        /// Final multiplier.
        factor: f64,
        /// Ramp length, ms.
        ramp_ms: i64,
    },
}

/// Extra CPU on a broker during `[start_ms, end_ms)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spike {
    /// Broker index.
    pub broker: usize,
    /// Start, ms after the start.
    pub start_ms: i64,
    /// End, ms after the start.
    pub end_ms: i64,
    /// CPU added while it lasts, in percentage points of the broker's CPU limit (40 adds 40 % of all its
    /// cores).
    pub points: f64,
}

/// Everything a run starts from.
#[derive(Debug, Clone)]
pub struct World {
    /// Scenario name.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// `now` at the start, epoch ms.
    pub start_ms: i64,
    /// Length, ms.
    pub duration_ms: i64,
    /// Convergence is measured from here, ms after the start.
    pub converge_after_ms: i64,
    /// How long a moving bundle serves nowhere, ms.
    pub move_ms: i64,
    /// Cost model.
    pub model: CostModel,
    /// The scenario's broker.conf lines.
    pub settings_text: String,
    /// Every broker that is ever up; the other fields name brokers by their index here.
    pub brokers: Vec<BrokerSpec>,
    /// Every namespace; topics and bundles name theirs by its index here.
    pub namespaces: Vec<NamespaceSpec>,
    /// Every topic with its base traffic; timeline events name topics by their index here.
    pub topics: Vec<TopicSpec>,
    /// Bundles at the start.
    pub bundles: Vec<InitialBundle>,
    /// Stored bundle data at the start (`/loadbalance/bundle-data`).
    pub stored_bundle_data: BTreeMap<String, BundleData>,
    /// Recently unloaded bundles at the start (from a snapshot).
    pub recently_unloaded: BTreeMap<String, i64>,
    /// Brokers unloaded from recently at the start, broker → epoch ms (a snapshot's
    /// `recentlyUnloadedBrokers`), handed to the first leader's shedder.
    pub recently_unloaded_brokers: BTreeMap<String, i64>,
    /// Extensible EMAs at the start, by broker (a snapshot's `extensibleEma`), which the first leader uses in
    /// place of EMAs started from the brokers' first reports.
    pub extensible_ema: BTreeMap<String, ExtensibleEma>,
    /// Timeline, sorted by time (ms after the start).
    pub events: Vec<(i64, WorldEvent)>,
    /// CPU spikes.
    pub spikes: Vec<Spike>,
}

/// A topic's bundle hash: CRC32 (IEEE) of its full name, as [`crate::bundle::topic_hash`].
pub fn crc32_topic_hash(full_name: &str) -> u64 {
    crc32fast::hash(full_name.as_bytes()) as u64
}

/// Most times one `cpuSpike` event may repeat (`everyMinutes`) within the simulated length.
pub const MAX_SPIKE_REPEATS: i64 = 1_000_000;

fn minutes(m: f64) -> i64 {
    (m * 60_000.0).round() as i64
}

fn invalid(scenario: &str, message: String) -> SimError {
    SimError::Scenario {
        origin: scenario.to_owned(),
        message,
    }
}

impl World {
    /// Full name of an initial bundle.
    pub fn bundle_name(&self, b: &InitialBundle) -> String {
        format!("{}/{}", self.namespaces[b.ns].name, b.range)
    }
}

#[cfg(test)]
mod tests;
