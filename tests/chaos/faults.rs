//! The faults, and one trial: inject a fault, undo it (restart, resume, heal), wait until the cluster settles,
//! and measure what the fault cost.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loadmgr::bundle::{topic_hash, NamespaceName, TopicName};
use loadmgr::model::NamespaceEphemeralData;
use loadmgr::paths;
use loadmgr::runtime::admin;
use loadmgr::store::{CreateOptions, MetadataStoreExt};
use rand::rngs::StdRng;
use rand::Rng;
use tokio::time::Instant;

use crate::cluster::{now_us, Cluster, Servers, BUNDLES, NS, SESSION};

/// What a trial does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// SIGKILL the leader, start it again once its session expired.
    KillLeader,
    /// SIGKILL a broker that owns bundles, start it again once its session expired.
    KillOwner,
    /// SIGSTOP an owner for 1.5–2× the session timeout, then SIGCONT.
    PauseOwner,
    /// SIGSTOP the leader for 1.5–2× the session timeout, then SIGCONT.
    PauseLeader,
    /// SIGTERM a broker (a graceful stop), start it again.
    Terminate,
    /// Kill the store server and start it again after 25–75 % of the session timeout.
    StoreRestart,
    /// Cut an owner off the store (every connection silent) for 1.5–2× the session timeout, then heal.
    Partition,
    /// A persistent copy of a report at /loadbalance/brokers/ghost:9 while an owner is SIGKILLed: no bundle may
    /// go to the ghost.
    GhostRegistration,
    /// An ownership node naming ghost:8080 on an unowned bundle, which a client then looks up: the lookup must
    /// end on a real broker.
    FakeOwner,
    /// SIGKILL an ensemble member that does not lead the ensemble, restart it.
    KillMember,
    /// SIGKILL the ensemble's leader, restart it.
    KillEnsembleLeader,
    /// Freeze (SIGSTOP) an ensemble member for 1.5–2× the session timeout, then SIGCONT: to its clients and its
    /// peers it is cut off, as in a partition (it does not act meanwhile, unlike a partitioned member).
    FreezeMember,
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::KillLeader => "SIGKILL leader",
            Fault::KillOwner => "SIGKILL owner",
            Fault::PauseOwner => "SIGSTOP owner 1.5–2×T",
            Fault::PauseLeader => "SIGSTOP leader 1.5–2×T",
            Fault::Terminate => "SIGTERM broker",
            Fault::StoreRestart => "store restart 25–75 % T",
            Fault::Partition => "broker cut off 1.5–2×T",
            Fault::GhostRegistration => "ghost registration",
            Fault::FakeOwner => "fake owner node",
            Fault::KillMember => "member SIGKILLed",
            Fault::KillEnsembleLeader => "ensemble leader SIGKILLed",
            Fault::FreezeMember => "member frozen 1.5–2×T",
        }
    }

    /// The faults of a single server, and those of an ensemble.
    pub fn for_setup(ensemble: bool) -> Vec<Fault> {
        if ensemble {
            vec![
                Fault::KillMember,
                Fault::KillEnsembleLeader,
                Fault::FreezeMember,
                Fault::KillLeader,
                Fault::PauseOwner,
                Fault::Partition,
            ]
        } else {
            vec![
                Fault::KillLeader,
                Fault::KillOwner,
                Fault::PauseOwner,
                Fault::PauseLeader,
                Fault::Terminate,
                Fault::StoreRestart,
                Fault::Partition,
                Fault::GhostRegistration,
                Fault::FakeOwner,
            ]
        }
    }
}

/// What one trial measured.
#[derive(Debug, Clone)]
pub struct Trial {
    pub number: usize,
    pub fault: Fault,
    pub detail: String,
    pub start_us: i64,
    pub end_us: i64,
    /// From the fault to a leader other than the victim (for faults on the leader).
    pub new_leader_ms: Option<u64>,
    /// For store faults: whether every broker kept its session (same registration node) and the leader stayed.
    pub sessions_kept: Option<bool>,
    /// From the fault's injection until the cluster settled again.
    pub settle_ms: u64,
    /// When the fault was injected (after the victim was chosen).
    pub injected: Option<Instant>,
    /// What went wrong, if the cluster did not recover or a check failed.
    pub failure: Option<String>,
}

/// When a lookup was sent (µs since the epoch) and the broker it answered, or why it failed.
type LookupLog = Arc<std::sync::Mutex<Vec<(i64, Result<String, String>)>>>;

/// Lookups sent all along the run, so that every trial sees whether clients were answered.
pub struct Prober {
    pub results: LookupLog,
    /// Set while the store itself is down: a lookup then fails whatever loadmgr does, and none is sent.
    pub store_down: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Prober {
    pub fn start(cluster: &Cluster) -> Prober {
        let results: LookupLog = Arc::default();
        let store_down = Arc::new(AtomicBool::new(false));
        let store = cluster.store.clone();
        let (r, down) = (results.clone(), store_down.clone());
        let task = tokio::spawn(async move {
            let mut n = 0u64;
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                if down.load(Ordering::SeqCst) {
                    continue;
                }
                n += 1;
                let topic = format!("persistent://{NS}/t-{}", n % 64);
                let at = now_us();
                let got = admin::lookup(&store, &topic, "chaos-prober", Duration::from_secs(10))
                    .await
                    .map(|l| l.broker)
                    .map_err(|e| e.to_string());
                r.lock().unwrap().push((at, got));
            }
        });
        Prober {
            results,
            store_down,
            task,
        }
    }

    /// Lookups sent in `[from_us, to_us]`: (answered, failed with their errors).
    pub fn between(&self, from_us: i64, to_us: i64) -> (usize, Vec<String>) {
        let r = self.results.lock().unwrap();
        let mut ok = 0;
        let mut failed = Vec::new();
        for (at, got) in r.iter().filter(|(at, _)| *at >= from_us && *at <= to_us) {
            match got {
                Ok(b) if b.starts_with("ghost") => {
                    failed.push(format!("{at}: answered the ghost {b}"))
                }
                Ok(_) => ok += 1,
                Err(e) => failed.push(format!("{at}: {e}")),
            }
        }
        (ok, failed)
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How long a paused, cut-off or frozen thing stays so: 1.5–2× the session timeout.
fn long(rng: &mut StdRng) -> Duration {
    SESSION.mul_f64(rng.random_range(1.5..2.0))
}

/// The broker (index) owning the most bundles, other than the leader when `not_leader`; waits (at most 30 s)
/// for shedding to give some broker other than the leader a bundle.
async fn busiest(cluster: &Cluster, not_leader: bool) -> Option<usize> {
    let start = Instant::now();
    loop {
        let found = busiest_now(cluster, not_leader).await;
        if found.is_some() || start.elapsed() > Duration::from_secs(30) {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn busiest_now(cluster: &Cluster, not_leader: bool) -> Option<usize> {
    let leader = cluster.leader().await;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for o in cluster.owners().await.values() {
        *counts.entry(o.clone()).or_default() += 1;
    }
    counts
        .into_iter()
        .filter(|(b, _)| !not_leader || Some(b) != leader.as_ref())
        .max_by_key(|(b, n)| (*n, b.clone()))
        .and_then(|(b, _)| cluster.index_of(&b))
}

/// Polls until `check` holds, every 20 ms, at most `limit`; the time it took.
async fn until<F, Fut>(limit: Duration, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// The creation revision of every registration and of every ownership node of the namespace: unchanged
/// across a fault means no session was lost.
async fn session_marks(cluster: &Cluster) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for b in cluster.registered().await {
        if let Ok(Some(g)) = cluster.store.get(&paths::broker(&b)).await {
            out.insert(paths::broker(&b), g.stat.creation_revision);
        }
    }
    if let Ok((info, _)) = admin::namespace_bundles(&cluster.store, NS).await {
        for b in info.bundle_names() {
            if let Ok(Some(g)) = cluster.store.get(&paths::ownership(&b)).await {
                out.insert(paths::ownership(&b), g.stat.creation_revision);
            }
        }
    }
    out
}

/// Waits until a leader other than `old` exists; the time it took.
async fn new_leader(cluster: &Cluster, old: &str) -> Option<Duration> {
    until(SESSION * 4, || async {
        cluster.leader().await.is_some_and(|l| l != old)
    })
    .await
}

/// Waits until the broker's registration is gone (its session expired), so that it can start again.
async fn until_deregistered(cluster: &Cluster, i: usize) -> bool {
    let id = cluster.brokers[i].id.clone();
    until(SESSION * 4, || async {
        !cluster.registered().await.contains(&id)
    })
    .await
    .is_some()
}

/// Runs one trial of `fault` (see [`Fault`]); `number` names it in the report.
pub async fn run(
    cluster: &mut Cluster,
    prober: &Prober,
    fault: Fault,
    number: usize,
    rng: &mut StdRng,
) -> Trial {
    let start_us = now_us();
    let t0 = Instant::now();
    let mut trial = Trial {
        number,
        fault,
        detail: String::new(),
        start_us,
        end_us: start_us,
        new_leader_ms: None,
        sessions_kept: None,
        settle_ms: 0,
        injected: None,
        failure: None,
    };
    let result = inject(cluster, prober, fault, rng, &mut trial, t0).await;
    if let Err(e) = result {
        // The brokers' logs say why (they are gone with the run's directory).
        trial.failure = Some(format!("{e}\n{}", cluster.tail_logs()));
    }
    match cluster.settle(Duration::from_secs(60)).await {
        Ok(_) => {}
        Err(e) => {
            let e = format!("{e}\n{}", cluster.tail_logs());
            trial.failure = Some(trial.failure.map_or(e.clone(), |f| format!("{f}; {e}")));
        }
    }
    trial.settle_ms = trial.injected.unwrap_or(t0).elapsed().as_millis() as u64;
    trial.end_us = now_us();
    trial
}

async fn inject(
    cluster: &mut Cluster,
    prober: &Prober,
    fault: Fault,
    rng: &mut StdRng,
    trial: &mut Trial,
    t0: Instant,
) -> Result<(), String> {
    let leader = cluster.leader().await.ok_or("no leader before the fault")?;
    let leader_i = cluster
        .index_of(&leader)
        .ok_or("the leader is no broker of the test")?;
    match fault {
        Fault::KillLeader => {
            trial.detail = format!("killed {leader}");
            trial.injected = Some(Instant::now());
            cluster.kill(leader_i);
            let took = new_leader(cluster, &leader).await.ok_or("no new leader")?;
            trial.new_leader_ms = Some(took.as_millis() as u64);
            if !until_deregistered(cluster, leader_i).await {
                return Err(format!("{leader} still registered"));
            }
            cluster.spawn(leader_i);
        }
        Fault::KillOwner => {
            let v = busiest(cluster, true)
                .await
                .ok_or("no owner but the leader")?;
            trial.detail = format!("killed {}", cluster.brokers[v].id);
            trial.injected = Some(Instant::now());
            cluster.kill(v);
            if !until_deregistered(cluster, v).await {
                return Err("victim still registered".into());
            }
            cluster.spawn(v);
        }
        Fault::PauseOwner | Fault::PauseLeader => {
            let v = if fault == Fault::PauseLeader {
                leader_i
            } else {
                busiest(cluster, true)
                    .await
                    .ok_or("no owner but the leader")?
            };
            let d = long(rng);
            trial.detail = format!(
                "paused {} for {:.2} s",
                cluster.brokers[v].id,
                d.as_secs_f64()
            );
            let paused = Instant::now();
            trial.injected = Some(Instant::now());
            cluster.pause(v);
            if fault == Fault::PauseLeader {
                let took = until(d, || async {
                    cluster.leader().await.is_some_and(|l| l != leader)
                })
                .await;
                trial.new_leader_ms = took.map(|t| t.as_millis() as u64);
            }
            tokio::time::sleep(d.saturating_sub(paused.elapsed())).await;
            cluster.resume(v);
            if fault == Fault::PauseLeader && trial.new_leader_ms.is_none() {
                new_leader(cluster, &leader)
                    .await
                    .ok_or("no new leader after the pause")?;
                trial.new_leader_ms = Some(paused.elapsed().as_millis() as u64);
            }
        }
        Fault::Terminate => {
            let v = rng.random_range(0..cluster.brokers.len());
            trial.detail = format!("terminated {}", cluster.brokers[v].id);
            let signalled = Instant::now();
            trial.injected = Some(Instant::now());
            cluster.terminate(v).await;
            if v == leader_i {
                new_leader(cluster, &leader).await.ok_or("no new leader")?;
                trial.new_leader_ms = Some(signalled.elapsed().as_millis() as u64);
            }
            if !until_deregistered(cluster, v).await {
                return Err("terminated broker still registered".into());
            }
            cluster.spawn(v);
        }
        Fault::StoreRestart => {
            let before = session_marks(cluster).await;
            let target = SESSION.mul_f64(rng.random_range(0.25..0.75));
            prober.store_down.store(true, Ordering::SeqCst);
            trial.injected = Some(Instant::now());
            let servers = cluster.servers.clone();
            let outage = tokio::task::spawn_blocking(move || {
                let start = std::time::Instant::now();
                let mut s = servers.lock().unwrap();
                match &mut *s {
                    Servers::Zk(z) => z.kill(),
                    Servers::Etcd(e) => e.kill(),
                    _ => unreachable!("a single server"),
                }
                // A restart takes about a second to serve: aim the outage at the target.
                std::thread::sleep(target.saturating_sub(Duration::from_millis(900)));
                match &mut *s {
                    Servers::Zk(z) => z.restart(),
                    Servers::Etcd(e) => e.restart(),
                    _ => unreachable!(),
                }
                start.elapsed()
            })
            .await
            .unwrap();
            prober.store_down.store(false, Ordering::SeqCst);
            trial.detail = format!(
                "outage {:.2} s ({:.0} % of T)",
                outage.as_secs_f64(),
                100.0 * outage.as_secs_f64() / SESSION.as_secs_f64()
            );
            // The store answers again: every session survived if nothing was re-created.
            tokio::time::sleep(SESSION / 2).await;
            let after = session_marks(cluster).await;
            let kept =
                before == after && cluster.leader().await.as_deref() == Some(leader.as_str());
            trial.sessions_kept = Some(kept);
            // A session survives an outage while outage + the age of its last answer + reconnecting stays
            // under 9/10 of the timeout; with probes every T/15 and attempts every T/20 that holds with room
            // to spare up to 60 % (at a 3 s session: 1.8 s out of 2.7 s). Longer outages are reported.
            if !kept && outage <= SESSION.mul_f64(0.6) {
                return Err(format!(
                    "an outage of {outage:?} cost sessions or the leader: before {before:?}, after {after:?}"
                ));
            }
        }
        Fault::Partition => {
            let v = busiest(cluster, true)
                .await
                .ok_or("no owner but the leader")?;
            let d = long(rng);
            trial.detail = format!(
                "cut off {} for {:.2} s",
                cluster.brokers[v].id,
                d.as_secs_f64()
            );
            trial.injected = Some(Instant::now());
            cluster.cut(v);
            tokio::time::sleep(d).await;
            cluster.heal(v);
        }
        Fault::GhostRegistration => {
            let report = cluster
                .store
                .get(&paths::broker(&leader))
                .await
                .map_err(|e| e.to_string())?
                .ok_or("no report to copy")?;
            let ghost = paths::broker("ghost:9");
            cluster
                .store
                .put(&ghost, &report.value, None, CreateOptions::PERSISTENT)
                .await
                .map_err(|e| e.to_string())?;
            let v = busiest(cluster, true)
                .await
                .ok_or("no owner but the leader")?;
            trial.detail = format!("ghost:9 registered, killed {}", cluster.brokers[v].id);
            trial.injected = Some(Instant::now());
            cluster.kill(v);
            let reowned = until(SESSION * 5, || async {
                let o = cluster.owners().await;
                o.len() == BUNDLES && o.values().all(|b| *b != cluster.brokers[v].id)
            })
            .await;
            let owners = cluster.owners().await;
            let _ = cluster.store.delete(&ghost, None).await;
            if reowned.is_none() {
                return Err(format!(
                    "bundles not re-owned with a ghost registered: {owners:?}"
                ));
            }
            if owners.values().any(|o| o.starts_with("ghost")) {
                return Err(format!("a bundle went to the ghost: {owners:?}"));
            }
            if !until_deregistered(cluster, v).await {
                return Err("victim still registered".into());
            }
            cluster.spawn(v);
        }
        Fault::FakeOwner => {
            // A namespace nobody looked up yet, with a fake owner on the bundle a topic falls into.
            let ns = format!("public/ghost-{}", trial.number);
            admin::create_namespace(&cluster.store, &ns, 2, None)
                .await
                .map_err(|e| e.to_string())?;
            let topic = format!("persistent://{ns}/t-0");
            let info = loadmgr::runtime::namespaces::read_bundles(
                &cluster.store,
                &NamespaceName::parse(&ns).unwrap(),
            )
            .await
            .map_err(|e| e.to_string())?
            .ok_or("namespace not created")?;
            let range = info
                .bundles
                .find(topic_hash(&TopicName::parse(&topic).unwrap()));
            let bundle = format!("{ns}/{range}");
            let fake = NamespaceEphemeralData {
                native_url: Some("pulsar://ghost:6650".into()),
                http_url: Some("http://ghost:8080".into()),
                ..Default::default()
            };
            cluster
                .store
                .put_json(
                    &paths::ownership(&bundle),
                    &fake,
                    None,
                    CreateOptions::PERSISTENT,
                )
                .await
                .map_err(|e| e.to_string())?;
            trial.detail = format!("fake owner ghost:8080 on {bundle}");
            trial.injected = Some(Instant::now());
            let got = admin::lookup(&cluster.store, &topic, "chaos-fake", SESSION * 6)
                .await
                .map_err(|e| format!("lookup of {topic}: {e}"))?;
            if got.broker.starts_with("ghost") {
                return Err(format!("the lookup answered the fake owner {}", got.broker));
            }
            trial.detail.push_str(&format!(
                ", lookup answered {} after {:.2} s",
                got.broker,
                t0.elapsed().as_secs_f64()
            ));
        }
        Fault::KillMember | Fault::KillEnsembleLeader | Fault::FreezeMember => {
            let before = session_marks(cluster).await;
            let servers = cluster.servers.clone();
            let member = {
                let s = servers.lock().unwrap();
                match (&*s, fault) {
                    (Servers::ZkEnsemble(e), Fault::KillEnsembleLeader) => e.leader(),
                    (Servers::ZkEnsemble(e), _) => e.follower(),
                    (Servers::EtcdCluster(c), Fault::KillEnsembleLeader) => c.leader(),
                    (Servers::EtcdCluster(c), _) => c.follower(),
                    _ => None,
                }
            }
            .ok_or("no such member")?;
            let d = if fault == Fault::FreezeMember {
                long(rng)
            } else {
                Duration::from_millis(rng.random_range(1_000..3_000))
            };
            trial.detail = format!("member {member}, {:.2} s", d.as_secs_f64());
            trial.injected = Some(Instant::now());
            {
                let s = servers.lock().unwrap();
                match (&*s, fault) {
                    (Servers::ZkEnsemble(e), Fault::FreezeMember) => e.pause(member),
                    (Servers::EtcdCluster(c), Fault::FreezeMember) => c.pause(member),
                    _ => {}
                }
            }
            if fault != Fault::FreezeMember {
                let s = servers.clone();
                tokio::task::spawn_blocking(move || match &mut *s.lock().unwrap() {
                    Servers::ZkEnsemble(e) => e.kill(member),
                    Servers::EtcdCluster(c) => c.kill(member),
                    _ => {}
                })
                .await
                .unwrap();
            }
            tokio::time::sleep(d).await;
            tokio::task::spawn_blocking(move || match (&mut *servers.lock().unwrap(), fault) {
                (Servers::ZkEnsemble(e), Fault::FreezeMember) => e.resume(member),
                (Servers::EtcdCluster(c), Fault::FreezeMember) => c.resume(member),
                (Servers::ZkEnsemble(e), _) => e.restart(member),
                (Servers::EtcdCluster(c), _) => c.restart(member),
                _ => {}
            })
            .await
            .unwrap();
            tokio::time::sleep(SESSION / 2).await;
            let after = session_marks(cluster).await;
            trial.sessions_kept =
                Some(before == after && cluster.leader().await.as_deref() == Some(leader.as_str()));
        }
    }
    Ok(())
}
