//! The router's concurrency and allocation contracts: `choose()` allocates nothing, a steady-state refresh
//! allocates nothing, and many threads can pick while another thread refreshes and changes the topology.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Barrier;

use loadmgr::routing::ring::STRIPES;
use loadmgr::routing::{
    Load, LoadAwareRouter, LoadMapping, Location, RouterConfig, Scope, TargetId, Topology,
};

/// Counts allocations per thread, so other tests running in parallel do not disturb the count.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches only a
// const-initialised thread-local without destructor.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn source() -> Location {
    Location::new("h1", "w1", "r1")
}

/// Two targets per scope: 101/102 worker-local, 201/202 host-local, 301/302 rack-local, 401/402 elsewhere.
/// No id is 0, so a pick from a never-written buffer would show.
fn spread() -> Topology {
    Topology::new(source(), Vec::new())
        .with_target(101, source())
        .with_target(102, source())
        .with_target(201, Location::new("h1", "w2", "r1"))
        .with_target(202, Location::new("h1", "w2", "r1"))
        .with_target(301, Location::new("h2", "w1", "r1"))
        .with_target(302, Location::new("h3", "w1", "r1"))
        .with_target(401, Location::new("h4", "w1", "r2"))
        .with_unplaced_target(402)
}

fn config() -> RouterConfig {
    RouterConfig {
        seed: Some(11),
        ..RouterConfig::default()
    }
}

fn loads(value: f64, ids: &[u32]) -> LoadMapping {
    let m = LoadMapping::new();
    m.set_local(ids.iter().map(|&id| (TargetId(id), value)));
    m
}

#[test]
fn choose_and_steady_state_refresh_do_not_allocate() {
    let many = (0..1000).fold(Topology::new(source(), Vec::new()), |t, i| {
        t.with_target(i + 1, Location::new(format!("h{}", i % 7), "w", "r1"))
    });
    let router = LoadAwareRouter::new(&many, config()).unwrap();
    let mapping = LoadMapping::new();
    mapping.set_remote((1..=1000).map(|i| (TargetId(i), Load::remote((i % 10) as f64 / 10.0, 0))));
    // Warm up: the scratch buffers reach their final size.
    for _ in 0..3 {
        router.refresh(&mapping);
    }

    let before = allocations();
    let mut checksum = 0u64;
    for _ in 0..1_000_000 {
        checksum += router.choose().0 as u64;
    }
    assert_eq!(allocations(), before, "choose() allocated");
    assert!(checksum > 0);

    let before = allocations();
    for _ in 0..50 {
        router.refresh(&mapping);
    }
    assert_eq!(allocations(), before, "a steady-state refresh allocated");
    assert_eq!(router.refresh_count(), 53);
}

#[test]
fn many_threads_choose_while_another_refreshes_and_changes_topology() {
    let router = LoadAwareRouter::new(&spread(), config()).unwrap();
    let all: BTreeSet<u32> = [101, 102, 201, 202, 301, 302, 401, 402, 501].into();
    let stop = AtomicBool::new(false);
    let readers = 3;
    let start = Barrier::new(readers + 1);

    let counts: Vec<BTreeMap<u32, u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..readers)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let mut seen = BTreeMap::new();
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..1000 {
                            *seen.entry(router.choose().0).or_insert(0u64) += 1;
                        }
                    }
                    seen
                })
            })
            .collect();

        start.wait();
        let hot = loads(1.0, &[101, 102, 201, 202, 301, 302, 401, 402, 501]);
        let cold = loads(0.0, &[101, 102, 201, 202, 301, 302, 401, 402, 501]);
        let grown = spread().with_target(501, Location::new("h1", "w1", "r1"));
        let mut scopes = BTreeSet::new();
        for round in 0..1500 {
            // Four refreshes hot (walk outward), four cold (walk back inward).
            let r = router.refresh(if round % 8 < 4 { &hot } else { &cold });
            scopes.insert(r.to);
            if round % 50 == 0 {
                let t = if round % 100 == 0 {
                    grown.clone()
                } else {
                    spread()
                };
                router.set_topology(&t).unwrap();
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert_eq!(
            scopes.len(),
            4,
            "the refreshes visited every scope: {scopes:?}"
        );
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    for seen in &counts {
        assert!(seen.values().sum::<u64>() > 0, "every reader made progress");
        let unknown: Vec<&u32> = seen.keys().filter(|id| !all.contains(id)).collect();
        assert!(
            unknown.is_empty(),
            "picked ids never registered: {unknown:?}"
        );
    }
    // Quiet again: one pass of picks is exactly the published ring.
    let mut pass = BTreeMap::new();
    for _ in 0..router.capacity() {
        *pass.entry(router.choose()).or_insert(0usize) += 1;
    }
    assert_eq!(pass, router.ring_counts());
    assert!(pass.keys().all(|id| router.targets_in_scope().contains(id)));
}

#[test]
fn readers_never_see_an_older_ring_after_a_newer_one() {
    // Version k of the topology is a single target with id k: each ring holds only k. A reader thread must
    // see k never decrease and never run ahead of what has been published.
    let router = LoadAwareRouter::new(
        &Topology::new(source(), Vec::new()).with_target(1, source()),
        config(),
    )
    .unwrap();
    let published = AtomicU32::new(1);
    let stop = AtomicBool::new(false);
    let versions = 5_000u32;
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    let (mut last, mut picks) = (0u32, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        let v = router.choose().0;
                        let bound = published.load(Ordering::Acquire);
                        assert!(v >= last, "went back from version {last} to {v}");
                        assert!(
                            v <= bound + 1,
                            "version {v} read before {bound} + 1 was published"
                        );
                        last = v;
                        picks += 1;
                    }
                    (last, picks)
                })
            })
            .collect();
        for k in 2..=versions {
            // Alternate between one and several slots so buffers and lengths change too.
            let mut t = Topology::new(source(), Vec::new()).with_target(k, source());
            if k % 3 == 0 {
                t = t.with_target(k + 1_000_000, Location::new("h9", "w", "r9"));
            }
            router.set_topology(&t).unwrap();
            published.store(k, Ordering::Release);
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            let (last, picks) = r.join().unwrap();
            assert!(picks > 0);
            assert!(last <= versions);
        }
    });
    assert_eq!(router.choose(), TargetId(versions));
    assert_eq!(router.scope(), Scope::WorkerLocal);
    assert_eq!(router.published_rings(), versions as u64);
}

#[test]
fn concurrent_choosers_get_the_exact_shares_to_within_one_pass_per_stripe() {
    // Seven worker-local targets with uneven weights; three threads choose together, no refresh meanwhile.
    let topology = (1..=7).fold(Topology::new(source(), Vec::new()), |t, i| {
        t.with_target(i, source())
    });
    let router = LoadAwareRouter::new(&topology, config()).unwrap();
    let mapping = LoadMapping::new();
    mapping.set_local([(TargetId(1), 0.9), (TargetId(2), 0.5), (TargetId(3), 0.1)]);
    for _ in 0..3 {
        router.refresh(&mapping);
    }
    let slots = router.ring_counts();
    let capacity = router.capacity() as f64;
    let (threads, per_thread) = (3usize, 20 * router.capacity());
    let start = Barrier::new(threads);
    let seen: Vec<BTreeMap<TargetId, usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let mut seen = BTreeMap::new();
                    for _ in 0..per_thread {
                        *seen.entry(router.choose()).or_insert(0) += 1;
                    }
                    seen
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total: BTreeMap<TargetId, usize> = BTreeMap::new();
    for (id, n) in seen.iter().flatten() {
        *total.entry(*id).or_insert(0) += n;
    }
    assert!(total.keys().all(|id| slots.contains_key(id)), "{total:?}");
    let picks = (threads * per_thread) as f64;
    for (id, &c) in &slots {
        let exact = picks * c as f64 / capacity;
        let got = *total.get(id).unwrap_or(&0) as f64;
        assert!(
            (got - exact).abs() <= (c * STRIPES) as f64,
            "{id}: {got} picks, exact share {exact}, {c} slots"
        );
    }
}
