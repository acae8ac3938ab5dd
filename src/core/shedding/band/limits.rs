//! The filters that count across one plan's moves: topics added to a broker and new namespaces of an
//! anti-affinity group.

use std::collections::{HashMap, HashSet};

use crate::core::namespace_of;
use crate::core::placement::PlacementContext;

/// What one plan has already given each destination, for the filters that count across a plan's moves.
pub(super) struct Limits {
    pub(super) max_topics: i64,
    /// Some broker has at most `max_topics` topics (else Pulsar's filter keeps every broker).
    pub(super) topics_filter_on: bool,
    pub(super) domains: bool,
    pub(super) added_topics: Vec<i64>,
    /// (broker or failure domain, anti-affinity group) → the one new namespace it receives in this plan.
    pub(super) group_gain: HashMap<(String, String), String>,
    pub(super) planned_ns: HashSet<(usize, String)>,
}

impl Limits {
    /// Whether `dst` may still receive `bundle` (with `topics` topics, its namespace in anti-affinity `group`)
    /// in this plan: within the topic maximum, and no second new namespace of an anti-affinity group.
    pub(super) fn admits(
        &self,
        pctx: &PlacementContext<'_>,
        (bundle, topics, group): (&str, i64, Option<&str>),
        dst: usize,
    ) -> bool {
        if self.topics_filter_on
            && pctx.brokers[dst].topics + self.added_topics[dst] + topics > self.max_topics
        {
            return false;
        }
        let Some(g) = group else {
            return true;
        };
        let ns = namespace_of(bundle);
        if self.planned_ns.contains(&(dst, ns.to_owned())) {
            return true;
        }
        let key = group_key(pctx, dst, self.domains);
        self.group_gain
            .get(&(key, g.to_owned()))
            .map_or(true, |other| other == ns)
    }

    /// Counts `bundle` (with `topics` topics, in anti-affinity `group`) as planned onto `dst`.
    pub(super) fn record(
        &mut self,
        pctx: &PlacementContext<'_>,
        (bundle, topics, group): (&str, i64, Option<&str>),
        dst: usize,
    ) {
        self.added_topics[dst] += topics;
        let ns = namespace_of(bundle);
        if let Some(g) = group {
            let key = group_key(pctx, dst, self.domains);
            self.group_gain
                .entry((key, g.to_owned()))
                .or_insert_with(|| ns.to_owned());
        }
        self.planned_ns.insert((dst, ns.to_owned()));
    }
}

/// The key anti-affinity counts under: the broker, or its failure domain when domains are enabled.
pub(super) fn group_key(ctx: &PlacementContext<'_>, broker: usize, domains: bool) -> String {
    let id = ctx.brokers[broker].id;
    if domains {
        format!("domain:{}", ctx.policies.domain_of(id))
    } else {
        id.to_owned()
    }
}
