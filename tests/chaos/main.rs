//! The chaos suite: seeded trials of faults on a cluster of four `loadmgr broker` processes with synthetic
//! hosts, on real ZooKeeper and etcd servers (single and three-member), checked by an ownership oracle built
//! from the hosts' own serving timelines (`docs/chaos.md`).
//!
//! * `cargo test --test chaos` (part of `make test`) runs a smoke: a few trials on a single ZooKeeper and a
//!   single etcd.
//! * `make chaos` runs the whole suite: `LOADMGR_CHAOS_TRIALS` trials per store (default 110), about 60 % on a
//!   single server and 40 % on a three-member ensemble, with `LOADMGR_CHAOS_SEED` (default 1), and writes the
//!   table to `target/chaos/report.md`.
//!
//! Every trial injects one fault, undoes it, and waits until the cluster settles (every broker registered, a
//! leader, every bundle owned, no move in flight). The suite fails if any two broker processes served one
//! bundle at the same instant (SIGSTOPped ones included), if a trial does not settle within a minute, or if
//! a check of the fault fails (a ghost got a bundle, a lookup answered a fake owner, a store restart shorter
//! than the session cost a session).

mod cluster;
mod faults;
mod oracle;

use std::fmt::Write as _;
use std::time::Duration;

use loadmgr::runtime::admin;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use cluster::{now_us, Cluster, Setup, BUNDLES, NS};
use faults::{Fault, Prober, Trial};

/// Every trial of one setup, with the oracle's verdict.
struct SetupRun {
    setup: Setup,
    trials: Vec<Trial>,
    /// Pairs of serving intervals of different processes on one bundle that overlap, as text.
    overlaps: Vec<String>,
    /// Per trial: the longest a bundle of the namespace went unserved (ms).
    unserved_ms: Vec<u64>,
    /// Per trial: (lookups answered, failures).
    lookups: Vec<(usize, Vec<String>)>,
}

/// The trials of a setup: every fault kind in turn, in a seeded order, `n` in all.
fn plan(setup: Setup, n: usize, rng: &mut StdRng) -> Vec<Fault> {
    let kinds = Fault::for_setup(setup.is_ensemble());
    let mut out = Vec::new();
    while out.len() < n {
        let mut round = kinds.clone();
        round.shuffle(rng);
        out.extend(round);
    }
    out.truncate(n);
    out
}

async fn run_setup(setup: Setup, faults: &[Fault], rng: &mut StdRng) -> SetupRun {
    eprintln!("== {}: starting the store and 4 brokers", setup.name());
    let mut cluster = Cluster::start(setup).await;
    let prober = Prober::start(&cluster);
    let mut trials = Vec::new();
    for (n, fault) in faults.iter().enumerate() {
        let trial = faults::run(&mut cluster, &prober, *fault, n + 1, rng).await;
        eprintln!(
            "{} #{:>3} {:<26} {:<60} settled {:>6} ms{}",
            setup.name(),
            trial.number,
            fault.name(),
            trial.detail,
            trial.settle_ms,
            trial
                .failure
                .as_deref()
                .map(|f| format!("  FAILED: {f}"))
                .unwrap_or_default()
        );
        let failed = trial.failure.is_some();
        trials.push(trial);
        if failed {
            break;
        }
    }
    // Let the last intervals close before reading the logs.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let end_us = now_us();
    let mut all = Vec::new();
    for (id, n, log, killed) in cluster.serving_logs() {
        let process = format!("{id}#{n}");
        all.extend(
            oracle::intervals(&process, &log, killed.unwrap_or(end_us))
                .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    let overlaps = oracle::overlaps(&all)
        .into_iter()
        .map(|o| {
            format!(
                "{} served by {} (token {}, {}..{}) and {} (token {}, {}..{}) for {} µs",
                o.a.bundle,
                o.a.process,
                o.a.token,
                o.a.start_us,
                o.a.end_us,
                o.b.process,
                o.b.token,
                o.b.start_us,
                o.b.end_us,
                o.overlap_us
            )
        })
        .collect();
    let bundles: Vec<String> = admin::namespace_bundles(&cluster.store, NS)
        .await
        .map(|(info, _)| info.bundle_names())
        .unwrap_or_default();
    assert_eq!(bundles.len(), BUNDLES);
    if std::env::var("LOADMGR_CHAOS_DEBUG").is_ok() {
        for t in &trials {
            eprintln!("trial {} {}..{}", t.number, t.start_us, t.end_us);
            for i in all
                .iter()
                .filter(|i| i.end_us >= t.start_us - 1_000_000 && i.start_us <= t.end_us)
            {
                eprintln!("  {:?}", i);
            }
        }
    }
    let unserved_ms = trials
        .iter()
        .map(|t| (oracle::longest_unserved(&all, &bundles, t.start_us, t.end_us) / 1000) as u64)
        .collect();
    let lookups = trials
        .iter()
        .map(|t| prober.between(t.start_us, t.end_us))
        .collect();
    drop(prober);
    cluster.shutdown();
    SetupRun {
        setup,
        trials,
        overlaps,
        unserved_ms,
        lookups,
    }
}

fn median_max(mut v: Vec<u64>) -> String {
    if v.is_empty() {
        return "–".into();
    }
    v.sort_unstable();
    format!("{} / {}", v[v.len() / 2], v[v.len() - 1])
}

/// The table of a run: a row per setup and fault.
fn table(runs: &[SetupRun]) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "| store | fault | trials | two servers at once | new leader ms (median / max) | sessions kept | longest unserved ms (median / max) | lookups failed / sent | settled ms (median / max) |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|---|---|---|").unwrap();
    for run in runs {
        let mut kinds: Vec<Fault> = run.trials.iter().map(|t| t.fault).collect();
        kinds.sort();
        kinds.dedup();
        for kind in kinds {
            let idx: Vec<usize> = (0..run.trials.len())
                .filter(|i| run.trials[*i].fault == kind)
                .collect();
            let ts: Vec<&Trial> = idx.iter().map(|i| &run.trials[*i]).collect();
            let overlapping = ts
                .iter()
                .filter(|t| {
                    run.overlaps.iter().any(|o| {
                        // Attribute an overlap to the trial whose window holds its start.
                        o.split(" and ")
                            .nth(1)
                            .and_then(|b| b.split(", ").nth(1))
                            .and_then(|r| r.split("..").next())
                            .and_then(|s| s.parse::<i64>().ok())
                            .is_some_and(|s| s >= t.start_us && s <= t.end_us)
                    })
                })
                .count();
            let leaders: Vec<u64> = ts.iter().filter_map(|t| t.new_leader_ms).collect();
            let kept: Vec<bool> = ts.iter().filter_map(|t| t.sessions_kept).collect();
            let kept = if kept.is_empty() {
                "–".to_owned()
            } else {
                format!("{} of {}", kept.iter().filter(|k| **k).count(), kept.len())
            };
            let unserved: Vec<u64> = idx.iter().map(|i| run.unserved_ms[*i]).collect();
            let (sent, failed) = idx.iter().fold((0, 0), |(s, f), i| {
                let (ok, fails) = &run.lookups[*i];
                (s + ok + fails.len(), f + fails.len())
            });
            let settled: Vec<u64> = ts.iter().map(|t| t.settle_ms).collect();
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {failed} / {sent} | {} |",
                run.setup.name(),
                kind.name(),
                ts.len(),
                overlapping,
                median_max(leaders),
                kept,
                median_max(unserved),
                median_max(settled),
            )
            .unwrap();
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos() {
    let full: Option<usize> = std::env::var("LOADMGR_CHAOS_TRIALS").ok().map(|v| {
        v.parse()
            .expect("LOADMGR_CHAOS_TRIALS is a number of trials")
    });
    let seed: u64 = std::env::var("LOADMGR_CHAOS_SEED")
        .ok()
        .map_or(1, |v| v.parse().expect("LOADMGR_CHAOS_SEED is a number"));
    let stores = std::env::var("LOADMGR_CHAOS_STORES").unwrap_or_else(|_| "zk,etcd".into());
    let mut rng = StdRng::seed_from_u64(seed);
    let mut setups: Vec<(Setup, Vec<Fault>)> = Vec::new();
    for family in stores.split(',') {
        let (single, ensemble) = match family.trim() {
            "zk" => (Setup::Zk, Setup::ZkEnsemble),
            "etcd" => (Setup::Etcd, Setup::EtcdCluster),
            other => panic!("LOADMGR_CHAOS_STORES: unknown store {other} (zk, etcd)"),
        };
        match full {
            Some(n) => {
                let on_ensemble = n * 2 / 5;
                setups.push((single, plan(single, n - on_ensemble, &mut rng)));
                setups.push((ensemble, plan(ensemble, on_ensemble, &mut rng)));
            }
            // The smoke: the faults that matter most for safety, once each.
            None if single == Setup::Zk => setups.push((
                single,
                vec![
                    Fault::PauseOwner,
                    Fault::KillLeader,
                    Fault::StoreRestart,
                    Fault::FakeOwner,
                ],
            )),
            None => setups.push((single, vec![Fault::PauseLeader, Fault::Partition])),
        }
    }
    let started = std::time::Instant::now();
    let mut runs = Vec::new();
    for (setup, faults) in setups {
        runs.push(run_setup(setup, &faults, &mut rng).await);
    }
    let table = table(&runs);
    let mut report = format!(
        "# Chaos run\n\nseed {seed}, {} trials, {:.0} s; session timeout {} ms, 4 brokers, {BUNDLES} bundles\n\n{table}",
        runs.iter().map(|r| r.trials.len()).sum::<usize>(),
        started.elapsed().as_secs_f64(),
        cluster::SESSION.as_millis()
    );
    let overlaps: Vec<&String> = runs.iter().flat_map(|r| &r.overlaps).collect();
    let failures: Vec<String> = runs
        .iter()
        .flat_map(|r| {
            r.trials.iter().filter_map(|t| {
                t.failure
                    .as_ref()
                    .map(|f| format!("{} #{} {}: {f}", r.setup.name(), t.number, t.fault.name()))
            })
        })
        .collect();
    let lookup_failures: Vec<String> = runs
        .iter()
        .flat_map(|r| {
            r.lookups.iter().zip(&r.trials).flat_map(|((_, f), t)| {
                f.iter()
                    .map(|e| format!("{} #{} {}: {e}", r.setup.name(), t.number, t.fault.name()))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    if !lookup_failures.is_empty() {
        report.push_str("\n## Failed lookups\n\n");
        for l in &lookup_failures {
            report.push_str(&format!("- {l}\n"));
        }
    }
    println!("{report}");
    if full.is_some() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/chaos");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("report.md"), &report).unwrap();
        eprintln!("report written to {}", dir.join("report.md").display());
    }
    assert!(
        overlaps.is_empty(),
        "{} instants with two servers:\n{}",
        overlaps.len(),
        overlaps
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        failures.is_empty(),
        "failed trials:\n{}",
        failures.join("\n")
    );
}
