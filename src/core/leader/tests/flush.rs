//! The leader's flush: what it writes, when, and what a new leader starts from.

use super::*;

#[test]
fn a_flush_where_nothing_changed_writes_nothing() {
    let (mut leader, _) = hot_owner(ShedderKind::AvgShedder);
    let first = drive(&mut leader, 900_000, Event::Tick(Tick::Flush));
    let n = |out: &[Command]| {
        out.iter()
            .find_map(|c| match c {
                Command::Flush { writes, .. } => Some(writes.len()),
                _ => None,
            })
            .unwrap()
    };
    assert!(n(&first) > 0);
    // With no report in between, only Pulsar's extra sample changes the windows; a second flush of the same
    // samples count still rewrites them, so compare a flush right after a flush with resampling disabled by
    // checking the time averages only.
    let second = drive(&mut leader, 900_001, Event::Tick(Tick::Flush));
    let ta_rewritten = second.iter().any(|c| {
        matches!(c, Command::Flush { writes, .. }
        if writes.iter().any(|(n, _)| matches!(n, FlushedNode::TimeAverage(_))))
    });
    assert!(!ta_rewritten, "{second:?}");
}

#[test]
fn a_flush_waits_for_the_previous_one_to_be_written() {
    let (mut leader, _) = hot_owner(ShedderKind::AvgShedder);
    // The runtime writes a flush beside other events: its outcome comes later.
    let first = leader.handle(900_000, Event::Tick(Tick::Flush));
    let ticket = first
        .iter()
        .find_map(|c| match c {
            Command::Flush { ticket, .. } => Some(*ticket),
            _ => None,
        })
        .expect("a flush");
    let flushes = |out: &[Command]| {
        out.iter()
            .filter(|c| matches!(c, Command::Flush { .. }))
            .count()
    };
    assert_eq!(
        flushes(&leader.handle(910_000, Event::Tick(Tick::Flush))),
        0
    );
    leader.handle(
        910_001,
        Event::Done {
            ticket,
            outcome: Outcome::Written(Vec::new()),
        },
    );
    assert_eq!(
        flushes(&drive(&mut leader, 920_000, Event::Tick(Tick::Flush))),
        1
    );
}

#[test]
fn a_new_leader_starts_from_what_the_flush_wrote_and_rewrites_nothing_unchanged() {
    let (mut leader, all) = hot_owner(ShedderKind::AvgShedder);
    let out = drive(&mut leader, 900_000, Event::Tick(Tick::Flush));
    let written: Vec<(FlushedNode, FlushedValue)> = out
        .iter()
        .find_map(|c| match c {
            Command::Flush { writes, .. } => Some(writes.clone()),
            _ => None,
        })
        .unwrap();
    let stored = written
        .iter()
        .find_map(|(n, v)| match (n, v) {
            (FlushedNode::BundleData(b), FlushedValue::BundleData(d)) if *b == all[0] => Some(*d),
            _ => None,
        })
        .expect("the hot bundle's data is flushed");
    // A new term reads back what the store holds.
    let mut state = LoadedState {
        namespaces: vec![leader.namespace(NS).unwrap().clone()],
        ..Default::default()
    };
    for (node, value) in &written {
        match (node, value) {
            (FlushedNode::BundleData(b), FlushedValue::BundleData(d)) => {
                state.bundle_data.push((b.clone(), Some(*d)))
            }
            (FlushedNode::TimeAverage(b), FlushedValue::TimeAverage(t)) => {
                state.time_averages.push((b.clone(), Some(*t)))
            }
            _ => unreachable!("a node holds its own kind of value"),
        }
    }
    let mut next = Leader::new("b2:8080", leader.settings().clone(), 3, 900_001);
    drive(&mut next, 900_001, Event::Loaded(Box::new(state)));
    // A bundle seen anew is seeded from its stored data, not from the 50 msg/s defaults.
    let hot: Vec<(&str, f64)> = all[..5].iter().map(|b| (b.as_str(), 3000.0)).collect();
    drive(
        &mut next,
        900_002,
        Event::Report {
            broker: "b1:8080".into(),
            report: Ok(report(&hot, 95.0)),
        },
    );
    let seeded = next.load().bundle(&all[0]).unwrap();
    assert_eq!(
        seeded.long_term_data.num_samples,
        stored.long_term_data.num_samples + 1
    );
    // Its first flush runs on what it read.
    let first = drive(&mut next, 900_003, Event::Tick(Tick::Flush));
    assert!(first.iter().any(|c| matches!(c, Command::Flush { .. })));
    // Data of bundles nobody reports any more is deleted only by a flush, never lost at the take-over.
    assert!(!next.has_pending_writes());
}

#[test]
fn the_flush_choice_is_the_top_bundles_by_rate_then_throughput_then_name() {
    // Rates repeat (ties broken by name), three brokers: the top 2 × 3 of 20 bundles, best first.
    let names: Vec<String> = (0..20)
        .map(|i| format!("{NS}/0x{:08x}_0x{:08x}", i * 16, i * 16 + 16))
        .collect();
    let rate = |i: usize| ((i * 7) % 5) as f64 * 10.0;
    let mut reports = Vec::new();
    for b in 0..3 {
        let mine: Vec<(&str, f64)> = (0..20)
            .filter(|i| i % 3 == b)
            .map(|i| (names[i].as_str(), rate(i)))
            .collect();
        reports.push((format!("b{b}:8080"), Ok(report(&mine, 50.0))));
    }
    let mut settings = Settings::default();
    settings.load_balancer_max_number_of_bundles_in_bundle_load_report = 2;
    let mut leader = Leader::new("b0:8080", settings, 1, 0);
    drive(
        &mut leader,
        0,
        Event::Loaded(Box::new(LoadedState {
            reports,
            ..Default::default()
        })),
    );
    let chosen: Vec<String> = leader
        .flush_choice()
        .into_iter()
        .map(|(b, _)| b.clone())
        .collect();
    let mut expected: Vec<usize> = (0..20).collect();
    expected.sort_by(|a, b| {
        rate(*b)
            .total_cmp(&rate(*a))
            .then(names[*a].cmp(&names[*b]))
    });
    let expected: Vec<String> = expected[..6].iter().map(|i| names[*i].clone()).collect();
    assert_eq!(chosen, expected);
}
