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
use crate::runtime::ownership::list_bundles;
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
pub(super) async fn load_all(
    sh: &AgentShared,
    applied: &mut std::collections::HashMap<String, (i64, i64)>,
) -> Result<LoadedState, RuntimeError> {
    let store = sh.store.clone();
    let started = tokio::time::Instant::now();
    let mut state = LoadedState::default();
    let mut phases: Vec<(&str, u128)> = Vec::new();
    let mut mark = |name, t: &mut tokio::time::Instant| {
        phases.push((name, t.elapsed().as_millis()));
        *t = tokio::time::Instant::now();
    };
    let mut t = tokio::time::Instant::now();
    let bundles = list_bundles(&store, paths::BUNDLE_DATA).await?;
    let paths_: Vec<String> = bundles.iter().map(|b| paths::bundle_data(b)).collect();
    for (path, r) in read_many::<BundleData>(sh, paths_).await {
        let Some(bundle) = paths::below(paths::BUNDLE_DATA, &path).map(str::to_owned) else {
            continue;
        };
        match r {
            Ok(Some((data, _, _))) => state.bundle_data.push((bundle, Some(data))),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("stored bundle data skipped: {e}");
                state.bundle_data.push((bundle, None));
            }
        }
    }
    for root in [paths::RESOURCE_QUOTA_LEGACY, paths::RESOURCE_QUOTA] {
        let quotas = list_bundles(&store, root).await?;
        let paths_: Vec<String> = quotas.iter().map(|b| format!("{root}/{b}")).collect();
        for (path, r) in read_many::<ResourceQuota>(sh, paths_).await {
            match r {
                Ok(Some((q, _, _))) => {
                    if let Some(b) = paths::below(root, &path) {
                        state.quotas.push((b.to_owned(), q));
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("stored quota skipped: {e}"),
            }
        }
    }
    mark("bundle data and quotas", &mut t);
    let tas = store.get_children(paths::BROKER_TIME_AVERAGE).await?;
    let paths_: Vec<String> = tas.iter().map(|b| paths::time_average(b)).collect();
    for (path, r) in read_many::<TimeAverageBrokerData>(sh, paths_).await {
        if let Some(b) = paths::below(paths::BROKER_TIME_AVERAGE, &path) {
            let value = r.ok().flatten().map(|(v, _, _)| v);
            state.time_averages.push((b.to_owned(), value));
        }
    }
    mark("time averages", &mut t);
    let names: Vec<(String, crate::bundle::NamespaceName)> = list_namespaces(&store)
        .await?
        .into_iter()
        .filter_map(|ns| {
            let name = crate::bundle::NamespaceName::parse(&ns).ok()?;
            Some((ns, name))
        })
        .collect();
    let namespaces: Vec<_> = stream::iter(names)
        .map(|(ns, name)| {
            let store = store.clone();
            async move { (ns, read_bundles(&store, &name).await) }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    for (ns, read) in namespaces {
        match read {
            Ok(Some(info)) => state.namespaces.push(info),
            Ok(None) => {}
            Err(e) => tracing::warn!(namespace = ns, "namespace skipped: {e}"),
        }
    }
    state.namespaces.sort_by_key(|n| n.namespace.to_string());
    mark("namespaces", &mut t);
    let ids = store.get_children(paths::BROKERS).await?;
    let reports: Vec<_> = stream::iter(ids)
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
    for (id, path, read) in reports {
        match read {
            Ok(Some(found)) => {
                applied.insert(
                    id.clone(),
                    (found.stat.creation_revision, found.stat.version),
                );
                let report = read_registration(&found.value, found.stat.ephemeral)
                    .map_err(|why| format!("{path}: {why}"));
                if report.is_err() {
                    sh.metrics
                        .malformed_reports
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                state.reports.push((id, report));
            }
            Ok(None) => {}
            Err(Error::Closed) => return Err(RuntimeError::Store(Error::Closed)),
            Err(e) => tracing::warn!(leader = %sh.broker_id, "reading {path}: {e}"),
        }
    }
    mark("reports", &mut t);
    let records = list_bundles(&store, paths::ASSIGNMENTS).await?;
    let paths_: Vec<String> = records.iter().map(|b| paths::assignment(b)).collect();
    for (_, r) in read_many::<BundleAssignment>(sh, paths_).await {
        match r {
            Ok(Some((rec, stat, _))) => state.records.push((rec, stat.version)),
            Ok(None) => {}
            Err(e) => tracing::warn!("assignment record skipped: {e}"),
        }
    }
    mark("records", &mut t);
    let owned = list_bundles(&store, paths::OWNERSHIP).await?;
    let paths_: Vec<String> = owned.iter().map(|b| paths::ownership(b)).collect();
    for (path, r) in read_many::<NamespaceEphemeralData>(sh, paths_).await {
        let Some(bundle) = paths::below(paths::OWNERSHIP, &path).map(str::to_owned) else {
            continue;
        };
        match r {
            Ok(Some((data, _, _))) => state.owners.push((bundle, owner_seen(&data))),
            Ok(None) => {}
            Err(e) => tracing::warn!("ownership node skipped: {e}"),
        }
    }
    mark("ownership nodes", &mut t);
    state.cluster = cluster_policies(sh).await;
    mark("cluster policies", &mut t);
    tracing::info!(
        leader = %sh.broker_id,
        "leader state read in {} ms ({})",
        started.elapsed().as_millis(),
        phases
            .iter()
            .map(|(name, ms)| format!("{name} {ms} ms"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(state)
}
