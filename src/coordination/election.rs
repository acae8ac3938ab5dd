//! Leader election on one ephemeral node (Pulsar's `LeaderElectionImpl` with `LeaderBroker` values).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{claim, Claim};
use crate::model::json::to_json_vec;
use crate::model::LeaderBroker;
use crate::store::{
    DynStore, Error, Guard, NotificationStream, NotificationType, Op, OpResult, Result,
    SessionEvent, SessionEventStream,
};

/// Pulsar's leader node.
pub const DEFAULT_LEADER_PATH: &str = "/loadbalance/leader";

/// Who leads, as this candidate sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderState {
    /// No leader known (none elected yet, or this candidate is cut off from the store).
    NoLeader,
    /// This candidate leads.
    Leading,
    /// Another candidate leads.
    Following(LeaderBroker),
}

struct Shared {
    store: DynStore,
    path: String,
    value: LeaderBroker,
    state: watch::Sender<LeaderState>,
    guard: Mutex<Option<Guard>>,
}

/// A candidate in an election; see the [module docs](super).
///
/// Dropping it stops campaigning without deleting the node (it vanishes with the store's session); use
/// [`LeaderElection::resign`] to hand leadership over at once.
pub struct LeaderElection {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for LeaderElection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElection")
            .field("path", &self.shared.path)
            .field("value", &self.shared.value)
            .field("state", &*self.shared.state.borrow())
            .finish()
    }
}

impl LeaderElection {
    /// Joins the election at `path` with `value` (unique per candidate: its broker id) and runs a first
    /// election before returning.
    pub async fn start(store: DynStore, path: &str, value: LeaderBroker) -> Result<LeaderElection> {
        crate::store::validate_path(path)?;
        let notifications = store.watch(path).await?;
        let events = store.session_events();
        let (state, _) = watch::channel(LeaderState::NoLeader);
        let shared = Arc::new(Shared {
            store,
            path: path.to_string(),
            value,
            state,
            guard: Mutex::new(None),
        });
        let first = shared.elect().await;
        let task = tokio::spawn(run(shared.clone(), notifications, events, first.is_err()));
        Ok(LeaderElection { shared, task })
    }

    /// The current state.
    pub fn state(&self) -> LeaderState {
        self.shared.state.borrow().clone()
    }

    /// Whether this candidate leads now.
    pub fn is_leader(&self) -> bool {
        *self.shared.state.borrow() == LeaderState::Leading
    }

    /// A stream of state changes (the current state first).
    pub fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.shared.state.subscribe()
    }

    /// Waits until this candidate leads, up to `timeout`.
    pub async fn wait_leading(&self, timeout: Duration) -> bool {
        let mut rx = self.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|s| *s == LeaderState::Leading))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The guard of the leader node while this candidate leads (for building fenced batches by hand).
    pub fn guard(&self) -> Option<Guard> {
        if self.is_leader() {
            self.shared.guard.lock().unwrap().clone()
        } else {
            None
        }
    }

    /// This candidate's value.
    pub fn value(&self) -> &LeaderBroker {
        &self.shared.value
    }

    /// The leader recorded in the store now (whoever it is).
    pub async fn leader(&self) -> Result<Option<LeaderBroker>> {
        use crate::store::MetadataStoreExt;
        Ok(self
            .shared
            .store
            .get_json(&self.shared.path)
            .await?
            .map(|(v, _)| v))
    }

    /// Applies `ops` atomically only while this candidate leads: [`Error::Fenced`] if it does not (known
    /// locally) or if the store finds the leader node changed. Results are those of `ops`.
    pub async fn fenced_batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        let guard = match (
            &*self.shared.state.borrow(),
            self.shared.guard.lock().unwrap().clone(),
        ) {
            (LeaderState::Leading, Some(g)) => g,
            _ => {
                return Err(Error::Fenced {
                    path: self.shared.path.clone(),
                })
            }
        };
        let mut batch = Vec::with_capacity(ops.len() + 1);
        batch.push(Op::Check(guard));
        batch.extend(ops);
        match self.shared.store.batch(batch).await {
            Ok(mut results) => {
                results.remove(0);
                Ok(results)
            }
            Err(Error::Fenced { path }) => {
                tracing::warn!(path, "fenced write rejected: leadership lost");
                self.shared.set(LeaderState::NoLeader);
                Err(Error::Fenced { path })
            }
            Err(e) => Err(e),
        }
    }

    /// Stops campaigning and waits until the election task has stopped, leaving the leader node as it is (it
    /// goes with the session): what a process that stalls or exits without resigning leaves behind. Dropping
    /// the election only asks the task to stop; a round it is running on another thread may still finish.
    pub async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
        self.shared.set(LeaderState::NoLeader);
    }

    /// Stops campaigning and, if leading, deletes the leader node (with its version, so a successor's node
    /// is never touched).
    pub async fn resign(mut self) -> Result<()> {
        // The task may be in the middle of an election round on another worker thread: wait until it has
        // stopped, or it could claim the node again after it was deleted here.
        self.task.abort();
        let _ = (&mut self.task).await;
        let guard = self.shared.guard.lock().unwrap().take();
        let leading = self.is_leader();
        self.shared.set(LeaderState::NoLeader);
        if let (true, Some(g)) = (leading, guard) {
            match self
                .shared
                .store
                .delete(&self.shared.path, Some(g.version))
                .await
            {
                Ok(()) | Err(Error::NotFound { .. }) | Err(Error::BadVersion { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Drop for LeaderElection {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Shared {
    fn set(&self, state: LeaderState) {
        self.state.send_if_modified(|s| {
            if *s == state {
                false
            } else {
                tracing::info!(path = %self.path, ?state, "leader election state");
                *s = state;
                true
            }
        });
    }

    /// Whether this holder leads and its session can still be alive on the server: a lost connection alone
    /// does not end leadership (the leader's writes are fenced by the store, and a store blip must not cost
    /// the cluster its leader); the session's deadline or loss does.
    fn keeps_leading(&self) -> bool {
        *self.state.borrow() == LeaderState::Leading && self.store.session_validity().is_valid()
    }

    /// One election round.
    async fn elect(&self) -> Result<()> {
        if !self.store.is_connected() {
            if self.keeps_leading() {
                // Confirmed once the connection is back (the round after `Reconnected`).
                return Err(Error::ConnectionLost {
                    address: self.store.address(),
                    operation: format!("confirm the leader node {}", self.path),
                    reason: "disconnected".into(),
                });
            }
            self.set(LeaderState::NoLeader);
            return Ok(());
        }
        let value = to_json_vec(&self.value);
        match claim(&self.store, &self.path, &value).await {
            Ok(Claim::Held(guard)) => {
                *self.guard.lock().unwrap() = Some(guard);
                self.set(LeaderState::Leading);
                Ok(())
            }
            Ok(Claim::HeldByOther(bytes)) => {
                *self.guard.lock().unwrap() = None;
                let leader = serde_json::from_slice::<LeaderBroker>(&bytes).unwrap_or_else(|e| {
                    tracing::warn!(path = %self.path, "unreadable leader value: {e}");
                    LeaderBroker::default()
                });
                self.set(LeaderState::Following(leader));
                Ok(())
            }
            Err(e) if e.is_transient() && self.keeps_leading() => {
                tracing::warn!(path = %self.path, "confirming leadership failed ({e}); still leading while the session can be alive");
                Err(e)
            }
            Err(e) => {
                tracing::warn!(path = %self.path, "election failed: {e}");
                *self.guard.lock().unwrap() = None;
                self.set(LeaderState::NoLeader);
                Err(e)
            }
        }
    }
}

/// Reacts to the leader node's notifications and the session's events.
async fn run(
    shared: Arc<Shared>,
    mut notifications: NotificationStream,
    mut events: SessionEventStream,
    retry: bool,
) {
    let mut backoff = Duration::from_millis(100);
    let mut retry_at = retry.then(|| tokio::time::Instant::now() + backoff);
    loop {
        let sleep = async {
            match retry_at {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        let again = tokio::select! {
            n = notifications.next() => match n {
                None => return,
                Some(n) if n.path != shared.path => false,
                Some(n) => match n.kind {
                    NotificationType::Deleted => {
                        if *shared.state.borrow() == LeaderState::Leading {
                            tracing::warn!(path = %shared.path, "the leader node was deleted: leadership lost");
                        }
                        shared.set(LeaderState::NoLeader);
                        true
                    }
                    NotificationType::Created | NotificationType::Modified => true,
                    NotificationType::ChildrenChanged => false,
                },
            },
            e = events.next() => match e {
                None => return,
                Some(SessionEvent::ConnectionLost) => {
                    if *shared.state.borrow() == LeaderState::Leading {
                        tracing::warn!(path = %shared.path, "connection to the store lost: still leading while the session can be alive (writes are fenced)");
                    }
                    false
                }
                Some(SessionEvent::SessionLost) => {
                    if *shared.state.borrow() == LeaderState::Leading {
                        tracing::warn!(path = %shared.path, "the store session is lost: no longer acting as leader");
                    }
                    shared.set(LeaderState::NoLeader);
                    false
                }
                Some(SessionEvent::Reconnected | SessionEvent::SessionReestablished) => true,
            },
            _ = sleep => true,
        };
        if again {
            retry_at = None;
            match shared.elect().await {
                Ok(()) => backoff = Duration::from_millis(100),
                Err(_) => {
                    retry_at = Some(tokio::time::Instant::now() + backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}
