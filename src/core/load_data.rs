//! What the leader knows: per-broker reports and time averages, per-bundle windows, recently unloaded bundles
//! and preallocations — and the aggregation of Pulsar's `ModularLoadManagerImpl.java` (`updateAllBrokerData`,
//! `updateBundleData`), fed one report at a time.
//!
//! # Aggregation
//!
//! [`LoadData::apply_report`] takes one broker's `LocalBrokerData` and:
//! * adds one sample to both windows of every bundle the report lists in `lastStats` (a bundle not yet known is
//!   first seeded from the stored `BundleData`, else from the resource quota with "ample history", else from
//!   the defaults of 50 msg/s and 50000 B/s each way with no samples — see [`SeedSource`]);
//! * drops the data of bundles that no broker's `lastStats` lists any more (Pulsar's `updateBundleData`): those
//!   this broker listed before and no other broker lists ("vanished"), stored or assigned bundles nobody has
//!   reported — except bundles still preallocated, whose data Pulsar keeps in the preallocation until it goes;
//! * drops preallocations of this broker that the report now lists;
//! * recomputes this broker's [`TimeAverageBrokerData`] from its bundles (defaults for unknown ones).
//! * advances this broker's extensible EMAs (`weightedMaxEMA`, `msgThroughputEMA`) by this report, with the
//!   load data's [`EmaSettings`](super::extensible) — the one copy TransferShedder and the
//!   extensible placement read ([`crate::core::extensible`]).
//!
//! Its cost is proportional to the size of that report (old and new), never to the cluster.
//!
//! **Difference from Pulsar, on purpose:** Pulsar's `updateBundleData` runs over *every* broker's last report
//! on every notification, so one broker's report write adds a sample to every bundle in the cluster.
//! loadmgr samples the bundles of the broker whose report arrived. [`LoadData::resample_all`] is Pulsar's full
//! pass, for callers that want the exact Java sampling (for example before a flush, which in Pulsar also adds a
//! sample).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use foldhash::HashMap;

use super::extensible::{BrokerLoadEma, EmaSettings, ExtensibleEma};
use crate::config::Settings;
use crate::model::{
    BundleData, LocalBrokerData, NamespaceBundleStats, ResourceQuota, ResourceWeights,
    TimeAverageBrokerData,
};

/// Where the seed of a bundle seen for the first time comes from (the store, in the runtime).
pub trait SeedSource {
    /// `/loadbalance/bundle-data/<bundle>`, if stored.
    fn bundle_data(&self, bundle: &str) -> Option<BundleData>;
    /// `/loadbalance/resource-quota/<bundle>`, if stored.
    fn resource_quota(&self, bundle: &str) -> Option<ResourceQuota>;
}

/// No stored data: every new bundle starts from the defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSeeds;

impl SeedSource for NoSeeds {
    fn bundle_data(&self, _: &str) -> Option<BundleData> {
        None
    }
    fn resource_quota(&self, _: &str) -> Option<ResourceQuota> {
        None
    }
}

/// Seeds held in memory (what the runtime read from the store, or a test's fixture).
#[derive(Debug, Clone, Default)]
pub struct StoredSeeds {
    /// Stored bundle data by bundle name.
    pub bundle_data: HashMap<String, BundleData>,
    /// Stored quotas by bundle name.
    pub quotas: HashMap<String, ResourceQuota>,
}

impl SeedSource for StoredSeeds {
    fn bundle_data(&self, bundle: &str) -> Option<BundleData> {
        self.bundle_data.get(bundle).copied()
    }
    fn resource_quota(&self, bundle: &str) -> Option<ResourceQuota> {
        self.quotas.get(bundle).copied()
    }
}

/// The seed Pulsar's `getBundleDataOrDefaultAsync` picks: stored data, else quota (ample history), else
/// defaults.
pub fn seed_bundle(bundle: &str, seeds: &dyn SeedSource) -> BundleData {
    if let Some(data) = seeds.bundle_data(bundle) {
        return data;
    }
    if let Some(quota) = seeds.resource_quota(bundle) {
        return BundleData::from_quota(&quota);
    }
    BundleData::default()
}

/// One broker as the leader sees it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BrokerEntry {
    /// The broker's last report.
    pub local: LocalBrokerData,
    /// Sum of its bundles' short- and long-term windows.
    pub time_average: TimeAverageBrokerData,
    /// Bundles assigned to it that its report does not list yet.
    pub preallocated: BTreeSet<String>,
    /// What `preallocated` adds up to, kept current by [`LoadData`] (see [`PreallocatedLoad`]).
    pub preallocated_load: PreallocatedLoad,
    /// Namespace → how many bundles of it the report's `bundles` lists (Pulsar's
    /// `brokerToNamespaceToBundleRange`, without the preallocations), kept current by [`LoadData`].
    pub reported_namespaces: BTreeMap<String, usize>,
    /// The extensible manager's EMAs (`weightedMaxEMA`, `msgThroughputEMA`), advanced once per applied report
    /// ([`crate::core::extensible`]).
    pub extensible: ExtensibleEma,
}

/// What a broker's preallocated bundles add up to. [`LoadData`] recomputes it whenever that broker's
/// preallocations or their data change, so placement reads it in O(1): summed at every lookup, a lookup storm
/// cost O(bundles) per lookup, since it preallocates the whole cluster before any report lists a bundle.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PreallocatedLoad {
    /// Σ topics of their data.
    pub topics: i64,
    /// Σ long-term message rate (in + out) of their data, msg/s, summed in bundle-name order.
    pub long_term_msg_rate: f64,
    /// Namespace → how many of them.
    pub namespaces: BTreeMap<String, usize>,
}

/// Namespace → bundles of it among `bundles`.
fn namespace_counts<'a>(bundles: impl Iterator<Item = &'a String>) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for b in bundles {
        let ns = super::namespace_of(b);
        match counts.get_mut(ns) {
            Some(n) => *n += 1,
            None => {
                counts.insert(ns.to_owned(), 1);
            }
        }
    }
    counts
}

/// What placement derives from one broker's report alone, for one set of resource weights and one load
/// manager class ([`LoadData::report_facts`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ReportFacts {
    /// Length of the host part of the broker id (the text before the last `:`, or all of it).
    pub host_len: usize,
    /// Weighted max usage with the four weights (heap memory ignored), fraction.
    pub usage4: f64,
    /// Weighted max usage with the five weights, fraction.
    pub usage5: f64,
    /// Topics the report counts.
    pub topics: i64,
    /// The report says the broker serves persistent topics.
    pub persistent: bool,
    /// The report says the broker serves non-persistent topics.
    pub non_persistent: bool,
    /// The report names the load manager class asked for.
    pub class_ok: bool,
    /// The reported broker version.
    pub version: Option<String>,
}

/// The [`ReportFacts`] of every broker, in id order, and what they were derived with.
#[derive(Debug)]
struct FactsTable {
    weights: ResourceWeights,
    weights4: ResourceWeights,
    class: String,
    rows: Vec<ReportFacts>,
}

/// Built on first use after any broker's report changed, dropped by every such change. A lookup storm places
/// thousands of bundles between two reports, and each placement read these facts of every broker from its
/// entry: scattered over memory, that was about a third of the leader's time at 1,000 brokers. A clone starts
/// without (it builds its own when asked); two load data compare equal whatever their caches hold.
#[derive(Debug, Default)]
struct FactsCache(OnceLock<FactsTable>);

impl Clone for FactsCache {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for FactsCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

#[derive(Debug, Clone, PartialEq)]
struct BundleEntry {
    data: BundleData,
    /// How many brokers list the bundle in their current `lastStats`.
    reporters: u32,
}

/// The leader's view of the cluster load (Pulsar's `LoadData` plus the time averages and preallocations of
/// `ModularLoadManagerImpl`). Brokers are kept in id order.
///
/// **Creators should call [`LoadData::set_ema_settings`] with the effective settings right after creating it**
/// ([`LoadData::new`], [`LoadData::from_parts`], a snapshot): every applied report advances the extensible EMAs
/// with the load data's settings, which are Pulsar's defaults until set. The shedding cycle and assignment set
/// them too, but reports applied before the first of those would otherwise be folded in with the default
/// weights and history percentage (a broker with more than one such report keeps that history).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoadData {
    brokers: BTreeMap<String, BrokerEntry>,
    bundles: HashMap<String, BundleEntry>,
    /// Bundle → epoch ms of its last unload; entries older than the grace period are pruned by the cycle.
    pub recently_unloaded: BTreeMap<String, i64>,
    preallocated: BTreeMap<String, String>,
    /// Bundles with data that no broker's `lastStats` lists (stored seeds, assignments not reported yet, the
    /// last lister gone): dropped at the next report or broker removal unless preallocated.
    unlisted: BTreeSet<String>,
    /// Unlisted bundles found preallocated by a prune: looked at again only when their preallocation ends
    /// (back into `unlisted`), so a prune costs what changed rather than every bundle in flight.
    held: BTreeSet<String>,
    ema_settings: EmaSettings,
    /// Placement's per-broker facts ([`LoadData::report_facts`]); every change of `brokers`' reports drops it.
    facts: FactsCache,
}

impl LoadData {
    /// An empty cluster, with Pulsar's default EMA settings (see [`LoadData::set_ema_settings`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds load data from stored state (a snapshot): reports, bundle data and time averages as given.
    /// Brokers without a time average get one computed from their `lastStats`.
    pub fn from_parts(
        brokers: BTreeMap<String, LocalBrokerData>,
        bundle_data: BTreeMap<String, BundleData>,
        mut time_averages: BTreeMap<String, TimeAverageBrokerData>,
        recently_unloaded: BTreeMap<String, i64>,
    ) -> Self {
        let mut data = LoadData {
            recently_unloaded,
            ..Default::default()
        };
        for (name, bd) in bundle_data {
            data.unlisted.insert(name.clone());
            data.bundles.insert(
                name,
                BundleEntry {
                    data: bd,
                    reporters: 0,
                },
            );
        }
        for (id, local) in brokers {
            for bundle in local.last_stats.keys() {
                if let Some(e) = data.bundles.get_mut(bundle) {
                    e.reporters += 1;
                } else {
                    data.bundles.insert(
                        bundle.clone(),
                        BundleEntry {
                            data: BundleData::default(),
                            reporters: 1,
                        },
                    );
                }
            }
            let time_average = match time_averages.remove(&id) {
                Some(t) => t,
                None => data.compute_time_average(&local),
            };
            let extensible = ExtensibleEma::first(&local, &data.ema_settings);
            data.brokers.insert(
                id,
                BrokerEntry {
                    reported_namespaces: namespace_counts(local.bundles.iter()),
                    local,
                    time_average,
                    preallocated: BTreeSet::new(),
                    preallocated_load: PreallocatedLoad::default(),
                    extensible,
                },
            );
        }
        data
    }

    fn compute_time_average(&self, local: &LocalBrokerData) -> TimeAverageBrokerData {
        let mut t = TimeAverageBrokerData::default();
        t.reset_with(
            local.last_stats.keys(),
            |b| self.bundles.get(b).map(|e| e.data),
            &NamespaceBundleStats::pulsar_default(),
        );
        t
    }

    /// Applies one broker's report (see the module docs) and advances the broker's extensible EMAs by this
    /// report. Cost: O(size of the old and new report).
    pub fn apply_report(&mut self, broker: &str, report: LocalBrokerData, seeds: &dyn SeedSource) {
        self.facts = FactsCache::default();
        let old = self.brokers.remove(broker);
        let extensible = match &old {
            Some(o) => o.extensible.advanced(&report, &self.ema_settings),
            None => ExtensibleEma::first(&report, &self.ema_settings),
        };
        for (bundle, stats) in &report.last_stats {
            let listed_before = old
                .as_ref()
                .is_some_and(|o| o.local.last_stats.contains_key(bundle));
            match self.bundles.get_mut(bundle) {
                Some(e) => {
                    e.data.update(stats);
                    if !listed_before {
                        e.reporters += 1;
                    }
                }
                None => {
                    let mut data = seed_bundle(bundle, seeds);
                    data.update(stats);
                    self.bundles
                        .insert(bundle.clone(), BundleEntry { data, reporters: 1 });
                }
            }
        }
        let mut preallocated = BTreeSet::new();
        let mut old_namespaces = None;
        if let Some(old) = old {
            for bundle in old.local.last_stats.keys() {
                if report.last_stats.contains_key(bundle) {
                    continue;
                }
                if let Some(e) = self.bundles.get_mut(bundle) {
                    e.reporters = e.reporters.saturating_sub(1);
                    if e.reporters == 0 {
                        self.unlisted.insert(bundle.clone());
                    }
                }
            }
            preallocated = old.preallocated;
            if old.local.bundles == report.bundles {
                old_namespaces = Some(old.reported_namespaces);
            }
        }
        // Pulsar drops a preallocation once the broker's report lists the bundle and its data exists.
        let mut ended = Vec::new();
        preallocated.retain(|b| {
            let loaded = report.last_stats.contains_key(b) && self.bundles.contains_key(b);
            if loaded {
                self.preallocated.remove(b);
                ended.push(b.clone());
            }
            !loaded
        });
        for b in ended {
            self.preallocation_ended(&b);
        }
        // Bundles of this report preallocated to another broker (a move in flight) changed data too.
        let others: BTreeSet<String> = report
            .last_stats
            .keys()
            .filter_map(|b| self.preallocated.get(b))
            .filter(|to| to.as_str() != broker)
            .cloned()
            .collect();
        let time_average = self.compute_time_average(&report);
        let reported_namespaces =
            old_namespaces.unwrap_or_else(|| namespace_counts(report.bundles.iter()));
        self.brokers.insert(
            broker.to_owned(),
            BrokerEntry {
                local: report,
                time_average,
                preallocated,
                preallocated_load: PreallocatedLoad::default(),
                reported_namespaces,
                extensible,
            },
        );
        self.refresh_preallocated_load(broker);
        for other in others {
            self.refresh_preallocated_load(&other);
        }
        self.prune_unlisted();
    }

    /// Recomputes what [`LoadData`] keeps from a broker entry changed through [`LoadData::broker_mut`]: its
    /// `reported_namespaces` and [`PreallocatedLoad`]. Cost: O(its bundles and preallocations).
    pub fn recount(&mut self, broker: &str) {
        if let Some(e) = self.brokers.get_mut(broker) {
            e.reported_namespaces = namespace_counts(e.local.bundles.iter());
        }
        self.refresh_preallocated_load(broker);
    }

    /// Recomputes `broker`'s [`PreallocatedLoad`] from its preallocations and their data. Cost: O(its
    /// preallocations).
    fn refresh_preallocated_load(&mut self, broker: &str) {
        let Some(entry) = self.brokers.get(broker) else {
            return;
        };
        let mut load = PreallocatedLoad {
            namespaces: namespace_counts(entry.preallocated.iter()),
            ..Default::default()
        };
        for data in entry
            .preallocated
            .iter()
            .filter_map(|b| self.bundles.get(b).map(|e| &e.data))
        {
            load.topics += data.topics as i64;
            load.long_term_msg_rate += data.long_term_data.total_msg_rate();
        }
        self.brokers
            .get_mut(broker)
            .expect("present")
            .preallocated_load = load;
    }

    /// A bundle is no longer preallocated: if a prune held its data for the preallocation, the next prune
    /// looks at it again.
    fn preallocation_ended(&mut self, bundle: &str) {
        if self.held.remove(bundle) {
            self.unlisted.insert(bundle.to_owned());
        }
    }

    /// Pulsar's "bundle data only for bundles some broker lists" (`updateBundleData`): drops the data of unlisted
    /// bundles that are not preallocated (Pulsar's preallocation keeps its own copy until it goes).
    /// Cost: O(bundles that became unlisted or stopped being preallocated since the last prune).
    fn prune_unlisted(&mut self) {
        let bundles = &mut self.bundles;
        let preallocated = &self.preallocated;
        let held = &mut self.held;
        for b in std::mem::take(&mut self.unlisted) {
            if !bundles.get(&b).is_some_and(|e| e.reporters == 0) {
                continue;
            }
            if preallocated.contains_key(&b) {
                held.insert(b);
                continue;
            }
            bundles.remove(&b);
        }
    }

    /// Sets the weights and history percentage of the extensible EMAs. Brokers whose only sample was taken with
    /// other settings are re-seeded from their report; longer histories and restored values
    /// ([`LoadData::restore_extensible_ema`]) are kept and move with the new settings from the next report on
    /// (as on a Pulsar broker whose dynamic config changed).
    pub fn set_ema_settings(&mut self, settings: &Settings) {
        let new = EmaSettings::from_settings(settings);
        if new == self.ema_settings {
            return;
        }
        self.ema_settings = new;
        for e in self.brokers.values_mut() {
            if e.extensible.samples <= 1 && !e.extensible.restored {
                e.extensible = ExtensibleEma::first(&e.local, &new);
            }
        }
    }

    /// Replaces a known broker's extensible EMAs with values a snapshot carries (what its `BrokerLoadData`
    /// published); the next report advances them. Returns false (and changes nothing) for an unknown broker.
    pub fn restore_extensible_ema(&mut self, broker: &str, ema: ExtensibleEma) -> bool {
        match self.brokers.get_mut(broker) {
            Some(e) => {
                e.extensible = ema;
                true
            }
            None => false,
        }
    }

    /// The settings the extensible EMAs are computed with.
    pub fn ema_settings(&self) -> &EmaSettings {
        &self.ema_settings
    }

    /// One broker's extensible load data (its `updatedAt` is the report's `lastUpdate`, 0 when absent).
    pub fn extensible_load(&self, broker: &str) -> Option<BrokerLoadEma> {
        self.brokers
            .get(broker)
            .map(|e| BrokerLoadEma::of(&e.local, &e.extensible))
    }

    /// Pulsar's full `updateBundleData` pass: one sample for every bundle of every broker's last report, then
    /// every time average recomputed. Cost: O(cluster), one lookup per listed bundle.
    ///
    /// A broker's time average is summed in the same pass, as its bundles are sampled: a bundle only it lists
    /// is final once sampled. A broker that shares a bundle with another (a move in progress) has its average
    /// computed after every sample, as Pulsar does. Either way the sums are the same, in the same order.
    pub fn resample_all(&mut self) {
        let defaults = NamespaceBundleStats::pulsar_default();
        let mut shared = Vec::new();
        for (id, entry) in self.brokers.iter_mut() {
            let mut t = TimeAverageBrokerData::default();
            let mut alone = true;
            for (bundle, stats) in &entry.local.last_stats {
                match self.bundles.get_mut(bundle) {
                    Some(e) => {
                        e.data.update(stats);
                        if e.reporters == 1 {
                            t.add(&e.data);
                        } else {
                            alone = false;
                        }
                    }
                    None => t.add_unknown(&defaults),
                }
            }
            if alone {
                entry.time_average = t;
            } else {
                shared.push(id.clone());
            }
        }
        for id in shared {
            let t = self.compute_time_average(&self.brokers[&id].local);
            self.brokers.get_mut(&id).expect("present").time_average = t;
        }
        let ids: Vec<String> = self.brokers.keys().cloned().collect();
        for id in ids {
            self.refresh_preallocated_load(&id);
        }
    }

    /// Drops a broker that vanished: its bundles lose a reporter, preallocations pointing at it are reaped, and
    /// the data of bundles no broker lists and nobody has preallocated goes.
    pub fn remove_broker(&mut self, broker: &str) -> Option<BrokerEntry> {
        let entry = self.brokers.remove(broker)?;
        self.facts = FactsCache::default();
        for bundle in entry.local.last_stats.keys() {
            if let Some(e) = self.bundles.get_mut(bundle) {
                e.reporters = e.reporters.saturating_sub(1);
                if e.reporters == 0 {
                    self.unlisted.insert(bundle.clone());
                }
            }
        }
        let mut ended = Vec::new();
        self.preallocated.retain(|b, to| {
            let keep = to != broker;
            if !keep {
                ended.push(b.clone());
            }
            keep
        });
        for b in ended {
            self.preallocation_ended(&b);
        }
        self.prune_unlisted();
        Some(entry)
    }

    /// Forgets a bundle that no longer exists — a split parent, which Pulsar's leader drops from its bundle data
    /// as soon as it decides the split (`checkNamespaceBundleSplit` removes it from `loadData.getBundleData()` and
    /// deletes `/loadbalance/bundle-data/<bundle>`; the caller deletes its stored copy). Drops:
    /// * its data, so no modular shedder proposes it and no placement counts it;
    /// * its preallocation (also from the broker entry) and its recently-unloaded entry;
    /// * its `lastStats` entry in every broker's report as the leader holds it, so neither TransferShedder's top
    ///   bundles (Pulsar's owner tombstones its top-bundles data when the split starts) nor split selection see
    ///   it again; those brokers' time averages are recomputed without it. Their bundle sets, counts and totals
    ///   stay as reported until their next report.
    ///
    /// A later report that lists the bundle again brings it back as a new bundle (seeded as usual). Returns its
    /// data, if it had any. Cost: O(brokers + the reports that listed it).
    pub fn remove_bundle(&mut self, bundle: &str) -> Option<BundleData> {
        let data = self.bundles.remove(bundle).map(|e| e.data);
        self.unlisted.remove(bundle);
        self.held.remove(bundle);
        self.recently_unloaded.remove(bundle);
        self.cancel_preallocation(bundle);
        let listing: Vec<String> = self
            .brokers
            .iter()
            .filter(|(_, e)| e.local.last_stats.contains_key(bundle))
            .map(|(id, _)| id.clone())
            .collect();
        for id in listing {
            let entry = self.brokers.get_mut(&id).expect("listed above");
            entry.local.last_stats.remove(bundle);
            let t = self.compute_time_average(&self.brokers[&id].local);
            self.brokers
                .get_mut(&id)
                .expect("listed above")
                .time_average = t;
        }
        data
    }

    /// Keeps only the brokers in `alive` (Pulsar's "drop brokers without a report").
    pub fn retain_brokers(&mut self, alive: &BTreeSet<String>) {
        let gone: Vec<String> = self
            .brokers
            .keys()
            .filter(|b| !alive.contains(*b))
            .cloned()
            .collect();
        for b in gone {
            self.remove_broker(&b);
        }
    }

    /// Records a successful unload at `now` (the grace period starts).
    pub fn record_unload(&mut self, bundle: &str, now: i64) {
        self.recently_unloaded.insert(bundle.to_owned(), now);
    }

    /// Drops recently-unloaded entries older than `now − grace_ms` (Pulsar: timestamp < now − grace).
    pub fn prune_recently_unloaded(&mut self, now: i64, grace_ms: i64) {
        let cutoff = now.saturating_sub(grace_ms);
        self.recently_unloaded.retain(|_, t| *t >= cutoff);
    }

    /// Whether `bundle` was unloaded within the grace period (entries are pruned by the cycle).
    pub fn is_recently_unloaded(&self, bundle: &str) -> bool {
        self.recently_unloaded.contains_key(bundle)
    }

    /// Records that `bundle` was assigned to `broker` and is not reported yet.
    pub fn preallocate(&mut self, bundle: &str, broker: &str) {
        if let Some(old) = self
            .preallocated
            .insert(bundle.to_owned(), broker.to_owned())
        {
            if let Some(e) = self.brokers.get_mut(&old) {
                e.preallocated.remove(bundle);
            }
            if old != broker {
                self.refresh_preallocated_load(&old);
            }
        }
        if let Some(e) = self.brokers.get_mut(broker) {
            e.preallocated.insert(bundle.to_owned());
        }
        self.refresh_preallocated_load(broker);
    }

    /// Ends `bundle`'s preallocation, if any, as if its assignment had never been made (a leader whose record
    /// write failed): its broker's preallocated load no longer counts it, and data only the preallocation kept
    /// is looked at again by the next prune.
    pub fn cancel_preallocation(&mut self, bundle: &str) {
        let Some(broker) = self.preallocated.remove(bundle) else {
            return;
        };
        if let Some(e) = self.brokers.get_mut(&broker) {
            e.preallocated.remove(bundle);
        }
        self.refresh_preallocated_load(&broker);
        self.preallocation_ended(bundle);
    }

    /// Drops every preallocation, and the data of bundles only a preallocation kept (no broker lists them).
    /// Preallocations are leader-only memory in Pulsar (`preallocatedBundleToBroker`, each `BrokerData`'s
    /// preallocated bundle data): a newly elected leader starts without them, so a runtime that keeps its load
    /// data across an election calls this at the election, together with clearing
    /// [`LoadData::recently_unloaded`]. Reports, bundle windows, time averages and extensible EMAs stay (followers
    /// aggregate reports too). Returns how many preallocations were dropped.
    pub fn clear_preallocations(&mut self) -> usize {
        let dropped = self.preallocated.len();
        self.preallocated.clear();
        for e in self.brokers.values_mut() {
            e.preallocated.clear();
            e.preallocated_load = PreallocatedLoad::default();
        }
        let held = std::mem::take(&mut self.held);
        self.unlisted.extend(held);
        self.prune_unlisted();
        dropped
    }

    /// The broker a bundle is preallocated to.
    pub fn preallocation(&self, bundle: &str) -> Option<&str> {
        self.preallocated.get(bundle).map(String::as_str)
    }

    /// The [`ReportFacts`] of every broker, in id order (as [`LoadData::brokers`]), derived with `weights`,
    /// `weights4` and `class`. Built once after any report changed; `None` when the table at hand was built
    /// with other arguments (the caller derives the facts itself).
    pub fn report_facts(
        &self,
        weights: &ResourceWeights,
        weights4: &ResourceWeights,
        class: &str,
    ) -> Option<&[ReportFacts]> {
        let table = self.facts.0.get_or_init(|| FactsTable {
            weights: *weights,
            weights4: *weights4,
            class: class.to_owned(),
            rows: self
                .brokers
                .iter()
                .map(|(id, e)| ReportFacts {
                    host_len: super::policies::broker_host(id).len(),
                    usage4: e.local.max_resource_usage_with_weight(weights4),
                    usage5: e.local.max_resource_usage_with_weight(weights),
                    topics: e.local.num_topics,
                    persistent: e.local.persistent_topics_enabled,
                    non_persistent: e.local.non_persistent_topics_enabled,
                    class_ok: e.local.load_manager_class_name.as_deref() == Some(class),
                    version: e.local.broker_version_string.clone(),
                })
                .collect(),
        });
        (table.weights == *weights && table.weights4 == *weights4 && table.class == class)
            .then_some(table.rows.as_slice())
    }

    /// Brokers in id order.
    pub fn brokers(&self) -> impl Iterator<Item = (&String, &BrokerEntry)> {
        self.brokers.iter()
    }

    /// Broker ids in order.
    pub fn broker_ids(&self) -> BTreeSet<String> {
        self.brokers.keys().cloned().collect()
    }

    /// One broker.
    pub fn broker(&self, id: &str) -> Option<&BrokerEntry> {
        self.brokers.get(id)
    }

    /// Mutable access to one broker's entry (tests and simulators). Its `preallocated_load` and
    /// `reported_namespaces` are kept by [`LoadData`]: change preallocations through [`LoadData::preallocate`],
    /// and call [`LoadData::recount`] after changing the report's `bundles`.
    pub fn broker_mut(&mut self, id: &str) -> Option<&mut BrokerEntry> {
        self.facts = FactsCache::default();
        self.brokers.get_mut(id)
    }

    /// Inserts or replaces a broker entry as is (no aggregation; tests and snapshots); its extensible EMAs start
    /// from this report.
    pub fn insert_broker(&mut self, id: &str, local: LocalBrokerData) {
        self.facts = FactsCache::default();
        let time_average = self.compute_time_average(&local);
        for bundle in local.last_stats.keys() {
            self.bundles
                .entry(bundle.clone())
                .or_insert(BundleEntry {
                    data: BundleData::default(),
                    reporters: 0,
                })
                .reporters += 1;
        }
        let extensible = ExtensibleEma::first(&local, &self.ema_settings);
        self.brokers.insert(
            id.to_owned(),
            BrokerEntry {
                reported_namespaces: namespace_counts(local.bundles.iter()),
                local,
                time_average,
                preallocated: BTreeSet::new(),
                preallocated_load: PreallocatedLoad::default(),
                extensible,
            },
        );
    }

    /// Number of brokers.
    pub fn broker_count(&self) -> usize {
        self.brokers.len()
    }

    /// A bundle's data.
    pub fn bundle(&self, name: &str) -> Option<&BundleData> {
        self.bundles.get(name).map(|e| &e.data)
    }

    /// Sets a bundle's data as is (tests, snapshots, assignments). Data of a bundle that no broker lists and
    /// that is not preallocated is dropped at the next report or broker removal.
    pub fn set_bundle(&mut self, name: &str, data: BundleData) {
        match self.bundles.get_mut(name) {
            Some(e) => e.data = data,
            None => {
                self.bundles
                    .insert(name.to_owned(), BundleEntry { data, reporters: 0 });
                self.unlisted.insert(name.to_owned());
            }
        }
        if let Some(broker) = self.preallocated.get(name).cloned() {
            self.refresh_preallocated_load(&broker);
        }
    }

    /// A bundle's data, or the defaults when unknown (Pulsar's `computeIfAbsent(load-or-default)`).
    pub fn bundle_or_default(&self, name: &str) -> BundleData {
        self.bundle(name).copied().unwrap_or_default()
    }

    /// Number of bundles with data.
    pub fn bundle_count(&self) -> usize {
        self.bundles.len()
    }

    /// All bundle names with data, in no particular order (cheaper than [`LoadData::bundle_names`]).
    pub fn bundle_keys(&self) -> impl Iterator<Item = &String> {
        self.bundles.keys()
    }

    /// All bundle names with data, sorted.
    pub fn bundle_names(&self) -> Vec<&String> {
        let mut v: Vec<&String> = self.bundles.keys().collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(rate_in: f64, topics: i64) -> NamespaceBundleStats {
        NamespaceBundleStats {
            msg_rate_in: rate_in,
            msg_throughput_in: rate_in * 1000.0,
            topics,
            ..Default::default()
        }
    }

    fn report(bundles: &[(&str, f64)]) -> LocalBrokerData {
        let mut r = LocalBrokerData::default();
        let map = bundles
            .iter()
            .map(|(b, rate)| (b.to_string(), stats(*rate, 2)))
            .collect();
        r.update(&Default::default(), map);
        r
    }

    #[test]
    fn a_report_adds_one_sample_to_each_listed_bundle() {
        let mut ld = LoadData::new();
        ld.apply_report(
            "b1:8080",
            report(&[("t/n/a", 100.0), ("t/n/b", 10.0)]),
            &NoSeeds,
        );
        let a = ld.bundle("t/n/a").unwrap();
        // The first sample replaces the defaults.
        assert_eq!(a.short_term_data.num_samples, 1);
        assert_eq!(a.short_term_data.msg_rate_in, 100.0);
        ld.apply_report(
            "b1:8080",
            report(&[("t/n/a", 300.0), ("t/n/b", 10.0)]),
            &NoSeeds,
        );
        let a = ld.bundle("t/n/a").unwrap();
        assert_eq!(a.short_term_data.num_samples, 2);
        assert_eq!(a.short_term_data.msg_rate_in, 200.0);
        assert_eq!(a.long_term_data.msg_rate_in, 200.0);
        let t = ld.broker("b1:8080").unwrap().time_average;
        assert_eq!(t.short_term_msg_rate_in, 210.0);
        assert_eq!(t.long_term_msg_rate_in, 210.0);
    }

    #[test]
    fn new_bundles_are_seeded_stored_then_quota_then_defaults() {
        let mut seeds = StoredSeeds::default();
        let mut stored = BundleData::default();
        stored.short_term_data.num_samples = 10;
        stored.short_term_data.msg_rate_in = 1000.0;
        seeds.bundle_data.insert("t/n/stored".into(), stored);
        seeds
            .quotas
            .insert("t/n/quota".into(), ResourceQuota::pulsar_default());
        assert_eq!(
            seed_bundle("t/n/stored", &seeds)
                .short_term_data
                .msg_rate_in,
            1000.0
        );
        assert_eq!(
            seed_bundle("t/n/quota", &seeds).short_term_data.num_samples,
            10
        );
        assert_eq!(
            seed_bundle("t/n/quota", &seeds).long_term_data.msg_rate_out,
            120.0
        );
        assert_eq!(
            seed_bundle("t/n/other", &seeds).short_term_data.msg_rate_in,
            50.0
        );
        let mut ld = LoadData::new();
        ld.apply_report(
            "b1:8080",
            report(&[("t/n/stored", 0.0), ("t/n/quota", 0.0)]),
            &seeds,
        );
        // Stored window full (10): (9 × 1000 + 0) / 10.
        assert_eq!(
            ld.bundle("t/n/stored").unwrap().short_term_data.msg_rate_in,
            900.0
        );
        // Quota with ample history: (9 × 40 + 0) / 10.
        assert_eq!(
            ld.bundle("t/n/quota").unwrap().short_term_data.msg_rate_in,
            36.0
        );
    }

    #[test]
    fn vanished_bundles_and_brokers_are_dropped() {
        let mut ld = LoadData::new();
        ld.apply_report(
            "b1:8080",
            report(&[("t/n/a", 1.0), ("t/n/b", 1.0)]),
            &NoSeeds,
        );
        ld.apply_report("b2:8080", report(&[("t/n/b", 1.0)]), &NoSeeds);
        ld.apply_report("b1:8080", report(&[("t/n/c", 1.0)]), &NoSeeds);
        assert!(ld.bundle("t/n/a").is_none(), "listed by nobody any more");
        assert!(ld.bundle("t/n/b").is_some(), "still listed by b2");
        ld.remove_broker("b2:8080");
        assert!(ld.bundle("t/n/b").is_none());
        assert_eq!(ld.broker_count(), 1);
        ld.retain_brokers(&BTreeSet::new());
        assert_eq!(ld.bundle_count(), 0);
    }

    #[test]
    fn preallocations_clear_when_reported_and_when_the_broker_dies() {
        let mut ld = LoadData::new();
        ld.apply_report("b1:8080", report(&[]), &NoSeeds);
        ld.apply_report("b2:8080", report(&[]), &NoSeeds);
        ld.preallocate("t/n/x", "b1:8080");
        ld.preallocate("t/n/y", "b2:8080");
        assert_eq!(ld.preallocation("t/n/x"), Some("b1:8080"));
        ld.apply_report("b1:8080", report(&[("t/n/x", 5.0)]), &NoSeeds);
        assert_eq!(ld.preallocation("t/n/x"), None);
        assert!(ld.broker("b1:8080").unwrap().preallocated.is_empty());
        ld.remove_broker("b2:8080");
        assert_eq!(ld.preallocation("t/n/y"), None);
    }

    #[test]
    fn bundle_data_no_broker_lists_is_dropped_once_not_preallocated() {
        // Pulsar's updateBundleData keeps only the bundle data some broker's lastStats lists (the preallocated
        // copy lives on until the preallocation goes).
        let mut ld = LoadData::new();
        ld.apply_report("b1:8080", report(&[("t/n/a", 1.0)]), &NoSeeds);
        ld.apply_report("b2:8080", report(&[]), &NoSeeds);
        // An assignment creates default data and preallocates; the broker dies before it reports the bundle.
        ld.set_bundle("t/n/x", BundleData::default());
        ld.preallocate("t/n/x", "b2:8080");
        ld.apply_report("b1:8080", report(&[("t/n/a", 1.0)]), &NoSeeds);
        assert!(ld.bundle("t/n/x").is_some(), "still preallocated");
        ld.remove_broker("b2:8080");
        assert!(ld.bundle("t/n/x").is_none(), "nobody lists it any more");
        // Stored data of a bundle nobody lists goes at the next report.
        ld.set_bundle("t/n/stored", BundleData::default());
        ld.apply_report("b1:8080", report(&[("t/n/a", 1.0)]), &NoSeeds);
        assert!(ld.bundle("t/n/stored").is_none());
        assert_eq!(ld.bundle_names(), ["t/n/a"]);
        // A preallocated bundle whose last lister drops it keeps its data while preallocated.
        ld.apply_report("b3:8080", report(&[("t/n/y", 1.0)]), &NoSeeds);
        ld.preallocate("t/n/y", "b1:8080");
        ld.apply_report("b3:8080", report(&[]), &NoSeeds);
        assert!(ld.bundle("t/n/y").is_some());
        ld.apply_report(
            "b1:8080",
            report(&[("t/n/a", 1.0), ("t/n/y", 1.0)]),
            &NoSeeds,
        );
        assert_eq!(ld.preallocation("t/n/y"), None);
        assert!(ld.bundle("t/n/y").is_some());
    }

    #[test]
    fn clearing_preallocations_drops_the_data_only_they_kept() {
        let mut ld = LoadData::new();
        ld.apply_report("b1:8080", report(&[("t/n/a", 1.0)]), &NoSeeds);
        ld.apply_report("b2:8080", report(&[]), &NoSeeds);
        // Assigned, not reported yet: data kept by the preallocation only.
        ld.set_bundle("t/n/x", BundleData::default());
        ld.preallocate("t/n/x", "b2:8080");
        // Reported by b1 and preallocated to b2 (a move in flight): the data stays, b1 lists it.
        ld.preallocate("t/n/a", "b2:8080");
        ld.apply_report("b1:8080", report(&[("t/n/a", 1.0)]), &NoSeeds);
        assert!(ld.bundle("t/n/x").is_some());
        assert_eq!(ld.clear_preallocations(), 2);
        assert_eq!(ld.preallocation("t/n/x"), None);
        assert_eq!(ld.preallocation("t/n/a"), None);
        assert!(ld.broker("b2:8080").unwrap().preallocated.is_empty());
        assert!(ld.bundle("t/n/x").is_none());
        assert!(ld.bundle("t/n/a").is_some());
        assert_eq!(ld.broker_count(), 2);
        assert_eq!(ld.clear_preallocations(), 0);
    }

    #[test]
    fn a_removed_bundle_is_forgotten_until_listed_again() {
        let mut ld = LoadData::new();
        ld.apply_report(
            "b1:8080",
            report(&[("t/n/parent", 100.0), ("t/n/other", 10.0)]),
            &NoSeeds,
        );
        ld.apply_report("b2:8080", report(&[("t/n/parent", 1.0)]), &NoSeeds);
        ld.apply_report("b3:8080", report(&[]), &NoSeeds);
        ld.set_bundle("t/n/parent", BundleData::default());
        ld.preallocate("t/n/parent", "b3:8080");
        ld.record_unload("t/n/parent", 1_000);
        let before = ld.broker("b1:8080").unwrap().time_average;
        assert_eq!(before.short_term_msg_rate_in, 100.0 + 10.0);

        assert!(ld.remove_bundle("t/n/parent").is_some());
        assert!(ld.bundle("t/n/parent").is_none());
        assert_eq!(ld.preallocation("t/n/parent"), None);
        assert!(ld.broker("b3:8080").unwrap().preallocated.is_empty());
        assert!(!ld.is_recently_unloaded("t/n/parent"));
        for b in ["b1:8080", "b2:8080"] {
            let e = ld.broker(b).unwrap();
            assert!(!e.local.last_stats.contains_key("t/n/parent"), "{b}");
            // The bundle set stays as reported.
            assert!(e.local.bundles.contains("t/n/parent"), "{b}");
        }
        let after = ld.broker("b1:8080").unwrap().time_average;
        assert_eq!(after.short_term_msg_rate_in, 10.0, "recomputed without it");
        assert_eq!(ld.bundle_names(), ["t/n/other"]);
        assert!(ld.remove_bundle("t/n/parent").is_none(), "already gone");

        // The next reports: b1 without it keeps it gone; b2 listing it again brings it back as a new bundle.
        ld.apply_report("b1:8080", report(&[("t/n/other", 10.0)]), &NoSeeds);
        assert!(ld.bundle("t/n/parent").is_none());
        ld.apply_report("b2:8080", report(&[("t/n/parent", 7.0)]), &NoSeeds);
        let back = ld.bundle("t/n/parent").unwrap();
        assert_eq!(back.short_term_data.num_samples, 1);
        assert_eq!(back.short_term_data.msg_rate_in, 7.0);
        // ... with one reporter: dropped once b2 stops listing it.
        ld.apply_report("b2:8080", report(&[]), &NoSeeds);
        assert!(ld.bundle("t/n/parent").is_none());
    }

    #[test]
    fn grace_period_pruning_and_full_resample() {
        let mut ld = LoadData::new();
        ld.record_unload("t/n/a", 1_000);
        ld.record_unload("t/n/b", 5_000);
        ld.prune_recently_unloaded(10_000, 6_000);
        assert!(!ld.is_recently_unloaded("t/n/a"));
        assert!(ld.is_recently_unloaded("t/n/b"));
        ld.apply_report("b1:8080", report(&[("t/n/a", 10.0)]), &NoSeeds);
        ld.resample_all();
        assert_eq!(ld.bundle("t/n/a").unwrap().short_term_data.num_samples, 2);
    }

    #[test]
    fn a_resample_gives_every_broker_the_average_of_its_bundles_after_every_sample() {
        // b2 lists "t/n/shared" too (a move in progress), and "t/n/gone" has no data: b1's average must see the
        // shared bundle after both samples, as a separate pass over the final data does.
        let mut ld = LoadData::new();
        ld.apply_report(
            "b1:8080",
            report(&[("t/n/a", 10.0), ("t/n/shared", 20.0)]),
            &NoSeeds,
        );
        ld.apply_report(
            "b2:8080",
            report(&[("t/n/shared", 80.0), ("t/n/z", 5.0)]),
            &NoSeeds,
        );
        ld.apply_report("b3:8080", report(&[("t/n/c", 7.0)]), &NoSeeds);
        ld.bundles.remove("t/n/z");
        for _ in 0..3 {
            ld.resample_all();
            for id in ["b1:8080", "b2:8080", "b3:8080"] {
                let entry = &ld.brokers[id];
                assert_eq!(
                    entry.time_average,
                    ld.compute_time_average(&entry.local),
                    "{id}"
                );
            }
        }
        assert_eq!(
            ld.bundle("t/n/shared").unwrap().short_term_data.num_samples,
            8
        );
    }
}
