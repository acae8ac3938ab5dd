//! Commands of the core into fenced store batches, answers and log lines. A write's outcome goes back to the
//! core as [`Event::Done`]; a rejected fence or a closed store stops the leader.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use futures::StreamExt;

use crate::bundle::format_hash;
use crate::core::leader::{
    Command, Event, FlushedNode, FlushedValue, Level, Outcome, Reread, SplitWrite, Ticket,
};
use crate::model::json::to_json_vec;
use crate::model::records::{
    AdminRequest, AssignmentCause, AssignmentState, BundleAssignment, RequestOp, RequestResponse,
};
use crate::paths;
use crate::runtime::meters::FlushSample;
use crate::store::{CreateOptions, Error, MetadataStoreExt, Op, OpResult, CREATE_ONLY};

use super::{inbox, load, Executor, OpenRequest, SplitPointsAnswer, Step, Stop};

/// Record writes ready for the store: per record its ticket, the record and the inbox entries it leaves, and
/// its batch ([`Executor::prepare_records`]).
pub(super) struct PreparedRecords {
    pub(super) records: Vec<(Ticket, BundleAssignment, BTreeSet<String>)>,
    pub(super) batches: Vec<Vec<Op>>,
}

/// Record writes combined into one fenced batch ([`Executor::write_combined`]).
const RECORDS_PER_MULTI: usize = 16;

/// Answered requests are removed after this long; unanswered ones (the asker gave up) after the second.
const ANSWERED_TTL_MS: i64 = 60_000;
const UNANSWERED_TTL_MS: i64 = 600_000;
/// Deletes of expired request nodes in flight at once.
const DELETES_IN_FLIGHT: usize = 64;

fn node_path(node: &FlushedNode) -> String {
    match node {
        FlushedNode::BundleData(b) => paths::bundle_data(b),
        FlushedNode::TimeAverage(b) => paths::time_average(b),
    }
}

/// The versions of the puts of a batch, in order.
fn put_versions(results: &[OpResult]) -> Vec<i64> {
    results
        .iter()
        .filter_map(|r| match r {
            OpResult::Put(stat) => Some(stat.version),
            _ => None,
        })
        .collect()
}

fn split_ops(w: &SplitWrite) -> Vec<Op> {
    let mut ops = vec![Op::Put {
        path: paths::local_policies(&w.namespace),
        value: to_json_vec(&w.local),
        expected_version: Some(w.expected_local_version.unwrap_or(CREATE_ONLY)),
        options: CreateOptions::PERSISTENT,
    }];
    if let Some((parent, v)) = &w.parent_record {
        ops.push(Op::Delete {
            path: paths::assignment(parent),
            expected_version: Some(*v),
        });
    }
    for r in &w.child_records {
        ops.push(Op::Put {
            path: paths::assignment(&r.bundle),
            value: to_json_vec(r),
            expected_version: Some(CREATE_ONLY),
            options: CreateOptions::PERSISTENT,
        });
    }
    if let Some(parent) = &w.parent_data {
        ops.push(Op::delete(paths::bundle_data(parent)));
    }
    for (c, d) in &w.child_data {
        ops.push(Op::put(paths::bundle_data(c), to_json_vec(d)));
    }
    ops
}

impl Executor {
    /// Maps a store error: fenced or closed stops the loop, anything else is logged.
    pub(super) fn soft(&self, e: Error, what: &str) -> Step {
        match e {
            Error::Fenced { .. } => Err(Stop::Fenced),
            Error::Closed => Err(Stop::Closed),
            e => {
                tracing::warn!(leader = %self.sh.broker_id, "{what}: {e}");
                Ok(())
            }
        }
    }

    /// A fenced batch's outcome for the core.
    pub(super) async fn batch(&mut self, ops: Vec<Op>, deleting: bool) -> Step<Outcome> {
        Self::fenced(&self.election, ops, deleting).await
    }

    /// The store batch of each record write (the record and its inbox entries, see `inbox`), from what this
    /// leader knows of the entries now: no write of the same bundles may be in flight.
    pub(super) fn prepare_records(&self, writes: Vec<Command>) -> PreparedRecords {
        let mut records = Vec::with_capacity(writes.len());
        let mut batches = Vec::with_capacity(writes.len());
        for c in writes {
            let Command::WriteRecord {
                ticket,
                record,
                expected_version,
            } = c
            else {
                unreachable!("prepare_records takes record writes only");
            };
            let record_json = to_json_vec(&record);
            let entry_value = inbox::entry_value(&self.sh.store, &record_json);
            let record_op = Op::Put {
                path: paths::assignment(&record.bundle),
                value: record_json,
                expected_version: Some(expected_version.unwrap_or(CREATE_ONLY)),
                options: CreateOptions::PERSISTENT,
            };
            // The brokers' inbox entries change in the same batch (see `inbox`).
            let wanted = inbox::wanted(&record);
            let notify = record.state == AssignmentState::Assigning;
            let mut ops = vec![record_op];
            ops.extend(inbox::ops(
                &record.bundle,
                self.entries.get(&record.bundle),
                &wanted,
                notify,
                &entry_value,
            ));
            batches.push(ops);
            records.push((ticket, record, wanted));
        }
        PreparedRecords { records, batches }
    }

    /// Writes prepared record batches, [`RECORDS_PER_MULTI`] per fenced batch, all in flight together (a record
    /// of a combined batch that failed is written again on its own, so one conflict costs no other record its
    /// write), without borrowing the executor: the outcome of each, in order.
    pub(super) async fn write_prepared(
        election: &crate::coordination::LeaderElection,
        batches: Vec<Vec<Op>>,
    ) -> Step<Vec<Outcome>> {
        let combined = Self::write_combined(election, &batches).await?;
        // The records of failed combined batches, each on its own, all in flight together.
        let mut alone = futures::future::join_all(
            combined
                .iter()
                .zip(&batches)
                .filter(|(outcome, _)| outcome.is_none())
                .map(|(_, ops)| Self::fenced(election, ops.clone(), false)),
        )
        .await
        .into_iter();
        let mut outcomes = Vec::with_capacity(batches.len());
        for (outcome, ops) in combined.into_iter().zip(batches) {
            let mut outcome = match outcome {
                Some(outcome) => outcome,
                None => alone.next().expect("one per failed record")?,
            };
            if matches!(outcome, Outcome::Failed(_))
                && ops.iter().any(|o| matches!(o, Op::Delete { .. }))
            {
                // An entry this leader believed in is gone (deleted by hand): write without the deletes.
                let puts: Vec<Op> = ops
                    .into_iter()
                    .filter(|o| !matches!(o, Op::Delete { .. }))
                    .collect();
                outcome = Self::fenced(election, puts, false).await?;
            }
            outcomes.push(outcome);
        }
        Ok(outcomes)
    }

    /// Notes what the outcomes of prepared records show written (meters, inbox entries): the core's events.
    pub(super) fn finish_records(
        &mut self,
        records: Vec<(Ticket, BundleAssignment, BTreeSet<String>)>,
        outcomes: Vec<Outcome>,
    ) -> Vec<Event> {
        let mut events = Vec::with_capacity(records.len());
        for ((ticket, record, wanted), outcome) in records.into_iter().zip(outcomes) {
            if let Outcome::Written(_) = outcome {
                self.count_record(&record);
                self.entries_written(&record.bundle, wanted);
            }
            events.push(Event::Done { ticket, outcome });
        }
        events
    }

    /// Writes the records' batches [`RECORDS_PER_MULTI`] to one fenced batch, all in flight together: the
    /// outcome of each record whose combined batch was written, `None` for the records of a combined batch
    /// that failed (a conflict of one fails all of it), to be written again each on its own. On ZooKeeper a
    /// batch is one transaction, so a lookup storm costs the server a transaction per
    /// [`RECORDS_PER_MULTI`] records instead of one each.
    async fn write_combined(
        election: &crate::coordination::LeaderElection,
        batches: &[Vec<Op>],
    ) -> Step<Vec<Option<Outcome>>> {
        let groups: Vec<&[Vec<Op>]> = batches.chunks(RECORDS_PER_MULTI).collect();
        let results = futures::future::join_all(groups.iter().map(|group| {
            let ops: Vec<Op> = group.iter().flatten().cloned().collect();
            election.fenced_batch(ops)
        }))
        .await;
        let mut outcomes = Vec::with_capacity(batches.len());
        for (group, result) in groups.into_iter().zip(results) {
            match result {
                Ok(results) => {
                    let mut rest = results.as_slice();
                    for ops in group {
                        let (mine, after) = rest.split_at(ops.len().min(rest.len()));
                        outcomes.push(Some(Outcome::Written(put_versions(mine))));
                        rest = after;
                    }
                }
                Err(Error::Fenced { .. }) => return Err(Stop::Fenced),
                Err(Error::Closed) => return Err(Stop::Closed),
                Err(_) => outcomes.extend(group.iter().map(|_| None)),
            }
        }
        Ok(outcomes)
    }

    /// A fenced batch's outcome for the core (see [`Executor::batch`]), without borrowing the executor.
    async fn fenced(
        election: &crate::coordination::LeaderElection,
        ops: Vec<Op>,
        deleting: bool,
    ) -> Step<Outcome> {
        match election.fenced_batch(ops).await {
            Ok(results) => Ok(Outcome::Written(put_versions(&results))),
            Err(Error::NotFound { .. }) if deleting => Ok(Outcome::Written(Vec::new())),
            Err(Error::BadVersion { .. }) | Err(Error::AlreadyExists { .. }) => {
                Ok(Outcome::Conflict)
            }
            Err(Error::Fenced { .. }) => Err(Stop::Fenced),
            Err(Error::Closed) => Err(Stop::Closed),
            Err(e) => Ok(Outcome::Failed(e.to_string())),
        }
    }

    /// Counts a record written: a move started (and, for shedding, the unloaded bundle and its source), or a
    /// move completed with its duration.
    fn count_record(&mut self, record: &BundleAssignment) {
        let m = &self.sh.meters;
        let cause = crate::runtime::meters::CauseLabels {
            cause: record.cause.name().to_owned(),
        };
        match record.state {
            AssignmentState::Assigning => {
                m.moves_started.get_or_create(&cause).inc();
                if record.cause == AssignmentCause::Shedding {
                    m.unload_bundles.inc();
                    let cycle = self.core.shedding_ticks();
                    if let Some(source) = &record.source {
                        if self.unloaded_sources.insert((cycle, source.clone())) {
                            m.unload_brokers.inc();
                        }
                        self.unloaded_sources.retain(|(c, _)| *c == cycle);
                    }
                }
            }
            AssignmentState::Assigned => {
                m.moves_completed.get_or_create(&cause).inc();
                if record.cause != AssignmentCause::Adopted {
                    let ms = (record.updated_ms - record.created_ms).max(0);
                    m.move_duration.observe(ms as f64 / 1000.0);
                }
            }
        }
    }

    /// Executes one command other than a record write (those go in runs, see `writes`); the event to give the
    /// core next, if any (a write's outcome).
    pub(super) async fn execute(&mut self, c: Command) -> Step<Option<Event>> {
        let id = self.sh.broker_id.clone();
        match c {
            Command::WriteRecord { .. } => {
                unreachable!("record writes go to the store in runs (`writes`), not one by one")
            }
            Command::Flush {
                ticket,
                writes,
                status,
            } => {
                if writes.is_empty() {
                    // Nothing changed: the flush writes nothing (the status follows with the next change).
                    self.sh.meters.recent.flush(FlushSample {
                        nodes: 0,
                        bytes: 0,
                        duration: std::time::Duration::ZERO,
                        wrote: false,
                    });
                    return Ok(Some(Event::Done {
                        ticket,
                        outcome: Outcome::Written(Vec::new()),
                    }));
                }
                // Serialised and written beside the other events (a first flush of 100,000 new nodes takes
                // seconds, and 10,000 changed values take tens of ms to serialise); the outcome comes back
                // through `flushed_rx`, and the core skips flushes until it has.
                let election = self.election.clone();
                let sh = self.sh.clone();
                let done = self.flushed_tx.clone();
                self.background.spawn(async move {
                    // On a thread of its own, even where the leader's runtime has one thread.
                    let serialise = move || {
                        let mut ops: Vec<Op> = writes
                            .iter()
                            .map(|(node, value)| {
                                let bytes = match value {
                                    FlushedValue::BundleData(d) => to_json_vec(d),
                                    FlushedValue::TimeAverage(t) => to_json_vec(t),
                                };
                                Op::put(node_path(node), bytes)
                            })
                            .collect();
                        let nodes = ops.len();
                        let bytes: usize = ops.iter().map(Op::value_len).sum();
                        ops.push(Op::put(paths::LEADER_STATUS, to_json_vec(&status)));
                        (ops, nodes, bytes)
                    };
                    let Ok((ops, nodes, bytes)) = tokio::task::spawn_blocking(serialise).await
                    else {
                        // Serialising a value cannot fail; only a panic in it gets here.
                        let _ = done.send((
                            ticket,
                            Ok(Outcome::Failed("serialising the flush failed".into())),
                        ));
                        return;
                    };
                    let started = tokio::time::Instant::now();
                    let outcome = Self::fenced(&election, ops, false).await;
                    let took = started.elapsed();
                    sh.meters.flush_duration.observe(took.as_secs_f64());
                    if let Ok(Outcome::Written(_)) = outcome {
                        sh.meters.flush_nodes.inc_by(nodes as u64);
                        sh.meters.recent.flush(FlushSample {
                            nodes,
                            bytes,
                            duration: took,
                            wrote: true,
                        });
                    }
                    let _ = done.send((ticket, outcome));
                });
                Ok(None)
            }
            Command::Delete { ticket, node, why } => {
                let path = node_path(&node);
                let outcome = self.batch(vec![Op::delete(path.clone())], true).await?;
                if let Outcome::Written(_) = outcome {
                    tracing::info!(leader = %id, "deleted {path}: {why}");
                }
                Ok(Some(Event::Done { ticket, outcome }))
            }
            Command::Split {
                ticket,
                write,
                reason,
            } => {
                tracing::debug!(leader = %id, "writing {reason}");
                // The parent's entries go with its record; the children's destinations are told.
                let mut ops = split_ops(&write);
                let mut entries = Vec::new();
                if write.parent_record.is_some() {
                    ops.extend(inbox::ops(
                        &write.parent,
                        self.entries.get(&write.parent),
                        &Default::default(),
                        false,
                        &[],
                    ));
                    entries.push((write.parent.clone(), Default::default()));
                }
                for child in &write.child_records {
                    let wanted = inbox::wanted(child);
                    ops.extend(inbox::ops(
                        &child.bundle,
                        self.entries.get(&child.bundle),
                        &wanted,
                        true,
                        &inbox::entry_value(&self.sh.store, &to_json_vec(child)),
                    ));
                    entries.push((child.bundle.clone(), wanted));
                }
                let outcome = self.batch(ops, false).await?;
                if let Outcome::Written(_) = outcome {
                    self.sh.meters.splits.inc();
                    for (bundle, wanted) in entries {
                        self.entries_written(&bundle, wanted);
                    }
                }
                Ok(Some(Event::Done { ticket, outcome }))
            }
            Command::AskSplitPoints {
                ticket,
                bundle,
                owner,
                algorithm,
                positions,
            } => {
                self.ask_split_points(
                    ticket,
                    bundle,
                    owner,
                    algorithm.name().to_owned(),
                    positions,
                );
                Ok(None)
            }
            Command::Answer { id: rid, answer } => {
                if let Some(reply) = self.local_open.remove(&rid) {
                    let _ = reply.send(answer);
                } else if let Some(open) = self.open.remove(&rid) {
                    self.write_answer(&open, answer.ok, answer.message, answer.result)
                        .await?;
                }
                Ok(None)
            }
            Command::WriteStatus(status) => {
                let op = Op::put(paths::LEADER_STATUS, to_json_vec(&status));
                match self.election.fenced_batch(vec![op]).await {
                    Ok(_) => {}
                    Err(e) => self.soft(e, "writing the leader status")?,
                }
                Ok(None)
            }
            Command::Reread(Reread::Record(bundle)) => self.record_event(&bundle).await,
            Command::Reread(Reread::Namespace(ns)) => self.namespace_event(&ns).await,
            Command::DeleteOwnership { bundle, owner, why } => {
                self.delete_ownership(&bundle, &owner, &why).await?;
                Ok(None)
            }
            Command::CollectRequests => {
                self.collect_requests().await?;
                Ok(None)
            }
            Command::Wake { at, tick } => {
                self.wakes.insert((at, tick));
                Ok(None)
            }
            Command::Log {
                level,
                message,
                record: None,
            } => {
                match level {
                    Level::Debug => tracing::debug!(leader = %id, "{message}"),
                    Level::Info => tracing::info!(leader = %id, "{message}"),
                    Level::Warn => tracing::warn!(leader = %id, "{message}"),
                }
                Ok(None)
            }
            Command::Log {
                message,
                record: Some(r),
                ..
            } => {
                tracing::info!(
                    leader = %id,
                    bundle = %r.bundle,
                    source = r.source.as_deref().unwrap_or("-"),
                    destination = %r.destination,
                    cause = r.cause.name(),
                    "{message}"
                );
                Ok(None)
            }
        }
    }

    /// Asks the owner (or this broker's own host) for a bundle's split points; the answer arrives as an event.
    fn ask_split_points(
        &self,
        ticket: u64,
        bundle: String,
        owner: String,
        algorithm: String,
        positions: Vec<u64>,
    ) {
        let positions: Vec<String> = positions.iter().map(|p| format_hash(*p)).collect();
        if owner == self.sh.broker_id {
            let result =
                crate::runtime::shared::split_points(&self.sh, &bundle, &algorithm, &positions);
            let _ = self.points_tx.send(SplitPointsAnswer { ticket, result });
            return;
        }
        let store = self.sh.store.clone();
        let tx = self.points_tx.clone();
        let requester = self.sh.broker_id.clone();
        tokio::spawn(async move {
            let result = crate::runtime::requests::submit(
                &store,
                RequestOp::SplitPoints {
                    bundle,
                    algorithm,
                    positions,
                },
                Some(&owner),
                &requester,
                Duration::from_secs(30),
            )
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| {
                serde_json::from_value::<Vec<String>>(r.result)
                    .map_err(|e| format!("malformed split points: {e}"))
            })
            .and_then(|v| {
                v.iter()
                    .map(|p| crate::bundle::parse_hash(p).map_err(|e| e.to_string()))
                    .collect::<Result<Vec<u64>, String>>()
            });
            let _ = tx.send(SplitPointsAnswer { ticket, result });
        });
    }

    pub(super) async fn write_answer(
        &mut self,
        open: &OpenRequest,
        ok: bool,
        message: String,
        result: serde_json::Value,
    ) -> Step {
        let id = &self.sh.broker_id;
        let what = open.request.op.describe();
        if ok {
            tracing::info!(leader = %id, "{what}: {message}");
        } else {
            tracing::info!(leader = %id, "{what} refused: {message}");
        }
        let answered = AdminRequest {
            response: Some(RequestResponse {
                ok,
                message,
                result,
                answered_by: id.clone(),
                answered_ms: self.sh.now_ms(),
            }),
            ..open.request.clone()
        };
        let op = Op::Put {
            path: open.path.clone(),
            value: to_json_vec(&answered),
            expected_version: Some(open.stat.version),
            options: CreateOptions::PERSISTENT,
        };
        match self.election.fenced_batch(vec![op]).await {
            Ok(_) | Err(Error::BadVersion { .. }) => Ok(()),
            Err(e) => self.soft(e, &format!("answering {}", open.path)),
        }
    }

    /// Deletes a bundle's ownership node (fenced, by version) if it still names `owner`.
    async fn delete_ownership(&mut self, bundle: &str, owner: &str, why: &str) -> Step {
        let path = paths::ownership(bundle);
        let found = match self
            .sh
            .store
            .get_json::<crate::model::NamespaceEphemeralData>(&path)
            .await
        {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(()),
            Err(e) => return self.soft(e, &format!("reading {path}")),
        };
        if super::load::owner_seen(&found.0).broker != owner {
            return Ok(());
        }
        let op = Op::Delete {
            path: path.clone(),
            expected_version: Some(found.1.version),
        };
        match self.election.fenced_batch(vec![op]).await {
            Ok(_) => {
                tracing::warn!(leader = %self.sh.broker_id, bundle, owner, "deleted {path}: {why}");
                Ok(())
            }
            Err(Error::NotFound { .. }) | Err(Error::BadVersion { .. }) => Ok(()),
            Err(e) => self.soft(e, &format!("deleting {path}")),
        }
    }

    /// Removes answered requests older than a minute and abandoned ones older than ten.
    async fn collect_requests(&mut self) -> Step {
        let now = self.sh.now_ms();
        let names = match self.sh.store.get_children(paths::REQUESTS).await {
            Ok(n) => n,
            Err(e) => return self.soft(e, "listing requests"),
        };
        let present: Vec<String> = names
            .iter()
            .map(|n| format!("{}/{n}", paths::REQUESTS))
            .collect();
        {
            let set: HashSet<&String> = present.iter().collect();
            self.handled.retain(|p, _| set.contains(p));
        }
        // Read together and deleted together: this runs in the shedding tick, inside the leader's loop, where
        // a round trip per node would hold the reports behind it after a lookup storm.
        let found = load::read_nodes(&self.sh, &present).await;
        let expired: Vec<(String, i64)> = present
            .into_iter()
            .zip(found)
            .filter_map(|(path, got)| {
                let got = got.ok()??;
                let r: AdminRequest = serde_json::from_slice(&got.value).ok()?;
                let expired = match &r.response {
                    Some(resp) => now - resp.answered_ms > ANSWERED_TTL_MS,
                    None => now - r.created_ms > UNANSWERED_TTL_MS,
                };
                expired.then_some((path, got.stat.version))
            })
            .collect();
        let deletes: Vec<_> = expired
            .into_iter()
            .map(|(path, version)| {
                let store = self.sh.store.clone();
                async move {
                    let _ = store.delete(&path, Some(version)).await;
                }
            })
            .collect();
        futures::stream::iter(deletes)
            .buffer_unordered(DELETES_IN_FLIGHT)
            .collect::<Vec<()>>()
            .await;
        Ok(())
    }
}
