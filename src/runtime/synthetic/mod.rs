//! A synthetic broker host: topics and rates come from a traffic profile, so a cluster of agents can be run
//! and watched without a real broker (`loadmgr broker --synthetic PROFILE`).
//!
//! # Profile format (JSON)
//!
//! The same profile is usually given to every agent: it describes the cluster's traffic, and each agent
//! serves the part that falls in the bundles it owns (a topic belongs to the bundle whose hash range holds
//! CRC32 of its full name). CPU and NIC usage are modelled from the traffic served, so moving bundles moves
//! load — which is what the shedding strategies react to.
//!
//! ```json
//! {
//!   "cores": 1,
//!   "cpuBasePercent": 5.0,
//!   "cpuPercentPer1000Msgs": 12.0,
//!   "memoryMb": {"usage": 512, "limit": 2048},
//!   "directMemoryMb": {"usage": 64, "limit": 1024},
//!   "nicSpeedGbps": 1.0,
//!   "loadDelayMs": 0,
//!   "unloadDelayMs": 200,
//!   "lookupOnStart": true,
//!   "topics": [
//!     {"name": "persistent://public/demo/orders-{0..15}", "msgRateIn": 100, "msgRateOut": 200,
//!      "msgSizeBytes": 1024, "producers": 1, "consumers": 2}
//!   ]
//! }
//! ```
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `cores` | 1 | CPU limit = 100 × cores (percent of one core, as Pulsar reports it) |
//! | `cpuBasePercent` | 5 | CPU usage with no traffic, percent of one core |
//! | `cpuPercentPer1000Msgs` | 10 | CPU added per 1000 msg/s served (in + out), percent of one core |
//! | `memoryMb`, `directMemoryMb` | 512/2048, 0/0 | reported as is (MiB) |
//! | `nicSpeedGbps` | 1 | NIC limit (kbit/s = Gbps × 1024 × 1024); usage = bytes/s × 8 / 1024 |
//! | `loadDelayMs`, `unloadDelayMs` | 0 | time a load / unload takes (topics opening / closing) |
//! | `batchIntervalMs` | 100 | how often a batch of messages is served per bundle, each checked against the bundle's lease ([`serving`]) |
//! | `lookupOnStart` | true | the agent looks every topic up once at start, as connecting clients would |
//! | `costModel` | none | the simulator's cost model instead of the two `cpu…` keys (below) |
//! | `topics[].name` | required | full topic name; one `{A..B}` makes topics A to B (inclusive) |
//! | `topics[].msgRateIn`, `msgRateOut` | 0 | msg/s per topic |
//! | `topics[].msgSizeBytes` | 1024 | bytes per message (throughput = rate × size) |
//! | `topics[].producers`, `consumers` | 1, 1 | connections per topic |
//!
//! Unknown keys are errors naming the key, so a typo does not silently change a test.
//!
//! # The simulator's cost model
//!
//! With `"costModel": {"baseCpuCores": 0.4, "cpuMicrosPerMessage": 15, "cpuMicrosPerKiB": 20,
//! "bookieWriteCopies": 2}` (the keys and defaults of a scenario's `model`, [`CostModel`]), CPU, NIC, memory and
//! direct memory are what [`CostModel::usage`] gives a simulated broker with `cores` cores and a
//! `nicSpeedGbps` NIC serving the same traffic — the same function, without noise (`noisePoints` is ignored).
//! `cpuBasePercent`, `cpuPercentPer1000Msgs`, `memoryMb` and `directMemoryMb` are then not used. A cluster of
//! agents on such hosts reports what the simulator's brokers report for the same traffic (the consistency test,
//! `tests/consistency.rs`); the values are equal to the last bit when the sums of the traffic are exact (whole
//! msg/s and bytes), since the simulator keeps a running total and the host sums its bundles.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

pub mod cost;
pub mod serving;

pub use cost::{Capacity, CostModel, Rates};
pub use serving::{read_serving_log, ServingEvent, ServingInterval};

use super::host::{BrokerHost, HostError, OwnershipLease};
use crate::bundle::{topic_hash, BundleName, TopicName, TopicTraffic};
use crate::model::{NamespaceBundleStats, ResourceUsage, SystemResourceUsage};
use serving::Serving;

/// `usage`/`limit` in MiB.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageSpec {
    /// In use.
    pub usage: f64,
    /// Capacity.
    pub limit: f64,
}

/// One topic line of a profile (possibly a `{A..B}` range of topics).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopicSpec {
    /// Full topic name, with at most one `{A..B}` range.
    pub name: String,
    /// msg/s in per topic.
    #[serde(default)]
    pub msg_rate_in: f64,
    /// msg/s out per topic.
    #[serde(default)]
    pub msg_rate_out: f64,
    /// Bytes per message.
    #[serde(default = "default_msg_size")]
    pub msg_size_bytes: f64,
    /// Producers per topic.
    #[serde(default = "one")]
    pub producers: i32,
    /// Consumers per topic.
    #[serde(default = "one")]
    pub consumers: i32,
}

fn default_msg_size() -> f64 {
    1024.0
}
fn one() -> i32 {
    1
}
fn default_cores() -> f64 {
    1.0
}
fn default_cpu_base() -> f64 {
    5.0
}
fn default_cpu_per_1000() -> f64 {
    10.0
}
fn default_memory() -> UsageSpec {
    UsageSpec {
        usage: 512.0,
        limit: 2048.0,
    }
}
fn default_direct() -> UsageSpec {
    UsageSpec {
        usage: 0.0,
        limit: 0.0,
    }
}
fn default_nic() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}
fn default_batch_interval() -> u64 {
    100
}

/// A traffic profile; see the module docs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyntheticProfile {
    /// CPU limit in cores.
    #[serde(default = "default_cores")]
    pub cores: f64,
    /// Idle CPU, percent of one core.
    #[serde(default = "default_cpu_base")]
    pub cpu_base_percent: f64,
    /// CPU per 1000 msg/s, percent of one core.
    #[serde(default = "default_cpu_per_1000", rename = "cpuPercentPer1000Msgs")]
    pub cpu_percent_per_1000_msgs: f64,
    /// Heap, MiB.
    #[serde(default = "default_memory")]
    pub memory_mb: UsageSpec,
    /// Direct memory, MiB.
    #[serde(default = "default_direct")]
    pub direct_memory_mb: UsageSpec,
    /// NIC speed, Gbit/s.
    #[serde(default = "default_nic")]
    pub nic_speed_gbps: f64,
    /// Time a bundle load takes, ms.
    #[serde(default)]
    pub load_delay_ms: u64,
    /// Time a bundle unload takes, ms.
    #[serde(default)]
    pub unload_delay_ms: u64,
    /// How often a batch of messages is served per bundle, ms (see [`serving`]).
    #[serde(default = "default_batch_interval")]
    pub batch_interval_ms: u64,
    /// Look every topic up once at start.
    #[serde(default = "yes")]
    pub lookup_on_start: bool,
    /// The simulator's cost model, replacing the `cpu…`/`…MemoryMb` keys (see the module docs).
    #[serde(default)]
    pub cost_model: Option<CostModel>,
    /// The topics.
    pub topics: Vec<TopicSpec>,
}

/// A profile that cannot be used, naming what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("traffic profile {source_name}: {message}")]
pub struct ProfileError {
    /// The file (or `inline`).
    pub source_name: String,
    /// What is wrong.
    pub message: String,
}

#[derive(Debug, Clone)]
struct Topic {
    name: TopicName,
    hash: u64,
    namespace: String,
    spec: TopicSpec,
}

/// Expands one `{A..B}` range in a topic name.
fn expand(name: &str) -> Result<Vec<String>, String> {
    let Some(open) = name.find('{') else {
        return Ok(vec![name.to_owned()]);
    };
    let close = name[open..]
        .find('}')
        .map(|i| open + i)
        .ok_or_else(|| format!("'{name}': '{{' without '}}'"))?;
    let inner = &name[open + 1..close];
    let (a, b) = inner
        .split_once("..")
        .ok_or_else(|| format!("'{name}': expected {{A..B}}, found {{{inner}}}"))?;
    let (a, b): (u64, u64) = match (a.trim().parse(), b.trim().parse()) {
        (Ok(a), Ok(b)) if a <= b && b - a < 100_000 => (a, b),
        _ => {
            return Err(format!(
            "'{name}': {{{inner}}} must be {{A..B}} with integers A <= B and at most 100000 topics"
        ))
        }
    };
    let (head, tail) = (&name[..open], &name[close + 1..]);
    if tail.contains('{') {
        return Err(format!("'{name}': only one {{A..B}} range is allowed"));
    }
    Ok((a..=b).map(|i| format!("{head}{i}{tail}")).collect())
}

impl SyntheticProfile {
    /// Parses profile text; `source_name` names it in errors.
    pub fn from_json(text: &str, source_name: &str) -> Result<Self, ProfileError> {
        let err = |message: String| ProfileError {
            source_name: source_name.to_owned(),
            message,
        };
        let profile: SyntheticProfile =
            serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
        profile.expanded_topics().map_err(err)?;
        for (key, v) in [
            ("cores", profile.cores),
            ("nicSpeedGbps", profile.nic_speed_gbps),
        ] {
            if !(v > 0.0 && v.is_finite()) {
                return Err(err(format!("{key} must be a number above 0, found {v}")));
            }
        }
        if profile.batch_interval_ms == 0 || profile.batch_interval_ms > 60_000 {
            return Err(err(format!(
                "batchIntervalMs must be from 1 to 60000, found {}",
                profile.batch_interval_ms
            )));
        }
        for (key, v) in [
            ("cpuBasePercent", profile.cpu_base_percent),
            ("cpuPercentPer1000Msgs", profile.cpu_percent_per_1000_msgs),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(err(format!(
                    "{key} must be a number of at least 0, found {v}"
                )));
            }
        }
        Ok(profile)
    }

    /// Reads a profile file.
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let name = path.display().to_string();
        let text = crate::model::input::read_file_to_string(path).map_err(|e| ProfileError {
            source_name: name.clone(),
            message: format!("cannot read: {}", e.reason),
        })?;
        Self::from_json(&text, &name)
    }

    fn expanded_topics(&self) -> Result<Vec<Topic>, String> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for (i, spec) in self.topics.iter().enumerate() {
            for (field, v) in [
                ("msgRateIn", spec.msg_rate_in),
                ("msgRateOut", spec.msg_rate_out),
                ("msgSizeBytes", spec.msg_size_bytes),
            ] {
                if !(v >= 0.0 && v.is_finite()) {
                    return Err(format!(
                        "topics[{i}].{field} must be a number of at least 0, found {v}"
                    ));
                }
            }
            if spec.producers < 0 || spec.consumers < 0 {
                return Err(format!(
                    "topics[{i}]: producers and consumers must be at least 0"
                ));
            }
            for name in expand(&spec.name).map_err(|e| format!("topics[{i}].name {e}"))? {
                let topic = TopicName::parse(&name)
                    .map_err(|e| format!("topics[{i}].name '{name}': {e}"))?;
                if !seen.insert(topic.full_name().to_owned()) {
                    return Err(format!("topics[{i}]: topic {name} is listed twice"));
                }
                out.push(Topic {
                    hash: topic_hash(&topic),
                    namespace: topic.namespace().to_string(),
                    name: topic,
                    spec: TopicSpec {
                        name: name.clone(),
                        ..spec.clone()
                    },
                });
            }
        }
        Ok(out)
    }

    /// Every topic name of the profile, ranges expanded.
    pub fn topic_names(&self) -> Vec<String> {
        self.expanded_topics()
            .map(|t| {
                t.into_iter()
                    .map(|t| t.name.full_name().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The synthetic host: serves the profile's topics that fall into the bundles it was told to load, in
/// batches checked against each bundle's lease ([`serving`]).
#[derive(Debug)]
pub struct SyntheticHost {
    profile: SyntheticProfile,
    topics: Vec<Topic>,
    serving: Arc<Serving>,
}

impl SyntheticHost {
    /// A host for a validated profile.
    pub fn new(profile: SyntheticProfile) -> Result<Self, ProfileError> {
        let topics = profile.expanded_topics().map_err(|message| ProfileError {
            source_name: "profile".into(),
            message,
        })?;
        Ok(Self {
            profile,
            topics,
            serving: Arc::new(Serving::default()),
        })
    }

    /// Appends the serving timeline to `path` (created or truncated; see [`serving`]).
    pub fn with_serving_log(mut self, path: &Path) -> Result<Self, ProfileError> {
        self.serving = Arc::new(Serving::new(Some(path)).map_err(|e| ProfileError {
            source_name: path.display().to_string(),
            message: format!("cannot create the serving log: {e}"),
        })?);
        Ok(self)
    }

    /// Every serving interval so far (see [`serving`]).
    pub fn timeline(&self) -> Vec<ServingInterval> {
        self.serving.timeline()
    }

    /// The profile.
    pub fn profile(&self) -> &SyntheticProfile {
        &self.profile
    }

    /// Bundles served now: given to the host, with a valid lease.
    pub fn served(&self) -> BTreeSet<String> {
        self.serving
            .bundles
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, b)| b.lease.is_valid())
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn topics_in<'a>(&'a self, bundle: &'a BundleName) -> impl Iterator<Item = &'a Topic> + 'a {
        let ns = bundle.namespace().to_string();
        let range = bundle.range();
        self.topics
            .iter()
            .filter(move |t| t.namespace == ns && range.contains(t.hash))
    }

    fn stats_of(&self, bundle: &BundleName) -> NamespaceBundleStats {
        let mut s = NamespaceBundleStats::default();
        for t in self.topics_in(bundle) {
            s.msg_rate_in += t.spec.msg_rate_in;
            s.msg_rate_out += t.spec.msg_rate_out;
            s.msg_throughput_in += t.spec.msg_rate_in * t.spec.msg_size_bytes;
            s.msg_throughput_out += t.spec.msg_rate_out * t.spec.msg_size_bytes;
            s.producer_count += t.spec.producers;
            s.consumer_count += t.spec.consumers;
            s.topics += 1;
        }
        s
    }
}

#[async_trait]
impl BrokerHost for SyntheticHost {
    fn bundle_stats(&self) -> BTreeMap<String, NamespaceBundleStats> {
        let served = self.serving.bundles.lock().unwrap();
        served
            .iter()
            .filter(|(_, b)| b.lease.is_valid())
            .map(|(name, b)| (name.clone(), self.stats_of(&b.name)))
            .collect()
    }

    fn resource_usage(&self) -> Option<SystemResourceUsage> {
        let stats = self.bundle_stats();
        // fold from +0.0: an empty f64 `sum()` is -0.0, which a report would show as "-0.0".
        let sum =
            |f: fn(&NamespaceBundleStats) -> f64| stats.values().map(f).fold(0.0, |a, b| a + b);
        let rate = sum(|s| s.msg_rate_in + s.msg_rate_out);
        let tp_in = sum(|s| s.msg_throughput_in);
        let tp_out = sum(|s| s.msg_throughput_out);
        let p = &self.profile;
        if let Some(model) = &p.cost_model {
            let rates = Rates {
                rate_in: sum(|s| s.msg_rate_in),
                rate_out: sum(|s| s.msg_rate_out),
                tp_in,
                tp_out,
            };
            let capacity = Capacity {
                cpu_cores: p.cores,
                nic_gbps: p.nic_speed_gbps,
                base_cpu_cores: model.base_cpu_cores,
            };
            return Some(model.usage(&capacity, &rates, 0.0, 0.0));
        }
        let nic_limit = p.nic_speed_gbps * 1024.0 * 1024.0;
        Some(SystemResourceUsage {
            cpu: ResourceUsage::new(
                p.cpu_base_percent + p.cpu_percent_per_1000_msgs * rate / 1000.0,
                p.cores * 100.0,
            ),
            memory: ResourceUsage::new(p.memory_mb.usage, p.memory_mb.limit),
            direct_memory: ResourceUsage::new(p.direct_memory_mb.usage, p.direct_memory_mb.limit),
            bandwidth_in: ResourceUsage::new(tp_in * 8.0 / 1024.0, nic_limit),
            bandwidth_out: ResourceUsage::new(tp_out * 8.0 / 1024.0, nic_limit),
        })
    }

    fn bundle_topics(&self, bundle: &str) -> BTreeMap<String, TopicTraffic> {
        let Ok(name) = BundleName::parse(bundle) else {
            return BTreeMap::new();
        };
        self.topics_in(&name)
            .map(|t| {
                (
                    t.name.full_name().to_owned(),
                    TopicTraffic {
                        msg_rate: t.spec.msg_rate_in + t.spec.msg_rate_out,
                        throughput: (t.spec.msg_rate_in + t.spec.msg_rate_out)
                            * t.spec.msg_size_bytes,
                    },
                )
            })
            .collect()
    }

    async fn load_bundle(&self, lease: OwnershipLease) -> Result<(), HostError> {
        let name = BundleName::parse(lease.bundle()).map_err(|e| HostError(e.to_string()))?;
        if self.profile.load_delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.profile.load_delay_ms)).await;
        }
        self.serving.load(name, lease);
        // The first batch goes out now, not one interval later.
        self.serving.tick();
        self.serving
            .start_pump(Duration::from_millis(self.profile.batch_interval_ms));
        Ok(())
    }

    async fn unload_bundle(&self, bundle: &str) -> Result<(), HostError> {
        if self.serving.holds(bundle) && self.profile.unload_delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.profile.unload_delay_ms)).await;
        }
        self.serving.unload(bundle);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = r#"{
        "cores": 2, "cpuBasePercent": 5, "cpuPercentPer1000Msgs": 10,
        "nicSpeedGbps": 1,
        "topics": [
            {"name": "persistent://public/demo/t-{0..9}", "msgRateIn": 100, "msgRateOut": 200, "msgSizeBytes": 1000,
             "producers": 1, "consumers": 2},
            {"name": "persistent://other/ns/x", "msgRateIn": 1}
        ]
    }"#;

    #[tokio::test]
    async fn serves_the_topics_of_loaded_bundles() {
        let profile = SyntheticProfile::from_json(PROFILE, "p.json").unwrap();
        assert_eq!(profile.topic_names().len(), 11);
        let host = SyntheticHost::new(profile).unwrap();
        assert!(host.bundle_stats().is_empty());
        let idle = host.resource_usage().unwrap();
        assert_eq!(idle.cpu, ResourceUsage::new(5.0, 200.0));
        assert!(
            idle.bandwidth_in.usage.is_sign_positive(),
            "no -0.0 in reports"
        );
        let full = "public/demo/0x00000000_0xffffffff";
        host.load_bundle(OwnershipLease::unbounded(full, 1))
            .await
            .unwrap();
        let stats = host.bundle_stats();
        let s = &stats[full];
        assert_eq!(s.topics, 10);
        assert_eq!(s.msg_rate_in, 1000.0);
        assert_eq!(s.msg_throughput_out, 2_000_000.0);
        assert_eq!((s.producer_count, s.consumer_count), (10, 20));
        let busy = host.resource_usage().unwrap();
        assert_eq!(busy.cpu.usage, 5.0 + 10.0 * 3.0);
        assert_eq!(busy.bandwidth_in.usage, 1_000_000.0 * 8.0 / 1024.0);
        assert_eq!(busy.bandwidth_in.limit, 1024.0 * 1024.0);
        assert_eq!(host.bundle_topics(full).len(), 10);
        // Halves hold the topics whose hash falls inside them.
        host.unload_bundle(full).await.unwrap();
        host.load_bundle(OwnershipLease::unbounded(
            "public/demo/0x00000000_0x80000000",
            2,
        ))
        .await
        .unwrap();
        host.load_bundle(OwnershipLease::unbounded(
            "public/demo/0x80000000_0xffffffff",
            3,
        ))
        .await
        .unwrap();
        let halves: i64 = host.bundle_stats().values().map(|s| s.topics).sum();
        assert_eq!(halves, 10);
        assert_eq!(host.served().len(), 2);
    }

    /// A paused or cut-off process must not serve past its session's deadline even though nobody told the
    /// host to unload: the lease lapses on the clock, and the host stops at its next batch.
    #[tokio::test(start_paused = true)]
    async fn a_lapsed_lease_stops_serving_without_an_unload() {
        use crate::store::{memory::MemoryStore, MetadataStore, StoreOptions};
        let store = MemoryStore::with_options(
            StoreOptions::default().with_session_timeout(Duration::from_secs(10)),
        );
        let profile = SyntheticProfile::from_json(PROFILE, "p.json").unwrap();
        let host = SyntheticHost::new(profile).unwrap();
        let full = "public/demo/0x00000000_0xffffffff";
        host.load_bundle(OwnershipLease::new(full, 42, store.session_validity()))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(host.bundle_stats().len(), 1);
        // Cut off: the lease lapses 9 s later (9/10 of the session timeout), with no unload.
        store.disconnect();
        tokio::time::sleep(Duration::from_millis(8_900)).await;
        assert_eq!(host.served().len(), 1, "still serving 8.9 s into the cut");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(host.served().is_empty() && host.bundle_stats().is_empty());
        let timeline = host.timeline();
        assert_eq!(timeline.len(), 1);
        assert_eq!(timeline[0].token, 42);
        assert_eq!(timeline[0].why.as_deref(), Some("lease lapsed"));
        // Batches every 100 ms (virtual time) from the load to the lapse, 10 s later.
        assert!(
            timeline[0].batches >= 99 && timeline[0].batches <= 101,
            "{timeline:?}"
        );
    }

    #[tokio::test]
    async fn the_simulator_cost_model_gives_the_simulator_usage() {
        let profile = SyntheticProfile::from_json(
            r#"{"cores": 2, "nicSpeedGbps": 1,
                "costModel": {"baseCpuCores": 0.5, "cpuMicrosPerMessage": 20, "noisePoints": 3},
                "topics": [{"name": "persistent://public/demo/t-{0..9}", "msgRateIn": 100, "msgRateOut": 300,
                            "msgSizeBytes": 2048}]}"#,
            "p.json",
        )
        .unwrap();
        let model = profile.cost_model.unwrap();
        assert_eq!(
            model.cpu_micros_per_kib,
            CostModel::default().cpu_micros_per_kib
        );
        let host = SyntheticHost::new(profile).unwrap();
        let capacity = Capacity {
            cpu_cores: 2.0,
            nic_gbps: 1.0,
            base_cpu_cores: 0.5,
        };
        let idle = host.resource_usage().unwrap();
        assert_eq!(
            idle,
            model.usage(&capacity, &Rates::default(), 0.0, 0.0),
            "no noise"
        );
        assert_eq!(idle.cpu, ResourceUsage::new(50.0, 200.0));
        host.load_bundle(OwnershipLease::unbounded(
            "public/demo/0x00000000_0xffffffff",
            1,
        ))
        .await
        .unwrap();
        let rates = Rates {
            rate_in: 1000.0,
            rate_out: 3000.0,
            tp_in: 1000.0 * 2048.0,
            tp_out: 3000.0 * 2048.0,
        };
        let busy = host.resource_usage().unwrap();
        assert_eq!(busy, model.usage(&capacity, &rates, 0.0, 0.0));
        // 0.5 cores + 4000 msg/s × 20 µs + 8000 KiB/s × 20 µs = 0.74 cores.
        assert!((busy.cpu.usage - 74.0).abs() < 1e-9, "{busy:?}");
        assert_eq!(busy.bandwidth_out.limit, 1e6);
    }

    #[test]
    fn bad_profiles_name_what_is_wrong() {
        let e = |t: &str| {
            SyntheticProfile::from_json(t, "p.json")
                .unwrap_err()
                .to_string()
        };
        assert!(e("{").starts_with("traffic profile p.json:"));
        assert!(e(r#"{"topics":[],"coress":1}"#).contains("coress"));
        assert!(
            e(r#"{"topics":[{"name":"persistent://a/b/c-{3..1}"}]}"#).contains("topics[0].name")
        );
        assert!(
            e(r#"{"topics":[{"name":"persistent://only-two/parts"}]}"#).contains("topics[0].name")
        );
        assert!(
            e(r#"{"topics":[{"name":"persistent://a/b/c","msgRateIn":-1}]}"#)
                .contains("topics[0].msgRateIn")
        );
        assert!(
            e(r#"{"topics":[{"name":"persistent://a/b/c"},{"name":"persistent://a/b/c"}]}"#)
                .contains("listed twice")
        );
        assert!(e(r#"{"cores":0,"topics":[]}"#).contains("cores"));
        assert_eq!(
            expand("persistent://a/b/t-{1..3}-x").unwrap(),
            vec![
                "persistent://a/b/t-1-x",
                "persistent://a/b/t-2-x",
                "persistent://a/b/t-3-x"
            ]
        );
        assert!(expand("a{1..2}{3..4}").is_err());
    }
}
