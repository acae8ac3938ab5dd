//! Serde types for every JSON node loadmgr reads or writes, in Pulsar's shapes.
//!
//! Reading is lenient the way Pulsar's Jackson mapper is (unknown keys ignored, missing keys defaulted);
//! writing produces the current Java shape byte for byte: key order, `null` members left out, computed keys,
//! and Java's double spelling (see [`json`]). [`NodeType`] names each stored type, finds its JSON Schema in
//! `metadata-schemas/` (compiled into the binary) and validates values against it.

pub mod averages;
pub mod broker;
pub mod input;
pub mod json;
pub mod load_report;
pub mod nodes;
pub mod records;

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

pub use averages::{
    BundleData, ResourceQuota, TimeAverageBrokerData, TimeAverageMessageData, NUM_LONG_SAMPLES,
    NUM_SHORT_SAMPLES,
};
pub use broker::{
    AdvertisedListener, LocalBrokerData, NamespaceBundleStats, ResourceUsage, ResourceWeights,
    SystemResourceUsage, MODULAR_LOAD_MANAGER_CLASS,
};
pub use load_report::{LoadManagerReport, LoadReport};
pub use nodes::{BundlesData, LeaderBroker, LocalPolicies, NamespaceEphemeralData};

/// Every stored node type that has a schema in `metadata-schemas/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeType {
    /// `/loadbalance/brokers/<id>` (modular).
    LocalBrokerData,
    /// `/loadbalance/brokers/<id>` (Simple load manager, read only).
    LoadReport,
    /// A window inside `BundleData`.
    TimeAverageMessageData,
    /// `/loadbalance/bundle-data/<bundle>`.
    BundleData,
    /// `/loadbalance/broker-time-average/<id>`.
    TimeAverageBrokerData,
    /// `/loadbalance/resource-quota/...`.
    ResourceQuota,
    /// `/loadbalance/leader`.
    LeaderBroker,
    /// `/namespace/<ns>/<range>`.
    NamespaceEphemeralData,
    /// `bundles` of namespace policies.
    BundlesData,
    /// `/admin/local-policies/<ns>`.
    LocalPolicies,
}

/// A value did not match its node type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The text is not JSON at all.
    #[error("not valid JSON: {0}")]
    Syntax(String),
    /// The type could not be told from the keys.
    #[error("cannot tell the node type from its keys ({0}); name it with --type")]
    UnknownType(String),
    /// The JSON breaks the type's schema; one message per violation, each naming the JSON pointer.
    #[error("{node_type} schema violations:\n{}", .violations.join("\n"))]
    Schema {
        /// The type validated against.
        node_type: NodeType,
        /// `"<pointer>: <message>"` per violation.
        violations: Vec<String>,
    },
    /// Schema-valid JSON that still does not read as the type (should not happen; kept for safety).
    #[error("{node_type}: {message}")]
    Decode {
        /// The type read.
        node_type: NodeType,
        /// serde's message.
        message: String,
    },
}

impl NodeType {
    /// All types, in a stable order.
    pub const ALL: [NodeType; 10] = [
        NodeType::LocalBrokerData,
        NodeType::LoadReport,
        NodeType::TimeAverageMessageData,
        NodeType::BundleData,
        NodeType::TimeAverageBrokerData,
        NodeType::ResourceQuota,
        NodeType::LeaderBroker,
        NodeType::NamespaceEphemeralData,
        NodeType::BundlesData,
        NodeType::LocalPolicies,
    ];

    /// The Java class name, which is also the schema file's stem.
    pub const fn name(self) -> &'static str {
        match self {
            NodeType::LocalBrokerData => "LocalBrokerData",
            NodeType::LoadReport => "LoadReport",
            NodeType::TimeAverageMessageData => "TimeAverageMessageData",
            NodeType::BundleData => "BundleData",
            NodeType::TimeAverageBrokerData => "TimeAverageBrokerData",
            NodeType::ResourceQuota => "ResourceQuota",
            NodeType::LeaderBroker => "LeaderBroker",
            NodeType::NamespaceEphemeralData => "NamespaceEphemeralData",
            NodeType::BundlesData => "BundlesData",
            NodeType::LocalPolicies => "LocalPolicies",
        }
    }

    /// The JSON Schema text of `metadata-schemas/<Name>.schema.json`.
    pub const fn schema_text(self) -> &'static str {
        match self {
            NodeType::LocalBrokerData => {
                include_str!("../../metadata-schemas/LocalBrokerData.schema.json")
            }
            NodeType::LoadReport => include_str!("../../metadata-schemas/LoadReport.schema.json"),
            NodeType::TimeAverageMessageData => {
                include_str!("../../metadata-schemas/TimeAverageMessageData.schema.json")
            }
            NodeType::BundleData => include_str!("../../metadata-schemas/BundleData.schema.json"),
            NodeType::TimeAverageBrokerData => {
                include_str!("../../metadata-schemas/TimeAverageBrokerData.schema.json")
            }
            NodeType::ResourceQuota => {
                include_str!("../../metadata-schemas/ResourceQuota.schema.json")
            }
            NodeType::LeaderBroker => {
                include_str!("../../metadata-schemas/LeaderBroker.schema.json")
            }
            NodeType::NamespaceEphemeralData => {
                include_str!("../../metadata-schemas/NamespaceEphemeralData.schema.json")
            }
            NodeType::BundlesData => include_str!("../../metadata-schemas/BundlesData.schema.json"),
            NodeType::LocalPolicies => {
                include_str!("../../metadata-schemas/LocalPolicies.schema.json")
            }
        }
    }

    fn validator(self) -> &'static jsonschema::Validator {
        static VALIDATORS: OnceLock<Vec<jsonschema::Validator>> = OnceLock::new();
        let all = VALIDATORS.get_or_init(|| {
            NodeType::ALL
                .iter()
                .map(|t| {
                    let schema: serde_json::Value =
                        serde_json::from_str(t.schema_text()).expect("bundled schemas are JSON");
                    jsonschema::draft202012::new(&schema).expect("bundled schemas compile")
                })
                .collect()
        });
        let index = NodeType::ALL
            .iter()
            .position(|t| *t == self)
            .expect("in ALL");
        &all[index]
    }

    /// Validates `value` against this type's schema; every violation is reported with its JSON pointer.
    pub fn validate(self, value: &serde_json::Value) -> Result<(), ModelError> {
        let violations: Vec<String> = self
            .validator()
            .iter_errors(value)
            .map(|e| {
                let at = e.instance_path.to_string();
                format!("{}: {}", if at.is_empty() { "/" } else { &at }, e)
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(ModelError::Schema {
                node_type: self,
                violations,
            })
        }
    }

    /// Tells the type of a node from its keys, the way an operator would: a report's resource keys, a bundle's
    /// windows, and so on. Ambiguous or unknown shapes are an error naming the keys seen.
    pub fn detect(value: &serde_json::Value) -> Result<NodeType, ModelError> {
        let obj = value
            .as_object()
            .ok_or_else(|| ModelError::UnknownType("the value is not a JSON object".into()))?;
        let has = |k: &str| obj.contains_key(k);
        let detected = if load_report::is_simple_load_report(value) || has("systemResourceUsage") {
            Some(NodeType::LoadReport)
        } else if obj.get("loadReportType").and_then(|v| v.as_str()) == Some("LocalBrokerData")
            || has("lastStats")
            || (has("cpu") && has("bandwidthIn"))
        {
            Some(NodeType::LocalBrokerData)
        } else if has("shortTermData") || has("longTermData") {
            Some(NodeType::BundleData)
        } else if obj
            .keys()
            .any(|k| k.starts_with("shortTermMsg") || k.starts_with("longTermMsg"))
        {
            Some(NodeType::TimeAverageBrokerData)
        } else if has("maxSamples") || has("numSamples") {
            Some(NodeType::TimeAverageMessageData)
        } else if has("dynamic") || (has("bandwidthIn") && has("memory")) {
            Some(NodeType::ResourceQuota)
        } else if has("nativeUrl")
            || has("httpUrl")
            || has("nativeUrlTls")
            || has("httpUrlTls")
            || has("disabled")
        {
            Some(NodeType::NamespaceEphemeralData)
        } else if has("boundaries") {
            Some(NodeType::BundlesData)
        } else if obj
            .get("bundles")
            .is_some_and(|b| b.get("boundaries").is_some())
        {
            Some(NodeType::LocalPolicies)
        } else if has("brokerId") || has("serviceUrl") {
            Some(NodeType::LeaderBroker)
        } else {
            None
        };
        detected.ok_or_else(|| {
            let keys: Vec<&str> = obj.keys().map(String::as_str).take(8).collect();
            ModelError::UnknownType(if keys.is_empty() {
                "empty object".into()
            } else {
                format!("keys: {}", keys.join(", "))
            })
        })
    }

    /// Validates `value` and re-writes it as loadmgr would store it (compact, Java key order and numbers).
    pub fn normalise(self, value: serde_json::Value) -> Result<String, ModelError> {
        self.validate(&value)?;
        let decode = |e: serde_json::Error| ModelError::Decode {
            node_type: self,
            message: e.to_string(),
        };
        use json::to_json_string as w;
        Ok(match self {
            NodeType::LocalBrokerData => {
                w(&serde_json::from_value::<LocalBrokerData>(value).map_err(decode)?)
            }
            NodeType::LoadReport => {
                w(&serde_json::from_value::<LoadReport>(value).map_err(decode)?)
            }
            NodeType::TimeAverageMessageData => {
                w(&serde_json::from_value::<TimeAverageMessageData>(value).map_err(decode)?)
            }
            NodeType::BundleData => {
                w(&serde_json::from_value::<BundleData>(value).map_err(decode)?)
            }
            NodeType::TimeAverageBrokerData => {
                w(&serde_json::from_value::<TimeAverageBrokerData>(value).map_err(decode)?)
            }
            NodeType::ResourceQuota => {
                w(&serde_json::from_value::<ResourceQuota>(value).map_err(decode)?)
            }
            NodeType::LeaderBroker => {
                w(&serde_json::from_value::<LeaderBroker>(value).map_err(decode)?)
            }
            NodeType::NamespaceEphemeralData => {
                w(&serde_json::from_value::<NamespaceEphemeralData>(value).map_err(decode)?)
            }
            NodeType::BundlesData => {
                w(&serde_json::from_value::<BundlesData>(value).map_err(decode)?)
            }
            NodeType::LocalPolicies => {
                w(&serde_json::from_value::<LocalPolicies>(value).map_err(decode)?)
            }
        })
    }
}

/// Parses JSON text, reporting the line and column of a syntax error.
pub fn parse_json(text: &[u8]) -> Result<serde_json::Value, ModelError> {
    serde_json::from_slice(text).map_err(|e| ModelError::Syntax(e.to_string()))
}

impl fmt::Display for NodeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for NodeType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NodeType::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<&str> = NodeType::ALL.iter().map(|t| t.name()).collect();
                format!(
                    "unknown node type '{s}'; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_schema_compiles_and_names_its_type() {
        for t in NodeType::ALL {
            let schema: serde_json::Value = serde_json::from_str(t.schema_text()).unwrap();
            assert_eq!(schema["title"], t.name());
            assert_eq!(
                schema["$schema"],
                "https://json-schema.org/draft/2020-12/schema"
            );
            t.validate(&serde_json::json!({}))
                .err()
                .map(|_| ())
                .unwrap_or(());
            assert_eq!(t.name().parse::<NodeType>().unwrap(), t);
        }
        assert!("Nope"
            .parse::<NodeType>()
            .unwrap_err()
            .contains("LocalBrokerData"));
    }

    #[test]
    fn detection_by_keys() {
        let cases = [
            (r#"{"cpu":{},"bandwidthIn":{}}"#, NodeType::LocalBrokerData),
            (r#"{"underLoaded":false}"#, NodeType::LoadReport),
            (r#"{"shortTermData":{}}"#, NodeType::BundleData),
            (
                r#"{"longTermMsgRateIn":1}"#,
                NodeType::TimeAverageBrokerData,
            ),
            (r#"{"maxSamples":10}"#, NodeType::TimeAverageMessageData),
            (r#"{"msgRateIn":1,"dynamic":true}"#, NodeType::ResourceQuota),
            (r#"{"serviceUrl":"http://a:1"}"#, NodeType::LeaderBroker),
            (
                r#"{"nativeUrl":"pulsar://a:1"}"#,
                NodeType::NamespaceEphemeralData,
            ),
            (r#"{"boundaries":[]}"#, NodeType::BundlesData),
            (r#"{"bundles":{"boundaries":[]}}"#, NodeType::LocalPolicies),
        ];
        for (text, expected) in cases {
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(NodeType::detect(&v).unwrap(), expected, "{text}");
        }
        let err = NodeType::detect(&serde_json::json!({"x": 1})).unwrap_err();
        assert!(err.to_string().contains("keys: x"), "{err}");
    }

    #[test]
    fn schema_errors_name_the_pointer() {
        let v = serde_json::json!({"cpu": {"usage": "high"}, "numTopics": 1.5});
        let err = NodeType::LocalBrokerData
            .validate(&v)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/cpu/usage"), "{err}");
        assert!(err.contains("/numTopics"), "{err}");
    }
}
