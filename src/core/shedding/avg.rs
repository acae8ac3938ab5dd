//! AvgShedder (PIP-364; the loadmgr/Pulsar 5.0 default shedder and, as the same instance, placement).
//!
//! Per cycle:
//! 1. Score every broker: `100 × W4(b)` (four-weight form, raw current report — no moving average).
//! 2. Sort ascending by score. Pulsar 3.x/4.x (`d76ae68`) compared `(int)(s1 − s2)`, which treats brokers less
//!    than one point apart as equal and is not transitive; the newest Java compares doubles exactly, and loadmgr
//!    does the same. Ties keep broker-id order.
//! 3. Pair lowest with highest, moving inwards. A pair whose gap is below `loadBalancerAvgShedderLowThreshold`
//!    (15 points) clears both brokers' hit counters; otherwise the pair is kept, both brokers' low counters go
//!    up, and their high counters go up when the gap is at least `loadBalancerAvgShedderHighThreshold` (40) or
//!    are cleared when it is not. With an odd count the middle broker pairs with itself (gap 0).
//!    **Kept quirk:** counters belong to brokers, not pairs, so a broker keeps counting when its partner changes.
//! 4. No pair at all: every counter is cleared.
//! 5. A pair acts when either broker's high counter reaches `…HitCountHighThreshold` (2) or either low counter
//!    reaches `…HitCountLowThreshold` (8); acting clears both brokers' counters.
//! 6. Amount: `(rate(o) − rate(u)) × maxUnloadPercentage` msg/s if that exceeds `minUnloadMessage`, else the
//!    same in throughput if it exceeds `minUnloadMessageThroughput`, else nothing (broker-level report sums).
//! 7. Bundles of the overloaded broker by short-term traffic (rate or throughput as chosen) descending: a bundle
//!    is taken when its traffic is positive and fits in what is left ("largest that still fits"). Each taken
//!    bundle is planned to the underloaded broker.
//!
//! The plan is passed with each candidate (5.0 rule: a plan lives only until the current unload attempt ends);
//! [`crate::core::placement`] honours it, replaces an unavailable planned broker by another eligible broker
//! other than the source, and replaces an overloaded one (score above the overload threshold) when a healthy
//! alternative other than the source exists.

use std::collections::BTreeMap;

use super::{
    mib, sheddable_bundles, short_rate, short_tp, Candidate, Shedder, SheddingContext,
    SheddingOutcome,
};
use crate::config::ShedderKind;
use crate::core::plan::Skipped;
use crate::core::{num, push_num, weighted_usage4, MIB};

/// AvgShedder with its per-broker hit counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AvgShedder {
    hit_high: BTreeMap<String, i32>,
    hit_low: BTreeMap<String, i32>,
}

impl AvgShedder {
    /// A broker's high-threshold hit count (0 when absent).
    pub fn high_hits(&self, broker: &str) -> i32 {
        self.hit_high.get(broker).copied().unwrap_or(0)
    }

    /// A broker's low-threshold hit count (0 when absent).
    pub fn low_hits(&self, broker: &str) -> i32 {
        self.hit_low.get(broker).copied().unwrap_or(0)
    }

    fn clear(&mut self, broker: &str) {
        self.hit_high.remove(broker);
        self.hit_low.remove(broker);
    }
}

/// `map[broker] += 1` (absent = 0) without allocating a key for brokers already counted.
fn bump(map: &mut BTreeMap<String, i32>, broker: &str) {
    match map.get_mut(broker) {
        Some(n) => *n += 1,
        None => {
            map.insert(broker.to_owned(), 1);
        }
    }
}

impl Shedder for AvgShedder {
    fn kind(&self) -> ShedderKind {
        ShedderKind::AvgShedder
    }

    fn find_bundles(&mut self, ctx: &SheddingContext<'_>) -> SheddingOutcome {
        let s = ctx.settings;
        let low = s.load_balancer_avg_shedder_low_threshold as f64;
        let high = s.load_balancer_avg_shedder_high_threshold as f64;
        let hit_high_needed = s.load_balancer_avg_shedder_hit_count_high_threshold;
        let hit_low_needed = s.load_balancer_avg_shedder_hit_count_low_threshold;
        let mut out = SheddingOutcome::default();

        let mut scored: Vec<(&str, f64)> = ctx
            .load
            .brokers()
            .map(|(id, e)| (id.as_str(), weighted_usage4(&e.local, s) * 100.0))
            .collect();
        scored.sort_by(|a, b| a.1.total_cmp(&b.1));

        let mut pairs: Vec<(usize, usize)> = Vec::new();
        let (mut i, mut j) = (0usize, scored.len());
        while j > 0 && i < j {
            let jj = j - 1;
            let (min_b, min_s) = scored[i];
            let (max_b, max_s) = scored[jj];
            let gap = max_s - min_s;
            if gap < low {
                let subject = if i == jj {
                    max_b.to_owned()
                } else {
                    format!("{max_b} -> {min_b}")
                };
                out.skipped.push(Skipped::new(
                    subject,
                    format!(
                        "AvgShedder: no unload: {max_b} score {} vs {min_b} {}, gap {} < {}",
                        num(max_s),
                        num(min_s),
                        num(gap),
                        num(low)
                    ),
                ));
                self.clear(max_b);
                self.clear(min_b);
            } else {
                pairs.push((i, jj));
                bump(&mut self.hit_low, min_b);
                bump(&mut self.hit_low, max_b);
                if gap < high {
                    self.hit_high.remove(max_b);
                    self.hit_high.remove(min_b);
                } else {
                    bump(&mut self.hit_high, min_b);
                    bump(&mut self.hit_high, max_b);
                }
            }
            i += 1;
            j -= 1;
        }

        if pairs.is_empty() {
            self.hit_high.clear();
            self.hit_low.clear();
            return out;
        }

        for (ui, oi) in pairs {
            let (under, u_score) = scored[ui];
            let (over, o_score) = scored[oi];
            let gap = o_score - u_score;
            let hh = self.high_hits(under).max(self.high_hits(over));
            let hl = self.low_hits(under).max(self.low_hits(over));
            let subject = format!("{over} -> {under}");
            let head = format!(
                "AvgShedder: {over} score {} vs {under} {}, gap {}",
                num(o_score),
                num(u_score),
                num(gap)
            );
            let trigger = if hh >= hit_high_needed {
                format!(">= {} for {hh} checks", num(high))
            } else if hl >= hit_low_needed {
                format!(">= {} for {hl} checks", num(low))
            } else {
                let msg = if gap >= high {
                    format!(
                        "no unload yet: {head} >= {} for {hh} of {hit_high_needed} checks ({hl} of {hit_low_needed} above {})",
                        num(high),
                        num(low)
                    )
                } else {
                    format!(
                        "no unload yet: {head} >= {} for {hl} of {hit_low_needed} checks",
                        num(low)
                    )
                };
                out.skipped.push(Skipped::new(subject, msg));
                continue;
            };
            self.clear(under);
            self.clear(over);

            let (Some(u), Some(o)) = (ctx.load.broker(under), ctx.load.broker(over)) else {
                continue;
            };
            let pct = s.max_unload_percentage;
            let rate_req = (o.local.total_msg_rate() - u.local.total_msg_rate()) * pct;
            let tp_req = (o.local.total_msg_throughput() - u.local.total_msg_throughput()) * pct;
            let (by_rate, mut budget, amount) = if rate_req > s.min_unload_message as f64 {
                (true, rate_req, format!("{} msg/s", num(rate_req)))
            } else if tp_req > s.min_unload_message_throughput as f64 {
                (false, tp_req, mib(tp_req))
            } else {
                out.skipped.push(Skipped::new(
                    subject,
                    format!(
                        "no unload: {head} {trigger}, but move {} msg/s <= minUnloadMessage {} and {} <= minUnloadMessageThroughput {}",
                        num(rate_req),
                        s.min_unload_message,
                        mib(tp_req),
                        mib(s.min_unload_message_throughput as f64)
                    ),
                ));
                continue;
            };

            let mut bundles: Vec<(&String, f64)> = sheddable_bundles(ctx.load, over)
                .into_iter()
                .map(|(b, d)| (b, if by_rate { short_rate(d) } else { short_tp(d) }))
                .collect();
            bundles.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            let before = out.candidates.len();
            // The reason up to the bundle's own traffic is the same for every bundle of the pair.
            let prefix = format!("{head} {trigger}; move {amount}; bundle ");
            for (bundle, traffic) in bundles {
                if traffic > 0.0 && traffic <= budget {
                    budget -= traffic;
                    let mut reason = String::with_capacity(prefix.len() + 24);
                    reason.push_str(&prefix);
                    if by_rate {
                        push_num(&mut reason, traffic);
                        reason.push_str(" msg/s");
                    } else {
                        push_num(&mut reason, traffic / MIB);
                        reason.push_str(" MiB/s");
                    }
                    out.candidates.push(Candidate {
                        bundle: bundle.clone(),
                        source: over.to_owned(),
                        planned: Some(under.to_owned()),
                        binding: false,
                        reason,
                    });
                }
            }
            if out.candidates.len() == before {
                out.skipped.push(Skipped::new(
                    subject,
                    format!(
                        "no unload: {head} {trigger}; move {amount}, but no bundle of {over} fits"
                    ),
                ));
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
    use crate::core::LoadData;
    use crate::model::{BundleData, LocalBrokerData, ResourceUsage};

    /// AvgShedderTest's fixture: brokers with cpu and msg rates, bundles of 450 + 450 msg/s short-term.
    fn broker(cpu: f64, rate: f64, bundles: &[String]) -> LocalBrokerData {
        LocalBrokerData {
            cpu: ResourceUsage::new(cpu, 100.0),
            msg_rate_in: rate,
            msg_rate_out: rate,
            bundles: bundles.iter().cloned().collect(),
            ..Default::default()
        }
    }

    fn bundle_450() -> BundleData {
        let mut d = BundleData::default();
        d.short_term_data.msg_rate_in = 450.0;
        d.short_term_data.msg_rate_out = 450.0;
        d
    }

    fn three_brokers(cpu1: f64, cpu2: f64) -> LoadData {
        let names: Vec<String> = (0..11).map(|i| format!("bundle-{i}")).collect();
        let mut ld = LoadData::new();
        ld.insert_broker("broker1", broker(cpu1, 10000.0, &names));
        ld.insert_broker("broker2", broker(cpu2, 1000.0, &[]));
        ld.insert_broker("broker3", broker(50.0, 5000.0, &[]));
        for n in &names {
            ld.set_bundle(n, bundle_450());
        }
        ld
    }

    fn run(sh: &mut AvgShedder, ld: &LoadData, s: &Settings) -> SheddingOutcome {
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

    #[test]
    fn hit_high_threshold_fires_on_the_second_check() {
        // AvgShedderTest.testHitHighThreshold: scores 80 / 30 / 50, gap 50 >= 40, hit count 2.
        let ld = three_brokers(80.0, 30.0);
        let s = Settings::default();
        let mut sh = AvgShedder::default();
        let first = run(&mut sh, &ld, &s);
        assert!(first.candidates.is_empty());
        assert_eq!(sh.high_hits("broker1"), 1);
        assert!(
            first
                .skipped
                .iter()
                .any(|k| k.reason.contains("for 1 of 2 checks")),
            "{:?}",
            first.skipped
        );
        let second = run(&mut sh, &ld, &s);
        // (20000 − 2000) × 0.5 = 9000 msg/s; bundles of 900 → 10 bundles, all from broker1 planned to broker2.
        assert_eq!(second.candidates.len(), 10);
        assert!(second
            .candidates
            .iter()
            .all(|c| c.source == "broker1" && c.planned.as_deref() == Some("broker2")));
        assert_eq!(
            second.candidates[0].reason,
            "AvgShedder: broker1 score 80.0 vs broker2 30.0, gap 50.0 >= 40.0 for 2 checks; move 9000.0 msg/s; bundle 900.0 msg/s"
        );
        // Ties broken by bundle name: bundle-0, bundle-1, bundle-10, bundle-2 … ; bundle-9 is left.
        let names: Vec<&str> = second
            .candidates
            .iter()
            .map(|c| c.bundle.as_str())
            .collect();
        assert_eq!(names[..3], ["bundle-0", "bundle-1", "bundle-10"]);
        assert!(!names.contains(&"bundle-9"));
        assert_eq!(sh.high_hits("broker1"), 0, "acting clears the counters");
    }

    #[test]
    fn hit_low_threshold_fires_after_the_configured_checks() {
        // AvgShedderTest.testHitLowThreshold: scores 60 / 40 / 50, low threshold 20, hit count 6.
        let ld = three_brokers(60.0, 40.0);
        let mut s = Settings::default();
        s.load_balancer_avg_shedder_low_threshold = 20;
        s.load_balancer_avg_shedder_hit_count_low_threshold = 6;
        let mut sh = AvgShedder::default();
        for _ in 0..5 {
            assert!(run(&mut sh, &ld, &s).candidates.is_empty());
        }
        let out = run(&mut sh, &ld, &s);
        assert_eq!(out.candidates.len(), 10);
        assert!(out
            .candidates
            .iter()
            .all(|c| c.planned.as_deref() == Some("broker2")));
        assert!(
            out.candidates[0]
                .reason
                .contains("gap 20.0 >= 20.0 for 6 checks"),
            "{}",
            out.candidates[0].reason
        );
    }

    #[test]
    fn several_pairs_shed_in_one_cycle() {
        // AvgShedderTest.testSheddingMultiplePairs: (80, 30) and (75, 35) pairs, 10 bundles each.
        let b1: Vec<String> = (0..11).map(|i| format!("bundle1-{i}")).collect();
        let b3: Vec<String> = (0..11).map(|i| format!("bundle3-{i}")).collect();
        let mut ld = LoadData::new();
        ld.insert_broker("broker1", broker(80.0, 10000.0, &b1));
        ld.insert_broker("broker2", broker(30.0, 1000.0, &[]));
        ld.insert_broker("broker3", broker(75.0, 10000.0, &b3));
        ld.insert_broker("broker4", broker(35.0, 1000.0, &[]));
        for n in b1.iter().chain(&b3) {
            ld.set_bundle(n, bundle_450());
        }
        let s = Settings::default();
        let mut sh = AvgShedder::default();
        assert!(run(&mut sh, &ld, &s).candidates.is_empty());
        let out = run(&mut sh, &ld, &s);
        assert_eq!(out.candidates.len(), 20);
        for c in &out.candidates {
            let want = if c.source == "broker1" {
                "broker2"
            } else {
                "broker4"
            };
            assert_eq!(c.planned.as_deref(), Some(want));
            assert!(c.bundle.starts_with(if c.source == "broker1" {
                "bundle1-"
            } else {
                "bundle3-"
            }));
        }
        assert_eq!(
            out.candidates
                .iter()
                .filter(|c| c.source == "broker3")
                .count(),
            10
        );
    }

    #[test]
    fn small_gap_clears_counters_and_is_reported() {
        let ld = three_brokers(40.0, 30.0);
        let s = Settings::default();
        let mut sh = AvgShedder::default();
        let out = run(&mut sh, &ld, &s);
        assert!(out.candidates.is_empty());
        assert_eq!(
            out.skipped,
            vec![
                Skipped::new("broker1", "AvgShedder: no unload: broker1 score 40.0 vs broker1 40.0, gap 0.0 < 15.0"),
                Skipped::new(
                    "broker3 -> broker2",
                    "no unload yet: AvgShedder: broker3 score 50.0 vs broker2 30.0, gap 20.0 >= 15.0 for 1 of 8 checks"
                ),
            ]
        );
        assert_eq!(sh.low_hits("broker2"), 1);
        // Every pair under 15 points: all counters are cleared.
        let mut ld = three_brokers(35.0, 30.0);
        ld.broker_mut("broker3").unwrap().local.cpu = ResourceUsage::new(40.0, 100.0);
        let out = run(&mut sh, &ld, &s);
        assert!(
            out.skipped
                .iter()
                .any(|k| k.reason.ends_with("gap 10.0 < 15.0")),
            "{:?}",
            out.skipped
        );
        assert_eq!(sh.low_hits("broker2"), 0);
        assert_eq!(sh.low_hits("broker3"), 0);
    }

    #[test]
    fn nothing_moves_below_the_minimum_amounts() {
        let mut ld = three_brokers(80.0, 30.0);
        for id in ["broker1", "broker2", "broker3"] {
            let e = ld.broker_mut(id).unwrap();
            e.local.msg_rate_in = 100.0;
            e.local.msg_rate_out = 0.0;
        }
        let s = Settings::default();
        let mut sh = AvgShedder::default();
        run(&mut sh, &ld, &s);
        let out = run(&mut sh, &ld, &s);
        assert!(out.candidates.is_empty());
        assert!(
            out.skipped
                .iter()
                .any(|k| k.reason.contains("<= minUnloadMessage 1000")),
            "{:?}",
            out.skipped
        );
    }
}
