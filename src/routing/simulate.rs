//! A deterministic, virtual-time traffic simulation comparing the load-aware router with a plain shuffle.
//!
//! # Model
//!
//! One sender on the [`SimSpec::source`] worker emits messages at the [`Traffic`] rate (a base rate with
//! periodic bursts, ±10 % random variation per tick). Every message goes to the target the router chooses.
//! Each target has a receive queue of `queueCapacity` messages and processes `capacity` messages per second.
//! A message that finds the queue full (or other messages already waiting) waits in a per-target backlog —
//! the connection's pending messages for a remote target, the sender's overflow for a same-worker target —
//! and counts as *delayed*; when the backlog holds [`SimOptions::backlog_limit`] messages further ones are
//! *dropped*. Backlogs drain into the queue as it empties.
//!
//! The load-aware router is refreshed as in a Storm worker: at time 0, then every `refresh_period` plus
//! jitter. Same-worker targets report their queue fraction fresh at each refresh; other targets' queue
//! fractions are reported every [`SimOptions::remote_report_period`] (5 s, like Storm's load push) while the
//! pending part (the backlog) is fresh. The shuffle run uses the same router with `disable_load_aware`.
//!
//! Time advances in fixed ticks ([`SimOptions::tick`], 10 ms); nothing sleeps. Both runs see the same
//! traffic, and the whole result depends only on the spec, the duration and the seed.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{
    Load, LoadAwareRouter, LoadMapping, Location, RouterConfig, RoutingError, Scope, TargetId,
    TargetPlacement, Topology,
};

/// The longest simulated duration accepted.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

const TRAFFIC_SALT: u64 = 0x3c6e_f372_fe94_f82b;
const JITTER_SALT: u64 = 0xa54f_f53a_5f1d_36f1;

/// What to simulate: where the sender runs, the targets, and the traffic. This is also the format of the
/// `--targets` file of `loadmgr route simulate` (camelCase keys; unknown keys are rejected).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimSpec {
    /// The sender's location.
    pub source: Location,
    /// The targets (at least one, ids unique).
    pub targets: Vec<SimTarget>,
    /// The offered traffic; defaults to [`Traffic::default`].
    #[serde(default)]
    pub traffic: Traffic,
}

/// One simulated target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimTarget {
    /// Target id (unique).
    pub id: u32,
    /// Host; with `worker`, the target's location. Leave both out for a target whose placement is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Worker process on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// Rack; unknown racks are the default rack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// Messages per second the target processes (> 0).
    pub capacity: f64,
    /// Receive-queue size in messages (default 1024).
    #[serde(default = "default_queue_capacity")]
    pub queue_capacity: u32,
}

fn default_queue_capacity() -> u32 {
    1024
}

/// Offered traffic: `baseRate` msg/s, and `burstRate` msg/s during bursts of `burstSecs` seconds that start
/// at `firstBurstSecs` and repeat every `burstEverySecs` seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Traffic {
    /// Rate outside bursts, msg/s.
    pub base_rate: f64,
    /// Rate during bursts, msg/s.
    pub burst_rate: f64,
    /// Start of the first burst, s.
    pub first_burst_secs: f64,
    /// Period of bursts, s.
    pub burst_every_secs: f64,
    /// Length of each burst, s.
    pub burst_secs: f64,
}

impl Default for Traffic {
    fn default() -> Self {
        Self {
            base_rate: 3000.0,
            burst_rate: 12_000.0,
            first_burst_secs: 10.0,
            burst_every_secs: 20.0,
            burst_secs: 5.0,
        }
    }
}

impl Traffic {
    /// The offered rate at `t` seconds, msg/s.
    pub fn rate_at(&self, t: f64) -> f64 {
        let since = t - self.first_burst_secs;
        if since >= 0.0 && since % self.burst_every_secs < self.burst_secs {
            self.burst_rate
        } else {
            self.base_rate
        }
    }
}

impl SimSpec {
    /// The built-in topology: the sender on `h1`/`w1` in rack `r1`; two targets on the sender's worker, two
    /// on another worker of `h1`, four on hosts `h2`/`h3` of rack `r1`, four on hosts `h4`/`h5` of rack `r2`;
    /// each processes 2000 msg/s with a 1024-message queue. Traffic is [`Traffic::default`]: 3000 msg/s (what
    /// the sender's own worker can absorb) with 5 s bursts of 12 000 msg/s every 20 s from 10 s on (more than
    /// the whole host can absorb).
    pub fn builtin() -> Self {
        let place = |id: u32, host: &str, worker: &str, rack: &str| SimTarget {
            id,
            host: Some(host.to_string()),
            worker: Some(worker.to_string()),
            rack: Some(rack.to_string()),
            capacity: 2000.0,
            queue_capacity: default_queue_capacity(),
        };
        Self {
            source: Location::new("h1", "w1", "r1"),
            targets: vec![
                place(1, "h1", "w1", "r1"),
                place(2, "h1", "w1", "r1"),
                place(3, "h1", "w2", "r1"),
                place(4, "h1", "w2", "r1"),
                place(5, "h2", "w1", "r1"),
                place(6, "h2", "w1", "r1"),
                place(7, "h3", "w1", "r1"),
                place(8, "h3", "w1", "r1"),
                place(9, "h4", "w1", "r2"),
                place(10, "h4", "w1", "r2"),
                place(11, "h5", "w1", "r2"),
                place(12, "h5", "w1", "r2"),
            ],
            traffic: Traffic::default(),
        }
    }

    /// The router topology of this spec.
    pub fn topology(&self) -> Topology {
        let targets = self
            .targets
            .iter()
            .map(|t| TargetPlacement {
                id: TargetId(t.id),
                location: match (&t.host, &t.worker) {
                    (Some(host), Some(worker)) => Some(Location {
                        host: host.clone(),
                        worker: worker.clone(),
                        rack: t.rack.clone(),
                    }),
                    _ => None,
                },
            })
            .collect();
        Topology::new(self.source.clone(), targets)
    }

    /// Checks numbers and placements; the router checks ids.
    pub fn validate(&self) -> Result<(), RoutingError> {
        let bad = |m: String| Err(RoutingError::InvalidSimulation(m));
        for t in &self.targets {
            if t.host.is_some() != t.worker.is_some() {
                return bad(format!(
                    "target {}: give both host and worker, or neither",
                    t.id
                ));
            }
            if t.host.is_none() && t.rack.is_some() {
                return bad(format!("target {}: a rack without host and worker", t.id));
            }
            if !(t.capacity.is_finite() && t.capacity > 0.0) {
                return bad(format!(
                    "target {}: capacity must be a positive number",
                    t.id
                ));
            }
            if t.queue_capacity == 0 {
                return bad(format!("target {}: queueCapacity must be at least 1", t.id));
            }
        }
        let tr = &self.traffic;
        let rates_ok = [tr.base_rate, tr.burst_rate]
            .iter()
            .all(|r| r.is_finite() && *r >= 0.0 && *r <= 10_000_000.0);
        if !rates_ok {
            return bad("traffic rates must be between 0 and 10,000,000 msg/s".to_string());
        }
        let times_ok = tr.first_burst_secs.is_finite()
            && tr.burst_every_secs.is_finite()
            && tr.burst_secs.is_finite()
            && tr.first_burst_secs >= 0.0
            && tr.burst_every_secs > 0.0
            && tr.burst_secs >= 0.0;
        if !times_ok {
            return bad(
                "burst timing must be finite, with burstEverySecs > 0 and the others >= 0"
                    .to_string(),
            );
        }
        Ok(())
    }
}

/// How to run a simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct SimOptions {
    /// Simulated time (at most [`MAX_DURATION`]).
    pub duration: Duration,
    /// Seed of the traffic variation, the ring shuffles and the refresh jitter.
    pub seed: u64,
    /// Length of one simulation step, 1 ms ..= 1 s (default 10 ms).
    pub tick: Duration,
    /// Router settings for the load-aware run (its seed is replaced by `seed`).
    pub router: RouterConfig,
    /// How often other workers report their queue fractions (default 5 s).
    pub remote_report_period: Duration,
    /// Messages a target's backlog holds before further ones are dropped (default 4096).
    pub backlog_limit: u32,
}

impl SimOptions {
    /// Defaults for everything but the duration and the seed.
    pub fn new(duration: Duration, seed: u64) -> Self {
        Self {
            duration,
            seed,
            tick: Duration::from_millis(10),
            router: RouterConfig::default(),
            remote_report_period: Duration::from_secs(5),
            backlog_limit: 4096,
        }
    }
}

/// The outcome of [`simulate`]. Serialises with stable camelCase keys in this order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimReport {
    /// The seed used.
    pub seed: u64,
    /// Simulated seconds.
    pub duration_secs: f64,
    /// Number of targets.
    pub targets: usize,
    /// Targets per scope relative to the sender.
    pub targets_per_scope: ScopeCounts,
    /// The traffic offered to both runs.
    pub traffic: Traffic,
    /// The load-aware router.
    pub load_aware: ModeReport,
    /// The plain shuffle.
    pub shuffle: ModeReport,
}

/// Targets per scope (exact classification, not cumulative).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeCounts {
    /// On the sender's worker.
    pub worker_local: usize,
    /// On the sender's host, other workers.
    pub host_local: usize,
    /// On the sender's rack, other hosts.
    pub rack_local: usize,
    /// Elsewhere or unknown.
    pub everything: usize,
}

/// Seconds spent in each scope.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeSeconds {
    /// In the worker-local scope.
    pub worker_local: f64,
    /// In the host-local scope.
    pub host_local: f64,
    /// In the rack-local scope.
    pub rack_local: f64,
    /// In the everything scope.
    pub everything: f64,
}

/// Results of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModeReport {
    /// Messages sent.
    pub messages: u64,
    /// Share of messages sent to targets on the sender's worker (0..=1).
    pub worker_local_share: f64,
    /// Share sent to targets on the sender's host, its worker included (0..=1).
    pub host_local_share: f64,
    /// Share sent to targets on the sender's rack, its host included (0..=1).
    pub rack_local_share: f64,
    /// Largest receive-queue fill fraction seen on any target at the end of a tick (0..=1).
    pub peak_queue_fill: f64,
    /// Messages that had to wait in a backlog.
    pub delayed: u64,
    /// Messages dropped because the backlog was full.
    pub dropped: u64,
    /// Messages processed by the targets by the end.
    pub processed: u64,
    /// Router refreshes done (0 for the shuffle).
    pub refreshes: u64,
    /// Seconds spent in each scope.
    pub seconds_in_scope: ScopeSeconds,
    /// Every scope change, in time order.
    pub scope_changes: Vec<ScopeChange>,
}

/// One scope change of the load-aware router.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeChange {
    /// Simulated time of the refresh, s.
    pub at_secs: f64,
    /// Scope before.
    pub from: Scope,
    /// Scope after.
    pub to: Scope,
    /// Mean load of the old scope.
    pub scope_average: f64,
    /// Mean load of the old scope's narrower scope, if any.
    pub narrower_average: Option<f64>,
}

/// Runs the spec twice — load-aware, then plain shuffle — over the same traffic.
///
/// # Errors
///
/// [`RoutingError::InvalidSimulation`] for a bad spec, tick or duration; the router's errors for bad ids or
/// bounds.
pub fn simulate(spec: &SimSpec, options: &SimOptions) -> Result<SimReport, RoutingError> {
    spec.validate()?;
    if options.duration.is_zero() || options.duration > MAX_DURATION {
        return Err(RoutingError::InvalidSimulation(format!(
            "duration must be more than 0 and at most {} s",
            MAX_DURATION.as_secs()
        )));
    }
    if options.tick < Duration::from_millis(1) || options.tick > Duration::from_secs(1) {
        return Err(RoutingError::InvalidSimulation(
            "tick must be between 1 ms and 1 s".to_string(),
        ));
    }
    let topology = spec.topology();
    let mut per_scope = ScopeCounts::default();
    for (_, scope) in topology.scopes() {
        match scope {
            Scope::WorkerLocal => per_scope.worker_local += 1,
            Scope::HostLocal => per_scope.host_local += 1,
            Scope::RackLocal => per_scope.rack_local += 1,
            Scope::Everything => per_scope.everything += 1,
        }
    }
    Ok(SimReport {
        seed: options.seed,
        duration_secs: options.duration.as_secs_f64(),
        targets: spec.targets.len(),
        targets_per_scope: per_scope,
        traffic: spec.traffic.clone(),
        load_aware: run(spec, &topology, options, true)?,
        shuffle: run(spec, &topology, options, false)?,
    })
}

struct TargetState {
    scope: Scope,
    local: bool,
    capacity_per_tick: f64,
    queue_capacity: u32,
    queue: u32,
    backlog: u32,
    service_carry: f64,
    reported_fill: f64,
}

impl TargetState {
    fn fill(&self) -> f64 {
        self.queue as f64 / self.queue_capacity as f64
    }
}

fn run(
    spec: &SimSpec,
    topology: &Topology,
    options: &SimOptions,
    load_aware: bool,
) -> Result<ModeReport, RoutingError> {
    let config = RouterConfig {
        disable_load_aware: !load_aware,
        seed: Some(options.seed),
        ..options.router.clone()
    };
    let router = LoadAwareRouter::new(topology, config)?;
    let schedule = router.config().schedule();
    let dt = options.tick.as_secs_f64();
    let mut targets: Vec<TargetState> = spec
        .targets
        .iter()
        .zip(topology.scopes())
        .map(|(t, (_, scope))| TargetState {
            scope,
            local: scope == Scope::WorkerLocal,
            capacity_per_tick: t.capacity * dt,
            queue_capacity: t.queue_capacity,
            queue: 0,
            backlog: 0,
            service_carry: 0.0,
            reported_fill: 0.0,
        })
        .collect();
    let index: HashMap<TargetId, usize> = spec
        .targets
        .iter()
        .enumerate()
        .map(|(i, t)| (TargetId(t.id), i))
        .collect();

    let mut traffic_rng = StdRng::seed_from_u64(options.seed ^ TRAFFIC_SALT);
    let mut jitter_rng = StdRng::seed_from_u64(options.seed ^ JITTER_SALT);
    let loads = LoadMapping::new();
    let ticks = (options.duration.as_nanos() / options.tick.as_nanos()).max(1) as u64;
    let mut next_refresh = Duration::ZERO;
    let mut next_remote_report = Duration::ZERO;
    let mut arrival_carry = 0.0;
    let mut sent_by_scope = [0u64; 4];
    let mut seconds_by_scope = [0f64; 4];
    let mut report = ModeReport {
        messages: 0,
        worker_local_share: 0.0,
        host_local_share: 0.0,
        rack_local_share: 0.0,
        peak_queue_fill: 0.0,
        delayed: 0,
        dropped: 0,
        processed: 0,
        refreshes: 0,
        seconds_in_scope: ScopeSeconds::default(),
        scope_changes: Vec::new(),
    };

    for tick in 0..ticks {
        let now = options.tick * tick as u32;
        let t = now.as_secs_f64();
        if now >= next_remote_report {
            for s in targets.iter_mut().filter(|s| !s.local) {
                s.reported_fill = s.fill();
            }
            next_remote_report += options.remote_report_period;
        }
        if load_aware && now >= next_refresh {
            loads.set_local(
                spec.targets
                    .iter()
                    .zip(&targets)
                    .filter(|(_, s)| s.local)
                    .map(|(t, s)| (TargetId(t.id), s.fill())),
            );
            loads.set_remote(
                spec.targets
                    .iter()
                    .zip(&targets)
                    .filter(|(_, s)| !s.local)
                    .map(|(t, s)| {
                        (
                            TargetId(t.id),
                            Load::remote(s.reported_fill, s.backlog as u64),
                        )
                    }),
            );
            let r = router.refresh(&loads);
            report.refreshes += 1;
            if r.scope_changed() {
                report.scope_changes.push(ScopeChange {
                    at_secs: round(t, 3),
                    from: r.from,
                    to: r.to,
                    scope_average: round(r.scope_average, 4),
                    narrower_average: r.narrower_average.map(|a| round(a, 4)),
                });
            }
            next_refresh += schedule.next_delay(&mut jitter_rng);
        }
        seconds_by_scope[router.scope().index()] += dt;

        // Arrivals: the offered rate, ±10 % per tick.
        let variation = traffic_rng.random_range(0.9..1.1);
        let expected = spec.traffic.rate_at(t) * dt * variation + arrival_carry;
        let arrivals = expected.floor();
        arrival_carry = expected - arrivals;
        for _ in 0..arrivals as u64 {
            let i = index[&router.choose()];
            let s = &mut targets[i];
            sent_by_scope[s.scope.index()] += 1;
            if s.backlog == 0 && s.queue < s.queue_capacity {
                s.queue += 1;
            } else if s.backlog < options.backlog_limit {
                s.backlog += 1;
                report.delayed += 1;
            } else {
                report.dropped += 1;
            }
        }

        // Service, then backlogs drain into the freed queue slots. Idle capacity is not banked.
        for s in &mut targets {
            let budget = s.capacity_per_tick + s.service_carry;
            let whole = budget.floor();
            s.service_carry = budget - whole;
            let done = (whole as u64).min(s.queue as u64) as u32;
            s.queue -= done;
            report.processed += done as u64;
            let moved = s.backlog.min(s.queue_capacity - s.queue);
            s.queue += moved;
            s.backlog -= moved;
            report.peak_queue_fill = report.peak_queue_fill.max(s.fill());
        }
    }

    let sent: u64 = sent_by_scope.iter().sum();
    let share = |upto: usize| {
        if sent == 0 {
            0.0
        } else {
            round(
                sent_by_scope[..=upto].iter().sum::<u64>() as f64 / sent as f64,
                4,
            )
        }
    };
    report.messages = sent;
    report.worker_local_share = share(0);
    report.host_local_share = share(1);
    report.rack_local_share = share(2);
    report.peak_queue_fill = round(report.peak_queue_fill, 4);
    report.seconds_in_scope = ScopeSeconds {
        worker_local: round(seconds_by_scope[0], 2),
        host_local: round(seconds_by_scope[1], 2),
        rack_local: round(seconds_by_scope[2], 2),
        everything: round(seconds_by_scope[3], 2),
    };
    Ok(report)
}

fn round(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

impl SimReport {
    /// A human-readable table of both runs followed by the load-aware scope changes.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let p = &self.targets_per_scope;
        let _ = writeln!(
            out,
            "route simulate: {} targets ({} worker-local, {} host-local, {} rack-local, {} elsewhere), {} s virtual, seed {}",
            self.targets, p.worker_local, p.host_local, p.rack_local, p.everything, self.duration_secs, self.seed
        );
        let tr = &self.traffic;
        let _ = writeln!(
            out,
            "traffic: {} msg/s, bursts of {} msg/s for {} s every {} s from {} s",
            tr.base_rate, tr.burst_rate, tr.burst_secs, tr.burst_every_secs, tr.first_burst_secs
        );
        let _ = writeln!(out);
        let (a, s) = (&self.load_aware, &self.shuffle);
        let _ = writeln!(out, "{:<28}{:>14}{:>14}", "", "load-aware", "shuffle");
        let pct = |v: f64| format!("{:.1} %", v * 100.0);
        let rows: [(&str, String, String); 8] = [
            (
                "messages sent",
                a.messages.to_string(),
                s.messages.to_string(),
            ),
            (
                "kept worker-local",
                pct(a.worker_local_share),
                pct(s.worker_local_share),
            ),
            (
                "kept host-local",
                pct(a.host_local_share),
                pct(s.host_local_share),
            ),
            (
                "kept rack-local",
                pct(a.rack_local_share),
                pct(s.rack_local_share),
            ),
            (
                "peak queue fill",
                pct(a.peak_queue_fill),
                pct(s.peak_queue_fill),
            ),
            (
                "messages delayed",
                a.delayed.to_string(),
                s.delayed.to_string(),
            ),
            (
                "messages dropped",
                a.dropped.to_string(),
                s.dropped.to_string(),
            ),
            (
                "scope changes",
                a.scope_changes.len().to_string(),
                s.scope_changes.len().to_string(),
            ),
        ];
        for (label, x, y) in rows {
            let _ = writeln!(out, "{label:<28}{x:>14}{y:>14}");
        }
        let t = &a.seconds_in_scope;
        let _ = writeln!(
            out,
            "\nload-aware time in scope: worker-local {} s, host-local {} s, rack-local {} s, everything {} s",
            t.worker_local, t.host_local, t.rack_local, t.everything
        );
        if a.scope_changes.is_empty() {
            let _ = writeln!(out, "no scope change");
        } else {
            let _ = writeln!(out, "scope changes (load-aware):");
            for c in &a.scope_changes {
                let narrower = c
                    .narrower_average
                    .map_or(String::new(), |n| format!(", narrower mean {n:.3}"));
                let _ = writeln!(
                    out,
                    "  {:>9.3} s  {:<12} -> {:<12} (scope mean {:.3}{narrower})",
                    c.at_secs,
                    c.from.name(),
                    c.to.name(),
                    c.scope_average
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_builtin(secs: u64, seed: u64) -> SimReport {
        simulate(
            &SimSpec::builtin(),
            &SimOptions::new(Duration::from_secs(secs), seed),
        )
        .unwrap()
    }

    #[test]
    fn the_same_seed_gives_the_same_report() {
        let a = run_builtin(40, 5);
        let b = run_builtin(40, 5);
        assert_eq!(a, b);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        let c = run_builtin(40, 6);
        assert_ne!(a.load_aware, c.load_aware, "another seed, another run");
    }

    #[test]
    fn load_awareness_keeps_traffic_local_and_widens_during_bursts() {
        let r = run_builtin(60, 1);
        let (a, s) = (&r.load_aware, &r.shuffle);
        assert_eq!(a.messages, s.messages, "both runs see the same traffic");
        assert!(a.messages > 250_000);
        // Shuffle: shares follow the target counts (2, 4 and 8 of 12).
        assert!((s.worker_local_share - 2.0 / 12.0).abs() < 0.01);
        assert!((s.host_local_share - 4.0 / 12.0).abs() < 0.01);
        assert!((s.rack_local_share - 8.0 / 12.0).abs() < 0.01);
        assert!(s.scope_changes.is_empty() && s.refreshes == 0);
        assert_eq!(
            s.dropped, 0,
            "12 000 msg/s spread over 24 000 msg/s of capacity"
        );
        // Load-aware: most traffic stays on the worker outside bursts.
        assert!(a.worker_local_share > 0.5, "{a:?}");
        assert!(a.host_local_share > a.worker_local_share);
        assert!(
            a.rack_local_share > 0.95,
            "the rack scope absorbs the bursts: {a:?}"
        );
        assert!(a.peak_queue_fill > s.peak_queue_fill);
        assert!(
            a.delayed > s.delayed,
            "bang-bang control reacts one refresh late"
        );
        // Three bursts (10, 30, 50 s): each widens the scope and it narrows again afterwards.
        let widenings: Vec<f64> = a
            .scope_changes
            .iter()
            .filter(|c| c.to > c.from)
            .map(|c| c.at_secs)
            .collect();
        for burst in [10.0, 30.0, 50.0] {
            assert!(
                widenings.iter().any(|t| *t >= burst && *t < burst + 5.0),
                "no widening during the burst at {burst} s: {widenings:?}"
            );
        }
        assert!(a.scope_changes.iter().any(|c| c.to < c.from));
        assert!(a
            .scope_changes
            .iter()
            .all(|c| c.to.index().abs_diff(c.from.index()) == 1));
        let total = a.seconds_in_scope.worker_local
            + a.seconds_in_scope.host_local
            + a.seconds_in_scope.rack_local
            + a.seconds_in_scope.everything;
        assert!((total - 60.0).abs() < 0.05, "{total}");
        assert_eq!(
            a.seconds_in_scope.everything, 0.0,
            "never needed the other rack"
        );
        assert!(a.refreshes >= 40 && a.refreshes <= 61, "{}", a.refreshes);
    }

    #[test]
    fn json_keys_are_camel_case_and_stable() {
        let v = serde_json::to_value(run_builtin(5, 1)).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut expected = vec![
            "seed",
            "durationSecs",
            "targets",
            "targetsPerScope",
            "traffic",
            "loadAware",
            "shuffle",
        ];
        expected.sort_unstable();
        assert_eq!(keys, expected);
        let mode: Vec<&str> = v["loadAware"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = vec![
            "messages",
            "workerLocalShare",
            "hostLocalShare",
            "rackLocalShare",
            "peakQueueFill",
            "delayed",
            "dropped",
            "processed",
            "refreshes",
            "secondsInScope",
            "scopeChanges",
        ];
        expected.sort_unstable();
        assert_eq!(mode, expected);
        assert_eq!(v["traffic"]["burstEverySecs"], 20.0);
    }

    #[test]
    fn spec_files_parse_and_bad_specs_are_rejected() {
        let text = r#"{
            "source": {"host": "h1", "worker": "w1", "rack": "r1"},
            "targets": [
                {"id": 1, "host": "h1", "worker": "w1", "capacity": 500},
                {"id": 2, "capacity": 800, "queueCapacity": 64}
            ]
        }"#;
        let spec: SimSpec = serde_json::from_str(text).unwrap();
        assert_eq!(spec.traffic, Traffic::default());
        assert_eq!(spec.targets[0].queue_capacity, 1024);
        assert_eq!(spec.topology().targets[1].location, None);
        let r = simulate(&spec, &SimOptions::new(Duration::from_secs(20), 2)).unwrap();
        assert_eq!(r.targets_per_scope.worker_local, 1);
        assert_eq!(r.targets_per_scope.everything, 1);
        assert!(
            r.load_aware.dropped > 0,
            "3000 msg/s into 1300 msg/s of capacity"
        );

        let typo = r#"{"source": {"host": "h", "worker": "w"}, "targets": [], "trafic": {}}"#;
        assert!(serde_json::from_str::<SimSpec>(typo).is_err());

        let mut bad = spec.clone();
        bad.targets[0].capacity = 0.0;
        assert!(matches!(
            simulate(&bad, &SimOptions::new(Duration::from_secs(1), 1)),
            Err(RoutingError::InvalidSimulation(_))
        ));
        let mut half_placed = spec.clone();
        half_placed.targets[1].host = Some("h9".to_string());
        assert!(half_placed.validate().is_err());
        let mut dup = spec.clone();
        dup.targets[1].id = 1;
        assert_eq!(
            simulate(&dup, &SimOptions::new(Duration::from_secs(1), 1)),
            Err(RoutingError::DuplicateTarget(TargetId(1)))
        );
        let too_long = SimOptions::new(MAX_DURATION + Duration::from_secs(1), 1);
        assert!(simulate(&spec, &too_long).is_err());
        let mut no_targets = spec;
        no_targets.targets.clear();
        assert_eq!(
            simulate(&no_targets, &SimOptions::new(Duration::from_secs(1), 1)),
            Err(RoutingError::NoTargets)
        );
    }

    #[test]
    fn bursts_follow_the_schedule() {
        let t = Traffic::default();
        assert_eq!(t.rate_at(0.0), 3000.0);
        assert_eq!(t.rate_at(9.99), 3000.0);
        assert_eq!(t.rate_at(10.0), 12_000.0);
        assert_eq!(t.rate_at(14.99), 12_000.0);
        assert_eq!(t.rate_at(15.0), 3000.0);
        assert_eq!(t.rate_at(30.5), 12_000.0);
    }

    #[test]
    fn text_output_names_both_modes_and_the_changes() {
        let text = run_builtin(20, 1).to_text();
        assert!(text.contains("load-aware"));
        assert!(text.contains("shuffle"));
        assert!(text.contains("kept worker-local"));
        assert!(text.contains("scope changes (load-aware):"));
        assert!(text.contains("worker-local -> host-local"));
    }
}
