//! Placement: the candidate pipeline of `ModularLoadManagerImpl.selectBroker` and the placement strategies.
//!
//! Pipeline, in the order of `selectBroker` in Pulsar's `ModularLoadManagerImpl.java` ([`select_broker`]);
//! step 1 is the bundle-data `computeIfAbsent` of [`assign_bundle`]:
//! 2. namespace isolation policies (primary/secondary brokers by regex, `min_available` fail-over), else the
//!    topic-kind capability and shared brokers ([`filters::namespace_policy_candidates`]);
//! 3. `loadBalancerBrokerMaxTopics` (ignored when it would drop everyone);
//! 4. anti-affinity groups and failure domains;
//! 5. even distribution by the namespace's bundle count (`loadBalancerDistributeBundlesEvenlyEnabled`, off by
//!    default in 5.0; always on for `pulsar/system`);
//! 6. load-manager class filter (6a), then the version filter (6b, `preferLaterVersions`; a bad version resets
//!    the candidates to step 2's result);
//! 7. nothing left → step 2's result;
//! 8. shedding-excluded namespaces are placed round-robin, others by the placement strategy;
//! 9. overload re-check: when the chosen broker's `W4` is above the overload threshold, the strategy is asked
//!    again over step 2's result.
//!
//! The extensible load manager does not run this pipeline: [`select_broker`] in [`Pipeline::Extensible`] runs
//! `selectAsync`'s filters ([`PlacementContext::extensible_candidates`]) and then the strategy, nothing else.
//!
//! Candidates are kept in broker-id order; strategies draw random choices from the caller's `StdRng`.

mod avg;
mod band;
pub mod filters;
mod least_long_term;
mod least_resource;

pub use least_resource::{ExtensibleLeastResourceUsage, LeastResourceUsage};

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::BTreeSet;

use foldhash::HashMap;
use std::rc::Rc;

use rand::rngs::StdRng;

use super::cost_model::LearnedCosts;
use super::load_data::{BrokerEntry, LoadData};
use super::plan::{Assignment, Skipped};
use super::policies::{broker_host, ClusterPolicies};
use super::{namespace_of, num, weighted_usage, weighted_usage4};
use crate::config::{PlacementKind, Settings};

/// What the pipeline knows about one broker, computed once per context.
#[derive(Debug, Clone)]
pub struct BrokerInfo<'a> {
    /// Broker id.
    pub id: &'a str,
    /// Host part of the id.
    pub host: &'a str,
    /// Four-weight usage, fraction.
    pub w4: f64,
    /// Five-weight usage with the configured weights, fraction.
    pub w5: f64,
    /// Reported topics plus topics of preallocated bundles.
    pub topics: i64,
    /// Serves persistent topics.
    pub persistent: bool,
    /// Serves non-persistent topics.
    pub non_persistent: bool,
    /// Not a primary broker of any isolation policy.
    pub shared: bool,
    /// Reports our load-manager class.
    pub class_ok: bool,
    /// Reported version.
    pub version: Option<&'a str>,
    /// The full entry.
    pub entry: &'a BrokerEntry,
}

/// The inputs of placement decisions, with per-broker facts precomputed (O(brokers) once, then each
/// placement is a pass over the candidate list).
#[derive(Debug)]
pub struct PlacementContext<'a> {
    /// Load data.
    pub load: &'a LoadData,
    /// Settings.
    pub settings: &'a Settings,
    /// Policies.
    pub policies: &'a ClusterPolicies,
    /// Brokers in id order.
    pub brokers: Vec<BrokerInfo<'a>>,
    /// Now, epoch ms: the instant the placement is decided at.
    pub now: i64,
    /// Per pipeline (modular, extensible) and topic kind (persistent, non-persistent): namespace → candidates.
    candidates: RefCell<[HashMap<String, Rc<Candidates>>; 4]>,
    /// Per slot: the candidates shared by namespaces that no namespace-specific filter applies to.
    generic_candidates: RefCell<[Option<Rc<Candidates>>; 4]>,
    lltmr_scores: OnceCell<Vec<f64>>,
    band: OnceCell<band::Model>,
    last_index: Cell<usize>,
}

/// The filtered candidates of one namespace (and topic kind). Every filter depends only on the namespace, the
/// topic kind and context-wide facts, so the result is computed once per context and namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidates {
    /// After namespace policies over every broker (pipeline step 2; the fallback of steps 6b, 7 and 9).
    pub base: Vec<usize>,
    /// After every filter (steps 3–7), or after the extensible filter pipeline.
    pub filtered: Vec<usize>,
    /// Extensible pipeline only: why `BrokerVersionFilter` failed (selectAsync then skips that filter;
    /// TransferShedder's `isTransferable` answers false).
    pub version_error: Option<String>,
    /// What narrowed them, for reasons.
    pub notes: Vec<String>,
    /// The policy note (isolation policy and fail-over), empty without isolation.
    pub policy_note: String,
    lltmr_best_filtered: OnceCell<Vec<usize>>,
    lltmr_best_base: OnceCell<Vec<usize>>,
}

impl<'a> PlacementContext<'a> {
    /// Precomputes the per-broker facts.
    pub fn new(load: &'a LoadData, settings: &'a Settings, policies: &'a ClusterPolicies) -> Self {
        let class = settings.load_manager_class_name.class_name();
        let weights = settings.resource_weights();
        let weights4 = super::weights4(settings);
        let brokers = match load.report_facts(&weights, &weights4, class) {
            Some(facts) => load
                .brokers()
                .zip(facts)
                .map(|((id, e), f)| BrokerInfo {
                    id: id.as_str(),
                    host: &id[..f.host_len],
                    w4: f.usage4,
                    w5: f.usage5,
                    topics: f.topics + e.preallocated_load.topics,
                    persistent: f.persistent,
                    non_persistent: f.non_persistent,
                    shared: policies.is_shared_broker(id),
                    class_ok: f.class_ok,
                    version: f.version.as_deref(),
                    entry: e,
                })
                .collect(),
            None => Self::broker_infos(load, settings, policies, class),
        };
        Self {
            load,
            settings,
            policies,
            brokers,
            now: 0,
            candidates: RefCell::new(Default::default()),
            generic_candidates: RefCell::new(Default::default()),
            lltmr_scores: OnceCell::new(),
            band: OnceCell::new(),
            last_index: Cell::new(0),
        }
    }

    /// The per-broker facts derived from the entries themselves (settings other than the load data's cached
    /// facts were built with).
    fn broker_infos(
        load: &'a LoadData,
        settings: &Settings,
        policies: &ClusterPolicies,
        class: &str,
    ) -> Vec<BrokerInfo<'a>> {
        load.brokers()
            .map(|(id, e)| {
                let prealloc_topics = e.preallocated_load.topics;
                BrokerInfo {
                    id: id.as_str(),
                    host: broker_host(id),
                    w4: weighted_usage4(&e.local, settings),
                    w5: weighted_usage(&e.local, settings),
                    topics: e.local.num_topics + prealloc_topics,
                    persistent: e.local.persistent_topics_enabled,
                    non_persistent: e.local.non_persistent_topics_enabled,
                    shared: policies.is_shared_broker(id),
                    class_ok: e.local.load_manager_class_name.as_deref() == Some(class),
                    version: e.local.broker_version_string.as_deref(),
                    entry: e,
                }
            })
            .collect()
    }

    /// The modular pipeline's candidates for `bundle` (steps 2–7; cached per namespace and topic kind).
    pub fn candidates(&self, bundle: &str) -> Rc<Candidates> {
        self.cached_candidates(bundle, Pipeline::Modular)
    }

    /// The extensible manager's candidates for `bundle` (`selectAsync`'s filter pipeline, cached per namespace
    /// and topic kind), applied in Pulsar's order to every known broker: `BrokerLoadManagerClassFilter`,
    /// `BrokerMaxTopicCountFilter` (reported topics `>=` the maximum dropped, no fallback),
    /// `BrokerVersionFilter` (a bad version skips the filter and is kept in
    /// [`version_error`](Candidates::version_error)), `AntiAffinityGroupPolicyFilter` and
    /// `BrokerIsolationPoliciesFilter` (namespace policies over what is left). No preallocated topics, even
    /// distribution, round-robin, fallback or overload re-check.
    pub fn extensible_candidates(&self, bundle: &str) -> Rc<Candidates> {
        self.cached_candidates(bundle, Pipeline::Extensible)
    }

    fn cached_candidates(&self, bundle: &str, pipeline: Pipeline) -> Rc<Candidates> {
        let ns = namespace_of(bundle);
        let slot = usize::from(self.policies.non_persistent_bundles.contains(bundle))
            + 2 * usize::from(pipeline == Pipeline::Extensible);
        if let Some(c) = self.candidates.borrow()[slot].get(ns) {
            return Rc::clone(c);
        }
        // A namespace without isolation policy, anti-affinity group or (modular) even distribution goes through
        // filters that depend on the topic kind and context-wide facts only: every such namespace shares one
        // result (and so one LeastLongTermMessageRate best set).
        let generic = self.policies.isolation_for(ns).is_none()
            && self.policies.anti_affinity_group(ns).is_none()
            && (pipeline == Pipeline::Extensible
                || !(self
                    .settings
                    .load_balancer_distribute_bundles_evenly_enabled
                    || ns == "pulsar/system"));
        let shared = if generic {
            self.generic_candidates.borrow()[slot].clone()
        } else {
            None
        };
        let computed = shared.unwrap_or_else(|| {
            let c = Rc::new(match pipeline {
                Pipeline::Modular => self.compute_candidates(bundle),
                Pipeline::Extensible => self.compute_extensible_candidates(bundle),
            });
            if generic {
                self.generic_candidates.borrow_mut()[slot] = Some(Rc::clone(&c));
            }
            c
        });
        self.candidates.borrow_mut()[slot].insert(ns.to_owned(), Rc::clone(&computed));
        computed
    }

    fn compute_extensible_candidates(&self, bundle: &str) -> Candidates {
        let (base, _) = filters::namespace_policy_candidates(self, bundle);
        let mut notes: Vec<String> = Vec::new();
        let mut c: Vec<usize> = (0..self.brokers.len()).collect();
        if !c.is_empty() {
            notes.extend(filters::filter_load_manager_class(self, &mut c));
        }
        notes.extend(filters::filter_max_topics_extensible(self, &mut c));
        let version_error = match filters::filter_version(self, &mut c) {
            Ok(note) => {
                notes.extend(note);
                None
            }
            Err(e) => {
                notes.push(format!("version filter failed ({e}); filter skipped"));
                Some(e)
            }
        };
        notes.extend(filters::filter_anti_affinity(self, bundle, &mut c));
        let before = c.len();
        let (isolated, policy_note) =
            filters::namespace_policy_candidates_among(self, bundle, c.iter().copied());
        if !policy_note.is_empty() {
            notes.push(policy_note.clone());
        } else if isolated.len() != before {
            notes.push(format!(
                "{} broker(s) are not shared or cannot host the topic kind",
                before - isolated.len()
            ));
        }
        Candidates {
            base,
            filtered: isolated,
            version_error,
            notes,
            policy_note,
            lltmr_best_filtered: OnceCell::new(),
            lltmr_best_base: OnceCell::new(),
        }
    }

    fn compute_candidates(&self, bundle: &str) -> Candidates {
        let (base, policy_note) = filters::namespace_policy_candidates(self, bundle);
        let mut notes: Vec<String> = Vec::new();
        if !policy_note.is_empty() {
            notes.push(policy_note.clone());
        }
        let mut c = base.clone();
        notes.extend(filters::filter_max_topics(self, &mut c));
        notes.extend(filters::filter_anti_affinity(self, bundle, &mut c));
        notes.extend(filters::filter_distribute_evenly(self, bundle, &mut c));
        notes.extend(filters::filter_load_manager_class(self, &mut c));
        match filters::filter_version(self, &mut c) {
            Ok(note) => notes.extend(note),
            Err(e) => {
                notes.push(format!("version filter failed ({e}); candidates reset"));
                c = base.clone();
            }
        }
        if c.is_empty() && !base.is_empty() {
            notes.push("filters left no broker; candidates reset to the policy result".into());
            c = base.clone();
        }
        Candidates {
            base,
            filtered: c,
            version_error: None,
            notes,
            policy_note,
            lltmr_best_filtered: OnceCell::new(),
            lltmr_best_base: OnceCell::new(),
        }
    }

    /// LeastLongTermMessageRate scores of every broker (computed once per context).
    pub(crate) fn lltmr_scores(&self) -> &Vec<f64> {
        self.lltmr_scores.get_or_init(|| {
            (0..self.brokers.len())
                .map(|i| least_long_term::score(self, i))
                .collect()
        })
    }

    /// Sets `now`.
    pub fn with_now(mut self, now: i64) -> Self {
        self.now = now;
        self
    }

    /// Index of a broker id. The last answer is remembered: consecutive decisions usually name the same broker.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        let last = self.last_index.get();
        if self.brokers.get(last).is_some_and(|b| b.id == id) {
            return Some(last);
        }
        let found = self.brokers.binary_search_by(|b| b.id.cmp(id)).ok();
        if let Some(i) = found {
            self.last_index.set(i);
        }
        found
    }

    /// How many bundles of namespace `ns` broker `i` (by index) owns or has preallocated. O(log), from the
    /// counts [`LoadData`] keeps.
    pub fn namespace_bundles(&self, i: usize, ns: &str) -> usize {
        let e = self.brokers[i].entry;
        e.reported_namespaces.get(ns).copied().unwrap_or(0)
            + e.preallocated_load.namespaces.get(ns).copied().unwrap_or(0)
    }

    /// The namespaces broker `i` (by index) owns or has preallocated a bundle of, each once, in name order.
    pub fn namespaces_of(&self, i: usize) -> BTreeSet<&str> {
        let e = self.brokers[i].entry;
        e.reported_namespaces
            .keys()
            .chain(e.preallocated_load.namespaces.keys())
            .map(String::as_str)
            .collect()
    }

    fn ids(&self, list: &[usize]) -> String {
        let names: Vec<&str> = list.iter().map(|i| self.brokers[*i].id).collect();
        if names.len() > 6 {
            format!("{} brokers", names.len())
        } else {
            names.join(", ")
        }
    }
}

/// A placement strategy with its state.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// AvgShedder's placement: the shedder's planned destination, else random among eligible brokers.
    AvgShedder,
    /// Least long-term message rate (the documented `1/(threshold − usage)` weighting is the setting
    /// `loadmgrLeastLongTermMessageRateUsageWeighting`).
    LeastLongTermMessageRate,
    /// Modular LeastResourceUsageWithWeight (EMA advanced per placement call).
    LeastResourceUsageWithWeight(LeastResourceUsage),
    /// The extensible manager's LeastResourceUsageWithWeight (EMA from the brokers' load data).
    ExtensibleLeastResourceUsageWithWeight(ExtensibleLeastResourceUsage),
    /// BandShedder's placement: the least predicted score once the bundle (and every bundle preallocated since
    /// the broker's last report) is added, with what the shedder learned at its last cycle where it has it
    /// ([`Placement::learn`]).
    BandShedder(LearnedCosts),
}

impl Placement {
    /// A fresh strategy; `extensible` picks the extensible variant of LeastResourceUsageWithWeight.
    pub fn new(kind: PlacementKind, extensible: bool) -> Self {
        match kind {
            PlacementKind::AvgShedder => Placement::AvgShedder,
            PlacementKind::LeastLongTermMessageRate => Placement::LeastLongTermMessageRate,
            PlacementKind::LeastResourceUsageWithWeight if extensible => {
                Placement::ExtensibleLeastResourceUsageWithWeight(ExtensibleLeastResourceUsage)
            }
            PlacementKind::LeastResourceUsageWithWeight => {
                Placement::LeastResourceUsageWithWeight(LeastResourceUsage::default())
            }
            PlacementKind::BandShedder => Placement::BandShedder(LearnedCosts::new()),
        }
    }

    /// The strategy's name for reasons.
    pub fn name(&self) -> &'static str {
        match self {
            Placement::AvgShedder => "AvgShedder",
            Placement::LeastLongTermMessageRate => "LeastLongTermMessageRate",
            Placement::LeastResourceUsageWithWeight(_) => "LeastResourceUsageWithWeight",
            Placement::ExtensibleLeastResourceUsageWithWeight(_) => {
                "LeastResourceUsageWithWeight(extensible)"
            }
            Placement::BandShedder(_) => "BandShedder",
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn select(
        &mut self,
        ctx: &PlacementContext<'_>,
        bundle: &str,
        candidates: &[usize],
        best_cache: &OnceCell<Vec<usize>>,
        planned: Option<&str>,
        source: Option<&str>,
        rng: &mut StdRng,
    ) -> Option<(usize, String)> {
        if candidates.is_empty() {
            return None;
        }
        match self {
            Placement::AvgShedder => avg::select(ctx, candidates, planned, source, rng),
            Placement::LeastLongTermMessageRate => {
                least_long_term::select(ctx, candidates, best_cache, rng)
            }
            Placement::LeastResourceUsageWithWeight(s) => s.select(ctx, candidates, rng),
            Placement::ExtensibleLeastResourceUsageWithWeight(s) => s.select(ctx, candidates, rng),
            Placement::BandShedder(learned) => {
                band::select(ctx, learned, bundle, candidates, planned, rng)
            }
        }
    }

    /// What the shedding strategy learned at its cycle (its idle usages and costs per broker), for the
    /// placements until its next cycle; only BandShedder's placement uses it, and `None` (a strategy that
    /// learns nothing) clears it.
    pub fn learn(&mut self, learned: Option<&LearnedCosts>) {
        if let Placement::BandShedder(mine) = self {
            match learned {
                Some(l) => mine.clone_from(l),
                None => mine.clear(),
            }
        }
    }

    /// Whether a bundle whose broker is gone is weighed by the data last seen of it, rather than Pulsar's
    /// default data (BandShedder's placement, which predicts each broker's score from traffic).
    pub fn weighs_last_known_data(&self) -> bool {
        matches!(self, Placement::BandShedder(_))
    }

    /// The live broker set changed (forget EMA history of gone brokers).
    pub fn on_active_brokers_change(&mut self, active: &std::collections::BTreeSet<String>) {
        match self {
            Placement::LeastResourceUsageWithWeight(s) => s.on_active_brokers_change(active),
            // A broker that left starts over when it comes back.
            Placement::BandShedder(learned) => learned.retain(|b, _| active.contains(b)),
            _ => {}
        }
    }
}

/// Which candidate pipeline placement runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipeline {
    /// `ModularLoadManagerImpl.selectBroker` (steps 2–9 of the module docs).
    Modular,
    /// `ExtensibleLoadManagerImpl.selectAsync`: its filters, then the strategy
    /// ([`PlacementContext::extensible_candidates`]).
    Extensible,
}

/// The placement strategy plus the round-robin selector used for shedding-excluded namespaces, and the
/// pipeline the strategy runs in.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacementState {
    /// The strategy.
    pub strategy: Placement,
    round_robin: i32,
    pipeline: Pipeline,
}

impl PlacementState {
    /// A fresh state; the extensible LeastResourceUsageWithWeight runs in the extensible pipeline, every other
    /// strategy in the modular one.
    pub fn new(strategy: Placement) -> Self {
        let pipeline = match strategy {
            Placement::ExtensibleLeastResourceUsageWithWeight(_) => Pipeline::Extensible,
            _ => Pipeline::Modular,
        };
        Self {
            strategy,
            round_robin: 0,
            pipeline,
        }
    }

    /// The same state running in `pipeline` (the extensible load manager uses the extensible pipeline whatever
    /// the strategy).
    pub fn with_pipeline(mut self, pipeline: Pipeline) -> Self {
        self.pipeline = pipeline;
        self
    }

    /// The pipeline placement runs.
    pub fn pipeline(&self) -> Pipeline {
        self.pipeline
    }

    /// `RoundRobinBrokerSelector`: index = counter mod n over the candidates (broker-id order); the counter
    /// wraps to 0 after `Integer.MAX_VALUE`.
    pub fn round_robin<'b>(&mut self, candidates: &[&'b str]) -> Option<&'b str> {
        if candidates.is_empty() {
            return None;
        }
        let pick = candidates[(self.round_robin as usize) % candidates.len()];
        self.round_robin = if self.round_robin == i32::MAX {
            0
        } else {
            self.round_robin + 1
        };
        Some(pick)
    }
}

/// A chosen broker and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Broker id.
    pub broker: String,
    /// Strategy reasoning plus the filters that narrowed the candidates.
    pub reason: String,
}

/// Runs the placement pipeline of `state` for `bundle`. `planned` is AvgShedder's plan (if any) and `source` the
/// current owner when the bundle is being shed. Errors say why no broker could be chosen.
pub fn select_broker(
    ctx: &PlacementContext<'_>,
    state: &mut PlacementState,
    bundle: &str,
    planned: Option<&str>,
    source: Option<&str>,
    rng: &mut StdRng,
) -> Result<Selection, String> {
    if state.pipeline == Pipeline::Extensible {
        return select_extensible(ctx, state, bundle, planned, source, rng);
    }
    let cands = ctx.candidates(bundle);
    let base = &cands.base;
    if base.is_empty() {
        return Err(format!(
            "no broker is allowed by the namespace policies{}",
            paren(&cands.policy_note)
        ));
    }
    let notes = &cands.notes;
    let c = &cands.filtered;
    let ns = namespace_of(bundle);
    let (mut chosen, mut why) = if ctx
        .settings
        .load_balancer_shedding_excluded_namespaces
        .contains(ns)
    {
        let ids: Vec<&str> = c.iter().map(|i| ctx.brokers[*i].id).collect();
        let pick = state.round_robin(&ids).expect("non-empty");
        (
            ctx.index_of(pick).expect("known"),
            format!(
                "round-robin over {} (shedding-excluded namespace)",
                ctx.ids(c)
            ),
        )
    } else {
        state
            .strategy
            .select(
                ctx,
                bundle,
                c,
                &cands.lltmr_best_filtered,
                planned,
                source,
                rng,
            )
            .ok_or_else(|| {
                format!(
                    "{} found no broker among {}",
                    state.strategy.name(),
                    ctx.ids(c)
                )
            })?
    };
    let threshold = ctx
        .settings
        .load_balancer_broker_overloaded_threshold_percentage as f64
        / 100.0;
    if ctx.brokers[chosen].w4 > threshold {
        if let Some((again, why2)) = state.strategy.select(
            ctx,
            bundle,
            base,
            &cands.lltmr_best_base,
            planned,
            source,
            rng,
        ) {
            why = format!(
                "{} usage {}% > overload threshold {}%, re-selected over the policy candidates: {why2}",
                ctx.brokers[chosen].id,
                num(ctx.brokers[chosen].w4 * 100.0),
                num(threshold * 100.0)
            );
            chosen = again;
        }
    }
    if !notes.is_empty() {
        why = format!("{why} [{}]", notes.join("; "));
    }
    Ok(Selection {
        broker: ctx.brokers[chosen].id.to_owned(),
        reason: why,
    })
}

/// `selectAsync`: the extensible filters, then the strategy over what is left; nothing left → no broker.
fn select_extensible(
    ctx: &PlacementContext<'_>,
    state: &mut PlacementState,
    bundle: &str,
    planned: Option<&str>,
    source: Option<&str>,
    rng: &mut StdRng,
) -> Result<Selection, String> {
    let cands = ctx.extensible_candidates(bundle);
    let notes = if cands.notes.is_empty() {
        String::new()
    } else {
        format!(" [{}]", cands.notes.join("; "))
    };
    if cands.filtered.is_empty() {
        return Err(format!(
            "no broker passes the extensible broker filters{notes}"
        ));
    }
    let (chosen, why) = state
        .strategy
        .select(
            ctx,
            bundle,
            &cands.filtered,
            &cands.lltmr_best_filtered,
            planned,
            source,
            rng,
        )
        .ok_or_else(|| {
            format!(
                "{} found no broker among {}",
                state.strategy.name(),
                ctx.ids(&cands.filtered)
            )
        })?;
    Ok(Selection {
        broker: ctx.brokers[chosen].id.to_owned(),
        reason: format!("{why}{notes}"),
    })
}

fn paren(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(" ({s})")
    }
}

/// `selectBrokerForAssignment`: an existing preallocation wins; otherwise the pipeline chooses and the bundle
/// is preallocated to the chosen broker.
pub fn assign_bundle(
    load: &mut LoadData,
    settings: &Settings,
    policies: &ClusterPolicies,
    state: &mut PlacementState,
    bundle: &str,
    rng: &mut StdRng,
) -> Result<Assignment, Skipped> {
    load.set_ema_settings(settings);
    if let Some(b) = load.preallocation(bundle) {
        return Ok(Assignment {
            bundle: bundle.to_owned(),
            broker: b.to_owned(),
            reason: "already preallocated".into(),
        });
    }
    // Pulsar's `computeIfAbsent`: an unknown bundle gets the default data, which its preallocation then counts.
    if load.bundle(bundle).is_none() {
        load.set_bundle(bundle, Default::default());
    }
    let selection = {
        let ctx = PlacementContext::new(load, settings, policies);
        select_broker(&ctx, state, bundle, None, None, rng)
    };
    match selection {
        Ok(sel) => {
            load.preallocate(bundle, &sel.broker);
            Ok(Assignment {
                bundle: bundle.to_owned(),
                broker: sel.broker,
                reason: format!("{}: {}", state.strategy.name(), sel.reason),
            })
        }
        Err(e) => Err(Skipped::new(bundle, format!("no assignment: {e}"))),
    }
}

#[cfg(test)]
mod tests;
