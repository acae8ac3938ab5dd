//! The broker cost model: how the traffic a broker serves becomes the CPU and NIC usage it reports. The
//! synthetic host's `costModel` and the simulator's brokers both use it.
//!
//! A broker with `cpuCores` cores and a `nicGbps` NIC serving, summed over its bundles, `rateIn`/`rateOut`
//! msg/s and `throughputIn`/`throughputOut` B/s uses:
//!
//! * **CPU** (cores) = `baseCpuCores`
//!   \+ (`rateIn` + `rateOut`) × `cpuMicrosPerMessage` × 10⁻⁶
//!   \+ (`throughputIn` + `throughputOut`) / 1024 × `cpuMicrosPerKiB` × 10⁻⁶
//!   \+ spike points / 100 × `cpuCores`,
//!   reported as `cpu.usage` = cores × 100 (percent of one core, Pulsar's unit) with `cpu.limit` = `cpuCores` × 100.
//!   The sampled value adds `noisePoints` × N(0, 1) percentage points of the broker's capacity.
//! * **NIC in** (kbit/s) = `throughputIn` × 8 / 1000; **NIC out** = (`throughputOut` + `throughputIn` ×
//!   `bookieWriteCopies`) × 8 / 1000 — a Pulsar broker sends every published entry to its bookies (write quorum)
//!   on the same NIC. Limits: `nicGbps` × 10⁶ kbit/s each way.
//! * Demand above a limit saturates at the limit (the broker gets slower; it cannot use more than it has).
//! * Heap memory and direct memory are reported at a constant 50 % and 10 % (both weigh 0 by default).
//!
//! Defaults (`CostModel::default`): 0.4 base cores, 15 µs per message, 20 µs per KiB, 2 bookie copies, 1 point of
//! noise. With 2 KiB messages and one subscription, an 8-core broker at 50 % CPU serves about 33 000 msg/s in
//! (and as many out) — 130 MB/s each way, 1.8 Gbit/s on the NIC out.

use serde::{Deserialize, Serialize};

use crate::model::{ResourceUsage, SystemResourceUsage};

/// Message rates (msg/s) and throughputs (B/s), in and out.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rates {
    /// Messages in, msg/s.
    pub rate_in: f64,
    /// Messages out, msg/s.
    pub rate_out: f64,
    /// Bytes in, B/s.
    pub tp_in: f64,
    /// Bytes out, B/s.
    pub tp_out: f64,
}

impl Rates {
    /// `self += other × k`.
    pub fn add_scaled(&mut self, other: &Rates, k: f64) {
        self.rate_in += other.rate_in * k;
        self.rate_out += other.rate_out * k;
        self.tp_in += other.tp_in * k;
        self.tp_out += other.tp_out * k;
    }

    /// `self × k`.
    pub fn scaled(&self, k: f64) -> Rates {
        Rates {
            rate_in: self.rate_in * k,
            rate_out: self.rate_out * k,
            tp_in: self.tp_in * k,
            tp_out: self.tp_out * k,
        }
    }

    /// Negative rounding residue (from adding and removing bundles) clamped to 0.
    pub fn clamped(&self) -> Rates {
        Rates {
            rate_in: self.rate_in.max(0.0),
            rate_out: self.rate_out.max(0.0),
            tp_in: self.tp_in.max(0.0),
            tp_out: self.tp_out.max(0.0),
        }
    }

    /// msg/s in + out.
    pub fn total_rate(&self) -> f64 {
        self.rate_in + self.rate_out
    }

    /// B/s in + out.
    pub fn total_tp(&self) -> f64 {
        self.tp_in + self.tp_out
    }
}

/// The cost of traffic on a broker (see the module docs). All fields have defaults; scenario files may set any.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct CostModel {
    /// CPU used with no traffic, cores.
    pub base_cpu_cores: f64,
    /// CPU per message in or out, µs.
    #[serde(rename = "cpuMicrosPerMessage")]
    pub cpu_micros_per_message: f64,
    /// CPU per KiB in or out, µs.
    #[serde(rename = "cpuMicrosPerKiB")]
    pub cpu_micros_per_kib: f64,
    /// Copies of every published byte the broker sends to bookies (NIC out).
    pub bookie_write_copies: f64,
    /// Standard deviation of the sampled CPU noise, percentage points of capacity.
    pub noise_points: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        Self {
            base_cpu_cores: 0.4,
            cpu_micros_per_message: 15.0,
            cpu_micros_per_kib: 20.0,
            bookie_write_copies: 2.0,
            noise_points: 1.0,
        }
    }
}

/// A broker's hardware.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    /// CPU cores.
    pub cpu_cores: f64,
    /// NIC speed, Gbit/s (each way).
    pub nic_gbps: f64,
    /// CPU used with no traffic, cores (the model's base, or calibrated from a snapshot).
    pub base_cpu_cores: f64,
}

impl CostModel {
    /// Cores used by serving `r` (without the base).
    pub fn traffic_cores(&self, r: &Rates) -> f64 {
        r.total_rate() * self.cpu_micros_per_message * 1e-6
            + r.total_tp() / 1024.0 * self.cpu_micros_per_kib * 1e-6
    }

    /// The host usage of a broker serving `r`, with `extra_points` of CPU (spikes) and `noise` (in standard
    /// deviations; multiplied by `noisePoints`).
    pub fn usage(
        &self,
        cap: &Capacity,
        r: &Rates,
        extra_points: f64,
        noise: f64,
    ) -> SystemResourceUsage {
        let cpu_limit = cap.cpu_cores * 100.0;
        let cpu = (cap.base_cpu_cores + self.traffic_cores(r)) * 100.0
            + (extra_points + noise * self.noise_points) * cap.cpu_cores;
        let nic_limit = cap.nic_gbps * 1e6;
        let nic_in = r.tp_in * 8.0 / 1000.0;
        let nic_out = (r.tp_out + r.tp_in * self.bookie_write_copies) * 8.0 / 1000.0;
        SystemResourceUsage {
            cpu: ResourceUsage::new(cpu.clamp(0.0, cpu_limit), cpu_limit),
            bandwidth_in: ResourceUsage::new(nic_in.clamp(0.0, nic_limit), nic_limit),
            bandwidth_out: ResourceUsage::new(nic_out.clamp(0.0, nic_limit), nic_limit),
            memory: ResourceUsage::new(2048.0, 4096.0),
            direct_memory: ResourceUsage::new(409.6, 4096.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_follows_the_documented_costs() {
        let m = CostModel {
            noise_points: 2.0,
            ..Default::default()
        };
        let cap = Capacity {
            cpu_cores: 8.0,
            nic_gbps: 10.0,
            base_cpu_cores: 0.4,
        };
        // 10 000 msg/s in and out of 2 KiB: 20 000 × 15 µs + 40 000 KiB/s × 20 µs = 0.3 + 0.8 cores.
        let r = Rates {
            rate_in: 10_000.0,
            rate_out: 10_000.0,
            tp_in: 10_000.0 * 2048.0,
            tp_out: 10_000.0 * 2048.0,
        };
        let u = m.usage(&cap, &r, 0.0, 0.0);
        assert!((u.cpu.usage - 150.0).abs() < 1e-9, "{}", u.cpu.usage);
        assert_eq!(u.cpu.limit, 800.0);
        assert!((u.bandwidth_in.usage - 163_840.0).abs() < 1e-6);
        assert!((u.bandwidth_out.usage - 3.0 * 163_840.0).abs() < 1e-6);
        assert_eq!(u.bandwidth_out.limit, 1e7);
        let spiked = m.usage(&cap, &r, 40.0, 1.0);
        assert!((spiked.cpu.usage - (150.0 + 42.0 * 8.0)).abs() < 1e-9);
        let saturated = m.usage(&cap, &r.scaled(10.0), 0.0, 0.0);
        assert_eq!(saturated.cpu.usage, 800.0);
    }
}
