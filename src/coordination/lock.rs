//! Resource locks: one ephemeral node whose value is unique to the holder (Pulsar's `ResourceLockImpl`), as
//! used for broker registration at `/loadbalance/brokers/<broker id>`.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{claim, Claim};
use crate::model::json::to_json_vec;
use crate::store::{
    CreateOptions, DynStore, Error, Guard, NotificationStream, NotificationType, Op, OpResult,
    Result, SessionEvent, SessionEventStream,
};

struct Shared {
    store: DynStore,
    path: String,
    /// The JSON of the current value.
    value: Mutex<Vec<u8>>,
    guard: Mutex<Option<Guard>>,
    /// True once the lock is lost or released.
    expired: watch::Sender<bool>,
}

/// A held lock; see the [module docs](super). Dropping it stops revalidation; the node then lives until the
/// store's session ends. [`ResourceLock::release`] deletes it at once.
pub struct ResourceLock<T> {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
    _value: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for ResourceLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceLock")
            .field("path", &self.shared.path)
            .field("expired", &*self.shared.expired.borrow())
            .finish()
    }
}

impl<T: Serialize + DeserializeOwned + Send + Sync + 'static> ResourceLock<T> {
    /// Acquires the lock at `path` with `value` (its JSON must be unique to this holder). Fails fast with
    /// [`Error::LockBusy`] when someone else holds it.
    pub async fn acquire(store: DynStore, path: &str, value: &T) -> Result<ResourceLock<T>> {
        crate::store::validate_path(path)?;
        let notifications = store.watch(path).await?;
        let events = store.session_events();
        let bytes = to_json_vec(value);
        let guard = match claim(&store, path, &bytes).await? {
            Claim::Held(g) => g,
            Claim::HeldByOther(_) => {
                return Err(Error::LockBusy {
                    path: path.to_string(),
                })
            }
        };
        let (expired, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            store,
            path: path.to_string(),
            value: Mutex::new(bytes),
            guard: Mutex::new(Some(guard)),
            expired,
        });
        let task = tokio::spawn(run(shared.clone(), notifications, events));
        Ok(ResourceLock {
            shared,
            task,
            _value: PhantomData,
        })
    }

    /// The lock's path.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// The current value.
    pub fn value(&self) -> Result<T> {
        let bytes = self.shared.value.lock().unwrap().clone();
        serde_json::from_slice(&bytes).map_err(|e| Error::Content {
            path: self.shared.path.clone(),
            reason: e.to_string(),
        })
    }

    /// The guard of the lock node while held (for building fenced batches by hand).
    pub fn guard(&self) -> Option<Guard> {
        self.shared
            .guard
            .lock()
            .unwrap()
            .clone()
            .filter(|_| self.is_held())
    }

    /// Whether the lock is still held (as far as this holder knows).
    pub fn is_held(&self) -> bool {
        !*self.shared.expired.borrow()
    }

    /// Completes when the lock is lost or released.
    pub async fn expired(&self) {
        let mut rx = self.shared.expired.subscribe();
        let _ = rx.wait_for(|e| *e).await;
    }

    /// Writes a new value (Pulsar's `updateValue`): a compare-and-set on the held version; if the node was
    /// changed or removed meanwhile, the lock is revalidated with the new value.
    pub async fn update_value(&self, value: &T) -> Result<()> {
        if !self.is_held() {
            return Err(Error::LockBusy {
                path: self.shared.path.clone(),
            });
        }
        let bytes = to_json_vec(value);
        *self.shared.value.lock().unwrap() = bytes.clone();
        let version = self
            .shared
            .guard
            .lock()
            .unwrap()
            .as_ref()
            .map(|g| g.version);
        let attempt = match version {
            Some(v) => {
                self.shared
                    .store
                    .put(&self.shared.path, &bytes, Some(v), CreateOptions::EPHEMERAL)
                    .await
            }
            None => Err(Error::bad_version(&self.shared.path, -1)),
        };
        match attempt {
            Ok(stat) => {
                *self.shared.guard.lock().unwrap() = Some(stat.guard());
                Ok(())
            }
            Err(Error::BadVersion { .. }) => self.shared.revalidate().await,
            Err(e) => Err(e),
        }
    }

    /// Applies `ops` atomically only while the lock is held ([`Error::Fenced`] otherwise).
    pub async fn fenced_batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        let guard = self.shared.guard.lock().unwrap().clone();
        let Some(guard) = guard.filter(|_| self.is_held()) else {
            return Err(Error::Fenced {
                path: self.shared.path.clone(),
            });
        };
        let mut batch = Vec::with_capacity(ops.len() + 1);
        batch.push(Op::Check(guard));
        batch.extend(ops);
        let mut results = self.shared.store.batch(batch).await?;
        results.remove(0);
        Ok(results)
    }

    /// Releases the lock: deletes the node if it is still this holder's (by version).
    pub async fn release(mut self) -> Result<()> {
        // The task may be re-claiming the node on another worker thread: wait until it has stopped, or it
        // could create the node again after it was deleted here.
        self.task.abort();
        let _ = (&mut self.task).await;
        let guard = self.shared.guard.lock().unwrap().take();
        let was_held = self.is_held();
        self.shared.expired.send_replace(true);
        if let (true, Some(g)) = (was_held, guard) {
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

impl<T> Drop for ResourceLock<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Shared {
    /// Re-claims the node with the current value; `LockBusy` (and the lock expires) if someone else has it.
    async fn revalidate(&self) -> Result<()> {
        let value = self.value.lock().unwrap().clone();
        match claim(&self.store, &self.path, &value).await? {
            Claim::Held(g) => {
                *self.guard.lock().unwrap() = Some(g);
                Ok(())
            }
            Claim::HeldByOther(_) => {
                tracing::warn!(path = %self.path, "lock taken by another holder: expired");
                *self.guard.lock().unwrap() = None;
                self.expired.send_replace(true);
                Err(Error::LockBusy {
                    path: self.path.clone(),
                })
            }
        }
    }
}

/// Revalidates when the node is deleted or the session is re-established.
async fn run(
    shared: Arc<Shared>,
    mut notifications: NotificationStream,
    mut events: SessionEventStream,
) {
    loop {
        let check = tokio::select! {
            n = notifications.next() => match n {
                None => return,
                Some(n) => n.path == shared.path && n.kind == NotificationType::Deleted,
            },
            e = events.next() => match e {
                None => return,
                Some(e) => matches!(e, SessionEvent::SessionReestablished | SessionEvent::Reconnected),
            },
        };
        if check && !*shared.expired.borrow() {
            match shared.revalidate().await {
                Ok(()) | Err(Error::LockBusy { .. }) => {}
                Err(e) => tracing::warn!(path = %shared.path, "lock revalidation failed: {e}"),
            }
        }
        if *shared.expired.borrow() {
            return;
        }
    }
}
