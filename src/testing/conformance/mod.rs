//! The conformance suite: the same test functions for every [`MetadataStore`] backend.
//!
//! Each function takes a [`Sessions`] (a way to open more sessions on the store under test) and a root path no
//! other test uses, and panics with a message on the first contract violation. Backend differences are read
//! from [`Backend::capabilities`](crate::store::Backend::capabilities), never special-cased by name. The
//! functions write only under their root and delete it at the end, so one live server can serve every test of
//! a binary in parallel.
//!
//! The tests follow Pulsar's `MetadataStoreTest` (`emptyStoreTest`, `insertionTestWithExpectedVersion`,
//! `notificationListeners`, ...) and add what the Rust contract promises on top (batches, guards, session
//! re-establishment, typed JSON).
//!
//! # Layout
//!
//! * this file — the harness: [`Sessions`] and its implementations, [`unique_root`], the waits for
//!   notifications and session events, and the re-exports of the test functions;
//! * `nodes.rs` — reads, writes and versions of nodes and trees;
//! * `notifications.rs` — what watches deliver;
//! * `sessions.rs` — ephemerals, session expiry and closed stores;
//! * `batches.rs` — batches and guards.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::store::{
    memory::MemoryStore, DynStore, MetadataStore, MetadataStoreExt, Notification,
    NotificationStream, NotificationType, SessionEvent, SessionEventStream, StoreOptions,
};

mod batches;
mod leaves;
mod nodes;
mod notifications;
mod sessions;

pub use batches::{batch_semantics, batch_updates_after_others_wrote};
pub use leaves::leaves_of_a_subtree;
pub use nodes::{
    children_listing, delete_semantics, large_listings, many_reads, parents_and_recursive_delete,
    paths_and_missing_nodes, put_version_semantics, sequential_nodes, stat_fields,
    typed_json_round_trip,
};
pub use notifications::{
    nested_roots, notification_sequence, notifications_carry_the_state_after_the_change,
};
pub use sessions::{closed_store, ephemeral_lifecycle, session_expiry_restores_ephemerals};

/// How long a test waits for an expected notification or session event.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(15);

/// Opens sessions on the store under test.
#[async_trait]
pub trait Sessions: Send + Sync {
    /// A new, independent session (another client / broker).
    async fn open(&self) -> DynStore;
}

/// Sessions on one in-memory tree.
#[derive(Debug, Clone, Default)]
pub struct MemorySessions {
    first: MemoryStore,
}

#[async_trait]
impl Sessions for MemorySessions {
    async fn open(&self) -> DynStore {
        Arc::new(self.first.new_session())
    }
}

/// Sessions opened with [`crate::store::connect`] on a URL.
#[derive(Debug, Clone)]
pub struct UrlSessions {
    /// The store URL.
    pub url: String,
    /// Options for every session.
    pub options: StoreOptions,
}

#[async_trait]
impl Sessions for UrlSessions {
    async fn open(&self) -> DynStore {
        crate::store::connect(&self.url, self.options.clone())
            .await
            .unwrap_or_else(|e| panic!("connect {}: {e}", self.url))
    }
}

/// A root path unique to this process and call, named after the test.
pub fn unique_root(test: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000_000)
        .unwrap_or(0);
    format!(
        "/conformance/{test}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Waits for the next notification.
pub async fn next_notification(stream: &mut NotificationStream) -> Notification {
    tokio::time::timeout(EVENT_TIMEOUT, stream.next())
        .await
        .unwrap_or_else(|_| panic!("no notification within {EVENT_TIMEOUT:?}"))
        .expect("notification stream ended")
}

/// Waits until `expected` arrived in this order (other notifications in between are allowed only if
/// `strict` is false) and returns everything seen.
pub async fn expect_notifications(
    stream: &mut NotificationStream,
    expected: &[Notification],
    strict: bool,
) -> Vec<Notification> {
    let mut seen = Vec::new();
    let mut i = 0;
    while i < expected.len() {
        let n = tokio::time::timeout(EVENT_TIMEOUT, stream.next())
            .await
            .unwrap_or_else(|_| panic!("waiting for {:?}; saw only {seen:?}", &expected[i..]))
            .expect("notification stream ended");
        if n == expected[i] {
            i += 1;
        } else if strict {
            panic!(
                "expected {:?} next, got {n:?}; before it: {seen:?}",
                expected[i]
            );
        }
        seen.push(n);
    }
    seen
}

/// Waits for a session event matching `pred`, returning every event seen up to it.
pub async fn wait_session_event(
    stream: &mut SessionEventStream,
    timeout: Duration,
    pred: impl Fn(SessionEvent) -> bool,
) -> Vec<SessionEvent> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let e = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| {
                panic!("no matching session event within {timeout:?}; saw {seen:?}")
            })
            .expect("session event stream ended");
        seen.push(e);
        if pred(e) {
            return seen;
        }
    }
}

fn n(kind: NotificationType, path: &str) -> Notification {
    Notification::new(kind, path)
}

async fn prepare_root(store: &dyn MetadataStore, root: &str) {
    store
        .create_parents(&format!("{root}/x"))
        .await
        .expect("create the test root");
}

/// Writes `value` to every one of `paths`, 100 per batch.
async fn put_in_batches(store: &dyn MetadataStore, paths: &[String], value: &[u8]) {
    for chunk in paths.chunks(100) {
        let ops = chunk
            .iter()
            .map(|p| crate::store::Op::put(p.clone(), value.to_vec()))
            .collect();
        store.batch(ops).await.expect("a batch of puts");
    }
}

async fn cleanup(store: &dyn MetadataStore, root: &str) {
    store
        .delete_recursive(root)
        .await
        .expect("delete the test root");
}
