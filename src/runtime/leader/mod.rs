//! The leader task: the executor of [`crate::core::leader::Leader`], run only while this broker leads (the
//! supervisor aborts it the moment it does not, and every write here is fenced by the leader node, so a deposed
//! leader's late writes are rejected).
//!
//! It decides nothing. It reads the store into events (`load` at the start of a term, `intake` for every
//! notification and request node), runs the timers (shedding and flush every interval from the election, the
//! split-check and early-shedding wakes the core asks for), hands each event to the core with the time, and
//! executes the commands the core returns in order (`execute`), reporting each write's outcome back to the
//! core before it takes the next event.
//!
//! At one instant the order is the simulator's: notifications (reports first), then the flush, then a split
//! check, then the shedding tick — the select is biased, never random.

mod execute;
mod inbox;
mod intake;
mod load;
mod writes;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::history::History;
use super::shared::{AgentShared, LocalRequest};
use crate::coordination::LeaderElection;
use crate::core::leader::{Command, Event, Leader as Core, RequestId, Tick, Ticket};
use crate::model::records::{AdminRequest, AssignmentCause};
use crate::paths;
use crate::store::{Notification, NotificationStream, NotificationType, Stat};

use intake::{Tree, MAX_NOTIFICATIONS_PER_STEP};

/// Most record writes the executor has in flight at once.
const MAX_WRITES_IN_FLIGHT: usize = 256;

/// Most queued local requests handed to the core in one step.
const MAX_REQUESTS_PER_STEP: usize = 1024;

/// Why the leader loop stops.
#[derive(Debug)]
enum Stop {
    /// A fenced write was rejected: leadership is lost.
    Fenced,
    /// The store was closed.
    Closed,
}

type Step<T = ()> = Result<T, Stop>;

/// Answers of helper tasks (an owner's split points) back to the loop.
#[derive(Debug)]
struct SplitPointsAnswer {
    ticket: Ticket,
    result: Result<Vec<u64>, String>,
}

/// A request node being answered.
#[derive(Debug, Clone)]
struct OpenRequest {
    path: String,
    request: AdminRequest,
    stat: Stat,
}

struct Streams {
    brokers: NotificationStream,
    owners: NotificationStream,
    records: NotificationStream,
    requests: NotificationStream,
    policies: NotificationStream,
    /// Changes below `/admin/clusters/<clusterName>`; `None` without a cluster name.
    cluster: Option<NotificationStream>,
    /// The store session's events: a lost connection may lose or merge the notifications of this leader's
    /// own record writes, so the echoes still expected are forgotten ([`writes`]).
    session: crate::store::SessionEventStream,
}

/// The executor's state: the core, and what only I/O needs (dedup of notifications, open requests, timers).
struct Executor {
    sh: Arc<AgentShared>,
    election: Arc<LeaderElection>,
    core: Core,
    /// The report node incarnation and version last applied per broker, so a notification of a version already
    /// applied (read during the initial load) is not aggregated twice.
    applied_reports: HashMap<String, (i64, i64)>,
    /// Request nodes already handed to the core: path → creation revision of the node.
    handled: HashMap<String, i64>,
    open: HashMap<RequestId, OpenRequest>,
    next_request: RequestId,
    /// Wakes the core asked for (split checks, early shedding cycles): epoch ms and what to deliver.
    wakes: BTreeSet<(i64, Tick)>,
    points_tx: mpsc::UnboundedSender<SplitPointsAnswer>,
    points_rx: mpsc::UnboundedReceiver<SplitPointsAnswer>,
    /// Requests from this process (see [`AgentShared::local_requests`]), and where their answers go.
    local_rx: mpsc::UnboundedReceiver<LocalRequest>,
    local_open: HashMap<RequestId, tokio::sync::oneshot::Sender<crate::core::leader::Answer>>,
    /// (shedding cycle, source broker) pairs already counted in `Meters::unload_brokers`.
    unloaded_sources: BTreeSet<(u64, String)>,
    /// The agent's effective settings; a change is handed to the core before the next event.
    settings: tokio::sync::watch::Receiver<crate::config::Settings>,
    /// The brokers' inbox entries, per bundle ([`inbox`]).
    entries: inbox::Entries,
    /// Flush batches being written, with where their outcomes go; dropped (aborted) with the executor.
    background: tokio::task::JoinSet<()>,
    flushed_tx: mpsc::UnboundedSender<(Ticket, Step<crate::core::leader::Outcome>)>,
    flushed_rx: mpsc::UnboundedReceiver<(Ticket, Step<crate::core::leader::Outcome>)>,
    /// Time spent in the core's handling of events (not of follow-ups), for the log of a new leader's load.
    core_time: Duration,
    /// The bundles of the run of record writes in flight ([`writes`]), if one is.
    run_in_flight: Option<HashSet<String>>,
    /// Commands the core gave while a run was in flight, in order: executed after its outcomes.
    waiting: VecDeque<Command>,
    written_tx: mpsc::UnboundedSender<writes::Written>,
    written_rx: mpsc::UnboundedReceiver<writes::Written>,
    /// Record paths of this leader's runs whose notification has not come yet, with how many: the executor
    /// knows what it wrote, so those notifications are not read back ([`writes`]).
    echoes: HashMap<String, u32>,
}

/// The leader task: loads everything, then reacts to notifications and timers until leadership is lost.
pub(crate) async fn run(sh: Arc<AgentShared>, election: Arc<LeaderElection>) {
    let id = sh.broker_id.clone();
    // Whatever way the task ends (aborted included), this process's requests find no inbox.
    struct ClearInbox(Arc<AgentShared>);
    impl Drop for ClearInbox {
        fn drop(&mut self) {
            self.0.local_requests.lock().unwrap().take();
            self.0.leader_status.lock().unwrap().take();
            self.0.history.lock().unwrap().take();
        }
    }
    let _clear = ClearInbox(sh.clone());
    let result = async {
        let streams = subscribe(&sh).await.map_err(|e| e.to_string())?;
        let mut ex = Executor::new(sh.clone(), election);
        let sh = ex.sh.clone();
        let started = tokio::time::Instant::now();
        // The brokers' inboxes are listed while the state is read: neither needs the other.
        let (state, entries) = tokio::join!(
            load::load_all(&sh, &mut ex.applied_reports),
            inbox::load(&sh.store)
        );
        let state = state.map_err(|e| e.to_string())?;
        ex.entries = entries.map_err(|e| e.to_string())?;
        let read = started.elapsed();
        let first = ex.step(Event::Loaded(Box::new(state))).await;
        let loaded = started.elapsed();
        // The repair compares the entries with the records: the reconciliation's writes must be in.
        let first = match first {
            Ok(()) => match ex.settle().await {
                Ok(()) => ex.repair_entries().await,
                stop => stop,
            },
            stop => stop,
        };
        tracing::info!(
            leader = %sh.broker_id,
            "leader ready in {} ms: state and inboxes read {} ms, loaded and reconciled {} ms (the core {} ms), \
             inboxes repaired {} ms",
            started.elapsed().as_millis(),
            read.as_millis(),
            (loaded - read).as_millis(),
            ex.core_time.as_millis(),
            (started.elapsed() - loaded).as_millis()
        );
        Ok::<_, String>((first, ex, streams))
    }
    .await;
    match result {
        Ok((first, mut ex, streams)) => {
            let stop = match first {
                Ok(()) => ex.run(streams).await,
                Err(stop) => stop,
            };
            match stop {
                Stop::Fenced => tracing::warn!(leader = %id, "leadership lost: leader tasks stop"),
                Stop::Closed => tracing::info!(leader = %id, "store closed: leader tasks stop"),
            }
        }
        Err(e) => tracing::error!(leader = %id, "cannot start the leader tasks: {e}"),
    }
}

/// The writes of one execution step that the [`History`] notes once they succeed: records (moves) and splits,
/// by ticket.
#[derive(Default)]
struct Watched(Vec<(Ticket, Noted)>);

enum Noted {
    Record(crate::model::records::BundleAssignment),
    Split(
        crate::runtime::history::SplitEntry,
        Vec<crate::model::records::BundleAssignment>,
    ),
}

impl Watched {
    fn note(&mut self, c: &Command) {
        match c {
            Command::WriteRecord { ticket, record, .. } => {
                self.0.push((*ticket, Noted::Record(record.clone())))
            }
            Command::Split {
                ticket,
                write,
                reason,
            } => self.0.push((
                *ticket,
                Noted::Split(
                    crate::runtime::history::SplitEntry {
                        parent: write.parent.clone(),
                        children: write
                            .child_records
                            .iter()
                            .map(|r| r.bundle.clone())
                            .collect(),
                        reason: reason.clone(),
                        at_ms: write.child_records.first().map_or(0, |r| r.created_ms),
                    },
                    write.child_records.clone(),
                ),
            )),
            _ => {}
        }
    }

    /// Hands what `outcomes` show written to the history.
    fn observe(self, sh: &AgentShared, outcomes: &[Event]) {
        if self.0.is_empty() {
            return;
        }
        let written: HashSet<Ticket> = outcomes
            .iter()
            .filter_map(|e| match e {
                Event::Done {
                    ticket,
                    outcome: crate::core::leader::Outcome::Written(_),
                } => Some(*ticket),
                _ => None,
            })
            .collect();
        let mut guard = sh.history.lock().unwrap();
        let Some(h) = guard.as_mut() else { return };
        for (ticket, noted) in self.0 {
            if !written.contains(&ticket) {
                continue;
            }
            match noted {
                Noted::Record(r) => h.observe_record(&r),
                Noted::Split(mut s, children) => {
                    if s.at_ms == 0 {
                        s.at_ms = sh.now_ms();
                    }
                    h.observe_split(s);
                    children.iter().for_each(|r| h.observe_record(r));
                }
            }
        }
    }
}

/// `first` and whatever else the brokers', ownership and records streams already queued, up to
/// [`MAX_NOTIFICATIONS_PER_STEP`] in all (a stream that ended is seen at the next `next()`).
fn drain(s: &mut Streams, first: (Tree, Notification)) -> Vec<(Tree, Notification)> {
    let mut batch = vec![first];
    loop {
        let before = batch.len();
        for (tree, stream) in [
            (Tree::Brokers, &mut s.brokers),
            (Tree::Owners, &mut s.owners),
            (Tree::Records, &mut s.records),
        ] {
            while batch.len() < MAX_NOTIFICATIONS_PER_STEP {
                match stream.try_next() {
                    Some(n) => batch.push((tree, n)),
                    None => break,
                }
            }
        }
        if batch.len() == before || batch.len() >= MAX_NOTIFICATIONS_PER_STEP {
            return batch;
        }
    }
}

/// Subscribes first, so nothing that changes while the leader loads is missed (re-reads are idempotent).
async fn subscribe(sh: &AgentShared) -> Result<Streams, crate::store::Error> {
    let store = &sh.store;
    let started = tokio::time::Instant::now();
    // Opened at once: each watch is independent, and a new one may scan what is below it.
    let cluster_root = sh.settings().cluster_name.as_deref().map(paths::cluster);
    let (brokers, owners, records, requests, policies, cluster) = tokio::join!(
        watch_timed(store, paths::BROKERS),
        watch_timed(store, paths::OWNERSHIP),
        watch_timed(store, paths::ASSIGNMENTS),
        watch_timed(store, paths::REQUESTS),
        watch_timed(store, paths::LOCAL_POLICIES),
        async {
            match &cluster_root {
                Some(root) => watch_timed(store, root).await.map(Some),
                None => Ok(None),
            }
        },
    );
    let mut took: Vec<String> = Vec::new();
    let mut opened = |w: Result<(NotificationStream, String), crate::store::Error>| {
        w.map(|(stream, t)| {
            took.push(t);
            stream
        })
    };
    let brokers = opened(brokers)?;
    let owners = opened(owners)?;
    let records = opened(records)?;
    let requests = opened(requests)?;
    let policies = opened(policies)?;
    let cluster = match cluster? {
        Some((stream, t)) => {
            took.push(t);
            Some(stream)
        }
        None => None,
    };
    tracing::info!(
        leader = %sh.broker_id,
        "leader watches open in {} ms ({})",
        started.elapsed().as_millis(),
        took.join(", ")
    );
    Ok(Streams {
        brokers,
        owners,
        records,
        requests,
        policies,
        cluster,
        session: store.session_events(),
    })
}

/// Watches `prefix`; also says how long it took (a new watch may scan what is below it).
async fn watch_timed(
    store: &crate::store::DynStore,
    prefix: &str,
) -> Result<(NotificationStream, String), crate::store::Error> {
    let t = tokio::time::Instant::now();
    let stream = store.watch(prefix).await?;
    Ok((stream, format!("{prefix} {} ms", t.elapsed().as_millis())))
}

impl Executor {
    fn new(sh: Arc<AgentShared>, election: Arc<LeaderElection>) -> Self {
        // Subscribed before reading, so no change between the two is missed.
        let mut settings = sh.settings.subscribe();
        let initial = settings.borrow_and_update().clone();
        let weights = initial.resource_weights();
        let mut core = Core::new(&sh.broker_id, initial, sh.seed, sh.now_ms());
        if !tracing::enabled!(tracing::Level::DEBUG) {
            core.set_log_level(Some(crate::core::leader::Level::Info));
        }
        let (points_tx, points_rx) = mpsc::unbounded_channel();
        let (local_tx, local_rx) = mpsc::unbounded_channel();
        let (flushed_tx, flushed_rx) = mpsc::unbounded_channel();
        let (written_tx, written_rx) = mpsc::unbounded_channel();
        *sh.local_requests.lock().unwrap() = Some(local_tx);
        *sh.history.lock().unwrap() = Some(History::new(sh.now_ms(), weights));
        Executor {
            settings,
            sh,
            election,
            core,
            applied_reports: HashMap::new(),
            handled: HashMap::new(),
            open: HashMap::new(),
            next_request: 1,
            wakes: BTreeSet::new(),
            points_tx,
            points_rx,
            local_rx,
            local_open: HashMap::new(),
            unloaded_sources: BTreeSet::new(),
            entries: inbox::Entries::new(),
            background: tokio::task::JoinSet::new(),
            flushed_tx,
            flushed_rx,
            core_time: Duration::ZERO,
            run_in_flight: None,
            waiting: VecDeque::new(),
            written_tx,
            written_rx,
            echoes: HashMap::new(),
        }
    }

    /// Hands one event to the core and executes what it returns, feeding each write's outcome back first.
    async fn step(&mut self, event: Event) -> Step {
        self.step_all(vec![event]).await
    }

    /// Hands `events` to the core in order (a record read that the core already knows a later version of is
    /// dropped), then executes the commands they gave. Consecutive record writes of distinct bundles (a lookup
    /// storm, the reconciliation at load, a shedding plan) form a run that goes to the store in the
    /// background, up to [`MAX_WRITES_IN_FLIGHT`] records; while it is in flight, later commands wait for its
    /// outcomes (see [`writes`]). The core keeps a written record tentatively until its outcome, so it may ask
    /// for many at once; two writes of one bundle are never in flight together.
    async fn step_all(&mut self, events: Vec<Event>) -> Step {
        let queue = self.hand(events);
        self.execute_all(queue).await
    }

    /// Hands `events` to the core in order (see [`Executor::step_all`]) and returns the commands they gave,
    /// not yet executed.
    fn hand(&mut self, events: Vec<Event>) -> VecDeque<Command> {
        // Only a change of the dynamic configuration costs a copy of the settings.
        if self.settings.has_changed().unwrap_or(false) {
            let settings = self.settings.borrow_and_update().clone();
            if &settings != self.core.settings() {
                if let Some(h) = self.sh.history.lock().unwrap().as_mut() {
                    h.set_weights(settings.resource_weights());
                }
                let now = self.sh.now_ms();
                self.core.handle(now, Event::Settings(Box::new(settings)));
            }
        }
        let mut queue: VecDeque<Command> = VecDeque::new();
        for event in events {
            // A record read before an earlier event of these made the core write it again is stale: the core
            // knows a later version of the same node (a deletion in between came as its own event).
            if let Event::RecordSeen { record, version } = &event {
                if self
                    .core
                    .records()
                    .get(&record.bundle)
                    .is_some_and(|(_, known)| *known > *version)
                {
                    continue;
                }
            }
            let now = self.sh.now_ms();
            if let Some(h) = self.sh.history.lock().unwrap().as_mut() {
                h.observe_event(now, &event);
            }
            let began = std::time::Instant::now();
            queue.extend(self.core.handle(now, event));
            self.core_time += began.elapsed();
        }
        queue
    }

    /// Executes `queue` (commands the core gave) and the follow-ups of their outcomes (see
    /// [`Executor::step_all`]).
    async fn execute_all(&mut self, mut queue: VecDeque<Command>) -> Step {
        if self.run_in_flight.is_some() {
            // They run after the run's outcomes (see `writes`).
            self.waiting.append(&mut queue);
        }
        while let Some(c) = queue.pop_front() {
            if matches!(c, Command::WriteRecord { .. }) {
                let mut run = vec![c];
                let mut bundles = HashSet::new();
                if let Command::WriteRecord { record, .. } = &run[0] {
                    bundles.insert(record.bundle.clone());
                }
                while run.len() < MAX_WRITES_IN_FLIGHT {
                    match queue.front() {
                        Some(Command::WriteRecord { record, .. })
                            if !bundles.contains(&record.bundle) =>
                        {
                            bundles.insert(record.bundle.clone());
                            run.push(queue.pop_front().expect("front"));
                        }
                        _ => break,
                    }
                }
                self.start_run(run);
                self.waiting.append(&mut queue);
                break;
            }
            let mut watched = Watched::default();
            watched.note(&c);
            let follow_ups: Vec<Event> = self.execute(c).await?.into_iter().collect();
            watched.observe(&self.sh, &follow_ups);
            let mut more = Vec::new();
            for follow_up in follow_ups {
                let now = self.sh.now_ms();
                more.extend(self.core.handle(now, follow_up));
            }
            // Follow-ups run before the rest of the batch: the core saw the outcome before deciding them.
            for c in more.into_iter().rev() {
                queue.push_front(c);
            }
        }
        let mut published = self.sh.leader_status.lock().unwrap();
        if published.as_ref() != Some(self.core.status()) {
            *published = Some(self.core.status().clone());
        }
        Ok(())
    }

    async fn run(&mut self, mut s: Streams) -> Stop {
        let settings = self.sh.settings();
        let flush_every = settings.flush_interval();
        let shed_every = settings.shedding_interval();
        let mut flush =
            tokio::time::interval_at(tokio::time::Instant::now() + flush_every, flush_every);
        flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shed =
            tokio::time::interval_at(tokio::time::Instant::now() + shed_every, shed_every);
        shed.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let initial = self
            .sh
            .store
            .get_children(paths::REQUESTS)
            .await
            .unwrap_or_default();
        for name in initial {
            let path = format!("{}/{name}", paths::REQUESTS);
            if let Err(stop) = self.on_request_node(&path).await {
                return stop;
            }
        }
        let id = self.sh.broker_id.clone();
        // Times one step of the loop: what everything else waited for (see `slow_step`).
        macro_rules! timed {
            ($what:expr, $step:expr) => {{
                let started = tokio::time::Instant::now();
                let r = $step;
                slow_step(&id, $what, started.elapsed());
                r
            }};
        }
        loop {
            let wake_in = self
                .wakes
                .first()
                .map(|(at, _)| Duration::from_millis((*at - self.sh.now_ms()).max(0) as u64));
            let step = tokio::select! {
                biased;
                // First: the commands waiting for a run go on as soon as it is in.
                Some(w) = self.written_rx.recv() => timed!("a run of record writes done", self.run_done(w).await),
                n = s.brokers.next() => match n {
                    None => Err(Stop::Closed),
                    Some(n) => timed!("broker notifications", self.on_notifications(drain(&mut s, (Tree::Brokers, n))).await),
                },
                n = s.owners.next() => match n {
                    None => Err(Stop::Closed),
                    Some(n) => timed!("ownership notifications", self.on_notifications(drain(&mut s, (Tree::Owners, n))).await),
                },
                n = s.records.next() => match n {
                    None => Err(Stop::Closed),
                    Some(n) => timed!("record notifications", self.on_notifications(drain(&mut s, (Tree::Records, n))).await),
                },
                e = s.session.next() => match e {
                    None => Err(Stop::Closed),
                    Some(_) => {
                        self.echoes.clear();
                        Ok(())
                    }
                },
                n = s.requests.next() => match n {
                    None => Err(Stop::Closed),
                    Some(n) if n.kind == NotificationType::Created => timed!("a request", self.on_request_node(&n.path).await),
                    Some(_) => Ok(()),
                },
                n = s.policies.next() => match n {
                    None => Err(Stop::Closed),
                    Some(n) => match paths::namespace_below(paths::LOCAL_POLICIES, &n.path) {
                        Some(ns) => timed!("a namespace's policies", self.reload_namespace(&ns.to_string()).await),
                        None => Ok(()),
                    },
                },
                n = async { s.cluster.as_mut().expect("guarded").next().await }, if s.cluster.is_some() => match n {
                    None => Err(Stop::Closed),
                    Some(_) => timed!("the cluster's policies", self.reload_cluster_policies().await),
                },
                Some(a) = self.points_rx.recv() => {
                    timed!("split points", self.step(Event::SplitPoints { ticket: a.ticket, result: a.result }).await)
                }
                Some(r) = self.local_rx.recv() => {
                    let mut batch = vec![r];
                    while batch.len() < MAX_REQUESTS_PER_STEP {
                        match self.local_rx.try_recv() {
                            Ok(r) => batch.push(r),
                            Err(_) => break,
                        }
                    }
                    timed!("local requests", if batch.len() == 1 {
                        self.on_local_request(batch.pop().expect("one")).await
                    } else {
                        self.on_local_requests(batch).await
                    })
                }
                Some((ticket, outcome)) = self.flushed_rx.recv() => match outcome {
                    Ok(outcome) => timed!("a flush's outcome", self.step(Event::Done { ticket, outcome }).await),
                    Err(stop) => Err(stop),
                },
                Some(_) = self.background.join_next(), if !self.background.is_empty() => Ok(()),
                _ = flush.tick() => timed!("a flush", self.step(Event::Tick(Tick::Flush)).await),
                _ = async { tokio::time::sleep(wake_in.expect("guarded")).await }, if wake_in.is_some() => {
                    let (_, tick) = self.wakes.pop_first().expect("guarded");
                    timed!("a wake", self.step(Event::Tick(tick)).await)
                }
                _ = shed.tick() => {
                    let started = tokio::time::Instant::now();
                    let queue = self.hand(vec![Event::Tick(Tick::Shedding)]);
                    let moves = queue
                        .iter()
                        .filter(|c| {
                            matches!(c, Command::WriteRecord { record, .. } if record.cause == AssignmentCause::Shedding)
                        })
                        .count() as u64;
                    // The moves' records are written by a run in the background (`writes`).
                    let r = self.execute_all(queue).await;
                    let took = started.elapsed();
                    self.sh.meters.shedding_cycle.observe(took.as_secs_f64());
                    self.sh.meters.recent.shedding(crate::runtime::meters::SheddingSample { duration: took, moves });
                    slow_step(&id, "a shedding cycle", took);
                    r
                }
            };
            if let Err(stop) = step {
                return stop;
            }
        }
    }
}

/// A step of the leader's loop that took longer than this is logged: notifications, reports included, waited
/// behind it.
const SLOW_STEP: Duration = Duration::from_millis(100);

/// Logs a step of the leader's loop that took [`SLOW_STEP`] or longer, with what it was.
fn slow_step(leader: &str, what: &str, took: Duration) {
    if took >= SLOW_STEP {
        tracing::info!(%leader, "slow leader step: {what} took {} ms", took.as_millis());
    }
}
