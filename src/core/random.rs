//! The seeded random streams and noise shared by the decisions of the simulator and of the runtime.
//!
//! # Randomness
//!
//! Nothing reads ambient randomness. Every draw comes from [`stream_rng`] (a `StdRng` seeded from the run seed,
//! a stream id and an index) or from [`noise`] (a pure hash of seed, broker and sample index), so a run is a
//! function of its inputs and seed, whatever the thread it runs on.

use rand::rngs::StdRng;
use rand::SeedableRng;

/// SplitMix64: a fast, well-mixed 64-bit hash step.
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Random streams of a run (the `stream` argument of [`stream_rng`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Stream {
    /// Building the world: traffic ranks, jitter, random initial placement.
    World = 1,
    /// The k-th shedding cycle of the run (placement of its unloads).
    Shedding = 2,
    /// The n-th assignment of an unowned bundle.
    Assignment = 3,
    /// Per-broker report phases.
    Phase = 4,
    /// The early shedding cycle at a given instant (epoch ms).
    EarlyShedding = 5,
}

/// A `StdRng` for `(seed, stream, index)`: the k-th shedding cycle uses `stream_rng(seed, Stream::Shedding, k)`,
/// so a cycle's random choices do not depend on how many draws earlier cycles made.
pub fn stream_rng(seed: u64, stream: Stream, index: u64) -> StdRng {
    let s = splitmix64(seed ^ splitmix64((stream as u64) << 56 ^ index));
    StdRng::seed_from_u64(s)
}

/// A uniform number in `[0, 1)` from a hash of the inputs.
pub fn unit(seed: u64, a: u64, b: u64) -> f64 {
    let h = splitmix64(seed ^ splitmix64(a.wrapping_mul(0x1000_0000_01b3) ^ splitmix64(b)));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Approximately standard normal noise for broker `broker`'s `sample`-th sample (Irwin–Hall sum of four
/// uniforms, scaled to unit variance; bounded by ±3.46). Pure function of its inputs.
pub fn noise(seed: u64, broker: u64, sample: u64) -> f64 {
    let mut sum = 0.0;
    for k in 0..4u64 {
        sum += unit(seed, broker << 8 | k, sample) * 2.0 - 1.0;
    }
    sum * (3.0f64 / 4.0).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_a_pure_function_with_unit_variance() {
        assert_eq!(noise(7, 3, 11), noise(7, 3, 11));
        assert_ne!(noise(7, 3, 11), noise(7, 3, 12));
        let n = 20_000;
        let xs: Vec<f64> = (0..n).map(|i| noise(1, 2, i)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.05, "{mean}");
        assert!((var - 1.0).abs() < 0.05, "{var}");
    }
}
