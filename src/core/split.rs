//! Bundle split selection of the modular load manager (`BundleSplitterTask` + `checkNamespaceBundleSplit`).
//!
//! Runs only when `loadBalancerAutoBundleSplitEnabled` and more than one broker is known. For each broker (id
//! order) and each bundle of its `lastStats` (name order):
//! * skip when the bundle has fewer than 2 topics;
//! * rate/throughput are the **long-term** msg/s and B/s (in + out) of the bundle's data (0 when unknown);
//! * a candidate when `topics > loadBalancerNamespaceBundleMaxTopics`, or
//!   `loadBalancerNamespaceBundleMaxSessions > 0` and producers + consumers exceed it, or the rate exceeds
//!   `loadBalancerNamespaceBundleMaxMsgRate`, or the throughput exceeds
//!   `loadBalancerNamespaceBundleMaxBandwidthMbytes` MiB/s.
//!
//! Candidates are keyed by bundle, as Pulsar's `Map<bundle, broker>`: a bundle listed by several brokers (the old
//! owner's stale report after an unload and the new owner's) is split once, for the last broker (id order) whose
//! listing passed. Then, in bundle-name order, a candidate is split only while the namespace's bundle count plus
//! the splits already planned for it stays below `loadBalancerNamespaceMaximumBundles`. The count comes from the
//! namespace's boundaries when known, else from the distinct bundles of that namespace in the load data.
//!
//! **Fixed Java quirk:** Pulsar counts a candidate towards that quota as soon as it passes the thresholds (and
//! again for a second listing of the same bundle), before `canSplitBundle` and the "bundle no longer exists"
//! check; an unsplittable candidate can so use up the namespace's last slot and nothing is split. loadmgr counts
//! only the splits it plans.
//!
//! Then the bundle must be splittable (`upper − lower > 1`) and, when the namespace's boundaries are known, be
//! one of them. Boundaries come from `defaultNamespaceBundleSplitAlgorithm` (Pulsar's admin call passes no
//! algorithm); topic-based algorithms need the bundle's topics ([`SplitTopics`]) and otherwise leave the
//! boundaries to the owner. Children are unloaded when `loadBalancerAutoUnloadSplitBundlesEnabled` and the
//! namespace-policy and anti-affinity checks of shedding allow moving the bundle.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashSet};

use super::placement::{filters, PlacementContext};
use super::plan::{Plan, Skipped, SplitDecision};
use super::policies::ClusterPolicies;
use super::{namespace_of, num, LoadData, MIB};
use crate::bundle::{
    format_hash, split_bundle, BundleName, SplitAlgorithm, SplitInput, SplitOutcome, TopicTraffic,
};
use crate::config::Settings;

/// Per-bundle topics (and per-topic traffic) for the topic-based split algorithms.
pub type SplitTopics = BTreeMap<String, BTreeMap<String, TopicTraffic>>;

/// The split thresholds of `settings` as a [`SplitInput`] without topics or positions (the caller adds the
/// bundle's topics, their traffic and the positions it has).
pub fn split_input(settings: &Settings) -> SplitInput {
    SplitInput {
        max_msg_rate: settings.load_balancer_namespace_bundle_max_msg_rate as f64,
        max_bandwidth_mbytes: settings.load_balancer_namespace_bundle_max_bandwidth_mbytes as f64,
        flow_or_qps_difference_threshold_percentage: settings
            .flow_or_qps_difference_threshold_percentage
            as f64,
        ..Default::default()
    }
}

/// Selects the bundles to split and computes their boundaries.
pub fn find_bundles_to_split(
    load: &LoadData,
    settings: &Settings,
    policies: &ClusterPolicies,
    topics: &SplitTopics,
) -> Plan {
    let mut plan = Plan::default();
    if !settings.load_balancer_auto_bundle_split_enabled {
        plan.skipped.push(Skipped::new(
            "cluster",
            "no split: loadBalancerAutoBundleSplitEnabled is false",
        ));
        return plan;
    }
    if load.broker_count() <= 1 {
        plan.skipped.push(Skipped::new(
            "cluster",
            format!("no split: {} broker(s) known", load.broker_count()),
        ));
        return plan;
    }
    let s = settings;
    let max_topics = s.load_balancer_namespace_bundle_max_topics as i64;
    let max_sessions = s.load_balancer_namespace_bundle_max_sessions as i64;
    let max_rate = s.load_balancer_namespace_bundle_max_msg_rate as f64;
    let max_bw = s.load_balancer_namespace_bundle_max_bandwidth_mbytes as f64 * MIB;
    // Pulsar's `bundleCache.put(bundle, broker)`: one candidate per bundle; when several brokers list it (a stale
    // report after an unload), the last one in broker-id order wins.
    let mut candidates: BTreeMap<&str, (&str, String)> = BTreeMap::new();
    for (broker, e) in load.brokers() {
        for (bundle, stats) in &e.local.last_stats {
            if stats.topics < 2 {
                continue;
            }
            let (rate, tp) = load.bundle(bundle).map_or((0.0, 0.0), |d| {
                (
                    d.long_term_data.total_msg_rate(),
                    d.long_term_data.total_msg_throughput(),
                )
            });
            let sessions = stats.consumer_count as i64 + stats.producer_count as i64;
            let why = if stats.topics > max_topics {
                format!(
                    "topics {} > loadBalancerNamespaceBundleMaxTopics {max_topics}",
                    stats.topics
                )
            } else if max_sessions > 0 && sessions > max_sessions {
                format!(
                    "sessions {sessions} > loadBalancerNamespaceBundleMaxSessions {max_sessions}"
                )
            } else if rate > max_rate {
                format!(
                    "long-term msg rate {} msg/s > loadBalancerNamespaceBundleMaxMsgRate {}",
                    num(rate),
                    num(max_rate)
                )
            } else if tp > max_bw {
                format!(
                    "long-term throughput {} MiB/s > loadBalancerNamespaceBundleMaxBandwidthMbytes {}",
                    num(tp / MIB),
                    s.load_balancer_namespace_bundle_max_bandwidth_mbytes
                )
            } else {
                continue;
            };
            candidates.insert(bundle.as_str(), (broker.as_str(), why));
        }
    }
    plan_splits(load, settings, policies, topics, candidates, &mut plan);
    plan
}

/// The split of bundles a shedding strategy asks for (see [`crate::core::shedding::SheddingOutcome::splits`]),
/// each `(bundle, owner, why)`, past the same checks as an automatic split but the thresholds: the namespace's
/// bundle quota, a splittable range, a bundle that still exists, and boundaries the algorithm can compute.
/// Nothing when `loadBalancerAutoBundleSplitEnabled` is off.
pub fn plan_requested_splits(
    load: &LoadData,
    settings: &Settings,
    policies: &ClusterPolicies,
    topics: &SplitTopics,
    requests: &[(&str, &str, String)],
) -> Plan {
    let mut plan = Plan::default();
    if !settings.load_balancer_auto_bundle_split_enabled {
        return plan;
    }
    let candidates = requests
        .iter()
        .map(|(bundle, broker, why)| (*bundle, (*broker, why.clone())))
        .collect();
    plan_splits(load, settings, policies, topics, candidates, &mut plan);
    plan
}

/// Checks each candidate `bundle -> (owner, why)` (bundle-name order) and adds the splits that pass to `plan`,
/// the others to its skipped list.
fn plan_splits(
    load: &LoadData,
    settings: &Settings,
    policies: &ClusterPolicies,
    topics: &SplitTopics,
    candidates: BTreeMap<&str, (&str, String)>,
    plan: &mut Plan,
) {
    if candidates.is_empty() {
        return;
    }
    let s = settings;
    let max_bundles = s.load_balancer_namespace_maximum_bundles.max(0) as usize;
    // Bundle counts of candidate namespaces whose boundaries are unknown, from one pass over the load data —
    // only when there is such a namespace (with known boundaries, as in the simulator, the pass never runs).
    let unknown: BTreeSet<&str> = candidates
        .keys()
        .map(|b| namespace_of(b))
        .filter(|ns| policies.bundle_count(ns).is_none())
        .collect();
    let known_per_ns = if unknown.is_empty() {
        HashMap::default()
    } else {
        bundles_per_namespace(load, &unknown)
    };
    let mut chosen_per_ns: BTreeMap<String, usize> = BTreeMap::new();
    let ctx = PlacementContext::new(load, settings, policies);
    for (bundle, (broker, why)) in candidates {
        let ns = namespace_of(bundle);
        let count = policies
            .bundle_count(ns)
            .unwrap_or_else(|| known_per_ns.get(ns).copied().unwrap_or(1));
        let already = chosen_per_ns.get(ns).copied().unwrap_or(0);
        if count + already >= max_bundles {
            plan.skipped.push(Skipped::new(
                    bundle.to_owned(),
                    format!("no split: {why}, but namespace {ns} has {count} bundles (+{already} splitting) >= loadBalancerNamespaceMaximumBundles {max_bundles}"),
                ));
            continue;
        }
        let name = match BundleName::parse(bundle) {
            Ok(n) => n,
            Err(err) => {
                plan.skipped.push(Skipped::new(
                    bundle.to_owned(),
                    format!("no split: {why}, but {err}"),
                ));
                continue;
            }
        };
        let range = name.range();
        if !range.splittable() {
            plan.skipped.push(Skipped::new(
                bundle.to_owned(),
                format!("no split: {why}, but the range holds one hash value"),
            ));
            continue;
        }
        if let Some(nb) = policies.namespaces.get(ns).and_then(|p| p.bundles.as_ref()) {
            if !nb.contains_range(range) {
                plan.skipped.push(Skipped::new(
                    bundle.to_owned(),
                    format!("no split: {why}, but the bundle no longer exists"),
                ));
                continue;
            }
        }
        let algorithm = s.default_namespace_bundle_split_algorithm;
        let boundaries = match boundaries(range, algorithm, bundle, topics, s) {
            Ok(b) => b,
            Err(reason) => {
                plan.skipped.push(Skipped::new(
                    bundle.to_owned(),
                    format!("no split: {why}, but {reason}"),
                ));
                continue;
            }
        };
        *chosen_per_ns.entry(ns.to_owned()).or_insert(0) += 1;
        let unload_children = s.load_balancer_auto_unload_split_bundles_enabled && {
            let (c, _) = filters::namespace_policy_candidates(&ctx, bundle);
            let src = ctx.index_of(broker);
            c.iter().any(|i| Some(*i) != src)
                && filters::anti_affinity_allows_unload(&ctx, bundle, broker, &c).is_ok()
        };
        plan.splits.push(SplitDecision {
            bundle: bundle.to_owned(),
            broker: broker.to_owned(),
            boundaries: boundaries.iter().map(|b| format_hash(*b)).collect(),
            algorithm: algorithm.name().to_owned(),
            unload_children,
            reason: format!(
                "split: {why}; {}",
                if boundaries.is_empty() {
                    format!(
                        "{} boundaries computed by the owner from its topics",
                        algorithm.name()
                    )
                } else {
                    format!(
                        "{} at {}",
                        algorithm.name(),
                        boundaries
                            .iter()
                            .map(|b| format_hash(*b))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
        });
    }
}

/// The number of distinct bundles of each namespace in `namespaces` the load data knows: bundles with data and
/// bundles some broker's report lists. Cost: O(cluster).
fn bundles_per_namespace<'a>(
    load: &'a LoadData,
    namespaces: &BTreeSet<&str>,
) -> HashMap<&'a str, usize> {
    let mut counts: HashMap<&'a str, usize> =
        HashMap::with_capacity_and_hasher(namespaces.len(), Default::default());
    for name in load.bundle_keys() {
        let ns = namespace_of(name);
        if namespaces.contains(ns) {
            *counts.entry(ns).or_insert(0) += 1;
        }
    }
    // Listed bundles without data (only reports edited in place have them) count once each.
    let mut listed_only: HashSet<&str> = HashSet::default();
    for (_, e) in load.brokers() {
        for b in e.local.last_stats.keys() {
            let ns = namespace_of(b);
            if namespaces.contains(ns) && load.bundle(b).is_none() && listed_only.insert(b) {
                *counts.entry(ns).or_insert(0) += 1;
            }
        }
    }
    counts
}

fn boundaries(
    range: crate::bundle::BundleRange,
    algorithm: SplitAlgorithm,
    bundle: &str,
    topics: &SplitTopics,
    s: &Settings,
) -> Result<Vec<u64>, String> {
    let needs_topics = matches!(
        algorithm,
        SplitAlgorithm::TopicCountEquallyDivide | SplitAlgorithm::FlowOrQpsEquallyDivide
    );
    let mut input = split_input(s);
    if needs_topics {
        let Some(t) = topics.get(bundle) else {
            return Ok(Vec::new());
        };
        for (name, traffic) in t {
            let topic = crate::bundle::TopicName::parse(name).map_err(|e| e.to_string())?;
            input.topics.push(topic);
            input.traffic.insert(name.clone(), *traffic);
        }
    }
    match split_bundle(range, algorithm, &input).map_err(|e| e.to_string())? {
        SplitOutcome::Split(points) => Ok(points),
        SplitOutcome::NoSplit(reason) => Err(format!(
            "{} gives no split point: {reason}",
            algorithm.name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::NamespaceBundles;
    use crate::core::policies::NamespacePolicy;
    use crate::model::{BundleData, LocalBrokerData, NamespaceBundleStats};

    fn load(bundles: &[(&str, i64, f64)]) -> LoadData {
        let mut ld = LoadData::new();
        let mut b = LocalBrokerData::default();
        for (name, topics, rate_in) in bundles {
            b.last_stats.insert(
                name.to_string(),
                NamespaceBundleStats {
                    topics: *topics,
                    ..Default::default()
                },
            );
            let mut d = BundleData::default();
            d.long_term_data.msg_rate_in = *rate_in;
            d.long_term_data.msg_rate_out = 1.0;
            d.long_term_data.msg_throughput_in = 0.0;
            d.long_term_data.msg_throughput_out = 0.0;
            ld.set_bundle(name, d);
        }
        ld.insert_broker("broker:8080", b);
        ld.insert_broker("other:8080", LocalBrokerData::default());
        ld
    }

    #[test]
    fn a_bundle_with_one_topic_is_never_split() {
        // BundleSplitterTaskTest.testSplitTaskWhenTopicJustOne: rate above the maximum, one topic.
        let ld = load(&[("ten/ns/0x00000000_0x80000000", 1, 30000.0)]);
        let plan = find_bundles_to_split(
            &ld,
            &Settings::default(),
            &ClusterPolicies::none(),
            &SplitTopics::new(),
        );
        assert!(plan.splits.is_empty());
    }

    #[test]
    fn the_namespace_maximum_caps_splits() {
        // BundleSplitterTaskTest.testLoadBalancerNamespaceMaximumBundles: three hot bundles, maximum 3 — splits
        // plus the current count never exceed the maximum.
        let hot = [
            ("ten/ns/0x00000000_0x20000000", 5, 60000.0),
            ("ten/ns/0x20000000_0x40000000", 5, 60000.0),
            ("ten/ns/0x40000000_0x60000000", 5, 60000.0),
        ];
        let ld = load(&hot);
        let mut s = Settings::default();
        s.load_balancer_namespace_maximum_bundles = 3;
        let mut policies = ClusterPolicies::none();
        let nb = NamespaceBundles::from_boundaries(vec![
            0,
            0x2000_0000,
            0x4000_0000,
            0x6000_0000,
            0xffff_ffff,
        ])
        .unwrap();
        policies.namespaces.insert(
            "ten/ns".into(),
            NamespacePolicy {
                bundles: Some(nb),
                anti_affinity_group: None,
            },
        );
        let plan = find_bundles_to_split(&ld, &s, &policies, &SplitTopics::new());
        assert_eq!(plan.splits.len() + 4, 4, "already at 4 bundles >= 3");
        // Without known boundaries the count is the 3 bundles seen; maximum 5 allows two splits.
        s.load_balancer_namespace_maximum_bundles = 5;
        let plan = find_bundles_to_split(&ld, &s, &ClusterPolicies::none(), &SplitTopics::new());
        assert_eq!(plan.splits.len() + 3, 5);
        assert_eq!(plan.skipped.len(), 1);
        let first = &plan.splits[0];
        assert_eq!(first.boundaries, ["0x10000000"]);
        assert!(first.unload_children);
        assert_eq!(
            first.reason,
            "split: long-term msg rate 60001.0 msg/s > loadBalancerNamespaceBundleMaxMsgRate 30000.0; range_equally_divide at 0x10000000"
        );
    }

    #[test]
    fn thresholds_topics_sessions_bandwidth() {
        let mut ld = load(&[
            ("t/n/0x00000000_0x80000000", 1001, 0.0),
            ("t/n/0x80000000_0xffffffff", 2, 0.0),
        ]);
        let e = ld.broker_mut("broker:8080").unwrap();
        let st = e
            .local
            .last_stats
            .get_mut("t/n/0x80000000_0xffffffff")
            .unwrap();
        st.producer_count = 600;
        st.consumer_count = 401;
        let plan = find_bundles_to_split(
            &ld,
            &Settings::default(),
            &ClusterPolicies::none(),
            &SplitTopics::new(),
        );
        let reasons: Vec<&str> = plan.splits.iter().map(|s| s.reason.as_str()).collect();
        assert!(reasons[0].contains("topics 1001 > loadBalancerNamespaceBundleMaxTopics 1000"));
        assert!(reasons[1].contains("sessions 1001 > loadBalancerNamespaceBundleMaxSessions 1000"));
        let mut s = Settings::default();
        s.load_balancer_namespace_bundle_max_sessions = 0;
        s.load_balancer_auto_unload_split_bundles_enabled = false;
        let plan = find_bundles_to_split(&ld, &s, &ClusterPolicies::none(), &SplitTopics::new());
        assert_eq!(
            plan.splits.len(),
            1,
            "sessions ignored when the maximum is 0"
        );
        assert!(!plan.splits[0].unload_children);
        let mut d = BundleData::default();
        d.long_term_data.msg_throughput_in = 101.0 * MIB;
        d.long_term_data.msg_rate_in = 0.0;
        ld.set_bundle("t/n/0x80000000_0xffffffff", d);
        let plan = find_bundles_to_split(&ld, &s, &ClusterPolicies::none(), &SplitTopics::new());
        assert!(plan.splits[1].reason.contains(
            "long-term throughput 101.0 MiB/s > loadBalancerNamespaceBundleMaxBandwidthMbytes 100"
        ));
        s.load_balancer_auto_bundle_split_enabled = false;
        assert!(
            find_bundles_to_split(&ld, &s, &ClusterPolicies::none(), &SplitTopics::new())
                .splits
                .is_empty()
        );
    }

    #[test]
    fn a_bundle_listed_by_two_brokers_is_split_once_by_the_last_lister() {
        // After an unload the old owner's stale report and the new owner's report both list the bundle.
        let name = "t/n/0x00000000_0x80000000";
        let mut ld = LoadData::new();
        for b in ["a:8080", "b:8080"] {
            let mut r = LocalBrokerData::default();
            r.last_stats.insert(
                name.into(),
                NamespaceBundleStats {
                    topics: 1500,
                    ..Default::default()
                },
            );
            ld.insert_broker(b, r);
        }
        let plan = find_bundles_to_split(
            &ld,
            &Settings::default(),
            &ClusterPolicies::none(),
            &SplitTopics::new(),
        );
        assert_eq!(plan.splits.len(), 1, "{:?}", plan.splits);
        // Pulsar's `bundleCache.put(bundle, broker)`: the last broker (id order here) wins.
        assert_eq!(plan.splits[0].broker, "b:8080");
    }

    #[test]
    fn an_unsplittable_candidate_does_not_use_up_the_namespace_quota() {
        // 127 bundles, maximum 128: the first candidate holds one hash value and cannot be split; the quota goes
        // to the second (Pulsar counts the first and splits nothing; see "Java bugs fixed" in core/mod.rs).
        let mut boundaries: Vec<u64> = vec![0, 1];
        boundaries.extend((1..126u64).map(|i| i * 0x0200_0000));
        boundaries.push(0xffff_ffff);
        let nb = NamespaceBundles::from_boundaries(boundaries).unwrap();
        assert_eq!(nb.len(), 127);
        let ld = load(&[
            ("ten/ns/0x00000000_0x00000001", 1500, 0.0),
            ("ten/ns/0x02000000_0x04000000", 1500, 0.0),
        ]);
        let mut s = Settings::default();
        s.load_balancer_namespace_maximum_bundles = 128;
        let mut policies = ClusterPolicies::none();
        policies.namespaces.insert(
            "ten/ns".into(),
            NamespacePolicy {
                bundles: Some(nb),
                anti_affinity_group: None,
            },
        );
        let plan = find_bundles_to_split(&ld, &s, &policies, &SplitTopics::new());
        let split: Vec<&str> = plan.splits.iter().map(|d| d.bundle.as_str()).collect();
        assert_eq!(split, ["ten/ns/0x02000000_0x04000000"]);
        assert!(plan.skipped[0].reason.contains("holds one hash value"));
    }

    #[test]
    fn namespaces_without_boundaries_count_each_known_bundle_once() {
        // ten/a has no known boundaries: its count is the distinct bundles with data or listed by a report —
        // two hot ones, one cold one with data only, one listed by two brokers, one listed without data (a
        // report edited in place): 5. ten/b's count comes from its boundaries (2) however many bundles are seen.
        let hot = [
            ("ten/a/0x00000000_0x20000000", 1500, 0.0),
            ("ten/a/0x20000000_0x40000000", 1500, 0.0),
            ("ten/b/0x00000000_0x40000000", 1500, 0.0),
            ("ten/b/0x40000000_0x80000000", 1500, 0.0),
            ("ten/b/0x80000000_0xffffffff", 1500, 0.0),
        ];
        let mut ld = load(&hot);
        ld.set_bundle("ten/a/0x40000000_0x60000000", BundleData::default());
        let mut other = LocalBrokerData::default();
        for b in ["ten/a/0x60000000_0x80000000", "ten/a/0x20000000_0x40000000"] {
            other
                .last_stats
                .insert(b.into(), NamespaceBundleStats::default());
        }
        ld.insert_broker("other:8080", other);
        ld.broker_mut("other:8080")
            .unwrap()
            .local
            .last_stats
            .insert(
                "ten/a/0x80000000_0xa0000000".into(),
                NamespaceBundleStats::default(),
            );
        assert!(ld.bundle("ten/a/0x80000000_0xa0000000").is_none());
        let mut policies = ClusterPolicies::none();
        policies.namespaces.insert(
            "ten/b".into(),
            NamespacePolicy {
                bundles: Some(
                    NamespaceBundles::from_boundaries(vec![0, 0x4000_0000, 0xffff_ffff]).unwrap(),
                ),
                anti_affinity_group: None,
            },
        );
        let mut s = Settings::default();
        s.load_balancer_namespace_maximum_bundles = 6;
        let plan = find_bundles_to_split(&ld, &s, &policies, &SplitTopics::new());
        let split: Vec<&str> = plan.splits.iter().map(|d| d.bundle.as_str()).collect();
        // ten/a: 5 < 6 allows one split, 5 + 1 does not. ten/b: 2 known bundles; the third listed one is
        // not among its boundaries.
        assert_eq!(
            split,
            ["ten/a/0x00000000_0x20000000", "ten/b/0x00000000_0x40000000"]
        );
        let reasons: Vec<&str> = plan.skipped.iter().map(|k| k.reason.as_str()).collect();
        assert!(
            reasons[0].ends_with(
                "namespace ten/a has 5 bundles (+1 splitting) >= loadBalancerNamespaceMaximumBundles 6"
            ),
            "{reasons:?}"
        );
        assert!(reasons
            .iter()
            .any(|r| r.ends_with("the bundle no longer exists")));
        assert_eq!(plan.skipped.len(), 3, "{reasons:?}");
    }

    #[test]
    fn topic_count_algorithm_uses_the_topic_list() {
        let ld = load(&[("public/default/0x00000000_0xffffffff", 1500, 0.0)]);
        let mut s = Settings::default();
        s.default_namespace_bundle_split_algorithm = SplitAlgorithm::TopicCountEquallyDivide;
        let plan = find_bundles_to_split(&ld, &s, &ClusterPolicies::none(), &SplitTopics::new());
        assert!(plan.splits[0].boundaries.is_empty());
        assert!(plan.splits[0].reason.ends_with(
            "topic_count_equally_divide boundaries computed by the owner from its topics"
        ));
        let mut topics = SplitTopics::new();
        let t: BTreeMap<String, TopicTraffic> = [
            "persistent://public/default/my-topic-partition-0",
            "persistent://public/default/my-topic-partition-1",
        ]
        .iter()
        .map(|n| (n.to_string(), TopicTraffic::default()))
        .collect();
        topics.insert("public/default/0x00000000_0xffffffff".into(), t);
        let plan = find_bundles_to_split(&ld, &s, &ClusterPolicies::none(), &topics);
        // Hashes 0x3d4b4235 and 0x4a4c72a3: midpoint 0x43cbda6c.
        assert_eq!(plan.splits[0].boundaries, ["0x43cbda6c"]);
    }
}
