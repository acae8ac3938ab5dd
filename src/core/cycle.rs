//! One shedding cycle: the strategy's proposals through the common filters of Pulsar's `doLoadShedding`
//! (`ModularLoadManagerImpl.java`) and placement.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use rand::rngs::StdRng;

use super::load_data::LoadData;
use super::namespace_of;
use super::placement::{
    filters, select_broker, Pipeline, Placement, PlacementContext, PlacementState,
};
use super::plan::{Dropped, Plan, ShedderCandidate, Skipped, UnloadDecision};
use super::policies::ClusterPolicies;
use super::shedding::{new_shedder, Candidate, Shedder, SheddingContext, UnreportedMove};
use crate::config::{LoadManagerKind, PlacementKind, Settings, ShedderKind};

/// The shedding strategy and the placement strategy, each with its own cross-cycle state. AvgShedder's two
/// roles share their plan through the candidates it returns.
#[derive(Debug)]
pub struct Strategies {
    /// The shedder.
    pub shedder: Box<dyn Shedder>,
    /// The placement strategy and round-robin selector.
    pub placement: PlacementState,
}

impl Strategies {
    /// Fresh strategies of the given kinds; `extensible` selects the extensible manager: the extensible
    /// LeastResourceUsageWithWeight and the extensible placement pipeline.
    pub fn new(shedder: ShedderKind, placement: PlacementKind, extensible: bool) -> Self {
        let pipeline = if extensible {
            Pipeline::Extensible
        } else {
            Pipeline::Modular
        };
        Self {
            shedder: new_shedder(shedder),
            placement: PlacementState::new(Placement::new(placement, extensible))
                .with_pipeline(pipeline),
        }
    }

    /// The strategies the (resolved) settings name.
    pub fn from_settings(settings: &Settings) -> Self {
        let extensible = settings.load_manager_class_name == LoadManagerKind::Extensible
            || settings.load_balancer_load_shedding_strategy == ShedderKind::TransferShedder;
        Self::new(
            settings.load_balancer_load_shedding_strategy,
            settings.load_balancer_load_placement_strategy,
            extensible,
        )
    }

    /// A new leader took over at `now` (epoch ms): see [`Shedder::on_takeover`].
    pub fn on_takeover(
        &mut self,
        starts: &BTreeMap<String, i64>,
        gone: &BTreeSet<String>,
        now: i64,
    ) {
        self.shedder.on_takeover(starts, gone, now);
    }

    /// The live broker set changed at `now` (epoch ms).
    pub fn on_active_brokers_change(&mut self, active: &BTreeSet<String>, now: i64) {
        self.shedder.on_active_brokers_change(active, now);
        self.placement.strategy.on_active_brokers_change(active);
    }
}

/// Runs one shedding cycle at `now` (epoch ms) and returns the unloads with their planned destinations.
///
/// Steps (`ModularLoadManagerImpl.doLoadShedding`): nothing when `loadBalancerEnabled` or
/// `loadBalancerSheddingEnabled` is off or at most one broker is known; prune recently-unloaded entries older
/// than `loadBalancerSheddingGracePeriodMinutes`; ask the strategy; then for each proposal, in order: skip
/// bundles of `loadBalancerSheddingExcludedNamespaces`, bundles still in their grace period, second proposals
/// of a bundle, bundles whose namespace policies allow no other broker, and bundles the anti-affinity rule
/// keeps (these two checks are modular only: the extensible `UnloadScheduler` runs TransferShedder's decisions
/// without them); choose the destination (TransferShedder's transfer target as is, otherwise the placement
/// pipeline with AvgShedder's plan) and skip when none is found or it is the current owner. Every proposal
/// skipped by these steps is a [`Skipped`] entry with its bundle as subject and [`Skipped::dropped`] naming the
/// step. Finally the strategy is told which unloads were kept and that the attempt is over.
///
/// The load data's extensible EMA settings are set from `settings` first ([`LoadData::set_ema_settings`]).
///
/// The cycle does not record the unloads as done: the runtime calls [`LoadData::record_unload`] for each
/// unload it completes.
pub fn run_shedding_cycle(
    load: &mut LoadData,
    settings: &Settings,
    policies: &ClusterPolicies,
    strategies: &mut Strategies,
    now: i64,
    rng: &mut StdRng,
) -> Plan {
    cycle(
        load,
        settings,
        policies,
        strategies,
        now,
        rng,
        None,
        false,
        &[],
    )
}

/// The leader's cycle: [`run_shedding_cycle`], or with `early` an early cycle
/// ([`crate::core::shedding::SheddingContext::early`]: run between two regular ticks because the strategy asked
/// for it), given the completed moves the reports may not show yet
/// ([`crate::core::shedding::SheddingContext::unreported`]).
#[allow(clippy::too_many_arguments)]
pub fn run_leader_shedding_cycle(
    load: &mut LoadData,
    settings: &Settings,
    policies: &ClusterPolicies,
    strategies: &mut Strategies,
    now: i64,
    rng: &mut StdRng,
    early: bool,
    unreported: &[UnreportedMove],
) -> Plan {
    cycle(
        load, settings, policies, strategies, now, rng, None, early, unreported,
    )
}

/// [`run_shedding_cycle`], also returning every proposal of the strategy in its order, before the checks and
/// placement, each with what the cycle did with it ([`ShedderCandidate::dropped`]; cycle number 1).
pub fn run_shedding_cycle_with_candidates(
    load: &mut LoadData,
    settings: &Settings,
    policies: &ClusterPolicies,
    strategies: &mut Strategies,
    now: i64,
    rng: &mut StdRng,
) -> (Plan, Vec<ShedderCandidate>) {
    let mut candidates = Vec::new();
    let plan = cycle(
        load,
        settings,
        policies,
        strategies,
        now,
        rng,
        Some(&mut candidates),
        false,
        &[],
    );
    (plan, candidates)
}

#[allow(clippy::too_many_arguments)]
fn cycle(
    load: &mut LoadData,
    settings: &Settings,
    policies: &ClusterPolicies,
    strategies: &mut Strategies,
    now: i64,
    rng: &mut StdRng,
    mut proposals: Option<&mut Vec<ShedderCandidate>>,
    early: bool,
    unreported: &[UnreportedMove],
) -> Plan {
    load.set_ema_settings(settings);
    let mut plan = Plan::default();
    let name = strategies.shedder.kind().name();
    if !(settings.load_balancer_enabled && settings.load_balancer_shedding_enabled) {
        plan.skipped.push(Skipped::new(
            "cluster",
            "no shedding: loadBalancerEnabled or loadBalancerSheddingEnabled is false",
        ));
        return plan;
    }
    if load.broker_count() <= 1 {
        plan.skipped.push(Skipped::new(
            "cluster",
            format!("no shedding: {} broker(s) available", load.broker_count()),
        ));
        return plan;
    }
    load.prune_recently_unloaded(
        now,
        settings
            .load_balancer_shedding_grace_period_minutes
            .saturating_mul(60_000),
    );
    let load: &LoadData = load;
    // One placement context for the pass: the strategy's own filter checks and the cycle's share its caches.
    let ctx = PlacementContext::new(load, settings, policies).with_now(now);
    let outcome = strategies.shedder.find_bundles_with_placement(
        &SheddingContext {
            load,
            settings,
            policies,
            now,
            early,
            unreported,
        },
        &ctx,
    );
    strategies
        .placement
        .strategy
        .learn(strategies.shedder.learned_costs());
    plan.skipped.extend(outcome.skipped);
    plan.prediction = outcome.prediction;
    plan.splits.extend(outcome.splits);
    let transfer_shedder = strategies.shedder.kind() == ShedderKind::TransferShedder;
    // A bundle proposed twice is planned once, at its first proposal (the checks before the duplicate check
    // depend on the bundle alone, so "first proposal" and "first proposal passing them" coincide).
    let first_proposal: Vec<bool> = {
        let mut seen = HashSet::with_capacity(outcome.candidates.len());
        outcome
            .candidates
            .iter()
            .map(|c| seen.insert(c.bundle.as_str()))
            .collect()
    };
    plan.unloads.reserve(outcome.candidates.len());
    if let Some(p) = proposals.as_deref_mut() {
        p.reserve(outcome.candidates.len());
    }
    for (c, first) in outcome.candidates.into_iter().zip(first_proposal) {
        let decided = decide(
            &ctx,
            &mut strategies.placement,
            rng,
            &c,
            first,
            transfer_shedder,
        );
        if let Some(p) = proposals.as_deref_mut() {
            p.push(ShedderCandidate {
                bundle: c.bundle.clone(),
                source: c.source.clone(),
                planned: c.planned.clone(),
                binding: c.binding,
                reason: c.reason.clone(),
                cycle: 1,
                dropped: decided.as_ref().err().map(|(d, _)| *d),
            });
        }
        let (destination, why) = match decided {
            Ok(d) => d,
            Err((dropped, text)) => {
                plan.skipped.push(Skipped::dropped(c.bundle, dropped, text));
                continue;
            }
        };
        let mut reason = c.reason;
        reason.reserve("; destination: ".len() + why.len());
        reason.push_str("; destination: ");
        reason.push_str(&why);
        plan.unloads.push(UnloadDecision {
            bundle: c.bundle,
            source: c.source,
            destination: Some(destination),
            reason,
            strategy: name.to_owned(),
            cycle: 1,
        });
    }
    strategies.shedder.on_unloads_planned(&plan.unloads, now);
    strategies.shedder.on_unload_attempt_completed();
    plan
}

/// The cycle's checks and placement for one proposal: `Ok((destination, how it was chosen))`, or the step
/// that dropped it with the skipped entry's reason.
pub(super) fn decide(
    ctx: &PlacementContext<'_>,
    placement: &mut PlacementState,
    rng: &mut StdRng,
    c: &Candidate,
    first: bool,
    transfer_shedder: bool,
) -> Result<(String, String), (Dropped, String)> {
    let excluded = &ctx.settings.load_balancer_shedding_excluded_namespaces;
    if !excluded.is_empty() && excluded.contains(namespace_of(&c.bundle)) {
        return Err((
            Dropped::ExcludedNamespace,
            format!(
                "no unload: namespace {} is in loadBalancerSheddingExcludedNamespaces",
                namespace_of(&c.bundle)
            ),
        ));
    }
    if ctx.load.is_recently_unloaded(&c.bundle) {
        return Err((
            Dropped::GracePeriod,
            "no unload: unloaded within the grace period".into(),
        ));
    }
    if !first {
        return Err((
            Dropped::Duplicate,
            format!(
                "no unload: {}; proposed again in the same pass (planned at its first proposal)",
                c.reason
            ),
        ));
    }
    // Pulsar's extensible UnloadScheduler runs TransferShedder's decisions without the modular
    // `doLoadShedding` checks (TransferShedder's isTransferable already ran the extensible filters).
    if !transfer_shedder {
        let cands = ctx.candidates(&c.bundle);
        let policy_candidates = &cands.base;
        // Some candidate other than the source: with two distinct candidates there always is one.
        let other = policy_candidates.len() > 1
            || policy_candidates
                .first()
                .is_some_and(|i| ctx.brokers[*i].id != c.source);
        if !other {
            return Err((
                Dropped::NoOtherBroker,
                "no unload: the namespace policies allow no other broker".into(),
            ));
        }
        filters::anti_affinity_allows_unload(ctx, &c.bundle, &c.source, policy_candidates)
            .map_err(|why| (Dropped::AntiAffinity, why))?;
    }
    let (destination, why) = match (&c.planned, c.binding) {
        (Some(dst), true) if transfer_shedder => (dst.clone(), format!("transfer to {dst}")),
        (Some(dst), true) => (dst.clone(), format!("the plan's binding destination {dst}")),
        _ => match select_broker(
            ctx,
            placement,
            &c.bundle,
            c.planned.as_deref(),
            Some(&c.source),
            rng,
        ) {
            Ok(sel) => (sel.broker, sel.reason),
            Err(e) => {
                return Err((
                    Dropped::NoDestination,
                    format!("no unload: {}; {e}", c.reason),
                ))
            }
        },
    };
    if destination == c.source {
        return Err((
            Dropped::CurrentOwner,
            format!(
                "no unload: {}; placement chose the current owner {destination} ({why})",
                c.reason
            ),
        ));
    }
    Ok((destination, why))
}
