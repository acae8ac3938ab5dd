//! The candidate filters of Pulsar's modular placement pipeline (`ModularLoadManagerImpl.selectBroker`), in
//! its order. Each works on a candidate list of broker indices into [`PlacementContext::brokers`] (broker-id
//! order) and returns a note for the reason text.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::PlacementContext;
use crate::core::namespace_of;

/// Step 2, `LoadManagerShared.applyNamespacePolicies`: isolation policies (primaries, plus secondaries when
/// fewer than `min_limit` primaries are available), else topic-kind capability and shared brokers only.
pub fn namespace_policy_candidates(
    ctx: &PlacementContext<'_>,
    bundle: &str,
) -> (Vec<usize>, String) {
    namespace_policy_candidates_among(ctx, bundle, 0..ctx.brokers.len())
}

/// `applyNamespacePolicies` over the given brokers only (ascending indices), as the extensible
/// `BrokerIsolationPoliciesFilter` applies it to what the earlier filters left: the `min_available` fail-over
/// counts the primaries among them.
pub fn namespace_policy_candidates_among(
    ctx: &PlacementContext<'_>,
    bundle: &str,
    among: impl IntoIterator<Item = usize>,
) -> (Vec<usize>, String) {
    let ns = namespace_of(bundle);
    let non_persistent = ctx.policies.non_persistent_bundles.contains(bundle);
    match ctx.policies.isolation_for(ns) {
        Some(policy) => {
            let mut primaries = Vec::new();
            let mut secondaries = Vec::new();
            for i in among {
                let b = &ctx.brokers[i];
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
            let list: Vec<usize> = among
                .into_iter()
                .filter(|i| {
                    let b = &ctx.brokers[*i];
                    let capable = if non_persistent {
                        b.non_persistent
                    } else {
                        b.persistent
                    };
                    capable && b.shared
                })
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

/// The extensible `BrokerMaxTopicCountFilter`: drop brokers whose reported topic count (`BrokerLoadData.topics`,
/// no preallocations) is at least `loadBalancerBrokerMaxTopics`. Unlike step 3 there is no fallback when every
/// broker is dropped.
pub fn filter_max_topics_extensible(
    ctx: &PlacementContext<'_>,
    candidates: &mut Vec<usize>,
) -> Option<String> {
    let max = ctx.settings.load_balancer_broker_max_topics as i64;
    let before = candidates.len();
    candidates.retain(|i| ctx.brokers[*i].entry.local.num_topics < max);
    (candidates.len() != before).then(|| {
        format!(
            "{} broker(s) at or over {max} topics",
            before - candidates.len()
        )
    })
}

/// Namespaces of the same anti-affinity group each broker owns (by bundles or preallocations). Brokers
/// owning none are absent.
pub fn anti_affinity_counts(ctx: &PlacementContext<'_>, group: &str) -> BTreeMap<usize, usize> {
    let mut counts = BTreeMap::new();
    for i in 0..ctx.brokers.len() {
        let n = ctx
            .namespaces_of(i)
            .into_iter()
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
    let count = |i: &usize| ctx.namespace_bundles(*i, ns);
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

/// A broker version as jsemver 0.9 (`Version.valueOf`, Pulsar's parser) reads it: a numeric core, pre-release
/// identifiers (empty for a release), build metadata dropped. Equality and order ignore build metadata, as
/// jsemver's `equals`/`compareTo` do (`BUILD_AWARE_ORDER` only breaks ties between versions that are equal here,
/// so it never changes which brokers the filter keeps).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    core: (i32, i32, i32),
    pre: Vec<String>,
}

impl Ord for Version {
    /// Semantic-versioning precedence as jsemver computes it: core numbers, then a release above any pre-release,
    /// then pre-release identifiers pairwise (both `Integer.parseInt`-able: numerically, otherwise by string
    /// order, so numeric identifiers rank below alphanumeric ones), then the longer identifier list.
    fn cmp(&self, other: &Self) -> Ordering {
        self.core
            .cmp(&other.core)
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self
                    .pre
                    .iter()
                    .zip(&other.pre)
                    .map(|(a, b)| match (a.parse::<i32>(), b.parse::<i32>()) {
                        (Ok(x), Ok(y)) => x.cmp(&y),
                        _ => a.cmp(b),
                    })
                    .find(|o| o.is_ne())
                    .unwrap_or_else(|| self.pre.len().cmp(&other.pre.len())),
            })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn is_identifier_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

/// jsemver's `<numeric identifier>`: `0` or digits without a leading zero.
fn is_numeric_identifier(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|c| c.is_ascii_digit()) && (id == "0" || !id.starts_with('0'))
}

/// Parses `major.minor.patch[-pre][+build]` strictly (jsemver): core numbers without leading zeros that fit an
/// `int`, non-empty `[0-9A-Za-z-]` identifiers, all-digit pre-release identifiers without leading zeros. `None`
/// is what Pulsar reports as a bad version.
fn parse_version(text: &str) -> Option<Version> {
    let (text, build) = match text.split_once('+') {
        Some((t, b)) => (t, Some(b)),
        None => (text, None),
    };
    if let Some(build) = build {
        if !build
            .split('.')
            .all(|id| !id.is_empty() && id.bytes().all(is_identifier_char))
        {
            return None;
        }
    }
    let (core, pre) = match text.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (text, None),
    };
    let mut numbers = core.split('.').map(|p| {
        if is_numeric_identifier(p) {
            p.parse::<i32>().ok()
        } else {
            None
        }
    });
    let major = numbers.next()??;
    let minor = numbers.next()??;
    let patch = numbers.next()??;
    if numbers.next().is_some() {
        return None;
    }
    let mut identifiers = Vec::new();
    if let Some(pre) = pre {
        for id in pre.split('.') {
            let valid = !id.is_empty()
                && id.bytes().all(is_identifier_char)
                && (id.bytes().any(|c| !c.is_ascii_digit()) || is_numeric_identifier(id));
            if !valid {
                return None;
            }
            identifiers.push(id.to_owned());
        }
    }
    Some(Version {
        core: (major, minor, patch),
        pre: identifiers,
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

    #[test]
    fn pre_release_precedence_and_strict_parsing_follow_jsemver() {
        let v = |s| parse_version(s).unwrap();
        // Numeric identifiers compare as numbers.
        assert!(v("3.0.0-rc.10") > v("3.0.0-rc.9"));
        // Numeric identifiers rank below alphanumeric ones; a longer list wins when the prefix is equal.
        assert!(v("3.0.0-rc.1") < v("3.0.0-rc.a"));
        assert!(v("3.0.0-alpha") < v("3.0.0-alpha.1"));
        assert!(v("3.0.0-alpha.beta") < v("3.0.0-beta"));
        // Build metadata is ignored by `equals`.
        assert_eq!(v("3.0.0-rc.1+b1"), v("3.0.0-rc.1+b2"));
        // Leading zeros and empty identifiers are parse errors.
        for bad in [
            "3.01.0",
            "03.0.0",
            "3.0.00",
            "3.0.0-rc.01",
            "3.0.0-",
            "3.0.0-rc..1",
            "3.0.0+",
            "3.0.0-rc_1",
        ] {
            assert!(parse_version(bad).is_none(), "{bad}");
        }
        // Alphanumeric identifiers may start with a zero; build identifiers may have leading zeros.
        assert!(parse_version("3.0.0-0abc+001").is_some());
        // Integer.parseInt overflow in the core is an error.
        assert!(parse_version("2147483648.0.0").is_none());
    }
}
