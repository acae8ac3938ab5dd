//! Connecting a client whose session task the store can stop.
//!
//! `zookeeper-client` spawns one background task per client. It serves the client's connection and, after a
//! disconnection, reconnects with the same session id and password until the session ends. Dropping every
//! handle of a detached client stops that task only once it has a connection again, and each connection
//! with the session id makes the server drop whatever connection the session had (one connection per
//! session). So a client the store gave up on (it resumed the session on a new client, see `session.rs`)
//! would come back some time later and push the current client off. The current client reconnects at once
//! and pushes it back, often before the old one noticed it should stop: the two can alternate for seconds,
//! and each turn fails the operations in flight and costs a rescan of the watched trees.
//!
//! The crate spawns through `asyncs::spawn`, which uses the spawner of a thread-local scope
//! (`asyncs::task::enter`) when one is set. [`connect`] sets one around every poll of the connect future,
//! spawns what the crate hands it on the current tokio runtime, and keeps the abort handles in a
//! [`SessionTask`]. Dropping the [`SessionTask`] stops the client's task and closes its connection at once;
//! a connect future dropped halfway stops whatever it spawned too.
//!
//! # Contract
//!
//! * Every client the store keeps comes from [`connect`], with its [`SessionTask`].
//! * Dropping a [`SessionTask`] aborts the client's task: the client answers nothing from then on, never
//!   reconnects, and never sends `CloseSession` (its session lives on, e.g. on the client that replaced it).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::task::AbortHandle;
use zookeeper_client as zk;

/// The background task(s) of one client; aborted when dropped (see the module docs).
#[derive(Debug, Default)]
pub(super) struct SessionTask {
    handles: Vec<AbortHandle>,
}

impl Drop for SessionTask {
    fn drop(&mut self) {
        for handle in &self.handles {
            handle.abort();
        }
    }
}

/// Spawns on the current tokio runtime and keeps the abort handles.
#[derive(Default)]
struct Capture {
    spawned: Arc<Mutex<SessionTask>>,
}

impl asyncs::task::Spawn for Capture {
    fn spawn(&self, task: asyncs::task::Task) {
        let handle = tokio::spawn(Box::into_pin(task.future));
        self.spawned
            .lock()
            .unwrap()
            .handles
            .push(handle.abort_handle());
    }
}

/// A future run with [`Capture`] as the spawner of every poll.
struct Captured<F> {
    future: Pin<Box<F>>,
    capture: Capture,
    /// The future completed: what it spawned is the caller's to keep.
    done: bool,
}

impl<F: Future> Future for Captured<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let _scope = asyncs::task::enter(&this.capture);
        let poll = this.future.as_mut().poll(cx);
        this.done = poll.is_ready();
        poll
    }
}

impl<F> Drop for Captured<F> {
    fn drop(&mut self) {
        // Dropped before it finished (a timeout, a cancelled attempt): what it spawned goes with it.
        if !self.done {
            drop(std::mem::take(&mut *self.capture.spawned.lock().unwrap()));
        }
    }
}

/// Connects `connector` to `servers` and returns the client with its [`SessionTask`].
pub(super) async fn connect(
    connector: zk::Connector,
    servers: &str,
) -> Result<(zk::Client, SessionTask), zk::Error> {
    let capture = Capture::default();
    let spawned = capture.spawned.clone();
    let client = Captured {
        future: Box::pin(connector.connect(servers)),
        capture,
        done: false,
    }
    .await;
    let task = std::mem::take(&mut *spawned.lock().unwrap());
    client.map(|c| (c, task))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A spawn inside the captured future lands on the tokio runtime and is aborted with the task.
    #[tokio::test]
    async fn a_spawn_under_capture_is_aborted_with_the_session_task() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
        let capture = Capture::default();
        let spawned = capture.spawned.clone();
        Captured {
            future: Box::pin(async move {
                asyncs::spawn(async move {
                    let mut n = 0;
                    loop {
                        n += 1;
                        if tx.send(n).is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                });
            }),
            capture,
            done: false,
        }
        .await;
        assert_eq!(rx.recv().await, Some(1), "the spawned task runs");
        let task = std::mem::take(&mut *spawned.lock().unwrap());
        assert_eq!(task.handles.len(), 1);
        drop(task);
        // Aborted: its sender is dropped, so the channel ends after what was already sent.
        let drained = tokio::time::timeout(Duration::from_secs(5), async {
            while rx.recv().await.is_some() {}
        })
        .await;
        assert!(drained.is_ok(), "the spawned task kept running");
    }

    /// A captured future dropped before it completes aborts what it spawned.
    #[tokio::test]
    async fn a_dropped_connect_aborts_what_it_spawned() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let capture = Capture::default();
        let mut captured = Box::pin(Captured {
            future: Box::pin(async move {
                asyncs::spawn(async move {
                    let _tx = tx;
                    std::future::pending::<()>().await;
                });
                std::future::pending::<()>().await;
            }),
            capture,
            done: false,
        });
        assert!(
            tokio::time::timeout(Duration::from_millis(20), captured.as_mut())
                .await
                .is_err()
        );
        drop(captured);
        let ended = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        assert_eq!(ended, Ok(None), "the spawned task was not aborted");
    }
}
