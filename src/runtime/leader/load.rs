//! A new leader's full read of the store: [`load_all`] turns every node the leader needs into a
//! [`LoadedState`] for [`crate::core::leader::Event::Loaded`].

use futures::stream::{self, StreamExt};

use crate::core::leader::{ClusterPolicyData, LoadedState, OwnerSeen};
use crate::core::ClusterPolicies;
use crate::model::load_report::read_registration;
use crate::model::records::BundleAssignment;
use crate::model::{BundleData, NamespaceEphemeralData, ResourceQuota, TimeAverageBrokerData};
use crate::paths;
use crate::runtime::identity::owner_of;
use crate::runtime::namespaces::{list_namespaces, read_bundles};
use crate::runtime::shared::AgentShared;
use crate::runtime::RuntimeError;
use crate::store::{Error, GetResult, Stat};

/// Reads in flight at once while a new leader loads: the store clients pipeline them, so a load of 100,000
/// nodes costs a few hundred round trips, not 100,000.
const READS_IN_FLIGHT: usize = 256;
/// Paths per [`get_many`](crate::store::MetadataStore::get_many) call of [`read_nodes`]: one ZooKeeper
/// multi-read of 100 records or ownership nodes is about 60 KiB, well under the server's 1 MiB answer limit.
const READS_PER_CALL: usize = 100;
/// `get_many` calls of [`read_nodes`] in flight at once.
const CALLS_IN_FLIGHT: usize = 16;

/// Reads `paths` with [`read_nodes`]; each as (value, stat, bytes), `None` when absent.
pub(super) async fn read_many<T: serde::de::DeserializeOwned + Send>(
    sh: &AgentShared,
    paths: Vec<String>,
) -> Vec<(String, Result<Option<(T, Stat, Vec<u8>)>, Error>)> {
    let reads = read_nodes(sh, &paths).await;
    paths
        .into_iter()
        .zip(reads)
        .map(|(p, read)| {
            let r = match read {
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
        .collect()
}

/// Reads `paths` as they are, in [`get_many`](crate::store::MetadataStore::get_many) calls of
/// [`READS_PER_CALL`] paths, [`CALLS_IN_FLIGHT`] at a time; the results in the order of `paths`. A call that
/// fails is read again path by path, so one bad node costs the others nothing.
pub(super) async fn read_nodes(
    sh: &AgentShared,
    paths: &[String],
) -> Vec<Result<Option<GetResult>, Error>> {
    // Futures built up front, each owning its store handle and paths (a closure over borrowed ones makes the
    // leader task's future not provably `Send`).
    let calls: Vec<_> = paths
        .chunks(READS_PER_CALL)
        .map(|chunk| {
            let store = sh.store.clone();
            let chunk = chunk.to_vec();
            async move {
                match store.get_many(&chunk).await {
                    Ok(found) => found.into_iter().map(Ok).collect::<Vec<_>>(),
                    Err(_) => futures::future::join_all(chunk.iter().map(|p| store.get(p))).await,
                }
            }
        })
        .collect();
    stream::iter(calls)
        .buffered(CALLS_IN_FLIGHT)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Reads the cluster's isolation policies and failure domains (`None` without a cluster name or on a read
/// error, which is logged; the policies in force then stay).
pub(super) async fn cluster_policies(sh: &AgentShared) -> Option<ClusterPolicyData> {
    let cluster = sh.settings().cluster_name?;
    match crate::runtime::cluster_policies::read_cluster_policies(&sh.store, &cluster).await {
        Ok(data) => {
            for w in &data.warnings {
                tracing::warn!(leader = %sh.broker_id, "{w}");
            }
            let mut p = ClusterPolicies::default();
            data.apply_to(&mut p);
            Some(ClusterPolicyData {
                isolation: p.isolation,
                domains: p.domains,
            })
        }
        Err(e) => {
            tracing::warn!(leader = %sh.broker_id, cluster, "cluster policies not reloaded: {e}");
            None
        }
    }
}

/// Who an ownership node names.
pub(super) fn owner_seen(data: &NamespaceEphemeralData) -> OwnerSeen {
    OwnerSeen {
        broker: owner_of(data).unwrap_or_default(),
        disabled: data.disabled,
    }
}

/// Everything a new leader reads: stored bundle data and quotas (the seeds of bundles seen for the first time),
/// time averages, namespaces, reports, assignment records, ownership nodes, cluster policies. Also fills the
/// executor's `applied` map with each report's (incarnation, version).
///
/// The parts are read at once, each with its own reads in flight: one after the other they added up to 3.9 s
/// at 1,000 brokers × 100,000 bundles, most of what a failover takes beyond the session timeout. Their order
/// does not matter: the leader's watches are open before this runs, so whatever changes after a part was read
/// comes as a notification as well.
pub(super) async fn load_all(
    sh: &AgentShared,
    applied: &mut std::collections::HashMap<String, (i64, i64)>,
) -> Result<LoadedState, RuntimeError> {
    let started = tokio::time::Instant::now();
    let (bundle_data, time_averages, namespaces, reports, records, owners, cluster) = tokio::join!(
        timed(load_bundle_data(sh)),
        timed(load_time_averages(sh)),
        timed(load_namespaces(sh)),
        timed(load_reports(sh)),
        timed(load_records(sh)),
        timed(load_owners(sh)),
        timed(cluster_policies(sh)),
    );
    let phases = [
        ("bundle data and quotas", bundle_data.1),
        ("time averages", time_averages.1),
        ("namespaces", namespaces.1),
        ("reports", reports.1),
        ("records", records.1),
        ("ownership nodes", owners.1),
        ("cluster policies", cluster.1),
    ];
    let (bundle_data, quotas) = bundle_data.0?;
    let mut state = LoadedState {
        bundle_data,
        quotas,
        time_averages: time_averages.0?,
        namespaces: namespaces.0?,
        records: records.0?,
        owners: owners.0?,
        cluster: cluster.0,
        ..LoadedState::default()
    };
    for (id, incarnation, report) in reports.0? {
        applied.insert(id.clone(), incarnation);
        state.reports.push((id, report));
    }
    tracing::info!(
        leader = %sh.broker_id,
        "leader state read in {} ms, its parts at once ({})",
        started.elapsed().as_millis(),
        phases
            .iter()
            .map(|(name, ms)| format!("{name} {ms} ms"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(state)
}

/// Stored bundle data: bundle → its value (`None` when the node does not decode).
type BundleDataSeeds = Vec<(String, Option<BundleData>)>;
/// Stored resource quotas: bundle → quota.
type Quotas = Vec<(String, ResourceQuota)>;
/// A registration node as read: broker id, (incarnation, version), the report or why it is not one.
type LoadedReport = (
    String,
    (i64, i64),
    Result<crate::model::LocalBrokerData, String>,
);

/// `fut`'s output and how long it took, ms.
async fn timed<T>(fut: impl std::future::Future<Output = T>) -> (T, u128) {
    let t = tokio::time::Instant::now();
    let out = fut.await;
    (out, t.elapsed().as_millis())
}

/// Stored bundle data (a node that does not decode counts as absent, logged) and resource quotas.
async fn load_bundle_data(sh: &AgentShared) -> Result<(BundleDataSeeds, Quotas), RuntimeError> {
    let mut data = Vec::new();
    for (bundle, r) in read_bundles_below::<BundleData>(sh, paths::BUNDLE_DATA).await? {
        match r {
            Ok((d, _)) => data.push((bundle, Some(d))),
            Err(e) => {
                tracing::warn!("stored bundle data skipped: {e}");
                data.push((bundle, None));
            }
        }
    }
    let mut quotas = Vec::new();
    for root in [paths::RESOURCE_QUOTA_LEGACY, paths::RESOURCE_QUOTA] {
        for (bundle, r) in read_bundles_below::<ResourceQuota>(sh, root).await? {
            match r {
                Ok((q, _)) => quotas.push((bundle, q)),
                Err(e) => tracing::warn!("stored quota skipped: {e}"),
            }
        }
    }
    Ok((data, quotas))
}

/// Every bundle node below `root` ([`get_leaves`](crate::store::MetadataStore::get_leaves) with bundle
/// ranges as the leaves), sorted: (bundle, its value and stat or why it does not decode). A read that fails
/// fails the leader's load, which starts again, rather than have it take a bundle for one without a node.
async fn read_bundles_below<T: serde::de::DeserializeOwned>(
    sh: &AgentShared,
    root: &str,
) -> Result<Vec<(String, Result<(T, Stat), Error>)>, RuntimeError> {
    let found = sh.store.get_leaves(root, paths::is_range_segment).await?;
    Ok(found
        .into_iter()
        .filter_map(|(path, got)| {
            let bundle = paths::below(root, &path)?.to_owned();
            let decoded = serde_json::from_slice::<T>(&got.value)
                .map(|v| (v, got.stat))
                .map_err(|e| Error::Content {
                    path,
                    reason: e.to_string(),
                });
            Some((bundle, decoded))
        })
        .collect())
}

/// Stored time averages, per broker (`None` where the node does not decode).
async fn load_time_averages(
    sh: &AgentShared,
) -> Result<Vec<(String, Option<TimeAverageBrokerData>)>, RuntimeError> {
    let tas = sh.store.get_children(paths::BROKER_TIME_AVERAGE).await?;
    let paths_: Vec<String> = tas.iter().map(|b| paths::time_average(b)).collect();
    let mut out = Vec::new();
    for (path, r) in read_many::<TimeAverageBrokerData>(sh, paths_).await {
        if let Some(b) = paths::below(paths::BROKER_TIME_AVERAGE, &path) {
            out.push((b.to_owned(), r.ok().flatten().map(|(v, _, _)| v)));
        }
    }
    Ok(out)
}

/// Every namespace's bundles, sorted by name; a namespace that cannot be read is logged and skipped.
async fn load_namespaces(
    sh: &AgentShared,
) -> Result<Vec<crate::core::leader::NamespaceBundlesInfo>, RuntimeError> {
    let store = sh.store.clone();
    let names: Vec<(String, crate::bundle::NamespaceName)> = list_namespaces(&store)
        .await?
        .into_iter()
        .filter_map(|ns| {
            let name = crate::bundle::NamespaceName::parse(&ns).ok()?;
            Some((ns, name))
        })
        .collect();
    let read: Vec<_> = stream::iter(names)
        .map(|(ns, name)| {
            let store = store.clone();
            async move { (ns, read_bundles(&store, &name).await) }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let mut out = Vec::new();
    for (ns, read) in read {
        match read {
            Ok(Some(info)) => out.push(info),
            Ok(None) => {}
            Err(e) => tracing::warn!(namespace = ns, "namespace skipped: {e}"),
        }
    }
    out.sort_by_key(|n| n.namespace.to_string());
    Ok(out)
}

/// Every registration node: (broker id, (incarnation, version), report or why it does not decode). Read one
/// `get` per broker: a report of 100 bundles is about 20 KiB, so 100 of them would not fit a `multiRead`.
async fn load_reports(sh: &AgentShared) -> Result<Vec<LoadedReport>, RuntimeError> {
    let store = sh.store.clone();
    let ids = store.get_children(paths::BROKERS).await?;
    let read: Vec<_> = stream::iter(ids)
        .map(|id| {
            let store = store.clone();
            async move {
                let path = paths::broker(&id);
                let read = store.get(&path).await;
                (id, path, read)
            }
        })
        .buffered(READS_IN_FLIGHT)
        .collect()
        .await;
    let mut out = Vec::new();
    for (id, path, read) in read {
        match read {
            Ok(Some(found)) => {
                let report = read_registration(&found.value, found.stat.ephemeral)
                    .map_err(|why| format!("{path}: {why}"));
                if report.is_err() {
                    sh.metrics
                        .malformed_reports
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                out.push((
                    id,
                    (found.stat.creation_revision, found.stat.version),
                    report,
                ));
            }
            Ok(None) => {}
            Err(Error::Closed) => return Err(RuntimeError::Store(Error::Closed)),
            Err(e) => tracing::warn!(leader = %sh.broker_id, "reading {path}: {e}"),
        }
    }
    Ok(out)
}

/// Every assignment record with its version; one that does not decode is logged and skipped.
async fn load_records(sh: &AgentShared) -> Result<Vec<(BundleAssignment, i64)>, RuntimeError> {
    let mut out = Vec::new();
    for (_, r) in read_bundles_below::<BundleAssignment>(sh, paths::ASSIGNMENTS).await? {
        match r {
            Ok((rec, stat)) => out.push((rec, stat.version)),
            Err(e) => tracing::warn!("assignment record skipped: {e}"),
        }
    }
    Ok(out)
}

/// Every ownership node: (bundle, who it names); one that does not decode is logged and skipped.
async fn load_owners(sh: &AgentShared) -> Result<Vec<(String, OwnerSeen)>, RuntimeError> {
    let mut out = Vec::new();
    for (bundle, r) in read_bundles_below::<NamespaceEphemeralData>(sh, paths::OWNERSHIP).await? {
        match r {
            Ok((data, _)) => out.push((bundle, owner_seen(&data))),
            Err(e) => tracing::warn!("ownership node skipped: {e}"),
        }
    }
    Ok(out)
}
