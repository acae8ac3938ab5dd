//! The live load manager: the broker agent every broker runs, and the leader tasks of the elected one.
//!
//! Decisions stay in [`crate::core`]; this module owns every store call, timer and task, and is the only
//! writer of load-balancing state. `loadmgr broker` is a thin wrapper over [`BrokerAgent`].
//!
//! # An agent
//!
//! [`BrokerAgent::start`]`(store, settings, identity, host, options)` ([`agent`]) runs, on its own store
//! session:
//!
//! * **registration and reports** — a [`ResourceLock`](crate::coordination::ResourceLock) holding the
//!   `LocalBrokerData` at `/loadbalance/brokers/<host:port>` (with `loadManagerClassName`, so Pulsar 3.0+
//!   leaders accept it), re-acquired if lost; a zero `TimeAverageBrokerData` written if none exists; every
//!   `loadBalancerReportUpdateMinIntervalMillis` (from a phase seeded by the seed and the broker id,
//!   [`report_rules::report_check_phase_ms`]) the host's bundle stats and usage are folded in and the report
//!   is written when [`report_rules::report_update_reason`] says so (Pulsar's `needBrokerDataUpdate`) — and,
//!   when the extensible load manager or TransferShedder is configured, also when
//!   [`report_rules::forced_report_reason`] does (the bundle set changed; `loadBalanceSheddingDelayInSeconds`
//!   after the last loss) — never while disconnected;
//! * **host usage** — the host's own figures, or [`host_usage::LinuxHostUsage`] sampled every
//!   `loadBalancerHostUsageCheckIntervalMinutes`;
//! * **ownership** — acquires and releases bundles as the assignment records say, told which by the entries
//!   of its own inbox `/loadmgr/inbox/<broker>` (below; [`ownership`]);
//! * **dynamic configuration** — `/admin/configuration` applied on top of broker.conf (so
//!   `loadmgr admin shedding disable` or `pulsar-admin brokers update-dynamic-config` reach every broker);
//! * **requests addressed to it** — split points of a bundle it serves, from its host's topics;
//! * **leader election** at `/loadbalance/leader`; while it leads, the leader task.
//!
//! [`BrokerAgent::shutdown`] resigns leadership, deregisters, then releases every bundle (the leader moves
//! them at once); a crash leaves all that to the session's expiry. The tasks of one agent share its state
//! ([`shared`]): the store session, the identity, the host, the current settings, the bundles it owns and
//! serves, and its counters ([`AgentMetrics`]).
//!
//! A real broker plugs in through [`BrokerHost`] (bundle stats, load/unload); [`SyntheticHost`] serves the
//! topics of a traffic profile and models CPU and NIC from the traffic it serves; [`IdleHost`] serves nothing.
//!
//! # The leader
//!
//! Only the elected agent runs it ([`leader`], the executor of [`crate::core::leader::Leader`]); the
//! supervisor aborts it the moment the election says otherwise (when the session is declared lost; a lost
//! connection alone does not end leadership), and every
//! write it makes is a batch fenced by the leader node, so a deposed leader's late write is rejected by the
//! store. It:
//!
//! * loads everything when it starts — reports, stored bundle data and quotas (seeds of bundles seen the first
//!   time), time averages, namespaces, assignment records (shed/unloaded bundles still in their grace period
//!   are recorded again from them), ownership nodes — and resumes unfinished moves and unanswered requests;
//! * aggregates per notification: a change of one broker node re-reads that node only; malformed content is
//!   logged, counted (`malformedReports` of `/loadmgr/leader-status`) and skipped;
//! * flushes every `loadBalancerResourceQuotaUpdateIntervalMinutes`: the data of the top
//!   `loadBalancerMaxNumberOfBundlesInBundleLoadReport × max(1, brokers)` bundles by long-term rate (Pulsar's
//!   `writeBundleDataOnZooKeeper`) and every time average in one fenced batch, skipping unchanged values; deletes the time averages of gone brokers and the bundle
//!   data of bundles nobody serves and nobody is assigned;
//! * sheds every `loadBalancerSheddingIntervalMinutes` (when `loadBalancerSheddingEnabled`): the core's plan,
//!   each unload started as a move carrying the strategy's reason; then the split check
//!   (`loadBalancerAutoBundleSplitEnabled`) and a reconciliation of every record;
//! * reassigns a dead broker's bundles as soon as its registration vanishes (Pulsar waits for a lookup);
//! * answers lookups (placing unowned bundles: lazy assignment), unloads and splits.
//!
//! # Hand-over: why a bundle never has two owners
//!
//! Ownership is Pulsar's: the owner holds the ephemeral `/namespace/<bundle>` with `NamespaceEphemeralData`.
//! The leader's intent lives in a persistent record `/loadmgr/assignments/<bundle>` ([`BundleAssignment`],
//! schema `metadata-schemas/BundleAssignment.schema.json`): `destination` is the broker that must own the
//! bundle; `state` is `assigning` until the destination holds the node, then `assigned`.
//!
//! 1. The leader writes the record (fenced, compare-and-set on the record's version): `assigning`, with the
//!    cause, the reason and the current owner as `source`; in the same batch, the entries
//!    `/loadmgr/inbox/<broker>/<bundle>` of the destination and the source, the only nodes a broker watches
//!    (the leader's `inbox` module; [`ownership`]).
//! 2. A broker holding the node while the record names another broker releases it: it marks the node
//!    `disabled` (lookups stop answering it), unloads the bundle from its host, and deletes the node by version.
//! 3. The destination, once no ownership node exists and no other broker owns an overlapping range of the
//!    namespace (it lists the namespace's ownership nodes unless the record says
//!    [`no_overlap`](BundleAssignment::no_overlap)), creates the node **create-only** and then loads the bundle
//!    into its host.
//! 4. The leader sees the destination's node and marks the record `assigned` (the grace period starts for shed
//!    and unloaded bundles).
//!
//! *At most one owner:* the store lets exactly one create-only put of a path succeed, and a node is created
//! only when absent, so two ownership nodes of one bundle cannot coexist; the overlap check keeps split parents
//! and children apart. A host serves a bundle only between its create and its delete, and only while the
//! bundle's [`OwnershipLease`] is valid. A broker cut off from the store — or paused — stops serving at the
//! session deadline, 9/10 of the session timeout after the send time of the last request the server answered,
//! so before the server can expire the session and let someone else create the node: the leases lapse at that
//! instant (read from the clock), the store then declares `SessionLost`, the agent unloads everything at once,
//! loads nothing until the session is back, and then evaluates every bundle again (its store re-creates its
//! ephemerals only where nobody else took them). `tests/partition.rs` and the chaos suite check this against
//! real servers.
//!
//! *Nothing lost:* every step is driven by state in the store, not by messages. A leader that dies mid-move
//! leaves the record; the next leader reads it: if the destination lives, steps 2–3 go on without any leader
//! and the new leader does step 4; if it died, the record is rewritten with a new destination (`replaced`).
//! Because `assigned` records stay, a new leader also finds the bundles of brokers that died while no leader
//! watched (`orphan`). Owned bundles without a record (written by Java brokers, or before loadmgr ran) are
//! adopted as `assigned`.
//!
//! # Requests
//!
//! Brokers have no channel to each other but the store: `/loadmgr/requests/request-<seq>` ([`AdminRequest`])
//! carries lookups and `loadmgr admin` operations to the leader (or, with `target`, to one broker), and the
//! answer is written into the same node ([`requests`]). Without a leader the asker gets
//! [`RuntimeError::NoLeader`] at once; otherwise a timeout naming the leader asked.
//!
//! # Deliberate differences from Pulsar's modular load manager
//!
//! * Orphaned bundles are reassigned when the owner's registration vanishes, not on the next lookup.
//! * An unload is a move to a destination chosen by placement (never the current owner when another broker
//!   can take it), so there is no unowned window waiting for a client lookup.
//! * Only the leader aggregates reports (Pulsar's followers also read every report; PR #20970).
//! * A broker writes its zero time average only when none exists, so a restart does not erase flushed data.
//! * A shedding cycle waits until no move is in flight and the reports show the last moves; otherwise a
//!   strategy reading stale reports sheds the same load twice.
//! * Split children start with the parent's bundle data divided evenly, and are first owned by the parent's
//!   owner (Pulsar's `splitAndOwnBundle`); with `loadBalancerAutoUnloadSplitBundlesEnabled` the leader then
//!   places them anew.
//! * `memory` in reports is the host's (or cgroup's) memory, not a JVM heap; direct memory is 0 of 0 unless
//!   the host reports it. Memory carries weight 0 by default since Pulsar 3.0.
//!
//! # Time and randomness
//!
//! Timers and [`Clock`] run on tokio time, so agents on a shared `memory:NAME` store run under
//! `tokio::time::pause()` (the tests do). Randomness is the simulator's: with the seed [`AgentOptions::seed`] or
//! `loadmgrRandomSeed` (default 0), the k-th shedding tick of a leader's term (deferred ones included) draws from
//! `stream_rng(seed, Shedding, k)` and its n-th placement from `stream_rng(seed, Assignment, n)`
//! ([`crate::core::random::stream_rng`]); report checks start at a phase drawn from the seed and the broker id.
//! The same seed and inputs give the same decisions. At one instant the leader handles notifications (reports
//! first) before the flush, and the flush before the shedding tick — never in a random order.
//!
//! # Consistency with the simulator
//!
//! The leader's decisions are made once, by [`crate::core::leader::Leader`]; the [`leader`] task here and the
//! simulator ([`crate::sim::engine`]) are two executors of it. What else must agree is shared code too: the report
//! rules, check phase and extensible forced writes ([`report_rules`]), the periods (the `*_interval` methods of
//! [`Settings`](crate::config::Settings)), the cost model ([`synthetic`]), the random streams
//! ([`crate::core::random`]) and the order of same-instant work (above). `tests/consistency.rs` runs scenarios
//! through the simulator and through agents on a shared in-memory store under paused time (synthetic hosts with
//! the simulator's cost model, `costModel`) and asserts the same written reports at the same instants, the same
//! moves and splits and the same final owners, for every shedding strategy. It fails when the executors
//! diverge — the simulator's emulation of the store and the ownership agents, or this runtime's I/O order.

//! # Periods in tests
//!
//! The minute-based periods have millisecond overrides, off by default: `loadmgrSheddingIntervalMillis`,
//! `loadmgrResourceQuotaUpdateIntervalMillis`, `loadmgrHostUsageCheckIntervalMillis`,
//! `loadmgrReportUpdateMaxIntervalMillis` ([`Settings::shedding_interval`](crate::config::Settings::shedding_interval)
//! and its siblings).

pub mod admin;
pub mod agent;
pub mod clock;
pub mod cluster_policies;
pub mod history;
pub mod host;
pub mod host_usage;
pub mod http;
pub mod identity;
// Public for its module docs only: everything in it is `pub(crate)` or narrower.
pub mod leader;
pub mod meters;
pub mod monitor;
pub mod namespaces;
pub mod ownership;
pub mod requests;
pub mod shared;
pub mod snapshot;
pub mod synthetic;
pub mod view;

use std::time::Duration;

#[cfg(doc)]
use crate::core::report_rules;

pub use crate::model::records::{
    AdminRequest, AssignmentCause, AssignmentState, BundleAssignment, LeaderStatus, LookupAnswer,
    RequestOp, RequestResponse,
};
pub use agent::{AgentOptions, BrokerAgent, LookupClient};
pub use clock::Clock;
pub use host::{BrokerHost, HostError, IdleHost, OwnershipLease};
pub use identity::BrokerIdentity;
pub use requests::LookupResult;
pub use shared::AgentMetrics;
pub use synthetic::{SyntheticHost, SyntheticProfile};

/// Errors of the runtime and of the admin operations built on it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    /// The broker's configuration cannot be used.
    #[error("configuration: {0}")]
    Config(String),
    /// Another live process holds this broker's registration.
    #[error("broker {broker} is already registered in {store} by another live process (same advertisedAddress and webServicePort?)")]
    AlreadyRegistered {
        /// The broker id `advertisedAddress:webServicePort`.
        broker: String,
        /// The store's address (its URL without credentials).
        store: String,
    },
    /// A request needs the leader and none is elected.
    #[error("no leader is running: {what} needs one, and {store} has no /loadbalance/leader node (start a `loadmgr broker`)")]
    NoLeader {
        /// The request, as messages name it.
        what: String,
        /// The store's address (its URL without credentials).
        store: String,
    },
    /// Waiting for an answer or an owner took too long.
    #[error("timed out after {:.1}s waiting for {what}", .after.as_secs_f64())]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long it was awaited.
        after: Duration,
    },
    /// The answerer refused the request.
    #[error("{what} refused by {by}: {message}")]
    Rejected {
        /// The request.
        what: String,
        /// The broker that answered.
        by: String,
        /// Why.
        message: String,
    },
    /// A stored node does not hold what it should.
    #[error("{path}: malformed content: {reason}")]
    Malformed {
        /// The node.
        path: String,
        /// The decoder's message.
        reason: String,
    },
    /// A request or argument is not valid.
    #[error("{0}")]
    Invalid(String),
}
