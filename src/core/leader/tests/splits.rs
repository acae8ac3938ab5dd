//! The leader's splits: operator and automatic, what a split leaves behind, and the namespace's bundle quota.

use super::*;
use crate::bundle::BundleName;

#[test]
fn a_split_parent_is_forgotten_and_never_proposed_again() {
    for shedder in ShedderKind::ALL {
        let (mut leader, all) = hot_owner(shedder);
        let parent = all[0].clone();
        let out = drive(
            &mut leader,
            1_000,
            Event::Request {
                id: 3,
                request: Request::Split {
                    bundle: parent.clone(),
                    algorithm: Some("range_equally_divide".into()),
                    positions: Vec::new(),
                    unload: false,
                },
            },
        );
        let a = answers(&out);
        assert!(a[0].1.ok, "{shedder}: {a:?}");
        assert!(leader.load().bundle(&parent).is_none(), "{shedder}");
        assert!(!leader.records().contains_key(&parent));
        let children = leader.namespace(NS).unwrap().bundle_names();
        assert_eq!(children.len(), 17);
        assert!(!children.contains(&parent));
        assert_eq!(leader.status().splits, 1);
        let m = first_moves(&mut leader);
        assert!(m.iter().all(|(b, _, _)| *b != parent), "{shedder}: {m:?}");
    }
}

#[test]
fn a_split_that_conflicts_restores_the_namespace() {
    let (mut leader, all) = hot_owner(ShedderKind::AvgShedder);
    let before = leader.namespace(NS).unwrap().clone();
    let out = drive_with(
        &mut leader,
        1_000,
        Event::Request {
            id: 3,
            request: Request::Split {
                bundle: all[0].clone(),
                algorithm: Some("range_equally_divide".into()),
                positions: Vec::new(),
                unload: false,
            },
        },
        |c| matches!(c, Command::Split { .. }).then_some(Outcome::Conflict),
    );
    assert!(!answers(&out)[0].1.ok);
    assert_eq!(leader.namespace(NS).unwrap(), &before);
    assert!(leader.records().contains_key(&all[0]));
    assert!(out.contains(&Command::Reread(Reread::Namespace(NS.into()))));
}

#[test]
fn a_report_schedules_one_split_check_at_the_next_period() {
    let mut settings = Settings::default();
    settings.load_balancer_auto_bundle_split_enabled = true;
    let mut leader = Leader::new("b1:8080", settings, 1, 0);
    drive(&mut leader, 0, Event::Loaded(Box::default()));
    let r = |leader: &mut Leader, now| {
        drive(
            leader,
            now,
            Event::Report {
                broker: "b1:8080".into(),
                report: Ok(report(&[], 10.0)),
            },
        )
    };
    let wakes = |out: &[Command]| wakes_of(out, Tick::SplitCheck);
    assert_eq!(wakes(&r(&mut leader, 12_300)), vec![15_000]);
    assert!(
        wakes(&r(&mut leader, 13_000)).is_empty(),
        "one pending check"
    );
    drive(&mut leader, 15_000, Event::Tick(Tick::SplitCheck));
    assert_eq!(wakes(&r(&mut leader, 20_000)), vec![20_000]);
}

#[test]
fn an_automatic_split_that_waited_for_split_points_keeps_the_namespace_quota() {
    // b1 owns five bundles of sixteen; one is hot. The quota allows one split more.
    let hot: Vec<(usize, f64)> = vec![(0, 100.0), (1, 3000.0), (2, 100.0)];
    let spec: [OwnerSpec<'_>; 2] = [("b1:8080", &hot, 50.0), ("b2:8080", &[], 5.0)];
    let (mut leader, all, _) = owned_cluster(ShedderKind::AvgShedder, "b1:8080", &spec);
    leader.settings.load_balancer_auto_bundle_split_enabled = true;
    leader.settings.load_balancer_namespace_bundle_max_msg_rate = 1000;
    leader.settings.load_balancer_namespace_maximum_bundles = 17;
    leader.settings.default_namespace_bundle_split_algorithm =
        crate::bundle::SplitAlgorithm::TopicCountEquallyDivide;
    let asked = |out: &[Command]| -> Vec<(Ticket, String)> {
        out.iter()
            .filter_map(|c| match c {
                Command::AskSplitPoints { ticket, bundle, .. } => Some((*ticket, bundle.clone())),
                _ => None,
            })
            .collect()
    };
    let first = asked(&drive(&mut leader, 1_000, Event::Tick(Tick::SplitCheck)));
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].1, all[1]);
    // A second check before the owner answers asks nothing more for the same bundle.
    assert!(asked(&drive(&mut leader, 2_000, Event::Tick(Tick::SplitCheck))).is_empty());
    // Then another bundle turns hot: the namespace still has sixteen bundles, so the check plans it too.
    let now_hot = [
        (all[0].as_str(), 3000.0),
        (all[1].as_str(), 3000.0),
        (all[2].as_str(), 100.0),
    ];
    drive(
        &mut leader,
        3_000,
        Event::Report {
            broker: "b1:8080".into(),
            report: Ok(report(&now_hot, 60.0)),
        },
    );
    let second = asked(&drive(&mut leader, 4_000, Event::Tick(Tick::SplitCheck)));
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(second[0].1, all[0]);
    // Both owners answer: the first split takes the namespace to the quota, the second is refused.
    let point = |b: &str| {
        let r = BundleName::parse(b).unwrap().range();
        vec![r.lower() + (r.upper() - r.lower()) / 2]
    };
    for (ticket, bundle) in [&first[0], &second[0]] {
        drive(
            &mut leader,
            5_000,
            Event::SplitPoints {
                ticket: *ticket,
                result: Ok(point(bundle)),
            },
        );
    }
    let ns = leader.namespace(NS).unwrap();
    assert_eq!(ns.bundle_names().len(), 17);
    assert!(!ns.bundle_names().contains(&all[1]));
    assert!(ns.bundle_names().contains(&all[0]));
    assert_eq!(leader.status().splits, 1);
}
