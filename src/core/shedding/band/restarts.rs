//! Rolling restarts as BandShedder sees them: which brokers came back while a rolling restart is under way, and
//! how long to leave them to placement instead of refilling them by moves.
//!
//! In a rolling restart each broker leaves in turn; its bundles are placed at once on the brokers left (they
//! must be served), and it comes back empty. Refilled by moves at once, every return costs as many moves as
//! the broker's share (40 or so of 500 bundles on ten brokers), and the next broker's restart scatters its
//! bundles again minutes later. Left alone, the empty broker is the least loaded when the next broker leaves,
//! so placement gives it that broker's bundles: the refill comes with moves the restart makes anyway.
//!
//! A broker that comes back is *held* (not refilled by moves) when its restart follows another broker's: it
//! left at most `limit` after another broker came back, and no earlier than that. It is held for as long as
//! the gap between that return and its own departure (when the next broker is expected to leave), plus
//! `slack` (a shedding interval, so that the cycle after the next departure sees the orphans placed). What
//! the last broker of a rolling restart waits is that gap: the price of not guessing which broker is the last.
//!
//! A new leader reads what it can of the past from the store when it takes over ([`Restarts::take_over`]):
//! the brokers' start times (their reports' `startTimestamp`) give the returns, and a broker that the records
//! name but that is gone left at the takeover at the latest. In a rolling restart the leader itself is
//! restarted, so the broker that took over must know both to hold the next returns. What a start time cannot
//! tell is why the broker started: a broker added by a scale-out within the limit before the takeover counts as
//! a return too, so a broker gone at the takeover (the old leader) is held when it comes back, though nothing
//! else restarts. The hold then costs that broker the gap before it is refilled, as the last broker of a rolling
//! restart waits.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::Settings;
use crate::core::num;

/// How long a departure or a return is remembered, ms: a day, longer than any sensible limit.
const MEMORY_MS: i64 = 24 * 60 * 60_000;
/// Brokers that started within this of the earliest start of the live brokers started with the cluster, ms.
const COLD_START_MS: i64 = 60_000;

/// Membership history of the brokers a leader saw.
#[derive(Debug, Clone, Default)]
pub(super) struct Restarts {
    /// The live brokers at the last change (`None` before the first).
    members: Option<BTreeSet<String>>,
    /// The latest return of any broker: (broker, when), epoch ms.
    last_return: Option<(String, i64)>,
    /// Per broker that left: when, and the latest return of another broker before that (epoch ms).
    departed: BTreeMap<String, (i64, Option<i64>)>,
    /// Returns that followed another broker's, oldest first, until their hold is over.
    returns: Vec<Return>,
}

/// A return that followed another broker's (times in epoch ms).
#[derive(Debug, Clone)]
struct Return {
    broker: String,
    /// When it came back.
    back: i64,
    /// When it had left.
    left: i64,
    /// When the other broker had come back, before it left.
    previous: i64,
}

impl Restarts {
    /// A new leader's view of the past at `now` (epoch ms), before its first [`Self::observe`]: `starts`, each
    /// live broker's start (epoch ms); `gone`, the brokers the records name that are not live. A start more
    /// than [`COLD_START_MS`] after the earliest one counts as a return (brokers that started with the
    /// cluster did not come back from anything); the latest such start is the last return. A gone broker is
    /// taken as departed at `now`, the latest it can have left.
    pub(super) fn take_over(
        &mut self,
        starts: &BTreeMap<String, i64>,
        gone: &BTreeSet<String>,
        now: i64,
    ) {
        let Some(first) = starts.values().copied().min() else {
            return;
        };
        self.last_return = starts
            .iter()
            .filter(|(_, at)| **at > first + COLD_START_MS && now - **at <= MEMORY_MS)
            .max_by_key(|(b, at)| (**at, *b))
            .map(|(b, at)| (b.clone(), *at));
        for g in gone {
            self.depart(g, now);
        }
    }

    /// `broker` left at `now` (epoch ms), after the latest return of another broker.
    fn depart(&mut self, broker: &str, now: i64) {
        let previous = self
            .last_return
            .as_ref()
            .filter(|(b, _)| b != broker)
            .map(|(_, at)| *at);
        self.departed.insert(broker.to_owned(), (now, previous));
    }

    /// The live broker set changed at `now` (epoch ms). The first set a leader sees has no departures (but those
    /// [`Self::take_over`] found).
    pub(super) fn observe(&mut self, active: &BTreeSet<String>, now: i64) {
        if let Some(members) = self.members.take() {
            for gone in members.difference(active) {
                self.depart(gone, now);
            }
            for back in active.difference(&members) {
                let Some((left, previous)) = self.departed.remove(back) else {
                    continue;
                };
                if let Some(previous) = previous {
                    self.returns.push(Return {
                        broker: back.clone(),
                        back: now,
                        left,
                        previous,
                    });
                }
                self.last_return = Some((back.clone(), now));
            }
        }
        self.members = Some(active.clone());
        self.departed
            .retain(|_, (left, _)| now - *left <= MEMORY_MS);
        self.returns.retain(|r| now - r.back <= MEMORY_MS);
    }

    /// Per broker (in `ids` order, scored `scores`): whether it is held at `now`. A broker back in a rolling
    /// restart is held while it scores below the others' mean and every other broker is at least half a band
    /// (`loadmgrBandShedderSpreadPercentage` ÷ 2) below `loadBalancerBrokerOverloadedThresholdPercentage`: the
    /// others carry its share, and a broker that close could cross the threshold with report noise or the next
    /// restart's bundles before a cycle sees it. The note says which brokers came back in a rolling restart and
    /// why each is held or not.
    pub(super) fn hold(
        &mut self,
        settings: &Settings,
        now: i64,
        ids: &[&str],
        scores: &[f64],
    ) -> (Vec<bool>, Option<String>) {
        let limit = settings
            .loadmgr_band_shedder_rolling_restart_minutes
            .saturating_mul(60_000);
        let slack = settings.shedding_interval().as_millis() as i64;
        let until = self.held(now, limit, slack);
        let mut held: Vec<bool> = ids.iter().map(|id| until.contains_key(*id)).collect();
        if !held.contains(&true) {
            return (held, None);
        }
        let others: Vec<f64> = scores
            .iter()
            .zip(&held)
            .filter(|(_, h)| !**h)
            .map(|(s, _)| *s)
            .collect();
        let hottest = others.iter().copied().fold(0.0, f64::max);
        let ceiling = f64::from(settings.load_balancer_broker_overloaded_threshold_percentage)
            - settings.loadmgr_band_shedder_spread_percentage / 2.0;
        let mean = others.iter().sum::<f64>() / others.len().max(1) as f64;
        let mut notes = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            if !held[i] {
                continue;
            }
            let why = if hottest > ceiling {
                Some(format!(
                    "another broker scores {} > {} (half a band below the overload threshold)",
                    num(hottest),
                    num(ceiling)
                ))
            } else if scores[i] >= mean {
                Some(format!(
                    "it scores {} ≥ the others' mean {}",
                    num(scores[i]),
                    num(mean)
                ))
            } else {
                None
            };
            match why {
                Some(why) => {
                    held[i] = false;
                    notes.push(format!(
                        "{id} is back from a rolling restart but not held: {why}"
                    ));
                }
                None => notes.push(format!(
                    "{id} {} is back from a rolling restart and left to placement for {} s more",
                    num(scores[i]),
                    (until[*id] - now + 999) / 1000
                )),
            }
        }
        (held, Some(notes.join("; ")))
    }

    /// The brokers held at `now`, each with the instant its hold ends (epoch ms): see the module docs.
    /// `limit` ≤ 0 holds none. Returns whose hold is over are forgotten.
    fn held(&mut self, now: i64, limit: i64, slack: i64) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        let members = self.members.as_ref();
        self.returns.retain(|r| {
            let gap = r.left - r.previous;
            if limit <= 0 || gap > limit {
                return false;
            }
            let until = r.back.saturating_add(gap).saturating_add(slack);
            let here = members.is_some_and(|m| m.contains(&r.broker));
            if now >= until || !here {
                return false;
            }
            out.insert(r.broker.clone(), until);
            true
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    /// Brokers a..d restarted one after another: each down a minute, the next leaving 4 minutes after.
    fn wave() -> Restarts {
        let all = ["a", "b", "c", "d"];
        let mut r = Restarts::default();
        r.observe(&set(&all), 0);
        for (k, b) in all.iter().enumerate() {
            let t = 5 * MIN * (k as i64 + 1);
            let without: Vec<&str> = all.iter().copied().filter(|x| x != b).collect();
            r.observe(&set(&without), t);
            r.observe(&set(&all), t + MIN);
        }
        r
    }

    #[test]
    fn the_first_return_of_a_wave_is_not_held_and_the_next_ones_are_for_the_gap() {
        let mut r = wave();
        // a came back at 6 with no return before it; b left at 10, 4 minutes after a came back, and came
        // back at 11: held until 11 + 4 + 1 (slack).
        let mut r2 = r.clone();
        assert!(!r2.held(6 * MIN, 15 * MIN, MIN).contains_key("a"));
        assert_eq!(r2.held(11 * MIN, 15 * MIN, MIN).get("b"), Some(&(16 * MIN)));
        // At 21 (d came back at 21 after leaving at 20; c came back at 16): d is held until 26, b and c no more.
        let held = r.held(21 * MIN, 15 * MIN, MIN);
        assert_eq!(held, [("d".to_string(), 26 * MIN)].into_iter().collect());
        assert!(r.held(26 * MIN, 15 * MIN, MIN).is_empty());
    }

    #[test]
    fn restarts_further_apart_than_the_limit_or_overlapping_are_no_wave() {
        let mut r = wave();
        assert!(r.held(21 * MIN, 3 * MIN, MIN).is_empty(), "gap of 4 > 3");
        assert!(r.held(21 * MIN, 0, MIN).is_empty(), "off");
        // Two brokers down at once: the second left before the first came back.
        let mut o = Restarts::default();
        o.observe(&set(&["a", "b", "c"]), 0);
        o.observe(&set(&["b", "c"]), MIN);
        o.observe(&set(&["c"]), 2 * MIN);
        o.observe(&set(&["a", "c"]), 3 * MIN);
        o.observe(&set(&["a", "b", "c"]), 4 * MIN);
        assert!(o.held(4 * MIN, 15 * MIN, MIN).is_empty());
    }

    #[test]
    fn a_hold_lasts_its_gap_however_long_ago_the_previous_return_was() {
        // a down from 0 to 8; b leaves 14 minutes after a came back and is down 8 minutes: held until
        // 30 + 14 + 1, though a's return is then 37 minutes old.
        let mut r = Restarts::default();
        r.observe(&set(&["a", "b", "c"]), -MIN);
        r.observe(&set(&["b", "c"]), 0);
        r.observe(&set(&["a", "b", "c"]), 8 * MIN);
        r.observe(&set(&["a", "c"]), 22 * MIN);
        r.observe(&set(&["a", "b", "c"]), 30 * MIN);
        for minute in [30, 38, 44] {
            assert_eq!(
                r.held(minute * MIN, 15 * MIN, MIN).get("b"),
                Some(&(45 * MIN)),
                "minute {minute}"
            );
        }
        assert!(r.held(45 * MIN, 15 * MIN, MIN).is_empty());
        assert!(r.returns.is_empty(), "forgotten once over");
    }

    /// A leader that took over at minute 10 from c (gone, named by the records), with the live brokers' starts;
    /// c back at 11.
    fn taken_over_from_c(starts: &[(&str, i64)]) -> Restarts {
        let starts: BTreeMap<String, i64> =
            starts.iter().map(|(b, at)| (b.to_string(), *at)).collect();
        let mut r = Restarts::default();
        r.take_over(&starts, &set(&["c"]), 10 * MIN);
        r.observe(&set(&["a", "b"]), 10 * MIN);
        r.observe(&set(&["a", "b", "c"]), 11 * MIN);
        r
    }

    #[test]
    fn a_new_leader_reads_returns_from_start_times_and_departures_from_the_records() {
        // a started with the cluster at 0, b came back at 6; c, the old leader, left at 10, when this leader
        // took over: c is taken as departed at 10, 4 minutes after b's return, and held when back at 11
        // until 11 + 4 + 1.
        let mut r = taken_over_from_c(&[("a", 0), ("b", 6 * MIN)]);
        assert_eq!(r.held(11 * MIN, 15 * MIN, MIN).get("c"), Some(&(16 * MIN)));
        // The next broker to leave follows c's return.
        r.observe(&set(&["b", "c"]), 15 * MIN);
        r.observe(&set(&["a", "b", "c"]), 16 * MIN);
        assert_eq!(r.held(16 * MIN, 15 * MIN, MIN).get("a"), Some(&(21 * MIN)));
    }

    #[test]
    fn brokers_that_started_with_the_cluster_came_back_from_nothing() {
        // Started within a minute of each other: no return, so a broker gone at the takeover is not held.
        let mut r = taken_over_from_c(&[("a", 0), ("b", 50_000)]);
        assert!(r.held(11 * MIN, 15 * MIN, MIN).is_empty());
        // Brokers without a start time tell nothing: c's return is no return.
        let mut none = taken_over_from_c(&[]);
        assert!(none.held(11 * MIN, 15 * MIN, MIN).is_empty());
        assert!(none.returns.is_empty());
    }

    #[test]
    fn a_broker_gone_again_is_not_held_and_a_new_leader_counts_no_unknown_arrival_as_a_return() {
        let mut r = wave();
        r.observe(&set(&["a", "b", "c"]), 21 * MIN + 10_000);
        assert!(r.held(21 * MIN + 20_000, 15 * MIN, MIN).is_empty());
        // A leader whose first view lacks a broker the records do not name does not count its arrival as a
        // return.
        let mut fresh = Restarts::default();
        fresh.observe(&set(&["a", "b"]), 0);
        fresh.observe(&set(&["a", "b", "c"]), MIN);
        assert!(fresh.returns.is_empty());
    }
}
