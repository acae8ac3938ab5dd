//! Costs on the report path: writing and reading a 100-bundle load report, and topic → bundle lookup.

use std::collections::BTreeMap;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use loadmgr::bundle::{NamespaceBundles, TopicName};
use loadmgr::model::json::to_json_string;
use loadmgr::model::{LocalBrokerData, NamespaceBundleStats, ResourceUsage, SystemResourceUsage};

fn report(bundles: usize) -> LocalBrokerData {
    let ns = NamespaceBundles::initial(bundles as u64).unwrap();
    let stats: BTreeMap<String, NamespaceBundleStats> = ns
        .ranges()
        .enumerate()
        .map(|(i, r)| {
            let rate = 100.0 + i as f64 * 1.5;
            (
                format!("public/default/{r}"),
                NamespaceBundleStats {
                    msg_rate_in: rate,
                    msg_throughput_in: rate * 1024.0,
                    msg_rate_out: rate * 2.0,
                    msg_throughput_out: rate * 2048.0,
                    consumer_count: 2,
                    producer_count: 1,
                    topics: 3,
                    cache_size: 0,
                },
            )
        })
        .collect();
    let mut data = LocalBrokerData {
        web_service_url: Some("http://broker-1:8080".into()),
        ..Default::default()
    };
    let usage = SystemResourceUsage {
        cpu: ResourceUsage::new(123.4, 800.0),
        bandwidth_in: ResourceUsage::new(5120.0, 1.048576e7),
        ..Default::default()
    };
    data.update(&usage, stats);
    data
}

fn bench(c: &mut Criterion) {
    let data = report(100);
    let text = to_json_string(&data);
    c.bench_function("write LocalBrokerData, 100 bundles", |b| {
        b.iter(|| to_json_string(&data))
    });
    c.bench_function("read LocalBrokerData, 100 bundles", |b| {
        b.iter(|| serde_json::from_str::<LocalBrokerData>(&text).unwrap())
    });
    let bundles = NamespaceBundles::initial(128).unwrap();
    let topics: Vec<TopicName> = (0..1000)
        .map(|i| TopicName::parse(&format!("persistent://public/default/topic-{i}")).unwrap())
        .collect();
    c.bench_function("topic -> bundle lookup, 128 bundles", |b| {
        b.iter_batched(
            || topics.clone(),
            |topics| {
                topics
                    .iter()
                    .map(|t| bundles.find_topic(t).lower())
                    .sum::<u64>()
            },
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
