//! The per-broker load report of the modular load manager (`LocalBrokerData`) and its parts.

use std::collections::{BTreeMap, BTreeSet};

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use super::json::java_double as jd;

/// The class name a modular-load-manager broker advertises in `loadManagerClassName`. Since Pulsar 3.0 the
/// leader's `BrokerLoadManagerClassFilter` drops every broker whose value differs from its own.
pub const MODULAR_LOAD_MANAGER_CLASS: &str =
    "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl";

/// The constant value of the computed `loadReportType` key of a `LocalBrokerData` node.
pub const LOCAL_BROKER_DATA_REPORT_TYPE: &str = "LocalBrokerData";

/// Usage and limit of one host resource. Units depend on the resource (see [`LocalBrokerData`]): percent of one
/// core for `cpu`, MiB for `memory`/`directMemory`, kbit/s for `bandwidthIn`/`bandwidthOut`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceUsage {
    /// Amount in use.
    #[serde(with = "jd")]
    pub usage: f64,
    /// Capacity; `<= 0` means unknown, and the percentage is then 0.
    #[serde(with = "jd")]
    pub limit: f64,
}

impl ResourceUsage {
    /// A usage/limit pair.
    pub const fn new(usage: f64, limit: f64) -> Self {
        Self { usage, limit }
    }

    /// Java's `percentUsage()`: usage as a percentage of the limit, computed in `float` as Java does
    /// (`(float) usage / (float) limit * 100`), or 0 when the limit is not positive.
    pub fn percent_usage(&self) -> f32 {
        if self.limit > 0.0 {
            (self.usage as f32) / (self.limit as f32) * 100.0
        } else {
            0.0
        }
    }

    /// Java's `reset()`: both values become -1 ("not measured").
    pub fn reset(&mut self) {
        self.usage = -1.0;
        self.limit = -1.0;
    }
}

/// One listener of a broker's advertised listeners (`AdvertisedListener`); URIs as strings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AdvertisedListener {
    /// `pulsar://host:port`, left out when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_service_url: Option<String>,
    /// `pulsar+ssl://host:port`, left out when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_service_url_tls: Option<String>,
}

/// Traffic of one bundle on its owner (`NamespaceBundleStats`), the values of `lastStats`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NamespaceBundleStats {
    /// Messages in, msg/s.
    #[serde(with = "jd")]
    pub msg_rate_in: f64,
    /// Bytes in, B/s.
    #[serde(with = "jd")]
    pub msg_throughput_in: f64,
    /// Messages out, msg/s.
    #[serde(with = "jd")]
    pub msg_rate_out: f64,
    /// Bytes out, B/s.
    #[serde(with = "jd")]
    pub msg_throughput_out: f64,
    /// Consumers connected to the bundle's topics.
    pub consumer_count: i32,
    /// Producers connected to the bundle's topics.
    pub producer_count: i32,
    /// Topics in the bundle.
    pub topics: i64,
    /// Cached entries size, bytes.
    pub cache_size: i64,
}

impl NamespaceBundleStats {
    /// The modular load manager's default traffic for a bundle it knows nothing about: 50 msg/s and
    /// 50000 B/s in each direction (`DEFAULT_MESSAGE_RATE`, `DEFAULT_MESSAGE_THROUGHPUT`).
    pub const fn pulsar_default() -> Self {
        Self {
            msg_rate_in: 50.0,
            msg_throughput_in: 50_000.0,
            msg_rate_out: 50.0,
            msg_throughput_out: 50_000.0,
            consumer_count: 0,
            producer_count: 0,
            topics: 0,
            cache_size: 0,
        }
    }

    /// msg/s in + out.
    pub fn total_msg_rate(&self) -> f64 {
        self.msg_rate_in + self.msg_rate_out
    }

    /// B/s in + out.
    pub fn total_msg_throughput(&self) -> f64 {
        self.msg_throughput_in + self.msg_throughput_out
    }
}

/// Resource weights used by the weighted max-usage formulas (`loadBalancer*ResourceWeight`). Memory is
/// deprecated (weight 0 by default since Pulsar 3.3, dropped from the formula in 4.x; a weight of 0 gives
/// the 4.x result).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResourceWeights {
    /// CPU weight.
    pub cpu: f64,
    /// JVM heap weight (deprecated; 0 by default).
    pub memory: f64,
    /// Direct-memory weight (0 by default).
    pub direct_memory: f64,
    /// NIC-in weight.
    pub bandwidth_in: f64,
    /// NIC-out weight.
    pub bandwidth_out: f64,
}

impl Default for ResourceWeights {
    fn default() -> Self {
        Self {
            cpu: 1.0,
            memory: 0.0,
            direct_memory: 0.0,
            bandwidth_in: 1.0,
            bandwidth_out: 1.0,
        }
    }
}

/// Host resource usage as measured by a broker (`SystemResourceUsage`): the five resources of a report.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SystemResourceUsage {
    /// NIC receive, kbit/s.
    pub bandwidth_in: ResourceUsage,
    /// NIC transmit, kbit/s.
    pub bandwidth_out: ResourceUsage,
    /// CPU, percent of one core summed over cores.
    pub cpu: ResourceUsage,
    /// JVM heap, MiB.
    pub memory: ResourceUsage,
    /// JVM direct memory, MiB.
    pub direct_memory: ResourceUsage,
}

/// The load report each broker keeps at `/loadbalance/brokers/<brokerId>` (an ephemeral node).
///
/// Units: `msgRate*` in msg/s, `msgThroughput*` in bytes/s, `cpu` in percent of one core (limit 100 × cores),
/// `memory` and `directMemory` in MiB, `bandwidth*` in kbit/s, `lastUpdate` in epoch milliseconds.
///
/// Reading accepts every Pulsar version's shape: unknown keys are ignored and missing keys take the values of
/// Java's no-argument constructor (both topic kinds enabled, zero usages, empty maps and sets), except
/// `lastUpdate`, which Java fills with the construction time and loadmgr with 0 ("unknown") so that reading
/// stays deterministic. Writing produces the Pulsar 3.x key order, leaves `null` members out and adds the
/// computed `maxResourceUsage` and `loadReportType` keys. The 2.x duplicate `bundleStats` (a getter returning
/// `lastStats`) is accepted on read and not written: Pulsar 3.x marks it `@JsonIgnoreProperties`, and a real
/// 3.1 report (tests/golden) has no such key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LocalBrokerData {
    /// The broker id `host:port` (newest Pulsar only; written first when set, left out otherwise).
    pub broker_id: Option<String>,
    /// `http://<advertisedAddress>:<webServicePort>`; absent without a plain HTTP port.
    pub web_service_url: Option<String>,
    /// `https://<advertisedAddress>:<webServicePortTls>`.
    pub web_service_url_tls: Option<String>,
    /// `pulsar://<advertisedAddress>:<brokerServicePort>`.
    pub pulsar_service_url: Option<String>,
    /// `pulsar+ssl://<advertisedAddress>:<brokerServicePortTls>`.
    pub pulsar_service_url_tls: Option<String>,
    /// Whether the broker serves persistent topics.
    pub persistent_topics_enabled: bool,
    /// Whether the broker serves non-persistent topics.
    pub non_persistent_topics_enabled: bool,
    /// CPU, percent of one core summed over cores.
    pub cpu: ResourceUsage,
    /// JVM heap, MiB.
    pub memory: ResourceUsage,
    /// JVM direct memory, MiB.
    pub direct_memory: ResourceUsage,
    /// NIC receive, kbit/s.
    pub bandwidth_in: ResourceUsage,
    /// NIC transmit, kbit/s.
    pub bandwidth_out: ResourceUsage,
    /// Sum of the bundles' bytes in, B/s.
    #[serde(with = "jd")]
    pub msg_throughput_in: f64,
    /// Sum of the bundles' bytes out, B/s.
    #[serde(with = "jd")]
    pub msg_throughput_out: f64,
    /// Sum of the bundles' messages in, msg/s.
    #[serde(with = "jd")]
    pub msg_rate_in: f64,
    /// Sum of the bundles' messages out, msg/s.
    #[serde(with = "jd")]
    pub msg_rate_out: f64,
    /// When the report was last written, epoch ms.
    pub last_update: i64,
    /// Every bundle the broker serves (full bundle name → its traffic).
    pub last_stats: BTreeMap<String, NamespaceBundleStats>,
    /// Sum of `topics` over `lastStats` (a Java `int` in released versions, `long` in the newest).
    pub num_topics: i64,
    /// Number of entries in `lastStats`.
    pub num_bundles: i32,
    /// Sum of `consumerCount`.
    pub num_consumers: i32,
    /// Sum of `producerCount`.
    pub num_producers: i32,
    /// Every bundle currently in `lastStats`.
    pub bundles: BTreeSet<String>,
    /// Bundles gained since the last written report.
    pub last_bundle_gains: BTreeSet<String>,
    /// Bundles lost since the last written report.
    pub last_bundle_losses: BTreeSet<String>,
    /// The broker's build version, e.g. `3.0.2`.
    pub broker_version_string: Option<String>,
    /// Protocol-handler name → advertised data.
    pub protocols: BTreeMap<String, String>,
    /// Listener name → URLs.
    pub advertised_listeners: BTreeMap<String, AdvertisedListener>,
    /// The broker's configured load-manager class (Pulsar 3.0+).
    pub load_manager_class_name: Option<String>,
    /// When the broker's load manager started, epoch ms (Pulsar 3.1+; left out when unknown).
    pub start_timestamp: Option<i64>,
}

impl Default for LocalBrokerData {
    fn default() -> Self {
        Self {
            broker_id: None,
            web_service_url: None,
            web_service_url_tls: None,
            pulsar_service_url: None,
            pulsar_service_url_tls: None,
            persistent_topics_enabled: true,
            non_persistent_topics_enabled: true,
            cpu: ResourceUsage::default(),
            memory: ResourceUsage::default(),
            direct_memory: ResourceUsage::default(),
            bandwidth_in: ResourceUsage::default(),
            bandwidth_out: ResourceUsage::default(),
            msg_throughput_in: 0.0,
            msg_throughput_out: 0.0,
            msg_rate_in: 0.0,
            msg_rate_out: 0.0,
            last_update: 0,
            last_stats: BTreeMap::new(),
            num_topics: 0,
            num_bundles: 0,
            num_consumers: 0,
            num_producers: 0,
            bundles: BTreeSet::new(),
            last_bundle_gains: BTreeSet::new(),
            last_bundle_losses: BTreeSet::new(),
            broker_version_string: None,
            protocols: BTreeMap::new(),
            advertised_listeners: BTreeMap::new(),
            load_manager_class_name: None,
            start_timestamp: None,
        }
    }
}

impl SystemResourceUsage {
    fn weighted_percentages(&self, w: &ResourceWeights) -> [f64; 5] {
        [
            self.cpu.percent_usage() as f64 * w.cpu,
            self.memory.percent_usage() as f64 * w.memory,
            self.direct_memory.percent_usage() as f64 * w.direct_memory,
            self.bandwidth_in.percent_usage() as f64 * w.bandwidth_in,
            self.bandwidth_out.percent_usage() as f64 * w.bandwidth_out,
        ]
    }

    /// `getMaxResourceUsageWithWeight` of these resources: max over resources of percent × weight, as a
    /// fraction (÷ 100).
    pub fn max_resource_usage_with_weight(&self, w: &ResourceWeights) -> f64 {
        self.weighted_percentages(w)
            .into_iter()
            .fold(f64::NEG_INFINITY, f64::max)
            / 100.0
    }
}

impl LocalBrokerData {
    /// The unweighted maximum usage as a fraction (the serialised `maxResourceUsage`): the largest of the cpu,
    /// direct-memory, NIC-in and NIC-out percentages over 100. JVM heap is not a load item since Pulsar 3.0.
    ///
    /// Computed in `float` as Java does (`max(float...) / 100` is a float division widened to double), so the
    /// written value has the same digits as a Java broker's, e.g. `0.10280216485261917` for cpu
    /// 164.48347/1600.
    pub fn max_resource_usage(&self) -> f64 {
        let max = [
            self.cpu.percent_usage(),
            self.direct_memory.percent_usage(),
            self.bandwidth_in.percent_usage(),
            self.bandwidth_out.percent_usage(),
        ]
        .into_iter()
        .fold(f32::NEG_INFINITY, f32::max);
        (max / 100.0f32) as f64
    }

    /// The five resources as a [`SystemResourceUsage`].
    pub fn usage(&self) -> SystemResourceUsage {
        SystemResourceUsage {
            bandwidth_in: self.bandwidth_in,
            bandwidth_out: self.bandwidth_out,
            cpu: self.cpu,
            memory: self.memory,
            direct_memory: self.direct_memory,
        }
    }

    /// `getMaxResourceUsageWithWeight`: max over resources of percent × weight, as a fraction (÷ 100).
    pub fn max_resource_usage_with_weight(&self, w: &ResourceWeights) -> f64 {
        self.usage().max_resource_usage_with_weight(w)
    }

    /// Java's `update(SystemResourceUsage, Map<String, NamespaceBundleStats>)`: copies the host usage, records
    /// gained and lost bundles (accumulating until [`Self::clean_deltas`]) and recomputes the sums.
    pub fn update(
        &mut self,
        usage: &SystemResourceUsage,
        stats: BTreeMap<String, NamespaceBundleStats>,
    ) {
        self.cpu = usage.cpu;
        self.memory = usage.memory;
        self.direct_memory = usage.direct_memory;
        self.bandwidth_in = usage.bandwidth_in;
        self.bandwidth_out = usage.bandwidth_out;
        self.update_bundles(stats);
    }

    /// Java's `update(LocalBrokerData other)`: takes the other report's resources and bundle stats.
    pub fn update_from(&mut self, other: &LocalBrokerData) {
        self.cpu = other.cpu;
        self.memory = other.memory;
        self.direct_memory = other.direct_memory;
        self.bandwidth_in = other.bandwidth_in;
        self.bandwidth_out = other.bandwidth_out;
        self.update_bundles(other.last_stats.clone());
    }

    fn update_bundles(&mut self, stats: BTreeMap<String, NamespaceBundleStats>) {
        let lost: Vec<String> = self
            .bundles
            .iter()
            .filter(|b| !stats.contains_key(*b))
            .cloned()
            .collect();
        for bundle in lost {
            self.bundles.remove(&bundle);
            self.last_bundle_losses.insert(bundle);
        }
        for bundle in stats.keys() {
            if self.bundles.insert(bundle.clone()) {
                self.last_bundle_gains.insert(bundle.clone());
            }
        }
        self.recompute_sums(&stats);
        self.last_stats = stats;
    }

    fn recompute_sums(&mut self, stats: &BTreeMap<String, NamespaceBundleStats>) {
        self.msg_rate_in = 0.0;
        self.msg_rate_out = 0.0;
        self.msg_throughput_in = 0.0;
        self.msg_throughput_out = 0.0;
        let (mut topics, mut consumers, mut producers) = (0i64, 0i64, 0i64);
        for s in stats.values() {
            self.msg_rate_in += s.msg_rate_in;
            self.msg_rate_out += s.msg_rate_out;
            self.msg_throughput_in += s.msg_throughput_in;
            self.msg_throughput_out += s.msg_throughput_out;
            topics += s.topics;
            consumers += s.consumer_count as i64;
            producers += s.producer_count as i64;
        }
        self.num_topics = topics;
        self.num_consumers = saturate_i32(consumers);
        self.num_producers = saturate_i32(producers);
        self.num_bundles = saturate_i32(stats.len() as i64);
    }

    /// Java's `cleanDeltas()`: forgets gains and losses once a report has been written.
    pub fn clean_deltas(&mut self) {
        self.last_bundle_gains.clear();
        self.last_bundle_losses.clear();
    }

    /// msg/s in + out.
    pub fn total_msg_rate(&self) -> f64 {
        self.msg_rate_in + self.msg_rate_out
    }

    /// B/s in + out.
    pub fn total_msg_throughput(&self) -> f64 {
        self.msg_throughput_in + self.msg_throughput_out
    }

    /// The host part of `webServiceUrl` (or of the TLS URL), e.g. `broker-1.example` for
    /// `http://broker-1.example:8080`.
    pub fn host(&self) -> Option<&str> {
        let url = self
            .web_service_url
            .as_deref()
            .or(self.web_service_url_tls.as_deref())
            .or(self.pulsar_service_url.as_deref())?;
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let authority = rest.split('/').next().unwrap_or(rest);
        Some(match authority.rsplit_once(':') {
            Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
            _ => authority,
        })
    }
}

fn saturate_i32(v: i64) -> i32 {
    v.clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

struct JavaDouble(f64);

impl Serialize for JavaDouble {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        jd::serialize(&self.0, serializer)
    }
}

impl Serialize for LocalBrokerData {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("LocalBrokerData", 32)?;
        let opt = |s: &mut S::SerializeStruct, key: &'static str, v: &Option<String>| match v {
            Some(v) => s.serialize_field(key, v),
            None => s.skip_field(key),
        };
        opt(&mut s, "brokerId", &self.broker_id)?;
        opt(&mut s, "webServiceUrl", &self.web_service_url)?;
        opt(&mut s, "webServiceUrlTls", &self.web_service_url_tls)?;
        opt(&mut s, "pulsarServiceUrl", &self.pulsar_service_url)?;
        opt(&mut s, "pulsarServiceUrlTls", &self.pulsar_service_url_tls)?;
        s.serialize_field("persistentTopicsEnabled", &self.persistent_topics_enabled)?;
        s.serialize_field(
            "nonPersistentTopicsEnabled",
            &self.non_persistent_topics_enabled,
        )?;
        s.serialize_field("cpu", &self.cpu)?;
        s.serialize_field("memory", &self.memory)?;
        s.serialize_field("directMemory", &self.direct_memory)?;
        s.serialize_field("bandwidthIn", &self.bandwidth_in)?;
        s.serialize_field("bandwidthOut", &self.bandwidth_out)?;
        s.serialize_field("msgThroughputIn", &JavaDouble(self.msg_throughput_in))?;
        s.serialize_field("msgThroughputOut", &JavaDouble(self.msg_throughput_out))?;
        s.serialize_field("msgRateIn", &JavaDouble(self.msg_rate_in))?;
        s.serialize_field("msgRateOut", &JavaDouble(self.msg_rate_out))?;
        s.serialize_field("lastUpdate", &self.last_update)?;
        s.serialize_field("lastStats", &self.last_stats)?;
        s.serialize_field("numTopics", &self.num_topics)?;
        s.serialize_field("numBundles", &self.num_bundles)?;
        s.serialize_field("numConsumers", &self.num_consumers)?;
        s.serialize_field("numProducers", &self.num_producers)?;
        s.serialize_field("bundles", &self.bundles)?;
        s.serialize_field("lastBundleGains", &self.last_bundle_gains)?;
        s.serialize_field("lastBundleLosses", &self.last_bundle_losses)?;
        opt(&mut s, "brokerVersionString", &self.broker_version_string)?;
        s.serialize_field("protocols", &self.protocols)?;
        s.serialize_field("advertisedListeners", &self.advertised_listeners)?;
        opt(
            &mut s,
            "loadManagerClassName",
            &self.load_manager_class_name,
        )?;
        match self.start_timestamp {
            Some(t) => s.serialize_field("startTimestamp", &t)?,
            None => s.skip_field("startTimestamp")?,
        }
        s.serialize_field("maxResourceUsage", &JavaDouble(self.max_resource_usage()))?;
        s.serialize_field("loadReportType", LOCAL_BROKER_DATA_REPORT_TYPE)?;
        s.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::json::to_json_string;

    fn stats(rate_in: f64, topics: i64) -> NamespaceBundleStats {
        NamespaceBundleStats {
            msg_rate_in: rate_in,
            msg_throughput_in: rate_in * 1024.0,
            msg_rate_out: rate_in * 2.0,
            msg_throughput_out: rate_in * 2048.0,
            consumer_count: 1,
            producer_count: 2,
            topics,
            cache_size: 0,
        }
    }

    #[test]
    fn percent_usage_is_float_math_and_zero_without_limit() {
        assert_eq!(ResourceUsage::new(37.5, 400.0).percent_usage(), 9.375);
        assert_eq!(ResourceUsage::new(5.0, 0.0).percent_usage(), 0.0);
        assert_eq!(ResourceUsage::new(5.0, -1.0).percent_usage(), 0.0);
        // float, not double: 1/3 in f32 precision.
        assert_eq!(
            ResourceUsage::new(1.0, 3.0).percent_usage(),
            (1.0f32 / 3.0f32) * 100.0
        );
    }

    #[test]
    fn max_resource_usage_skips_memory() {
        let data = LocalBrokerData {
            cpu: ResourceUsage::new(20.0, 100.0),
            memory: ResourceUsage::new(95.0, 100.0),
            bandwidth_out: ResourceUsage::new(30.0, 100.0),
            ..Default::default()
        };
        assert!((data.max_resource_usage() - 0.30).abs() < 1e-6);
        let w = ResourceWeights {
            memory: 1.0,
            ..Default::default()
        };
        assert!((data.max_resource_usage_with_weight(&w) - 0.95).abs() < 1e-6);
        let w = ResourceWeights {
            cpu: 6.0,
            ..Default::default()
        };
        // cpu 20 % × 6 = 120 %: above 100 % counts as is (Pulsar PR #18645 removed the within-limit form).
        assert!((data.max_resource_usage_with_weight(&w) - 1.2).abs() < 1e-6);
    }

    #[test]
    fn update_tracks_gains_losses_and_sums() {
        let mut data = LocalBrokerData::default();
        let usage = SystemResourceUsage {
            cpu: ResourceUsage::new(50.0, 200.0),
            ..Default::default()
        };
        let first: BTreeMap<_, _> = [
            ("t/n/a".to_owned(), stats(10.0, 2)),
            ("t/n/b".to_owned(), stats(5.0, 1)),
        ]
        .into();
        data.update(&usage, first);
        assert_eq!(data.num_bundles, 2);
        assert_eq!(data.num_topics, 3);
        assert_eq!(data.num_consumers, 2);
        assert_eq!(data.num_producers, 4);
        assert_eq!(data.msg_rate_in, 15.0);
        assert_eq!(data.msg_rate_out, 30.0);
        assert_eq!(data.cpu, usage.cpu);
        assert_eq!(data.last_bundle_gains.len(), 2);
        data.clean_deltas();
        let second: BTreeMap<_, _> = [
            ("t/n/b".to_owned(), stats(5.0, 1)),
            ("t/n/c".to_owned(), stats(1.0, 1)),
        ]
        .into();
        data.update(&usage, second);
        assert_eq!(data.last_bundle_gains, BTreeSet::from(["t/n/c".to_owned()]));
        assert_eq!(
            data.last_bundle_losses,
            BTreeSet::from(["t/n/a".to_owned()])
        );
        assert_eq!(
            data.bundles,
            BTreeSet::from(["t/n/b".to_owned(), "t/n/c".to_owned()])
        );
        assert_eq!(data.msg_rate_in, 6.0);
        let mut copy = LocalBrokerData::default();
        copy.update_from(&data);
        assert_eq!(copy.last_stats, data.last_stats);
        assert_eq!(copy.num_topics, 2);
    }

    #[test]
    fn writes_java_key_order_with_computed_keys() {
        let data = LocalBrokerData {
            web_service_url: Some("http://b1:8080".into()),
            cpu: ResourceUsage::new(37.5, 400.0),
            bandwidth_in: ResourceUsage::new(5120.0, 1.048576e7),
            last_update: 17,
            load_manager_class_name: Some(MODULAR_LOAD_MANAGER_CLASS.into()),
            ..Default::default()
        };
        let text = to_json_string(&data);
        assert!(
            text.starts_with(
                r#"{"webServiceUrl":"http://b1:8080","persistentTopicsEnabled":true,"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#""bandwidthIn":{"usage":5120.0,"limit":1.048576E7}"#),
            "{text}"
        );
        assert!(
            text.ends_with(r#""advertisedListeners":{},"loadManagerClassName":"org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl","maxResourceUsage":0.09375,"loadReportType":"LocalBrokerData"}"#),
            "{text}"
        );
        assert!(
            !text.contains("bundleStats"),
            "3.x brokers no longer write bundleStats: {text}"
        );
        assert!(!text.contains("webServiceUrlTls"));
        assert!(!text.contains("brokerVersionString"));
        let back: LocalBrokerData = serde_json::from_str(&text).unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn missing_keys_take_java_defaults() {
        let data: LocalBrokerData =
            serde_json::from_str(r#"{"cpu":{"usage":1.0},"somethingNew":[1,2]}"#).unwrap();
        assert!(data.persistent_topics_enabled && data.non_persistent_topics_enabled);
        assert_eq!(data.cpu, ResourceUsage::new(1.0, 0.0));
        assert!(data.last_stats.is_empty());
        assert_eq!(data.last_update, 0);
    }

    #[test]
    fn host_comes_from_the_web_url() {
        let mut data = LocalBrokerData {
            web_service_url: Some("http://broker-1.example:8080".into()),
            ..Default::default()
        };
        assert_eq!(data.host(), Some("broker-1.example"));
        data.web_service_url = None;
        data.pulsar_service_url = Some("pulsar://10.0.0.1:6650".into());
        assert_eq!(data.host(), Some("10.0.0.1"));
    }
}
