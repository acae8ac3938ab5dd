//! The discrete-event simulation of one run: a [`World`], one strategy pair, one seed.
//!
//! Virtual time is in milliseconds from the start (`now` handed to the core is `world.start_ms + t`). Events
//! at the same instant run in this order: membership and timeline events, move completions and lookups,
//! report checks, the flush, other leader work (split check, shedding), metric samples; ties by scheduling
//! order. The runtime's leader keeps the same order (notifications, then the flush, then the shedding tick).
//!
//! Periods are the runtime's (the `*_interval` methods of [`Settings`], e.g. [`Settings::shedding_interval`]): the
//! minute-based settings, or their `loadmgr*Millis` overrides when set.
//!
//! * **Brokers** check their report every `loadBalancerReportUpdateMinIntervalMillis` (5 s) — first at start
//!   (their registration carries that first report, as the runtime's agents' does), then after a phase seeded
//!   by the run's seed and the broker id
//!   ([`crate::core::report_rules::report_check_phase_ms`], the runtime's rule too), then every period — and
//!   write it when Pulsar's `needBrokerDataUpdate` says so: first report at start, more than
//!   `loadBalancerReportUpdateMaxIntervalMinutes` since the last write, or a change above
//!   `loadBalancerReportUpdateThresholdPercentage` of msg rate, throughput, bundle count or 100 × the
//!   four-weight usage `W` ([`crate::core::report_rules::update_trigger`], the rule the runtime's reporter
//!   applies). Host usage (CPU, NIC) is the mean of the 5-s samples over the last
//!   `loadBalancerHostUsageCheckIntervalMinutes` (Pulsar measures CPU and NIC counters over that interval;
//!   with an interval of one check period it is the current usage, as a synthetic host reports it);
//!   bundle rates are current. The write goes through [`LocalBrokerData::update`]; gains and losses are
//!   those since the previous write. With the modular manager nothing forces a write after an unload or a
//!   split (its `setLoadReportForceUpdateFlag` is a no-op). Cost of a check: O(namespaces on the broker); of a
//!   write: O(its bundles).
//! * **Extensible reporting** (the extensible load manager or TransferShedder is configured): two more
//!   writes, traced as `report <broker> forced: <why>`
//!   ([`crate::core::report_rules::forced_report_reason`], which the runtime's reporter applies too).
//!   1. A broker whose bundle set changed since its last write (a bundle unloaded or split away, or a bundle
//!      it now owns) writes at its next check. Changed as its checks see it, as the runtime's reporter does
//!      (the gains and losses [`LocalBrokerData::update`] accumulates at every check): a bundle that comes and
//!      goes between two checks (a split child its parent's owner releases as soon as it loaded it) changes
//!      nothing. This follows Pulsar's extensible brokers (which react to every such event): their
//!      `BrokerLoadDataReporter` listens to the service-unit state channel and, on `Releasing` or `Splitting`
//!      with itself as the source or `Owned` with itself as the destination, tombstones its load data (deletes
//!      it from the store, resets its local data); the next `loadBalancerReportUpdateMinIntervalMillis` tick
//!      then publishes a fresh one (`reportedAt` is 0, so the max-interval rule fires). A modular report cannot
//!      be deleted (`/loadbalance/brokers/<id>` is the broker's registration), so it is rewritten instead.
//!   2. loadmgr's own rule: a broker writes at its first check at least `loadBalanceSheddingDelayInSeconds`
//!      after it last lost a bundle. TransferShedder's cool-down waits for load data *produced* that long
//!      after the unload (`updatedAt − unload time`); rule 1 fires within seconds of the unload, so a broker
//!      whose load then moves by less than the threshold would hold every cycle in `CoolDown` for up to
//!      `loadBalancerReportUpdateMaxIntervalMinutes` (15) — as it would on Pulsar's extensible brokers. With
//!      this write the cool-down ends at the first cycle after the delay.
//! * **The leader** is [`crate::core::leader::Leader`], the state machine a cluster's leader task drives, here
//!   executed by `engine/leader.rs` (which plays the store and the brokers' ownership agents). It is elected
//!   once every broker joining at an instant is registered: the registered broker with the lowest id; when it
//!   leaves, the next one is elected and reads the simulated store back (records, ownership, reports, flushed
//!   data), with fresh strategies and its stream counters at 0, as a new leader of a cluster does. Every
//!   written report is one event. The split check follows report arrivals, at most once per 5-s period.
//! * **Moves**: an assignment record naming a new destination takes the bundle off its current owner at once
//!   (a crashed owner's only when its session expires; an owner still loading it once loaded); the destination
//!   (when up and registered) takes the ownership node then and serves the bundle `moveSeconds` later (the
//!   host's load). Shedding waits while a move is in flight or not yet visible in the reports, as the leader
//!   does in a cluster. Records of bundles that split meanwhile are not carried out (`failedUnloads`; traced as
//!   `unload <bundle> not carried out: <why>`).
//! * **Leaving brokers**: a graceful stop releases its bundles and deregisters at once (Pulsar's
//!   `disableBroker` before unloading); a crash is noticed after `metadataStoreSessionTimeoutMillis`, when its
//!   registration and ownership nodes vanish. The leader then re-places the bundles recorded on it (`orphan`).
//!   A restarted broker comes back empty, and takes what records name it destination of.
//! * **Splits** follow the plan's boundaries, or the configured algorithm over the bundle's topics when the
//!   plan leaves them to the owner (the leader asks the owner for the split points); children take the topics
//!   whose hash they contain. The parent's owner serves the children `moveSeconds` after the split (its host
//!   loads them); the leader places them anew when `loadBalancerAutoUnloadSplitBundlesEnabled` says so, and
//!   they move from the owner once it loaded them, as in a cluster.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use foldhash::HashMap;
use std::sync::atomic::{AtomicI64, Ordering as AtomicOrdering};
use std::time::Instant;

use serde::Serialize;

mod brokers;
mod leader;
mod optimum;
mod traffic;

use std::collections::VecDeque;

use super::metrics::{Metrics, MoveRecord, RecordWrite, Recorder, ReportRecord, SplitRecord};
use super::world::{Spike, World};
use crate::bundle::{BundleRange, NamespaceBundles};
use crate::config::{PlacementKind, Settings, ShedderKind};
use crate::core::leader::{Event, Leader as Core, Tick};
use crate::core::report_rules::{
    extensible_reporting, report_check_phase_ms, settled_reporting, ReportFigures, SettledReports,
};
use crate::core::weights4;
use crate::model::{LocalBrokerData, ResourceWeights, SystemResourceUsage};
use crate::runtime::synthetic::Rates;
use leader::SimStore;

/// Metric sample period, ms.
pub const SAMPLE_MS: i64 = 5_000;

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Effective settings (strategy keys already set, see [`effective_settings`]).
    pub settings: Settings,
    /// Seed of every random choice.
    pub seed: u64,
    /// Chart sample period, ms.
    pub chart_interval_ms: i64,
    /// Keep a log of every decision with its reason ([`RunResult::trace`]).
    pub trace: bool,
}

/// Scores over time, for the charts.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Series {
    /// Broker ids, in world order.
    pub brokers: Vec<String>,
    /// Sample times, minutes from the start.
    pub minutes: Vec<f64>,
    /// Per broker, its score at each sample (`None` while down).
    pub scores: Vec<Vec<Option<f32>>>,
    /// Minutes at which shedding moves were decided.
    pub move_minutes: Vec<f64>,
    /// Minutes at which splits happened.
    pub split_minutes: Vec<f64>,
    /// Run length, minutes.
    pub duration_minutes: f64,
}

/// The outcome of one run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    /// Scenario name.
    pub scenario: String,
    /// Shedding strategy.
    pub strategy: String,
    /// Placement strategy.
    pub placement: String,
    /// Seed.
    pub seed: u64,
    /// Metrics.
    pub metrics: Metrics,
    /// Wall-clock seconds of the run.
    pub wall_seconds: f64,
    /// Simulated shedding intervals per wall-clock second.
    pub simulated_cycles_per_second: f64,
    /// Chart data (not serialised with the metrics).
    #[serde(skip)]
    pub series: Series,
    /// Shedding moves (not serialised).
    #[serde(skip)]
    pub moves: Vec<MoveRecord>,
    /// With [`RunOptions::trace`]: every decision and event, `+<minutes> <what>: <reason>` (not serialised).
    #[serde(skip)]
    pub trace: Vec<String>,
    /// With [`RunOptions::trace`]: every report written, in order (not serialised).
    #[serde(skip)]
    pub reports: Vec<ReportRecord>,
    /// With [`RunOptions::trace`]: every assignment record the leaders wrote, in order (not serialised).
    #[serde(skip)]
    pub records: Vec<RecordWrite>,
    /// With [`RunOptions::trace`]: every split, in order (not serialised).
    #[serde(skip)]
    pub splits: Vec<SplitRecord>,
    /// Who holds each bundle's ownership node at the end: bundle → broker id (not serialised).
    #[serde(skip)]
    pub owners: BTreeMap<String, String>,
}

/// The settings of a run: `broker.conf` text of the scenario, then of `--config` (its keys win), then the
/// strategy under test. Placement: an explicitly configured placement is kept (unless it is AvgShedder while the
/// shedder is not — Pulsar refuses that pairing); otherwise the 5.0 pairing of the shedder
/// ([`ShedderKind::default_placement`]).
pub fn effective_settings(
    scenario_text: &str,
    config: Option<(&str, &str)>,
    shedder: ShedderKind,
) -> Result<(Settings, Vec<String>), super::SimError> {
    let mut text = scenario_text.to_owned();
    let mut label = "scenario settings".to_owned();
    if let Some((file, body)) = config {
        text.push('\n');
        text.push_str(body);
        label = format!("scenario settings + {file}");
    }
    let loaded =
        Settings::from_text(&text, &label).map_err(|e| super::SimError::Config(e.to_string()))?;
    let warnings: Vec<String> = loaded
        .warnings
        .iter()
        .filter(|w| {
            !w.message.starts_with("unknown key")
                && !w.message.contains("is set again")
                && !w.message.contains("falls back to")
        })
        .map(|w| w.to_string())
        .collect();
    let mut s = loaded.settings;
    let explicit = s
        .is_explicit("loadBalancerLoadPlacementStrategy")
        .then_some(s.load_balancer_load_placement_strategy);
    s.load_balancer_load_shedding_strategy = shedder;
    s.load_balancer_load_placement_strategy = match explicit {
        Some(PlacementKind::AvgShedder) if shedder != ShedderKind::AvgShedder => {
            shedder.default_placement()
        }
        Some(p) if shedder != ShedderKind::TransferShedder => p,
        _ => shedder.default_placement(),
    };
    Ok((s, warnings))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    On(usize),
    Moving(usize),
    Unowned,
}

#[derive(Debug, Clone)]
struct Bundle {
    name: String,
    ns: usize,
    range: BundleRange,
    topics: Vec<usize>,
    rates: Rates,
    producers: i32,
    consumers: i32,
    owner: Owner,
    live: bool,
    /// The broker holding its ownership node.
    node: Option<usize>,
}

#[derive(Debug, Clone, Copy)]
struct Written {
    figures: ReportFigures,
    at: i64,
}

#[derive(Debug, Clone)]
struct Broker {
    up: bool,
    registered: bool,
    epoch: u64,
    ns_rates: Vec<Rates>,
    ns_count: Vec<u32>,
    total: Rates,
    bundles: BTreeSet<usize>,
    local: LocalBrokerData,
    /// The gains and losses of the last report written (`None` before its registration): with `local`, what a
    /// new leader reads.
    reported_deltas: Option<(BTreeSet<String>, BTreeSet<String>)>,
    last: Option<Written>,
    checks: u64,
    host: SystemResourceUsage,
    acc: (SystemResourceUsage, u32),
    /// When the samples in `acc` began (ms; `None` while it is empty).
    acc_from: Option<i64>,
    /// When the samples averaged into `host` began (ms).
    host_from: i64,
    /// Settled reporting: the follow-up write due after a traffic change.
    settled: SettledReports,
    phase_ms: i64,
    spikes: Vec<Spike>,
    /// Extensible reporting: the bundle set seen at a check differed from the one seen at the check before, since
    /// the last write (a bundle was unloaded, split or assigned here).
    owners_changed: bool,
    /// A fingerprint of `bundles` (the XOR of [`set_key`] of its members), kept by `own` and `unown`.
    set_hash: u64,
    /// `set_hash` at the last check (or the registration).
    checked_hash: u64,
    /// Extensible reporting: when this broker last lost a bundle (ms); it writes at its first check at least
    /// `loadBalanceSheddingDelayInSeconds` later unless it wrote since then.
    last_loss: Option<i64>,
}

#[derive(Debug, Clone)]
enum Ev {
    Timeline(usize),
    Join(usize),
    Deregister(usize, u64),
    Elect,
    MoveDone(usize, usize),
    RampStep(usize, u32),
    Check(usize, u64),
    /// A wake the leader asked for (split check, early shedding cycle), in its term.
    Wake(u64, Tick),
    Shed(u64),
    Flush(u64),
    Sample,
}

impl Ev {
    fn priority(&self) -> u8 {
        match self {
            Ev::Timeline(_) | Ev::Join(_) | Ev::Deregister(..) | Ev::Elect => 0,
            Ev::MoveDone(..) | Ev::RampStep(..) => 1,
            Ev::Check(..) => 2,
            Ev::Flush(_) => 3,
            Ev::Wake(..) | Ev::Shed(_) => 4,
            Ev::Sample => 5,
        }
    }
}

#[derive(Debug)]
struct Item {
    t: i64,
    prio: u8,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    /// Reversed, so the `BinaryHeap` pops the earliest.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.t, o.prio, o.seq).cmp(&(self.t, self.prio, self.seq))
    }
}

/// One run in progress.
struct Sim<'w> {
    world: &'w World,
    settings: Settings,
    weights4: ResourceWeights,
    seed: u64,
    /// `loadBalancerReportUpdateMinIntervalMillis`, ms.
    check_ms: i64,
    /// Report checks per host-usage sample ([`Settings::host_usage_interval`] ÷ the check period, at least 1).
    host_every: u64,
    /// [`Settings::report_max_interval`], ms.
    report_max_ms: i64,
    /// [`Settings::shedding_interval`], ms.
    shed_ms: i64,
    /// [`Settings::flush_interval`], ms.
    flush_ms: i64,
    queue: BinaryHeap<Item>,
    seq: u64,
    brokers: Vec<Broker>,
    bundles: Vec<Bundle>,
    by_name: HashMap<String, usize>,
    topic_bundle: Vec<usize>,
    topic_mult: Vec<f64>,
    ns_bundles: Vec<NamespaceBundles>,
    leader: Option<Core>,
    leader_idx: Option<usize>,
    leader_epoch: u64,
    /// The simulated store the leader reads and writes.
    store: SimStore,
    /// Store notifications caused by the commands of the current step, delivered after it.
    notices: VecDeque<Event>,
    /// Bundles a lookup could not place; looked up again when a broker joins.
    unplaced: BTreeSet<usize>,
    /// Open lookups: request id → bundle.
    lookups: HashMap<u64, usize>,
    next_request: u64,
    /// An election is scheduled.
    electing: bool,
    moves_dest: Vec<usize>,
    ramps: Vec<traffic::Ramp>,
    recorder: Recorder,
    /// Whether the optimality measure was taken.
    min_moves_measured: bool,
    series: Series,
    chart_ms: i64,
    class_name: &'static str,
    /// Brokers report as the extensible manager's do (see the module docs):
    /// [`extensible_reporting`].
    extensible_reports: bool,
    /// [`settled_reporting`].
    settled_reports: bool,
    trace: Option<Vec<String>>,
    /// With a trace: every report written.
    reports: Vec<ReportRecord>,
    /// With a trace: every assignment record written.
    records: Vec<RecordWrite>,
    /// With a trace: every split.
    splits: Vec<SplitRecord>,
    now: i64,
    /// Every namespace's wave multiplier at one instant: `(t, waves)`, computed at most once per instant
    /// (report checks, report writes and samples at the same instant share it).
    waves: std::cell::RefCell<(i64, Vec<f64>)>,
}

/// A bundle's key in a broker's [`Broker::set_hash`] (splitmix64 of its index: distinct sets collide with
/// probability 2⁻⁶⁴).
fn set_key(bi: usize) -> u64 {
    let mut z = (bi as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A period in whole ms (the simulator's time unit).
fn ms(d: std::time::Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

impl<'w> Sim<'w> {
    fn new(world: &'w World, options: &RunOptions) -> Self {
        let settings = options.settings.clone();
        let check_ms = ms(settings.report_check_interval());
        let n_ns = world.namespaces.len();
        let mut bundles = Vec::with_capacity(world.bundles.len());
        let mut by_name =
            HashMap::with_capacity_and_hasher(world.bundles.len(), Default::default());
        let mut index: BTreeMap<(usize, u64), usize> = BTreeMap::new();
        for (i, b) in world.bundles.iter().enumerate() {
            let name = world.bundle_name(b);
            by_name.insert(name.clone(), i);
            index.insert((b.ns, b.range.lower()), i);
            bundles.push(Bundle {
                name,
                ns: b.ns,
                range: b.range,
                topics: Vec::new(),
                rates: Rates::default(),
                producers: 0,
                consumers: 0,
                owner: Owner::Unowned,
                live: true,
                node: None,
            });
        }
        let mut topic_bundle = Vec::with_capacity(world.topics.len());
        for (ti, t) in world.topics.iter().enumerate() {
            let r = world.namespaces[t.ns].bundles.find(t.hash);
            let bi = index[&(t.ns, r.lower())];
            let b = &mut bundles[bi];
            b.topics.push(ti);
            b.rates.add_scaled(&t.base, 1.0);
            b.producers += t.producers;
            b.consumers += t.consumers;
            topic_bundle.push(bi);
        }
        let brokers = world
            .brokers
            .iter()
            .enumerate()
            .map(|(i, spec)| Broker {
                up: false,
                registered: false,
                epoch: 0,
                ns_rates: vec![Rates::default(); n_ns],
                ns_count: vec![0; n_ns],
                total: Rates::default(),
                bundles: BTreeSet::new(),
                local: LocalBrokerData::default(),
                reported_deltas: None,
                last: None,
                checks: 0,
                host: SystemResourceUsage::default(),
                acc: (SystemResourceUsage::default(), 0),
                acc_from: None,
                host_from: 0,
                settled: SettledReports::default(),
                phase_ms: report_check_phase_ms(options.seed, &spec.id, check_ms),
                spikes: world
                    .spikes
                    .iter()
                    .filter(|s| s.broker == i && s.end_ms > s.start_ms)
                    .copied()
                    .collect(),
                owners_changed: false,
                set_hash: 0,
                checked_hash: 0,
                last_loss: None,
            })
            .collect();
        let series = Series {
            brokers: world.brokers.iter().map(|b| b.id.clone()).collect(),
            scores: vec![Vec::new(); world.brokers.len()],
            duration_minutes: world.duration_ms as f64 / 60_000.0,
            ..Default::default()
        };
        Sim {
            world,
            weights4: weights4(&settings),
            check_ms,
            host_every: (ms(settings.host_usage_interval()) / check_ms).max(1) as u64,
            report_max_ms: ms(settings.report_max_interval()),
            shed_ms: ms(settings.shedding_interval()),
            flush_ms: ms(settings.flush_interval()),
            class_name: settings.load_manager_class_name.class_name(),
            extensible_reports: extensible_reporting(&settings),
            settled_reports: settled_reporting(&settings),
            settings,
            seed: options.seed,
            queue: BinaryHeap::new(),
            seq: 0,
            brokers,
            bundles,
            by_name,
            topic_bundle,
            topic_mult: vec![1.0; world.topics.len()],
            ns_bundles: world.namespaces.iter().map(|n| n.bundles.clone()).collect(),
            leader: None,
            leader_idx: None,
            leader_epoch: 0,
            store: SimStore::default(),
            notices: VecDeque::new(),
            unplaced: BTreeSet::new(),
            lookups: HashMap::default(),
            next_request: 0,
            electing: false,
            moves_dest: Vec::new(),
            ramps: Vec::new(),
            recorder: Recorder::new(SAMPLE_MS, world.converge_after_ms),
            min_moves_measured: false,
            series,
            chart_ms: options.chart_interval_ms.max(SAMPLE_MS),
            trace: options.trace.then(Vec::new),
            reports: Vec::new(),
            records: Vec::new(),
            splits: Vec::new(),
            now: 0,
            waves: std::cell::RefCell::new((i64::MIN, Vec::new())),
        }
    }

    fn log(&mut self, t: i64, line: String) {
        if let Some(trace) = self.trace.as_mut() {
            let s = t / 1000;
            trace.push(format!("+{}m{:02}s {line}", s / 60, s % 60));
        }
    }

    fn push(&mut self, t: i64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Item {
            t,
            prio: ev.priority(),
            seq: self.seq,
            ev,
        });
    }

    fn own(&mut self, bi: usize, broker: usize) {
        let b = &mut self.bundles[bi];
        b.owner = Owner::On(broker);
        let br = &mut self.brokers[broker];
        if br.bundles.insert(bi) {
            br.set_hash ^= set_key(bi);
        }
        br.ns_rates[b.ns].add_scaled(&b.rates, 1.0);
        br.ns_count[b.ns] += 1;
        br.total.add_scaled(&b.rates, 1.0);
    }

    fn unown(&mut self, bi: usize) {
        if let Owner::On(o) = self.bundles[bi].owner {
            let b = &self.bundles[bi];
            let br = &mut self.brokers[o];
            br.last_loss = Some(self.now);
            if br.bundles.remove(&bi) {
                br.set_hash ^= set_key(bi);
            }
            br.ns_rates[b.ns].add_scaled(&b.rates, -1.0);
            br.ns_count[b.ns] -= 1;
            if br.ns_count[b.ns] == 0 {
                br.ns_rates[b.ns] = Rates::default();
            }
            br.total.add_scaled(&b.rates, -1.0);
            if br.bundles.is_empty() {
                br.total = Rates::default();
            }
        }
        self.bundles[bi].owner = Owner::Unowned;
    }

    fn id(&self, b: usize) -> &str {
        &self.world.brokers[b].id
    }

    fn broker_index(&self, id: &str) -> Option<usize> {
        self.world.brokers.iter().position(|b| b.id == id)
    }

    /// An unload the leader planned that the cluster cannot carry out (`failedUnloads`).
    fn failed_unload(&mut self, t: i64, bundle: &str, why: &str) {
        self.recorder.counts.failed_unloads += 1;
        self.log(t, format!("unload {bundle} not carried out: {why}"));
    }

    /// The destination's host finished loading the bundle: it serves it from now on (and lets it go at once
    /// when a record named another broker meanwhile, [`Sim::loaded`]).
    fn move_done(&mut self, t: i64, bi: usize, mid: usize) {
        if self.bundles[bi].owner != Owner::Moving(mid) {
            return;
        }
        self.bundles[bi].owner = Owner::Unowned;
        let d = self.moves_dest[mid];
        if self.brokers[d].up && self.bundles[bi].node == Some(d) {
            self.own(bi, d);
            self.loaded(t, bi, d);
        }
    }

    fn run(mut self, progress: Option<&AtomicI64>) -> Outcome {
        for (i, b) in self.world.bundles.iter().enumerate() {
            if let Some(o) = b.owner {
                self.own(i, o);
                self.bundles[i].node = Some(o);
            }
        }
        self.initial_store();
        for b in 0..self.brokers.len() {
            let at = self.world.brokers[b].join_ms;
            self.push(at, Ev::Join(b));
        }
        for i in 0..self.world.events.len() {
            let at = self.world.events[i].0;
            self.push(at, Ev::Timeline(i));
        }
        self.push(0, Ev::Sample);
        let end = self.world.duration_ms;
        while let Some(item) = self.queue.pop() {
            let t = item.t;
            if t > end {
                break;
            }
            self.now = t;
            match item.ev {
                Ev::Timeline(i) => self.timeline(i, t),
                Ev::Join(b) => {
                    if !self.brokers[b].up {
                        self.join(b, t);
                    }
                }
                Ev::Deregister(b, e) => {
                    if self.brokers[b].epoch == e && self.brokers[b].registered {
                        self.deregister(b, t);
                    }
                }
                Ev::Elect => self.elect(t),
                Ev::MoveDone(bi, mid) => self.move_done(t, bi, mid),
                Ev::RampStep(r, k) => self.ramp_step(r, k, t),
                Ev::Check(b, e) => {
                    if self.brokers[b].up && self.brokers[b].epoch == e {
                        self.check(b, t);
                    }
                }
                Ev::Wake(e, tick) => {
                    if e == self.leader_epoch {
                        self.leader_tick(t, tick);
                    }
                }
                Ev::Shed(e) => {
                    if e == self.leader_epoch {
                        self.leader_tick(t, Tick::Shedding);
                        self.push(t + self.shed_ms, Ev::Shed(e));
                    }
                }
                Ev::Flush(e) => {
                    if e == self.leader_epoch {
                        self.leader_tick(t, Tick::Flush);
                        self.push(t + self.flush_ms, Ev::Flush(e));
                    }
                }
                Ev::Sample => {
                    self.sample(t);
                    if let Some(p) = progress {
                        p.store(t, AtomicOrdering::Relaxed);
                    }
                    self.push(t + SAMPLE_MS, Ev::Sample);
                }
            }
        }
        let mut metrics = self.recorder.finish();
        metrics.moves = self.recorder.moves.len() as u64;
        self.series.move_minutes = self
            .recorder
            .moves
            .iter()
            .map(|m| m.at_ms as f64 / 60_000.0)
            .collect();
        let owners = self
            .bundles
            .iter()
            .filter(|b| b.live)
            .filter_map(|b| Some((b.name.clone(), self.world.brokers[b.node?].id.clone())))
            .collect();
        Outcome {
            metrics,
            series: self.series,
            moves: self.recorder.moves,
            trace: self.trace.unwrap_or_default(),
            reports: self.reports,
            records: self.records,
            splits: self.splits,
            owners,
        }
    }
}

/// What [`Sim::run`] hands back.
struct Outcome {
    metrics: Metrics,
    series: Series,
    moves: Vec<MoveRecord>,
    trace: Vec<String>,
    reports: Vec<ReportRecord>,
    records: Vec<RecordWrite>,
    splits: Vec<SplitRecord>,
    owners: BTreeMap<String, String>,
}

/// Runs one world with one strategy pair; `progress` (if given) receives the simulated ms reached.
pub fn run(world: &World, options: &RunOptions, progress: Option<&AtomicI64>) -> RunResult {
    let started = Instant::now();
    let sim = Sim::new(world, options);
    let Outcome {
        metrics,
        series,
        moves,
        trace,
        reports,
        records,
        splits,
        owners,
    } = sim.run(progress);
    let wall = started.elapsed().as_secs_f64();
    let interval = ms(options.settings.shedding_interval()) as f64;
    RunResult {
        scenario: world.name.clone(),
        strategy: options
            .settings
            .load_balancer_load_shedding_strategy
            .name()
            .to_owned(),
        placement: crate::core::Strategies::from_settings(&options.settings)
            .placement
            .strategy
            .name()
            .to_owned(),
        seed: options.seed,
        metrics,
        wall_seconds: wall,
        simulated_cycles_per_second: if wall > 0.0 {
            world.duration_ms as f64 / interval / wall
        } else {
            0.0
        },
        series,
        moves,
        trace,
        reports,
        records,
        splits,
        owners,
    }
}
