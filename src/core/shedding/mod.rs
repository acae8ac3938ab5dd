//! Shedding strategies: which bundles to move off which brokers. Each is a type behind [`Shedder`] holding its
//! own cross-cycle state (EMA history, hit counters, cool-downs); the cycle in [`crate::core::run_shedding_cycle`]
//! applies the common filters and placement to what they propose.
//!
//! Every strategy sees the *shedding view* of Pulsar's `getBundleDataForLoadShedding`: bundle data without the
//! brokers' system-service namespaces (heartbeat, SLA monitor), and skips bundles still in the recently-unloaded
//! map. A broker's bundles are its report's `bundles` set (what Pulsar's strategies read).

mod avg;
mod band;
mod overload;
mod threshold;
mod transfer;
mod uniform;

pub use avg::AvgShedder;
pub use band::BandShedder;
pub use overload::OverloadShedder;
pub use threshold::ThresholdShedder;
pub use transfer::TransferShedder;
pub use uniform::UniformLoadShedder;

use std::collections::{BTreeMap, BTreeSet};

use super::cost_model::LearnedCosts;
use super::load_data::LoadData;
use super::placement::PlacementContext;
use super::plan::{BrokerPrediction, Skipped, SplitDecision, UnloadDecision};
use super::policies::ClusterPolicies;
use super::{is_system_service_bundle, num};
use crate::config::{Settings, ShedderKind};
use crate::model::BundleData;

/// Everything a shedder reads.
#[derive(Debug, Clone, Copy)]
pub struct SheddingContext<'a> {
    /// The load data.
    pub load: &'a LoadData,
    /// The settings.
    pub settings: &'a Settings,
    /// Policies (TransferShedder's transferability checks).
    pub policies: &'a ClusterPolicies,
    /// Now, epoch ms.
    pub now: i64,
    /// An early cycle between two regular shedding ticks, run because the strategy asked for one
    /// ([`Shedder::wants_early_cycle`]). A strategy must not count it towards anything measured in cycles
    /// (hit counters, samples): it acts only on what needs no confirmation.
    pub early: bool,
    /// Completed moves that their brokers' last reports may not show yet. Empty unless the strategy
    /// corrects for them ([`Shedder::corrects_unreported_moves`]); otherwise the leader waits until every
    /// completed move shows in both brokers' reports before a cycle.
    pub unreported: &'a [UnreportedMove],
}

/// A completed move, as the leader made it, that its brokers' last reports may not show yet: a broker
/// rewrites its report only when its load moved by the report threshold, so a source that gave away a few
/// bundles may list them for minutes.
#[derive(Debug, Clone, PartialEq)]
pub struct UnreportedMove {
    /// Full bundle name.
    pub bundle: String,
    /// The broker it left, when that broker's last report still lists it.
    pub still_listed_by: Option<String>,
    /// The broker that owns it now, when that broker's last report does not list it yet.
    pub not_yet_listed_by: Option<String>,
    /// The bundle's last data when the load data has none any more: a gone broker's bundle loses its data
    /// with the last broker that listed it, before it is placed again.
    pub last_data: Option<BundleData>,
}

/// A bundle a shedder wants moved.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Full bundle name.
    pub bundle: String,
    /// Its current owner.
    pub source: String,
    /// A destination the strategy chose: AvgShedder's plan (honoured by AvgShedder placement) or
    /// TransferShedder's transfer target.
    pub planned: Option<String>,
    /// Whether `planned` is final (TransferShedder already ran the filters for it) rather than a plan that
    /// placement may replace.
    pub binding: bool,
    /// Why, with numbers and thresholds.
    pub reason: String,
}

/// What a shedder proposes in one cycle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SheddingOutcome {
    /// Proposed moves, in decision order.
    pub candidates: Vec<Candidate>,
    /// Brokers, pairs and bundles considered and left alone, with why.
    pub skipped: Vec<Skipped>,
    /// Each broker's predicted score before and after the proposed moves (strategies that predict).
    pub prediction: Vec<BrokerPrediction>,
    /// Bundles the strategy has split instead of moved (BandShedder: a bundle too hot for any broker), checked
    /// as an automatic split is ([`crate::core::split::plan_requested_splits`]); the leader carries them out.
    pub splits: Vec<SplitDecision>,
}

/// A shedding strategy.
pub trait Shedder: Send + std::fmt::Debug {
    /// Which strategy this is.
    fn kind(&self) -> ShedderKind;

    /// One shedding pass (Pulsar's `findBundlesForUnloading`). May update the strategy's own state.
    fn find_bundles(&mut self, ctx: &SheddingContext<'_>) -> SheddingOutcome;

    /// The same pass given the cycle's placement context (built once per cycle over the same load data,
    /// settings and policies): strategies that consult the placement filters use it instead of building their
    /// own. The default ignores it.
    fn find_bundles_with_placement(
        &mut self,
        ctx: &SheddingContext<'_>,
        _placement: &PlacementContext<'_>,
    ) -> SheddingOutcome {
        self.find_bundles(ctx)
    }

    /// The set of live brokers changed at `now` (epoch ms): forget state about brokers no longer present.
    fn on_active_brokers_change(&mut self, _active: &BTreeSet<String>, _now: i64) {}

    /// A new leader took over at `now` (epoch ms), before its first [`Self::on_active_brokers_change`]: what
    /// the store tells of the recent past. `starts`: each live broker's start (epoch ms, its report's
    /// `startTimestamp`, where it has one); `gone`: brokers the assignment records name that are not live.
    fn on_takeover(
        &mut self,
        _starts: &BTreeMap<String, i64>,
        _gone: &BTreeSet<String>,
        _now: i64,
    ) {
    }

    /// The cycle kept these unloads of the last pass (after its filters and placement), decided at `now`.
    fn on_unloads_planned(&mut self, _unloads: &[UnloadDecision], _now: i64) {}

    /// The unload attempts of the last pass finished (AvgShedder 5.0 drops its plans here).
    fn on_unload_attempt_completed(&mut self) {}

    /// A new leader found the record of a past move of `bundle` off `source`, made at `at` (epoch ms): strategies
    /// that remember moves (BandShedder's no-return rule) take it as their own.
    fn on_past_move(&mut self, _bundle: &str, _source: &str, _at: i64) {}

    /// Whether the strategy wants a cycle before the next regular tick: it has work that needs no confirmation
    /// over several cycles (a broker joined, the last plan stopped at its move budget). The leader then runs an
    /// early cycle ([`SheddingContext::early`]) once nothing it must wait for is pending. Pulsar's strategies
    /// count cycles and never ask.
    /// Returns how long after now the leader should run it.
    fn wants_early_cycle(&self, _settings: &Settings) -> Option<std::time::Duration> {
        None
    }

    /// Whether the strategy corrects each broker's report by the completed moves it does not show yet
    /// ([`SheddingContext::unreported`]), so that the leader need not wait for the reports before a cycle.
    /// Pulsar's strategies read the reports as they are, and the leader waits for them.
    fn corrects_unreported_moves(&self) -> bool {
        false
    }

    /// What the strategy learned of each broker at its last cycle (idle usage and cost per unit of traffic),
    /// for the placements made until its next cycle; `None` for strategies that learn nothing.
    fn learned_costs(&self) -> Option<&LearnedCosts> {
        None
    }

    /// State restore (a snapshot's `recentlyUnloadedBrokers`): these brokers shed a bundle at these times,
    /// epoch ms. Only strategies with a broker cool-down keep them (TransferShedder); the others ignore them.
    fn restore_recently_unloaded_brokers(&mut self, _brokers: &BTreeMap<String, i64>) {}
}

/// A fresh shedder of the given kind.
pub fn new_shedder(kind: ShedderKind) -> Box<dyn Shedder> {
    match kind {
        ShedderKind::AvgShedder => Box::new(AvgShedder::default()),
        ShedderKind::ThresholdShedder => Box::new(ThresholdShedder::default()),
        ShedderKind::OverloadShedder => Box::new(OverloadShedder),
        ShedderKind::UniformLoadShedder => Box::new(UniformLoadShedder),
        ShedderKind::TransferShedder => Box::new(TransferShedder::default()),
        ShedderKind::BandShedder => Box::new(BandShedder::default()),
    }
}

/// A broker's sheddable bundles with their data: in its `bundles` set, in the shedding view (not a system-service
/// namespace, data known) and not recently unloaded. Sorted by bundle name (the documented tie-break).
pub(crate) fn sheddable_bundles<'a>(
    load: &'a LoadData,
    broker: &str,
) -> Vec<(&'a String, &'a BundleData)> {
    let Some(entry) = load.broker(broker) else {
        return Vec::new();
    };
    entry
        .local
        .bundles
        .iter()
        .filter(|b| !is_system_service_bundle(b) && !load.is_recently_unloaded(b))
        .filter_map(|b| load.bundle(b).map(|d| (b, d)))
        .collect()
}

/// Short-term throughput in + out of a bundle, B/s.
pub(crate) fn short_tp(d: &BundleData) -> f64 {
    d.short_term_data.total_msg_throughput()
}

/// Short-term rate in + out of a bundle, msg/s.
pub(crate) fn short_rate(d: &BundleData) -> f64 {
    d.short_term_data.total_msg_rate()
}

/// The greedy selection of ThresholdShedder and OverloadShedder: bundles by short-term throughput descending
/// (ties by name), taken while the marked throughput is below `need` or nothing is taken yet.
pub(crate) fn greedy_by_throughput(load: &LoadData, broker: &str, need: f64) -> Vec<(String, f64)> {
    let mut bundles: Vec<(&String, f64)> = sheddable_bundles(load, broker)
        .into_iter()
        .map(|(b, d)| (b, short_tp(d)))
        .collect();
    bundles.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut marked = 0.0;
    let mut out = Vec::new();
    for (bundle, tp) in bundles {
        if marked < need || out.is_empty() {
            marked += tp;
            out.push((bundle.clone(), tp));
        }
    }
    out
}

/// `x MiB/s` for reasons.
pub(crate) fn mib(v: f64) -> String {
    format!("{} MiB/s", num(v / super::MIB))
}
