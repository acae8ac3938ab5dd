//! One run of record writes in flight while the leader's loop goes on.
//!
//! A run of record writes (the moves of a shedding tick, the placements of a lookup storm, the reconciliation
//! of a new leader) goes to the store in a task of its own, and the loop goes on taking reports, requests,
//! notifications and ticks, handing each to the core at once. The commands the core gives meanwhile wait,
//! in order, until the run's outcomes are in; then the outcomes' follow-ups and the waiting commands are
//! executed, and the record writes among them form the next run. Before, the loop itself waited for every
//! run, so a report queued behind a shedding tick's writes was aggregated only after them.
//!
//! Only one run is in flight at a time, on purpose: the commands that pile up behind it make the next run
//! large, and a large run is what batches a lookup storm (16 records to a ZooKeeper transaction). Starting a
//! run for every step instead, several in flight, halved the cold start's throughput at 1,000 brokers ×
//! 100,000 bundles (2.72 transactions per lookup instead of 1.73).
//!
//! # Contract
//!
//! * The core may be handed any event before a write's outcome: it decides nothing on an outcome it has not
//!   seen (a move's record and preallocation count from the moment it asks for the write, see
//!   `core::leader::moves`), and skips a bundle whose write is pending.
//! * Commands run in the order the core gave them, the outcomes' follow-ups before the commands that waited
//!   (as when the loop waited for the run).
//! * What reads a bundle's inbox entries outside a run (the re-notification of a bundle whose owner left,
//!   the repair at load) first waits for the run if it holds that bundle: the entries are known once its
//!   outcome is in.
//! * A run that meets a lost fence or a closed store stops the loop when its outcome arrives; the task is
//!   aborted with the executor.
//!
//! # Echoes
//!
//! The leader watches the records so that it sees a change it did not make (a record edited or deleted by
//! hand). Every record it writes comes back as a notification too, and reading each one back cost two reads
//! per bundle of a lookup storm (the record written `assigning`, then `assigned`) for nothing. So the executor
//! counts, per record path, the writes of its runs whose notification is still to come (`echoes`): a
//! notification of a counted path is counted off and not read, and the core is handed the record as written
//! (`RecordSeen` with the version the store gave) once the run's outcomes are in, unless it knows something
//! newer of it. A write that did not happen is counted off at once; one that happened after all (an unknown
//! outcome) then comes as a notification that is read. A lost connection may lose or merge notifications, so
//! the count is forgotten at every session event. Only a change by someone else of a record that this leader
//! is writing at that very moment can go unseen (its notification counted as the echo); the write then fails
//! on its version and the core reads the record again.

use std::collections::{BTreeSet, HashSet, VecDeque};

use crate::core::leader::{Command, Event, Outcome, Ticket};
use crate::model::records::BundleAssignment;
use crate::paths;

use super::{Executor, Step, Watched};

/// A finished run of record writes, as its task sends it back.
pub(super) struct Written {
    records: Vec<(Ticket, BundleAssignment, BTreeSet<String>)>,
    watched: Watched,
    outcomes: Step<Vec<Outcome>>,
}

impl Executor {
    /// Whether the run in flight writes any of `bundles`.
    pub(super) fn writing_any<'a>(&self, mut bundles: impl Iterator<Item = &'a str>) -> bool {
        self.run_in_flight
            .as_ref()
            .is_some_and(|run| bundles.any(|b| run.contains(b)))
    }

    /// Starts writing `run` (record writes of distinct bundles) in a task; no run may be in flight.
    pub(super) fn start_run(&mut self, run: Vec<Command>) {
        debug_assert!(self.run_in_flight.is_none(), "a run is in flight already");
        let mut watched = Watched::default();
        run.iter().for_each(|c| watched.note(c));
        let prepared = self.prepare_records(run);
        for (_, record, _) in &prepared.records {
            *self
                .echoes
                .entry(paths::assignment(&record.bundle))
                .or_default() += 1;
        }
        self.run_in_flight = Some(
            prepared
                .records
                .iter()
                .map(|(_, r, _)| r.bundle.clone())
                .collect::<HashSet<_>>(),
        );
        let election = self.election.clone();
        let done = self.written_tx.clone();
        let records = prepared.records;
        let batches = prepared.batches;
        self.background.spawn(async move {
            let outcomes = Executor::write_prepared(&election, batches).await;
            // The receiver lives as long as the executor, which aborts this task when it goes.
            let _ = done.send(Written {
                records,
                watched,
                outcomes,
            });
        });
    }

    /// The run's outcomes: noted, handed to the core, then their follow-ups and the commands that waited
    /// are executed (which may start the next run).
    pub(super) async fn run_done(&mut self, w: Written) -> Step {
        self.run_in_flight = None;
        let outcomes = w.outcomes?;
        // What the notification of each record written would have said, had it been read back.
        let mut seen = Vec::new();
        for ((_, record, _), outcome) in w.records.iter().zip(&outcomes) {
            match outcome {
                Outcome::Written(versions) => {
                    if let Some(&version) = versions.first() {
                        seen.push((record.clone(), version));
                    }
                }
                // No notification comes for a write that did not happen (one that happened after all is read).
                _ => {
                    self.take_echo(&paths::assignment(&record.bundle));
                }
            }
        }
        let events = self.finish_records(w.records, outcomes);
        w.watched.observe(&self.sh, &events);
        let mut queue = VecDeque::new();
        for event in events {
            let now = self.sh.now_ms();
            queue.extend(self.core.handle(now, event));
        }
        // Handed as the notification would have been, unless something newer is known of the record.
        let seen: Vec<Event> = seen
            .into_iter()
            .filter(|(record, version)| {
                self.core
                    .records()
                    .get(&record.bundle)
                    .is_some_and(|(known, v)| known == record && v == version)
            })
            .map(|(record, version)| Event::RecordSeen { record, version })
            .collect();
        queue.extend(self.hand(seen));
        queue.append(&mut self.waiting);
        self.execute_all(queue).await
    }

    /// Whether `path`'s notification is the echo of a record write of this leader's runs: then it is counted
    /// off, and need not be read.
    pub(super) fn take_echo(&mut self, path: &str) -> bool {
        match self.echoes.get_mut(path) {
            Some(n) => {
                *n -= 1;
                if *n == 0 {
                    self.echoes.remove(path);
                }
                true
            }
            None => false,
        }
    }

    /// Waits until no run is in flight and no command waits for one.
    pub(super) async fn settle(&mut self) -> Step {
        while self.run_in_flight.is_some() {
            match self.written_rx.recv().await {
                Some(w) => self.run_done(w).await?,
                // The executor holds a sender: never.
                None => break,
            }
        }
        Ok(())
    }
}
