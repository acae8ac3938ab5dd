//! Decision-core benchmarks: one shedding cycle plus placement of every planned unload for 1,000 brokers ×
//! 100,000 bundles, per strategy; and aggregation of one 100-bundle report into a 100,000-bundle LoadData.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use loadmgr::config::{Settings, ShedderKind};
use loadmgr::core::{run_shedding_cycle, ClusterPolicies, LoadData, NoSeeds, Strategies};
use loadmgr::model::{
    LocalBrokerData, NamespaceBundleStats, ResourceUsage, MODULAR_LOAD_MANAGER_CLASS,
};
use rand::rngs::StdRng;
use rand::SeedableRng;

const BROKERS: usize = 1000;
const BUNDLES_PER_BROKER: usize = 100;
const NOW: i64 = 1_700_000_000_000;

fn stats(rate: f64, topics: i64) -> NamespaceBundleStats {
    NamespaceBundleStats {
        msg_rate_in: rate,
        msg_rate_out: rate,
        msg_throughput_in: rate * 1024.0,
        msg_throughput_out: rate * 1024.0,
        topics,
        ..Default::default()
    }
}

fn report(i: usize, scale: f64) -> LocalBrokerData {
    let mut r = LocalBrokerData::default();
    let mut map = std::collections::BTreeMap::new();
    for j in 0..BUNDLES_PER_BROKER {
        let ns = format!("tenant-{}/ns-{}", i % 50, j % 10);
        let lower = (i * BUNDLES_PER_BROKER + j) as u64 * 0x1000;
        let name = format!("{ns}/0x{lower:08x}_0x{:08x}", lower + 0x1000);
        map.insert(
            name,
            stats(scale * (1.0 + (j % 7) as f64) * 10.0, 2 + (j % 5) as i64),
        );
    }
    r.update(&Default::default(), map);
    let cpu = 10.0 + ((i * 37) % 85) as f64;
    r.cpu = ResourceUsage::new(cpu, 100.0);
    r.bandwidth_in = ResourceUsage::new(cpu / 2.0, 100.0);
    r.bandwidth_out = ResourceUsage::new(cpu / 2.0, 100.0);
    r.load_manager_class_name = Some(MODULAR_LOAD_MANAGER_CLASS.into());
    r.last_update = NOW - 1000;
    r
}

fn cluster() -> LoadData {
    let mut ld = LoadData::new();
    for i in 0..BROKERS {
        let scale = 1.0 + ((i * 37) % 85) as f64 / 10.0;
        ld.apply_report(&format!("broker-{i:04}:8080"), report(i, scale), &NoSeeds);
    }
    ld
}

fn bench_cycles(c: &mut Criterion) {
    let load = cluster();
    let policies = ClusterPolicies::none();
    let mut settings = Settings::default();
    settings.load_balancer_shedding_condition_hit_count_threshold = 0;
    let mut group = c.benchmark_group("shedding_cycle_1000x100000");
    group.sample_size(10);
    for kind in ShedderKind::ALL {
        {
            let mut l = load.clone();
            let mut st = Strategies::new(
                kind,
                kind.default_placement(),
                kind == ShedderKind::TransferShedder,
            );
            let mut rng = StdRng::seed_from_u64(1);
            let t0 = std::time::Instant::now();
            run_shedding_cycle(
                &mut l,
                &settings,
                &policies,
                &mut st,
                NOW - 60_000,
                &mut rng,
            );
            let first = t0.elapsed();
            let t = std::time::Instant::now();
            let plan = run_shedding_cycle(&mut l, &settings, &policies, &mut st, NOW, &mut rng);
            eprintln!(
                "{}: first cycle {:?}; {} unloads, {} skipped, second cycle {:?}",
                kind.name(),
                first,
                plan.unloads.len(),
                plan.skipped.len(),
                t.elapsed()
            );
        }
        group.bench_function(kind.name(), |b| {
            // Setup (cloning the 100,000-bundle load data, priming AvgShedder) and dropping are not timed.
            b.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                for _ in 0..iters {
                    let mut l = load.clone();
                    let mut st = Strategies::new(
                        kind,
                        kind.default_placement(),
                        kind == ShedderKind::TransferShedder,
                    );
                    // AvgShedder needs a second look at a 40-point gap, BandShedder a second cycle out of its
                    // band; prime them.
                    if matches!(kind, ShedderKind::AvgShedder | ShedderKind::BandShedder) {
                        run_shedding_cycle(
                            &mut l,
                            &settings,
                            &policies,
                            &mut st,
                            NOW - 60_000,
                            &mut StdRng::seed_from_u64(1),
                        );
                    }
                    let start = std::time::Instant::now();
                    let plan = run_shedding_cycle(
                        &mut l,
                        &settings,
                        &policies,
                        &mut st,
                        NOW,
                        &mut StdRng::seed_from_u64(2),
                    );
                    total += start.elapsed();
                    black_box(plan);
                }
                total
            })
        });
    }
    group.finish();
}

fn bench_report(c: &mut Criterion) {
    let mut load = cluster();
    let fresh = report(7, 3.0);
    c.bench_function("apply_report_100_bundles_into_100000", |b| {
        b.iter_batched(
            || fresh.clone(),
            |r| load.apply_report("broker-0007:8080", black_box(r), &NoSeeds),
            BatchSize::SmallInput,
        )
    });
}

/// The leader's flush at 1,000 brokers × 100,000 bundles: the core's share of it (sampling every bundle,
/// choosing the top ones, finding the changed values), then the outcome coming back. The runtime's loop waits
/// for the first part, so reports arriving meanwhile wait for it too.
fn bench_flush(c: &mut Criterion) {
    use loadmgr::core::leader::{Command, Event, Leader, LoadedState, Outcome, Tick};
    let reports: Vec<(String, Result<LocalBrokerData, String>)> = (0..BROKERS)
        .map(|i| {
            let scale = 1.0 + ((i * 37) % 85) as f64 / 10.0;
            (format!("broker-{i:04}:8080"), Ok(report(i, scale)))
        })
        .collect();
    let mut leader = Leader::new("broker-0000:8080", Settings::default(), 1, NOW);
    leader.handle(
        NOW,
        Event::Loaded(Box::new(LoadedState {
            reports,
            ..Default::default()
        })),
    );
    let mut now = NOW;
    let flush = |leader: &mut Leader, now: i64| {
        let out = leader.handle(now, Event::Tick(Tick::Flush));
        out.into_iter()
            .find_map(|c| match c {
                Command::Flush { ticket, .. } => Some(ticket),
                _ => None,
            })
            .expect("a flush")
    };
    let done = |leader: &mut Leader, now: i64, ticket| {
        leader.handle(
            now,
            Event::Done {
                ticket,
                outcome: Outcome::Written(Vec::new()),
            },
        )
    };
    // The first flush writes everything; the benchmark is of the later ones.
    let t = flush(&mut leader, now);
    done(&mut leader, now, t);
    let mut group = c.benchmark_group("leader_flush_1000_brokers_100000_bundles");
    group.sample_size(20);
    group.bench_function("decide", |b| {
        b.iter_custom(|iters| {
            let mut took = std::time::Duration::ZERO;
            for _ in 0..iters {
                now += 10_000;
                let started = std::time::Instant::now();
                let t = black_box(flush(&mut leader, now));
                took += started.elapsed();
                done(&mut leader, now, t);
            }
            took
        })
    });
    group.bench_function("outcome", |b| {
        b.iter_custom(|iters| {
            let mut took = std::time::Duration::ZERO;
            for _ in 0..iters {
                now += 10_000;
                let t = flush(&mut leader, now);
                let started = std::time::Instant::now();
                black_box(done(&mut leader, now, t));
                took += started.elapsed();
            }
            took
        })
    });
    group.finish();
}

criterion_group!(benches, bench_cycles, bench_report, bench_flush);
criterion_main!(benches);
