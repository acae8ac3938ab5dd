//! BandShedder as a placement strategy.
//!
//! * A planned destination that is still a candidate is used (BandShedder's own plans are binding and never
//!   reach here; a plan from elsewhere is honoured the same way).
//! * Otherwise each candidate's score is predicted with the cost model of [`crate::core::cost_model`] from the
//!   reports alone (idle usage and costs as the reports show them now) — its current weighted percentages plus
//!   its marginal cost × the traffic of the bundle and of every bundle
//!   preallocated to it since its last report — and the lowest wins; ties (within 0.01 points) are broken at
//!   random. A bundle never observed (no sample in its window) counts as the mean bundle of the reports.
//!   Counting the preallocations keeps a burst of placements (a broker's bundles after a crash) from all
//!   landing on the broker that was least loaded at the last report.
//! * Where the shedder's last cycle learned a broker's idle usage and costs ([`LearnedCosts`]), its score is
//!   that model's, `idle + cost × traffic` over its reported traffic, its preallocations and the bundle (the
//!   shedder's model, without its correction for moves the reports do not show yet: a source that has not
//!   reported giving bundles away looks busier, the safe side). A report's host usage is averaged over a
//!   window and is rewritten only when the load moved by the report threshold, so right after a broker took
//!   bundles it can read several points below what its traffic needs for minutes; weighed by that, a crashed
//!   broker's bundles went to the brokers a plan had just filled (a third of them onto one broker in
//!   `rolling-restart`), and the next plan had to move them off again.

use rand::rngs::StdRng;
use rand::Rng;

use super::PlacementContext;
use crate::core::cost_model::{self, LearnedCosts, Traffic, Vector, RESOURCES};
use crate::core::{num, weights4};

/// Per broker (context order): weighted percentages and completed costs.
#[derive(Debug, Clone)]
pub(super) struct Model {
    pct: Vec<Vector>,
    cost: Vec<Vector>,
    /// The mean traffic of a bundle over the brokers' reports: the estimate for a bundle never observed.
    mean_bundle: Traffic,
}

fn model(ctx: &PlacementContext<'_>) -> Model {
    let w = weights4(ctx.settings);
    let caps: Vec<Vector> = ctx
        .brokers
        .iter()
        .map(|b| cost_model::capacities(&b.entry.local))
        .collect();
    let pct: Vec<Vector> = ctx
        .brokers
        .iter()
        .map(|b| cost_model::weighted_percentages(&b.entry.local, &w))
        .collect();
    let idle_seen: Vec<[Option<f64>; RESOURCES]> = ctx
        .brokers
        .iter()
        .map(|b| cost_model::idle_percentages(&b.entry.local, &w))
        .collect();
    let idle_prior =
        cost_model::median_absolute(idle_seen.iter().copied().zip(caps.iter().copied()));
    let observed: Vec<[Option<f64>; RESOURCES]> = ctx
        .brokers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let idle = cost_model::idle_usage(idle_seen[i], &caps[i], &idle_prior, &pct[i]);
            cost_model::observed_costs(&b.entry.local, &w, &idle)
        })
        .collect();
    let prior = cost_model::median_absolute(observed.iter().copied().zip(caps.iter().copied()));
    let (mut total, mut bundles) = ([0.0; RESOURCES], 0usize);
    for b in &ctx.brokers {
        let x = cost_model::broker_traffic(&b.entry.local);
        for r in 0..RESOURCES {
            total[r] += x[r];
        }
        bundles += b.entry.local.bundles.len();
    }
    let mean_bundle = total.map(|t| t / bundles.max(1) as f64);
    Model {
        mean_bundle,
        cost: observed
            .iter()
            .zip(&caps)
            .map(|(o, cap)| cost_model::complete(*o, cap, &prior))
            .collect(),
        pct,
    }
}

/// A bundle's traffic: its short-term window, or the mean bundle's when it was never observed (a new leader that
/// places a crashed broker's bundles before any report of them knows only the defaults).
fn traffic_of(ctx: &PlacementContext<'_>, m: &Model, bundle: &str) -> Traffic {
    match ctx.load.bundle(bundle) {
        Some(d) if d.short_term_data.num_samples > 0 => {
            cost_model::bundle_traffic(&d.short_term_data)
        }
        _ => m.mean_bundle,
    }
}

pub(super) fn select(
    ctx: &PlacementContext<'_>,
    learned: &LearnedCosts,
    bundle: &str,
    candidates: &[usize],
    planned: Option<&str>,
    rng: &mut StdRng,
) -> Option<(usize, String)> {
    if let Some(p) = planned {
        if let Some(pi) = ctx
            .index_of(p)
            .filter(|i| candidates.binary_search(i).is_ok())
        {
            return Some((pi, format!("BandShedder: planned destination {p}")));
        }
    }
    let m = ctx.band.get_or_init(|| model(ctx));
    let own = traffic_of(ctx, m, bundle);
    let predicted: Vec<(usize, f64)> = candidates
        .iter()
        .map(|&i| {
            let mut t = own;
            for pre in &ctx.brokers[i].entry.preallocated {
                if pre != bundle {
                    let x = traffic_of(ctx, m, pre);
                    for r in 0..RESOURCES {
                        t[r] += x[r];
                    }
                }
            }
            let b = &ctx.brokers[i];
            let from_report = cost_model::shifted(&m.pct[i], &m.cost[i], &t, 1.0);
            let p = match learned.get(b.id) {
                Some(l) => {
                    let x = cost_model::broker_traffic(&b.entry.local);
                    l.usage(&std::array::from_fn(|r| x[r] + t[r]), &from_report)
                }
                None => from_report,
            };
            (i, cost_model::score(&p))
        })
        .collect();
    let least = predicted
        .iter()
        .map(|(_, s)| *s)
        .fold(f64::INFINITY, f64::min);
    let best: Vec<usize> = predicted
        .iter()
        .filter(|(_, s)| *s <= least + 0.01)
        .map(|(i, _)| *i)
        .collect();
    let pick = *best.get(rng.random_range(0..best.len().max(1)))?;
    Some((
        pick,
        format!(
            "BandShedder: {} has the least predicted score {} with the bundle and its preallocations ({} tied among {} candidates)",
            ctx.brokers[pick].id,
            num(least),
            best.len(),
            candidates.len()
        ),
    ))
}
