//! BandShedder as a placement strategy.
//!
//! * A planned destination that is still a candidate is used (BandShedder's own plans are binding and never
//!   reach here; a plan from elsewhere is honoured the same way).
//! * Otherwise each candidate's score is predicted with the cost model of [`crate::core::cost_model`] from its
//!   report alone — its current weighted percentages plus its cost × the traffic of the bundle and of every bundle
//!   preallocated to it since its last report — and the lowest wins; ties (within 0.01 points) are broken at
//!   random. Counting the preallocations keeps a burst of placements (a broker's bundles after a crash) from all
//!   landing on the broker that was least loaded at the last report.

use rand::rngs::StdRng;
use rand::Rng;

use super::PlacementContext;
use crate::core::cost_model::{self, Traffic, Vector, RESOURCES};
use crate::core::{num, weights4};

/// Per broker (context order): weighted percentages and completed costs.
#[derive(Debug, Clone)]
pub(super) struct Model {
    pct: Vec<Vector>,
    cost: Vec<Vector>,
}

fn model(ctx: &PlacementContext<'_>) -> Model {
    let w = weights4(ctx.settings);
    let observed: Vec<[Option<f64>; RESOURCES]> = ctx
        .brokers
        .iter()
        .map(|b| cost_model::observed_costs(&b.entry.local, &w))
        .collect();
    let prior = cost_model::median_absolute_costs(
        ctx.brokers
            .iter()
            .zip(&observed)
            .map(|(b, o)| (*o, cost_model::capacities(&b.entry.local))),
    );
    Model {
        pct: ctx
            .brokers
            .iter()
            .map(|b| cost_model::weighted_percentages(&b.entry.local, &w))
            .collect(),
        cost: ctx
            .brokers
            .iter()
            .zip(&observed)
            .map(|(b, o)| {
                cost_model::complete_costs(*o, &cost_model::capacities(&b.entry.local), &prior)
            })
            .collect(),
    }
}

fn traffic_of(ctx: &PlacementContext<'_>, bundle: &str) -> Traffic {
    ctx.load
        .bundle(bundle)
        .map_or([0.0; RESOURCES], |d| cost_model::bundle_traffic(&d.short_term_data))
}

pub(super) fn select(
    ctx: &PlacementContext<'_>,
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
    let own = traffic_of(ctx, bundle);
    let predicted: Vec<(usize, f64)> = candidates
        .iter()
        .map(|&i| {
            let mut t = own;
            for pre in &ctx.brokers[i].entry.preallocated {
                if pre != bundle {
                    let x = traffic_of(ctx, pre);
                    for r in 0..RESOURCES {
                        t[r] += x[r];
                    }
                }
            }
            let p = cost_model::shifted(&m.pct[i], &m.cost[i], &t, 1.0);
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
