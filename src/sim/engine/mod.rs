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
//! * **The leader** is the first broker up; when it leaves, the registered broker with the lowest id takes
//!   over ([`Leader::take_over`]). Every written report is applied at once (one aggregation per
//!   notification). Split selection runs after report arrivals, at most once per 5-s period (Pulsar runs it
//!   after every notification; within 5 s it would select the same bundles).
//! * **Moves**: a shedding unload takes the bundle off its current owner at once (a crashed owner's only when its
//!   session expires; an owner still loading it once loaded: see `leader.rs`); the planned destination owns
//!   it `moveSeconds` later (if that broker left meanwhile, the bundle is placed by a lookup). Unloads of
//!   bundles that moved or split since the leader's view are not carried out (`failedUnloads`; traced as
//!   `unload <bundle> not carried out: <why>`). A split parent cannot be among them: the leader forgets it
//!   when the split happens ([`Leader::on_bundle_split`]).
//! * **Leaving brokers**: a graceful stop deregisters at once (Pulsar's `disableBroker` before unloading);
//!   its bundles are looked up and placed by [`Leader::assign`] `moveSeconds` later. A crash is noticed after
//!   `metadataStoreSessionTimeoutMillis`; the bundles are placed then. A restarted broker comes back empty.
//! * **Splits** follow the plan's boundaries, or the configured algorithm over the bundle's topics when the
//!   plan leaves them to the owner; children take the topics whose hash they contain. The parent's owner serves
//!   the children `moveSeconds` after the split (its host loads them); children placed anew move from it once
//!   it loaded them.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering as AtomicOrdering};
use std::time::Instant;

use serde::Serialize;

mod leader;

use std::collections::VecDeque;

use super::metrics::{Metrics, MoveRecord, RecordWrite, Recorder, ReportRecord, SplitRecord};
use super::model::score;
use super::world::{Spike, World, WorldEvent};
use crate::bundle::{BundleRange, NamespaceBundles};
use crate::config::{PlacementKind, Settings, ShedderKind};
use crate::core::leader::{Event, Leader as Core, Tick};
use crate::core::random::noise;
use crate::core::report_rules::{
    extensible_reporting, forced_report_reason, report_check_phase_ms, update_trigger,
    weighted_usage, ReportFigures,
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
    /// The last report written (what a new leader reads).
    report: Option<LocalBrokerData>,
    last: Option<Written>,
    checks: u64,
    host: SystemResourceUsage,
    acc: (SystemResourceUsage, u32),
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
    SplitCheck(u64),
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
            Ev::SplitCheck(_) | Ev::Shed(_) => 4,
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

struct Ramp {
    topics: Vec<usize>,
    from: Vec<f64>,
    factor: f64,
    steps: u32,
}

const RAMP_STEP_MS: i64 = 30_000;

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
    ramps: Vec<Ramp>,
    recorder: Recorder,
    series: Series,
    chart_ms: i64,
    class_name: &'static str,
    /// Brokers report as the extensible manager's do (see the module docs):
    /// [`extensible_reporting`].
    extensible_reports: bool,
    trace: Option<Vec<String>>,
    /// With a trace: every report written.
    reports: Vec<ReportRecord>,
    /// With a trace: every assignment record written.
    records: Vec<RecordWrite>,
    /// With a trace: every split.
    splits: Vec<SplitRecord>,
    now: i64,
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

fn add_usage(a: &mut SystemResourceUsage, b: &SystemResourceUsage) {
    for (x, y) in [
        (&mut a.cpu, &b.cpu),
        (&mut a.memory, &b.memory),
        (&mut a.direct_memory, &b.direct_memory),
        (&mut a.bandwidth_in, &b.bandwidth_in),
        (&mut a.bandwidth_out, &b.bandwidth_out),
    ] {
        x.usage += y.usage;
        x.limit = y.limit;
    }
}

fn mean_usage(sum: &SystemResourceUsage, n: u32) -> SystemResourceUsage {
    let mut m = *sum;
    for r in [
        &mut m.cpu,
        &mut m.memory,
        &mut m.direct_memory,
        &mut m.bandwidth_in,
        &mut m.bandwidth_out,
    ] {
        r.usage /= n.max(1) as f64;
    }
    m
}

impl<'w> Sim<'w> {
    fn new(world: &'w World, options: &RunOptions) -> Self {
        let settings = options.settings.clone();
        let check_ms = ms(settings.report_check_interval());
        let n_ns = world.namespaces.len();
        let mut bundles = Vec::with_capacity(world.bundles.len());
        let mut by_name = HashMap::with_capacity(world.bundles.len());
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
                report: None,
                last: None,
                checks: 0,
                host: SystemResourceUsage::default(),
                acc: (SystemResourceUsage::default(), 0),
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
            lookups: HashMap::new(),
            next_request: 0,
            electing: false,
            moves_dest: Vec::new(),
            ramps: Vec::new(),
            recorder: Recorder::new(SAMPLE_MS, world.converge_after_ms),
            series,
            chart_ms: options.chart_interval_ms.max(SAMPLE_MS),
            trace: options.trace.then(Vec::new),
            reports: Vec::new(),
            records: Vec::new(),
            splits: Vec::new(),
            now: 0,
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

    fn wave(&self, ns: usize, t: i64) -> f64 {
        self.world.namespaces[ns].wave.map_or(1.0, |w| w.at(t))
    }

    fn broker_rates(&self, b: usize, t: i64) -> Rates {
        let br = &self.brokers[b];
        if self.world.namespaces.iter().all(|n| n.wave.is_none()) {
            return br.total.clamped();
        }
        let mut r = Rates::default();
        for (ns, c) in br.ns_count.iter().enumerate() {
            if *c > 0 {
                r.add_scaled(&br.ns_rates[ns], self.wave(ns, t));
            }
        }
        r.clamped()
    }

    fn spike(&self, b: usize, t: i64) -> f64 {
        self.brokers[b]
            .spikes
            .iter()
            .filter(|s| s.start_ms <= t && t < s.end_ms)
            .map(|s| s.points)
            .sum()
    }

    fn true_score(&self, b: usize, t: i64) -> f64 {
        let u = self.world.model.usage(
            &self.world.brokers[b].capacity,
            &self.broker_rates(b, t),
            self.spike(b, t),
            0.0,
        );
        score(&u, &self.weights4)
    }

    fn id(&self, b: usize) -> &str {
        &self.world.brokers[b].id
    }

    fn broker_index(&self, id: &str) -> Option<usize> {
        self.world.brokers.iter().position(|b| b.id == id)
    }

    fn join(&mut self, b: usize, t: i64) {
        let spec = &self.world.brokers[b];
        let host = spec
            .id
            .rsplit_once(':')
            .map_or(spec.id.as_str(), |(h, _)| h);
        let port = spec.id.rsplit_once(':').map_or("8080", |(_, p)| p);
        let local = LocalBrokerData {
            web_service_url: Some(format!("http://{host}:{port}")),
            pulsar_service_url: Some(format!("pulsar://{host}:6650")),
            broker_version_string: Some("loadmgr-sim".into()),
            load_manager_class_name: Some(self.class_name.to_owned()),
            start_timestamp: Some(self.world.start_ms + t),
            ..Default::default()
        };
        self.log(t, format!("broker {} starts", self.world.brokers[b].id));
        let br = &mut self.brokers[b];
        br.up = true;
        br.registered = true;
        br.epoch += 1;
        br.report = Some(local.clone());
        br.local = local;
        br.last = None;
        br.checks = 0;
        br.acc = (SystemResourceUsage::default(), 0);
        br.owners_changed = false;
        br.checked_hash = br.set_hash;
        br.last_loss = None;
        // The registration is the first report, with the host's usage and the bundles served (the runtime's agent
        // registers so): the broker's first check is now, and a leader sees one report, not an empty
        // registration then a report (the extensible EMAs start from the first report they see).
        self.check(b, t);
        if self.leader.is_none() && !self.electing {
            // Elected once every broker joining at this instant is registered.
            self.electing = true;
            self.push(t, Ev::Elect);
        }
        // Its agent takes what the records name it destination of.
        self.acquire_recorded(t, b);
        let notices: Vec<_> = self.notices.drain(..).collect();
        for n in notices {
            self.leader_step(t, n);
        }
        // Lookups that found no broker are tried again.
        let unplaced: Vec<usize> = std::mem::take(&mut self.unplaced).into_iter().collect();
        for bi in unplaced {
            if self.bundles[bi].live && self.bundles[bi].node.is_none() {
                self.look_up(t, bi);
            }
        }
    }

    /// The registered broker with the lowest id becomes leader.
    fn elect(&mut self, t: i64) {
        self.electing = false;
        if self.leader.is_some() {
            return;
        }
        let next = (0..self.brokers.len())
            .filter(|i| self.brokers[*i].registered)
            .min_by(|a, c| self.id(*a).cmp(self.id(*c)));
        if let Some(n) = next {
            self.start_leader(n, t);
        }
    }

    /// Broker `b`'s registration vanishes (a graceful stop, or the session of a crashed one expired): the
    /// ownership nodes of its session go with it.
    fn deregister(&mut self, b: usize, t: i64) {
        self.brokers[b].registered = false;
        let held: Vec<usize> = (0..self.bundles.len())
            .filter(|i| self.bundles[*i].node == Some(b))
            .collect();
        for &bi in &held {
            self.release(bi);
        }
        // Agents waiting for these nodes take them now (moves off the crashed broker planned before its session
        // expired).
        for &bi in &held {
            self.hand_over(t, bi);
        }
        let id = self.id(b).to_owned();
        if self.leader_idx == Some(b) {
            self.notices.clear();
            let next = (0..self.brokers.len())
                .filter(|i| self.brokers[*i].registered)
                .min_by(|a, c| self.id(*a).cmp(self.id(*c)));
            self.leader = None;
            self.leader_idx = None;
            self.leader_epoch += 1;
            if next.is_some() {
                self.elect(t);
            }
        } else {
            let notices: Vec<_> = self.notices.drain(..).collect();
            for n in notices {
                self.leader_step(t, n);
            }
            self.leader_step(t, Event::BrokerGone { broker: id });
        }
    }

    fn leave(&mut self, b: usize, t: i64, graceful: bool) {
        if !self.brokers[b].up {
            return;
        }
        self.log(
            t,
            format!(
                "broker {} {} with {} bundles",
                self.world.brokers[b].id,
                if graceful { "stops" } else { "crashes" },
                self.brokers[b].bundles.len()
            ),
        );
        self.brokers[b].up = false;
        self.brokers[b].epoch += 1;
        let serving: Vec<usize> = self.brokers[b].bundles.iter().copied().collect();
        for bi in serving {
            self.unown(bi);
        }
        if graceful {
            self.deregister(b, t);
        } else {
            let timeout = self.settings.metadata_store_session_timeout_millis.max(0);
            let epoch = self.brokers[b].epoch;
            self.push(t + timeout, Ev::Deregister(b, epoch));
        }
    }

    fn check(&mut self, b: usize, t: i64) {
        let period = self.check_ms;
        let host_every = self.host_every;
        let rates = self.broker_rates(b, t);
        let inst = self.world.model.usage(
            &self.world.brokers[b].capacity,
            &rates,
            self.spike(b, t),
            noise(self.seed, b as u64, self.brokers[b].checks),
        );
        let br = &mut self.brokers[b];
        if br.set_hash != br.checked_hash {
            br.owners_changed = true;
            br.checked_hash = br.set_hash;
        }
        add_usage(&mut br.acc.0, &inst);
        br.acc.1 += 1;
        if br.checks % host_every == 0 {
            br.host = mean_usage(&br.acc.0, br.acc.1);
            br.acc = (SystemResourceUsage::default(), 0);
        }
        br.checks += 1;
        let next = if br.checks == 1 {
            t + br.phase_ms
        } else {
            t + period
        };
        let epoch = br.epoch;
        let current = ReportFigures {
            msg_rate: rates.total_rate(),
            throughput: rates.total_tp(),
            bundles: br.bundles.len() as i32,
            weighted_usage: weighted_usage(&br.host, &self.settings),
        };
        let threshold = self
            .settings
            .load_balancer_report_update_threshold_percentage as f64;
        let (need, forced) = match br.last {
            None => (true, None),
            Some(last) => {
                let need = update_trigger(
                    &last.figures,
                    &current,
                    t - last.at,
                    self.report_max_ms,
                    threshold,
                )
                .is_some();
                let forced = (self.extensible_reports && !need)
                    .then(|| {
                        forced_report_reason(
                            br.owners_changed,
                            br.last_loss,
                            last.at,
                            t,
                            self.settings
                                .load_balance_shedding_delay_in_seconds
                                .saturating_mul(1000),
                        )
                    })
                    .flatten();
                (need, forced)
            }
        };
        self.push(next, Ev::Check(b, epoch));
        if let Some(why) = forced {
            let line = format!("report {} forced: {why}", self.world.brokers[b].id);
            self.log(t, line);
        }
        if need || forced.is_some() {
            self.write_report(b, t);
        }
    }

    fn write_report(&mut self, b: usize, t: i64) {
        let waves: Vec<f64> = (0..self.world.namespaces.len())
            .map(|ns| self.wave(ns, t))
            .collect();
        let stats = self.brokers[b]
            .bundles
            .iter()
            .map(|bi| {
                let bd = &self.bundles[*bi];
                let m = waves[bd.ns];
                (
                    bd.name.clone(),
                    crate::model::NamespaceBundleStats {
                        msg_rate_in: bd.rates.rate_in.max(0.0) * m,
                        msg_rate_out: bd.rates.rate_out.max(0.0) * m,
                        msg_throughput_in: bd.rates.tp_in.max(0.0) * m,
                        msg_throughput_out: bd.rates.tp_out.max(0.0) * m,
                        consumer_count: bd.consumers,
                        producer_count: bd.producers,
                        topics: bd.topics.len() as i64,
                        cache_size: 0,
                    },
                )
            })
            .collect();
        let now = self.world.start_ms + t;
        let br = &mut self.brokers[b];
        let host = br.host;
        br.local.update(&host, stats);
        br.local.last_update = now;
        let report = br.local.clone();
        br.local.clean_deltas();
        br.owners_changed = false;
        let figures = ReportFigures::of(&report, &self.settings);
        br.last = Some(Written { figures, at: t });
        if self.trace.is_some() {
            self.reports.push(ReportRecord {
                at_ms: t,
                broker: self.world.brokers[b].id.clone(),
                usage: host,
                figures,
            });
        }
        self.recorder.counts.reports_written += 1;
        if !br.registered {
            return;
        }
        let id = self.world.brokers[b].id.clone();
        self.brokers[b].report = Some(report.clone());
        self.leader_step(
            t,
            Event::Report {
                broker: id,
                report: Ok(report),
            },
        );
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

    fn set_topic_mult(&mut self, ti: usize, m: f64) {
        let old = self.topic_mult[ti];
        if old == m {
            return;
        }
        self.topic_mult[ti] = m;
        let base = self.world.topics[ti].base;
        let bi = self.topic_bundle[ti];
        let delta = base.scaled(m - old);
        let b = &mut self.bundles[bi];
        b.rates.add_scaled(&delta, 1.0);
        if let Owner::On(o) = b.owner {
            let ns = b.ns;
            let br = &mut self.brokers[o];
            br.ns_rates[ns].add_scaled(&delta, 1.0);
            br.total.add_scaled(&delta, 1.0);
        }
    }

    fn ramp_step(&mut self, r: usize, k: u32, t: i64) {
        let (steps, factor) = (self.ramps[r].steps, self.ramps[r].factor);
        let topics = self.ramps[r].topics.clone();
        for (j, ti) in topics.iter().enumerate() {
            let from = self.ramps[r].from[j];
            self.set_topic_mult(*ti, from + (factor - from) * k as f64 / steps as f64);
        }
        if k < steps {
            self.push(t + RAMP_STEP_MS, Ev::RampStep(r, k + 1));
        }
    }

    fn timeline(&mut self, i: usize, t: i64) {
        match &self.world.events[i].1 {
            WorldEvent::Stop { broker, graceful } => self.leave(*broker, t, *graceful),
            WorldEvent::Restart { broker, down_ms } => {
                let (b, down) = (*broker, *down_ms);
                if self.brokers[b].up {
                    self.leave(b, t, true);
                    self.push(t + down, Ev::Join(b));
                }
            }
            WorldEvent::Ramp {
                topics,
                factor,
                ramp_ms,
            } => {
                let steps = (ramp_ms / RAMP_STEP_MS).max(1) as u32;
                let from = topics.iter().map(|t| self.topic_mult[*t]).collect();
                self.ramps.push(Ramp {
                    topics: topics.clone(),
                    from,
                    factor: *factor,
                    steps,
                });
                let r = self.ramps.len() - 1;
                if *ramp_ms == 0 {
                    self.ramp_step(r, 1, t);
                } else {
                    self.push(t + RAMP_STEP_MS, Ev::RampStep(r, 1));
                }
            }
        }
    }

    fn sample(&mut self, t: i64) {
        let mut scores = Vec::with_capacity(self.brokers.len());
        let chart = t % self.chart_ms == 0;
        if chart {
            self.series.minutes.push(t as f64 / 60_000.0);
        }
        for b in 0..self.brokers.len() {
            let s = if self.brokers[b].up {
                let s = self.true_score(b, t);
                scores.push(s);
                Some(s as f32)
            } else {
                None
            };
            if chart {
                self.series.scores[b].push(s);
            }
        }
        self.recorder.sample(t, &scores);
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
                Ev::SplitCheck(e) => {
                    if e == self.leader_epoch {
                        self.leader_tick(t, Tick::SplitCheck);
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
