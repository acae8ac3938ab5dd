//! The choice ring: how many slots each target gets, and the double-buffered array that
//! [`LoadAwareRouter::choose`](super::LoadAwareRouter::choose) reads without locking.
//!
//! # Read protocol
//!
//! The published array lives in one of two buffers ("halves"). A 64-bit sequence word holds a counter and the
//! size class ("level") of the buffers in use. The single writer (serialised by the router's mutex):
//!
//! 1. makes the counter odd ("a rewrite of the spare half has begun") and issues a release fence;
//! 2. writes the spare half: the slots, the length and the precomputed divisor constant;
//! 3. makes the counter even again with release ordering, which flips the active half.
//!
//! A reader loads the word (acquire), reads the active half's length and one slot (the slot index is a
//! cursor, incremented atomically, reduced modulo the length; see *Cursor stripes*), issues an acquire fence
//! and loads the word again. The half it read is only rewritten by the *second* rewrite after the one that
//! published it, so the read is valid unless the counter has advanced by more than 2 past the even value it
//! started from; otherwise it retries with a fresh cursor value. All shared data are atomics, so a stale read is never
//! undefined behaviour, only discarded. Readers never wait for the writer: a reader retries only when a
//! rewrite overlapped its own few loads.
//!
//! Buffers only grow: when more slots are needed the writer moves to a larger level (allocated once, kept
//! until the router is dropped), so a reader can never touch freed memory. A shrinking target set keeps the
//! larger buffers and publishes a shorter length.
//!
//! # Cursor stripes
//!
//! One cursor shared by every choosing thread is one cache line written by every core: a pick from two
//! threads costs several times a pick from one. So the ring has [`STRIPES`] cursors, each on its own cache
//! line, and a thread advances one of them, its *stripe*:
//!
//! * A thread starts on stripe 0 and stays there until it meets contention, i.e. until the compare-exchange
//!   that advances its cursor fails because another thread advanced the same cursor in between. It then
//!   moves to another stripe (a process-wide rotation of steps, so successive movers spread out) and takes
//!   this pick there with a plain atomic add; the move sticks for the thread's lifetime and for every ring.
//!   Threads that choose concurrently therefore spread over the stripes until they stop colliding (two
//!   threads that share a stripe but seldom race for it may stay together: they seldom contend), and a
//!   thread that has never lost such a race is on stripe 0.
//! * Stripe 0 starts at 0, so a lone chooser walks a new ring from its first slot exactly as a single shared
//!   cursor did. Stripe `i` starts at `i × 0x9E37_79B9` (a golden-ratio step), so threads that start
//!   together read different stretches of the shuffled ring instead of all reading its first slots.
//! * Each cursor hands out consecutive values, and only a successful atomic update hands one out, so every
//!   stripe's picks are a contiguous run of its cursor: any `len` consecutive picks of one stripe return
//!   every slot exactly once, and all stripes together return, for a target with `c` of the `len` slots,
//!   its exact share of the picks to within `c` per stripe in use.
//!
//! # Slot arithmetic
//!
//! A cursor is a wrapping `u32`; the slot is `cursor mod len`, computed with a precomputed 64-bit constant
//! (Lemire's "fastmod": two multiplications, no division, exact for every 32-bit cursor and length). Across
//! a cursor's wrap at 2^32 one pass is uneven, which is immaterial.

use std::cell::Cell;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use rand::Rng;

/// Slots of the smallest buffer level.
const BASE_SLOTS: usize = 1024;
/// Number of buffer levels: level `k` holds `1024 << k` slots, enough for `5 × MAX_TARGETS`.
const LEVELS: usize = 18;
const LEVEL_BITS: u32 = 6;
const LEVEL_MASK: u64 = (1 << LEVEL_BITS) - 1;

/// Ring slots for `targets` targets: 1 for a single target, else `max(1000, 5 × targets)` (0 for none).
pub const fn capacity_for(targets: usize) -> usize {
    match targets {
        0 => 0,
        1 => 1,
        n => {
            if 5 * n > 1000 {
                5 * n
            } else {
                1000
            }
        }
    }
}

/// The constant for [`fast_mod`] with divisor `d` (`ceil(2^64 / d)`, which wraps to 0 for `d == 1`).
pub const fn fast_mod_constant(d: u32) -> u64 {
    if d == 0 {
        0
    } else {
        (u64::MAX / d as u64).wrapping_add(1)
    }
}

/// `a mod d` for `d >= 1`, given `m = fast_mod_constant(d)`; for `d == 0` it returns 0. No division.
#[inline]
pub const fn fast_mod(a: u32, m: u64, d: u32) -> u32 {
    let low = m.wrapping_mul(a as u64);
    ((low as u128 * d as u128) >> 64) as u32
}

/// Splits `capacity` slots among `weights` in proportion: each entry gets `floor(w × capacity / Σw)`, and
/// the slots lost to rounding go one each to the largest remainders (ties to the lower index). So every
/// count is the floor or the ceiling of its exact share, and the counts sum to `capacity`.
///
/// `counts` is overwritten (same length as `weights`); `scratch` is working memory that keeps its
/// allocation between calls. With `Σw == 0` the slots are split evenly instead (same rounding rule).
pub fn apportion(
    weights: &[u32],
    capacity: usize,
    counts: &mut Vec<usize>,
    scratch: &mut Vec<(u64, usize)>,
) {
    counts.clear();
    scratch.clear();
    if weights.is_empty() {
        return;
    }
    let total: u64 = weights.iter().map(|&w| w as u64).sum();
    let share = |w: u32| -> u64 {
        if total == 0 {
            1
        } else {
            w as u64
        }
    };
    let total = if total == 0 {
        weights.len() as u64
    } else {
        total
    };
    let cap = capacity as u64;
    let mut assigned = 0u64;
    for (i, &w) in weights.iter().enumerate() {
        let exact = share(w) as u128 * cap as u128;
        let floor = (exact / total as u128) as u64;
        let rem = (exact % total as u128) as u64;
        counts.push(floor as usize);
        assigned += floor;
        scratch.push((rem, i));
    }
    let leftover = (cap - assigned) as usize;
    if leftover > 0 {
        // Largest remainder first, then lower index: a total order, so the result is deterministic.
        let order = |a: &(u64, usize), b: &(u64, usize)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
        if leftover < scratch.len() {
            scratch.select_nth_unstable_by(leftover - 1, order);
        }
        for &(_, i) in scratch.iter().take(leftover) {
            counts[i] += 1;
        }
    }
}

/// Fisher–Yates shuffle driven by `rng` (stable across `rand` releases that keep `random_range`).
pub(crate) fn shuffle<R: Rng>(slots: &mut [u32], rng: &mut R) {
    for i in (1..slots.len()).rev() {
        let j = rng.random_range(0..=i);
        slots.swap(i, j);
    }
}

#[repr(align(128))]
#[derive(Debug)]
struct CachePadded<T>(T);

#[derive(Debug)]
struct Half {
    len: AtomicU32,
    magic: AtomicU64,
    slots: Box<[AtomicU32]>,
}

#[derive(Debug)]
struct Level {
    halves: [Half; 2],
}

impl Level {
    fn new(slots: usize) -> Self {
        let half = || Half {
            len: AtomicU32::new(0),
            magic: AtomicU64::new(0),
            slots: (0..slots).map(|_| AtomicU32::new(0)).collect(),
        };
        Self {
            halves: [half(), half()],
        }
    }
}

const fn level_for(len: usize) -> usize {
    let mut k = 0;
    while (BASE_SLOTS << k) < len {
        k += 1;
    }
    k
}

/// The half readers use while the counter is `counter` (odd: a rewrite of the other half is under way).
const fn active_half(counter: u64) -> usize {
    ((counter >> 1) & 1) as usize
}

/// The half a writer starting at the even `counter` rewrites.
const fn spare_half(counter: u64) -> usize {
    active_half(counter + 2)
}

/// Whether a read of `active_half(before)` is intact, given the counter seen after it: that half is only
/// rewritten from the second rewrite after the one that published it, i.e. from counter `even(before) + 3`.
const fn read_is_intact(before: u64, after: u64) -> bool {
    after.wrapping_sub(before & !1) <= 2
}

/// The largest ring [`PublishedRing::publish`] accepts.
pub(crate) const MAX_RING: usize = BASE_SLOTS << (LEVELS - 1);

/// Cursors per ring (a power of two); see *Cursor stripes* in the module docs.
pub const STRIPES: usize = 16;

/// Where stripe `i`'s cursor starts: 0 for stripe 0, golden-ratio steps apart for the others.
const fn stripe_start(i: usize) -> u32 {
    (i as u32).wrapping_mul(0x9E37_79B9)
}

thread_local! {
    /// The calling thread's stripe, below [`STRIPES`]; 0 until the thread first meets contention.
    static STRIPE: Cell<u32> = const { Cell::new(0) };
}

/// Moves so far, process-wide: the `k`-th move steps `1 + k mod (STRIPES - 1)` stripes onward, so threads
/// that collide on one stripe leave it for different ones. Touched only on contention.
static MOVES: AtomicU32 = AtomicU32::new(0);

/// The calling thread's stripe.
#[inline]
fn current_stripe() -> usize {
    STRIPE.with(Cell::get) as usize & (STRIPES - 1)
}

/// Moves the calling thread off `from` (never back onto it) and returns the new stripe.
#[cold]
fn move_stripe(from: usize) -> usize {
    let step = 1 + MOVES.fetch_add(1, Ordering::Relaxed) as usize % (STRIPES - 1);
    let to = (from + step) & (STRIPES - 1);
    STRIPE.with(|s| s.set(to as u32));
    to
}

/// The published, double-buffered choice array plus its striped cursors (see the module docs).
#[derive(Debug)]
pub(crate) struct PublishedRing {
    seq: CachePadded<AtomicU64>,
    cursors: [CachePadded<AtomicU32>; STRIPES],
    levels: [OnceLock<Level>; LEVELS],
}

impl PublishedRing {
    /// A ring publishing `initial` (non-empty).
    pub(crate) fn new(initial: &[u32]) -> Self {
        let ring = Self {
            seq: CachePadded(AtomicU64::new(0)),
            cursors: std::array::from_fn(|i| CachePadded(AtomicU32::new(stripe_start(i)))),
            levels: std::array::from_fn(|_| OnceLock::new()),
        };
        ring.publish(initial);
        ring
    }

    /// The next cursor value of the calling thread's stripe. Uncontended, one load and one compare-exchange
    /// on a line this core already owns; on contention the thread moves to another stripe (see the module
    /// docs) and `stripe` follows it.
    #[inline]
    fn advance(&self, stripe: &mut usize) -> u32 {
        let cursor = &self.cursors[*stripe & (STRIPES - 1)].0;
        let n = cursor.load(Ordering::Relaxed);
        match cursor.compare_exchange(n, n.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => n,
            Err(_) => self.advance_contended(stripe),
        }
    }

    #[cold]
    #[inline(never)]
    fn advance_contended(&self, stripe: &mut usize) -> u32 {
        *stripe = move_stripe(*stripe);
        self.cursors[*stripe].0.fetch_add(1, Ordering::Relaxed)
    }

    /// The next value of the published array. Lock-free, allocation-free.
    #[inline]
    pub(crate) fn pick(&self) -> u32 {
        let mut stripe = current_stripe();
        loop {
            let before = self.seq.0.load(Ordering::Acquire);
            let counter = before >> LEVEL_BITS;
            let level = self.levels[(before & LEVEL_MASK) as usize]
                .get()
                .expect("a published level is initialised before it is published");
            let half = &level.halves[active_half(counter)];
            let len = half.len.load(Ordering::Relaxed);
            let magic = half.magic.load(Ordering::Relaxed);
            let n = self.advance(&mut stripe);
            // `fast_mod` is < len (or 0), and len never exceeds the level's slots; `get` keeps a torn read
            // (discarded below anyway) from panicking.
            let Some(slot) = half.slots.get(fast_mod(n, magic, len) as usize) else {
                continue;
            };
            let value = slot.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            let after = self.seq.0.load(Ordering::Relaxed);
            if read_is_intact(counter, after >> LEVEL_BITS) {
                return value;
            }
        }
    }

    /// Publishes `ring` (1 ..= [`MAX_RING`] values). Callers must serialise calls (one writer at a time).
    pub(crate) fn publish(&self, ring: &[u32]) {
        assert!(
            !ring.is_empty() && ring.len() <= MAX_RING,
            "ring length {} out of range",
            ring.len()
        );
        let word = self.seq.0.load(Ordering::Relaxed);
        let counter = word >> LEVEL_BITS;
        let current_level = word & LEVEL_MASK;
        debug_assert_eq!(counter & 1, 0, "publish is not re-entrant");
        let level_index = (current_level as usize).max(level_for(ring.len()));
        let spare = spare_half(counter);

        // Step 1: announce the rewrite of the spare half.
        self.seq.0.store(
            ((counter + 1) << LEVEL_BITS) | current_level,
            Ordering::Relaxed,
        );
        fence(Ordering::Release);

        // Step 2: write it.
        let level = self.levels[level_index].get_or_init(|| Level::new(BASE_SLOTS << level_index));
        let half = &level.halves[spare];
        for (slot, &value) in half.slots.iter().zip(ring) {
            slot.store(value, Ordering::Relaxed);
        }
        let len = ring.len() as u32;
        half.len.store(len, Ordering::Relaxed);
        half.magic.store(fast_mod_constant(len), Ordering::Relaxed);

        // Step 3: publish.
        self.seq.0.store(
            ((counter + 2) << LEVEL_BITS) | level_index as u64,
            Ordering::Release,
        );
    }

    /// How many rings have been published.
    pub(crate) fn generation(&self) -> u64 {
        (self.seq.0.load(Ordering::Acquire) >> LEVEL_BITS) / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn capacity_follows_storm() {
        assert_eq!(capacity_for(1), 1);
        assert_eq!(capacity_for(2), 1000);
        assert_eq!(capacity_for(200), 1000);
        assert_eq!(capacity_for(201), 1005);
        assert_eq!(capacity_for(1000), 5000);
        assert!(capacity_for(super::super::MAX_TARGETS) <= MAX_RING);
    }

    #[test]
    fn fast_mod_edges() {
        for d in [1u32, 2, 3, 7, 1000, 1005, 5000, u32::MAX - 1, u32::MAX] {
            let m = fast_mod_constant(d);
            for a in [0u32, 1, d - 1, d, d.wrapping_add(1), u32::MAX - 1, u32::MAX] {
                assert_eq!(fast_mod(a, m, d), a % d, "{a} mod {d}");
            }
        }
        assert_eq!(fast_mod(12345, 0, 0), 0);
    }

    proptest! {
        #[test]
        fn fast_mod_matches_remainder(a in any::<u32>(), d in 1u32..) {
            prop_assert_eq!(fast_mod(a, fast_mod_constant(d), d), a % d);
        }

        #[test]
        fn apportion_gives_floor_or_ceiling_and_fills_capacity(
            weights in proptest::collection::vec(0u32..=100, 1..60),
            capacity in 1usize..6000,
        ) {
            let (mut counts, mut scratch) = (Vec::new(), Vec::new());
            apportion(&weights, capacity, &mut counts, &mut scratch);
            prop_assert_eq!(counts.iter().sum::<usize>(), capacity);
            let total: u64 = weights.iter().map(|&w| w as u64).sum();
            for (i, &w) in weights.iter().enumerate() {
                let exact = if total == 0 {
                    capacity as f64 / weights.len() as f64
                } else {
                    w as f64 * capacity as f64 / total as f64
                };
                prop_assert!((counts[i] as f64 - exact).abs() < 1.0, "{} vs {}", counts[i], exact);
                if total > 0 && w == 0 {
                    prop_assert_eq!(counts[i], 0);
                }
            }
        }
    }

    #[test]
    fn apportion_breaks_ties_by_index() {
        let (mut counts, mut scratch) = (Vec::new(), Vec::new());
        apportion(&[1; 7], 1000, &mut counts, &mut scratch);
        assert_eq!(counts, vec![143, 143, 143, 143, 143, 143, 142]);
        apportion(&[0, 0], 3, &mut counts, &mut scratch);
        assert_eq!(counts, vec![2, 1], "all-zero weights split evenly");
        apportion(&[], 3, &mut counts, &mut scratch);
        assert!(counts.is_empty());
    }

    #[test]
    fn the_sequence_protocol_flags_exactly_the_overlapping_rewrites() {
        // Walk the writer through publications; for every (start, end) counter pair a reader could see,
        // the read is accepted exactly when no rewrite of the half it read began in between.
        for published in (0..40u64).step_by(2) {
            let reader_half = active_half(published);
            assert_eq!(
                active_half(published + 1),
                reader_half,
                "odd: still the old half"
            );
            // Rewrites begin at odd counters w = 2j + 1 (j >= published / 2) and target spare_half(2j).
            let first_rewrite_of_my_half = (published..)
                .step_by(2)
                .find(|&even| spare_half(even) == reader_half)
                .unwrap()
                + 1;
            for before in [published, published + 1] {
                for after in before..published + 10 {
                    assert_eq!(
                        read_is_intact(before, after),
                        after < first_rewrite_of_my_half,
                        "before {before}, after {after}"
                    );
                }
            }
            // A publication makes the spare the active half.
            assert_eq!(active_half(published + 2), spare_half(published));
        }
    }

    #[test]
    fn one_pass_of_picks_returns_every_slot_once() {
        let values: Vec<u32> = (0..1000).map(|i| i % 7 + 100).collect();
        let ring = PublishedRing::new(&values);
        let mut counts = [0usize; 7];
        for _ in 0..1000 {
            counts[(ring.pick() - 100) as usize] += 1;
        }
        assert_eq!(counts, [143, 143, 143, 143, 143, 143, 142]);
        assert_eq!(ring.generation(), 1);
    }

    #[test]
    fn a_lone_thread_stays_on_stripe_zero_and_walks_from_the_first_slot() {
        let values: Vec<u32> = (0..1000).collect();
        let ring = PublishedRing::new(&values);
        std::thread::scope(|s| {
            s.spawn(|| {
                let picks: Vec<u32> = (0..2500).map(|_| ring.pick()).collect();
                let expected: Vec<u32> = (0..2500).map(|i| i % 1000).collect();
                assert_eq!(picks, expected, "one cursor's walk, from slot 0");
                assert_eq!(current_stripe(), 0);
            });
        });
        for (i, c) in ring.cursors.iter().enumerate() {
            let moved = c.0.load(Ordering::Relaxed).wrapping_sub(stripe_start(i));
            assert_eq!(moved, if i == 0 { 2500 } else { 0 }, "stripe {i}");
        }
    }

    #[test]
    fn contention_moves_the_thread_off_its_stripe_for_good() {
        let ring = PublishedRing::new(&[5; 10]);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut stripe = 0;
                for _ in 0..3 * STRIPES {
                    let from = stripe;
                    let n = ring.advance_contended(&mut stripe);
                    assert_ne!(stripe, from, "a move leaves the contended stripe");
                    assert_eq!(current_stripe(), stripe, "and sticks to the thread");
                    assert_eq!(
                        ring.cursors[stripe]
                            .0
                            .load(Ordering::Relaxed)
                            .wrapping_sub(n),
                        1,
                        "the pick is taken on the new stripe"
                    );
                }
                assert_eq!(ring.pick(), 5);
            });
        });
    }

    #[test]
    fn concurrent_picks_are_contiguous_runs_of_each_stripe() {
        // 7 values over 1000 slots; three threads pick together. Whatever stripes they settle on, the picks
        // are exactly the slots under each cursor's run from its start to where it ends.
        let values: Vec<u32> = (0..1000).map(|i| i % 7).collect();
        let ring = PublishedRing::new(&values);
        let per_thread = 100_000;
        let start = std::sync::Barrier::new(3);
        let seen: Vec<[u64; 7]> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        let mut counts = [0u64; 7];
                        for _ in 0..per_thread {
                            counts[ring.pick() as usize] += 1;
                        }
                        counts
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let mut total = [0u64; 7];
        for counts in &seen {
            for (t, c) in total.iter_mut().zip(counts) {
                *t += c;
            }
        }
        let (mut expected, mut used) = ([0u64; 7], 0u64);
        for (i, c) in ring.cursors.iter().enumerate() {
            let (mut n, end) = (stripe_start(i), c.0.load(Ordering::Relaxed));
            used += u64::from(n != end);
            while n != end {
                expected[values[n as usize % values.len()] as usize] += 1;
                n = n.wrapping_add(1);
            }
        }
        assert_eq!(total, expected);
        assert_eq!(total.iter().sum::<u64>(), 3 * per_thread);
        // The documented bound: within `slots` of the exact share per stripe in use.
        for (v, &got) in total.iter().enumerate() {
            let slots = values.iter().filter(|&&x| x as usize == v).count() as f64;
            let exact = (3 * per_thread) as f64 * slots / values.len() as f64;
            assert!(
                (got as f64 - exact).abs() <= used as f64 * slots,
                "value {v}: {got} picks, exact share {exact}, {used} stripes"
            );
        }
    }

    #[test]
    fn publish_switches_halves_and_grows_levels() {
        let ring = PublishedRing::new(&[7]);
        assert!((0..10).all(|_| ring.pick() == 7));
        ring.publish(&[8, 8, 8]);
        assert!((0..10).all(|_| ring.pick() == 8));
        let big = vec![9u32; 5000];
        ring.publish(&big);
        assert!((0..10_000).all(|_| ring.pick() == 9));
        assert_eq!(
            ring.seq.0.load(Ordering::Relaxed) & LEVEL_MASK,
            3,
            "5000 slots need level 3"
        );
        ring.publish(&[10, 11]);
        let mut seen = [0usize; 2];
        for _ in 0..1000 {
            seen[(ring.pick() - 10) as usize] += 1;
        }
        assert_eq!(seen, [500, 500]);
        assert_eq!(
            ring.seq.0.load(Ordering::Relaxed) & LEVEL_MASK,
            3,
            "levels never shrink"
        );
        assert_eq!(ring.generation(), 4);
    }
}
