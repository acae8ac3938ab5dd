//! `loadmgr explain`: run shedding cycles, placement and split selection over a snapshot and report the plan
//! with every reason. The CLI is a thin wrapper over [`run`] and [`render_text`].
//!
//! Cycle `k` (0-based) runs at `now + k × loadBalancerSheddingIntervalMinutes`. Unloads planned by a cycle are
//! recorded as recently unloaded at that cycle's time (as the leader does once they complete), so a bundle is
//! not planned twice; the snapshot's reports are not changed between cycles — later cycles see the same load,
//! as a leader does until brokers report again. Split selection runs once, after the last cycle.
//!
//! The snapshot's decision state is restored first: its extensible EMAs are the load data's
//! ([`Snapshot::to_load_data`]) and its recently unloaded brokers go to the shedder ([`Snapshot::restore`]).
//!
//! With [`ExplainOptions::candidates`] the report also lists every shedder proposal before the cycle's checks
//! and placement ([`ShedderCandidate`]), so a strategy's own choice shows even when placement drops it; a
//! dropped proposal is also a skipped entry with [`Skipped::dropped`] set, whether or not candidates are listed.

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;

use super::cycle::{run_shedding_cycle_with_candidates, Strategies};
use super::plan::{Plan, ShedderCandidate, Skipped};
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
    /// Also list the shedder's proposals before the cycle's checks and placement
    /// ([`ExplainReport::candidates`]).
    pub candidates: bool,
}

impl Default for ExplainOptions {
    fn default() -> Self {
        Self {
            shedder: None,
            placement: None,
            settings: Settings::default(),
            cycles: 1,
            seed: 0,
            candidates: false,
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
    /// With [`ExplainOptions::candidates`]: every proposal of the shedder, of all cycles in order, before the
    /// cycle's checks and placement, with what became of it. Absent from JSON otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<ShedderCandidate>>,
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
    snapshot.restore(&mut strategies);
    let policies = snapshot.policies()?;
    let mut load = snapshot.to_load_data();
    let mut rng = StdRng::seed_from_u64(options.seed);
    let interval = (settings.load_balancer_shedding_interval_minutes as i64).saturating_mul(60_000);
    let cycles = options.cycles.max(1);
    let mut plan = Plan::default();
    let mut candidates = Vec::new();
    for k in 0..cycles {
        let now = snapshot.now + k as i64 * interval;
        let (mut p, proposed) = run_shedding_cycle_with_candidates(
            &mut load,
            &settings,
            &policies,
            &mut strategies,
            now,
            &mut rng,
        );
        if options.candidates {
            candidates.extend(
                proposed
                    .into_iter()
                    .map(|c| ShedderCandidate { cycle: k + 1, ..c }),
            );
        }
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
    let mut splits = find_bundles_to_split(&load, &settings, &policies, &snapshot.bundle_topics);
    // A bundle the strategy split already (BandShedder: too hot for any broker) is split once.
    splits
        .splits
        .retain(|d| !plan.splits.iter().any(|s| s.bundle == d.bundle));
    plan.extend(splits);
    Ok(ExplainReport {
        strategy: shedder.name().to_owned(),
        placement: strategies.placement.strategy.name().to_owned(),
        cycles,
        seed: options.seed,
        now: snapshot.now,
        candidates: options.candidates.then_some(candidates),
        plan,
    })
}

/// Human-readable rendering of a report.
pub fn render_text(report: &ExplainReport) -> String {
    let mut out = format!(
        "loadmgr explain: {} shedding, {} placement, {} cycle(s), seed {}, now {}\n",
        report.strategy, report.placement, report.cycles, report.seed, report.now
    );
    if let Some(candidates) = &report.candidates {
        out.push_str(&format!(
            "\nShedder candidates, before placement ({}):\n",
            candidates.len()
        ));
        if candidates.is_empty() {
            out.push_str("  none\n");
        }
        for c in candidates {
            let planned = match (&c.planned, c.binding) {
                (Some(dst), true) => format!("{dst} (transfer)"),
                (Some(dst), false) => format!("{dst} (planned)"),
                (None, _) => "(placement decides)".to_owned(),
            };
            let fate = match c.dropped {
                None => "kept: unload".to_owned(),
                Some(d) if d.by_placement() => format!("dropped by placement: {}", d.name()),
                Some(d) => format!("dropped before placement: {}", d.name()),
            };
            out.push_str(&format!(
                "  [cycle {}] {}: {} -> {}\n      {}\n      => {}\n",
                c.cycle, c.bundle, c.source, planned, c.reason, fate
            ));
        }
    }
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
    for Skipped {
        subject,
        reason,
        dropped,
    } in &p.skipped
    {
        match dropped {
            Some(d) => out.push_str(&format!("  {subject} [dropped: {}]: {reason}\n", d.name())),
            None => out.push_str(&format!("  {subject}: {reason}\n")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::plan::Dropped;

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

    /// examples/placement-keeps-owner.json: ThresholdShedder sheds a:8080 (80 % vs 10 %), but
    /// LeastLongTermMessageRate scores a:8080 best (its long-term rate is 0, b:8080's 1e6): placement keeps both
    /// bundles where they are.
    #[test]
    fn candidates_show_the_shedders_choice_that_placement_dropped() {
        let snap =
            Snapshot::from_json(include_str!("../../examples/placement-keeps-owner.json")).unwrap();
        let options = ExplainOptions {
            shedder: Some(ShedderKind::ThresholdShedder),
            placement: Some(PlacementKind::LeastLongTermMessageRate),
            ..Default::default()
        };
        let plain = run(&snap, &options).unwrap();
        assert!(plain.plan.unloads.is_empty(), "{:?}", plain.plan.unloads);
        assert!(plain.candidates.is_none());
        let dropped: Vec<(&str, Option<Dropped>)> = plain
            .plan
            .skipped
            .iter()
            .filter(|k| k.dropped.is_some())
            .map(|k| (k.subject.as_str(), k.dropped))
            .collect();
        assert_eq!(
            dropped,
            [
                ("t/n/0x00000000_0x80000000", Some(Dropped::CurrentOwner)),
                ("t/n/0x80000000_0xffffffff", Some(Dropped::CurrentOwner)),
            ]
        );
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("candidates").is_none());
        let skipped = json["skipped"].as_array().unwrap();
        assert!(skipped.iter().any(|k| k["dropped"] == "currentOwner"));
        assert!(skipped
            .iter()
            .any(|k| k["subject"] == "b:8080" && k.get("dropped").is_none()));
        let text = render_text(&plain);
        assert!(
            text.contains("  t/n/0x00000000_0x80000000 [dropped: currentOwner]: no unload: ThresholdShedder: a:8080 usage 80.0%"),
            "{text}"
        );

        let report = run(
            &snap,
            &ExplainOptions {
                candidates: true,
                ..options
            },
        )
        .unwrap();
        assert_eq!(
            report.plan, plain.plan,
            "listing candidates changes no decision"
        );
        let candidates = report.candidates.as_deref().unwrap();
        assert_eq!(candidates.len(), 2);
        assert_eq!(candidates[0].bundle, "t/n/0x00000000_0x80000000");
        assert_eq!(candidates[0].source, "a:8080");
        assert_eq!(candidates[0].planned, None);
        assert_eq!(candidates[0].cycle, 1);
        assert_eq!(candidates[0].dropped, Some(Dropped::CurrentOwner));
        assert!(candidates[0]
            .reason
            .starts_with("ThresholdShedder: a:8080 usage 80.0% >= avg 45.0% + 10.0%"));
        let text = render_text(&report);
        assert!(
            text.contains("Shedder candidates, before placement (2):\n  [cycle 1] t/n/0x00000000_0x80000000: a:8080 -> (placement decides)\n      ThresholdShedder: a:8080 usage 80.0%"),
            "{text}"
        );
        assert!(
            text.contains("      => dropped by placement: currentOwner\n"),
            "{text}"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["candidates"][1]["dropped"], "currentOwner");
        assert_eq!(json["candidates"][1]["planned"], serde_json::Value::Null);
    }

    #[test]
    fn kept_candidates_are_marked_kept() {
        let report = run(
            &example(),
            &ExplainOptions {
                cycles: 2,
                candidates: true,
                ..Default::default()
            },
        )
        .unwrap();
        let candidates = report.candidates.as_deref().unwrap();
        let kept: Vec<&str> = candidates
            .iter()
            .filter(|c| c.dropped.is_none())
            .map(|c| c.bundle.as_str())
            .collect();
        let unloads: Vec<&str> = report
            .plan
            .unloads
            .iter()
            .map(|u| u.bundle.as_str())
            .collect();
        assert_eq!(kept, unloads);
        assert!(candidates.iter().all(|c| c.cycle == 2));
        assert_eq!(candidates[0].planned.as_deref(), Some("broker-2:8080"));
        let text = render_text(&report);
        assert!(
            text.contains("broker-1:8080 -> broker-2:8080 (planned)"),
            "{text}"
        );
        assert!(text.contains("      => kept: unload\n"), "{text}");
    }

    #[test]
    fn transfer_shedder_uses_the_snapshots_decision_state() {
        let mut v: serde_json::Value =
            serde_json::from_str(include_str!("../../examples/snapshot.json")).unwrap();
        let options = ExplainOptions {
            shedder: Some(ShedderKind::TransferShedder),
            ..Default::default()
        };
        let first_reason = |v: &serde_json::Value| {
            let r = run(&Snapshot::from_value(v.clone()).unwrap(), &options).unwrap();
            r.plan.skipped[0].reason.clone()
        };
        let plain = first_reason(&v);
        // EMAs from the reports: cpu 85, 20, 50 and 45 %.
        assert!(
            plain.contains(
                "HitCount: condition hit 0 <= threshold 3 (std 0.2318 vs target 0.25, avg 0.5)"
            ),
            "{plain}"
        );
        // The snapshot's EMAs instead: equal everywhere, std 0.
        let brokers: Vec<String> = v["brokers"].as_object().unwrap().keys().cloned().collect();
        v["extensibleEma"] = brokers
            .iter()
            .map(|b| {
                let ema = serde_json::json!({"weightedMaxEMA": 0.5, "msgThroughputEMA": 1000.0});
                (b.clone(), ema)
            })
            .collect();
        let even = first_reason(&v);
        assert!(
            even.contains(
                "HitCount: condition hit 0 <= threshold 3 (std 0.0 vs target 0.25, avg 0.5)"
            ),
            "{even}"
        );
        // broker-1 was unloaded from 10 s before its report (lastUpdate now − 20 s): cool-down.
        v["recentlyUnloadedBrokers"] = serde_json::json!({"broker-1:8080": 1699999970000i64});
        let cool = first_reason(&v);
        assert!(
            cool.contains("CoolDown: broker-1:8080 load data is 10s newer than its last unload"),
            "{cool}"
        );
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
