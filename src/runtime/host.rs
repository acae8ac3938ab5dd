//! The seam between the agent and the broker it manages: a real broker supplies bundle stats and is told to
//! load or unload bundles through [`BrokerHost`]; [`super::synthetic::SyntheticHost`] is a stand-in driven by
//! a traffic profile.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;

use crate::bundle::TopicTraffic;
use crate::model::{NamespaceBundleStats, SystemResourceUsage};
use crate::store::SessionValidity;

/// A host's refusal or failure, with its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HostError(pub String);

/// The agent's permission for its host to serve one bundle, handed over with [`BrokerHost::load_bundle`].
///
/// # Contract
///
/// * [`OwnershipLease::is_valid`] is true while the agent holds the bundle's ownership node and the store
///   session that holds it can still be alive on the server. It turns false **the instant** that may no
///   longer be so — computed from the monotonic clock (see [`SessionValidity`]), so a process that resumes
///   from a pause longer than the session timeout sees it false before it does anything else — and when the
///   agent revokes the lease (it is about to release the bundle, or the session was declared lost). It is
///   cheap: check it before every unit of work (a batch of messages, a write to storage).
/// * [`OwnershipLease::token`] is a fencing token: the creation revision of the ownership node (ZooKeeper
///   `czxid`, etcd `create_revision`), which grows with every new ownership of any bundle on the store. A host
///   whose storage can compare tokens should pass it along with every write and have the storage refuse a
///   token lower than one it has seen for the bundle: that stops a write that was already in flight when the
///   lease lapsed.
/// * A lease that turned invalid may turn valid again only while neither the agent revoked it nor the store
///   declared the session lost (the server answered the session again in time); a host may keep treating it
///   as lapsed and wait for the next [`BrokerHost::load_bundle`].
#[derive(Debug, Clone)]
pub struct OwnershipLease {
    bundle: Arc<str>,
    token: i64,
    validity: SessionValidity,
    revoked: Arc<AtomicBool>,
}

impl OwnershipLease {
    /// A lease on `bundle` with fencing `token`, valid while `validity` is and until revoked.
    pub fn new(bundle: &str, token: i64, validity: SessionValidity) -> OwnershipLease {
        OwnershipLease {
            bundle: bundle.into(),
            token,
            validity,
            revoked: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A lease that only [`OwnershipLease::revoke`] ends (hosts driven without a store, and tests).
    pub fn unbounded(bundle: &str, token: i64) -> OwnershipLease {
        OwnershipLease::new(bundle, token, SessionValidity::unbounded())
    }

    /// The full bundle name.
    pub fn bundle(&self) -> &str {
        &self.bundle
    }

    /// The fencing token (see the type's docs).
    pub fn token(&self) -> i64 {
        self.token
    }

    /// Whether the host may serve the bundle now (see the type's docs).
    pub fn is_valid(&self) -> bool {
        !self.revoked.load(Ordering::SeqCst) && self.validity.is_valid()
    }

    /// The instant the lease lapses if the store hears nothing more from the server (`None`: no deadline).
    pub fn valid_until(&self) -> Option<tokio::time::Instant> {
        self.validity.valid_until()
    }

    /// Ends the lease for every clone, at once: "stop accepting work now". The agent calls it before it
    /// releases the bundle (and then [`BrokerHost::unload_bundle`] cleans up).
    pub fn revoke(&self) {
        self.revoked.store(true, Ordering::SeqCst);
    }

    /// Whether [`OwnershipLease::revoke`] was called.
    pub fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::SeqCst)
    }
}

/// What the agent needs from the broker it runs in.
///
/// # Contract
///
/// * [`BrokerHost::load_bundle`] is called only after the agent holds the bundle's ownership node, with an
///   [`OwnershipLease`]: the host serves the bundle only while the lease [`is_valid`](OwnershipLease::is_valid),
///   checked before every unit of work, and tags what it writes with the lease's
///   [`token`](OwnershipLease::token) where its storage can fence on it. **This is what keeps two brokers from
///   serving one bundle**: the lease lapses at 9/10 of the session timeout after the server last answered,
///   before the server can expire the session and let another broker take the bundle — including when this
///   process was paused (a GC pause, SIGSTOP, a frozen VM) and the unload below could only run after it
///   resumed.
/// * "Stop accepting work" and "clean up" are separate: the agent revokes the lease (synchronous, immediate)
///   before it releases a bundle or when the store declares the session lost, then calls
///   [`BrokerHost::unload_bundle`] to close the bundle's topics (async; may take as long as
///   `namespaceBundleUnloadingTimeoutMs`). Both calls may come for a bundle the host already is or is not
///   serving; they must be idempotent, and a `load_bundle` with a new lease replaces the old one.
/// * [`BrokerHost::bundle_stats`] lists what the host serves now, keyed by full bundle name; it is read every
///   report check (`loadBalancerReportUpdateMinIntervalMillis`) and must be cheap.
#[async_trait]
pub trait BrokerHost: Send + Sync + fmt::Debug {
    /// Traffic of every bundle served now (Pulsar's `BrokerService.getBundleStats()`).
    fn bundle_stats(&self) -> BTreeMap<String, NamespaceBundleStats>;

    /// Host resource usage when the host measures it itself; `None` lets the agent sample the Linux host
    /// (`/proc`, cgroups, `/sys/class/net`). Units as in `LocalBrokerData`.
    fn resource_usage(&self) -> Option<SystemResourceUsage> {
        None
    }

    /// The topics served in `bundle`, with their traffic (in + out), for the topic-based split algorithms.
    fn bundle_topics(&self, bundle: &str) -> BTreeMap<String, TopicTraffic>;

    /// Start serving `lease.bundle()`, while the lease is valid.
    async fn load_bundle(&self, lease: OwnershipLease) -> Result<(), HostError>;

    /// Stop serving `bundle` (close its topics).
    async fn unload_bundle(&self, bundle: &str) -> Result<(), HostError>;
}

/// A host without traffic: it serves whatever it is given with zero load and lets the agent measure the Linux
/// host. `loadmgr broker` without `--synthetic` runs with it (a broker that takes part in leadership and
/// placement but carries no topics of its own). Its bundle stats list the bundles whose lease is valid.
#[derive(Debug, Default)]
pub struct IdleHost {
    served: std::sync::Mutex<BTreeMap<String, OwnershipLease>>,
}

#[async_trait]
impl BrokerHost for IdleHost {
    fn bundle_stats(&self) -> BTreeMap<String, NamespaceBundleStats> {
        self.served
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, lease)| lease.is_valid())
            .map(|(b, _)| (b.clone(), NamespaceBundleStats::default()))
            .collect()
    }

    fn bundle_topics(&self, _bundle: &str) -> BTreeMap<String, TopicTraffic> {
        BTreeMap::new()
    }

    async fn load_bundle(&self, lease: OwnershipLease) -> Result<(), HostError> {
        self.served
            .lock()
            .unwrap()
            .insert(lease.bundle().to_owned(), lease);
        Ok(())
    }

    async fn unload_bundle(&self, bundle: &str) -> Result<(), HostError> {
        self.served.lock().unwrap().remove(bundle);
        Ok(())
    }
}
