//! What goes into the leader state machine ([`Event`]) and what comes out ([`Command`]).
//!
//! Every command that writes to the store carries a [`Ticket`]; the executor reports how the write went with
//! [`Event::Done`] for that ticket (the simulator at once, the runtime after the fenced batch returned) before it
//! takes the next outside event, so the core always learns the outcome of its own writes in order.

use std::collections::BTreeMap;

use crate::bundle::SplitAlgorithm;
use crate::config::Settings;
use crate::core::policies::{IsolationPolicy, NamespacePolicy};
use crate::model::records::{BundleAssignment, LeaderStatus};
use crate::model::{
    BundleData, LocalBrokerData, LocalPolicies, ResourceQuota, TimeAverageBrokerData,
};

use super::NamespaceBundlesInfo;

/// Identifies one store write the core asked for; the executor echoes it in [`Event::Done`].
pub type Ticket = u64;

/// Identifies one request; chosen by the executor, echoed in [`Command::Answer`].
pub type RequestId = u64;

/// A node the flush owns, named by what it holds (the executor maps it to a path).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FlushedNode {
    /// `/loadbalance/bundle-data/<bundle>`.
    BundleData(String),
    /// `/loadbalance/broker-time-average/<broker>`.
    TimeAverage(String),
}

/// The value of a [`FlushedNode`] (the executor writes it as Pulsar's JSON).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FlushedValue {
    /// A bundle's data.
    BundleData(BundleData),
    /// A broker's time average.
    TimeAverage(TimeAverageBrokerData),
}

/// Everything a new leader reads before it acts (the executor's "load all").
#[derive(Debug, Clone, Default)]
pub struct LoadedState {
    /// Stored bundle data: bundle → its value (`None` when the node did not parse).
    pub bundle_data: Vec<(String, Option<BundleData>)>,
    /// Stored resource quotas (both layouts), bundle → quota.
    pub quotas: Vec<(String, ResourceQuota)>,
    /// Stored time averages: broker → its value (`None` when the node did not parse).
    pub time_averages: Vec<(String, Option<TimeAverageBrokerData>)>,
    /// Every namespace that exists with its bundles.
    pub namespaces: Vec<NamespaceBundlesInfo>,
    /// Every registration node: broker → its report or why it is not one.
    pub reports: Vec<(String, Result<LocalBrokerData, String>)>,
    /// Every readable assignment record with its version.
    pub records: Vec<(BundleAssignment, i64)>,
    /// Every ownership node: bundle → owner.
    pub owners: Vec<(String, OwnerSeen)>,
    /// The cluster's isolation policies and failure domains, when a cluster name is configured.
    pub cluster: Option<ClusterPolicyData>,
}

/// Who an ownership node names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerSeen {
    /// The owner's broker id (empty when the node names none).
    pub broker: String,
    /// Whether the owner marked it disabled (it is releasing the bundle).
    pub disabled: bool,
}

/// Isolation policies and failure domains as read from `/admin/clusters/<cluster>`.
#[derive(Debug, Clone, Default)]
pub struct ClusterPolicyData {
    /// Compiled isolation policies, in name order.
    pub isolation: Vec<IsolationPolicy>,
    /// Broker id → failure domain.
    pub domains: BTreeMap<String, String>,
}

/// What an operator or client asks the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Where a topic is served (places its bundle when it is unowned).
    Lookup {
        /// Full topic name.
        topic: String,
    },
    /// Place an unowned bundle as a lookup of one of its topics would (the simulator's clients).
    Assign {
        /// Full bundle name.
        bundle: String,
    },
    /// Move a bundle away from its owner (to `destination` when given).
    Unload {
        /// Full bundle name.
        bundle: String,
        /// Broker id, or placement's choice.
        destination: Option<String>,
    },
    /// Unload every owned bundle of a namespace.
    UnloadNamespace {
        /// `tenant/namespace`.
        namespace: String,
    },
    /// Split a bundle.
    Split {
        /// Full bundle name.
        bundle: String,
        /// Algorithm name (`None`: `defaultNamespaceBundleSplitAlgorithm`).
        algorithm: Option<String>,
        /// Hash positions for `specified_positions_divide`.
        positions: Vec<String>,
        /// Place the children anew once the owner holds them.
        unload: bool,
    },
}

/// The core's answer to a [`Request`].
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Whether the request was carried out (or started).
    pub ok: bool,
    /// What happened, for people.
    pub message: String,
    /// Machine-readable result (`null` on refusal).
    pub result: serde_json::Value,
}

/// The timers the executor runs for the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tick {
    /// Every `loadBalancerSheddingIntervalMinutes` from the election.
    Shedding,
    /// Every `loadBalancerResourceQuotaUpdateIntervalMinutes` from the election.
    Flush,
    /// The automatic split check, at the instant a [`Command::Wake`] named.
    SplitCheck,
    /// An early shedding cycle the strategy asked for, at the instant a [`Command::Wake`] named.
    EarlyShedding,
}

/// How a write went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Written; the new version of each versioned node in command order (see each command).
    Written(Vec<i64>),
    /// A version check failed: somebody else changed a node meanwhile.
    Conflict,
    /// Another failure (timeout, connection); the state in the store is unknown.
    Failed(String),
}

/// An input of the state machine. `now` (epoch ms) is passed with every event to [`super::Leader::handle`].
// A report is the common event and is moved once, into the load data: boxing it would add an allocation per
// report to save a copy of the enum.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Event {
    /// The store as the new leader read it; the first event of a term.
    Loaded(Box<LoadedState>),
    /// A registration node was created or changed: the broker's report, or why it is not one (not JSON, not a
    /// modular report, too large, impossible values, or not an ephemeral node of a live session: a persistent copy
    /// of a report is no broker).
    Report {
        /// Broker id.
        broker: String,
        /// The parsed report.
        report: Result<LocalBrokerData, String>,
    },
    /// A registration node vanished.
    BrokerGone {
        /// Broker id.
        broker: String,
    },
    /// An ownership node was created or changed.
    OwnerSeen {
        /// Full bundle name.
        bundle: String,
        /// Whom it names.
        owner: OwnerSeen,
    },
    /// An ownership node vanished.
    OwnerGone {
        /// Full bundle name.
        bundle: String,
    },
    /// An assignment record was created or changed (by this leader or another).
    RecordSeen {
        /// The record.
        record: BundleAssignment,
        /// Its version.
        version: i64,
    },
    /// An assignment record vanished.
    RecordGone {
        /// Full bundle name.
        bundle: String,
    },
    /// A namespace's bundles or local policies changed (`None`: it no longer exists).
    Namespace {
        /// `tenant/namespace`.
        namespace: String,
        /// What it is now.
        info: Option<NamespaceBundlesInfo>,
    },
    /// The cluster's isolation policies or failure domains changed.
    ClusterPolicies(ClusterPolicyData),
    /// The effective settings changed (dynamic configuration).
    Settings(Box<Settings>),
    /// A timer fired.
    Tick(Tick),
    /// A request arrived.
    Request {
        /// The executor's id of it.
        id: RequestId,
        /// What it asks.
        request: Request,
    },
    /// The owner answered the split points asked by [`Command::AskSplitPoints`].
    SplitPoints {
        /// The ticket of the question.
        ticket: Ticket,
        /// Hash positions, or why there are none.
        result: Result<Vec<u64>, String>,
    },
    /// A write the core asked for finished.
    Done {
        /// The command's ticket.
        ticket: Ticket,
        /// How it went.
        outcome: Outcome,
    },
}

/// How loud a [`Command::Log`] line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Routine detail (skipped candidates, deferred cycles).
    Debug,
    /// A decision or a change of the cluster.
    Info,
    /// Something an operator should look at.
    Warn,
}

/// The store writes of one split, in one fenced batch: the namespace's local policies (versioned), the
/// parent's record deleted, the children's records created (versioned), the parent's bundle data deleted and
/// the children's written. [`Outcome::Written`] carries the local policies' version, then each child record's.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitWrite {
    /// The bundle split.
    pub parent: String,
    /// `tenant/namespace`.
    pub namespace: String,
    /// The new local policies.
    pub local: LocalPolicies,
    /// Version the local policies must have (`None`: they must not exist yet).
    pub expected_local_version: Option<i64>,
    /// The parent and the version of its record, when it has one.
    pub parent_record: Option<(String, i64)>,
    /// The children's records (created).
    pub child_records: Vec<BundleAssignment>,
    /// The parent, when its bundle data is stored (deleted).
    pub parent_data: Option<String>,
    /// Each child's bundle data (the parent's divided), when the parent had data.
    pub child_data: Vec<(String, BundleData)>,
}

/// An output of the state machine, executed in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Write an assignment record: create-only when `expected_version` is `None`, else compare-and-set.
    /// [`Outcome::Written`] carries the record's new version.
    WriteRecord {
        /// Echoed in [`Event::Done`].
        ticket: Ticket,
        /// The record (its `reason` is the core's reason for the move).
        record: BundleAssignment,
        /// Version the record must have.
        expected_version: Option<i64>,
    },
    /// Write changed flush values and the leader status in one batch (unversioned puts).
    Flush {
        /// Echoed in [`Event::Done`].
        ticket: Ticket,
        /// Nodes whose value changed, with their new values.
        writes: Vec<(FlushedNode, FlushedValue)>,
        /// The leader's counters.
        status: LeaderStatus,
    },
    /// Delete a node the flush wrote (one already gone counts as deleted).
    Delete {
        /// Echoed in [`Event::Done`].
        ticket: Ticket,
        /// The node.
        node: FlushedNode,
        /// Why, for the log.
        why: String,
    },
    /// Apply a split (see [`SplitWrite`]).
    Split {
        /// Echoed in [`Event::Done`].
        ticket: Ticket,
        /// The writes.
        write: Box<SplitWrite>,
        /// What the split does and why, for the log.
        reason: String,
    },
    /// Ask `owner` for the split points of `bundle` (topic-based algorithms need its topics); answer with
    /// [`Event::SplitPoints`].
    AskSplitPoints {
        /// Echoed in [`Event::SplitPoints`].
        ticket: Ticket,
        /// Full bundle name.
        bundle: String,
        /// Its owner (possibly this leader).
        owner: String,
        /// The algorithm.
        algorithm: SplitAlgorithm,
        /// Positions for `specified_positions_divide`.
        positions: Vec<u64>,
    },
    /// Answer a request.
    Answer {
        /// The request.
        id: RequestId,
        /// The answer.
        answer: Answer,
    },
    /// Write the leader status (`/loadmgr/leader-status`).
    WriteStatus(LeaderStatus),
    /// Read a node again and report what it holds (after a conflict).
    Reread(Reread),
    /// Delete the ownership node of `bundle` if it still names `owner`: it names a broker that is not
    /// registered, and nothing else would ever remove it.
    DeleteOwnership {
        /// Full bundle name.
        bundle: String,
        /// The broker the node names.
        owner: String,
        /// Why, for the log.
        why: String,
    },
    /// Remove answered and abandoned request nodes (runs with every shedding tick).
    CollectRequests,
    /// Deliver `tick` ([`Tick::SplitCheck`] or [`Tick::EarlyShedding`]) at `at` (epoch ms); a later wake
    /// replaces nothing, each is delivered once.
    Wake {
        /// Epoch ms.
        at: i64,
        /// What to deliver.
        tick: Tick,
    },
    /// A line for the log: what the core decided or noticed, with its reason.
    Log {
        /// How loud.
        level: Level,
        /// The line.
        message: String,
        /// The record the line is about (a move started or completed, a bundle adopted), for the bundle,
        /// source, destination and cause fields of the log line.
        record: Option<Box<BundleAssignment>>,
    },
}

/// What to read again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reread {
    /// A bundle's assignment record ([`Event::RecordSeen`] / [`Event::RecordGone`]).
    Record(String),
    /// A namespace's bundles ([`Event::Namespace`]).
    Namespace(String),
}

impl Command {
    /// A log line.
    pub fn log(level: Level, message: impl Into<String>) -> Command {
        Command::Log {
            level,
            message: message.into(),
            record: None,
        }
    }
}

/// The policy of one namespace as the core keeps it (for [`crate::core::ClusterPolicies`]).
pub(super) fn namespace_policy(info: &NamespaceBundlesInfo) -> NamespacePolicy {
    NamespacePolicy {
        bundles: Some(info.bundles.clone()),
        anti_affinity_group: info.local.namespace_anti_affinity_group.clone(),
    }
}
