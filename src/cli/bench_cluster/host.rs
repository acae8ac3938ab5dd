//! The bench's broker host: serves whatever bundles it is given and reports a fixed traffic per bundle, scaled
//! by a factor the bench can change for every host at once (to make every report, and the next flush, change).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::bundle::TopicTraffic;
use crate::model::{NamespaceBundleStats, ResourceUsage, SystemResourceUsage};
use crate::runtime::{BrokerHost, HostError, OwnershipLease};

/// Traffic shared by every host of one bench: msg/s per bundle (in; out is twice that), skewed per bundle.
#[derive(Debug)]
pub(super) struct Traffic {
    /// msg/s in of the average bundle.
    pub(super) rate_per_bundle: f64,
    /// Per-mille multiplier of every rate (1000 = as configured), bumped to make every report change.
    pub(super) factor_permille: AtomicU64,
}

impl Traffic {
    pub(super) fn new(rate_per_bundle: f64) -> Arc<Traffic> {
        Arc::new(Traffic {
            rate_per_bundle,
            factor_permille: AtomicU64::new(1000),
        })
    }

    /// Multiplies every rate by `factor` from now on.
    pub(super) fn scale(&self, factor: f64) {
        let now = self.factor_permille.load(Ordering::Relaxed) as f64;
        self.factor_permille
            .store((now * factor).round() as u64, Ordering::Relaxed);
    }

    /// The traffic of one bundle: the average times a skew in [0.25, 4) from a hash of the name, so brokers
    /// with equal bundle counts still differ in load.
    fn of(&self, bundle: &str) -> NamespaceBundleStats {
        let h = crc32fast::hash(bundle.as_bytes());
        let skew = 0.25 * 16f64.powf(f64::from(h % 1000) / 1000.0);
        let factor = self.factor_permille.load(Ordering::Relaxed) as f64 / 1000.0;
        let rate = (self.rate_per_bundle * skew * factor).round();
        NamespaceBundleStats {
            msg_rate_in: rate,
            msg_rate_out: 2.0 * rate,
            msg_throughput_in: rate * 1024.0,
            msg_throughput_out: 2.0 * rate * 1024.0,
            consumer_count: 2,
            producer_count: 1,
            topics: 4,
            cache_size: 0,
        }
    }
}

/// A host serving what it is given (see the module docs).
#[derive(Debug)]
pub(super) struct BenchHost {
    traffic: Arc<Traffic>,
    served: Mutex<BTreeMap<String, OwnershipLease>>,
}

impl BenchHost {
    pub(super) fn new(traffic: Arc<Traffic>) -> BenchHost {
        BenchHost {
            traffic,
            served: Mutex::new(BTreeMap::new()),
        }
    }
}

#[async_trait]
impl BrokerHost for BenchHost {
    fn bundle_stats(&self) -> BTreeMap<String, NamespaceBundleStats> {
        self.served
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, lease)| lease.is_valid())
            .map(|(b, _)| (b.clone(), self.traffic.of(b)))
            .collect()
    }

    /// Usage from the traffic: 8 cores, 5 % idle plus 10 % of one core per 1,000 msg/s; a 10 Gbit/s NIC.
    fn resource_usage(&self) -> Option<SystemResourceUsage> {
        let stats = self.bundle_stats();
        let msgs: f64 = stats.values().map(|s| s.msg_rate_in + s.msg_rate_out).sum();
        let bytes_in: f64 = stats.values().map(|s| s.msg_throughput_in).sum();
        let bytes_out: f64 = stats.values().map(|s| s.msg_throughput_out).sum();
        let nic = 10.0 * 1024.0 * 1024.0;
        Some(SystemResourceUsage {
            cpu: ResourceUsage {
                usage: 5.0 + msgs / 1000.0 * 10.0,
                limit: 800.0,
            },
            bandwidth_in: ResourceUsage {
                usage: bytes_in * 8.0 / 1024.0,
                limit: nic,
            },
            bandwidth_out: ResourceUsage {
                usage: bytes_out * 8.0 / 1024.0,
                limit: nic,
            },
            memory: ResourceUsage {
                usage: 1024.0,
                limit: 8192.0,
            },
            direct_memory: ResourceUsage {
                usage: 0.0,
                limit: 0.0,
            },
        })
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
