//! Notifications on ZooKeeper: one persistent recursive watch per watched root, their event loop, their
//! re-arming after every reconnection, and the rescan of the subscribed prefixes that reports what a
//! disconnection hid.
//!
//! # Contract
//!
//! See "Mapping" (notifications) and "Pitfalls handled" in the module docs of [`super`]:
//!
//! * A root is watched with `AddWatchMode::PersistentRecursive` on the root itself, so the server sends the
//!   session only the events under its roots. [`Inner::ensure_watch`] adds one for a subscribed prefix (or
//!   the node a batch's guard checks) unless a watched root covers it; a root that covers earlier ones is
//!   added beside them. The roots are kept in install order for the store's lifetime and installed on every
//!   new client (a new session, or the session resumed by a new client; [`Inner::restore_watches`]); within
//!   a connection's life they are re-added on the server after every reconnection
//!   ([`Inner::rearm_watches`]: `zookeeper-client` 0.11 does not restore persistent watches).
//! * One event loop per client reads every watcher. The client hands an event to each recursive watcher
//!   above its path, so the loop takes each node's events from the watcher of the oldest root covering it
//!   only ([`owner`]): no duplicates, and a broader root added later never misses or repeats the events of
//!   the narrower one it covers. Session state changes reach every watcher: the loop follows the first
//!   watcher's only, so each reconnection is handled once.
//! * `ChildrenChanged` is synthesised for the parent of a created or deleted node.
//! * For every subscribed prefix the store keeps the nodes known to exist; after a reconnection (once the
//!   watches are back) or a new session, [`Changes::between`] compares a rescan with them: a node no longer
//!   there is `Deleted`, a new one `Created`, a known one whose `mzxid` is above the high-water mark of when
//!   the connection dropped `Modified`; [`Changes::notifications`] orders them deletions (deepest first),
//!   creations, the parents' `ChildrenChanged`, modifications.
//! * Owned ephemerals deleted or replaced meanwhile are marked gone ([`Inner::verify_owned`]), so guards on
//!   them fail.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use zookeeper_client as zk;

use super::{Inner, Watches};
use crate::store::path::{is_under, join, parent};
use crate::store::{Notification, NotificationType, Result};

/// `getChildren` requests in flight while a root is scanned.
const SCAN_IN_FLIGHT: usize = 256;

/// `getChildren` requests in flight once a first scan goes on in the background: it must not slow what the
/// caller does next (a new leader reading its state from the same servers).
const BACKGROUND_SCAN_IN_FLIGHT: usize = 8;

/// How long `watch` waits for the first scan of a new root before it lets a large one go on in the
/// background.
const FIRST_SCAN_WAIT: Duration = Duration::from_millis(250);

/// Nodes a first scan must have listed before it may go on in the background: a smaller prefix is always
/// scanned before `watch` returns, however slow the server.
const BACKGROUND_SCAN_MIN_NODES: usize = 2_000;

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
    /// Watches `root` on the current session unless a watched root covers it, after installing every root
    /// watched so far if this session lacks them (see the module docs). True if `root` is a new root.
    pub(super) async fn ensure_watch(self: &Arc<Self>, root: &str) -> Result<bool> {
        self.install_watches(Some(root)).await
    }

    /// Installs every root watched so far on the current session if it lacks them (a new session, or the
    /// session resumed by a new client).
    pub(super) async fn restore_watches(self: &Arc<Self>) -> Result<()> {
        self.install_watches(None).await.map(drop)
    }

    /// Whether any root is watched (the watches must then be restored on every new client).
    pub(super) async fn has_watches(&self) -> bool {
        !self.watches.lock().await.roots.is_empty()
    }

    /// The roots watched on client `generation` (empty once a newer client replaced it).
    pub(super) async fn watched_roots(&self, generation: u64) -> Vec<String> {
        let watches = self.watches.lock().await;
        if watches.generation == generation {
            watches.roots.clone()
        } else {
            Vec::new()
        }
    }

    /// [`Inner::ensure_watch`] of `root`, or of no new root; true if `root` is a new root.
    async fn install_watches(self: &Arc<Self>, root: Option<&str>) -> Result<bool> {
        let mut watches = self.watches.lock().await;
        let new_root = root.filter(|r| !watches.roots.iter().any(|w| is_under(r, w)));
        let (client, generation) = self.client_and_generation()?;
        if watches.generation == generation {
            let Some(root) = new_root else {
                return Ok(false);
            };
            let watcher = self.add_watch(&client, root).await?;
            if let Some(added) = &watches.added {
                // The loop ends only with the session, whose successor installs every root again.
                let _ = added.send((root.to_string(), watcher));
            }
            watches.roots.push(root.to_string());
            return Ok(true);
        }
        let mut roots = watches.roots.clone();
        roots.extend(new_root.map(str::to_string));
        if roots.is_empty() {
            return Ok(false);
        }
        let mut watchers = Vec::with_capacity(roots.len());
        for r in &roots {
            watchers.push((r.clone(), self.add_watch(&client, r).await?));
        }
        let (added, receiver) = tokio::sync::mpsc::unbounded_channel();
        *watches = Watches {
            roots,
            generation,
            added: Some(added),
        };
        self.spawn_task(
            generation,
            event_loop(Arc::downgrade(self), client, watchers, receiver, generation),
        );
        Ok(new_root.is_some())
    }

    /// Adds the recursive watch of every root of client `generation` to the server again and drops the
    /// client-side watchers this creates: the event loop's watchers, registered on the same paths, stay and
    /// receive everything from then on.
    ///
    /// Needed after every reconnection within a session: `zookeeper-client` 0.11 re-sends the session's
    /// watches with a `SetWatches` request that has no room for persistent watches (its `resend_watches`
    /// never switches to `SetWatches2`), so the server forgets the recursive watches on every new connection.
    /// `addWatch` is idempotent on the server, so this is also right with a client that does re-send them.
    /// Dropping a duplicate removes nothing on the server while another watcher of the path remains.
    async fn rearm_watches(&self, client: &zk::Client, generation: u64) -> Result<()> {
        for root in self.watched_roots(generation).await {
            let duplicate = self.add_watch(client, &root).await?;
            drop(duplicate);
        }
        Ok(())
    }

    /// Sends `addWatch` of the persistent recursive watch on `root` (within the operation timeout).
    async fn add_watch(&self, client: &zk::Client, root: &str) -> Result<zk::PersistentWatcher> {
        self.timed("watch", root, async {
            client
                .watch(root, zk::AddWatchMode::PersistentRecursive)
                .await
                .map_err(|e| self.map_err(e, "watch", root))
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
            self.verify_owned_node(client, &path, czxid).await?;
        }
        Ok(())
    }

    /// Marks owned ephemeral `path` created at `czxid` as gone if it no longer is that node.
    pub(super) async fn verify_owned_node(
        &self,
        client: &zk::Client,
        path: &str,
        czxid: i64,
    ) -> Result<()> {
        let current = client
            .check_stat(path)
            .await
            .map_err(|e| self.map_err(e, "stat", path))?;
        if !matches!(current, Some(s) if s.czxid == czxid) {
            let mut owned = self.owned.lock().unwrap();
            if let Some(c) = owned.get_mut(path).filter(|c| **c == czxid) {
                tracing::info!("owned ephemeral {path} changed unseen");
                *c = -1;
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

    /// Every node under `root` with its stat (skipping ZooKeeper's own `/zookeeper`): one `getChildren` per
    /// node, `in_flight` at a time (read before each new request, so a caller may lower it meanwhile), adding
    /// each node listed to `count`. (One at a time, a new leader's first watch of `/namespace` over
    /// 100,000 bundles took longer than the operation timeout, so it failed and started again, for minutes.)
    async fn scan(
        &self,
        client: &zk::Client,
        root: &str,
        in_flight: &AtomicUsize,
        count: &AtomicUsize,
    ) -> Result<BTreeMap<String, zk::Stat>> {
        let mut out = BTreeMap::new();
        let mut queue = vec![root.to_string()];
        let mut pending = FuturesUnordered::new();
        loop {
            while pending.len() < in_flight.load(Ordering::Relaxed).max(1) {
                let Some(p) = queue.pop() else { break };
                if p == "/zookeeper" && self.chroot.is_none() {
                    continue;
                }
                let client = client.clone();
                pending.push(async move {
                    let listed = client.get_children(&p).await;
                    (p, listed)
                });
            }
            let Some((p, listed)) = pending.next().await else {
                break;
            };
            match listed {
                Ok((children, stat)) => {
                    for c in children {
                        queue.push(join(&p, &c));
                    }
                    if p != "/" {
                        out.insert(p, stat);
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(self.map_err(e, "scan", &p)),
            }
        }
        Ok(out)
    }

    /// Adds `prefix` to the tracked roots unless a root covers it, and starts its first scan as a task;
    /// returns that scan (`None`: nothing to scan) for `watch` to wait on ([`FirstScan::wait`]).
    ///
    /// The watch is on the server before this is called, and from now on its events keep the known nodes
    /// up to date; the scan only adds the nodes that were there before, which nothing needs until a resync
    /// (which waits for it). So `watch` waits for a small scan to end but lets a large one go on in the
    /// background: a new leader's watches of 100,000 bundles took 8 s otherwise. A scan that fails (the
    /// connection dropped while it ran) leaves the nodes it had not reached unknown: the resync that follows
    /// reports those as created (readers take that as a reason to read them again), and cannot report a
    /// deletion of one of them.
    pub(super) fn track(self: &Arc<Self>, prefix: &str) -> Result<Option<FirstScan>> {
        if self.tracked(prefix) {
            return Ok(None);
        }
        let client = self.client()?;
        let generation = self.generation.load(Ordering::SeqCst);
        {
            let mut t = self.tracking.lock().unwrap();
            t.roots.retain(|r| !is_under(r, prefix));
            t.roots.push(prefix.to_string());
        }
        self.scans.send_modify(|n| *n += 1);
        let running = ScanRunning(Arc::downgrade(self));
        let weak = Arc::downgrade(self);
        let root = prefix.to_string();
        let (done, ended) = tokio::sync::oneshot::channel::<()>();
        let in_flight = Arc::new(AtomicUsize::new(SCAN_IN_FLIGHT));
        let listed = Arc::new(AtomicUsize::new(0));
        let (limit, count) = (in_flight.clone(), listed.clone());
        self.spawn_task(generation, async move {
            let _running = running;
            // Dropped when the task ends or is aborted, which is what the waiting `watch` hears.
            let _done = done;
            let Some(inner) = weak.upgrade() else { return };
            let started = std::time::Instant::now();
            match inner.scan(&client, &root, &limit, &count).await {
                Ok(nodes) => {
                    let mut t = inner.tracking.lock().unwrap();
                    for (p, s) in &nodes {
                        inner
                            .hwm
                            .fetch_max(s.mzxid.max(s.czxid).max(s.pzxid), Ordering::Relaxed);
                        t.known.insert(p.clone());
                    }
                    tracing::debug!(
                        store = %inner.address(),
                        "first scan of {root}: {} nodes in {} ms",
                        nodes.len(),
                        started.elapsed().as_millis()
                    );
                }
                Err(e) => tracing::warn!(
                    store = %inner.address(),
                    "first scan of {root} failed ({e}); the next resync reports its nodes as created"
                ),
            }
        });
        Ok(Some(FirstScan {
            ended,
            in_flight,
            listed,
        }))
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
        // Every first scan must be done, or the nodes it has not reached yet would look created.
        let _ = self.scans.subscribe().wait_for(|n| *n == 0).await;
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
            let (in_flight, listed) = (AtomicUsize::new(SCAN_IN_FLIGHT), AtomicUsize::new(0));
            match self.scan(&client, root, &in_flight, &listed).await {
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

/// A first scan running (see [`Inner::track`]).
pub(super) struct FirstScan {
    /// Resolves (with an error: nothing is ever sent) when the scan's task ends or is aborted.
    ended: tokio::sync::oneshot::Receiver<()>,
    in_flight: Arc<AtomicUsize>,
    listed: Arc<AtomicUsize>,
}

impl FirstScan {
    /// Waits for the scan to end, or, once it has run [`FIRST_SCAN_WAIT`] and listed at least
    /// [`BACKGROUND_SCAN_MIN_NODES`] nodes, lets it go on at [`BACKGROUND_SCAN_IN_FLIGHT`] requests in flight.
    pub(super) async fn wait(mut self) {
        loop {
            match tokio::time::timeout(FIRST_SCAN_WAIT, &mut self.ended).await {
                Ok(_) => return,
                Err(_) if self.listed.load(Ordering::Relaxed) >= BACKGROUND_SCAN_MIN_NODES => {
                    self.in_flight
                        .store(BACKGROUND_SCAN_IN_FLIGHT, Ordering::Relaxed);
                    return;
                }
                Err(_) => {}
            }
        }
    }
}

/// Counts a first scan as running until dropped (the scan's task ended or was aborted).
struct ScanRunning(Weak<Inner>);

impl Drop for ScanRunning {
    fn drop(&mut self) {
        if let Some(inner) = self.0.upgrade() {
            inner.scans.send_modify(|n| *n = n.saturating_sub(1));
        }
    }
}

/// The watcher (by install order) that delivers the events of `path`: the oldest root covering it. A later
/// root covering an earlier one also receives the earlier one's events (the client hands every event to
/// each recursive watcher above its path); they are dropped from it, so each node's events come from one
/// watcher, in order, with none missed while the later root was being added.
fn owner(roots: &[String], path: &str) -> Option<usize> {
    roots.iter().position(|r| is_under(path, r))
}

type WatcherEvents = futures::stream::BoxStream<'static, (usize, zk::WatchedEvent)>;

/// The events of the watcher with install index `index`.
fn events(index: usize, watcher: zk::PersistentWatcher) -> WatcherEvents {
    futures::stream::unfold(watcher, move |mut watcher| async move {
        let event = watcher.changed().await;
        Some(((index, event), watcher))
    })
    .boxed()
}

/// Turns the events of the recursive watches of one client into notifications, tracking nodes and the zxid
/// high-water mark. `watchers` are the roots installed with the loop, `added` brings those added later.
///
/// The client also puts the session's state changes into every watcher's stream, in order with the node
/// events (no change is coalesced, unlike the state watcher): they are taken from the first watcher only
/// (watchers are never removed while the client lives), so each reconnection is handled once. After
/// `Disconnected` nothing more arrives from the old connection, and at the following `SyncConnected`
/// [`after_reconnect`] re-adds the watches on the server and rescans what was missed.
async fn event_loop(
    weak: Weak<Inner>,
    client: zk::Client,
    watchers: Vec<(String, zk::PersistentWatcher)>,
    mut added: tokio::sync::mpsc::UnboundedReceiver<(String, zk::PersistentWatcher)>,
    generation: u64,
) {
    let mut roots = Vec::with_capacity(watchers.len());
    let mut streams = futures::stream::SelectAll::new();
    for (root, watcher) in watchers {
        streams.push(events(roots.len(), watcher));
        roots.push(root);
    }
    let mut stats = FuturesUnordered::new();
    let mut disconnected = false;
    loop {
        tokio::select! {
            Some((root, watcher)) = added.recv() => {
                streams.push(events(roots.len(), watcher));
                roots.push(root);
            }
            Some((index, event)) = streams.next() => {
                let Some(inner) = weak.upgrade() else { return };
                if event.event_type == zk::EventType::Session {
                    match (event.session_state, disconnected) {
                        // Every watcher ends with the session (and panics if polled afterwards).
                        (state, _) if state.is_terminated() => return,
                        _ if index != 0 => {}
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
                if owner(&roots, &path) != Some(index) {
                    continue;
                }
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

/// Back on a connection of the same session: re-adds the recursive watch of every root (retried while
/// connected; a later reconnection starts another attempt), then reports what changed while they were
/// missing.
async fn after_reconnect(weak: Weak<Inner>, client: zk::Client, generation: u64) {
    let mut pause = Duration::from_millis(100);
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst)
            || inner.generation.load(Ordering::SeqCst) != generation
        {
            return;
        }
        match inner.rearm_watches(&client, generation).await {
            Ok(()) => break,
            Err(e)
                if matches!(
                    client.state(),
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
                ) =>
            {
                tracing::warn!(
                    "re-adding the recursive watches failed ({e}); retrying in {pause:?}"
                );
            }
            // Disconnected again (the next reconnection re-arms) or the session ended.
            Err(_) => return,
        }
        drop(inner);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
    let Some(inner) = weak.upgrade() else { return };
    tracing::debug!(store = %inner.address(), "recursive watches re-added after reconnecting");
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
    fn each_node_is_delivered_by_the_oldest_root_covering_it() {
        // A narrower root, a root covering it added later, an unrelated one.
        let roots: Vec<String> = ["/a/inbox", "/a", "/g/lock"]
            .iter()
            .map(|r| r.to_string())
            .collect();
        assert_eq!(owner(&roots, "/a/inbox"), Some(0));
        assert_eq!(owner(&roots, "/a/inbox/m"), Some(0));
        assert_eq!(owner(&roots, "/a"), Some(1));
        assert_eq!(owner(&roots, "/a/inboxes"), Some(1));
        assert_eq!(owner(&roots, "/g/lock"), Some(2));
        assert_eq!(owner(&roots, "/g"), None);
        assert_eq!(owner(&roots, "/b"), None);
        let all = vec!["/".to_string(), "/a".to_string()];
        assert_eq!(owner(&all, "/a/x"), Some(0));
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
