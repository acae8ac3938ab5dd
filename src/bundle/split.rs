//! The four bundle split algorithms of Pulsar, with their exact split points.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::{topic_hash, BundleError, BundleRange, TopicName};

/// `1 MiB`, Pulsar's `MBytes` for `loadBalancerNamespaceBundleMaxBandwidthMbytes`.
const MIB: f64 = 1024.0 * 1024.0;

/// How a bundle is divided (`supportedNamespaceBundleSplitAlgorithms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SplitAlgorithm {
    /// Halve the hash range: `lower + (upper − lower) / 2`.
    RangeEquallyDivide,
    /// Split between the two middle topic hashes, so both halves hold (about) the same number of topics.
    TopicCountEquallyDivide,
    /// Split at caller-given positions (admin API only; never a default).
    SpecifiedPositionsDivide,
    /// Cut the topics, in hash order, into runs whose traffic stays under the bundle maxima.
    FlowOrQpsEquallyDivide,
}

impl SplitAlgorithm {
    /// All algorithms.
    pub const ALL: [SplitAlgorithm; 4] = [
        SplitAlgorithm::RangeEquallyDivide,
        SplitAlgorithm::TopicCountEquallyDivide,
        SplitAlgorithm::SpecifiedPositionsDivide,
        SplitAlgorithm::FlowOrQpsEquallyDivide,
    ];

    /// Pulsar's name.
    pub const fn name(self) -> &'static str {
        match self {
            SplitAlgorithm::RangeEquallyDivide => "range_equally_divide",
            SplitAlgorithm::TopicCountEquallyDivide => "topic_count_equally_divide",
            SplitAlgorithm::SpecifiedPositionsDivide => "specified_positions_divide",
            SplitAlgorithm::FlowOrQpsEquallyDivide => "flow_or_qps_equally_divide",
        }
    }

    /// Parses a name meant for `defaultNamespaceBundleSplitAlgorithm`: `specified_positions_divide` is
    /// refused there, as Pulsar refuses it.
    pub fn parse_default(text: &str) -> Result<Self, BundleError> {
        match text.parse()? {
            SplitAlgorithm::SpecifiedPositionsDivide => {
                Err(BundleError::PositionsAlgorithmAsDefault)
            }
            other => Ok(other),
        }
    }
}

impl fmt::Display for SplitAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SplitAlgorithm {
    type Err = BundleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SplitAlgorithm::ALL
            .into_iter()
            .find(|a| a.name() == s.trim())
            .ok_or_else(|| BundleError::UnknownAlgorithm(s.to_owned()))
    }
}

/// One topic's traffic, for `flow_or_qps_equally_divide`.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicTraffic {
    /// msg/s in + out.
    pub msg_rate: f64,
    /// B/s in + out.
    pub throughput: f64,
}

/// What the algorithms need to know about the bundle beyond its range.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitInput {
    /// The topics the bundle's owner serves (each must hash into the bundle).
    pub topics: Vec<TopicName>,
    /// Requested positions, for `specified_positions_divide`.
    pub positions: Vec<u64>,
    /// Per-topic traffic by full topic name, for `flow_or_qps_equally_divide`; topics without an entry are
    /// skipped, as Java skips topics without stats.
    pub traffic: BTreeMap<String, TopicTraffic>,
    /// `loadBalancerNamespaceBundleMaxMsgRate`, msg/s.
    pub max_msg_rate: f64,
    /// `loadBalancerNamespaceBundleMaxBandwidthMbytes`, MiB/s.
    pub max_bandwidth_mbytes: f64,
    /// `flowOrQpsDifferenceThresholdPercentage`, percent.
    pub flow_or_qps_difference_threshold_percentage: f64,
}

impl Default for SplitInput {
    fn default() -> Self {
        Self {
            topics: Vec::new(),
            positions: Vec::new(),
            traffic: BTreeMap::new(),
            max_msg_rate: 30_000.0,
            max_bandwidth_mbytes: 100.0,
            flow_or_qps_difference_threshold_percentage: 10.0,
        }
    }
}

/// The result of a split algorithm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitOutcome {
    /// Split at these sorted boundaries (k boundaries give k + 1 children).
    Split(Vec<u64>),
    /// No split, and why.
    NoSplit(String),
}

impl SplitOutcome {
    /// The child ranges of `range` for this outcome (just `range` when there is no split).
    pub fn children(&self, range: BundleRange) -> Vec<BundleRange> {
        match self {
            SplitOutcome::NoSplit(_) => vec![range],
            SplitOutcome::Split(points) => {
                let mut edges = Vec::with_capacity(points.len() + 2);
                edges.push(range.lower());
                edges.extend_from_slice(points);
                edges.push(range.upper());
                edges
                    .windows(2)
                    .map(|w| {
                        BundleRange::new(w[0], w[1]).expect("split points are strictly inside")
                    })
                    .collect()
            }
        }
    }
}

/// Computes where `algorithm` splits `range`.
///
/// Errors are bad input (a topic outside the range, `specified_positions_divide` without positions). A valid
/// request that Pulsar would answer with "no split" (fewer than two topics, traffic under the thresholds, a
/// range of one hash value, no position inside the range) is `Ok(SplitOutcome::NoSplit(reason))`.
pub fn split_bundle(
    range: BundleRange,
    algorithm: SplitAlgorithm,
    input: &SplitInput,
) -> Result<SplitOutcome, BundleError> {
    let mut hashes = Vec::with_capacity(input.topics.len());
    for topic in &input.topics {
        let hash = topic_hash(topic);
        if !range.contains(hash) {
            return Err(BundleError::TopicOutsideRange {
                topic: topic.full_name().to_owned(),
                hash,
                range,
            });
        }
        hashes.push(hash);
    }
    if algorithm == SplitAlgorithm::SpecifiedPositionsDivide && input.positions.is_empty() {
        return Err(BundleError::MissingPositions);
    }
    if !range.splittable() {
        return Ok(SplitOutcome::NoSplit(format!(
            "bundle {range} spans fewer than two hash values"
        )));
    }
    let too_few_topics = || {
        SplitOutcome::NoSplit(format!(
            "{algorithm} needs at least 2 topics in the bundle, it has {}",
            input.topics.len()
        ))
    };
    let outcome = match algorithm {
        SplitAlgorithm::RangeEquallyDivide => {
            SplitOutcome::Split(vec![range.lower() + (range.upper() - range.lower()) / 2])
        }
        SplitAlgorithm::TopicCountEquallyDivide => {
            if hashes.len() <= 1 {
                return Ok(too_few_topics());
            }
            hashes.sort_unstable();
            let n = hashes.len();
            let start = hashes[(n / 2).saturating_sub(1)];
            let end = hashes[n / 2];
            SplitOutcome::Split(vec![start + (end - start) / 2])
        }
        SplitAlgorithm::SpecifiedPositionsDivide => {
            if hashes.len() <= 1 {
                return Ok(too_few_topics());
            }
            let mut inside: Vec<u64> = input
                .positions
                .iter()
                .copied()
                .filter(|p| *p > range.lower() && *p < range.upper())
                .collect();
            inside.sort_unstable();
            inside.dedup();
            if inside.is_empty() {
                return Ok(SplitOutcome::NoSplit(format!(
                    "no requested position is strictly inside {range}"
                )));
            }
            SplitOutcome::Split(inside)
        }
        SplitAlgorithm::FlowOrQpsEquallyDivide => {
            if input.topics.len() <= 1 {
                return Ok(too_few_topics());
            }
            flow_or_qps(range, input, &hashes)
        }
    };
    // Keep only boundaries strictly inside the range (Java would fail later on such a boundary, e.g. when
    // every topic hashes to the range's lower end).
    Ok(match outcome {
        SplitOutcome::Split(points) => {
            let mut kept: Vec<u64> = points
                .into_iter()
                .filter(|p| *p > range.lower() && *p < range.upper())
                .collect();
            kept.sort_unstable();
            kept.dedup();
            if kept.is_empty() {
                SplitOutcome::NoSplit(format!(
                    "{algorithm} found no split point strictly inside {range}"
                ))
            } else {
                SplitOutcome::Split(kept)
            }
        }
        no => no,
    })
}

fn flow_or_qps(range: BundleRange, input: &SplitInput, hashes: &[u64]) -> SplitOutcome {
    let max_rate = input.max_msg_rate;
    let max_bytes = input.max_bandwidth_mbytes * MIB;
    let tolerance = 1.0 + input.flow_or_qps_difference_threshold_percentage / 100.0;
    // hash → (rate, throughput); topics that share a hash are one unit (Java's map would keep only the last).
    let mut by_hash: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    let (mut bundle_rate, mut bundle_bytes) = (0.0, 0.0);
    for (topic, hash) in input.topics.iter().zip(hashes) {
        let Some(t) = input.traffic.get(topic.full_name()) else {
            continue;
        };
        if t.msg_rate <= 0.0 && t.throughput <= 0.0 {
            continue;
        }
        let entry = by_hash.entry(*hash).or_insert((0.0, 0.0));
        entry.0 += t.msg_rate;
        entry.1 += t.throughput;
        bundle_rate += t.msg_rate;
        bundle_bytes += t.throughput;
    }
    if by_hash.len() < 2 {
        return SplitOutcome::NoSplit(format!(
            "flow_or_qps_equally_divide needs at least 2 topics with traffic in {range}, found {}",
            by_hash.len()
        ));
    }
    if bundle_rate < max_rate * tolerance && bundle_bytes < max_bytes * tolerance {
        return SplitOutcome::NoSplit(format!(
            "bundle traffic {bundle_rate:.1} msg/s and {bundle_bytes:.1} B/s is below {:.1} msg/s and {:.1} B/s (maxima + {}%)",
            max_rate * tolerance,
            max_bytes * tolerance,
            input.flow_or_qps_difference_threshold_percentage
        ));
    }
    let entries: Vec<(u64, (f64, f64))> = by_hash.into_iter().collect();
    let (mut acc_rate, mut acc_bytes) = entries[0].1;
    let mut points = Vec::new();
    for i in 1..entries.len() {
        let (hash, (rate, bytes)) = entries[i];
        if acc_rate > max_rate
            || acc_bytes > max_bytes
            || acc_rate + rate > max_rate
            || acc_bytes + bytes > max_bytes
        {
            let previous = entries[i - 1].0;
            points.push(previous + (hash - previous) / 2 + 1);
            acc_rate = rate;
            acc_bytes = bytes;
        } else {
            acc_rate += rate;
            acc_bytes += bytes;
        }
    }
    SplitOutcome::Split(points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::NamespaceBundles;

    fn topics_in(range: BundleRange, count: usize) -> Vec<TopicName> {
        (0..)
            .map(|i| TopicName::parse(&format!("persistent://t/ns/topic-{i}")).unwrap())
            .filter(|t| range.contains(topic_hash(t)))
            .take(count)
            .collect()
    }

    #[test]
    fn names_and_default_rule() {
        for a in SplitAlgorithm::ALL {
            assert_eq!(a.name().parse::<SplitAlgorithm>().unwrap(), a);
        }
        assert_eq!(
            "halves".parse::<SplitAlgorithm>().unwrap_err(),
            BundleError::UnknownAlgorithm("halves".into())
        );
        assert_eq!(
            SplitAlgorithm::parse_default("specified_positions_divide").unwrap_err(),
            BundleError::PositionsAlgorithmAsDefault
        );
        assert_eq!(
            SplitAlgorithm::parse_default("range_equally_divide").unwrap(),
            SplitAlgorithm::RangeEquallyDivide
        );
    }

    #[test]
    fn range_equally_divide_halves() {
        let out = split_bundle(
            BundleRange::FULL,
            SplitAlgorithm::RangeEquallyDivide,
            &SplitInput::default(),
        )
        .unwrap();
        assert_eq!(out, SplitOutcome::Split(vec![0x7fff_ffff]));
        let children: Vec<String> = out
            .children(BundleRange::FULL)
            .iter()
            .map(|r| r.to_string())
            .collect();
        assert_eq!(children, ["0x00000000_0x7fffffff", "0x7fffffff_0xffffffff"]);
        // The Pulsar docs' quick start: the full range, then its first half, gives 0x3fffffff.
        let first = BundleRange::parse("0x00000000_0x7fffffff").unwrap();
        let out = split_bundle(
            first,
            SplitAlgorithm::RangeEquallyDivide,
            &SplitInput::default(),
        )
        .unwrap();
        assert_eq!(out, SplitOutcome::Split(vec![0x3fff_ffff]));
        let tiny = BundleRange::new(5, 6).unwrap();
        assert!(matches!(
            split_bundle(
                tiny,
                SplitAlgorithm::RangeEquallyDivide,
                &SplitInput::default()
            )
            .unwrap(),
            SplitOutcome::NoSplit(_)
        ));
    }

    #[test]
    fn topic_count_splits_between_the_middle_hashes() {
        let range = BundleRange::FULL;
        let topics = topics_in(range, 5);
        let mut hashes: Vec<u64> = topics.iter().map(topic_hash).collect();
        hashes.sort_unstable();
        let expected = hashes[1] + (hashes[2] - hashes[1]) / 2;
        let input = SplitInput {
            topics: topics.clone(),
            ..Default::default()
        };
        let out = split_bundle(range, SplitAlgorithm::TopicCountEquallyDivide, &input).unwrap();
        assert_eq!(out, SplitOutcome::Split(vec![expected]));
        let children = out.children(range);
        let left = topics
            .iter()
            .filter(|t| children[0].contains(topic_hash(t)))
            .count();
        assert_eq!(left, 2);
        let one = SplitInput {
            topics: topics[..1].to_vec(),
            ..Default::default()
        };
        assert!(matches!(
            split_bundle(range, SplitAlgorithm::TopicCountEquallyDivide, &one).unwrap(),
            SplitOutcome::NoSplit(reason) if reason.contains("it has 1")
        ));
    }

    #[test]
    fn specified_positions_keep_those_inside() {
        let range = BundleRange::parse("0x40000000_0x80000000").unwrap();
        let input = SplitInput {
            topics: topics_in(range, 2),
            positions: vec![0x9000_0000, 0x6000_0000, 0x5000_0000, 0x4000_0000],
            ..Default::default()
        };
        let out = split_bundle(range, SplitAlgorithm::SpecifiedPositionsDivide, &input).unwrap();
        assert_eq!(out, SplitOutcome::Split(vec![0x5000_0000, 0x6000_0000]));
        assert_eq!(out.children(range).len(), 3);
        let none = SplitInput {
            positions: vec![0x9000_0000],
            ..input.clone()
        };
        assert!(matches!(
            split_bundle(range, SplitAlgorithm::SpecifiedPositionsDivide, &none).unwrap(),
            SplitOutcome::NoSplit(_)
        ));
        let missing = SplitInput {
            positions: vec![],
            ..input
        };
        assert_eq!(
            split_bundle(range, SplitAlgorithm::SpecifiedPositionsDivide, &missing),
            Err(BundleError::MissingPositions)
        );
    }

    #[test]
    fn topics_outside_the_bundle_are_refused() {
        let range = BundleRange::parse("0x00000000_0x40000000").unwrap();
        let outside = topics_in(BundleRange::parse("0x80000000_0xffffffff").unwrap(), 1);
        let input = SplitInput {
            topics: outside,
            ..Default::default()
        };
        let err = split_bundle(range, SplitAlgorithm::TopicCountEquallyDivide, &input).unwrap_err();
        assert!(
            err.to_string()
                .contains("outside bundle 0x00000000_0x40000000"),
            "{err}"
        );
    }

    #[test]
    fn flow_or_qps_cuts_runs_under_the_maxima() {
        let range = BundleRange::FULL;
        let topics = topics_in(range, 6);
        let mut sorted: Vec<(u64, TopicName)> =
            topics.iter().map(|t| (topic_hash(t), t.clone())).collect();
        sorted.sort_by_key(|(h, _)| *h);
        // 6 topics of 400 msg/s with a 1000 msg/s maximum: runs of 2, cut before topics 2 and 4.
        let traffic = topics
            .iter()
            .map(|t| {
                (
                    t.full_name().to_owned(),
                    TopicTraffic {
                        msg_rate: 400.0,
                        throughput: 1.0,
                    },
                )
            })
            .collect();
        let input = SplitInput {
            topics: topics.clone(),
            traffic,
            max_msg_rate: 1000.0,
            ..Default::default()
        };
        let out = split_bundle(range, SplitAlgorithm::FlowOrQpsEquallyDivide, &input).unwrap();
        let cut = |i: usize| sorted[i - 1].0 + (sorted[i].0 - sorted[i - 1].0) / 2 + 1;
        assert_eq!(out, SplitOutcome::Split(vec![cut(2), cut(4)]));
        // Under the maxima (+10 %): no split.
        let calm = SplitInput {
            max_msg_rate: 2200.0,
            ..input.clone()
        };
        assert!(matches!(
            split_bundle(range, SplitAlgorithm::FlowOrQpsEquallyDivide, &calm).unwrap(),
            SplitOutcome::NoSplit(reason) if reason.contains("below")
        ));
        // Topics without traffic do not count.
        let quiet = SplitInput {
            traffic: BTreeMap::new(),
            ..input
        };
        assert!(matches!(
            split_bundle(range, SplitAlgorithm::FlowOrQpsEquallyDivide, &quiet).unwrap(),
            SplitOutcome::NoSplit(reason) if reason.contains("found 0")
        ));
    }

    #[test]
    fn split_children_cover_the_parent() {
        let bundles = NamespaceBundles::initial(4).unwrap();
        let range = bundles.ranges().nth(3).unwrap();
        let out = split_bundle(
            range,
            SplitAlgorithm::RangeEquallyDivide,
            &SplitInput::default(),
        )
        .unwrap();
        let SplitOutcome::Split(points) = &out else {
            panic!("{out:?}")
        };
        let after = bundles.split(range, points).unwrap();
        assert_eq!(after.len(), 5);
        let children = out.children(range);
        assert_eq!(children[0].lower(), range.lower());
        assert_eq!(children[1].upper(), 0xffff_ffff);
        assert!(children[1].upper_closed());
    }
}
