//! The state an agent's tasks share (the reporter, the ownership task, the request server and the leader),
//! and what the agent and the leader both compute from it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch};

use super::clock::Clock;
use super::host::{BrokerHost, OwnershipLease};
use super::identity::BrokerIdentity;
use crate::bundle::{split_bundle, BundleName, SplitAlgorithm, SplitOutcome, TopicName};
use crate::config::Settings;
use crate::model::NamespaceEphemeralData;
use crate::store::DynStore;

/// Counters of one agent.
#[derive(Debug, Default)]
pub struct AgentMetrics {
    /// Reports written.
    pub reports_written: AtomicU64,
    /// Report checks that found no reason to write.
    pub reports_skipped: AtomicU64,
    /// Broker nodes the leader could not read as a report (logged and skipped).
    pub malformed_reports: AtomicU64,
    /// Times this agent became leader.
    pub leaderships: AtomicU64,
}

/// State shared by the agent's tasks.
#[derive(Debug)]
pub(crate) struct AgentShared {
    pub(crate) store: DynStore,
    pub(crate) identity: BrokerIdentity,
    pub(crate) broker_id: String,
    pub(crate) ownership_data: NamespaceEphemeralData,
    pub(crate) host: Arc<dyn BrokerHost>,
    pub(crate) clock: Clock,
    /// File settings with the dynamic configuration applied.
    pub(crate) settings: watch::Sender<Settings>,
    pub(crate) seed: u64,
    /// Bundles whose ownership node this broker holds.
    pub(crate) owned: Mutex<BTreeSet<String>>,
    /// Bundles the host was told to serve, with the lease it was given (revoked when the bundle is released
    /// or the session lost).
    pub(crate) served: Mutex<BTreeMap<String, OwnershipLease>>,
    /// Set from the store's `SessionLost` until the session is back: nothing may start being served then,
    /// since the session's ownership nodes may already belong to someone else.
    pub(crate) fenced: AtomicBool,
    pub(crate) metrics: AgentMetrics,
    /// When this broker last stopped serving a bundle (released or lost it), epoch ms; `i64::MIN` when
    /// never. Extensible reporting writes a report `loadBalanceSheddingDelayInSeconds` after it.
    pub(super) last_loss_ms: AtomicI64,
    pub(super) stopping: AtomicBool,
    /// While this broker leads: the leader task's inbox for requests from this process (the web service's
    /// lookups), answered without a request node in the store.
    pub(crate) local_requests: Mutex<Option<mpsc::UnboundedSender<LocalRequest>>>,
    /// Counters and histograms for `/metrics`.
    pub(crate) meters: super::meters::Meters,
    /// While this broker leads: its leader core's counters as of the last event (what `/loadmgr/v1/status`
    /// answers; the store's `/loadmgr/leader-status` is written only with each flush).
    pub(crate) leader_status: Mutex<Option<crate::model::records::LeaderStatus>>,
    /// The usages of the last report this broker wrote (Pulsar's `pulsar_lb_*_usage` gauges), kept so that
    /// `/metrics` need not read the report back from the store.
    pub(crate) last_usage: Mutex<Option<crate::model::SystemResourceUsage>>,
    /// While this broker leads: what its leader task has seen lately (reports, moves, splits), for the
    /// dashboard ([`super::history`]).
    pub(crate) history: Mutex<Option<super::history::History>>,
}

/// A request to this broker's leader task from the same process, with where the answer goes.
#[derive(Debug)]
pub(crate) struct LocalRequest {
    pub(crate) request: crate::core::leader::Request,
    pub(crate) reply: oneshot::Sender<crate::core::leader::Answer>,
}

impl AgentShared {
    /// Hands `request` to this broker's leader task and waits for the core's answer; `None` when this
    /// broker does not lead (any more).
    pub(crate) async fn ask_leader(
        &self,
        request: crate::core::leader::Request,
    ) -> Option<crate::core::leader::Answer> {
        let (reply, answer) = oneshot::channel();
        let inbox = self.local_requests.lock().unwrap().clone()?;
        inbox.send(LocalRequest { request, reply }).ok()?;
        answer.await.ok()
    }
}

impl AgentShared {
    /// Notes that `report` was written to this broker's registration node.
    pub(crate) fn report_written(&self, report: &crate::model::LocalBrokerData) {
        self.metrics.reports_written.fetch_add(1, Ordering::Relaxed);
        *self.last_usage.lock().unwrap() = Some(report.usage());
    }

    pub(crate) fn settings(&self) -> Settings {
        self.settings.borrow().clone()
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Notes that this broker stopped serving a bundle now.
    pub(crate) fn note_bundle_lost(&self) {
        self.last_loss_ms.store(self.now_ms(), Ordering::SeqCst);
    }

    pub(super) fn last_loss_ms(&self) -> Option<i64> {
        Some(self.last_loss_ms.load(Ordering::SeqCst)).filter(|t| *t != i64::MIN)
    }
}

/// Split points of a bundle this broker serves, from the host's topics.
pub(crate) fn split_points(
    sh: &AgentShared,
    bundle: &str,
    algorithm: &str,
    positions: &[String],
) -> Result<Vec<u64>, String> {
    let name = BundleName::parse(bundle).map_err(|e| e.to_string())?;
    let algorithm: SplitAlgorithm = algorithm
        .parse()
        .map_err(|e: crate::bundle::BundleError| e.to_string())?;
    if !sh.served.lock().unwrap().contains_key(bundle) {
        return Err(format!("{} does not serve {bundle}", sh.broker_id));
    }
    let settings = sh.settings();
    let mut input = crate::core::split::split_input(&settings);
    input.positions = positions
        .iter()
        .map(|p| crate::bundle::parse_hash(p).map_err(|e| format!("position {p}: {e}")))
        .collect::<Result<_, _>>()?;
    for (topic, traffic) in sh.host.bundle_topics(bundle) {
        let t = TopicName::parse(&topic)
            .map_err(|e| format!("the host reported topic {topic}: {e}"))?;
        input.topics.push(t);
        input.traffic.insert(topic, traffic);
    }
    match split_bundle(name.range(), algorithm, &input).map_err(|e| e.to_string())? {
        SplitOutcome::Split(points) => Ok(points),
        SplitOutcome::NoSplit(why) => {
            Err(format!("{} gives no split point: {why}", algorithm.name()))
        }
    }
}
