//! Brokers' inboxes ([`paths::INBOX`]): `/loadmgr/inbox/<broker>/<bundle>` exists while the bundle's record
//! names the broker as its destination, or as the source of an unfinished move. A broker watches and scans its
//! own inbox only, so what it costs does not grow with the number of brokers (a watch of every record made
//! every record write an event, and two reads, at every broker).
//!
//! # Contract
//!
//! * The entries of a bundle change in the same fenced batch as its record (or split), so a broker that sees
//!   an entry finds the record that put it there.
//! * When a move starts (a record written `assigning`), every entry of the bundle is written even if it exists,
//!   so the brokers named are notified; when it completes (`assigned`), the source's entry is deleted.
//! * When a bundle's ownership node goes while its record names a registered broker, the destination's entry is
//!   written again: the destination of a move waiting for the release learns the bundle is free, and a broker
//!   whose node vanished learns it no longer holds it.
//! * An entry's value is empty, or a copy of the record written in the same batch ([`entry_value`]: where the
//!   store's notifications carry values, and not when the entry is only rewritten because the node went). A
//!   broker may act on the copy its notification carried as on a record it read then: any later change of
//!   the record that concerns it comes with a later notification.
//! * A new leader reads every entry, then writes what the records say is missing and deletes the rest (entries
//!   written by nobody after an upgrade, entries of records deleted by hand).

use futures::StreamExt;
use std::collections::{BTreeSet, HashMap};

use crate::core::leader::Outcome;
use crate::model::records::{AssignmentState, BundleAssignment};
use crate::paths;
use crate::store::{CreateOptions, DynStore, Error, Op, CREATE_ONLY};

use super::{Executor, Step};

/// The brokers with an entry, per bundle.
pub(super) type Entries = HashMap<String, BTreeSet<String>>;

/// Ops of one batch of the repair at load.
const REPAIR_BATCH: usize = 64;

/// Entries rewritten per fenced batch when ownership nodes went ([`Executor::owners_gone`]).
const GONE_BATCH: usize = 64;

/// The brokers `record` needs an entry for: its destination, and the source while the move is unfinished.
pub(super) fn wanted(record: &BundleAssignment) -> BTreeSet<String> {
    let mut brokers = BTreeSet::from([record.destination.clone()]);
    if record.state == AssignmentState::Assigning {
        if let Some(source) = record.source.as_ref().filter(|s| !s.is_empty()) {
            brokers.insert(source.clone());
        }
    }
    brokers
}

/// The ops that turn `existing` entries of `bundle` into `wanted`: a put of `value` (see [`entry_value`]) for
/// every wanted entry when `notify`, else for the missing ones only; a delete for every other existing one.
pub(super) fn ops(
    bundle: &str,
    existing: Option<&BTreeSet<String>>,
    wanted: &BTreeSet<String>,
    notify: bool,
    value: &[u8],
) -> Vec<Op> {
    let empty = BTreeSet::new();
    let existing = existing.unwrap_or(&empty);
    // A missing entry is created create-only: on ZooKeeper an unconditional put is tried as an update
    // first, and a failed attempt costs the server a transaction.
    let mut ops: Vec<Op> = wanted
        .iter()
        .filter(|b| notify || !existing.contains(*b))
        .map(|b| Op::Put {
            path: paths::inbox(b, bundle),
            value: value.to_vec(),
            expected_version: (!existing.contains(b)).then_some(CREATE_ONLY),
            options: CreateOptions::PERSISTENT,
        })
        .collect();
    ops.extend(
        existing
            .difference(wanted)
            .map(|b| Op::delete(paths::inbox(b, bundle))),
    );
    ops
}

/// The value of an entry written with `record_json` (the record's bytes as written in the same batch): a copy
/// of it where the store's notifications carry what they report (etcd), so the broker told can act without
/// reading the record; empty elsewhere (a ZooKeeper notification carries no value, and the broker reads the
/// record and the ownership node in one request anyway).
pub(super) fn entry_value(store: &DynStore, record_json: &[u8]) -> Vec<u8> {
    if store.backend().capabilities().notifications_carry_state {
        record_json.to_vec()
    } else {
        Vec::new()
    }
}

/// Every entry in the store.
pub(super) async fn load(store: &DynStore) -> Result<Entries, Error> {
    let mut entries = Entries::new();
    let brokers = match store.get_children(paths::INBOX).await {
        Ok(b) => b,
        Err(Error::NotFound { .. }) => return Ok(entries),
        Err(e) => return Err(e),
    };
    // One listing per broker, 64 in flight (a new leader of 1,000 brokers lists 1,000 inboxes).
    let listings: Vec<_> = brokers
        .into_iter()
        .map(|broker| {
            let store = store.clone();
            async move {
                let listed = store.get_children(&paths::inbox_of(&broker)).await;
                (broker, listed)
            }
        })
        .collect();
    let listed: Vec<(String, Result<Vec<String>, Error>)> = futures::stream::iter(listings)
        .buffer_unordered(64)
        .collect()
        .await;
    for (broker, names) in listed {
        let names = match names {
            Ok(n) => n,
            Err(Error::NotFound { .. }) => continue,
            Err(e) => return Err(e),
        };
        for name in names {
            if let Some(bundle) = paths::inbox_bundle(&name) {
                entries
                    .entry(bundle.to_string())
                    .or_default()
                    .insert(broker.clone());
            }
        }
    }
    Ok(entries)
}

impl Executor {
    /// Records the entries of `bundle` after a batch that made them `wanted` succeeded.
    pub(super) fn entries_written(&mut self, bundle: &str, wanted: BTreeSet<String>) {
        if wanted.is_empty() {
            self.entries.remove(bundle);
        } else {
            self.entries.insert(bundle.to_owned(), wanted);
        }
    }

    /// Makes every entry match the records the core loaded (see the module docs).
    pub(super) async fn repair_entries(&mut self) -> Step {
        let mut desired: Entries = self
            .core
            .records()
            .iter()
            .map(|(b, (r, _))| (b.clone(), wanted(r)))
            .collect();
        let bundles: BTreeSet<String> =
            desired.keys().chain(self.entries.keys()).cloned().collect();
        let mut pending: Vec<(String, BTreeSet<String>, Vec<Op>)> = Vec::new();
        for b in bundles {
            let want = desired.remove(&b).unwrap_or_default();
            // Only missing entries are written here, and a broker reads the record of an entry without a
            // copy: no copy needed.
            let ops = ops(&b, self.entries.get(&b), &want, false, &[]);
            if !ops.is_empty() {
                pending.push((b, want, ops));
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        tracing::info!(
            leader = %self.sh.broker_id,
            bundles = pending.len(),
            "bringing the brokers' inbox entries in line with the records"
        );
        let mut chunk: Vec<(String, BTreeSet<String>)> = Vec::new();
        let mut chunk_ops = Vec::new();
        for (b, want, ops) in pending {
            chunk_ops.extend(ops);
            chunk.push((b, want));
            if chunk_ops.len() >= REPAIR_BATCH {
                self.repair_batch(std::mem::take(&mut chunk), std::mem::take(&mut chunk_ops))
                    .await?;
            }
        }
        if !chunk_ops.is_empty() {
            self.repair_batch(chunk, chunk_ops).await?;
        }
        Ok(())
    }

    async fn repair_batch(
        &mut self,
        bundles: Vec<(String, BTreeSet<String>)>,
        ops: Vec<Op>,
    ) -> Step {
        match self.batch(ops, false).await? {
            Outcome::Written(_) => {
                for (b, want) in bundles {
                    self.entries_written(&b, want);
                }
            }
            other => tracing::warn!(
                leader = %self.sh.broker_id,
                "inbox repair batch not written ({other:?}); the brokers concerned learn of their bundles at the next change"
            ),
        }
        Ok(())
    }

    /// Bundles whose ownership node is gone: writes each one's destination entry again when its record names a
    /// registered broker (see the module docs), [`GONE_BATCH`] entries per fenced batch, all in flight together.
    pub(super) async fn owners_gone(&mut self, bundles: &[String]) -> Step {
        let notify: Vec<(String, String)> = bundles
            .iter()
            .filter_map(|bundle| {
                let (record, _) = self.core.records().get(bundle)?;
                self.core
                    .load()
                    .broker(&record.destination)
                    .is_some()
                    .then(|| (bundle.clone(), record.destination.clone()))
            })
            .collect();
        let election = self.election.clone();
        // Empty, with no copy of the record: when a whole cluster stops, 100,000 nodes go at once, and copies
        // would add their records' bytes (about 50 MB) to the store's busiest moment, for brokers that read
        // their records when they start again anyway.
        let results = futures::future::join_all(notify.chunks(GONE_BATCH).map(|chunk| {
            let ops = chunk
                .iter()
                .map(|(bundle, destination)| Op::put(paths::inbox(destination, bundle), Vec::new()))
                .collect();
            let election = election.clone();
            async move { election.fenced_batch(ops).await }
        }))
        .await;
        for (chunk, result) in notify.chunks(GONE_BATCH).zip(results) {
            match result {
                Ok(_) => {
                    for (bundle, destination) in chunk {
                        self.entries
                            .entry(bundle.clone())
                            .or_default()
                            .insert(destination.clone());
                    }
                }
                Err(e) => self.soft(
                    e,
                    &format!("notifying the destinations of {} bundles", chunk.len()),
                )?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::records::AssignmentCause;

    fn record(state: AssignmentState, source: Option<&str>) -> BundleAssignment {
        BundleAssignment {
            bundle: "t/ns/0x00000000_0xffffffff".into(),
            destination: "b:2".into(),
            state,
            source: source.map(str::to_owned),
            cause: AssignmentCause::Shedding,
            reason: String::new(),
            leader: "b:1".into(),
            created_ms: 0,
            updated_ms: 0,
            unload_after_acquire: false,
            no_overlap: false,
        }
    }

    fn paths_of(ops: &[Op]) -> Vec<(bool, String)> {
        ops.iter()
            .map(|o| match o {
                Op::Put { path, .. } => (true, path.clone()),
                Op::Delete { path, .. } => (false, path.clone()),
                Op::Check(_) => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn a_move_names_both_brokers_and_its_completion_only_the_destination() {
        let moving = record(AssignmentState::Assigning, Some("b:3"));
        assert_eq!(
            wanted(&moving),
            BTreeSet::from(["b:2".to_owned(), "b:3".to_owned()])
        );
        let done = record(AssignmentState::Assigned, Some("b:3"));
        assert_eq!(wanted(&done), BTreeSet::from(["b:2".to_owned()]));
        let placed = record(AssignmentState::Assigning, None);
        assert_eq!(wanted(&placed), BTreeSet::from(["b:2".to_owned()]));
    }

    #[test]
    fn ops_notify_on_a_move_and_delete_what_is_no_longer_wanted() {
        let b = "t/ns/0x00000000_0xffffffff";
        let existing = BTreeSet::from(["b:2".to_owned(), "b:3".to_owned()]);
        // Completion: the source's entry goes, the destination's stays untouched.
        let done = ops(
            b,
            Some(&existing),
            &BTreeSet::from(["b:2".to_owned()]),
            false,
            b"{}",
        );
        assert_eq!(paths_of(&done), vec![(false, paths::inbox("b:3", b))]);
        // A move: every wanted entry written (a notification), the old destination's deleted.
        let moving = ops(
            b,
            Some(&existing),
            &BTreeSet::from(["b:2".to_owned(), "b:4".to_owned()]),
            true,
            b"{}",
        );
        // Every put writes the value given.
        assert!(moving.iter().all(|op| match op {
            Op::Put { value, .. } => value == b"{}",
            Op::Delete { .. } => true,
            other => panic!("unexpected {other:?}"),
        }));
        assert_eq!(
            paths_of(&moving),
            vec![
                (true, paths::inbox("b:2", b)),
                (true, paths::inbox("b:4", b)),
                (false, paths::inbox("b:3", b)),
            ]
        );
        // Nothing to do.
        assert!(ops(b, Some(&existing), &existing, false, &[]).is_empty());
    }
}
