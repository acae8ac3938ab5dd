//! The router: scope transitions, weights, and the published choice ring.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::load::LoadSnapshot;
use super::refresh::RefreshSchedule;
use super::ring::{apportion, capacity_for, shuffle, PublishedRing};
use super::{entropy_seed, LoadMapping, RoutingError, Scope, TargetId, Topology};

/// Largest (and initial) weight of a target.
pub const MAX_WEIGHT: u8 = 100;
/// A target whose load is within this absolute margin of the scope's minimum load counts as uncongested.
pub const MIN_MARGIN: f64 = 0.05;
/// Most targets a router accepts (the ring then has `5 × MAX_TARGETS` slots).
pub const MAX_TARGETS: usize = 1 << 24;

const WEIGHT_GAIN: u8 = 1;
const WEIGHT_LOSS: u8 = 10;

/// Settings of a [`LoadAwareRouter`]. Storm's names: `topology.localityaware.higher.bound`,
/// `topology.localityaware.lower.bound`, `topology.disable.loadaware.messaging`.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterConfig {
    /// Widen the scope when its mean load is strictly above this fraction (default 0.8).
    pub higher_bound: f64,
    /// Narrow the scope when the narrower scope's mean load is strictly below this fraction (default 0.2).
    pub lower_bound: f64,
    /// Base period between refreshes (default 1 s).
    pub refresh_period: Duration,
    /// Each refresh is delayed by a further uniform random amount below this (default 500 ms), so that many
    /// senders do not refresh in lockstep.
    pub refresh_jitter: Duration,
    /// Plain shuffle over all targets, ignoring loads and locality (default false).
    pub disable_load_aware: bool,
    /// Seed of the ring shuffle (and of the refresh jitter); `None` draws one per router.
    pub seed: Option<u64>,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            higher_bound: 0.8,
            lower_bound: 0.2,
            refresh_period: Duration::from_secs(1),
            refresh_jitter: Duration::from_millis(500),
            disable_load_aware: false,
            seed: None,
        }
    }
}

impl RouterConfig {
    /// Checks the bounds: both finite, `0 < lower_bound <= higher_bound`.
    pub fn validate(&self) -> Result<(), RoutingError> {
        let (lower, higher) = (self.lower_bound, self.higher_bound);
        if lower.is_finite() && higher.is_finite() && lower > 0.0 && lower <= higher {
            Ok(())
        } else {
            Err(RoutingError::InvalidBounds { lower, higher })
        }
    }

    /// The refresh timing these settings describe.
    pub fn schedule(&self) -> RefreshSchedule {
        RefreshSchedule {
            period: self.refresh_period,
            jitter: self.refresh_jitter,
        }
    }
}

/// What one [`LoadAwareRouter::refresh`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Refreshed {
    /// Scope before the refresh.
    pub from: Scope,
    /// Scope after it.
    pub to: Scope,
    /// Mean load over `from`, the figure compared with the higher bound.
    pub scope_average: f64,
    /// Mean load of the next narrower scope (compared with the lower bound), if there is one.
    pub narrower_average: Option<f64>,
}

impl Refreshed {
    /// Whether the scope moved.
    pub fn scope_changed(&self) -> bool {
        self.from != self.to
    }
}

/// Chooses targets by locality and load; see the [module docs](super) for the algorithm and contracts.
///
/// `choose` is lock-free and allocation-free and may be called from any number of threads while another
/// thread calls `refresh` or `set_topology` (those two serialise on an internal mutex).
///
/// # Distribution guarantee
///
/// The published ring has `capacity` slots, `c` of them for a target with its share of the weights. Picks
/// advance one of [`STRIPES`](super::ring::STRIPES) cursors, the calling thread's *stripe* (details in
/// [`ring`](super::ring#cursor-stripes)). Between two publications of the ring:
///
/// * **Per stripe:** the picks taken on one stripe are consecutive values of its cursor, so any `capacity`
///   consecutive picks of a stripe return each in-scope target exactly as often as it has slots.
/// * **A single chooser thread** stays on stripe 0 for as long as it never meets contention, and stripe 0
///   starts at the ring's first slot: its picks are exactly those of one shared cursor, the same sequence
///   for the same seed, and any `capacity` consecutive picks of its own are one exact pass.
/// * **Overall**, from all threads together: a target with `c` slots receives its exact share
///   (`picks × c / capacity`) to within `c` for every stripe in use, so to within `c × STRIPES` at worst
///   however many threads choose and however their picks interleave. Threads that choose concurrently
///   spread over the stripes (a thread moves to another stripe whenever its cursor update loses a race),
///   so with fewer choosing threads than stripes each usually ends up with a stripe, and exact passes, of
///   its own. What is given up is one global round: two threads' passes are no longer interleaved into a
///   single pass, so over a short window the overall mix can be off by up to one pass per stripe in use.
///
/// Without striping, the one cursor every pick advanced was a cache line written by every choosing core,
/// and a pick from two threads cost several times a pick from one (`choose_2_threads` against
/// `choose_1_thread` in `benches/routing.rs`).
pub struct LoadAwareRouter {
    ring: PublishedRing,
    scope: AtomicU8,
    config: RouterConfig,
    state: Mutex<State>,
}

struct State {
    disabled: bool,
    targets: Vec<TargetId>,
    classes: Vec<Scope>,
    /// Targets classified exactly in each scope (not cumulative).
    exact: [usize; 4],
    weights: Vec<u8>,
    scope: Scope,
    loads: Vec<f64>,
    /// Per-class load statistics of `loads`, indexed by [`Scope::index`].
    stats: [ClassStats; 4],
    refreshes: u64,
    rng: StdRng,
    // Working memory kept between refreshes so that a steady-state refresh does not allocate.
    members: Vec<usize>,
    member_weights: Vec<u32>,
    counts: Vec<usize>,
    remainders: Vec<(u64, usize)>,
    ring: Vec<u32>,
}

impl LoadAwareRouter {
    /// A router over `topology`. The initial scope is the narrowest one with targets; every weight starts
    /// at [`MAX_WEIGHT`], so the first ring is an even shuffle over that scope.
    ///
    /// # Errors
    ///
    /// [`RoutingError::InvalidBounds`] for bad bounds; [`RoutingError::NoTargets`],
    /// [`RoutingError::DuplicateTarget`] or [`RoutingError::TooManyTargets`] for a bad topology.
    pub fn new(topology: &Topology, config: RouterConfig) -> Result<Self, RoutingError> {
        config.validate()?;
        topology.validate(MAX_TARGETS)?;
        let seed = config.seed.unwrap_or_else(entropy_seed);
        let mut state = State {
            disabled: config.disable_load_aware,
            targets: Vec::new(),
            classes: Vec::new(),
            exact: [0; 4],
            weights: Vec::new(),
            scope: Scope::WorkerLocal,
            loads: Vec::new(),
            stats: [ClassStats::EMPTY; 4],
            refreshes: 0,
            rng: StdRng::seed_from_u64(seed),
            members: Vec::new(),
            member_weights: Vec::new(),
            counts: Vec::new(),
            remainders: Vec::new(),
            ring: Vec::new(),
        };
        state.install(topology);
        state.scope = if state.disabled {
            Scope::Everything
        } else {
            state.canonical(Scope::WorkerLocal)
        };
        state.rebuild_ring(false);
        Ok(Self {
            ring: PublishedRing::new(&state.ring),
            scope: AtomicU8::new(state.scope as u8),
            config,
            state: Mutex::new(state),
        })
    }

    /// The next target. Lock-free and allocation-free. Between refreshes, any `capacity` consecutive picks
    /// of one cursor stripe (those of a thread choosing alone, in particular) return each in-scope target
    /// exactly as many times as it has ring slots, and all threads together stay within one pass per stripe
    /// in use of the exact shares (see [the guarantee](Self#distribution-guarantee)); a pick that overlaps a
    /// refresh returns a target of the ring published before or after it.
    #[inline]
    pub fn choose(&self) -> TargetId {
        TargetId(self.ring.pick())
    }

    /// One refresh: scope transition, weight update and a new ring, from the loads as they are now (see the
    /// [module docs](super)). With `disable_load_aware` nothing changes.
    pub fn refresh(&self, loads: &LoadMapping) -> Refreshed {
        self.refresh_from(&loads.snapshot())
    }

    /// [`Self::refresh`] from a snapshot taken earlier.
    pub fn refresh_from(&self, loads: &LoadSnapshot) -> Refreshed {
        let mut st = self.lock();
        st.refreshes += 1;
        st.read_loads(loads);
        let from = st.scope;
        let scope_average = st.average(from);
        if st.disabled {
            return Refreshed {
                from,
                to: from,
                scope_average,
                narrower_average: None,
            };
        }
        let narrower = st.narrower_effective(from);
        let narrower_average = narrower.map(|s| st.average(s));
        let to = if scope_average > self.config.higher_bound {
            st.wider_effective(from).unwrap_or(from)
        } else {
            match (narrower, narrower_average) {
                (Some(s), Some(avg)) if avg < self.config.lower_bound => s,
                _ => from,
            }
        };
        if to != from {
            st.weights.fill(MAX_WEIGHT);
            st.scope = to;
        }
        st.rebuild_ring(true);
        self.ring.publish(&st.ring);
        self.scope.store(to as u8, Ordering::Release);
        Refreshed {
            from,
            to,
            scope_average,
            narrower_average,
        }
    }

    /// Replaces the target set and locations. Surviving targets keep their weights, new ones start at
    /// [`MAX_WEIGHT`]; if the current scope no longer names the narrowest scope with its targets (targets
    /// appeared or disappeared) the scope moves there and every weight is reset. The new ring is published
    /// before this returns, so removed targets are not chosen afterwards.
    ///
    /// # Errors
    ///
    /// As [`Self::new`] for a bad topology; the router is then unchanged.
    pub fn set_topology(&self, topology: &Topology) -> Result<(), RoutingError> {
        topology.validate(MAX_TARGETS)?;
        let mut st = self.lock();
        st.install(topology);
        if !st.disabled {
            let scope = st.canonical(st.scope);
            if scope != st.scope {
                st.weights.fill(MAX_WEIGHT);
                st.scope = scope;
            }
        }
        st.rebuild_ring(false);
        self.ring.publish(&st.ring);
        self.scope.store(st.scope as u8, Ordering::Release);
        Ok(())
    }

    /// The current scope (`Everything` when load awareness is disabled).
    pub fn scope(&self) -> Scope {
        Scope::from_index(self.scope.load(Ordering::Acquire))
    }

    /// The settings.
    pub fn config(&self) -> &RouterConfig {
        &self.config
    }

    /// Slots in the ring: 1 for a single target, else `max(1000, 5 × targets)`.
    pub fn capacity(&self) -> usize {
        self.lock().ring.len()
    }

    /// Refreshes done so far.
    pub fn refresh_count(&self) -> u64 {
        self.lock().refreshes
    }

    /// Rings published so far (one at construction, one per load-aware refresh and per topology change).
    /// Lock-free.
    pub fn published_rings(&self) -> u64 {
        self.ring.generation()
    }

    /// Every target's weight, in topology order.
    pub fn weights(&self) -> Vec<(TargetId, u8)> {
        let st = self.lock();
        st.targets
            .iter()
            .copied()
            .zip(st.weights.iter().copied())
            .collect()
    }

    /// Every target's scope relative to the source, in topology order.
    pub fn target_scopes(&self) -> Vec<(TargetId, Scope)> {
        let st = self.lock();
        st.targets
            .iter()
            .copied()
            .zip(st.classes.iter().copied())
            .collect()
    }

    /// The targets of the current scope, in topology order.
    pub fn targets_in_scope(&self) -> Vec<TargetId> {
        let st = self.lock();
        st.targets
            .iter()
            .zip(&st.classes)
            .filter(|(_, c)| **c <= st.scope)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Slots per target in the published ring (targets without slots are left out).
    pub fn ring_counts(&self) -> BTreeMap<TargetId, usize> {
        let st = self.lock();
        let mut out = BTreeMap::new();
        for &v in &st.ring {
            *out.entry(TargetId(v)).or_insert(0) += 1;
        }
        out
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl fmt::Debug for LoadAwareRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("LoadAwareRouter")
            .field("scope", &st.scope)
            .field("targets", &st.targets.len())
            .field("capacity", &st.ring.len())
            .field("refreshes", &st.refreshes)
            .field("config", &self.config)
            .finish()
    }
}

impl State {
    /// Takes the targets of `topology`, keeping the weights of surviving targets.
    fn install(&mut self, topology: &Topology) {
        let old: HashMap<TargetId, u8> = self
            .targets
            .iter()
            .copied()
            .zip(self.weights.iter().copied())
            .collect();
        self.targets.clear();
        self.classes.clear();
        self.weights.clear();
        self.exact = [0; 4];
        for t in &topology.targets {
            let class = if self.disabled {
                Scope::Everything
            } else {
                topology.classify(t.location.as_ref())
            };
            self.targets.push(t.id);
            self.classes.push(class);
            self.exact[class.index()] += 1;
            self.weights
                .push(old.get(&t.id).copied().unwrap_or(MAX_WEIGHT));
        }
        // Loads of the previous target set are meaningless now; the next refresh reads them afresh (a ring
        // rebuilt before that keeps the weights as they are).
        self.loads.clear();
        self.stats = [ClassStats::EMPTY; 4];
    }

    fn effective(&self, scope: Scope) -> bool {
        self.exact[scope.index()] > 0
    }

    /// The narrowest scope with the same targets as `scope`, or, if `scope` has none, the nearest wider
    /// scope that has some.
    fn canonical(&self, scope: Scope) -> Scope {
        let cumulative: usize = self.exact[..=scope.index()].iter().sum();
        if cumulative == 0 {
            return self
                .wider_effective(scope)
                .expect("a validated topology has a target");
        }
        Scope::ALL[..=scope.index()]
            .iter()
            .rev()
            .copied()
            .find(|s| self.effective(*s))
            .expect("a non-empty cumulative scope has an effective member")
    }

    /// The next scope outward that adds targets.
    fn wider_effective(&self, scope: Scope) -> Option<Scope> {
        Scope::ALL[scope.index() + 1..]
            .iter()
            .copied()
            .find(|s| self.effective(*s))
    }

    /// The next scope inward that still has targets and differs from `scope`.
    fn narrower_effective(&self, scope: Scope) -> Option<Scope> {
        Scope::ALL[..scope.index()]
            .iter()
            .rev()
            .copied()
            .find(|s| self.effective(*s))
    }

    /// Looks up every target's load and gathers per-class sums, counts and minima in the same pass.
    fn read_loads(&mut self, loads: &LoadSnapshot) {
        let mut stats = [ClassStats::EMPTY; 4];
        self.loads.clear();
        for (id, class) in self.targets.iter().zip(&self.classes) {
            let load = loads.get(*id);
            self.loads.push(load);
            let s = &mut stats[class.index()];
            s.sum += load;
            s.count += 1;
            s.min = s.min.min(load);
        }
        self.stats = stats;
    }

    /// Mean load over the targets in `scope` (cumulative), from the last [`Self::read_loads`].
    fn average(&self, scope: Scope) -> f64 {
        let (sum, n) = self.stats[..=scope.index()]
            .iter()
            .fold((0.0, 0usize), |(s, n), c| (s + c.sum, n + c.count));
        if n == 0 {
            0.0
        } else {
            sum / n as f64
        }
    }

    /// Smallest load in `scope` (cumulative); infinite for an empty scope.
    fn min_load(&self, scope: Scope) -> f64 {
        self.stats[..=scope.index()]
            .iter()
            .map(|c| c.min)
            .fold(f64::INFINITY, f64::min)
    }

    /// Fills `self.ring` from the weights of the in-scope targets and shuffles it. With `update`, first
    /// applies the weight rule to the in-scope targets: +1 within [`MIN_MARGIN`] of the scope's minimum
    /// load, −10 otherwise.
    fn rebuild_ring(&mut self, update: bool) {
        let scope = self.scope;
        let min = self.min_load(scope);
        self.members.clear();
        self.member_weights.clear();
        for (i, (c, w)) in self.classes.iter().zip(self.weights.iter_mut()).enumerate() {
            if *c > scope {
                continue;
            }
            if update {
                *w = if self.loads[i] <= min + MIN_MARGIN {
                    w.saturating_add(WEIGHT_GAIN).min(MAX_WEIGHT)
                } else {
                    w.saturating_sub(WEIGHT_LOSS)
                };
            }
            self.members.push(i);
            self.member_weights.push(*w as u32);
        }
        let capacity = capacity_for(self.targets.len());
        apportion(
            &self.member_weights,
            capacity,
            &mut self.counts,
            &mut self.remainders,
        );
        self.ring.clear();
        for (&member, &count) in self.members.iter().zip(&self.counts) {
            let id = self.targets[member].0;
            self.ring.extend(std::iter::repeat(id).take(count));
        }
        shuffle(&mut self.ring, &mut self.rng);
    }
}

#[derive(Debug, Clone, Copy)]
struct ClassStats {
    sum: f64,
    count: usize,
    min: f64,
}

impl ClassStats {
    const EMPTY: ClassStats = ClassStats {
        sum: 0.0,
        count: 0,
        min: f64::INFINITY,
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{Load, Location};
    use proptest::prelude::*;

    fn config() -> RouterConfig {
        RouterConfig {
            seed: Some(7),
            ..RouterConfig::default()
        }
    }

    fn source() -> Location {
        Location::new("h1", "w1", "r1")
    }

    /// `n` targets, ids 0.., all on the sender's worker (Storm's test context).
    fn worker_local(n: u32) -> Topology {
        (0..n).fold(Topology::new(source(), Vec::new()), |t, i| {
            t.with_target(i, source())
        })
    }

    /// One target per scope: 1 worker-local, 2 host-local, 3 rack-local, 4 elsewhere.
    fn one_per_scope() -> Topology {
        Topology::new(source(), Vec::new())
            .with_target(1, source())
            .with_target(2, Location::new("h1", "w2", "r1"))
            .with_target(3, Location::new("h2", "w1", "r1"))
            .with_target(4, Location::new("h3", "w1", "r2"))
    }

    fn local_loads(pairs: &[(u32, f64)]) -> LoadMapping {
        let m = LoadMapping::new();
        m.set_local(pairs.iter().map(|&(id, l)| (TargetId(id), l)));
        m
    }

    fn share(router: &LoadAwareRouter, id: u32) -> f64 {
        let counts = router.ring_counts();
        *counts.get(&TargetId(id)).unwrap_or(&0) as f64 / router.capacity() as f64
    }

    /// Picks exactly one pass of the ring from one thread.
    fn one_pass(router: &LoadAwareRouter) -> BTreeMap<TargetId, usize> {
        let mut out = BTreeMap::new();
        for _ in 0..router.capacity() {
            *out.entry(router.choose()).or_insert(0) += 1;
        }
        out
    }

    #[test]
    fn even_load_gives_an_even_distribution() {
        let router = LoadAwareRouter::new(&worker_local(7), config()).unwrap();
        router.refresh(&local_loads(&(0..7).map(|i| (i, 0.1)).collect::<Vec<_>>()));
        let per_task = 5000;
        let mut counts = [0usize; 7];
        for _ in 0..7 * per_task {
            counts[router.choose().0 as usize] += 1;
        }
        for (i, &c) in counts.iter().enumerate() {
            let share = c as f64 / (7 * per_task) as f64;
            assert!((share - 1.0 / 7.0).abs() <= 0.015, "target {i} got {share}");
        }
        assert_eq!(one_pass(&router), router.ring_counts());
    }

    #[test]
    fn a_loaded_target_loses_ten_points_per_refresh_and_regains_one() {
        let router = LoadAwareRouter::new(&worker_local(2), config()).unwrap();
        let (mut w0, mut w1) = (100.0f64, 100.0f64);
        let hot_first = local_loads(&[(0, 1.0), (1, 0.0)]);
        for _ in 0..10 {
            router.refresh(&hot_first);
            w0 -= 10.0;
            assert!((share(&router, 0) - w0 / (w0 + w1)).abs() <= 0.01);
            assert!((share(&router, 1) - w1 / (w0 + w1)).abs() <= 0.01);
        }
        assert_eq!(share(&router, 0), 0.0, "weight 0 means no slot at all");
        assert_eq!(router.scope(), Scope::WorkerLocal, "mean 0.5 never widens");

        let hot_second = local_loads(&[(0, 0.0), (1, 1.0)]);
        let mut refreshes = 0;
        while w0 < 100.0 {
            router.refresh(&hot_second);
            refreshes += 1;
            w0 += 1.0;
            w1 = (w1 - 10.0).max(0.0);
            assert!((share(&router, 0) - w0 / (w0 + w1)).abs() <= 0.01);
            assert!((share(&router, 1) - w1 / (w0 + w1)).abs() <= 0.01);
        }
        assert_eq!(refreshes, 100, "recovery from 0 to 100 takes 100 refreshes");
        assert_eq!(router.weights(), vec![(TargetId(0), 100), (TargetId(1), 0)]);
    }

    #[test]
    fn an_unknown_target_reads_as_fully_loaded() {
        let router = LoadAwareRouter::new(&worker_local(2), config()).unwrap();
        router.refresh(&local_loads(&[(0, 0.0)]));
        assert_eq!(
            router.weights(),
            vec![(TargetId(0), 100), (TargetId(1), 90)]
        );
    }

    #[test]
    fn scope_widens_one_step_per_refresh_and_narrows_on_the_narrower_average() {
        let router = LoadAwareRouter::new(&one_per_scope(), config()).unwrap();
        assert_eq!(router.scope(), Scope::WorkerLocal);
        let all_hot = local_loads(&[(1, 1.0), (2, 1.0), (3, 1.0), (4, 1.0)]);
        for expected in [Scope::HostLocal, Scope::RackLocal, Scope::Everything] {
            let r = router.refresh(&all_hot);
            assert!(r.scope_changed());
            assert_eq!(r.to, expected);
            assert_eq!(router.scope(), expected);
        }
        assert_eq!(router.refresh(&all_hot).to, Scope::Everything, "saturates");

        // Wider pool idle-ish, local worker at exactly the lower bound.
        let cooling = local_loads(&[(1, 0.2), (2, 0.1), (3, 0.1), (4, 0.5)]);
        let r = router.refresh(&cooling);
        assert_eq!((r.from, r.to), (Scope::Everything, Scope::RackLocal));
        assert!((r.narrower_average.unwrap() - 0.4 / 3.0).abs() < 1e-12);
        assert_eq!(router.refresh(&cooling).to, Scope::HostLocal);
        let r = router.refresh(&cooling);
        assert_eq!(r.to, Scope::HostLocal, "0.2 is not below 0.2");
        assert_eq!(r.narrower_average, Some(0.2));

        let idle = local_loads(&[(1, 0.1), (2, 0.1), (3, 0.1), (4, 0.1)]);
        assert_eq!(router.refresh(&idle).to, Scope::WorkerLocal);
        assert_eq!(router.refresh(&idle).to, Scope::WorkerLocal, "saturates");
    }

    #[test]
    fn narrowing_ignores_an_idle_wider_pool_when_the_local_worker_is_hot() {
        // STORM-3602: the current scope's average is low only because the wide pool is idle.
        let router = LoadAwareRouter::new(&one_per_scope(), config()).unwrap();
        let all_hot = local_loads(&[(1, 1.0), (2, 1.0), (3, 1.0), (4, 1.0)]);
        router.refresh(&all_hot);
        assert_eq!(router.scope(), Scope::HostLocal);
        // The host scope's mean (0.15) is below the lower bound, but the worker scope's own mean (0.3) is
        // not: stay.
        let local_warm = local_loads(&[(1, 0.3), (2, 0.0), (3, 0.0), (4, 0.0)]);
        let r = router.refresh(&local_warm);
        assert_eq!(r.scope_average, 0.15);
        assert_eq!(r.narrower_average, Some(0.3));
        assert_eq!(r.to, Scope::HostLocal);
    }

    #[test]
    fn bounds_are_strict() {
        let router = LoadAwareRouter::new(&one_per_scope(), config()).unwrap();
        let at_high = local_loads(&[(1, 0.8), (2, 0.0), (3, 0.0), (4, 0.0)]);
        assert_eq!(
            router.refresh(&at_high).to,
            Scope::WorkerLocal,
            "0.8 is not above 0.8"
        );
        let above = local_loads(&[(1, 0.81), (2, 0.0), (3, 0.0), (4, 0.0)]);
        assert_eq!(router.refresh(&above).to, Scope::HostLocal);
    }

    #[test]
    fn a_scope_change_resets_every_weight() {
        let router = LoadAwareRouter::new(&one_per_scope(), config()).unwrap();
        // Worker-local target hot but alone: it stays in scope and its weight stays (min is itself).
        let loads = local_loads(&[(1, 0.5), (2, 0.0), (3, 0.0), (4, 0.0)]);
        router.refresh(&loads);
        assert_eq!(router.weights()[0].1, 100);
        // Widen to host scope: target 1 (0.9) is congested compared with target 2 (0.0).
        let hot = local_loads(&[(1, 0.9), (2, 0.0), (3, 0.0), (4, 0.0)]);
        router.refresh(&hot);
        router.refresh(&local_loads(&[(1, 0.7), (2, 0.0), (3, 0.0), (4, 0.0)]));
        assert_eq!(router.scope(), Scope::HostLocal);
        assert_eq!(
            router.weights()[0].1,
            80,
            "reset to 100 on widening, then -10 twice"
        );
        // Back to the worker scope: every weight is 100 again, then the update applies.
        router.refresh(&local_loads(&[(1, 0.1), (2, 0.0), (3, 0.0), (4, 0.0)]));
        assert_eq!(router.scope(), Scope::WorkerLocal);
        assert!(router.weights().iter().all(|(_, w)| *w == 100));
    }

    #[test]
    fn scopes_that_add_no_target_are_skipped() {
        // No host-local target: the worker scope widens straight to the rack scope, and back.
        let topology = Topology::new(source(), Vec::new())
            .with_target(1, source())
            .with_target(3, Location::new("h2", "w1", "r1"));
        let router = LoadAwareRouter::new(&topology, config()).unwrap();
        let hot = local_loads(&[(1, 1.0), (3, 1.0)]);
        assert_eq!(router.refresh(&hot).to, Scope::RackLocal);
        assert_eq!(
            router.refresh(&hot).to,
            Scope::RackLocal,
            "nothing wider adds targets"
        );
        let idle = local_loads(&[(1, 0.0), (3, 0.0)]);
        assert_eq!(router.refresh(&idle).to, Scope::WorkerLocal);

        // No worker-local target at all: start in the first scope that has one.
        let remote_only = Topology::new(source(), Vec::new())
            .with_target(4, Location::new("h3", "w1", "r2"))
            .with_unplaced_target(5);
        let router = LoadAwareRouter::new(&remote_only, config()).unwrap();
        assert_eq!(router.scope(), Scope::Everything);
    }

    #[test]
    fn a_single_target_gets_the_only_slot() {
        let topology = Topology::new(source(), Vec::new()).with_target(9, source());
        let router = LoadAwareRouter::new(&topology, config()).unwrap();
        assert_eq!(router.capacity(), 1);
        for load in [0.0, 1.0, f64::NAN] {
            router.refresh(&local_loads(&[(9, load)]));
            assert!((0..100).all(|_| router.choose() == TargetId(9)));
            assert_eq!(router.scope(), Scope::WorkerLocal);
        }
        assert_eq!(
            router.weights(),
            vec![(TargetId(9), 100)],
            "the minimum is itself"
        );
    }

    #[test]
    fn targets_added_and_removed() {
        let router = LoadAwareRouter::new(&worker_local(2), config()).unwrap();
        router.refresh(&local_loads(&[(0, 1.0), (1, 0.0)]));
        assert_eq!(
            router.weights(),
            vec![(TargetId(0), 90), (TargetId(1), 100)]
        );

        // Add a worker-local target and a remote one; survivors keep their weights.
        let grown = worker_local(3).with_target(50, Location::new("h9", "w", "r9"));
        router.set_topology(&grown).unwrap();
        assert_eq!(
            router.weights(),
            vec![
                (TargetId(0), 90),
                (TargetId(1), 100),
                (TargetId(2), 100),
                (TargetId(50), 100)
            ]
        );
        assert_eq!(router.scope(), Scope::WorkerLocal);
        assert_eq!(
            router.targets_in_scope(),
            vec![TargetId(0), TargetId(1), TargetId(2)]
        );
        assert_eq!(one_pass(&router), router.ring_counts());
        assert!(!router.ring_counts().contains_key(&TargetId(50)));

        // 300 targets: the ring grows to 5 slots per target.
        let many = (0..300).fold(Topology::new(source(), Vec::new()), |t, i| {
            t.with_target(1000 + i, Location::new("h2", "w", "r1"))
        });
        router.set_topology(&many).unwrap();
        assert_eq!(router.capacity(), 1500);
        assert_eq!(router.scope(), Scope::RackLocal, "the worker scope emptied");
        assert!(router.ring_counts().values().all(|&c| c == 5));
        assert!(
            (0..3000).all(|_| router.choose().0 >= 1000),
            "removed targets are gone"
        );

        // Shrink back: the ring shrinks too (the buffers are kept).
        router.set_topology(&worker_local(2)).unwrap();
        assert_eq!(router.capacity(), 1000);
        assert_eq!(router.scope(), Scope::WorkerLocal);
        assert!((0..3000).all(|_| router.choose().0 < 2));
    }

    #[test]
    fn bad_input_is_rejected_and_leaves_the_router_unchanged() {
        let bad = RouterConfig {
            lower_bound: 0.9,
            higher_bound: 0.8,
            ..config()
        };
        assert!(matches!(
            LoadAwareRouter::new(&worker_local(2), bad),
            Err(RoutingError::InvalidBounds { .. })
        ));
        let nan = RouterConfig {
            lower_bound: f64::NAN,
            ..config()
        };
        assert!(LoadAwareRouter::new(&worker_local(2), nan).is_err());
        let router = LoadAwareRouter::new(&worker_local(2), config()).unwrap();
        let empty = Topology::new(source(), Vec::new());
        assert_eq!(router.set_topology(&empty), Err(RoutingError::NoTargets));
        assert_eq!(router.capacity(), 1000);
        assert!((0..100).all(|_| router.choose().0 < 2));
    }

    #[test]
    fn disabled_load_awareness_is_a_plain_shuffle() {
        let disabled = RouterConfig {
            disable_load_aware: true,
            ..config()
        };
        let router = LoadAwareRouter::new(&one_per_scope(), disabled).unwrap();
        assert_eq!(router.scope(), Scope::Everything);
        let skewed = local_loads(&[(1, 1.0), (2, 1.0), (3, 0.0), (4, 0.0)]);
        for _ in 0..20 {
            let r = router.refresh(&skewed);
            assert!(!r.scope_changed());
        }
        let counts = one_pass(&router);
        assert_eq!(counts.len(), 4);
        assert!(counts.values().all(|&c| c == 250), "{counts:?}");
        assert!(router.weights().iter().all(|(_, w)| *w == 100));
    }

    #[test]
    fn remote_pending_counts_toward_the_load() {
        let topology = Topology::new(source(), Vec::new())
            .with_target(3, Location::new("h2", "w1", "r1"))
            .with_target(4, Location::new("h2", "w2", "r1"));
        let router = LoadAwareRouter::new(&topology, config()).unwrap();
        let loads = LoadMapping::new();
        loads.set_remote([
            (TargetId(3), Load::remote(0.0, 1024)),
            (TargetId(4), Load::remote(0.0, 0)),
        ]);
        let r = router.refresh(&loads);
        assert_eq!(r.scope_average, 0.5);
        assert_eq!(
            router.weights(),
            vec![(TargetId(3), 90), (TargetId(4), 100)]
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_rings() {
        let a = LoadAwareRouter::new(&worker_local(5), config()).unwrap();
        let b = LoadAwareRouter::new(&worker_local(5), config()).unwrap();
        let loads = local_loads(&[(0, 0.9), (1, 0.1), (2, 0.3), (3, 0.0), (4, 0.6)]);
        for _ in 0..3 {
            a.refresh(&loads);
            b.refresh(&loads);
        }
        let picks = |r: &LoadAwareRouter| (0..2000).map(|_| r.choose()).collect::<Vec<_>>();
        assert_eq!(picks(&a), picks(&b));
    }

    /// A topology of `classes.len()` targets whose scopes are `classes` (0 worker … 3 unplaced).
    fn topology_of(classes: &[u8]) -> Topology {
        classes
            .iter()
            .enumerate()
            .fold(Topology::new(source(), Vec::new()), |t, (i, c)| {
                let id = 100 + i as u32;
                match c {
                    0 => t.with_target(id, source()),
                    1 => t.with_target(id, Location::new("h1", format!("w{}", i + 2), "r1")),
                    2 => t.with_target(id, Location::new(format!("h{}", i + 2), "w", "r1")),
                    _ => t.with_unplaced_target(id),
                }
            })
    }

    fn load_value() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(0.0),
            Just(0.2),
            Just(0.8),
            Just(1.0),
            Just(f64::NAN),
            0.0f64..=1.0,
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn invariants_hold_over_any_load_history(
            classes in proptest::collection::vec(0u8..4, 1..25),
            history in proptest::collection::vec(proptest::collection::vec(load_value(), 25), 1..30),
        ) {
            let topology = topology_of(&classes);
            let router = LoadAwareRouter::new(&topology, config()).unwrap();
            for step in &history {
                let loads = local_loads(
                    &classes.iter().enumerate().map(|(i, _)| (100 + i as u32, step[i])).collect::<Vec<_>>(),
                );
                router.refresh(&loads);
                let weights = router.weights();
                prop_assert!(weights.iter().all(|(_, w)| *w <= MAX_WEIGHT));

                let in_scope = router.targets_in_scope();
                prop_assert!(!in_scope.is_empty());
                let counts = router.ring_counts();
                let picked = one_pass(&router);
                prop_assert_eq!(&picked, &counts, "one pass of choose() is exactly the ring");
                prop_assert!(picked.keys().all(|id| in_scope.contains(id)));

                let total: u32 = weights
                    .iter()
                    .filter(|(id, _)| in_scope.contains(id))
                    .map(|(_, w)| *w as u32)
                    .sum();
                prop_assert!(total > 0, "the least loaded in-scope target always gains");
                let capacity = router.capacity() as f64;
                for (id, w) in weights.iter().filter(|(id, _)| in_scope.contains(id)) {
                    let exact = *w as f64 * capacity / total as f64;
                    let got = *counts.get(id).unwrap_or(&0) as f64;
                    prop_assert!((got - exact).abs() < 1.0, "{}: {} slots for exact {}", id, got, exact);
                }
            }
        }

        #[test]
        fn one_refresh_moves_at_most_one_effective_step(
            classes in proptest::collection::vec(0u8..4, 1..12),
            loads in proptest::collection::vec(load_value(), 12),
        ) {
            let router = LoadAwareRouter::new(&topology_of(&classes), config()).unwrap();
            let effective: Vec<Scope> = Scope::ALL
                .into_iter()
                .filter(|s| classes.iter().any(|c| *c as usize == s.index()))
                .collect();
            let before = effective.iter().position(|s| *s == router.scope()).unwrap();
            let r = router.refresh(&local_loads(
                &classes.iter().enumerate().map(|(i, _)| (100 + i as u32, loads[i])).collect::<Vec<_>>(),
            ));
            let after = effective.iter().position(|s| *s == r.to).unwrap();
            prop_assert!(after.abs_diff(before) <= 1);
        }
    }
}
