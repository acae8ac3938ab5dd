//! The optimality measure of a run: the fewest moves that balance the cluster state at the instant convergence
//! is measured from ([`crate::core::optimal`]), from the true model of the run (no report noise or lag).

use crate::core::optimal::{solve, BalanceProblem, BrokerModel, BundleLoad, MinMoves};
use crate::sim::metrics::CONVERGED_SPREAD;

use super::{Owner, Sim};

/// Above this many bundles only the lower bound is computed (the exact search is exponential).
const EXACT_MAX_BUNDLES: usize = 64;
/// Search nodes the exact search may visit before it settles for the bound.
const EXACT_NODE_BUDGET: u64 = 200_000;

impl Sim<'_> {
    /// The cluster at `t` as a balancing problem: every broker that is up, every bundle served by one, loads in
    /// the cost model's absolute units (cores, kbit/s), points as the metrics score them.
    pub(super) fn balance_problem(&self, t: i64) -> BalanceProblem {
        let up: Vec<usize> = (0..self.brokers.len())
            .filter(|b| self.brokers[*b].up)
            .collect();
        let mut slot_of = vec![None; self.brokers.len()];
        for (k, b) in up.iter().enumerate() {
            slot_of[*b] = Some(k);
        }
        let w = &self.weights4;
        let model = &self.world.model;
        let brokers = up
            .iter()
            .map(|&b| {
                let cap = &self.world.brokers[b].capacity;
                let cpu_scale = 100.0 * w.cpu / cap.cpu_cores;
                let nic = |weight: f64| 100.0 * weight / (cap.nic_gbps * 1e6);
                BrokerModel {
                    base: [
                        cap.base_cpu_cores * cpu_scale + self.spike(b, t) * w.cpu,
                        // The synthetic host's direct memory is a constant 10 % of its limit.
                        10.0 * w.direct_memory,
                        0.0,
                        0.0,
                    ],
                    scale: [cpu_scale, 0.0, nic(w.bandwidth_in), nic(w.bandwidth_out)],
                }
            })
            .collect();
        let bundles = self
            .bundles
            .iter()
            .filter(|b| b.live)
            .filter_map(|b| {
                let Owner::On(o) = b.owner else { return None };
                let owner = slot_of[o]?;
                let r = b.rates.scaled(self.wave(b.ns, t)).clamped();
                Some(BundleLoad {
                    owner,
                    load: [
                        model.traffic_cores(&r),
                        0.0,
                        r.tp_in * 8.0 / 1000.0,
                        (r.tp_out + r.tp_in * model.bookie_write_copies) * 8.0 / 1000.0,
                    ],
                    movable: true,
                })
            })
            .collect();
        BalanceProblem {
            brokers,
            bundles,
            spread: CONVERGED_SPREAD,
        }
    }

    /// The fewest moves that balance the state at `t`: exact on small states, else a lower bound; `None` when
    /// no balanced state exists.
    pub(super) fn min_moves(&self, t: i64) -> Option<MinMoves> {
        let p = self.balance_problem(t);
        if p.bundles.len() <= EXACT_MAX_BUNDLES {
            solve(&p, EXACT_NODE_BUDGET)
        } else {
            crate::core::optimal::lower_bound(&p).map(|moves| MinMoves {
                moves,
                exact: false,
            })
        }
    }
}
