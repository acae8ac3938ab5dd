//! Load-data snapshots: loadmgr's JSON file of what the leader knows at one instant (schema
//! `metadata-schemas/LoadDataSnapshot.schema.json`), and their conversion to [`LoadData`] and
//! [`ClusterPolicies`] — the same conversion the runtime uses for data read from a store.
//!
//! Validation names the bad key as a JSON pointer: the snapshot's own schema first (unknown top-level keys are
//! errors), then each broker report, bundle data and time average against Pulsar's node schemas, then bundle
//! boundaries and isolation-policy regexes.
//!
//! Besides the reports, a snapshot may carry two pieces of decision state that reports do not hold: the
//! extensible EMAs per broker (`extensibleEma`, what Pulsar's extensible brokers publish in `BrokerLoadData`;
//! loadmgr otherwise starts them from the current report) and TransferShedder's recently unloaded brokers
//! (`recentlyUnloadedBrokers`, its cool-down input). [`Snapshot::to_load_data`] and [`Snapshot::restore`]
//! apply them; `explain` and `simulate --from-snapshot` use both.
//!
//! A snapshot serialises back to the same format ([`Snapshot::to_json`]; keys that were absent stay absent).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::cycle::Strategies;
use super::extensible::ExtensibleEma;
use super::policies::{ClusterPolicies, IsolationPolicy, NamespacePolicy};
use super::split::SplitTopics;
use super::{CoreError, LoadData};
use crate::bundle::{parse_hash, NamespaceBundles};
use crate::model::{BundleData, LocalBrokerData, NodeType, TimeAverageBrokerData};

/// The snapshot schema text.
pub const SCHEMA: &str = include_str!("../../metadata-schemas/LoadDataSnapshot.schema.json");

/// `auto_failover_policy.parameters`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct FailoverParameters {
    /// Primaries needed before secondaries are added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_limit: Option<String>,
    /// Usage threshold (not used by placement).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_threshold: Option<String>,
}

/// `auto_failover_policy`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct FailoverPolicy {
    /// `min_available`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_type: Option<String>,
    /// Its parameters.
    pub parameters: FailoverParameters,
}

/// Pulsar's `NamespaceIsolationData`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct IsolationData {
    /// Namespace regexes.
    pub namespaces: Vec<String>,
    /// Primary broker host regexes.
    pub primary: Vec<String>,
    /// Secondary broker host regexes.
    pub secondary: Vec<String>,
    /// Fail-over policy.
    #[serde(skip_serializing_if = "Option::is_none")]
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
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NamespaceEntry {
    /// `0x%08x` boundaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boundaries: Option<Vec<String>>,
    /// Anti-affinity group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anti_affinity_group: Option<String>,
    /// Ranges holding non-persistent topics.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub non_persistent_bundles: Vec<String>,
}

/// A broker's extensible EMAs in a snapshot (the names of Pulsar's `BrokerLoadData`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
pub struct SnapshotEma {
    /// EMA of the weighted max usage, fraction (1.0 = 100 %).
    #[serde(rename = "weightedMaxEMA")]
    pub weighted_max_ema: f64,
    /// EMA of `msgThroughputIn + msgThroughputOut`, B/s.
    #[serde(rename = "msgThroughputEMA")]
    pub msg_throughput_ema: f64,
}

/// A parsed snapshot. Every section but `now` and `brokers` is optional; an empty section is not written back.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Epoch ms.
    pub now: i64,
    /// Broker id → report.
    pub brokers: BTreeMap<String, LocalBrokerData>,
    /// Bundle → data.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bundle_data: BTreeMap<String, BundleData>,
    /// Broker → time average.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub time_averages: BTreeMap<String, TimeAverageBrokerData>,
    /// Bundle → last unload, epoch ms.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub recently_unloaded: BTreeMap<String, i64>,
    /// Bundle → broker.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub preallocated: BTreeMap<String, String>,
    /// Namespace → entry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub namespaces: BTreeMap<String, NamespaceEntry>,
    /// Policy name → isolation data.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub isolation_policies: BTreeMap<String, IsolationData>,
    /// Domain → brokers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failure_domains: BTreeMap<String, Vec<String>>,
    /// Bundle → topics, for topic-based split algorithms.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bundle_topics: SplitTopics,
    /// Broker → epoch ms of its last unload, TransferShedder's cool-down input (its `recentlyUnloadedBrokers`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub recently_unloaded_brokers: BTreeMap<String, i64>,
    /// Broker → its extensible EMAs, used instead of EMAs started from its current report. Every key must be
    /// a broker of `brokers`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extensible_ema: BTreeMap<String, SnapshotEma>,
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
        if let Some(b) = snapshot
            .extensible_ema
            .keys()
            .find(|b| !snapshot.brokers.contains_key(*b))
        {
            return Err(invalid(
                format!("/extensibleEma/{}", escape(b)),
                "not a broker of /brokers",
            ));
        }
        Ok(snapshot)
    }

    /// The snapshot as JSON text in its own format (what [`Snapshot::from_json`] reads back).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("snapshots serialise")
    }

    /// Hands the snapshot's decision state to fresh strategies: the recently unloaded brokers to the shedder
    /// ([`crate::core::shedding::Shedder::restore_recently_unloaded_brokers`]). The extensible EMAs are part of
    /// the load data ([`Snapshot::to_load_data`]).
    pub fn restore(&self, strategies: &mut Strategies) {
        if !self.recently_unloaded_brokers.is_empty() {
            strategies
                .shedder
                .restore_recently_unloaded_brokers(&self.recently_unloaded_brokers);
        }
    }

    /// The extensible EMAs the snapshot carries, by broker.
    pub fn extensible_emas(&self) -> impl Iterator<Item = (&String, ExtensibleEma)> {
        self.extensible_ema.iter().map(|(b, e)| {
            (
                b,
                ExtensibleEma::restored(e.weighted_max_ema, e.msg_throughput_ema),
            )
        })
    }

    /// The load data (reports, windows, time averages, recently unloaded bundles, preallocations, and the
    /// extensible EMAs of `extensibleEma` in place of EMAs started from the reports).
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
        for (broker, ema) in self.extensible_emas() {
            load.restore_extensible_ema(broker, ema);
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

    fn with_decision_state() -> serde_json::Value {
        let mut v: serde_json::Value =
            serde_json::from_str(include_str!("../../examples/snapshot.json")).unwrap();
        v["recentlyUnloadedBrokers"] = serde_json::json!({"broker-1:8080": 1699999990000i64});
        v["extensibleEma"] = serde_json::json!({
            "broker-2:8080": {"weightedMaxEMA": 0.75, "msgThroughputEMA": 1234.5}
        });
        v
    }

    #[test]
    fn snapshots_round_trip_with_their_decision_state() {
        let v = with_decision_state();
        let snap = Snapshot::from_value(v.clone()).unwrap();
        let text = snap.to_json();
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back["recentlyUnloadedBrokers"],
            v["recentlyUnloadedBrokers"]
        );
        assert_eq!(back["extensibleEma"], v["extensibleEma"]);
        for key in ["now", "namespaces", "bundleData"] {
            assert_eq!(back[key], v[key], "{key}");
        }
        // What it writes reads back to the same snapshot.
        let again = Snapshot::from_json(&text).unwrap();
        assert_eq!(again.to_json(), text);
        assert_eq!(
            again.extensible_ema["broker-2:8080"],
            SnapshotEma {
                weighted_max_ema: 0.75,
                msg_throughput_ema: 1234.5
            }
        );
        // Absent sections stay absent.
        let plain = Snapshot::from_json(include_str!("../../examples/snapshot.json")).unwrap();
        let out: serde_json::Value = serde_json::from_str(&plain.to_json()).unwrap();
        assert!(out.get("extensibleEma").is_none() && out.get("recentlyUnloadedBrokers").is_none());
    }

    #[test]
    fn the_snapshots_emas_replace_those_of_the_reports() {
        let snap = Snapshot::from_value(with_decision_state()).unwrap();
        let mut load = snap.to_load_data();
        let ema = load.broker("broker-2:8080").unwrap().extensible;
        assert_eq!(
            (ema.weighted_max_ema, ema.msg_throughput_ema),
            (0.75, 1234.5)
        );
        // Other settings (as a cycle sets them) re-seed single report samples, not a restored history.
        let mut s = crate::config::Settings::default();
        s.load_balancer_cpu_resource_weight = 0.5;
        load.set_ema_settings(&s);
        assert_eq!(
            load.broker("broker-2:8080")
                .unwrap()
                .extensible
                .weighted_max_ema,
            0.75
        );
        let from_report = load.broker("broker-1:8080").unwrap().extensible;
        assert!(!from_report.restored && from_report.samples == 1);
        // The next report advances the restored value as a history (h = 0.9).
        let report = load.broker("broker-2:8080").unwrap().local.clone();
        let w = crate::core::weighted_usage(&report, &s);
        load.apply_report("broker-2:8080", report, &crate::core::NoSeeds);
        let next = load.broker("broker-2:8080").unwrap().extensible;
        assert!((next.weighted_max_ema - (0.75 * 0.9 + 0.1 * w)).abs() < 1e-12);
        assert!(!next.restored);
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
        let e = err(r#"{"now":1,"brokers":{},"recentlyUnloadedBrokers":{"b:1":"yesterday"}}"#);
        assert!(e.contains("/recentlyUnloadedBrokers/b:1"), "{e}");
        let e = err(
            r#"{"now":1,"brokers":{},"extensibleEma":{"b:1":{"weightedMaxEMA":0.5,"msgThroughputEMA":1}}}"#,
        );
        assert!(
            e.contains("/extensibleEma/b:1") && e.contains("not a broker of /brokers"),
            "{e}"
        );
        let e =
            err(r#"{"now":1,"brokers":{"b:1":{}},"extensibleEma":{"b:1":{"weightedMaxEMA":0.5}}}"#);
        assert!(
            e.contains("/extensibleEma/b:1") && e.contains("msgThroughputEMA"),
            "{e}"
        );
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
