//! Placement tests: Pulsar's ModularLoadManagerStrategyTest, LoadManagerShared and filter scenarios as facts.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;
use crate::core::policies::{IsolationPolicy, NamespacePolicy};
use crate::model::{LocalBrokerData, ResourceUsage, MODULAR_LOAD_MANAGER_CLASS};

fn broker(cpu: f64) -> LocalBrokerData {
    LocalBrokerData {
        cpu: ResourceUsage::new(cpu, 100.0),
        load_manager_class_name: Some(MODULAR_LOAD_MANAGER_CLASS.into()),
        ..Default::default()
    }
}

fn rng() -> StdRng {
    StdRng::seed_from_u64(1)
}

fn select(
    load: &LoadData,
    settings: &Settings,
    policies: &ClusterPolicies,
    state: &mut PlacementState,
    bundle: &str,
) -> Result<Selection, String> {
    let ctx = PlacementContext::new(load, settings, policies);
    select_broker(&ctx, state, bundle, None, None, &mut rng())
}

#[test]
fn least_long_term_message_rate() {
    // ModularLoadManagerStrategyTest.testLeastLongTermMessageRate.
    let mut load = LoadData::new();
    for (id, rate) in [("1", 100.0), ("2", 200.0), ("3", 300.0)] {
        load.insert_broker(id, broker(0.0));
        load.broker_mut(id)
            .unwrap()
            .time_average
            .long_term_msg_rate_in = rate;
    }
    let s = Settings::default();
    let p = ClusterPolicies::none();
    let mut state = PlacementState::new(Placement::LeastLongTermMessageRate);
    let pick = |load: &LoadData, state: &mut PlacementState| {
        select(load, &s, &p, state, "t/n/0x00000000_0xffffffff").unwrap()
    };
    let first = pick(&load, &mut state);
    assert_eq!(first.broker, "1");
    assert_eq!(
        first.reason,
        "LeastLongTermMessageRate: 1 has the lowest long-term rate 100.0 msg/s of 3 candidates"
    );
    load.broker_mut("1")
        .unwrap()
        .time_average
        .long_term_msg_rate_in = 400.0;
    assert_eq!(pick(&load, &mut state).broker, "2");
    // broker 2 at 90 % cpu is overloaded: score +inf.
    load.broker_mut("2").unwrap().local.cpu = ResourceUsage::new(90.0, 100.0);
    assert_eq!(pick(&load, &mut state).broker, "3");
}

#[test]
fn usage_weighting_of_the_seed_docs_is_a_setting() {
    // Broker A: 100 msg/s at 80 %; broker B: 200 msg/s at 20 %. Pulsar picks A; the documented weighting
    // scores A 100 / (0.85 − 0.8) = 2000 and B 200 / 0.65 ≈ 307.7 and picks B.
    let mut load = LoadData::new();
    load.insert_broker("a:1", broker(80.0));
    load.insert_broker("b:1", broker(20.0));
    load.broker_mut("a:1")
        .unwrap()
        .time_average
        .long_term_msg_rate_in = 100.0;
    load.broker_mut("b:1")
        .unwrap()
        .time_average
        .long_term_msg_rate_in = 200.0;
    let mut s = Settings::default();
    let p = ClusterPolicies::none();
    let mut state = PlacementState::new(Placement::LeastLongTermMessageRate);
    assert_eq!(
        select(&load, &s, &p, &mut state, "t/n/x").unwrap().broker,
        "a:1"
    );
    s.loadmgr_least_long_term_message_rate_usage_weighting = true;
    let sel = select(&load, &s, &p, &mut state, "t/n/x").unwrap();
    assert_eq!(sel.broker, "b:1");
    assert!(
        sel.reason.contains("(usage-weighted) 307.7 msg/s"),
        "{}",
        sel.reason
    );
}

fn lruww_broker(usage: f64) -> LocalBrokerData {
    let u = ResourceUsage::new(usage, 100.0);
    LocalBrokerData {
        cpu: u,
        memory: u,
        direct_memory: u,
        bandwidth_in: u,
        bandwidth_out: u,
        msg_rate_in: 100.0,
        msg_rate_out: 100.0,
        bundles: ["0x00000000_0xffffffff".to_string()].into(),
        load_manager_class_name: Some(MODULAR_LOAD_MANAGER_CLASS.into()),
        ..Default::default()
    }
}

fn lruww_settings() -> Settings {
    let mut s = Settings::default();
    s.load_balancer_cpu_resource_weight = 1.0;
    s.load_balancer_memory_resource_weight = 0.1;
    s.load_balancer_direct_memory_resource_weight = 0.1;
    s.load_balancer_bandwidth_in_resource_weight = 1.0;
    s.load_balancer_bandwidth_out_resource_weight = 1.0;
    s.load_balancer_history_resource_percentage = 0.5;
    s.load_balancer_average_resource_usage_difference_threshold_percentage = 5;
    s
}

#[test]
fn least_resource_usage_with_weight_sequence() {
    // ModularLoadManagerStrategyTest.testLeastResourceUsageWithWeight, step by step.
    let s = lruww_settings();
    let p = ClusterPolicies::none();
    let mut strategy = LeastResourceUsage::default();
    let mut load = LoadData::new();
    for (id, u) in [("1", 10.0), ("2", 30.0), ("3", 60.0), ("4", 5.0)] {
        load.insert_broker(id, lruww_broker(u));
    }
    let all: Vec<usize> = (0..4).collect();
    let three: Vec<usize> = (0..3).collect();
    {
        let ctx = PlacementContext::new(&load, &s, &p);
        strategy.select(&ctx, &all, &mut rng()).unwrap();
        assert_eq!(strategy.select(&ctx, &three, &mut rng()).unwrap().0, 0);
    }
    let steps: [([f64; 3], usize); 5] = [
        ([20.0, 30.0, 50.0], 0),
        ([30.0, 30.0, 40.0], 0),
        ([30.0, 30.0, 40.0], 0),
        ([35.0, 20.0, 45.0], 1),
        ([35.0, 20.0, 0.0], 2),
    ];
    for (k, (usages, want)) in steps.iter().enumerate() {
        for (i, u) in usages.iter().enumerate() {
            let mut b = lruww_broker(*u);
            if k == 4 && i == 2 {
                // A restarted broker: no bundles, its history is discarded.
                b.bundles.clear();
            }
            load.insert_broker(&(i + 1).to_string(), b);
        }
        let ctx = PlacementContext::new(&load, &s, &p);
        let (pick, reason) = strategy.select(&ctx, &three, &mut rng()).unwrap();
        assert_eq!(pick, *want, "step {k}: {reason}");
    }
    assert!((strategy.usage("3").unwrap() - 0.0).abs() < 1e-12);
}

#[test]
fn least_resource_usage_with_preset_history() {
    // testLeastResourceUsageWithWeightWithArithmeticException: broker 3 has no history.
    let s = lruww_settings();
    let p = ClusterPolicies::none();
    let mut load = LoadData::new();
    for (id, u) in [("1", 10.0), ("2", 30.0), ("3", 60.0), ("4", 5.0)] {
        load.insert_broker(id, lruww_broker(u));
    }
    let mut strategy = LeastResourceUsage::default();
    strategy.set_usage("1", 0.1);
    strategy.set_usage("2", 0.3);
    strategy.set_usage("4", 0.05);
    let ctx = PlacementContext::new(&load, &s, &p);
    assert_eq!(strategy.select(&ctx, &[0, 1, 2], &mut rng()).unwrap().0, 0);
    strategy.on_active_brokers_change(&["1".to_string()].into());
    assert!(strategy.usage("2").is_none());
}

#[test]
fn round_robin_selector() {
    // testRoundRobinBrokerSelector.
    let mut state = PlacementState::new(Placement::AvgShedder);
    assert_eq!(state.round_robin(&[]), None);
    let b = ["1", "2", "3"];
    for i in 0..20 {
        assert_eq!(state.round_robin(&b), Some(b[i % 3]));
    }
    let b3 = ["1", "2", "4"];
    for want in ["4", "1", "2", "4", "1", "2"] {
        assert_eq!(state.round_robin(&b3), Some(want));
    }
    let b4 = ["2", "4"];
    for want in ["2", "4", "2", "4"] {
        assert_eq!(state.round_robin(&b4), Some(want));
    }
    state.round_robin = i32::MAX;
    assert_eq!(state.round_robin(&b), Some(b[(i32::MAX % 3) as usize]));
    assert_eq!(state.round_robin, 0);
}

fn cluster(ids: &[&str]) -> LoadData {
    let mut load = LoadData::new();
    for id in ids {
        load.insert_broker(id, broker(10.0));
    }
    load
}

#[test]
fn isolation_policies_primary_secondary_and_shared() {
    let load = cluster(&["p1:8080", "p2:8080", "s1:8080", "other:8080"]);
    let s = Settings::default();
    let iso = |min| {
        IsolationPolicy::new(
            "iso",
            &["tenant/iso-.*".into()],
            &["p[0-9]".into()],
            &["s[0-9]".into()],
            min,
        )
        .unwrap()
    };
    let policies = ClusterPolicies {
        isolation: vec![iso(1)],
        ..Default::default()
    };
    let ctx = PlacementContext::new(&load, &s, &policies);
    let names = |v: Vec<usize>| v.into_iter().map(|i| ctx.brokers[i].id).collect::<Vec<_>>();
    let (c, note) =
        filters::namespace_policy_candidates(&ctx, "tenant/iso-1/0x00000000_0xffffffff");
    assert_eq!(names(c), ["p1:8080", "p2:8080"]);
    assert_eq!(note, "isolation policy iso: 2 primary");
    // Non-isolated namespaces only go to shared brokers (not primary anywhere).
    let (c, _) = filters::namespace_policy_candidates(&ctx, "public/default/0x00000000_0xffffffff");
    assert_eq!(names(c), ["other:8080", "s1:8080"]);
    // min_available 3 with 2 primaries: secondaries join.
    let policies = ClusterPolicies {
        isolation: vec![iso(3)],
        ..Default::default()
    };
    let ctx = PlacementContext::new(&load, &s, &policies);
    let (c, note) =
        filters::namespace_policy_candidates(&ctx, "tenant/iso-1/0x00000000_0xffffffff");
    assert_eq!(c.len(), 3);
    assert_eq!(
        note,
        "isolation policy iso: 2 primary < min_limit 3, plus 1 secondary"
    );
}

#[test]
fn topic_kind_capability() {
    let mut load = cluster(&["a:1", "b:1"]);
    load.broker_mut("a:1")
        .unwrap()
        .local
        .non_persistent_topics_enabled = false;
    load.broker_mut("b:1")
        .unwrap()
        .local
        .persistent_topics_enabled = false;
    let s = Settings::default();
    let mut policies = ClusterPolicies::none();
    policies.non_persistent_bundles.insert("t/n/np".into());
    let ctx = PlacementContext::new(&load, &s, &policies);
    assert_eq!(filters::namespace_policy_candidates(&ctx, "t/n/np").0, [1]);
    assert_eq!(filters::namespace_policy_candidates(&ctx, "t/n/p").0, [0]);
}

#[test]
fn max_topics_filter_keeps_everyone_when_all_are_over() {
    let mut load = cluster(&["a:1", "b:1"]);
    load.broker_mut("a:1").unwrap().local.num_topics = 60_000;
    let s = Settings::default();
    let p = ClusterPolicies::none();
    let ctx = PlacementContext::new(&load, &s, &p);
    let mut c = vec![0, 1];
    assert_eq!(
        filters::filter_max_topics(&ctx, &mut c).unwrap(),
        "1 broker(s) over 50000 topics"
    );
    assert_eq!(c, [1]);
    load.broker_mut("b:1").unwrap().local.num_topics = 60_000;
    let ctx = PlacementContext::new(&load, &s, &p);
    let mut c = vec![0, 1];
    assert!(filters::filter_max_topics(&ctx, &mut c).is_none());
    assert_eq!(c, [0, 1]);
}

#[test]
fn anti_affinity_with_failure_domains() {
    // LoadManagerShared's documented example: d1 = {b1: 2, b2: 1}, d2 = {b3: 2, b4: 1}, d3 = {b5: 2, b6: 2};
    // domains with the fewest (3) are d1 and d2, and within them b2 and b4 own the fewest.
    let owned = [
        ("b1:1", 2),
        ("b2:1", 1),
        ("b3:1", 2),
        ("b4:1", 1),
        ("b5:1", 2),
        ("b6:1", 2),
    ];
    let mut load = LoadData::new();
    let mut policies = ClusterPolicies::none();
    let mut n = 0;
    for (b, count) in owned {
        let mut data = broker(10.0);
        for _ in 0..count {
            let ns = format!("t/ns{n}");
            n += 1;
            data.bundles.insert(format!("{ns}/0x00000000_0xffffffff"));
            policies.namespaces.insert(
                ns,
                NamespacePolicy {
                    bundles: None,
                    anti_affinity_group: Some("G".into()),
                },
            );
        }
        load.insert_broker(b, data);
    }
    policies.namespaces.insert(
        "t/new".into(),
        NamespacePolicy {
            bundles: None,
            anti_affinity_group: Some("g".into()),
        },
    );
    for (b, d) in [
        ("b1:1", "d1"),
        ("b2:1", "d1"),
        ("b3:1", "d2"),
        ("b4:1", "d2"),
        ("b5:1", "d3"),
        ("b6:1", "d3"),
    ] {
        policies.domains.insert(b.into(), d.into());
    }
    let mut s = Settings::default();
    s.failure_domains_enabled = true;
    let ctx = PlacementContext::new(&load, &s, &policies);
    let mut c: Vec<usize> = (0..6).collect();
    filters::filter_anti_affinity(&ctx, "t/new/0x00000000_0xffffffff", &mut c).unwrap();
    assert_eq!(c, [1, 3]);
    // Without domains: b2 and b4 still (fewest per broker).
    s.failure_domains_enabled = false;
    let ctx = PlacementContext::new(&load, &s, &policies);
    let mut c: Vec<usize> = (0..6).collect();
    filters::filter_anti_affinity(&ctx, "t/new/0x00000000_0xffffffff", &mut c).unwrap();
    assert_eq!(c, [1, 3]);
    // Unload check: b1 owns more than the least → allowed; b2 owns the least while others own more → allowed;
    // with only b2 and b4 as candidates, both at the least, moving from b2 is pointless.
    assert!(filters::anti_affinity_allows_unload(
        &ctx,
        "t/ns0/0x00000000_0xffffffff",
        "b1:1",
        &[0, 1, 2]
    )
    .is_ok());
    assert!(filters::anti_affinity_allows_unload(
        &ctx,
        "t/ns2/0x00000000_0xffffffff",
        "b2:1",
        &[1, 3]
    )
    .is_err());
}

#[test]
fn version_filter_keeps_the_latest_pre_release_and_resets_on_leading_zeros() {
    let mut load = cluster(&["a:1", "b:1"]);
    load.broker_mut("a:1").unwrap().local.broker_version_string = Some("3.0.0-rc.9".into());
    load.broker_mut("b:1").unwrap().local.broker_version_string = Some("3.0.0-rc.10".into());
    let mut s = Settings::default();
    s.prefer_later_versions = true;
    let p = ClusterPolicies::none();
    let ctx = PlacementContext::new(&load, &s, &p);
    let mut c = vec![0, 1];
    filters::filter_version(&ctx, &mut c).unwrap();
    assert_eq!(c, [1], "rc.10 is later than rc.9");
    // `3.01.0` does not parse: Pulsar resets the candidates.
    load.broker_mut("a:1").unwrap().local.broker_version_string = Some("3.01.0".into());
    let ctx = PlacementContext::new(&load, &s, &p);
    let mut c = vec![0, 1];
    assert!(filters::filter_version(&ctx, &mut c).is_err());
}

#[test]
fn extensible_placement_reads_the_ema_of_every_applied_report() {
    // h = 0.9: broker a reports W = 0.2, 0.8, 0.8 before the lookup; Pulsar's weightedMaxEMA is 0.314 (the same
    // value TransferShedder reads), so avg(0.314, 0) = 15.7 %.
    let mut load = LoadData::new();
    for (cpu, stamp) in [(20.0, 1), (80.0, 2), (80.0, 3)] {
        let mut r = broker(cpu);
        r.last_update = stamp;
        load.apply_report("a:1", r, &crate::core::NoSeeds);
    }
    load.apply_report("b:1", broker(0.0), &crate::core::NoSeeds);
    let s = Settings::default();
    let p = ClusterPolicies::none();
    let mut state = PlacementState::new(Placement::new(
        PlacementKind::LeastResourceUsageWithWeight,
        true,
    ));
    let sel = select(&load, &s, &p, &mut state, "t/n/0x00000000_0xffffffff").unwrap();
    assert_eq!(sel.broker, "b:1");
    assert!(sel.reason.contains("<= average 15.7%"), "{}", sel.reason);
}

#[test]
fn even_distribution_is_off_by_default_except_for_the_system_namespace() {
    let mut load = cluster(&["a:1", "b:1"]);
    load.broker_mut("a:1")
        .unwrap()
        .local
        .bundles
        .insert("pulsar/system/0x00000000_0x10000000".into());
    load.broker_mut("a:1")
        .unwrap()
        .local
        .bundles
        .insert("public/default/0x00000000_0x10000000".into());
    load.recount("a:1");
    let mut s = Settings::default();
    let p = ClusterPolicies::none();
    let ctx = PlacementContext::new(&load, &s, &p);
    let mut c = vec![0, 1];
    assert!(filters::filter_distribute_evenly(
        &ctx,
        "public/default/0x10000000_0x20000000",
        &mut c
    )
    .is_none());
    assert_eq!(c, [0, 1]);
    filters::filter_distribute_evenly(&ctx, "pulsar/system/0x10000000_0x20000000", &mut c).unwrap();
    assert_eq!(c, [1]);
    s.load_balancer_distribute_bundles_evenly_enabled = true;
    let ctx = PlacementContext::new(&load, &s, &p);
    let mut c = vec![0, 1];
    filters::filter_distribute_evenly(&ctx, "public/default/0x10000000_0x20000000", &mut c)
        .unwrap();
    assert_eq!(c, [1]);
}

#[test]
fn class_and_version_filters() {
    let mut load = cluster(&["a:1", "b:1", "c:1"]);
    load.broker_mut("c:1")
        .unwrap()
        .local
        .load_manager_class_name =
        Some("org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl".into());
    load.broker_mut("a:1").unwrap().local.broker_version_string = Some("3.0.1".into());
    load.broker_mut("b:1").unwrap().local.broker_version_string = Some("3.0.2".into());
    let mut s = Settings::default();
    let p = ClusterPolicies::none();
    let ctx = PlacementContext::new(&load, &s, &p);
    let mut c = vec![0, 1, 2];
    assert!(filters::filter_load_manager_class(&ctx, &mut c).is_some());
    assert_eq!(c, [0, 1]);
    assert_eq!(
        filters::filter_version(&ctx, &mut c).unwrap(),
        None,
        "preferLaterVersions is off"
    );
    s.prefer_later_versions = true;
    let ctx = PlacementContext::new(&load, &s, &p);
    let mut c = vec![0, 1];
    filters::filter_version(&ctx, &mut c).unwrap();
    assert_eq!(c, [1]);
    let mut c = vec![0, 1, 2];
    assert!(
        filters::filter_version(&ctx, &mut c).is_err(),
        "c:1 reports no version"
    );
    // In the pipeline the error resets the candidates, and the class filter still applies first.
    let mut state = PlacementState::new(Placement::LeastLongTermMessageRate);
    let sel = select_broker(&ctx, &mut state, "t/n/x", None, None, &mut rng()).unwrap();
    assert_eq!(sel.broker, "b:1");
}

#[test]
fn overloaded_choice_is_re_selected_over_the_policy_candidates() {
    // Even distribution leaves only the hot broker; its 95 % is above 85 %, so the strategy runs again over
    // every policy candidate.
    let mut load = cluster(&["a:1", "b:1"]);
    load.broker_mut("a:1").unwrap().local.cpu = ResourceUsage::new(95.0, 100.0);
    load.broker_mut("b:1")
        .unwrap()
        .local
        .bundles
        .insert("pulsar/system/0x00000000_0x10000000".into());
    load.recount("b:1");
    let s = Settings::default();
    let p = ClusterPolicies::none();
    let mut state = PlacementState::new(Placement::LeastLongTermMessageRate);
    let sel = select(
        &load,
        &s,
        &p,
        &mut state,
        "pulsar/system/0x10000000_0x20000000",
    )
    .unwrap();
    assert_eq!(sel.broker, "b:1");
    assert!(
        sel.reason
            .starts_with("a:1 usage 95.0% > overload threshold 85.0%, re-selected"),
        "{}",
        sel.reason
    );
}

#[test]
fn avg_shedder_placement_rules() {
    let mut load = cluster(&["a:1", "b:1", "c:1", "d:1"]);
    load.broker_mut("d:1").unwrap().local.cpu = ResourceUsage::new(90.0, 100.0);
    let s = Settings::default();
    let p = ClusterPolicies::none();
    let ctx = PlacementContext::new(&load, &s, &p);
    let mut state = PlacementState::new(Placement::AvgShedder);
    let sel = select_broker(
        &ctx,
        &mut state,
        "t/n/x",
        Some("b:1"),
        Some("a:1"),
        &mut rng(),
    )
    .unwrap();
    assert_eq!(sel.broker, "b:1");
    assert_eq!(
        sel.reason,
        "AvgShedder: planned destination b:1 (score 10.0)"
    );
    // A planned broker that is gone is replaced by an eligible broker other than the source.
    for seed in 0..20 {
        let sel = select_broker(
            &ctx,
            &mut state,
            "t/n/x",
            Some("gone:1"),
            Some("a:1"),
            &mut StdRng::seed_from_u64(seed),
        )
        .unwrap();
        assert_ne!(sel.broker, "a:1");
        assert!(
            sel.reason.contains("planned gone:1 is not eligible"),
            "{}",
            sel.reason
        );
    }
    // An overloaded planned broker (90 > 85) is replaced by a healthy one other than the source.
    for seed in 0..20 {
        let sel = select_broker(
            &ctx,
            &mut state,
            "t/n/x",
            Some("d:1"),
            Some("a:1"),
            &mut StdRng::seed_from_u64(seed),
        )
        .unwrap();
        assert!(sel.broker == "b:1" || sel.broker == "c:1", "{}", sel.broker);
    }
    // Without a plan: random among all eligible brokers; over many seeds every broker shows up.
    let seen: BTreeSet<String> = (0..50)
        .map(|seed| {
            select_broker(
                &ctx,
                &mut state,
                "t/n/x",
                None,
                None,
                &mut StdRng::seed_from_u64(seed),
            )
            .unwrap()
            .broker
        })
        .collect();
    assert!(seen.len() >= 3, "{seen:?}");
}

#[test]
fn assignment_preallocates_and_reuses() {
    let mut load = cluster(&["a:1", "b:1"]);
    let s = Settings::default();
    let p = ClusterPolicies::none();
    let mut state = PlacementState::new(Placement::LeastLongTermMessageRate);
    let first = assign_bundle(&mut load, &s, &p, &mut state, "t/n/x", &mut rng()).unwrap();
    assert_eq!(load.preallocation("t/n/x"), Some(first.broker.as_str()));
    let again = assign_bundle(&mut load, &s, &p, &mut state, "t/n/x", &mut rng()).unwrap();
    assert_eq!(again.broker, first.broker);
    assert_eq!(again.reason, "already preallocated");
    // The preallocated bundle's default 100 msg/s long-term rate now counts on that broker, so the next
    // bundle goes to the other one.
    let other = assign_bundle(&mut load, &s, &p, &mut state, "t/n/y", &mut rng()).unwrap();
    assert_ne!(other.broker, first.broker);
    let empty = ClusterPolicies {
        isolation: vec![
            IsolationPolicy::new("all", &[".*".into()], &["nobody".into()], &[], 1).unwrap(),
        ],
        ..Default::default()
    };
    let err = assign_bundle(&mut load, &s, &empty, &mut state, "t/n/z", &mut rng()).unwrap_err();
    assert!(
        err.reason
            .contains("no broker is allowed by the namespace policies"),
        "{}",
        err.reason
    );
}

/// The per-broker facts the load data caches between reports are the ones derived from the entries, and a
/// report (or other settings) is never answered from a stale table.
#[test]
fn cached_report_facts_match_the_entries_and_follow_every_report() {
    let describe = |ctx: &PlacementContext| -> Vec<String> {
        ctx.brokers
            .iter()
            .map(|b| {
                format!(
                    "{} {} {:.6} {:.6} {} {} {} {} {} {:?}",
                    b.id,
                    b.host,
                    b.w4,
                    b.w5,
                    b.topics,
                    b.persistent,
                    b.non_persistent,
                    b.shared,
                    b.class_ok,
                    b.version
                )
            })
            .collect()
    };
    let settings = Settings::default();
    let policies = ClusterPolicies::none();
    let mut load = LoadData::new();
    load.insert_broker("a:1", broker(80.0));
    load.insert_broker("host-b", broker(20.0));
    let derived = |load: &LoadData, settings: &Settings| {
        let class = settings.load_manager_class_name.class_name();
        let ctx = PlacementContext {
            brokers: PlacementContext::broker_infos(load, settings, &policies, class),
            ..PlacementContext::new(load, settings, &policies)
        };
        describe(&ctx)
    };
    // Built by the first context, read by the second.
    let first = describe(&PlacementContext::new(&load, &settings, &policies));
    assert_eq!(first, derived(&load, &settings));
    assert_eq!(
        describe(&PlacementContext::new(&load, &settings, &policies)),
        first
    );
    assert!(first[1].starts_with("host-b host-b "), "{first:?}");
    // A report replaces the table.
    let mut hot = broker(95.0);
    hot.num_topics = 7;
    hot.broker_version_string = Some("3.0.1".into());
    load.apply_report("host-b", hot, &crate::core::NoSeeds);
    let after = describe(&PlacementContext::new(&load, &settings, &policies));
    assert_ne!(after, first);
    assert_eq!(after, derived(&load, &settings));
    // Other weights than the table's: derived from the entries, not from the table.
    let mut other = Settings::default();
    other.load_balancer_cpu_resource_weight = 0.1;
    assert_eq!(
        describe(&PlacementContext::new(&load, &other, &policies)),
        derived(&load, &other)
    );
}

/// A report of one bundle at `rate` msg/s in and out (1 kB messages) and `cpu` % CPU.
fn band_report(bundle: &str, rate: f64, cpu: f64) -> LocalBrokerData {
    let mut r = broker(cpu);
    let stats = crate::model::NamespaceBundleStats {
        msg_rate_in: rate,
        msg_rate_out: rate,
        msg_throughput_in: rate * 1000.0,
        msg_throughput_out: rate * 1000.0,
        topics: 1,
        ..Default::default()
    };
    let usage = crate::model::SystemResourceUsage {
        cpu: ResourceUsage::new(cpu, 100.0),
        ..Default::default()
    };
    r.update(&usage, [(bundle.to_string(), stats)].into_iter().collect());
    r
}

#[test]
fn band_placement_scores_with_the_shedders_model_where_it_has_one() {
    // `a` just took bundles: its report's CPU (averaged over a window) still reads 20 % for 6,000 msg/s, while
    // `b` carries half that traffic at 40 %. By the reports alone `a` looks the emptier.
    let mut load = LoadData::new();
    load.insert_broker("a", band_report("t/n/0x00000000_0x40000000", 3000.0, 20.0));
    load.insert_broker("b", band_report("t/n/0x40000000_0x80000000", 1500.0, 40.0));
    let s = Settings::default();
    let p = ClusterPolicies::none();
    let bundle = "t/n/0x80000000_0xffffffff";
    let mut state = PlacementState::new(Placement::new(PlacementKind::BandShedder, false));
    assert_eq!(
        select(&load, &s, &p, &mut state, bundle).unwrap().broker,
        "a"
    );
    // The shedder learned that both idle at 5 % and cost 0.01 points per msg/s: `a` is at 65, `b` at 35.
    let costs = crate::core::cost_model::BrokerCosts {
        idle: [5.0, 0.0, 0.0, 0.0],
        cost: [0.01, 0.0, 0.0, 0.0],
    };
    let learned: LearnedCosts = [("a".to_string(), costs), ("b".to_string(), costs)]
        .into_iter()
        .collect();
    state.strategy.learn(Some(&learned));
    let pick = select(&load, &s, &p, &mut state, bundle).unwrap();
    assert_eq!(pick.broker, "b", "{}", pick.reason);
    // A broker that left is forgotten (it starts over when it comes back): `a` is weighed by its report again.
    state
        .strategy
        .on_active_brokers_change(&["b".to_string()].into_iter().collect());
    assert_eq!(
        select(&load, &s, &p, &mut state, bundle).unwrap().broker,
        "a"
    );
    // Pulsar's strategies keep nothing of it.
    let mut avg = PlacementState::new(Placement::new(PlacementKind::AvgShedder, false));
    avg.strategy.learn(Some(&learned));
    assert_eq!(avg.strategy, Placement::AvgShedder);
    assert!(!avg.strategy.weighs_last_known_data());
    assert!(state.strategy.weighs_last_known_data());
}
