//! OverloadShedder (the original modular shedder, PR #345; several bundles per broker since PR #1488).
//!
//! A broker whose usage `W(b)` (five-weight form with the configured weights — PIP-358; the Java copy read
//! used the unweighted max) is at least `loadBalancerBrokerOverloadedThresholdPercentage`/100 should offload
//! `(W − threshold + 0.05) × (tpIn + tpOut)`. With more than one bundle, bundles go by short-term throughput
//! descending (ties by name) while the marked throughput is below that or none is taken yet. No minimum
//! throughput, and underloaded brokers play no part. Stateless.

use super::{greedy_by_throughput, mib, Candidate, Shedder, SheddingContext, SheddingOutcome};
use crate::config::ShedderKind;
use crate::core::plan::Skipped;
use crate::core::{num, weighted_usage};

/// OverloadShedder (stateless).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OverloadShedder;

impl Shedder for OverloadShedder {
    fn kind(&self) -> ShedderKind {
        ShedderKind::OverloadShedder
    }

    fn find_bundles(&mut self, ctx: &SheddingContext<'_>) -> SheddingOutcome {
        let mut out = SheddingOutcome::default();
        let threshold = ctx
            .settings
            .load_balancer_broker_overloaded_threshold_percentage as f64
            / 100.0;
        for (id, e) in ctx.load.brokers() {
            let usage = weighted_usage(&e.local, ctx.settings);
            if usage < threshold {
                out.skipped.push(Skipped::new(
                    id.clone(),
                    format!(
                        "OverloadShedder: no unload: usage {}% < overload threshold {}%",
                        num(usage * 100.0),
                        num(threshold * 100.0)
                    ),
                ));
                continue;
            }
            let share = usage - threshold + 0.05;
            let tp = e.local.total_msg_throughput();
            let need = tp * share;
            let head = format!(
                "OverloadShedder: {id} usage {}% >= overload threshold {}%; offload {}% of {} = {}",
                num(usage * 100.0),
                num(threshold * 100.0),
                num(share * 100.0),
                mib(tp),
                mib(need)
            );
            if e.local.bundles.len() <= 1 {
                let why = if e.local.bundles.is_empty() {
                    "broker has no bundles"
                } else {
                    "sole bundle is overloading the broker"
                };
                out.skipped.push(Skipped::new(
                    id.clone(),
                    format!("no unload: {head}; {why}"),
                ));
                continue;
            }
            let chosen = greedy_by_throughput(ctx.load, id, need);
            if chosen.is_empty() {
                out.skipped.push(Skipped::new(
                    id.clone(),
                    format!("no unload: {head}; no sheddable bundle"),
                ));
            }
            for (bundle, btp) in chosen {
                out.candidates.push(Candidate {
                    bundle,
                    source: id.clone(),
                    planned: None,
                    binding: false,
                    reason: format!("{head}; bundle {}", mib(btp)),
                });
            }
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
    use crate::model::{BundleData, LocalBrokerData, ResourceUsage};

    fn run(ld: &LoadData) -> SheddingOutcome {
        let s = Settings::default();
        let p = ClusterPolicies::none();
        OverloadShedder.find_bundles(&SheddingContext {
            load: ld,
            settings: &s,
            policies: &p,
            now: 0,
            early: false,
            unreported: &[],
        })
    }

    fn hot(bundles: &[&str]) -> LocalBrokerData {
        LocalBrokerData {
            bandwidth_in: ResourceUsage::new(999.0, 1000.0),
            bandwidth_out: ResourceUsage::new(999.0, 1000.0),
            bundles: bundles.iter().map(|b| b.to_string()).collect(),
            ..Default::default()
        }
    }

    fn with_bundles(other_broker: bool) -> LoadData {
        let mut ld = LoadData::new();
        let mut b1 = hot(&[]);
        let mut other = LocalBrokerData::default();
        let mut total = 0.0;
        for i in 1..=10 {
            let tp = i as f64 * MIB;
            let mut d = BundleData::default();
            d.short_term_data.msg_throughput_in = tp;
            d.short_term_data.msg_throughput_out = tp;
            b1.bundles.insert(format!("bundle-{i}"));
            ld.set_bundle(&format!("bundle-{i}"), d);
            if other_broker {
                let n = format!("another-broker-bundle-{}", 10 + i);
                ld.set_bundle(&n, d);
                other.bundles.insert(n);
            }
            total += tp;
        }
        b1.msg_throughput_in = total;
        b1.msg_throughput_out = total;
        ld.insert_broker("broker-1", b1);
        if other_broker {
            ld.insert_broker("another-broker", other);
        }
        ld
    }

    #[test]
    fn overload_shedder_test_scenarios() {
        // testNoBrokers, testBrokersWithNoBundles.
        assert!(run(&LoadData::new()).candidates.is_empty());
        let mut ld = LoadData::new();
        ld.insert_broker("broker-1", hot(&[]));
        assert!(run(&ld).candidates.is_empty());
        // testBrokerNotOverloaded: 50 %.
        let mut ld = LoadData::new();
        ld.insert_broker(
            "broker-1",
            LocalBrokerData {
                bandwidth_in: ResourceUsage::new(500.0, 1000.0),
                bandwidth_out: ResourceUsage::new(500.0, 1000.0),
                bundles: ["bundle-1".to_string()].into(),
                ..Default::default()
            },
        );
        let out = run(&ld);
        assert!(out.candidates.is_empty());
        assert_eq!(
            out.skipped[0].reason,
            "OverloadShedder: no unload: usage 50.0% < overload threshold 85.0%"
        );
        // testBrokerWithSingleBundle.
        let mut ld = LoadData::new();
        ld.insert_broker("broker-1", hot(&["bundle-1"]));
        ld.set_bundle("bundle-1", BundleData::default());
        let out = run(&ld);
        assert!(out.candidates.is_empty());
        assert!(out.skipped[0]
            .reason
            .ends_with("sole bundle is overloading the broker"));
    }

    #[test]
    fn multiple_bundles_and_recently_unloaded() {
        // testBrokerWithMultipleBundles: (0.999 − 0.85 + 0.05) × 110 MiB/s ≈ 21.9 MiB/s → 20 + 18.
        let out = run(&with_bundles(true));
        let names: Vec<&str> = out.candidates.iter().map(|c| c.bundle.as_str()).collect();
        assert_eq!(names, ["bundle-10", "bundle-9"]);
        // testFilterRecentlyUnloaded.
        let mut ld = with_bundles(false);
        ld.record_unload("bundle-10", 1);
        ld.record_unload("bundle-9", 1);
        let out = run(&ld);
        let names: Vec<&str> = out.candidates.iter().map(|c| c.bundle.as_str()).collect();
        assert_eq!(names, ["bundle-8", "bundle-7"]);
        assert!(out.candidates[0]
            .reason
            .starts_with("OverloadShedder: broker-1 usage 99.9% >= overload threshold 85.0%"));
    }
}
