//! The seam between the agent and the broker it manages: a real broker supplies bundle stats and is told to
//! load or unload bundles through [`BrokerHost`]; [`super::synthetic::SyntheticHost`] is a stand-in driven by
//! a traffic profile.

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;

use crate::bundle::TopicTraffic;
use crate::model::{NamespaceBundleStats, SystemResourceUsage};

/// A host's refusal or failure, with its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HostError(pub String);

/// What the agent needs from the broker it runs in.
///
/// # Contract
///
/// * [`BrokerHost::load_bundle`] is called only after the agent holds the bundle's ownership node, and
///   [`BrokerHost::unload_bundle`] before it releases it (and when the agent must assume the node is lost, e.g.
///   its store session ended). Both may be called for a bundle the host already is or is not serving; they
///   must be idempotent.
/// * After a session loss the agent unloads every bundle at once, about 1/6 of the session timeout before the
///   server can expire the session and another broker take the bundles: an unload that takes longer than that
///   lets two brokers serve a bundle for the difference (the ownership nodes still never overlap).
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

    /// Start serving `bundle`.
    async fn load_bundle(&self, bundle: &str) -> Result<(), HostError>;

    /// Stop serving `bundle` (close its topics).
    async fn unload_bundle(&self, bundle: &str) -> Result<(), HostError>;
}

/// A host without traffic: it serves whatever it is given with zero load and lets the agent measure the Linux
/// host. `loadmgr broker` without `--synthetic` runs with it (a broker that takes part in leadership and
/// placement but carries no topics of its own).
#[derive(Debug, Default)]
pub struct IdleHost {
    served: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

#[async_trait]
impl BrokerHost for IdleHost {
    fn bundle_stats(&self) -> BTreeMap<String, NamespaceBundleStats> {
        self.served
            .lock()
            .unwrap()
            .iter()
            .map(|b| (b.clone(), NamespaceBundleStats::default()))
            .collect()
    }

    fn bundle_topics(&self, _bundle: &str) -> BTreeMap<String, TopicTraffic> {
        BTreeMap::new()
    }

    async fn load_bundle(&self, bundle: &str) -> Result<(), HostError> {
        self.serve(bundle);
        Ok(())
    }

    async fn unload_bundle(&self, bundle: &str) -> Result<(), HostError> {
        self.stop(bundle);
        Ok(())
    }
}

impl IdleHost {
    /// Serves `bundle` from now on; `false` when it already did.
    pub fn serve(&self, bundle: &str) -> bool {
        self.served.lock().unwrap().insert(bundle.to_owned())
    }

    /// Stops serving `bundle`; `false` when it did not.
    pub fn stop(&self, bundle: &str) -> bool {
        self.served.lock().unwrap().remove(bundle)
    }
}
