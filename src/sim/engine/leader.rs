//! The simulator's executor of [`crate::core::leader::Leader`]: the same state machine the runtime's leader
//! task drives, with the store and the brokers' ownership agents played in virtual time.
//!
//! * **The store** ([`SimStore`]): assignment records, flushed nodes and each namespace's local-policies
//!   version. Every write the core asks for succeeds at once (version `expected + 1`, 0 for a create) and its
//!   outcome is handed back before the next command. The runtime hands the core a run of notifications
//!   before any of their writes' outcomes; the core's decisions do not wait for outcomes (see
//!   `core::leader::moves`), so both decide alike.
//! * **Ownership** (what the brokers' agents do with a record): a record naming a new destination makes the
//!   holder of the ownership node release it at once and the destination, when it is up and registered, take
//!   the node at once and serve the bundle `moveSeconds` later (the host's load). A holder still loading the
//!   bundle releases it once loaded (the runtime's ownership task evaluates a bundle again when its load
//!   finished); a crashed holder never does: its nodes vanish with its registration (session expiry), and the
//!   destination takes the node then. A destination that is down takes it when it comes back, or the leader
//!   re-places the bundle when its registration vanishes. A graceful stop releases the nodes first. A split's
//!   children are taken by the parent's owner at once and served `moveSeconds` later, like any bundle it
//!   acquires.
//! * **Notifications**: ownership changes reach the core after the step that caused them, at the same instant
//!   (the runtime's watches deliver them after the batch). The core's own record writes are not notified back:
//!   the core already holds them with their versions, and the runtime's echo of them changes nothing.
//! * **Policies**: each namespace's local policies carry its bundles and its anti-affinity group; the failure
//!   domains of the world's brokers are the cluster policies a new leader loads (no isolation policies).
//! * **Clients**: a bundle that is unowned and unrecorded when a leader starts is looked up
//!   ([`Request::Assign`]); one that could not be placed is looked up again when a broker joins.

use std::collections::{BTreeMap, VecDeque};

use crate::bundle::{
    split_bundle, NamespaceBundles, NamespaceName, SplitOutcome, TopicName, TopicTraffic,
};
use crate::core::leader::{
    ClusterPolicyData, Command, Event, FlushedNode, FlushedValue, Leader as Core, LoadedState,
    NamespaceBundlesInfo, Outcome, OwnerSeen, Request, SplitWrite, Tick, Ticket,
};
use crate::model::records::{AssignmentCause, AssignmentState, BundleAssignment};
use crate::model::LocalPolicies;
use crate::runtime::synthetic::Rates;

use super::{Bundle, Ev, Owner, Sim};
use crate::sim::metrics::{MoveRecord, RecordWrite, SplitRecord};

/// What the simulated store holds for the leader.
#[derive(Debug, Default)]
pub(super) struct SimStore {
    /// Assignment records with their versions.
    pub(super) records: BTreeMap<String, (BundleAssignment, i64)>,
    /// Flushed bundle data and time averages.
    pub(super) nodes: BTreeMap<FlushedNode, FlushedValue>,
    /// Version of each namespace's local policies (`None`: not written yet).
    pub(super) local_versions: Vec<Option<i64>>,
}

impl<'w> Sim<'w> {
    /// The records a running cluster has at the start: every initial owner's bundle assigned to it (a recently
    /// unloaded one by shedding at its unload time, so a new leader restarts its grace period).
    pub(super) fn initial_store(&mut self) {
        let now = self.world.start_ms;
        for b in &self.world.bundles {
            let Some(o) = b.owner else { continue };
            let bundle = self.world.bundle_name(b);
            let (cause, at) = match self.world.recently_unloaded.get(&bundle) {
                Some(at) => (AssignmentCause::Shedding, *at),
                None => (AssignmentCause::Lookup, now),
            };
            let record = BundleAssignment {
                bundle: bundle.clone(),
                destination: self.world.brokers[o].id.clone(),
                state: AssignmentState::Assigned,
                source: None,
                cause,
                reason: "the scenario's initial owner".into(),
                leader: "simulator".into(),
                created_ms: at,
                updated_ms: at,
                unload_after_acquire: false,
                no_overlap: false,
            };
            self.store.records.insert(bundle, (record, 0));
        }
        for (b, d) in &self.world.stored_bundle_data {
            self.store.nodes.insert(
                FlushedNode::BundleData(b.clone()),
                FlushedValue::BundleData(*d),
            );
        }
        self.store.local_versions = vec![None; self.world.namespaces.len()];
    }

    fn namespace_info(&self, ns: usize) -> NamespaceBundlesInfo {
        let bundles = self.ns_bundles[ns].clone();
        let local = LocalPolicies {
            bundles: bundles.to_bundles_data(),
            namespace_anti_affinity_group: self.world.namespaces[ns].anti_affinity_group.clone(),
            ..Default::default()
        };
        NamespaceBundlesInfo {
            namespace: NamespaceName::parse(&self.world.namespaces[ns].name)
                .expect("valid namespace"),
            bundles,
            local,
            local_version: self.store.local_versions[ns],
        }
    }

    /// What a new leader reads from the simulated store.
    fn loaded_state(&self) -> LoadedState {
        let mut state = LoadedState::default();
        for (node, value) in &self.store.nodes {
            match (node, value) {
                (FlushedNode::BundleData(b), FlushedValue::BundleData(d)) => {
                    state.bundle_data.push((b.clone(), Some(*d)))
                }
                (FlushedNode::TimeAverage(b), FlushedValue::TimeAverage(t)) => {
                    state.time_averages.push((b.clone(), Some(*t)))
                }
                (FlushedNode::BundleData(b), _) => state.bundle_data.push((b.clone(), None)),
                (FlushedNode::TimeAverage(b), _) => state.time_averages.push((b.clone(), None)),
            }
        }
        state.namespaces = (0..self.world.namespaces.len())
            .map(|ns| self.namespace_info(ns))
            .collect();
        let domains: BTreeMap<String, String> = self
            .world
            .brokers
            .iter()
            .filter_map(|b| Some((b.id.clone(), b.failure_domain.clone()?)))
            .collect();
        if !domains.is_empty() {
            state.cluster = Some(ClusterPolicyData {
                isolation: Vec::new(),
                domains,
            });
        }
        for (i, br) in self.brokers.iter().enumerate() {
            if br.registered {
                if let Some((gains, losses)) = &br.reported_deltas {
                    let mut r = br.local.clone();
                    r.last_bundle_gains = gains.clone();
                    r.last_bundle_losses = losses.clone();
                    state
                        .reports
                        .push((self.world.brokers[i].id.clone(), Ok(r)));
                }
            }
        }
        state.records = self.store.records.values().cloned().collect();
        for b in &self.bundles {
            if let (true, Some(o)) = (b.live, b.node) {
                state.owners.push((b.name.clone(), self.owner_seen(o)));
            }
        }
        state
    }

    fn owner_seen(&self, broker: usize) -> OwnerSeen {
        OwnerSeen {
            broker: self.world.brokers[broker].id.clone(),
            disabled: false,
        }
    }

    /// A new leader on broker `b` at `t`: it reads the store, then clients look up what is unowned.
    pub(super) fn start_leader(&mut self, b: usize, t: i64) {
        let id = self.world.brokers[b].id.clone();
        self.leader = Some(Core::new(
            &id,
            self.settings.clone(),
            self.seed,
            self.world.start_ms + t,
        ));
        if let Some(core) = self.leader.as_mut() {
            // Log lines only feed the trace.
            core.set_log_level(
                self.trace
                    .is_some()
                    .then_some(crate::core::leader::Level::Debug),
            );
        }
        self.leader_idx = Some(b);
        self.log(t, format!("leader: {id} elected"));
        self.leader_epoch += 1;
        let e = self.leader_epoch;
        self.push(t + self.shed_ms, Ev::Shed(e));
        self.push(t + self.flush_ms, Ev::Flush(e));
        let state = self.loaded_state();
        self.leader_step(t, Event::Loaded(Box::new(state)));
        if e == 1 {
            // The first leader continues from the world's start (a snapshot's decision state).
            if let Some(core) = self.leader.as_mut() {
                core.restore_snapshot_state(
                    &self.world.recently_unloaded_brokers,
                    &self.world.extensible_ema,
                );
            }
        }
        let unowned: Vec<usize> = (0..self.bundles.len())
            .filter(|i| {
                let bd = &self.bundles[*i];
                bd.live && bd.node.is_none() && !self.store.records.contains_key(&bd.name)
            })
            .collect();
        for bi in unowned {
            self.look_up(t, bi);
        }
    }

    /// A client's lookup of an unowned bundle.
    pub(super) fn look_up(&mut self, t: i64, bi: usize) {
        self.next_request += 1;
        let id = self.next_request;
        self.lookups.insert(id, bi);
        let bundle = self.bundles[bi].name.clone();
        self.leader_step(
            t,
            Event::Request {
                id,
                request: Request::Assign { bundle },
            },
        );
    }

    /// Hands one event to the leader and executes what it returns; then delivers the notifications the
    /// commands caused, each as its own step.
    pub(super) fn leader_step(&mut self, t: i64, event: Event) {
        let now = self.world.start_ms + t;
        let mut events = VecDeque::from([event]);
        while let Some(ev) = events.pop_front() {
            let Some(core) = self.leader.as_mut() else {
                return;
            };
            let mut queue: VecDeque<Command> = core.handle(now, ev).into();
            while let Some(c) = queue.pop_front() {
                if let Some(follow_up) = self.execute(t, c) {
                    let core = self.leader.as_mut().expect("leading");
                    for c in core.handle(now, follow_up).into_iter().rev() {
                        queue.push_front(c);
                    }
                }
            }
            events.extend(self.notices.drain(..));
        }
    }

    fn done(ticket: Ticket, versions: Vec<i64>) -> Option<Event> {
        Some(Event::Done {
            ticket,
            outcome: Outcome::Written(versions),
        })
    }

    fn execute(&mut self, t: i64, c: Command) -> Option<Event> {
        match c {
            Command::WriteRecord {
                ticket,
                record,
                expected_version,
            } => {
                let version = expected_version.map_or(0, |v| v + 1);
                if self.trace.is_some() {
                    self.records.push(RecordWrite {
                        at_ms: t,
                        record: record.clone(),
                    });
                }
                self.store
                    .records
                    .insert(record.bundle.clone(), (record.clone(), version));
                if record.state == AssignmentState::Assigning {
                    self.carry_out(t, &record);
                }
                Self::done(ticket, vec![version])
            }
            Command::Flush { ticket, writes, .. } => {
                for (node, bytes) in writes {
                    self.store.nodes.insert(node, bytes);
                }
                Self::done(ticket, Vec::new())
            }
            Command::Delete { ticket, node, .. } => {
                self.store.nodes.remove(&node);
                Self::done(ticket, Vec::new())
            }
            Command::Split { ticket, write, .. } => {
                let versions = self.apply_split(t, &write);
                Self::done(ticket, versions)
            }
            Command::AskSplitPoints {
                ticket,
                bundle,
                algorithm,
                ..
            } => {
                let result = self.split_points(t, &bundle, algorithm);
                self.notices
                    .push_back(Event::SplitPoints { ticket, result });
                None
            }
            Command::Answer { id, answer } => {
                if let Some(bi) = self.lookups.remove(&id) {
                    if !answer.ok {
                        self.unplaced.insert(bi);
                    }
                    let line = format!("assign {}: {}", self.bundles[bi].name, answer.message);
                    self.log(t, line);
                }
                None
            }
            Command::Wake { at, tick } => {
                let e = self.leader_epoch;
                self.push(at - self.world.start_ms, Ev::Wake(e, tick));
                None
            }
            Command::Log {
                message, record, ..
            } => {
                if self.trace.is_some() {
                    let line = match record {
                        Some(r) => format!(
                            "{message} [{} {} -> {} ({})]",
                            r.bundle,
                            r.source.as_deref().unwrap_or("-"),
                            r.destination,
                            r.cause.name()
                        ),
                        None => message,
                    };
                    self.log(t, line);
                }
                None
            }
            Command::DeleteOwnership { bundle, owner, .. } => {
                // The simulator's nodes are held by its brokers; one that names a broker the leader does not
                // know is let go as the store would delete it.
                if let Some(&bi) = self.by_name.get(&bundle) {
                    if self.bundles[bi]
                        .node
                        .is_some_and(|o| self.world.brokers[o].id == owner)
                    {
                        self.release(bi);
                    }
                }
                None
            }
            Command::WriteStatus(_) | Command::Reread(_) | Command::CollectRequests => None,
        }
    }

    /// The brokers' side of a record that names a destination (see the module docs).
    fn carry_out(&mut self, t: i64, record: &BundleAssignment) {
        let Some(&bi) = self.by_name.get(&record.bundle) else {
            self.failed_unload(t, &record.bundle, "no such bundle");
            return;
        };
        if !self.bundles[bi].live {
            self.failed_unload(t, &record.bundle, "the bundle was split");
            return;
        }
        let Some(d) = self.broker_index(&record.destination) else {
            self.failed_unload(
                t,
                &record.bundle,
                "the destination is not a broker of the cluster",
            );
            return;
        };
        let from = self.bundles[bi].node;
        match record.cause {
            AssignmentCause::Shedding => {
                let line = format!(
                    "unload {}: {} -> {}: {}",
                    record.bundle,
                    record.source.as_deref().unwrap_or("-"),
                    record.destination,
                    record.reason
                );
                self.log(t, line);
                self.recorder.moves.push(MoveRecord {
                    at_ms: t,
                    bundle: record.bundle.clone(),
                    from: record.source.clone().unwrap_or_default(),
                    to: record.destination.clone(),
                });
            }
            AssignmentCause::Orphan | AssignmentCause::Replaced | AssignmentCause::Lookup
                if from.is_none() =>
            {
                self.recorder.counts.orphan_assignments += 1;
            }
            AssignmentCause::Split if record.source.as_deref() != Some(&record.destination) => {
                self.recorder.counts.split_assignments += 1;
            }
            _ => {}
        }
        if from == Some(d) {
            // Already held (a split child on the parent's owner).
            self.notices.push_back(Event::OwnerSeen {
                bundle: record.bundle.clone(),
                owner: self.owner_seen(d),
            });
            return;
        }
        if let Some(h) = from {
            if !self.can_release(bi, h) {
                // The destination waits for the node: see `loaded` and `Sim::deregister`.
                return;
            }
            self.release(bi);
        }
        self.acquire(t, bi, d);
    }

    /// Whether the holder of a bundle's ownership node lets it go when a record names another broker: not while
    /// its host is still loading the bundle (the runtime's ownership task evaluates the bundle again once the load
    /// finished, see [`Sim::loaded`]), and never once crashed (its node vanishes with its session).
    fn can_release(&self, bi: usize, holder: usize) -> bool {
        self.brokers[holder].up && !matches!(self.bundles[bi].owner, Owner::Moving(_))
    }

    /// A free ownership node: the broker its record names takes it, when up and registered (its agent was
    /// waiting for the node to go).
    pub(super) fn hand_over(&mut self, t: i64, bi: usize) {
        let named = self
            .store
            .records
            .get(&self.bundles[bi].name)
            .and_then(|(r, _)| self.broker_index(&r.destination));
        if let Some(d) = named {
            self.acquire(t, bi, d);
        }
    }

    /// Broker `d` finished loading a bundle whose node it holds: if a record named another broker meanwhile (a
    /// split child placed anew as soon as the parent's owner took it), it releases the bundle now and the named
    /// broker takes it.
    pub(super) fn loaded(&mut self, t: i64, bi: usize, d: usize) {
        let elsewhere = self
            .store
            .records
            .get(&self.bundles[bi].name)
            .is_some_and(|(r, _)| r.destination != self.world.brokers[d].id);
        if !elsewhere {
            return;
        }
        self.release(bi);
        self.hand_over(t, bi);
        let notices: Vec<_> = self.notices.drain(..).collect();
        for n in notices {
            self.leader_step(t, n);
        }
    }

    /// The holder of a bundle's ownership node lets it go (and stops serving it).
    pub(super) fn release(&mut self, bi: usize) {
        self.unown(bi);
        self.bundles[bi].node = None;
        self.notices.push_back(Event::OwnerGone {
            bundle: self.bundles[bi].name.clone(),
        });
    }

    /// Broker `d` takes a free ownership node when it is up and registered, and serves the bundle a move time
    /// later.
    pub(super) fn acquire(&mut self, t: i64, bi: usize, d: usize) {
        if self.bundles[bi].node.is_some() || !self.brokers[d].up || !self.brokers[d].registered {
            return;
        }
        self.unown(bi);
        self.bundles[bi].node = Some(d);
        let mid = self.moves_dest.len();
        self.moves_dest.push(d);
        self.bundles[bi].owner = Owner::Moving(mid);
        self.push(t + self.world.move_ms, Ev::MoveDone(bi, mid));
        self.notices.push_back(Event::OwnerSeen {
            bundle: self.bundles[bi].name.clone(),
            owner: self.owner_seen(d),
        });
    }

    /// A joining broker takes what the records name it destination of.
    pub(super) fn acquire_recorded(&mut self, t: i64, b: usize) {
        let id = &self.world.brokers[b].id;
        let named: Vec<usize> = self
            .store
            .records
            .values()
            .filter(|(r, _)| &r.destination == id)
            .filter_map(|(r, _)| self.by_name.get(&r.bundle).copied())
            .filter(|bi| self.bundles[*bi].live && self.bundles[*bi].node.is_none())
            .collect();
        for bi in named {
            self.acquire(t, bi, b);
        }
    }

    /// The owner's split points of a bundle, from its topics' traffic.
    fn split_points(
        &self,
        t: i64,
        bundle: &str,
        algorithm: crate::bundle::SplitAlgorithm,
    ) -> Result<Vec<u64>, String> {
        let bi = *self
            .by_name
            .get(bundle)
            .ok_or_else(|| format!("no bundle {bundle}"))?;
        let b = &self.bundles[bi];
        let waves = self.wave(b.ns, t);
        let mut input = crate::core::split::split_input(&self.settings);
        for ti in &b.topics {
            let topic = &self.world.topics[*ti];
            let Ok(name) = TopicName::parse(&topic.name) else {
                continue;
            };
            let m = self.topic_mult[*ti] * waves;
            input.traffic.insert(
                topic.name.clone(),
                TopicTraffic {
                    msg_rate: topic.base.total_rate() * m,
                    throughput: topic.base.total_tp() * m,
                },
            );
            input.topics.push(name);
        }
        match split_bundle(b.range, algorithm, &input).map_err(|e| e.to_string())? {
            SplitOutcome::Split(p) => Ok(p),
            SplitOutcome::NoSplit(why) => {
                Err(format!("{} gives no split point: {why}", algorithm.name()))
            }
        }
    }

    /// Carries out a split batch: the namespace's bundles, the parent gone, the children (with the parent's
    /// topics by hash) recorded on the parent's owner, who holds them at once. The versions for the core.
    fn apply_split(&mut self, t: i64, write: &SplitWrite) -> Vec<i64> {
        let ns = self
            .world
            .namespaces
            .iter()
            .position(|n| n.name == write.namespace)
            .expect("a namespace of the world");
        let version = write.expected_local_version.map_or(0, |v| v + 1);
        self.store.local_versions[ns] = Some(version);
        if let Ok(nb) = NamespaceBundles::from_bundles_data(&write.local.bundles) {
            self.ns_bundles[ns] = nb;
        }
        if let Some((parent, _)) = &write.parent_record {
            self.store.records.remove(parent);
        }
        let parent = write.parent.clone();
        if let Some(p) = &write.parent_data {
            self.store.nodes.remove(&FlushedNode::BundleData(p.clone()));
        }
        for (c, d) in &write.child_data {
            self.store.nodes.insert(
                FlushedNode::BundleData(c.clone()),
                FlushedValue::BundleData(*d),
            );
        }
        let Some(&pi) = self.by_name.get(&parent) else {
            return vec![version];
        };
        let owner = self.bundles[pi].node;
        if owner.is_some() {
            self.release(pi);
        }
        self.bundles[pi].live = false;
        let first = self.bundles.len();
        for r in &write.child_records {
            let name = r.bundle.clone();
            let range = crate::bundle::BundleName::parse(&name)
                .expect("a bundle name")
                .range();
            self.by_name.insert(name.clone(), self.bundles.len());
            self.bundles.push(Bundle {
                name,
                ns,
                range,
                topics: Vec::new(),
                rates: Rates::default(),
                producers: 0,
                consumers: 0,
                owner: Owner::Unowned,
                live: true,
                node: None,
            });
            self.store.records.insert(r.bundle.clone(), (r.clone(), 0));
            if self.trace.is_some() {
                self.records.push(RecordWrite {
                    at_ms: t,
                    record: r.clone(),
                });
            }
        }
        if self.trace.is_some() {
            self.splits.push(SplitRecord {
                at_ms: t,
                parent: parent.clone(),
                children: write
                    .child_records
                    .iter()
                    .map(|r| r.bundle.clone())
                    .collect(),
            });
        }
        let topics = std::mem::take(&mut self.bundles[pi].topics);
        for ti in topics {
            let h = self.world.topics[ti].hash;
            let k = (first..self.bundles.len())
                .position(|ci| self.bundles[ci].range.contains(h))
                .unwrap_or(0);
            let ci = first + k;
            let topic = &self.world.topics[ti];
            let c = &mut self.bundles[ci];
            c.topics.push(ti);
            c.rates.add_scaled(&topic.base, self.topic_mult[ti]);
            c.producers += topic.producers;
            c.consumers += topic.consumers;
            self.topic_bundle[ti] = ci;
        }
        self.recorder.counts.splits += 1;
        self.series.split_minutes.push(t as f64 / 60_000.0);
        if let Some(o) = owner {
            for ci in first..self.bundles.len() {
                // The parent's owner takes the children's nodes at once and serves them a load time later (its
                // host loads each child as any bundle it acquires).
                self.acquire(t, ci, o);
            }
        }
        let mut versions = vec![version];
        versions.extend(write.child_records.iter().map(|_| 0));
        versions
    }

    /// The simulator's leader ticks.
    pub(super) fn leader_tick(&mut self, t: i64, tick: Tick) {
        if matches!(tick, Tick::Shedding | Tick::EarlyShedding) && self.leader.is_some() {
            self.measure_min_moves(t);
            let started = std::time::Instant::now();
            self.leader_step(t, Event::Tick(tick));
            self.recorder
                .cycle(started.elapsed().as_secs_f64() * 1_000_000.0);
        } else {
            self.leader_step(t, Event::Tick(tick));
        }
    }
}
