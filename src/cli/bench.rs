//! `loadmgr bench store --store URL`: put throughput through the `MetadataStore` trait and through the raw
//! client crate against the same server in the same run, single puts with N in flight and batched puts.

use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{CliError, CliResult};

use crate::store::concurrent::run_in_flight;
use crate::store::etcd::raw_bench::RawEtcd;
use crate::store::zookeeper::raw_bench::RawZk;
use crate::store::{self, DynStore, MetadataStoreExt, Op, StoreOptions, StoreUrl};

/// Benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Put throughput through the MetadataStore trait vs the raw client crate, same server, same run.
    Store(StoreBench),
    /// Topic lookups through the web service and through /loadmgr/requests nodes: latency and store writes.
    Lookups(super::bench_lookups::LookupBench),
    /// N broker agents × M bundles on a real store: registration, cold start, steady state, flush, shedding,
    /// failover and full restart, through the runtime code `loadmgr broker` runs.
    #[command(
        after_help = "Example:\n  loadmgr bench cluster --store zk:127.0.0.1:2181 --brokers 100 --bundles 10000\n\nSee docs/benchmarks.md (\"The live cluster\") for what each figure means and today's results."
    )]
    Cluster(super::bench_cluster::ClusterBench),
}

/// `loadmgr bench store` flags.
#[derive(Debug, Args)]
pub struct StoreBench {
    /// Store URL (zk:, etcd:, memory:).
    #[arg(long)]
    store: String,
    /// Puts per measurement (single and batched).
    #[arg(long, default_value_t = 20_000)]
    ops: usize,
    /// Single puts in flight.
    #[arg(long, default_value_t = 64)]
    in_flight: usize,
    /// Puts per batch.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Batches in flight.
    #[arg(long, default_value_t = 8)]
    batches_in_flight: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Distinct keys written (round robin).
    #[arg(long, default_value_t = 1024)]
    keys: usize,
    /// Measurements per variant (the median is reported).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
}

/// Runs `loadmgr bench ...`.
pub fn run(command: BenchCommand) -> CliResult {
    match command {
        BenchCommand::Store(b) => {
            super::block_on(async move { store_bench(b).await.map_err(CliError::new) })
        }
        BenchCommand::Lookups(b) => super::bench_lookups::run(b),
        BenchCommand::Cluster(b) => super::bench_cluster::run(b),
    }
}

enum Raw {
    Zk(RawZk),
    Etcd(Box<RawEtcd>),
    None,
}

async fn store_bench(b: StoreBench) -> Result<(), String> {
    let url = StoreUrl::parse(&b.store).map_err(|e| e.to_string())?;
    let options = StoreOptions::default().with_session_timeout(Duration::from_secs(10));
    let store = store::connect(&b.store, options)
        .await
        .map_err(|e| e.to_string())?;
    let root = format!("/loadmgr-bench-{}", std::process::id());
    let keys: Vec<String> = (0..b.keys.max(b.batch))
        .map(|i| format!("{root}/k{i:05}"))
        .collect();
    let (raw, raw_keys) = match &url {
        StoreUrl::ZooKeeper { servers, chroot } => {
            let prefix = chroot.clone().unwrap_or_default();
            let raw = RawZk::connect(servers).await.map_err(|e| e.to_string())?;
            (
                Raw::Zk(raw),
                keys.iter().map(|k| format!("{prefix}{k}")).collect(),
            )
        }
        StoreUrl::Etcd { endpoints } => {
            let raw = RawEtcd::connect(endpoints)
                .await
                .map_err(|e| e.to_string())?;
            (Raw::Etcd(Box::new(raw)), keys.clone())
        }
        StoreUrl::Memory { .. } => (Raw::None, keys.clone()),
    };
    let value = vec![b'x'; b.value_size];
    // Create the keys so every measured put is an update (the steady state of load reports).
    for chunk in keys.chunks(64) {
        let ops = chunk
            .iter()
            .map(|k| Op::put(k.clone(), value.clone()))
            .collect();
        store.batch(ops).await.map_err(|e| e.to_string())?;
    }
    println!(
        "store {} — {} B values, {} keys, median of {} rounds",
        store.address(),
        b.value_size,
        keys.len(),
        b.rounds
    );
    let batches = (b.ops / b.batch).max(1);
    let mut single = (Vec::new(), Vec::new());
    let mut batched = (Vec::new(), Vec::new());
    // etcd only: the raw client also asking for the previous key-value (see `raw_bench`).
    let mut single_prev = Vec::new();
    let mut batched_prev = Vec::new();
    // Warm up both paths, then interleave the measurements so drift hits both alike.
    trait_single(&store, &keys, &value, b.ops / 10, b.in_flight).await?;
    raw_single(&raw, &raw_keys, &value, b.ops / 10, b.in_flight, false).await?;
    let n = (batches * b.batch) as f64;
    for round in 0..b.rounds {
        // Alternate which path goes first, so server warm-up and drift favour neither.
        for first_trait in [round % 2 == 0, round % 2 == 1] {
            if first_trait {
                single.0.push(
                    b.ops as f64 / trait_single(&store, &keys, &value, b.ops, b.in_flight).await?,
                );
                let t = trait_batched(&store, &keys, &value, batches, b.batch, b.batches_in_flight)
                    .await?;
                batched.0.push(n / t);
            } else {
                if let Some(t) =
                    raw_single(&raw, &raw_keys, &value, b.ops, b.in_flight, false).await?
                {
                    single.1.push(b.ops as f64 / t);
                }
                let t = raw_batched(
                    &raw,
                    &raw_keys,
                    &value,
                    batches,
                    b.batch,
                    b.batches_in_flight,
                    false,
                );
                if let Some(t) = t.await? {
                    batched.1.push(n / t);
                }
                if let Raw::Etcd(_) = raw {
                    if let Some(t) =
                        raw_single(&raw, &raw_keys, &value, b.ops, b.in_flight, true).await?
                    {
                        single_prev.push(b.ops as f64 / t);
                    }
                    let t = raw_batched(
                        &raw,
                        &raw_keys,
                        &value,
                        batches,
                        b.batch,
                        b.batches_in_flight,
                        true,
                    );
                    if let Some(t) = t.await? {
                        batched_prev.push(n / t);
                    }
                }
            }
        }
    }
    let single_label = format!("single puts, {} in flight", b.in_flight);
    let batched_label = format!(
        "batched puts, {} per batch, {} batches in flight",
        b.batch, b.batches_in_flight
    );
    report(&single_label, &single);
    report(&batched_label, &batched);
    if !single_prev.is_empty() {
        println!("etcd, raw client asking for prev_kv as the store must (to report versions and keep leases):");
        report(&single_label, &(single.0.clone(), single_prev));
        report(&batched_label, &(batched.0.clone(), batched_prev));
    }
    store
        .delete_recursive(&root)
        .await
        .map_err(|e| e.to_string())?;
    store.close().await.map_err(|e| e.to_string())?;
    Ok(())
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied()
}

fn report(what: &str, (via_trait, raw): &(Vec<f64>, Vec<f64>)) {
    let t = median(via_trait).unwrap_or(0.0);
    match median(raw) {
        Some(r) => println!(
            "{what:<50} trait {t:>10.0} ops/s   raw {r:>10.0} ops/s   trait/raw {:>5.1} %",
            100.0 * t / r
        ),
        None => println!("{what:<50} trait {t:>10.0} ops/s   (no raw client for this backend)"),
    }
}

async fn trait_single(
    store: &DynStore,
    keys: &[String],
    value: &[u8],
    count: usize,
    in_flight: usize,
) -> Result<f64, String> {
    let took = run_in_flight(count, in_flight, |i| {
        let store = Arc::clone(store);
        let key = keys[i % keys.len()].clone();
        let value = value.to_vec();
        Ok(async move {
            store
                .put(&key, &value, None, store::CreateOptions::PERSISTENT)
                .await
                .map_err(|e| e.to_string())
        })
    })
    .await?;
    Ok(took.as_secs_f64())
}

async fn trait_batched(
    store: &DynStore,
    keys: &[String],
    value: &[u8],
    batches: usize,
    batch: usize,
    in_flight: usize,
) -> Result<f64, String> {
    let took = run_in_flight(batches, in_flight, |issued| {
        let store = Arc::clone(store);
        let ops: Vec<Op> = (0..batch)
            .map(|i| {
                Op::put(
                    keys[(issued * batch + i) % keys.len()].clone(),
                    value.to_vec(),
                )
            })
            .collect();
        Ok(async move { store.batch(ops).await.map_err(|e| e.to_string()) })
    })
    .await?;
    Ok(took.as_secs_f64())
}

async fn raw_single(
    raw: &Raw,
    keys: &[String],
    value: &[u8],
    count: usize,
    in_flight: usize,
    prev_kv: bool,
) -> Result<Option<f64>, String> {
    let d = match raw {
        Raw::Zk(r) => r.single_puts(keys, value, count, in_flight).await,
        Raw::Etcd(r) => r.single_puts(keys, value, count, in_flight, prev_kv).await,
        Raw::None => return Ok(None),
    };
    d.map(|d| Some(d.as_secs_f64())).map_err(|e| e.to_string())
}

async fn raw_batched(
    raw: &Raw,
    keys: &[String],
    value: &[u8],
    batches: usize,
    batch: usize,
    in_flight: usize,
    prev_kv: bool,
) -> Result<Option<f64>, String> {
    let d = match raw {
        Raw::Zk(r) => r.batched_puts(keys, value, batches, batch, in_flight).await,
        Raw::Etcd(r) => {
            r.batched_puts(keys, value, batches, batch, in_flight, prev_kv)
                .await
        }
        Raw::None => return Ok(None),
    };
    d.map(|d| Some(d.as_secs_f64())).map_err(|e| e.to_string())
}
