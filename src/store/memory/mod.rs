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

use async_trait::async_trait;
use tokio::time::Instant;

mod tree;

use super::fanout::Fanout;
use super::path::join;
use super::validity::{lost_after, Term};
use super::{
    validate_path, Backend, CreateOptions, Error, GetResult, MetadataStore, Notification,
    NotificationStream, Op, OpResult, Result, SessionEvent, SessionEventStream, SessionValidity,
    Stat, StoreOptions, CREATE_ONLY,
};
use tree::{Node, Shared, Txn, TxnResult};

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
    /// Shared with the tree's registry (weakly), which publishes every change to it: the registry never holds
    /// the session itself, whose last drop takes the data lock a publisher holds.
    notifications: Arc<Fanout<Notification>>,
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
            notifications: Arc::new(Fanout::default()),
            events: Fanout::default(),
            options,
        });
        shared
            .sessions
            .lock()
            .unwrap()
            .push(Arc::downgrade(&session.notifications));
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
