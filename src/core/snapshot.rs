//! Load-data snapshots: loadmgr's JSON file of what the leader knows at one instant (schema
//! `metadata-schemas/LoadDataSnapshot.schema.json`), and their conversion to [`LoadData`] and
//! [`ClusterPolicies`] — the same conversion the runtime uses for data read from a store.
//!
//! Validation names the bad key as a JSON pointer: the snapshot's own schema first (unknown top-level keys are
//! errors), then each broker report, bundle data and time average against Pulsar's node schemas, then bundle
//! boundaries and isolation-policy regexes.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use super::policies::{ClusterPolicies, IsolationPolicy, NamespacePolicy};
use super::split::SplitTopics;
use super::{CoreError, LoadData};
use crate::bundle::{parse_hash, NamespaceBundles};
use crate::model::{BundleData, LocalBrokerData, NodeType, TimeAverageBrokerData};

/// The snapshot schema text.
pub const SCHEMA: &str = include_str!("../../metadata-schemas/LoadDataSnapshot.schema.json");

/// `auto_failover_policy.parameters`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct FailoverParameters {
    /// Primaries needed before secondaries are added.
    pub min_limit: Option<String>,
    /// Usage threshold (not used by placement).
    pub usage_threshold: Option<String>,
}

/// `auto_failover_policy`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct FailoverPolicy {
    /// `min_available`.
    pub policy_type: Option<String>,
    /// Its parameters.
    pub parameters: FailoverParameters,
}

/// Pulsar's `NamespaceIsolationData`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct IsolationData {
    /// Namespace regexes.
    pub namespaces: Vec<String>,
    /// Primary broker host regexes.
    pub primary: Vec<String>,
    /// Secondary broker host regexes.
    pub secondary: Vec<String>,
    /// Fail-over policy.
    pub auto_failover_policy: Option<FailoverPolicy>,
}

impl IsolationData {
    /// The policy `name` as placement uses it (`min_limit` 1 when not given). `Err` names the JSON pointer
    /// below the policy that is wrong (empty for the policy itself) and why.
    pub fn compile(&self, name: &str) -> Result<IsolationPolicy, (String, String)> {
        let min_limit = self
            .auto_failover_policy
            .as_ref()
            .and_then(|p| p.parameters.min_limit.as_deref())
            .map(|m| m.trim().parse::<usize>())
            .transpose()
            .map_err(|e| {
                (
                    "/auto_failover_policy/parameters/min_limit".to_owned(),
                    e.to_string(),
                )
            })?
            .unwrap_or(1);
        IsolationPolicy::new(
            name,
            &self.namespaces,
            &self.primary,
            &self.secondary,
            min_limit,
        )
        .map_err(|e| (String::new(), e.to_string()))
    }
}

/// A namespace's entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NamespaceEntry {
    /// `0x%08x` boundaries.
    pub boundaries: Option<Vec<String>>,
    /// Anti-affinity group.
    pub anti_affinity_group: Option<String>,
    /// Ranges holding non-persistent topics.
    pub non_persistent_bundles: Vec<String>,
}

/// A parsed snapshot.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Epoch ms.
    pub now: i64,
    /// Broker id → report.
    pub brokers: BTreeMap<String, LocalBrokerData>,
    /// Bundle → data.
    #[serde(default)]
    pub bundle_data: BTreeMap<String, BundleData>,
    /// Broker → time average.
    #[serde(default)]
    pub time_averages: BTreeMap<String, TimeAverageBrokerData>,
    /// Bundle → last unload, epoch ms.
    #[serde(default)]
    pub recently_unloaded: BTreeMap<String, i64>,
    /// Bundle → broker.
    #[serde(default)]
    pub preallocated: BTreeMap<String, String>,
    /// Namespace → entry.
    #[serde(default)]
    pub namespaces: BTreeMap<String, NamespaceEntry>,
    /// Policy name → isolation data.
    #[serde(default)]
    pub isolation_policies: BTreeMap<String, IsolationData>,
    /// Domain → brokers.
    #[serde(default)]
    pub failure_domains: BTreeMap<String, Vec<String>>,
    /// Bundle → topics, for topic-based split algorithms.
    #[serde(default)]
    pub bundle_topics: SplitTopics,
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn invalid(key: String, message: impl Into<String>) -> CoreError {
    CoreError::InvalidSnapshot {
        key,
        message: message.into(),
    }
}

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let schema: serde_json::Value =
            serde_json::from_str(SCHEMA).expect("bundled schema is JSON");
        jsonschema::draft202012::new(&schema).expect("bundled schema compiles")
    })
}

fn check_node(node: NodeType, prefix: &str, value: &serde_json::Value) -> Result<(), CoreError> {
    node.validate(value).map_err(|e| match e {
        crate::model::ModelError::Schema { violations, .. } => {
            let first = violations.first().cloned().unwrap_or_default();
            let (ptr, msg) = first.split_once(": ").unwrap_or(("/", first.as_str()));
            let key = if ptr == "/" {
                prefix.to_owned()
            } else {
                format!("{prefix}{ptr}")
            };
            invalid(key, format!("{msg} (not a valid {})", node.name()))
        }
        other => invalid(prefix.to_owned(), other.to_string()),
    })
}

impl Snapshot {
    /// Parses and validates snapshot text.
    pub fn from_json(text: &str) -> Result<Self, CoreError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| CoreError::SnapshotSyntax(e.to_string()))?;
        Self::from_value(value)
    }

    /// Validates and reads a parsed snapshot.
    pub fn from_value(value: serde_json::Value) -> Result<Self, CoreError> {
        if let Some(err) = validator().iter_errors(&value).next() {
            let ptr = err.instance_path.to_string();
            let message = match &err.kind {
                jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                    return Err(invalid(
                        format!("{ptr}/{}", unexpected.join(",")),
                        "unknown key",
                    ));
                }
                _ => err.to_string(),
            };
            return Err(invalid(
                if ptr.is_empty() { "/".into() } else { ptr },
                message,
            ));
        }
        for (section, node) in [
            ("brokers", NodeType::LocalBrokerData),
            ("bundleData", NodeType::BundleData),
            ("timeAverages", NodeType::TimeAverageBrokerData),
        ] {
            if let Some(map) = value.get(section).and_then(|v| v.as_object()) {
                for (k, v) in map {
                    check_node(node, &format!("/{section}/{}", escape(k)), v)?;
                }
            }
        }
        let snapshot: Snapshot =
            serde_json::from_value(value).map_err(|e| invalid("/".into(), e.to_string()))?;
        snapshot.policies()?;
        Ok(snapshot)
    }

    /// The load data (reports, windows, time averages, recently unloaded, preallocations).
    pub fn to_load_data(&self) -> LoadData {
        let mut load = LoadData::from_parts(
            self.brokers.clone(),
            self.bundle_data.clone(),
            self.time_averages.clone(),
            self.recently_unloaded.clone(),
        );
        for (bundle, broker) in &self.preallocated {
            load.preallocate(bundle, broker);
        }
        load
    }

    /// The policies (boundaries, anti-affinity groups, isolation, failure domains).
    pub fn policies(&self) -> Result<ClusterPolicies, CoreError> {
        let mut policies = ClusterPolicies::default();
        for (ns, entry) in &self.namespaces {
            let bundles = match &entry.boundaries {
                Some(b) => {
                    let key = format!("/namespaces/{}/boundaries", escape(ns));
                    let parsed = b
                        .iter()
                        .map(|x| parse_hash(x))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| invalid(key.clone(), e.to_string()))?;
                    Some(
                        NamespaceBundles::from_boundaries(parsed)
                            .map_err(|e| invalid(key, e.to_string()))?,
                    )
                }
                None => None,
            };
            for range in &entry.non_persistent_bundles {
                policies
                    .non_persistent_bundles
                    .insert(format!("{ns}/{range}"));
            }
            policies.namespaces.insert(
                ns.clone(),
                NamespacePolicy {
                    bundles,
                    anti_affinity_group: entry.anti_affinity_group.clone(),
                },
            );
        }
        for (name, data) in &self.isolation_policies {
            policies
                .isolation
                .push(data.compile(name).map_err(|(key, message)| {
                    invalid(format!("/isolationPolicies/{}{key}", escape(name)), message)
                })?);
        }
        for (domain, brokers) in &self.failure_domains {
            for b in brokers {
                policies.domains.insert(b.clone(), domain.clone());
            }
        }
        Ok(policies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_compiles_and_the_example_validates() {
        let schema: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        let v = jsonschema::draft202012::new(&schema).unwrap();
        let example: serde_json::Value =
            serde_json::from_str(include_str!("../../examples/snapshot.json")).unwrap();
        assert!(
            v.is_valid(&example),
            "{:?}",
            v.iter_errors(&example)
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
        );
        let snap = Snapshot::from_value(example).unwrap();
        assert!(snap.brokers.len() >= 4);
        let load = snap.to_load_data();
        assert_eq!(load.broker_count(), snap.brokers.len());
    }

    #[test]
    fn invalid_snapshots_name_the_bad_key() {
        let err = |t: &str| Snapshot::from_json(t).unwrap_err().to_string();
        assert!(err("{").contains("not valid JSON"));
        assert!(
            err(r#"{"brokers":{}}"#).contains("\"now\""),
            "{}",
            err(r#"{"brokers":{}}"#)
        );
        let e = err(r#"{"now":1,"brokers":{},"brokerz":{}}"#);
        assert!(e.contains("/brokerz") && e.contains("unknown key"), "{e}");
        let e = err(r#"{"now":1,"brokers":{"b1:8080":{"cpu":{"usage":"high"}}}}"#);
        assert!(e.contains("/brokers/b1:8080/cpu/usage"), "{e}");
        let e = err(r#"{"now":1,"brokers":{},"bundleData":{"t/n/0x0_0x1":{"topics":"x"}}}"#);
        assert!(e.contains("/bundleData/t~1n~10x0_0x1/topics"), "{e}");
        let e = err(r#"{"now":1,"brokers":{},"recentlyUnloaded":{"b":"yesterday"}}"#);
        assert!(e.contains("/recentlyUnloaded/b"), "{e}");
        let e = err(
            r#"{"now":1,"brokers":{},"namespaces":{"t/n":{"boundaries":["0x00000000","0x10000000"]}}}"#,
        );
        assert!(
            e.contains("/namespaces/t~1n/boundaries") && e.contains("0xffffffff"),
            "{e}"
        );
        let e = err(
            r#"{"now":1,"brokers":{},"isolationPolicies":{"p":{"namespaces":["("],"primary":[]}}}"#,
        );
        assert!(e.contains("/isolationPolicies/p"), "{e}");
    }
}
