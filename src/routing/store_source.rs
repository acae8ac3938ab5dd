//! The store-fed load source: Pulsar broker reports and failure domains read from the metadata store, kept
//! current from its notifications, and pushed into a [`LoadAwareRouter`].
//!
//! # What it reads
//!
//! * **Broker reports** at [`BROKERS_PATH`]`/<brokerId>`: a modular `LocalBrokerData` or a Simple
//!   `LoadReport`, told apart by Pulsar's rule ([`BrokerReport::parse`]). Every child of
//!   `/loadbalance/brokers` is a broker; its load is its report's maximum resource usage.
//! * **Failure domains**, only when a cluster name is given (Pulsar reads them only with
//!   `failureDomainsEnabled`), at `/admin/clusters/<cluster>/failureDomain/<domainName>`
//!   ([`crate::paths::failure_domains`]) with Pulsar's `FailureDomainImpl` JSON `{"brokers":["host:port",...]}`.
//!   The broker strings are broker ids, the names under `/loadbalance/brokers`. A broker listed by two
//!   domains is put in the one whose name sorts last; a broker in none is in
//!   [`PULSAR_DEFAULT_DOMAIN`](super::PULSAR_DEFAULT_DOMAIN). Pulsar keeps these nodes in the
//!   *configuration* store, which may be another store than the one holding the reports:
//!   [`StoreSourceOptions::domains_store`].
//!
//! # How it stays current
//!
//! [`StoreLoadSource::start`] subscribes first, then reads every report and domain once, so no change is
//! lost between the two. A background task then follows the notifications under both paths: a created or
//! modified node is read again (that node only), a deleted one is dropped. Notifications that arrive
//! together are handled as one batch and cost one router update. After the store reports `Reconnected` or
//! `SessionReestablished` (events may have been missed meanwhile) everything is read again; a read that fails
//! (the store is cut off) schedules such a full read with exponential backoff (0.1 s doubling to 5 s).
//!
//! # What it feeds
//!
//! Each update runs [`BrokerRouting::update_reports`] and then, in this order:
//! 1. replaces the remote map of the [`LoadMapping`] with the brokers' loads (the source owns that map);
//! 2. if the set of brokers or their placement changed, calls [`LoadAwareRouter::set_topology`] (the first
//!    time a broker is seen, creates the router instead).
//!
//! Between the two steps a broker that has just vanished is still a target but has no load, so it reads as
//! fully loaded (the not-connected rule) until `set_topology` removes it. The router needs at least one
//! target: while no broker reports, [`StoreLoadSource::choose`] answers `None` and the router keeps its last
//! topology with no loads. With [`StoreSourceOptions::refresh_loop`] (the default) the source also runs
//! [`run_refresh_loop`] on the router once it exists.
//!
//! # Bad data
//!
//! A node that is not a report (or not a failure domain) is skipped with a warning and counted in
//! [`SourceStatus::malformed`]; it never stops the source. A broker whose report turns malformed keeps its
//! last good report (Pulsar's load manager keeps its cached data likewise); a broker never read successfully
//! is no target.
//!
//! # Stopping
//!
//! [`StoreLoadSource::shutdown`] stops the background tasks and waits for them; dropping the source stops
//! them too (without waiting). The store itself is left open.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use futures::StreamExt as _;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{
    run_refresh_loop, BrokerReport, BrokerRouting, LoadAwareRouter, LoadMapping, Location,
    RouterConfig, RoutingError, TargetId, Topology,
};
use crate::model::nodes::parse_failure_domain;
use crate::store::{
    validate_path, DynStore, Error as StoreError, EventStream, Notification, NotificationStream,
    NotificationType, SessionEvent, SessionEventStream,
};

/// Where brokers keep their load reports, one child per broker id.
pub const BROKERS_PATH: &str = "/loadbalance/brokers";

/// Delay before the first retry of a failed read; doubles per failure.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// Longest delay between retries of a failed read.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Reads in flight at once during a full read.
const READ_CONCURRENCY: usize = 16;

/// Settings of a [`StoreLoadSource`].
#[derive(Debug, Clone)]
pub struct StoreSourceOptions {
    /// Where the sender runs; targets are classified relative to it (see [`BrokerRouting`]).
    pub source: Location,
    /// Settings of the router the source creates.
    pub router: RouterConfig,
    /// Run [`run_refresh_loop`] on the router (default true). Without it the caller refreshes.
    pub refresh_loop: bool,
    /// The store holding the failure domains (Pulsar's configuration store), if not the same store as the
    /// broker reports.
    pub domains_store: Option<DynStore>,
}

impl StoreSourceOptions {
    /// Default router settings, a refresh loop, failure domains in the same store.
    pub fn new(source: Location) -> Self {
        Self {
            source,
            router: RouterConfig::default(),
            refresh_loop: true,
            domains_store: None,
        }
    }

    /// Sets the router settings.
    pub fn with_router(mut self, config: RouterConfig) -> Self {
        self.router = config;
        self
    }

    /// Leaves refreshing the router to the caller.
    pub fn without_refresh_loop(mut self) -> Self {
        self.refresh_loop = false;
        self
    }

    /// Reads the failure domains from another store (Pulsar's configuration store).
    pub fn with_domains_store(mut self, store: DynStore) -> Self {
        self.domains_store = Some(store);
        self
    }
}

/// Why a [`StoreLoadSource`] could not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreSourceError {
    /// The store failed (the first read or a subscription), or the cluster name makes no valid path.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The router settings are invalid.
    #[error(transparent)]
    Routing(#[from] RoutingError),
}

/// What the source has read and done so far ([`StoreLoadSource::status`], [`StoreLoadSource::subscribe`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceStatus {
    /// The brokers currently fed to the router, with the load given to each (a fraction in `0.0..=1.0`).
    pub brokers: BTreeMap<String, f64>,
    /// Broker id → failure domain, as read (brokers listed by a domain, reporting or not).
    pub domains: BTreeMap<String, String>,
    /// Router updates: each one a new load map, and a new topology if it changed.
    pub updates: u64,
    /// Malformed nodes read and skipped (a node read twice counts twice).
    pub malformed: u64,
    /// Full reads after the first (after a reconnection or a failed read).
    pub resyncs: u64,
    /// Store reads that failed (each schedules a full read).
    pub read_errors: u64,
}

struct Shared {
    router: ArcSwapOption<LoadAwareRouter>,
    loads: Arc<LoadMapping>,
    has_targets: AtomicBool,
    routing: Mutex<BrokerRouting>,
    status: watch::Sender<SourceStatus>,
    refresh_task: Mutex<Option<JoinHandle<u64>>>,
}

impl Shared {
    fn routing(&self) -> MutexGuard<'_, BrokerRouting> {
        self.routing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn take_refresh_task(&self) -> Option<JoinHandle<u64>> {
        self.refresh_task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// Broker loads and locations from the metadata store, fed into a [`LoadAwareRouter`]; see the
/// [module docs](self).
pub struct StoreLoadSource {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for StoreLoadSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreLoadSource")
            .field("status", &*self.shared.status.borrow())
            .field("router", &self.shared.router.load_full())
            .finish()
    }
}

impl StoreLoadSource {
    /// Subscribes to the broker reports (and, with `cluster`, to that cluster's failure domains), reads them
    /// all once, feeds the router, and keeps following the store in a background task. Needs a Tokio
    /// runtime.
    ///
    /// # Errors
    ///
    /// [`StoreSourceError::Routing`] for invalid router bounds; [`StoreSourceError::Store`] if the cluster
    /// name is not one path segment, or if subscribing or the first read fails.
    pub async fn start(
        store: DynStore,
        cluster: Option<String>,
        options: StoreSourceOptions,
    ) -> Result<StoreLoadSource, StoreSourceError> {
        options.router.validate()?;
        let domains_root = match cluster.as_deref() {
            None => None,
            Some(c) if c.is_empty() || c.contains('/') => {
                return Err(StoreError::InvalidPath {
                    path: crate::paths::failure_domains(c),
                    reason: format!("cluster name {c:?} is not one path segment"),
                }
                .into())
            }
            Some(c) => {
                let root = crate::paths::failure_domains(c);
                validate_path(&root)?;
                Some(root)
            }
        };
        let separate_domains_store = options.domains_store.is_some();
        let domains_store = options
            .domains_store
            .clone()
            .unwrap_or_else(|| store.clone());

        // Subscribe before the first read, so that nothing changed in between is missed.
        let brokers = store.watch(BROKERS_PATH).await?;
        let events = store.session_events();
        let (domains, domain_events) = match &domains_root {
            Some(root) => (
                Some(domains_store.watch(root).await?),
                separate_domains_store.then(|| domains_store.session_events()),
            ),
            None => (None, None),
        };

        let (status, _) = watch::channel(SourceStatus::default());
        let shared = Arc::new(Shared {
            router: ArcSwapOption::empty(),
            loads: Arc::new(LoadMapping::new()),
            has_targets: AtomicBool::new(false),
            routing: Mutex::new(BrokerRouting::new()),
            status,
            refresh_task: Mutex::new(None),
        });
        let (stop, stop_rx) = watch::channel(false);
        let mut worker = Worker {
            shared: shared.clone(),
            store,
            domains_store,
            domains_root,
            source: options.source,
            config: options.router,
            refresh_loop: options.refresh_loop,
            stop: stop_rx.clone(),
            reports: BTreeMap::new(),
            domains: BTreeMap::new(),
            fed_topology: None,
            fed_loads: None,
            counters: Counters::default(),
        };
        worker.full_read().await?;
        worker.apply();
        let streams = Streams {
            brokers,
            domains,
            events,
            domain_events,
        };
        let task = tokio::spawn(run(worker, streams, stop_rx));
        Ok(StoreLoadSource {
            shared,
            stop,
            task: Some(task),
        })
    }

    /// The router, once at least one broker has reported (it is created then and kept for the life of the
    /// source).
    pub fn router(&self) -> Option<Arc<LoadAwareRouter>> {
        self.shared.router.load_full()
    }

    /// The load mapping the router is refreshed from; the source replaces its remote map on every update.
    pub fn loads(&self) -> Arc<LoadMapping> {
        self.shared.loads.clone()
    }

    /// The next target ([`LoadAwareRouter::choose`]), or `None` while no broker reports. Lock-free and
    /// allocation-free.
    pub fn choose(&self) -> Option<TargetId> {
        if !self.shared.has_targets.load(Ordering::Acquire) {
            return None;
        }
        self.shared.router.load().as_ref().map(|r| r.choose())
    }

    /// The broker id of the next target ([`Self::choose`]); takes a short lock and allocates the id.
    pub fn choose_broker(&self) -> Option<String> {
        self.choose().and_then(|t| self.broker_id(t))
    }

    /// The broker behind a target id.
    pub fn broker_id(&self, target: TargetId) -> Option<String> {
        self.shared.routing().broker_id(target).map(str::to_string)
    }

    /// The target id of a broker seen before (ids are stable for the life of the source).
    pub fn target_id(&self, broker: &str) -> Option<TargetId> {
        self.shared.routing().target_id(broker)
    }

    /// What the source has read and done so far.
    pub fn status(&self) -> SourceStatus {
        self.shared.status.borrow().clone()
    }

    /// Status changes, the current status first (for waiting until the source has seen something).
    pub fn subscribe(&self) -> watch::Receiver<SourceStatus> {
        self.shared.status.subscribe()
    }

    /// Stops following the store and the refresh loop, and waits until both tasks have ended. The router
    /// and the load mapping stay usable as they are.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        // The worker has ended: no refresh loop can be started any more.
        if let Some(refresh) = self.shared.take_refresh_task() {
            let _ = refresh.await;
        }
    }
}

impl Drop for StoreLoadSource {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(refresh) = self.shared.take_refresh_task() {
            refresh.abort();
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    updates: u64,
    malformed: u64,
    resyncs: u64,
    read_errors: u64,
}

/// The subscriptions the background task follows.
struct Streams {
    brokers: NotificationStream,
    domains: Option<NotificationStream>,
    events: SessionEventStream,
    /// Session events of a separate domains store.
    domain_events: Option<SessionEventStream>,
}

/// Nodes to read again: name → deleted (the last notification was a deletion).
#[derive(Debug, Default)]
struct Dirty {
    brokers: BTreeMap<String, bool>,
    domains: BTreeMap<String, bool>,
    resync: bool,
}

impl Dirty {
    fn is_empty(&self) -> bool {
        self.brokers.is_empty() && self.domains.is_empty() && !self.resync
    }
}

/// The state the background task owns.
struct Worker {
    shared: Arc<Shared>,
    store: DynStore,
    domains_store: DynStore,
    domains_root: Option<String>,
    source: Location,
    config: RouterConfig,
    refresh_loop: bool,
    stop: watch::Receiver<bool>,
    /// Broker id → last good report.
    reports: BTreeMap<String, BrokerReport>,
    /// Domain name → its brokers.
    domains: BTreeMap<String, BTreeSet<String>>,
    /// What the router was last given.
    fed_topology: Option<Topology>,
    fed_loads: Option<BTreeMap<TargetId, f64>>,
    counters: Counters,
}

/// The direct child name of `parent` that `path` names, if it names one.
fn child_of<'a>(path: &'a str, parent: &str) -> Option<&'a str> {
    let name = path.strip_prefix(parent)?.strip_prefix('/')?;
    (!name.is_empty() && !name.contains('/')).then_some(name)
}

/// Records a notification for a direct child of `parent` in `into`.
fn note(into: &mut BTreeMap<String, bool>, parent: &str, n: &Notification) {
    let Some(name) = child_of(&n.path, parent) else {
        return;
    };
    match n.kind {
        NotificationType::Created | NotificationType::Modified => {
            into.insert(name.to_string(), false);
        }
        NotificationType::Deleted => {
            into.insert(name.to_string(), true);
        }
        NotificationType::ChildrenChanged => {}
    }
}

async fn next_or_pending<T>(stream: &mut Option<EventStream<T>>) -> Option<T> {
    match stream {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_or_pending(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Whether a session event means changes may have been missed (read everything again).
fn on_session_event(store: &str, event: SessionEvent) -> bool {
    match event {
        SessionEvent::ConnectionLost | SessionEvent::SessionLost => {
            tracing::info!(
                store,
                ?event,
                "load source cut off from the store; routing on the last loads read"
            );
            false
        }
        SessionEvent::Reconnected | SessionEvent::SessionReestablished => {
            tracing::info!(store, ?event, "load source reading everything again");
            true
        }
    }
}

/// The background task: notifications and session events in, router updates out.
async fn run(mut w: Worker, mut s: Streams, mut stop: watch::Receiver<bool>) {
    let mut backoff = MIN_BACKOFF;
    let mut retry_at: Option<Instant> = None;
    let domains_root = w.domains_root.clone().unwrap_or_default();
    let (store_name, domains_store_name) = (w.store.address(), w.domains_store.address());
    loop {
        let mut dirty = Dirty::default();
        tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => return,
            n = s.brokers.next() => match n {
                Some(n) => note(&mut dirty.brokers, BROKERS_PATH, &n),
                None => {
                    tracing::info!(store = %store_name, "store closed; load source stops");
                    return;
                }
            },
            n = next_or_pending(&mut s.domains) => match n {
                Some(n) => note(&mut dirty.domains, &domains_root, &n),
                None => {
                    tracing::warn!(store = %domains_store_name, "domains store closed; keeping the last failure domains");
                    s.domains = None;
                    s.domain_events = None;
                }
            },
            e = s.events.next() => match e {
                Some(e) => dirty.resync |= on_session_event(&store_name, e),
                None => {
                    tracing::info!(store = %store_name, "store closed; load source stops");
                    return;
                }
            },
            e = next_or_pending(&mut s.domain_events) => match e {
                Some(e) => dirty.resync |= on_session_event(&domains_store_name, e),
                None => s.domain_events = None,
            },
            () = sleep_until_or_pending(retry_at) => dirty.resync = true,
        }
        // Take whatever else is queued, so that a burst of changes costs one router update.
        while let Some(n) = s.brokers.try_next() {
            note(&mut dirty.brokers, BROKERS_PATH, &n);
        }
        if let Some(domains) = s.domains.as_mut() {
            while let Some(n) = domains.try_next() {
                note(&mut dirty.domains, &domains_root, &n);
            }
        }
        while let Some(e) = s.events.try_next() {
            dirty.resync |= on_session_event(&store_name, e);
        }
        if let Some(events) = s.domain_events.as_mut() {
            while let Some(e) = events.try_next() {
                dirty.resync |= on_session_event(&domains_store_name, e);
            }
        }
        if dirty.is_empty() {
            continue;
        }

        let read = if dirty.resync {
            w.full_read().await.map(|()| w.counters.resyncs += 1)
        } else {
            w.reread(&dirty).await
        };
        match read {
            Ok(()) => {
                if dirty.resync {
                    retry_at = None;
                    backoff = MIN_BACKOFF;
                }
            }
            Err(e) => {
                w.counters.read_errors += 1;
                tracing::warn!(
                    "load source could not read the store ({e}); reading everything again in {backoff:?}"
                );
                retry_at = Some(Instant::now() + backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        w.apply();
    }
}

impl Worker {
    /// Reads every broker report and failure domain, replacing what was known.
    async fn full_read(&mut self) -> Result<(), StoreError> {
        let names = self.store.get_children(BROKERS_PATH).await?;
        let store = &self.store;
        let results: Vec<_> = futures::stream::iter(names)
            .map(|name| async move {
                let read = store.get(&format!("{BROKERS_PATH}/{name}")).await;
                (name, read)
            })
            .buffer_unordered(READ_CONCURRENCY)
            .collect()
            .await;
        let mut reports = BTreeMap::new();
        for (name, read) in results {
            let Some(found) = read? else { continue };
            match self.parse_report(&name, &found.value) {
                Some(report) => {
                    reports.insert(name, report);
                }
                None => {
                    if let Some(old) = self.reports.get(&name) {
                        reports.insert(name, old.clone());
                    }
                }
            }
        }

        let mut domains = BTreeMap::new();
        if let Some(root) = &self.domains_root {
            let names = self.domains_store.get_children(root).await?;
            let store = &self.domains_store;
            let results: Vec<_> = futures::stream::iter(names)
                .map(|name| async move {
                    let read = store.get(&format!("{root}/{name}")).await;
                    (name, read)
                })
                .buffer_unordered(READ_CONCURRENCY)
                .collect()
                .await;
            for (name, read) in results {
                let Some(found) = read? else { continue };
                match self.parse_domain(&name, &found.value) {
                    Some(brokers) => {
                        domains.insert(name, brokers);
                    }
                    None => {
                        if let Some(old) = self.domains.get(&name) {
                            domains.insert(name, old.clone());
                        }
                    }
                }
            }
        }
        self.reports = reports;
        self.domains = domains;
        Ok(())
    }

    /// Reads the changed nodes again (deleted ones are dropped without a read).
    async fn reread(&mut self, dirty: &Dirty) -> Result<(), StoreError> {
        for (name, deleted) in &dirty.brokers {
            if *deleted {
                self.reports.remove(name);
                continue;
            }
            match self.store.get(&format!("{BROKERS_PATH}/{name}")).await? {
                None => {
                    self.reports.remove(name);
                }
                Some(found) => {
                    if let Some(report) = self.parse_report(name, &found.value) {
                        self.reports.insert(name.clone(), report);
                    }
                }
            }
        }
        if let Some(root) = self.domains_root.clone() {
            for (name, deleted) in &dirty.domains {
                if *deleted {
                    self.domains.remove(name);
                    continue;
                }
                match self.domains_store.get(&format!("{root}/{name}")).await? {
                    None => {
                        self.domains.remove(name);
                    }
                    Some(found) => {
                        if let Some(brokers) = self.parse_domain(name, &found.value) {
                            self.domains.insert(name.clone(), brokers);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn parse_report(&mut self, broker: &str, bytes: &[u8]) -> Option<BrokerReport> {
        match BrokerReport::parse(bytes) {
            Ok(report) => Some(report),
            Err(e) => {
                self.counters.malformed += 1;
                tracing::warn!(
                    path = %format!("{BROKERS_PATH}/{broker}"),
                    "skipping a malformed broker report: {e}"
                );
                None
            }
        }
    }

    fn parse_domain(&mut self, domain: &str, bytes: &[u8]) -> Option<BTreeSet<String>> {
        match parse_failure_domain(bytes) {
            Ok(brokers) => Some(brokers),
            Err(e) => {
                self.counters.malformed += 1;
                tracing::warn!(
                    path = %format!("{}/{domain}", self.domains_root.as_deref().unwrap_or_default()),
                    "skipping a malformed failure domain: {e}"
                );
                None
            }
        }
    }

    /// Broker id → domain; domains in name order, so a broker listed twice ends in the last one.
    fn broker_domains(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (domain, brokers) in &self.domains {
            for broker in brokers {
                out.insert(broker.clone(), domain.clone());
            }
        }
        out
    }

    /// Feeds the router from what is known now (nothing if nothing changed since the last time) and
    /// publishes the status.
    fn apply(&mut self) {
        let domains = self.broker_domains();
        let (snapshot, brokers) = {
            let mut routing = self.shared.routing();
            let snapshot = routing.update_reports(&self.source, &self.reports, &domains);
            let brokers: BTreeMap<String, f64> = snapshot
                .loads
                .iter()
                .filter_map(|(id, load)| Some((routing.broker_id(*id)?.to_string(), *load)))
                .collect();
            (snapshot, brokers)
        };
        let topology_changed = self.fed_topology.as_ref() != Some(&snapshot.topology);
        let loads_changed = self.fed_loads.as_ref() != Some(&snapshot.loads);
        if topology_changed || loads_changed {
            self.counters.updates += 1;
            // Loads first: a broker that is gone has no load (reads as fully loaded) until the topology
            // drops it, and a new broker has its load before it becomes a target.
            self.shared.loads.set_remote(snapshot.remote_loads());
            if snapshot.topology.targets.is_empty() {
                self.shared.has_targets.store(false, Ordering::Release);
                if topology_changed {
                    tracing::warn!("no broker reports: nothing to route to");
                }
            } else if topology_changed {
                self.feed_topology(&snapshot.topology);
            }
            self.fed_topology = Some(snapshot.topology);
            self.fed_loads = Some(snapshot.loads);
        }
        let counters = self.counters;
        self.shared.status.send_if_modified(|status| {
            let next = SourceStatus {
                brokers,
                domains,
                updates: counters.updates,
                malformed: counters.malformed,
                resyncs: counters.resyncs,
                read_errors: counters.read_errors,
            };
            if *status == next {
                false
            } else {
                *status = next;
                true
            }
        });
    }

    fn feed_topology(&mut self, topology: &Topology) {
        if let Some(router) = self.shared.router.load_full() {
            match router.set_topology(topology) {
                Ok(()) => self.shared.has_targets.store(true, Ordering::Release),
                Err(e) => tracing::warn!("broker topology rejected by the router: {e}"),
            }
            return;
        }
        let router = match LoadAwareRouter::new(topology, self.config.clone()) {
            Ok(router) => Arc::new(router),
            Err(e) => {
                tracing::warn!("cannot build a router over the brokers: {e}");
                return;
            }
        };
        self.shared.router.store(Some(router.clone()));
        self.shared.has_targets.store(true, Ordering::Release);
        if self.refresh_loop {
            let loads = self.shared.loads.clone();
            let mut stop = self.stop.clone();
            let task = tokio::spawn(async move {
                run_refresh_loop(&router, &loads, async move {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                })
                .await
            });
            *self
                .shared
                .refresh_task
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_direct_children_are_nodes_of_interest() {
        assert_eq!(
            child_of("/loadbalance/brokers/b:8080", BROKERS_PATH),
            Some("b:8080")
        );
        assert_eq!(child_of("/loadbalance/brokers", BROKERS_PATH), None);
        assert_eq!(child_of("/loadbalance/brokers/b/x", BROKERS_PATH), None);
        assert_eq!(child_of("/loadbalance/brokersx/b", BROKERS_PATH), None);
    }

    #[test]
    fn notifications_mark_children_with_their_last_kind() {
        let mut dirty = BTreeMap::new();
        let n = |kind, path: &str| Notification::new(kind, path);
        note(
            &mut dirty,
            BROKERS_PATH,
            &n(NotificationType::Created, "/loadbalance/brokers/a:1"),
        );
        note(
            &mut dirty,
            BROKERS_PATH,
            &n(NotificationType::Deleted, "/loadbalance/brokers/a:1"),
        );
        note(
            &mut dirty,
            BROKERS_PATH,
            &n(NotificationType::Modified, "/loadbalance/brokers/b:1"),
        );
        note(
            &mut dirty,
            BROKERS_PATH,
            &n(NotificationType::ChildrenChanged, "/loadbalance/brokers"),
        );
        assert_eq!(
            dirty,
            BTreeMap::from([("a:1".to_string(), true), ("b:1".to_string(), false)])
        );
    }
}
