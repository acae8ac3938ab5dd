//! LeastLongTermMessageRate (the default placement of Pulsar 1.x–4.x).
//!
//! Score of a broker: `+∞` when its usage `W` (five-weight form, configured weights — PIP-358) is above the
//! overload threshold; otherwise the long-term msg/s (in + out) of its preallocated bundles plus its
//! `TimeAverageBrokerData` long-term msg/s. The brokers with the lowest score (exact equality) are the best; all
//! `+∞` means all candidates are. One is drawn uniformly from the seeded RNG.
//!
//! **loadmgr setting `loadmgrLeastLongTermMessageRateUsageWeighting`** (off by default): multiplies the rate by
//! `1 / (threshold − W)` (`+∞` at or above the threshold), the weighting the seed docs describe. Pulsar removed
//! it in PR #442 (2017) because the weight ranged from 3.2 to +∞ in production and a restarted broker took
//! bundles back until it had about three times the rate of the least loaded one. It exists so the simulator can
//! compare the two.

use std::cell::OnceCell;

use rand::rngs::StdRng;
use rand::Rng;

use super::PlacementContext;
use crate::core::num;

/// A broker's LeastLongTermMessageRate score, msg/s (or weighted msg/s).
pub(super) fn score(ctx: &PlacementContext<'_>, i: usize) -> f64 {
    let b = &ctx.brokers[i];
    let threshold = ctx
        .settings
        .load_balancer_broker_overloaded_threshold_percentage as f64
        / 100.0;
    if b.w5 > threshold {
        return f64::INFINITY;
    }
    let preallocated = b.entry.preallocated_load.long_term_msg_rate;
    let rate = preallocated + b.entry.time_average.long_term_msg_rate();
    if ctx
        .settings
        .loadmgr_least_long_term_message_rate_usage_weighting
    {
        if b.w5 >= threshold {
            f64::INFINITY
        } else {
            rate / (threshold - b.w5)
        }
    } else {
        rate
    }
}

pub(super) fn select(
    ctx: &PlacementContext<'_>,
    candidates: &[usize],
    best_cache: &OnceCell<Vec<usize>>,
    rng: &mut StdRng,
) -> Option<(usize, String)> {
    let all = ctx.lltmr_scores();
    // Scores are fixed for the context and candidate lists per namespace, so the best set is computed once.
    let best = best_cache.get_or_init(|| {
        let min = candidates
            .iter()
            .map(|i| all[*i])
            .filter(|s| !s.is_nan())
            .fold(f64::INFINITY, f64::min);
        let best: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|i| all[*i] == min)
            .collect();
        if best.is_empty() {
            candidates.to_vec()
        } else {
            best
        }
    });
    let min = best
        .first()
        .map(|i| all[*i])
        .filter(|s| !s.is_nan())
        .unwrap_or(f64::INFINITY);
    let pick = best[rng.random_range(0..best.len())];
    let weighted = if ctx
        .settings
        .loadmgr_least_long_term_message_rate_usage_weighting
    {
        " (usage-weighted)"
    } else {
        ""
    };
    let reason = if min.is_infinite() {
        format!(
            "LeastLongTermMessageRate: all {} candidates are overloaded; {} is random among them",
            candidates.len(),
            ctx.brokers[pick].id
        )
    } else if best.len() > 1 {
        format!(
            "LeastLongTermMessageRate: lowest long-term rate{weighted} {} msg/s shared by {} brokers; {} drawn at random",
            num(min),
            best.len(),
            ctx.brokers[pick].id
        )
    } else {
        format!(
            "LeastLongTermMessageRate: {} has the lowest long-term rate{weighted} {} msg/s of {} candidates",
            ctx.brokers[pick].id,
            num(min),
            candidates.len()
        )
    };
    Some((pick, reason))
}
