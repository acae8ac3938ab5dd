//! BandShedder's learning: each broker's idle usage and cost per unit of traffic from its reports (step 1 of
//! the parent module's cycle).

use std::collections::BTreeMap;

use crate::core::cost_model::{self, Traffic, Vector, RESOURCES};
use crate::core::shedding::SheddingContext;
use crate::core::weights4;

/// Relative change of a broker's traffic (from where it last changed) that counts as a change, after which its
/// usage is not sampled for a host-usage window. A smaller step is sampled while usage still lags it: at 60 %
/// usage a 5 % step biases the score by at most 3 points, the margin between a plan's target spread (7) and
/// the trigger (10), so a plan made on such a cost still lands inside the band.
const STEADY: f64 = 0.05;
/// Least relative range of the brokers' traffic (largest ÷ smallest − 1) over which the line through their
/// samples gives the cluster's idle usage. The intercept is extrapolated: over a range of 20 %, an error in
/// the sample at one end moves it by up to five times that error, and over a narrower range by more.
const FIT_SPAN: f64 = 0.2;

/// What a cycle learned of one broker.
#[derive(Debug, Clone, Copy)]
pub(super) struct Learned {
    /// Idle usage per resource, points (its own, else the cluster's).
    pub(super) idle: Vector,
    /// Its own cost per resource (median of its samples), `None` where it has no sample.
    pub(super) costs: [Option<f64>; RESOURCES],
    /// For a resource its last steady report showed saturated: usage ÷ traffic, a lower bound on the cost.
    pub(super) floor: [Option<f64>; RESOURCES],
}

/// The traffic of the last report of a broker a cycle saw.
#[derive(Debug, Clone, Copy)]
struct TrafficSeen {
    /// Its `lastUpdate`, epoch ms.
    at: i64,
    /// Per resource: the traffic as of its latest change of more than [`STEADY`] (so that small steps add up).
    traffic: Traffic,
    /// Per resource: the `lastUpdate` of the first report that showed that change, the latest instant the
    /// traffic can have changed at (`None`: no change seen, as for the first report a leader sees).
    changed: [Option<i64>; RESOURCES],
}

/// Cost samples kept per broker (the median of these is its cost).
pub const COST_SAMPLES: usize = 5;

/// What BandShedder learned of each broker from its reports.
#[derive(Debug, Clone, Default)]
pub(super) struct Learner {
    /// Per broker and resource: the last cost samples, oldest first, as (traffic, absolute usage: weighted
    /// percentage × capacity).
    samples: BTreeMap<String, [Vec<(f64, f64)>; RESOURCES]>,
    /// Per broker: its idle usage per resource, from the last report that carried no traffic of that kind.
    idle: BTreeMap<String, [Option<f64>; RESOURCES]>,
    /// Per broker and resource: the last steady report that showed the resource saturated, as (traffic, absolute
    /// usage): a lower bound on its cost.
    saturated: BTreeMap<String, [Option<(f64, f64)>; RESOURCES]>,
    /// Per resource: the cluster's idle usage, absolute, as the line through the brokers' samples last showed it
    /// (kept while a cycle's samples do not give a line, so that costs do not jump with it).
    idle_line: [Option<f64>; RESOURCES],
    /// Per broker: the last report a cycle saw, and when its traffic last changed.
    last_traffic: BTreeMap<String, TrafficSeen>,
}

impl Learner {
    /// The broker's current cost samples of one resource (oldest first) as (traffic, absolute usage).
    pub(super) fn cost_samples(&self, broker: &str, resource: usize) -> &[(f64, f64)] {
        self.samples
            .get(broker)
            .map_or(&[][..], |s| s[resource].as_slice())
    }

    /// Forgets the brokers not in `active`.
    pub(super) fn retain(&mut self, active: &std::collections::BTreeSet<String>) {
        self.samples.retain(|b, _| active.contains(b));
        self.last_traffic.retain(|b, _| active.contains(b));
        self.idle.retain(|b, _| active.contains(b));
        self.saturated.retain(|b, _| active.contains(b));
    }

    /// Learns idle usages and costs from the reports; returns each broker's completed idle usage, its own costs
    /// (`None` where it has none) and, for a resource its last steady report showed saturated, the least cost
    /// that report allows (usage ÷ traffic understates it).
    pub(super) fn learn(&mut self, ctx: &SheddingContext<'_>) -> BTreeMap<String, Learned> {
        let w = weights4(ctx.settings);
        let window_ms = ctx.settings.host_usage_interval().as_millis() as i64;
        for (id, e) in ctx.load.brokers() {
            let seen = cost_model::idle_percentages(&e.local, &w);
            let idle = self.idle.entry(id.clone()).or_insert([None; RESOURCES]);
            for r in 0..RESOURCES {
                if seen[r].is_some() {
                    idle[r] = seen[r];
                }
            }
        }
        // First every broker's samples, then the costs: a broker that has no idle usage of its own borrows the
        // others'.
        for (id, e) in ctx.load.brokers() {
            let raw = cost_model::weighted_percentages(&e.local, &w);
            let cap = cost_model::capacities(&e.local);
            let x = cost_model::broker_traffic(&e.local);
            let full = cost_model::saturated(&e.local);
            // Host usage is averaged over `loadBalancerHostUsageCheckIntervalMinutes`, and a broker rewrites its
            // report only when its usage moved by `loadBalancerReportUpdateThresholdPercentage`: a report written
            // less than a window after its traffic changed shows usage that still lags the change, and it may
            // stand for many cycles. Sampling it would teach a cost the broker does not have (after a plan the
            // sources would look costlier and the destinations cheaper than they are). Reports are sparse, so
            // the change may have happened just before the first report that shows it: a resource is sampled
            // only from a report written at least a window after that first report, with the same traffic; it is
            // sampled at every regular cycle while it stands, so one spike weighs no more than one cycle. The
            // first report a leader sees counts as settled: nothing says its traffic just changed, and it is all
            // there is to learn from (a new leader, a cluster that starts steady).
            let seen = match self.last_traffic.get(id) {
                Some(t) if t.at == e.local.last_update => *t,
                Some(t) => {
                    let moved: [bool; RESOURCES] =
                        std::array::from_fn(|r| (x[r] - t.traffic[r]).abs() > STEADY * x[r]);
                    TrafficSeen {
                        at: e.local.last_update,
                        traffic: std::array::from_fn(
                            |r| if moved[r] { x[r] } else { t.traffic[r] },
                        ),
                        changed: std::array::from_fn(|r| {
                            if moved[r] {
                                Some(e.local.last_update)
                            } else {
                                t.changed[r]
                            }
                        }),
                    }
                }
                None => TrafficSeen {
                    at: e.local.last_update,
                    traffic: x,
                    changed: [None; RESOURCES],
                },
            };
            self.last_traffic.insert(id.clone(), seen);
            let hist = self.samples.entry(id.clone()).or_default();
            let saturated = self
                .saturated
                .entry(id.clone())
                .or_insert([None; RESOURCES]);
            for r in 0..RESOURCES {
                if x[r] < cost_model::MIN_TRAFFIC[r] || cap[r] <= 0.0 {
                    // A broker whose traffic of this kind stopped has no current cost.
                    hist[r].clear();
                    saturated[r] = None;
                    continue;
                }
                // Host usage is averaged over time while traffic is current: right after traffic changes the
                // ratio is off.
                let steady = seen.changed[r].map_or(true, |c| seen.at - c >= window_ms);
                // Samples are counted in regular cycles: an early cycle must not give a standing report more
                // weight. A saturated resource shows less usage than its traffic needs.
                if steady && !ctx.early && full[r] {
                    saturated[r] = Some((x[r], raw[r] * cap[r]));
                }
                if steady && !ctx.early && !full[r] {
                    saturated[r] = None;
                    // Absolute, so that a capacity change does not mix units.
                    hist[r].push((x[r], raw[r] * cap[r]));
                    if hist[r].len() > COST_SAMPLES {
                        hist[r].remove(0);
                    }
                }
            }
        }
        let own_idle = |id: &str| -> [Option<f64>; RESOURCES] {
            self.idle.get(id).copied().unwrap_or([None; RESOURCES])
        };
        let mut idle_prior = cost_model::median_absolute(
            ctx.load
                .brokers()
                .map(|(id, e)| (own_idle(id), cost_model::capacities(&e.local))),
        );
        // No broker has been seen without traffic (every broker had bundles from the start): the line through
        // the brokers' latest samples as (traffic, absolute usage) gives the cluster's idle usage, as brokers
        // running the same software spend about the same absolute idle usage and cost per unit of traffic. An
        // idle usage of 0 would fold it into the cost, and every move would be predicted to do more than it
        // does (a 4-core broker idling at 10 % and using 80 % in all: by 14 %).
        for (r, prior) in idle_prior.iter_mut().enumerate() {
            if prior.is_none() {
                // Each broker's latest sample: taken from a steady, unsaturated report.
                let points: Vec<(f64, f64)> = ctx
                    .load
                    .brokers()
                    .filter_map(|(id, _)| self.samples.get(id.as_str())?[r].last().copied())
                    .collect();
                if let Some(i) = cost_model::fitted_idle(&points, FIT_SPAN) {
                    self.idle_line[r] = Some(i);
                }
                *prior = self.idle_line[r];
            }
        }
        let mut out = BTreeMap::new();
        for (id, e) in ctx.load.brokers() {
            let cap = cost_model::capacities(&e.local);
            let raw = cost_model::weighted_percentages(&e.local, &w);
            let idle = cost_model::idle_usage(own_idle(id), &cap, &idle_prior, &raw);
            let hist = self.samples.get(id.as_str());
            let costs = std::array::from_fn(|r| {
                if cap[r] <= 0.0 {
                    return None;
                }
                let mut c: Vec<f64> = hist
                    .map(|h| h[r].as_slice())
                    .unwrap_or(&[])
                    .iter()
                    .map(|(t, u)| (u / cap[r] - idle[r]).max(0.0) / t)
                    .collect();
                cost_model::median(&mut c)
            });
            let saturated = self.saturated.get(id.as_str());
            let floor = std::array::from_fn(|r| {
                let (t, u) = saturated?[r]?;
                (cap[r] > 0.0).then(|| (u / cap[r] - idle[r]).max(0.0) / t)
            });
            out.insert(id.clone(), Learned { idle, costs, floor });
        }
        out
    }
}
