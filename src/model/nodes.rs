//! Leadership, ownership, namespace-policy and failure-domain payloads: `LeaderBroker`,
//! `NamespaceEphemeralData`, `BundlesData`, `LocalPolicies` and a cluster's failure domains
//! ([`parse_failure_domain`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::broker::AdvertisedListener;

/// The payload of `/loadbalance/leader` (`LeaderBroker`).
///
/// Pulsar ≤ 3.1 wrote only `serviceUrl` (the leader's web address); 3.2+ writes `brokerId` first. Both forms
/// are read; [`LeaderBroker::broker_id`] recovers the id from the URL for the old form.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LeaderBroker {
    /// `host:port` of the leader (3.2+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_id: Option<String>,
    /// `http://host:port` (or `https://`) of the leader.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_url: Option<String>,
}

impl LeaderBroker {
    /// The current form: id and web URL.
    pub fn new(broker_id: impl Into<String>, service_url: impl Into<String>) -> Self {
        Self {
            broker_id: Some(broker_id.into()),
            service_url: Some(service_url.into()),
        }
    }

    /// The leader's broker id: `brokerId` when present, else the text after `://` in `serviceUrl`, as Pulsar
    /// reads old payloads.
    pub fn broker_id(&self) -> Option<&str> {
        if let Some(id) = self.broker_id.as_deref() {
            return Some(id);
        }
        let url = self.service_url.as_deref()?;
        Some(
            url.split_once("://")
                .map_or(url, |(_, rest)| rest)
                .trim_end_matches('/'),
        )
    }
}

/// The payload of an ownership node `/namespace/<tenant>/<ns>/<range>` (`NamespaceEphemeralData`), held as an
/// ephemeral node by the broker that owns the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NamespaceEphemeralData {
    /// `pulsar://host:port` of the owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native_url: Option<String>,
    /// `pulsar+ssl://host:port` of the owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native_url_tls: Option<String>,
    /// `http://host:port` of the owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_url: Option<String>,
    /// `https://host:port` of the owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_url_tls: Option<String>,
    /// Set while the bundle is being unloaded: lookups must not be answered with this owner.
    pub disabled: bool,
    /// Listener name → URLs; always written (`{}` when empty), as Java's getter never returns null.
    pub advertised_listeners: BTreeMap<String, AdvertisedListener>,
}

/// A namespace's bundle boundaries (`BundlesData`): `numBundles + 1` sorted `0x%08x` strings from
/// `0x00000000` to `0xffffffff`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BundlesData {
    /// Sorted boundaries, `0x%08x` each.
    pub boundaries: Vec<String>,
    /// Number of bundles (`boundaries.len() - 1`); 0 when the node had none, which readers take as unknown.
    /// A 0 is not written: `numBundles` is optional in the schema but must be at least 1 when present, so
    /// writing 0 back turned a valid node into an invalid one. loadmgr's own `BundlesData` always has a count.
    #[serde(skip_serializing_if = "is_zero")]
    pub num_bundles: i32,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

impl BundlesData {
    /// Whether this is the empty value read when a node has no `bundles` (no boundaries, no count).
    pub fn is_unset(&self) -> bool {
        self.boundaries.is_empty() && self.num_bundles == 0
    }
}

/// The local (per-cluster) policies of a namespace at `/admin/local-policies/<tenant>/<ns>` (`LocalPolicies`).
/// Keys loadmgr does not know are kept and written back unchanged, so a split never drops another tool's
/// settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LocalPolicies {
    /// The namespace's current bundles. A node without them (the runtime then takes the namespace's global
    /// bundles) reads as the empty `BundlesData` and is written without them: written as
    /// `{"boundaries":[],"numBundles":0}`, it would break the schema (`json check` normalised such a node to
    /// JSON it then rejected). Java's constructor never leaves them empty, and loadmgr writes local policies
    /// only with bundles.
    #[serde(skip_serializing_if = "BundlesData::is_unset")]
    pub bundles: BundlesData,
    /// BookKeeper affinity group (opaque to loadmgr).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bookie_affinity_group: Option<serde_json::Value>,
    /// Anti-affinity group of the namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_anti_affinity_group: Option<String>,
    /// Whether the namespace was migrated to another cluster (newer versions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrated: Option<bool>,
    /// Keys of newer or other versions, preserved as read.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// Reads a failure-domain node: its brokers.
pub fn parse_failure_domain(bytes: &[u8]) -> Result<BTreeSet<String>, serde_json::Error> {
    serde_json::from_slice::<FailureDomain>(bytes).map(|d| d.brokers.unwrap_or_default())
}

/// Pulsar's `FailureDomainImpl`: the brokers of one failure domain. Other keys are ignored; a missing or
/// `null` list is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
struct FailureDomain {
    #[serde(default)]
    brokers: Option<BTreeSet<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::json::to_json_string;

    #[test]
    fn leader_broker_both_forms() {
        let new: LeaderBroker =
            serde_json::from_str(r#"{"brokerId":"b1:8080","serviceUrl":"http://b1:8080"}"#)
                .unwrap();
        assert_eq!(new.broker_id(), Some("b1:8080"));
        let old: LeaderBroker =
            serde_json::from_str(r#"{"serviceUrl":"http://b2.example:8080"}"#).unwrap();
        assert_eq!(old.broker_id(), Some("b2.example:8080"));
        assert_eq!(
            to_json_string(&LeaderBroker::new("b1:8080", "http://b1:8080")),
            r#"{"brokerId":"b1:8080","serviceUrl":"http://b1:8080"}"#
        );
        assert_eq!(LeaderBroker::default().broker_id(), None);
    }

    #[test]
    fn ownership_payload_always_writes_listeners() {
        let data = NamespaceEphemeralData {
            native_url: Some("pulsar://b1:6650".into()),
            http_url: Some("http://b1:8080".into()),
            ..Default::default()
        };
        assert_eq!(
            to_json_string(&data),
            r#"{"nativeUrl":"pulsar://b1:6650","httpUrl":"http://b1:8080","disabled":false,"advertisedListeners":{}}"#
        );
    }

    #[test]
    fn local_policies_keep_unknown_keys() {
        let text = r#"{"bundles":{"boundaries":["0x00000000","0xffffffff"],"numBundles":1},"namespaceAntiAffinityGroup":"g","futureKey":{"x":1}}"#;
        let p: LocalPolicies = serde_json::from_str(text).unwrap();
        assert_eq!(p.bundles.num_bundles, 1);
        assert_eq!(p.other["futureKey"]["x"], 1);
        assert_eq!(to_json_string(&p), text);
    }

    /// Found by fuzzing (fuzz/fuzz_targets/node_check.rs): a node without bundles normalised to JSON that broke
    /// its own schema.
    #[test]
    fn local_policies_without_bundles_are_written_without_them() {
        let p: LocalPolicies =
            serde_json::from_str(r#"{"namespaceAntiAffinityGroup":"g"}"#).unwrap();
        assert!(p.bundles.is_unset());
        let text = to_json_string(&p);
        assert_eq!(text, r#"{"namespaceAntiAffinityGroup":"g"}"#);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        crate::model::NodeType::LocalPolicies
            .validate(&value)
            .unwrap();
        assert_eq!(serde_json::from_str::<LocalPolicies>(&text).unwrap(), p);
    }

    /// Found by fuzzing (fuzz/fuzz_targets/node_check.rs): a count left out was written back as an invalid 0.
    #[test]
    fn bundles_without_a_count_are_written_without_one() {
        let text = r#"{"boundaries":["0x00000000","0x7fffffff","0xffffffff"]}"#;
        let b: BundlesData = serde_json::from_str(text).unwrap();
        assert_eq!(b.num_bundles, 0);
        assert_eq!(to_json_string(&b), text);
        crate::model::NodeType::BundlesData
            .validate(&serde_json::from_str(text).unwrap())
            .unwrap();
        let counted = BundlesData {
            num_bundles: 2,
            ..b
        };
        assert_eq!(
            to_json_string(&counted),
            r#"{"boundaries":["0x00000000","0x7fffffff","0xffffffff"],"numBundles":2}"#
        );
    }

    #[test]
    fn failure_domains_read_pulsar_json() {
        let d: FailureDomain =
            serde_json::from_slice(br#"{"brokers":["b:8080","a:8080"],"extra":1}"#).unwrap();
        assert_eq!(
            d.brokers.unwrap().into_iter().collect::<Vec<_>>(),
            vec!["a:8080", "b:8080"]
        );
        let d: FailureDomain = serde_json::from_slice(br#"{"brokers":null}"#).unwrap();
        assert!(d.brokers.unwrap_or_default().is_empty());
        assert!(serde_json::from_slice::<FailureDomain>(br#"{"brokers":"a"}"#).is_err());
    }
}
