//! What a unit of traffic costs each broker, learned from the brokers' own reports: BandShedder's model for
//! predicting what a move does to the usage of both brokers, and its placement's model for new bundles.
//!
//! # The model
//!
//! A broker's score is AvgShedder's: the largest of four weighted resource percentages (cpu, direct memory,
//! NIC in, NIC out; the four-weight form `W4`, in points 0–100). Each resource is driven by one kind of traffic
//! ([`Traffic`]): cpu by messages (msg/s in + out), direct memory by bytes (B/s in + out), NIC in by bytes in and
//! NIC out by bytes out. The model is linear: a broker's *cost* of a resource is its weighted percentage above
//! its idle usage divided by its driving traffic, so moving traffic `t` off broker A onto broker B changes A's percentage by
//! `−cost_A × t` and B's by `+cost_B × t`. Two brokers with the same traffic but different hardware have
//! different costs — which is what lets a plan equalise *usage* on a heterogeneous cluster, where AvgShedder and
//! UniformLoadShedder equalise message rates.
//!
//! A broker's usage is `idle + cost × traffic` per resource. The *idle* usage is what the broker reports while it
//! has no traffic of that kind (a new or restarted broker); a broker never seen idle borrows the cluster's
//! median idle usage in absolute terms (idle percentage × capacity, over its own capacity), or 0 when no broker
//! was ever seen idle (BandShedder then reads it off the line through the brokers' samples, [`fitted_idle`],
//! and hands its placement what it learned, [`LearnedCosts`]; placement from the reports alone takes 0).
//! Without the idle term, an empty broker's first bundles would be predicted to cost what they cost on a busy
//! broker *plus* that broker's idle share, and plans would under-fill new brokers.
//!
//! A broker without traffic of a kind (a new or empty broker) has no cost of its own for it: it gets the median
//! *absolute* cost of the brokers that have one (cost × capacity), divided by its own capacity — the same
//! hardware cost per message on a bigger machine is a smaller percentage.

use crate::model::{LocalBrokerData, ResourceUsage, ResourceWeights, TimeAverageMessageData};

/// Number of modelled resources.
pub const RESOURCES: usize = 4;

/// Resource names, in vector order (for reasons).
pub const RESOURCE_NAMES: [&str; RESOURCES] = ["cpu", "directMemory", "nicIn", "nicOut"];

/// Traffic driving each resource, in vector order: msg/s in + out, B/s in + out, B/s in, B/s out.
pub type Traffic = [f64; RESOURCES];

/// Weighted percentages (points) or per-unit costs (points per unit of the driving traffic), in vector order.
pub type Vector = [f64; RESOURCES];

/// What a strategy learned of one broker at its last shedding cycle, in weighted points: its idle usage and its
/// cost per unit of each driving traffic, both in the broker's own percentages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrokerCosts {
    /// Idle usage per resource, points.
    pub idle: Vector,
    /// Cost per unit of the driving traffic per resource, points per msg/s or per B/s (0: unknown).
    pub cost: Vector,
}

impl BrokerCosts {
    /// The usage this model predicts for `traffic`: `idle + cost × traffic` where the traffic defines a cost
    /// and the cost is known, else `fallback` (the reported usage).
    pub fn usage(&self, traffic: &Traffic, fallback: &Vector) -> Vector {
        std::array::from_fn(|r| {
            if traffic[r] >= MIN_TRAFFIC[r] && self.cost[r] > 0.0 {
                self.idle[r] + self.cost[r] * traffic[r]
            } else {
                fallback[r]
            }
        })
    }
}

/// Per broker id: what the shedding strategy learned at its last cycle (BandShedder hands it to its placement,
/// so that bundles placed between cycles are weighed with the same model as the plans).
pub type LearnedCosts = std::collections::BTreeMap<String, BrokerCosts>;

/// Traffic below this (msg/s or B/s) does not define a cost: the ratio would be mostly idle usage.
pub const MIN_TRAFFIC: [f64; RESOURCES] = [1.0, 1024.0, 1024.0, 1024.0];

/// The traffic vector of a broker report (its broker-level sums).
pub fn broker_traffic(r: &LocalBrokerData) -> Traffic {
    [
        r.msg_rate_in + r.msg_rate_out,
        r.msg_throughput_in + r.msg_throughput_out,
        r.msg_throughput_in,
        r.msg_throughput_out,
    ]
}

/// The traffic vector of a bundle's window (short-term for shedding: what it carries now).
pub fn bundle_traffic(d: &TimeAverageMessageData) -> Traffic {
    [
        d.msg_rate_in + d.msg_rate_out,
        d.msg_throughput_in + d.msg_throughput_out,
        d.msg_throughput_in,
        d.msg_throughput_out,
    ]
}

fn resources(r: &LocalBrokerData) -> [&ResourceUsage; RESOURCES] {
    [&r.cpu, &r.direct_memory, &r.bandwidth_in, &r.bandwidth_out]
}

fn weights(w: &ResourceWeights) -> Vector {
    [w.cpu, w.direct_memory, w.bandwidth_in, w.bandwidth_out]
}

/// A report's weighted percentages, points (a resource with an unknown limit counts 0).
pub fn weighted_percentages(r: &LocalBrokerData, w: &ResourceWeights) -> Vector {
    let w = weights(w);
    let res = resources(r);
    std::array::from_fn(|i| {
        if res[i].limit > 0.0 {
            100.0 * res[i].usage / res[i].limit * w[i]
        } else {
            0.0
        }
    })
}

/// Usage ÷ limit from which a resource counts as saturated.
pub const SATURATED: f64 = 0.98;

/// Which resources a report shows at (or within 2 % of) their limit. A saturated reading says only that the
/// traffic needs at least the whole resource: usage ÷ traffic then understates the cost.
pub fn saturated(r: &LocalBrokerData) -> [bool; RESOURCES] {
    resources(r).map(|u| u.limit > 0.0 && u.usage >= SATURATED * u.limit)
}

/// A report's capacities in vector order (`limit`; ≤ 0 when unknown).
pub fn capacities(r: &LocalBrokerData) -> Vector {
    resources(r).map(|u| u.limit)
}

/// The idle usage a report shows: its weighted percentage for each resource it carries no traffic of, `None`
/// for the others.
pub fn idle_percentages(r: &LocalBrokerData, w: &ResourceWeights) -> [Option<f64>; RESOURCES] {
    let pct = weighted_percentages(r, w);
    let x = broker_traffic(r);
    let cap = capacities(r);
    std::array::from_fn(|i| (x[i] < MIN_TRAFFIC[i] && cap[i] > 0.0).then_some(pct[i]))
}

/// The marginal cost the report itself shows for each resource ((weighted percentage − idle) ÷ traffic), `None`
/// where the traffic is too small to tell or the limit is unknown.
pub fn observed_costs(
    r: &LocalBrokerData,
    w: &ResourceWeights,
    idle: &Vector,
) -> [Option<f64>; RESOURCES] {
    let pct = weighted_percentages(r, w);
    let x = broker_traffic(r);
    let cap = capacities(r);
    std::array::from_fn(|i| {
        (x[i] >= MIN_TRAFFIC[i] && cap[i] > 0.0).then(|| (pct[i] - idle[i]).max(0.0) / x[i])
    })
}

/// The score (points) of a percentage vector: the largest entry.
pub fn score(p: &Vector) -> f64 {
    p.iter().copied().fold(0.0, f64::max)
}

/// `p + k × cost × traffic`, entry by entry (k = −1 removes traffic, +1 adds it).
pub fn shifted(p: &Vector, cost: &Vector, traffic: &Traffic, k: f64) -> Vector {
    std::array::from_fn(|i| p[i] + k * cost[i] * traffic[i])
}

/// Median absolute values (value × capacity) over brokers that have a value of their own, per resource — costs
/// or idle usages; `None` where no broker has one.
pub fn median_absolute<'a>(
    known: impl Iterator<Item = ([Option<f64>; RESOURCES], Vector)> + 'a,
) -> [Option<f64>; RESOURCES] {
    let mut per: [Vec<f64>; RESOURCES] = Default::default();
    for (costs, cap) in known {
        for i in 0..RESOURCES {
            if let Some(c) = costs[i] {
                if cap[i] > 0.0 {
                    per[i].push(c * cap[i]);
                }
            }
        }
    }
    per.map(|mut v| median(&mut v))
}

/// Completes a broker's costs (or idle usages): its own where known, else the median absolute value over its own
/// capacity, else 0.
pub fn complete(
    own: [Option<f64>; RESOURCES],
    capacity: &Vector,
    prior: &[Option<f64>; RESOURCES],
) -> Vector {
    std::array::from_fn(|i| {
        own[i].unwrap_or_else(|| match prior[i] {
            Some(a) if capacity[i] > 0.0 => a / capacity[i],
            _ => 0.0,
        })
    })
}

/// A broker's idle usage: its own where seen, else the cluster's median (see [`complete`]), never above what it
/// uses now (`current`, its weighted percentages).
pub fn idle_usage(
    own: [Option<f64>; RESOURCES],
    capacity: &Vector,
    prior: &[Option<f64>; RESOURCES],
    current: &Vector,
) -> Vector {
    let idle = complete(own, capacity, prior);
    std::array::from_fn(|r| idle[r].min(current[r]))
}

/// Where the least-squares line through `(traffic, usage)` points meets zero traffic: the idle usage those points
/// show, in the points' own usage unit (BandShedder passes one point per broker in absolute terms, percentage
/// × capacity). `None` unless there are two finite points, the largest traffic is at least `1 + span` times
/// the smallest (extrapolating from a narrower range magnifies a point's error too much), usage rises with
/// traffic, and the intercept is at most half the least usage seen: a line that puts most of the lightest
/// broker's usage down to idling explains the points poorly, and would leave that broker a cost of about 0, a
/// destination that seems to take bundles for free. Never negative.
pub fn fitted_idle(points: &[(f64, f64)], span: f64) -> Option<f64> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(t, u)| t.is_finite() && u.is_finite())
        .collect();
    let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = pts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    if pts.len() < 2 || lo <= 0.0 || hi < lo * (1.0 + span) {
        return None;
    }
    let n = pts.len() as f64;
    let mt = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let mu = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let var: f64 = pts.iter().map(|p| (p.0 - mt) * (p.0 - mt)).sum();
    let cov: f64 = pts.iter().map(|p| (p.0 - mt) * (p.1 - mu)).sum();
    let slope = cov / var;
    if !slope.is_finite() || slope <= 0.0 {
        return None;
    }
    let least = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let idle = (mu - slope * mt).max(0.0);
    (idle <= least / 2.0).then_some(idle)
}

/// The median of `v` (sorted in place), `None` when empty.
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_usage_is_where_the_brokers_line_meets_zero_traffic() {
        // usage = 10 + 0.01 × traffic, read at 2 000, 5 000 and 8 000.
        let pts = [(2000.0, 30.0), (5000.0, 60.0), (8000.0, 90.0)];
        assert!((fitted_idle(&pts, 0.2).unwrap() - 10.0).abs() < 1e-9);
        // Too narrow a range to extrapolate from, too few points, usage falling with traffic.
        assert_eq!(fitted_idle(&[(5000.0, 60.0), (5500.0, 65.0)], 0.2), None);
        assert_eq!(fitted_idle(&[(5000.0, 60.0)], 0.2), None);
        assert_eq!(fitted_idle(&[(2000.0, 60.0), (8000.0, 30.0)], 0.2), None);
        // Exactly 20 % is enough.
        assert_eq!(
            fitted_idle(&[(5000.0, 60.0), (6000.0, 70.0)], 0.2),
            Some(10.0)
        );
        // Never negative; a non-finite point is left out.
        assert_eq!(
            fitted_idle(&[(2000.0, 10.0), (4000.0, 30.0)], 0.2),
            Some(0.0)
        );
        assert_eq!(
            fitted_idle(&[(2000.0, 10.0), (f64::NAN, 5.0), (4000.0, 30.0)], 0.2),
            Some(0.0)
        );
        // A line that puts more than half of the lightest usage down to idling explains nothing: 49 of 50.
        assert_eq!(fitted_idle(&[(2000.0, 50.0), (4000.0, 51.0)], 0.2), None);
        assert_eq!(
            fitted_idle(&[(2000.0, 50.0), (4000.0, 75.0)], 0.2),
            Some(25.0)
        );
    }

    #[test]
    fn a_resource_at_its_limit_is_saturated() {
        let mut r = LocalBrokerData {
            cpu: ResourceUsage::new(395.0, 400.0),
            bandwidth_in: ResourceUsage::new(10.0, 100.0),
            ..Default::default()
        };
        assert_eq!(saturated(&r), [true, false, false, false]);
        r.cpu = ResourceUsage::new(380.0, 400.0);
        assert_eq!(saturated(&r), [false; RESOURCES]);
        // An unknown limit saturates nothing.
        r.cpu = ResourceUsage::new(380.0, 0.0);
        assert_eq!(saturated(&r), [false; RESOURCES]);
    }

    fn report(cpu: (f64, f64), nic: f64, rate: f64, tp: f64) -> LocalBrokerData {
        LocalBrokerData {
            cpu: ResourceUsage::new(cpu.0, cpu.1),
            bandwidth_in: ResourceUsage::new(tp * 8.0 / 1000.0, nic),
            bandwidth_out: ResourceUsage::new(tp * 8.0 / 1000.0, nic),
            direct_memory: ResourceUsage::new(0.0, 1000.0),
            msg_rate_in: rate,
            msg_throughput_in: tp,
            msg_throughput_out: tp,
            ..Default::default()
        }
    }

    #[test]
    fn costs_are_percentage_per_unit_and_scale_with_capacity() {
        let w = ResourceWeights::default();
        // 400 % of 800 % cpu for 10 000 msg/s: 50 points, 0.005 points per msg/s.
        let small = report((400.0, 800.0), 10_000_000.0, 10_000.0, 1e6);
        let c = observed_costs(&small, &w, &[0.0; RESOURCES]);
        assert!((c[0].unwrap() - 0.005).abs() < 1e-12);
        // An idle broker twice the size gets half the percentage cost for the same hardware cost.
        let big_idle = report((10.0, 1600.0), 20_000_000.0, 0.0, 0.0);
        let own = observed_costs(&big_idle, &w, &[0.0; RESOURCES]);
        assert_eq!(own[0], None);
        let prior = median_absolute([(c, capacities(&small))].into_iter());
        let full = complete(own, &capacities(&big_idle), &prior);
        assert!((full[0] - 0.0025).abs() < 1e-12, "{full:?}");
        assert!((full[2] - c[2].unwrap() / 2.0).abs() < 1e-15);
        // Its idle usage: 10 % of one core on 1600 % = 0.625 points; the busy broker's marginal cost without an
        // idle term of the same absolute size (10 % of a core on 800 % = 1.25 points) is (50 − 1.25) / 10 000.
        let idle = idle_percentages(&big_idle, &w);
        assert_eq!(idle[0], Some(0.625));
        let idle_prior = median_absolute([(idle, capacities(&big_idle))].into_iter());
        let small_idle = complete([None; RESOURCES], &capacities(&small), &idle_prior);
        assert!((small_idle[0] - 1.25).abs() < 1e-12);
        let marginal = observed_costs(&small, &w, &small_idle);
        assert!((marginal[0].unwrap() - 48.75 / 10_000.0).abs() < 1e-12);
    }

    #[test]
    fn shifting_moves_traffic_by_each_brokers_cost() {
        let p = [50.0, 0.0, 10.0, 10.0];
        let cost = [0.005, 0.0, 1e-5, 1e-5];
        let t = [2000.0, 0.0, 1e5, 1e5];
        let down = shifted(&p, &cost, &t, -1.0);
        assert_eq!(down, [40.0, 0.0, 9.0, 9.0]);
        assert_eq!(score(&down), 40.0);
        assert_eq!(median(&mut [3.0, 1.0, 2.0, 10.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }
}
