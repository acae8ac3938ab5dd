//! Plans: what a decision pass wants done, each entry with the reason an operator can check.
//!
//! JSON shape (extra fields are additions; the named ones keep their names):
//! `{"unloads":[{"bundle","source","destination","reason",...}],"assignments":[...],
//! "splits":[{"bundle","boundaries","unloadChildren","reason",...}],"skipped":[{"subject","reason","dropped"?}]}`.
//!
//! A skipped entry whose subject is a shedder's candidate that the cycle's checks or placement dropped carries
//! `dropped` ([`Dropped`], e.g. `"currentOwner"`); other skipped entries (brokers the strategy left alone,
//! cluster-wide reasons, split candidates) have none.

use serde::Serialize;

/// Move `bundle` off `source`; `destination` is the broker placement chose (the one-shot destination handed
/// to the unloading broker), absent when no broker could be chosen ahead of time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnloadDecision {
    /// Full bundle name.
    pub bundle: String,
    /// Current owner.
    pub source: String,
    /// Planned destination (never equal to `source`).
    pub destination: Option<String>,
    /// Why: strategy, numbers compared, thresholds; then how the destination was chosen.
    pub reason: String,
    /// The shedding strategy that proposed the move.
    pub strategy: String,
    /// 1-based shedding cycle that produced it (always 1 outside `explain --cycles`).
    pub cycle: u32,
}

/// Assign an unowned bundle to `broker`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    /// Full bundle name.
    pub bundle: String,
    /// Chosen broker.
    pub broker: String,
    /// Why this broker.
    pub reason: String,
}

/// Split `bundle` (owned by `broker`) at `boundaries` (`0x%08x`, sorted; empty when the owner must compute
/// them from its topic list at split time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SplitDecision {
    /// Full bundle name.
    pub bundle: String,
    /// Owner that reported it.
    pub broker: String,
    /// Split points strictly inside the bundle's range.
    pub boundaries: Vec<String>,
    /// The split algorithm.
    pub algorithm: String,
    /// Whether the children are unloaded right after the split.
    pub unload_children: bool,
    /// Which threshold was exceeded, with the numbers.
    pub reason: String,
}

/// Which step of the shedding cycle dropped a shedder's candidate (in the order the cycle checks them).
/// Serialised camelCase (`"excludedNamespace"`, …, `"currentOwner"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Dropped {
    /// Its namespace is in `loadBalancerSheddingExcludedNamespaces`.
    ExcludedNamespace,
    /// It was unloaded within `loadBalancerSheddingGracePeriodMinutes`.
    GracePeriod,
    /// The strategy proposed it again in the same pass; it is planned once, at its first proposal.
    Duplicate,
    /// The namespace policies allow no broker other than its owner.
    NoOtherBroker,
    /// The anti-affinity rule keeps it on its owner.
    AntiAffinity,
    /// Placement found no destination.
    NoDestination,
    /// Placement chose the current owner.
    CurrentOwner,
}

impl Dropped {
    /// The name in JSON and in `explain`'s text.
    pub fn name(self) -> &'static str {
        match self {
            Dropped::ExcludedNamespace => "excludedNamespace",
            Dropped::GracePeriod => "gracePeriod",
            Dropped::Duplicate => "duplicate",
            Dropped::NoOtherBroker => "noOtherBroker",
            Dropped::AntiAffinity => "antiAffinity",
            Dropped::NoDestination => "noDestination",
            Dropped::CurrentOwner => "currentOwner",
        }
    }

    /// Whether placement dropped it (no destination, or the current owner), rather than a check before it.
    pub fn by_placement(self) -> bool {
        matches!(self, Dropped::NoDestination | Dropped::CurrentOwner)
    }
}

/// A candidate that was considered and not acted on, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    /// A bundle, a broker, a broker pair (`a -> b`) or `cluster`.
    pub subject: String,
    /// Why nothing was done, e.g. `no unload: gap 12.0 < 15`.
    pub reason: String,
    /// Set exactly when `subject` is a bundle a shedder proposed and the cycle dropped: the step that dropped
    /// it. Absent from JSON otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<Dropped>,
}

impl Skipped {
    /// A skipped entry that is not a dropped shedder candidate.
    pub fn new(subject: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            reason: reason.into(),
            dropped: None,
        }
    }

    /// A shedder's candidate `bundle` that the cycle dropped at step `dropped`.
    pub fn dropped(bundle: impl Into<String>, dropped: Dropped, reason: impl Into<String>) -> Self {
        Self {
            subject: bundle.into(),
            reason: reason.into(),
            dropped: Some(dropped),
        }
    }
}

/// A shedder's candidate as the strategy proposed it, before the cycle's checks and placement, with what the
/// cycle did with it (`loadmgr explain --candidates`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShedderCandidate {
    /// Full bundle name.
    pub bundle: String,
    /// Its owner.
    pub source: String,
    /// The destination the strategy planned (AvgShedder's plan, TransferShedder's transfer target), if any.
    pub planned: Option<String>,
    /// Whether `planned` is final (TransferShedder ran the filters for it) rather than a plan placement may
    /// replace.
    pub binding: bool,
    /// The strategy's reason.
    pub reason: String,
    /// 1-based shedding cycle that proposed it.
    pub cycle: u32,
    /// `null` when the cycle kept it (it is in `unloads`), else the step that dropped it (see [`Skipped`]).
    pub dropped: Option<Dropped>,
}

/// A strategy's prediction for one broker: its score now and after the plan's moves.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerPrediction {
    /// Broker id.
    pub broker: String,
    /// Score now as the strategy's model sees it, points (0–100).
    pub score_now: f64,
    /// Predicted score once the plan's moves are done, points.
    pub score_after: f64,
    /// Moves planned off the broker.
    pub moves_out: u32,
    /// Moves planned onto the broker.
    pub moves_in: u32,
}

/// Everything one decision pass wants done.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Bundles to unload, in decision order.
    pub unloads: Vec<UnloadDecision>,
    /// Unowned bundles to assign.
    pub assignments: Vec<Assignment>,
    /// Bundles to split.
    pub splits: Vec<SplitDecision>,
    /// Considered and not acted on.
    pub skipped: Vec<Skipped>,
    /// The shedding strategy's predicted scores before and after (BandShedder; empty for the others).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prediction: Vec<BrokerPrediction>,
}

impl Plan {
    /// Whether the plan asks for nothing (skipped entries do not count).
    pub fn is_empty(&self) -> bool {
        self.unloads.is_empty() && self.assignments.is_empty() && self.splits.is_empty()
    }

    /// Appends another plan's entries.
    pub fn extend(&mut self, other: Plan) {
        self.unloads.extend(other.unloads);
        self.assignments.extend(other.assignments);
        self.splits.extend(other.splits);
        self.skipped.extend(other.skipped);
        if !other.prediction.is_empty() {
            self.prediction = other.prediction;
        }
    }

    /// Compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plans serialise")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_the_documented_names() {
        let plan = Plan {
            unloads: vec![UnloadDecision {
                bundle: "t/n/0x00000000_0xffffffff".into(),
                source: "b1:8080".into(),
                destination: Some("b2:8080".into()),
                reason: "r".into(),
                strategy: "AvgShedder".into(),
                cycle: 1,
            }],
            assignments: vec![],
            splits: vec![SplitDecision {
                bundle: "t/n/0x00000000_0xffffffff".into(),
                broker: "b1:8080".into(),
                boundaries: vec!["0x7fffffff".into()],
                algorithm: "range_equally_divide".into(),
                unload_children: true,
                reason: "s".into(),
            }],
            skipped: vec![Skipped::new("cluster", "x")],
            prediction: vec![BrokerPrediction {
                broker: "b1:8080".into(),
                score_now: 80.0,
                score_after: 50.0,
                moves_out: 1,
                moves_in: 0,
            }],
        };
        let v: serde_json::Value = serde_json::from_str(&plan.to_json()).unwrap();
        assert_eq!(v["prediction"][0]["scoreAfter"], 50.0);
        assert!(Plan::default().to_json().find("prediction").is_none());
        assert_eq!(v["unloads"][0]["destination"], "b2:8080");
        assert_eq!(v["unloads"][0]["source"], "b1:8080");
        assert_eq!(v["splits"][0]["unloadChildren"], true);
        assert_eq!(v["splits"][0]["boundaries"][0], "0x7fffffff");
        assert_eq!(v["skipped"][0]["subject"], "cluster");
        assert!(v["skipped"][0].get("dropped").is_none());
        let dropped = Skipped::dropped("t/n/0x0_0x1", Dropped::CurrentOwner, "r");
        assert_eq!(
            serde_json::to_value(&dropped).unwrap()["dropped"],
            "currentOwner"
        );
        assert!(Dropped::CurrentOwner.by_placement() && !Dropped::GracePeriod.by_placement());
        for d in [
            Dropped::ExcludedNamespace,
            Dropped::GracePeriod,
            Dropped::Duplicate,
            Dropped::NoOtherBroker,
            Dropped::AntiAffinity,
            Dropped::NoDestination,
            Dropped::CurrentOwner,
        ] {
            assert_eq!(serde_json::to_value(d).unwrap(), d.name());
        }
        assert!(!plan.is_empty());
        assert!(Plan::default().is_empty());
    }
}
