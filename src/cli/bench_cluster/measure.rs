//! The phases of `loadmgr bench cluster` (see the module docs of [`super`]), run in order on one fleet.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::figures::{ms, percentile, Failover, Figures, LagTail, Spread};
use super::fleet::{settings_for, start_members, stop_members, LeaderThread, Member, Owners};
use super::host::Traffic;
use super::procfs;
use super::ClusterBench;
use crate::bundle::{BundleName, NamespaceName};
use crate::core::leader::Request;
use crate::paths;
use crate::runtime::admin;
use crate::runtime::meters::{Meters, OperationLabels};
use crate::runtime::shared::AgentShared;
use crate::store::{self, CreateOptions, DynStore, MetadataStoreExt, Op, StoreOptions};

/// The server's transaction counter: the modification revision of a probe write (itself one transaction).
async fn revision(store: &DynStore, probe: &str) -> Result<i64, String> {
    store
        .put(probe, b"probe", None, CreateOptions::PERSISTENT)
        .await
        .map(|s| s.modification_revision)
        .map_err(|e| format!("probe write: {e}"))
}

/// Store traffic of a set of agents, summed.
#[derive(Debug, Default, Clone, Copy)]
struct Traffic3 {
    reads: u64,
    writes: u64,
    events: u64,
    bytes: u64,
    reports: u64,
}

fn traffic_of(meters: &[&Meters], reports: u64) -> Traffic3 {
    let op = |m: &Meters, name: &str| {
        m.store_operations
            .get_or_create(&OperationLabels {
                operation: name.to_owned(),
            })
            .get()
    };
    let mut t = Traffic3 {
        reports,
        ..Traffic3::default()
    };
    for m in meters {
        // A `get_many` is one request whatever its size (a multi-read on ZooKeeper), and so is a
        // `get_leaves` (a new leader's reads of whole trees, a handful per election).
        t.reads += op(m, "get")
            + op(m, "get_many")
            + op(m, "leaves")
            + op(m, "children")
            + op(m, "exists");
        t.writes += op(m, "put") + op(m, "delete") + op(m, "batch");
        t.events += m.watch_events.get();
        t.bytes += m.store_bytes_written.get();
    }
    t
}

/// Runs every phase.
/// The figures measured, and why the run stopped early if it did (the figures then hold the phases that
/// completed).
pub(super) async fn run(b: ClusterBench) -> Result<(Figures, Option<String>), String> {
    let options =
        StoreOptions::default().with_session_timeout(Duration::from_millis(b.session_timeout_ms));
    let observer = store::connect(&b.store, options.clone())
        .await
        .map_err(|e| format!("{}: {e}", b.store))?;
    let pid = std::process::id();
    let tenant = format!("bench-{pid}");
    let probe = format!("/loadmgr-bench-{pid}");
    let mut outcome = phases(&b, &options, &observer, &tenant, &probe).await;
    // The bench's nodes go whatever happened; on a server still overloaded by a failed phase, within a
    // bound (what is left is named, to be deleted by hand).
    let began = Instant::now();
    let mut complete = true;
    for path in [
        paths::policies(&tenant),
        paths::local_policies(&tenant),
        format!("{}/{tenant}", paths::ASSIGNMENTS),
        format!("{}/{tenant}", paths::BUNDLE_DATA),
        paths::ownership_namespace(&tenant),
        probe.clone(),
    ] {
        match tokio::time::timeout(CLEANUP_LIMIT, observer.delete_recursive(&path)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                complete = false;
                tracing::warn!("cannot delete the bench's {path}: {e}")
            }
            Err(_) => {
                complete = false;
                tracing::warn!(
                    "the bench's {path} was not deleted within {CLEANUP_LIMIT:?}; delete it by hand"
                )
            }
        }
    }
    if let Ok((f, _)) = &mut outcome {
        f.cleanup = Some((began.elapsed().as_secs_f64(), complete));
    }
    let _ = tokio::time::timeout(CLEANUP_LIMIT, observer.close()).await;
    outcome
}

/// How long each step of the bench's clean-up may take.
const CLEANUP_LIMIT: Duration = Duration::from_secs(60);

async fn phases(
    b: &ClusterBench,
    options: &StoreOptions,
    observer: &DynStore,
    tenant: &str,
    probe: &str,
) -> Result<(Figures, Option<String>), String> {
    let mut f = Figures {
        store: observer.address(),
        brokers: b.brokers,
        bundles: b.bundles,
        namespaces: b.namespace_count(),
        session_timeout_ms: b.session_timeout_ms,
        ..Figures::default()
    };
    let limit = b.phase_timeout();

    // The namespaces, and the bundles they hold.
    let k = f.namespaces;
    let per = b.bundles / k;
    let extra = b.bundles % k;
    let created: Vec<Result<Vec<String>, String>> = stream::iter(0..k)
        .map(|i| {
            let name = format!("{tenant}/ns-{i}");
            let count = per + u64::from(i < extra);
            async move {
                let bundles = admin::create_namespace(observer, &name, count, Some("bench"))
                    .await
                    .map_err(|e| format!("namespace {name}: {e}"))?;
                let ns = NamespaceName::parse(&name).map_err(|e| e.to_string())?;
                Ok(bundles
                    .ranges()
                    .map(|r| BundleName::new(ns.clone(), r).to_string())
                    .collect())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut bundles = Vec::with_capacity(b.bundles as usize);
    for c in created {
        bundles.extend(c?);
    }

    // Ownership, as one observer sees it.
    let owners = Arc::new(Owners::default());
    let mut notifications = observer
        .watch(&paths::ownership_namespace(tenant))
        .await
        .map_err(|e| format!("watching ownership: {e}"))?;
    let watcher = {
        let owners = owners.clone();
        tokio::spawn(async move {
            while let Some(n) = notifications.next().await {
                if let Some(bundle) = paths::bundle_below(paths::OWNERSHIP, &n.path) {
                    owners.apply(n.kind, bundle.to_string());
                }
            }
        })
    };
    let result = run_phases(
        b, options, observer, probe, &bundles, &owners, &mut f, limit,
    )
    .await;
    watcher.abort();
    Ok((f, result.err()))
}

#[allow(clippy::too_many_arguments)]
async fn run_phases(
    b: &ClusterBench,
    options: &StoreOptions,
    observer: &DynStore,
    probe: &str,
    bundles: &[String],
    owners: &Arc<Owners>,
    f: &mut Figures,
    limit: Duration,
) -> Result<(), String> {
    let traffic = Traffic::new(b.msg_rate_per_bundle);

    // 1. Registration.
    let began = Instant::now();
    let mut leader = LeaderThread::start(
        b.store.clone(),
        options.clone(),
        settings_for(b, 0),
        traffic.clone(),
    )
    .await?;
    let deadline = Instant::now() + limit;
    while leader.shared.local_requests.lock().unwrap().is_none() {
        if Instant::now() > deadline {
            return Err("the first agent did not become the leader (is another loadmgr leading on this store?)".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let members = start_members(b, options, &traffic, 1..b.brokers).await?;
    let applied = |sh: &AgentShared| {
        sh.leader_status
            .lock()
            .unwrap()
            .as_ref()
            .map_or(0, |s| s.reports_applied)
    };
    while applied(&leader.shared) < b.brokers as u64 {
        if Instant::now() > deadline {
            return Err(format!(
                "registration: the leader applied {} of {} reports",
                applied(&leader.shared),
                b.brokers
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    f.registration_s = began.elapsed().as_secs_f64();

    let meters_of = |leader: &LeaderThread, members: &[Member]| {
        let mut reports = leader
            .shared
            .metrics
            .reports_written
            .load(Ordering::Relaxed);
        for m in members {
            reports += m.agent.metrics().reports_written.load(Ordering::Relaxed);
        }
        let shareds: Vec<Arc<AgentShared>> = members.iter().map(|m| m.agent.shared()).collect();
        let mut all: Vec<&Meters> = shareds.iter().map(|s| &s.meters).collect();
        all.push(&leader.shared.meters);
        traffic_of(&all, reports)
    };

    // 2. Cold start.
    let before = meters_of(&leader, &members);
    let rev0 = revision(observer, probe).await?;
    let sched0 = procfs::threads_run_and_wait();
    let began = Instant::now();
    let permits = Arc::new(Semaphore::new(b.lookup_concurrency));
    let everyone: Arc<Vec<Arc<AgentShared>>> = Arc::new(
        std::iter::once(leader.shared.clone())
            .chain(members.iter().map(|m| m.agent.shared()))
            .collect(),
    );
    let retries = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut lookups = tokio::task::JoinSet::new();
    for bundle in bundles {
        let permits = permits.clone();
        let owners = owners.clone();
        let everyone = everyone.clone();
        let retries = retries.clone();
        let bundle = bundle.clone();
        lookups.spawn(async move {
            let _permit = permits.acquire_owned().await.expect("open");
            let asked = Instant::now();
            let owned = owners.when_owned(&bundle);
            // As a client does: ask whoever leads now; without a leader, or refused, try again shortly.
            while !owners.is_owned(&bundle) {
                let leading = everyone
                    .iter()
                    .find(|s| s.local_requests.lock().unwrap().is_some());
                let answer = match leading {
                    Some(sh) => {
                        sh.ask_leader(Request::Assign {
                            bundle: bundle.clone(),
                        })
                        .await
                    }
                    None => None,
                };
                if answer.is_some_and(|a| a.ok) {
                    break;
                }
                retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            owned
                .await
                .map_err(|_| format!("{bundle}: the observer stopped"))?;
            Ok::<f64, String>(ms(asked.elapsed()))
        });
    }
    let mut latencies = Vec::with_capacity(bundles.len());
    let cold_deadline = began + limit;
    loop {
        match tokio::time::timeout_at(cold_deadline, lookups.join_next()).await {
            Err(_) => {
                return Err(format!(
                    "cold start: gave up after {limit:?} with {} of {} bundles owned",
                    owners.count(),
                    bundles.len()
                ))
            }
            Ok(None) => break,
            Ok(Some(r)) => latencies.push(r.map_err(|e| e.to_string())??),
        }
    }
    let took = began.elapsed();
    if let (Some((ran0, waited0)), Some((ran1, waited1))) = (sched0, procfs::threads_run_and_wait())
    {
        let of_core = |d: Duration| d.as_secs_f64() / took.as_secs_f64() * 100.0;
        f.cold_cpu_percent = of_core(ran1.saturating_sub(ran0));
        f.cold_wait_percent = of_core(waited1.saturating_sub(waited0));
    }
    let rev1 = revision(observer, probe).await?;
    let after = meters_of(&leader, &members);
    latencies.sort_by(f64::total_cmp);
    f.cold_start_s = took.as_secs_f64();
    f.lookups_per_s = bundles.len() as f64 / took.as_secs_f64();
    f.lookup_p50_ms = percentile(&latencies, 0.5);
    f.lookup_p99_ms = percentile(&latencies, 0.99);
    f.lookup_retries = retries.load(Ordering::Relaxed);
    f.writes_per_lookup = (rev1 - rev0 - 1) as f64 / bundles.len() as f64;
    f.bytes_per_lookup = (after.bytes - before.bytes) as f64 / bundles.len() as f64;
    let shedding_from = leader.shared.meters.recent.shedding.lock().unwrap().len();

    // 3. Steady state, once the leader has completed every move the cold start began.
    let settled = |sh: &AgentShared| {
        sh.leader_status
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|s| s.moves_completed >= s.moves_started)
    };
    let deadline = Instant::now() + limit;
    while !settled(&leader.shared) {
        if Instant::now() > deadline {
            return Err("steady state: the cold start's moves did not complete".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    leader
        .shared
        .meters
        .recent
        .report_lags
        .lock()
        .unwrap()
        .clear();
    let before = meters_of(&leader, &members);
    let cpu0 = procfs::thread_cpu(leader.tid).unwrap_or_default();
    let pcpu0 = procfs::process_cpu().unwrap_or_default();
    let began = Instant::now();
    tokio::time::sleep(Duration::from_secs(b.steady_seconds.max(1))).await;
    let span = began.elapsed();
    let cpu1 = procfs::thread_cpu(leader.tid).unwrap_or_default();
    let pcpu1 = procfs::process_cpu().unwrap_or_default();
    let after = meters_of(&leader, &members);
    let secs = span.as_secs_f64();
    f.steady_s = secs;
    f.report_writes_per_s = (after.reports - before.reports) as f64 / secs;
    f.reads_per_s = (after.reads - before.reads) as f64 / secs;
    f.writes_per_s = (after.writes - before.writes) as f64 / secs;
    f.watch_events_per_s = (after.events - before.events) as f64 / secs;
    f.leader_cpu_percent = cpu1.saturating_sub(cpu0).as_secs_f64() / secs * 100.0;
    f.process_cpu_percent = pcpu1.saturating_sub(pcpu0).as_secs_f64() / secs * 100.0;
    let samples: Vec<_> = leader
        .shared
        .meters
        .recent
        .report_lags
        .lock()
        .unwrap()
        .iter()
        .copied()
        .collect();
    f.lag_tail = LagTail::of(&samples);
    let mut lags: Vec<f64> = samples.iter().map(|s| s.total_ms as f64).collect();
    lags.sort_by(f64::total_cmp);
    f.lag_samples = lags.len();
    f.lag_p50_ms = percentile(&lags, 0.5);
    f.lag_p99_ms = percentile(&lags, 0.99);
    if let Some((rss, peak)) = procfs::resident() {
        f.rss_mib = rss as f64 / (1024.0 * 1024.0);
        f.peak_rss_mib = peak as f64 / (1024.0 * 1024.0);
    }

    // 4. Flush.
    flush_phase(b, observer, probe, &leader, &traffic, f, limit).await?;

    // 5. Shedding: the ticks since the cold start ended.
    {
        let ticks = leader.shared.meters.recent.shedding.lock().unwrap();
        let seen = &ticks[shedding_from.min(ticks.len())..];
        f.shedding_ticks = seen.len();
        if let Some(longest) = seen.iter().max_by_key(|s| s.duration) {
            f.shedding_ms = Some(ms(longest.duration));
            f.shedding_moves = Some(longest.moves);
        }
    }

    if b.no_restart {
        drop(leader);
        stop_members(members).await;
        return Ok(());
    }

    // 6. Failover.
    let dead = leader.shared.broker_id.clone();
    let orphaned = leader.shared.owned.lock().unwrap().len();
    let began = Instant::now();
    leader.crash();
    let deadline = began + limit;
    let successor = loop {
        if let Some(i) = members.iter().position(|m| m.agent.is_leader()) {
            break i;
        }
        if Instant::now() > deadline {
            return Err("failover: no new leader elected".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let elected = began.elapsed();
    let sh = members[successor].agent.shared();
    let me = sh.broker_id.clone();
    while sh
        .leader_status
        .lock()
        .unwrap()
        .as_ref()
        .map_or(true, |s| s.leader != me)
    {
        if Instant::now() > deadline {
            return Err("failover: the new leader did not load".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let loaded = began.elapsed();
    let started_moves = |sh: &AgentShared| -> u64 {
        [
            "orphan", "replaced", "lookup", "shedding", "unload", "split", "adopted",
        ]
        .iter()
        .map(|c| {
            sh.meters
                .moves_started
                .get_or_create(&crate::runtime::meters::CauseLabels {
                    cause: (*c).to_owned(),
                })
                .get()
        })
        .sum()
    };
    while orphaned > 0 && started_moves(&sh) == 0 {
        if Instant::now() > deadline {
            return Err(format!(
                "failover: the new leader did not re-place any of {dead}'s bundles"
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let first_decision = began.elapsed();
    let total = bundles.len();
    owners.wait_count(|n| n == total, limit, "failover").await?;
    // The dead broker's nodes may still be listed until its session expired: owned means all M again after it.
    f.failover = Some(Failover {
        elected_s: elected.as_secs_f64(),
        loaded_s: loaded.as_secs_f64(),
        first_decision_s: first_decision.as_secs_f64(),
        recovered_s: began.elapsed().as_secs_f64(),
        orphaned,
    });
    drop(sh);
    drop(leader);

    // 7. Full restart: every broker, the dead one's identity included.
    let began = Instant::now();
    stop_members(members).await;
    owners
        .wait_count(|n| n == 0, limit, "restart: the old owners leaving")
        .await?;
    // A session whose close the server did not answer in time ends when the server expires it: its broker
    // starts again once the registration is gone, as a restarted process would.
    let deadline = Instant::now() + limit;
    loop {
        let left = observer
            .get_children(paths::BROKERS)
            .await
            .map_err(|e| format!("restart: listing the registrations: {e}"))?;
        if left.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "restart: {} old registrations still there after {limit:?}",
                left.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let members = start_members(b, options, &traffic, 0..b.brokers).await?;
    owners.wait_count(|n| n == total, limit, "restart").await?;
    f.restart_s = Some(began.elapsed().as_secs_f64());
    stop_members(members).await;
    Ok(())
}

/// Flushes after a traffic change against raw batched writes of as many nodes, then a flush after none.
async fn flush_phase(
    b: &ClusterBench,
    observer: &DynStore,
    probe: &str,
    leader: &LeaderThread,
    traffic: &Traffic,
    f: &mut Figures,
    limit: Duration,
) -> Result<(), String> {
    let recent = &leader.shared.meters.recent;
    let flushes = || recent.flushes.lock().unwrap().clone();
    let wait_flushes = |n: usize| async move {
        let deadline = Instant::now() + limit;
        loop {
            let now = flushes();
            if now.len() >= n {
                return Ok(now);
            }
            if Instant::now() > deadline {
                return Err(format!("flush: no flush within {limit:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    // The raw batch writes the values of real flushed nodes, to nodes of its own.
    // First, a flush after nothing changed: the traffic has been constant since the cold start, and the
    // flush after the steady state has written what it brought.
    let n0 = flushes().len();
    let seen = wait_flushes(n0 + 2).await?;
    let last = seen[seen.len() - 1];
    f.no_change_flush_nodes = Some(last.nodes);
    f.no_change_flush_wrote = Some(last.wrote);
    let mut values: Vec<Vec<u8>> = Vec::new();
    let mut flush_ms = Vec::new();
    let mut raw_ms = Vec::new();
    let mut ratios = Vec::new();
    for round in 0..b.flush_rounds {
        traffic.scale(if round % 2 == 0 { 1.5 } else { 1.0 / 1.5 });
        // The first flush may catch only part of the changed reports; the second has them all.
        let n0 = flushes().len();
        let seen = wait_flushes(n0 + 2).await?;
        let sample = seen[seen.len() - 1];
        if !sample.wrote || sample.nodes == 0 {
            continue;
        }
        if values.is_empty() {
            values = flushed_values(observer).await?;
            if values.is_empty() {
                return Err("flush: no flushed node found to copy".into());
            }
        }
        let ops: Vec<Op> = (0..sample.nodes)
            .map(|i| {
                Op::put(
                    format!("{probe}-raw/n{i:06}"),
                    values[i % values.len()].clone(),
                )
            })
            .collect();
        if raw_ms.is_empty() {
            // Create the nodes first, so the measured write updates existing nodes, as the flush does.
            observer
                .batch(ops.clone())
                .await
                .map_err(|e| format!("raw batch: {e}"))?;
        }
        let t = Instant::now();
        observer
            .batch(ops)
            .await
            .map_err(|e| format!("raw batch: {e}"))?;
        let raw = ms(t.elapsed());
        let flush = ms(sample.duration);
        f.flush_nodes = sample.nodes;
        f.flush_bytes = sample.bytes;
        flush_ms.push(flush);
        raw_ms.push(raw);
        ratios.push(flush / raw.max(1e-3));
    }
    let _ = observer.delete_recursive(&format!("{probe}-raw")).await;
    f.flush_ms = Spread::of(&flush_ms);
    f.raw_ms = Spread::of(&raw_ms);
    f.flush_over_raw = Spread::of(&ratios);
    Ok(())
}

/// The values of the bundle data the leader flushed (of every namespace), up to 20,000.
async fn flushed_values(observer: &DynStore) -> Result<Vec<Vec<u8>>, String> {
    let names = crate::runtime::ownership::list_bundles(observer, paths::BUNDLE_DATA)
        .await
        .map_err(|e| format!("listing bundle data: {e}"))?;
    let reads: Vec<Option<Vec<u8>>> = stream::iter(names.into_iter().take(20_000))
        .map(|n| async move {
            observer
                .get(&paths::bundle_data(&n))
                .await
                .ok()
                .flatten()
                .map(|g| g.value)
        })
        .buffer_unordered(64)
        .collect()
        .await;
    Ok(reads.into_iter().flatten().collect())
}
