//! Property tests: every value loadmgr writes parses back equal and validates against its schema; the bundle
//! arithmetic keeps its invariants for any input.

use std::collections::{BTreeMap, BTreeSet};

use loadmgr::bundle::{
    split_bundle, BundleRange, NamespaceBundles, SplitAlgorithm, SplitInput, SplitOutcome,
};
use loadmgr::model::json::{format_java_double, to_json_string};
use loadmgr::model::{
    AdvertisedListener, BundleData, LeaderBroker, LocalBrokerData, NamespaceBundleStats,
    NamespaceEphemeralData, NodeType, ResourceQuota, ResourceUsage, TimeAverageBrokerData,
    TimeAverageMessageData,
};
use proptest::prelude::*;

fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(1.0e7),
        Just(1.0e-3),
        Just(5e-324),
        Just(f64::MAX),
        -1.0e9..1.0e9f64,
        any::<f64>().prop_filter("finite", |v| v.is_finite()),
    ]
}

fn name() -> impl Strategy<Value = String> {
    "[a-z0-9:./_-]{1,24}"
}

fn usage() -> impl Strategy<Value = ResourceUsage> {
    (double(), double()).prop_map(|(usage, limit)| ResourceUsage { usage, limit })
}

fn stats() -> impl Strategy<Value = NamespaceBundleStats> {
    (
        double(),
        double(),
        double(),
        double(),
        any::<i32>(),
        any::<i32>(),
        any::<i64>(),
        any::<i64>(),
    )
        .prop_map(
            |(a, b, c, d, consumers, producers, topics, cache)| NamespaceBundleStats {
                msg_rate_in: a,
                msg_throughput_in: b,
                msg_rate_out: c,
                msg_throughput_out: d,
                consumer_count: consumers,
                producer_count: producers,
                topics,
                cache_size: cache,
            },
        )
}

fn window() -> impl Strategy<Value = TimeAverageMessageData> {
    (
        0..=i32::MAX,
        0..=i32::MAX,
        double(),
        double(),
        double(),
        double(),
    )
        .prop_map(|(max, num, a, b, c, d)| TimeAverageMessageData {
            max_samples: max,
            num_samples: num,
            msg_throughput_in: a,
            msg_throughput_out: b,
            msg_rate_in: c,
            msg_rate_out: d,
        })
}

fn local_broker_data() -> impl Strategy<Value = LocalBrokerData> {
    (
        (
            proptest::option::of(name()),
            proptest::option::of(name()),
            proptest::option::of(name()),
            any::<bool>(),
        ),
        (usage(), usage(), usage(), usage(), usage()),
        (double(), double(), double(), double(), any::<i64>()),
        proptest::collection::btree_map(name(), stats(), 0..4),
        (
            proptest::collection::btree_set(name(), 0..3),
            proptest::collection::btree_set(name(), 0..3),
        ),
        (
            proptest::option::of(name()),
            proptest::collection::btree_map(name(), name(), 0..2),
            proptest::option::of(any::<i64>()),
        ),
        proptest::collection::btree_map(
            name(),
            (proptest::option::of(name()), proptest::option::of(name())),
            0..2,
        ),
    )
        .prop_map(
            |(
                urls,
                res,
                rates,
                last_stats,
                (gains, losses),
                (version, protocols, start),
                listeners,
            )| {
                let mut data = LocalBrokerData {
                    broker_id: urls.0.clone(),
                    web_service_url: urls.1,
                    pulsar_service_url_tls: urls.2,
                    non_persistent_topics_enabled: urls.3,
                    cpu: res.0,
                    memory: res.1,
                    direct_memory: res.2,
                    bandwidth_in: res.3,
                    bandwidth_out: res.4,
                    msg_throughput_in: rates.0,
                    msg_throughput_out: rates.1,
                    msg_rate_in: rates.2,
                    msg_rate_out: rates.3,
                    last_update: rates.4,
                    bundles: last_stats.keys().cloned().collect::<BTreeSet<_>>(),
                    last_stats,
                    last_bundle_gains: gains,
                    last_bundle_losses: losses,
                    broker_version_string: version,
                    protocols,
                    start_timestamp: start,
                    load_manager_class_name: urls.0,
                    advertised_listeners: listeners
                        .into_iter()
                        .map(|(k, (a, b))| {
                            (
                                k,
                                AdvertisedListener {
                                    broker_service_url: a,
                                    broker_service_url_tls: b,
                                },
                            )
                        })
                        .collect::<BTreeMap<_, _>>(),
                    ..Default::default()
                };
                data.num_bundles = data.last_stats.len() as i32;
                data
            },
        )
}

fn round_trip<T>(value: &T, node_type: NodeType) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let text = to_json_string(value);
    let parsed: serde_json::Value = serde_json::from_str(&text).expect("we write valid JSON");
    node_type
        .validate(&parsed)
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    serde_json::from_str(&text).expect("we read what we write")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn java_doubles_read_back_exactly(v in any::<f64>().prop_filter("finite", |v| v.is_finite())) {
        let text = format_java_double(v);
        let back: f64 = text.parse().unwrap();
        prop_assert_eq!(back.to_bits(), v.to_bits(), "{}", text);
        prop_assert!(text.contains('.'), "Java always prints a fractional part: {}", text);
    }

    #[test]
    fn local_broker_data_round_trips(data in local_broker_data()) {
        prop_assert_eq!(round_trip(&data, NodeType::LocalBrokerData), data);
    }

    #[test]
    fn bundle_data_round_trips(short in window(), long in window(), topics in 0..=i32::MAX) {
        let data = BundleData { short_term_data: short, long_term_data: long, topics };
        prop_assert_eq!(round_trip(&data, NodeType::BundleData), data);
        prop_assert_eq!(round_trip(&short, NodeType::TimeAverageMessageData), short);
    }

    #[test]
    fn averages_and_quotas_round_trip(v in proptest::collection::vec(double(), 8), dynamic in any::<bool>()) {
        let avg = TimeAverageBrokerData {
            short_term_msg_throughput_in: v[0], short_term_msg_throughput_out: v[1],
            short_term_msg_rate_in: v[2], short_term_msg_rate_out: v[3],
            long_term_msg_throughput_in: v[4], long_term_msg_throughput_out: v[5],
            long_term_msg_rate_in: v[6], long_term_msg_rate_out: v[7],
        };
        prop_assert_eq!(round_trip(&avg, NodeType::TimeAverageBrokerData), avg);
        let quota = ResourceQuota { msg_rate_in: v[0], msg_rate_out: v[1], bandwidth_in: v[2], bandwidth_out: v[3], memory: v[4], dynamic };
        prop_assert_eq!(round_trip(&quota, NodeType::ResourceQuota), quota);
    }

    #[test]
    fn ownership_and_leader_round_trip(a in proptest::option::of(name()), b in proptest::option::of(name()), disabled in any::<bool>()) {
        let own = NamespaceEphemeralData { native_url: a.clone(), http_url_tls: b.clone(), disabled, ..Default::default() };
        prop_assert_eq!(round_trip(&own, NodeType::NamespaceEphemeralData), own);
        if a.is_some() || b.is_some() {
            let leader = LeaderBroker { broker_id: a, service_url: b };
            prop_assert_eq!(round_trip(&leader, NodeType::LeaderBroker), leader);
        }
    }

    #[test]
    fn non_finite_doubles_round_trip_through_strings(which in 0usize..3) {
        let v = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY][which];
        let data = ResourceUsage { usage: v, limit: 1.0 };
        let back: ResourceUsage = serde_json::from_str(&to_json_string(&data)).unwrap();
        prop_assert_eq!(back.usage.to_bits(), v.to_bits());
    }

    #[test]
    fn every_hash_falls_in_exactly_one_initial_bundle(count in 1u64..2000, hash in 0u64..=0xffff_ffff) {
        let bundles = NamespaceBundles::initial(count).unwrap();
        prop_assert_eq!(bundles.len() as u64, count);
        let found = bundles.find(hash);
        prop_assert!(found.contains(hash));
        prop_assert_eq!(bundles.ranges().filter(|r| r.contains(hash)).count(), 1);
        let back = NamespaceBundles::from_bundles_data(&bundles.to_bundles_data()).unwrap();
        prop_assert_eq!(back, bundles);
    }

    #[test]
    fn split_children_partition_the_parent(lower in 0u64..0xffff_fff0, width in 2u64..0x1_0000_0000, hash in any::<u32>()) {
        let upper = (lower + width).min(0xffff_ffff);
        prop_assume!(upper > lower + 1);
        let range = BundleRange::new(lower, upper).unwrap();
        let outcome = split_bundle(range, SplitAlgorithm::RangeEquallyDivide, &SplitInput::default()).unwrap();
        prop_assert!(matches!(outcome, SplitOutcome::Split(_)));
        let children = outcome.children(range);
        prop_assert_eq!(children.len(), 2);
        prop_assert_eq!(children[0].upper(), children[1].lower());
        let h = lower + (hash as u64 % (upper - lower + 1));
        let owners = children.iter().filter(|c| c.contains(h)).count();
        // The parent's open top is not in any child; everything else is in exactly one.
        prop_assert_eq!(owners, usize::from(range.contains(h)));
    }
}
