//! Windowed bundle traffic (`TimeAverageMessageData`, `BundleData`), per-broker sums of those windows
//! (`TimeAverageBrokerData`) and bundle resource quotas (`ResourceQuota`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::broker::NamespaceBundleStats;
use super::json::java_double as jd;

/// Samples in the short-term window (`NUM_SHORT_SAMPLES`).
pub const NUM_SHORT_SAMPLES: i32 = 10;
/// Samples in the long-term window (`NUM_LONG_SAMPLES`).
pub const NUM_LONG_SAMPLES: i32 = 1000;

/// A running, then exponential, average of a bundle's traffic (`TimeAverageMessageData`).
///
/// Rates in msg/s, throughputs in B/s. Until `maxSamples` samples have been seen this is the plain mean of the
/// samples; after that each sample has weight `1/maxSamples`. With `numSamples == 0` the values are the seed
/// (defaults or a quota) and the first sample replaces them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TimeAverageMessageData {
    /// Window length in samples.
    pub max_samples: i32,
    /// Samples seen so far, capped at `max_samples`.
    pub num_samples: i32,
    /// Bytes in, B/s.
    #[serde(with = "jd")]
    pub msg_throughput_in: f64,
    /// Bytes out, B/s.
    #[serde(with = "jd")]
    pub msg_throughput_out: f64,
    /// Messages in, msg/s.
    #[serde(with = "jd")]
    pub msg_rate_in: f64,
    /// Messages out, msg/s.
    #[serde(with = "jd")]
    pub msg_rate_out: f64,
}

impl Default for TimeAverageMessageData {
    /// Java's no-argument constructor: everything 0 (a window of 0 samples behaves as a window of 1).
    fn default() -> Self {
        Self {
            max_samples: 0,
            num_samples: 0,
            msg_throughput_in: 0.0,
            msg_throughput_out: 0.0,
            msg_rate_in: 0.0,
            msg_rate_out: 0.0,
        }
    }
}

impl TimeAverageMessageData {
    /// A window of `max_samples` seeded with `seed`'s four rate/throughput values and no samples.
    pub fn new(max_samples: i32, seed: &NamespaceBundleStats) -> Self {
        Self {
            max_samples,
            num_samples: 0,
            msg_throughput_in: seed.msg_throughput_in,
            msg_throughput_out: seed.msg_throughput_out,
            msg_rate_in: seed.msg_rate_in,
            msg_rate_out: seed.msg_rate_out,
        }
    }

    /// Adds one sample: `numSamples = min(numSamples + 1, maxSamples)`, then each value becomes
    /// `((numSamples − 1) · old + new) / numSamples`.
    pub fn update(&mut self, throughput_in: f64, throughput_out: f64, rate_in: f64, rate_out: f64) {
        // Java: numSamples = Math.min(numSamples + 1, maxSamples). A window of 0 would divide by zero in Java
        // (NaN); we treat it as a window of one sample.
        self.num_samples = (self.num_samples.saturating_add(1)).min(self.max_samples.max(1));
        let n = self.num_samples as f64;
        let mix = |old: f64, new: f64| ((n - 1.0) * old + new) / n;
        self.msg_throughput_in = mix(self.msg_throughput_in, throughput_in);
        self.msg_throughput_out = mix(self.msg_throughput_out, throughput_out);
        self.msg_rate_in = mix(self.msg_rate_in, rate_in);
        self.msg_rate_out = mix(self.msg_rate_out, rate_out);
    }

    /// Adds one sample taken from a bundle's stats.
    pub fn update_from_stats(&mut self, stats: &NamespaceBundleStats) {
        self.update(
            stats.msg_throughput_in,
            stats.msg_throughput_out,
            stats.msg_rate_in,
            stats.msg_rate_out,
        );
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

/// What the leader knows of one bundle's traffic (`BundleData`), stored at
/// `/loadbalance/bundle-data/<tenant>/<ns>/<range>`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BundleData {
    /// Last 10 samples.
    pub short_term_data: TimeAverageMessageData,
    /// Last 1000 samples.
    pub long_term_data: TimeAverageMessageData,
    /// Topics in the bundle at the last sample (absent in old versions: 0).
    pub topics: i32,
}

impl Default for BundleData {
    /// The modular load manager's seed for an unknown bundle: windows of 10 and 1000 samples holding the
    /// defaults (50 msg/s, 50000 B/s each way) with no samples, so the first update replaces them.
    fn default() -> Self {
        Self::with_seed(&NamespaceBundleStats::pulsar_default())
    }
}

impl BundleData {
    /// Windows of 10 and 1000 samples seeded with `seed`, no samples yet.
    pub fn with_seed(seed: &NamespaceBundleStats) -> Self {
        Self {
            short_term_data: TimeAverageMessageData::new(NUM_SHORT_SAMPLES, seed),
            long_term_data: TimeAverageMessageData::new(NUM_LONG_SAMPLES, seed),
            topics: 0,
        }
    }

    /// The seed built from a valid resource quota: both windows hold the quota's rates and bandwidths and
    /// count as full ("ample history"), so quota values weigh as much as a full window of samples.
    pub fn from_quota(quota: &ResourceQuota) -> Self {
        let seed = NamespaceBundleStats {
            msg_rate_in: quota.msg_rate_in,
            msg_rate_out: quota.msg_rate_out,
            msg_throughput_in: quota.bandwidth_in,
            msg_throughput_out: quota.bandwidth_out,
            ..Default::default()
        };
        let mut data = Self::with_seed(&seed);
        data.short_term_data.num_samples = NUM_SHORT_SAMPLES;
        data.long_term_data.num_samples = NUM_LONG_SAMPLES;
        data
    }

    /// Adds one sample to both windows and takes the topic count.
    pub fn update(&mut self, stats: &NamespaceBundleStats) {
        self.short_term_data.update_from_stats(stats);
        self.long_term_data.update_from_stats(stats);
        self.topics = stats.topics.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
    }
}

/// A broker's share of the bundle windows (`TimeAverageBrokerData`), stored at
/// `/loadbalance/broker-time-average/<brokerId>`. Rates in msg/s, throughputs in B/s.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TimeAverageBrokerData {
    /// Sum of the short-term bytes in.
    #[serde(with = "jd")]
    pub short_term_msg_throughput_in: f64,
    /// Sum of the short-term bytes out.
    #[serde(with = "jd")]
    pub short_term_msg_throughput_out: f64,
    /// Sum of the short-term messages in.
    #[serde(with = "jd")]
    pub short_term_msg_rate_in: f64,
    /// Sum of the short-term messages out.
    #[serde(with = "jd")]
    pub short_term_msg_rate_out: f64,
    /// Sum of the long-term bytes in.
    #[serde(with = "jd")]
    pub long_term_msg_throughput_in: f64,
    /// Sum of the long-term bytes out.
    #[serde(with = "jd")]
    pub long_term_msg_throughput_out: f64,
    /// Sum of the long-term messages in.
    #[serde(with = "jd")]
    pub long_term_msg_rate_in: f64,
    /// Sum of the long-term messages out.
    #[serde(with = "jd")]
    pub long_term_msg_rate_out: f64,
}

impl TimeAverageBrokerData {
    /// Java's `reset(bundles, bundleDataMap, defaultStats)`: starts from zero and, per bundle, adds its short-
    /// and long-term windows when `bundle_data` has the bundle, else adds `default_stats` to both.
    pub fn reset<'a>(
        &mut self,
        bundles: impl IntoIterator<Item = &'a String>,
        bundle_data: &BTreeMap<String, BundleData>,
        default_stats: &NamespaceBundleStats,
    ) {
        self.reset_with(
            bundles,
            |name| bundle_data.get(name).copied(),
            default_stats,
        );
    }

    /// [`Self::reset`] over any bundle-data lookup.
    pub fn reset_with<'a>(
        &mut self,
        bundles: impl IntoIterator<Item = &'a String>,
        lookup: impl Fn(&str) -> Option<BundleData>,
        default_stats: &NamespaceBundleStats,
    ) {
        *self = Self::default();
        for bundle in bundles {
            match lookup(bundle) {
                Some(data) => self.add(&data),
                None => self.add_unknown(default_stats),
            }
        }
    }

    /// Adds a bundle without data as `default_stats` in both windows (Pulsar's defaults for a bundle never
    /// sampled).
    pub fn add_unknown(&mut self, default_stats: &NamespaceBundleStats) {
        let s = default_stats;
        self.short_term_msg_throughput_in += s.msg_throughput_in;
        self.short_term_msg_throughput_out += s.msg_throughput_out;
        self.short_term_msg_rate_in += s.msg_rate_in;
        self.short_term_msg_rate_out += s.msg_rate_out;
        self.long_term_msg_throughput_in += s.msg_throughput_in;
        self.long_term_msg_throughput_out += s.msg_throughput_out;
        self.long_term_msg_rate_in += s.msg_rate_in;
        self.long_term_msg_rate_out += s.msg_rate_out;
    }

    /// Adds one bundle's windows.
    pub fn add(&mut self, data: &BundleData) {
        let (s, l) = (&data.short_term_data, &data.long_term_data);
        self.short_term_msg_throughput_in += s.msg_throughput_in;
        self.short_term_msg_throughput_out += s.msg_throughput_out;
        self.short_term_msg_rate_in += s.msg_rate_in;
        self.short_term_msg_rate_out += s.msg_rate_out;
        self.long_term_msg_throughput_in += l.msg_throughput_in;
        self.long_term_msg_throughput_out += l.msg_throughput_out;
        self.long_term_msg_rate_in += l.msg_rate_in;
        self.long_term_msg_rate_out += l.msg_rate_out;
    }

    /// Long-term msg/s in + out.
    pub fn long_term_msg_rate(&self) -> f64 {
        self.long_term_msg_rate_in + self.long_term_msg_rate_out
    }

    /// Short-term msg/s in + out.
    pub fn short_term_msg_rate(&self) -> f64 {
        self.short_term_msg_rate_in + self.short_term_msg_rate_out
    }
}

/// A bundle's resource quota (`ResourceQuota`) at `/loadbalance/resource-quota/<bundle>`; the modular load
/// manager reads it as a seed for bundles it has no data for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceQuota {
    /// msg/s in.
    #[serde(with = "jd")]
    pub msg_rate_in: f64,
    /// msg/s out.
    #[serde(with = "jd")]
    pub msg_rate_out: f64,
    /// B/s in.
    #[serde(with = "jd")]
    pub bandwidth_in: f64,
    /// B/s out.
    #[serde(with = "jd")]
    pub bandwidth_out: f64,
    /// Memory, MB.
    #[serde(with = "jd")]
    pub memory: f64,
    /// Whether the quota is recomputed from usage.
    pub dynamic: bool,
}

impl Default for ResourceQuota {
    /// Java's no-argument constructor: all zero, `dynamic = true`.
    fn default() -> Self {
        Self {
            msg_rate_in: 0.0,
            msg_rate_out: 0.0,
            bandwidth_in: 0.0,
            bandwidth_out: 0.0,
            memory: 0.0,
            dynamic: true,
        }
    }
}

impl ResourceQuota {
    /// Pulsar's built-in default quota (`BundlesQuotas`): 40 msg/s in, 120 out, 100000 B/s in, 300000 out,
    /// 80 MB, dynamic.
    pub const fn pulsar_default() -> Self {
        Self {
            msg_rate_in: 40.0,
            msg_rate_out: 120.0,
            bandwidth_in: 100_000.0,
            bandwidth_out: 300_000.0,
            memory: 80.0,
            dynamic: true,
        }
    }

    /// Java's `isValid()`: all five numbers strictly positive.
    pub fn is_valid(&self) -> bool {
        [
            self.msg_rate_in,
            self.msg_rate_out,
            self.bandwidth_in,
            self.bandwidth_out,
            self.memory,
        ]
        .iter()
        .all(|v| *v > 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::json::to_json_string;

    #[test]
    fn running_mean_then_moving_average() {
        let mut w = TimeAverageMessageData::new(10, &NamespaceBundleStats::pulsar_default());
        // The first sample replaces the seed.
        w.update(100.0, 200.0, 10.0, 20.0);
        assert_eq!(w.num_samples, 1);
        assert_eq!((w.msg_throughput_in, w.msg_rate_out), (100.0, 20.0));
        // Running mean while filling.
        w.update(300.0, 200.0, 30.0, 20.0);
        assert_eq!(w.msg_throughput_in, 200.0);
        assert_eq!(w.msg_rate_in, 20.0);
        for _ in 0..8 {
            w.update(200.0, 200.0, 20.0, 20.0);
        }
        assert_eq!(w.num_samples, 10);
        assert!((w.msg_rate_in - 20.0).abs() < 1e-12);
        // Full: weight 1/10.
        w.update(120.0, 200.0, 120.0, 20.0);
        assert_eq!(w.num_samples, 10);
        assert!((w.msg_rate_in - 30.0).abs() < 1e-12);
        assert!((w.total_msg_rate() - 50.0).abs() < 1e-12);
    }

    #[test]
    fn long_window_weighs_one_thousandth() {
        let mut w = TimeAverageMessageData {
            max_samples: 1000,
            num_samples: 1000,
            msg_rate_in: 0.0,
            ..Default::default()
        };
        w.update(0.0, 0.0, 1000.0, 0.0);
        assert!((w.msg_rate_in - 1.0).abs() < 1e-12);
    }

    #[test]
    fn bundle_data_defaults_and_quota_seed() {
        let d = BundleData::default();
        assert_eq!(d.short_term_data.max_samples, 10);
        assert_eq!(d.long_term_data.max_samples, 1000);
        assert_eq!(d.short_term_data.num_samples, 0);
        assert_eq!(d.long_term_data.msg_rate_in, 50.0);
        assert_eq!(d.long_term_data.msg_throughput_out, 50_000.0);
        let q = BundleData::from_quota(&ResourceQuota::pulsar_default());
        assert_eq!(q.short_term_data.num_samples, 10);
        assert_eq!(q.long_term_data.num_samples, 1000);
        assert_eq!(q.long_term_data.msg_rate_out, 120.0);
        assert_eq!(q.short_term_data.msg_throughput_in, 100_000.0);
        let mut u = BundleData::default();
        let stats = NamespaceBundleStats {
            msg_rate_in: 7.0,
            topics: 4,
            ..Default::default()
        };
        u.update(&stats);
        assert_eq!(u.topics, 4);
        assert_eq!(u.short_term_data.msg_rate_in, 7.0);
        assert_eq!(u.long_term_data.msg_rate_in, 7.0);
        assert_eq!(u.long_term_data.msg_rate_out, 0.0);
    }

    #[test]
    fn broker_time_average_reset_adds_defaults_for_unknown_bundles() {
        let known = BundleData::from_quota(&ResourceQuota::pulsar_default());
        let map: BTreeMap<String, BundleData> = [("a".to_owned(), known)].into();
        let mut avg = TimeAverageBrokerData {
            long_term_msg_rate_in: 999.0,
            ..Default::default()
        };
        let names = ["a".to_owned(), "b".to_owned()];
        avg.reset(names.iter(), &map, &NamespaceBundleStats::pulsar_default());
        assert_eq!(avg.short_term_msg_rate_in, 40.0 + 50.0);
        assert_eq!(avg.long_term_msg_rate_out, 120.0 + 50.0);
        assert_eq!(avg.long_term_msg_throughput_out, 300_000.0 + 50_000.0);
        assert_eq!(avg.long_term_msg_rate(), 90.0 + 170.0);
    }

    #[test]
    fn quota_validity_and_shape() {
        assert!(ResourceQuota::pulsar_default().is_valid());
        assert!(!ResourceQuota::default().is_valid());
        assert_eq!(
            to_json_string(&ResourceQuota::pulsar_default()),
            r#"{"msgRateIn":40.0,"msgRateOut":120.0,"bandwidthIn":100000.0,"bandwidthOut":300000.0,"memory":80.0,"dynamic":true}"#
        );
        let missing: ResourceQuota = serde_json::from_str("{}").unwrap();
        assert!(missing.dynamic);
    }

    #[test]
    fn bundle_data_shape_matches_the_reference_example() {
        let text = r#"{"shortTermData":{"maxSamples":10,"numSamples":10,"msgThroughputIn":10752.0,"msgThroughputOut":21504.0,"msgRateIn":10.5,"msgRateOut":21.0},"longTermData":{"maxSamples":1000,"numSamples":342,"msgThroughputIn":9830.4,"msgThroughputOut":19660.8,"msgRateIn":9.6,"msgRateOut":19.2},"topics":2}"#;
        let data: BundleData = serde_json::from_str(text).unwrap();
        assert_eq!(data.long_term_data.num_samples, 342);
        assert_eq!(to_json_string(&data), text);
    }
}
