//! LeastResourceUsageWithWeight, in its two Pulsar variants.
//!
//! **Modular** (PIP-182, PR #16281; newest Java copy read): on every placement call, for every candidate, the
//! stored moving average is advanced once: history is discarded when the broker has no bundles or reports
//! `msgRateIn == msgRateOut == 0` (PR #16766, a restarted broker), then `ema = W4` (no history) or
//! `ema·h + (1 − h)·W4`. `avg` = mean over the candidates; the best brokers are those with
//! `ema + diff <= avg` (`diff` = `loadBalancerAverageResourceUsageDifferenceThresholdPercentage`/100); none →
//! all candidates. One is drawn uniformly from the seeded RNG. The average therefore moves per call, not per
//! unit of time.
//!
//! **Extensible** (`extensions/strategy/LeastResourceUsageWithWeight`): the brokers' `weightedMaxEMA` (the load
//! data's extensible EMAs, [`crate::core::extensible`]) are used as they are; `avg` = their mean over the
//! candidates; best = `ema + diff <= avg`; none best → random among all candidates.

use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::StdRng;
use rand::Rng;

use super::PlacementContext;
use crate::core::num;

/// Modular variant state: the per-broker moving averages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeastResourceUsage {
    ema: BTreeMap<String, f64>,
}

/// What a pick is explained with.
struct PickFacts<'a> {
    name: &'a str,
    broker: &'a str,
    best: usize,
    all: usize,
    avg: f64,
    diff: f64,
    usage: f64,
}

fn pick_reason(f: PickFacts<'_>) -> String {
    if f.best == f.all && f.all > 1 {
        format!(
            "{}: no broker is {}% below the average {}%; {} is random among all {} candidates",
            f.name,
            num(f.diff * 100.0),
            num(f.avg * 100.0),
            f.broker,
            f.all
        )
    } else {
        format!(
            "{}: {} usage {}% + {}% <= average {}%; random among {} best of {}",
            f.name,
            f.broker,
            num(f.usage * 100.0),
            num(f.diff * 100.0),
            num(f.avg * 100.0),
            f.best,
            f.all
        )
    }
}

impl LeastResourceUsage {
    /// A broker's moving average, fraction.
    pub fn usage(&self, broker: &str) -> Option<f64> {
        self.ema.get(broker).copied()
    }

    /// Sets a broker's moving average (tests and state restore).
    pub fn set_usage(&mut self, broker: &str, usage: f64) {
        self.ema.insert(broker.to_owned(), usage);
    }

    pub(super) fn select(
        &mut self,
        ctx: &PlacementContext<'_>,
        candidates: &[usize],
        rng: &mut StdRng,
    ) -> Option<(usize, String)> {
        let h = ctx.settings.load_balancer_history_resource_percentage;
        let mut total = 0.0;
        for i in candidates {
            let b = &ctx.brokers[*i];
            let local = &b.entry.local;
            let history = if local.bundles.is_empty()
                || (local.msg_rate_in == 0.0 && local.msg_rate_out == 0.0)
            {
                None
            } else {
                self.ema.get(b.id).copied()
            };
            let v = match history {
                Some(old) => old * h + (1.0 - h) * b.w4,
                None => b.w4,
            };
            match self.ema.get_mut(b.id) {
                Some(slot) => *slot = v,
                None => {
                    self.ema.insert(b.id.to_owned(), v);
                }
            }
            total += v;
        }
        let avg = total / candidates.len() as f64;
        let diff = ctx
            .settings
            .load_balancer_average_resource_usage_difference_threshold_percentage
            as f64
            / 100.0;
        let usage = |i: usize| self.ema.get(ctx.brokers[i].id).copied().unwrap_or(1.0);
        let mut best: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|i| usage(*i) + diff <= avg)
            .collect();
        if best.is_empty() {
            best = candidates.to_vec();
        }
        let pick = best[rng.random_range(0..best.len())];
        Some((
            pick,
            pick_reason(PickFacts {
                name: "LeastResourceUsageWithWeight",
                broker: ctx.brokers[pick].id,
                best: best.len(),
                all: candidates.len(),
                avg,
                diff,
                usage: usage(pick),
            }),
        ))
    }

    /// Forgets brokers no longer alive.
    pub fn on_active_brokers_change(&mut self, active: &BTreeSet<String>) {
        self.ema.retain(|b, _| active.contains(b));
    }
}

/// Extensible variant: reads the brokers' extensible load data (no state of its own).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExtensibleLeastResourceUsage;

impl ExtensibleLeastResourceUsage {
    pub(super) fn select(
        &mut self,
        ctx: &PlacementContext<'_>,
        candidates: &[usize],
        rng: &mut StdRng,
    ) -> Option<(usize, String)> {
        // Every broker of the load data has extensible load data (its EMAs start with its first report), so
        // Pulsar's "no load data" brokers do not occur here.
        let ema = |i: usize| ctx.brokers[i].entry.extensible.weighted_max_ema;
        let diff = ctx
            .settings
            .load_balancer_average_resource_usage_difference_threshold_percentage
            as f64
            / 100.0;
        let avg = candidates.iter().map(|i| ema(*i)).sum::<f64>() / candidates.len() as f64;
        let mut best: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|i| ema(*i) + diff <= avg)
            .collect();
        if best.is_empty() {
            best = candidates.to_vec();
        }
        let pick = best[rng.random_range(0..best.len())];
        Some((
            pick,
            pick_reason(PickFacts {
                name: "LeastResourceUsageWithWeight(extensible)",
                broker: ctx.brokers[pick].id,
                best: best.len(),
                all: candidates.len(),
                avg,
                diff,
                usage: ema(pick),
            }),
        ))
    }
}
