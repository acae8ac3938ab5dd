//! Cycle-level tests: the common shedding filters, multi-cycle behaviour and property tests.

use std::collections::BTreeSet;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::placement::{self, filters, PlacementContext};
use super::policies::{IsolationPolicy, NamespacePolicy};
use super::*;
use crate::config::{PlacementKind, Settings, ShedderKind};
use crate::model::{BundleData, LocalBrokerData, ResourceUsage, MODULAR_LOAD_MANAGER_CLASS};

const NOW: i64 = 1_700_000_000_000;

fn broker(cpu: f64, rate: f64, bundles: &[&str]) -> LocalBrokerData {
    LocalBrokerData {
        cpu: ResourceUsage::new(cpu, 100.0),
        msg_rate_in: rate,
        msg_rate_out: rate,
        msg_throughput_in: rate * 1000.0,
        msg_throughput_out: rate * 1000.0,
        bundles: bundles.iter().map(|b| b.to_string()).collect(),
        load_manager_class_name: Some(MODULAR_LOAD_MANAGER_CLASS.into()),
        last_update: NOW - 1000,
        ..Default::default()
    }
}

fn bundle(rate: f64) -> BundleData {
    let mut d = BundleData::default();
    for w in [&mut d.short_term_data, &mut d.long_term_data] {
        w.msg_rate_in = rate;
        w.msg_rate_out = rate;
        w.msg_throughput_in = rate * 1000.0;
        w.msg_throughput_out = rate * 1000.0;
    }
    d
}

/// broker-1 hot (cpu 90, 4 bundles of 2000 msg/s each way), broker-2 idle.
fn hot_cold() -> LoadData {
    let names = [
        "t/a/0x00000000_0x40000000",
        "t/a/0x40000000_0x80000000",
        "t/b/0x00000000_0x80000000",
        "t/b/0x80000000_0xffffffff",
    ];
    let mut ld = LoadData::new();
    ld.insert_broker("broker-1:8080", broker(90.0, 8000.0, &names));
    ld.insert_broker("broker-2:8080", broker(10.0, 0.0, &[]));
    for n in names {
        ld.set_bundle(n, bundle(2000.0));
    }
    ld
}

fn cycle(ld: &mut LoadData, s: &Settings, p: &ClusterPolicies, st: &mut Strategies) -> Plan {
    run_shedding_cycle(ld, s, p, st, NOW, &mut StdRng::seed_from_u64(3))
}

#[test]
fn avg_shedder_end_to_end_plan() {
    let mut ld = hot_cold();
    let s = Settings::default();
    let mut st = Strategies::from_settings(&s);
    let p = ClusterPolicies::none();
    assert!(cycle(&mut ld, &s, &p, &mut st).unloads.is_empty());
    let plan = cycle(&mut ld, &s, &p, &mut st);
    // (16000 − 0) × 0.5 = 8000 msg/s; bundles of 4000: two of them, planned to broker-2.
    assert_eq!(plan.unloads.len(), 2);
    for u in &plan.unloads {
        assert_eq!(u.source, "broker-1:8080");
        assert_eq!(u.destination.as_deref(), Some("broker-2:8080"));
        assert_eq!(u.strategy, "AvgShedder");
    }
    assert_eq!(
        plan.unloads[0].reason,
        "AvgShedder: broker-1:8080 score 90.0 vs broker-2:8080 10.0, gap 80.0 >= 40.0 for 2 checks; move 8000.0 msg/s; bundle 4000.0 msg/s; destination: AvgShedder: planned destination broker-2:8080 (score 10.0)"
    );
}

#[test]
fn common_filters() {
    let p = ClusterPolicies::none();
    // Shedding disabled.
    let mut s = Settings::default();
    s.load_balancer_shedding_enabled = false;
    let mut st = Strategies::new(
        ShedderKind::OverloadShedder,
        PlacementKind::LeastLongTermMessageRate,
        false,
    );
    let plan = cycle(&mut hot_cold(), &s, &p, &mut st);
    assert!(plan.unloads.is_empty());
    assert!(plan.skipped[0]
        .reason
        .contains("loadBalancerSheddingEnabled"));
    // One broker only.
    let mut one = hot_cold();
    one.remove_broker("broker-2:8080");
    let plan = cycle(&mut one, &Settings::default(), &p, &mut st);
    assert_eq!(plan.skipped[0].reason, "no shedding: 1 broker(s) available");
    // Excluded namespace.
    let mut s = Settings::default();
    s.load_balancer_shedding_excluded_namespaces
        .insert("t/a".into());
    let plan = cycle(&mut hot_cold(), &s, &p, &mut st);
    assert!(plan.unloads.iter().all(|u| !u.bundle.starts_with("t/a/")));
    assert!(
        plan.skipped.iter().any(|k| k
            .reason
            .contains("is in loadBalancerSheddingExcludedNamespaces")),
        "{:?}",
        plan.skipped
    );
    // Nowhere else to go: namespace t/a is isolated to broker-1 only.
    let iso = ClusterPolicies {
        isolation: vec![
            IsolationPolicy::new("a", &["t/a".into()], &["broker-1".into()], &[], 1).unwrap(),
        ],
        ..Default::default()
    };
    let plan = cycle(&mut hot_cold(), &Settings::default(), &iso, &mut st);
    assert!(plan.unloads.iter().all(|u| !u.bundle.starts_with("t/a/")));
    assert!(plan
        .skipped
        .iter()
        .any(|k| k.reason == "no unload: the namespace policies allow no other broker"));
}

#[test]
fn grace_period_blocks_then_expires() {
    let p = ClusterPolicies::none();
    let s = Settings::default();
    let mut st = Strategies::new(
        ShedderKind::OverloadShedder,
        PlacementKind::LeastLongTermMessageRate,
        false,
    );
    let mut ld = hot_cold();
    for b in ld.bundle_names().into_iter().cloned().collect::<Vec<_>>() {
        ld.record_unload(&b, NOW - 29 * 60_000);
    }
    let plan = cycle(&mut ld, &s, &p, &mut st);
    assert!(plan.unloads.is_empty(), "{:?}", plan.unloads);
    let plan = run_shedding_cycle(
        &mut ld,
        &s,
        &p,
        &mut st,
        NOW + 2 * 60_000,
        &mut StdRng::seed_from_u64(3),
    );
    assert!(!plan.unloads.is_empty(), "grace period over");
    assert!(ld.recently_unloaded.is_empty(), "pruned");
}

#[test]
fn destination_equal_to_source_is_skipped() {
    // ThresholdShedder sheds broker-1, but LeastLongTermMessageRate sees broker-1 with the lowest long-term
    // rate (its time average is 0 in this fixture) and broker-2 busier: the unload is dropped.
    let mut ld = hot_cold();
    ld.broker_mut("broker-2:8080")
        .unwrap()
        .time_average
        .long_term_msg_rate_in = 1e6;
    ld.broker_mut("broker-1:8080").unwrap().time_average = Default::default();
    ld.broker_mut("broker-1:8080").unwrap().local.cpu = ResourceUsage::new(80.0, 100.0);
    let mut s = Settings::default();
    s.load_balancer_bundle_unload_min_throughput_threshold = 1.0;
    let mut st = Strategies::new(
        ShedderKind::ThresholdShedder,
        PlacementKind::LeastLongTermMessageRate,
        false,
    );
    let (plan, candidates) = run_shedding_cycle_with_candidates(
        &mut ld,
        &s,
        &ClusterPolicies::none(),
        &mut st,
        NOW,
        &mut StdRng::seed_from_u64(3),
    );
    assert!(plan.unloads.is_empty(), "{:?}", plan.unloads);
    let dropped: Vec<&Skipped> = plan
        .skipped
        .iter()
        .filter(|k| k.dropped.is_some())
        .collect();
    assert!(!dropped.is_empty(), "{:?}", plan.skipped);
    for k in &dropped {
        assert_eq!(k.dropped, Some(Dropped::CurrentOwner));
        assert!(
            k.reason
                .contains("placement chose the current owner broker-1:8080"),
            "{}",
            k.reason
        );
    }
    // The shedder's own choice is still visible: every proposal, each marked with the step that dropped it.
    let proposed: Vec<(&str, &str, Option<Dropped>)> = candidates
        .iter()
        .map(|c| (c.bundle.as_str(), c.source.as_str(), c.dropped))
        .collect();
    let expected: Vec<(&str, &str, Option<Dropped>)> = dropped
        .iter()
        .map(|k| {
            (
                k.subject.as_str(),
                "broker-1:8080",
                Some(Dropped::CurrentOwner),
            )
        })
        .collect();
    assert_eq!(proposed, expected);
}

#[test]
fn every_dropped_proposal_names_its_step() {
    // Grace period and a duplicate proposal: both are dropped candidates with their step.
    let mut ld = hot_cold();
    let s = Settings::default();
    let mut st = Strategies::new(
        ShedderKind::OverloadShedder,
        PlacementKind::LeastLongTermMessageRate,
        false,
    );
    let first = cycle(&mut ld, &s, &ClusterPolicies::none(), &mut st);
    assert_eq!(first.unloads.len(), 1, "{:?}", first.skipped);
    let bundle = first.unloads[0].bundle.clone();
    ld.record_unload(&bundle, NOW);
    let mut proposals = vec![super::shedding::Candidate {
        bundle: bundle.clone(),
        source: "broker-1:8080".into(),
        planned: None,
        binding: false,
        reason: "r".into(),
    }];
    proposals.push(proposals[0].clone());
    let none = ClusterPolicies::none();
    let ctx = PlacementContext::new(&ld, &s, &none);
    let mut rng = StdRng::seed_from_u64(3);
    let got: Vec<Option<Dropped>> = proposals
        .iter()
        .enumerate()
        .map(|(i, c)| {
            super::cycle::decide(&ctx, &mut st.placement, &mut rng, c, i == 0, false)
                .err()
                .map(|(d, _)| d)
        })
        .collect();
    assert_eq!(
        got,
        [Some(Dropped::GracePeriod), Some(Dropped::GracePeriod)]
    );
    ld.recently_unloaded.clear();
    let ctx = PlacementContext::new(&ld, &s, &none);
    let second = super::cycle::decide(
        &ctx,
        &mut st.placement,
        &mut rng,
        &proposals[1],
        false,
        false,
    );
    assert_eq!(second.err().map(|(d, _)| d), Some(Dropped::Duplicate));
}

#[test]
fn transfer_shedder_in_the_cycle_keeps_its_destination() {
    let mut ld = LoadData::new();
    for (i, cpu) in [(1, 2.0), (2, 90.0)] {
        let mut b = broker(cpu, 0.0, &[]);
        for j in 0..3 {
            let name = format!("t/n{i}/0x0000000{j}_0x0000000{}", j + 1);
            b.last_stats.insert(
                name.clone(),
                crate::model::NamespaceBundleStats {
                    msg_throughput_out: 1e6 * (j + 1) as f64,
                    ..Default::default()
                },
            );
            b.bundles.insert(name);
        }
        b.msg_throughput_out = 6e6;
        ld.insert_broker(&format!("broker-{i}:8080"), b);
    }
    let mut s = Settings::default();
    s.load_balancer_shedding_condition_hit_count_threshold = 0;
    let mut st = Strategies::new(
        ShedderKind::TransferShedder,
        PlacementKind::LeastResourceUsageWithWeight,
        true,
    );
    let plan = cycle(&mut ld, &s, &ClusterPolicies::none(), &mut st);
    assert!(!plan.unloads.is_empty());
    assert!(plan
        .unloads
        .iter()
        .all(|u| u.destination.as_deref() == Some("broker-1:8080")));
    assert!(
        plan.unloads[0]
            .reason
            .ends_with("destination: transfer to broker-1:8080"),
        "{}",
        plan.unloads[0].reason
    );
}

fn extensible() -> Strategies {
    Strategies::new(
        ShedderKind::TransferShedder,
        PlacementKind::LeastResourceUsageWithWeight,
        true,
    )
}

#[test]
fn extensible_assignment_has_no_even_distribution_step() {
    // a is idle and owns three `pulsar/system` bundles, b is at 50 % and owns none. The modular pipeline narrows
    // a `pulsar/system` bundle to the brokers owning the fewest of the namespace (b); Pulsar's extensible
    // selectAsync has no such step, and LeastResourceUsageWithWeight picks a (0 + 10 % <= avg 25 %).
    let sys = [
        "pulsar/system/0x00000000_0x40000000",
        "pulsar/system/0x40000000_0x80000000",
        "pulsar/system/0x80000000_0xc0000000",
    ];
    let mut ld = LoadData::new();
    ld.insert_broker("a:8080", broker(0.0, 0.0, &sys));
    ld.insert_broker("b:8080", broker(50.0, 0.0, &[]));
    let mut st = extensible();
    let a = placement::assign_bundle(
        &mut ld,
        &Settings::default(),
        &ClusterPolicies::none(),
        &mut st.placement,
        "pulsar/system/0xc0000000_0xffffffff",
        &mut StdRng::seed_from_u64(1),
    )
    .unwrap();
    assert_eq!(a.broker, "a:8080", "{}", a.reason);
}

#[test]
fn extensible_assignment_keeps_its_pick_when_it_is_overloaded() {
    // a at 90 % is the only broker left after BrokerMaxTopicCountFilter (b has 60000 topics). The modular
    // overload re-check would draw again over the policy candidates and bring b back; Pulsar keeps a.
    let mut ld = LoadData::new();
    ld.insert_broker("a:8080", broker(90.0, 0.0, &[]));
    let mut b = broker(0.0, 0.0, &[]);
    b.num_topics = 60_000;
    ld.insert_broker("b:8080", b);
    let mut st = extensible();
    let a = placement::assign_bundle(
        &mut ld,
        &Settings::default(),
        &ClusterPolicies::none(),
        &mut st.placement,
        "t/n/0x00000000_0xffffffff",
        &mut StdRng::seed_from_u64(1),
    )
    .unwrap();
    assert_eq!(a.broker, "a:8080", "{}", a.reason);
}

/// TransferShedderTest's shape: cpu 2, 4, 6, 80, 90 %, two bundles each, one namespace per broker.
fn transfer_cluster() -> LoadData {
    let mut ld = LoadData::new();
    for (i, cpu, l1, l2) in [
        (1, 2.0, 1e6, 2e6),
        (2, 4.0, 1e6, 3e6),
        (3, 6.0, 2e6, 4e6),
        (4, 80.0, 2e6, 6e6),
        (5, 90.0, 2e6, 7e6),
    ] {
        let mut b = broker(cpu, 0.0, &[]);
        for (range, tp) in [("0x00000000_0x0fffffff", l1), ("0x0fffffff_0xffffffff", l2)] {
            let name = format!("t/ns{i}/{range}");
            b.last_stats.insert(
                name.clone(),
                crate::model::NamespaceBundleStats {
                    msg_throughput_out: tp,
                    ..Default::default()
                },
            );
            b.bundles.insert(name);
        }
        b.msg_throughput_in = 0.0;
        b.msg_throughput_out = l1 + l2;
        ld.insert_broker(&format!("broker{i}:8080"), b);
    }
    ld
}

#[test]
fn transfer_shedder_decisions_skip_the_modular_unload_checks() {
    // Every broker owns one namespace of anti-affinity group g and shedding bundles with policies is on. The
    // modular shouldAntiAffinityNamespaceUnload would refuse every move (all candidates own the least, 1);
    // Pulsar's extensible UnloadScheduler runs TransferShedder's decisions as they are.
    let mut ld = transfer_cluster();
    let mut p = ClusterPolicies::none();
    for i in 1..=5 {
        p.namespaces.insert(
            format!("t/ns{i}"),
            NamespacePolicy {
                bundles: None,
                anti_affinity_group: Some("g".into()),
            },
        );
    }
    let mut s = Settings::default();
    s.load_balancer_shedding_condition_hit_count_threshold = 0;
    s.load_balancer_shedding_bundles_with_policies_enabled = true;
    let plan = cycle(&mut ld, &s, &p, &mut extensible());
    let moved: Vec<(&str, &str)> = plan
        .unloads
        .iter()
        .map(|u| (u.source.as_str(), u.destination.as_deref().unwrap()))
        .collect();
    assert_eq!(
        moved,
        [
            ("broker5:8080", "broker1:8080"),
            ("broker4:8080", "broker2:8080")
        ],
        "{:?}",
        plan.skipped
    );
}

#[test]
fn a_source_whose_unload_the_cycle_dropped_is_not_in_cool_down() {
    // Transfer disabled: x (55 %) offloads a small bundle to be placed by the cycle; m (50 %, no traffic) is
    // underloaded. No broker is 10 % below the average, so placement draws among both and picks x, the owner:
    // the unload is dropped. Pulsar records a broker in recentlyUnloadedBrokers only when an unload of it
    // completes, so the next cycle must not abort with CoolDown for x.
    let mut ld = LoadData::new();
    let mut x = broker(55.0, 0.0, &[]);
    for (range, tp) in [
        ("0x00000000_0x80000000", 1e4),
        ("0x80000000_0xffffffff", 99e4),
    ] {
        let name = format!("t/x/{range}");
        x.last_stats.insert(
            name.clone(),
            crate::model::NamespaceBundleStats {
                msg_throughput_out: tp,
                ..Default::default()
            },
        );
        x.bundles.insert(name);
    }
    x.msg_throughput_in = 0.0;
    x.msg_throughput_out = 1e6;
    ld.insert_broker("x:8080", x);
    let mut m = broker(50.0, 0.0, &[]);
    m.msg_throughput_in = 0.0;
    m.msg_throughput_out = 0.0;
    ld.insert_broker("m:8080", m);
    let mut s = Settings::default();
    s.load_balancer_shedding_condition_hit_count_threshold = 0;
    s.load_balancer_transfer_enabled = false;
    let p = ClusterPolicies::none();
    let mut st = extensible();
    let first = cycle(&mut ld, &s, &p, &mut st);
    assert!(first.unloads.is_empty(), "{:?}", first.unloads);
    assert!(
        first.skipped.iter().any(|k| k
            .reason
            .contains("placement chose the current owner x:8080")),
        "{:?}",
        first.skipped
    );
    let second = run_shedding_cycle(
        &mut ld,
        &s,
        &p,
        &mut st,
        NOW + 60_000,
        &mut StdRng::seed_from_u64(3),
    );
    assert!(
        second
            .skipped
            .iter()
            .all(|k| !k.reason.contains("CoolDown")),
        "{:?}",
        second.skipped
    );
}

/// A random small cluster: brokers with cpu and bundles, some bundles recently unloaded, namespace `t/iso`
/// isolated to a subset of brokers.
fn arb_cluster() -> impl Strategy<Value = (LoadData, Vec<usize>, u64, usize)> {
    (
        2usize..7,
        proptest::collection::vec((0u32..100, 0usize..6, 0u32..5000), 7),
        any::<u64>(),
        0usize..5,
        proptest::collection::vec(any::<bool>(), 7),
    )
        .prop_map(|(n, rows, seed, kind, iso)| {
            let mut ld = LoadData::new();
            let mut iso_brokers = Vec::new();
            for (i, (cpu, nb, rate)) in rows.into_iter().take(n).enumerate() {
                let id = format!("broker-{i}:8080");
                let mut names = Vec::new();
                let mut total = 0.0;
                for j in 0..nb {
                    let ns = if j % 3 == 0 { "t/iso" } else { "t/free" };
                    let name = format!(
                        "{ns}/0x{:08x}_0x{:08x}",
                        (i * 16 + j) as u64 * 0x100,
                        (i * 16 + j + 1) as u64 * 0x100
                    );
                    let r = (rate as f64) * (j + 1) as f64;
                    total += r;
                    ld.set_bundle(&name, bundle(r));
                    names.push(name);
                }
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let mut b = broker(cpu as f64, total, &refs);
                for name in &names {
                    b.last_stats.insert(
                        name.clone(),
                        crate::model::NamespaceBundleStats {
                            msg_throughput_out: total * 100.0 + 1.0,
                            ..Default::default()
                        },
                    );
                }
                ld.insert_broker(&id, b);
                if iso[i] {
                    iso_brokers.push(i);
                }
                if let Some(first) = names.first() {
                    if rate % 3 == 0 {
                        ld.record_unload(first, NOW - 60_000);
                    }
                }
            }
            (ld, iso_brokers, seed, kind)
        })
}

fn policies_for(iso: &[usize]) -> ClusterPolicies {
    let primary: Vec<String> = iso.iter().map(|i| format!("broker-{i}")).collect();
    ClusterPolicies {
        isolation: vec![IsolationPolicy::new("iso", &["t/iso".into()], &primary, &[], 1).unwrap()],
        ..Default::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn plans_are_safe_and_deterministic((ld, iso, seed, kind) in arb_cluster()) {
        let shedder = ShedderKind::ALL[kind];
        let policies = policies_for(&iso);
        let mut settings = Settings::default();
        settings.load_balancer_shedding_condition_hit_count_threshold = 0;
        settings.min_unload_message = 10;
        settings.load_balancer_bundle_unload_min_throughput_threshold = 0.0;
        let run = || {
            let mut load = ld.clone();
            let mut st = Strategies::new(shedder, shedder.default_placement(), shedder == ShedderKind::TransferShedder);
            let mut rng = StdRng::seed_from_u64(seed);
            let mut plans = Vec::new();
            for k in 0..3 {
                let now = NOW + k * 60_000;
                let before: BTreeSet<String> = {
                    let mut l = load.clone();
                    l.prune_recently_unloaded(now, 30 * 60_000);
                    l.recently_unloaded.keys().cloned().collect()
                };
                let plan = run_shedding_cycle(&mut load, &settings, &policies, &mut st, now, &mut rng);
                for u in &plan.unloads {
                    load.record_unload(&u.bundle, now);
                }
                plans.push((plan, before));
            }
            plans
        };
        let a = run();
        let b = run();
        prop_assert_eq!(&a.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(), &b.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>());
        let ctx = PlacementContext::new(&ld, &settings, &policies);
        for (plan, recently) in &a {
            for u in &plan.unloads {
                let dst = u.destination.as_deref().unwrap();
                prop_assert_ne!(dst, u.source.as_str());
                prop_assert!(!recently.contains(&u.bundle), "{} shed inside its grace period", u.bundle);
                let (eligible, _) = filters::namespace_policy_candidates(&ctx, &u.bundle);
                let ids: Vec<&str> = eligible.iter().map(|i| ctx.brokers[*i].id).collect();
                prop_assert!(ids.contains(&dst), "{} -> {} not eligible ({:?})", u.bundle, dst, ids);
            }
        }
    }
}
