//! The candidate filters of Pulsar's modular placement pipeline (`ModularLoadManagerImpl.selectBroker`), in
//! its order. Each works on a candidate list of broker indices into [`PlacementContext::brokers`] (broker-id
//! order) and returns a note for the reason text.

use std::collections::BTreeMap;

use super::PlacementContext;
use crate::core::namespace_of;

/// Step 2, `LoadManagerShared.applyNamespacePolicies`: isolation policies (primaries, plus secondaries when
/// fewer than `min_limit` primaries are available), else topic-kind capability and shared brokers only.
pub fn namespace_policy_candidates(
    ctx: &PlacementContext<'_>,
    bundle: &str,
) -> (Vec<usize>, String) {
    let ns = namespace_of(bundle);
    let non_persistent = ctx.policies.non_persistent_bundles.contains(bundle);
    match ctx.policies.isolation_for(ns) {
        Some(policy) => {
            let mut primaries = Vec::new();
            let mut secondaries = Vec::new();
            for (i, b) in ctx.brokers.iter().enumerate() {
                if policy.is_primary(b.host) {
                    primaries.push(i);
                } else if policy.is_secondary(b.host) {
                    secondaries.push(i);
                }
            }
            let failover = primaries.len() < policy.min_limit;
            let note = format!(
                "isolation policy {}: {} primary{}",
                policy.name,
                primaries.len(),
                if failover {
                    format!(
                        " < min_limit {}, plus {} secondary",
                        policy.min_limit,
                        secondaries.len()
                    )
                } else {
                    String::new()
                }
            );
            if failover {
                primaries.extend(secondaries);
                primaries.sort_unstable();
            }
            (primaries, note)
        }
        None => {
            let list: Vec<usize> = ctx
                .brokers
                .iter()
                .enumerate()
                .filter(|(_, b)| {
                    if non_persistent {
                        b.non_persistent
                    } else {
                        b.persistent
                    }
                })
                .filter(|(_, b)| b.shared)
                .map(|(i, _)| i)
                .collect();
            (list, String::new())
        }
    }
}

/// Step 3, `filterBrokersWithLargeTopicCount`: drop brokers whose topics (reported + preallocated) exceed
/// `loadBalancerBrokerMaxTopics`, unless that would drop every candidate.
pub fn filter_max_topics(
    ctx: &PlacementContext<'_>,
    candidates: &mut Vec<usize>,
) -> Option<String> {
    let max = ctx.settings.load_balancer_broker_max_topics as i64;
    let kept: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|i| ctx.brokers[*i].topics <= max)
        .collect();
    if kept.is_empty() || kept.len() == candidates.len() {
        return None;
    }
    let dropped = candidates.len() - kept.len();
    *candidates = kept;
    Some(format!("{dropped} broker(s) over {max} topics"))
}

/// Namespaces of the same anti-affinity group each broker owns (by bundles or preallocations). Brokers
/// owning none are absent.
pub fn anti_affinity_counts(ctx: &PlacementContext<'_>, group: &str) -> BTreeMap<usize, usize> {
    let index = ctx.ownership();
    let mut counts = BTreeMap::new();
    for (i, namespaces) in index.iter().enumerate() {
        let n = namespaces
            .keys()
            .filter(|ns| {
                ctx.policies
                    .anti_affinity_group(ns)
                    .is_some_and(|g| g.eq_ignore_ascii_case(group))
            })
            .count();
        if n > 0 {
            counts.insert(i, n);
        }
    }
    counts
}

/// Step 4, `filterAntiAffinityGroupOwnedBrokers`: with failure domains, keep the domains owning the fewest
/// namespaces of the group; then keep brokers owning none if there are any, else those owning the fewest.
pub fn filter_anti_affinity(
    ctx: &PlacementContext<'_>,
    bundle: &str,
    candidates: &mut Vec<usize>,
) -> Option<String> {
    let group = ctx.policies.anti_affinity_group(namespace_of(bundle))?;
    if candidates.is_empty() {
        return None;
    }
    let counts = anti_affinity_counts(ctx, group);
    let count = |i: &usize| counts.get(i).copied().unwrap_or(0);
    if ctx.settings.failure_domains_enabled {
        let mut per_domain: BTreeMap<&str, usize> = BTreeMap::new();
        for i in candidates.iter() {
            *per_domain
                .entry(ctx.policies.domain_of(ctx.brokers[*i].id))
                .or_insert(0) += count(i);
        }
        if let Some(least) = per_domain.values().min().copied() {
            candidates.retain(|i| per_domain[ctx.policies.domain_of(ctx.brokers[*i].id)] == least);
        }
    }
    let before = candidates.len();
    if candidates.iter().any(|i| count(i) == 0) {
        candidates.retain(|i| count(i) == 0);
    } else if let Some(least) = candidates.iter().map(count).min() {
        candidates.retain(|i| count(i) == least);
    }
    Some(format!(
        "anti-affinity group {group}: {} of {before} broker(s) own the fewest namespaces of the group",
        candidates.len()
    ))
}

/// `shouldAntiAffinityNamespaceUnload` (shedding step 4c): an unload of a namespace with an anti-affinity group
/// is allowed when some candidate owns none of the group, or the current owner owns more than the least; else
/// only when not every candidate owns exactly the least.
pub fn anti_affinity_allows_unload(
    ctx: &PlacementContext<'_>,
    bundle: &str,
    source: &str,
    candidates: &[usize],
) -> Result<(), String> {
    let Some(group) = ctx.policies.anti_affinity_group(namespace_of(bundle)) else {
        return Ok(());
    };
    let counts = anti_affinity_counts(ctx, group);
    let count = |i: &usize| counts.get(i).copied().unwrap_or(0);
    let least = candidates.iter().map(count).min().unwrap_or(0);
    let current = ctx.index_of(source).map_or(0, |i| count(&i));
    if least == 0 || current > least {
        return Ok(());
    }
    if candidates.iter().all(|i| count(i) == least) {
        return Err(format!(
            "no unload: anti-affinity group {group}: every candidate, including {source}, owns {least} namespace(s) of the group"
        ));
    }
    Ok(())
}

/// Step 5, `removeMostServicingBrokersForNamespace` (when `loadBalancerDistributeBundlesEvenlyEnabled` or for
/// `pulsar/system`): keep the brokers owning (or preallocated) the fewest bundles of the namespace.
pub fn filter_distribute_evenly(
    ctx: &PlacementContext<'_>,
    bundle: &str,
    candidates: &mut Vec<usize>,
) -> Option<String> {
    let ns = namespace_of(bundle);
    let system = ns == "pulsar/system";
    if !(ctx.settings.load_balancer_distribute_bundles_evenly_enabled || system)
        || candidates.is_empty()
    {
        return None;
    }
    let index = ctx.ownership();
    let count = |i: &usize| index[*i].get(ns).copied().unwrap_or(0);
    let least = candidates.iter().map(count).min().unwrap_or(0);
    let before = candidates.len();
    candidates.retain(|i| count(i) <= least);
    Some(format!(
        "even distribution{}: {} of {before} broker(s) own the fewest ({least}) bundles of {ns}",
        if system { " (system namespace)" } else { "" },
        candidates.len()
    ))
}

/// Step 6a, `BrokerLoadManagerClassFilter`: drop brokers whose `loadManagerClassName` differs from ours (a
/// broker that does not report one is dropped too).
pub fn filter_load_manager_class(
    ctx: &PlacementContext<'_>,
    candidates: &mut Vec<usize>,
) -> Option<String> {
    let before = candidates.len();
    candidates.retain(|i| ctx.brokers[*i].class_ok);
    (candidates.len() != before).then(|| {
        format!(
            "{} broker(s) run another load manager than {}",
            before - candidates.len(),
            ctx.settings.load_manager_class_name.class_name()
        )
    })
}

/// A parsed broker version: numeric core, pre-release (sorts before the release), build metadata ignored.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Version {
    core: (u64, u64, u64),
    release: bool,
    pre: Vec<String>,
}

fn parse_version(text: &str) -> Option<Version> {
    let text = text.split('+').next()?;
    let (core, pre) = match text.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (text, None),
    };
    let mut parts = core.split('.').map(|p| p.parse::<u64>());
    let major = parts.next()?.ok()?;
    let minor = parts.next()?.ok()?;
    let patch = parts.next()?.ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some(Version {
        core: (major, minor, patch),
        release: pre.is_none(),
        pre: pre
            .map(|p| p.split('.').map(str::to_owned).collect())
            .unwrap_or_default(),
    })
}

/// Step 6b, `BrokerVersionFilter` (only with `preferLaterVersions`): keep the brokers running the latest
/// version. A missing or unparsable version is an error, on which Pulsar resets the candidates.
pub fn filter_version(
    ctx: &PlacementContext<'_>,
    candidates: &mut Vec<usize>,
) -> Result<Option<String>, String> {
    if !ctx.settings.prefer_later_versions || candidates.is_empty() {
        return Ok(None);
    }
    let mut versions = Vec::with_capacity(candidates.len());
    for i in candidates.iter() {
        let b = &ctx.brokers[*i];
        let v = b
            .version
            .and_then(parse_version)
            .ok_or_else(|| format!("broker {} reports no usable version", b.id))?;
        versions.push(v);
    }
    let latest = versions.iter().max().cloned().expect("non-empty");
    let before = candidates.len();
    let mut k = 0;
    candidates.retain(|_| {
        let keep = versions[k] == latest;
        k += 1;
        keep
    });
    Ok((candidates.len() != before).then(|| {
        format!(
            "{} broker(s) run an older version",
            before - candidates.len()
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_order() {
        let v = |s| parse_version(s).unwrap();
        assert!(v("3.0.2") > v("3.0.1"));
        assert!(v("3.1.0") > v("3.0.10"));
        assert!(v("3.0.0") > v("3.0.0-SNAPSHOT"));
        assert_eq!(v("3.0.0+build7"), v("3.0.0"));
        assert!(parse_version("3.0").is_none());
        assert!(parse_version("x").is_none());
    }
}
