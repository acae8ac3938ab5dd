//! The ownership oracle: the hosts' own serving timelines (`loadmgr broker --serving-log`), merged over every
//! broker process, tell whether two processes ever served one bundle at the same instant, and how long a
//! bundle went unserved.
//!
//! A log holds, per bundle, the first and the last batch served under each lease. An interval a process
//! never closed (it was SIGKILLed, or it is still running) ends when it was killed, or at the end of the run:
//! the process served at most until then.

use std::collections::BTreeMap;
use std::path::Path;

use loadmgr::runtime::synthetic::{read_serving_log, ServingEvent};

/// One stretch of serving, by one process.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// `broker id#incarnation`.
    pub process: String,
    pub bundle: String,
    pub token: i64,
    pub start_us: i64,
    pub end_us: i64,
}

/// Reads one process's log; open intervals end at `end_us`.
pub fn intervals(process: &str, log: &Path, end_us: i64) -> Result<Vec<Interval>, String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let events = read_serving_log(&text).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut open: BTreeMap<(String, i64), i64> = BTreeMap::new();
    let mut out = Vec::new();
    for e in events {
        match e {
            ServingEvent::Start {
                bundle,
                token,
                at_us,
            } => {
                open.insert((bundle, token), at_us);
            }
            ServingEvent::Stop {
                bundle,
                token,
                at_us,
                ..
            } => {
                let start = open.remove(&(bundle.clone(), token)).ok_or_else(|| {
                    format!(
                        "{}: a stop of {bundle} (token {token}) without a start",
                        log.display()
                    )
                })?;
                out.push(Interval {
                    process: process.to_owned(),
                    bundle,
                    token,
                    start_us: start,
                    end_us: at_us,
                });
            }
        }
    }
    for ((bundle, token), start) in open {
        out.push(Interval {
            process: process.to_owned(),
            bundle,
            token,
            start_us: start,
            end_us: end_us.max(start),
        });
    }
    Ok(out)
}

/// Two processes serving one bundle at the same time: the bundle, both intervals, and for how long (µs).
#[derive(Debug, Clone)]
pub struct Overlap {
    pub a: Interval,
    pub b: Interval,
    pub overlap_us: i64,
}

/// Every pair of intervals of different processes that overlap in time on the same bundle.
pub fn overlaps(all: &[Interval]) -> Vec<Overlap> {
    let mut by_bundle: BTreeMap<&str, Vec<&Interval>> = BTreeMap::new();
    for i in all {
        by_bundle.entry(&i.bundle).or_default().push(i);
    }
    let mut out = Vec::new();
    for list in by_bundle.values_mut() {
        list.sort_by_key(|i| i.start_us);
        for (k, a) in list.iter().enumerate() {
            for b in &list[k + 1..] {
                if b.start_us >= a.end_us {
                    break;
                }
                if a.process != b.process {
                    out.push(Overlap {
                        a: (*a).clone(),
                        b: (*b).clone(),
                        overlap_us: a.end_us.min(b.end_us) - b.start_us,
                    });
                }
            }
        }
    }
    out
}

/// The longest time, within `[from_us, to_us]`, that any of `bundles` was served by nobody (µs).
pub fn longest_unserved(all: &[Interval], bundles: &[String], from_us: i64, to_us: i64) -> i64 {
    let mut longest = 0;
    for bundle in bundles {
        let mut spans: Vec<(i64, i64)> = all
            .iter()
            .filter(|i| &i.bundle == bundle && i.end_us >= from_us && i.start_us <= to_us)
            .map(|i| (i.start_us.max(from_us), i.end_us.min(to_us)))
            .collect();
        spans.sort();
        let mut covered_to = from_us;
        for (s, e) in spans {
            if s > covered_to {
                longest = longest.max(s - covered_to);
            }
            covered_to = covered_to.max(e);
        }
        longest = longest.max(to_us - covered_to);
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(process: &str, bundle: &str, start: i64, end: i64) -> Interval {
        Interval {
            process: process.into(),
            bundle: bundle.into(),
            token: 1,
            start_us: start,
            end_us: end,
        }
    }

    #[test]
    fn overlaps_are_between_processes_on_one_bundle() {
        let all = vec![
            iv("a#0", "x", 0, 100),
            iv("b#0", "x", 100, 200),
            iv("a#0", "x", 150, 160),
            iv("c#0", "y", 0, 1000),
        ];
        let o = overlaps(&all);
        // a#0 [0,100] only touches b#0 at 100; a#0 [150,160] lies inside b#0.
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].overlap_us, 10);
        assert!(overlaps(&[iv("a#0", "x", 0, 10), iv("a#1", "x", 20, 30)]).is_empty());
    }

    #[test]
    fn the_longest_gap_counts_the_window_edges() {
        let all = vec![iv("a#0", "x", 0, 100), iv("b#0", "x", 150, 400)];
        let bundles = vec!["x".to_owned()];
        assert_eq!(longest_unserved(&all, &bundles, 0, 400), 50);
        assert_eq!(longest_unserved(&all, &bundles, 0, 700), 300);
    }
}
