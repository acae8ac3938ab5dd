//! The elected leader as one deterministic state machine: events in, commands out.
//!
//! [`Leader::handle`] takes an [`Event`] and the time (epoch ms) and returns the [`Command`]s to execute, in
//! order. It never awaits, reads no clock, calls no store and logs nothing itself: what it noticed comes back
//! as [`Command::Log`] lines, and every move, split and answer carries the reason the core gave. Randomness is
//! derived from the seed ([`crate::core::random`]): the k-th shedding tick of a term draws from
//! `stream_rng(seed, Shedding, k)` and the n-th placement from `stream_rng(seed, Assignment, n)`.
//!
//! Two executors drive it: the runtime's leader task (`runtime::leader`), which turns store notifications into
//! events and commands into fenced batches, and the simulator (`sim::engine`), which does both in virtual time.
//! So what `loadmgr simulate` shows about a strategy is what a cluster running the same settings does.
//!
//! # What the state machine owns
//!
//! The aggregated [`LoadData`] (reports, bundle windows, time averages, extensible EMAs), the strategies and
//! their cross-cycle memory, the cluster and namespace policies, the seeds of bundles seen anew, the
//! registered brokers, the assignment records and ownership nodes it has seen, moves completed but not yet
//! visible in the reports, what the flush last wrote, and the leader's counters ([`LeaderStatus`]).
//!
//! # The sequence
//!
//! 1. **Load** ([`Event::Loaded`]): seeds, namespaces, reports, records (a recent shed or unload restarts its
//!    grace period; an unfinished move preallocates its destination), ownership, cluster policies; then every
//!    record is reconciled and the status written.
//! 2. **Aggregation**: every written report is applied once ([`LoadData::apply_report`]); a new broker
//!    reconciles every record (records waiting for a broker can now be placed); a vanished registration drops
//!    the broker, deletes its time average and re-places the bundles recorded on it. After a report, a split
//!    check is scheduled at the next multiple of [`SPLIT_CHECK_PERIOD_MS`] (Pulsar checks after every
//!    aggregation; within one period it would select the same bundles).
//! 3. **Reconciliation** of one bundle (on every record, ownership or broker change): a record whose destination
//!    is not registered is re-placed (`orphan` when the move had completed, `replaced` when it had not); an
//!    unfinished move whose destination holds the bundle is marked assigned (a split child is placed anew
//!    first when its record says so); an owned bundle without a record is adopted.
//! 4. **Shedding** every `loadBalancerSheddingIntervalMinutes`, the first one interval after the election:
//!    deferred while a move is in flight or a completed move is not yet visible in both brokers' reports
//!    (a strategy that corrects the reports by such moves, [`crate::core::shedding::Shedder::corrects_unreported_moves`],
//!    is handed them instead and waits only for moves in flight); otherwise the strategy's plan, each unload
//!    with a destination started as a move. A strategy that has work needing no confirmation over cycles (a
//!    broker joined, its last plan stopped at its move budget) asks for an early cycle ([`Tick::EarlyShedding`],
//!    [`crate::core::shedding::Shedder::wants_early_cycle`]): it runs that long after the join or the cycle,
//!    under the same wait.
//! 5. **Split** ([`Tick::SplitCheck`]): the bundles over the split thresholds; topic-based algorithms ask the
//!    owner for the split points; the split writes the namespace's bundles, the children's records (owned by
//!    the parent's owner) and their data (the parent's divided) in one batch, and the parent is forgotten.
//! 6. **Flush** every `loadBalancerResourceQuotaUpdateIntervalMinutes`: one more sample for every bundle, then
//!    the data of the top `loadBalancerMaxNumberOfBundlesInBundleLoadReport × max(1, brokers)` bundles (all when
//!    ≤ 0; shedding-excluded namespaces left out; by long-term msg rate, then long-term throughput, then name)
//!    and every broker's time average, each only when its bytes changed, with the status; then the data of
//!    gone brokers and bundles is deleted.
//! 7. **Requests**: lookups (an owned bundle is answered at once; an unowned one is placed), unloads of a
//!    bundle or a namespace, splits.
//!
//! # Leadership change
//!
//! A new term is a new [`Leader`]: followers do not aggregate, so the new leader reads everything back
//! ([`Event::Loaded`]) with fresh strategies, no preallocations but those of unfinished moves, and its stream
//! counters at 0.

mod aggregate;
mod cycle;
mod flush;
mod io;
mod moves;
mod requests;

use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashSet};

pub use io::{
    Answer, ClusterPolicyData, Command, Event, FlushedNode, FlushedValue, Level, LoadedState,
    Outcome, OwnerSeen, Request, RequestId, Reread, SplitWrite, Tick, Ticket,
};

use crate::bundle::{BundleName, NamespaceBundles, NamespaceName};
use crate::config::Settings;
use crate::core::extensible::ExtensibleEma;
use crate::core::{ClusterPolicies, LoadData, StoredSeeds, Strategies};
use crate::model::records::{BundleAssignment, LeaderStatus};
use crate::model::{BundleData, LocalPolicies};

/// The split check runs at most once per this period, at its multiples (epoch ms), after a report arrived.
pub const SPLIT_CHECK_PERIOD_MS: i64 = 5_000;

/// A namespace's current bundles and where they were read.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceBundlesInfo {
    /// The namespace.
    pub namespace: NamespaceName,
    /// Its bundles.
    pub bundles: NamespaceBundles,
    /// Its local policies (the global policies' bundles when no local policies exist yet).
    pub local: LocalPolicies,
    /// Version of `/admin/local-policies/<ns>`, `None` when it does not exist yet.
    pub local_version: Option<i64>,
}

impl NamespaceBundlesInfo {
    /// The full names of its bundles, in hash order.
    pub fn bundle_names(&self) -> Vec<String> {
        self.bundles
            .ranges()
            .map(|r| BundleName::new(self.namespace.clone(), r).to_string())
            .collect()
    }
}

/// What the core waits to hear about.
#[derive(Debug)]
enum Pending {
    /// A record write.
    Record(Box<moves::RecordWrite>),
    /// The flush batch.
    Flush(flush::FlushWrite),
    /// A deletion of a flushed node.
    Delete(FlushedNode),
    /// A split batch.
    Split(Box<cycle::PendingSplit>),
    /// Split points asked of an owner.
    SplitPoints(Box<cycle::SplitRequest>),
}

/// A move completed whose brokers have not reported the change yet.
#[derive(Debug, Clone)]
struct Unsettled {
    bundle: String,
    source: Option<String>,
    destination: String,
    at: i64,
    /// The data the leader kept of an orphan of a gone broker (its load data may drop it before the
    /// destination reports it).
    last_data: Option<BundleData>,
}

/// The leader's state (see the module docs).
#[derive(Debug)]
pub struct Leader {
    id: String,
    seed: u64,
    settings: Settings,
    load: LoadData,
    seeds: StoredSeeds,
    strategies: Strategies,
    policies: ClusterPolicies,
    namespaces: BTreeMap<String, NamespaceBundlesInfo>,
    registered: BTreeSet<String>,
    records: BTreeMap<String, (BundleAssignment, i64)>,
    owners: BTreeMap<String, OwnerSeen>,
    unsettled: Vec<Unsettled>,
    /// The bundles of `unsettled`.
    unsettled_bundles: HashSet<String>,
    /// The data of a gone broker's bundles, taken before the load data dropped it, until their moves complete
    /// (see [`Unsettled::last_data`]).
    gone_data: HashMap<String, BundleData>,
    /// Subjects already warned about (a move that does not finish, a bundle that cannot be placed).
    warned: BTreeSet<String>,
    /// Bundles whose ownership node names a broker that is not registered: bundle → (that broker, since when).
    ghost_owners: BTreeMap<String, (String, i64)>,
    /// Bundles with a record or an owner that were not settled when last reconciled.
    suspects: BTreeSet<String>,
    flushed: HashMap<FlushedNode, FlushedValue>,
    stored_bundle_data: BTreeSet<String>,
    stored_time_averages: BTreeSet<String>,
    status: LeaderStatus,
    shedding_ticks: u64,
    assignments: u64,
    next_ticket: Ticket,
    pending: BTreeMap<Ticket, Pending>,
    /// Record writes in `pending` per bundle, so "is a write of this bundle pending" is not a scan.
    pending_records: HashMap<String, u32>,
    groups: BTreeMap<u64, requests::Group>,
    split_due: Option<i64>,
    /// When the early shedding cycle asked for is due (epoch ms).
    early_due: Option<i64>,
    /// The quietest [`Command::Log`] level emitted; `None`: none at all.
    log_level: Option<Level>,
    out: Vec<Command>,
}

impl Leader {
    /// A leader elected at `now` with fresh strategies; nothing is known until [`Event::Loaded`].
    pub fn new(id: &str, settings: Settings, seed: u64, now: i64) -> Self {
        let mut load = LoadData::new();
        // Reports applied before the first cycle advance the extensible EMAs with the configured settings.
        load.set_ema_settings(&settings);
        Leader {
            id: id.to_owned(),
            seed,
            strategies: Strategies::from_settings(&settings),
            settings,
            load,
            seeds: StoredSeeds::default(),
            policies: ClusterPolicies::default(),
            namespaces: BTreeMap::new(),
            registered: BTreeSet::new(),
            records: BTreeMap::new(),
            owners: BTreeMap::new(),
            unsettled: Vec::new(),
            unsettled_bundles: HashSet::default(),
            gone_data: HashMap::default(),
            warned: BTreeSet::new(),
            ghost_owners: BTreeMap::new(),
            suspects: BTreeSet::new(),
            flushed: HashMap::default(),
            stored_bundle_data: BTreeSet::new(),
            stored_time_averages: BTreeSet::new(),
            status: LeaderStatus {
                leader: id.to_owned(),
                leading_since_ms: now,
                updated_ms: now,
                ..Default::default()
            },
            shedding_ticks: 0,
            assignments: 0,
            next_ticket: 1,
            pending: BTreeMap::new(),
            pending_records: HashMap::default(),
            groups: BTreeMap::new(),
            split_due: None,
            early_due: None,
            log_level: Some(Level::Debug),
            out: Vec::new(),
        }
    }

    /// Takes one event at `now` (epoch ms) and returns what to do, in order.
    pub fn handle(&mut self, now: i64, event: Event) -> Vec<Command> {
        match event {
            Event::Loaded(state) => self.on_loaded(now, *state),
            Event::Report { broker, report } => self.on_report(now, &broker, report),
            Event::BrokerGone { broker } => self.on_broker_gone(now, &broker),
            Event::OwnerSeen { bundle, owner } => {
                self.owners.insert(bundle.clone(), owner);
                self.clear_overlap_hints(&bundle);
                self.reconcile(now, &bundle);
            }
            Event::OwnerGone { bundle } => {
                self.owners.remove(&bundle);
                self.reconcile(now, &bundle);
            }
            Event::RecordSeen { record, version } => {
                let bundle = record.bundle.clone();
                self.records.insert(bundle.clone(), (record, version));
                self.reconcile(now, &bundle);
            }
            Event::RecordGone { bundle } => {
                self.records.remove(&bundle);
                self.reconcile(now, &bundle);
            }
            Event::Namespace { namespace, info } => self.on_namespace(&namespace, info),
            Event::ClusterPolicies(data) => self.on_cluster_policies(data),
            Event::Settings(settings) => self.on_settings(*settings),
            Event::Tick(Tick::Shedding) => self.shedding_tick(now),
            Event::Tick(Tick::Flush) => self.flush(now),
            Event::Tick(Tick::SplitCheck) => self.split_tick(now),
            Event::Tick(Tick::EarlyShedding) => self.early_shedding_tick(now),
            Event::Request { id, request } => self.on_request(now, id, request),
            Event::SplitPoints { ticket, result } => self.on_split_points(now, ticket, result),
            Event::Done { ticket, outcome } => self.on_done(now, ticket, outcome),
        }
        std::mem::take(&mut self.out)
    }

    /// The leader's broker id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The aggregated load data.
    pub fn load(&self) -> &LoadData {
        &self.load
    }

    /// Restores decision state that a load-data snapshot carries and the store does not, for a leader that
    /// continues from the snapshot (the simulator's first leader of a run started from one; call after
    /// [`Event::Loaded`]): the shedder's recently unloaded brokers (broker → epoch ms) and the extensible EMAs
    /// of brokers it knows. EMAs of brokers it does not know are ignored.
    pub fn restore_snapshot_state(
        &mut self,
        recently_unloaded_brokers: &BTreeMap<String, i64>,
        emas: &BTreeMap<String, ExtensibleEma>,
    ) {
        self.strategies
            .shedder
            .restore_recently_unloaded_brokers(recently_unloaded_brokers);
        for (broker, ema) in emas {
            self.load.restore_extensible_ema(broker, *ema);
        }
    }

    /// The policies placement consults (namespaces' bundles included).
    pub fn policies(&self) -> &ClusterPolicies {
        &self.policies
    }

    /// The leader's counters.
    pub fn status(&self) -> &LeaderStatus {
        &self.status
    }

    /// The assignment records as the leader knows them, with their versions.
    pub fn records(&self) -> &BTreeMap<String, (BundleAssignment, i64)> {
        &self.records
    }

    /// A namespace's bundles as the leader knows them.
    pub fn namespace(&self, namespace: &str) -> Option<&NamespaceBundlesInfo> {
        self.namespaces.get(namespace)
    }

    /// Shedding ticks of this term so far.
    pub fn shedding_ticks(&self) -> u64 {
        self.shedding_ticks
    }

    /// Whether writes the core asked for have not been reported [`Event::Done`] yet.
    pub fn has_pending_writes(&self) -> bool {
        !self.pending.is_empty()
    }

    fn on_done(&mut self, now: i64, ticket: Ticket, outcome: Outcome) {
        let Some(p) = self.pending.remove(&ticket) else {
            return;
        };
        if let Pending::Record(w) = &p {
            if let Some(n) = self.pending_records.get_mut(&w.record.bundle) {
                *n -= 1;
                if *n == 0 {
                    self.pending_records.remove(&w.record.bundle);
                }
            }
        }
        match p {
            Pending::Record(w) => self.record_done(now, *w, outcome),
            Pending::Flush(f) => self.flush_done(f, outcome),
            Pending::Delete(node) => self.delete_done(node, outcome),
            Pending::Split(s) => self.split_done(*s, outcome),
            Pending::SplitPoints(_) => {}
        }
    }

    fn ticket(&mut self) -> Ticket {
        let t = self.next_ticket;
        self.next_ticket += 1;
        t
    }

    fn emit(&mut self, c: Command) {
        self.out.push(c);
    }

    /// Which [`Command::Log`] lines to emit: those at `level` and louder (`None`: none). Decisions are the same
    /// at every level; a quiet leader only spares formatting the lines (the simulator without `--trace`).
    pub fn set_log_level(&mut self, level: Option<Level>) {
        self.log_level = level;
    }

    fn wants(&self, level: Level) -> bool {
        self.log_level.is_some_and(|l| level >= l)
    }

    fn log(&mut self, level: Level, message: impl Into<String>) {
        if self.wants(level) {
            self.out.push(Command::log(level, message));
        }
    }

    /// The random stream of the next placement (lookup, reassignment, a destination for an unload or a split
    /// child).
    fn assignment_rng(&mut self) -> rand::rngs::StdRng {
        let rng = crate::core::random::stream_rng(
            self.seed,
            crate::core::random::Stream::Assignment,
            self.assignments,
        );
        self.assignments += 1;
        rng
    }
}

#[cfg(test)]
mod tests;
