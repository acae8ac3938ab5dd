//! Assignment records: moves started, completed and re-placed, and the reconciliation of a bundle's record
//! with the facts (who is registered, who holds the ownership node).
//!
//! A record write is visible to the core's own later decisions at once: the record is kept tentatively with
//! its predicted version, and a move's destination is preallocated (as Pulsar preallocates a bundle the moment
//! it selects its broker). Its other effects — the move counted, the grace period started, a completed move
//! awaited in the reports, a request answered — happen when the executor reports it written; none of them
//! is consulted before the next tick, so the decisions on a run of events do not depend on whether each
//! write's outcome came back before the next event. A write that failed restores the record and the
//! preallocation the core knew before (and asks for the record to be read again after a conflict).

use crate::bundle::{BundleName, BundleRange};
use crate::core::placement::{assign_bundle, select_broker, PlacementContext};
use crate::core::{Assignment, Skipped};
use crate::model::records::{AssignmentCause, AssignmentState, BundleAssignment};

use super::requests::Link;
use super::{Command, Leader, Level, Outcome, Pending, Reread, Ticket, Unsettled};
use crate::core::shedding::UnreportedMove;

/// What a record write is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecordKind {
    /// A move started.
    Move,
    /// A move completed (the destination holds the bundle).
    Completed,
    /// An owned bundle adopted as is.
    Adopted,
    /// The `noOverlap` hint withdrawn ([`Leader::clear_overlap_hints`]).
    HintCleared,
}

/// A record write awaiting its outcome, with the record it replaced.
#[derive(Debug)]
pub(super) struct RecordWrite {
    pub(super) record: BundleAssignment,
    pub(super) previous: Option<(BundleAssignment, i64)>,
    /// The bundle's preallocation before a move's write preallocated it to the destination: what a failed
    /// write restores (`None`: not preallocated).
    pub(super) previous_preallocation: Option<String>,
    pub(super) kind: RecordKind,
    pub(super) link: Option<Link>,
}

impl Leader {
    /// Reconciles every bundle with a record or an ownership node (at load).
    pub(super) fn reconcile_all(&mut self, now: i64) {
        let mut bundles: Vec<String> = self
            .records
            .keys()
            .filter(|b| !self.is_settled(b))
            .cloned()
            .collect();
        bundles.extend(
            self.owners
                .keys()
                .filter(|b| !self.records.contains_key(*b))
                .cloned(),
        );
        bundles.sort();
        for b in bundles {
            self.reconcile(now, &b);
        }
    }

    /// Reconciles the bundles last found not settled (retries: moves that do not finish, bundles that could not
    /// be placed, ownership nodes naming no broker). A settled bundle changes only through an event, which
    /// reconciles it, so a tick costs O(unsettled bundles), not O(bundles).
    pub(super) fn reconcile_suspects(&mut self, now: i64) {
        let bundles: Vec<String> = self.suspects.iter().cloned().collect();
        for b in bundles {
            self.reconcile(now, &b);
        }
    }

    /// Whether a bundle's record names a registered broker that holds it, with nothing pending or suspicious:
    /// [`Leader::reconcile`] would do nothing.
    fn is_settled(&self, bundle: &str) -> bool {
        let Some((rec, _)) = self.records.get(bundle) else {
            return false;
        };
        rec.state == AssignmentState::Assigned
            && self.owners.get(bundle).is_some_and(|o| {
                !o.disabled && o.broker == rec.destination && self.registered.contains(&o.broker)
            })
            && !self.ghost_owners.contains_key(bundle)
    }

    /// Brings one bundle's record in line with the facts (see the module docs of [`super`]), and notes whether
    /// it needs another look at the next tick.
    pub(super) fn reconcile(&mut self, now: i64, bundle: &str) {
        self.reconcile_one(now, bundle);
        self.note_suspect(bundle);
    }

    /// Keeps [`Leader::reconcile_suspects`]' set: a bundle with a record or an owner that is not settled.
    pub(super) fn note_suspect(&mut self, bundle: &str) {
        let known = self.records.contains_key(bundle) || self.owners.contains_key(bundle);
        if known && !self.is_settled(bundle) {
            if !self.suspects.contains(bundle) {
                self.suspects.insert(bundle.to_owned());
            }
        } else {
            self.suspects.remove(bundle);
        }
    }

    fn reconcile_one(&mut self, now: i64, bundle: &str) {
        if self.write_pending(bundle) {
            return;
        }
        let owner = self.owners.get(bundle).cloned();
        if let Some(o) = &owner {
            self.check_owner_is_a_broker(now, bundle, o);
        }
        let Some((rec, _)) = self.records.get(bundle).cloned() else {
            if let Some(o) = owner {
                if !o.disabled && self.registered.contains(&o.broker) && self.bundle_exists(bundle)
                {
                    let reason = format!("{} owned it without a loadmgr record", o.broker);
                    let record = BundleAssignment {
                        bundle: bundle.to_owned(),
                        destination: o.broker.clone(),
                        state: AssignmentState::Assigned,
                        source: None,
                        cause: AssignmentCause::Adopted,
                        reason,
                        leader: self.id.clone(),
                        created_ms: now,
                        updated_ms: now,
                        unload_after_acquire: false,
                        no_overlap: false,
                    };
                    self.write_record(record, RecordKind::Adopted, None);
                }
            }
            return;
        };
        if owner.is_none() && !self.bundle_exists(bundle) {
            // A split parent left behind (or a namespace that went away).
            return;
        }
        if !self.registered.contains(&rec.destination) {
            let (cause, why) = match rec.state {
                AssignmentState::Assigned => (
                    AssignmentCause::Orphan,
                    format!("owner {} is gone", rec.destination),
                ),
                AssignmentState::Assigning => (
                    AssignmentCause::Replaced,
                    format!(
                        "destination {} of the unfinished {} move is gone",
                        rec.destination,
                        rec.cause.name()
                    ),
                ),
            };
            self.reassign(now, bundle, cause, &why);
            return;
        }
        let held_by_destination = owner
            .as_ref()
            .is_some_and(|o| o.broker == rec.destination && !o.disabled);
        if rec.state == AssignmentState::Assigning && held_by_destination {
            if rec.unload_after_acquire {
                self.place_split_child(now, &rec);
            } else {
                self.mark_assigned(now, bundle);
            }
            return;
        }
        if rec.state == AssignmentState::Assigning {
            let age = now - rec.created_ms;
            let limit = self.settings.namespace_bundle_unloading_timeout_ms;
            let holder = owner.as_ref().map_or("-", |o| o.broker.as_str()).to_owned();
            if age > limit && holder == "-" {
                // Nobody holds it and the destination did not take it in time: another destination.
                let why = format!(
                    "destination {} did not take it within namespaceBundleUnloadingTimeoutMs ({limit} ms)",
                    rec.destination
                );
                match self.choose_other(now, bundle, &rec.destination) {
                    Ok((dest, reason)) if self.registered.contains(&dest) => {
                        let reason = format!("{why}; {reason}");
                        self.start_move(
                            now,
                            bundle,
                            &dest,
                            AssignmentCause::Replaced,
                            reason,
                            None,
                        );
                    }
                    _ => {
                        if self.warned.insert(format!("{bundle}@{}", rec.created_ms)) {
                            self.log(
                                Level::Warn,
                                format!("{bundle}: {why}, and no other broker can take it"),
                            );
                        }
                    }
                }
            } else if age > limit && self.warned.insert(format!("{bundle}@{}", rec.created_ms)) {
                self.log(
                    Level::Warn,
                    format!(
                        "move of {bundle} to {} still unfinished after {age} ms (namespaceBundleUnloadingTimeoutMs {limit}); owner now {holder}",
                        rec.destination
                    ),
                );
            }
        }
    }

    /// An ownership node naming a broker that is not registered is no owner: after the session timeout (the
    /// longest a real owner's registration can be missing while its session lives), the leader asks for the node
    /// to be deleted so the bundle can be placed.
    fn check_owner_is_a_broker(&mut self, now: i64, bundle: &str, o: &super::OwnerSeen) {
        if self.registered.contains(&o.broker) {
            self.ghost_owners.remove(bundle);
            return;
        }
        let seen = self
            .ghost_owners
            .entry(bundle.to_owned())
            .or_insert((o.broker.clone(), now));
        if seen.0 != o.broker {
            *seen = (o.broker.clone(), now);
        }
        let since = seen.1;
        let grace = self.settings.metadata_store_session_timeout_millis.max(0);
        if now - since >= grace {
            let why = format!(
                "its ownership node names {}, which has not been a registered broker for {} ms",
                if o.broker.is_empty() {
                    "no broker"
                } else {
                    o.broker.as_str()
                },
                now - since
            );
            self.log(Level::Warn, format!("{bundle}: {why}; deleting the node"));
            self.emit(Command::DeleteOwnership {
                bundle: bundle.to_owned(),
                owner: o.broker.clone(),
                why,
            });
            self.ghost_owners.remove(bundle);
        }
    }

    /// Whether a record write of `bundle` awaits its outcome.
    fn write_pending(&self, bundle: &str) -> bool {
        self.pending_records.contains_key(bundle)
    }

    /// Asks for a record write (create-only when none is known, else compare-and-set on the known version).
    /// The record, and for a move its destination's preallocation, are visible to the core's later decisions
    /// at once: what the core decides does not depend on when the outcome comes back, so an executor may hand
    /// it many events before their writes' outcomes (the runtime does, for notifications that queued up
    /// together) and decide as the simulator, which hands back each outcome at once.
    pub(super) fn write_record(
        &mut self,
        record: BundleAssignment,
        kind: RecordKind,
        link: Option<Link>,
    ) -> Ticket {
        let bundle = record.bundle.clone();
        let previous = self.records.get(&bundle).cloned();
        let expected_version = previous.as_ref().map(|(_, v)| *v);
        let ticket = self.ticket();
        self.emit(Command::WriteRecord {
            ticket,
            record: record.clone(),
            expected_version,
        });
        self.records.insert(
            bundle.clone(),
            (record.clone(), expected_version.map_or(0, |v| v + 1)),
        );
        self.note_suspect(&bundle);
        let previous_preallocation = self.load.preallocation(&bundle).map(str::to_owned);
        // A lookup's placement preallocated it already: refreshing the broker's sums again is O(its
        // preallocations) for nothing.
        if kind == RecordKind::Move
            && previous_preallocation.as_deref() != Some(record.destination.as_str())
            && self.load.broker(&record.destination).is_some()
        {
            self.load.preallocate(&bundle, &record.destination);
        }
        *self.pending_records.entry(bundle.clone()).or_insert(0) += 1;
        self.pending.insert(
            ticket,
            Pending::Record(Box::new(RecordWrite {
                record,
                previous,
                previous_preallocation,
                kind,
                link,
            })),
        );
        ticket
    }

    /// The outcome of a record write.
    pub(super) fn record_done(&mut self, now: i64, w: RecordWrite, outcome: Outcome) {
        let bundle = w.record.bundle.clone();
        match outcome {
            Outcome::Written(versions) => {
                let version = versions.first().copied();
                if let Some((rec, v)) = self.records.get_mut(&bundle) {
                    if *rec == w.record {
                        if let Some(version) = version {
                            *v = version;
                        }
                    }
                }
                self.record_written(now, &w);
                if let Some(link) = w.link {
                    self.link_done(link, Ok(()));
                }
            }
            failure => {
                let destination = Some(w.record.destination.as_str());
                if w.kind == RecordKind::Move
                    && w.previous_preallocation.as_deref() != destination
                    && self.load.preallocation(&bundle) == destination
                {
                    match &w.previous_preallocation {
                        Some(broker) => self.load.preallocate(&bundle, broker),
                        None => self.load.cancel_preallocation(&bundle),
                    }
                }
                match w.previous.clone() {
                    Some(mut p) => {
                        // A withdrawn `noOverlap` hint stays withdrawn for the record's next write (its
                        // completion), though this write failed.
                        if w.kind == RecordKind::HintCleared {
                            p.0.no_overlap = false;
                        }
                        self.records.insert(bundle.clone(), p);
                    }
                    None => {
                        self.records.remove(&bundle);
                    }
                }
                self.note_suspect(&bundle);
                let why = match failure {
                    Outcome::Conflict => {
                        self.log(
                            Level::Warn,
                            format!("the record of {bundle} changed meanwhile; re-reading it"),
                        );
                        self.emit(Command::Reread(Reread::Record(bundle.clone())));
                        "the record changed meanwhile; retry".to_owned()
                    }
                    Outcome::Failed(e) => {
                        self.log(Level::Warn, format!("writing the record of {bundle}: {e}"));
                        format!("the assignment could not be written ({e}); retry")
                    }
                    Outcome::Written(_) => unreachable!("handled above"),
                };
                if let Some(link) = w.link {
                    self.link_done(link, Err(format!("{bundle}: {why}")));
                }
            }
        }
    }

    fn record_written(&mut self, now: i64, w: &RecordWrite) {
        let rec = &w.record;
        let bundle = rec.bundle.as_str();
        let message = match w.kind {
            RecordKind::Move => {
                self.status.moves_started += 1;
                if rec.cause.starts_grace_period() {
                    self.load.record_unload(bundle, rec.created_ms);
                }
                format!("move started: {}", rec.reason)
            }
            RecordKind::Completed => {
                self.status.moves_completed += 1;
                // A later move of the bundle stands for it: the earlier one's brokers no longer tell. (Looked
                // up first: a lookup storm completes a move per bundle, and all of them are unsettled until the
                // next reports, so a scan at every completion cost O(bundles) each.)
                if !self.unsettled_bundles.insert(bundle.to_owned()) {
                    self.unsettled.retain(|u| u.bundle != bundle);
                }
                self.unsettled.push(Unsettled {
                    bundle: bundle.to_owned(),
                    // A split child stays on its parent's owner: only the destination must list it.
                    source: rec.source.clone().filter(|s| *s != rec.destination),
                    destination: rec.destination.clone(),
                    at: now,
                    // Kept even when placement put it back into the load data: a report of any broker drops
                    // an unlisted bundle's data once its preallocation ends.
                    last_data: self.gone_data.remove(bundle),
                });
                self.warned.remove(&format!("{bundle}:unplaceable"));
                if rec.cause.starts_grace_period() {
                    self.load.record_unload(bundle, now);
                }
                format!("move completed in {} ms", now - rec.created_ms)
            }
            RecordKind::Adopted => format!("record written: {}", rec.reason),
            RecordKind::HintCleared => format!("overlap hint withdrawn: {}", rec.reason),
        };
        if self.wants(Level::Info) {
            self.emit(Command::Log {
                level: Level::Info,
                message,
                record: Some(Box::new(rec.clone())),
            });
        }
    }

    /// Starts a move of `bundle` to `destination`.
    pub(super) fn start_move(
        &mut self,
        now: i64,
        bundle: &str,
        destination: &str,
        cause: AssignmentCause,
        reason: String,
        link: Option<Link>,
    ) -> Ticket {
        // The owner now; for a bundle whose owner died, the owner the previous record named.
        let previous = self.records.get(bundle).map(|(r, _)| match r.state {
            AssignmentState::Assigned => Some(r.destination.clone()),
            AssignmentState::Assigning => r.source.clone(),
        });
        let source = self
            .owners
            .get(bundle)
            .map(|o| o.broker.clone())
            .or(previous.flatten())
            .filter(|o| o != destination);
        let record = BundleAssignment {
            bundle: bundle.to_owned(),
            destination: destination.to_owned(),
            state: AssignmentState::Assigning,
            source,
            cause,
            reason,
            leader: self.id.clone(),
            created_ms: now,
            updated_ms: now,
            unload_after_acquire: false,
            no_overlap: self.overlap_free(bundle),
        };
        self.write_record(record, RecordKind::Move, link)
    }

    /// Placement's choice for an unowned bundle (preallocation, filters, strategy), drawing the next
    /// placement stream.
    pub(super) fn place(&mut self, bundle: &str) -> Result<Assignment, Skipped> {
        let mut rng = self.assignment_rng();
        // A gone broker's bundle has no data left in the load data, and Pulsar places it as a default bundle.
        // A placement that weighs traffic gets what the leader kept of it instead: counted as the mean bundle,
        // a hot orphan lands as if it were an average one.
        if self.strategies.placement.strategy.weighs_last_known_data()
            && self.load.bundle(bundle).is_none()
        {
            if let Some(d) = self.gone_data.get(bundle) {
                self.load.set_bundle(bundle, *d);
            }
        }
        assign_bundle(
            &mut self.load,
            &self.settings,
            &self.policies,
            &mut self.strategies.placement,
            bundle,
            &mut rng,
        )
    }

    /// Places a bundle whose record's destination is gone.
    fn reassign(&mut self, now: i64, bundle: &str, cause: AssignmentCause, why: &str) {
        let placed = self.place(bundle);
        match placed {
            Ok(a) if self.registered.contains(&a.broker) => {
                self.start_move(
                    now,
                    bundle,
                    &a.broker,
                    cause,
                    format!("{why}; {}", a.reason),
                    None,
                );
            }
            Ok(a) => match self.choose_other(now, bundle, &a.broker) {
                Ok((dest, reason)) if self.registered.contains(&dest) => {
                    self.start_move(now, bundle, &dest, cause, format!("{why}; {reason}"), None);
                }
                _ => {
                    let line = format!(
                        "{bundle}: {why}, and placement chose {} which is not registered; retrying later",
                        a.broker
                    );
                    self.log(Level::Warn, line);
                }
            },
            Err(skipped) => {
                if self.warned.insert(format!("{bundle}:unplaceable")) {
                    let line = format!(
                        "{bundle}: {why}, and it cannot be placed now: {}; retrying when brokers change",
                        skipped.reason
                    );
                    self.log(Level::Warn, line);
                }
            }
        }
    }

    fn mark_assigned(&mut self, now: i64, bundle: &str) {
        let Some((mut rec, _)) = self.records.get(bundle).cloned() else {
            return;
        };
        rec.state = AssignmentState::Assigned;
        rec.updated_ms = now;
        rec.unload_after_acquire = false;
        // The hint is kept as placement set it, for a later acquisition by the same destination (after it
        // restarted): the record lives only while the bundle is one of its namespace's (a split deletes it in
        // the same write that changes the bundles), so only an older range can overlap it later, and a node of
        // one that the leader sees clears the hint, in flight or done ([`Leader::clear_overlap_hints`]).
        // Dropped here, a full restart of 1,000 brokers cost a listing of a namespace's ownership nodes per
        // bundle (100,000 ranges on etcd); worked out again here, the namespace's scan at every completion took
        // a tenth of the leader's thread in a lookup storm.
        self.write_record(rec, RecordKind::Completed, None);
    }

    /// An ownership node of `owned`, a range that is not one of its namespace's bundles (a split parent left
    /// behind, or a node restored by a store for a session that held it before the split): every record of an
    /// overlapping bundle that says `noOverlap` is written again without it, so that its destination lists
    /// the namespace's ownership nodes before it acquires. O(records of the namespace), and only for such
    /// nodes.
    pub(super) fn clear_overlap_hints(&mut self, owned: &str) {
        if self.bundle_exists(owned) {
            return;
        }
        let Ok(name) = BundleName::parse(owned) else {
            return;
        };
        let range = name.range();
        let prefix = format!("{}/", name.namespace());
        let hinted: Vec<BundleAssignment> = in_namespace(&self.records, &prefix)
            .filter(|(k, (r, _))| {
                r.no_overlap
                    && *k != owned
                    && BundleRange::parse(&k[prefix.len()..]).is_ok_and(|r| r.overlaps(&range))
            })
            .map(|(_, (r, _))| r.clone())
            .collect();
        for mut rec in hinted {
            rec.no_overlap = false;
            rec.reason = format!("{}; {owned} is owned too", rec.reason);
            self.write_record(rec, RecordKind::HintCleared, None);
        }
    }

    /// Whether this leader knows of no ownership node and no record of another range of `bundle`'s namespace
    /// that overlaps it ([`BundleAssignment::no_overlap`]). A broker creates an ownership node only for a
    /// record that names it, and every record is this leader's (or was loaded by it), so a node that overlaps
    /// can only be one this leader sees, or one of a range it holds a record of. Cost: O(bundles of the
    /// namespace), in memory, instead of a listing of the namespace's ownership nodes by the destination.
    fn overlap_free(&self, bundle: &str) -> bool {
        let Ok(name) = BundleName::parse(bundle) else {
            return false;
        };
        let range = name.range();
        let prefix = format!("{}/", name.namespace());
        let owned = in_namespace(&self.owners, &prefix).map(|(k, _)| k);
        let recorded = in_namespace(&self.records, &prefix).map(|(k, _)| k);
        let overlapped = owned
            .chain(recorded)
            .filter(|k| *k != bundle)
            .any(|k| BundleRange::parse(&k[prefix.len()..]).map_or(true, |r| r.overlaps(&range)));
        !overlapped
    }

    /// A broker other than `source` for `bundle`, and why (placement, retried without `source` when it chose
    /// it).
    pub(super) fn choose_other(
        &mut self,
        now: i64,
        bundle: &str,
        source: &str,
    ) -> Result<(String, String), String> {
        let mut rng = self.assignment_rng();
        let first = {
            let ctx =
                PlacementContext::new(&self.load, &self.settings, &self.policies).with_now(now);
            select_broker(
                &ctx,
                &mut self.strategies.placement,
                bundle,
                None,
                Some(source),
                &mut rng,
            )
        };
        if let Ok(sel) = first {
            if sel.broker != source {
                return Ok((sel.broker, sel.reason));
            }
        }
        let mut without = self.load.clone();
        without.remove_broker(source);
        if without.broker_count() == 0 {
            return Err(format!("no broker other than {source} is available"));
        }
        let ctx = PlacementContext::new(&without, &self.settings, &self.policies).with_now(now);
        select_broker(
            &ctx,
            &mut self.strategies.placement,
            bundle,
            None,
            Some(source),
            &mut rng,
        )
        .map(|s| (s.broker, s.reason))
    }

    /// A split child now held by the parent's owner: place it anew (`loadBalancerAutoUnloadSplitBundlesEnabled`
    /// or an operator's `unload`), or keep it where it is when placement says so.
    fn place_split_child(&mut self, now: i64, rec: &BundleAssignment) {
        match self.choose_other(now, &rec.bundle, &rec.destination) {
            Ok((dest, why)) if self.registered.contains(&dest) => {
                let reason = format!(
                    "{}; child placed anew from {}: {why}",
                    rec.reason, rec.destination
                );
                self.start_move(
                    now,
                    &rec.bundle,
                    &dest,
                    AssignmentCause::Split,
                    reason,
                    None,
                );
            }
            Ok(_) | Err(_) => self.mark_assigned(now, &rec.bundle),
        }
    }

    /// Whether the last moves are visible in the reports: nothing in flight, and every completed move listed by
    /// its destination's report and gone from its source's (or the broker is gone, the bundle split again, or
    /// the move completed more than a shedding interval and a report check ago).
    ///
    /// With `corrected` (the strategy corrects the reports by the moves they do not show yet), only moves in
    /// flight make it wait, and the completed moves not reported yet are returned for the strategy, until the
    /// reports show them or `loadBalancerReportUpdateMaxIntervalMinutes` and a report check have passed.
    pub(super) fn settled(
        &mut self,
        now: i64,
        corrected: bool,
    ) -> Result<Vec<UnreportedMove>, String> {
        // A record in flight is never settled, so it is among the suspects (every change of a record notes it).
        let in_flight = self
            .suspects
            .iter()
            .filter(|b| {
                self.records
                    .get(*b)
                    .is_some_and(|(r, _)| r.state == AssignmentState::Assigning)
            })
            .count();
        debug_assert_eq!(
            in_flight,
            self.records
                .values()
                .filter(|(r, _)| r.state == AssignmentState::Assigning)
                .count(),
            "every move in flight is a suspect"
        );
        // A broker writes its report only when its load changed by more than
        // `loadBalancerReportUpdateThresholdPercentage` (or every `loadBalancerReportUpdateMaxIntervalMinutes`): a
        // destination that has not reported a shedding interval and a report check after the move changed by less
        // than that, so its last report is close enough. Waiting for the maximum interval instead stalled shedding
        // for up to 16 minutes while splits kept completing moves (found by the simulator).
        //
        // A strategy that corrects the reports is not held up by an unsettled move, so its corrections last until
        // the reports show the move, or until a report must have been written since (every
        // `loadBalancerReportUpdateMaxIntervalMinutes`): a source that gave away a few bundles may not rewrite its
        // report for that long, and without the correction it looked as loaded as before, so a plan three
        // minutes later moved bundles off it again (found by the simulator, diurnal).
        let overdue = if corrected {
            self.settings.report_max_interval().as_millis() as i64
                + self.settings.report_check_interval().as_millis() as i64
        } else {
            self.settings.shedding_interval().as_millis() as i64
                + self.settings.report_check_interval().as_millis() as i64
        };
        // The data kept for orphans is wanted only while their moves are in flight.
        let records = &self.records;
        self.gone_data.retain(|b, _| {
            records
                .get(b)
                .is_some_and(|(r, _)| r.state == AssignmentState::Assigning)
        });
        // A bundle split again since its move is not waited for.
        let gone: Vec<bool> = self
            .unsettled
            .iter()
            .map(|u| !self.bundle_exists(&u.bundle))
            .collect();
        let mut gone = gone.into_iter();
        let load = &self.load;
        let mut unreported = Vec::new();
        let listed = &mut self.unsettled_bundles;
        self.unsettled.retain(|u| {
            let split_since = gone.next().unwrap_or(false);
            let lists = |broker: &str| {
                load.broker(broker)
                    .map(|e| e.local.last_stats.contains_key(&u.bundle))
            };
            let dest_ok = lists(&u.destination) != Some(false);
            let source_ok = u.source.as_deref().map_or(true, |s| lists(s) != Some(true));
            let reported = dest_ok && source_ok;
            let waiting = !split_since && !reported && now - u.at <= overdue;
            if waiting && corrected {
                unreported.push(UnreportedMove {
                    bundle: u.bundle.clone(),
                    still_listed_by: u.source.clone().filter(|_| !source_ok),
                    not_yet_listed_by: (!dest_ok).then(|| u.destination.clone()),
                    last_data: u.last_data,
                });
            }
            if !waiting {
                listed.remove(&u.bundle);
            }
            waiting
        });
        if corrected && in_flight == 0 {
            return Ok(unreported);
        }
        if in_flight > 0 || !self.unsettled.is_empty() {
            let first = self
                .unsettled
                .first()
                .map(|u| format!(" (first: {} to {})", u.bundle, u.destination))
                .unwrap_or_default();
            return Err(format!(
                "{in_flight} move(s) in flight, {} completed move(s) not reported yet{first}",
                self.unsettled.len()
            ));
        }
        Ok(Vec::new())
    }

    /// Why a bundle cannot be moved off `source` now.
    pub(super) fn move_blocker(&self, bundle: &str, source: &str) -> Option<String> {
        if let Some((r, _)) = self.records.get(bundle) {
            if r.state == AssignmentState::Assigning {
                return Some(format!("already moving to {}", r.destination));
            }
        }
        match self.owners.get(bundle) {
            Some(o) if o.broker == source && !o.disabled => None,
            Some(o) => Some(format!("owned by {} now", o.broker)),
            None => Some("not owned now".to_owned()),
        }
    }
}

/// The entries of `map` (keyed by bundle name) of the namespace whose names start with `prefix`
/// (`tenant/namespace/`), in order.
fn in_namespace<'a, V>(
    map: &'a std::collections::BTreeMap<String, V>,
    prefix: &'a str,
) -> impl Iterator<Item = (&'a str, &'a V)> {
    use std::ops::Bound;
    map.range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
        .take_while(move |(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.as_str(), v))
}
