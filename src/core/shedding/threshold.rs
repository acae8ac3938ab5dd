//! ThresholdShedder (PR #6772, PIP-122; Pulsar's default 2.10–4.x), with `lowerBoundarySheddingEnabled`
//! (PR #17456).
//!
//! * Usage per broker: `W(b)` (five-weight form, configured weights), as is — also above 1.0 (a broker at
//!   140 % CPU counts as 140 %). Pulsar 2.10.3/2.11.0 reverted (PR #18645, after issue #18598) the
//!   "within limit" recomputation of PR #16937 that ignored components above 100 %; the current
//!   `updateAvgResourceUsage` feeds the raw weighted max into the moving average.
//! * Moving average per broker, on this strategy instance: first sample as is, then
//!   `ema·h + (1 − h)·W` with `h = loadBalancerHistoryResourcePercentage` (0.9). One update per broker per pass.
//! * `avg` = mean EMA. `avg == 0` → nothing. A broker with `ema >= avg + t` (t =
//!   `loadBalancerBrokerThresholdShedderPercentage`/100) should offload `(ema − avg − t + 0.05) × (its tpIn +
//!   tpOut)`; below `loadBalancerBundleUnloadMinThroughputThreshold` MiB/s it is skipped. With more than one
//!   bundle: bundles by short-term throughput descending (ties by name), taken while the marked throughput is
//!   below the target or none is taken yet. One bundle: nothing (HIGH USAGE WARNING in Java).
//! * Lower boundary (only when nothing was selected and the setting is on): the EMAs are advanced a **second**
//!   time in the same pass to recompute `avg` (kept quirk of the Java code); the broker with the largest EMA above
//!   `avg − t` and more than one bundle (first in broker-id order on ties) sheds `tp × t × 0.5`, provided some
//!   broker is below `avg − t` and the amount reaches the minimum throughput.

use std::collections::{BTreeMap, BTreeSet};

use super::{greedy_by_throughput, mib, Candidate, Shedder, SheddingContext, SheddingOutcome};
use crate::config::ShedderKind;
use crate::core::plan::Skipped;
use crate::core::{num, push_num, weighted_usage, MIB};

const ADDITIONAL_THRESHOLD_PERCENT_MARGIN: f64 = 0.05;
const LOWER_BOUNDARY_THRESHOLD_MARGIN: f64 = 0.5;

/// ThresholdShedder with its per-broker moving averages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThresholdShedder {
    ema: BTreeMap<String, f64>,
}

fn pct(v: f64) -> String {
    format!("{}%", num(v * 100.0))
}

impl ThresholdShedder {
    /// A broker's moving average (fraction), if it has one.
    pub fn usage(&self, broker: &str) -> Option<f64> {
        self.ema.get(broker).copied()
    }

    fn update_averages(&mut self, ctx: &SheddingContext<'_>) -> f64 {
        let h = ctx.settings.load_balancer_history_resource_percentage;
        let mut total = 0.0;
        let mut n = 0usize;
        for (id, e) in ctx.load.brokers() {
            let raw = weighted_usage(&e.local, ctx.settings);
            let v = match self.ema.get(id) {
                Some(old) => old * h + (1.0 - h) * raw,
                None => raw,
            };
            self.ema.insert(id.clone(), v);
            total += v;
            n += 1;
        }
        if n > 0 {
            total / n as f64
        } else {
            0.0
        }
    }

    fn select(
        ctx: &SheddingContext<'_>,
        broker: &str,
        need: f64,
        head: &str,
        out: &mut SheddingOutcome,
    ) {
        let chosen = greedy_by_throughput(ctx.load, broker, need);
        if chosen.is_empty() {
            out.skipped.push(Skipped::new(
                broker,
                format!("no unload: {head}; no sheddable bundle"),
            ));
        }
        for (bundle, tp) in chosen {
            let mut reason = String::with_capacity(head.len() + 32);
            reason.push_str(head);
            reason.push_str("; bundle ");
            push_num(&mut reason, tp / MIB);
            reason.push_str(" MiB/s");
            out.candidates.push(Candidate {
                bundle,
                source: broker.to_owned(),
                planned: None,
                binding: false,
                reason,
            });
        }
    }
}

impl Shedder for ThresholdShedder {
    fn kind(&self) -> ShedderKind {
        ShedderKind::ThresholdShedder
    }

    fn find_bundles(&mut self, ctx: &SheddingContext<'_>) -> SheddingOutcome {
        let s = ctx.settings;
        let mut out = SheddingOutcome::default();
        let t = s.load_balancer_broker_threshold_shedder_percentage as f64 / 100.0;
        let min_tp = s.load_balancer_bundle_unload_min_throughput_threshold * MIB;
        let avg = self.update_averages(ctx);
        if avg == 0.0 {
            out.skipped.push(Skipped::new(
                "cluster",
                "ThresholdShedder: no unload: average usage is 0",
            ));
            return out;
        }
        for (id, e) in ctx.load.brokers() {
            let usage = self.ema.get(id).copied().unwrap_or(0.0);
            if usage < avg + t {
                out.skipped.push(Skipped::new(
                    id.clone(),
                    format!(
                        "ThresholdShedder: no unload: usage {} < avg {} + {}",
                        pct(usage),
                        pct(avg),
                        pct(t)
                    ),
                ));
                continue;
            }
            let share = usage - avg - t + ADDITIONAL_THRESHOLD_PERCENT_MARGIN;
            let tp = e.local.total_msg_throughput();
            let need = tp * share;
            let head = format!(
                "ThresholdShedder: {id} usage {} >= avg {} + {}; offload {} of {} = {}",
                pct(usage),
                pct(avg),
                pct(t),
                pct(share),
                mib(tp),
                mib(need)
            );
            if need < min_tp {
                out.skipped.push(Skipped::new(
                    id.clone(),
                    format!("no unload: {head} < minimum {}", mib(min_tp)),
                ));
                continue;
            }
            match e.local.bundles.len() {
                0 => out.skipped.push(Skipped::new(
                    id.clone(),
                    format!("no unload: {head}; broker has no bundles"),
                )),
                1 => out.skipped.push(Skipped::new(
                    id.clone(),
                    format!("no unload: {head}; sole bundle is overloading the broker"),
                )),
                _ => Self::select(ctx, id, need, &head, &mut out),
            }
        }
        if out.candidates.is_empty() && s.lower_boundary_shedding_enabled {
            self.lower_boundary(ctx, t, min_tp, &mut out);
        }
        out
    }

    fn on_active_brokers_change(&mut self, active: &BTreeSet<String>, _now: i64) {
        self.ema.retain(|b, _| active.contains(b));
    }
}

impl ThresholdShedder {
    fn lower_boundary(
        &mut self,
        ctx: &SheddingContext<'_>,
        t: f64,
        min_tp: f64,
        out: &mut SheddingOutcome,
    ) {
        let avg = self.update_averages(ctx);
        let bar = avg - t;
        let mut max_usage = bar;
        let mut max_broker: Option<&String> = None;
        let mut below = None;
        for (id, e) in ctx.load.brokers() {
            let usage = self.ema.get(id).copied().unwrap_or(0.0);
            if usage > max_usage && e.local.bundles.len() > 1 {
                max_usage = usage;
                max_broker = Some(id);
            }
            if usage < bar && below.is_none() {
                below = Some((id.clone(), usage));
            }
        }
        let Some(broker) = max_broker else {
            out.skipped.push(Skipped::new(
                "cluster",
                format!(
                    "ThresholdShedder lower boundary: no unload: no broker above avg {} − {} with more than one bundle",
                    pct(avg),
                    pct(t)
                ),
            ));
            return;
        };
        let Some((low, low_usage)) = below else {
            out.skipped.push(Skipped::new(
                "cluster",
                format!(
                    "ThresholdShedder lower boundary: no unload: no broker below avg {} − {}",
                    pct(avg),
                    pct(t)
                ),
            ));
            return;
        };
        let tp = ctx
            .load
            .broker(broker)
            .map_or(0.0, |e| e.local.total_msg_throughput());
        let need = tp * t * LOWER_BOUNDARY_THRESHOLD_MARGIN;
        let head = format!(
            "ThresholdShedder lower boundary: {low} usage {} < avg {} − {}; most loaded {broker} usage {}; offload {} × {} × 0.5 = {}",
            pct(low_usage),
            pct(avg),
            pct(t),
            pct(max_usage),
            mib(tp),
            pct(t),
            mib(need)
        );
        if min_tp > need {
            out.skipped.push(Skipped::new(
                broker.clone(),
                format!("no unload: {head} < minimum {}", mib(min_tp)),
            ));
            return;
        }
        Self::select(ctx, broker, need, &head, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::core::policies::ClusterPolicies;
    use crate::core::LoadData;
    use crate::model::{BundleData, LocalBrokerData, ResourceUsage};

    fn run(sh: &mut ThresholdShedder, ld: &LoadData, s: &Settings) -> SheddingOutcome {
        let p = ClusterPolicies::none();
        sh.find_bundles(&SheddingContext {
            load: ld,
            settings: s,
            policies: &p,
            now: 0,
            early: false,
            unreported: &[],
        })
    }

    fn tp_bundle(tp: f64) -> BundleData {
        let mut d = BundleData::default();
        d.short_term_data.msg_throughput_in = tp;
        d.short_term_data.msg_throughput_out = tp;
        d
    }

    fn names(out: &SheddingOutcome) -> Vec<&str> {
        out.candidates.iter().map(|c| c.bundle.as_str()).collect()
    }

    /// ThresholdShedderTest's multi-bundle fixture: broker-1 at 99.9 % NIC with bundles of i MiB/s each way,
    /// broker2 idle with the same data under other names.
    fn multi() -> LoadData {
        let mut ld = LoadData::new();
        let mut b1 = LocalBrokerData {
            bandwidth_in: ResourceUsage::new(999.0, 1000.0),
            bandwidth_out: ResourceUsage::new(999.0, 1000.0),
            ..Default::default()
        };
        let mut b2 = LocalBrokerData::default();
        let mut total = 0.0;
        for i in 1..=10 {
            let tp = i as f64 * MIB;
            b1.bundles.insert(format!("bundle-{i}"));
            ld.set_bundle(&format!("bundle-{i}"), tp_bundle(tp));
            let other = format!("broker2-bundle-{}", 10 + i);
            ld.set_bundle(&other, tp_bundle(tp));
            b2.bundles.insert(other);
            total += tp;
        }
        b1.msg_throughput_in = total;
        b1.msg_throughput_out = total;
        ld.insert_broker("broker-1", b1);
        ld.insert_broker("broker2", b2);
        ld
    }

    #[test]
    fn no_brokers_no_bundles_single_bundle() {
        let s = Settings::default();
        assert!(run(&mut ThresholdShedder::default(), &LoadData::new(), &s)
            .candidates
            .is_empty());
        let mut ld = LoadData::new();
        let b = LocalBrokerData {
            bandwidth_in: ResourceUsage::new(999.0, 1000.0),
            bandwidth_out: ResourceUsage::new(999.0, 1000.0),
            bundles: ["bundle-1".to_string()].into(),
            ..Default::default()
        };
        ld.insert_broker(
            "broker-1",
            LocalBrokerData {
                bundles: Default::default(),
                ..b.clone()
            },
        );
        assert!(run(&mut ThresholdShedder::default(), &ld, &s)
            .candidates
            .is_empty());
        ld.insert_broker("broker-1", b);
        ld.set_bundle("bundle-1", tp_bundle(1000.0));
        assert!(run(&mut ThresholdShedder::default(), &ld, &s)
            .candidates
            .is_empty());
    }

    #[test]
    fn multiple_bundles_shed_largest_first_until_the_target() {
        let out = run(
            &mut ThresholdShedder::default(),
            &multi(),
            &Settings::default(),
        );
        assert_eq!(names(&out), ["bundle-10", "bundle-9", "bundle-8"]);
        assert!(out.candidates.iter().all(|c| c.source == "broker-1"));
        assert_eq!(
            out.candidates[0].reason,
            "ThresholdShedder: broker-1 usage 99.9% >= avg 49.95% + 10.0%; offload 44.95% of 110.0 MiB/s = 49.445 MiB/s; bundle 20.0 MiB/s"
        );
    }

    #[test]
    fn recently_unloaded_bundles_are_skipped() {
        let mut ld = multi();
        ld.record_unload("bundle-10", 1);
        ld.record_unload("bundle-9", 1);
        let out = run(&mut ThresholdShedder::default(), &ld, &Settings::default());
        assert_eq!(
            names(&out),
            ["bundle-8", "bundle-7", "bundle-6", "bundle-5"]
        );
    }

    /// 11 brokers: ten at 80 % NIC with ten 100 MiB/s bundles, one idle (`low`); `one_bundle` brokers get a
    /// single bundle except `many`.
    fn eleven(low: usize, usage: f64, one_bundle_except: Option<usize>) -> LoadData {
        let mut ld = LoadData::new();
        let tp = 100.0 * MIB;
        for i in 0..11 {
            let is_low = i == low;
            let n = match one_bundle_except {
                Some(m) if m != i => 1,
                _ => 10,
            };
            let mut b = LocalBrokerData {
                bandwidth_in: ResourceUsage::new(if is_low { 0.0 } else { usage }, 100.0),
                bandwidth_out: ResourceUsage::new(if is_low { 0.0 } else { usage }, 100.0),
                msg_throughput_in: if is_low { 0.0 } else { tp },
                msg_throughput_out: if is_low { 0.0 } else { tp },
                ..Default::default()
            };
            for j in 0..n {
                let name = format!("broker-{i}-bundle-{j}");
                ld.set_bundle(&name, tp_bundle(if is_low { 0.0 } else { tp }));
                b.bundles.insert(name);
            }
            ld.insert_broker(&format!("broker-{i}"), b);
        }
        ld
    }

    #[test]
    fn the_documented_example_needs_lower_boundary_shedding() {
        // defaults-5.0.md / ThresholdShedderTest.testLowerBoundaryShedding: 10 brokers at 80 %, one at 0 %:
        // average 72.73 %, trigger 82.73 % — nothing; with lower-boundary shedding the most loaded broker sheds.
        let ld = eleven(10, 80.0, None);
        let mut s = Settings::default();
        let out = run(&mut ThresholdShedder::default(), &ld, &s);
        assert!(out.candidates.is_empty());
        assert!(
            out.skipped.iter().any(|k| k.subject == "broker-0"
                && k.reason.contains("usage 80.0% < avg 72.7273% + 10.0%")),
            "{:?}",
            out.skipped
        );
        s.lower_boundary_shedding_enabled = true;
        let out = run(&mut ThresholdShedder::default(), &ld, &s);
        // broker-0 is the first of the equally loaded brokers in id order; 200 MiB/s × 10 % × 0.5 = 10 MiB/s,
        // exactly the minimum, so one 200 MiB/s bundle is enough.
        assert_eq!(names(&out), ["broker-0-bundle-0"]);
        assert!(out.candidates[0].reason.starts_with(
            "ThresholdShedder lower boundary: broker-10 usage 0.0% < avg 72.7273% − 10.0%; most loaded broker-0 usage 80.0%"
        ), "{}", out.candidates[0].reason);
    }

    #[test]
    fn lower_boundary_needs_an_idle_broker_and_more_than_one_bundle() {
        let mut s = Settings::default();
        s.lower_boundary_shedding_enabled = true;
        // testLowerBoundarySheddingNoBrokerToOffload: everyone at 80 %.
        let all = eleven(99, 80.0, None);
        let out = run(&mut ThresholdShedder::default(), &all, &s);
        assert!(out.candidates.is_empty());
        assert!(out
            .skipped
            .iter()
            .any(|k| k.reason.contains("no broker below avg")));
        // testLowerBoundarySheddingBrokerWithOneBundle: only broker-3 has several bundles.
        let ld = eleven(5, 80.0, Some(3));
        let out = run(&mut ThresholdShedder::default(), &ld, &s);
        assert_eq!(out.candidates.len(), 1);
        assert_eq!(out.candidates[0].source, "broker-3");
    }

    #[test]
    fn usage_above_100_percent_counts_as_is() {
        // Pulsar PR #18645 reverted the "within limit" clamp: broker-1 at 140 % CPU (weight 1) is 140 % loaded
        // and sheds; with the clamp its usage was 0 (NIC idle), the average 0, and nothing happened.
        let mut ld = multi();
        let e = ld.broker_mut("broker-1").unwrap();
        e.local.cpu = ResourceUsage::new(140.0, 100.0);
        e.local.bandwidth_in = ResourceUsage::new(0.0, 1000.0);
        e.local.bandwidth_out = ResourceUsage::new(0.0, 1000.0);
        let mut sh = ThresholdShedder::default();
        let out = run(&mut sh, &ld, &Settings::default());
        assert!((sh.usage("broker-1").unwrap() - 1.4).abs() < 1e-6);
        assert_eq!(
            names(&out),
            ["bundle-10", "bundle-9", "bundle-8", "bundle-7", "bundle-6"]
        );
        assert!(
            out.candidates[0]
                .reason
                .starts_with("ThresholdShedder: broker-1 usage 140.0% >= avg 70.0% + 10.0%"),
            "{}",
            out.candidates[0].reason
        );
    }

    #[test]
    fn moving_average_lags_over_cycles() {
        // Multi-cycle: the EMA moves 10 % of the way per pass (h = 0.9).
        let mut ld = multi();
        let mut sh = ThresholdShedder::default();
        let s = Settings::default();
        run(&mut sh, &ld, &s);
        assert!((sh.usage("broker-1").unwrap() - 0.999).abs() < 1e-6);
        let e = ld.broker_mut("broker-1").unwrap();
        e.local.bandwidth_in = ResourceUsage::new(0.0, 1000.0);
        e.local.bandwidth_out = ResourceUsage::new(0.0, 1000.0);
        let out = run(&mut sh, &ld, &s);
        assert!((sh.usage("broker-1").unwrap() - 0.8991).abs() < 1e-6);
        // 0.8991 is still above (0.8991 + 0) / 2 + 0.1, so the stale average keeps shedding.
        assert!(!out.candidates.is_empty());
        sh.on_active_brokers_change(&["broker2".to_string()].into(), 0);
        assert!(sh.usage("broker-1").is_none());
    }
}
