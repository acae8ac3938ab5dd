//! The broker agent: registration and reports, the ownership task, dynamic configuration, answers to requests
//! addressed to this broker, and the leader task while this broker leads.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::clock::Clock;
use super::host::BrokerHost;
use super::host_usage::LinuxHostUsage;
use super::identity::BrokerIdentity;
use super::ownership::{OwnershipCommand, OwnershipTask};
use super::requests::{self, LookupResult};
use super::shared::{split_points, AgentMetrics, AgentShared};
use super::RuntimeError;
use crate::bundle::{format_hash, TopicName};
use crate::config::Settings;
use crate::coordination::{LeaderElection, LeaderState, ResourceLock};
use crate::core::report_rules::{
    extensible_reporting, forced_report_reason, report_check_phase_ms, report_update_reason,
    settled_reporting, ReportFigures, SettledReports,
};
use crate::model::records::{AdminRequest, RequestOp, RequestResponse};
use crate::model::{LocalBrokerData, TimeAverageBrokerData};
use crate::paths;
use crate::store::{
    CreateOptions, DynStore, Error, MetadataStoreExt, NotificationType, CREATE_ONLY,
};

/// Options of an agent beyond its settings.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// Seed of the leader's random choices; `None` takes `loadmgrRandomSeed`.
    pub seed: Option<u64>,
    /// The clock (default: the system time, advanced by tokio time).
    pub clock: Option<Clock>,
}

/// A running broker agent; see the [module docs](super). Stop it with [`BrokerAgent::shutdown`] (dropping it
/// aborts its tasks; the store session's ephemerals then vanish only when the store is closed).
#[derive(Debug)]
pub struct BrokerAgent {
    shared: Arc<AgentShared>,
    election: Option<Arc<LeaderElection>>,
    stop: watch::Sender<bool>,
    ownership: mpsc::Sender<OwnershipCommand>,
    reporter: Option<JoinHandle<()>>,
    supervisor: Option<JoinHandle<()>>,
    tasks: Vec<JoinHandle<()>>,
    leader_task: Arc<Mutex<Option<JoinHandle<()>>>>,
}

/// A cheap handle for lookups through an agent's store session.
#[derive(Debug, Clone)]
pub struct LookupClient {
    store: DynStore,
    requester: String,
}

impl LookupClient {
    /// The store session lookups go through.
    pub fn store(&self) -> &DynStore {
        &self.store
    }

    /// Finds (or has the leader assign) the owner of `topic`, waiting up to `timeout`.
    pub async fn lookup(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> Result<LookupResult, RuntimeError> {
        TopicName::parse(topic)
            .map_err(|e| RuntimeError::Invalid(format!("topic {topic}: {e}")))?;
        requests::lookup(&self.store, topic, &self.requester, timeout).await
    }
}

/// How long a broker keeps trying to register through transient store errors before its start fails.
const REGISTRATION_PATIENCE: Duration = Duration::from_secs(60);

impl BrokerAgent {
    /// Starts an agent for `host` on `store` (a session of its own: the registration and ownership nodes are
    /// its ephemerals): registers the broker, writes its zero time average if none exists, starts the
    /// ownership, configuration, request and report tasks and joins the leader election.
    ///
    /// Errors: [`RuntimeError::Config`] for an unusable identity, [`RuntimeError::AlreadyRegistered`] when
    /// another live process registered the same broker id, store errors (transient ones only after the
    /// registration was tried for a minute).
    pub async fn start(
        store: DynStore,
        settings: Settings,
        identity: BrokerIdentity,
        host: Arc<dyn BrokerHost>,
        options: AgentOptions,
    ) -> Result<BrokerAgent, RuntimeError> {
        identity.validate()?;
        let broker_id = identity.broker_id();
        let clock = options.clock.unwrap_or_default();
        let seed = options.seed.unwrap_or(settings.loadmgr_random_seed as u64);
        let (settings_tx, _) = watch::channel(settings.clone());
        let meters = super::meters::Meters::default();
        let store = super::meters::MeteredStore::wrap(store, meters.clone());
        let shared = Arc::new(AgentShared {
            ownership_data: identity.ownership_data(),
            broker_id: broker_id.clone(),
            identity,
            store: store.clone(),
            host,
            clock,
            settings: settings_tx,
            seed,
            owned: Mutex::new(BTreeSet::new()),
            served: Mutex::new(std::collections::BTreeMap::new()),
            fenced: AtomicBool::new(false),
            metrics: AgentMetrics::default(),
            last_loss_ms: AtomicI64::new(i64::MIN),
            stopping: AtomicBool::new(false),
            local_requests: Mutex::new(None),
            meters,
            leader_status: Mutex::new(None),
            last_usage: Mutex::new(None),
            history: Mutex::new(None),
        });
        let (stop, stop_rx) = watch::channel(false);

        // Dynamic configuration first, so every later step sees it.
        apply_dynamic_config(&shared, &settings).await;
        let config_task = tokio::spawn(config_loop(shared.clone(), settings, stop_rx.clone()));

        // Registration.
        let mut usage = HostUsage::new(&shared);
        let mut report = shared.identity.empty_report(shared.now_ms());
        report.update(
            &usage.current(&shared, shared.now_ms()),
            shared.host.bundle_stats(),
        );
        // A node held by another session may be this broker's previous incarnation (killed and restarted
        // before its session expired): wait one session timeout for it to go before giving up.
        let patience = Duration::from_millis(
            shared
                .settings()
                .metadata_store_session_timeout_millis
                .max(0) as u64,
        ) + Duration::from_secs(2);
        let waited_since = tokio::time::Instant::now();
        let registration = paths::broker(&broker_id);
        let lock = loop {
            // A store too busy to answer in time (a whole cluster starting at once) or briefly unreachable is
            // tried again, as a supervisor would restart the process, on a clock apart from `waited_since`:
            // store trouble must not use up the wait for a previous incarnation's node. An attempt that did
            // reach the store left a node of this session, which the next one takes as its own
            // (`coordination::claim`).
            let attempt = crate::store::retry_transient(
                &format!("register {broker_id}"),
                REGISTRATION_PATIENCE,
                || ResourceLock::acquire(store.clone(), &registration, &report),
            )
            .await;
            match attempt {
                Ok(l) => break l,
                Err(Error::LockBusy { .. }) if waited_since.elapsed() < patience => {
                    tracing::warn!(
                        broker = %broker_id,
                        "{} is held by another session; waiting up to {patience:?} for it to expire",
                        registration
                    );
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(Error::LockBusy { .. }) => {
                    config_task.abort();
                    return Err(RuntimeError::AlreadyRegistered {
                        broker: broker_id,
                        store: store.address(),
                    });
                }
                Err(e) => {
                    config_task.abort();
                    return Err(e.into());
                }
            }
        };
        // The first report is written now; the checks run from here (see `report_loop`).
        let registered_at = tokio::time::Instant::now();
        shared.report_written(&report);
        report.clean_deltas();
        tracing::info!(broker = %broker_id, store = %store.address(), "registered at {}", paths::broker(&broker_id));
        match store
            .put_json(
                &paths::time_average(&broker_id),
                &TimeAverageBrokerData::default(),
                Some(CREATE_ONLY),
                CreateOptions::PERSISTENT,
            )
            .await
        {
            Ok(_) | Err(Error::BadVersion { .. }) => {}
            Err(e) => tracing::warn!("cannot write the initial time average: {e}"),
        }

        // Ownership.
        let (own_tx, own_rx) = mpsc::channel(4);
        let (ready_tx, ready_rx) = oneshot::channel();
        let own_task = tokio::spawn(OwnershipTask::new(shared.clone()).run(own_rx, ready_tx));
        match ready_rx.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                config_task.abort();
                let _ = lock.release().await;
                return Err(e);
            }
            Err(_) => {
                config_task.abort();
                let _ = lock.release().await;
                return Err(RuntimeError::Invalid(
                    "the ownership task ended at start".into(),
                ));
            }
        }

        let requests_task = tokio::spawn(request_server(shared.clone(), stop_rx.clone()));
        let reporter = tokio::spawn(report_loop(
            shared.clone(),
            lock,
            report,
            usage,
            registered_at,
            stop_rx.clone(),
        ));

        // Leadership.
        let election = Arc::new(
            LeaderElection::start(store.clone(), paths::LEADER, shared.identity.leader_value())
                .await?,
        );
        let leader_task: Arc<Mutex<Option<JoinHandle<()>>>> = Arc::new(Mutex::new(None));
        let supervisor = tokio::spawn(leader_supervisor(
            shared.clone(),
            election.clone(),
            leader_task.clone(),
            stop_rx,
        ));
        Ok(BrokerAgent {
            shared,
            election: Some(election),
            stop,
            ownership: own_tx,
            reporter: Some(reporter),
            supervisor: Some(supervisor),
            tasks: vec![config_task, own_task, requests_task],
            leader_task,
        })
    }

    /// The state the agent's tasks share (for the web service).
    pub(crate) fn shared(&self) -> Arc<AgentShared> {
        self.shared.clone()
    }

    /// The broker id (`host:port`).
    pub fn broker_id(&self) -> &str {
        &self.shared.broker_id
    }

    /// Whether this agent leads now.
    pub fn is_leader(&self) -> bool {
        self.election.as_ref().is_some_and(|e| e.is_leader())
    }

    /// The election state.
    pub fn leader_state(&self) -> LeaderState {
        self.election
            .as_ref()
            .map_or(LeaderState::NoLeader, |e| e.state())
    }

    /// Bundles whose ownership node this broker holds now.
    pub fn owned_bundles(&self) -> BTreeSet<String> {
        self.shared.owned.lock().unwrap().clone()
    }

    /// The settings in effect (file settings plus dynamic configuration).
    pub fn settings(&self) -> Settings {
        self.shared.settings()
    }

    /// The agent's counters.
    pub fn metrics(&self) -> &AgentMetrics {
        &self.shared.metrics
    }

    /// A handle for lookups through this agent's store session.
    pub fn lookup_client(&self) -> LookupClient {
        LookupClient {
            store: self.shared.store.clone(),
            requester: self.shared.broker_id.clone(),
        }
    }

    /// Looks a topic up (see [`LookupClient::lookup`]).
    pub async fn lookup(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> Result<LookupResult, RuntimeError> {
        self.lookup_client().lookup(topic, timeout).await
    }

    /// Stops cleanly: stops leading (deleting the leader node, so a successor takes over at once),
    /// deregisters, releases every bundle (the leader then reassigns them) and stops the tasks. The store is
    /// left open for the caller to close.
    pub async fn shutdown(mut self) -> Result<(), RuntimeError> {
        tracing::info!(broker = %self.shared.broker_id, "shutting down");
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = self.stop.send(true);
        let leader = self.leader_task.lock().unwrap().take();
        if let Some(t) = leader {
            t.abort();
            let _ = t.await;
        }
        if let Some(s) = self.supervisor.take() {
            let _ = s.await;
        }
        // The leader task and the supervisor are gone, so this is the last handle: resigning stops the
        // election and deletes our leader node (by version), letting a successor take over at once.
        if let Some(election) = self.election.take() {
            match Arc::try_unwrap(election) {
                Ok(e) => e.resign().await?,
                Err(_) => tracing::warn!(
                    "the election is still shared; leaving the leader node to the session"
                ),
            }
        }
        // The reporter releases the registration when told to stop.
        if let Some(r) = self.reporter.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), r).await;
        }
        let (done_tx, done_rx) = oneshot::channel();
        if self
            .ownership
            .send(OwnershipCommand::Shutdown(done_tx))
            .await
            .is_ok()
        {
            let _ = tokio::time::timeout(Duration::from_secs(30), done_rx).await;
        }
        for t in self.tasks.drain(..) {
            t.abort();
        }
        tracing::info!(broker = %self.shared.broker_id, "stopped");
        Ok(())
    }
}

impl Drop for BrokerAgent {
    fn drop(&mut self) {
        if let Some(t) = self.leader_task.lock().unwrap().take() {
            t.abort();
        }
        if let Some(r) = self.reporter.take() {
            r.abort();
        }
        if let Some(s) = self.supervisor.take() {
            s.abort();
        }
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Host usage: the host's own figures, or a Linux sampler refreshed every host-usage interval.
pub(crate) struct HostUsage {
    sampler: Option<LinuxHostUsage>,
    last_sample: Option<tokio::time::Instant>,
    /// Epoch ms of the last sample (the check that took it).
    last_sample_ms: Option<i64>,
    /// Epoch ms at which the window of the figure at hand began: the check of the sample before it (a sampler
    /// measures from one sample to the next); `None` for a host that reports current usage (as of the check).
    measured_from_ms: Option<i64>,
}

impl HostUsage {
    fn new(sh: &AgentShared) -> Self {
        let sampler = sh.host.resource_usage().is_none().then(|| {
            LinuxHostUsage::new(sh.settings().load_balancer_override_broker_nic_speed_gbps)
        });
        Self {
            sampler,
            last_sample: None,
            last_sample_ms: None,
            measured_from_ms: None,
        }
    }

    /// Epoch ms at which the window of the figure [`Self::current`] last gave began; `None`: the usage is current
    /// as of the check that asked for it.
    fn measured_from_ms(&self) -> Option<i64> {
        self.measured_from_ms
    }

    /// The usage at the check of `now_ms` (epoch ms).
    fn current(&mut self, sh: &AgentShared, now_ms: i64) -> crate::model::SystemResourceUsage {
        if let Some(u) = sh.host.resource_usage() {
            self.measured_from_ms = None;
            return u;
        }
        let Some(s) = self.sampler.as_mut() else {
            return Default::default();
        };
        let every = sh.settings().host_usage_interval();
        let now = tokio::time::Instant::now();
        if self
            .last_sample
            .map_or(true, |t| now.duration_since(t) >= every)
        {
            self.last_sample = Some(now);
            self.measured_from_ms = Some(self.last_sample_ms.unwrap_or(now_ms));
            self.last_sample_ms = Some(now_ms);
            s.sample()
        } else {
            s.current()
        }
    }
}

/// The report task. The first report was written at registration (`registered_at`); the first check comes
/// [`report_check_phase_ms`] later (a phase from the seed and the broker id), then one every
/// `loadBalancerReportUpdateMinIntervalMillis`, on deadlines (no drift). Each check refreshes the report and
/// writes it when due ([`report_update_reason`], Pulsar's `needBrokerDataUpdate` in
/// `ModularLoadManagerImpl.java`) or, with [`extensible_reporting`], when [`forced_report_reason`] says so
/// (its bundles changed since the last write; or `loadBalanceSheddingDelayInSeconds` passed since it last
/// lost a bundle and nothing was written since) or, with [`settled_reporting`], when [`SettledReports::due`] says
/// so (its bundles changed since the last write, or its host usage was measured since a write that showed a
/// change) — never while disconnected. Re-registers when the
/// registration was lost. Releases the registration when told to stop.
async fn report_loop(
    sh: Arc<AgentShared>,
    mut lock: ResourceLock<LocalBrokerData>,
    mut report: LocalBrokerData,
    mut usage: HostUsage,
    registered_at: tokio::time::Instant,
    mut stop: watch::Receiver<bool>,
) {
    let mut written = report.clone();
    let mut settled = SettledReports::default();
    let first = sh.settings().report_check_interval();
    let phase = report_check_phase_ms(sh.seed, &sh.broker_id, first.as_millis() as i64);
    let mut due = registered_at + Duration::from_millis(phase.max(0) as u64);
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(due) => {}
            _ = stop.changed() => {
                if let Err(e) = lock.release().await {
                    tracing::warn!("deregistration failed: {e}");
                } else {
                    tracing::info!(broker = %sh.broker_id, "deregistered");
                }
                return;
            }
        }
        let settings = sh.settings();
        due += settings.report_check_interval();
        let late = tokio::time::Instant::now();
        if due <= late {
            // A check that took longer than the period (a slow store): go on from now rather than catch up.
            due = late + settings.report_check_interval();
        }
        // The check's time: the settled rule compares the usage's window with the time of the write.
        let now = sh.now_ms();
        report.update(&usage.current(&sh, now), sh.host.bundle_stats());
        if !sh.store.is_connected() {
            continue;
        }
        if !lock.is_held() {
            match ResourceLock::acquire(sh.store.clone(), &paths::broker(&sh.broker_id), &report)
                .await
            {
                Ok(l) => {
                    tracing::warn!(broker = %sh.broker_id, "registered again after the registration was lost");
                    sh.report_written(&report);
                    lock = l;
                    report.clean_deltas();
                    written = report.clone();
                    settled.reset();
                }
                Err(e) => tracing::error!(broker = %sh.broker_id, "cannot register again: {e}"),
            }
            continue;
        }
        let bundles_changed =
            !report.last_bundle_gains.is_empty() || !report.last_bundle_losses.is_empty();
        let due_now = report_update_reason(
            &written,
            &report,
            now,
            settings.report_max_interval().as_millis() as i64,
            &settings,
        )
        .or_else(|| {
            if !extensible_reporting(&settings) {
                return None;
            }
            forced_report_reason(
                bundles_changed,
                sh.last_loss_ms(),
                written.last_update,
                now,
                settings
                    .load_balance_shedding_delay_in_seconds
                    .saturating_mul(1000),
            )
            .map(|why| format!("forced: {why}"))
        })
        .or_else(|| {
            settled_reporting(&settings)
                .then(|| settled.due(bundles_changed, usage.measured_from_ms().unwrap_or(now)))
                .flatten()
                .map(|why| format!("forced: {why}"))
        });
        let Some(why) = due_now else {
            sh.metrics.reports_skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let previous = report.last_update;
        report.last_update = now;
        match lock.update_value(&report).await {
            Ok(()) => {
                tracing::debug!(broker = %sh.broker_id, "report written: {why}");
                sh.report_written(&report);
                report.clean_deltas();
                if settled_reporting(&settings) {
                    settled.written_figures(
                        Some(&ReportFigures::of(&written, &settings)),
                        &ReportFigures::of(&report, &settings),
                        &settings,
                        (now, usage.measured_from_ms().unwrap_or(now)),
                        bundles_changed,
                    );
                }
                written = report.clone();
            }
            Err(e) => {
                report.last_update = previous;
                tracing::warn!(broker = %sh.broker_id, "report write failed: {e}");
            }
        }
    }
}

/// Applies `/admin/configuration` (Pulsar's dynamic configuration, a JSON object of key → string) on top of
/// the file settings, key by key (see [`Settings::apply_dynamic_config`]): a bad key is skipped with a warning
/// and the others apply; a node that cannot be read or is not a JSON object keeps the current settings.
async fn apply_dynamic_config(sh: &AgentShared, base: &Settings) {
    let node = match sh
        .store
        .get_json::<serde_json::Value>(paths::DYNAMIC_CONFIGURATION)
        .await
    {
        Ok(Some((node, _))) => node,
        Ok(None) => serde_json::Value::Object(Default::default()),
        Err(e) => {
            tracing::warn!(
                "cannot read {}: {e}; keeping the current settings",
                paths::DYNAMIC_CONFIGURATION
            );
            return;
        }
    };
    let mut next = base.clone();
    match next.apply_dynamic_config(&node) {
        Ok(warnings) => {
            for w in warnings {
                tracing::warn!("{}: {w}", paths::DYNAMIC_CONFIGURATION);
            }
        }
        Err(e) => {
            tracing::warn!(
                "{}: {e}; keeping the current settings",
                paths::DYNAMIC_CONFIGURATION
            );
            return;
        }
    }
    sh.settings.send_if_modified(|current| {
        if *current == next {
            return false;
        }
        for (key, value) in next.entries() {
            if current.get(key).as_deref() != Some(value.as_str()) {
                tracing::info!(broker = %sh.broker_id, "dynamic configuration: {key}={value}");
            }
        }
        *current = next;
        true
    });
}

async fn config_loop(sh: Arc<AgentShared>, base: Settings, mut stop: watch::Receiver<bool>) {
    let mut notifications = match sh.store.watch(paths::DYNAMIC_CONFIGURATION).await {
        Ok(n) => n,
        Err(e) => {
            tracing::error!("cannot watch {}: {e}", paths::DYNAMIC_CONFIGURATION);
            return;
        }
    };
    let mut events = sh.store.session_events();
    loop {
        tokio::select! {
            n = notifications.next() => match n {
                None => return,
                Some(n) if n.path == paths::DYNAMIC_CONFIGURATION => apply_dynamic_config(&sh, &base).await,
                Some(_) => {}
            },
            e = events.next() => match e {
                None => return,
                Some(e) if e.is_connected() => apply_dynamic_config(&sh, &base).await,
                Some(_) => {}
            },
            _ = stop.changed() => return,
        }
    }
}

/// Answers requests addressed to this broker (`target` = its id): the split points of a bundle it serves.
async fn request_server(sh: Arc<AgentShared>, mut stop: watch::Receiver<bool>) {
    let mut notifications = match sh.store.watch(paths::REQUESTS).await {
        Ok(n) => n,
        Err(e) => {
            tracing::error!("cannot watch {}: {e}", paths::REQUESTS);
            return;
        }
    };
    loop {
        let n = tokio::select! {
            n = notifications.next() => n,
            _ = stop.changed() => return,
        };
        let Some(n) = n else { return };
        if n.kind != NotificationType::Created || n.path == paths::REQUESTS {
            continue;
        }
        let Ok(Some((request, stat))) = sh.store.get_json::<AdminRequest>(&n.path).await else {
            continue;
        };
        if request.response.is_some() || request.target.as_deref() != Some(sh.broker_id.as_str()) {
            continue;
        }
        let (ok, message, result) = match &request.op {
            RequestOp::SplitPoints {
                bundle,
                algorithm,
                positions,
            } => match split_points(&sh, bundle, algorithm, positions) {
                Ok(points) => (
                    true,
                    format!("{} split point(s)", points.len()),
                    serde_json::json!(points.iter().map(|p| format_hash(*p)).collect::<Vec<_>>()),
                ),
                Err(e) => (false, e, serde_json::Value::Null),
            },
            other => (
                false,
                format!(
                    "{} is answered by the leader, not by a broker",
                    other.describe()
                ),
                serde_json::Value::Null,
            ),
        };
        let response = RequestResponse {
            ok,
            message,
            result,
            answered_by: sh.broker_id.clone(),
            answered_ms: sh.now_ms(),
        };
        if let Err(e) =
            requests::answer_unfenced(&sh.store, &n.path, &request, &stat, response).await
        {
            tracing::warn!(path = %n.path, "cannot answer: {e}");
        }
    }
}

/// Starts the leader task when this broker is elected and aborts it the moment it is not.
async fn leader_supervisor(
    sh: Arc<AgentShared>,
    election: Arc<LeaderElection>,
    slot: Arc<Mutex<Option<JoinHandle<()>>>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut states = election.subscribe();
    loop {
        let leading = *states.borrow_and_update() == LeaderState::Leading;
        {
            let mut slot = slot.lock().unwrap();
            let running = slot.as_ref().is_some_and(|t| !t.is_finished());
            if leading && !running && !sh.stopping() {
                sh.metrics.leaderships.fetch_add(1, Ordering::Relaxed);
                tracing::info!(broker = %sh.broker_id, "became leader");
                *slot = Some(tokio::spawn(super::leader::run(
                    sh.clone(),
                    election.clone(),
                )));
            } else if !leading {
                if let Some(t) = slot.take() {
                    if !t.is_finished() {
                        tracing::warn!(broker = %sh.broker_id, "no longer leader: leader tasks stopped");
                    }
                    t.abort();
                }
            }
        }
        tokio::select! {
            r = states.changed() => if r.is_err() { return },
            _ = stop.changed() => return,
            // A leader task that ended by itself (fenced, store closed) is restarted while we still lead.
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
