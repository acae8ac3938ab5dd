//! What a run measures. Scores are the brokers' true scores (see [`super::model`]) of the brokers that are up,
//! sampled every 5 s of virtual time from the start to the end of the run.
//!
//! * `convergenceSeconds` — the first instant `T` at or after the scenario's `convergeAfterMinutes` such that
//!   the spread (max − min score) stays ≤ 10 points at every sample of `[T, T + 10 min]`, counted in seconds
//!   from `convergeAfterMinutes`; `null` when that never happens before the end.
//! * `moves` — unloads decided by shedding that took effect (a bundle left its owner for a planned
//!   destination). Placements of orphaned or split bundles are counted apart (`orphanAssignments`,
//!   `splitAssignments`).
//! * `pingPongMoves` — shedding moves of a bundle onto a broker that a shedding move took the same bundle off
//!   within the previous hour.
//! * `peakMaxOverMean` / `avgMaxOverMean` — max score ÷ mean score, highest sample and time average (samples
//!   with a mean of 0 are left out).
//! * `avgSpread` — time average of max − min score, points.
//! * `overloadedBrokerMinutes` — Σ over samples of the brokers with a score above 85, × 5 s, in minutes.
//! * `splits` — bundle splits carried out.
//! * `minMoves` — the fewest shedding moves that bring the true scores within 10 points of each other, for the
//!   state just before the first shedding decision from `convergeAfterMinutes` on with no bundle in flight
//!   (or two minutes after it at the latest)
//!   ([`crate::core::optimal`]): the proven minimum when `minMovesExact` (small states), else a lower bound;
//!   `null` when no balanced state exists. `movesOverMinimum` = `moves ÷ minMoves` (`null` when `minMoves` is 0
//!   or null) — an upper estimate of the true ratio when the minimum is a bound. It compares a whole run with
//!   one state, so it means what it says for scenarios disturbed once (a skewed start, a scale-out, a
//!   scale-in); traffic that keeps changing (waves, ramps, restarts later on) needs moves the measure does not
//!   count.
//! * `decisionMicrosPerCycle` — wall-clock time of one shedding cycle (strategy + filters + placement of its
//!   unloads), mean over the cycles, µs. The only field that is not a function of the seed.
//!
//! Extra fields: `peakMaxScore`, `avgMaxScore`, `avgMeanScore`, `cycles`, `orphanAssignments`,
//! `splitAssignments`, `failedUnloads` (planned unloads of bundles that had moved or split by then),
//! `reportsWritten`.

use std::collections::BTreeMap;

use serde::Serialize;

/// Spread at or below which the cluster counts as converged, points.
pub const CONVERGED_SPREAD: f64 = 10.0;
/// How long the spread must stay there, ms.
pub const CONVERGED_FOR_MS: i64 = 10 * 60_000;
/// Score above which a broker is overloaded (Pulsar's default overload threshold), points.
pub const OVERLOADED_SCORE: f64 = 85.0;
/// How far back a shedding move counts as the one a ping-pong move undoes, ms.
pub const PING_PONG_WINDOW_MS: i64 = 60 * 60_000;

/// All metrics of one run (JSON names in the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Metrics {
    /// Seconds to converge, `None` when it never did.
    pub convergence_seconds: Option<f64>,
    /// Unloads decided by shedding that took effect (placements of orphaned or split bundles excluded).
    pub moves: u64,
    /// Shedding moves of a bundle onto a broker a shedding move took it off within [`PING_PONG_WINDOW_MS`].
    pub ping_pong_moves: u64,
    /// Highest max/mean score.
    pub peak_max_over_mean: f64,
    /// Time-averaged max/mean score.
    pub avg_max_over_mean: f64,
    /// Time-averaged spread, points.
    pub avg_spread: f64,
    /// Time brokers spent above [`OVERLOADED_SCORE`], summed over brokers, minutes (5-s samples).
    pub overloaded_broker_minutes: f64,
    /// Bundle splits carried out.
    pub splits: u64,
    /// The fewest moves that balance the state convergence is measured from (a lower bound unless
    /// `min_moves_exact`); `None` when no balanced state exists.
    pub min_moves: Option<u64>,
    /// Whether `min_moves` is the proven minimum.
    pub min_moves_exact: bool,
    /// `moves ÷ min_moves`; `None` when the minimum is 0 or unknown.
    pub moves_over_minimum: Option<f64>,
    /// Mean wall-clock µs per shedding cycle.
    pub decision_micros_per_cycle: f64,
    /// Highest max score, points.
    pub peak_max_score: f64,
    /// Time-averaged max score, points.
    pub avg_max_score: f64,
    /// Time-averaged mean score, points.
    pub avg_mean_score: f64,
    /// Shedding cycles run.
    pub cycles: u64,
    /// Bundles placed after their broker left.
    pub orphan_assignments: u64,
    /// Split children placed after an unload.
    pub split_assignments: u64,
    /// Planned unloads not carried out.
    pub failed_unloads: u64,
    /// Reports written by brokers.
    pub reports_written: u64,
}

/// One shedding move, for ping-pong counting and the charts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveRecord {
    /// When it was decided, ms after the start.
    pub at_ms: i64,
    /// Bundle name.
    pub bundle: String,
    /// Broker it left.
    pub from: String,
    /// Broker it went to.
    pub to: String,
}

/// A report a broker wrote (kept with [`super::RunOptions::trace`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRecord {
    /// When it was written, ms after the start.
    pub at_ms: i64,
    /// The broker.
    pub broker: String,
    /// The host usage it carries.
    pub usage: crate::model::SystemResourceUsage,
    /// Its totals, bundle count and `W`, as the update rule compares them.
    pub figures: crate::core::report_rules::ReportFigures,
}

/// An assignment record the leader wrote (kept with [`super::RunOptions::trace`]): every version, in write
/// order, the children's records of a split included.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordWrite {
    /// When it was written, ms after the start.
    pub at_ms: i64,
    /// The record as written.
    pub record: crate::model::records::BundleAssignment,
}

/// A split carried out (kept with [`super::RunOptions::trace`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitRecord {
    /// When the split batch was written, ms after the start.
    pub at_ms: i64,
    /// The bundle split.
    pub parent: String,
    /// Its children, in hash order.
    pub children: Vec<String>,
}

/// Counts ping-pong moves in a trace sorted by time: a move of bundle X to broker B at `t` counts when a move
/// of X off B happened in `[t − 1 h, t)`.
pub fn count_ping_pong(trace: &[MoveRecord]) -> u64 {
    let mut left: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    let mut count = 0;
    for m in trace {
        if let Some(t) = left.get(&(m.bundle.as_str(), m.to.as_str())) {
            if m.at_ms - t <= PING_PONG_WINDOW_MS && *t < m.at_ms {
                count += 1;
            }
        }
        left.insert((m.bundle.as_str(), m.from.as_str()), m.at_ms);
    }
    count
}

/// Accumulates samples during a run.
#[derive(Debug, Clone)]
pub struct Recorder {
    converge_after_ms: i64,
    samples: u64,
    ratio_samples: u64,
    sum_ratio: f64,
    sum_spread: f64,
    sum_max: f64,
    sum_mean: f64,
    peak_ratio: f64,
    peak_max: f64,
    overloaded_samples: u64,
    sample_ms: i64,
    streak_start: Option<i64>,
    converged_at: Option<i64>,
    /// Shedding moves so far.
    pub moves: Vec<MoveRecord>,
    /// Metrics filled by the engine directly.
    pub counts: Metrics,
    decision_micros: f64,
}

impl Recorder {
    /// A recorder sampling every `sample_ms`, measuring convergence from `converge_after_ms`.
    pub fn new(sample_ms: i64, converge_after_ms: i64) -> Self {
        Self {
            converge_after_ms,
            samples: 0,
            ratio_samples: 0,
            sum_ratio: 0.0,
            sum_spread: 0.0,
            sum_max: 0.0,
            sum_mean: 0.0,
            peak_ratio: 0.0,
            peak_max: 0.0,
            overloaded_samples: 0,
            sample_ms,
            streak_start: None,
            converged_at: None,
            moves: Vec::new(),
            counts: Metrics::default(),
            decision_micros: 0.0,
        }
    }

    /// One sample of the scores of the brokers that are up, at `t` ms after the start.
    pub fn sample(&mut self, t: i64, scores: &[f64]) {
        if scores.is_empty() {
            self.streak_start = None;
            return;
        }
        self.samples += 1;
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let min = scores.iter().copied().fold(f64::INFINITY, f64::min);
        let mean = scores.iter().sum::<f64>() / scores.len() as f64;
        let spread = max - min;
        self.sum_spread += spread;
        self.sum_max += max;
        self.sum_mean += mean;
        self.peak_max = self.peak_max.max(max);
        if mean > 0.0 {
            let ratio = max / mean;
            self.ratio_samples += 1;
            self.sum_ratio += ratio;
            self.peak_ratio = self.peak_ratio.max(ratio);
        }
        self.overloaded_samples += scores.iter().filter(|s| **s > OVERLOADED_SCORE).count() as u64;
        if t >= self.converge_after_ms && self.converged_at.is_none() {
            if spread <= CONVERGED_SPREAD {
                let start = *self.streak_start.get_or_insert(t);
                if t - start >= CONVERGED_FOR_MS {
                    self.converged_at = Some(start);
                }
            } else {
                self.streak_start = None;
            }
        }
    }

    /// A shedding cycle took `micros` of wall-clock time.
    pub fn cycle(&mut self, micros: f64) {
        self.counts.cycles += 1;
        self.decision_micros += micros;
    }

    /// The metrics.
    pub fn finish(&self) -> Metrics {
        let n = self.samples.max(1) as f64;
        let mut m = self.counts.clone();
        m.convergence_seconds = self
            .converged_at
            .map(|t| (t - self.converge_after_ms) as f64 / 1000.0);
        m.moves = self.moves.len() as u64;
        m.ping_pong_moves = count_ping_pong(&self.moves);
        m.moves_over_minimum = m
            .min_moves
            .filter(|n| *n > 0)
            .map(|n| m.moves as f64 / n as f64);
        m.peak_max_over_mean = self.peak_ratio;
        m.avg_max_over_mean = self.sum_ratio / self.ratio_samples.max(1) as f64;
        m.avg_spread = self.sum_spread / n;
        m.avg_max_score = self.sum_max / n;
        m.avg_mean_score = self.sum_mean / n;
        m.peak_max_score = self.peak_max;
        m.overloaded_broker_minutes =
            self.overloaded_samples as f64 * self.sample_ms as f64 / 60_000.0;
        m.decision_micros_per_cycle = if m.cycles > 0 {
            self.decision_micros / m.cycles as f64
        } else {
            0.0
        };
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mv(min: i64, bundle: &str, from: &str, to: &str) -> MoveRecord {
        MoveRecord {
            at_ms: min * 60_000,
            bundle: bundle.into(),
            from: from.into(),
            to: to.into(),
        }
    }

    #[test]
    fn ping_pong_on_a_crafted_trace() {
        let trace = vec![
            mv(0, "x", "a", "b"),
            mv(10, "y", "a", "c"),
            // x back to a after 40 min: ping-pong.
            mv(40, "x", "b", "a"),
            // y to b: it never left b — not ping-pong.
            mv(50, "y", "c", "b"),
            // y back to c 70 min after it left c at minute 50? It left c at 50, so 20 min: ping-pong.
            mv(70, "y", "b", "c"),
            // x back to b: it left b at minute 40, 61 min ago — outside the hour.
            mv(101, "x", "a", "b"),
            // z moves around a triangle: never back to a broker it left.
            mv(0, "z", "a", "b"),
            mv(1, "z", "b", "c"),
            mv(2, "z", "c", "d"),
        ];
        let mut sorted = trace.clone();
        sorted.sort_by_key(|m| m.at_ms);
        assert_eq!(count_ping_pong(&sorted), 2);
        // Exactly one hour still counts.
        let edge = vec![mv(0, "x", "a", "b"), mv(60, "x", "b", "a")];
        assert_eq!(count_ping_pong(&edge), 1);
    }

    #[test]
    fn convergence_needs_ten_quiet_minutes_after_the_start_mark() {
        let mut r = Recorder::new(5_000, 60_000);
        let mut t = 0;
        // Balanced before the mark does not count; then 2 minutes of imbalance; then quiet from minute 3.
        while t <= 30 * 60_000 {
            let spread = if (60_000..180_000).contains(&t) {
                30.0
            } else {
                4.0
            };
            r.sample(t, &[50.0, 50.0 + spread]);
            t += 5_000;
        }
        let m = r.finish();
        assert_eq!(m.convergence_seconds, Some(120.0));
        assert!((m.peak_max_over_mean - 80.0 / 65.0).abs() < 1e-12);
        assert_eq!(m.overloaded_broker_minutes, 0.0);

        let mut late = Recorder::new(5_000, 0);
        for k in 0..300 {
            late.sample(k * 5_000, &[10.0, if k == 99 { 30.0 } else { 12.0 }]);
        }
        assert_eq!(late.finish().convergence_seconds, Some(500.0));
        let mut short = Recorder::new(5_000, 0);
        for k in 0..100 {
            short.sample(k * 5_000, &[10.0, 90.0]);
        }
        let m = short.finish();
        assert_eq!(m.convergence_seconds, None);
        assert!((m.overloaded_broker_minutes - 100.0 * 5.0 / 60.0).abs() < 1e-9);
        assert!((m.avg_spread - 80.0).abs() < 1e-12);
    }
}
