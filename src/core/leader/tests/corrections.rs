//! Strategies that correct the reports for moves they do not show yet (BandShedder), and their early cycles.

use super::*;

fn early_wakes(commands: &[Command]) -> Vec<i64> {
    wakes_of(commands, Tick::EarlyShedding)
}

#[test]
fn a_joining_broker_brings_bandshedders_early_cycle_and_no_one_elses() {
    for shedder in ShedderKind::ALL {
        let (mut leader, _) = hot_owner(shedder);
        // The first cycle plans (b2 and b3 are empty) and starts moves.
        let first = drive(&mut leader, 60_000, Event::Tick(Tick::Shedding));
        let join = drive(
            &mut leader,
            70_000,
            Event::Report {
                broker: "b4:8080".into(),
                report: Ok(report(&[], 5.0)),
            },
        );
        let wakes: Vec<i64> = early_wakes(&first)
            .into_iter()
            .chain(early_wakes(&join))
            .collect();
        if shedder != ShedderKind::BandShedder {
            assert!(wakes.is_empty(), "{shedder}: {wakes:?}");
            continue;
        }
        assert_eq!(wakes, vec![80_000], "one wake, 10 s after the join");
        // The moves of the first plan are still in flight: the early cycle waits and asks again.
        let waiting = drive(&mut leader, 80_000, Event::Tick(Tick::EarlyShedding));
        assert!(moves(&waiting).is_empty(), "{waiting:?}");
        assert_eq!(early_wakes(&waiting), vec![90_000]);
    }
}

#[test]
fn a_correcting_strategy_keeps_a_move_the_reports_do_not_show_until_a_report_is_due() {
    let bundle = format!("{NS}/0x00000000_0x80000000");
    let loaded = || {
        let mut leader = Leader::new("b1:8080", Settings::default(), 1, 0);
        let state = LoadedState {
            namespaces: vec![namespace(vec![0, 0x8000_0000, 0xffff_ffff])],
            reports: vec![
                (
                    "b1:8080".into(),
                    Ok(report(&[(bundle.as_str(), 10.0)], 50.0)),
                ),
                ("b2:8080".into(), Ok(report(&[], 10.0))),
            ],
            ..Default::default()
        };
        drive(&mut leader, 0, Event::Loaded(Box::new(state)));
        // Completed at 0 from b1 to b2; b1's report still lists it, b2's does not yet.
        leader.unsettled.push(Unsettled {
            bundle: bundle.clone(),
            source: Some("b1:8080".into()),
            destination: "b2:8080".into(),
            at: 0,
            last_data: None,
        });
        leader
    };
    let s = Settings::default();
    let check = s.report_check_interval().as_millis() as i64;
    let short = s.shedding_interval().as_millis() as i64 + check;
    let long = s.report_max_interval().as_millis() as i64 + check;
    // Pulsar's strategies wait for the reports, but not past the short bound.
    let mut leader = loaded();
    assert!(leader.settled(short, false).is_err());
    assert_eq!(leader.settled(short + 1, false), Ok(Vec::new()));
    // A correcting strategy is not held up, and its correction lasts until a report of each broker is due.
    let mut leader = loaded();
    for at in [short + 1, long] {
        let unreported = leader.settled(at, true).unwrap();
        assert_eq!(unreported.len(), 1, "at {at}");
        assert_eq!(unreported[0].still_listed_by.as_deref(), Some("b1:8080"));
        assert_eq!(unreported[0].not_yet_listed_by.as_deref(), Some("b2:8080"));
    }
    assert_eq!(leader.settled(long + 1, true), Ok(Vec::new()));
}

#[test]
fn an_orphan_s_correction_carries_the_data_its_gone_broker_took_with_it() {
    let (mut leader, _) = hot_owner(ShedderKind::BandShedder);
    let out = drive(&mut leader, 901_000, gone("b1:8080"));
    let m = moves(&out);
    assert!(!m.is_empty(), "{out:?}");
    for (bundle, dest, _) in &m {
        drive(
            &mut leader,
            902_000,
            Event::OwnerSeen {
                bundle: bundle.clone(),
                owner: OwnerSeen {
                    broker: dest.clone(),
                    disabled: false,
                },
            },
        );
    }
    // The destinations have not reported the orphans; their data went with b1, the only broker listing them.
    let unreported = leader.settled(903_000, true).unwrap();
    assert_eq!(unreported.len(), m.len(), "{unreported:?}");
    for u in &unreported {
        assert!(u.not_yet_listed_by.is_some(), "{u:?}");
        assert!(
            u.last_data
                .is_some_and(|d| d.short_term_data.num_samples > 0),
            "{u:?}"
        );
    }
}

#[test]
fn bandshedders_placement_weighs_a_gone_brokers_bundles_by_their_last_data() {
    // b1 owns one hot bundle (9,000 msg/s) and four cool ones (1,000 each); b2 and b3 carry one cool bundle
    // each at the same usage. When b1 goes, its bundles have no data left in the load data: placement weighed
    // each as the mean bundle and dealt them out by count. Weighed by the data the leader kept, the hot one is
    // worth the four cool ones, so it lands alone.
    for shedder in [ShedderKind::BandShedder, ShedderKind::AvgShedder] {
        let b1: Vec<(usize, f64)> = (0..5)
            .map(|i| (i, if i == 0 { 9000.0 } else { 1000.0 }))
            .collect();
        let spec: [OwnerSpec<'_>; 3] = [
            ("b1:8080", &b1, 90.0),
            ("b2:8080", &[(5, 1000.0)], 10.0),
            ("b3:8080", &[(6, 1000.0)], 10.0),
        ];
        let (mut leader, all, _) = owned_cluster(shedder, "b2:8080", &spec);
        let m = moves(&drive(&mut leader, 1_000, gone("b1:8080")));
        assert_eq!(m.len(), 5, "{shedder}: {m:?}");
        let hot_to = &m.iter().find(|(b, _, _)| *b == all[0]).unwrap().1;
        let with_hot = m.iter().filter(|(_, d, _)| d == hot_to).count();
        if shedder == ShedderKind::BandShedder {
            assert_eq!(with_hot, 1, "{m:?}");
        } else {
            // Pulsar's placement knows nothing of a bundle whose broker is gone.
            assert!(with_hot > 1, "{m:?}");
        }
    }
}
