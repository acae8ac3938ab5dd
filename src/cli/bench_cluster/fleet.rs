//! The bench's fleet: the agents, the leader's own thread (its CPU readable, its crash staged), and one
//! observer's view of which bundles are owned.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{self, StreamExt};
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

use super::host::{BenchHost, Traffic};
use super::procfs;
use super::ClusterBench;
use crate::config::Settings;
use crate::runtime::identity::BrokerIdentity;
use crate::runtime::shared::AgentShared;
use crate::runtime::{AgentOptions, BrokerAgent};
use crate::store::{self, DynStore, StoreOptions};

/// Which bundles have an ownership node, from one watch of the bench's namespaces; lookups wait on it.
#[derive(Default)]
pub(super) struct Owners {
    state: Mutex<OwnersState>,
    changed: Notify,
}

#[derive(Default)]
pub(super) struct OwnersState {
    owned: HashSet<String>,
    waiters: HashMap<String, Vec<oneshot::Sender<()>>>,
}

impl Owners {
    pub(super) fn count(&self) -> usize {
        self.state.lock().unwrap().owned.len()
    }

    pub(super) fn is_owned(&self, bundle: &str) -> bool {
        self.state.lock().unwrap().owned.contains(bundle)
    }

    /// Resolves once `bundle` is owned (at once if it is).
    pub(super) fn when_owned(&self, bundle: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut s = self.state.lock().unwrap();
        if s.owned.contains(bundle) {
            let _ = tx.send(());
        } else {
            s.waiters.entry(bundle.to_owned()).or_default().push(tx);
        }
        rx
    }

    pub(super) fn apply(&self, kind: store::NotificationType, bundle: String) {
        let mut s = self.state.lock().unwrap();
        match kind {
            store::NotificationType::Created | store::NotificationType::Modified => {
                if let Some(waiters) = s.waiters.remove(&bundle) {
                    for w in waiters {
                        let _ = w.send(());
                    }
                }
                s.owned.insert(bundle);
            }
            store::NotificationType::Deleted => {
                s.owned.remove(&bundle);
            }
            store::NotificationType::ChildrenChanged => return,
        }
        drop(s);
        self.changed.notify_waiters();
    }

    /// Waits until `done(count)` holds, or `limit` passes.
    pub(super) async fn wait_count(
        &self,
        done: impl Fn(usize) -> bool,
        limit: Duration,
        what: &str,
    ) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            if done(self.count()) {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(format!(
                    "{what}: gave up after {limit:?} with {} bundles owned",
                    self.count()
                ));
            }
        }
    }
}

/// One agent of the fleet and the raw store session it runs on (closed on a hard stop).
pub(super) struct Member {
    pub(super) agent: BrokerAgent,
    pub(super) store: DynStore,
}

/// The first agent, alone on a thread with its own runtime: its CPU time can be read, and stopping that runtime
/// is a crash (the connection drops; the session lives until the server expires it).
pub(super) struct LeaderThread {
    pub(super) shared: Arc<AgentShared>,
    pub(super) tid: u32,
    crash: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LeaderThread {
    pub(super) async fn start(
        url: String,
        options: StoreOptions,
        settings: Settings,
        traffic: Arc<Traffic>,
    ) -> Result<LeaderThread, String> {
        let (ready_tx, ready_rx) = oneshot::channel::<Result<(Arc<AgentShared>, u32), String>>();
        let (crash_tx, crash_rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("bench-leader".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("runtime: {e}")));
                        return;
                    }
                };
                rt.block_on(async move {
                    let started = async {
                        let store = crate::cli::broker::open_at_start(&url, options)
                            .await
                            .map_err(|e| e.to_string())?;
                        let agent = start_agent(store, &settings, traffic).await?;
                        Ok::<_, String>(agent)
                    }
                    .await;
                    match started {
                        Ok(agent) => {
                            let tid = procfs::current_tid().unwrap_or(0);
                            let _ = ready_tx.send(Ok((agent.shared(), tid)));
                            let _ = crash_rx.await;
                            // A crash: nothing of the agent runs again, nothing is released or closed.
                            std::mem::forget(agent);
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                });
                rt.shutdown_background();
            })
            .map_err(|e| format!("cannot start the leader's thread: {e}"))?;
        let (shared, tid) = ready_rx
            .await
            .map_err(|_| "the leader's thread ended".to_owned())??;
        Ok(LeaderThread {
            shared,
            tid,
            crash: Some(crash_tx),
            thread: Some(thread),
        })
    }

    /// Stops the thread dead (see the type's docs).
    pub(super) fn crash(&mut self) {
        if let Some(c) = self.crash.take() {
            let _ = c.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for LeaderThread {
    fn drop(&mut self) {
        self.crash();
    }
}

pub(super) fn settings_for(b: &ClusterBench, index: usize) -> Settings {
    let mut s = Settings::default();
    s.bind_address = "127.0.0.1".into();
    s.advertised_address = Some("127.0.0.1".into());
    s.cluster_name = Some("bench".into());
    // Identities only: nothing listens on these ports.
    s.web_service_port = Some(20_000 + index as i32);
    s.metadata_store_session_timeout_millis = b.session_timeout_ms as i64;
    s.loadmgr_report_update_max_interval_millis = b.report_interval_ms;
    s.loadmgr_resource_quota_update_interval_millis = b.flush_interval_ms;
    s.loadmgr_shedding_interval_millis = b.shedding_interval_ms;
    s.load_balancer_auto_bundle_split_enabled = false;
    s.load_balancer_shedding_enabled = true;
    s
}

async fn start_agent(
    store: DynStore,
    settings: &Settings,
    traffic: Arc<Traffic>,
) -> Result<BrokerAgent, String> {
    let identity = BrokerIdentity::from_settings(settings).map_err(|e| e.to_string())?;
    let host = Arc::new(BenchHost::new(traffic));
    BrokerAgent::start(
        store,
        settings.clone(),
        identity,
        host,
        AgentOptions::default(),
    )
    .await
    .map_err(|e| e.to_string())
}

/// The agents of brokers `indexes`, `concurrency` starting at once.
pub(super) async fn start_members(
    b: &ClusterBench,
    options: &StoreOptions,
    traffic: &Arc<Traffic>,
    indexes: std::ops::Range<usize>,
) -> Result<Vec<Member>, String> {
    let started: Vec<Result<Member, String>> = stream::iter(indexes)
        .map(|i| {
            let settings = settings_for(b, i);
            let options = options.clone();
            let traffic = traffic.clone();
            let url = b.store.clone();
            async move {
                // As `loadmgr broker` does: a store too busy to open a session at once (a whole cluster
                // restarting) is tried again for a while.
                let store = crate::cli::broker::open_at_start(&url, options)
                    .await
                    .map_err(|e| format!("broker {i}: {e}"))?;
                let agent = start_agent(store.clone(), &settings, traffic)
                    .await
                    .map_err(|e| format!("broker {i}: {e}"))?;
                Ok(Member { agent, store })
            }
        })
        .buffer_unordered(b.start_concurrency)
        .collect()
        .await;
    started.into_iter().collect()
}

/// Stops members dead: tasks aborted, sessions closed (their ephemerals go at once). A close the server does
/// not answer within [`CLOSE_LIMIT`] is given up: that session ends when the server expires it.
pub(super) async fn stop_members(members: Vec<Member>) {
    stream::iter(members)
        .for_each_concurrent(64, |m| async move {
            drop(m.agent);
            let _ = tokio::time::timeout(CLOSE_LIMIT, m.store.close()).await;
        })
        .await;
}

/// How long one member's session close may take.
const CLOSE_LIMIT: Duration = Duration::from_secs(10);
