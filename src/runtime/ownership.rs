//! The broker side of the hand-over: what this broker acquires and releases, driven by the assignment records
//! the leader writes (see the protocol in the [module docs](super)).
//!
//! The broker watches and scans only its own inbox (`/loadmgr/inbox/<broker>`, [`paths::INBOX`]): the leader
//! writes an entry there, in the same batch as the record, for every bundle whose record names this broker as
//! destination or as the source of an unfinished move, and rewrites the destination's entry when the bundle's
//! ownership node goes. What a broker costs the store so does not grow with the number of brokers. Bundles
//! waiting for an owner to release them are looked at again every 2 s as well.
//!
//! For every bundle this broker holds or is named destination of, it evaluates, in this order:
//! * it holds the ownership node (an ephemeral of its own session):
//!   - the record names another broker, or there is no record and the bundle left its namespace's bundle list
//!     (a split parent) → **release**: mark the node `disabled`, unload from the host, delete the node (by
//!     version);
//!   - otherwise keep it, and make sure the host serves it;
//! * it does not hold it and the record names it:
//!   - no ownership node exists and no other broker owns an overlapping range of the namespace → **acquire**:
//!     create the node create-only (the store lets exactly one create win), then load it into the host;
//!   - otherwise wait for the node (or the overlapping one) to go;
//! * it believed it held the node but the node is gone or not its own → stop serving.
//!
//! Where the store's notifications carry values (etcd), an inbox entry holds a copy of the record written with
//! it, and the first step above starts from that copy instead of a read: a destination that is not the holder
//! and is told no other range can be owned creates the node at once, and reads only if the node exists.
//!
//! When the store reports `SessionLost`, every bundle stops being served at once (the session's ephemerals may
//! be gone, and another broker may take them); after `SessionReestablished` every bundle is evaluated again
//! (the store re-creates this session's ephemerals where nobody else took them). A `Reconnected` in the same
//! session needs nothing: no bundle stopped, and the store re-derives the notifications the outage hid.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::host::OwnershipLease;
use super::identity::owner_of;
use super::shared::AgentShared;
use super::RuntimeError;
use crate::bundle::{BundleName, BundleRange};
use crate::model::json::to_json_vec;
use crate::model::records::BundleAssignment;
use crate::model::NamespaceEphemeralData;
use crate::paths;
use crate::store::{
    CreateOptions, Error, MetadataStoreExt, NodeAfter, SessionEvent, Stat, CREATE_ONLY,
};

/// What the agent tells the ownership task.
#[derive(Debug)]
pub(crate) enum OwnershipCommand {
    /// Release everything and stop.
    Shutdown(tokio::sync::oneshot::Sender<()>),
}

/// The outcome of evaluating one bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Nothing to do for this broker.
    Idle,
    /// Held and served.
    Held,
    /// Named destination, waiting for the node (or an overlapping one) to go.
    Waiting,
    /// Something failed; try again after a while.
    Retry,
}

/// Lists every bundle path below `root` (nodes whose name is a bundle range), relative to it and sorted; the
/// directories of one level are listed 64 at a time (a cluster has one per namespace).
pub(crate) async fn list_bundles(
    store: &crate::store::DynStore,
    root: &str,
) -> Result<Vec<String>, Error> {
    let found = crate::store::list_leaves(&**store, root, paths::is_range_segment).await?;
    Ok(found
        .iter()
        .filter_map(|p| paths::below(root, p).map(str::to_owned))
        .collect())
}

/// Reads a bundle's ownership node: (owner id, data, stat).
async fn read_ownership(
    sh: &AgentShared,
    bundle: &str,
) -> Result<Option<(String, NamespaceEphemeralData, Stat)>, Error> {
    let path = paths::ownership(bundle);
    Ok(sh
        .store
        .get(&path)
        .await?
        .map(|found| decode_ownership(&path, found)))
}

/// Decodes an ownership node as read: (owner id, data, stat); a malformed node is logged and counts as held
/// by someone this broker cannot name ("?").
fn decode_ownership(
    path: &str,
    found: crate::store::GetResult,
) -> (String, NamespaceEphemeralData, Stat) {
    match serde_json::from_slice::<NamespaceEphemeralData>(&found.value) {
        Ok(data) => (owner_of(&data).unwrap_or_default(), data, found.stat),
        Err(e) => {
            tracing::warn!(path, "malformed ownership node: {e}");
            (
                "?".to_owned(),
                NamespaceEphemeralData::default(),
                found.stat,
            )
        }
    }
}

/// Reads a bundle's assignment record and ownership node in one request (a ZooKeeper `multiRead`): half the
/// requests of two reads for every bundle a lookup storm hands to a broker. A malformed record is logged and
/// treated as absent.
async fn read_record_and_ownership(
    sh: &AgentShared,
    bundle: &str,
) -> Result<
    (
        Option<(BundleAssignment, Stat)>,
        Option<(String, NamespaceEphemeralData, Stat)>,
    ),
    Error,
> {
    let record_path = paths::assignment(bundle);
    let ownership_path = paths::ownership(bundle);
    let mut read = sh
        .store
        .get_many(&[record_path.clone(), ownership_path.clone()])
        .await?
        .into_iter();
    let (record, ownership) = (read.next().flatten(), read.next().flatten());
    let record = match record {
        None => None,
        Some(found) => match serde_json::from_slice::<BundleAssignment>(&found.value) {
            Ok(r) => Some((r, found.stat)),
            Err(e) => {
                tracing::warn!(
                    path = record_path,
                    "malformed assignment record ignored: {e}"
                );
                None
            }
        },
    };
    Ok((
        record,
        ownership.map(|found| decode_ownership(&ownership_path, found)),
    ))
}

impl AgentShared {
    fn is_mine(&self, owner: &str, stat: &Stat) -> bool {
        stat.ephemeral && stat.created_by_self && owner == self.broker_id
    }

    /// Whether another broker owns a range of the namespace that overlaps `bundle` (a split parent or child).
    async fn overlapping_owner(&self, bundle: &BundleName) -> Result<Option<String>, Error> {
        let ns = bundle.namespace().to_string();
        let range = bundle.range();
        for child in self
            .store
            .get_children(&paths::ownership_namespace(&ns))
            .await?
        {
            let Ok(other) = BundleRange::parse(&child) else {
                continue;
            };
            if other == range || !other.overlaps(&range) {
                continue;
            }
            let name = format!("{ns}/{child}");
            if let Some((owner, _, _)) = read_ownership(self, &name).await? {
                if owner != self.broker_id {
                    return Ok(Some(format!("{owner} owns the overlapping bundle {name}")));
                }
            }
        }
        Ok(None)
    }

    /// Stops serving and deletes the node (after marking it disabled, as Pulsar does before closing topics).
    async fn release(&self, bundle: &str, stat: &Stat, why: &str) -> Result<(), Error> {
        let path = paths::ownership(bundle);
        tracing::info!(bundle, broker = %self.broker_id, "releasing ownership: {why}");
        let disabled = NamespaceEphemeralData {
            disabled: true,
            ..self.ownership_data.clone()
        };
        let version = match self
            .store
            .put(
                &path,
                &to_json_vec(&disabled),
                Some(stat.version),
                CreateOptions::EPHEMERAL,
            )
            .await
        {
            Ok(s) => s.version,
            Err(Error::BadVersion { .. }) => stat.version,
            Err(e) => return Err(e),
        };
        // Stop accepting work first (the lease), then let the host close the bundle's topics.
        if let Some(lease) = self.served.lock().unwrap().remove(bundle) {
            lease.revoke();
        }
        self.host_unload(bundle).await;
        self.note_bundle_lost();
        match self.store.delete(&path, Some(version)).await {
            Ok(()) | Err(Error::NotFound { .. }) => {}
            Err(Error::BadVersion { .. }) => {
                // Not the node we disabled: only delete it if it is still ours.
                if let Some((owner, _, s)) = read_ownership(self, bundle).await? {
                    if self.is_mine(&owner, &s) {
                        self.store.delete_if_exists(&path, Some(s.version)).await?;
                    }
                }
            }
            Err(e) => return Err(e),
        }
        self.owned.lock().unwrap().remove(bundle);
        tracing::info!(bundle, broker = %self.broker_id, "released");
        Ok(())
    }

    /// Tells the host to stop serving, waiting at most `namespaceBundleUnloadingTimeoutMs` (the bundle is
    /// released anyway then, as Pulsar closes topics forcibly after that timeout).
    async fn host_unload(&self, bundle: &str) {
        let limit = Duration::from_millis(
            self.settings().namespace_bundle_unloading_timeout_ms.max(1) as u64,
        );
        match tokio::time::timeout(limit, self.host.unload_bundle(bundle)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(bundle, "the host failed to unload the bundle: {e}"),
            Err(_) => tracing::error!(
                bundle,
                "the host did not unload the bundle within namespaceBundleUnloadingTimeoutMs ({limit:?})"
            ),
        }
    }

    /// Tells the host to serve `bundle`, whose ownership node has creation revision `token`, with a lease of
    /// the current session term (see [`OwnershipLease`]), unless the session is lost (the bundle is evaluated
    /// again once it is back). A bundle served with a lease that lapsed (a term that ended) gets a new one.
    /// A `SessionLost` that arrives while the host loads undoes the load here, since the sweep that stops
    /// every served bundle did not see this one yet (its lease is invalid already: the term ended).
    async fn serve(&self, bundle: &str, token: i64) -> Result<(), super::host::HostError> {
        if self.is_fenced() {
            return Ok(());
        }
        if let Some(lease) = self.served.lock().unwrap().get(bundle) {
            if lease.token() == token && lease.is_valid() {
                return Ok(());
            }
        }
        let lease = OwnershipLease::new(bundle, token, self.store.session_validity());
        self.host.load_bundle(lease.clone()).await?;
        let kept = {
            let mut served = self.served.lock().unwrap();
            // Checked under the lock the sweep takes, so a bundle is either swept or never kept.
            if self.is_fenced() {
                false
            } else {
                if let Some(old) = served.insert(bundle.to_owned(), lease.clone()) {
                    old.revoke();
                }
                true
            }
        };
        if !kept {
            lease.revoke();
            tracing::warn!(bundle, broker = %self.broker_id, "not serving: the store session was lost while loading");
            self.host_unload(bundle).await;
        }
        Ok(())
    }

    fn is_fenced(&self) -> bool {
        self.fenced.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The session is lost: stops serving every bundle at once, all unloads running concurrently, since another
    /// broker may acquire them as soon as the server expires the session.
    async fn fence(&self) {
        self.meters.session_losses.inc();
        let served: Vec<String> = {
            let served = self.served.lock().unwrap();
            self.fenced.store(true, std::sync::atomic::Ordering::SeqCst);
            // Stop accepting work on every bundle at once, before any unload runs.
            for lease in served.values() {
                lease.revoke();
            }
            served.keys().cloned().collect()
        };
        let started = Instant::now();
        let count = served.len();
        futures::future::join_all(served.iter().map(|b| {
            self.stop_serving(
                b,
                "the store session was lost; another broker may own it now",
            )
        }))
        .await;
        if count > 0 {
            tracing::warn!(broker = %self.broker_id, bundles = count, "fenced: stopped serving in {:?}", started.elapsed());
        }
    }

    async fn stop_serving(&self, bundle: &str, why: &str) {
        let was = self.served.lock().unwrap().remove(bundle);
        if let Some(lease) = was {
            lease.revoke();
            tracing::warn!(bundle, broker = %self.broker_id, "stopped serving: {why}");
            self.host_unload(bundle).await;
            self.note_bundle_lost();
        }
    }

    /// Evaluates one bundle (see the module docs).
    async fn evaluate(&self, bundle: &str) -> Result<Outcome, Error> {
        let (record, ownership) = read_record_and_ownership(self, bundle).await?;
        let mine = ownership
            .as_ref()
            .is_some_and(|(o, _, s)| self.is_mine(o, s));
        let wanted_here = record
            .as_ref()
            .is_some_and(|(r, _)| r.destination == self.broker_id);
        if mine {
            let (_, _, stat) = ownership.as_ref().expect("mine");
            self.owned.lock().unwrap().insert(bundle.to_owned());
            let release_why = match &record {
                Some((r, _)) if r.destination != self.broker_id => Some(format!(
                    "the leader assigned it to {} ({}: {})",
                    r.destination,
                    r.cause.name(),
                    r.reason
                )),
                None if !self.bundle_still_exists(bundle).await? => {
                    Some("the bundle no longer exists (split)".to_owned())
                }
                _ => None,
            };
            if let Some(why) = release_why {
                self.release(bundle, stat, &why).await?;
                return Ok(Outcome::Idle);
            }
            if self.stopping() {
                return Ok(Outcome::Held);
            }
            return match self.serve(bundle, stat.creation_revision).await {
                Ok(()) => Ok(Outcome::Held),
                Err(e) => {
                    tracing::error!(bundle, "the host failed to load the bundle: {e}");
                    self.release(bundle, stat, "the host could not load it")
                        .await?;
                    Ok(Outcome::Retry)
                }
            };
        }
        if self.owned.lock().unwrap().remove(bundle) {
            self.stop_serving(bundle, "the ownership node is gone or no longer ours")
                .await;
        }
        if !wanted_here || self.stopping() {
            return Ok(Outcome::Idle);
        }
        if let Some((owner, _, _)) = &ownership {
            tracing::debug!(bundle, "waiting for {owner} to release it");
            return Ok(Outcome::Waiting);
        }
        let name = BundleName::parse(bundle).map_err(|e| Error::InvalidArgument {
            reason: e.to_string(),
        })?;
        // The leader says when no other range of the namespace can be owned (`BundleAssignment::no_overlap`):
        // a lookup storm then costs no listing of the namespace's ownership nodes per bundle.
        let listed = !record.as_ref().is_some_and(|(r, _)| r.no_overlap);
        if listed {
            if let Some(why) = self.overlapping_owner(&name).await? {
                tracing::debug!(bundle, "waiting: {why}");
                return Ok(Outcome::Waiting);
            }
        }
        Ok(self
            .acquire(bundle, record.as_ref().map(|(r, _)| r))
            .await?
            .unwrap_or(Outcome::Waiting))
    }

    /// Creates the ownership node create-only and has the host load the bundle; `None` when the node exists
    /// (the store let another create win, or an owner has not released it yet).
    async fn acquire(
        &self,
        bundle: &str,
        record: Option<&BundleAssignment>,
    ) -> Result<Option<Outcome>, Error> {
        let path = paths::ownership(bundle);
        match self
            .store
            .put(
                &path,
                &to_json_vec(&self.ownership_data),
                Some(CREATE_ONLY),
                CreateOptions::EPHEMERAL,
            )
            .await
        {
            Ok(stat) => {
                self.owned.lock().unwrap().insert(bundle.to_owned());
                let (cause, source) = record
                    .map(|r| {
                        (
                            r.cause.name(),
                            r.source.clone().unwrap_or_else(|| "-".into()),
                        )
                    })
                    .unwrap_or(("?", "-".into()));
                tracing::info!(bundle, broker = %self.broker_id, cause, source, "acquired ownership");
                match self.serve(bundle, stat.creation_revision).await {
                    Ok(()) => Ok(Some(Outcome::Held)),
                    Err(e) => {
                        tracing::error!(bundle, "the host failed to load the bundle: {e}");
                        self.release(bundle, &stat, "the host could not load it")
                            .await?;
                        Ok(Some(Outcome::Retry))
                    }
                }
            }
            Err(Error::BadVersion { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Evaluates one bundle, starting from the copy of its record that the notification of its inbox entry
    /// carried, if any ([`record_copy`]). When the copy names this broker and says no other range of the
    /// namespace can be owned, and this broker does not hold the bundle, it creates the ownership node
    /// straight away: what [`Self::evaluate`] would do after reading a record as the copy shows it and no
    /// ownership node. A node that exists sends it down the whole evaluation. On etcd a lookup storm so costs
    /// a destination one request per bundle instead of two.
    async fn evaluate_from(
        &self,
        bundle: &str,
        copy: Option<BundleAssignment>,
    ) -> Result<Outcome, Error> {
        let direct = copy.filter(|r| r.destination == self.broker_id && r.no_overlap);
        if let Some(record) = direct {
            if !self.owned.lock().unwrap().contains(bundle) && !self.stopping() {
                if let Some(outcome) = self.acquire(bundle, Some(&record)).await? {
                    return Ok(outcome);
                }
            }
        }
        self.evaluate(bundle).await
    }

    async fn bundle_still_exists(&self, bundle: &str) -> Result<bool, Error> {
        let Ok(name) = BundleName::parse(bundle) else {
            return Ok(false);
        };
        match super::namespaces::read_bundles(&self.store, name.namespace()).await {
            Ok(Some(info)) => Ok(info.bundles.contains_range(name.range())),
            // No policies at all: a bundle owned by someone else's rules; keep it.
            Ok(None) => Ok(true),
            Err(RuntimeError::Store(e)) => Err(e),
            Err(e) => {
                tracing::warn!(bundle, "cannot read the namespace's bundles: {e}");
                Ok(true)
            }
        }
    }
}

/// Evaluations of one agent in flight at once; the others wait in order.
///
/// A broker starting with a full inbox (a whole cluster restarted) used to evaluate every bundle at once: at
/// 100 brokers × 65,000 bundles, 65,000 evaluations of about four store requests each, sent together. etcd
/// fell so far behind that it answered no keep-alive for 9 s, and 170 sessions were lost. 32 per broker is
/// about what the cold start's 2,000 lookups in flight give at 100 brokers. The limit is fixed, not adapted to
/// the evaluations' latency: an evaluation includes the host's load of the bundle, so a slow host would have
/// looked like a slow store (adapting it, starting from 4, delayed moves by a shedding interval in
/// `tests/consistency.rs`). Back-pressure on the store itself is the store's (`store::etcd` limits each
/// session's writes by their latency).
const MAX_EVALUATIONS: usize = 32;

/// The ownership task of one agent.
pub(crate) struct OwnershipTask {
    sh: Arc<AgentShared>,
    /// Bundle → whether it must be evaluated again once the running evaluation ends.
    running: HashMap<String, bool>,
    /// Bundles waiting for an evaluation slot ([`MAX_EVALUATIONS`]), in order, each once.
    queue: VecDeque<String>,
    queued: HashSet<String>,
    tasks: JoinSet<(String, Result<Outcome, Error>)>,
    waiting: BTreeSet<String>,
    retry: BTreeMap<String, Instant>,
    /// Bundle → the copy of its record that the latest notification of its inbox entry carried (etcd), until
    /// its next evaluation starts.
    copies: HashMap<String, BundleAssignment>,
}

/// The record copy an inbox entry's notification carried (see `leader::inbox`): `None` when the store sent no
/// value, the entry is gone or empty, or the copy does not parse (the evaluation then reads the record).
fn record_copy(after: &NodeAfter) -> Option<BundleAssignment> {
    match after {
        NodeAfter::Value(found) if !found.value.is_empty() => {
            serde_json::from_slice(&found.value).ok()
        }
        _ => None,
    }
}

impl OwnershipTask {
    pub(crate) fn new(sh: Arc<AgentShared>) -> Self {
        Self {
            sh,
            running: HashMap::new(),
            queue: VecDeque::new(),
            queued: HashSet::new(),
            tasks: JoinSet::new(),
            waiting: BTreeSet::new(),
            retry: BTreeMap::new(),
            copies: HashMap::new(),
        }
    }

    /// Evaluates `bundle` now, or once a slot frees ([`MAX_EVALUATIONS`]); a bundle being evaluated is
    /// evaluated again after it.
    fn schedule(&mut self, bundle: String) {
        if let Some(again) = self.running.get_mut(&bundle) {
            *again = true;
            return;
        }
        if self.running.len() >= MAX_EVALUATIONS {
            if self.queued.insert(bundle.clone()) {
                self.queue.push_back(bundle);
            }
            return;
        }
        self.queued.remove(&bundle);
        self.running.insert(bundle.clone(), false);
        let sh = self.sh.clone();
        let copy = self.copies.remove(&bundle);
        self.tasks.spawn(async move {
            let r = sh.evaluate_from(&bundle, copy).await;
            (bundle, r)
        });
    }

    /// Evaluates every bundle of this broker's inbox and every bundle it holds.
    async fn full_scan(&mut self) {
        match self
            .sh
            .store
            .get_children(&paths::inbox_of(&self.sh.broker_id))
            .await
        {
            Ok(names) => {
                for name in names {
                    if let Some(b) = paths::inbox_bundle(&name) {
                        self.schedule(b.to_string());
                    }
                }
            }
            Err(Error::NotFound { .. }) => {}
            Err(e) => tracing::warn!("cannot list this broker's inbox: {e}"),
        }
        let owned: Vec<String> = self.sh.owned.lock().unwrap().iter().cloned().collect();
        for b in owned {
            self.schedule(b);
        }
    }

    /// Runs until shut down; `ready` is sent once the first scan is scheduled.
    pub(crate) async fn run(
        mut self,
        mut commands: mpsc::Receiver<OwnershipCommand>,
        ready: tokio::sync::oneshot::Sender<Result<(), RuntimeError>>,
    ) {
        let store = self.sh.store.clone();
        let inbox = paths::inbox_of(&self.sh.broker_id);
        let mut entries = match store.watch(&inbox).await {
            Ok(s) => s,
            Err(e) => {
                let _ = ready.send(Err(e.into()));
                return;
            }
        };
        let mut events = store.session_events();
        self.full_scan().await;
        let _ = ready.send(Ok(()));
        let mut tick = tokio::time::interval(Duration::from_secs(2));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                n = entries.next() => match n {
                    None => return,
                    Some(n) => {
                        // Any change of an entry (written, rewritten, deleted) is a reason to look again.
                        if let Some(b) = paths::below(&inbox, &n.path).and_then(paths::inbox_bundle) {
                            // The state after the latest notification only: an older copy must not be used.
                            // Nor one that arrives while the bundle is being evaluated: the run after it
                            // reads, since what that evaluation did (a host that failed to load the bundle)
                            // may have changed what the record says since, without a notification.
                            let b = b.to_string();
                            match record_copy(&n.after) {
                                Some(copy) if !self.running.contains_key(&b) => {
                                    self.copies.insert(b.clone(), copy)
                                }
                                _ => self.copies.remove(&b),
                            };
                            self.schedule(b);
                        }
                    }
                },
                e = events.next() => match e {
                    None => return,
                    Some(SessionEvent::SessionLost) => self.sh.fence().await,
                    // A new session (always announced after `SessionLost`, right behind a `Reconnected`): every
                    // bundle is looked at again.
                    Some(SessionEvent::SessionReestablished) => {
                        self.sh.fenced.store(false, std::sync::atomic::Ordering::SeqCst);
                        self.full_scan().await;
                    }
                    // The same session back: nothing was fenced, and the store re-derives the notifications a
                    // disconnection hid, so there is nothing to look at again. A full scan here made every broker
                    // re-read its whole inbox and every bundle in it at each keep-alive that went unanswered: on
                    // an overloaded etcd, more load at the moment it can least take it.
                    Some(SessionEvent::Reconnected | SessionEvent::ConnectionLost) => {}
                },
                Some(done) = self.tasks.join_next() => {
                    let (bundle, result) = match done {
                        Ok(r) => r,
                        Err(e) => {
                            tracing::error!("an ownership evaluation panicked: {e}");
                            continue;
                        }
                    };
                    let again = self.running.remove(&bundle).unwrap_or(false);
                    self.waiting.remove(&bundle);
                    self.retry.remove(&bundle);
                    match result {
                        Ok(Outcome::Waiting) => {
                            self.waiting.insert(bundle.clone());
                        }
                        Ok(Outcome::Retry) => {
                            self.retry.insert(bundle.clone(), Instant::now() + Duration::from_secs(5));
                        }
                        Ok(Outcome::Held | Outcome::Idle) => {}
                        Err(e) => {
                            tracing::warn!(bundle, "ownership step failed: {e}; retrying");
                            self.retry.insert(bundle.clone(), Instant::now() + Duration::from_millis(500));
                        }
                    }
                    if again {
                        self.schedule(bundle);
                    }
                    while self.running.len() < MAX_EVALUATIONS {
                        let Some(next) = self.queue.pop_front() else { break };
                        if self.queued.contains(&next) {
                            self.schedule(next);
                        }
                    }
                }
                _ = tick.tick() => {
                    let now = Instant::now();
                    let due: Vec<String> = self
                        .retry
                        .iter()
                        .filter(|(_, t)| **t <= now)
                        .map(|(b, _)| b.clone())
                        .collect();
                    let waiting: Vec<String> = self.waiting.iter().cloned().collect();
                    for b in due.into_iter().chain(waiting) {
                        self.schedule(b);
                    }
                }
                c = commands.recv() => {
                    let done = c.map(|OwnershipCommand::Shutdown(done)| done);
                    self.tasks.abort_all();
                    while self.tasks.join_next().await.is_some() {}
                    self.release_all().await;
                    if let Some(done) = done {
                        let _ = done.send(());
                    }
                    return;
                }
            }
        }
    }

    /// Releases every bundle this broker holds (shutdown).
    async fn release_all(&mut self) {
        let owned: Vec<String> = self.sh.owned.lock().unwrap().iter().cloned().collect();
        let mut releases = JoinSet::new();
        for b in owned {
            let sh = self.sh.clone();
            releases.spawn(async move {
                match read_ownership(&sh, &b).await {
                    Ok(Some((owner, _, stat))) if sh.is_mine(&owner, &stat) => {
                        if let Err(e) = sh.release(&b, &stat, "the broker is shutting down").await {
                            tracing::warn!(bundle = %b, "release at shutdown failed: {e}");
                        }
                    }
                    Ok(_) => sh.stop_serving(&b, "the broker is shutting down").await,
                    Err(e) => tracing::warn!(bundle = %b, "release at shutdown failed: {e}"),
                }
            });
        }
        while releases.join_next().await.is_some() {}
        let served: Vec<String> = self.sh.served.lock().unwrap().keys().cloned().collect();
        for b in served {
            self.sh
                .stop_serving(&b, "the broker is shutting down")
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::records::{AssignmentCause, AssignmentState};
    use crate::store::GetResult;

    fn after(value: &[u8]) -> NodeAfter {
        NodeAfter::Value(Arc::new(GetResult {
            value: value.to_vec(),
            stat: Stat::default(),
        }))
    }

    #[test]
    fn only_a_parsable_copy_carried_by_the_notification_is_used() {
        let record = BundleAssignment {
            bundle: "t/ns/0x00000000_0xffffffff".into(),
            destination: "b:1".into(),
            state: AssignmentState::Assigning,
            source: None,
            cause: AssignmentCause::Lookup,
            reason: "lookup".into(),
            leader: "b:0".into(),
            created_ms: 1,
            updated_ms: 1,
            unload_after_acquire: false,
            no_overlap: true,
        };
        assert_eq!(record_copy(&after(&to_json_vec(&record))), Some(record));
        // An entry written without a copy (ZooKeeper's leader, a repair), a deletion, a store that sent
        // nothing, and bytes that are no record: the evaluation reads the record.
        assert_eq!(record_copy(&after(b"")), None);
        assert_eq!(record_copy(&NodeAfter::Gone), None);
        assert_eq!(record_copy(&NodeAfter::Unknown), None);
        assert_eq!(record_copy(&after(b"{\"bundle\":1}")), None);
    }
}
