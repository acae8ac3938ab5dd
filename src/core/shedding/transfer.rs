//! TransferShedder (PIP-220; the extensible load manager's only shedder), run on loadmgr's load data.
//!
//! Inputs per broker are the load data's extensible EMAs ([`crate::core::extensible`]: `weightedMaxEMA`,
//! `msgThroughputEMA`, advanced once per applied report and shared with the extensible placement; `updatedAt` =
//! the report's `lastUpdate`, 0 for a report without one — outdated, as in Pulsar).
//!
//! Each broker's *top bundles* (`TopKBundles.update`) are taken from its report's `lastStats` without bundles of
//! system-service namespaces (`pulsar/system`, heartbeat, SLA monitor), without bundles whose namespace has an
//! isolation policy or an anti-affinity group (unless `loadBalancerSheddingBundlesWithPoliciesEnabled`) and
//! without shedding-excluded namespaces, *then* cut to the `loadBalancerMaxNumberOfBundlesInBundleLoadReport`
//! largest by Pulsar's `NamespaceBundleStats` order (rounded throughput in, then out, then msg rate, then
//! connections, then cache size; ties by name), listed **ascending** as Pulsar's `TopBundlesLoadData` is. A
//! budget `<= 0` gives an empty list (`min(k, n)`), as in Pulsar; only the modular report reads it as "all".
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
//! 4. Any decision resets the hit count. A broker with an empty top list counts as missing data (NoLoadData),
//!    one with a single top bundle as "few bundles" (NoBundles). Each source broker of an unload the cycle keeps
//!    is recorded as recently unloaded at the cycle's `now` ([`Shedder::on_unloads_planned`]; Pulsar records it
//!    when the unload completes), so a candidate the cycle drops starts no cool-down.
//!
//! **Reports for the cool-down.** `updatedAt` is the report's `lastUpdate`, and a modular broker rewrites its
//! report only on a change above `loadBalancerReportUpdateThresholdPercentage` or every
//! `loadBalancerReportUpdateMaxIntervalMinutes`. A source broker whose load moves less than that after an unload
//! would keep every cycle in `CoolDown` for up to the maximum interval. So brokers of a cluster running
//! TransferShedder must (1) write at their next report check after their bundle set changed (a bundle
//! unloaded or split away, or a bundle newly owned — what Pulsar's extensible `BrokerLoadDataReporter` achieves
//! by tombstoning its data on `Releasing`/`Splitting` as source and `Owned` as destination), and (2) write at
//! their first check at least `loadBalanceSheddingDelayInSeconds` after they last lost a bundle (loadmgr's
//! rule: data produced after the delay ends the cool-down). Both reporters do: the live agent's
//! ([`crate::core::report_rules::forced_report_reason`]) and the simulator's ([`crate::sim::engine`]), with the
//! same rule.
//!
//! Transferability (`isTransferable`): bundles of namespaces with isolation policies or an anti-affinity group
//! are skipped unless `loadBalancerSheddingBundlesWithPoliciesEnabled`; then the extensible broker filters run
//! for the bundle ([`PlacementContext::extensible_candidates`]: class, max topics `>=`, version, anti-affinity,
//! isolation; a bad version makes the bundle non-transferable). The min broker must survive them in both modes
//! (the shedder always passes it as `dstBroker`); with transfer it must differ from the source, without
//! transfer any surviving broker other than the source suffices.
//!
//! **Fixed Java bug:** Pulsar adds the swapped throughput to `trafficMarkedToGain` only inside a debug-logging
//! branch, so the accounting differs with `loadBalancerDebugModeEnabled`; loadmgr always counts it.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use super::{Candidate, Shedder, SheddingContext, SheddingOutcome};
use crate::config::ShedderKind;
use crate::core::extensible::BrokerLoadEma;
use crate::core::placement::PlacementContext;
use crate::core::plan::Skipped;
use crate::core::plan::UnloadDecision;
use crate::core::{is_system_service_namespace, namespace_of, num};
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
    let s = ctx.settings;
    let Ok(k) = usize::try_from(s.load_balancer_max_number_of_bundles_in_bundle_load_report) else {
        return Vec::new();
    };
    if k == 0 {
        return Vec::new();
    }
    let excluded = &s.load_balancer_shedding_excluded_namespaces;
    let with_policies = s.load_balancer_shedding_bundles_with_policies_enabled;
    let mut all: Vec<(String, NamespaceBundleStats)> = e
        .local
        .last_stats
        .iter()
        .filter(|(b, _)| {
            let ns = namespace_of(b);
            !is_system_service_namespace(ns)
                && (with_policies || !ctx.policies.has_policies(b))
                && !excluded.contains(ns)
        })
        .map(|(b, s)| (b.clone(), *s))
        .collect();
    all.sort_by(bundle_order);
    if all.len() > k {
        all.drain(..all.len() - k);
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
        let Some(e) = ctx.load.extensible_load(broker) else {
            return false;
        };
        let m = (ctx.settings.load_balancer_broker_load_target_std / 2.0).clamp(0.0, 0.5);
        if e.weighted_max_ema < st.avg * m {
            return true;
        }
        let Some(max) = ctx.load.extensible_load(&st.sorted[st.max_idx].0) else {
            return false;
        };
        e.msg_throughput_ema < max.msg_throughput_ema * m
    }

    fn is_overloaded(&self, ctx: &SheddingContext<'_>, broker: &str, avg: f64) -> bool {
        let Some(e) = ctx.load.extensible_load(broker) else {
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
        let cands = pctx.extensible_candidates(bundle);
        if cands.version_error.is_some() {
            return false;
        }
        let c = &cands.filtered;
        let src = pctx.index_of(src);
        // The shedder always passes the min broker as `dstBroker`, and Pulsar checks it survived the filters
        // before the transfer/unload branch.
        let Some(dst) = pctx.index_of(dst).filter(|d| c.binary_search(d).is_ok()) else {
            return false;
        };
        if ctx.settings.load_balancer_transfer_enabled {
            Some(dst) != src
        } else {
            c.iter().any(|i| Some(*i) != src)
        }
    }
}

impl Shedder for TransferShedder {
    fn kind(&self) -> ShedderKind {
        ShedderKind::TransferShedder
    }

    fn restore_recently_unloaded_brokers(&mut self, brokers: &BTreeMap<String, i64>) {
        for (broker, at) in brokers {
            self.record_unloaded_broker(broker, *at);
        }
    }

    fn find_bundles(&mut self, ctx: &SheddingContext<'_>) -> SheddingOutcome {
        self.find(ctx, None)
    }

    fn find_bundles_with_placement(
        &mut self,
        ctx: &SheddingContext<'_>,
        placement: &PlacementContext<'_>,
    ) -> SheddingOutcome {
        self.find(ctx, Some(placement))
    }

    /// Pulsar records a source broker when an unload of it completes; the cycle reports the unloads it kept.
    fn on_unloads_planned(&mut self, unloads: &[UnloadDecision], now: i64) {
        for u in unloads {
            self.recently_unloaded_brokers.insert(u.source.clone(), now);
        }
    }

    fn on_active_brokers_change(&mut self, active: &BTreeSet<String>, _now: i64) {
        self.recently_unloaded_brokers
            .retain(|b, _| active.contains(b));
    }
}

impl TransferShedder {
    /// One pass; the placement context is built here (only once the hit count lets the pass act) unless the
    /// cycle gave its own.
    fn find(
        &mut self,
        ctx: &SheddingContext<'_>,
        placement: Option<&PlacementContext<'_>>,
    ) -> SheddingOutcome {
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
            let e = BrokerLoadEma::of(&entry.local, &entry.extensible);
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

        let own;
        let pctx = match placement {
            Some(p) => p,
            None => {
                own = PlacementContext::new(ctx.load, s, ctx.policies).with_now(ctx.now);
                &own
            }
        };
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
                ctx.load.extensible_load(&max_b),
                ctx.load.extensible_load(&min_b),
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
            if tops.is_empty() {
                empty_data += 1;
                out.skipped.push(Skipped::new(
                    max_b.clone(),
                    format!("no unload: {head}; no top bundles"),
                ));
                continue;
            }
            if tops.len() == 1 {
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
                if !Self::transferable(ctx, pctx, bundle, &max_b, &min_b) {
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
                            if !Self::transferable(ctx, pctx, mb, &min_b, &max_b) {
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
        }
        out
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
            early: false,
            unreported: &[],
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
        // Multi-cycle: once the cycle keeps the unloads, the same (not yet refreshed) data is in cool-down for
        // the brokers just unloaded.
        let kept: Vec<UnloadDecision> = out
            .candidates
            .iter()
            .map(|c| UnloadDecision {
                bundle: c.bundle.clone(),
                source: c.source.clone(),
                destination: c.planned.clone(),
                reason: c.reason.clone(),
                strategy: "TransferShedder".into(),
                cycle: 1,
            })
            .collect();
        assert!(
            sh.recently_unloaded_brokers().is_empty(),
            "recorded when the cycle keeps the unloads"
        );
        sh.on_unloads_planned(&kept, NOW);
        assert_eq!(sh.recently_unloaded_brokers().len(), 2);
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
        // Shedding bundles with policies disabled: with every namespace isolated the top-bundle lists are empty
        // (TopKBundles drops bundles with policies), so nothing can move: NoLoadData.
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
        assert!(
            out.skipped.last().unwrap().reason.contains("NoLoadData"),
            "{:?}",
            out.skipped
        );
    }

    fn group(namespaces: &[&str], group: &str) -> ClusterPolicies {
        let mut p = ClusterPolicies::none();
        for ns in namespaces {
            p.namespaces.insert(
                ns.to_string(),
                crate::core::NamespacePolicy {
                    bundles: None,
                    anti_affinity_group: Some(group.into()),
                },
            );
        }
        p
    }

    #[test]
    fn bundles_with_policies_are_dropped_before_the_top_k_cut() {
        // broker5 owns E1 (small) and P (large, anti-affinity group): Pulsar's top list is [E1] alone, so broker5
        // is a "sole bundle" broker and nothing moves off it.
        let mut ld = setup();
        let b5 = ld.broker_mut("broker5:8080").unwrap();
        b5.local
            .last_stats
            .remove("my-tenant/my-namespaceE/0x0FFFFFFF_0xFFFFFFFF");
        b5.local.last_stats.insert(
            "my-tenant/grouped/0x00000000_0xFFFFFFFF".into(),
            NamespaceBundleStats {
                msg_throughput_out: 7e6,
                ..Default::default()
            },
        );
        let p = group(&["my-tenant/grouped"], "g");
        let s = settings();
        let out = run(&mut TransferShedder::default(), &ld, &s, &p);
        assert!(
            out.candidates.iter().all(|c| c.source != "broker5:8080"),
            "{:?}",
            moves(&out)
        );
        let tops: Vec<String> = top_bundles(
            &SheddingContext {
                load: &ld,
                settings: &s,
                policies: &p,
                now: NOW,
                early: false,
                unreported: &[],
            },
            "broker5:8080",
        )
        .into_iter()
        .map(|(b, _)| b)
        .collect();
        assert_eq!(tops, [E1]);
    }

    #[test]
    fn top_k_counts_only_bundles_without_policies() {
        // 12 bundles, the 10 largest with an anti-affinity group, k = 10: Pulsar lists the 2 policy-free bundles
        // and moves one.
        let mut ld = setup();
        let b5 = ld.broker_mut("broker5:8080").unwrap();
        for i in 0..10 {
            b5.local.last_stats.insert(
                format!(
                    "my-tenant/grouped/0x{:08x}_0x{:08x}",
                    i * 0x1000,
                    (i + 1) * 0x1000
                ),
                NamespaceBundleStats {
                    msg_throughput_out: 9e6 + i as f64,
                    ..Default::default()
                },
            );
        }
        let p = group(&["my-tenant/grouped"], "g");
        let out = run(&mut TransferShedder::default(), &ld, &settings(), &p);
        assert_eq!(
            moves(&out)[0],
            mv(E1, "broker5:8080", Some("broker1:8080")),
            "{:?}",
            out.skipped
        );
    }

    #[test]
    fn top_list_without_bundle_budget_or_system_namespace() {
        // k <= 0: TopKBundles' `min(k, n)` gives an empty list (only the modular report treats it as "all").
        let ld = setup();
        let mut s = settings();
        s.load_balancer_max_number_of_bundles_in_bundle_load_report = 0;
        let p = ClusterPolicies::none();
        let ctx = SheddingContext {
            load: &ld,
            settings: &s,
            policies: &p,
            now: NOW,
            early: false,
            unreported: &[],
        };
        assert!(top_bundles(&ctx, "broker5:8080").is_empty());
        let out = run(&mut TransferShedder::default(), &ld, &s, &p);
        assert!(out.candidates.is_empty());
        assert!(
            out.skipped.last().unwrap().reason.contains("NoLoadData"),
            "{:?}",
            out.skipped
        );
        // `NamespaceService.isSystemServiceNamespace` also covers `pulsar/system`.
        let mut ld = setup();
        ld.broker_mut("broker5:8080")
            .unwrap()
            .local
            .last_stats
            .insert(
                "pulsar/system/0x00000000_0xffffffff".into(),
                NamespaceBundleStats {
                    msg_throughput_out: 1.0,
                    ..Default::default()
                },
            );
        let s = settings();
        let ctx = SheddingContext {
            load: &ld,
            settings: &s,
            policies: &p,
            now: NOW,
            early: false,
            unreported: &[],
        };
        assert_eq!(top_bundles(&ctx, "broker5:8080").len(), 2);
    }

    #[test]
    fn without_transfer_the_min_broker_must_still_pass_the_filters() {
        // Transfer disabled, broker1 (the min broker) reports another load manager: Pulsar's isTransferable
        // checks the destination before the transfer/unload branch, so nothing is unloaded.
        let mut ld = setup();
        ld.broker_mut("broker1:8080")
            .unwrap()
            .local
            .load_manager_class_name = Some("other.LoadManager".into());
        let mut s = settings();
        s.load_balancer_transfer_enabled = false;
        let out = run(
            &mut TransferShedder::default(),
            &ld,
            &s,
            &ClusterPolicies::none(),
        );
        assert!(out.candidates.is_empty(), "{:?}", moves(&out));
    }

    #[test]
    fn extensible_max_topic_filter_drops_brokers_at_the_maximum() {
        // BrokerMaxTopicCountFilter: `topics >= max` is dropped, no fallback. broker1 has exactly 50000 topics.
        let mut ld = setup();
        ld.broker_mut("broker1:8080").unwrap().local.num_topics = 50_000;
        let out = run(
            &mut TransferShedder::default(),
            &ld,
            &settings(),
            &ClusterPolicies::none(),
        );
        assert!(
            out.candidates
                .iter()
                .all(|c| c.planned.as_deref() != Some("broker1:8080")),
            "{:?}",
            moves(&out)
        );
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
    fn reports_without_last_update_are_outdated() {
        // Pulsar's TransferShedderTest.testOutDatedLoadData sets every broker's `updatedAt` to 0 and expects
        // OutDatedData: `now − 0` is older than any TTL. A report with `lastUpdate` 0 is the same here.
        let s = settings();
        let p = ClusterPolicies::none();
        let mut ld = LoadData::new();
        apply(&mut ld, "a:8080", 80.0, 0);
        apply(&mut ld, "b:8080", 0.0, 0);
        let out = run(&mut TransferShedder::default(), &ld, &s, &p);
        assert!(out.candidates.is_empty());
        assert!(
            out.skipped[0].reason.contains("OutDatedData"),
            "{:?}",
            out.skipped
        );
        // Once one broker stamps its report, the cycle goes on with it (the unstamped one is left out of the
        // statistics).
        apply(&mut ld, "a:8080", 80.0, NOW - 1000);
        let out = run(&mut TransferShedder::default(), &ld, &s, &p);
        assert!(
            out.skipped
                .iter()
                .all(|k| !k.reason.contains("OutDatedData")),
            "{:?}",
            out.skipped
        );
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
            early: false,
            unreported: &[],
        };
        let names: Vec<String> = top_bundles(&ctx, "b:8080")
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["t/n/2", "t/n/0"]);
    }
}
