//! What a broker's web service knows of the cluster without asking the store for every request: the live
//! registrations (with their web URLs), the leader, every ownership node and every namespace's bundles, kept
//! current by store watches.
//!
//! # Contract
//!
//! * The watches are opened before the first full read, so nothing that changes meanwhile is missed (a change
//!   seen twice is re-read, which is idempotent). Every notification re-reads the node it names, but for the
//!   rewrite of a counted registration (below) and a notification that carried the node's state (etcd).
//! * A registration counts only if it is an ephemeral node that held a report ([`crate::model::parse_report`])
//!   when it was created or first became one: a persistent copy is no broker. Rewrites of a counted
//!   registration are not read (the web service needs only its URLs, which do not change while it lives).
//! * [`ClusterView::owner`] answers an ownership node only when it is not being unloaded (`disabled`) and
//!   names a registered broker; otherwise the bundle counts as unowned (the leader removes a node naming no
//!   broker after the session timeout).
//! * [`ClusterView::changed`] wakes waiters after every applied change (a lookup waiting for an owner).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::identity::owner_of;
use super::namespaces::read_bundles;
use crate::bundle::{BundleName, NamespaceBundles, NamespaceName, TopicName};
use crate::model::load_report::parse_report;
use crate::model::{LeaderBroker, NamespaceEphemeralData};
use crate::paths;
use crate::store::{
    DynStore, Error, GetResult, MetadataStoreExt, NodeAfter, NotificationStream, NotificationType,
};

/// A registered broker as the view keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerEntry {
    /// `http://host:port`, if it serves plain HTTP.
    pub web_service_url: Option<String>,
    /// `https://host:port`, if it serves HTTPS.
    pub web_service_url_tls: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    brokers: BTreeMap<String, BrokerEntry>,
    leader: Option<LeaderBroker>,
    owners: HashMap<String, NamespaceEphemeralData>,
    namespaces: HashMap<String, NamespaceBundles>,
}

/// The watched view; see the module docs. Dropping it stops its task.
#[derive(Debug)]
pub struct ClusterView {
    state: Arc<RwLock<State>>,
    changes: watch::Receiver<u64>,
    task: JoinHandle<()>,
}

impl Drop for ClusterView {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Streams {
    brokers: NotificationStream,
    leader: NotificationStream,
    owners: NotificationStream,
    local_policies: NotificationStream,
    policies: NotificationStream,
}

impl ClusterView {
    /// Opens the watches, reads everything once and keeps it current.
    pub async fn start(store: DynStore) -> Result<ClusterView, Error> {
        let streams = Streams {
            brokers: store.watch(paths::BROKERS).await?,
            leader: store.watch(paths::LEADER).await?,
            owners: store.watch(paths::OWNERSHIP).await?,
            local_policies: store.watch(paths::LOCAL_POLICIES).await?,
            policies: store.watch(paths::POLICIES).await?,
        };
        let state = Arc::new(RwLock::new(State::default()));
        let (tx, changes) = watch::channel(0u64);
        load_all(&store, &state).await?;
        let task = tokio::spawn(follow(store, state.clone(), streams, tx));
        Ok(ClusterView {
            state,
            changes,
            task,
        })
    }

    /// A receiver that changes after every applied change.
    pub fn changed(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// The registered brokers, by id.
    pub fn brokers(&self) -> BTreeMap<String, BrokerEntry> {
        self.state.read().unwrap().brokers.clone()
    }

    /// Whether `broker` is registered.
    pub fn is_registered(&self, broker: &str) -> bool {
        self.state.read().unwrap().brokers.contains_key(broker)
    }

    /// The leader node's content, if a leader is elected.
    pub fn leader(&self) -> Option<LeaderBroker> {
        self.state.read().unwrap().leader.clone()
    }

    /// The bundle `topic` falls into, if its namespace exists.
    pub fn bundle_of(&self, topic: &TopicName) -> Option<BundleName> {
        let ns = topic.namespace();
        let state = self.state.read().unwrap();
        let bundles = state.namespaces.get(&ns.to_string())?;
        Some(BundleName::new(ns.clone(), bundles.find_topic(topic)))
    }

    /// A namespace's bundles, if it exists.
    pub fn namespace(&self, namespace: &str) -> Option<NamespaceBundles> {
        self.state
            .read()
            .unwrap()
            .namespaces
            .get(namespace)
            .cloned()
    }

    /// The owner of `bundle` and its ownership data, when a registered broker holds it and is not unloading
    /// it.
    pub fn owner(&self, bundle: &str) -> Option<(String, NamespaceEphemeralData)> {
        let state = self.state.read().unwrap();
        let data = state.owners.get(bundle)?;
        let owner = owner_of(data)?;
        (!data.disabled && state.brokers.contains_key(&owner)).then(|| (owner, data.clone()))
    }

    /// Every namespace with its bundles, in name order.
    pub fn namespaces(&self) -> Vec<(String, NamespaceBundles)> {
        let state = self.state.read().unwrap();
        let mut out: Vec<(String, NamespaceBundles)> = state
            .namespaces
            .iter()
            .map(|(n, b)| (n.clone(), b.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Every namespace with its number of bundles, in name order (without copying the bundles).
    pub fn namespace_sizes(&self) -> Vec<(String, usize)> {
        let state = self.state.read().unwrap();
        let mut out: Vec<(String, usize)> = state
            .namespaces
            .iter()
            .map(|(n, b)| (n.clone(), b.len()))
            .collect();
        out.sort();
        out
    }

    /// Whoever holds `bundle`'s ownership node (registered or not) and whether it is unloading it.
    pub fn holder(&self, bundle: &str) -> Option<(String, bool)> {
        let state = self.state.read().unwrap();
        let data = state.owners.get(bundle)?;
        Some((owner_of(data)?, data.disabled))
    }

    /// Every bundle owned by `broker` (ownership nodes naming it, disabled or not).
    pub fn owned_by(&self, broker: &str) -> Vec<(String, NamespaceEphemeralData)> {
        let state = self.state.read().unwrap();
        let mut out: Vec<(String, NamespaceEphemeralData)> = state
            .owners
            .iter()
            .filter(|(_, d)| owner_of(d).as_deref() == Some(broker))
            .map(|(b, d)| (b.clone(), d.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

async fn load_all(store: &DynStore, state: &RwLock<State>) -> Result<(), Error> {
    for id in store.get_children(paths::BROKERS).await? {
        read_broker(store, state, &id, &NodeAfter::Unknown).await?;
    }
    read_leader(store, state).await?;
    let mut stack = vec![paths::OWNERSHIP.to_owned()];
    while let Some(dir) = stack.pop() {
        for child in store.get_children(&dir).await? {
            let path = format!("{dir}/{child}");
            if paths::is_range_segment(&child) {
                read_owner(store, state, &path, &NodeAfter::Unknown).await?;
            } else {
                stack.push(path);
            }
        }
    }
    for root in [paths::POLICIES, paths::LOCAL_POLICIES] {
        for tenant in store.get_children(root).await? {
            for ns in store.get_children(&format!("{root}/{tenant}")).await? {
                if let Ok(name) = NamespaceName::parse(&format!("{tenant}/{ns}")) {
                    read_namespace(store, state, &name).await?;
                }
            }
        }
    }
    Ok(())
}

/// The node a notification names: the state it carried, or else a read.
async fn node_after(
    store: &DynStore,
    path: &str,
    after: &NodeAfter,
) -> Result<Option<GetResult>, Error> {
    match after.known() {
        Some(found) => Ok(found),
        None => store.get(path).await,
    }
}

async fn read_broker(
    store: &DynStore,
    state: &RwLock<State>,
    id: &str,
    after: &NodeAfter,
) -> Result<(), Error> {
    let entry = match node_after(store, &paths::broker(id), after).await? {
        Some(g) if g.stat.ephemeral => parse_report(&g.value).ok().map(|r| BrokerEntry {
            web_service_url: r.web_service_url,
            web_service_url_tls: r.web_service_url_tls,
        }),
        _ => None,
    };
    let mut s = state.write().unwrap();
    match entry {
        Some(e) => s.brokers.insert(id.to_owned(), e),
        None => s.brokers.remove(id),
    };
    Ok(())
}

async fn read_leader(store: &DynStore, state: &RwLock<State>) -> Result<(), Error> {
    let leader = match store.get_json::<LeaderBroker>(paths::LEADER).await {
        Ok(l) => l.map(|(l, _)| l),
        Err(Error::Content { .. }) => None,
        Err(e) => return Err(e),
    };
    state.write().unwrap().leader = leader;
    Ok(())
}

async fn read_owner(
    store: &DynStore,
    state: &RwLock<State>,
    path: &str,
    after: &NodeAfter,
) -> Result<(), Error> {
    let Some(bundle) = paths::below(paths::OWNERSHIP, path) else {
        return Ok(());
    };
    // Unparsable: someone holds it; who cannot be told, so there is no owner to answer with.
    let data = node_after(store, path, after)
        .await?
        .and_then(|found| serde_json::from_slice::<NamespaceEphemeralData>(&found.value).ok());
    let mut s = state.write().unwrap();
    match data {
        Some(d) => s.owners.insert(bundle.to_owned(), d),
        None => s.owners.remove(bundle),
    };
    Ok(())
}

async fn read_namespace(
    store: &DynStore,
    state: &RwLock<State>,
    name: &NamespaceName,
) -> Result<(), Error> {
    let info = match read_bundles(store, name).await {
        Ok(i) => i,
        Err(super::RuntimeError::Store(e)) => return Err(e),
        // Malformed policies: the namespace has no usable bundles.
        Err(_) => None,
    };
    let mut s = state.write().unwrap();
    match info {
        Some(i) => s.namespaces.insert(name.to_string(), i.bundles),
        None => s.namespaces.remove(&name.to_string()),
    };
    Ok(())
}

/// Applies notifications until the store closes.
async fn follow(
    store: DynStore,
    state: Arc<RwLock<State>>,
    mut s: Streams,
    changes: watch::Sender<u64>,
) {
    loop {
        let result = tokio::select! {
            n = s.brokers.next() => match n {
                None => return,
                Some(n) => match paths::below(paths::BROKERS, &n.path) {
                    // A report rewritten by a broker already known changes nothing the view keeps (its URLs
                    // come with the registration): no read of every report every broker writes.
                    Some(id) if n.kind == NotificationType::Modified
                        && state.read().unwrap().brokers.contains_key(id) => Ok(()),
                    Some(id) if !id.contains('/') => read_broker(&store, &state, id, &n.after).await,
                    _ => Ok(()),
                },
            },
            n = s.leader.next() => match n {
                None => return,
                Some(n) if n.path == paths::LEADER => read_leader(&store, &state).await,
                Some(_) => Ok(()),
            },
            n = s.owners.next() => match n {
                None => return,
                Some(n) => match n.path.rsplit('/').next() {
                    Some(last) if paths::is_range_segment(last) => {
                        read_owner(&store, &state, &n.path, &n.after).await
                    }
                    _ => Ok(()),
                },
            },
            n = s.local_policies.next() => match n {
                None => return,
                Some(n) => match paths::namespace_below(paths::LOCAL_POLICIES, &n.path) {
                    Some(ns) => read_namespace(&store, &state, &ns).await,
                    None => Ok(()),
                },
            },
            n = s.policies.next() => match n {
                None => return,
                Some(n) => match paths::namespace_below(paths::POLICIES, &n.path) {
                    Some(ns) => read_namespace(&store, &state, &ns).await,
                    None => Ok(()),
                },
            },
        };
        if let Err(e) = result {
            // The next notification of the node reads it again; a lost session resynchronises its watches.
            tracing::debug!("cluster view: re-reading a node failed: {e}");
        }
        changes.send_modify(|n| *n += 1);
    }
}
