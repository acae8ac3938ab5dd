//! The cluster-wide policies placement obeys, read where Pulsar keeps them in the configuration store:
//!
//! * namespace isolation policies: one node `/admin/clusters/<cluster>/namespaceIsolationPolicies` holding a
//!   JSON map policy name → `NamespaceIsolationData` (`namespaces`, `primary`, `secondary` regexes and
//!   `auto_failover_policy` `{"policy_type": "min_available", "parameters": {"min_limit": "1", ...}}`), written
//!   by `pulsar-admin ns-isolation-policy set` (Pulsar's `NamespaceResources.IsolationPolicyResources`);
//! * failure domains: `/admin/clusters/<cluster>/failureDomain/<domain>` with `{"brokers": ["host:port", ...]}`
//!   (`ClusterResources.FailureDomainResources`); placement uses them when `failureDomainsEnabled`.
//!
//! Both need `clusterName` in the configuration. A policy that does not parse or whose regex does not compile
//! is skipped with a warning naming it; the others apply.

use std::collections::BTreeMap;

use serde_json::Value;

use super::RuntimeError;
use crate::core::policies::{ClusterPolicies, IsolationPolicy};
use crate::core::snapshot::IsolationData;
use crate::model::nodes::parse_failure_domain;
use crate::paths;
use crate::store::DynStore;

/// What the store holds for one cluster, as the load-data snapshot spells it.
#[derive(Debug, Clone, Default)]
pub struct ClusterPolicyData {
    /// Policy name → isolation data, only the ones that parse and compile.
    pub isolation: BTreeMap<String, IsolationData>,
    /// The isolation node as stored, policies that did not parse left out (for the snapshot).
    pub isolation_json: BTreeMap<String, Value>,
    /// Domain name → broker ids.
    pub failure_domains: BTreeMap<String, Vec<String>>,
    /// What was skipped, each naming the node (and policy) and why.
    pub warnings: Vec<String>,
}

impl ClusterPolicyData {
    /// The compiled isolation policies, in name order.
    pub fn isolation_policies(&self) -> Vec<IsolationPolicy> {
        self.isolation
            .iter()
            .filter_map(|(name, data)| data.compile(name).ok())
            .collect()
    }

    /// Puts the isolation policies and failure domains into `policies` (namespaces are left alone).
    pub fn apply_to(&self, policies: &mut ClusterPolicies) {
        policies.isolation = self.isolation_policies();
        policies.domains = self
            .failure_domains
            .iter()
            .flat_map(|(domain, brokers)| brokers.iter().map(move |b| (b.clone(), domain.clone())))
            .collect();
    }
}

/// Reads the isolation policies and failure domains of `cluster`.
pub async fn read_cluster_policies(
    store: &DynStore,
    cluster: &str,
) -> Result<ClusterPolicyData, RuntimeError> {
    let mut out = ClusterPolicyData::default();
    let path = paths::isolation_policies(cluster);
    if let Some(g) = store.get(&path).await? {
        match serde_json::from_slice::<BTreeMap<String, Value>>(&g.value) {
            Ok(map) => {
                for (name, value) in map {
                    let parsed = serde_json::from_value::<IsolationData>(value.clone())
                        .map_err(|e| e.to_string())
                        .and_then(|d| {
                            d.compile(&name)
                                .map(|_| d)
                                .map_err(|(key, why)| format!("{key}: {why}"))
                        });
                    match parsed {
                        Ok(data) => {
                            out.isolation.insert(name.clone(), data);
                            out.isolation_json.insert(name, value);
                        }
                        Err(why) => out
                            .warnings
                            .push(format!("{path}: isolation policy {name:?} skipped: {why}")),
                    }
                }
            }
            Err(e) => out.warnings.push(format!(
                "{path}: not a JSON map of isolation policies ({e}); no isolation applies"
            )),
        }
    }
    let root = paths::failure_domains(cluster);
    for domain in store.get_children(&root).await? {
        let node = format!("{root}/{domain}");
        let Some(g) = store.get(&node).await? else {
            continue;
        };
        match parse_failure_domain(&g.value) {
            Ok(brokers) => {
                out.failure_domains
                    .insert(domain, brokers.into_iter().collect());
            }
            Err(e) => out
                .warnings
                .push(format!("{node}: not a failure domain ({e}); skipped")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::CreateOptions;
    use std::sync::Arc;

    #[tokio::test]
    async fn reads_pulsar_shapes_and_skips_what_is_broken() {
        let store: DynStore = Arc::new(MemoryStore::new());
        let nodes: [(&str, &[u8]); 3] = [
            // What `pulsar-admin ns-isolation-policy set` writes (Jackson, snake_case keys).
            (
                "/admin/clusters/c1/namespaceIsolationPolicies",
                br#"{"p1":{"namespaces":["tenant/ns-.*"],"primary":["broker-[12]"],"secondary":["broker-3"],
                     "auto_failover_policy":{"policy_type":"min_available","parameters":{"min_limit":"2","usage_threshold":"80"}}},
                     "bad-regex":{"namespaces":["("],"primary":[]},
                     "bad-limit":{"namespaces":["x/y"],"auto_failover_policy":{"parameters":{"min_limit":"many"}}}}"#,
            ),
            (
                "/admin/clusters/c1/failureDomain/rack-a",
                br#"{"brokers":["broker-1:8080","broker-2:8080"]}"#,
            ),
            (
                "/admin/clusters/c1/failureDomain/rack-b",
                br#"{"brokers":"broker-3:8080"}"#,
            ),
        ];
        for (path, value) in nodes {
            store
                .put(path, value, None, CreateOptions::PERSISTENT)
                .await
                .unwrap();
        }
        let data = read_cluster_policies(&store, "c1").await.unwrap();
        assert_eq!(data.isolation.keys().collect::<Vec<_>>(), ["p1"]);
        assert_eq!(data.isolation_policies()[0].min_limit, 2);
        assert_eq!(data.warnings.len(), 3, "{:?}", data.warnings);
        assert!(data.warnings.iter().any(|w| w.contains("\"bad-regex\"")));
        assert!(data
            .warnings
            .iter()
            .any(|w| w.contains("\"bad-limit\"") && w.contains("min_limit")));
        assert!(data.warnings.iter().any(|w| w.contains("rack-b")));
        let mut policies = ClusterPolicies::default();
        data.apply_to(&mut policies);
        assert_eq!(policies.domain_of("broker-2:8080"), "rack-a");
        assert_eq!(policies.domain_of("broker-3:8080"), "default");
        assert!(!policies.is_shared_broker("broker-1:8080"));
        // Another cluster, or none stored: nothing applies and nothing is wrong.
        let none = read_cluster_policies(&store, "c2").await.unwrap();
        assert!(none.isolation.is_empty() && none.failure_domains.is_empty());
        assert!(none.warnings.is_empty());
    }
}
