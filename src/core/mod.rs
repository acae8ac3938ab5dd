//! The pure decision core: load data and its windows, every shedding and placement strategy of Pulsar's
//! modular load manager (plus the extensible manager's TransferShedder and placement), the placement filters,
//! bundle split selection, and the [`Plan`] that carries every decision with its reason.
//!
//! # Contract
//!
//! Nothing in this module awaits, reads a clock, touches a store or uses ambient randomness. Every entry point
//! takes the load data, the [`Settings`], the strategies' own cross-cycle state, the
//! current time `now` (epoch milliseconds) and a seeded [`rand::rngs::StdRng`], and returns a [`Plan`]. Identical
//! inputs and seed give an identical plan.
//!
//! # Units
//!
//! Message rates are msg/s, throughputs bytes/s, times epoch milliseconds unless a name says otherwise. Resource
//! usage comes in two spellings: a *fraction* (1.0 = 100 %, e.g. [`weighted_usage`]) and *score points* (0–100,
//! AvgShedder's scores). Each doc says which.
//!
//! # Determinism (replacing Java's hash-map order and `ThreadLocalRandom`)
//!
//! * Brokers are visited in ascending broker-id order and bundles in ascending bundle-name order wherever Java
//!   iterates a `HashMap`/`ConcurrentHashMap`. Stable sorts on a score therefore break ties by broker id, then
//!   bundle name.
//! * Every random choice (LeastLongTermMessageRate and LeastResourceUsageWithWeight among their best brokers,
//!   AvgShedder's unplanned assignments) draws a uniform index from the caller's `StdRng` over the candidate list
//!   sorted by broker id.
//!
//! # Weighted usage forms
//!
//! Pulsar has two spellings of the weighted max usage `W(b)`: the five-weight form (cpu, heap memory, direct
//! memory, NIC in, NIC out; ThresholdShedder, extensible `BrokerLoadData`) and the four-weight form without heap
//! memory (AvgShedder, modular LeastResourceUsageWithWeight, the modular overload re-check). [`weighted_usage`]
//! is the five-weight form with the configured weights and [`weighted_usage4`] the four-weight form. The heap
//! weight defaults to 0, so both agree unless an operator sets `loadBalancerMemoryResourceWeight`; with every
//! weight at its default (cpu 1, heap 0, direct memory 0, NIC in 1, NIC out 1) both are max(cpu, NIC in, NIC out).
//!
//! OverloadShedder and LeastLongTermMessageRate read the *unweighted* max usage in the Java copies read; PIP-358
//! (PRs #22888/#22889, merged 2024) made the resource weights apply to them. loadmgr follows PIP-358 and uses the
//! five-weight form with the configured weights for both. The unweighted max
//! ([`LocalBrokerData::max_resource_usage`]: cpu, direct memory, NIC in, NIC out; heap is no load item since
//! Pulsar 3.0) *includes* direct memory, while the default direct-memory weight is 0: with default weights
//! OverloadShedder, LeastLongTermMessageRate and the overload re-check of placement ignore direct memory.
//!
//! # Decisions where Pulsar's behaviour is not obvious (checked against apache/pulsar sources and tests)
//!
//! * **Weight forms.** ThresholdShedder: five-weight form with the configured weights (the newest Java copy
//!   available reads it so). OverloadShedder and LeastLongTermMessageRate: weighted per PIP-358 (PR #22888,
//!   merged). AvgShedder, modular LeastResourceUsageWithWeight (newest copy read) and the overload re-check:
//!   four-weight form.
//! * **Usage above 100 %.** Counted as is by every strategy. ThresholdShedder and modular
//!   LeastResourceUsageWithWeight ignored terms above 100 % from PR #16937 until its revert (PR #18645,
//!   2.10.3/2.11.0); current Pulsar feeds the raw weighted max into both moving averages.
//! * **`atLeastOneBundleSelected`.** The Threshold/Overload shedders read use a local flag that always takes at
//!   least one bundle; the setting itself is not consulted, and loadmgr does the same.
//! * **Shared brokers.** `NamespaceIsolationPolicies.isSharedBroker`: a broker is shared unless some policy
//!   lists its host as *primary* (read). `min_available` fail-over adds secondaries when fewer than `min_limit`
//!   primaries are available.
//! * **`BrokerLoadManagerClassFilter`.** Brokers whose `loadManagerClassName` differs from ours — including
//!   brokers reporting none — are dropped; an empty result falls back to the policy candidates (pipeline step 7).
//! * **AvgShedder 5.0.** The 5.0 code was not available; the plan lifetime, replacement and random-assignment
//!   rules follow the 5.0 docs and PR #26246/#26609 text. Broker sort: exact double comparison (newest Java)
//!   rather than 3.x/4.x's `(int)(s1 − s2)`.
//! * **UniformLoadShedder zero-traffic bundles.** Not taken (PR #21214 and the Java test
//!   `testFilterOutNonTrafficBundlesForUnloading`; the newest source copy read lacks the filter).
//! * **TransferShedder.** Newest source read (hit count, swaps, `msgThroughputEMA` underload test); bundles with
//!   zero throughput are skipped in the shedder loop (PR #23626). The extensible `BrokerLoadData` EMAs are
//!   computed leader-side from modular reports, once per applied report, in one copy that TransferShedder and
//!   the extensible placement share ([`extensible`]).
//! * **Extensible placement.** With the extensible load manager (or TransferShedder) placement runs
//!   `ExtensibleLoadManagerImpl.selectAsync`: its five broker filters in Pulsar's order (class, max topics `>=`
//!   without fallback, version — skipped when it fails —, anti-affinity, isolation over what is left), then the
//!   strategy; no preallocated topics, even distribution, round-robin, fallback or overload re-check
//!   ([`placement::Pipeline`]). TransferShedder's `isTransferable` runs the same filters, and its decisions skip
//!   the modular `doLoadShedding` checks, as the extensible `UnloadScheduler` does.
//! * **Split selection.** Bundles with fewer than two topics are skipped (`BundleSplitterTaskTest`), sessions
//!   count only when `loadBalancerNamespaceBundleMaxSessions > 0`.
//! * **Preallocations** are dropped when the broker's report lists the bundle, or when the broker vanishes.
//!   Pulsar's extra condition (the bundle is not among the *leader's own* service units) is not reproduced.
//!
//! # Java bugs fixed (listed so operators know where loadmgr differs)
//!
//! * TransferShedder counts swapped traffic in `trafficMarkedToGain` only in debug mode; loadmgr always does.
//! * A topic hash of exactly `0xffffffff` belongs to the last bundle (Java indexes one past the end) — in
//!   [`crate::bundle`].
//! * UniformLoadShedder no longer sheds bundles without traffic.
//! * Split selection counts a bundle towards `loadBalancerNamespaceMaximumBundles` only when it is actually split;
//!   Pulsar counts every candidate that passed the thresholds (even one `canSplitBundle` then rejects, or a second
//!   listing of the same bundle), so an unsplittable candidate can block the namespace's last split ([`split`]).
//!
//! # Java quirks kept because they shape behaviour
//!
//! * AvgShedder's hit counters belong to brokers, not pairs.
//! * UniformLoadShedder's integer budgets (`MutableInt`, truncation per bundle, saturation at 2^31 − 1).
//! * ThresholdShedder advances its moving averages a second time in a lower-boundary pass.
//! * Modular LeastResourceUsageWithWeight advances its moving average once per placement call.
//!
//! # Deliberate differences
//!
//! * Aggregation samples the bundles of the broker whose report arrived, not every bundle on every
//!   notification ([`load_data`]); [`LoadData::resample_all`] is Pulsar's full pass.
//! * Ties and random choices are deterministic (see *Determinism*).

pub mod cost_model;
pub mod explain;
pub mod extensible;
pub mod leader;
pub mod load_data;
pub mod optimal;
pub mod placement;
pub mod plan;
pub mod policies;
pub mod random;
pub mod report_rules;
pub mod shedding;
pub mod snapshot;
pub mod split;

mod cycle;

pub use cycle::{
    run_leader_shedding_cycle, run_shedding_cycle, run_shedding_cycle_with_candidates, Strategies,
};
pub use load_data::{BrokerEntry, LoadData, NoSeeds, SeedSource, StoredSeeds};
pub use plan::{
    Assignment, BrokerPrediction, Dropped, Plan, ShedderCandidate, Skipped, SplitDecision,
    UnloadDecision,
};
pub use policies::{ClusterPolicies, IsolationPolicy, NamespacePolicy};

use crate::config::Settings;
use crate::model::{LocalBrokerData, ResourceWeights};

/// One mebibyte, Pulsar's `MB`/`MIBI` in the shedders and the split task.
pub const MIB: f64 = 1024.0 * 1024.0;

/// Errors of the decision core. Strategies themselves never fail (they report skipped candidates instead);
/// these are about bad input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CoreError {
    /// The snapshot text is not JSON.
    #[error("snapshot is not valid JSON: {0}")]
    SnapshotSyntax(String),
    /// A snapshot key holds a value of the wrong shape; `key` is the JSON pointer of the bad value.
    #[error("invalid snapshot at {key}: {message}")]
    InvalidSnapshot {
        /// JSON pointer, e.g. `/brokers/b1:8080/cpu/usage`.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A file could not be read.
    #[error("cannot read {file}: {message}")]
    Io {
        /// The file.
        file: String,
        /// The OS error.
        message: String,
    },
    /// An isolation-policy regular expression does not compile.
    #[error("isolation policy {policy}: invalid regex '{pattern}': {message}")]
    InvalidRegex {
        /// Policy name.
        policy: String,
        /// The pattern.
        pattern: String,
        /// The regex error.
        message: String,
    },
    /// An option above its upper bound (see [`explain::MAX_CYCLES`]).
    #[error("{option} {value} is above the limit of {limit}")]
    AboveLimit {
        /// The option, as the command line spells it.
        option: &'static str,
        /// The value given.
        value: u64,
        /// The bound.
        limit: u64,
    },
}

/// The weighted max usage `W(b)` in the five-weight form with the configured weights, as a fraction
/// (1.0 = 100 %; can exceed 1.0).
pub fn weighted_usage(data: &LocalBrokerData, settings: &Settings) -> f64 {
    data.max_resource_usage_with_weight(&settings.resource_weights())
}

/// The weighted max usage in the four-weight form (cpu, direct memory, NIC in, NIC out; heap memory ignored), as
/// a fraction. Used by AvgShedder, modular LeastResourceUsageWithWeight and the overload re-check.
pub fn weighted_usage4(data: &LocalBrokerData, settings: &Settings) -> f64 {
    data.max_resource_usage_with_weight(&weights4(settings))
}

/// The configured weights with heap memory forced to 0 (the four-weight form).
pub fn weights4(settings: &Settings) -> ResourceWeights {
    ResourceWeights {
        memory: 0.0,
        ..settings.resource_weights()
    }
}

/// The namespace part of a full bundle name (text before the last `/`), as
/// `LoadManagerShared.getNamespaceNameFromBundleName`. A name without `/` is its own namespace.
pub fn namespace_of(bundle: &str) -> &str {
    bundle.rsplit_once('/').map_or(bundle, |(ns, _)| ns)
}

/// Whether a bundle belongs to a broker's system-service namespace, which Pulsar never sheds
/// (`getBundleDataForLoadShedding`, `NamespaceService.isSLAOrHeartbeatNamespace`): the namespace fully matches
/// the heartbeat pattern `pulsar/[^/]+/([^:]+:\d+)`, the heartbeat v2 pattern `pulsar/([^:]+:\d+)` or the SLA
/// monitor pattern `sla-monitor/[^/]+/([^:]+:\d+)`.
pub fn is_system_service_bundle(bundle: &str) -> bool {
    is_heartbeat_or_sla_namespace(namespace_of(bundle))
}

/// `NamespaceService.isSystemServiceNamespace`: `pulsar/system` or a heartbeat/SLA-monitor namespace. Only the
/// extensible manager's top-bundle report (`TopKBundles`) uses this wider set; the modular shedders skip the
/// heartbeat and SLA-monitor namespaces only ([`is_system_service_bundle`]).
pub fn is_system_service_namespace(ns: &str) -> bool {
    ns == "pulsar/system" || is_heartbeat_or_sla_namespace(ns)
}

/// `[^:]+:\d+`, matched against the whole text.
fn is_host_port(text: &str) -> bool {
    text.split_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !port.is_empty() && port.bytes().all(|c| c.is_ascii_digit())
    })
}

/// `[^/]+/([^:]+:\d+)`, matched against the whole text.
fn is_cluster_host_port(text: &str) -> bool {
    text.split_once('/')
        .is_some_and(|(cluster, rest)| !cluster.is_empty() && is_host_port(rest))
}

fn is_heartbeat_or_sla_namespace(ns: &str) -> bool {
    if let Some(rest) = ns.strip_prefix("pulsar/") {
        is_cluster_host_port(rest) || is_host_port(rest)
    } else if let Some(rest) = ns.strip_prefix("sla-monitor/") {
        is_cluster_host_port(rest)
    } else {
        false
    }
}

/// Formats a number for reasons: one decimal for large values, otherwise up to four significant decimals.
pub(crate) fn num(v: f64) -> String {
    let mut out = String::with_capacity(16);
    push_num(&mut out, v);
    out
}

/// [`num`] appended to `out` (no intermediate allocation).
pub(crate) fn push_num(out: &mut String, v: f64) {
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "inf" } else { "-inf" });
        return;
    }
    if v.abs() >= 100.0 || v == v.trunc() {
        push_fixed(out, v, 1);
    } else {
        let start = out.len();
        push_fixed(out, v, 4);
        let trimmed = out[start..].trim_end_matches('0').len();
        out.truncate(start + trimmed);
        if out.ends_with('.') {
            out.push('0');
        }
    }
}

/// Appends `v` with exactly `decimals` decimals, the same text as `format!("{v:.decimals$}")` (the exact value
/// rounded half to even), without the float-formatting machinery: `v = m·2^e` exactly, so `v·10^d` is rounded
/// with integer arithmetic. Values the integers cannot hold (above 2^103, NaN) go through `format!`.
fn push_fixed(out: &mut String, v: f64, decimals: u32) {
    use std::fmt::Write;
    let bits = v.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mantissa, exp) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), biased - 1075)
    };
    let scale = 10u128.pow(decimals);
    let scaled = if biased == 0x7ff || exp > 50 {
        None
    } else if exp >= 0 {
        Some((u128::from(mantissa) << exp) * scale)
    } else {
        let shift = exp.unsigned_abs();
        let n = u128::from(mantissa) * scale; // < 2^53 · 10^4 < 2^67
        Some(if shift >= 127 {
            0 // n < 2^67 is below half a unit
        } else {
            let q = n >> shift;
            let rem = n & ((1u128 << shift) - 1);
            let half = 1u128 << (shift - 1);
            if rem > half || (rem == half && q & 1 == 1) {
                q + 1
            } else {
                q
            }
        })
    };
    let Some(q) = scaled else {
        let _ = write!(out, "{v:.prec$}", prec = decimals as usize);
        return;
    };
    if bits >> 63 == 1 {
        out.push('-');
    }
    let _ = write!(out, "{}", q / scale);
    if decimals > 0 {
        let _ = write!(out, ".{:0width$}", q % scale, width = decimals as usize);
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn system_service_namespaces() {
        assert!(is_system_service_bundle(
            "pulsar/c1/10.0.0.1:8080/0x00000000_0xffffffff"
        ));
        assert!(is_system_service_bundle(
            "pulsar/b1:8080/0x00000000_0xffffffff"
        ));
        assert!(is_system_service_bundle(
            "sla-monitor/c1/b1:8080/0x00000000_0xffffffff"
        ));
        assert!(!is_system_service_bundle(
            "pulsar/system/0x00000000_0xffffffff"
        ));
        assert!(!is_system_service_bundle(
            "public/default/0x00000000_0xffffffff"
        ));
        assert!(!is_system_service_bundle("bundle-1"));
        assert_eq!(namespace_of("public/default/0x0_0x1"), "public/default");
    }

    #[test]
    fn system_service_namespaces_match_pulsars_patterns() {
        // SLA monitor: `sla-monitor/[^/]+/([^:]+:\d+)` needs a cluster segment.
        assert!(!is_system_service_bundle(
            "sla-monitor/host:8080/0x00000000_0xffffffff"
        ));
        // The host part is `[^:]+`: a host holding ':' is no heartbeat namespace.
        assert!(!is_system_service_bundle(
            "pulsar/c1/[::1]:8080/0x00000000_0xffffffff"
        ));
        assert!(!is_system_service_bundle(
            "sla-monitor/c1/[::1]:8080/0x00000000_0xffffffff"
        ));
        // The port is `\d+` up to the end of the namespace.
        assert!(!is_system_service_bundle(
            "pulsar/c1/host:80x/0x00000000_0xffffffff"
        ));
        assert!(!is_system_service_bundle(
            "pulsar/c1/host:/0x00000000_0xffffffff"
        ));
        assert!(is_system_service_bundle(
            "sla-monitor/c1/host.example:6650/0x00000000_0xffffffff"
        ));
    }

    /// The reference `num`: Rust's float formatting.
    fn num_reference(v: f64) -> String {
        if v.is_infinite() {
            return if v > 0.0 { "inf".into() } else { "-inf".into() };
        }
        if v.abs() >= 100.0 || v == v.trunc() {
            format!("{v:.1}")
        } else {
            let s = format!("{v:.4}");
            let s = s.trim_end_matches('0');
            if s.ends_with('.') {
                format!("{s}0")
            } else {
                s.to_owned()
            }
        }
    }

    #[test]
    fn fast_number_formatting_matches_rusts_formatting() {
        let special = [
            0.0,
            -0.0,
            0.25,
            0.75,
            2.5,
            0.00005,
            0.00015,
            0.00025,
            1.00005,
            99.99995,
            99.999949999,
            -99.99995,
            100.0,
            1e-300,
            5e-324,
            -5e-324,
            1e15,
            1.5e30,
            1e300,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for v in special {
            assert_eq!(num(v), num_reference(v), "{v:e}");
        }
        for k in 0..200_000u64 {
            let v = k as f64 * 0.00001 - 1.0;
            assert_eq!(num(v), num_reference(v), "{v:e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn fast_number_formatting_matches_on_any_bits(bits in proptest::prelude::any::<u64>(), k in 0u64..10_000_000) {
            let v = f64::from_bits(bits);
            proptest::prop_assert_eq!(num(v), num_reference(v));
            let w = k as f64 / 1000.0 - 5000.0;
            proptest::prop_assert_eq!(num(w), num_reference(w));
        }
    }

    #[test]
    fn number_formatting() {
        assert_eq!(num(78.0), "78.0");
        assert_eq!(num(46.5), "46.5");
        assert_eq!(num(0.364), "0.364");
        assert_eq!(num(5120.0), "5120.0");
        assert_eq!(num(0.1), "0.1");
        assert_eq!(num(f64::INFINITY), "inf");
    }
}
