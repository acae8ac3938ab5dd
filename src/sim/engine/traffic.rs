//! The traffic of a run: namespace waves, spikes, ramps of topic rates, the timeline's events, and the
//! true scores sampled for the metrics and charts.

use crate::runtime::synthetic::Rates;
use crate::sim::model::score;
use crate::sim::world::WorldEvent;

use super::{Ev, Owner, Sim};

/// Topic rates ramped towards a factor in steps.
pub(super) struct Ramp {
    topics: Vec<usize>,
    from: Vec<f64>,
    factor: f64,
    steps: u32,
}

const RAMP_STEP_MS: i64 = 30_000;

impl<'w> Sim<'w> {
    /// Every namespace's wave multiplier at `t` (1 without a wave), computed once per instant.
    pub(super) fn waves(&self, t: i64) -> std::cell::Ref<'_, [f64]> {
        {
            let mut cache = self.waves.borrow_mut();
            if cache.0 != t || cache.1.len() != self.world.namespaces.len() {
                let (at, waves) = &mut *cache;
                *at = t;
                waves.clear();
                waves.extend(
                    self.world
                        .namespaces
                        .iter()
                        .map(|n| n.wave.map_or(1.0, |w| w.at(t))),
                );
            }
        }
        std::cell::Ref::map(self.waves.borrow(), |(_, w)| w.as_slice())
    }

    pub(super) fn wave(&self, ns: usize, t: i64) -> f64 {
        self.waves(t)[ns]
    }

    pub(super) fn broker_rates(&self, b: usize, t: i64) -> Rates {
        let br = &self.brokers[b];
        if self.world.namespaces.iter().all(|n| n.wave.is_none()) {
            return br.total.clamped();
        }
        let waves = self.waves(t);
        let mut r = Rates::default();
        for (ns, c) in br.ns_count.iter().enumerate() {
            if *c > 0 {
                r.add_scaled(&br.ns_rates[ns], waves[ns]);
            }
        }
        r.clamped()
    }

    pub(super) fn spike(&self, b: usize, t: i64) -> f64 {
        self.brokers[b]
            .spikes
            .iter()
            .filter(|s| s.start_ms <= t && t < s.end_ms)
            .map(|s| s.points)
            .sum()
    }

    pub(super) fn true_score(&self, b: usize, t: i64) -> f64 {
        let u = self.world.model.usage(
            &self.world.brokers[b].capacity,
            &self.broker_rates(b, t),
            self.spike(b, t),
            0.0,
        );
        score(&u, &self.weights4)
    }

    pub(super) fn set_topic_mult(&mut self, ti: usize, m: f64) {
        let old = self.topic_mult[ti];
        if old == m {
            return;
        }
        self.topic_mult[ti] = m;
        let base = self.world.topics[ti].base;
        let bi = self.topic_bundle[ti];
        let delta = base.scaled(m - old);
        let b = &mut self.bundles[bi];
        b.rates.add_scaled(&delta, 1.0);
        if let Owner::On(o) = b.owner {
            let ns = b.ns;
            let br = &mut self.brokers[o];
            br.ns_rates[ns].add_scaled(&delta, 1.0);
            br.total.add_scaled(&delta, 1.0);
        }
    }

    pub(super) fn ramp_step(&mut self, r: usize, k: u32, t: i64) {
        let (steps, factor) = (self.ramps[r].steps, self.ramps[r].factor);
        let topics = self.ramps[r].topics.clone();
        for (j, ti) in topics.iter().enumerate() {
            let from = self.ramps[r].from[j];
            self.set_topic_mult(*ti, from + (factor - from) * k as f64 / steps as f64);
        }
        if k < steps {
            self.push(t + RAMP_STEP_MS, Ev::RampStep(r, k + 1));
        }
    }

    pub(super) fn timeline(&mut self, i: usize, t: i64) {
        match &self.world.events[i].1 {
            WorldEvent::Stop { broker, graceful } => self.leave(*broker, t, *graceful),
            WorldEvent::Restart {
                broker,
                down_ms,
                graceful,
            } => {
                let (b, down, graceful) = (*broker, *down_ms, *graceful);
                if self.brokers[b].up {
                    self.leave(b, t, graceful);
                    // A crashed broker's new session starts once the old one expired: its deregistration
                    // (scheduled by `leave`, so it runs first at the same instant) comes before its return.
                    let back = if graceful {
                        down
                    } else {
                        down.max(self.settings.metadata_store_session_timeout_millis.max(0))
                    };
                    self.push(t + back, Ev::Join(b));
                }
            }
            WorldEvent::Ramp {
                topics,
                factor,
                ramp_ms,
            } => {
                let steps = (ramp_ms / RAMP_STEP_MS).max(1) as u32;
                let from = topics.iter().map(|t| self.topic_mult[*t]).collect();
                self.ramps.push(Ramp {
                    topics: topics.clone(),
                    from,
                    factor: *factor,
                    steps,
                });
                let r = self.ramps.len() - 1;
                if *ramp_ms == 0 {
                    self.ramp_step(r, 1, t);
                } else {
                    self.push(t + RAMP_STEP_MS, Ev::RampStep(r, 1));
                }
            }
        }
    }

    pub(super) fn sample(&mut self, t: i64) {
        let mut scores = Vec::with_capacity(self.brokers.len());
        let chart = t % self.chart_ms == 0;
        if chart {
            self.series.minutes.push(t as f64 / 60_000.0);
        }
        for b in 0..self.brokers.len() {
            let s = if self.brokers[b].up {
                let s = self.true_score(b, t);
                scores.push(s);
                Some(s as f32)
            } else {
                None
            };
            if chart {
                self.series.scores[b].push(s);
            }
        }
        self.recorder.sample(t, &scores);
    }

    /// Once, just before the first shedding decision from `convergeAfterMinutes` on with no bundle in flight (or
    /// the first two minutes after it at the latest): the fewest moves that balance that state.
    pub(super) fn measure_min_moves(&mut self, t: i64) {
        let from = self.world.converge_after_ms;
        if self.min_moves_measured || t < from {
            return;
        }
        let settled = self
            .bundles
            .iter()
            .filter(|b| b.live)
            .all(|b| matches!(b.owner, Owner::On(_)));
        if !settled && t < from + 120_000 {
            return;
        }
        self.min_moves_measured = true;
        let m = self.min_moves(t);
        self.recorder.counts.min_moves = m.map(|m| m.moves);
        self.recorder.counts.min_moves_exact = m.is_some_and(|m| m.exact);
    }
}
