//! Simulator throughput: simulated shedding cycles (one `loadBalancerSheddingIntervalMinutes` of virtual time
//! with every report, aggregation, placement, split check and metric sample in it) per wall-clock second, for
//! the built-in `large` scenario (100 brokers × 10,000 bundles), per strategy. Each iteration simulates the
//! first 30 minutes; criterion's throughput line reads as cycles per second. The full 6-hour runs are timed by
//! `loadmgr simulate large --json` (`wallSeconds`, `simulatedCyclesPerSecond`).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use loadmgr::config::ShedderKind;
use loadmgr::sim::{effective_settings, run, RunOptions, Scenario, World};

const MINUTES: i64 = 30;

fn bench_large(c: &mut Criterion) {
    let mut world = World::from_scenario(&Scenario::built_in("large").expect("built in"), 1)
        .expect("large builds");
    world.duration_ms = MINUTES * 60_000;
    let mut group = c.benchmark_group("simulate_large_100x10000");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(MINUTES as u64));
    for kind in ShedderKind::ALL {
        let (settings, _) = effective_settings(&world.settings_text, None, kind).expect("settings");
        let options = RunOptions {
            settings,
            seed: 1,
            chart_interval_ms: 60_000,
            trace: false,
        };
        group.bench_function(kind.name(), |b| {
            b.iter(|| black_box(run(&world, &options, None).metrics.moves))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_large);
criterion_main!(benches);
