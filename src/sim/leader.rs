//! The leader's loop as one reusable, synchronous sequence over the decision core. The simulator drives it
//! with virtual time; the runtime (issue 5) can call the same methods from its timers and store watches, or
//! mirror them step for step.
//!
//! # The sequence
//!
//! 1. **Feed reports** — every written `LocalBrokerData` (a store notification under `/loadbalance/brokers`)
//!    goes to [`Leader::on_report`]; a vanished broker to [`Leader::on_broker_removed`].
//! 2. **Aggregation** — `on_report` calls [`LoadData::apply_report`] once per written report (Pulsar's
//!    `updateAll` per notification); new bundles are seeded from the store's flushed bundle data
//!    ([`Leader::store`]). A change of the broker set tells the strategies
//!    ([`Strategies::on_active_brokers_change`], Pulsar's `cleanupDeadBrokersData`).
//! 3. **Shedding cycle** — every `loadBalancerSheddingIntervalMinutes`, the first one interval after the
//!    election: [`Leader::shedding_cycle`] runs [`run_shedding_cycle`] (strategy, common filters, placement of
//!    every unload's destination).
//! 4. **Placement** — bundles without an owner (a broker left, split children unloaded, a planned destination
//!    gone) are assigned one lookup at a time by [`Leader::assign`] ([`assign_bundle`]: preallocation, filters,
//!    placement strategy).
//! 5. **Apply with move delay** — the caller unloads each planned bundle from its current owner, and calls
//!    [`Leader::record_unload`] once the unload succeeded (the grace period starts); the bundle serves nowhere
//!    until the destination owns it (the simulator's `moveSeconds`).
//! 6. **Split** — after report arrivals, [`Leader::split_check`] runs [`find_bundles_to_split`]; the caller
//!    splits at the boundaries (computing them from the bundle's topics when the plan leaves them empty) and
//!    reports the split with [`Leader::on_bundle_split`], which also forgets the parent at once
//!    ([`LoadData::remove_bundle`]).
//! 7. **Flush** — every `loadBalancerResourceQuotaUpdateIntervalMinutes`, [`Leader::flush`] adds Pulsar's
//!    extra sample ([`LoadData::resample_all`]) and writes the top bundles' data to the store.
//!
//! Leadership change ([`Leader::take_over`]): followers aggregate reports too (Pulsar 3.x/4.x), so the new
//! leader keeps the brokers' reports, bundle windows and time averages — and the extensible EMAs, which in
//! Pulsar each broker computes and publishes itself — but starts with fresh strategies (hit counters, moving
//! averages), an empty recently-unloaded map and no preallocations ([`LoadData::clear_preallocations`]) — all
//! leader-only memory in Pulsar. Its cycles start one interval after the election.
//!
//! # Consistency with the runtime (`tests/consistency.rs`)
//!
//! On one small scenario (three equal brokers, 16 bundles of fixed traffic all on the first, 25.5 virtual
//! minutes), the simulator and three real broker agents on a shared in-memory store under paused tokio time,
//! with synthetic hosts, write **the same reports at the same instants** (host usage bit for bit, msg rate,
//! throughput, bundle count, `W`) and make **the same shedding moves** (decision instant — hence cycle —,
//! bundle, source, destination, in order), and end with the same owners, for every shedding strategy. The two
//! are held together by shared code, not by copies:
//!
//! * **Reports** — [`crate::core::report_rules`]: the update rule ([`update_trigger`] over [`ReportFigures`],
//!   `W` by [`weighted_usage`]), extensible reporting ([`forced_report_reason`]) and the check phase
//!   ([`report_check_phase_ms`]: first report at start, first check a phase seeded by the seed and the broker id
//!   later, then every period).
//! * **Periods** — the `*_interval` methods of [`Settings`] (with the `loadmgr*Millis` overrides) in both.
//! * **Cost model** — the synthetic host's `costModel` calls [`crate::runtime::synthetic::CostModel::usage`], as
//!   the simulator's brokers do; no noise (`noisePoints` 0 in the scenario), and host usage sampled at every
//!   check (the host reports its current usage).
//! * **Randomness** — the runtime's leader draws its k-th shedding tick of a term from
//!   `stream_rng(seed, Stream::Shedding, k)` and its n-th placement from `stream_rng(seed, Stream::Assignment,
//!   n)`, as this leader.
//! * **Sequence** — one aggregation per written report in notification order (the runtime applies a report
//!   version once); cycles at election + k × interval; at one instant, reports before the flush, the flush
//!   before the shedding tick (the runtime's select is biased that way); unloads at decision time (the grace
//!   period starts then), the destination serving the bundle `moveSeconds` later (the host's `loadDelayMs`).
//!
//! **What a failure means.** The comparison fails when the runtime decides with another strategy, seed, stream
//! derivation or grace period, aggregates a report twice or not at all, runs its cycles or report checks at
//! other instants, reports other figures (cost model, update rule, forced writes), or completes moves at other
//! times — and when this module or the engine changes in one of those ways without the runtime. The test's own
//! sensitivity check shows that its scenario tells those apart (another shedder, another seed, no grace
//! period each give other reports or moves).
//!
//! **Where they still differ**, and the scenario therefore avoids: the runtime defers a shedding cycle while a
//! move is in flight or not yet visible in the reports (this leader does not; in the scenario every move is
//! reported before the next cycle); it preallocates a moved bundle to its destination (no placement here reads
//! it before the destination reports it); a new runtime leader restarts its stream counters at 0 (these continue
//! across leadership changes; the scenario has one leader); its flush writes other bundle data to the store
//! (only seeds of bundles seen anew read it); it checks splits after each cycle instead of after report arrivals
//! (no bundle qualifies); and it places bundles at lookups, which the simulator does not model (the scenario
//! starts with owners).
//!
//! # Time and randomness
//!
//! Time is passed in (`now`, epoch ms). Randomness is injected: the k-th shedding cycle of a leader's term
//! draws from `stream_rng(seed, Stream::Shedding, k)` and the n-th assignment from
//! `stream_rng(seed, Stream::Assignment, n)` (see [`crate::core::random::stream_rng`]); counters continue across
//! leadership changes of one run, so a run is a function of its seed.

use std::collections::{BTreeMap, BTreeSet};

use crate::bundle::NamespaceBundles;
use crate::config::Settings;
use crate::core::placement::assign_bundle;
use crate::core::random::{stream_rng, Stream};
#[cfg(doc)]
use crate::core::report_rules::{
    forced_report_reason, report_check_phase_ms, update_trigger, weighted_usage, ReportFigures,
};
use crate::core::split::{find_bundles_to_split, SplitTopics};
use crate::core::{
    run_shedding_cycle, Assignment, ClusterPolicies, LoadData, Plan, Skipped, StoredSeeds,
    Strategies,
};
use crate::model::{BundleData, LocalBrokerData};

/// What a flush wrote.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Flush {
    /// Bundles whose data was written, in write order.
    pub bundles: Vec<String>,
    /// Brokers whose time average was written.
    pub brokers: usize,
}

/// The elected leader's state and loop (see the module docs).
#[derive(Debug)]
pub struct Leader {
    /// The leader's broker id.
    pub broker: String,
    /// Effective settings.
    pub settings: Settings,
    /// Policies, including every namespace's current bundle boundaries.
    pub policies: ClusterPolicies,
    /// Aggregated load data.
    pub load: LoadData,
    /// Shedding and placement strategies with their cross-cycle state.
    pub strategies: Strategies,
    /// What the store holds under `/loadbalance/bundle-data` (seeds of bundles seen anew).
    pub store: StoredSeeds,
    seed: u64,
    cycles: u64,
    assignments: u64,
    known: BTreeSet<String>,
}

impl Leader {
    /// A leader elected with fresh strategies over `load`. The load data's extensible EMA settings are set from
    /// `settings` at once ([`LoadData::set_ema_settings`]), so reports applied before the first cycle or
    /// assignment advance the EMAs with the configured weights and history percentage.
    pub fn new(
        broker: &str,
        settings: Settings,
        policies: ClusterPolicies,
        mut load: LoadData,
        store: StoredSeeds,
        seed: u64,
    ) -> Self {
        load.set_ema_settings(&settings);
        let strategies = Strategies::from_settings(&settings);
        let known = load.broker_ids();
        Self {
            broker: broker.to_owned(),
            settings,
            policies,
            load,
            strategies,
            store,
            seed,
            cycles: 0,
            assignments: 0,
            known,
        }
    }

    /// Step 1–2: one written report (one notification).
    pub fn on_report(&mut self, broker: &str, report: LocalBrokerData) {
        self.load.apply_report(broker, report, &self.store);
        if !self.known.contains(broker) {
            self.known.insert(broker.to_owned());
            self.strategies.on_active_brokers_change(&self.known);
        }
    }

    /// Step 1–2: a broker's registration vanished.
    pub fn on_broker_removed(&mut self, broker: &str) {
        self.load.remove_broker(broker);
        if self.known.remove(broker) {
            self.strategies.on_active_brokers_change(&self.known);
        }
    }

    /// Step 3: one shedding cycle at `now`.
    pub fn shedding_cycle(&mut self, now: i64) -> Plan {
        let mut rng = stream_rng(self.seed, Stream::Shedding, self.cycles);
        self.cycles += 1;
        run_shedding_cycle(
            &mut self.load,
            &self.settings,
            &self.policies,
            &mut self.strategies,
            now,
            &mut rng,
        )
    }

    /// Shedding cycles run so far in this run (all leaders).
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// Step 4: assigns an unowned bundle (a lookup).
    pub fn assign(&mut self, bundle: &str) -> Result<Assignment, Skipped> {
        let mut rng = stream_rng(self.seed, Stream::Assignment, self.assignments);
        self.assignments += 1;
        assign_bundle(
            &mut self.load,
            &self.settings,
            &self.policies,
            &mut self.strategies.placement,
            bundle,
            &mut rng,
        )
    }

    /// Step 5: an unload succeeded at `now`.
    pub fn record_unload(&mut self, bundle: &str, now: i64) {
        self.load.record_unload(bundle, now);
    }

    /// Step 6: bundles to split. `topics` may be empty; plans of topic-based algorithms then leave the
    /// boundaries to the owner.
    pub fn split_check(&self, topics: &SplitTopics) -> Plan {
        find_bundles_to_split(&self.load, &self.settings, &self.policies, topics)
    }

    /// Step 6: `parent` was split; `bundles` are its namespace's bundles after the split. The boundaries are
    /// updated ([`Leader::on_split`]) and the parent is forgotten at once, as Pulsar's leader does when it splits a
    /// bundle: [`LoadData::remove_bundle`] drops its data, preallocation, recently-unloaded entry and its listing
    /// in the reports the leader holds, and its stored bundle data is deleted. No strategy proposes the parent
    /// again, even before its old owner's next report.
    pub fn on_bundle_split(&mut self, parent: &str, bundles: NamespaceBundles) {
        self.on_split(crate::core::namespace_of(parent), bundles);
        self.load.remove_bundle(parent);
        self.store.bundle_data.remove(parent);
    }

    /// Step 6: a namespace's bundles after a split (boundaries only; [`Leader::on_bundle_split`] also forgets the
    /// parent).
    pub fn on_split(&mut self, namespace: &str, bundles: NamespaceBundles) {
        self.policies
            .namespaces
            .entry(namespace.to_owned())
            .or_default()
            .bundles = Some(bundles);
    }

    /// Step 7: Pulsar's `writeBundleDataOnZooKeeper`: one more sample for every reported bundle, then the data of
    /// the top `loadBalancerMaxNumberOfBundlesInBundleLoadReport × max(1, brokers)` bundles (all when the
    /// setting is ≤ 0; shedding-excluded namespaces left out) is written to the store. loadmgr ranks bundles by
    /// long-term msg rate in + out, then long-term throughput, then name (Pulsar's `TopKBundles` comparator was
    /// not available).
    pub fn flush(&mut self) -> Flush {
        self.load.resample_all();
        let excluded = &self.settings.load_balancer_shedding_excluded_namespaces;
        let mut ranked: Vec<(&String, BundleData)> = self
            .load
            .bundle_names()
            .into_iter()
            .filter(|b| !excluded.contains(crate::core::namespace_of(b)))
            .filter_map(|b| self.load.bundle(b).map(|d| (b, *d)))
            .collect();
        ranked.sort_by(|a, b| {
            b.1.long_term_data
                .total_msg_rate()
                .total_cmp(&a.1.long_term_data.total_msg_rate())
                .then(
                    b.1.long_term_data
                        .total_msg_throughput()
                        .total_cmp(&a.1.long_term_data.total_msg_throughput()),
                )
                .then_with(|| a.0.cmp(b.0))
        });
        let k = self
            .settings
            .load_balancer_max_number_of_bundles_in_bundle_load_report;
        let take = if k <= 0 {
            ranked.len()
        } else {
            (k as usize * self.load.broker_count().max(1)).min(ranked.len())
        };
        let mut out = Flush {
            bundles: Vec::with_capacity(take),
            brokers: self.load.broker_count(),
        };
        let written: BTreeMap<String, BundleData> = ranked
            .into_iter()
            .take(take)
            .map(|(b, d)| (b.clone(), d))
            .collect();
        for (b, d) in written {
            out.bundles.push(b.clone());
            self.store.bundle_data.insert(b, d);
        }
        out
    }

    /// Leadership moves to `broker` at election: same aggregated data (reports, bundle windows, time averages,
    /// extensible EMAs), fresh leader-only state — no preallocations ([`LoadData::clear_preallocations`]), an
    /// empty recently-unloaded map, fresh strategies (see the module docs).
    pub fn take_over(self, broker: &str) -> Leader {
        let mut load = self.load;
        load.clear_preallocations();
        load.recently_unloaded.clear();
        let mut next = Leader::new(
            broker,
            self.settings,
            self.policies,
            load,
            self.store,
            self.seed,
        );
        next.cycles = self.cycles;
        next.assignments = self.assignments;
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NamespaceBundleStats, ResourceUsage, SystemResourceUsage};

    fn report(bundles: &[(&str, f64)], cpu: f64) -> LocalBrokerData {
        let mut r = LocalBrokerData::default();
        let usage = SystemResourceUsage {
            cpu: ResourceUsage::new(cpu, 100.0),
            ..Default::default()
        };
        r.update(
            &usage,
            bundles
                .iter()
                .map(|(b, rate)| {
                    (
                        b.to_string(),
                        NamespaceBundleStats {
                            msg_rate_in: *rate,
                            msg_rate_out: *rate,
                            msg_throughput_in: rate * 1000.0,
                            msg_throughput_out: rate * 1000.0,
                            topics: 2,
                            ..Default::default()
                        },
                    )
                })
                .collect(),
        );
        r.load_manager_class_name = Some(crate::model::MODULAR_LOAD_MANAGER_CLASS.into());
        r
    }

    /// b1 (hot) owns five equal bundles; the parent sorts first, so every strategy's first pick is the parent.
    fn hot_owner(shedder: crate::config::ShedderKind) -> (Leader, String) {
        let mut settings = Settings::default();
        settings.load_balancer_load_shedding_strategy = shedder;
        settings.load_balancer_load_placement_strategy = shedder.default_placement();
        let mut leader = Leader::new(
            "b1:8080",
            settings,
            ClusterPolicies::none(),
            LoadData::new(),
            StoredSeeds::default(),
            3,
        );
        let names: Vec<String> = (0..5u64)
            .map(|i| format!("t/n/0x{:08x}_0x{:08x}", i << 28, (i + 1) << 28))
            .collect();
        let hot: Vec<(&str, f64)> = names.iter().map(|b| (b.as_str(), 3000.0)).collect();
        leader.on_report("b1:8080", report(&hot, 95.0));
        leader.on_report("b2:8080", report(&[], 5.0));
        leader.on_report("b3:8080", report(&[], 5.0));
        leader.flush();
        assert!(leader.store.bundle_data.contains_key(&names[0]));
        (leader, names[0].clone())
    }

    /// The bundles the first shedding cycle with unloads proposes (up to ten cycles, a minute apart).
    fn first_unloads(leader: &mut Leader) -> Vec<String> {
        for k in 1..=10 {
            let plan = leader.shedding_cycle(k * 60_000);
            if !plan.unloads.is_empty() {
                return plan.unloads.into_iter().map(|u| u.bundle).collect();
            }
        }
        Vec::new()
    }

    #[test]
    fn a_split_parent_is_never_proposed_again() {
        for shedder in crate::config::ShedderKind::ALL {
            // Control: with the boundaries updated but the parent kept (the old owner has not reported since
            // the split), the strategy proposes the parent.
            let (mut stale, parent) = hot_owner(shedder);
            let after = NamespaceBundles::from_boundaries(vec![
                0,
                0x0800_0000,
                0x1000_0000,
                0x2000_0000,
                0x3000_0000,
                0x4000_0000,
                0x5000_0000,
                0xffff_ffff,
            ])
            .unwrap();
            stale.on_split("t/n", after.clone());
            assert!(
                first_unloads(&mut stale).contains(&parent),
                "{shedder}: the control proposes the parent"
            );
            // The leader forgets the parent at the split: never proposed, never split again, not stored.
            let (mut leader, parent) = hot_owner(shedder);
            leader.on_bundle_split(&parent, after);
            assert!(leader.load.bundle(&parent).is_none());
            assert!(!leader.store.bundle_data.contains_key(&parent));
            let unloads = first_unloads(&mut leader);
            assert!(!unloads.is_empty(), "{shedder}: b1 is still shed");
            assert!(!unloads.contains(&parent), "{shedder}: {unloads:?}");
            assert!(leader
                .split_check(&SplitTopics::new())
                .splits
                .iter()
                .all(|d| d.bundle != parent));
        }
    }

    #[test]
    fn reports_before_the_first_cycle_use_the_configured_ema_settings() {
        let mut settings = Settings::default();
        settings.load_balancer_load_shedding_strategy = crate::config::ShedderKind::TransferShedder;
        settings.load_balancer_history_resource_percentage = 0.5;
        let mut leader = Leader::new(
            "b1:8080",
            settings.clone(),
            ClusterPolicies::none(),
            LoadData::new(),
            StoredSeeds::default(),
            1,
        );
        assert_eq!(
            leader.load.ema_settings(),
            &crate::core::extensible::EmaSettings::from_settings(&settings)
        );
        leader.on_report("b1:8080", report(&[], 80.0));
        leader.on_report("b1:8080", report(&[], 20.0));
        leader.on_report("b1:8080", report(&[], 20.0));
        // 0.8 → 0.5 × 0.8 + 0.5 × 0.2 = 0.5 → 0.35 (Pulsar's default 0.9 would give 0.692).
        let ema = leader.load.broker("b1:8080").unwrap().extensible;
        assert!((ema.weighted_max_ema - 0.35).abs() < 1e-12, "{ema:?}");
        // The first cycle changes nothing.
        leader.shedding_cycle(60_000);
        assert_eq!(leader.load.broker("b1:8080").unwrap().extensible, ema);
    }

    #[test]
    fn sequence_sheds_assigns_and_survives_a_leader_change() {
        let mut settings = Settings::default();
        settings.load_balancer_load_shedding_strategy = crate::config::ShedderKind::AvgShedder;
        let mut leader = Leader::new(
            "b1:8080",
            settings,
            ClusterPolicies::none(),
            LoadData::new(),
            StoredSeeds::default(),
            7,
        );
        let hot: Vec<(String, f64)> = (0..8)
            .map(|i| {
                (
                    format!("t/n/0x{:08x}_0x{:08x}", i * 16, i * 16 + 16),
                    2000.0,
                )
            })
            .collect();
        let hot_refs: Vec<(&str, f64)> = hot.iter().map(|(b, r)| (b.as_str(), *r)).collect();
        leader.on_report("b1:8080", report(&hot_refs, 90.0));
        leader.on_report("b2:8080", report(&[], 5.0));
        assert!(
            leader.shedding_cycle(60_000).unloads.is_empty(),
            "1 of 2 checks"
        );
        let plan = leader.shedding_cycle(120_000);
        assert!(!plan.unloads.is_empty());
        assert!(plan
            .unloads
            .iter()
            .all(|u| u.destination.as_deref() == Some("b2:8080")));
        for u in &plan.unloads {
            leader.record_unload(&u.bundle, 120_000);
        }
        assert_eq!(leader.cycles(), 2);
        let a = leader.assign("t/n/0xf0000000_0xffffffff").unwrap();
        assert!(a.broker == "b1:8080" || a.broker == "b2:8080");
        let flush = leader.flush();
        assert_eq!(flush.brokers, 2);
        assert!(leader.store.bundle_data.contains_key(&hot[0].0));
        assert_eq!(
            leader.load.preallocation("t/n/0xf0000000_0xffffffff"),
            Some(a.broker.as_str())
        );
        // A second report moves b1's EMAs away from any single report's value.
        leader.on_report("b1:8080", report(&hot_refs, 50.0));
        let ema = leader.load.broker("b1:8080").unwrap().extensible;
        assert_eq!(ema.samples, 2);
        let next = leader.take_over("b2:8080");
        assert_eq!(next.cycles(), 2, "cycle counter continues");
        assert!(next.load.recently_unloaded.is_empty(), "leader-only memory");
        assert_eq!(
            next.load.preallocation("t/n/0xf0000000_0xffffffff"),
            None,
            "leader-only memory"
        );
        assert!(
            next.load.bundle("t/n/0xf0000000_0xffffffff").is_none(),
            "nobody reported the assigned bundle"
        );
        assert_eq!(
            next.load.broker("b1:8080").unwrap().extensible,
            ema,
            "the brokers' EMAs are not the leader's"
        );
        assert_eq!(next.load.broker_count(), 2, "aggregated reports survive");
        assert!(next.load.bundle(&hot[0].0).is_some());
    }
}
