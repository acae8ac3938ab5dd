//! TransferShedder (PIP-220; the extensible load manager's only shedder), run on loadmgr's load data.
//!
//! Inputs per broker are the load data's extensible EMAs ([`crate::core::extensible`]: `weightedMaxEMA`,
//! `msgThroughputEMA`, advanced once per applied report and shared with the extensible placement; `updatedAt` =
//! the report's `lastUpdate`, or `now` for a report without one). Each broker's *top bundles* are the `loadBalancerMaxNumberOfBundlesInBundleLoadReport`
//! largest of its report's `lastStats` by Pulsar's `NamespaceBundleStats` order (rounded throughput in, then out,
//! then msg rate, then connections, then cache size; ties by name), without system-service and
//! shedding-excluded namespaces, listed **ascending** as Pulsar's `TopBundlesLoadData` is.
//!
//! Per cycle (state across cycles: the hit count and the recently unloaded brokers):
//! 1. Brokers sorted ascending by `weightedMaxEMA` (ties by id); stats over brokers whose data is not older
//!    than `loadBalancerBrokerLoadDataTTLInSeconds`. A broker unloaded from less than
//!    `loadBalanceSheddingDelayInSeconds` before its current data (`updatedAt − unload time`) aborts the cycle
//!    (cool-down); an older entry is forgotten. `avg`, `std = sqrt(sqSum/n − avg²)`.
//! 2. Trigger: `std > loadBalancerBrokerLoadTargetStd`, or the least loaded broker is underloaded, or the most
//!    loaded is overloaded → hit count + 1, else reset; act only when the count exceeds
//!    `loadBalancerSheddingConditionHitCountThreshold`.
//!    * underloaded: `ema < avg × m` or `msgThroughputEMA < msgThroughputEMA(max broker) × m`, with
//!      `m = min(0.5, max(0, targetStd / 2))`;
//!    * overloaded: `ema > overload threshold` and `ema > avg + targetStd`.
//! 3. Up to `loadBalancerMaxNumberOfBrokerSheddingPerCycle` times while `min < max` index: pick the reason
//!    (std, underloaded min, overloaded max; none → stop), pop the max broker, pair it with the current min.
//!    `offload = (maxLoad − minLoad)/2` of the load, i.e. `tp(max) × offload / maxLoad` B/s. Its top bundles
//!    (ascending) are taken while more than one remains: recently unloaded, zero-throughput or
//!    non-transferable ones are skipped; a bundle that would overshoot tries a swap (transfer mode: bundles of the
//!    min broker moving back, accepted while both brokers' new throughputs stay below the max broker's; success
//!    once min ≤ max and max < 0.75 × its old throughput); no swap → this max broker is done.
//!    When something was marked, the running stats are updated as if `(marked − gained) × maxLoad / tp(max)` of
//!    load moved, and the min index advances.
//! 4. Any decision resets the hit count; each source broker is recorded as recently unloaded at `now`
//!    (Pulsar records it when the unload completes).
//!
//! Transferability (`isTransferable`): bundles of namespaces with isolation policies or an anti-affinity group
//! are skipped unless `loadBalancerSheddingBundlesWithPoliciesEnabled`; the destination must survive the
//! placement filters for the bundle (policies, max topics, anti-affinity, class, version); without transfer,
//! any broker other than the source must.
//!
//! **Fixed Java bug:** Pulsar adds the swapped throughput to `trafficMarkedToGain` only inside a debug-logging
//! branch, so the accounting differs with `loadBalancerDebugModeEnabled`; loadmgr always counts it.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use super::{Candidate, Shedder, SheddingContext, SheddingOutcome};
use crate::config::ShedderKind;
use crate::core::extensible::BrokerLoadEma;
use crate::core::placement::{filters, PlacementContext};
use crate::core::plan::Skipped;
use crate::core::{is_system_service_bundle, namespace_of, num};
use crate::model::NamespaceBundleStats;

/// TransferShedder with its cross-cycle state (the EMAs live in the load data).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TransferShedder {
    hit_count: i32,
    recently_unloaded_brokers: BTreeMap<String, i64>,
}

fn bundle_order(
    a: &(String, NamespaceBundleStats),
    b: &(String, NamespaceBundleStats),
) -> Ordering {
    let key = |s: &NamespaceBundleStats| {
        (
            (s.msg_throughput_in / 1e5).round() as i64,
            (s.msg_throughput_out / 1e5).round() as i64,
            ((s.msg_rate_in + s.msg_rate_out) / 100.0).round() as i64,
            (s.topics + s.consumer_count as i64 + s.producer_count as i64) / 500,
            s.cache_size / 100_000,
        )
    };
    key(&a.1).cmp(&key(&b.1)).then_with(|| a.0.cmp(&b.0))
}

/// A broker's top bundles, ascending (see the module docs).
pub fn top_bundles(ctx: &SheddingContext<'_>, broker: &str) -> Vec<(String, NamespaceBundleStats)> {
    let Some(e) = ctx.load.broker(broker) else {
        return Vec::new();
    };
    let excluded = &ctx.settings.load_balancer_shedding_excluded_namespaces;
    let mut all: Vec<(String, NamespaceBundleStats)> = e
        .local
        .last_stats
        .iter()
        .filter(|(b, _)| !is_system_service_bundle(b) && !excluded.contains(namespace_of(b)))
        .map(|(b, s)| (b.clone(), *s))
        .collect();
    all.sort_by(bundle_order);
    let k = ctx
        .settings
        .load_balancer_max_number_of_bundles_in_bundle_load_report;
    if k > 0 && all.len() > k as usize {
        all.drain(..all.len() - k as usize);
    }
    all
}

struct Stats {
    sorted: Vec<(String, f64)>,
    avg: f64,
    std: f64,
    sq_sum: f64,
    total: usize,
    max_idx: usize,
    min_idx: usize,
    shed: i32,
}

impl Stats {
    fn offload(&mut self, max: f64, min: f64, offload: f64) {
        self.sq_sum -= max * max + min * min;
        let maxd = (max - offload).max(0.0);
        let mind = min + offload;
        self.sq_sum += maxd * maxd + mind * mind;
        self.std = (self.sq_sum / self.total as f64 - self.avg * self.avg)
            .abs()
            .sqrt();
        self.shed += 1;
        self.min_idx += 1;
    }
}

impl TransferShedder {
    /// The current hit count.
    pub fn hit_count(&self) -> i32 {
        self.hit_count
    }

    /// Brokers unloaded recently (broker → epoch ms), for the cool-down.
    pub fn recently_unloaded_brokers(&self) -> &BTreeMap<String, i64> {
        &self.recently_unloaded_brokers
    }

    /// Records that `broker` shed a bundle at `at` (the runtime may call this on completion).
    pub fn record_unloaded_broker(&mut self, broker: &str, at: i64) {
        self.recently_unloaded_brokers.insert(broker.to_owned(), at);
    }

    fn is_underloaded(&self, ctx: &SheddingContext<'_>, broker: &str, st: &Stats) -> bool {
        let Some(e) = ctx.load.extensible_load(broker, ctx.now) else {
            return false;
        };
        let m = (ctx.settings.load_balancer_broker_load_target_std / 2.0).clamp(0.0, 0.5);
        if e.weighted_max_ema < st.avg * m {
            return true;
        }
        let Some(max) = ctx.load.extensible_load(&st.sorted[st.max_idx].0, ctx.now) else {
            return false;
        };
        e.msg_throughput_ema < max.msg_throughput_ema * m
    }

    fn is_overloaded(&self, ctx: &SheddingContext<'_>, broker: &str, avg: f64) -> bool {
        let Some(e) = ctx.load.extensible_load(broker, ctx.now) else {
            return false;
        };
        let threshold = ctx
            .settings
            .load_balancer_broker_overloaded_threshold_percentage as f64
            / 100.0;
        e.weighted_max_ema > threshold
            && e.weighted_max_ema > avg + ctx.settings.load_balancer_broker_load_target_std
    }

    fn transferable(
        ctx: &SheddingContext<'_>,
        pctx: &PlacementContext<'_>,
        bundle: &str,
        src: &str,
        dst: &str,
    ) -> bool {
        if ctx.policies.has_policies(bundle)
            && !ctx
                .settings
                .load_balancer_shedding_bundles_with_policies_enabled
        {
            return false;
        }
        let (mut c, _) = filters::namespace_policy_candidates(pctx, bundle);
        filters::filter_max_topics(pctx, &mut c);
        filters::filter_anti_affinity(pctx, bundle, &mut c);
        filters::filter_load_manager_class(pctx, &mut c);
        if filters::filter_version(pctx, &mut c).is_err() {
            return false;
        }
        let ids: BTreeSet<&str> = c
            .iter()
            .map(|i| pctx.brokers[*i].id)
            .filter(|id| *id != src)
            .collect();
        if ctx.settings.load_balancer_transfer_enabled {
            ids.contains(dst)
        } else {
            !ids.is_empty()
        }
    }
}

impl Shedder for TransferShedder {
    fn kind(&self) -> ShedderKind {
        ShedderKind::TransferShedder
    }

    fn find_bundles(&mut self, ctx: &SheddingContext<'_>) -> SheddingOutcome {
        let s = ctx.settings;
        let mut out = SheddingOutcome::default();
        let skip = |out: &mut SheddingOutcome, why: String| {
            out.skipped.push(Skipped::new(
                "cluster",
                format!("TransferShedder: no unload: {why}"),
            ))
        };
        let mut sorted: Vec<(String, f64)> = ctx
            .load
            .brokers()
            .map(|(b, e)| (b.clone(), e.extensible.weighted_max_ema))
            .collect();
        sorted.sort_by(|a, b| a.1.total_cmp(&b.1));
        let ttl = s
            .load_balancer_broker_load_data_ttl_in_seconds
            .saturating_mul(1000);
        let delay = s
            .load_balance_shedding_delay_in_seconds
            .saturating_mul(1000);
        let (mut sum, mut sq_sum, mut n) = (0.0, 0.0, 0usize);
        let mut outdated = false;
        for (b, entry) in ctx.load.brokers() {
            let e = BrokerLoadEma::of(&entry.local, &entry.extensible, ctx.now);
            if ctx.now - e.updated_at > ttl {
                outdated = true;
                continue;
            }
            if let Some(at) = self.recently_unloaded_brokers.get(b).copied() {
                let elapsed = e.updated_at - at;
                if elapsed < delay {
                    skip(
                        &mut out,
                        format!(
                            "CoolDown: {b} load data is {}s newer than its last unload < loadBalanceSheddingDelayInSeconds {}",
                            elapsed / 1000,
                            s.load_balance_shedding_delay_in_seconds
                        ),
                    );
                    return out;
                }
                self.recently_unloaded_brokers.remove(b);
            }
            sum += e.weighted_max_ema;
            sq_sum += e.weighted_max_ema * e.weighted_max_ema;
            n += 1;
        }
        if n == 0 {
            skip(
                &mut out,
                if outdated {
                    "OutDatedData: every broker's load data is older than the TTL".into()
                } else {
                    "NoBrokers".into()
                },
            );
            return out;
        }
        let avg = sum / n as f64;
        let mut st = Stats {
            max_idx: sorted.len() - 1,
            min_idx: 0,
            sorted,
            avg,
            std: (sq_sum / n as f64 - avg * avg).sqrt(),
            sq_sum,
            total: n,
            shed: 0,
        };
        let target = s.load_balancer_broker_load_target_std;
        let min_b = st.sorted[st.min_idx].0.clone();
        let max_b = st.sorted[st.max_idx].0.clone();
        if st.std > target
            || self.is_underloaded(ctx, &min_b, &st)
            || self.is_overloaded(ctx, &max_b, st.avg)
        {
            self.hit_count += 1;
        } else {
            self.hit_count = 0;
        }
        let threshold = s.load_balancer_shedding_condition_hit_count_threshold;
        if self.hit_count <= threshold {
            skip(
                &mut out,
                format!(
                    "HitCount: condition hit {} <= threshold {threshold} (std {} vs target {}, avg {})",
                    self.hit_count,
                    num(st.std),
                    num(target),
                    num(st.avg)
                ),
            );
            return out;
        }

        let pctx = PlacementContext::new(ctx.load, s, ctx.policies).with_now(ctx.now);
        let transfer = s.load_balancer_transfer_enabled;
        let max_per_cycle = s.load_balancer_max_number_of_broker_shedding_per_cycle;
        let (mut empty_data, mut few_bundles) = (0, 0);
        while st.shed < max_per_cycle && st.min_idx < st.max_idx {
            let min_b = st.sorted[st.min_idx].0.clone();
            let max_peek = st.sorted[st.max_idx].0.clone();
            let label = if st.std > target {
                format!("Overloaded: std {} > target {}", num(st.std), num(target))
            } else if self.is_underloaded(ctx, &min_b, &st) {
                format!(
                    "Underloaded: {min_b} is underloaded (std {} <= target {})",
                    num(st.std),
                    num(target)
                )
            } else if self.is_overloaded(ctx, &max_peek, st.avg) {
                format!(
                    "Overloaded: {max_peek} is overloaded (std {} <= target {})",
                    num(st.std),
                    num(target)
                )
            } else {
                out.skipped.push(Skipped::new(
                    "cluster",
                    format!(
                        "TransferShedder: balanced: std {} <= target {}, {min_b} not underloaded, {max_peek} not overloaded",
                        num(st.std),
                        num(target)
                    ),
                ));
                break;
            };
            let max_b = max_peek;
            st.max_idx -= 1;
            let (Some(max_e), Some(min_e)) = (
                ctx.load.extensible_load(&max_b, ctx.now),
                ctx.load.extensible_load(&min_b, ctx.now),
            ) else {
                empty_data += 1;
                continue;
            };
            let (max_load, min_load) = (max_e.weighted_max_ema, min_e.weighted_max_ema);
            let offload = (max_load - min_load) / 2.0;
            let max_tp = max_e.msg_throughput;
            let min_tp = min_e.msg_throughput;
            let offload_tp = max_tp * offload / max_load;
            let head = format!(
                "TransferShedder: {label}; {max_b} load {} -> {min_b} {}, offload {} = {} B/s",
                num(max_load),
                num(min_load),
                num(offload),
                num(offload_tp)
            );
            let tops = top_bundles(ctx, &max_b);
            if tops.len() <= 1 {
                few_bundles += 1;
                out.skipped.push(Skipped::new(
                    max_b.clone(),
                    format!("no unload: {head}; {} top bundle(s)", tops.len()),
                ));
                continue;
            }
            let min_tops = top_bundles(ctx, &min_b);
            let mut min_iter = min_tops.iter();
            let (mut marked, mut gained) = (0.0f64, 0.0f64);
            let mut remaining = tops.len();
            for (bundle, stats) in &tops {
                if ctx.load.is_recently_unloaded(bundle) {
                    continue;
                }
                if !Self::transferable(ctx, &pctx, bundle, &max_b, &min_b) {
                    out.skipped.push(Skipped::new(bundle.clone(), format!("no unload: {head}; {min_b} is not an eligible destination or the bundle has placement policies")));
                    continue;
                }
                if remaining <= 1 {
                    break;
                }
                let btp = stats.total_msg_throughput();
                if btp == 0.0 {
                    continue;
                }
                let mut swap = Vec::new();
                let mut swapped_tp = 0.0;
                let mut swap_ok = false;
                if marked - gained + btp > offload_tp {
                    if transfer {
                        let mut max_new = max_tp - marked + gained - btp;
                        let mut min_new = min_tp + marked - gained + btp;
                        for (mb, ms) in min_iter.by_ref() {
                            if !Self::transferable(ctx, &pctx, mb, &min_b, &max_b) {
                                continue;
                            }
                            let mtp = ms.total_msg_throughput();
                            if mtp == 0.0 {
                                continue;
                            }
                            if max_new + mtp < max_tp && min_new - mtp < max_tp {
                                swap.push((mb.clone(), mtp));
                                max_new += mtp;
                                min_new -= mtp;
                                swapped_tp += mtp;
                                if min_new <= max_new && max_new < max_tp * 0.75 {
                                    swap_ok = true;
                                    break;
                                }
                            }
                        }
                    }
                    if !swap_ok {
                        out.skipped.push(Skipped::new(
                            bundle.clone(),
                            format!(
                                "no unload: {head}; marked {} − gained {} + bundle {} B/s > target",
                                num(marked),
                                num(gained),
                                num(btp)
                            ),
                        ));
                        break;
                    }
                    for (mb, mtp) in &swap {
                        out.candidates.push(Candidate {
                            bundle: mb.clone(),
                            source: min_b.clone(),
                            planned: Some(max_b.clone()),
                            binding: true,
                            reason: format!("{head}; swap back {} B/s", num(*mtp)),
                        });
                    }
                    gained += swapped_tp;
                }
                out.candidates.push(Candidate {
                    bundle: bundle.clone(),
                    source: max_b.clone(),
                    planned: transfer.then(|| min_b.clone()),
                    binding: transfer,
                    reason: format!("{head}; bundle {} B/s", num(btp)),
                });
                marked += btp;
                remaining -= 1;
            }
            if marked > 0.0 {
                let adjusted = (marked - gained) * max_load / max_tp;
                st.offload(max_load, min_load, adjusted);
            } else {
                few_bundles += 1;
            }
        }
        if out.candidates.is_empty() {
            let why = if empty_data > 0 {
                "NoLoadData"
            } else if few_bundles > 0 {
                "NoBundles: no top bundle of the loaded brokers can be moved"
            } else {
                "HitCount"
            };
            skip(&mut out, why.into());
        } else {
            self.hit_count = 0;
            for c in &out.candidates {
                self.recently_unloaded_brokers
                    .insert(c.source.clone(), ctx.now);
            }
        }
        out
    }

    fn on_active_brokers_change(&mut self, active: &BTreeSet<String>) {
        self.recently_unloaded_brokers
            .retain(|b, _| active.contains(b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::core::policies::{ClusterPolicies, IsolationPolicy};
    use crate::core::LoadData;
    use crate::model::{LocalBrokerData, ResourceUsage};

    const NOW: i64 = 1_700_000_000_000;
    const E1: &str = "my-tenant/my-namespaceE/0x00000000_0x0FFFFFFF";
    const D1: &str = "my-tenant/my-namespaceD/0x00000000_0x0FFFFFFF";

    fn report(cpu: f64, ns: &str, l1: f64, l2: f64) -> LocalBrokerData {
        let mut r = LocalBrokerData {
            cpu: ResourceUsage::new(cpu, 100.0),
            memory: ResourceUsage::new(0.0, 100.0),
            direct_memory: ResourceUsage::new(0.0, 100.0),
            bandwidth_in: ResourceUsage::new(0.0, 100.0),
            bandwidth_out: ResourceUsage::new(0.0, 100.0),
            msg_throughput_in: 1.0,
            msg_throughput_out: l1 + l2,
            last_update: NOW - 1000,
            load_manager_class_name: Some(crate::model::MODULAR_LOAD_MANAGER_CLASS.into()),
            ..Default::default()
        };
        for (range, tp) in [("0x00000000_0x0FFFFFFF", l1), ("0x0FFFFFFF_0xFFFFFFFF", l2)] {
            let name = format!("my-tenant/my-namespace{ns}/{range}");
            r.last_stats.insert(
                name.clone(),
                NamespaceBundleStats {
                    msg_throughput_out: tp,
                    ..Default::default()
                },
            );
            r.bundles.insert(name);
        }
        r
    }

    /// TransferShedderTest.setupContext: cpu 2, 4, 6, 80, 90 % with two top bundles each.
    fn setup() -> LoadData {
        let mut ld = LoadData::new();
        let rows = [
            (1, 2.0, "A", 1e6, 2e6),
            (2, 4.0, "B", 1e6, 3e6),
            (3, 6.0, "C", 2e6, 4e6),
            (4, 80.0, "D", 2e6, 6e6),
            (5, 90.0, "E", 2e6, 7e6),
        ];
        for (i, cpu, ns, l1, l2) in rows {
            ld.insert_broker(&format!("broker{i}:8080"), report(cpu, ns, l1, l2));
        }
        ld
    }

    fn settings() -> Settings {
        let mut s = Settings::default();
        // The Java test context: hit count threshold 0 (act on the first qualifying cycle).
        s.load_balancer_shedding_condition_hit_count_threshold = 0;
        s
    }

    fn run(
        sh: &mut TransferShedder,
        ld: &LoadData,
        s: &Settings,
        p: &ClusterPolicies,
    ) -> SheddingOutcome {
        sh.find_bundles(&SheddingContext {
            load: ld,
            settings: s,
            policies: p,
            now: NOW,
        })
    }

    fn moves(out: &SheddingOutcome) -> Vec<(String, String, Option<String>)> {
        out.candidates
            .iter()
            .map(|c| (c.bundle.clone(), c.source.clone(), c.planned.clone()))
            .collect()
    }

    fn mv(b: &str, s: &str, d: Option<&str>) -> (String, String, Option<String>) {
        (b.into(), s.into(), d.map(Into::into))
    }

    #[test]
    fn sheds_the_two_most_loaded_brokers_to_the_two_least() {
        let mut sh = TransferShedder::default();
        let out = run(&mut sh, &setup(), &settings(), &ClusterPolicies::none());
        assert_eq!(
            moves(&out),
            [
                mv(E1, "broker5:8080", Some("broker1:8080")),
                mv(D1, "broker4:8080", Some("broker2:8080"))
            ]
        );
        assert!(out.candidates.iter().all(|c| c.binding));
        assert!(out.candidates[0].reason.starts_with(
            "TransferShedder: Overloaded: std 0.3983 > target 0.25; broker5:8080 load 0.9 -> broker1:8080 0.02, offload 0.44"
        ), "{}", out.candidates[0].reason);
        assert_eq!(sh.hit_count(), 0);
        // Multi-cycle: the same (not yet refreshed) data is in cool-down for the brokers just unloaded.
        let again = run(&mut sh, &setup(), &settings(), &ClusterPolicies::none());
        assert!(again.candidates.is_empty());
        assert!(
            again.skipped[0].reason.contains("CoolDown"),
            "{:?}",
            again.skipped
        );
    }

    #[test]
    fn target_std_reached_after_one_transfer() {
        // testTargetStdAfterTransfer: 55 / 65 % brokers, avg 0.264, std 0.2764.
        let mut ld = setup();
        ld.insert_broker("broker4:8080", report(55.0, "D", 2e6, 6e6));
        ld.insert_broker("broker5:8080", report(65.0, "E", 2e6, 7e6));
        let mut sh = TransferShedder::default();
        let out = run(&mut sh, &ld, &settings(), &ClusterPolicies::none());
        assert_eq!(moves(&out), [mv(E1, "broker5:8080", Some("broker1:8080"))]);
        assert!(
            out.candidates[0]
                .reason
                .contains("std 0.2764 > target 0.25"),
            "{}",
            out.candidates[0].reason
        );
        assert!(out
            .skipped
            .iter()
            .any(|k| k.reason.starts_with("TransferShedder: balanced")));
    }

    #[test]
    fn zero_traffic_min_broker_is_underloaded() {
        // testMinBrokerWithZeroTraffic.
        let mut ld = setup();
        ld.insert_broker("broker4:8080", report(55.0, "D", 2e6, 6e6));
        ld.insert_broker("broker5:8080", report(65.0, "E", 2e6, 7e6));
        let mut b2 = report(4.0, "B", 1e6, 3e6);
        b2.msg_throughput_in = 0.0;
        b2.msg_throughput_out = 0.0;
        ld.insert_broker("broker2:8080", b2);
        let mut sh = TransferShedder::default();
        let out = run(&mut sh, &ld, &settings(), &ClusterPolicies::none());
        assert_eq!(
            moves(&out),
            [
                mv(E1, "broker5:8080", Some("broker1:8080")),
                mv(D1, "broker4:8080", Some("broker2:8080"))
            ]
        );
        assert!(
            out.candidates[1]
                .reason
                .contains("Underloaded: broker2:8080 is underloaded"),
            "{}",
            out.candidates[1].reason
        );
    }

    #[test]
    fn recently_unloaded_bundles_and_brokers() {
        // testRecentlyUnloadedBundles: D and E bundles are in their grace period → C1 from broker3.
        let mut ld = setup();
        for b in [
            E1,
            D1,
            "my-tenant/my-namespaceE/0x0FFFFFFF_0xFFFFFFFF",
            "my-tenant/my-namespaceD/0x0FFFFFFF_0xFFFFFFFF",
        ] {
            ld.record_unload(b, NOW);
        }
        let out = run(
            &mut TransferShedder::default(),
            &ld,
            &settings(),
            &ClusterPolicies::none(),
        );
        assert_eq!(
            moves(&out),
            [mv(
                "my-tenant/my-namespaceC/0x00000000_0x0FFFFFFF",
                "broker3:8080",
                Some("broker1:8080")
            )]
        );
        // testRecentlyUnloadedBrokers: an old entry is forgotten, a fresh one means cool-down.
        let mut sh = TransferShedder::default();
        sh.record_unloaded_broker("broker1:8080", NOW - 1_800_000 * 1001 / 1000);
        assert_eq!(
            run(&mut sh, &setup(), &settings(), &ClusterPolicies::none())
                .candidates
                .len(),
            2
        );
        let mut sh = TransferShedder::default();
        sh.record_unloaded_broker("broker1:8080", NOW);
        let out = run(&mut sh, &setup(), &settings(), &ClusterPolicies::none());
        assert!(out.candidates.is_empty());
        assert!(
            out.skipped[0].reason.contains("CoolDown: broker1:8080"),
            "{:?}",
            out.skipped
        );
    }

    #[test]
    fn outdated_data_and_no_brokers() {
        // testOutDatedLoadData / testEmptyBrokerLoadData.
        let mut ld = setup();
        for i in 1..=5 {
            ld.broker_mut(&format!("broker{i}:8080"))
                .unwrap()
                .local
                .last_update = 1;
        }
        let out = run(
            &mut TransferShedder::default(),
            &ld,
            &settings(),
            &ClusterPolicies::none(),
        );
        assert!(
            out.skipped[0].reason.contains("OutDatedData"),
            "{:?}",
            out.skipped
        );
        let out = run(
            &mut TransferShedder::default(),
            &LoadData::new(),
            &settings(),
            &ClusterPolicies::none(),
        );
        assert!(out.skipped[0].reason.contains("NoBrokers"));
    }

    #[test]
    fn single_or_no_top_bundles_and_zero_throughput() {
        // testSingleTopBundlesLoadData / testZeroBundleThroughput: nothing can move → NoBundles.
        let mut ld = setup();
        for i in 1..=5 {
            let e = ld.broker_mut(&format!("broker{i}:8080")).unwrap();
            let first = e.local.last_stats.keys().next().unwrap().clone();
            e.local.last_stats.remove(&first);
        }
        let out = run(
            &mut TransferShedder::default(),
            &ld,
            &settings(),
            &ClusterPolicies::none(),
        );
        assert!(out.candidates.is_empty());
        assert!(
            out.skipped.last().unwrap().reason.contains("NoBundles"),
            "{:?}",
            out.skipped
        );
        let mut ld = setup();
        for i in 1..=5 {
            for st in ld
                .broker_mut(&format!("broker{i}:8080"))
                .unwrap()
                .local
                .last_stats
                .values_mut()
            {
                st.msg_throughput_out = 0.0;
            }
        }
        let out = run(
            &mut TransferShedder::default(),
            &ld,
            &settings(),
            &ClusterPolicies::none(),
        );
        assert!(out.candidates.is_empty());
        assert!(out.skipped.last().unwrap().reason.contains("NoBundles"));
    }

    #[test]
    fn hit_count_threshold_needs_consecutive_cycles() {
        // Default threshold 3: the fourth qualifying cycle acts.
        let s = Settings::default();
        let mut sh = TransferShedder::default();
        for k in 1..=3 {
            let out = run(&mut sh, &setup(), &s, &ClusterPolicies::none());
            assert!(out.candidates.is_empty());
            assert!(
                out.skipped[0]
                    .reason
                    .contains(&format!("condition hit {k} <= threshold 3")),
                "{:?}",
                out.skipped
            );
        }
        assert_eq!(
            run(&mut sh, &setup(), &s, &ClusterPolicies::none())
                .candidates
                .len(),
            2
        );
        assert_eq!(sh.hit_count(), 0);
    }

    #[test]
    fn bundles_with_isolation_policies() {
        // testBundlesWithIsolationPolicies: namespace E is isolated to broker5, so E cannot move; D goes to
        // broker1 (the min broker is not used up by broker5's failed attempt).
        let mut s = settings();
        s.load_balancer_shedding_bundles_with_policies_enabled = true;
        let p = ClusterPolicies {
            isolation: vec![IsolationPolicy::new(
                "e",
                &["my-tenant/my-namespaceE".into()],
                &["broker5".into()],
                &[],
                1,
            )
            .unwrap()],
            ..Default::default()
        };
        let out = run(&mut TransferShedder::default(), &setup(), &s, &p);
        assert_eq!(moves(&out), [mv(D1, "broker4:8080", Some("broker1:8080"))]);
        s.load_balancer_transfer_enabled = false;
        let out = run(&mut TransferShedder::default(), &setup(), &s, &p);
        assert_eq!(moves(&out), [mv(D1, "broker4:8080", None)]);
        assert!(!out.candidates[0].binding);
        // Shedding bundles with policies disabled: with every namespace isolated nothing can move.
        s.load_balancer_shedding_bundles_with_policies_enabled = false;
        s.load_balancer_transfer_enabled = true;
        let all = ClusterPolicies {
            isolation: vec![IsolationPolicy::new(
                "all",
                &["my-tenant/.*".into()],
                &["broker[0-9]".into()],
                &[],
                1,
            )
            .unwrap()],
            ..Default::default()
        };
        let out = run(&mut TransferShedder::default(), &setup(), &s, &all);
        assert!(out.candidates.is_empty());
        assert!(out.skipped.last().unwrap().reason.contains("NoBundles"));
    }

    fn apply(ld: &mut LoadData, broker: &str, cpu: f64, last_update: i64) {
        let mut r = report(cpu, "A", 2e6, 6e6);
        r.last_update = last_update;
        ld.apply_report(broker, r, &crate::core::NoSeeds);
    }

    #[test]
    fn ema_advances_at_every_applied_report() {
        // h = 0.9; broker a reports W = 0.2, then 0.8 and 0.8 within one shedding interval: Pulsar's reporting
        // broker computes 0.2 -> 0.26 -> 0.314 and every reader sees 0.314.
        let mut s = settings();
        s.load_balancer_shedding_condition_hit_count_threshold = 1;
        let p = ClusterPolicies::none();
        let mut ld = LoadData::new();
        apply(&mut ld, "a:8080", 20.0, NOW - 3000);
        apply(&mut ld, "b:8080", 0.0, NOW - 3000);
        let mut sh = TransferShedder::default();
        let first = run(&mut sh, &ld, &s, &p);
        assert!(first.candidates.is_empty(), "hit count 1 <= 1");
        apply(&mut ld, "a:8080", 80.0, NOW - 2000);
        apply(&mut ld, "a:8080", 80.0, NOW - 1000);
        let out = run(&mut sh, &ld, &s, &p);
        assert!(!out.candidates.is_empty(), "{:?}", out.skipped);
        assert!(
            out.candidates[0]
                .reason
                .contains("a:8080 load 0.314 -> b:8080 0.0"),
            "{}",
            out.candidates[0].reason
        );
    }

    #[test]
    fn reports_without_last_update_keep_the_data_fresh() {
        // Reports with lastUpdate = 0 (snapshots, simulators): the data must neither freeze nor become outdated.
        let mut s = settings();
        s.load_balancer_shedding_condition_hit_count_threshold = 100;
        let p = ClusterPolicies::none();
        let mut ld = LoadData::new();
        apply(&mut ld, "a:8080", 20.0, 0);
        apply(&mut ld, "b:8080", 0.0, 0);
        let mut sh = TransferShedder::default();
        run(&mut sh, &ld, &s, &p);
        apply(&mut ld, "a:8080", 80.0, 0);
        apply(&mut ld, "b:8080", 0.0, 0);
        let later = NOW + 2 * 3_600_000;
        let out = sh.find_bundles(&SheddingContext {
            load: &ld,
            settings: &s,
            policies: &p,
            now: later,
        });
        let reasons: Vec<&str> = out.skipped.iter().map(|k| k.reason.as_str()).collect();
        assert!(
            reasons.iter().all(|r| !r.contains("OutDatedData")),
            "{reasons:?}"
        );
        // avg of 0.26 and 0: the second report moved the EMA.
        assert!(reasons[0].contains("avg 0.13"), "{reasons:?}");
    }

    #[test]
    fn top_bundles_are_ascending_and_capped() {
        let mut ld = LoadData::new();
        let mut r = LocalBrokerData::default();
        for (i, tp) in [5e6, 1e6, 3e6].iter().enumerate() {
            r.last_stats.insert(
                format!("t/n/{i}"),
                NamespaceBundleStats {
                    msg_throughput_in: *tp,
                    ..Default::default()
                },
            );
        }
        r.last_stats.insert(
            "pulsar/b:8080/0x00000000_0xffffffff".into(),
            NamespaceBundleStats {
                msg_throughput_in: 9e9,
                ..Default::default()
            },
        );
        ld.insert_broker("b:8080", r);
        let mut s = Settings::default();
        s.load_balancer_max_number_of_bundles_in_bundle_load_report = 2;
        let p = ClusterPolicies::none();
        let ctx = SheddingContext {
            load: &ld,
            settings: &s,
            policies: &p,
            now: NOW,
        };
        let names: Vec<String> = top_bundles(&ctx, "b:8080")
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["t/n/2", "t/n/0"]);
    }
}
