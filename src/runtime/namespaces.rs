//! Namespaces as Pulsar stores them: `Policies` at `/admin/policies/<ns>` (with its `bundles`), `LocalPolicies`
//! at `/admin/local-policies/<ns>` (the current bundle list, changed by splits), and the tenant's `TenantInfo`
//! at `/admin/policies/<tenant>`.

use serde_json::json;

use super::RuntimeError;
use crate::bundle::{NamespaceBundles, NamespaceName};
use crate::model::json::to_json_vec;
use crate::model::{BundlesData, LocalPolicies};
use crate::paths;
use crate::store::{CreateOptions, DynStore, Error, MetadataStoreExt, Op, CREATE_ONLY};

pub use crate::core::leader::NamespaceBundlesInfo;

fn decode_bundles(path: &str, data: &BundlesData) -> Result<NamespaceBundles, RuntimeError> {
    NamespaceBundles::from_bundles_data(data).map_err(|e| RuntimeError::Malformed {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// The most bundles a namespace may be created with (the boundaries are held in memory by every broker).
pub const MAX_INITIAL_BUNDLES: u64 = 1_000_000;

/// Reads a namespace's bundles: local policies, else the `bundles` of its policies (as Pulsar's
/// `NamespaceBundleFactory` does before it copies them), else `None` (the namespace does not exist).
pub async fn read_bundles(
    store: &DynStore,
    namespace: &NamespaceName,
) -> Result<Option<NamespaceBundlesInfo>, RuntimeError> {
    let ns = namespace.to_string();
    let local_path = paths::local_policies(&ns);
    match store.get_json::<LocalPolicies>(&local_path).await {
        Ok(Some((local, stat))) if !local.bundles.boundaries.is_empty() => {
            return Ok(Some(NamespaceBundlesInfo {
                namespace: namespace.clone(),
                bundles: decode_bundles(&local_path, &local.bundles)?,
                local,
                local_version: Some(stat.version),
            }))
        }
        Ok(Some((local, stat))) => {
            // Local policies without bundles: take the global ones (below), keep the rest.
            return Ok(read_global(store, namespace).await?.map(|(bundles, data)| {
                NamespaceBundlesInfo {
                    namespace: namespace.clone(),
                    bundles,
                    local: LocalPolicies {
                        bundles: data,
                        ..local
                    },
                    local_version: Some(stat.version),
                }
            }));
        }
        Ok(None) => {}
        Err(Error::Content { path, reason }) => {
            return Err(RuntimeError::Malformed { path, reason })
        }
        Err(e) => return Err(e.into()),
    }
    Ok(read_global(store, namespace)
        .await?
        .map(|(bundles, data)| NamespaceBundlesInfo {
            namespace: namespace.clone(),
            bundles,
            local: LocalPolicies {
                bundles: data,
                ..Default::default()
            },
            local_version: None,
        }))
}

async fn read_global(
    store: &DynStore,
    namespace: &NamespaceName,
) -> Result<Option<(NamespaceBundles, BundlesData)>, RuntimeError> {
    let path = paths::policies(&namespace.to_string());
    let Some(found) = store.get(&path).await? else {
        return Ok(None);
    };
    let value: serde_json::Value =
        serde_json::from_slice(&found.value).map_err(|e| RuntimeError::Malformed {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    match value.get("bundles") {
        Some(b) if !b.is_null() => {
            let data: BundlesData =
                serde_json::from_value(b.clone()).map_err(|e| RuntimeError::Malformed {
                    path: format!("{path} (bundles)"),
                    reason: e.to_string(),
                })?;
            Ok(Some((decode_bundles(&path, &data)?, data)))
        }
        // Policies without bundles: one bundle over the whole range (Pulsar's default bundle).
        _ => {
            let single = NamespaceBundles::single();
            let data = single.to_bundles_data();
            Ok(Some((single, data)))
        }
    }
}

/// Creates a namespace with `count` equal bundles (see [`create_namespace_with`]).
pub async fn create_namespace(
    store: &DynStore,
    namespace: &NamespaceName,
    count: u64,
    cluster: Option<&str>,
) -> Result<NamespaceBundles, RuntimeError> {
    if count > MAX_INITIAL_BUNDLES {
        return Err(RuntimeError::Invalid(format!(
            "{count} bundles: at most {MAX_INITIAL_BUNDLES} bundles per namespace at creation"
        )));
    }
    let bundles = NamespaceBundles::initial(count)
        .map_err(|e| RuntimeError::Invalid(format!("{count} bundles: {e}")))?;
    create_namespace_with(store, namespace, bundles, cluster).await
}

/// Creates a namespace with `bundles`: `TenantInfo` for a tenant not seen before, `Policies` with `bundles`,
/// and `LocalPolicies` with the same bundles, in one batch. Errors when the namespace exists.
pub async fn create_namespace_with(
    store: &DynStore,
    namespace: &NamespaceName,
    bundles: NamespaceBundles,
    cluster: Option<&str>,
) -> Result<NamespaceBundles, RuntimeError> {
    if bundles.len() as u64 > MAX_INITIAL_BUNDLES {
        return Err(RuntimeError::Invalid(format!(
            "{} bundles: at most {MAX_INITIAL_BUNDLES} bundles per namespace at creation",
            bundles.len()
        )));
    }
    let ns = namespace.to_string();
    if store.exists(&paths::policies(&ns)).await? {
        return Err(RuntimeError::Invalid(format!(
            "namespace {ns} already exists ({} is present)",
            paths::policies(&ns)
        )));
    }
    let data = bundles.to_bundles_data();
    let mut ops = Vec::new();
    let tenant_path = paths::policies(namespace.tenant());
    let tenant_ok = match store.get(&tenant_path).await? {
        Some(found) => !found.value.is_empty(),
        None => false,
    };
    if !tenant_ok {
        let clusters: Vec<&str> = cluster.into_iter().collect();
        ops.push(Op::Put {
            path: tenant_path,
            value: to_json_vec(&json!({"adminRoles": [], "allowedClusters": clusters})),
            expected_version: None,
            options: CreateOptions::PERSISTENT,
        });
    }
    ops.push(Op::Put {
        path: paths::policies(&ns),
        value: to_json_vec(&json!({ "bundles": data })),
        expected_version: Some(CREATE_ONLY),
        options: CreateOptions::PERSISTENT,
    });
    ops.push(Op::Put {
        path: paths::local_policies(&ns),
        value: to_json_vec(&LocalPolicies {
            bundles: data,
            ..Default::default()
        }),
        expected_version: None,
        options: CreateOptions::PERSISTENT,
    });
    match store.batch(ops).await {
        Ok(_) => Ok(bundles),
        Err(Error::BadVersion { .. }) => Err(RuntimeError::Invalid(format!(
            "namespace {ns} already exists"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Every namespace with local policies or policies (`tenant/ns`, or `property/cluster/ns`), sorted. The
/// namespace nodes of a tenant are read together ([`MetadataStore::get_many`](crate::store::MetadataStore::get_many),
/// 100 a call): a new leader lists hundreds of namespaces.
pub async fn list_namespaces(store: &DynStore) -> Result<Vec<String>, RuntimeError> {
    let mut out = std::collections::BTreeSet::new();
    for root in [paths::LOCAL_POLICIES, paths::POLICIES] {
        for tenant in store.get_children(root).await? {
            let tenant_path = format!("{root}/{tenant}");
            let names = store.get_children(&tenant_path).await?;
            let ns_paths: Vec<String> = names
                .iter()
                .map(|ns| format!("{tenant_path}/{ns}"))
                .collect();
            let mut found = Vec::with_capacity(ns_paths.len());
            for chunk in ns_paths.chunks(100) {
                found.extend(store.get_many(chunk).await?);
            }
            for ((ns, ns_path), node) in names.iter().zip(&ns_paths).zip(found) {
                if node.is_some_and(|g| !g.value.is_empty()) {
                    if NamespaceName::parse(&format!("{tenant}/{ns}")).is_ok() {
                        out.insert(format!("{tenant}/{ns}"));
                    }
                    continue;
                }
                // V1: property/cluster/ns below a cluster node without data.
                for leaf in store.get_children(ns_path).await? {
                    let name = format!("{tenant}/{ns}/{leaf}");
                    if NamespaceName::parse(&name).is_ok() {
                        out.insert(name);
                    }
                }
            }
        }
    }
    Ok(out.into_iter().collect())
}
