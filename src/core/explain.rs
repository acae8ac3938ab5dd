//! `loadmgr explain`: run shedding cycles, placement and split selection over a snapshot and report the plan
//! with every reason. The CLI is a thin wrapper over [`run`] and [`render_text`].
//!
//! Cycle `k` (0-based) runs at `now + k × loadBalancerSheddingIntervalMinutes`. Unloads planned by a cycle are
//! recorded as recently unloaded at that cycle's time (as the leader does once they complete), so a bundle is
//! not planned twice; the snapshot's reports are not changed between cycles — later cycles see the same load,
//! as a leader does until brokers report again. Split selection runs once, after the last cycle.

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;

use super::cycle::{run_shedding_cycle, Strategies};
use super::plan::{Plan, Skipped};
use super::snapshot::Snapshot;
use super::split::find_bundles_to_split;
use super::{num, CoreError};
use crate::config::{LoadManagerKind, PlacementKind, Settings, ShedderKind};

/// Most shedding cycles one explain run may do (`--cycles`).
pub const MAX_CYCLES: u32 = 1_000_000;

/// What to run.
#[derive(Debug, Clone)]
pub struct ExplainOptions {
    /// Shedding strategy (default: the settings').
    pub shedder: Option<ShedderKind>,
    /// Placement strategy (default: the settings', or the 5.0 pairing of `shedder` when only that is given).
    pub placement: Option<PlacementKind>,
    /// Settings (broker.conf).
    pub settings: Settings,
    /// Shedding cycles to run (at least 1, at most [`MAX_CYCLES`]).
    pub cycles: u32,
    /// RNG seed.
    pub seed: u64,
}

impl Default for ExplainOptions {
    fn default() -> Self {
        Self {
            shedder: None,
            placement: None,
            settings: Settings::default(),
            cycles: 1,
            seed: 0,
        }
    }
}

/// The result of an explain run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExplainReport {
    /// Shedding strategy used.
    pub strategy: String,
    /// Placement strategy used.
    pub placement: String,
    /// Cycles run.
    pub cycles: u32,
    /// RNG seed.
    pub seed: u64,
    /// Snapshot time, epoch ms.
    pub now: i64,
    /// The plan (unloads of all cycles, splits, skipped).
    #[serde(flatten)]
    pub plan: Plan,
}

/// Runs the cycles, placement and split selection over `snapshot`.
pub fn run(snapshot: &Snapshot, options: &ExplainOptions) -> Result<ExplainReport, CoreError> {
    if options.cycles > MAX_CYCLES {
        return Err(CoreError::AboveLimit {
            option: "--cycles",
            value: options.cycles.into(),
            limit: MAX_CYCLES.into(),
        });
    }
    let mut settings = options.settings.clone();
    if let Some(s) = options.shedder {
        settings.load_balancer_load_shedding_strategy = s;
    }
    let placement = match (options.placement, options.shedder) {
        (Some(p), _) => p,
        (None, Some(s)) if !settings.is_explicit("loadBalancerLoadPlacementStrategy") => {
            s.default_placement()
        }
        _ => settings.load_balancer_load_placement_strategy,
    };
    settings.load_balancer_load_placement_strategy = placement;
    let shedder = settings.load_balancer_load_shedding_strategy;
    let extensible = settings.load_manager_class_name == LoadManagerKind::Extensible
        || shedder == ShedderKind::TransferShedder;
    let mut strategies = Strategies::new(shedder, placement, extensible);
    let policies = snapshot.policies()?;
    let mut load = snapshot.to_load_data();
    let mut rng = StdRng::seed_from_u64(options.seed);
    let interval = (settings.load_balancer_shedding_interval_minutes as i64).saturating_mul(60_000);
    let cycles = options.cycles.max(1);
    let mut plan = Plan::default();
    for k in 0..cycles {
        let now = snapshot.now + k as i64 * interval;
        let mut p = run_shedding_cycle(
            &mut load,
            &settings,
            &policies,
            &mut strategies,
            now,
            &mut rng,
        );
        for u in &mut p.unloads {
            u.cycle = k + 1;
            load.record_unload(&u.bundle, now);
        }
        if cycles > 1 {
            for s in &mut p.skipped {
                s.reason = format!("cycle {}: {}", k + 1, s.reason);
            }
        }
        plan.extend(p);
    }
    let splits = find_bundles_to_split(&load, &settings, &policies, &snapshot.bundle_topics);
    plan.extend(splits);
    Ok(ExplainReport {
        strategy: shedder.name().to_owned(),
        placement: strategies.placement.strategy.name().to_owned(),
        cycles,
        seed: options.seed,
        now: snapshot.now,
        plan,
    })
}

/// Human-readable rendering of a report.
pub fn render_text(report: &ExplainReport) -> String {
    let mut out = format!(
        "loadmgr explain: {} shedding, {} placement, {} cycle(s), seed {}, now {}\n",
        report.strategy, report.placement, report.cycles, report.seed, report.now
    );
    let p = &report.plan;
    out.push_str(&format!("\nUnloads ({}):\n", p.unloads.len()));
    if p.unloads.is_empty() {
        out.push_str("  none\n");
    }
    for u in &p.unloads {
        out.push_str(&format!(
            "  [cycle {}] {}: {} -> {}\n      {}\n",
            u.cycle,
            u.bundle,
            u.source,
            u.destination.as_deref().unwrap_or("(any)"),
            u.reason
        ));
    }
    if !p.prediction.is_empty() {
        out.push_str("\nPredicted scores, now -> after the plan (the strategy's cost model):\n");
        for b in &p.prediction {
            out.push_str(&format!(
                "  {}: {} -> {} ({} out, {} in)\n",
                b.broker,
                num(b.score_now),
                num(b.score_after),
                b.moves_out,
                b.moves_in
            ));
        }
    }
    if !p.assignments.is_empty() {
        out.push_str(&format!("\nAssignments ({}):\n", p.assignments.len()));
        for a in &p.assignments {
            out.push_str(&format!(
                "  {} -> {}\n      {}\n",
                a.bundle, a.broker, a.reason
            ));
        }
    }
    out.push_str(&format!("\nSplits ({}):\n", p.splits.len()));
    if p.splits.is_empty() {
        out.push_str("  none\n");
    }
    for s in &p.splits {
        out.push_str(&format!(
            "  {} on {} at [{}], unload children: {}\n      {}\n",
            s.bundle,
            s.broker,
            s.boundaries.join(", "),
            s.unload_children,
            s.reason
        ));
    }
    out.push_str(&format!("\nSkipped ({}):\n", p.skipped.len()));
    for Skipped { subject, reason } in &p.skipped {
        out.push_str(&format!("  {subject}: {reason}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Snapshot {
        Snapshot::from_json(include_str!("../../examples/snapshot.json")).unwrap()
    }

    #[test]
    fn avg_shedder_acts_on_the_example_after_two_cycles() {
        let snap = example();
        let one = run(&snap, &ExplainOptions::default()).unwrap();
        assert!(one.plan.unloads.is_empty(), "one check is not enough");
        assert!(
            one.plan
                .skipped
                .iter()
                .any(|s| s.reason.contains("for 1 of 2 checks")),
            "{:?}",
            one.plan.skipped
        );
        let report = run(
            &snap,
            &ExplainOptions {
                cycles: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let moves: Vec<(&str, &str, Option<&str>)> = report
            .plan
            .unloads
            .iter()
            .map(|u| {
                (
                    u.bundle.as_str(),
                    u.source.as_str(),
                    u.destination.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            moves,
            [
                (
                    "public/default/0x00000000_0x20000000",
                    "broker-1:8080",
                    Some("broker-2:8080")
                ),
                (
                    "public/default/0x60000000_0x80000000",
                    "broker-1:8080",
                    Some("broker-2:8080")
                ),
            ]
        );
        assert_eq!(
            report.plan.unloads[0].reason,
            "AvgShedder: broker-1:8080 score 85.0 vs broker-2:8080 20.0, gap 65.0 >= 40.0 for 2 checks; move 6000.0 msg/s; bundle 4000.0 msg/s; destination: AvgShedder: planned destination broker-2:8080 (score 20.0)"
        );
        assert!(report.plan.unloads.iter().all(|u| u.cycle == 2));
        let text = render_text(&report);
        assert!(text.contains("Unloads (2):"), "{text}");
        assert!(
            text.contains(
                "[cycle 2] public/default/0x00000000_0x20000000: broker-1:8080 -> broker-2:8080"
            ),
            "{text}"
        );
        let json: serde_json::Value = serde_json::to_value(&report).unwrap();
        assert_eq!(json["unloads"][0]["destination"], "broker-2:8080");
        assert_eq!(json["strategy"], "AvgShedder");
    }

    #[test]
    fn same_seed_same_report_and_strategy_overrides() {
        let snap = example();
        for shedder in ShedderKind::ALL {
            let o = ExplainOptions {
                shedder: Some(shedder),
                cycles: 5,
                seed: 7,
                ..Default::default()
            };
            let a = run(&snap, &o).unwrap();
            let b = run(&snap, &o).unwrap();
            assert_eq!(a, b, "{shedder}");
            assert_eq!(a.strategy, shedder.name());
        }
        let o = ExplainOptions {
            shedder: Some(ShedderKind::ThresholdShedder),
            ..Default::default()
        };
        assert_eq!(
            run(&snap, &o).unwrap().placement,
            "LeastLongTermMessageRate",
            "5.0 pairing fallback"
        );
    }
}
