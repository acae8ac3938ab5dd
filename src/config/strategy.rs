//! Strategy and load-manager names: Pulsar's Java class names and their short forms.

use std::fmt;

const EXT_STRATEGY: &str = "org.apache.pulsar.broker.loadbalance.extensions.strategy.";
/// BandShedder's class name: loadmgr's own package, so that no Pulsar class is implied.
const BAND_SHEDDER_CLASS: &str = "io.loadmgr.BandShedder";

fn short_name(text: &str) -> &str {
    text.trim().rsplit('.').next().unwrap_or(text)
}

/// A shedding strategy (`loadBalancerLoadSheddingStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShedderKind {
    /// PIP-364 pairwise score-gap shedder; also a placement strategy (default in 5.0).
    AvgShedder,
    /// Moving-average band around the cluster mean (default 2.10–4.x).
    ThresholdShedder,
    /// The original modular shedder: brokers above the overload threshold.
    OverloadShedder,
    /// Message-rate / throughput spread between the most and least loaded brokers.
    UniformLoadShedder,
    /// The extensible load manager's shedder (PIP-220), run on the modular data by loadmgr.
    TransferShedder,
    /// loadmgr's own: plans a cycle's moves at once into a band around the mean with a cost model learned
    /// from each broker's reports; also a placement strategy. Pulsar brokers do not know it.
    BandShedder,
}

impl ShedderKind {
    /// Every shedder, in the order tables show them.
    pub const ALL: [ShedderKind; 6] = [
        ShedderKind::AvgShedder,
        ShedderKind::ThresholdShedder,
        ShedderKind::OverloadShedder,
        ShedderKind::UniformLoadShedder,
        ShedderKind::TransferShedder,
        ShedderKind::BandShedder,
    ];

    /// The short name (`AvgShedder`).
    pub const fn name(self) -> &'static str {
        match self {
            ShedderKind::AvgShedder => "AvgShedder",
            ShedderKind::ThresholdShedder => "ThresholdShedder",
            ShedderKind::OverloadShedder => "OverloadShedder",
            ShedderKind::UniformLoadShedder => "UniformLoadShedder",
            ShedderKind::TransferShedder => "TransferShedder",
            ShedderKind::BandShedder => "BandShedder",
        }
    }

    /// The Java class name (BandShedder's names loadmgr's own package).
    pub const fn class_name(self) -> &'static str {
        match self {
            ShedderKind::AvgShedder => "org.apache.pulsar.broker.loadbalance.impl.AvgShedder",
            ShedderKind::ThresholdShedder => {
                "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"
            }
            ShedderKind::OverloadShedder => {
                "org.apache.pulsar.broker.loadbalance.impl.OverloadShedder"
            }
            ShedderKind::UniformLoadShedder => {
                "org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder"
            }
            ShedderKind::TransferShedder => {
                "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder"
            }
            ShedderKind::BandShedder => BAND_SHEDDER_CLASS,
        }
    }

    /// Accepts the full class name (in its Pulsar package) or the short name, case-insensitively for the
    /// short form.
    pub fn from_class_name(text: &str) -> Option<Self> {
        let text = text.trim();
        Self::ALL.into_iter().find(|k| {
            k.class_name() == text || (!text.contains('.') && k.name().eq_ignore_ascii_case(text))
        })
    }

    /// The default placement that goes with this shedder when the placement key is left unset (5.0 rule).
    pub const fn default_placement(self) -> PlacementKind {
        match self {
            ShedderKind::AvgShedder => PlacementKind::AvgShedder,
            ShedderKind::BandShedder => PlacementKind::BandShedder,
            ShedderKind::TransferShedder => PlacementKind::LeastResourceUsageWithWeight,
            _ => PlacementKind::LeastLongTermMessageRate,
        }
    }

    pub(crate) fn expected() -> String {
        format!(
            "a shedding strategy: {} (or the short names {})",
            Self::ALL.map(|k| k.class_name()).join(", "),
            Self::ALL.map(|k| k.name()).join(", ")
        )
    }
}

impl fmt::Display for ShedderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A placement strategy (`loadBalancerLoadPlacementStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PlacementKind {
    /// AvgShedder's placement: its planned destination, else random among eligible brokers.
    AvgShedder,
    /// Least long-term message rate (default placement 1.x–4.x).
    LeastLongTermMessageRate,
    /// Least weighted resource usage within a band (PIP-182).
    LeastResourceUsageWithWeight,
    /// BandShedder's placement: the shedder's binding plan when shedding, else the least predicted score.
    BandShedder,
}

impl PlacementKind {
    /// Every placement strategy.
    pub const ALL: [PlacementKind; 4] = [
        PlacementKind::AvgShedder,
        PlacementKind::LeastLongTermMessageRate,
        PlacementKind::LeastResourceUsageWithWeight,
        PlacementKind::BandShedder,
    ];

    /// The short name.
    pub const fn name(self) -> &'static str {
        match self {
            PlacementKind::AvgShedder => "AvgShedder",
            PlacementKind::LeastLongTermMessageRate => "LeastLongTermMessageRate",
            PlacementKind::LeastResourceUsageWithWeight => "LeastResourceUsageWithWeight",
            PlacementKind::BandShedder => "BandShedder",
        }
    }

    /// The Java class name (modular package); BandShedder's names loadmgr's own package.
    pub const fn class_name(self) -> &'static str {
        match self {
            PlacementKind::AvgShedder => "org.apache.pulsar.broker.loadbalance.impl.AvgShedder",
            PlacementKind::LeastLongTermMessageRate => {
                "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate"
            }
            PlacementKind::LeastResourceUsageWithWeight => {
                "org.apache.pulsar.broker.loadbalance.impl.LeastResourceUsageWithWeight"
            }
            PlacementKind::BandShedder => BAND_SHEDDER_CLASS,
        }
    }

    /// Accepts the modular class name, the extensible package's `LeastResourceUsageWithWeight`, or the
    /// short name.
    pub fn from_class_name(text: &str) -> Option<Self> {
        let text = text.trim();
        if text == format!("{EXT_STRATEGY}LeastResourceUsageWithWeight") {
            return Some(PlacementKind::LeastResourceUsageWithWeight);
        }
        Self::ALL.into_iter().find(|k| {
            k.class_name() == text || (!text.contains('.') && k.name().eq_ignore_ascii_case(text))
        })
    }

    pub(crate) fn expected() -> String {
        format!(
            "a placement strategy: {} (or the short names {})",
            Self::ALL.map(|k| k.class_name()).join(", "),
            Self::ALL.map(|k| k.name()).join(", ")
        )
    }
}

impl fmt::Display for PlacementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The load manager implementation (`loadManagerClassName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LoadManagerKind {
    /// `ModularLoadManagerImpl`: what loadmgr implements.
    Modular,
    /// `ExtensibleLoadManagerImpl`: loadmgr runs TransferShedder and the extensible placement.
    Extensible,
    /// `SimpleLoadManagerImpl`: not implemented by loadmgr; refused.
    Simple,
}

impl LoadManagerKind {
    const ALL: [LoadManagerKind; 3] = [
        LoadManagerKind::Modular,
        LoadManagerKind::Extensible,
        LoadManagerKind::Simple,
    ];

    /// The Java class name.
    pub const fn class_name(self) -> &'static str {
        match self {
            LoadManagerKind::Modular => {
                "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
            }
            LoadManagerKind::Extensible => {
                "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
            }
            LoadManagerKind::Simple => {
                "org.apache.pulsar.broker.loadbalance.impl.SimpleLoadManagerImpl"
            }
        }
    }

    /// Accepts the class name or its short form.
    pub fn from_class_name(text: &str) -> Option<Self> {
        let text = text.trim();
        Self::ALL.into_iter().find(|k| {
            k.class_name() == text
                || (!text.contains('.') && short_name(k.class_name()).eq_ignore_ascii_case(text))
        })
    }

    pub(crate) fn expected() -> String {
        format!(
            "a load manager class: {}",
            Self::ALL.map(|k| k.class_name()).join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_and_short_names() {
        for k in ShedderKind::ALL {
            assert_eq!(ShedderKind::from_class_name(k.class_name()), Some(k));
            assert_eq!(ShedderKind::from_class_name(k.name()), Some(k));
        }
        assert_eq!(
            ShedderKind::from_class_name("avgshedder"),
            Some(ShedderKind::AvgShedder)
        );
        assert_eq!(ShedderKind::from_class_name("com.example.AvgShedder"), None);
        assert_eq!(ShedderKind::from_class_name("DeviationShedder"), None);
        for k in PlacementKind::ALL {
            assert_eq!(PlacementKind::from_class_name(k.class_name()), Some(k));
            assert_eq!(PlacementKind::from_class_name(k.name()), Some(k));
        }
        assert_eq!(
            PlacementKind::from_class_name("org.apache.pulsar.broker.loadbalance.extensions.strategy.LeastResourceUsageWithWeight"),
            Some(PlacementKind::LeastResourceUsageWithWeight)
        );
        assert_eq!(
            LoadManagerKind::from_class_name("ModularLoadManagerImpl"),
            Some(LoadManagerKind::Modular)
        );
        assert!(ShedderKind::expected().contains("ThresholdShedder"));
    }
}
