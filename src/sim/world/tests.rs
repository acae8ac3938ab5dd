//! Tests of building worlds: seeded generation, the timeline, bad references and limits, from a scenario and
//! from a snapshot.

use super::*;
use crate::core::snapshot::Snapshot;
use crate::runtime::synthetic::CostModel;
use crate::sim::scenario::Scenario;

fn scenario(text: &str) -> Scenario {
    Scenario::from_json(text, "test").unwrap()
}

#[test]
fn generation_is_seeded_and_gives_every_bundle_a_topic() {
    let s = Scenario::built_in("skewed-start").unwrap();
    let a = World::from_scenario(&s, 1).unwrap();
    let b = World::from_scenario(&s, 1).unwrap();
    let c = World::from_scenario(&s, 2).unwrap();
    assert_eq!(a.topics, b.topics);
    assert_ne!(
        a.topics, c.topics,
        "the Zipf ranks are shuffled by the seed"
    );
    assert_eq!(a.bundles.len(), 1000);
    assert_eq!(a.brokers[0].id, "broker-01:8080");
    assert_eq!(a.brokers[9].id, "broker-10:8080");
    let mut per_bundle = vec![0usize; a.bundles.len()];
    let mut total_in = 0.0;
    for t in &a.topics {
        let ns = &a.namespaces[t.ns];
        let r = ns.bundles.find(t.hash);
        let i = a
            .bundles
            .iter()
            .position(|b| b.ns == t.ns && b.range == r)
            .unwrap();
        per_bundle[i] += 1;
        total_in += t.base.rate_in;
    }
    assert!(per_bundle.iter().all(|c| *c >= 1));
    assert!((total_in - 182_000.0).abs() < 1e-6, "{total_in}");
    let owners: std::collections::BTreeSet<usize> =
        a.bundles.iter().filter_map(|b| b.owner).collect();
    assert_eq!(owners.into_iter().collect::<Vec<_>>(), [0, 1, 2]);
}

#[test]
fn timeline_restarts_spikes_and_ramps() {
    let s = scenario(
        r#"{"name":"t","durationMinutes":30,"brokers":[{"count":3},{"count":1,"name":"late-{i}","joinAtMinute":5}],
            "namespaces":[{"name":"t/n-{i}","count":2,"bundles":4,"msgRateIn":1000}],
            "events":[{"kind":"restart","atMinute":2,"everyMinutes":3,"downSeconds":30},
                      {"kind":"cpuSpike","atMinute":1,"broker":"broker-02","points":40,"durationSeconds":90,"everyMinutes":10},
                      {"kind":"traffic","atMinute":4,"namespace":"t/n-01","bundle":"0x40000000_0x80000000","factor":3},
                      {"kind":"stop","atMinute":20,"brokers":["late-01:8080"],"graceful":false}]}"#,
    );
    let w = World::from_scenario(&s, 0).unwrap();
    assert_eq!(w.brokers[3].id, "late-01:8080");
    assert_eq!(w.brokers[3].join_ms, 300_000);
    let restarts: Vec<(i64, usize)> = w
        .events
        .iter()
        .filter_map(|(t, e)| match e {
            WorldEvent::Restart {
                broker,
                down_ms,
                graceful,
            } => {
                assert_eq!(*down_ms, 30_000);
                assert!(*graceful);
                Some((*t, *broker))
            }
            _ => None,
        })
        .collect();
    assert_eq!(restarts, [(120_000, 0), (300_000, 1), (480_000, 2)]);
    assert_eq!(w.spikes.len(), 3);
    assert_eq!(w.spikes[1].start_ms, 660_000);
    assert_eq!(w.spikes[1].end_ms, 750_000);
    let ramp = w
        .events
        .iter()
        .find_map(|(_, e)| match e {
            WorldEvent::Ramp { topics, .. } => Some(topics.clone()),
            _ => None,
        })
        .unwrap();
    assert!(!ramp.is_empty());
    assert!(ramp
        .iter()
        .all(|t| w.topics[*t].ns == 1 && (0x4000_0000..0x8000_0000).contains(&w.topics[*t].hash)));
    assert!(matches!(
        w.events.last().unwrap().1,
        WorldEvent::Stop {
            broker: 3,
            graceful: false
        }
    ));
}

#[test]
fn bad_references_are_errors() {
    let bad = scenario(
        r#"{"name":"t","durationMinutes":3,"brokers":[{"count":2}],"namespaces":[],
            "events":[{"kind":"stop","atMinute":1,"brokers":["broker-09"]}]}"#,
    );
    assert!(World::from_scenario(&bad, 0)
        .unwrap_err()
        .to_string()
        .contains("unknown broker broker-09"));
    let late = scenario(
        r#"{"name":"t","durationMinutes":3,"brokers":[{"count":2,"joinAtMinute":1}],"namespaces":[]}"#,
    );
    assert!(World::from_scenario(&late, 0).is_err());
}

#[test]
fn a_spike_repeated_too_often_and_a_too_long_snapshot_run_are_errors() {
    let often = scenario(
        r#"{"name":"t","durationMinutes":525600,"brokers":[{"count":1}],"namespaces":[],
            "events":[{"kind":"cpuSpike","atMinute":0,"broker":"broker-01","points":10,"durationSeconds":1,"everyMinutes":0.01}]}"#,
    );
    assert_eq!(
        World::from_scenario(&often, 0).unwrap_err().to_string(),
        "scenario t: cpuSpike on broker-01 everyMinutes 0.01 repeats 52560000 times, above the limit of 1000000"
    );
    let mut long =
        scenario(r#"{"name":"t","durationMinutes":1,"brokers":[{"count":1}],"namespaces":[]}"#);
    long.duration_minutes = 1e12;
    assert!(World::from_scenario(&long, 0)
        .unwrap_err()
        .to_string()
        .contains("durationMinutes 1000000000000 is above the limit of 525600 minutes"));
    let snap = Snapshot::from_json(include_str!("../../../examples/snapshot.json")).unwrap();
    let e = World::from_snapshot(&snap, "s", 6e5, CostModel::default())
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        e,
        "scenario s: the simulated length 600000 is above the limit of 525600 minutes (365 days)"
    );
    assert!(World::from_snapshot(&snap, "s", 60.0, CostModel::default()).is_ok());
}

#[test]
fn naming_the_topics_of_a_snapshot_is_bounded() {
    // examples/snapshot.json lists no topics, so every bundle's names are generated: with no tries left the
    // first bundle cannot be named, and the error says what to do.
    let snap = Snapshot::from_json(include_str!("../../../examples/snapshot.json")).unwrap();
    let e = World::from_snapshot_within(&snap, "s", 60.0, CostModel::default(), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("within 0 tries for the whole snapshot") && e.contains("bundleTopics"),
        "{e}"
    );
    assert!(World::from_snapshot_within(&snap, "s", 60.0, CostModel::default(), 1_000_000).is_ok());
}

#[test]
fn a_snapshots_decision_state_reaches_the_first_leader() {
    // Every broker of examples/snapshot.json was unloaded from at the snapshot's instant: TransferShedder's
    // first cycle in the simulation is in its cool-down, and the snapshot's EMAs replace those of the first
    // reports.
    let mut v: serde_json::Value =
        serde_json::from_str(include_str!("../../../examples/snapshot.json")).unwrap();
    let now = v["now"].as_i64().unwrap();
    let brokers: Vec<String> = v["brokers"].as_object().unwrap().keys().cloned().collect();
    v["recentlyUnloadedBrokers"] = brokers
        .iter()
        .map(|b| (b.clone(), serde_json::Value::from(now)))
        .collect();
    v["extensibleEma"] = serde_json::json!({
        "broker-2:8080": {"weightedMaxEMA": 0.625, "msgThroughputEMA": 1000.0}
    });
    let snap = Snapshot::from_value(v).unwrap();
    let world = World::from_snapshot(&snap, "s", 1.5, CostModel::default()).unwrap();
    assert_eq!(world.recently_unloaded_brokers.len(), brokers.len());
    assert_eq!(
        world.extensible_ema["broker-2:8080"].weighted_max_ema,
        0.625
    );
    let (settings, _) = crate::sim::effective_settings(
        &world.settings_text,
        None,
        crate::config::ShedderKind::TransferShedder,
    )
    .unwrap();
    let options = crate::sim::RunOptions {
        settings,
        seed: 1,
        chart_interval_ms: 60_000,
        trace: true,
    };
    let result = crate::sim::run(&world, &options, None);
    let cool_down: Vec<&String> = result
        .trace
        .iter()
        .filter(|l| l.contains("CoolDown"))
        .collect();
    assert!(!cool_down.is_empty(), "{:#?}", result.trace);

    let mut fresh = world.clone();
    fresh.recently_unloaded_brokers.clear();
    let result = crate::sim::run(&fresh, &options, None);
    assert!(
        result.trace.iter().all(|l| !l.contains("CoolDown")),
        "{:#?}",
        result.trace
    );
}

#[test]
fn anti_affinity_groups_failure_domains_and_wave_phases() {
    let s = scenario(
        r#"{"name":"t","durationMinutes":3,
            "brokers":[{"count":2,"name":"a-{i}","failureDomain":"zone-a"},{"count":1,"name":"b-{i}","failureDomain":"zone-b"},
                       {"count":1}],
            "namespaces":[{"name":"t/x-{i}","count":3,"bundles":1,"msgRateIn":1,"antiAffinityGroup":"g-{i}",
                           "diurnal":{"amplitude":0.5,"phaseMinutes":30,"phaseStepMinutes":60}},
                          {"name":"t/y-{i}","count":3,"bundles":1,"msgRateIn":1,"antiAffinityGroup":"g-{i}"},
                          {"name":"t/z-{i}","count":2,"bundles":1,"msgRateIn":1,"antiAffinityGroup":"all"},
                          {"name":"t/free","bundles":1,"msgRateIn":1}]}"#,
    );
    let w = World::from_scenario(&s, 0).unwrap();
    let domains: Vec<(&str, Option<&str>)> = w
        .brokers
        .iter()
        .map(|b| (b.id.as_str(), b.failure_domain.as_deref()))
        .collect();
    assert_eq!(
        domains,
        [
            ("a-01:8080", Some("zone-a")),
            ("a-02:8080", Some("zone-a")),
            ("b-01:8080", Some("zone-b")),
            ("broker-01:8080", None)
        ]
    );
    let groups: Vec<(&str, Option<&str>)> = w
        .namespaces
        .iter()
        .map(|n| (n.name.as_str(), n.anti_affinity_group.as_deref()))
        .collect();
    assert_eq!(
        groups,
        [
            ("t/x-00", Some("g-00")),
            ("t/x-01", Some("g-01")),
            ("t/x-02", Some("g-02")),
            ("t/y-00", Some("g-00")),
            ("t/y-01", Some("g-01")),
            ("t/y-02", Some("g-02")),
            ("t/z-00", Some("all")),
            ("t/z-01", Some("all")),
            ("t/free", None)
        ]
    );
    // phaseMinutes shifts the group's first namespace; phaseStepMinutes adds per namespace.
    let phases: Vec<f64> = w.namespaces[..3]
        .iter()
        .map(|n| n.wave.unwrap().phase_ms)
        .collect();
    assert_eq!(phases, [1_800_000.0, 5_400_000.0, 9_000_000.0]);
    // A snapshot's groups and domains carry over too.
    let mut snap = Snapshot::from_json(include_str!("../../../examples/snapshot.json")).unwrap();
    let (broker, ns) = {
        let (id, r) = snap.brokers.iter().next().unwrap();
        let bundle = r.last_stats.keys().next().unwrap();
        let ns = crate::bundle::BundleName::parse(bundle)
            .unwrap()
            .namespace()
            .to_string();
        (id.clone(), ns)
    };
    snap.namespaces
        .entry(ns.clone())
        .or_default()
        .anti_affinity_group = Some("g".into());
    snap.failure_domains
        .insert("zone-1".into(), vec![broker.clone()]);
    let w = World::from_snapshot(&snap, "s", 1.0, CostModel::default()).unwrap();
    let b = w.brokers.iter().find(|b| b.id == broker).unwrap();
    assert_eq!(b.failure_domain.as_deref(), Some("zone-1"));
    let n = w.namespaces.iter().find(|n| n.name == ns).unwrap();
    assert_eq!(n.anti_affinity_group.as_deref(), Some("g"));
}

/// Each broker's CPU at the start, percent (no noise): base plus the traffic of the bundles it owns.
fn starting_cpu(w: &World) -> Vec<f64> {
    let index: std::collections::BTreeMap<(usize, u64), usize> = w
        .bundles
        .iter()
        .enumerate()
        .map(|(i, b)| ((b.ns, b.range.lower()), i))
        .collect();
    let mut per_broker = vec![Rates::default(); w.brokers.len()];
    for t in &w.topics {
        let b = &w.bundles[index[&(t.ns, w.namespaces[t.ns].bundles.find(t.hash).lower())]];
        if let Some(o) = b.owner {
            per_broker[o].add_scaled(&t.base, 1.0);
        }
    }
    w.brokers
        .iter()
        .zip(&per_broker)
        .map(|(b, r)| {
            100.0 * (b.capacity.base_cpu_cores + w.model.traffic_cores(r)) / b.capacity.cpu_cores
        })
        .collect()
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    v.iter().sum::<f64>() / v.len() as f64
}

/// The built-ins added for strategies' known failures start as their descriptions say.
#[test]
fn failure_scenarios_start_as_described() {
    let built = |name: &str| World::from_scenario(&Scenario::built_in(name).unwrap(), 1).unwrap();

    // heterogeneous-large: three sizes with the same expected traffic each.
    let w = built("heterogeneous-large");
    assert_eq!((w.brokers.len(), w.bundles.len()), (48, 3000));
    let cpu = starting_cpu(&w);
    let tier = |prefix: &str| {
        mean(
            w.brokers
                .iter()
                .zip(&cpu)
                .filter(|(b, _)| b.id.starts_with(prefix))
                .map(|(_, c)| *c),
        )
    };
    let (small, medium, big) = (tier("small-"), tier("medium-"), tier("big-"));
    assert!((70.0..90.0).contains(&small), "{small}");
    assert!((35.0..45.0).contains(&medium), "{medium}");
    assert!((17.0..23.0).contains(&big), "{big}");
    let cores: f64 = w.brokers.iter().map(|b| b.capacity.cpu_cores).sum();
    let weighted: f64 = w
        .brokers
        .iter()
        .zip(&cpu)
        .map(|(b, c)| c * b.capacity.cpu_cores)
        .sum::<f64>()
        / cores;
    assert!((32.0..38.0).contains(&weighted), "{weighted}");

    // skew-crash: three hot brokers; broker-02 crashes at minute 3 and is back at minute 35.
    let w = built("skew-crash");
    let cpu = starting_cpu(&w);
    assert!(cpu[..3].iter().all(|c| *c > 80.0), "{cpu:?}");
    assert!(cpu[3..].iter().all(|c| *c < 10.0), "{cpu:?}");
    assert_eq!(
        w.events,
        [(
            180_000,
            WorldEvent::Restart {
                broker: 1,
                down_ms: 1_920_000,
                graceful: false
            }
        )]
    );

    // anti-affinity: 16 groups of 3 namespaces, each group on one zone-a broker at the start.
    let w = built("anti-affinity");
    let mut groups: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (i, n) in w.namespaces.iter().enumerate() {
        if let Some(g) = &n.anti_affinity_group {
            groups.entry(g).or_default().push(i);
        }
    }
    assert_eq!(groups.len(), 16);
    for (g, members) in &groups {
        assert_eq!(members.len(), 3, "{g}");
        let owners: std::collections::BTreeSet<usize> = w
            .bundles
            .iter()
            .filter(|b| members.contains(&b.ns))
            .map(|b| b.owner.unwrap())
            .collect();
        assert_eq!(owners.len(), 1, "{g}");
        let o = *owners.first().unwrap();
        assert_eq!(w.brokers[o].failure_domain.as_deref(), Some("zone-a"));
    }
    assert_eq!(
        w.brokers
            .iter()
            .filter(|b| b.failure_domain.as_deref() == Some("zone-c"))
            .count(),
        4
    );
    let cpu = starting_cpu(&w);
    assert!(cpu[..4].iter().all(|c| (85.0..95.0).contains(c)), "{cpu:?}");
    assert!(w.settings_text.contains("failureDomainsEnabled=true"));

    // scale-out-2x: 8 brokers near 70 %, 8 join at minute 10.
    let w = built("scale-out-2x");
    let cpu = starting_cpu(&w);
    let first = mean(cpu[..8].iter().copied());
    assert!((67.0..73.0).contains(&first), "{cpu:?}");
    assert!(w.brokers[8..].iter().all(|b| b.join_ms == 600_000));
    assert_eq!(
        w.events
            .iter()
            .filter(|(_, e)| matches!(e, WorldEvent::Ramp { factor, .. } if *factor == 1.3))
            .count(),
        8
    );

    // diurnal-hot-tenant: the hot namespace carries about 5 times any other's traffic (the jitter spreads the
    // group's total unevenly over its namespaces), on its own phase.
    let w = built("diurnal-hot-tenant");
    let mut per_ns = vec![0.0; w.namespaces.len()];
    for t in &w.topics {
        per_ns[t.ns] += t.base.rate_in;
    }
    let hot = w
        .namespaces
        .iter()
        .position(|n| n.name == "hot/ns")
        .unwrap();
    for (i, r) in per_ns.iter().enumerate() {
        if i != hot {
            assert!((per_ns[hot] / r - 5.0).abs() < 0.5, "{per_ns:?}");
        }
    }
    let phases: Vec<f64> = w
        .namespaces
        .iter()
        .map(|n| n.wave.unwrap().phase_ms / 60_000.0)
        .collect();
    assert_eq!(
        phases,
        [0.0, 180.0, 360.0, 540.0, 720.0, 900.0, 1080.0, 1260.0, 90.0]
    );
}
