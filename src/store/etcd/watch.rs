//! Notifications on etcd: one etcd watch per watched root, all on one watch stream, started with the first
//! subscription and resumed from each root's last seen revision after any failure.
//!
//! # Contract
//!
//! * A root is the prefix of a subscription that no earlier root covers (a root that covers earlier ones is
//!   added beside them), kept in install order for the store's lifetime, as on ZooKeeper. The server sends
//!   the store only the changes under its roots: a broker that subscribes to its own inbox is not sent every
//!   other broker's (one watch over `/` per store sent each change to every broker: 32 million events for
//!   122,000 changes at 100 brokers × 65,000 bundles, and etcd's apply loop fell behind its keep-alives).
//! * Each root's etcd watch covers the keys that start with the root, with the root's install index + 1 as its
//!   watch id. A key is delivered from the watch of the oldest root covering it only ([`owner`]), so a later
//!   root covering an earlier one neither repeats nor misses the earlier one's events.
//! * Every watch has a start revision (the server registers a watch asynchronously, so without one its first
//!   events could be lost): the revision after the one current when its root was added, then the one after
//!   the last event it delivered.
//! * A put of a key at version 1 is `Created`, any other put `Modified`, a delete `Deleted`; creations and
//!   deletions also give their parent's `ChildrenChanged` (see [`crate::store::fanout::node_change`]). Keys
//!   that are not valid node paths are skipped.
//! * The node's own notification carries the event's key-value ([`NodeAfter::Value`], with the stat a get
//!   would give) or [`NodeAfter::Gone`] for a delete: etcd sends the value with every put event anyway.
//! * A broken stream moves the store to the next endpoint and resumes every root; a watch cancelled by a
//!   compaction resumes from the compaction revision (the changes in between are lost, and logged).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use etcd_client as etcd;
use etcd_client::GetOptions;
use tokio::sync::mpsc;

use super::Inner;
use crate::store::path::is_under;
use crate::store::{validate_path, GetResult, NodeAfter, NotificationType, Result};

/// The notification kind of a put that left its key at etcd `version`.
pub(super) fn put_kind(version: i64) -> NotificationType {
    if version == 1 {
        NotificationType::Created
    } else {
        NotificationType::Modified
    }
}

/// The roots a store watches, in install order, and the way to hand a new one to its watch task.
#[derive(Debug, Default)]
pub(super) struct WatchRoots {
    roots: Vec<String>,
    added: Option<mpsc::UnboundedSender<Root>>,
}

/// One watched root as the watch task keeps it.
#[derive(Debug)]
struct Root {
    path: String,
    /// The revision its watch starts from when (re)opened.
    next: i64,
}

/// The root (by install index) whose watch delivers the events of `path`: the oldest root covering it.
fn owner(roots: &[Root], path: &str) -> Option<usize> {
    roots.iter().position(|r| is_under(path, &r.path))
}

/// The options of root `index`'s etcd watch: every key starting with the root, from its next revision.
fn watch_options(root: &Root, index: usize) -> etcd::WatchOptions {
    etcd::WatchOptions::new()
        .with_prefix()
        .with_start_revision(root.next)
        .with_watch_id(index as i64 + 1)
}

impl Inner {
    /// Watches `prefix` unless a watched root covers it.
    pub(super) async fn ensure_watch(self: &Arc<Self>, prefix: &str) -> Result<()> {
        let mut watches = self.watch_roots.lock().await;
        if watches.roots.iter().any(|r| is_under(prefix, r)) {
            return Ok(());
        }
        // The current revision: events after it are delivered.
        let key = prefix.to_owned();
        let resp = self
            .call("watch", prefix, true, |mut c| {
                let key = key.clone();
                async move { c.get(key, Some(GetOptions::new().with_count_only())).await }
            })
            .await?;
        self.seen(resp.header());
        let root = Root {
            path: prefix.to_owned(),
            next: resp.header().map(|h| h.revision()).unwrap_or(0) + 1,
        };
        let added = watches.added.get_or_insert_with(|| {
            // The first root: start the task. It ends only with the store, so a failed send below means the
            // store is closed.
            let (added, receiver) = mpsc::unbounded_channel();
            let task = tokio::spawn(watch_loop(Arc::downgrade(self), receiver));
            self.tasks.lock().unwrap().push(task);
            added
        });
        let _ = added.send(root);
        watches.roots.push(prefix.to_owned());
        Ok(())
    }
}

/// Delivers the changes under every root as notifications, resuming each root from its last seen revision.
async fn watch_loop(weak: Weak<Inner>, mut added: mpsc::UnboundedReceiver<Root>) {
    let mut roots: Vec<Root> = Vec::new();
    let mut pause = Duration::from_millis(100);
    loop {
        while let Ok(root) = added.try_recv() {
            roots.push(root);
        }
        if roots.is_empty() {
            match added.recv().await {
                Some(root) => roots.push(root),
                None => return,
            }
        }
        let Some(inner) = weak.upgrade() else { return };
        let Ok(conn) = inner.conn() else { return };
        let mut client = conn.client.clone();
        drop(inner);
        let opened = async {
            let first = &roots[0];
            let mut stream = client
                .watch(first.path.as_str(), Some(watch_options(first, 0)))
                .await?;
            for (i, root) in roots.iter().enumerate().skip(1) {
                stream
                    .watch(root.path.as_str(), Some(watch_options(root, i)))
                    .await?;
            }
            Ok::<_, etcd::Error>(stream.split())
        }
        .await;
        let (mut requests, mut responses) = match opened {
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
            let message = tokio::select! {
                root = added.recv() => {
                    let Some(root) = root else { return };
                    let index = roots.len();
                    let sent = requests
                        .watch(root.path.as_str(), Some(watch_options(&root, index)))
                        .await;
                    roots.push(root);
                    if sent.is_err() {
                        tracing::warn!("etcd watch stream broke while a root was added; resuming");
                        if let Some(inner) = weak.upgrade() {
                            inner.rotate(conn.dial).await;
                        }
                        break;
                    }
                    continue;
                }
                message = responses.message() => message,
            };
            let Some(inner) = weak.upgrade() else { return };
            if inner.closed.load(Ordering::SeqCst) {
                return;
            }
            match message {
                Ok(Some(resp)) => {
                    pause = Duration::from_millis(100);
                    let index = usize::try_from(resp.watch_id() - 1).ok();
                    if resp.canceled() {
                        let root = index.and_then(|i| roots.get_mut(i));
                        if let (Some(root), true) = (root, resp.compact_revision() > 0) {
                            tracing::warn!(
                                "etcd watch of {} resumed after compaction: changes between revisions {} and {} are lost",
                                root.path,
                                root.next,
                                resp.compact_revision()
                            );
                            root.next = resp.compact_revision();
                        }
                        break;
                    }
                    inner.seen(resp.header());
                    let Some(index) = index.filter(|i| *i < roots.len()) else {
                        continue;
                    };
                    for event in resp.events() {
                        let Some(kv) = event.kv() else { continue };
                        roots[index].next = roots[index].next.max(kv.mod_revision() + 1);
                        let Ok(path) = std::str::from_utf8(kv.key()) else {
                            continue;
                        };
                        if validate_path(path).is_err()
                            || path == "/"
                            || owner(&roots, path) != Some(index)
                        {
                            continue;
                        }
                        // The event holds the key-value at its revision: handed on, so that a consumer
                        // need not read the node again (a report, an ownership node).
                        let (kind, after) = match event.event_type() {
                            etcd::EventType::Put => (
                                put_kind(kv.version()),
                                NodeAfter::Value(Arc::new(GetResult {
                                    value: kv.value().to_vec(),
                                    stat: inner.stat(path, kv),
                                })),
                            ),
                            etcd::EventType::Delete => (NotificationType::Deleted, NodeAfter::Gone),
                        };
                        inner.notifications.notify_change_with(kind, path, after);
                    }
                }
                Ok(None) | Err(_) => {
                    tracing::warn!("etcd watch stream broke; resuming every root");
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

    fn roots(paths: &[&str]) -> Vec<Root> {
        paths
            .iter()
            .map(|p| Root {
                path: (*p).to_owned(),
                next: 1,
            })
            .collect()
    }

    #[test]
    fn each_key_comes_from_the_oldest_root_covering_it() {
        let r = roots(&["/loadmgr/inbox/b1", "/loadmgr", "/loadmgr/inbox/b10"]);
        assert_eq!(owner(&r, "/loadmgr/inbox/b1/x"), Some(0));
        assert_eq!(owner(&r, "/loadmgr/inbox/b1"), Some(0));
        // A sibling whose name extends a root's is not under it (etcd's prefix watch still sends it).
        assert_eq!(owner(&r, "/loadmgr/inbox/b10/x"), Some(1));
        assert_eq!(owner(&r, "/loadmgr/requests/r-1"), Some(1));
        assert_eq!(owner(&r, "/loadbalance/brokers/b1"), None);
        assert_eq!(owner(&roots(&["/"]), "/anything/at/all"), Some(0));
    }
}
