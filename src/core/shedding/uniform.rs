//! UniformLoadShedder (PR #12902; thresholds PR #13915; per-pass cap PR #16409).
//!
//! Over brokers in id order it finds the highest and lowest message rate (`msgRateIn + msgRateOut` of the
//! report) and, independently, the highest and lowest throughput; strict comparisons keep the first broker on
//! ties, maxima start at −1 and minima at `Integer.MAX_VALUE`. A minimum within 1e-6 of 0 counts as 1.0.
//!
//! * Rate trigger: `loadBalancerMsgRateDifferenceShedderThreshold > 0` and `(max − min) × 100 / min` above it.
//! * Throughput trigger: `loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold > 0` and `max / min`
//!   above it.
//!
//! When the rate trigger fires, only the max-rate broker sheds (the throughput trigger is then ignored):
//! budget `(int)((max − min) × maxUnloadPercentage)`, acting only when that broker has more than one bundle and
//! the budget is at least `minUnloadMessage`. Its bundles go by short-term rate descending (ties by name); a
//! bundle is taken when it fits in the budget, and the budget then drops by the bundle's rate truncated to an
//! integer. **Kept quirk:** Java's budgets are `int` (`MutableInt.add(Number)` subtracts `intValue()`), so the
//! arithmetic is integer and saturates at 2^31 − 1. Otherwise the throughput trigger does the same with
//! throughput and `minUnloadMessageThroughput`. At most `maxUnloadBundleNumPerShedding` bundles (−1 = no cap).
//!
//! **Fixed:** bundles with no traffic in the chosen dimension are not taken (moving them changes nothing; this is
//! PR #21214 and Pulsar's `UniformLoadShedderTest.testFilterOutNonTrafficBundlesForUnloading`).

use super::{
    mib, sheddable_bundles, short_rate, short_tp, Candidate, Shedder, SheddingContext,
    SheddingOutcome,
};
use crate::config::ShedderKind;
use crate::core::num;
use crate::core::plan::Skipped;

const EPS: f64 = 1e-6;

/// UniformLoadShedder (stateless).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UniformLoadShedder;

impl Shedder for UniformLoadShedder {
    fn kind(&self) -> ShedderKind {
        ShedderKind::UniformLoadShedder
    }

    fn find_bundles(&mut self, ctx: &SheddingContext<'_>) -> SheddingOutcome {
        let s = ctx.settings;
        let mut out = SheddingOutcome::default();
        let (mut max_rate, mut max_tp) = (-1.0f64, -1.0f64);
        let (mut min_rate, mut min_tp) = (i32::MAX as f64, i32::MAX as f64);
        let (mut max_rate_b, mut max_tp_b, mut min_rate_b, mut min_tp_b) = (None, None, None, None);
        for (id, e) in ctx.load.brokers() {
            let rate = e.local.total_msg_rate();
            let tp = e.local.total_msg_throughput();
            if rate > max_rate {
                max_rate = rate;
                max_rate_b = Some(id);
            }
            if tp > max_tp {
                max_tp = tp;
                max_tp_b = Some(id);
            }
            if rate < min_rate {
                min_rate = rate;
                min_rate_b = Some(id);
            }
            if tp < min_tp {
                min_tp = tp;
                min_tp_b = Some(id);
            }
        }
        let (Some(max_rate_b), Some(max_tp_b), Some(min_rate_b), Some(min_tp_b)) =
            (max_rate_b, max_tp_b, min_rate_b, min_tp_b)
        else {
            out.skipped.push(Skipped::new(
                "cluster",
                "UniformLoadShedder: no unload: no brokers",
            ));
            return out;
        };
        if min_rate.abs() <= EPS {
            min_rate = 1.0;
        }
        if min_tp.abs() <= EPS {
            min_tp = 1.0;
        }
        let rate_diff = (max_rate - min_rate) * 100.0 / min_rate;
        let tp_ratio = max_tp / min_tp;
        let rate_limit = s.load_balancer_msg_rate_difference_shedder_threshold;
        let tp_limit = s.load_balancer_msg_throughput_multiplier_difference_shedder_threshold;
        let rate_exceeded = rate_limit > 0.0 && rate_diff > rate_limit;
        let tp_exceeded = tp_limit > 0.0 && tp_ratio > tp_limit;
        if !rate_exceeded && !tp_exceeded {
            out.skipped.push(Skipped::new(
                format!("{max_rate_b} -> {min_rate_b}"),
                format!(
                    "UniformLoadShedder: no unload: msg rate difference {}% <= {}% and throughput ratio {} <= {}",
                    num(rate_diff),
                    num(rate_limit),
                    num(tp_ratio),
                    num(tp_limit)
                ),
            ));
            return out;
        }
        let pct = s.max_unload_percentage;
        let (broker, under, by_rate, mut budget, minimum, head) = if rate_exceeded {
            let budget = ((max_rate - min_rate) * pct) as i32;
            let head = format!(
                "UniformLoadShedder: msg rate {max_rate_b} {} vs {min_rate_b} {}, difference {}% > {}%; move up to {budget} msg/s",
                num(max_rate),
                num(min_rate),
                num(rate_diff),
                num(rate_limit)
            );
            (
                max_rate_b,
                min_rate_b,
                true,
                budget,
                s.min_unload_message,
                head,
            )
        } else {
            let budget = ((max_tp - min_tp) * pct) as i32;
            let head = format!(
                "UniformLoadShedder: throughput {max_tp_b} {} vs {min_tp_b} {}, ratio {} > {}; move up to {budget} B/s",
                mib(max_tp),
                mib(min_tp),
                num(tp_ratio),
                num(tp_limit)
            );
            (
                max_tp_b,
                min_tp_b,
                false,
                budget,
                s.min_unload_message_throughput,
                head,
            )
        };
        let bundles_of = ctx.load.broker(broker).map_or(0, |e| e.local.bundles.len());
        if bundles_of <= 1 || budget < minimum {
            let why = if bundles_of <= 1 {
                format!("{broker} has {bundles_of} bundle(s)")
            } else {
                format!("budget {budget} < minimum {minimum}")
            };
            out.skipped.push(Skipped::new(
                format!("{broker} -> {under}"),
                format!("no unload: {head}; {why}"),
            ));
            return out;
        }
        let mut bundles: Vec<(String, f64)> = sheddable_bundles(ctx.load, broker)
            .into_iter()
            .map(|(b, d)| (b.clone(), if by_rate { short_rate(d) } else { short_tp(d) }))
            .collect();
        bundles.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let cap = s.max_unload_bundle_num_per_shedding;
        for (bundle, traffic) in bundles {
            if cap != -1 && out.candidates.len() >= cap.max(0) as usize {
                break;
            }
            if traffic > 0.0 && traffic <= budget as f64 {
                // MutableInt.add(Number): adds the operand's intValue(), i.e. truncates toward zero.
                budget = budget.saturating_add((-traffic) as i32);
                let t = if by_rate {
                    format!("{} msg/s", num(traffic))
                } else {
                    mib(traffic)
                };
                out.candidates.push(Candidate {
                    bundle,
                    source: broker.clone(),
                    planned: None,
                    binding: false,
                    reason: format!("{head}; bundle {t}"),
                });
            }
        }
        if out.candidates.is_empty() {
            out.skipped.push(Skipped::new(
                format!("{broker} -> {under}"),
                format!("no unload: {head}; no bundle fits"),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::core::policies::ClusterPolicies;
    use crate::core::{LoadData, MIB};
    use crate::model::{BundleData, LocalBrokerData};

    fn run(ld: &LoadData, s: &Settings) -> SheddingOutcome {
        let p = ClusterPolicies::none();
        UniformLoadShedder.find_bundles(&SheddingContext {
            load: ld,
            settings: s,
            policies: &p,
            now: 0,
            early: false,
            unreported: &[],
        })
    }

    fn bundle(rate_in: f64, tp_in: f64) -> BundleData {
        let mut d = BundleData::default();
        d.short_term_data.msg_rate_in = rate_in;
        d.short_term_data.msg_rate_out = 0.0;
        d.short_term_data.msg_throughput_in = tp_in;
        d.short_term_data.msg_throughput_out = 0.0;
        d
    }

    fn java_defaults() -> Settings {
        // Pulsar's ServiceConfiguration defaults of the tests (maxUnloadPercentage 0.2).
        let mut s = Settings::default();
        s.max_unload_percentage = 0.2;
        s
    }

    #[test]
    fn max_unload_bundle_num_per_shedding_caps_the_pass() {
        // UniformLoadShedderTest.testMaxUnloadBundleNumPerShedding: 20 bundles of 2 MiB/s, cap 2.
        let mut s = java_defaults();
        s.max_unload_bundle_num_per_shedding = 2;
        let mut ld = LoadData::new();
        let mut b1 = LocalBrokerData::default();
        for i in 1..=20 {
            let n = format!("bundle-{i}");
            let mut d = bundle(0.0, MIB);
            d.short_term_data.msg_throughput_out = MIB;
            ld.set_bundle(&n, d);
            b1.bundles.insert(n);
        }
        b1.msg_throughput_in = 20.0 * MIB;
        b1.msg_throughput_out = 20.0 * MIB;
        ld.insert_broker("broker-1", b1);
        ld.insert_broker("broker2", LocalBrokerData::default());
        let out = run(&ld, &s);
        assert_eq!(out.candidates.len(), 2);
        // testBrokerWithMultipleBundles: without a cap something is shed too.
        s.max_unload_bundle_num_per_shedding = -1;
        assert!(!run(&ld, &s).candidates.is_empty());
    }

    fn five_brokers() -> LoadData {
        // testOverloadBrokerSelect.
        let rates = [50000.0, 60000.0, 70000.0, 10000.0, 20000.0];
        let tps = [50.0, 60.0, 70.0, 80.0, 10.0];
        let mut ld = LoadData::new();
        for (i, (rate, tp)) in rates.iter().zip(tps).enumerate() {
            let mut b = LocalBrokerData {
                msg_rate_in: *rate,
                msg_throughput_in: tp * MIB,
                ..Default::default()
            };
            for j in 0..5 {
                let n = format!("broker-{i}-bundle-{j}");
                ld.set_bundle(&n, bundle(rate / 5.0, tp * MIB / 5.0));
                b.bundles.insert(n);
            }
            ld.insert_broker(&format!("broker{i}"), b);
        }
        ld
    }

    #[test]
    fn overloaded_broker_selection_by_rate_then_throughput() {
        let ld = five_brokers();
        let mut s = java_defaults();
        s.max_unload_bundle_num_per_shedding = 1;
        s.max_unload_percentage = 0.5;
        s.load_balancer_msg_rate_difference_shedder_threshold = 50.0;
        s.load_balancer_msg_throughput_multiplier_difference_shedder_threshold = 0.0;
        let out = run(&ld, &s);
        assert_eq!(out.candidates.len(), 1);
        assert_eq!(out.candidates[0].source, "broker2");
        assert_eq!(
            out.candidates[0].reason,
            "UniformLoadShedder: msg rate broker2 70000.0 vs broker3 10000.0, difference 600.0% > 50.0%; move up to 30000 msg/s; bundle 14000.0 msg/s"
        );
        s.load_balancer_msg_rate_difference_shedder_threshold = 0.0;
        s.load_balancer_msg_throughput_multiplier_difference_shedder_threshold = 2.0;
        let out = run(&ld, &s);
        assert_eq!(out.candidates.len(), 1);
        assert_eq!(out.candidates[0].source, "broker3");
        s.load_balancer_msg_rate_difference_shedder_threshold = 50.0;
        let out = run(&ld, &s);
        assert_eq!(out.candidates[0].source, "broker2", "rate has priority");
    }

    #[test]
    fn bundles_without_traffic_are_not_shed() {
        // testFilterOutNonTrafficBundlesForUnloading.
        let mut s = java_defaults();
        s.max_unload_bundle_num_per_shedding = 5;
        s.max_unload_percentage = 0.5;
        let mut ld = LoadData::new();
        let mut b0 = LocalBrokerData {
            msg_rate_in: 10_000.0,
            msg_throughput_in: 10.0 * MIB,
            ..Default::default()
        };
        b0.bundles.insert("broker-0-bundle-0".into());
        ld.set_bundle("broker-0-bundle-0", bundle(10_000.0, 10.0 * MIB));
        let mut b1 = LocalBrokerData {
            msg_rate_in: 100_000.0,
            msg_throughput_in: 100.0 * MIB,
            ..Default::default()
        };
        let rates = [60_000.0, 20_000.0, 20_000.0, 0.0, 0.0];
        let tps = [60.0, 20.0, 20.0, 0.0, 0.0];
        for i in 0..5 {
            let n = format!("broker-1-bundle-{i}");
            ld.set_bundle(&n, bundle(rates[i], tps[i] * MIB));
            b1.bundles.insert(n);
        }
        ld.insert_broker("broker0", b0);
        ld.insert_broker("broker1", b1);
        s.load_balancer_msg_rate_difference_shedder_threshold = 50.0;
        s.load_balancer_msg_throughput_multiplier_difference_shedder_threshold = 0.0;
        let names = |out: &SheddingOutcome| {
            out.candidates
                .iter()
                .map(|c| c.bundle.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&run(&ld, &s)),
            ["broker-1-bundle-1", "broker-1-bundle-2"]
        );
        s.load_balancer_msg_rate_difference_shedder_threshold = 0.0;
        s.load_balancer_msg_throughput_multiplier_difference_shedder_threshold = 2.0;
        assert_eq!(
            names(&run(&ld, &s)),
            ["broker-1-bundle-1", "broker-1-bundle-2"]
        );
    }

    #[test]
    fn integer_budget_truncates_each_bundle() {
        // Budget (int)(3000 × 0.5) = 1500; bundles of 700.9: 1500 − 700 = 800 ≥ 700.9 → second taken too
        // (exact arithmetic would leave 98.2 after two and agree; a third 99.5 bundle distinguishes: integer
        // budget 100 takes it, exact 98.2 would not).
        let mut ld = LoadData::new();
        let mut b1 = LocalBrokerData {
            msg_rate_in: 4000.0,
            ..Default::default()
        };
        for (n, r) in [("a", 700.9), ("b", 700.9), ("c", 99.5)] {
            ld.set_bundle(n, bundle(r, 0.0));
            b1.bundles.insert(n.to_string());
        }
        ld.insert_broker("b1", b1);
        ld.insert_broker(
            "b2",
            LocalBrokerData {
                msg_rate_in: 1000.0,
                ..Default::default()
            },
        );
        let mut s = Settings::default();
        s.min_unload_message = 100;
        let out = run(&ld, &s);
        let names: Vec<&str> = out.candidates.iter().map(|c| c.bundle.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
    }
}
