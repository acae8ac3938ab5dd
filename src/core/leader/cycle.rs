//! The shedding tick and splits (the automatic check and operators' requests).

use crate::bundle::{
    format_hash, parse_hash, BundleName, NamespaceBundles, SplitAlgorithm, SplitOutcome,
};
use rand::rngs::StdRng;

use crate::core::plan::{Plan, SplitDecision};
use crate::core::random::{stream_rng, Stream};
use crate::core::run_leader_shedding_cycle;
use crate::core::split::find_bundles_to_split;
use crate::model::records::{AssignmentCause, AssignmentState, BundleAssignment};
use crate::model::BundleData;

use super::{
    Command, FlushedNode, Leader, Level, NamespaceBundlesInfo, Outcome, Pending, RequestId, Reread,
    SplitWrite, Tick, Ticket,
};

/// A split to carry out.
#[derive(Debug, Clone)]
pub(super) struct SplitRequest {
    pub(super) bundle: String,
    pub(super) owner: String,
    pub(super) algorithm: SplitAlgorithm,
    /// For `specified_positions_divide`.
    pub(super) positions: Vec<u64>,
    pub(super) unload_children: bool,
    pub(super) reason: String,
    /// The operator's request it answers, if any.
    pub(super) request: Option<RequestId>,
}

/// A split batch awaiting its outcome, with what to restore when it fails.
#[derive(Debug)]
pub(super) struct PendingSplit {
    plan: SplitRequest,
    namespace: String,
    before: NamespaceBundlesInfo,
    parent_record: Option<(BundleAssignment, i64)>,
    children: Vec<String>,
    child_data: Option<BundleData>,
}

/// Divides a parent's windows evenly among `n` children (sample counts kept), so the children start from a
/// realistic estimate instead of the 50 msg/s defaults.
pub(super) fn divide(data: &BundleData, n: usize) -> BundleData {
    let k = n.max(1) as f64;
    let mut d = *data;
    for w in [&mut d.short_term_data, &mut d.long_term_data] {
        w.msg_rate_in /= k;
        w.msg_rate_out /= k;
        w.msg_throughput_in /= k;
        w.msg_throughput_out /= k;
    }
    d.topics = (data.topics as f64 / k).ceil() as _;
    d
}

impl Leader {
    /// One shedding tick. The k-th tick of the term (from 0, deferred ticks included) draws from
    /// `stream_rng(seed, Shedding, k)`: the stream of a cycle depends only on its time, election + (k + 1) × the
    /// shedding interval.
    pub(super) fn shedding_tick(&mut self, now: i64) {
        let mut rng = stream_rng(self.seed, Stream::Shedding, self.shedding_ticks);
        self.shedding_ticks += 1;
        self.status.shedding_cycles += 1;
        if let Err(why) = self.cycle_when_settled(now, &mut rng, false) {
            self.log(
                Level::Debug,
                format!("shedding waits for the last moves to show in the reports: {why}"),
            );
        }
        self.reconcile_suspects(now);
        self.emit(Command::CollectRequests);
        self.arm_early_cycle(now);
    }

    /// Asks for an early cycle when the strategy wants one and none is due yet.
    pub(super) fn arm_early_cycle(&mut self, now: i64) {
        if self.early_due.is_some() {
            return;
        }
        let Some(after) = self.strategies.shedder.wants_early_cycle(&self.settings) else {
            return;
        };
        let at = now + after.as_millis() as i64;
        self.early_due = Some(at);
        self.emit(Command::Wake {
            at,
            tick: Tick::EarlyShedding,
        });
    }

    /// An early shedding cycle ([`Tick::EarlyShedding`]): run when the strategy still wants it and the last
    /// moves show in the reports, else asked for again. It draws from `stream_rng(seed, EarlyShedding, now)`,
    /// leaving the regular ticks' streams as they were.
    pub(super) fn early_shedding_tick(&mut self, now: i64) {
        self.early_due = None;
        if self
            .strategies
            .shedder
            .wants_early_cycle(&self.settings)
            .is_none()
        {
            return;
        }
        let mut rng = stream_rng(self.seed, Stream::EarlyShedding, now.max(0) as u64);
        match self.cycle_when_settled(now, &mut rng, true) {
            Ok(()) => self.status.shedding_cycles += 1,
            Err(why) => self.log(
                Level::Debug,
                format!("the early shedding cycle waits for the last moves to show in the reports: {why}"),
            ),
        }
        self.arm_early_cycle(now);
    }

    /// Runs a cycle and starts its moves unless the last moves must show in the reports first
    /// ([`Leader::settled`]); `Err` says what it waits for.
    fn cycle_when_settled(
        &mut self,
        now: i64,
        rng: &mut StdRng,
        early: bool,
    ) -> Result<(), String> {
        let corrected = self.strategies.shedder.corrects_unreported_moves();
        let unreported = self.settled(now, corrected)?;
        let plan = run_leader_shedding_cycle(
            &mut self.load,
            &self.settings,
            &self.policies,
            &mut self.strategies,
            now,
            rng,
            early,
            &unreported,
        );
        self.apply_shedding_plan(now, plan);
        Ok(())
    }

    /// Starts the moves of a shedding plan that still apply.
    fn apply_shedding_plan(&mut self, now: i64, plan: Plan) {
        if self.wants(Level::Debug) {
            for s in &plan.skipped {
                self.log(
                    Level::Debug,
                    format!("shedding: {}: {}", s.subject, s.reason),
                );
            }
        }
        for u in plan.unloads {
            let Some(dest) = u.destination.clone() else {
                let line = format!(
                    "shedding proposal for {} without destination not applied: {}",
                    u.bundle, u.reason
                );
                self.log(Level::Info, line);
                continue;
            };
            if let Some(blocker) = self.move_blocker(&u.bundle, &u.source) {
                let line = format!(
                    "shedding proposal for {} not applied ({blocker}): {}",
                    u.bundle, u.reason
                );
                self.log(Level::Info, line);
                continue;
            }
            if !self.registered.contains(&dest) {
                let line = format!(
                    "shedding proposal for {} not applied (destination {dest} is not registered): {}",
                    u.bundle, u.reason
                );
                self.log(Level::Info, line);
                continue;
            }
            self.start_move(
                now,
                &u.bundle,
                &dest,
                AssignmentCause::Shedding,
                u.reason,
                None,
            );
        }
        self.start_splits(now, plan.splits);
    }

    /// The automatic split check ([`super::Tick::SplitCheck`]).
    pub(super) fn split_tick(&mut self, now: i64) {
        self.split_due = None;
        if !self.settings.load_balancer_auto_bundle_split_enabled {
            return;
        }
        let plan = find_bundles_to_split(
            &self.load,
            &self.settings,
            &self.policies,
            &Default::default(),
        );
        if self.wants(Level::Debug) {
            for s in &plan.skipped {
                self.log(Level::Debug, format!("split: {}: {}", s.subject, s.reason));
            }
        }
        self.start_splits(now, plan.splits);
    }

    /// Starts the splits decided by the split check or a shedding strategy that still apply.
    fn start_splits(&mut self, now: i64, splits: Vec<SplitDecision>) {
        for d in splits {
            if self.move_blocker(&d.bundle, &d.broker).is_some() || self.split_pending(&d.bundle) {
                continue;
            }
            let Ok(algorithm) = d.algorithm.parse::<SplitAlgorithm>() else {
                continue;
            };
            let req = SplitRequest {
                bundle: d.bundle.clone(),
                owner: d.broker.clone(),
                algorithm,
                positions: Vec::new(),
                unload_children: d.unload_children,
                reason: d.reason.clone(),
                request: None,
            };
            if d.boundaries.is_empty() {
                self.ask_split_points(req);
            } else {
                let points: Vec<u64> = d
                    .boundaries
                    .iter()
                    .filter_map(|b| parse_hash(b).ok())
                    .collect();
                self.apply_split(now, req, points);
            }
        }
    }

    /// Whether the owner has been asked for `bundle`'s split points and has not answered yet.
    fn split_pending(&self, bundle: &str) -> bool {
        self.pending
            .values()
            .any(|p| matches!(p, Pending::SplitPoints(r) if r.bundle == bundle))
    }

    /// Topic-based algorithms need the owner's topics: ask the owner (possibly this leader).
    pub(super) fn ask_split_points(&mut self, plan: SplitRequest) {
        let ticket = self.ticket();
        self.emit(Command::AskSplitPoints {
            ticket,
            bundle: plan.bundle.clone(),
            owner: plan.owner.clone(),
            algorithm: plan.algorithm,
            positions: plan.positions.clone(),
        });
        self.pending
            .insert(ticket, Pending::SplitPoints(Box::new(plan)));
    }

    pub(super) fn on_split_points(
        &mut self,
        now: i64,
        ticket: Ticket,
        result: Result<Vec<u64>, String>,
    ) {
        let Some(Pending::SplitPoints(plan)) = self.pending.remove(&ticket) else {
            return;
        };
        match result {
            Ok(points) => self.apply_split(now, *plan, points),
            Err(e) => {
                self.log(Level::Info, format!("no split of {}: {e}", plan.bundle));
                self.answer_split(plan.request, Err(format!("no split: {e}")));
            }
        }
    }

    fn answer_split(
        &mut self,
        request: Option<RequestId>,
        result: Result<(String, serde_json::Value), String>,
    ) {
        if let Some(id) = request {
            self.answer(id, result);
        }
    }

    fn check_split(
        &self,
        plan: &SplitRequest,
        points: &[u64],
    ) -> Result<(String, NamespaceBundlesInfo, NamespaceBundles, Vec<String>), String> {
        let bundle = &plan.bundle;
        let name = BundleName::parse(bundle).map_err(|e| e.to_string())?;
        let ns = name.namespace().to_string();
        let info = self
            .namespaces
            .get(&ns)
            .ok_or_else(|| format!("namespace {ns} is unknown"))?;
        if !info.bundles.contains_range(name.range()) {
            return Err(format!("{bundle} is not a bundle of {ns} any more"));
        }
        if let Some(b) = self.move_blocker(bundle, &plan.owner) {
            return Err(format!("{bundle} cannot be split now: {b}"));
        }
        let new_bundles = info
            .bundles
            .split(name.range(), points)
            .map_err(|e| e.to_string())?;
        // An automatic split is checked against the quota again: the split check or a strategy may have planned
        // it while another split of the namespace waited for its owner's split points. The rule is the split
        // check's: allowed while the namespace has fewer bundles than the quota (a split into more than two may
        // so end above it, as in Pulsar). An operator's split is not bound by the quota, as in Pulsar.
        let max_bundles = self.settings.load_balancer_namespace_maximum_bundles.max(0) as usize;
        if plan.request.is_none() && info.bundles.len() >= max_bundles {
            return Err(format!(
                "namespace {ns} has {} bundles >= loadBalancerNamespaceMaximumBundles {max_bundles}",
                info.bundles.len()
            ));
        }
        let children: Vec<String> = SplitOutcome::Split(points.to_vec())
            .children(name.range())
            .into_iter()
            .map(|r| BundleName::new(name.namespace().clone(), r).to_string())
            .collect();
        Ok((ns, info.clone(), new_bundles, children))
    }

    /// Asks for a split in one fenced batch (see [`SplitWrite`]); the namespace's new bundles and the children's
    /// records are visible to the core's later decisions at once.
    pub(super) fn apply_split(&mut self, now: i64, plan: SplitRequest, points: Vec<u64>) {
        let (ns, before, new_bundles, children) = match self.check_split(&plan, &points) {
            Ok(c) => c,
            Err(e) => {
                self.log(Level::Info, format!("no split of {}: {e}", plan.bundle));
                self.answer_split(plan.request, Err(e));
                return;
            }
        };
        let bundle = plan.bundle.clone();
        let mut local = before.local.clone();
        local.bundles = new_bundles.to_bundles_data();
        let reason = format!(
            "split of {bundle} at {}: {}",
            points
                .iter()
                .map(|p| format_hash(*p))
                .collect::<Vec<_>>()
                .join(", "),
            plan.reason
        );
        let child_records: Vec<BundleAssignment> = children
            .iter()
            .map(|c| BundleAssignment {
                bundle: c.clone(),
                destination: plan.owner.clone(),
                state: AssignmentState::Assigning,
                source: Some(plan.owner.clone()),
                cause: AssignmentCause::Split,
                reason: reason.clone(),
                leader: self.id.clone(),
                created_ms: now,
                updated_ms: now,
                unload_after_acquire: plan.unload_children,
                no_overlap: false,
            })
            .collect();
        let parent_record = self.records.get(&bundle).cloned();
        let child_data = self.load.bundle(&bundle).map(|d| divide(d, children.len()));
        let write = SplitWrite {
            parent: bundle.clone(),
            namespace: ns.clone(),
            local: local.clone(),
            expected_local_version: before.local_version,
            parent_record: parent_record.as_ref().map(|(_, v)| (bundle.clone(), *v)),
            child_records: child_records.clone(),
            parent_data: self
                .stored_bundle_data
                .contains(&bundle)
                .then(|| bundle.clone()),
            child_data: child_data
                .map(|d| children.iter().map(|c| (c.clone(), d)).collect())
                .unwrap_or_default(),
        };
        let ticket = self.ticket();
        self.emit(Command::Split {
            ticket,
            write: Box::new(write),
            reason: reason.clone(),
        });
        // Visible at once: the namespace's bundles and the children's records.
        let mut after = before.clone();
        after.bundles = new_bundles;
        after.local = local;
        after.local_version = Some(before.local_version.map_or(0, |v| v + 1));
        self.namespaces.insert(ns.clone(), after);
        self.rebuild_policies();
        self.records.remove(&bundle);
        self.note_suspect(&bundle);
        for r in child_records {
            let child = r.bundle.clone();
            self.records.insert(child.clone(), (r, 0));
            self.note_suspect(&child);
        }
        self.pending.insert(
            ticket,
            Pending::Split(Box::new(PendingSplit {
                plan,
                namespace: ns,
                before,
                parent_record,
                children,
                child_data,
            })),
        );
    }

    pub(super) fn split_done(&mut self, s: PendingSplit, outcome: Outcome) {
        let bundle = s.plan.bundle.clone();
        match outcome {
            Outcome::Written(versions) => {
                if let (Some(v), Some(info)) =
                    (versions.first(), self.namespaces.get_mut(&s.namespace))
                {
                    info.local_version = Some(*v);
                }
                for (i, c) in s.children.iter().enumerate() {
                    if let (Some(v), Some((_, known))) =
                        (versions.get(1 + i), self.records.get_mut(c))
                    {
                        *known = *v;
                    }
                }
                if self.stored_bundle_data.remove(&bundle) {
                    self.flushed
                        .remove(&FlushedNode::BundleData(bundle.clone()));
                }
                // The parent is forgotten at once, as Pulsar's leader does when it splits a bundle: no strategy
                // proposes it again, even before its old owner's next report.
                self.load.remove_bundle(&bundle);
                self.seeds.bundle_data.remove(&bundle);
                if let Some(d) = s.child_data {
                    for c in &s.children {
                        self.seeds.bundle_data.insert(c.clone(), d);
                        self.load.set_bundle(c, d);
                        self.stored_bundle_data.insert(c.clone());
                        self.flushed.insert(
                            FlushedNode::BundleData(c.clone()),
                            super::FlushedValue::BundleData(d),
                        );
                    }
                }
                self.status.splits += 1;
                let line = format!(
                    "split {bundle} on {} into {}{}: {}",
                    s.plan.owner,
                    s.children.join(", "),
                    if s.plan.unload_children {
                        " (children placed anew)"
                    } else {
                        ""
                    },
                    s.plan.reason
                );
                self.log(Level::Info, line);
                let message = format!("split {bundle} into {}", s.children.join(", "));
                self.answer_split(s.plan.request, Ok((message, serde_json::json!(s.children))));
            }
            failure => {
                self.namespaces.insert(s.namespace.clone(), s.before);
                self.rebuild_policies();
                for c in &s.children {
                    self.records.remove(c);
                    self.note_suspect(c);
                }
                if let Some(p) = s.parent_record {
                    self.records.insert(bundle.clone(), p);
                }
                self.note_suspect(&bundle);
                let why = match failure {
                    Outcome::Conflict => {
                        self.emit(Command::Reread(Reread::Namespace(s.namespace.clone())));
                        self.emit(Command::Reread(Reread::Record(bundle.clone())));
                        format!(
                            "the bundles of {} or the record of {bundle} changed meanwhile; try again",
                            s.namespace
                        )
                    }
                    Outcome::Failed(e) => format!("splitting {bundle}: {e}"),
                    Outcome::Written(_) => unreachable!("handled above"),
                };
                self.log(Level::Warn, format!("no split of {bundle}: {why}"));
                self.answer_split(s.plan.request, Err(why));
            }
        }
    }
}
