//! Namespace bundles: hash ranges, their names, topic → bundle lookup and bundle splitting, with Pulsar's
//! exact arithmetic.
//!
//! The hash space is `[0x00000000, 0xffffffff]`. A namespace's sorted boundaries `p0 < p1 < … < pk` make
//! bundles `[p_i, p_{i+1})`, the last one closed at `0xffffffff`. A topic belongs to the bundle containing the
//! CRC32 (IEEE, as `java.util.zip.CRC32`) of its full name read as an unsigned number. Values are kept in
//! `u64` like Java's `long`, always within `0..=0xffffffff`.
//!
//! Differences from Java, fixed on purpose: a hash of exactly `0xffffffff` belongs to the last bundle (Java's
//! binary search indexes one past the end and fails); split algorithms that would return a boundary outside
//! the bundle report "no split" instead of failing later.

mod names;
mod split;

use std::fmt;
use std::str::FromStr;

pub use names::{NamespaceName, TopicDomain, TopicName};
pub use split::{split_bundle, SplitAlgorithm, SplitInput, SplitOutcome, TopicTraffic};

use crate::model::BundlesData;

/// Lowest hash value (`FULL_LOWER_BOUND`).
pub const FULL_LOWER_BOUND: u64 = 0x0000_0000;
/// Highest hash value (`FULL_UPPER_BOUND`), the closed top of the last bundle.
pub const FULL_UPPER_BOUND: u64 = 0xffff_ffff;

/// Bad input to the bundle functions. Every variant names the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    /// A namespace or topic name that Pulsar would reject.
    #[error("invalid {kind} name '{value}': {reason}")]
    InvalidName {
        /// `namespace` or `topic`.
        kind: &'static str,
        /// The text given.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// A bundle count of zero (or out of range).
    #[error("invalid number of bundles {0}: must be between 1 and 2^32")]
    InvalidBundleCount(u64),
    /// A hash or boundary that is not a number in `0..=0xffffffff`.
    #[error("invalid hash value '{value}': {reason}")]
    InvalidHash {
        /// The text given.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// A range that is malformed, empty or inverted.
    #[error("invalid bundle range '{value}': {reason}")]
    InvalidRange {
        /// The text given.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// Boundaries that do not form a partition of the hash space.
    #[error("invalid bundle boundaries: {0}")]
    InvalidBoundaries(String),
    /// A split boundary outside the bundle.
    #[error("split boundary 0x{boundary:08x} is not strictly inside bundle {range}")]
    BoundaryOutsideRange {
        /// The boundary.
        boundary: u64,
        /// The bundle being split.
        range: BundleRange,
    },
    /// A topic given for a split that does not hash into the bundle.
    #[error("topic '{topic}' hashes to 0x{hash:08x}, outside bundle {range}")]
    TopicOutsideRange {
        /// The topic.
        topic: String,
        /// Its hash.
        hash: u64,
        /// The bundle.
        range: BundleRange,
    },
    /// A split algorithm name Pulsar does not know.
    #[error("unknown split algorithm '{0}'; expected one of range_equally_divide, topic_count_equally_divide, specified_positions_divide, flow_or_qps_equally_divide")]
    UnknownAlgorithm(String),
    /// `specified_positions_divide` configured as the default algorithm.
    #[error("specified_positions_divide needs positions from the caller and cannot be the default split algorithm")]
    PositionsAlgorithmAsDefault,
    /// `specified_positions_divide` called without positions.
    #[error("specified_positions_divide needs at least one --position")]
    MissingPositions,
}

/// Parses a hash or boundary the way Java's `Long.decode` does (`0x`/`0X`/`#` hex, leading `0` octal,
/// otherwise decimal) and checks that it is within `0..=0xffffffff`.
pub fn parse_hash(text: &str) -> Result<u64, BundleError> {
    let invalid = |reason: &str| BundleError::InvalidHash {
        value: text.to_owned(),
        reason: reason.to_owned(),
    };
    let t = text.trim();
    let (digits, radix) = if let Some(h) = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .or_else(|| t.strip_prefix('#'))
    {
        (h, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        (&t[1..], 8)
    } else {
        (t, 10)
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return Err(invalid("expected an unsigned number such as 0x7fffffff"));
    }
    let value = u64::from_str_radix(digits, radix)
        .map_err(|_| invalid("expected an unsigned number such as 0x7fffffff"))?;
    if value > FULL_UPPER_BOUND {
        return Err(invalid("above 0xffffffff"));
    }
    Ok(value)
}

/// Formats a boundary as Pulsar does: `0x%08x`.
pub fn format_hash(value: u64) -> String {
    format!("0x{value:08x}")
}

/// The hash of a topic: CRC32 (IEEE) of its full name as UTF-8, unsigned.
pub fn topic_hash(topic: &TopicName) -> u64 {
    crc32fast::hash(topic.full_name().as_bytes()) as u64
}

/// A bundle's hash range `[lower, upper)`, or `[lower, 0xffffffff]` for the last bundle of a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BundleRange {
    lower: u64,
    upper: u64,
}

impl BundleRange {
    /// The whole hash space, `0x00000000_0xffffffff`.
    pub const FULL: BundleRange = BundleRange {
        lower: FULL_LOWER_BOUND,
        upper: FULL_UPPER_BOUND,
    };

    /// A range; `lower < upper <= 0xffffffff` is required.
    pub fn new(lower: u64, upper: u64) -> Result<Self, BundleError> {
        if upper > FULL_UPPER_BOUND || lower >= upper {
            return Err(BundleError::InvalidRange {
                value: format!("{}_{}", format_hash(lower), format_hash(upper)),
                reason: if upper > FULL_UPPER_BOUND {
                    "the upper bound is above 0xffffffff".into()
                } else {
                    "the lower bound must be below the upper bound".into()
                },
            });
        }
        Ok(Self { lower, upper })
    }

    /// Parses `0xLLLLLLLL_0xUUUUUUUU` (either part in any `Long.decode` spelling). The canonical form Pulsar
    /// writes is read without the general path's trimming and radix detection: a leader scans a namespace's
    /// bundle keys at every placement.
    pub fn parse(text: &str) -> Result<Self, BundleError> {
        match Self::parse_canonical(text) {
            Some(range) => Ok(range),
            None => Self::parse_any(text),
        }
    }

    /// `0x%08x_0x%08x` with `lower < upper`, else `None`.
    fn parse_canonical(text: &str) -> Option<Self> {
        let hex = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_hexdigit())
                .then(|| u64::from_str_radix(s, 16).ok())
                .flatten()
        };
        if text.len() != 21 || !text.starts_with("0x") || text.get(10..13) != Some("_0x") {
            return None;
        }
        let (lower, upper) = (hex(text.get(2..10)?)?, hex(text.get(13..21)?)?);
        (lower < upper).then_some(Self { lower, upper })
    }

    /// Any spelling [`Self::parse`] accepts, with the error naming what was wrong.
    fn parse_any(text: &str) -> Result<Self, BundleError> {
        let invalid = |reason: String| BundleError::InvalidRange {
            value: text.to_owned(),
            reason,
        };
        let (lower, upper) = text
            .split_once('_')
            .ok_or_else(|| invalid("expected LOWER_UPPER, e.g. 0x00000000_0x40000000".into()))?;
        let lower = parse_hash(lower).map_err(|e| invalid(e.to_string()))?;
        let upper = parse_hash(upper).map_err(|e| invalid(e.to_string()))?;
        if lower >= upper {
            return Err(invalid(
                "the lower bound must be below the upper bound".into(),
            ));
        }
        Ok(Self { lower, upper })
    }

    /// Inclusive lower end.
    pub fn lower(&self) -> u64 {
        self.lower
    }

    /// Upper end: exclusive, except `0xffffffff`, which is inclusive.
    pub fn upper(&self) -> u64 {
        self.upper
    }

    /// Whether the upper end is closed (the range ends at `0xffffffff`).
    pub fn upper_closed(&self) -> bool {
        self.upper == FULL_UPPER_BOUND
    }

    /// Whether `hash` falls in the range.
    pub fn contains(&self, hash: u64) -> bool {
        hash >= self.lower && (hash < self.upper || (self.upper_closed() && hash == self.upper))
    }

    /// Whether a split can produce two non-empty children (`upper − lower > 1`).
    pub fn splittable(&self) -> bool {
        self.upper - self.lower > 1
    }

    /// Whether the two ranges share a hash (a split parent and its child do; two bundles of one namespace's
    /// current list never do).
    pub fn overlaps(&self, other: &BundleRange) -> bool {
        let end = |r: &BundleRange| {
            if r.upper_closed() {
                r.upper + 1
            } else {
                r.upper
            }
        };
        self.lower < end(other) && other.lower < end(self)
    }
}

impl fmt::Display for BundleRange {
    /// `0x%08x_0x%08x`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:08x}_0x{:08x}", self.lower, self.upper)
    }
}

impl FromStr for BundleRange {
    type Err = BundleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A bundle: namespace plus range, named `tenant/ns/0xLLLLLLLL_0xUUUUUUUU`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BundleName {
    namespace: NamespaceName,
    range: BundleRange,
}

impl BundleName {
    /// A bundle of `namespace`.
    pub fn new(namespace: NamespaceName, range: BundleRange) -> Self {
        Self { namespace, range }
    }

    /// Parses a full bundle name: the range is the text after the last `/`, the namespace the text before.
    pub fn parse(text: &str) -> Result<Self, BundleError> {
        let (ns, range) = text
            .rsplit_once('/')
            .ok_or_else(|| BundleError::InvalidRange {
                value: text.to_owned(),
                reason: "expected <namespace>/<0xLLLLLLLL_0xUUUUUUUU>".into(),
            })?;
        Ok(Self {
            namespace: NamespaceName::parse(ns)?,
            range: BundleRange::parse(range)?,
        })
    }

    /// The namespace.
    pub fn namespace(&self) -> &NamespaceName {
        &self.namespace
    }

    /// The hash range.
    pub fn range(&self) -> BundleRange {
        self.range
    }
}

impl fmt::Display for BundleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.range)
    }
}

impl FromStr for BundleName {
    type Err = BundleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// The bundles of one namespace: validated sorted boundaries from `0x00000000` to `0xffffffff`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceBundles {
    boundaries: Vec<u64>,
}

impl NamespaceBundles {
    /// Pulsar's initial bundles for `count` (`PoliciesUtil.getBundles`): step `floor(2^32 / count)`,
    /// boundaries `0, step, …, (count−1)·step`, then `0xffffffff`.
    pub fn initial(count: u64) -> Result<Self, BundleError> {
        if count == 0 || count > (1u64 << 32) {
            return Err(BundleError::InvalidBundleCount(count));
        }
        let step = (1u64 << 32) / count;
        let mut boundaries: Vec<u64> = (0..count).map(|i| i * step).collect();
        boundaries.push(FULL_UPPER_BOUND);
        Ok(Self { boundaries })
    }

    /// One bundle covering the whole space (a namespace without bundle policies).
    pub fn single() -> Self {
        Self {
            boundaries: vec![FULL_LOWER_BOUND, FULL_UPPER_BOUND],
        }
    }

    /// Validates boundaries: at least two, strictly increasing, starting at 0 and ending at `0xffffffff`.
    pub fn from_boundaries(boundaries: Vec<u64>) -> Result<Self, BundleError> {
        if boundaries.len() < 2 {
            return Err(BundleError::InvalidBoundaries(format!(
                "need at least 2 boundaries, got {}",
                boundaries.len()
            )));
        }
        if boundaries[0] != FULL_LOWER_BOUND {
            return Err(BundleError::InvalidBoundaries(format!(
                "the first boundary must be 0x00000000, got {}",
                format_hash(boundaries[0])
            )));
        }
        let last = *boundaries.last().expect("len >= 2");
        if last != FULL_UPPER_BOUND {
            return Err(BundleError::InvalidBoundaries(format!(
                "the last boundary must be 0xffffffff, got {}",
                format_hash(last)
            )));
        }
        if let Some(w) = boundaries.windows(2).find(|w| w[0] >= w[1]) {
            return Err(BundleError::InvalidBoundaries(format!(
                "boundaries must increase strictly: {} is followed by {}",
                format_hash(w[0]),
                format_hash(w[1])
            )));
        }
        Ok(Self { boundaries })
    }

    /// Reads Pulsar's `BundlesData` (string boundaries, `numBundles` checked against them).
    pub fn from_bundles_data(data: &BundlesData) -> Result<Self, BundleError> {
        let boundaries = data
            .boundaries
            .iter()
            .map(|b| parse_hash(b))
            .collect::<Result<Vec<_>, _>>()?;
        let bundles = Self::from_boundaries(boundaries)?;
        if data.num_bundles != 0 && data.num_bundles as usize != bundles.len() {
            return Err(BundleError::InvalidBoundaries(format!(
                "numBundles is {} but there are {} boundaries ({} bundles)",
                data.num_bundles,
                bundles.boundaries.len(),
                bundles.len()
            )));
        }
        Ok(bundles)
    }

    /// Pulsar's `BundlesData`: `0x%08x` strings and the count.
    pub fn to_bundles_data(&self) -> BundlesData {
        BundlesData {
            boundaries: self.boundaries.iter().map(|b| format_hash(*b)).collect(),
            num_bundles: self.len() as i32,
        }
    }

    /// The boundaries.
    pub fn boundaries(&self) -> &[u64] {
        &self.boundaries
    }

    /// Number of bundles.
    pub fn len(&self) -> usize {
        self.boundaries.len() - 1
    }

    /// Never true: a namespace has at least one bundle.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bundles, in hash order.
    pub fn ranges(&self) -> impl Iterator<Item = BundleRange> + '_ {
        self.boundaries.windows(2).map(|w| BundleRange {
            lower: w[0],
            upper: w[1],
        })
    }

    /// The bundle containing `hash`: binary search; an exact boundary hit starts that bundle, and
    /// `0xffffffff` belongs to the last bundle.
    pub fn find(&self, hash: u64) -> BundleRange {
        let hash = hash.min(FULL_UPPER_BOUND);
        let index = match self.boundaries.binary_search(&hash) {
            Ok(i) => i.min(self.len() - 1),
            Err(insertion) => insertion - 1,
        };
        BundleRange {
            lower: self.boundaries[index],
            upper: self.boundaries[index + 1],
        }
    }

    /// The bundle a topic belongs to.
    pub fn find_topic(&self, topic: &TopicName) -> BundleRange {
        self.find(topic_hash(topic))
    }

    /// Whether `range` is one of these bundles.
    pub fn contains_range(&self, range: BundleRange) -> bool {
        self.boundaries
            .binary_search(&range.lower)
            .is_ok_and(|i| self.boundaries.get(i + 1) == Some(&range.upper))
    }

    /// Replaces `range` by its children at `split_points` (sorted, strictly inside the range).
    pub fn split(&self, range: BundleRange, split_points: &[u64]) -> Result<Self, BundleError> {
        if !self.contains_range(range) {
            return Err(BundleError::InvalidRange {
                value: range.to_string(),
                reason: "not a bundle of this namespace".into(),
            });
        }
        for p in split_points {
            if *p <= range.lower || *p >= range.upper {
                return Err(BundleError::BoundaryOutsideRange {
                    boundary: *p,
                    range,
                });
            }
        }
        let mut boundaries = self.boundaries.clone();
        boundaries.extend_from_slice(split_points);
        boundaries.sort_unstable();
        boundaries.dedup();
        Self::from_boundaries(boundaries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_parents_and_children_overlap_neighbours_do_not() {
        let r = |a, b| BundleRange::new(a, b).unwrap();
        assert!(r(0, 0x8000_0000).overlaps(&r(0, 0xffff_ffff)));
        assert!(!r(0, 0x8000_0000).overlaps(&r(0x8000_0000, 0xffff_ffff)));
        assert!(r(0x4000_0000, 0x8000_0000).overlaps(&r(0x7000_0000, 0x9000_0000)));
        // The last range's upper bound is inclusive.
        assert!(r(0xffff_fff0, 0xffff_ffff).overlaps(&r(0xffff_fffe, 0xffff_ffff)));
        assert!(r(0xffff_fffe, 0xffff_ffff).overlaps(&r(0xffff_fff0, 0xffff_ffff)));
    }

    #[test]
    fn the_canonical_form_reads_as_the_general_parser_reads_it() {
        for text in [
            "0x00000000_0x40000000",
            "0xc0000000_0xffffffff",
            "0x7FFFFFFF_0x80000000",
            "0x40000000_0x00000000",
            "0x4000000g_0x50000000",
            "0x40000000-0x50000000",
            "1073741824_0x50000000",
            "0x1_0x2",
            "",
        ] {
            assert_eq!(
                BundleRange::parse(text),
                BundleRange::parse_any(text),
                "{text}"
            );
        }
    }

    fn hexes(b: &NamespaceBundles) -> Vec<String> {
        b.to_bundles_data().boundaries
    }

    #[test]
    fn initial_boundaries_match_pulsar() {
        assert_eq!(
            hexes(&NamespaceBundles::initial(1).unwrap()),
            ["0x00000000", "0xffffffff"]
        );
        assert_eq!(
            hexes(&NamespaceBundles::initial(3).unwrap()),
            ["0x00000000", "0x55555555", "0xaaaaaaaa", "0xffffffff"]
        );
        assert_eq!(
            hexes(&NamespaceBundles::initial(4).unwrap()),
            [
                "0x00000000",
                "0x40000000",
                "0x80000000",
                "0xc0000000",
                "0xffffffff"
            ]
        );
        assert_eq!(
            hexes(&NamespaceBundles::initial(5).unwrap()),
            [
                "0x00000000",
                "0x33333333",
                "0x66666666",
                "0x99999999",
                "0xcccccccc",
                "0xffffffff"
            ]
        );
        let sixteen = NamespaceBundles::initial(16).unwrap();
        assert_eq!(sixteen.boundaries()[15], 0xf000_0000);
        assert_eq!(sixteen.len(), 16);
        assert_eq!(
            NamespaceBundles::initial(0),
            Err(BundleError::InvalidBundleCount(0))
        );
        let data = NamespaceBundles::initial(4).unwrap().to_bundles_data();
        assert_eq!(data.num_bundles, 4);
    }

    #[test]
    fn topic_lookup_uses_unsigned_crc32() {
        let bundles = NamespaceBundles::initial(4).unwrap();
        let t = TopicName::parse("persistent://public/default/my-topic").unwrap();
        assert_eq!(topic_hash(&t), 0x2bad_45f7);
        assert_eq!(bundles.find_topic(&t).to_string(), "0x00000000_0x40000000");
        let p0 = TopicName::parse("persistent://public/default/my-topic-partition-0").unwrap();
        let p1 = TopicName::parse("persistent://public/default/my-topic-partition-1").unwrap();
        assert_eq!(topic_hash(&p0), 0x3d4b_4235);
        assert_eq!(topic_hash(&p1), 0x4a4c_72a3);
        assert_eq!(bundles.find_topic(&p1).to_string(), "0x40000000_0x80000000");
        // A short name hashes as its full name.
        let short = TopicName::parse("my-topic").unwrap();
        assert_eq!(topic_hash(&short), 0x2bad_45f7);
    }

    #[test]
    fn boundary_hits_and_the_top_hash() {
        let bundles = NamespaceBundles::initial(4).unwrap();
        assert_eq!(bundles.find(0).to_string(), "0x00000000_0x40000000");
        assert_eq!(
            bundles.find(0x4000_0000).to_string(),
            "0x40000000_0x80000000"
        );
        assert_eq!(
            bundles.find(0x3fff_ffff).to_string(),
            "0x00000000_0x40000000"
        );
        // Java indexes past the end here; the hash belongs to the closed last bundle.
        assert_eq!(
            bundles.find(0xffff_ffff).to_string(),
            "0xc0000000_0xffffffff"
        );
        assert_eq!(
            bundles.find(0xffff_fffe).to_string(),
            "0xc0000000_0xffffffff"
        );
    }

    #[test]
    fn ranges_parse_and_validate() {
        let r = BundleRange::parse("0x40000000_0x80000000").unwrap();
        assert_eq!(
            (r.lower(), r.upper(), r.upper_closed()),
            (0x4000_0000, 0x8000_0000, false)
        );
        assert!(r.contains(0x4000_0000) && !r.contains(0x8000_0000));
        assert!(BundleRange::FULL.contains(0xffff_ffff));
        assert_eq!(
            BundleRange::parse("0X10_#20").unwrap().to_string(),
            "0x00000010_0x00000020"
        );
        assert_eq!(
            BundleRange::parse("16_040").unwrap().to_string(),
            "0x00000010_0x00000020"
        );
        for bad in [
            "0x80000000_0x40000000",
            "0x1_0x1",
            "0x0",
            "zz_0x1",
            "0x0_0x100000000",
            "-1_0x2",
            "_0x1",
        ] {
            let err = BundleRange::parse(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{bad}: {err}");
        }
        let name = BundleName::parse("public/default/0x00000000_0x40000000").unwrap();
        assert_eq!(name.namespace().to_string(), "public/default");
        assert_eq!(name.to_string(), "public/default/0x00000000_0x40000000");
        let v1 = BundleName::parse("pulsar/c1/10.0.0.1:8080/0x00000000_0xffffffff").unwrap();
        assert!(v1.namespace().is_v1());
    }

    #[test]
    fn boundaries_are_validated() {
        let ok = NamespaceBundles::from_boundaries(vec![0, 0x8000_0000, FULL_UPPER_BOUND]).unwrap();
        assert_eq!(ok.len(), 2);
        assert!(NamespaceBundles::from_boundaries(vec![0]).is_err());
        assert!(NamespaceBundles::from_boundaries(vec![1, FULL_UPPER_BOUND]).is_err());
        assert!(NamespaceBundles::from_boundaries(vec![0, 0x10]).is_err());
        let err =
            NamespaceBundles::from_boundaries(vec![0, 0x20, 0x20, FULL_UPPER_BOUND]).unwrap_err();
        assert!(
            err.to_string()
                .contains("0x00000020 is followed by 0x00000020"),
            "{err}"
        );
        let data = BundlesData {
            boundaries: vec!["0x00000000".into(), "0xffffffff".into()],
            num_bundles: 2,
        };
        assert!(NamespaceBundles::from_bundles_data(&data)
            .unwrap_err()
            .to_string()
            .contains("numBundles is 2"));
    }

    #[test]
    fn splitting_replaces_one_bundle() {
        let b = NamespaceBundles::initial(2).unwrap();
        let first = b.ranges().next().unwrap();
        let split = b.split(first, &[0x4000_0000]).unwrap();
        assert_eq!(
            hexes(&split),
            ["0x00000000", "0x40000000", "0x80000000", "0xffffffff"]
        );
        let err = b.split(first, &[0x9000_0000]).unwrap_err();
        assert_eq!(
            err,
            BundleError::BoundaryOutsideRange {
                boundary: 0x9000_0000,
                range: first
            }
        );
        let not_ours = BundleRange::new(0, 0x10).unwrap();
        assert!(b.split(not_ours, &[0x8]).is_err());
    }
}
