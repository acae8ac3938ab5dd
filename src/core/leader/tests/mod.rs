use std::collections::VecDeque;

use super::*;
use crate::bundle::{NamespaceBundles, NamespaceName};
use crate::config::ShedderKind;
use crate::model::records::{AssignmentCause, AssignmentState};
use crate::model::{LocalBrokerData, NamespaceBundleStats, ResourceUsage, SystemResourceUsage};

const NS: &str = "t/n";

mod corrections;
mod flush;
mod splits;

fn report(bundles: &[(&str, f64)], cpu: f64) -> LocalBrokerData {
    let mut r = LocalBrokerData::default();
    let usage = SystemResourceUsage {
        cpu: ResourceUsage::new(cpu, 100.0),
        ..Default::default()
    };
    r.update(
        &usage,
        bundles
            .iter()
            .map(|(b, rate)| {
                (
                    b.to_string(),
                    NamespaceBundleStats {
                        msg_rate_in: *rate,
                        msg_rate_out: *rate,
                        msg_throughput_in: rate * 1000.0,
                        msg_throughput_out: rate * 1000.0,
                        topics: 2,
                        ..Default::default()
                    },
                )
            })
            .collect(),
    );
    r.load_manager_class_name = Some(crate::model::MODULAR_LOAD_MANAGER_CLASS.into());
    r
}

/// The event of `broker`'s registration vanishing.
fn gone(broker: &str) -> Event {
    Event::BrokerGone {
        broker: broker.into(),
    }
}

fn namespace(boundaries: Vec<u64>) -> NamespaceBundlesInfo {
    let bundles = NamespaceBundles::from_boundaries(boundaries).unwrap();
    let local = crate::model::LocalPolicies {
        bundles: bundles.to_bundles_data(),
        ..Default::default()
    };
    NamespaceBundlesInfo {
        namespace: NamespaceName::parse(NS).unwrap(),
        bundles,
        local,
        local_version: Some(0),
    }
}

/// An executor that writes everything at once, as the simulator does: every write succeeds with version
/// `expected + 1` (0 for a create). Returns every command, follow-ups included, in execution order.
fn drive(leader: &mut Leader, now: i64, event: Event) -> Vec<Command> {
    drive_with(leader, now, event, |_| None)
}

/// Like [`drive`], but `fail` may give another outcome for a command.
fn drive_with(
    leader: &mut Leader,
    now: i64,
    event: Event,
    fail: impl Fn(&Command) -> Option<Outcome>,
) -> Vec<Command> {
    let mut done = Vec::new();
    let mut queue: VecDeque<Command> = leader.handle(now, event).into();
    while let Some(c) = queue.pop_front() {
        let outcome = fail(&c).unwrap_or_else(|| match &c {
            Command::WriteRecord {
                expected_version, ..
            } => Outcome::Written(vec![expected_version.map_or(0, |v| v + 1)]),
            Command::Split { write, .. } => {
                let mut v = vec![write.expected_local_version.map_or(0, |v| v + 1)];
                v.extend(write.child_records.iter().map(|_| 0));
                Outcome::Written(v)
            }
            _ => Outcome::Written(Vec::new()),
        });
        let ticket = match &c {
            Command::WriteRecord { ticket, .. }
            | Command::Flush { ticket, .. }
            | Command::Delete { ticket, .. }
            | Command::Split { ticket, .. } => Some(*ticket),
            _ => None,
        };
        done.push(c);
        if let Some(ticket) = ticket {
            let more = leader.handle(now, Event::Done { ticket, outcome });
            for m in more.into_iter().rev() {
                queue.push_front(m);
            }
        }
    }
    done
}

fn moves(commands: &[Command]) -> Vec<(String, String, AssignmentCause)> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::WriteRecord { record, .. } if record.state == AssignmentState::Assigning => {
                Some((
                    record.bundle.clone(),
                    record.destination.clone(),
                    record.cause,
                ))
            }
            _ => None,
        })
        .collect()
}

fn answers(commands: &[Command]) -> Vec<(RequestId, Answer)> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::Answer { id, answer } => Some((*id, answer.clone())),
            _ => None,
        })
        .collect()
}

fn names(n: u64) -> Vec<String> {
    (0..n)
        .map(|i| format!("{NS}/0x{:08x}_0x{:08x}", i << 28, (i + 1) << 28))
        .collect()
}

/// One broker of [`owned_cluster`]: id, the bundles it owns (index into the names, msg/s in and out), cpu %.
type OwnerSpec<'a> = (&'a str, &'a [(usize, f64)], f64);

/// Leader `id` running `shedder` over a namespace of sixteen bundles (`names(16)`). Each broker of `spec`
/// reports `cpu` % and owns the bundles it lists (index into the names, msg/s in and out); ownership nodes say
/// so and no records exist. Returns the leader, the bundle names and the commands of the load.
fn owned_cluster(
    shedder: ShedderKind,
    id: &str,
    spec: &[OwnerSpec<'_>],
) -> (Leader, Vec<String>, Vec<Command>) {
    let mut settings = Settings::default();
    settings.load_balancer_load_shedding_strategy = shedder;
    settings.load_balancer_load_placement_strategy = shedder.default_placement();
    let mut leader = Leader::new(id, settings, 3, 0);
    let all = names(16);
    let mut state = LoadedState {
        namespaces: vec![namespace(
            (0..=16u64).map(|i| (i << 28).min(0xffff_ffff)).collect(),
        )],
        ..Default::default()
    };
    for (broker, owned, cpu) in spec {
        let bundles: Vec<(&str, f64)> = owned.iter().map(|(i, r)| (all[*i].as_str(), *r)).collect();
        state
            .reports
            .push((broker.to_string(), Ok(report(&bundles, *cpu))));
        for (i, _) in owned.iter() {
            state.owners.push((
                all[*i].clone(),
                OwnerSeen {
                    broker: broker.to_string(),
                    disabled: false,
                },
            ));
        }
    }
    let out = drive(&mut leader, 0, Event::Loaded(Box::new(state)));
    (leader, all, out)
}

/// b1 (hot, 95 % CPU) owns five equal bundles of a namespace of sixteen; b2 and b3 idle. Records and ownership
/// nodes say so.
fn hot_owner(shedder: ShedderKind) -> (Leader, Vec<String>) {
    let hot: Vec<(usize, f64)> = (0..5).map(|i| (i, 3000.0)).collect();
    let spec: [OwnerSpec<'_>; 3] = [
        ("b1:8080", &hot, 95.0),
        ("b2:8080", &[], 5.0),
        ("b3:8080", &[], 5.0),
    ];
    let (leader, all, out) = owned_cluster(shedder, "b1:8080", &spec);
    // Owned bundles without records are adopted.
    let adopted = out
        .iter()
        .filter(|c| matches!(c, Command::WriteRecord { record, .. } if record.cause == AssignmentCause::Adopted))
        .count();
    assert_eq!(adopted, 5);
    (leader, all)
}

/// Runs shedding ticks a minute apart until one starts moves; those moves.
fn first_moves(leader: &mut Leader) -> Vec<(String, String, AssignmentCause)> {
    for k in 1..=10 {
        let m = moves(&drive(leader, k * 60_000, Event::Tick(Tick::Shedding)));
        if !m.is_empty() {
            return m;
        }
    }
    Vec::new()
}

#[test]
fn every_shedder_moves_load_off_the_hot_broker() {
    for shedder in ShedderKind::ALL {
        let (mut leader, _) = hot_owner(shedder);
        let m = first_moves(&mut leader);
        assert!(!m.is_empty(), "{shedder}: no move");
        for (bundle, dest, cause) in &m {
            assert_eq!(*cause, AssignmentCause::Shedding, "{shedder}: {bundle}");
            assert_ne!(dest, "b1:8080", "{shedder}: {bundle}");
        }
        assert_eq!(leader.status().moves_started, m.len() as u64);
    }
}

#[test]
fn shedding_waits_while_a_move_is_in_flight_and_until_reports_show_it() {
    let (mut leader, all) = hot_owner(ShedderKind::AvgShedder);
    let m = first_moves(&mut leader);
    assert!(!m.is_empty());
    let t = leader.shedding_ticks() as i64 * 60_000;
    // In flight: the next tick starts nothing.
    assert!(moves(&drive(&mut leader, t + 60_000, Event::Tick(Tick::Shedding))).is_empty());
    // The destinations take the bundles: the records are marked assigned.
    for (bundle, dest, _) in &m {
        let out = drive(
            &mut leader,
            t + 61_000,
            Event::OwnerSeen {
                bundle: bundle.clone(),
                owner: OwnerSeen {
                    broker: dest.clone(),
                    disabled: false,
                },
            },
        );
        assert!(out
            .iter()
            .any(|c| matches!(c, Command::WriteRecord { record, .. }
            if record.bundle == *bundle && record.state == AssignmentState::Assigned)));
    }
    assert_eq!(leader.status().moves_completed, m.len() as u64);
    // Completed but not reported yet: still waiting.
    let out = drive(&mut leader, t + 120_000, Event::Tick(Tick::Shedding));
    assert!(moves(&out).is_empty());
    assert!(out.iter().any(
        |c| matches!(c, Command::Log { message, .. } if message.contains("not reported yet"))
    ));
    // Once both sides report it, the wait ends.
    let moved: Vec<&str> = m.iter().map(|(b, _, _)| b.as_str()).collect();
    let kept: Vec<(&str, f64)> = all[..5]
        .iter()
        .filter(|b| !moved.contains(&b.as_str()))
        .map(|b| (b.as_str(), 3000.0))
        .collect();
    drive(
        &mut leader,
        t + 121_000,
        Event::Report {
            broker: "b1:8080".into(),
            report: Ok(report(&kept, 60.0)),
        },
    );
    for dest in ["b2:8080", "b3:8080"] {
        let mine: Vec<(&str, f64)> = m
            .iter()
            .filter(|(_, d, _)| d == dest)
            .map(|(b, _, _)| (b.as_str(), 3000.0))
            .collect();
        drive(
            &mut leader,
            t + 121_000,
            Event::Report {
                broker: dest.into(),
                report: Ok(report(&mine, 30.0)),
            },
        );
    }
    let out = drive(&mut leader, t + 180_000, Event::Tick(Tick::Shedding));
    assert!(!out.iter().any(
        |c| matches!(c, Command::Log { message, .. } if message.contains("not reported yet"))
    ));
}

#[test]
fn a_lookup_is_answered_once_its_record_is_written() {
    let (mut leader, all) = hot_owner(ShedderKind::AvgShedder);
    let topic = "persistent://t/n/some-topic";
    let out = drive(
        &mut leader,
        1_000,
        Event::Request {
            id: 7,
            request: Request::Lookup {
                topic: topic.into(),
            },
        },
    );
    let a = answers(&out);
    assert_eq!(a.len(), 1);
    assert!(a[0].1.ok, "{:?}", a[0]);
    let bundle = a[0].1.result["bundle"].as_str().unwrap().to_owned();
    assert!(all.contains(&bundle));
    // The answer follows the record write.
    let w = out
        .iter()
        .position(|c| matches!(c, Command::WriteRecord { .. }));
    let ans = out
        .iter()
        .position(|c| matches!(c, Command::Answer { .. }))
        .unwrap();
    if !all[..5].contains(&bundle) {
        assert!(w.unwrap() < ans);
        assert_eq!(moves(&out)[0].2, AssignmentCause::Lookup);
        // A second lookup answers the record in flight, without a write.
        let again = drive(
            &mut leader,
            1_001,
            Event::Request {
                id: 8,
                request: Request::Lookup {
                    topic: topic.into(),
                },
            },
        );
        assert!(moves(&again).is_empty());
        assert!(answers(&again)[0].1.message.contains("being assigned"));
    }
}

#[test]
fn a_conflicting_record_write_is_read_again_and_the_request_refused() {
    let (mut leader, all) = hot_owner(ShedderKind::AvgShedder);
    let bundle = all[10].clone();
    let out = drive_with(&mut leader, 1_000, assign(1, &bundle), |c| {
        matches!(c, Command::WriteRecord { .. }).then_some(Outcome::Conflict)
    });
    assert!(out.contains(&Command::Reread(Reread::Record(bundle.clone()))));
    let a = answers(&out);
    assert!(
        !a[0].1.ok && a[0].1.message.contains("changed meanwhile"),
        "{a:?}"
    );
    assert!(
        !leader.records().contains_key(&bundle),
        "the tentative record is dropped"
    );
    assert_eq!(leader.status().moves_started, 0);
}

#[test]
fn a_gone_broker_s_bundles_are_reassigned_and_its_time_average_deleted() {
    let (mut leader, all) = hot_owner(ShedderKind::AvgShedder);
    // The flush writes b1's time average; then b1 goes.
    let out = drive(&mut leader, 900_000, Event::Tick(Tick::Flush));
    assert!(out.iter().any(|c| matches!(c, Command::Flush { writes, .. }
        if writes.iter().any(|(n, _)| *n == FlushedNode::TimeAverage("b1:8080".into())))));
    let out = drive(&mut leader, 901_000, gone("b1:8080"));
    let m = moves(&out);
    assert_eq!(m.len(), 5, "{out:?}");
    for (b, dest, cause) in &m {
        assert!(all[..5].contains(b));
        assert_ne!(dest, "b1:8080");
        assert_eq!(*cause, AssignmentCause::Orphan);
    }
    assert!(out.iter().any(|c| matches!(c, Command::Delete { node, .. }
        if *node == FlushedNode::TimeAverage("b1:8080".into()))));
}

#[test]
fn reports_before_the_first_cycle_use_the_configured_ema_settings() {
    let mut settings = Settings::default();
    settings.load_balancer_load_shedding_strategy = ShedderKind::TransferShedder;
    settings.load_balancer_history_resource_percentage = 0.5;
    let mut leader = Leader::new("b1:8080", settings, 1, 0);
    drive(&mut leader, 0, Event::Loaded(Box::default()));
    for cpu in [80.0, 20.0, 20.0] {
        drive(
            &mut leader,
            1,
            Event::Report {
                broker: "b1:8080".into(),
                report: Ok(report(&[], cpu)),
            },
        );
    }
    // 0.8 → 0.5 × 0.8 + 0.5 × 0.2 = 0.5 → 0.35 (Pulsar's default 0.9 would give 0.692).
    let ema = leader.load().broker("b1:8080").unwrap().extensible;
    assert!((ema.weighted_max_ema - 0.35).abs() < 1e-12, "{ema:?}");
}

#[test]
fn unloading_a_namespace_answers_once_every_move_is_written() {
    let (mut leader, all) = hot_owner(ShedderKind::AvgShedder);
    let out = drive(
        &mut leader,
        1_000,
        Event::Request {
            id: 9,
            request: Request::UnloadNamespace {
                namespace: NS.into(),
            },
        },
    );
    let m = moves(&out);
    assert_eq!(m.len(), 5);
    assert!(m
        .iter()
        .all(|(b, d, c)| all[..5].contains(b) && d != "b1:8080" && *c == AssignmentCause::Unload));
    let a = answers(&out);
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].0, 9);
    assert_eq!(a[0].1.message, "unloading 5 bundle(s) of t/n");
    let last_write = out
        .iter()
        .rposition(|c| matches!(c, Command::WriteRecord { .. }))
        .unwrap();
    let ans = out
        .iter()
        .position(|c| matches!(c, Command::Answer { .. }))
        .unwrap();
    assert!(last_write < ans);
}

#[test]
fn a_registration_that_is_not_a_live_broker_s_report_is_no_broker() {
    let mut leader = Leader::new("b1:8080", Settings::default(), 1, 0);
    let state = LoadedState {
        namespaces: vec![namespace(vec![0, 0x8000_0000, 0xffff_ffff])],
        reports: vec![
            ("b1:8080".into(), Ok(report(&[], 90.0))),
            (
                "ghost:9".into(),
                Err("not an ephemeral node, so not a live broker's registration".into()),
            ),
        ],
        ..Default::default()
    };
    let out = drive(&mut leader, 0, Event::Loaded(Box::new(state)));
    assert!(out.iter().any(|c| matches!(c, Command::Log { message, .. }
        if message.contains("ghost:9") && message.contains("not an ephemeral node"))));
    assert_eq!(leader.status().malformed_reports, 1);
    // A later report of the ghost does not make it one either; the lookups all land on b1. The new count is
    // written at once, not with the next flush that has bundle data.
    let out = drive(
        &mut leader,
        1,
        Event::Report {
            broker: "ghost:9".into(),
            report: Err("not an ephemeral node, so not a live broker's registration".into()),
        },
    );
    assert!(
        out.iter().any(|c| matches!(c, Command::WriteStatus(s)
            if s.malformed_reports == 2 && s.updated_ms == 1)),
        "{out:?}"
    );
    for (i, range) in ["0x00000000_0x80000000", "0x80000000_0xffffffff"]
        .iter()
        .enumerate()
    {
        let bundle = format!("{NS}/{range}");
        let out = drive(
            &mut leader,
            2,
            Event::Request {
                id: i as u64,
                request: Request::Assign { bundle },
            },
        );
        assert_eq!(moves(&out)[0].1, "b1:8080", "{out:?}");
    }
}

#[test]
fn an_ownership_node_naming_no_broker_is_not_believed_and_is_removed_after_the_session_timeout() {
    let (mut leader, all) = hot_owner(ShedderKind::AvgShedder);
    let bundle = all[12].clone();
    drive(
        &mut leader,
        1_000,
        Event::OwnerSeen {
            bundle: bundle.clone(),
            owner: OwnerSeen {
                broker: "ghost:8080".into(),
                disabled: false,
            },
        },
    );
    // A lookup does not answer the ghost: the bundle is placed on a broker.
    let out = drive(&mut leader, 1_001, assign(1, &bundle));
    let a = answers(&out);
    assert!(a[0].1.ok, "{a:?}");
    assert_ne!(a[0].1.result["broker"], "ghost:8080");
    // The node is deleted once it has named no broker for the session timeout (30 s).
    let timeout = Settings::default().metadata_store_session_timeout_millis;
    let early = drive(
        &mut leader,
        1_000 + timeout - 1,
        Event::Tick(Tick::Shedding),
    );
    assert!(!early
        .iter()
        .any(|c| matches!(c, Command::DeleteOwnership { .. })));
    let late = drive(&mut leader, 1_000 + timeout, Event::Tick(Tick::Shedding));
    assert!(
        late.iter().any(
            |c| matches!(c, Command::DeleteOwnership { bundle: b, owner, .. }
            if *b == bundle && owner == "ghost:8080")
        ),
        "{late:?}"
    );
}

#[test]
fn a_move_whose_destination_never_takes_the_bundle_gets_another_destination() {
    let (mut leader, all) = hot_owner(ShedderKind::AvgShedder);
    let bundle = all[14].clone();
    let out = drive(&mut leader, 1_000, assign(1, &bundle));
    let first = moves(&out)[0].1.clone();
    let limit = Settings::default().namespace_bundle_unloading_timeout_ms;
    // Within the limit nothing changes; after it, a replacement move to another broker.
    assert!(moves(&drive(
        &mut leader,
        1_000 + limit,
        Event::Tick(Tick::Shedding)
    ))
    .is_empty());
    let out = drive(&mut leader, 1_001 + limit, Event::Tick(Tick::Shedding));
    let m = moves(&out);
    assert_eq!(m.len(), 1, "{out:?}");
    assert_eq!(m[0].0, bundle);
    assert_ne!(m[0].1, first);
    assert_eq!(m[0].2, AssignmentCause::Replaced);
}

/// The core's decisions must not depend on when a write's outcome comes back (the runtime hands it a run of
/// events before their outcomes): a move's destination counts in placement from the moment its record is
/// asked for, and a write that fails takes that back.
#[test]
fn a_move_is_preallocated_when_asked_for_and_a_failed_write_takes_it_back() {
    let (mut leader, _) = hot_owner(ShedderKind::AvgShedder);
    let mut writes = Vec::new();
    for k in 1..=10 {
        let out = leader.handle(k * 60_000, Event::Tick(Tick::Shedding));
        writes = out
            .into_iter()
            .filter_map(|c| match c {
                Command::WriteRecord { ticket, record, .. }
                    if record.state == AssignmentState::Assigning =>
                {
                    Some((ticket, record))
                }
                _ => None,
            })
            .collect();
        if !writes.is_empty() {
            break;
        }
    }
    assert!(!writes.is_empty(), "no move started");
    for (_, record) in &writes {
        assert_eq!(
            leader.load().preallocation(&record.bundle),
            Some(record.destination.as_str()),
            "{} is preallocated before its outcome",
            record.bundle
        );
    }
    for (ticket, _) in &writes {
        leader.handle(
            11 * 60_000,
            Event::Done {
                ticket: *ticket,
                outcome: Outcome::Failed("the store is down".into()),
            },
        );
    }
    for (_, record) in &writes {
        assert_eq!(
            leader.load().preallocation(&record.bundle),
            None,
            "the failed move of {} is no longer preallocated",
            record.bundle
        );
    }
    assert_eq!(leader.status().moves_started, 0);
}

/// The record of a placement says whether the destination may skip listing the namespace's ownership nodes:
/// only when this leader knows of no other range of the namespace that overlaps the bundle.
#[test]
fn a_placement_tells_the_destination_when_no_overlapping_range_can_be_owned() {
    let (mut leader, all) = hot_owner(ShedderKind::AvgShedder);
    let assign = |leader: &mut Leader, id: RequestId, bundle: &str| {
        let out = drive(
            leader,
            1_000,
            Event::Request {
                id,
                request: Request::Assign {
                    bundle: bundle.into(),
                },
            },
        );
        out.into_iter()
            .find_map(|c| match c {
                Command::WriteRecord { record, .. } if record.bundle == bundle => Some(record),
                _ => None,
            })
            .expect("a record is written")
    };
    // Owners and records of the namespace's other bundles do not overlap this one.
    let free = assign(&mut leader, 1, &all[10]);
    assert!(free.no_overlap, "{free:?}");
    // A split parent of bundles 12 and 13 still owned: the destination must look.
    let parent = format!("{NS}/0x{:08x}_0x{:08x}", 12u64 << 28, 14u64 << 28);
    drive(
        &mut leader,
        1_000,
        Event::OwnerSeen {
            bundle: parent,
            owner: OwnerSeen {
                broker: "b2:8080".into(),
                disabled: false,
            },
        },
    );
    let child = assign(&mut leader, 2, &all[13]);
    assert!(!child.no_overlap, "{child:?}");
    // A bundle of the same namespace beside the parent is not affected.
    let beside = assign(&mut leader, 3, &all[14]);
    assert!(beside.no_overlap, "{beside:?}");
    // The completed record keeps the hint for a later acquisition (its destination restarted).
    let done = drive(
        &mut leader,
        2_000,
        Event::OwnerSeen {
            bundle: all[10].clone(),
            owner: OwnerSeen {
                broker: free.destination.clone(),
                disabled: false,
            },
        },
    );
    let completed = done
        .iter()
        .find_map(|c| match c {
            Command::WriteRecord { record, .. } if record.state == AssignmentState::Assigned => {
                Some(record)
            }
            _ => None,
        })
        .expect("the move completes");
    assert!(completed.no_overlap, "{completed:?}");
}

/// A node of a range that is no longer a bundle (a split parent left behind, or restored by a store for a
/// session that held it before the split) withdraws the `noOverlap` hint of every record it overlaps, whether
/// the record's move is in flight or done; records beside it keep theirs.
#[test]
fn an_owned_older_range_withdraws_the_hints_of_the_records_it_overlaps() {
    let (mut leader, all) = hot_owner(ShedderKind::AvgShedder);
    let mut hinted = Vec::new();
    for (id, i) in [(1, 12usize), (2, 13), (3, 14)] {
        let out = drive(
            &mut leader,
            1_000,
            Event::Request {
                id,
                request: Request::Assign {
                    bundle: all[i].clone(),
                },
            },
        );
        let record = out
            .into_iter()
            .find_map(|c| match c {
                Command::WriteRecord { record, .. } if record.bundle == all[i] => Some(record),
                _ => None,
            })
            .expect("a record is written");
        assert!(record.no_overlap, "{record:?}");
        hinted.push(record);
    }
    // Bundle 12's move completes: the completed record keeps the hint.
    let done = drive(
        &mut leader,
        2_000,
        Event::OwnerSeen {
            bundle: all[12].clone(),
            owner: OwnerSeen {
                broker: hinted[0].destination.clone(),
                disabled: false,
            },
        },
    );
    assert!(done.iter().any(|c| matches!(c,
        Command::WriteRecord { record, .. }
            if record.bundle == all[12] && record.state == AssignmentState::Assigned && record.no_overlap)));
    let parent = format!("{NS}/0x{:08x}_0x{:08x}", 12u64 << 28, 14u64 << 28);
    let out = drive(
        &mut leader,
        3_000,
        Event::OwnerSeen {
            bundle: parent,
            owner: OwnerSeen {
                broker: "b2:8080".into(),
                disabled: false,
            },
        },
    );
    let mut cleared: Vec<&str> = out
        .iter()
        .filter_map(|c| match c {
            Command::WriteRecord { record, .. } if !record.no_overlap => {
                Some(record.bundle.as_str())
            }
            _ => None,
        })
        .collect();
    cleared.sort();
    assert_eq!(cleared, vec![all[12].as_str(), all[13].as_str()]);
    assert!(!out.iter().any(|c| matches!(c,
        Command::WriteRecord { record, .. } if record.bundle == all[14])));
}

/// The instants of the wakes of `tick` among `commands`.
fn wakes_of(commands: &[Command], tick: Tick) -> Vec<i64> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::Wake { at, tick: t } if *t == tick => Some(*at),
            _ => None,
        })
        .collect()
}

/// A lookup request for `bundle`.
fn assign(id: u64, bundle: &str) -> Event {
    Event::Request {
        id,
        request: Request::Assign {
            bundle: bundle.to_owned(),
        },
    }
}
