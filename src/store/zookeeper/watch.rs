//! Notifications on ZooKeeper: one persistent recursive watch on `/`, its event loop, its re-arming after
//! every reconnection, and the rescan of the subscribed prefixes that reports what a disconnection hid.
//!
//! # Contract
//!
//! See "Mapping" (notifications) and "Pitfalls handled" in the module docs of [`super`]:
//!
//! * The watch is installed once per session ([`Inner::ensure_watch`]), with the first subscription or the
//!   first batch with a guard, and re-added on the server after every reconnection ([`Inner::rearm_watch`]:
//!   `zookeeper-client` 0.11 does not restore persistent watches).
//! * `ChildrenChanged` is synthesised for the parent of a created or deleted node.
//! * For every subscribed prefix the store keeps the nodes known to exist; after a reconnection (once the
//!   watch is back) or a new session, [`Changes::between`] compares a rescan with them: a node no longer
//!   there is `Deleted`, a new one `Created`, a known one whose `mzxid` is above the high-water mark of when
//!   the connection dropped `Modified`; [`Changes::notifications`] orders them deletions (deepest first),
//!   creations, the parents' `ChildrenChanged`, modifications.
//! * Owned ephemerals deleted or replaced meanwhile are marked gone ([`Inner::verify_owned`]), so guards on
//!   them fail.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use zookeeper_client as zk;

use super::Inner;
use crate::store::path::{is_under, join, parent};
use crate::store::{Notification, NotificationType, Result};

/// What a rescan found changed against the nodes known under the tracked roots.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Changes {
    /// Known nodes that are gone, in path order.
    pub(super) deleted: Vec<String>,
    /// Nodes that are new, in path order.
    pub(super) created: Vec<String>,
    /// Known nodes modified after the high-water mark, in path order.
    pub(super) modified: Vec<String>,
}

impl Changes {
    /// Compares `current` (every node found under `roots`) with `known`, which it brings up to date; a
    /// known node whose `mzxid` is above `hwm` counts as modified.
    pub(super) fn between(
        known: &mut BTreeSet<String>,
        roots: &[String],
        current: &BTreeMap<String, zk::Stat>,
        hwm: i64,
    ) -> Changes {
        let mut changes = Changes::default();
        let known_under: Vec<String> = known
            .iter()
            .filter(|p| roots.iter().any(|r| is_under(p, r)))
            .cloned()
            .collect();
        for p in &known_under {
            if !current.contains_key(p) {
                changes.deleted.push(p.clone());
                known.remove(p);
            }
        }
        for (p, s) in current {
            if known.insert(p.clone()) {
                changes.created.push(p.clone());
            } else if s.mzxid > hwm {
                changes.modified.push(p.clone());
            }
        }
        changes
    }

    /// The notifications for these changes: deletions (children before their parents), creations, one
    /// `ChildrenChanged` per affected parent, modifications.
    pub(super) fn notifications(&self) -> Vec<Notification> {
        let mut out = Vec::new();
        let mut changed_parents = BTreeSet::new();
        for p in self.deleted.iter().rev() {
            out.push(Notification::new(NotificationType::Deleted, p.clone()));
            if let Some(parent) = parent(p) {
                changed_parents.insert(parent.to_string());
            }
        }
        for p in &self.created {
            out.push(Notification::new(NotificationType::Created, p.clone()));
            if let Some(parent) = parent(p) {
                changed_parents.insert(parent.to_string());
            }
        }
        for p in changed_parents {
            out.push(Notification::new(NotificationType::ChildrenChanged, p));
        }
        for p in &self.modified {
            out.push(Notification::new(NotificationType::Modified, p.clone()));
        }
        out
    }
}

impl Inner {
    /// Installs the recursive watch on the current session if it lacks one.
    pub(super) async fn ensure_watch(self: &Arc<Self>) -> Result<()> {
        let mut installed = self.watch_generation.lock().await;
        let generation = self.generation.load(Ordering::SeqCst);
        if *installed == generation {
            return Ok(());
        }
        let client = self.client()?;
        let watcher = self.add_watch(&client).await?;
        *installed = generation;
        self.spawn_task(
            generation,
            event_loop(Arc::downgrade(self), client, watcher, generation),
        );
        Ok(())
    }

    /// Adds the recursive watch to the server again and drops the client-side watcher this creates: the
    /// event loop's watcher, registered on the same path, stays and receives everything from then on.
    ///
    /// Needed after every reconnection within a session: `zookeeper-client` 0.11 re-sends the session's
    /// watches with a `SetWatches` request that has no room for persistent watches (its `resend_watches`
    /// never switches to `SetWatches2`), so the server forgets the recursive watch on every new connection.
    /// `addWatch` is idempotent on the server, so this is also right with a client that does re-send it.
    /// Dropping the duplicate removes nothing on the server while another watcher of the path remains.
    async fn rearm_watch(&self, client: &zk::Client) -> Result<()> {
        let duplicate = self.add_watch(client).await?;
        drop(duplicate);
        Ok(())
    }

    /// Sends `addWatch` of the persistent recursive watch on `/` (within the operation timeout).
    async fn add_watch(&self, client: &zk::Client) -> Result<zk::PersistentWatcher> {
        self.timed("watch", "/", async {
            client
                .watch("/", zk::AddWatchMode::PersistentRecursive)
                .await
                .map_err(|e| self.map_err(e, "watch", "/"))
        })
        .await
    }

    /// After a reconnection in the same session: marks owned ephemerals that were deleted (or deleted and
    /// created again) while the watch was not delivering as gone, so guards on them fail.
    pub(super) async fn verify_owned(&self, client: &zk::Client) -> Result<()> {
        let owned: Vec<(String, i64)> = self
            .owned
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, czxid)| **czxid != -1)
            .map(|(p, c)| (p.clone(), *c))
            .collect();
        for (path, czxid) in owned {
            let current = client
                .check_stat(&path)
                .await
                .map_err(|e| self.map_err(e, "stat", &path))?;
            if !matches!(current, Some(s) if s.czxid == czxid) {
                let mut owned = self.owned.lock().unwrap();
                if let Some(c) = owned.get_mut(&path).filter(|c| **c == czxid) {
                    tracing::info!("owned ephemeral {path} changed while disconnected");
                    *c = -1;
                }
            }
        }
        Ok(())
    }

    pub(super) fn tracked(&self, path: &str) -> bool {
        self.tracking
            .lock()
            .unwrap()
            .roots
            .iter()
            .any(|r| is_under(path, r))
    }

    /// Every node under `root` with its stat (skipping ZooKeeper's own `/zookeeper`).
    async fn scan(&self, client: &zk::Client, root: &str) -> Result<BTreeMap<String, zk::Stat>> {
        let mut out = BTreeMap::new();
        let mut queue = vec![root.to_string()];
        while let Some(p) = queue.pop() {
            if p == "/zookeeper" && self.chroot.is_none() {
                continue;
            }
            match client.get_children(&p).await {
                Ok((children, stat)) => {
                    for c in children {
                        queue.push(join(&p, &c));
                    }
                    if p != "/" {
                        out.insert(p, stat);
                    }
                }
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(self.map_err(e, "scan", &p)),
            }
        }
        Ok(out)
    }

    /// Adds `prefix` to the tracked roots (scanning it) unless a root covers it.
    pub(super) async fn track(&self, prefix: &str) -> Result<()> {
        if self.tracked(prefix) {
            return Ok(());
        }
        let client = self.client()?;
        let nodes = self.scan(&client, prefix).await?;
        let mut t = self.tracking.lock().unwrap();
        for (p, s) in &nodes {
            self.hwm
                .fetch_max(s.mzxid.max(s.czxid).max(s.pzxid), Ordering::Relaxed);
            t.known.insert(p.clone());
        }
        t.roots.retain(|r| !is_under(r, prefix));
        t.roots.push(prefix.to_string());
        Ok(())
    }

    /// After a reconnection: rescans the tracked roots and emits what changed unseen.
    ///
    /// Runs once the watch delivers again, so what changes after the scan is notified live; a node modified
    /// after [`Inner::note_disconnected`]'s zxid is reported `Modified`.
    pub(super) async fn resync(&self) {
        let floor = self.resync_floor.lock().unwrap().take();
        let hwm = floor.unwrap_or_else(|| self.hwm.load(Ordering::Relaxed));
        // A failed resync leaves the floor for the one after the next reconnection.
        let keep_floor = || {
            let mut f = self.resync_floor.lock().unwrap();
            *f = Some(f.map_or(hwm, |x| x.min(hwm)));
        };
        let roots = self.tracking.lock().unwrap().roots.clone();
        if roots.is_empty() {
            return;
        }
        let Ok(client) = self.client() else {
            keep_floor();
            return;
        };
        let mut current = BTreeMap::new();
        for root in &roots {
            match self.scan(&client, root).await {
                Ok(nodes) => current.extend(nodes),
                Err(e) => {
                    tracing::warn!("resync scan of {root} failed: {e}");
                    keep_floor();
                    return;
                }
            }
        }
        let changes = {
            let mut t = self.tracking.lock().unwrap();
            let changes = Changes::between(&mut t.known, &roots, &current, hwm);
            for s in current.values() {
                self.hwm
                    .fetch_max(s.mzxid.max(s.czxid).max(s.pzxid), Ordering::Relaxed);
            }
            changes
        };
        for n in changes.notifications() {
            self.notifications.notify(n);
        }
        let Changes {
            deleted, created, ..
        } = changes;
        if !(deleted.is_empty() && created.is_empty()) {
            tracing::info!(
                store = %self.address(),
                created = created.len(),
                deleted = deleted.len(),
                "resynchronised notifications after reconnecting"
            );
        }
    }
}

/// Turns the recursive watch's events into notifications, tracking nodes and the zxid high-water mark.
///
/// The client also puts the session's state changes into the watcher's stream, in order with the node
/// events (no change is coalesced, unlike the state watcher): after `Disconnected` nothing more arrives from
/// the old connection, and at the following `SyncConnected` [`after_reconnect`] re-adds the watch on the
/// server and rescans what was missed.
async fn event_loop(
    weak: Weak<Inner>,
    client: zk::Client,
    mut watcher: zk::PersistentWatcher,
    generation: u64,
) {
    let mut stats = FuturesUnordered::new();
    let mut disconnected = false;
    loop {
        tokio::select! {
            event = watcher.changed() => {
                let Some(inner) = weak.upgrade() else { return };
                if event.event_type == zk::EventType::Session {
                    match (event.session_state, disconnected) {
                        (state, _) if state.is_terminated() => return,
                        (zk::SessionState::Disconnected, false) => {
                            disconnected = true;
                            inner.note_disconnected();
                        }
                        (
                            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly,
                            true,
                        ) => {
                            disconnected = false;
                            let rearm = after_reconnect(weak.clone(), client.clone(), generation);
                            inner.spawn_task(generation, rearm);
                        }
                        _ => {}
                    }
                    continue;
                }
                let path = event.path;
                if path == "/" || (inner.chroot.is_none() && is_under(&path, "/zookeeper")) {
                    continue;
                }
                let tracked = inner.tracked(&path);
                let kind = match event.event_type {
                    zk::EventType::NodeCreated => NotificationType::Created,
                    zk::EventType::NodeDeleted => NotificationType::Deleted,
                    zk::EventType::NodeDataChanged => NotificationType::Modified,
                    zk::EventType::NodeChildrenChanged => NotificationType::ChildrenChanged,
                    zk::EventType::Session => continue,
                };
                match kind {
                    NotificationType::Created if tracked => {
                        inner.tracking.lock().unwrap().known.insert(path.clone());
                        stats.push(client.check_stat(&path));
                    }
                    NotificationType::Deleted => {
                        if tracked {
                            inner.tracking.lock().unwrap().known.remove(&path);
                        }
                        inner.disown(&path);
                    }
                    NotificationType::Modified if tracked => {
                        stats.push(client.check_stat(&path));
                    }
                    _ => {}
                }
                inner.notifications.notify_change(kind, &path);
            }
            Some(result) = stats.next(), if !stats.is_empty() => {
                if let (Ok(Some(stat)), Some(inner)) = (result, weak.upgrade()) {
                    inner.hwm.fetch_max(stat.mzxid.max(stat.czxid), Ordering::Relaxed);
                }
            }
        }
    }
}

/// Back on a connection of the same session: re-adds the recursive watch (retried while connected; a later
/// reconnection starts another attempt), then reports what changed while it was missing.
async fn after_reconnect(weak: Weak<Inner>, client: zk::Client, generation: u64) {
    let mut pause = Duration::from_millis(100);
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst)
            || inner.generation.load(Ordering::SeqCst) != generation
        {
            return;
        }
        match inner.rearm_watch(&client).await {
            Ok(()) => break,
            Err(e)
                if matches!(
                    client.state(),
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
                ) =>
            {
                tracing::warn!("re-adding the recursive watch failed ({e}); retrying in {pause:?}");
            }
            // Disconnected again (the next reconnection re-arms) or the session ended.
            Err(_) => return,
        }
        drop(inner);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
    let Some(inner) = weak.upgrade() else { return };
    tracing::debug!(store = %inner.address(), "recursive watch re-added after reconnecting");
    if let Err(e) = inner.verify_owned(&client).await {
        tracing::warn!("checking owned ephemerals after reconnecting failed: {e}");
    }
    inner.resync().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(czxid: i64, mzxid: i64) -> zk::Stat {
        zk::Stat {
            czxid,
            mzxid,
            pzxid: mzxid,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        }
    }

    fn set(paths: &[&str]) -> BTreeSet<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn a_rescan_finds_what_was_created_deleted_and_modified_meanwhile() {
        let mut known = set(&["/r", "/r/a", "/r/a/x", "/r/b", "/r/c", "/other/o"]);
        let roots = vec!["/r".to_string()];
        let current: BTreeMap<String, zk::Stat> = [
            ("/r", stat(1, 1)),
            // Modified after the high-water mark of 50.
            ("/r/b", stat(2, 51)),
            // Modified before it: already delivered.
            ("/r/c", stat(3, 50)),
            ("/r/d", stat(60, 60)),
            ("/r/d/y", stat(61, 61)),
        ]
        .into_iter()
        .map(|(p, s)| (p.to_string(), s))
        .collect();
        let changes = Changes::between(&mut known, &roots, &current, 50);
        assert_eq!(
            changes,
            Changes {
                deleted: vec!["/r/a".into(), "/r/a/x".into()],
                created: vec!["/r/d".into(), "/r/d/y".into()],
                modified: vec!["/r/b".into()],
            }
        );
        // Known nodes outside the roots are left alone; the rest now matches the scan.
        assert_eq!(
            known,
            set(&["/other/o", "/r", "/r/b", "/r/c", "/r/d", "/r/d/y"])
        );
        // A second comparison with the same scan finds nothing new.
        let again = Changes::between(&mut known, &roots, &current, 61);
        assert_eq!(again, Changes::default());
    }

    #[test]
    fn resync_notifications_delete_children_first_then_create_then_tell_parents() {
        use NotificationType::*;
        let changes = Changes {
            deleted: vec!["/r/a".into(), "/r/a/x".into()],
            created: vec!["/r/d".into(), "/r/d/y".into()],
            modified: vec!["/r/b".into()],
        };
        assert_eq!(
            changes.notifications(),
            vec![
                Notification::new(Deleted, "/r/a/x"),
                Notification::new(Deleted, "/r/a"),
                Notification::new(Created, "/r/d"),
                Notification::new(Created, "/r/d/y"),
                Notification::new(ChildrenChanged, "/r"),
                Notification::new(ChildrenChanged, "/r/a"),
                Notification::new(ChildrenChanged, "/r/d"),
                Notification::new(Modified, "/r/b"),
            ]
        );
        assert!(Changes::default().notifications().is_empty());
    }
}
