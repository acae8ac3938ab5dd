//! The in-memory backend: the embedded default, and the store of the simulator and of fast tests.
//!
//! # Model
//!
//! A tree like ZooKeeper's: creating `/a/b` creates a missing `/a` as an empty persistent node; an ephemeral
//! node may not have children; a node with children cannot be deleted. Versions start at 0; every write gets
//! the next value of one global revision counter ([`Stat::creation_revision`] /
//! [`Stat::modification_revision`]); times come from tokio's clock, so paused test time moves them.
//!
//! Each [`MemoryStore`] value is one session on some data. [`MemoryStore::new_session`] and the URL
//! `memory:NAME` give several sessions on the same data — several brokers in one process. Ephemerals belong to
//! the session that created them and vanish when it is closed, dropped or expired.
//!
//! # Faults on demand
//!
//! * [`MemoryStore::disconnect`] / [`MemoryStore::reconnect`] simulate a network cut: calls fail with
//!   [`Error::Unavailable`], `ConnectionLost` is emitted; if the cut lasts 9/10 of the session timeout
//!   (tokio time) the session counts as lost, as a real client's would (its [`SessionValidity`] ends,
//!   `SessionLost` is emitted), and at the whole timeout it expires as on a server (its ephemerals are
//!   deleted); `reconnect` after the loss opens a new session, re-creates the ephemerals and emits
//!   `Reconnected`, `SessionReestablished`. While connected the session's validity has no deadline.
//! * [`MetadataStore::expire_session`] expires the session at once (`SessionLost`, ephemerals deleted,
//!   `SessionReestablished` with the ephemerals re-created).
//!
//! Batches are atomic: they run under the store lock with an undo log.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use tokio::time::Instant;

use super::fanout::{node_change, Fanout};
use super::path::{join, parent_or_root, sequence_suffix};
use super::validity::{lost_after, Term};
use super::{
    validate_path, Backend, CreateOptions, Error, GetResult, MetadataStore, Notification,
    NotificationStream, NotificationType, Op, OpResult, Result, SessionEvent, SessionEventStream,
    SessionValidity, Stat, StoreOptions, CREATE_ONLY,
};

#[derive(Debug, Clone)]
struct Node {
    value: Vec<u8>,
    version: i64,
    created_rev: i64,
    modified_rev: i64,
    created_ms: i64,
    modified_ms: i64,
    owner: Option<u64>,
    /// Child creations so far: the next sequential suffix.
    cversion: i64,
}

#[derive(Debug)]
struct Data {
    nodes: BTreeMap<String, Node>,
    revision: i64,
    next_session: u64,
}

#[derive(Debug)]
struct Shared {
    name: Option<String>,
    data: Mutex<Data>,
    sessions: Mutex<Vec<Weak<Session>>>,
    epoch_ms: i64,
    started: Instant,
}

impl Shared {
    fn new(name: Option<String>) -> Arc<Shared> {
        let epoch_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "/".to_string(),
            Node {
                value: Vec::new(),
                version: 0,
                created_rev: 0,
                modified_rev: 0,
                created_ms: epoch_ms,
                modified_ms: epoch_ms,
                owner: None,
                cversion: 0,
            },
        );
        Arc::new(Shared {
            name,
            data: Mutex::new(Data {
                nodes,
                revision: 0,
                next_session: 1,
            }),
            sessions: Mutex::new(Vec::new()),
            epoch_ms,
            started: Instant::now(),
        })
    }

    fn now_ms(&self) -> i64 {
        self.epoch_ms + self.started.elapsed().as_millis() as i64
    }

    /// Delivers notifications to every live session's subscribers; called with the data lock held so that
    /// every subscriber sees writes in commit order.
    fn publish(&self, notifications: &[Notification]) {
        if notifications.is_empty() {
            return;
        }
        let mut sessions = self.sessions.lock().unwrap();
        sessions.retain(|w| w.strong_count() > 0);
        for session in sessions.iter().filter_map(Weak::upgrade) {
            for n in notifications {
                session.notifications.notify(n.clone());
            }
        }
    }

    /// Deletes every ephemeral of `owner`, publishing the deletions. Called with the data lock held.
    fn delete_ephemerals(&self, data: &mut Data, owner: u64) {
        let paths: Vec<String> = data
            .nodes
            .iter()
            .filter(|(_, n)| n.owner == Some(owner))
            .map(|(p, _)| p.clone())
            .collect();
        let mut events = Vec::new();
        for path in paths {
            data.nodes.remove(&path);
            data.revision += 1;
            events.extend(node_change(NotificationType::Deleted, &path));
        }
        self.publish(&events);
    }
}

fn registry() -> &'static Mutex<HashMap<String, Weak<Shared>>> {
    static REGISTRY: std::sync::OnceLock<Mutex<HashMap<String, Weak<Shared>>>> =
        std::sync::OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

#[derive(Debug)]
struct SessionState {
    id: u64,
    connected: bool,
    disconnected_at: Option<Instant>,
    /// The session expired while disconnected; `reconnect` opens a new one.
    lost: bool,
    closed: bool,
    /// Ephemerals this store created and has not deleted: re-created in a new session.
    ephemerals: BTreeMap<String, Vec<u8>>,
    /// The current term: no deadline while connected; during a cut, 9/10 of the session timeout after it
    /// began (the expiry comes at the whole timeout).
    term: Arc<Term>,
}

#[derive(Debug)]
struct Session {
    shared: Arc<Shared>,
    state: Mutex<SessionState>,
    notifications: Fanout<Notification>,
    events: Fanout<SessionEvent>,
    options: StoreOptions,
}

/// One session on an in-memory tree; see the module docs.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    session: Arc<Session>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// A private store (`memory:`).
    pub fn new() -> Self {
        Self::with_options(StoreOptions::default())
    }

    /// A private store with options (the session timeout drives simulated expiry).
    pub fn with_options(options: StoreOptions) -> Self {
        Self::open(Shared::new(None), options)
    }

    /// A session on the process-wide store `name` (`memory:NAME`); the data lives while any session of it
    /// does.
    pub fn named(name: &str, options: StoreOptions) -> Self {
        let mut reg = registry().lock().unwrap();
        let shared = match reg.get(name).and_then(Weak::upgrade) {
            Some(shared) => shared,
            None => {
                let shared = Shared::new(Some(name.to_string()));
                reg.insert(name.to_string(), Arc::downgrade(&shared));
                shared
            }
        };
        drop(reg);
        Self::open(shared, options)
    }

    /// Another session on the same data (another broker).
    pub fn new_session(&self) -> Self {
        Self::open(self.session.shared.clone(), self.session.options.clone())
    }

    fn open(shared: Arc<Shared>, options: StoreOptions) -> Self {
        let id = {
            let mut data = shared.data.lock().unwrap();
            data.next_session += 1;
            data.next_session - 1
        };
        let session = Arc::new(Session {
            shared: shared.clone(),
            state: Mutex::new(SessionState {
                id,
                connected: true,
                disconnected_at: None,
                lost: false,
                closed: false,
                ephemerals: BTreeMap::new(),
                term: Term::new(None),
            }),
            notifications: Fanout::default(),
            events: Fanout::default(),
            options,
        });
        shared
            .sessions
            .lock()
            .unwrap()
            .push(Arc::downgrade(&session));
        MemoryStore { session }
    }

    /// The current session id (changes when the session expires).
    pub fn session_id(&self) -> u64 {
        self.session.state.lock().unwrap().id
    }

    /// Simulates a network cut: see the module docs. Needs a tokio runtime (the expiry timer).
    pub fn disconnect(&self) {
        let (id, timeout) = {
            let mut st = self.session.state.lock().unwrap();
            if st.closed || !st.connected {
                return;
            }
            st.connected = false;
            st.disconnected_at = Some(Instant::now());
            st.term.acknowledged(Instant::now());
            st.term
                .set_lifetime(Some(lost_after(self.session.options.session_timeout)));
            (st.id, self.session.options.session_timeout)
        };
        self.session.events.send(&SessionEvent::ConnectionLost);
        let weak = Arc::downgrade(&self.session);
        tokio::spawn(async move {
            // The client's side first: at 9/10 of the timeout the session counts as lost (its term ends, its
            // leases lapse, `SessionLost`); the server's side at the whole timeout (its ephemerals go).
            let declared = lost_after(timeout);
            tokio::time::sleep(declared).await;
            let Some(session) = weak.upgrade() else {
                return;
            };
            let lost = {
                let mut st = session.state.lock().unwrap();
                if st.connected || st.closed || st.id != id || st.lost {
                    false
                } else {
                    st.lost = true;
                    st.term.end();
                    true
                }
            };
            if !lost {
                return;
            }
            session.events.send(&SessionEvent::SessionLost);
            drop(session);
            tokio::time::sleep(timeout.saturating_sub(declared)).await;
            let Some(session) = weak.upgrade() else {
                return;
            };
            let expired = {
                let st = session.state.lock().unwrap();
                !st.connected && !st.closed && st.id == id
            };
            if expired {
                let mut data = session.shared.data.lock().unwrap();
                session.shared.delete_ephemerals(&mut data, id);
            }
        });
    }

    /// Ends a simulated network cut (see the module docs).
    pub fn reconnect(&self) {
        let lost = {
            let mut st = self.session.state.lock().unwrap();
            if st.closed || st.connected {
                return;
            }
            st.connected = true;
            st.disconnected_at = None;
            st.term.set_lifetime(None);
            std::mem::take(&mut st.lost)
        };
        if lost {
            self.session.new_session_and_restore();
            self.session.events.send(&SessionEvent::Reconnected);
            self.session
                .events
                .send(&SessionEvent::SessionReestablished);
        } else {
            self.session.events.send(&SessionEvent::Reconnected);
        }
    }

    fn address(&self) -> String {
        match &self.session.shared.name {
            Some(n) => format!("memory:{n}"),
            None => "memory:".to_string(),
        }
    }

    /// Fails unless connected and open; returns the session id.
    fn live(&self) -> Result<u64> {
        let st = self.session.state.lock().unwrap();
        if st.closed {
            return Err(Error::Closed);
        }
        if !st.connected {
            return Err(Error::Unavailable {
                address: self.address(),
                elapsed: st.disconnected_at.map(|t| t.elapsed()).unwrap_or_default(),
                reason: "disconnected (simulated network cut)".to_string(),
            });
        }
        Ok(st.id)
    }

    fn stat(&self, path: &str, node: &Node, session: u64) -> Stat {
        Stat {
            path: path.to_string(),
            version: node.version,
            creation_revision: node.created_rev,
            modification_revision: node.modified_rev,
            created_ms: node.created_ms,
            modified_ms: node.modified_ms,
            ephemeral: node.owner.is_some(),
            created_by_self: node.owner == Some(session),
        }
    }

    /// Runs `ops` atomically: on error nothing is applied.
    fn apply(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        for op in ops {
            validate_path(op.path())?;
        }
        let session = self.live()?;
        let shared = &self.session.shared;
        let mut data = shared.data.lock().unwrap();
        let mut txn = Txn {
            data: &mut data,
            undo: Vec::new(),
            events: Vec::new(),
            now: shared.now_ms(),
            session,
            revision_before: 0,
        };
        txn.revision_before = txn.data.revision;
        let mut results = Vec::with_capacity(ops.len());
        let mut created_ephemerals = Vec::new();
        for op in ops {
            match txn.op(op) {
                Ok((result, created_ephemeral)) => {
                    if let Some(p) = created_ephemeral {
                        created_ephemerals.push(p);
                    }
                    results.push(result);
                }
                Err(e) => {
                    txn.rollback();
                    return Err(e);
                }
            }
        }
        let events = std::mem::take(&mut txn.events);
        let results: Vec<OpResult> = results
            .into_iter()
            .map(|r| match r {
                TxnResult::Put(path) => {
                    let node = &data.nodes[&path];
                    OpResult::Put(self.stat(&path, node, session))
                }
                TxnResult::Delete => OpResult::Delete,
                TxnResult::Check => OpResult::Check,
            })
            .collect();
        // Keep the registry of own ephemerals in step.
        {
            let mut st = self.session.state.lock().unwrap();
            for (op, result) in ops.iter().zip(&results) {
                match (op, result) {
                    (Op::Put { value, .. }, OpResult::Put(stat))
                        if created_ephemerals.contains(&stat.path)
                            || (stat.created_by_self && st.ephemerals.contains_key(&stat.path)) =>
                    {
                        st.ephemerals.insert(stat.path.clone(), value.clone());
                    }
                    (Op::Delete { path, .. }, OpResult::Delete) => {
                        st.ephemerals.remove(path);
                    }
                    _ => {}
                }
            }
        }
        shared.publish(&events);
        Ok(results)
    }
}

impl Session {
    /// Gives the session a new id and re-creates its ephemerals in it (skipping nodes someone else holds).
    fn new_session_and_restore(&self) {
        let mut data = self.shared.data.lock().unwrap();
        let mut st = self.state.lock().unwrap();
        let old = st.id;
        data.next_session += 1;
        st.id = data.next_session - 1;
        st.term.end();
        st.term = Term::new(None);
        let new = st.id;
        let ephemerals = st.ephemerals.clone();
        drop(st);
        self.shared.delete_ephemerals(&mut data, old);
        let mut events = Vec::new();
        let now = self.shared.now_ms();
        let mut kept = BTreeMap::new();
        for (path, value) in ephemerals {
            let mut txn = Txn {
                data: &mut data,
                undo: Vec::new(),
                events: Vec::new(),
                now,
                session: new,
                revision_before: 0,
            };
            let op = Op::Put {
                path: path.clone(),
                value: value.clone(),
                expected_version: Some(CREATE_ONLY),
                options: CreateOptions::EPHEMERAL,
            };
            match txn.op(&op) {
                Ok(_) => {
                    events.append(&mut txn.events);
                    kept.insert(path, value);
                }
                Err(_) => txn.rollback(),
            }
        }
        self.state.lock().unwrap().ephemerals = kept;
        self.shared.publish(&events);
    }

    fn close(&self) {
        let id = {
            let mut st = self.state.lock().unwrap();
            if st.closed {
                return;
            }
            st.closed = true;
            st.term.end();
            st.id
        };
        let mut data = self.shared.data.lock().unwrap();
        self.shared.delete_ephemerals(&mut data, id);
        drop(data);
        self.notifications.close();
        self.events.close();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

enum TxnResult {
    Put(String),
    Delete,
    Check,
}

/// Mutations with an undo log, so a failing batch leaves no trace.
struct Txn<'a> {
    data: &'a mut Data,
    undo: Vec<(String, Option<Node>)>,
    events: Vec<Notification>,
    now: i64,
    session: u64,
    revision_before: i64,
}

impl Txn<'_> {
    fn set(&mut self, path: &str, node: Option<Node>) {
        let previous = match node {
            Some(n) => self.data.nodes.insert(path.to_string(), n),
            None => self.data.nodes.remove(path),
        };
        self.undo.push((path.to_string(), previous));
    }

    fn rollback(&mut self) {
        while let Some((path, previous)) = self.undo.pop() {
            match previous {
                Some(n) => self.data.nodes.insert(path, n),
                None => self.data.nodes.remove(&path),
            };
        }
        self.data.revision = self.revision_before;
        self.events.clear();
    }

    fn has_children(&self, path: &str) -> bool {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        self.data
            .nodes
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix) && k != "/")
    }

    /// Creates `path` (its parent must exist), bumping the parent's child counter.
    fn create(&mut self, path: &str, value: &[u8], owner: Option<u64>) -> Result<()> {
        let parent_path = parent_or_root(path).expect("not the root").to_string();
        let mut parent_node = self
            .data
            .nodes
            .get(&parent_path)
            .cloned()
            .expect("parent exists");
        if parent_node.owner.is_some() {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "{path}: the parent {parent_path} is ephemeral and cannot have children"
                ),
            });
        }
        parent_node.cversion += 1;
        self.set(&parent_path, Some(parent_node));
        self.data.revision += 1;
        let node = Node {
            value: value.to_vec(),
            version: 0,
            created_rev: self.data.revision,
            modified_rev: self.data.revision,
            created_ms: self.now,
            modified_ms: self.now,
            owner,
            cversion: 0,
        };
        self.set(path, Some(node));
        self.events
            .extend(node_change(NotificationType::Created, path));
        Ok(())
    }

    /// Creates missing ancestors of `path` as empty persistent nodes.
    fn create_parents(&mut self, path: &str) -> Result<()> {
        let mut missing = Vec::new();
        let mut p = path;
        while let Some(parent) = parent_or_root(p) {
            if self.data.nodes.contains_key(parent) {
                break;
            }
            missing.push(parent.to_string());
            p = parent;
        }
        for m in missing.into_iter().rev() {
            self.create(&m, b"", None)?;
        }
        Ok(())
    }

    /// Applies one op; also returns the path of an ephemeral it created.
    fn op(&mut self, op: &Op) -> Result<(TxnResult, Option<String>)> {
        match op {
            Op::Check(guard) => match self.data.nodes.get(&guard.path) {
                Some(n)
                    if n.created_rev == guard.creation_revision && n.version == guard.version =>
                {
                    Ok((TxnResult::Check, None))
                }
                _ => Err(Error::Fenced {
                    path: guard.path.clone(),
                }),
            },
            Op::Delete {
                path,
                expected_version,
            } => {
                if path == "/" {
                    return Err(Error::InvalidArgument {
                        reason: "the root cannot be deleted".into(),
                    });
                }
                let Some(node) = self.data.nodes.get(path) else {
                    return Err(Error::not_found(path));
                };
                if let Some(v) = expected_version {
                    if node.version != *v {
                        return Err(Error::bad_version(path, *v));
                    }
                }
                if self.has_children(path) {
                    return Err(Error::NotEmpty { path: path.clone() });
                }
                self.set(path, None);
                self.data.revision += 1;
                self.events
                    .extend(node_change(NotificationType::Deleted, path));
                Ok((TxnResult::Delete, None))
            }
            Op::Put {
                path,
                value,
                expected_version,
                options,
            } => {
                if path == "/" {
                    return Err(Error::InvalidArgument {
                        reason: "the root cannot be written".into(),
                    });
                }
                let mut target = path.clone();
                if options.sequential {
                    self.create_parents(path)?;
                    let parent_path = parent_or_root(path).expect("not the root");
                    let seq = self.data.nodes[parent_path].cversion;
                    target = format!("{path}{}", sequence_suffix(seq));
                }
                let existing = self.data.nodes.get(&target).cloned();
                match (existing, expected_version) {
                    (Some(_), Some(CREATE_ONLY)) => Err(Error::bad_version(path, CREATE_ONLY)),
                    (None, Some(v)) if *v != CREATE_ONLY => Err(Error::bad_version(path, *v)),
                    (Some(n), Some(v)) if n.version != *v => Err(Error::bad_version(path, *v)),
                    (Some(mut n), _) => {
                        self.data.revision += 1;
                        n.value = value.clone();
                        n.version += 1;
                        n.modified_rev = self.data.revision;
                        n.modified_ms = self.now;
                        self.set(&target, Some(n));
                        self.events.push(Notification::new(
                            NotificationType::Modified,
                            target.clone(),
                        ));
                        Ok((TxnResult::Put(target), None))
                    }
                    (None, _) => {
                        self.create_parents(&target)?;
                        let owner = options.ephemeral.then_some(self.session);
                        self.create(&target, value, owner)?;
                        let eph = options.ephemeral.then(|| target.clone());
                        Ok((TxnResult::Put(target), eph))
                    }
                }
            }
        }
    }
}

#[async_trait]
impl MetadataStore for MemoryStore {
    fn backend(&self) -> Backend {
        Backend::Memory
    }

    fn address(&self) -> String {
        MemoryStore::address(self)
    }

    async fn get(&self, path: &str) -> Result<Option<GetResult>> {
        validate_path(path)?;
        let session = self.live()?;
        let data = self.session.shared.data.lock().unwrap();
        Ok(data.nodes.get(path).map(|n| GetResult {
            value: n.value.clone(),
            stat: self.stat(path, n, session),
        }))
    }

    async fn get_children(&self, path: &str) -> Result<Vec<String>> {
        validate_path(path)?;
        self.live()?;
        let data = self.session.shared.data.lock().unwrap();
        let prefix = join(path, "");
        Ok(data
            .nodes
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter_map(|(k, _)| {
                let rest = &k[prefix.len()..];
                (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_string())
            })
            .collect())
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        validate_path(path)?;
        self.live()?;
        Ok(self
            .session
            .shared
            .data
            .lock()
            .unwrap()
            .nodes
            .contains_key(path))
    }

    async fn put(
        &self,
        path: &str,
        value: &[u8],
        expected_version: Option<i64>,
        options: CreateOptions,
    ) -> Result<Stat> {
        let op = Op::Put {
            path: path.to_string(),
            value: value.to_vec(),
            expected_version,
            options,
        };
        match self.apply(std::slice::from_ref(&op))?.pop() {
            Some(OpResult::Put(stat)) => Ok(stat),
            other => unreachable!("a put yields a stat, got {other:?}"),
        }
    }

    async fn delete(&self, path: &str, expected_version: Option<i64>) -> Result<()> {
        self.apply(&[Op::Delete {
            path: path.to_string(),
            expected_version,
        }])
        .map(|_| ())
    }

    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        self.apply(&ops)
    }

    async fn watch(&self, prefix: &str) -> Result<NotificationStream> {
        self.live()?;
        super::subscribe(&self.session.notifications, prefix)
    }

    fn session_events(&self) -> SessionEventStream {
        self.session.events.subscribe("")
    }

    fn is_connected(&self) -> bool {
        let st = self.session.state.lock().unwrap();
        st.connected && !st.closed && !st.lost
    }

    fn session_validity(&self) -> SessionValidity {
        SessionValidity::of(&self.session.state.lock().unwrap().term)
    }

    async fn expire_session(&self) -> Result<()> {
        let (connected, id) = {
            let st = self.session.state.lock().unwrap();
            if st.closed {
                return Err(Error::Closed);
            }
            (st.connected, st.id)
        };
        if !connected {
            // Expire now; `reconnect` opens the new session.
            let mut st = self.session.state.lock().unwrap();
            if !st.lost {
                st.lost = true;
                st.term.end();
                drop(st);
                let mut data = self.session.shared.data.lock().unwrap();
                self.session.shared.delete_ephemerals(&mut data, id);
                drop(data);
                self.session.events.send(&SessionEvent::SessionLost);
            }
            return Ok(());
        }
        self.session.state.lock().unwrap().term.end();
        {
            let mut data = self.session.shared.data.lock().unwrap();
            self.session.shared.delete_ephemerals(&mut data, id);
        }
        self.session.events.send(&SessionEvent::SessionLost);
        self.session.new_session_and_restore();
        self.session
            .events
            .send(&SessionEvent::SessionReestablished);
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        self.session.close();
        Ok(())
    }
}
