//! The live load data as a load-data snapshot (`metadata-schemas/LoadDataSnapshot.schema.json`): what
//! `loadmgr snapshot --store` writes and `loadmgr explain --store` decides on.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::namespaces::{list_namespaces, read_bundles};
use super::ownership::list_bundles;
use super::RuntimeError;
use crate::bundle::{format_hash, NamespaceName};
use crate::config::Settings;
use crate::model::load_report::parse_report;
use crate::model::records::{AssignmentState, BundleAssignment};
use crate::paths;
use crate::store::DynStore;

/// A snapshot read from a store, and what was skipped on the way.
#[derive(Debug, Clone)]
pub struct LiveSnapshot {
    /// The snapshot JSON.
    pub value: Value,
    /// Nodes that could not be read, each naming the node and why.
    pub warnings: Vec<String>,
}

async fn read_value(store: &DynStore, path: &str, warnings: &mut Vec<String>) -> Option<Value> {
    match store.get(path).await {
        Ok(Some(g)) => match serde_json::from_slice::<Value>(&g.value) {
            Ok(v) if v.is_object() => Some(v),
            Ok(_) => {
                warnings.push(format!("{path}: not a JSON object; skipped"));
                None
            }
            Err(e) => {
                warnings.push(format!("{path}: malformed JSON ({e}); skipped"));
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            warnings.push(format!("{path}: {e}; skipped"));
            None
        }
    }
}

/// Reads brokers' reports, stored bundle data and time averages, recently unloaded bundles (from the
/// assignment records within the grace period), bundles being assigned (as preallocations), namespaces'
/// bundles and, when `clusterName` is set, the cluster's isolation policies and failure domains at `now_ms`.
pub async fn read_live(
    store: &DynStore,
    settings: &Settings,
    now_ms: i64,
) -> Result<LiveSnapshot, RuntimeError> {
    let mut warnings = Vec::new();
    let mut brokers = Map::new();
    for id in store.get_children(paths::BROKERS).await? {
        let path = paths::broker(&id);
        let Some(g) = store.get(&path).await? else {
            continue;
        };
        match parse_report(&g.value) {
            Ok(_) => {
                brokers.insert(id, serde_json::from_slice(&g.value).expect("parsed above"));
            }
            Err(why) => warnings.push(format!("{path}: {why}; skipped")),
        }
    }
    let mut bundle_data = Map::new();
    for b in list_bundles(store, paths::BUNDLE_DATA).await? {
        if let Some(v) = read_value(store, &paths::bundle_data(&b), &mut warnings).await {
            bundle_data.insert(b, v);
        }
    }
    let mut time_averages = Map::new();
    for id in brokers.keys() {
        if let Some(v) = read_value(store, &paths::time_average(id), &mut warnings).await {
            time_averages.insert(id.clone(), v);
        }
    }
    let grace_ms = settings
        .load_balancer_shedding_grace_period_minutes
        .saturating_mul(60_000);
    let mut recently_unloaded = BTreeMap::new();
    let mut preallocated = BTreeMap::new();
    for b in list_bundles(store, paths::ASSIGNMENTS).await? {
        let path = paths::assignment(&b);
        let Some(v) = read_value(store, &path, &mut warnings).await else {
            continue;
        };
        match serde_json::from_value::<BundleAssignment>(v) {
            Ok(r) => {
                if r.cause.starts_grace_period() && now_ms - r.updated_ms <= grace_ms {
                    recently_unloaded.insert(r.bundle.clone(), r.updated_ms);
                }
                if r.state == AssignmentState::Assigning {
                    preallocated.insert(r.bundle.clone(), r.destination.clone());
                }
            }
            Err(e) => warnings.push(format!("{path}: not an assignment record ({e}); skipped")),
        }
    }
    let mut namespaces = Map::new();
    for ns in list_namespaces(store).await? {
        let Ok(name) = NamespaceName::parse(&ns) else {
            continue;
        };
        match read_bundles(store, &name).await {
            Ok(Some(info)) => {
                let mut entry = Map::new();
                entry.insert(
                    "boundaries".into(),
                    json!(info
                        .bundles
                        .boundaries()
                        .iter()
                        .map(|b| format_hash(*b))
                        .collect::<Vec<_>>()),
                );
                if let Some(g) = &info.local.namespace_anti_affinity_group {
                    entry.insert("antiAffinityGroup".into(), json!(g));
                }
                namespaces.insert(ns, Value::Object(entry));
            }
            Ok(None) => {}
            Err(e) => warnings.push(format!("namespace {ns}: {e}; skipped")),
        }
    }
    let mut isolation = Map::new();
    let mut domains = Map::new();
    if let Some(cluster) = &settings.cluster_name {
        let data = super::cluster_policies::read_cluster_policies(store, cluster).await?;
        isolation.extend(data.isolation_json);
        domains.extend(
            data.failure_domains
                .into_iter()
                .map(|(d, brokers)| (d, json!(brokers))),
        );
        warnings.extend(data.warnings);
    }
    let value = json!({
        "now": now_ms,
        "brokers": brokers,
        "bundleData": bundle_data,
        "timeAverages": time_averages,
        "recentlyUnloaded": recently_unloaded,
        "preallocated": preallocated,
        "namespaces": namespaces,
        "isolationPolicies": isolation,
        "failureDomains": domains,
    });
    Ok(LiveSnapshot { value, warnings })
}
