//! What the bench reads of its own process from `/proc` (Linux): a thread's CPU time and the resident memory.

use std::time::Duration;

/// The calling thread's id (`gettid`), for [`thread_cpu`].
pub(super) fn current_tid() -> Option<u32> {
    std::fs::read_link("/proc/thread-self")
        .ok()?
        .file_name()?
        .to_str()?
        .parse()
        .ok()
}

/// CPU time (user + system) of thread `tid` of this process, `None` off Linux.
pub(super) fn thread_cpu(tid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    cpu_of_stat(&stat)
}

/// CPU time of the whole process.
pub(super) fn process_cpu() -> Option<Duration> {
    cpu_of_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// utime + stime of a `/proc/.../stat` line (fields 14 and 15, after the parenthesised command).
fn cpu_of_stat(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state), so utime (14) and stime (15) are at 11 and 12.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux this runs on.
    Some(Duration::from_millis(ticks * 10))
}

/// Summed over every thread of this process (`/proc/self/task/*/schedstat`): the time they ran on a CPU and
/// the time they were runnable but waited for one; `None` without schedstats. A wait near or above the CPU time
/// means the machine's cores, not this process's threads, bounded what it did.
pub(super) fn threads_run_and_wait() -> Option<(Duration, Duration)> {
    let (mut ran, mut waited) = (0u64, 0u64);
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(line) = std::fs::read_to_string(task.ok()?.path().join("schedstat")) else {
            continue; // a thread that ended meanwhile
        };
        let (r, w) = run_and_wait_of_schedstat(&line)?;
        ran += r;
        waited += w;
    }
    Some((Duration::from_nanos(ran), Duration::from_nanos(waited)))
}

/// The first two fields of a `schedstat` line: ns on a CPU, ns runnable waiting for one.
fn run_and_wait_of_schedstat(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

/// Resident memory of this process, bytes (`VmRSS`), and its peak (`VmHWM`).
pub(super) fn resident() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_fields_are_read_after_the_command_name() {
        let line = "42 (a (weird) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1 0 0";
        assert_eq!(cpu_of_stat(line), Some(Duration::from_millis(3000)));
    }

    #[test]
    fn schedstat_gives_run_and_wait() {
        assert_eq!(run_and_wait_of_schedstat("1500 250 7\n"), Some((1500, 250)));
        assert_eq!(run_and_wait_of_schedstat("x 1 2"), None);
    }

    #[test]
    fn this_process_is_readable() {
        let tid = current_tid().expect("a Linux thread id");
        assert!(thread_cpu(tid).is_some());
        let (rss, peak) = resident().expect("VmRSS");
        assert!(rss > 0 && peak >= rss);
    }
}
