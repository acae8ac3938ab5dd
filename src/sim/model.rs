//! The score of a broker: how the simulator ranks the usage of its brokers in its metrics. The cost model that
//! turns traffic into that usage is the synthetic host's ([`crate::runtime::synthetic::CostModel`]); the seeded
//! noise and random streams of a run are [`crate::core::random`]'s.
//!
//! # Score
//!
//! The *score* of a broker is its weighted max resource usage in percent (0–100): `100 × max(cpu% × wCpu,
//! directMemory% × wDirect, nicIn% × wIn, nicOut% × wOut) / 100` with the configured
//! `loadBalancer*ResourceWeight`s — what AvgShedder scores (the four-weight form `W4`). Metrics use the
//! broker's true usage (no sampling noise); the reports the leader sees carry the noise and Pulsar's sampling
//! lags.

use crate::model::{ResourceUsage, ResourceWeights, SystemResourceUsage};

/// The score (0–100) of a host usage with the given weights, in `f64` (see the module docs).
pub fn score(u: &SystemResourceUsage, w: &ResourceWeights) -> f64 {
    let pct = |r: &ResourceUsage| {
        if r.limit > 0.0 {
            100.0 * r.usage / r.limit
        } else {
            0.0
        }
    };
    [
        pct(&u.cpu) * w.cpu,
        pct(&u.direct_memory) * w.direct_memory,
        pct(&u.bandwidth_in) * w.bandwidth_in,
        pct(&u.bandwidth_out) * w.bandwidth_out,
    ]
    .into_iter()
    .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::synthetic::{Capacity, CostModel, Rates};

    #[test]
    fn score_is_the_weighted_max_of_the_usage() {
        let cap = Capacity {
            cpu_cores: 8.0,
            nic_gbps: 10.0,
            base_cpu_cores: 0.4,
        };
        // 10 000 msg/s in and out of 2 KiB: 150 % of 800 % CPU, NIC out 3 × 163 840 of 10⁷ kbit/s.
        let r = Rates {
            rate_in: 10_000.0,
            rate_out: 10_000.0,
            tp_in: 10_000.0 * 2048.0,
            tp_out: 10_000.0 * 2048.0,
        };
        let u = CostModel::default().usage(&cap, &r, 0.0, 0.0);
        let s = score(&u, &ResourceWeights::default());
        assert!((s - 18.75).abs() < 1e-9, "{s}");
    }
}
