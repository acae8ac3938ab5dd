//! What a broker reads from the host to measure its own usage (`runtime::host_usage`): `/proc/stat`, cgroup v2
//! `cpu.max` and `cpu.stat`, and `/proc/meminfo`. The kernel writes these, but a container, a FUSE procfs or a
//! test can put anything there: a parser must give `None`, not panic, and what it gives must be usable
//! (busy ≤ total, used ≤ total, a CPU limit that is a positive finite number of cores).
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::runtime::host_usage::{
    parse_cpu_max, parse_cpu_stat_usage_usec, parse_meminfo, parse_proc_stat,
};
use loadmgr_fuzz::text;

fuzz_target!(|data: &[u8]| {
    let Some(text) = text(data) else { return };
    if let Some((busy, total)) = parse_proc_stat(text) {
        assert!(busy <= total, "busy {busy} > total {total}");
    }
    if let Some(cores) = parse_cpu_max(text) {
        assert!(
            cores.is_finite() && cores > 0.0,
            "{text:?}: a CPU limit of {cores} cores"
        );
    }
    let _ = parse_cpu_stat_usage_usec(text);
    if let Some((used, total)) = parse_meminfo(text) {
        assert!(used <= total, "used {used} > total {total}");
    }
});
