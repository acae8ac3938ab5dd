//! The JSON of the nodes loadmgr adds under `/loadmgr` (schemas in `metadata-schemas/`):
//! [`BundleAssignment`] (`/loadmgr/assignments/<bundle>`), [`AdminRequest`] (`/loadmgr/requests/request-<seq>`)
//! and [`LeaderStatus`] (`/loadmgr/leader-status`).

use serde::{Deserialize, Serialize};

/// Where an assignment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AssignmentState {
    /// The leader chose `destination`; the current owner (if any) must release and the destination acquire.
    Assigning,
    /// The destination holds the ownership node; the record now names the bundle's desired owner.
    Assigned,
}

/// Why the leader (re)assigned a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AssignmentCause {
    /// A lookup of a topic in an unowned bundle (lazy assignment).
    Lookup,
    /// The shedding strategy moved it.
    Shedding,
    /// An operator unloaded it (`namespaces unload`).
    Unload,
    /// Its owner's registration vanished.
    Orphan,
    /// The destination of an unfinished move vanished; placement chose another.
    Replaced,
    /// A child of a split, first owned by the parent's owner.
    Split,
    /// A bundle owned without a record (written by a Java broker or before loadmgr ran) that the leader
    /// adopted as is.
    Adopted,
}

impl AssignmentCause {
    /// Whether the move starts the shedding grace period when it completes (Pulsar records shed and
    /// unloaded bundles in its recently-unloaded list).
    pub fn starts_grace_period(self) -> bool {
        matches!(self, AssignmentCause::Shedding | AssignmentCause::Unload)
    }

    /// The name used in JSON and logs.
    pub fn name(self) -> &'static str {
        match self {
            AssignmentCause::Lookup => "lookup",
            AssignmentCause::Shedding => "shedding",
            AssignmentCause::Unload => "unload",
            AssignmentCause::Orphan => "orphan",
            AssignmentCause::Replaced => "replaced",
            AssignmentCause::Split => "split",
            AssignmentCause::Adopted => "adopted",
        }
    }
}

/// The leader's record of where a bundle belongs: an intent while `state` is `assigning`, the desired owner
/// once `assigned`. Only the leader writes it (fenced by leadership); brokers read it to know what to release
/// and what to acquire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleAssignment {
    /// Full bundle name.
    pub bundle: String,
    /// The broker that must own the bundle.
    pub destination: String,
    /// Whether the destination holds it yet.
    pub state: AssignmentState,
    /// The owner when the move was decided (absent for an unowned bundle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Why the move was made.
    pub cause: AssignmentCause,
    /// The decision's reason, as logged (strategy, numbers, thresholds, how the destination was chosen).
    pub reason: String,
    /// The leader that wrote the record.
    pub leader: String,
    /// When the move was decided, epoch ms.
    pub created_ms: i64,
    /// Last change of the record, epoch ms.
    pub updated_ms: i64,
    /// A split child: once `destination` (the parent's owner) holds it, the leader places it anew
    /// (`loadBalancerAutoUnloadSplitBundlesEnabled`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unload_after_acquire: bool,
    /// The leader knew of no ownership node and no record of another range of the namespace overlapping this
    /// bundle (a split parent or child) when it wrote the record: the destination need not list the
    /// namespace's ownership nodes before it acquires. Absent (false): it lists them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_overlap: bool,
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum RequestOp {
    /// Find (or assign) the owner of a topic's bundle.
    Lookup {
        /// Full topic name (`persistent://tenant/ns/name`).
        topic: String,
    },
    /// Move one bundle off its owner.
    #[serde(rename_all = "camelCase")]
    Unload {
        /// Full bundle name.
        bundle: String,
        /// Where to (placement decides when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        destination: Option<String>,
    },
    /// Move every owned bundle of a namespace off its owner.
    UnloadNamespace {
        /// Namespace name.
        namespace: String,
    },
    /// Split a bundle.
    Split {
        /// Full bundle name.
        bundle: String,
        /// Split algorithm (`defaultNamespaceBundleSplitAlgorithm` when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        algorithm: Option<String>,
        /// Positions for `specified_positions_divide`, `0x%08x`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        positions: Vec<String>,
        /// Place the children anew once split (Pulsar's `unload` flag of the admin split).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unload: bool,
    },
    /// Asked of a bundle's owner by the leader: compute the split points of a topic-based algorithm from the
    /// topics it serves.
    SplitPoints {
        /// Full bundle name.
        bundle: String,
        /// Split algorithm.
        algorithm: String,
        /// Positions for `specified_positions_divide`, `0x%08x`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        positions: Vec<String>,
    },
}

impl RequestOp {
    /// A short description for logs and errors.
    pub fn describe(&self) -> String {
        match self {
            RequestOp::Lookup { topic } => format!("lookup of {topic}"),
            RequestOp::Unload {
                bundle,
                destination,
            } => match destination {
                Some(d) => format!("unload of {bundle} to {d}"),
                None => format!("unload of {bundle}"),
            },
            RequestOp::UnloadNamespace { namespace } => format!("unload of namespace {namespace}"),
            RequestOp::Split {
                bundle, algorithm, ..
            } => format!(
                "split of {bundle} ({})",
                algorithm.as_deref().unwrap_or("default algorithm")
            ),
            RequestOp::SplitPoints {
                bundle, algorithm, ..
            } => {
                format!("split points of {bundle} ({algorithm})")
            }
        }
    }
}

/// The answer written into the request node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestResponse {
    /// Whether the request succeeded.
    pub ok: bool,
    /// What was done, or why not.
    pub message: String,
    /// Structured result (per operation; see [`LookupAnswer`] for lookups).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub result: serde_json::Value,
    /// The broker that answered.
    pub answered_by: String,
    /// When, epoch ms.
    pub answered_ms: i64,
}

/// A request node: the operation, who asked, and (once answered) the response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminRequest {
    /// The operation.
    #[serde(flatten)]
    pub op: RequestOp,
    /// The broker that must answer; the leader when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Who asked (`loadmgr-admin@host` or a broker id).
    pub requester: String,
    /// When, epoch ms.
    pub created_ms: i64,
    /// The answer, once given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<RequestResponse>,
}

/// The `result` of a lookup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LookupAnswer {
    /// The topic's bundle.
    pub bundle: String,
    /// The owner, or the broker the bundle is being assigned to.
    pub broker: String,
    /// Whether `broker` already holds the ownership node.
    pub owned: bool,
}

/// The leader's counters (`/loadmgr/leader-status`), so operators and tests can read them with `zkCli.sh` /
/// `etcdctl`: written when a term begins, with every flush that writes bundle data, and at once after a
/// malformed report.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderStatus {
    /// The leader's broker id.
    pub leader: String,
    /// When it became leader, epoch ms.
    pub leading_since_ms: i64,
    /// When this status was written, epoch ms.
    pub updated_ms: i64,
    /// Broker reports applied to the load data.
    pub reports_applied: u64,
    /// Broker nodes whose content could not be read as a report (logged and skipped).
    pub malformed_reports: u64,
    /// Shedding cycles run.
    pub shedding_cycles: u64,
    /// Moves started (any cause).
    pub moves_started: u64,
    /// Moves whose destination took ownership.
    pub moves_completed: u64,
    /// Splits applied.
    pub splits: u64,
    /// Flushes written.
    pub flushes: u64,
    /// Requests answered.
    pub requests_answered: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::json::to_json_string;

    fn validate(schema: &str, value: &serde_json::Value) {
        let schema: serde_json::Value = serde_json::from_str(schema).unwrap();
        let v = jsonschema::draft202012::new(&schema).unwrap();
        let errors: Vec<String> = v.iter_errors(value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{value}: {errors:?}");
    }

    #[test]
    fn assignment_json_matches_its_schema() {
        let a = BundleAssignment {
            bundle: "public/default/0x00000000_0x40000000".into(),
            destination: "b2:8080".into(),
            state: AssignmentState::Assigning,
            source: Some("b1:8080".into()),
            cause: AssignmentCause::Shedding,
            reason: "AvgShedder: gap 77.0 >= 40".into(),
            leader: "b1:8080".into(),
            created_ms: 1,
            updated_ms: 2,
            unload_after_acquire: false,
            no_overlap: false,
        };
        let text = to_json_string(&a);
        assert_eq!(
            text,
            r#"{"bundle":"public/default/0x00000000_0x40000000","destination":"b2:8080","state":"assigning","source":"b1:8080","cause":"shedding","reason":"AvgShedder: gap 77.0 >= 40","leader":"b1:8080","createdMs":1,"updatedMs":2}"#
        );
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        validate(
            include_str!("../../metadata-schemas/BundleAssignment.schema.json"),
            &value,
        );
        let back: BundleAssignment = serde_json::from_str(&text).unwrap();
        assert_eq!(back, a);
        let split = BundleAssignment {
            unload_after_acquire: true,
            no_overlap: false,
            source: None,
            cause: AssignmentCause::Split,
            ..a
        };
        let value = serde_json::to_value(&split).unwrap();
        assert_eq!(value["unloadAfterAcquire"], true);
        validate(
            include_str!("../../metadata-schemas/BundleAssignment.schema.json"),
            &value,
        );
    }

    #[test]
    fn request_json_matches_its_schema() {
        let schema = include_str!("../../metadata-schemas/AdminRequest.schema.json");
        let requests = [
            RequestOp::Lookup {
                topic: "persistent://public/default/t".into(),
            },
            RequestOp::Unload {
                bundle: "public/default/0x00000000_0xffffffff".into(),
                destination: Some("b2:8080".into()),
            },
            RequestOp::UnloadNamespace {
                namespace: "public/default".into(),
            },
            RequestOp::Split {
                bundle: "public/default/0x00000000_0xffffffff".into(),
                algorithm: Some("specified_positions_divide".into()),
                positions: vec!["0x10000000".into()],
                unload: true,
            },
            RequestOp::SplitPoints {
                bundle: "public/default/0x00000000_0xffffffff".into(),
                algorithm: "topic_count_equally_divide".into(),
                positions: vec![],
            },
        ];
        for op in requests {
            let mut r = AdminRequest {
                op,
                target: None,
                requester: "loadmgr-admin@h".into(),
                created_ms: 5,
                response: None,
            };
            let value = serde_json::to_value(&r).unwrap();
            validate(schema, &value);
            let back: AdminRequest = serde_json::from_value(value).unwrap();
            assert_eq!(back, r);
            r.response = Some(RequestResponse {
                ok: true,
                message: "done".into(),
                result: serde_json::json!({"bundle": "x", "broker": "b1:8080", "owned": true}),
                answered_by: "b1:8080".into(),
                answered_ms: 6,
            });
            r.target = Some("b1:8080".into());
            let value = serde_json::to_value(&r).unwrap();
            validate(schema, &value);
            assert_eq!(serde_json::from_value::<AdminRequest>(value).unwrap(), r);
        }
        let text = r#"{"op":"lookup","topic":"persistent://a/b/c","requester":"x","createdMs":1}"#;
        let r: AdminRequest = serde_json::from_str(text).unwrap();
        assert_eq!(
            r.op,
            RequestOp::Lookup {
                topic: "persistent://a/b/c".into()
            }
        );
        assert!(serde_json::from_str::<AdminRequest>(
            r#"{"op":"explode","requester":"x","createdMs":1}"#
        )
        .is_err());
    }

    #[test]
    fn leader_status_matches_its_schema() {
        let s = LeaderStatus {
            leader: "b1:8080".into(),
            leading_since_ms: 1,
            updated_ms: 2,
            malformed_reports: 1,
            ..Default::default()
        };
        validate(
            include_str!("../../metadata-schemas/LeaderStatus.schema.json"),
            &serde_json::to_value(&s).unwrap(),
        );
    }
}
