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
    /// Number of bundles (`boundaries.len() - 1`).
    pub num_bundles: i32,
}

/// The local (per-cluster) policies of a namespace at `/admin/local-policies/<tenant>/<ns>` (`LocalPolicies`).
/// Keys loadmgr does not know are kept and written back unchanged, so a split never drops another tool's
/// settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LocalPolicies {
    /// The namespace's current bundles.
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
