//! The leader tasks, run only while this broker leads (the supervisor aborts them the moment it does not, and
//! every write here is fenced by the leader node, so a deposed leader's late writes are rejected).
//!
//! * **Aggregation**, fed by notifications: a change of `/loadbalance/brokers/<id>` re-reads that node only and
//!   feeds it to [`LoadData`]; a vanished registration drops the broker, deletes its time average and
//!   reassigns its bundles. A new leader first loads everything: reports, stored bundle data and quotas (the
//!   seeds of bundles seen for the first time), assignment records, ownership nodes, namespaces.
//! * **Flush** every `loadBalancerResourceQuotaUpdateIntervalMinutes`: top-K bundle data per broker and every
//!   broker's time average, in one fenced batch, skipping values that did not change; deletes the data of
//!   brokers and bundles that are gone.
//! * **Shedding** every `loadBalancerSheddingIntervalMinutes`: the core's plan, each unload started as a move
//!   with its reason; then the **split check**, and a reconciliation of every record.
//! * **Moves and reassignment** ([`Leader::reconcile`]): records whose destination vanished are re-placed;
//!   records whose destination took ownership are marked assigned; owned bundles without a record are adopted.
//! * **Requests**: lookups, unloads, splits.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use rand::rngs::StdRng;
use tokio::sync::mpsc;

use super::identity::owner_of;
use super::namespaces::{read_bundles, NamespaceBundlesInfo};
use super::ownership::list_bundles;
use super::shared::{split_points, AgentShared};
use super::RuntimeError;
use crate::bundle::{
    format_hash, parse_hash, split_bundle, BundleName, NamespaceName, SplitAlgorithm, SplitInput,
    SplitOutcome, TopicName,
};
use crate::config::Settings;
use crate::coordination::LeaderElection;
use crate::core::placement::{assign_bundle, select_broker, PlacementContext};
use crate::core::random::{stream_rng, Stream};
use crate::core::split::find_bundles_to_split;
use crate::core::{
    run_shedding_cycle, ClusterPolicies, LoadData, NamespacePolicy, StoredSeeds, Strategies,
};
use crate::model::json::to_json_vec;
use crate::model::load_report::parse_report;
use crate::model::records::{
    AdminRequest, AssignmentCause, AssignmentState, BundleAssignment, LeaderStatus, LookupAnswer,
    RequestOp, RequestResponse,
};
use crate::model::{BundleData, NamespaceEphemeralData, ResourceQuota, TimeAverageBrokerData};
use crate::paths;
use crate::store::{
    CreateOptions, Error, MetadataStoreExt, NotificationType, Op, OpResult, Stat, CREATE_ONLY,
};

/// Answered requests are removed after this long; unanswered ones (the asker gave up) after the second.
const ANSWERED_TTL_MS: i64 = 60_000;
const UNANSWERED_TTL_MS: i64 = 600_000;

/// Why the leader loop stops.
#[derive(Debug)]
enum Stop {
    /// A fenced write was rejected: leadership is lost.
    Fenced,
    /// The store was closed.
    Closed,
}

type Step<T = ()> = Result<T, Stop>;

/// Messages from helper tasks back to the leader loop.
#[derive(Debug)]
enum Internal {
    /// The owner answered the split points of a topic-based algorithm.
    SplitPoints {
        plan: SplitRequest,
        result: Result<Vec<u64>, String>,
    },
}

/// Where a split came from.
#[derive(Debug, Clone)]
enum SplitOrigin {
    /// The automatic split check.
    Auto,
    /// An operator's request, answered once the split is done.
    Request {
        path: String,
        request: Box<AdminRequest>,
        stat: Stat,
    },
}

#[derive(Debug, Clone)]
struct SplitRequest {
    bundle: String,
    owner: String,
    algorithm: SplitAlgorithm,
    /// For `specified_positions_divide`.
    positions: Vec<u64>,
    unload_children: bool,
    reason: String,
    origin: SplitOrigin,
}

#[derive(Debug, Clone)]
struct Owner {
    broker: String,
    disabled: bool,
}

pub(crate) struct Leader {
    sh: Arc<AgentShared>,
    election: Arc<LeaderElection>,
    id: String,
    load: LoadData,
    seeds: StoredSeeds,
    strategies: Strategies,
    /// Shedding ticks of this term so far: the k-th (from 0) draws from `stream_rng(seed, Shedding, k)`.
    shedding_ticks: u64,
    /// Placements of this term so far: the n-th draws from `stream_rng(seed, Assignment, n)`.
    assignments: u64,
    /// Children of `/loadbalance/brokers` (valid reports or not).
    registered: BTreeSet<String>,
    /// The report node incarnation and version last applied per broker, so a notification of a version
    /// already applied (read during the initial load) is not aggregated twice.
    applied_reports: HashMap<String, (i64, i64)>,
    records: BTreeMap<String, (BundleAssignment, i64)>,
    owners: BTreeMap<String, Owner>,
    namespaces: BTreeMap<String, NamespaceBundlesInfo>,
    policies: ClusterPolicies,
    /// Path → bytes last written or read, so unchanged values are not written again.
    flushed: HashMap<String, Vec<u8>>,
    stored_bundle_data: BTreeSet<String>,
    stored_time_averages: BTreeSet<String>,
    /// Request nodes already executed (or being executed): path → creation revision of the node handled.
    handled: HashMap<String, i64>,
    status: LeaderStatus,
    internal_tx: mpsc::UnboundedSender<Internal>,
    internal_rx: mpsc::UnboundedReceiver<Internal>,
    /// Destinations already warned about (a record waiting on a broker that never takes the bundle).
    warned: HashSet<String>,
    /// Moves completed whose brokers have not reported the change yet: (bundle, source, destination,
    /// completion time).
    unsettled: Vec<(String, Option<String>, String, i64)>,
}

/// The leader task: loads everything, then reacts to notifications and timers until leadership is lost.
pub(crate) async fn run(sh: Arc<AgentShared>, election: Arc<LeaderElection>) {
    let id = sh.broker_id.clone();
    match Leader::start(sh, election).await {
        Ok((mut leader, streams)) => match leader.run(streams).await {
            Stop::Fenced => tracing::warn!(leader = %id, "leadership lost: leader tasks stop"),
            Stop::Closed => tracing::info!(leader = %id, "store closed: leader tasks stop"),
        },
        Err(e) => tracing::error!(leader = %id, "cannot start the leader tasks: {e}"),
    }
}

struct Streams {
    brokers: crate::store::NotificationStream,
    owners: crate::store::NotificationStream,
    records: crate::store::NotificationStream,
    requests: crate::store::NotificationStream,
    policies: crate::store::NotificationStream,
    /// Changes below `/admin/clusters/<clusterName>` (isolation policies, failure domains); `None` without a
    /// cluster name.
    cluster: Option<crate::store::NotificationStream>,
}

/// Divides a parent's windows evenly among `n` children (sample counts kept), so the children start from a
/// realistic estimate instead of the 50 msg/s defaults.
fn divide(data: &BundleData, n: usize) -> BundleData {
    let k = n.max(1) as f64;
    let mut d = *data;
    for w in [&mut d.short_term_data, &mut d.long_term_data] {
        w.msg_rate_in /= k;
        w.msg_rate_out /= k;
        w.msg_throughput_in /= k;
        w.msg_throughput_out /= k;
    }
    d.topics = (data.topics as f64 / k).ceil() as _;
    d
}

async fn read_many<T: serde::de::DeserializeOwned + Send>(
    sh: &AgentShared,
    paths: Vec<String>,
) -> Vec<(String, Result<Option<(T, Stat, Vec<u8>)>, Error>)> {
    stream::iter(paths)
        .map(|p| async move {
            let r = match sh.store.get(&p).await {
                Ok(Some(g)) => match serde_json::from_slice::<T>(&g.value) {
                    Ok(v) => Ok(Some((v, g.stat, g.value))),
                    Err(e) => Err(Error::Content {
                        path: p.clone(),
                        reason: e.to_string(),
                    }),
                },
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            (p, r)
        })
        .buffer_unordered(16)
        .collect()
        .await
}

impl Leader {
    async fn start(
        sh: Arc<AgentShared>,
        election: Arc<LeaderElection>,
    ) -> Result<(Leader, Streams), RuntimeError> {
        let store = sh.store.clone();
        // Subscribe first so nothing that changes while we load is missed (re-reads are idempotent).
        let streams = Streams {
            brokers: store.watch(paths::BROKERS).await?,
            owners: store.watch(paths::OWNERSHIP).await?,
            records: store.watch(paths::ASSIGNMENTS).await?,
            requests: store.watch(paths::REQUESTS).await?,
            policies: store.watch(paths::LOCAL_POLICIES).await?,
            cluster: match &sh.settings().cluster_name {
                Some(c) => Some(store.watch(&paths::cluster(c)).await?),
                None => None,
            },
        };
        let settings = sh.settings();
        let (internal_tx, internal_rx) = mpsc::unbounded_channel();
        let now = sh.now_ms();
        let mut leader = Leader {
            id: sh.broker_id.clone(),
            load: LoadData::new(),
            seeds: StoredSeeds::default(),
            strategies: Strategies::from_settings(&settings),
            shedding_ticks: 0,
            assignments: 0,
            registered: BTreeSet::new(),
            applied_reports: HashMap::new(),
            records: BTreeMap::new(),
            owners: BTreeMap::new(),
            namespaces: BTreeMap::new(),
            policies: ClusterPolicies::default(),
            flushed: HashMap::new(),
            stored_bundle_data: BTreeSet::new(),
            stored_time_averages: BTreeSet::new(),
            handled: HashMap::new(),
            status: LeaderStatus {
                leader: sh.broker_id.clone(),
                leading_since_ms: now,
                updated_ms: now,
                ..Default::default()
            },
            internal_tx,
            internal_rx,
            warned: HashSet::new(),
            unsettled: Vec::new(),
            sh,
            election,
        };
        // Reports applied before the first cycle advance the extensible EMAs with the configured settings.
        leader.load.set_ema_settings(&settings);
        leader.load_all().await?;
        Ok((leader, streams))
    }

    /// The random stream of the next placement (lookup, reassignment, a destination chosen for an unload or a
    /// split child): `stream_rng(seed, Assignment, n)`, as the simulator's leader draws its n-th assignment.
    fn assignment_rng(&mut self) -> StdRng {
        let rng = stream_rng(self.sh.seed, Stream::Assignment, self.assignments);
        self.assignments += 1;
        rng
    }

    /// A new leader's full read (§6.2 plus loadmgr's records and ownership nodes).
    async fn load_all(&mut self) -> Result<(), RuntimeError> {
        let store = self.sh.store.clone();
        let started = tokio::time::Instant::now();
        // Seeds: stored bundle data, then quotas (both layouts).
        let bundles = list_bundles(&store, paths::BUNDLE_DATA).await?;
        let paths_: Vec<String> = bundles.iter().map(|b| paths::bundle_data(b)).collect();
        for (path, r) in read_many::<BundleData>(&self.sh, paths_).await {
            let Some(bundle) = paths::below(paths::BUNDLE_DATA, &path).map(str::to_owned) else {
                continue;
            };
            match r {
                Ok(Some((data, _, bytes))) => {
                    self.seeds.bundle_data.insert(bundle.clone(), data);
                    self.stored_bundle_data.insert(bundle);
                    self.flushed.insert(path, bytes);
                }
                Ok(None) => {}
                Err(e) => {
                    self.stored_bundle_data.insert(bundle);
                    tracing::warn!("stored bundle data skipped: {e}");
                }
            }
        }
        for root in [paths::RESOURCE_QUOTA_LEGACY, paths::RESOURCE_QUOTA] {
            let quotas = list_bundles(&store, root).await?;
            let paths_: Vec<String> = quotas.iter().map(|b| format!("{root}/{b}")).collect();
            for (path, r) in read_many::<ResourceQuota>(&self.sh, paths_).await {
                match r {
                    Ok(Some((q, _, _))) => {
                        if let Some(b) = paths::below(root, &path) {
                            self.seeds.quotas.insert(b.to_owned(), q);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!("stored quota skipped: {e}"),
                }
            }
        }
        let tas = store.get_children(paths::BROKER_TIME_AVERAGE).await?;
        let paths_: Vec<String> = tas.iter().map(|b| paths::time_average(b)).collect();
        for (path, r) in read_many::<TimeAverageBrokerData>(&self.sh, paths_).await {
            if let Some(b) = paths::below(paths::BROKER_TIME_AVERAGE, &path) {
                self.stored_time_averages.insert(b.to_owned());
            }
            if let Ok(Some((_, _, bytes))) = r {
                self.flushed.insert(path, bytes);
            }
        }
        // Namespaces.
        for ns in super::namespaces::list_namespaces(&store).await? {
            self.reload_namespace(&ns).await;
        }
        // Reports.
        for id in store.get_children(paths::BROKERS).await? {
            if let Err(Stop::Closed) = self.read_report(&id).await {
                return Err(RuntimeError::Store(Error::Closed));
            }
        }
        self.strategies
            .on_active_brokers_change(&self.load.broker_ids());
        // Records and ownership.
        let settings = self.sh.settings();
        let grace_ms = settings
            .load_balancer_shedding_grace_period_minutes
            .saturating_mul(60_000);
        let now = self.sh.now_ms();
        let records = list_bundles(&store, paths::ASSIGNMENTS).await?;
        let paths_: Vec<String> = records.iter().map(|b| paths::assignment(b)).collect();
        for (_, r) in read_many::<BundleAssignment>(&self.sh, paths_).await {
            match r {
                Ok(Some((rec, stat, _))) => {
                    if rec.cause.starts_grace_period() && now - rec.updated_ms <= grace_ms {
                        self.load.record_unload(&rec.bundle, rec.updated_ms);
                    }
                    if rec.state == AssignmentState::Assigning
                        && self.load.broker(&rec.destination).is_some()
                    {
                        self.load.preallocate(&rec.bundle, &rec.destination);
                    }
                    self.records.insert(rec.bundle.clone(), (rec, stat.version));
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("assignment record skipped: {e}"),
            }
        }
        let owned = list_bundles(&store, paths::OWNERSHIP).await?;
        let paths_: Vec<String> = owned.iter().map(|b| paths::ownership(b)).collect();
        for (path, r) in read_many::<NamespaceEphemeralData>(&self.sh, paths_).await {
            let Some(bundle) = paths::below(paths::OWNERSHIP, &path).map(str::to_owned) else {
                continue;
            };
            match r {
                Ok(Some((data, _, _))) => {
                    self.owners.insert(
                        bundle,
                        Owner {
                            broker: owner_of(&data).unwrap_or_default(),
                            disabled: data.disabled,
                        },
                    );
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("ownership node skipped: {e}"),
            }
        }
        self.reload_cluster_policies().await;
        tracing::info!(
            leader = %self.id,
            brokers = self.load.broker_count(),
            records = self.records.len(),
            owned = self.owners.len(),
            namespaces = self.namespaces.len(),
            stored_bundle_data = self.stored_bundle_data.len(),
            "leader state loaded in {} ms",
            started.elapsed().as_millis()
        );
        Ok(())
    }

    async fn run(&mut self, mut s: Streams) -> Stop {
        match self.startup_steps().await {
            Ok(()) => {}
            Err(stop) => return stop,
        }
        let settings = self.sh.settings();
        let mut flush = tokio::time::interval_at(
            tokio::time::Instant::now() + settings.flush_interval(),
            settings.flush_interval(),
        );
        flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shed = tokio::time::interval_at(
            tokio::time::Instant::now() + settings.shedding_interval(),
            settings.shedding_interval(),
        );
        shed.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Biased: at one instant, notifications (reports first) before the flush, the flush before the
            // shedding tick — the simulator's order of same-instant events — and the choice never random.
            let step = tokio::select! {
                biased;
                n = s.brokers.next() => match n {
                    None => Err(Stop::Closed),
                    Some(n) => self.on_broker_event(&n.path, n.kind).await,
                },
                n = s.owners.next() => match n {
                    None => Err(Stop::Closed),
                    Some(n) => self.on_owner_event(&n.path).await,
                },
                n = s.records.next() => match n {
                    None => Err(Stop::Closed),
                    Some(n) => self.on_record_event(&n.path).await,
                },
                n = s.requests.next() => match n {
                    None => Err(Stop::Closed),
                    Some(n) if n.kind == NotificationType::Created => self.on_request(&n.path).await,
                    Some(_) => Ok(()),
                },
                n = s.policies.next() => match n {
                    None => Err(Stop::Closed),
                    Some(n) => {
                        if let Some(ns) = paths::namespace_below(paths::LOCAL_POLICIES, &n.path) {
                            self.reload_namespace(&ns.to_string()).await;
                        }
                        Ok(())
                    }
                },
                n = async { s.cluster.as_mut().expect("guarded").next().await }, if s.cluster.is_some() => match n {
                    None => Err(Stop::Closed),
                    Some(_) => {
                        self.reload_cluster_policies().await;
                        Ok(())
                    }
                },
                Some(msg) = self.internal_rx.recv() => self.on_internal(msg).await,
                _ = flush.tick() => self.flush().await,
                _ = shed.tick() => self.cycle().await,
            };
            if let Err(stop) = step {
                return stop;
            }
        }
    }

    async fn startup_steps(&mut self) -> Step {
        self.reconcile_all().await?;
        for name in self
            .sh
            .store
            .get_children(paths::REQUESTS)
            .await
            .unwrap_or_default()
        {
            self.on_request(&format!("{}/{name}", paths::REQUESTS))
                .await?;
        }
        self.write_status().await
    }

    /// Maps a store error: fenced or closed stops the loop, anything else is logged.
    /// Deletes a node the flush wrote (fenced by leadership); one already gone counts as deleted. `true` when
    /// it is gone now, `false` after a soft error (tried again at the next flush).
    async fn delete_flushed(&mut self, path: &str, why: &str) -> Step<bool> {
        match self
            .election
            .fenced_batch(vec![Op::delete(path.to_owned())])
            .await
        {
            Ok(_) | Err(Error::NotFound { .. }) => {
                self.flushed.remove(path);
                tracing::info!(leader = %self.id, "deleted {path}: {why}");
                Ok(true)
            }
            Err(e) => self.soft(e, &format!("deleting {path}")).map(|()| false),
        }
    }

    fn soft(&self, e: Error, what: &str) -> Step {
        match e {
            Error::Fenced { .. } => Err(Stop::Fenced),
            Error::Closed => Err(Stop::Closed),
            e => {
                tracing::warn!(leader = %self.id, "{what}: {e}");
                Ok(())
            }
        }
    }

    /// Reads the cluster's isolation policies and failure domains again (see [`super::cluster_policies`]);
    /// on a read error the ones in force stay.
    async fn reload_cluster_policies(&mut self) {
        let Some(cluster) = self.sh.settings().cluster_name else {
            return;
        };
        match super::cluster_policies::read_cluster_policies(&self.sh.store, &cluster).await {
            Ok(data) => {
                for w in &data.warnings {
                    tracing::warn!(leader = %self.id, "{w}");
                }
                let before = (self.policies.isolation.len(), self.policies.domains.clone());
                data.apply_to(&mut self.policies);
                if before != (self.policies.isolation.len(), self.policies.domains.clone()) {
                    tracing::info!(
                        leader = %self.id,
                        cluster,
                        isolation_policies = self.policies.isolation.len(),
                        failure_domains = data.failure_domains.len(),
                        "cluster policies loaded"
                    );
                }
            }
            Err(e) => {
                tracing::warn!(leader = %self.id, cluster, "cluster policies not reloaded: {e}")
            }
        }
    }

    fn rebuild_policies(&mut self) {
        self.policies.namespaces = self
            .namespaces
            .iter()
            .map(|(ns, info)| {
                (
                    ns.clone(),
                    NamespacePolicy {
                        bundles: Some(info.bundles.clone()),
                        anti_affinity_group: info.local.namespace_anti_affinity_group.clone(),
                    },
                )
            })
            .collect();
    }

    async fn reload_namespace(&mut self, ns: &str) {
        let Ok(name) = NamespaceName::parse(ns) else {
            return;
        };
        match read_bundles(&self.sh.store, &name).await {
            Ok(Some(info)) => {
                self.namespaces.insert(ns.to_owned(), info);
            }
            Ok(None) => {
                self.namespaces.remove(ns);
            }
            Err(e) => tracing::warn!(namespace = ns, "namespace skipped: {e}"),
        }
        self.rebuild_policies();
    }

    async fn namespace(&mut self, ns: &NamespaceName) -> Option<&NamespaceBundlesInfo> {
        let key = ns.to_string();
        if !self.namespaces.contains_key(&key) {
            self.reload_namespace(&key).await;
        }
        self.namespaces.get(&key)
    }

    // ---- aggregation -------------------------------------------------------------------------------------

    async fn read_report(&mut self, id: &str) -> Step {
        let path = paths::broker(id);
        match self.sh.store.get(&path).await {
            Ok(Some(found)) => {
                let joined = self.registered.insert(id.to_owned());
                let written = (found.stat.creation_revision, found.stat.version);
                if self.applied_reports.get(id) == Some(&written) {
                    // Already aggregated (read while loading, then notified).
                    return Ok(());
                }
                self.applied_reports.insert(id.to_owned(), written);
                match parse_report(&found.value) {
                    Ok(report) => {
                        let new_broker = self.load.broker(id).is_none();
                        self.load.apply_report(id, report, &self.seeds);
                        self.status.reports_applied += 1;
                        if new_broker {
                            tracing::info!(leader = %self.id, broker = id, "broker joined");
                            self.strategies
                                .on_active_brokers_change(&self.load.broker_ids());
                        }
                    }
                    Err(why) => {
                        self.status.malformed_reports += 1;
                        self.sh
                            .metrics
                            .malformed_reports
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            leader = %self.id,
                            path,
                            "malformed broker report skipped ({} so far): {why}",
                            self.status.malformed_reports
                        );
                    }
                }
                if joined {
                    // Records waiting for any broker can now be placed.
                    self.reconcile_all().await?;
                }
                Ok(())
            }
            Ok(None) => self.broker_gone(id).await,
            Err(e) => self.soft(e, &format!("reading {path}")),
        }
    }

    async fn on_broker_event(&mut self, path: &str, kind: NotificationType) -> Step {
        let Some(id) = paths::below(paths::BROKERS, path).filter(|r| !r.contains('/')) else {
            return Ok(());
        };
        let id = id.to_owned();
        match kind {
            NotificationType::Deleted => self.broker_gone(&id).await,
            NotificationType::Created | NotificationType::Modified => self.read_report(&id).await,
            NotificationType::ChildrenChanged => Ok(()),
        }
    }

    async fn broker_gone(&mut self, id: &str) -> Step {
        self.applied_reports.remove(id);
        let was_registered = self.registered.remove(id);
        let had_report = self.load.remove_broker(id).is_some();
        if !was_registered && !had_report {
            return Ok(());
        }
        tracing::warn!(leader = %self.id, broker = id, "broker left: its registration vanished");
        self.strategies
            .on_active_brokers_change(&self.load.broker_ids());
        if self.stored_time_averages.contains(id) {
            match self
                .election
                .fenced_batch(vec![Op::delete(paths::time_average(id))])
                .await
            {
                Ok(_) | Err(Error::NotFound { .. }) => {
                    self.stored_time_averages.remove(id);
                    self.flushed.remove(&paths::time_average(id));
                }
                Err(e) => self.soft(e, "deleting the time average of a gone broker")?,
            }
        }
        let affected: Vec<String> = self
            .records
            .iter()
            .filter(|(_, (r, _))| r.destination == id)
            .map(|(b, _)| b.clone())
            .collect();
        if !affected.is_empty() {
            tracing::info!(
                leader = %self.id,
                broker = id,
                "reassigning {} bundle(s) of the gone broker",
                affected.len()
            );
        }
        for b in affected {
            self.reconcile(&b).await?;
        }
        Ok(())
    }

    // ---- ownership and records ---------------------------------------------------------------------------

    async fn on_owner_event(&mut self, path: &str) -> Step {
        let Some(bundle) = paths::bundle_below(paths::OWNERSHIP, path) else {
            return Ok(());
        };
        let bundle = bundle.to_string();
        match self.sh.store.get_json::<NamespaceEphemeralData>(path).await {
            Ok(Some((data, _))) => {
                self.owners.insert(
                    bundle.clone(),
                    Owner {
                        broker: owner_of(&data).unwrap_or_default(),
                        disabled: data.disabled,
                    },
                );
            }
            Ok(None) => {
                self.owners.remove(&bundle);
            }
            Err(e) => return self.soft(e, &format!("reading {path}")),
        }
        self.reconcile(&bundle).await
    }

    async fn on_record_event(&mut self, path: &str) -> Step {
        let Some(bundle) = paths::bundle_below(paths::ASSIGNMENTS, path) else {
            return Ok(());
        };
        let bundle = bundle.to_string();
        match self.sh.store.get_json::<BundleAssignment>(path).await {
            Ok(Some((rec, stat))) => {
                self.records.insert(bundle.clone(), (rec, stat.version));
            }
            Ok(None) => {
                self.records.remove(&bundle);
            }
            Err(e) => return self.soft(e, &format!("reading {path}")),
        }
        self.reconcile(&bundle).await
    }

    async fn reconcile_all(&mut self) -> Step {
        let mut bundles: BTreeSet<String> = self.records.keys().cloned().collect();
        bundles.extend(self.owners.keys().cloned());
        for b in bundles {
            self.reconcile(&b).await?;
        }
        Ok(())
    }

    /// Brings one bundle's record in line with the facts (see the module docs).
    async fn reconcile(&mut self, bundle: &str) -> Step {
        let owner = self.owners.get(bundle).cloned();
        let Some((rec, _)) = self.records.get(bundle).cloned() else {
            if let Some(o) = owner {
                if !o.disabled && self.registered.contains(&o.broker) && self.bundle_exists(bundle)
                {
                    let reason = format!("{} owned it without a loadmgr record", o.broker);
                    self.write_record(
                        bundle,
                        BundleAssignment {
                            bundle: bundle.to_owned(),
                            destination: o.broker.clone(),
                            state: AssignmentState::Assigned,
                            source: None,
                            cause: AssignmentCause::Adopted,
                            reason,
                            leader: self.id.clone(),
                            created_ms: self.sh.now_ms(),
                            updated_ms: self.sh.now_ms(),
                            unload_after_acquire: false,
                        },
                        false,
                    )
                    .await?;
                }
            }
            return Ok(());
        };
        if !self.bundle_exists(bundle) && owner.is_none() {
            // A split parent left behind (or a namespace that went away).
            return Ok(());
        }
        if !self.registered.contains(&rec.destination) {
            let (cause, why) = match rec.state {
                AssignmentState::Assigned => (
                    AssignmentCause::Orphan,
                    format!("owner {} is gone", rec.destination),
                ),
                AssignmentState::Assigning => (
                    AssignmentCause::Replaced,
                    format!(
                        "destination {} of the unfinished {} move is gone",
                        rec.destination,
                        rec.cause.name()
                    ),
                ),
            };
            return self.reassign(bundle, cause, &why).await;
        }
        let held_by_destination = owner
            .as_ref()
            .is_some_and(|o| o.broker == rec.destination && !o.disabled);
        if rec.state == AssignmentState::Assigning && held_by_destination {
            if rec.unload_after_acquire {
                return self.place_split_child(bundle, &rec).await;
            }
            return self.mark_assigned(bundle).await;
        }
        if rec.state == AssignmentState::Assigning {
            let age = self.sh.now_ms() - rec.created_ms;
            let limit = self.sh.settings().namespace_bundle_unloading_timeout_ms;
            if age > limit && self.warned.insert(format!("{bundle}@{}", rec.created_ms)) {
                tracing::warn!(
                    leader = %self.id,
                    bundle,
                    destination = %rec.destination,
                    owner = owner.as_ref().map(|o| o.broker.as_str()).unwrap_or("-"),
                    "move still unfinished after {age} ms (namespaceBundleUnloadingTimeoutMs {limit})"
                );
            }
        }
        Ok(())
    }

    fn bundle_exists(&self, bundle: &str) -> bool {
        let Ok(name) = BundleName::parse(bundle) else {
            return false;
        };
        match self.namespaces.get(&name.namespace().to_string()) {
            Some(info) => info.bundles.contains_range(name.range()),
            None => true,
        }
    }

    /// Writes a record (create-only when none is known, else compare-and-set on the known version).
    async fn write_record(
        &mut self,
        bundle: &str,
        rec: BundleAssignment,
        is_move: bool,
    ) -> Step<bool> {
        let expected = self.records.get(bundle).map_or(CREATE_ONLY, |(_, v)| *v);
        let op = Op::Put {
            path: paths::assignment(bundle),
            value: to_json_vec(&rec),
            expected_version: Some(expected),
            options: CreateOptions::PERSISTENT,
        };
        match self.election.fenced_batch(vec![op]).await {
            Ok(results) => {
                let version = match results.first() {
                    Some(OpResult::Put(stat)) => stat.version,
                    _ => expected + 1,
                };
                if is_move {
                    self.status.moves_started += 1;
                    if self.load.broker(&rec.destination).is_some() {
                        self.load.preallocate(bundle, &rec.destination);
                    }
                    if rec.cause.starts_grace_period() {
                        self.load.record_unload(bundle, rec.created_ms);
                    }
                    tracing::info!(
                        leader = %self.id,
                        bundle,
                        source = rec.source.as_deref().unwrap_or("-"),
                        destination = %rec.destination,
                        cause = rec.cause.name(),
                        "move started: {}",
                        rec.reason
                    );
                } else {
                    tracing::info!(
                        leader = %self.id,
                        bundle,
                        owner = %rec.destination,
                        cause = rec.cause.name(),
                        "record written: {}",
                        rec.reason
                    );
                }
                self.records.insert(bundle.to_owned(), (rec, version));
                Ok(true)
            }
            Err(Error::BadVersion { .. }) => {
                tracing::warn!(leader = %self.id, bundle, "the record changed meanwhile; re-reading it");
                match self
                    .sh
                    .store
                    .get_json::<BundleAssignment>(&paths::assignment(bundle))
                    .await
                {
                    Ok(Some((r, s))) => {
                        self.records.insert(bundle.to_owned(), (r, s.version));
                    }
                    Ok(None) => {
                        self.records.remove(bundle);
                    }
                    Err(e) => self.soft(e, "re-reading a record")?,
                }
                Ok(false)
            }
            Err(e) => self
                .soft(e, &format!("writing the record of {bundle}"))
                .map(|_| false),
        }
    }

    /// Starts a move of `bundle` to `destination`.
    async fn start_move(
        &mut self,
        bundle: &str,
        destination: &str,
        cause: AssignmentCause,
        reason: String,
        unload_after_acquire: bool,
    ) -> Step<bool> {
        let now = self.sh.now_ms();
        // The owner now; for a bundle whose owner died, the owner the previous record named.
        let previous = self.records.get(bundle).map(|(r, _)| match r.state {
            AssignmentState::Assigned => Some(r.destination.clone()),
            AssignmentState::Assigning => r.source.clone(),
        });
        let source = self
            .owners
            .get(bundle)
            .map(|o| o.broker.clone())
            .or(previous.flatten())
            .filter(|o| o != destination);
        let rec = BundleAssignment {
            bundle: bundle.to_owned(),
            destination: destination.to_owned(),
            state: AssignmentState::Assigning,
            source,
            cause,
            reason,
            leader: self.id.clone(),
            created_ms: now,
            updated_ms: now,
            unload_after_acquire,
        };
        self.write_record(bundle, rec, true).await
    }

    /// Places a bundle whose record's destination is gone.
    async fn reassign(&mut self, bundle: &str, cause: AssignmentCause, why: &str) -> Step {
        let settings = self.sh.settings();
        let mut rng = self.assignment_rng();
        let placed = assign_bundle(
            &mut self.load,
            &settings,
            &self.policies,
            &mut self.strategies.placement,
            bundle,
            &mut rng,
        );
        match placed {
            Ok(a) if self.registered.contains(&a.broker) => {
                self.start_move(
                    bundle,
                    &a.broker,
                    cause,
                    format!("{why}; {}", a.reason),
                    false,
                )
                .await?;
            }
            Ok(a) => match self.choose_other(bundle, &a.broker) {
                Ok((dest, reason)) if self.registered.contains(&dest) => {
                    self.start_move(bundle, &dest, cause, format!("{why}; {reason}"), false)
                        .await?;
                }
                _ => {
                    tracing::warn!(leader = %self.id, bundle, "{why}, and placement chose {} which is not registered; retrying later", a.broker);
                }
            },
            Err(skipped) => {
                if self.warned.insert(format!("{bundle}:unplaceable")) {
                    tracing::warn!(leader = %self.id, bundle, "{why}, and it cannot be placed now: {}; retrying when brokers change", skipped.reason);
                }
            }
        }
        Ok(())
    }

    async fn mark_assigned(&mut self, bundle: &str) -> Step {
        let Some((mut rec, _)) = self.records.get(bundle).cloned() else {
            return Ok(());
        };
        let now = self.sh.now_ms();
        let took = now - rec.created_ms;
        rec.state = AssignmentState::Assigned;
        rec.updated_ms = now;
        rec.unload_after_acquire = false;
        let cause = rec.cause;
        let source = rec.source.clone();
        let destination = rec.destination.clone();
        if self.write_record(bundle, rec, false).await? {
            self.status.moves_completed += 1;
            self.unsettled
                .push((bundle.to_owned(), source.clone(), destination.clone(), now));
            self.warned.remove(&format!("{bundle}:unplaceable"));
            if cause.starts_grace_period() {
                self.load.record_unload(bundle, now);
            }
            tracing::info!(
                leader = %self.id,
                bundle,
                source = source.as_deref().unwrap_or("-"),
                destination = %destination,
                cause = cause.name(),
                "move completed in {took} ms"
            );
        }
        Ok(())
    }

    /// A broker other than `source` for `bundle`, and why (placement, retried without `source` when it
    /// chose it).
    fn choose_other(&mut self, bundle: &str, source: &str) -> Result<(String, String), String> {
        let settings = self.sh.settings();
        let now = self.sh.now_ms();
        let mut rng = self.assignment_rng();
        let first = {
            let ctx = PlacementContext::new(&self.load, &settings, &self.policies).with_now(now);
            select_broker(
                &ctx,
                &mut self.strategies.placement,
                bundle,
                None,
                Some(source),
                &mut rng,
            )
        };
        match first {
            Ok(sel) if sel.broker != source => return Ok((sel.broker, sel.reason)),
            _ => {}
        }
        let mut without = self.load.clone();
        without.remove_broker(source);
        if without.broker_count() == 0 {
            return Err(format!("no broker other than {source} is available"));
        }
        let ctx = PlacementContext::new(&without, &settings, &self.policies).with_now(now);
        select_broker(
            &ctx,
            &mut self.strategies.placement,
            bundle,
            None,
            Some(source),
            &mut rng,
        )
        .map(|s| (s.broker, s.reason))
    }

    /// A split child now held by the parent's owner: place it anew
    /// (`loadBalancerAutoUnloadSplitBundlesEnabled`), or keep it where it is when placement says so.
    async fn place_split_child(&mut self, bundle: &str, rec: &BundleAssignment) -> Step {
        match self.choose_other(bundle, &rec.destination) {
            Ok((dest, why)) if self.registered.contains(&dest) => self
                .start_move(
                    bundle,
                    &dest,
                    AssignmentCause::Split,
                    format!(
                        "{}; child placed anew from {}: {why}",
                        rec.reason, rec.destination
                    ),
                    false,
                )
                .await
                .map(|_| ()),
            Ok(_) | Err(_) => self.mark_assigned(bundle).await,
        }
    }

    // ---- shedding, splits ----------------------------------------------------------------------------------

    /// Whether the last moves are visible in the reports: nothing in flight, and every completed move listed
    /// by its destination's report and gone from its source's (or the broker is gone, or the reports are
    /// overdue by more than a forced-report period).
    fn settled(&mut self, settings: &Settings, now: i64) -> Result<(), String> {
        let in_flight = self
            .records
            .values()
            .filter(|(r, _)| r.state == AssignmentState::Assigning)
            .count();
        let overdue = settings.report_max_interval().as_millis() as i64
            + settings.shedding_interval().as_millis() as i64;
        let load = &self.load;
        self.unsettled.retain(|(bundle, source, dest, at)| {
            let lists = |broker: &str| {
                load.broker(broker)
                    .map(|e| e.local.last_stats.contains_key(bundle))
            };
            let dest_ok = lists(dest) != Some(false);
            let source_ok = source.as_deref().map_or(true, |s| lists(s) != Some(true));
            !(dest_ok && source_ok) && now - at <= overdue
        });
        if in_flight > 0 || !self.unsettled.is_empty() {
            return Err(format!(
                "{in_flight} move(s) in flight, {} completed move(s) not reported yet",
                self.unsettled.len()
            ));
        }
        Ok(())
    }

    /// One shedding tick. The k-th tick of the term (from 0, deferred ticks included) draws from
    /// `stream_rng(seed, Shedding, k)`: the stream of a cycle depends only on its time, election + (k + 1) ×
    /// the shedding interval, as in the simulator.
    async fn cycle(&mut self) -> Step {
        let settings = self.sh.settings();
        let now = self.sh.now_ms();
        let mut rng = stream_rng(self.sh.seed, Stream::Shedding, self.shedding_ticks);
        self.shedding_ticks += 1;
        self.status.shedding_cycles += 1;
        if let Err(why) = self.settled(&settings, now) {
            tracing::debug!(leader = %self.id, "shedding waits for the last moves to show in the reports: {why}");
            if settings.load_balancer_auto_bundle_split_enabled {
                self.split_check(&settings).await?;
            }
            self.reconcile_all().await?;
            return self.collect_requests().await;
        }
        let plan = run_shedding_cycle(
            &mut self.load,
            &settings,
            &self.policies,
            &mut self.strategies,
            now,
            &mut rng,
        );
        for s in &plan.skipped {
            tracing::debug!(leader = %self.id, subject = %s.subject, "shedding: {}", s.reason);
        }
        for u in plan.unloads {
            let Some(dest) = u.destination.clone() else {
                tracing::info!(leader = %self.id, bundle = %u.bundle, "shedding proposal without destination not applied: {}", u.reason);
                continue;
            };
            if let Some(blocker) = self.move_blocker(&u.bundle, &u.source) {
                tracing::info!(leader = %self.id, bundle = %u.bundle, "shedding proposal not applied ({blocker}): {}", u.reason);
                continue;
            }
            if !self.registered.contains(&dest) {
                tracing::info!(leader = %self.id, bundle = %u.bundle, "shedding proposal not applied (destination {dest} is not registered): {}", u.reason);
                continue;
            }
            self.start_move(
                &u.bundle,
                &dest,
                AssignmentCause::Shedding,
                u.reason.clone(),
                false,
            )
            .await?;
        }
        if settings.load_balancer_auto_bundle_split_enabled {
            self.split_check(&settings).await?;
        }
        self.reconcile_all().await?;
        self.collect_requests().await
    }

    /// Why a bundle cannot be moved off `source` now.
    fn move_blocker(&self, bundle: &str, source: &str) -> Option<String> {
        if let Some((r, _)) = self.records.get(bundle) {
            if r.state == AssignmentState::Assigning {
                return Some(format!("already moving to {}", r.destination));
            }
        }
        match self.owners.get(bundle) {
            Some(o) if o.broker == source && !o.disabled => None,
            Some(o) => Some(format!("owned by {} now", o.broker)),
            None => Some("not owned now".to_owned()),
        }
    }

    async fn split_check(&mut self, settings: &Settings) -> Step {
        let plan = find_bundles_to_split(&self.load, settings, &self.policies, &Default::default());
        for s in &plan.skipped {
            tracing::debug!(leader = %self.id, subject = %s.subject, "split: {}", s.reason);
        }
        for d in plan.splits {
            if self.move_blocker(&d.bundle, &d.broker).is_some() {
                continue;
            }
            let Ok(algorithm) = d.algorithm.parse::<SplitAlgorithm>() else {
                continue;
            };
            let req = SplitRequest {
                bundle: d.bundle.clone(),
                owner: d.broker.clone(),
                algorithm,
                positions: Vec::new(),
                unload_children: d.unload_children,
                reason: d.reason.clone(),
                origin: SplitOrigin::Auto,
            };
            if d.boundaries.is_empty() {
                self.ask_split_points(req);
            } else {
                let points: Vec<u64> = d
                    .boundaries
                    .iter()
                    .filter_map(|b| parse_hash(b).ok())
                    .collect();
                self.apply_split(req, points).await?;
            }
        }
        Ok(())
    }

    /// Topic-based algorithms need the owner's topics: ask the owner (or ourselves) for the split points.
    fn ask_split_points(&mut self, plan: SplitRequest) {
        if plan.owner == self.id {
            let positions: Vec<String> = plan.positions.iter().map(|p| format_hash(*p)).collect();
            let result = split_points(&self.sh, &plan.bundle, plan.algorithm.name(), &positions);
            let _ = self
                .internal_tx
                .send(Internal::SplitPoints { plan, result });
            return;
        }
        let store = self.sh.store.clone();
        let tx = self.internal_tx.clone();
        let requester = self.id.clone();
        tokio::spawn(async move {
            let result = super::requests::submit(
                &store,
                RequestOp::SplitPoints {
                    bundle: plan.bundle.clone(),
                    algorithm: plan.algorithm.name().to_owned(),
                    positions: plan.positions.iter().map(|p| format_hash(*p)).collect(),
                },
                Some(&plan.owner),
                &requester,
                Duration::from_secs(30),
            )
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| {
                serde_json::from_value::<Vec<String>>(r.result)
                    .map_err(|e| format!("malformed split points: {e}"))
            })
            .and_then(|v| {
                v.iter()
                    .map(|p| parse_hash(p).map_err(|e| e.to_string()))
                    .collect::<Result<Vec<u64>, String>>()
            });
            let _ = tx.send(Internal::SplitPoints { plan, result });
        });
    }

    async fn on_internal(&mut self, msg: Internal) -> Step {
        match msg {
            Internal::SplitPoints { plan, result } => match result {
                Ok(points) => self.apply_split(plan, points).await,
                Err(e) => {
                    tracing::info!(leader = %self.id, bundle = %plan.bundle, "no split: {e}");
                    self.answer_split(
                        &plan.origin,
                        false,
                        format!("no split: {e}"),
                        serde_json::Value::Null,
                    )
                    .await
                }
            },
        }
    }

    async fn answer_split(
        &mut self,
        origin: &SplitOrigin,
        ok: bool,
        message: String,
        result: serde_json::Value,
    ) -> Step {
        if let SplitOrigin::Request {
            path,
            request,
            stat,
        } = origin
        {
            self.answer(path, request, stat, ok, message, result)
                .await?;
        }
        Ok(())
    }

    /// Applies a split in one fenced batch: the namespace's local policies, the children's records (owned by
    /// the parent's owner first) and bundle data, the parent's record and bundle data removed.
    async fn apply_split(&mut self, plan: SplitRequest, points: Vec<u64>) -> Step {
        let bundle = plan.bundle.clone();
        let checked = (|| {
            let name = BundleName::parse(&bundle).map_err(|e| e.to_string())?;
            let ns = name.namespace().to_string();
            let info = self
                .namespaces
                .get(&ns)
                .ok_or_else(|| format!("namespace {ns} is unknown"))?;
            if !info.bundles.contains_range(name.range()) {
                return Err(format!("{bundle} is not a bundle of {ns} any more"));
            }
            if let Some(b) = self.move_blocker(&bundle, &plan.owner) {
                return Err(format!("{bundle} cannot be split now: {b}"));
            }
            let new_bundles = info
                .bundles
                .split(name.range(), &points)
                .map_err(|e| e.to_string())?;
            let children: Vec<String> = SplitOutcome::Split(points.clone())
                .children(name.range())
                .into_iter()
                .map(|r| BundleName::new(name.namespace().clone(), r).to_string())
                .collect();
            Ok((ns, info.clone(), new_bundles, children))
        })();
        let (ns, info, new_bundles, children) = match checked {
            Ok(c) => c,
            Err(e) => {
                tracing::info!(leader = %self.id, bundle, "no split: {e}");
                return self
                    .answer_split(&plan.origin, false, e, serde_json::Value::Null)
                    .await;
            }
        };
        let now = self.sh.now_ms();
        let mut local = info.local.clone();
        local.bundles = new_bundles.to_bundles_data();
        let mut ops = vec![Op::Put {
            path: paths::local_policies(&ns),
            value: to_json_vec(&local),
            expected_version: Some(info.local_version.unwrap_or(CREATE_ONLY)),
            options: CreateOptions::PERSISTENT,
        }];
        let had_record = self.records.contains_key(&bundle);
        if let Some((_, v)) = self.records.get(&bundle) {
            ops.push(Op::Delete {
                path: paths::assignment(&bundle),
                expected_version: Some(*v),
            });
        }
        let reason = format!(
            "split of {bundle} at {}: {}",
            points
                .iter()
                .map(|p| format_hash(*p))
                .collect::<Vec<_>>()
                .join(", "),
            plan.reason
        );
        let child_records: Vec<BundleAssignment> = children
            .iter()
            .map(|c| BundleAssignment {
                bundle: c.clone(),
                destination: plan.owner.clone(),
                state: AssignmentState::Assigning,
                source: Some(plan.owner.clone()),
                cause: AssignmentCause::Split,
                reason: reason.clone(),
                leader: self.id.clone(),
                created_ms: now,
                updated_ms: now,
                unload_after_acquire: plan.unload_children,
            })
            .collect();
        for r in &child_records {
            ops.push(Op::Put {
                path: paths::assignment(&r.bundle),
                value: to_json_vec(r),
                expected_version: Some(CREATE_ONLY),
                options: CreateOptions::PERSISTENT,
            });
        }
        if self.stored_bundle_data.contains(&bundle) {
            ops.push(Op::delete(paths::bundle_data(&bundle)));
        }
        let parent_data = self.load.bundle(&bundle).copied();
        let child_data = parent_data.map(|d| divide(&d, children.len()));
        if let Some(d) = child_data {
            for c in &children {
                ops.push(Op::put(paths::bundle_data(c), to_json_vec(&d)));
            }
        }
        let first_child = 1 + usize::from(had_record);
        match self.election.fenced_batch(ops).await {
            Ok(results) => {
                let local_version = match results.first() {
                    Some(OpResult::Put(s)) => s.version,
                    _ => 0,
                };
                if let Some(i) = self.namespaces.get_mut(&ns) {
                    i.bundles = new_bundles;
                    i.local = local;
                    i.local_version = Some(local_version);
                }
                self.rebuild_policies();
                self.records.remove(&bundle);
                for (i, r) in child_records.into_iter().enumerate() {
                    let v = match results.get(first_child + i) {
                        Some(OpResult::Put(s)) => s.version,
                        _ => 0,
                    };
                    self.records.insert(r.bundle.clone(), (r, v));
                }
                if self.stored_bundle_data.remove(&bundle) {
                    self.flushed.remove(&paths::bundle_data(&bundle));
                }
                self.seeds.bundle_data.remove(&bundle);
                if let Some(d) = child_data {
                    for c in &children {
                        self.seeds.bundle_data.insert(c.clone(), d);
                        self.load.set_bundle(c, d);
                        self.stored_bundle_data.insert(c.clone());
                        self.flushed.insert(paths::bundle_data(c), to_json_vec(&d));
                    }
                }
                self.status.splits += 1;
                tracing::info!(
                    leader = %self.id,
                    bundle,
                    owner = %plan.owner,
                    children = %children.join(", "),
                    unload_children = plan.unload_children,
                    "{reason}"
                );
                let origin = plan.origin.clone();
                self.answer_split(
                    &origin,
                    true,
                    format!("split {bundle} into {}", children.join(", ")),
                    serde_json::json!(children),
                )
                .await
            }
            Err(Error::BadVersion { .. }) => {
                self.reload_namespace(&ns).await;
                let origin = plan.origin.clone();
                self.answer_split(
                    &origin,
                    false,
                    format!("the bundles of {ns} or the record of {bundle} changed meanwhile; try again"),
                    serde_json::Value::Null,
                )
                .await
            }
            Err(e) => self.soft(e, &format!("splitting {bundle}")),
        }
    }

    // ---- flush --------------------------------------------------------------------------------------------

    /// Writes the top-K bundle data per broker and every time average (§6.4), skipping unchanged values, and
    /// deletes the data of gone brokers and bundles.
    async fn flush(&mut self) -> Step {
        let settings = self.sh.settings();
        self.load.resample_all();
        let k = settings.load_balancer_max_number_of_bundles_in_bundle_load_report;
        let excluded = &settings.load_balancer_shedding_excluded_namespaces;
        let mut chosen = BTreeSet::new();
        for (_, e) in self.load.brokers() {
            let mut bundles: Vec<(&String, f64)> = e
                .local
                .last_stats
                .keys()
                .filter(|b| !excluded.contains(crate::core::namespace_of(b)))
                .map(|b| {
                    let tp = self
                        .load
                        .bundle(b)
                        .map_or(0.0, |d| d.short_term_data.total_msg_throughput());
                    (b, tp)
                })
                .collect();
            bundles.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            if k > 0 {
                bundles.truncate(k as usize);
            }
            chosen.extend(bundles.into_iter().map(|(b, _)| b.clone()));
        }
        let mut ops = Vec::new();
        let mut written: Vec<(String, Vec<u8>)> = Vec::new();
        for b in &chosen {
            if let Some(d) = self.load.bundle(b) {
                let path = paths::bundle_data(b);
                let bytes = to_json_vec(d);
                if self.flushed.get(&path) != Some(&bytes) {
                    ops.push(Op::put(path.clone(), bytes.clone()));
                    written.push((path, bytes));
                }
            }
        }
        let mut time_averages = Vec::new();
        for (id, e) in self.load.brokers() {
            let path = paths::time_average(id);
            let bytes = to_json_vec(&e.time_average);
            if self.flushed.get(&path) != Some(&bytes) {
                ops.push(Op::put(path.clone(), bytes.clone()));
                written.push((path, bytes));
            }
            time_averages.push(id.clone());
        }
        let now = self.sh.now_ms();
        self.status.flushes += 1;
        self.status.updated_ms = now;
        ops.push(Op::put(paths::LEADER_STATUS, to_json_vec(&self.status)));
        let n = written.len();
        match self.election.fenced_batch(ops).await {
            Ok(_) => {
                for (path, bytes) in written {
                    if let Some(b) = paths::below(paths::BUNDLE_DATA, &path) {
                        self.stored_bundle_data.insert(b.to_owned());
                    }
                    self.flushed.insert(path, bytes);
                }
                self.stored_time_averages.extend(time_averages);
                tracing::debug!(leader = %self.id, "flushed {n} changed value(s)");
            }
            Err(e) => return self.soft(e, "flush"),
        }
        // Deletions, one by one (a batch fails as a whole on a node someone else removed).
        let gone_brokers: Vec<String> = self
            .stored_time_averages
            .iter()
            .filter(|b| !self.registered.contains(*b))
            .cloned()
            .collect();
        let gone_bundles: Vec<String> = self
            .stored_bundle_data
            .iter()
            .filter(|b| self.load.bundle(b).is_none() && !self.records.contains_key(*b))
            .cloned()
            .collect();
        for b in gone_brokers {
            if self
                .delete_flushed(&paths::time_average(&b), "the broker is gone")
                .await?
            {
                self.stored_time_averages.remove(&b);
            }
        }
        for b in gone_bundles {
            if self
                .delete_flushed(
                    &paths::bundle_data(&b),
                    "no broker serves the bundle and none is assigned it",
                )
                .await?
            {
                self.stored_bundle_data.remove(&b);
            }
        }
        Ok(())
    }

    async fn write_status(&mut self) -> Step {
        self.status.updated_ms = self.sh.now_ms();
        match self
            .election
            .fenced_batch(vec![Op::put(
                paths::LEADER_STATUS,
                to_json_vec(&self.status),
            )])
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self.soft(e, "writing the leader status"),
        }
    }

    // ---- requests -----------------------------------------------------------------------------------------

    async fn on_request(&mut self, path: &str) -> Step {
        if path == paths::REQUESTS {
            return Ok(());
        }
        let found = match self.sh.store.get(path).await {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(()),
            Err(e) => return self.soft(e, &format!("reading {path}")),
        };
        // A request is known by its path *and* its creation: a sequential name can come again once its node
        // is gone (etcd names by revision; a ZooKeeper container parent that vanished restarts its counter).
        let incarnation = found.stat.creation_revision;
        if self.handled.get(path) == Some(&incarnation) {
            return Ok(());
        }
        let stat = found.stat;
        let request = match serde_json::from_slice::<AdminRequest>(&found.value) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(leader = %self.id, path, "malformed request ignored: {e}");
                self.handled.insert(path.to_owned(), incarnation);
                return Ok(());
            }
        };
        if request.response.is_some() || request.target.is_some() {
            return Ok(());
        }
        self.handled.insert(path.to_owned(), incarnation);
        tracing::info!(leader = %self.id, requester = %request.requester, "request: {}", request.op.describe());
        let outcome = match request.op.clone() {
            RequestOp::Lookup { topic } => self.lookup(&topic).await?,
            RequestOp::Unload {
                bundle,
                destination,
            } => {
                self.unload(&bundle, destination.as_deref(), AssignmentCause::Unload)
                    .await?
            }
            RequestOp::UnloadNamespace { namespace } => self.unload_namespace(&namespace).await?,
            RequestOp::Split {
                bundle,
                algorithm,
                positions,
                unload,
            } => {
                match self
                    .split_request(
                        &bundle,
                        algorithm.as_deref(),
                        &positions,
                        unload,
                        path,
                        &request,
                        &stat,
                    )
                    .await?
                {
                    // Answered when the split is done.
                    None => return Ok(()),
                    Some(o) => o,
                }
            }
            RequestOp::SplitPoints { .. } => {
                Err("split points are asked of a bundle's owner, not of the leader".to_owned())
            }
        };
        let (ok, message, result) = match outcome {
            Ok((m, r)) => (true, m, r),
            Err(m) => (false, m, serde_json::Value::Null),
        };
        self.answer(path, &request, &stat, ok, message, result)
            .await
    }

    async fn answer(
        &mut self,
        path: &str,
        request: &AdminRequest,
        stat: &Stat,
        ok: bool,
        message: String,
        result: serde_json::Value,
    ) -> Step {
        if ok {
            tracing::info!(leader = %self.id, "{}: {message}", request.op.describe());
        } else {
            tracing::info!(leader = %self.id, "{} refused: {message}", request.op.describe());
        }
        let answered = AdminRequest {
            response: Some(RequestResponse {
                ok,
                message,
                result,
                answered_by: self.id.clone(),
                answered_ms: self.sh.now_ms(),
            }),
            ..request.clone()
        };
        let op = Op::Put {
            path: path.to_owned(),
            value: to_json_vec(&answered),
            expected_version: Some(stat.version),
            options: CreateOptions::PERSISTENT,
        };
        match self.election.fenced_batch(vec![op]).await {
            Ok(_) => {
                self.status.requests_answered += 1;
                Ok(())
            }
            Err(Error::BadVersion { .. }) => Ok(()),
            Err(e) => self.soft(e, &format!("answering {path}")),
        }
    }

    /// Removes answered requests older than a minute and abandoned ones older than ten.
    async fn collect_requests(&mut self) -> Step {
        let now = self.sh.now_ms();
        let names = match self.sh.store.get_children(paths::REQUESTS).await {
            Ok(n) => n,
            Err(e) => return self.soft(e, "listing requests"),
        };
        let present: HashSet<String> = names
            .iter()
            .map(|n| format!("{}/{n}", paths::REQUESTS))
            .collect();
        self.handled.retain(|p, _| present.contains(p));
        for path in present {
            let Ok(Some((r, stat))) = self.sh.store.get_json::<AdminRequest>(&path).await else {
                continue;
            };
            let expired = match &r.response {
                Some(resp) => now - resp.answered_ms > ANSWERED_TTL_MS,
                None => now - r.created_ms > UNANSWERED_TTL_MS,
            };
            if expired {
                let _ = self.sh.store.delete(&path, Some(stat.version)).await;
            }
        }
        Ok(())
    }

    async fn lookup(&mut self, topic: &str) -> Step<Result<(String, serde_json::Value), String>> {
        let name = match TopicName::parse(topic) {
            Ok(t) => t,
            Err(e) => return Ok(Err(format!("topic {topic}: {e}"))),
        };
        let ns = name.namespace().clone();
        let Some(info) = self.namespace(&ns).await else {
            return Ok(Err(format!(
                "namespace {ns} does not exist (create it with `loadmgr admin namespaces create {ns}`)"
            )));
        };
        let range = info.bundles.find_topic(&name);
        let bundle = BundleName::new(ns, range).to_string();
        let answer = |broker: &str, owned: bool| {
            serde_json::to_value(LookupAnswer {
                bundle: bundle.clone(),
                broker: broker.to_owned(),
                owned,
            })
            .expect("serialisable")
        };
        if let Some(o) = self.owners.get(&bundle) {
            if !o.disabled {
                return Ok(Ok((
                    format!("{bundle} is owned by {}", o.broker),
                    answer(&o.broker, true),
                )));
            }
        }
        if let Some((r, _)) = self.records.get(&bundle) {
            if self.registered.contains(&r.destination) {
                return Ok(Ok((
                    format!("{bundle} is being assigned to {}", r.destination),
                    answer(&r.destination, false),
                )));
            }
        }
        let settings = self.sh.settings();
        let mut rng = self.assignment_rng();
        let placed = assign_bundle(
            &mut self.load,
            &settings,
            &self.policies,
            &mut self.strategies.placement,
            &bundle,
            &mut rng,
        );
        match placed {
            Ok(a) => {
                let reason = format!("lookup of {topic}: {}", a.reason);
                if self
                    .start_move(&bundle, &a.broker, AssignmentCause::Lookup, reason, false)
                    .await?
                {
                    Ok(Ok((
                        format!("{bundle} assigned to {}", a.broker),
                        answer(&a.broker, false),
                    )))
                } else {
                    Ok(Err(format!(
                        "{bundle}: the assignment could not be written; retry"
                    )))
                }
            }
            Err(skipped) => Ok(Err(format!("{bundle}: {}", skipped.reason))),
        }
    }

    async fn unload(
        &mut self,
        bundle: &str,
        destination: Option<&str>,
        cause: AssignmentCause,
    ) -> Step<Result<(String, serde_json::Value), String>> {
        let name = match BundleName::parse(bundle) {
            Ok(n) => n,
            Err(e) => return Ok(Err(format!("bundle {bundle}: {e}"))),
        };
        let ns = name.namespace().clone();
        let Some(info) = self.namespace(&ns).await else {
            return Ok(Err(format!("namespace {ns} does not exist")));
        };
        if !info.bundles.contains_range(name.range()) {
            return Ok(Err(format!(
                "{} is not a bundle of {ns}; its bundles are {}",
                name.range(),
                info.bundles
                    .ranges()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        // A request a previous leader already started (it died before answering): report the move in flight.
        if let Some((r, _)) = self.records.get(bundle) {
            if r.state == AssignmentState::Assigning
                && r.cause == cause
                && destination.map_or(true, |d| d == r.destination)
            {
                let source = r.source.clone().unwrap_or_default();
                return Ok(Ok((
                    format!(
                        "unloading {bundle} from {source} to {} (already in flight)",
                        r.destination
                    ),
                    serde_json::json!({"bundle": bundle, "source": source, "destination": r.destination}),
                )));
            }
        }
        let Some(owner) = self.owners.get(bundle).map(|o| o.broker.clone()) else {
            return Ok(Err(format!(
                "{bundle} is not owned by any broker; nothing to unload"
            )));
        };
        if let Some(b) = self.move_blocker(bundle, &owner) {
            return Ok(Err(format!("{bundle} cannot be unloaded now: {b}")));
        }
        let (dest, why) = match destination {
            Some(d) => {
                if !self.registered.contains(d) {
                    return Ok(Err(format!(
                        "destination broker {d} is not registered (brokers: {})",
                        self.registered
                            .iter()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                if d == owner {
                    return Ok(Err(format!("{bundle} is already owned by {d}")));
                }
                (d.to_owned(), format!("operator unload to {d}"))
            }
            None => match self.choose_other(bundle, &owner) {
                Ok((d, why)) => (
                    d.clone(),
                    format!("operator unload; destination {d}: {why}"),
                ),
                Err(e) => return Ok(Err(format!("{bundle}: no other broker can take it: {e}"))),
            },
        };
        if self.start_move(bundle, &dest, cause, why, false).await? {
            Ok(Ok((
                format!("unloading {bundle} from {owner} to {dest}"),
                serde_json::json!({"bundle": bundle, "source": owner, "destination": dest}),
            )))
        } else {
            Ok(Err(format!(
                "{bundle}: the record changed meanwhile; retry"
            )))
        }
    }

    async fn unload_namespace(
        &mut self,
        namespace: &str,
    ) -> Step<Result<(String, serde_json::Value), String>> {
        let ns = match NamespaceName::parse(namespace) {
            Ok(n) => n,
            Err(e) => return Ok(Err(format!("namespace {namespace}: {e}"))),
        };
        let Some(info) = self.namespace(&ns).await else {
            return Ok(Err(format!("namespace {ns} does not exist")));
        };
        let bundles: Vec<String> = info
            .bundle_names()
            .into_iter()
            .filter(|b| self.owners.contains_key(b))
            .collect();
        let mut moves = Vec::new();
        let mut problems = Vec::new();
        for b in bundles {
            match self.unload(&b, None, AssignmentCause::Unload).await? {
                Ok((_, r)) => moves.push(r),
                Err(e) => problems.push(e),
            }
        }
        let message = if problems.is_empty() {
            format!("unloading {} bundle(s) of {ns}", moves.len())
        } else {
            format!(
                "unloading {} bundle(s) of {ns}; not unloaded: {}",
                moves.len(),
                problems.join("; ")
            )
        };
        Ok(Ok((message, serde_json::json!(moves))))
    }

    /// Validates a split request and starts it; `None` when the answer comes later (owner computing the
    /// split points).
    #[allow(clippy::too_many_arguments)]
    async fn split_request(
        &mut self,
        bundle: &str,
        algorithm: Option<&str>,
        positions: &[String],
        unload: bool,
        path: &str,
        request: &AdminRequest,
        stat: &Stat,
    ) -> Step<Option<Result<(String, serde_json::Value), String>>> {
        let settings = self.sh.settings();
        let name = match BundleName::parse(bundle) {
            Ok(n) => n,
            Err(e) => return Ok(Some(Err(format!("bundle {bundle}: {e}")))),
        };
        let algorithm = match algorithm {
            None => settings.default_namespace_bundle_split_algorithm,
            Some(a) => match a.parse::<SplitAlgorithm>() {
                Ok(a) => a,
                Err(e) => return Ok(Some(Err(e.to_string()))),
            },
        };
        if !settings
            .supported_namespace_bundle_split_algorithms
            .iter()
            .any(|s| s == algorithm.name())
        {
            return Ok(Some(Err(format!(
                "{} is not in supportedNamespaceBundleSplitAlgorithms ({})",
                algorithm.name(),
                settings
                    .supported_namespace_bundle_split_algorithms
                    .join(", ")
            ))));
        }
        let positions: Vec<u64> = match positions.iter().map(|p| parse_hash(p)).collect() {
            Ok(p) => p,
            Err(e) => return Ok(Some(Err(format!("positions: {e}")))),
        };
        if algorithm == SplitAlgorithm::SpecifiedPositionsDivide && positions.is_empty() {
            return Ok(Some(Err(
                "specified_positions_divide needs --positions".into()
            )));
        }
        let Some(info) = self.namespace(name.namespace()).await else {
            return Ok(Some(Err(format!(
                "namespace {} does not exist",
                name.namespace()
            ))));
        };
        if !info.bundles.contains_range(name.range()) {
            return Ok(Some(Err(format!(
                "{bundle} is not a bundle of {}",
                name.namespace()
            ))));
        }
        let Some(owner) = self.owners.get(bundle).map(|o| o.broker.clone()) else {
            return Ok(Some(Err(format!(
                "{bundle} is not owned by any broker; look one of its topics up first"
            ))));
        };
        let plan = SplitRequest {
            bundle: bundle.to_owned(),
            owner,
            algorithm,
            positions: positions.clone(),
            unload_children: unload,
            reason: format!("operator split with {}", algorithm.name()),
            origin: SplitOrigin::Request {
                path: path.to_owned(),
                request: Box::new(request.clone()),
                stat: stat.clone(),
            },
        };
        // Every algorithm but range_equally_divide looks at the bundle's topics (specified_positions_divide
        // too: Pulsar splits only a bundle with more than one topic), which only the owner knows.
        match algorithm {
            SplitAlgorithm::TopicCountEquallyDivide
            | SplitAlgorithm::FlowOrQpsEquallyDivide
            | SplitAlgorithm::SpecifiedPositionsDivide => {
                self.ask_split_points(plan);
            }
            SplitAlgorithm::RangeEquallyDivide => {
                let input = SplitInput::default();
                match split_bundle(name.range(), algorithm, &input) {
                    Ok(SplitOutcome::Split(points)) => self.apply_split(plan, points).await?,
                    Ok(SplitOutcome::NoSplit(why)) => {
                        return Ok(Some(Err(format!(
                            "{} gives no split point: {why}",
                            algorithm.name()
                        ))))
                    }
                    Err(e) => return Ok(Some(Err(e.to_string()))),
                }
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_share_the_parent_data() {
        let mut d = BundleData::default();
        d.short_term_data.msg_rate_in = 100.0;
        d.long_term_data.msg_throughput_out = 1000.0;
        d.topics = 5;
        let c = divide(&d, 2);
        assert_eq!(c.short_term_data.msg_rate_in, 50.0);
        assert_eq!(c.long_term_data.msg_throughput_out, 500.0);
        assert_eq!(c.long_term_data.num_samples, d.long_term_data.num_samples);
        assert_eq!(c.topics, 3);
    }
}
