//! Router benchmarks: `choose()` from one and from two threads, a refresh over 1,000 targets, each next to a
//! naive mutex-guarded router doing the same work.
//!
//! Run: `cargo bench --bench routing -- --warm-up-time 1 --measurement-time 3`.
//! The two-thread figures are wall time per pick *per thread* (both threads pick concurrently).
//! `choose_2_threads/router_per_thread` is the floor for two threads: each thread picks from a router of
//! its own, so nothing is shared. `choose_2_threads/load_aware` (one router, both threads) should stay
//! close to it; a large gap means choosers contend on a shared cache line again (before the cursor was
//! striped, a shared router cost several times the floor). Both threads need a core each for the figures
//! to mean anything: on a busy machine they time-share one core and every two-thread figure is about
//! twice the one-thread one.

use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use loadmgr::routing::ring::{apportion, capacity_for};
use loadmgr::routing::{
    Load, LoadAwareRouter, LoadMapping, LoadSnapshot, Location, RouterConfig, TargetId, Topology,
    MAX_WEIGHT, MIN_MARGIN,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// `n` targets on other hosts of the sender's rack, ids 1..=n.
fn topology(n: u32) -> Topology {
    (1..=n).fold(
        Topology::new(Location::new("h0", "w", "r1"), Vec::new()),
        |t, i| t.with_target(i, Location::new(format!("h{}", i % 16 + 1), "w", "r1")),
    )
}

fn mapping(n: u32) -> LoadMapping {
    let m = LoadMapping::new();
    m.set_remote((1..=n).map(|i| (TargetId(i), Load::remote((i % 10) as f64 / 10.0, 0))));
    m
}

fn config() -> RouterConfig {
    RouterConfig {
        seed: Some(1),
        ..RouterConfig::default()
    }
}

/// The straightforward design: one mutex around the ring, the cursor and the weights.
struct MutexRouter {
    inner: Mutex<Naive>,
}

struct Naive {
    targets: Vec<TargetId>,
    weights: Vec<u8>,
    ring: Vec<u32>,
    cursor: usize,
    rng: StdRng,
}

impl MutexRouter {
    fn new(n: u32) -> Self {
        let targets: Vec<TargetId> = (1..=n).map(TargetId).collect();
        let capacity = capacity_for(targets.len());
        let ring = (0..capacity)
            .map(|i| targets[i % targets.len()].0)
            .collect();
        Self {
            inner: Mutex::new(Naive {
                weights: vec![MAX_WEIGHT; targets.len()],
                targets,
                ring,
                cursor: 0,
                rng: StdRng::seed_from_u64(1),
            }),
        }
    }

    fn choose(&self) -> TargetId {
        let mut g = self.inner.lock().unwrap();
        let v = g.ring[g.cursor];
        g.cursor = (g.cursor + 1) % g.ring.len();
        TargetId(v)
    }

    /// Same work as a refresh without scope change: read every load, update weights, apportion, fill,
    /// shuffle — all under the lock, with fresh allocations as naive code would.
    fn refresh(&self, loads: &LoadSnapshot) {
        let mut g = self.inner.lock().unwrap();
        let values: Vec<f64> = g.targets.iter().map(|id| loads.get(*id)).collect();
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        for (w, l) in g.weights.iter_mut().zip(&values) {
            *w = if *l <= min + MIN_MARGIN {
                (*w + 1).min(MAX_WEIGHT)
            } else {
                w.saturating_sub(10)
            };
        }
        let weights: Vec<u32> = g.weights.iter().map(|w| *w as u32).collect();
        let (mut counts, mut scratch) = (Vec::new(), Vec::new());
        apportion(&weights, g.ring.len(), &mut counts, &mut scratch);
        let mut ring = Vec::with_capacity(g.ring.len());
        for (id, c) in g.targets.iter().zip(&counts) {
            ring.extend(std::iter::repeat(id.0).take(*c));
        }
        for i in (1..ring.len()).rev() {
            let j = g.rng.random_range(0..=i);
            ring.swap(i, j);
        }
        g.ring = ring;
        g.cursor = 0;
    }
}

/// Runs `pick(thread)` `iters` times on each of two threads (`thread` 0 and 1) started together; returns
/// the wall time.
fn two_threads(iters: u64, pick: &(dyn Fn(usize) -> TargetId + Sync)) -> Duration {
    let start = Barrier::new(3);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|thread| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    for _ in 0..iters {
                        black_box(pick(thread));
                    }
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        for w in workers {
            w.join().unwrap();
        }
        t0.elapsed()
    })
}

fn choose_benches(c: &mut Criterion) {
    let router = LoadAwareRouter::new(&topology(10), config()).unwrap();
    router.refresh(&mapping(10));
    let naive = MutexRouter::new(10);

    let mut g = c.benchmark_group("choose_1_thread");
    g.bench_function("load_aware", |b| b.iter(|| black_box(router.choose())));
    g.bench_function("mutex", |b| b.iter(|| black_box(naive.choose())));
    g.finish();

    let own: Vec<LoadAwareRouter> = (0..2)
        .map(|_| {
            let r = LoadAwareRouter::new(&topology(10), config()).unwrap();
            r.refresh(&mapping(10));
            r
        })
        .collect();

    let mut g = c.benchmark_group("choose_2_threads");
    g.bench_function("load_aware", |b| {
        b.iter_custom(|iters| two_threads(iters, &|_| router.choose()))
    });
    g.bench_function("router_per_thread", |b| {
        b.iter_custom(|iters| two_threads(iters, &|thread| own[thread].choose()))
    });
    g.bench_function("mutex", |b| {
        b.iter_custom(|iters| two_threads(iters, &|_| naive.choose()))
    });
    g.finish();
}

fn refresh_benches(c: &mut Criterion) {
    let loads = mapping(1000);
    let snapshot = loads.snapshot();
    let router = LoadAwareRouter::new(&topology(1000), config()).unwrap();
    let naive = MutexRouter::new(1000);

    let mut g = c.benchmark_group("refresh_1000_targets");
    g.bench_function("load_aware", |b| {
        b.iter(|| black_box(router.refresh_from(&snapshot)))
    });
    g.bench_function("mutex", |b| b.iter(|| naive.refresh(&snapshot)));
    g.finish();
}

criterion_group!(benches, choose_benches, refresh_benches);
criterion_main!(benches);
