//! Loading, aggregation of reports, brokers coming and going, namespaces, policies and settings.

use std::collections::{BTreeMap, BTreeSet};

use crate::bundle::BundleName;
use crate::config::Settings;
use crate::model::records::AssignmentState;
use crate::model::LocalBrokerData;

use super::io::namespace_policy;
use super::{
    ClusterPolicyData, Command, FlushedNode, FlushedValue, Leader, Level, LoadedState,
    NamespaceBundlesInfo, Tick, SPLIT_CHECK_PERIOD_MS,
};

impl Leader {
    /// A new leader's full read, then every record reconciled and the status written.
    pub(super) fn on_loaded(&mut self, now: i64, state: LoadedState) {
        for (bundle, data) in state.bundle_data {
            if let Some(d) = data {
                self.seeds.bundle_data.insert(bundle.clone(), d);
                self.flushed.insert(
                    FlushedNode::BundleData(bundle.clone()),
                    FlushedValue::BundleData(d),
                );
            }
            self.stored_bundle_data.insert(bundle);
        }
        for (bundle, quota) in state.quotas {
            self.seeds.quotas.insert(bundle, quota);
        }
        for (broker, value) in state.time_averages {
            if let Some(v) = value {
                self.flushed.insert(
                    FlushedNode::TimeAverage(broker.clone()),
                    FlushedValue::TimeAverage(v),
                );
            }
            self.stored_time_averages.insert(broker);
        }
        for info in state.namespaces {
            self.namespaces.insert(info.namespace.to_string(), info);
        }
        self.rebuild_policies();
        for (broker, report) in state.reports {
            if report.is_ok() {
                self.registered.insert(broker.clone());
            }
            self.apply(&broker, report);
        }
        // What the store tells of the recent past: when each live broker started, and which brokers the
        // records name that are gone (a broker restarted before this leader took over).
        let active = self.load.broker_ids();
        let starts: BTreeMap<String, i64> = active
            .iter()
            .filter_map(|b| Some((b.clone(), self.load.broker(b)?.local.start_timestamp?)))
            .collect();
        let gone: BTreeSet<String> = state
            .records
            .iter()
            .map(|(rec, _)| &rec.destination)
            .filter(|b| !active.contains(*b))
            .cloned()
            .collect();
        self.strategies.on_takeover(&starts, &gone, now);
        self.strategies.on_active_brokers_change(&active, now);
        let grace_ms = self.grace_ms();
        for (rec, version) in state.records {
            if rec.cause.starts_grace_period() && now - rec.updated_ms <= grace_ms {
                self.load.record_unload(&rec.bundle, rec.updated_ms);
            }
            if let Some(source) = rec
                .source
                .as_deref()
                .filter(|_| rec.cause.starts_grace_period())
            {
                self.strategies
                    .shedder
                    .on_past_move(&rec.bundle, source, rec.created_ms);
            }
            if rec.state == AssignmentState::Assigning
                && self.load.broker(&rec.destination).is_some()
            {
                self.load.preallocate(&rec.bundle, &rec.destination);
            }
            self.records.insert(rec.bundle.clone(), (rec, version));
        }
        for (bundle, owner) in state.owners {
            self.owners.insert(bundle, owner);
        }
        // Hints a previous leader wrote, against the nodes of older ranges found now.
        let stale: Vec<String> = self
            .owners
            .keys()
            .filter(|b| !self.bundle_exists(b))
            .cloned()
            .collect();
        for bundle in stale {
            self.clear_overlap_hints(&bundle);
        }
        if let Some(c) = state.cluster {
            self.on_cluster_policies(c);
        }
        self.log(
            Level::Info,
            format!(
                "leader state loaded: {} broker(s), {} record(s), {} owned bundle(s), {} namespace(s), {} stored bundle data",
                self.load.broker_count(),
                self.records.len(),
                self.owners.len(),
                self.namespaces.len(),
                self.stored_bundle_data.len()
            ),
        );
        self.reconcile_all(now);
        self.status.updated_ms = now;
        self.emit(Command::WriteStatus(self.status.clone()));
    }

    /// Applies one report (or counts a malformed one); `true` when the broker is new to the load data.
    fn apply(&mut self, broker: &str, report: Result<LocalBrokerData, String>) -> bool {
        match report {
            Ok(r) => {
                let new_broker = self.load.broker(broker).is_none();
                self.load.apply_report(broker, r, &self.seeds);
                self.status.reports_applied += 1;
                new_broker
            }
            Err(why) => {
                self.status.malformed_reports += 1;
                let n = self.status.malformed_reports;
                self.log(
                    Level::Warn,
                    format!("malformed broker report skipped ({n} so far): {broker}: {why}"),
                );
                false
            }
        }
    }

    /// A registration node's content. Only a valid report makes a broker registered: a node whose content is
    /// not a report (or not a live broker's, see [`super::Event::Report`]) is no broker, and placement never
    /// names it. A registered broker whose node later holds something else keeps its last report.
    pub(super) fn on_report(
        &mut self,
        now: i64,
        broker: &str,
        report: Result<LocalBrokerData, String>,
    ) {
        let malformed = report.is_err();
        let joined = report.is_ok()
            && !self.registered.contains(broker)
            && self.registered.insert(broker.to_owned());
        if self.apply(broker, report) {
            self.log(Level::Info, format!("broker {broker} joined"));
            self.strategies
                .on_active_brokers_change(&self.load.broker_ids(), now);
            // A strategy that acts on a new broker without waiting for cycles asks for an early one.
            self.arm_early_cycle(now);
        }
        if malformed {
            // Worth an operator's attention at once, not with the next flush that has bundle data to write
            // (which may be long: a flush with nothing changed writes nothing).
            self.status.updated_ms = now;
            self.emit(Command::WriteStatus(self.status.clone()));
        }
        if joined {
            // Records waiting for any broker can now be placed (they are all unsettled: a settled bundle does
            // not change when a broker joins).
            self.reconcile_suspects(now);
        }
        if self.settings.load_balancer_auto_bundle_split_enabled && self.split_due.is_none() {
            let at = now.div_euclid(SPLIT_CHECK_PERIOD_MS) * SPLIT_CHECK_PERIOD_MS
                + if now.rem_euclid(SPLIT_CHECK_PERIOD_MS) == 0 {
                    0
                } else {
                    SPLIT_CHECK_PERIOD_MS
                };
            self.split_due = Some(at);
            self.emit(Command::Wake {
                at,
                tick: Tick::SplitCheck,
            });
        }
    }

    pub(super) fn on_broker_gone(&mut self, now: i64, broker: &str) {
        let was_registered = self.registered.remove(broker);
        // Its bundles' data goes with it when no other broker lists them; a correcting strategy still needs
        // it for the orphans' moves until their destinations report them.
        if let Some(e) = self.load.broker(broker) {
            for b in e.local.last_stats.keys() {
                if let Some(d) = self.load.bundle(b) {
                    self.gone_data.insert(b.clone(), *d);
                }
            }
        }
        let had_report = self.load.remove_broker(broker).is_some();
        if !was_registered && !had_report {
            return;
        }
        self.log(
            Level::Warn,
            format!("broker {broker} left: its registration vanished"),
        );
        self.strategies
            .on_active_brokers_change(&self.load.broker_ids(), now);
        if self.stored_time_averages.contains(broker) {
            self.delete_flushed(
                FlushedNode::TimeAverage(broker.to_owned()),
                "the broker is gone".into(),
            );
        }
        let affected: Vec<String> = self
            .records
            .iter()
            .filter(|(_, (r, _))| r.destination == broker)
            .map(|(b, _)| b.clone())
            .collect();
        if !affected.is_empty() {
            self.log(
                Level::Info,
                format!(
                    "reassigning {} bundle(s) of the gone broker {broker}",
                    affected.len()
                ),
            );
        }
        for b in affected {
            self.reconcile(now, &b);
        }
    }

    pub(super) fn on_namespace(&mut self, namespace: &str, info: Option<NamespaceBundlesInfo>) {
        match info {
            Some(i) => {
                self.namespaces.insert(namespace.to_owned(), i);
            }
            None => {
                self.namespaces.remove(namespace);
            }
        }
        self.rebuild_policies();
    }

    pub(super) fn on_cluster_policies(&mut self, data: ClusterPolicyData) {
        let changed = self.policies.isolation.len() != data.isolation.len()
            || self.policies.domains != data.domains;
        self.policies.isolation = data.isolation;
        self.policies.domains = data.domains;
        if changed {
            self.log(
                Level::Info,
                format!(
                    "cluster policies loaded: {} isolation polic(ies), {} broker(s) in failure domains",
                    self.policies.isolation.len(),
                    self.policies.domains.len()
                ),
            );
        }
    }

    pub(super) fn on_settings(&mut self, settings: Settings) {
        self.load.set_ema_settings(&settings);
        self.settings = settings;
    }

    pub(super) fn rebuild_policies(&mut self) {
        self.policies.namespaces = self
            .namespaces
            .iter()
            .map(|(ns, info)| (ns.clone(), namespace_policy(info)))
            .collect();
    }

    /// Whether `bundle` is one of its namespace's current bundles (true when the namespace is unknown).
    pub(super) fn bundle_exists(&self, bundle: &str) -> bool {
        let Ok(name) = BundleName::parse(bundle) else {
            return false;
        };
        match self.namespaces.get(&name.namespace().to_string()) {
            Some(info) => info.bundles.contains_range(name.range()),
            None => true,
        }
    }

    pub(super) fn grace_ms(&self) -> i64 {
        self.settings
            .load_balancer_shedding_grace_period_minutes
            .saturating_mul(60_000)
    }
}
