//! Notifications on etcd: one watch over every key under `/`, started with the first subscription and
//! resumed from the last seen revision after any failure.
//!
//! # Contract
//!
//! * The watch always has a start revision (the server registers a watch asynchronously, so without one its
//!   first events could be lost): the revision after the one current when it is started, then the one after
//!   the last event delivered.
//! * A put of a key at version 1 is `Created`, any other put `Modified`, a delete `Deleted`; creations and
//!   deletions also give their parent's `ChildrenChanged` (see [`crate::store::fanout::node_change`]). Keys
//!   that are not valid node paths are skipped.
//! * A broken stream moves the store to the next endpoint and resumes; a watch cancelled by a compaction
//!   resumes from the compaction revision (the changes in between are lost, and logged).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use etcd_client as etcd;
use etcd_client::GetOptions;

use super::Inner;
use crate::store::{validate_path, NotificationType, Result};

/// The notification kind of a put that left its key at etcd `version`.
pub(super) fn put_kind(version: i64) -> NotificationType {
    if version == 1 {
        NotificationType::Created
    } else {
        NotificationType::Modified
    }
}

impl Inner {
    /// Starts the watch over every key (once).
    pub(super) async fn ensure_watch(self: &Arc<Self>) -> Result<()> {
        let mut started = self.watch_started.lock().await;
        if *started {
            return Ok(());
        }
        // The current revision: events after it are delivered.
        let resp = self
            .call("watch", "/", true, |mut c| async move {
                c.get("/", Some(GetOptions::new().with_count_only())).await
            })
            .await?;
        self.seen(resp.header());
        let from = resp.header().map(|h| h.revision()).unwrap_or(0) + 1;
        let task = tokio::spawn(watch_loop(Arc::downgrade(self), from));
        self.tasks.lock().unwrap().push(task);
        *started = true;
        Ok(())
    }
}

/// Delivers every change under `/` as notifications, resuming from the last seen revision.
async fn watch_loop(weak: Weak<Inner>, mut next: i64) {
    let mut pause = Duration::from_millis(100);
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let Ok(conn) = inner.conn() else { return };
        let mut client = conn.client.clone();
        drop(inner);
        let opened = client
            .watch(
                "/",
                Some(
                    etcd::WatchOptions::new()
                        .with_prefix()
                        .with_start_revision(next),
                ),
            )
            .await;
        let mut stream = match opened {
            Ok(s) => s,
            Err(e) => {
                let Some(inner) = weak.upgrade() else { return };
                tracing::warn!("etcd watch failed to open: {e}");
                inner.rotate(conn.dial).await;
                drop(inner);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        loop {
            let message = stream.message().await;
            let Some(inner) = weak.upgrade() else { return };
            if inner.closed.load(Ordering::SeqCst) {
                return;
            }
            match message {
                Ok(Some(resp)) => {
                    pause = Duration::from_millis(100);
                    if resp.canceled() {
                        if resp.compact_revision() > 0 {
                            tracing::warn!(
                                "etcd watch resumed after compaction: changes between revisions {next} and {} are lost",
                                resp.compact_revision()
                            );
                            next = resp.compact_revision();
                        }
                        break;
                    }
                    inner.seen(resp.header());
                    for event in resp.events() {
                        let Some(kv) = event.kv() else { continue };
                        next = next.max(kv.mod_revision() + 1);
                        let Ok(path) = std::str::from_utf8(kv.key()) else {
                            continue;
                        };
                        if validate_path(path).is_err() || path == "/" {
                            continue;
                        }
                        let kind = match event.event_type() {
                            etcd::EventType::Put => put_kind(kv.version()),
                            etcd::EventType::Delete => NotificationType::Deleted,
                        };
                        inner.notifications.notify_change(kind, path);
                    }
                }
                Ok(None) | Err(_) => {
                    tracing::warn!("etcd watch stream broke; resuming from revision {next}");
                    inner.rotate(conn.dial).await;
                    break;
                }
            }
        }
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_version_put_is_a_creation() {
        assert_eq!(put_kind(1), NotificationType::Created);
        assert_eq!(put_kind(2), NotificationType::Modified);
        assert_eq!(put_kind(17), NotificationType::Modified);
    }
}
