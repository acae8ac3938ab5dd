//! Host resource usage on Linux, in the units of a report's [`SystemResourceUsage`] (listed below), as Pulsar's
//! `LinuxBrokerHostUsageImpl.java` measures it.
//!
//! * **CPU** (percent of one core, summed over cores): from the cgroup when one is visible — v2
//!   `cpu.stat` `usage_usec` with the limit from `cpu.max`, or v1 `cpuacct.usage` with the limit from
//!   `cpu.cfs_quota_us`/`cpu.cfs_period_us` — else from `/proc/stat` (busy share of all jiffies × the limit).
//!   The limit is 100 × quota/period when a quota is set, else 100 × the number of CPUs.
//! * **Memory** (MiB): the cgroup's `memory.current`/`memory.max` (v2) or `memory.usage_in_bytes`/
//!   `memory.limit_in_bytes` (v1) when limited, else `/proc/meminfo` (MemTotal − MemAvailable of MemTotal).
//!   Pulsar reports the JVM heap here; loadmgr has no heap, and since Pulsar 3.0 memory carries weight 0.
//! * **Direct memory**: 0 of 0 (no JVM); a [`super::BrokerHost`] that has one reports its own usage.
//! * **NIC in/out** (kbit/s): byte counters of the physical NICs (`/sys/class/net/<nic>`, not under
//!   `/virtual/`, `type` 1) × 8 / 1024 per second; the limit is the sum of their `speed` (Mbit/s) × 1024, or
//!   `loadBalancerOverrideBrokerNicSpeedGbps` × NICs × 1024 × 1024. The first sample reports usage 0.
//!
//! CPU and NICs are sampled every `loadBalancerHostUsageCheckIntervalMinutes`; memory on every report check.
//! Every reader takes a root directory so the parsers can be tested on a fixture tree.

use std::path::{Path, PathBuf};

use tokio::time::Instant;

use crate::model::{ResourceUsage, SystemResourceUsage};

/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;
/// A cgroup v1 "no limit" is a huge number (page-rounded `i64::MAX`).
const NO_LIMIT_BYTES: u64 = 1 << 60;

/// `/proc/stat`'s aggregate `cpu` line: (busy, total) jiffies. Idle counts `idle` + `iowait`. `None` without
/// such a line, or when its counters add up beyond `u64` (no kernel writes that).
pub fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if fields.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal [guest guest_nice — already in user/nice]
    let total = fields
        .iter()
        .take(8)
        .try_fold(0u64, |sum, f| sum.checked_add(*f))?;
    // idle and iowait are two of the summed fields, so they cannot overflow once the total did not.
    let idle = fields[3] + fields.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// cgroup v2 `cpu.max` (`max 100000` or `QUOTA PERIOD`): the limit in cores, `None` when unlimited or when
/// the text gives no positive finite number of cores.
pub fn parse_cpu_max(text: &str) -> Option<f64> {
    let mut parts = text.split_whitespace();
    let quota = parts.next()?;
    let period: f64 = parts
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(100_000.0);
    if quota == "max" || period <= 0.0 {
        return None;
    }
    let quota: f64 = quota.parse().ok()?;
    // f64 parsing takes `inf`, `NaN` and `1e999`: such a quota or period must not become a limit of infinitely
    // many (or NaN) cores, which would make every CPU percentage 0.
    let cores = quota / period;
    (cores.is_finite() && cores > 0.0).then_some(cores)
}

/// cgroup v2 `cpu.stat`: `usage_usec`.
pub fn parse_cpu_stat_usage_usec(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
}

/// `/proc/meminfo`: (used, total) in KiB, used = MemTotal − MemAvailable.
pub fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
    };
    let total = field("MemTotal:")?;
    let available = field("MemAvailable:").or_else(|| field("MemFree:"))?;
    Some((total.saturating_sub(available), total))
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn read_u64(path: &Path) -> Option<u64> {
    read(path)?.trim().parse().ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CpuSource {
    CgroupV2,
    CgroupV1,
    ProcStat,
}

#[derive(Debug, Clone, Copy)]
struct CpuSample {
    at: Instant,
    /// Busy time: µs of cgroup usage, or busy jiffies.
    busy: u64,
    /// Total jiffies (`/proc/stat` only).
    total: u64,
}

#[derive(Debug, Clone, Copy)]
struct NicSample {
    at: Instant,
    rx: u64,
    tx: u64,
}

/// A Linux host-usage sampler; see the module docs.
#[derive(Debug)]
pub struct LinuxHostUsage {
    root: PathBuf,
    nic_speed_override_gbps: Option<f64>,
    cpu_source: CpuSource,
    cpu_limit: f64,
    last_cpu: Option<CpuSample>,
    last_nic: Option<NicSample>,
    usage: SystemResourceUsage,
}

impl LinuxHostUsage {
    /// A sampler of this machine.
    pub fn new(nic_speed_override_gbps: Option<f64>) -> Self {
        Self::with_root("/", nic_speed_override_gbps)
    }

    /// A sampler reading `<root>/proc` and `<root>/sys` (a fixture tree in tests).
    pub fn with_root(root: impl Into<PathBuf>, nic_speed_override_gbps: Option<f64>) -> Self {
        let root = root.into();
        let cg = root.join("sys/fs/cgroup");
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get() as f64)
            .unwrap_or(1.0);
        let (cpu_source, cores) = if cg.join("cpu.stat").is_file() {
            let cores = read(&cg.join("cpu.max"))
                .and_then(|t| parse_cpu_max(&t))
                .unwrap_or(cpus);
            (CpuSource::CgroupV2, cores)
        } else if Self::v1_usage_path(&root).is_some() {
            let quota =
                read(&cg.join("cpu/cpu.cfs_quota_us")).and_then(|t| t.trim().parse::<i64>().ok());
            let period = read_u64(&cg.join("cpu/cpu.cfs_period_us"));
            let cores = match (quota, period) {
                (Some(q), Some(p)) if q > 0 && p > 0 => q as f64 / p as f64,
                _ => cpus,
            };
            (CpuSource::CgroupV1, cores)
        } else {
            (CpuSource::ProcStat, cpus)
        };
        let mut sampler = Self {
            root,
            nic_speed_override_gbps,
            cpu_source,
            cpu_limit: cores * 100.0,
            last_cpu: None,
            last_nic: None,
            usage: SystemResourceUsage::default(),
        };
        sampler.usage.cpu = ResourceUsage::new(0.0, sampler.cpu_limit);
        sampler.usage.bandwidth_in = ResourceUsage::new(0.0, sampler.nic_limit());
        sampler.usage.bandwidth_out = sampler.usage.bandwidth_in;
        sampler.usage.memory = sampler.memory();
        sampler
    }

    fn v1_usage_path(root: &Path) -> Option<PathBuf> {
        [
            "sys/fs/cgroup/cpu/cpuacct.usage",
            "sys/fs/cgroup/cpuacct/cpuacct.usage",
        ]
        .iter()
        .map(|p| root.join(p))
        .find(|p| p.is_file())
    }

    /// The CPU limit, percent of one core.
    pub fn cpu_limit(&self) -> f64 {
        self.cpu_limit
    }

    fn cpu_busy(&self) -> Option<(u64, u64)> {
        match self.cpu_source {
            CpuSource::CgroupV2 => read(&self.root.join("sys/fs/cgroup/cpu.stat"))
                .and_then(|t| parse_cpu_stat_usage_usec(&t))
                .map(|us| (us, 0)),
            CpuSource::CgroupV1 => Self::v1_usage_path(&self.root)
                .and_then(|p| read_u64(&p))
                .map(|ns| (ns / 1000, 0)),
            CpuSource::ProcStat => {
                read(&self.root.join("proc/stat")).and_then(|t| parse_proc_stat(&t))
            }
        }
    }

    fn physical_nics(&self) -> Vec<PathBuf> {
        let dir = self.root.join("sys/class/net");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut nics: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
                !real.to_string_lossy().contains("/virtual/")
                    && read(&p.join("type")).is_some_and(|t| t.trim() == "1")
            })
            .collect();
        nics.sort();
        nics
    }

    /// The NIC limit, kbit/s (0 when no physical NIC is found and no override is set).
    pub fn nic_limit(&self) -> f64 {
        let nics = self.physical_nics();
        match self.nic_speed_override_gbps {
            Some(gbps) => gbps * nics.len().max(1) as f64 * 1024.0 * 1024.0,
            None => nics
                .iter()
                .filter_map(|n| read(&n.join("speed")))
                .filter_map(|s| s.trim().parse::<f64>().ok())
                .filter(|s| *s > 0.0)
                .map(|mbps| mbps * 1024.0)
                .sum(),
        }
    }

    fn nic_bytes(&self) -> (u64, u64) {
        self.physical_nics().iter().fold((0, 0), |(rx, tx), n| {
            (
                rx + read_u64(&n.join("statistics/rx_bytes")).unwrap_or(0),
                tx + read_u64(&n.join("statistics/tx_bytes")).unwrap_or(0),
            )
        })
    }

    /// Memory in MiB: the cgroup's when it is limited, else the host's.
    pub fn memory(&self) -> ResourceUsage {
        let cg = self.root.join("sys/fs/cgroup");
        let v2 = (
            read_u64(&cg.join("memory.current")),
            read(&cg.join("memory.max")).and_then(|t| t.trim().parse::<u64>().ok()),
        );
        let v1 = (
            read_u64(&cg.join("memory/memory.usage_in_bytes")),
            read_u64(&cg.join("memory/memory.limit_in_bytes")),
        );
        for (used, limit) in [v2, v1] {
            if let (Some(u), Some(l)) = (used, limit) {
                if l > 0 && l < NO_LIMIT_BYTES {
                    return ResourceUsage::new(u as f64 / MIB, l as f64 / MIB);
                }
            }
        }
        match read(&self.root.join("proc/meminfo")).and_then(|t| parse_meminfo(&t)) {
            Some((used, total)) => ResourceUsage::new(used as f64 / 1024.0, total as f64 / 1024.0),
            None => ResourceUsage::new(0.0, 0.0),
        }
    }

    /// Recomputes CPU and NIC usage from the counters' change since the previous sample (usage 0 the first
    /// time) and reads memory; returns the new usage.
    pub fn sample(&mut self) -> SystemResourceUsage {
        let now = Instant::now();
        if let Some((busy, total)) = self.cpu_busy() {
            let current = CpuSample {
                at: now,
                busy,
                total,
            };
            let usage = match self.last_cpu {
                Some(prev) => match self.cpu_source {
                    CpuSource::ProcStat => {
                        let dt = current.total.saturating_sub(prev.total);
                        if dt == 0 {
                            0.0
                        } else {
                            current.busy.saturating_sub(prev.busy) as f64 / dt as f64
                                * self.cpu_limit
                        }
                    }
                    CpuSource::CgroupV1 | CpuSource::CgroupV2 => {
                        let wall_us = now.duration_since(prev.at).as_micros() as f64;
                        if wall_us <= 0.0 {
                            0.0
                        } else {
                            current.busy.saturating_sub(prev.busy) as f64 / wall_us * 100.0
                        }
                    }
                },
                None => 0.0,
            };
            self.last_cpu = Some(current);
            self.usage.cpu = ResourceUsage::new(usage, self.cpu_limit);
        } else {
            self.usage.cpu = ResourceUsage::new(-1.0, self.cpu_limit);
        }
        let (rx, tx) = self.nic_bytes();
        let limit = self.nic_limit();
        let (kin, kout) = match self.last_nic {
            Some(prev) => {
                let secs = now.duration_since(prev.at).as_secs_f64();
                if secs > 0.0 {
                    (
                        rx.saturating_sub(prev.rx) as f64 * 8.0 / 1024.0 / secs,
                        tx.saturating_sub(prev.tx) as f64 * 8.0 / 1024.0 / secs,
                    )
                } else {
                    (0.0, 0.0)
                }
            }
            None => (0.0, 0.0),
        };
        self.last_nic = Some(NicSample { at: now, rx, tx });
        self.usage.bandwidth_in = ResourceUsage::new(kin, limit);
        self.usage.bandwidth_out = ResourceUsage::new(kout, limit);
        self.usage.memory = self.memory();
        self.usage
    }

    /// The last sample with memory read again (what a report check uses between samples).
    pub fn current(&mut self) -> SystemResourceUsage {
        self.usage.memory = self.memory();
        self.usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn parsers() {
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n";
        assert_eq!(parse_proc_stat(stat), Some((150, 1000)));
        assert_eq!(parse_proc_stat("intr 1"), None);
        // Found by fuzzing (fuzz/fuzz_targets/host_usage.rs): counters whose sum overflows u64 panicked.
        assert_eq!(parse_proc_stat("cpu 18446744073709551615 1 0 0\n"), None);
        assert_eq!(
            parse_proc_stat("cpu 18446744073709551614 1 0 0\n"),
            Some((u64::MAX, u64::MAX))
        );
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("200000 100000\n"), Some(2.0));
        assert_eq!(parse_cpu_max("50000 100000"), Some(0.5));
        // Found by fuzzing (fuzz/fuzz_targets/host_usage.rs): numbers f64 reads as infinite or NaN.
        assert_eq!(parse_cpu_max("55555555555e9999"), None);
        assert_eq!(parse_cpu_max("inf 100000"), None);
        assert_eq!(parse_cpu_max("100000 NaN"), None);
        assert_eq!(parse_cpu_max("100000 inf"), None);
        assert_eq!(
            parse_cpu_stat_usage_usec("usage_usec 1234\nuser_usec 1\n"),
            Some(1234)
        );
        let meminfo =
            "MemTotal:       16384000 kB\nMemFree:  100 kB\nMemAvailable:    4096000 kB\n";
        assert_eq!(parse_meminfo(meminfo), Some((12_288_000, 16_384_000)));
    }

    #[tokio::test(start_paused = true)]
    async fn proc_stat_and_physical_nics() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "proc/stat", "cpu  100 0 0 900 0 0 0 0\n");
        write(
            root,
            "proc/meminfo",
            "MemTotal: 2048 kB\nMemAvailable: 1024 kB\n",
        );
        write(root, "sys/class/net/eth0/type", "1\n");
        write(root, "sys/class/net/eth0/speed", "1000\n");
        write(root, "sys/class/net/eth0/statistics/rx_bytes", "0\n");
        write(root, "sys/class/net/eth0/statistics/tx_bytes", "0\n");
        // A non-Ethernet device is not counted.
        write(root, "sys/class/net/lo/type", "772\n");
        write(root, "sys/class/net/lo/speed", "10000\n");
        let mut s = LinuxHostUsage::with_root(root, None);
        let cores = std::thread::available_parallelism().unwrap().get() as f64;
        let first = s.sample();
        assert_eq!(first.cpu, ResourceUsage::new(0.0, cores * 100.0));
        assert_eq!(first.bandwidth_in, ResourceUsage::new(0.0, 1000.0 * 1024.0));
        assert_eq!(first.memory, ResourceUsage::new(1.0, 2.0));
        write(root, "proc/stat", "cpu  200 0 0 1700 0 0 0 0\n");
        write(root, "sys/class/net/eth0/statistics/rx_bytes", "128000\n");
        write(root, "sys/class/net/eth0/statistics/tx_bytes", "256000\n");
        tokio::time::advance(Duration::from_secs(2)).await;
        let second = s.sample();
        // 100 busy of 900 jiffies.
        assert!((second.cpu.usage - cores * 100.0 / 9.0).abs() < 1e-9);
        // 128000 B over 2 s = 500 kbit/s.
        assert_eq!(second.bandwidth_in.usage, 500.0);
        assert_eq!(second.bandwidth_out.usage, 1000.0);
        let with_override = LinuxHostUsage::with_root(root, Some(10.0));
        assert_eq!(with_override.nic_limit(), 10.0 * 1024.0 * 1024.0);
    }

    #[tokio::test(start_paused = true)]
    async fn cgroup_v2_and_v1() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "sys/fs/cgroup/cpu.max", "150000 100000\n");
        write(root, "sys/fs/cgroup/cpu.stat", "usage_usec 1000000\n");
        write(
            root,
            "sys/fs/cgroup/memory.current",
            &(512u64 << 20).to_string(),
        );
        write(
            root,
            "sys/fs/cgroup/memory.max",
            &(1024u64 << 20).to_string(),
        );
        let mut s = LinuxHostUsage::with_root(root, None);
        assert_eq!(s.cpu_limit(), 150.0);
        s.sample();
        write(root, "sys/fs/cgroup/cpu.stat", "usage_usec 1500000\n");
        tokio::time::advance(Duration::from_secs(1)).await;
        let u = s.sample();
        // 0.5 s of CPU in 1 s = 50 % of one core.
        assert!((u.cpu.usage - 50.0).abs() < 1e-6, "{:?}", u.cpu);
        assert_eq!(u.memory, ResourceUsage::new(512.0, 1024.0));
        // No NIC at all: limit 0, so the percentage is 0.
        assert_eq!(u.bandwidth_in.percent_usage(), 0.0);

        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
        write(root, "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
        write(root, "sys/fs/cgroup/cpu/cpuacct.usage", "0\n");
        write(
            root,
            "sys/fs/cgroup/memory/memory.usage_in_bytes",
            "1048576\n",
        );
        write(
            root,
            "sys/fs/cgroup/memory/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        write(
            root,
            "proc/meminfo",
            "MemTotal: 4096 kB\nMemAvailable: 1024 kB\n",
        );
        let cores = std::thread::available_parallelism().unwrap().get() as f64;
        let mut s = LinuxHostUsage::with_root(root, None);
        assert_eq!(s.cpu_limit(), cores * 100.0);
        s.sample();
        write(root, "sys/fs/cgroup/cpu/cpuacct.usage", "2000000000\n");
        tokio::time::advance(Duration::from_secs(4)).await;
        let u = s.sample();
        assert!((u.cpu.usage - 50.0).abs() < 1e-6);
        // Unlimited cgroup memory: the host's.
        assert_eq!(u.memory, ResourceUsage::new(3.0, 4.0));
        write(root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "200000\n");
        assert_eq!(LinuxHostUsage::with_root(root, None).cpu_limit(), 200.0);
    }
}
