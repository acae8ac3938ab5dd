//! BandShedder: loadmgr's own strategy. It plans every move of a cycle at once, so that each broker's score
//! ends inside a band around the mean, with as few moves as it can find, predicting each move's effect on both
//! brokers from a cost model learned from their reports ([`crate::core::cost_model`]).
//!
//! Per cycle:
//! 1. **Learn.** Each broker's cost per unit of traffic (cpu per msg/s, NIC and direct memory per B/s) is sampled
//!    at each regular cycle from its report when that report was written at least a host-usage window
//!    (`loadBalancerHostUsageCheckIntervalMinutes`) after the first report that showed its traffic's last
//!    change of more than `STEADY` (5 %; host usage is averaged over that window, so a report written right
//!    after a change shows usage that lags it, and a broker may not rewrite it for minutes); the strategy keeps
//!    the last `COST_SAMPLES` (5) samples (traffic and usage) and uses the median of their costs, so a usage spike
//!    that traffic does not explain (a GC pause, a compaction) and lasts fewer than half of those cycles moves
//!    neither the cost nor the score. A resource at its limit ([`cost_model::saturated`]) is not sampled: its
//!    usage understates what its traffic needs. Brokers without a cost of their own borrow the cluster's median
//!    absolute cost. Each broker's idle usage is what it reported while it had no traffic (a new or restarted
//!    broker), else the cluster's median idle usage in absolute terms, else (no broker was ever seen idle) the
//!    intercept of the line through the brokers' latest samples in absolute terms ([`cost_model::fitted_idle`],
//!    when the largest traffic is at least `1 + FIT_SPAN` (1.2) times the smallest; kept until a later cycle
//!    reads another). A broker's last steady saturated report bounds its cost from below, and stands in for
//!    the cluster's cost where no broker has one of its own.
//!    A completed move that a report does not show yet (a broker rewrites its report only when its load
//!    moved by the report threshold) is applied to both brokers' traffic from the leader's own view
//!    ([`SheddingContext::unreported`]), so the leader does not wait for those reports.
//! 2. **Score.** A broker's score is the model's: idle + cost × traffic per resource, largest of the four (AvgShedder's
//!    `W4` in points when the cost is current). Mean `m`, spread = max − min.
//! 3. **Trigger.** Balanced while the spread is at most `loadmgrBandShedderSpreadPercentage` (10 points). A
//!    broker outside `m ± spread/2` counts a hit per consecutive regular cycle on the same side; a plan is made
//!    when some broker has `loadmgrBandShedderHitCount` (2) hits — at once when the broker is below the band and
//!    has no bundles or joined since the last cycle (an empty broker is no spike), and for every broker out of
//!    band when the last plan stopped at its move budget. Making a plan clears every count. Those two need no
//!    confirmation, so the strategy asks the leader for an *early cycle*
//!    `loadmgrBandShedderEarlyCycleSeconds` (10) after a broker joins or after such a plan (run once no move
//!    is in flight); an early cycle counts no hits and takes no cost samples. A broker back from a restart in
//!    a rolling restart may be *held* ([`restarts`]): it is left out of the mean, the spread, the hit counts
//!    and the plan until the next restart is due, and counts as joined when released.
//! 4. **Split.** A broker among the three highest-scored above the band whose hottest bundle is wider than the
//!    band and fits under the band's top on no broker placement allows has that bundle split (children
//!    unloaded, the automatic split's checks) instead of shed around; such a cycle plans no move
//!    (`too_hot_to_place`).
//! 5. **Plan.** Greedy, largest benefit first: repeatedly, over the bundles of the three highest-scored brokers
//!    that have bundles outside their grace period
//!    and, for each bundle, the three lowest-scored brokers placement allows, take the move that most reduces
//!    Σ (score − m)², never leaving the destination above the source or above the plan band's top `m + plan/2`
//!    (a destination overshot with fresh bundles could not shed them within the grace period). Stop when the
//!    predicted spread is inside the trigger band by a margin for the plan's own error ([`stop_spread`]: down
//!    to `loadmgrBandShedderPlanSpreadPercentage` (7) for a large plan, about 8.5 for a small correction), no
//!    move helps, or `loadmgrBandShedderMaxMovesPerCycle` (100) moves are planned.
//! 6. **Constraints.** Every destination passes the placement filters of the bundle's namespace (isolation,
//!    max topics, anti-affinity and failure domains, even distribution, load-manager class, versions); within one
//!    plan a broker (or failure domain) receives at most one namespace of an anti-affinity group it did not hold
//!    and no more topics than `loadBalancerBrokerMaxTopics`; a bundle is never planned back onto a broker it left
//!    within `loadmgrBandShedderNoReturnMinutes` (60), nor moved within the shedding grace period.
//!
//! Plans are *binding*: the destination is final and placement does not replace it. The predicted score of each
//! broker before and after the plan goes into [`SheddingOutcome::prediction`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

use super::{sheddable_bundles, Candidate, Shedder, SheddingContext, SheddingOutcome};
use crate::config::{Settings, ShedderKind};
use crate::core::cost_model::{self, BrokerCosts, LearnedCosts, Traffic, Vector, RESOURCES};
use crate::core::placement::{filters, Candidates, PlacementContext};
use crate::core::plan::{BrokerPrediction, Skipped, SplitDecision, UnloadDecision};
use crate::core::split;
use crate::core::{namespace_of, num, weights4};
use learn::{Learned, Learner};
use limits::Limits;

/// Highest-scored brokers whose bundles each planning step weighs.
const SOURCES_PER_STEP: usize = 3;
/// Lowest-scored eligible destinations weighed per bundle.
const DESTINATIONS_PER_BUNDLE: usize = 3;

/// Relative error of a predicted change of a broker's score, as a fraction of that change: the part of a
/// broker's usage that is idle usage but may be folded into its cost when no broker was ever seen idle (5–15 %
/// on a busy broker), and a cost sampled while usage still lagged a step of [`learn`]'s `STEADY` 5 %. A move
/// errs on its source and its destination in opposite directions, so a plan's spread errs by up to twice this
/// times the largest change it predicts for a broker.
const PREDICTION_ERROR: f64 = 0.1;

/// Predicted spread at which a plan stops, points: inside the trigger band `spread_limit` by a margin. The
/// configured margin (`spread_limit − plan_spread`) is half for report noise, which every plan faces, and half
/// for the error of the plan's own prediction, which grows with the largest change it predicts for a broker
/// (`before` → `now`; see [`PREDICTION_ERROR`]). A large plan (an empty broker refilled, a skew undone)
/// so stops at the plan spread, and a small correction of a broker just out of the band stops once it is back
/// in by half the margin, instead of moving as many bundles as a large plan would to reach the plan spread.
fn stop_spread(before: &[f64], now: &[f64], spread_limit: f64, plan_spread: f64) -> f64 {
    let change = before
        .iter()
        .zip(now)
        .map(|(b, n)| (n - b).abs())
        .fold(0.0, f64::max);
    let full = (spread_limit - plan_spread).max(0.0);
    let margin = (full / 2.0 + 2.0 * PREDICTION_ERROR * change).min(full);
    spread_limit - margin
}

/// Which side of the band a broker is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Above,
    Below,
}

/// BandShedder with its learned costs, hit counts and move memory.
#[derive(Debug, Clone, Default)]
pub struct BandShedder {
    /// What it learned of each broker's costs.
    learner: Learner,
    /// Per broker out of band: the side and consecutive cycles there.
    hits: BTreeMap<String, (Side, i32)>,
    /// Brokers present at the last cycle (`None` before the first).
    seen: Option<BTreeSet<String>>,
    /// Per bundle: brokers a plan moved it off, with when (epoch ms).
    left: HashMap<String, Vec<(String, i64)>>,
    /// The last plan stopped at the move budget: the next cycle goes on without waiting for hits.
    unfinished: bool,
    /// A broker joined since the last cycle (known from the active set, before a cycle sees it).
    joined_pending: bool,
    /// Per broker: the idle usage and costs the last cycle scored it with (handed to placement).
    costs: LearnedCosts,
    /// Departures and returns, for rolling restarts.
    restarts: restarts::Restarts,
    /// Per bundle: when a split of it was asked for (epoch ms), kept for the no-return window.
    split_asked: HashMap<String, i64>,
}

/// One broker's working state during planning.
#[derive(Debug, Clone)]
struct Node<'a> {
    id: &'a str,
    /// Predicted weighted percentages.
    p: Vector,
    /// Its idle usage and costs (handed to placement after the cycle).
    model: BrokerCosts,
    /// Its sheddable bundles, listed when it first becomes a source.
    items: Option<Vec<Item<'a>>>,
}

#[derive(Debug, Clone)]
struct Item<'a> {
    bundle: &'a str,
    traffic: Traffic,
    topics: i64,
    /// Its placement candidates (indexes into the nodes).
    cands: Rc<Candidates>,
    /// Some other broker may take it and the anti-affinity filter lets it leave its broker.
    movable: bool,
    /// Brokers a plan moved it off within the no-return window.
    barred: Vec<usize>,
    /// Its namespace's anti-affinity group.
    group: Option<&'a str>,
}

impl<'a> Item<'a> {
    /// What the plan-wide filters count of it ([`Limits`]): its name, topics and anti-affinity group.
    fn key(&self) -> (&'a str, i64, Option<&'a str>) {
        (self.bundle, self.topics, self.group)
    }
}

/// A move weighed during planning.
#[derive(Debug, Clone, Copy)]
struct Weighed<'a> {
    bundle: &'a str,
    src: usize,
    item: usize,
    dst: usize,
    gain: f64,
    src_after: f64,
    dst_after: f64,
}

impl BandShedder {
    /// The broker's current cost samples of one resource (oldest first) as (traffic, absolute usage: weighted
    /// percentage × capacity), for tests and explain.
    pub fn cost_samples(&self, broker: &str, resource: usize) -> &[(f64, f64)] {
        self.learner.cost_samples(broker, resource)
    }
}

fn side_of(score: f64, mean: f64, half: f64) -> Option<Side> {
    if score > mean + half {
        Some(Side::Above)
    } else if score < mean - half {
        Some(Side::Below)
    } else {
        None
    }
}

/// The mean predicted score of the brokers not held.
fn mean_of(nodes: &[Node<'_>], held: &[bool]) -> f64 {
    let (sum, n) = nodes
        .iter()
        .zip(held)
        .filter(|(_, h)| !**h)
        .fold((0.0, 0usize), |(sum, n), (node, _)| {
            (sum + cost_model::score(&node.p), n + 1)
        });
    sum / n.max(1) as f64
}

impl Shedder for BandShedder {
    fn kind(&self) -> ShedderKind {
        ShedderKind::BandShedder
    }

    fn find_bundles(&mut self, ctx: &SheddingContext<'_>) -> SheddingOutcome {
        let pctx = PlacementContext::new(ctx.load, ctx.settings, ctx.policies).with_now(ctx.now);
        self.find_bundles_with_placement(ctx, &pctx)
    }

    fn find_bundles_with_placement(
        &mut self,
        ctx: &SheddingContext<'_>,
        pctx: &PlacementContext<'_>,
    ) -> SheddingOutcome {
        let s = ctx.settings;
        let spread_limit = s.loadmgr_band_shedder_spread_percentage;
        let plan_spread = s.loadmgr_band_shedder_plan_spread_percentage;
        let hits_needed = s.loadmgr_band_shedder_hit_count.max(0);
        let w = weights4(s);
        let mut out = SheddingOutcome::default();

        // 1. Learn, then complete every broker's costs.
        let learned = self.learner.learn(ctx);
        let prior = cost_model::median_absolute(
            ctx.load
                .brokers()
                .map(|(id, e)| (learned[id.as_str()].costs, cost_model::capacities(&e.local))),
        );
        // Where no broker has a cost of its own, the saturated reports' lower bounds are all there is.
        let floor_prior = cost_model::median_absolute(
            ctx.load
                .brokers()
                .map(|(id, e)| (learned[id.as_str()].floor, cost_model::capacities(&e.local))),
        );
        let prior: [Option<f64>; RESOURCES] = std::array::from_fn(|r| prior[r].or(floor_prior[r]));

        // 2. Score by the model.
        // Completed moves a report does not show yet (the leader says which side): the source still lists the
        // bundle, or the destination does not (a broker rewrites its report only when its load moved by the
        // report threshold).
        let mut shift: HashMap<&str, Traffic> = HashMap::new();
        for u in ctx.unreported {
            // An orphan's data went with its gone broker: the leader kept it (`last_data`).
            let d = match (ctx.load.bundle(&u.bundle), &u.last_data) {
                (Some(d), _) if d.short_term_data.num_samples > 0 => d,
                (_, Some(last)) => last,
                (Some(d), None) => d,
                (None, None) => continue,
            };
            let t = cost_model::bundle_traffic(&d.short_term_data);
            let sides = [(&u.still_listed_by, -1.0), (&u.not_yet_listed_by, 1.0)];
            for (broker, sign) in sides {
                if let Some(b) = broker {
                    let v = shift.entry(b.as_str()).or_insert([0.0; RESOURCES]);
                    for r in 0..RESOURCES {
                        v[r] += sign * t[r];
                    }
                }
            }
        }
        let mut nodes: Vec<Node<'_>> = pctx
            .brokers
            .iter()
            .map(|b| {
                let local = &b.entry.local;
                let Learned {
                    idle,
                    costs: own,
                    floor,
                } = &learned[b.id];
                // Its own cost, else the cluster's; never below what a saturated report shows (with no broker
                // unsaturated, that is all there is to go by).
                let borrowed = cost_model::complete(*own, &cost_model::capacities(local), &prior);
                let cost: Vector = std::array::from_fn(|r| match own[r] {
                    Some(_) => borrowed[r],
                    None => borrowed[r].max(floor[r].unwrap_or(0.0)),
                });
                let raw = cost_model::weighted_percentages(local, &w);
                let reported = cost_model::broker_traffic(local);
                let x: Traffic = match shift.get(b.id) {
                    Some(d) => std::array::from_fn(|r| (reported[r] + d[r]).max(0.0)),
                    None => reported,
                };
                // Idle plus traffic × cost wherever the broker has traffic (its own cost, else the cluster's):
                // its host usage lags behind bundles it just received, and a spike is not traffic. Its raw usage
                // where it has none.
                let model = BrokerCosts { idle: *idle, cost };
                Node {
                    id: b.id,
                    p: model.usage(&x, &raw),
                    model,
                    items: None,
                }
            })
            .collect();
        self.costs = nodes.iter().map(|n| (n.id.to_owned(), n.model)).collect();
        if nodes.len() < 2 {
            return out;
        }
        let scores: Vec<f64> = nodes.iter().map(|n| cost_model::score(&n.p)).collect();
        // Brokers back from a restart in a rolling restart wait for placement (see `restarts`): they take no
        // part in the trigger or the plan while held.
        let ids: Vec<&str> = nodes.iter().map(|n| n.id).collect();
        let (held, note) = self.restarts.hold(s, ctx.now, &ids, &scores);
        if let Some(note) = note {
            out.skipped
                .push(Skipped::new("cluster", format!("BandShedder: {note}")));
        }
        let mean = mean_of(&nodes, &held);
        let (lo, hi) = scores
            .iter()
            .zip(&held)
            .filter(|(_, h)| !**h)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (s, _)| {
                (a.min(*s), b.max(*s))
            });
        let spread = hi - lo;

        // 3. Trigger.
        self.joined_pending = false;
        // A held broker is not seen yet: released, it counts as joined and is refilled at once.
        let current: BTreeSet<String> = nodes
            .iter()
            .zip(&held)
            .filter(|(_, h)| !**h)
            .map(|(n, _)| n.id.to_owned())
            .collect();
        let joined: BTreeSet<&str> = match &self.seen {
            Some(seen) => nodes
                .iter()
                .map(|n| n.id)
                .filter(|id| !seen.contains(*id))
                .collect(),
            None => BTreeSet::new(),
        };
        self.seen = Some(current);
        // A plan cut by the budget goes on to its own target, the plan spread, not just into the trigger band.
        let target = if self.unfinished {
            plan_spread.min(spread_limit)
        } else {
            spread_limit
        };
        let half = target / 2.0;
        let mut confirmed: Vec<String> = Vec::new();
        let mut waiting: Vec<String> = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let out_of_band =
                side_of(scores[i], mean, half).filter(|_| spread > target && !held[i]);
            let Some(side) = out_of_band else {
                if !ctx.early {
                    self.hits.remove(n.id);
                }
                continue;
            };
            let count = match self.hits.get(n.id) {
                Some((prev, k)) if *prev == side => k + 1,
                _ => 1,
            };
            // Hits count regular cycles only: early ones come at no fixed pace.
            if !ctx.early {
                self.hits.insert(n.id.to_owned(), (side, count));
            }
            let empty = ctx
                .load
                .broker(n.id)
                .map_or(true, |e| e.local.bundles.is_empty());
            let at_once = side == Side::Below && (empty || joined.contains(n.id));
            let label = format!(
                "{} {} ({} the band, {count}/{hits_needed} cycles{})",
                n.id,
                num(scores[i]),
                if side == Side::Above {
                    "above"
                } else {
                    "below"
                },
                if at_once { ", empty or new" } else { "" }
            );
            let confirmed_by_hits = count >= hits_needed && !ctx.early;
            if confirmed_by_hits || at_once || self.unfinished {
                confirmed.push(label);
            } else {
                waiting.push(label);
            }
        }
        if spread <= target {
            // Nothing left to continue.
            self.unfinished = false;
            out.skipped.push(Skipped::new(
                "cluster",
                format!(
                    "BandShedder: balanced: spread {} ≤ {} (mean {})",
                    num(spread),
                    num(target),
                    num(mean)
                ),
            ));
            return out;
        }
        if confirmed.is_empty() {
            out.skipped.push(Skipped::new(
                "cluster",
                format!(
                    "BandShedder: spread {} > {} but no broker has been out of the band long enough: {}",
                    num(spread),
                    num(target),
                    waiting.join(", ")
                ),
            ));
            return out;
        }
        if prior.iter().all(Option::is_none) {
            out.skipped.push(Skipped::new(
                "cluster",
                format!(
                    "BandShedder: spread {} > {} but no broker's cost is known yet (a cost is learned from a report written a host-usage window after its traffic last changed), so no move can be predicted",
                    num(spread),
                    num(spread_limit)
                ),
            ));
            return out;
        }
        self.hits.clear();
        // A plan that goes on from one cut by the budget is the same plan: its changes so far are not in this
        // cycle's `before`, so it keeps the full margin of its start.
        let continued = std::mem::replace(&mut self.unfinished, false);

        // 4. Bundles too hot for any broker: split, not shed around. A split asked for within the no-return
        // window and not carried out (the bundle is still there: the leader refused it) is not asked again, and
        // the plan goes on without it.
        let no_return_ms = s
            .loadmgr_band_shedder_no_return_minutes
            .saturating_mul(60_000);
        self.split_asked
            .retain(|_, at| ctx.now - *at < no_return_ms.max(1));
        let asked: HashSet<&str> = self.split_asked.keys().map(String::as_str).collect();
        let splits = too_hot_to_place(
            ctx,
            pctx,
            &nodes,
            &scores,
            &held,
            (mean + spread_limit / 2.0, spread_limit),
            &asked,
        );
        if !splits.is_empty() {
            for d in &splits {
                self.split_asked.insert(d.bundle.clone(), ctx.now);
            }
            out.skipped.push(Skipped::new(
                "cluster",
                format!(
                    "BandShedder: spread {} > {} (mean {}; out of band: {}); split {} bundle(s) too hot for any broker, and planned no move: the children's placement changes the state",
                    num(spread),
                    num(target),
                    num(mean),
                    confirmed.join(", "),
                    splits.len()
                ),
            ));
            out.splits = splits;
            // No move was planned: a plan cut by the budget goes on at the next cycle.
            self.unfinished = continued;
            return out;
        }

        // 5. Plan.
        let left = &self.left;
        // A source's bundles with what does not change while a plan is made: their candidates, whether the
        // anti-affinity filter lets them leave, and where they may not return.
        let items_of = |src: usize| -> Vec<Item<'_>> {
            let id = pctx.brokers[src].id;
            plannable_bundles(ctx, id)
                .map(|(name, d)| (name, cost_model::bundle_traffic(&d.short_term_data), d))
                .filter(|(_, traffic, _)| traffic.iter().any(|t| *t > 0.0))
                .map(|(name, traffic, d)| {
                    let cands = pctx.candidates(name);
                    let movable = cands.base.iter().any(|i| *i != src)
                        && filters::anti_affinity_allows_unload(pctx, name, id, &cands.base)
                            .is_ok();
                    let barred = left.get(name.as_str()).map_or_else(Vec::new, |v| {
                        v.iter()
                            .filter(|(_, t)| ctx.now - *t < no_return_ms)
                            .filter_map(|(b, _)| pctx.index_of(b))
                            .collect()
                    });
                    Item {
                        bundle: name.as_str(),
                        traffic,
                        topics: d.topics as i64,
                        cands,
                        movable,
                        barred,
                        group: ctx.policies.anti_affinity_group(namespace_of(name)),
                    }
                })
                .collect()
        };
        let mut limits = Limits {
            max_topics: s.load_balancer_broker_max_topics as i64,
            topics_filter_on: pctx
                .brokers
                .iter()
                .any(|b| b.topics <= s.load_balancer_broker_max_topics as i64),
            domains: s.failure_domains_enabled,
            added_topics: vec![0i64; nodes.len()],
            group_gain: HashMap::new(),
            planned_ns: HashSet::new(),
        };
        let budget = match s.loadmgr_band_shedder_max_moves_per_cycle {
            n if n <= 0 => usize::MAX,
            n => n as usize,
        };
        let before: Vec<f64> = scores.clone();
        let mut moves_out = vec![0u32; nodes.len()];
        let mut moves_in = vec![0u32; nodes.len()];
        let stop: String;
        let mut planned: Vec<Candidate> = Vec::new();
        // Brokers by predicted score, lowest first. A move changes two scores, so the order is kept across steps
        // and re-sorted nearly sorted.
        let mut order: Vec<usize> = (0..nodes.len()).filter(|i| !held[*i]).collect();
        loop {
            let m = mean_of(&nodes, &held);
            let sc: Vec<f64> = nodes.iter().map(|n| cost_model::score(&n.p)).collect();
            order.sort_by(|a, b| sc[*a].total_cmp(&sc[*b]).then(a.cmp(b)));
            let predicted_spread = sc[order[order.len() - 1]] - sc[order[0]];
            let stop_at = if continued {
                plan_spread.min(spread_limit)
            } else {
                stop_spread(&before, &sc, spread_limit, plan_spread)
            };
            if predicted_spread <= stop_at {
                stop = format!(
                    "predicted spread {} ≤ {}",
                    num(predicted_spread),
                    num(stop_at)
                );
                break;
            }
            if planned.len() >= budget {
                self.unfinished = true;
                stop = format!("move budget of {budget} reached; the next cycle goes on");
                break;
            }
            let mut best: Option<Weighed<'_>> = None;
            let mut second: Option<Weighed<'_>> = None;
            let mut weighed = 0usize;
            let mut sources = 0;
            for &src in order.iter().rev() {
                if sc[src] <= m || sources == SOURCES_PER_STEP {
                    break;
                }
                if nodes[src].items.is_none() {
                    nodes[src].items = Some(items_of(src));
                }
                // A broker whose bundles are all in their grace period cannot be a source: look further down.
                if nodes[src].items.as_ref().is_some_and(|v| v.is_empty()) {
                    continue;
                }
                sources += 1;
                for (k, item) in nodes[src].items.iter().flatten().enumerate() {
                    if !item.movable {
                        continue;
                    }
                    let mut tried = 0;
                    for &dst in &order {
                        if tried == DESTINATIONS_PER_BUNDLE || sc[dst] >= sc[src] {
                            break;
                        }
                        if dst == src
                            || item.cands.filtered.binary_search(&dst).is_err()
                            || item.barred.contains(&dst)
                            || !limits.admits(pctx, item.key(), dst)
                        {
                            continue;
                        }
                        tried += 1;
                        weighed += 1;
                        let Some(w) = weigh(&nodes, item, &sc, m, plan_spread, (src, k, dst))
                        else {
                            continue;
                        };
                        if best.map_or(true, |b| w.gain > b.gain) {
                            second = best;
                            best = Some(w);
                        } else if second.map_or(true, |b| w.gain > b.gain) {
                            second = Some(w);
                        }
                    }
                }
            }
            let Some(b) = best.filter(|b| b.gain > 1e-9) else {
                stop = "no move left improves the balance".into();
                break;
            };
            let alt = match second {
                Some(a) => format!(
                    "next best: {} {} -> {}, benefit {}",
                    a.bundle,
                    nodes[a.src].id,
                    nodes[a.dst].id,
                    num(a.gain)
                ),
                None => "no alternative".into(),
            };
            let item = nodes[b.src]
                .items
                .as_mut()
                .expect("a source's bundles are listed")
                .swap_remove(b.item);
            let (src_id, dst_id) = (nodes[b.src].id, nodes[b.dst].id);
            let reason = format!(
                "BandShedder: {src_id} {} -> {} and {dst_id} {} -> {} predicted (mean {}, plan spread {}); benefit {} points², best of {weighed} moves weighed ({alt})",
                num(sc[b.src]),
                num(b.src_after),
                num(sc[b.dst]),
                num(b.dst_after),
                num(m),
                num(plan_spread),
                num(b.gain),
            );
            nodes[b.src].p = cost_model::shifted(
                &nodes[b.src].p,
                &nodes[b.src].model.cost,
                &item.traffic,
                -1.0,
            );
            nodes[b.dst].p = cost_model::shifted(
                &nodes[b.dst].p,
                &nodes[b.dst].model.cost,
                &item.traffic,
                1.0,
            );
            limits.record(pctx, item.key(), b.dst);
            moves_out[b.src] += 1;
            moves_in[b.dst] += 1;
            planned.push(Candidate {
                bundle: item.bundle.to_owned(),
                source: src_id.to_owned(),
                planned: Some(dst_id.to_owned()),
                binding: true,
                reason,
            });
        }
        let after: Vec<f64> = nodes.iter().map(|n| cost_model::score(&n.p)).collect();
        out.prediction = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| BrokerPrediction {
                broker: n.id.to_owned(),
                score_now: before[i],
                score_after: after[i],
                moves_out: moves_out[i],
                moves_in: moves_in[i],
            })
            .collect();
        out.skipped.push(Skipped::new(
            "cluster",
            format!(
                "BandShedder: spread {} > {} (mean {}; out of band: {}); planned {} move(s), stopped: {stop}",
                num(spread),
                num(target),
                num(mean),
                confirmed.join(", "),
                planned.len()
            ),
        ));
        out.candidates = planned;
        out
    }

    fn on_active_brokers_change(&mut self, active: &BTreeSet<String>, now: i64) {
        self.restarts.observe(active, now);
        if let Some(seen) = &mut self.seen {
            // A broker that left is forgotten, so that it counts as new when it comes back (a restart).
            seen.retain(|b| active.contains(b));
            if active.iter().any(|b| !seen.contains(b)) {
                self.joined_pending = true;
            }
        }
        self.learner.retain(active);
        self.hits.retain(|b, _| active.contains(b));
        self.costs.retain(|b, _| active.contains(b));
    }

    fn on_takeover(&mut self, starts: &BTreeMap<String, i64>, gone: &BTreeSet<String>, now: i64) {
        self.restarts.take_over(starts, gone, now);
    }

    fn learned_costs(&self) -> Option<&LearnedCosts> {
        Some(&self.costs)
    }

    fn corrects_unreported_moves(&self) -> bool {
        true
    }

    fn wants_early_cycle(&self, settings: &Settings) -> Option<Duration> {
        let secs = settings.loadmgr_band_shedder_early_cycle_seconds;
        (secs > 0 && (self.unfinished || self.joined_pending))
            .then(|| Duration::from_secs(secs.unsigned_abs()))
    }

    fn on_past_move(&mut self, bundle: &str, source: &str, at: i64) {
        let v = self.left.entry(bundle.to_owned()).or_default();
        if !v.iter().any(|(b, t)| b == source && *t == at) {
            v.push((source.to_owned(), at));
        }
    }

    fn on_unloads_planned(&mut self, unloads: &[UnloadDecision], now: i64) {
        for u in unloads {
            self.left
                .entry(u.bundle.clone())
                .or_default()
                .push((u.source.clone(), now));
        }
        // Forget moves older than a day: no sensible no-return window is longer.
        let horizon = now - 24 * 60 * 60_000;
        self.left.retain(|_, v| {
            v.retain(|(_, t)| *t >= horizon);
            !v.is_empty()
        });
    }
}

/// The splits of bundles too hot for any broker. For each of the [`SOURCES_PER_STEP`] highest-scored brokers
/// above the band's top `top` (not held), its bundle with the most points there (its score falls the most without it), when
/// - the bundle is wider than the band (`width`, `loadmgrBandShedderSpreadPercentage`): it weighs more than
///   that on its broker and on every other broker placement allows for it, so no broker inside the band can
///   hold it and stay there, however its other bundles are moved;
/// - and no such broker would stay at or below `top` with it, by its own costs or by the source's: a move
///   would only carry the hot spot elsewhere, and shedding the broker's other bundles instead leaves it
///   holding one bundle that outweighs the band, to be refilled once the bundle splits or cools;
/// - it has at least two topics (a topic cannot be split, as Pulsar's split check also requires), its
///   namespace is not in `loadBalancerSheddingExcludedNamespaces`, no split of it was asked for in `asked`
///   (the last no-return window: a split the leader refused is not asked for again), and the split passes an
///   automatic split's checks with its children unloaded ([`split::plan_requested_splits`]:
///   `loadBalancerAutoBundleSplitEnabled`, the namespace's bundle quota, a splittable range) with boundaries
///   from the range alone (a topic-based algorithm needs the owner's topics, and the owner refuses a bundle
///   under its split thresholds).
///
/// Placement gives the children owners. A child still too hot is split again at a later cycle.
fn too_hot_to_place(
    ctx: &SheddingContext<'_>,
    pctx: &PlacementContext<'_>,
    nodes: &[Node<'_>],
    scores: &[f64],
    held: &[bool],
    (top, width): (f64, f64),
    asked: &HashSet<&str>,
) -> Vec<SplitDecision> {
    // What the bundle adds to a broker's score (`k` = 1) or takes from it (−1), with the given costs.
    let points = |node: &Node<'_>, cost: &Vector, t: &Traffic, k: f64| {
        k * (cost_model::score(&cost_model::shifted(&node.p, cost, t, k))
            - cost_model::score(&node.p))
    };
    let mut asks: Vec<(&str, &str, String)> = Vec::new();
    // The brokers the plan would take bundles from first: a bundle too hot for any broker makes its own the
    // hottest, and listing every broker's bundles would cost a pass over the cluster at every plan.
    let mut hottest_first: Vec<usize> = (0..nodes.len())
        .filter(|i| !held[*i] && scores[*i] > top)
        .collect();
    hottest_first.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
    hottest_first.truncate(SOURCES_PER_STEP);
    for src in hottest_first {
        let node = &nodes[src];
        let hottest = plannable_bundles(ctx, node.id)
            .filter(|(name, d)| d.topics >= 2 && !asked.contains(name.as_str()))
            .map(|(name, d)| {
                let t = cost_model::bundle_traffic(&d.short_term_data);
                (name, t, points(node, &node.model.cost, &t, -1.0))
            })
            .max_by(|a, b| a.2.total_cmp(&b.2));
        let Some((name, t, own)) = hottest else {
            continue;
        };
        // Cheap first: most bundles are far narrower than the band, and candidates cost a pass over brokers.
        if own <= width {
            continue;
        }
        let cands = pctx.candidates(name);
        let (fits, least) = cands
            .filtered
            .iter()
            .filter(|d| **d != src)
            .map(|d| {
                // By the destination's costs and by the source's, whichever is less: a split cannot be undone,
                // so it is made only when the bundle fits by neither (a broker with few bundles may have
                // learned a cost far off).
                let dst = &nodes[*d];
                let p = points(dst, &dst.model.cost, &t, 1.0).min(points(
                    dst,
                    &node.model.cost,
                    &t,
                    1.0,
                ));
                (scores[*d] + p, p)
            })
            .fold((f64::INFINITY, f64::INFINITY), |(f, l), (a, b)| {
                (f.min(a), l.min(b))
            });
        if fits <= top || least <= width {
            continue;
        }
        asks.push((
            name.as_str(),
            node.id,
            format!(
                "BandShedder: too hot for any broker: {} points of {} on {} (band top {}), and the least any other broker would score with it is {}",
                num(own),
                num(scores[src]),
                node.id,
                num(top),
                if fits.is_finite() { num(fits) } else { "none: no other broker may take it".into() }
            ),
        ));
    }
    if asks.is_empty() {
        return Vec::new();
    }
    split::plan_requested_splits(
        ctx.load,
        ctx.settings,
        ctx.policies,
        &Default::default(),
        &asks,
    )
    .splits
    .into_iter()
    // Boundaries from the bundle's range only: a topic-based algorithm needs the owner's topics, and the owner
    // refuses a bundle under its split thresholds, which a bundle too hot for any broker may well be.
    .filter(|d| d.unload_children && !d.boundaries.is_empty())
    .collect()
}

/// The bundles of `broker` a cycle may move or split: [`sheddable_bundles`] outside
/// `loadBalancerSheddingExcludedNamespaces`.
fn plannable_bundles<'a>(
    ctx: &SheddingContext<'a>,
    broker: &str,
) -> impl Iterator<Item = (&'a String, &'a crate::model::BundleData)> + 'a {
    let excluded = &ctx.settings.load_balancer_shedding_excluded_namespaces;
    sheddable_bundles(ctx.load, broker)
        .into_iter()
        .filter(move |(name, _)| excluded.is_empty() || !excluded.contains(namespace_of(name)))
}

/// The move of `item`, `nodes[src]`'s item `k`, to `dst`, with its benefit (the fall of Σ (score − m)²), or `None` when
/// it would leave the destination above the source or above the plan band's top `m + plan_spread/2` (a
/// destination overshot with fresh bundles could not shed them again within the grace period).
fn weigh<'a>(
    nodes: &[Node<'a>],
    item: &Item<'a>,
    sc: &[f64],
    m: f64,
    plan_spread: f64,
    (src, k, dst): (usize, usize, usize),
) -> Option<Weighed<'a>> {
    let src_p = cost_model::shifted(&nodes[src].p, &nodes[src].model.cost, &item.traffic, -1.0);
    let dst_p = cost_model::shifted(&nodes[dst].p, &nodes[dst].model.cost, &item.traffic, 1.0);
    let (s1, d1) = (cost_model::score(&src_p), cost_model::score(&dst_p));
    if d1 > s1 || d1 > m + plan_spread / 2.0 {
        return None;
    }
    let sq = |v: f64| (v - m) * (v - m);
    Some(Weighed {
        bundle: item.bundle,
        src,
        item: k,
        dst,
        gain: sq(sc[src]) + sq(sc[dst]) - sq(s1) - sq(d1),
        src_after: s1,
        dst_after: d1,
    })
}

mod learn;
mod limits;
mod restarts;
#[cfg(test)]
mod tests;
