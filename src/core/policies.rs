//! Namespace and cluster policies the placement filters read: namespace isolation policies (primary and
//! secondary brokers by regex, with `min_available` fail-over), anti-affinity groups, failure domains, bundle
//! boundaries and which bundles hold non-persistent topics.
//!
//! Rules (from `LoadManagerShared.applyNamespacePolicies`, `NamespaceIsolationPolicies`,
//! `MinAvailablePolicy`):
//! * Regexes are matched against the broker *host* (the broker id up to its last `:`) and must match the whole
//!   host (Java `Matcher.matches`).
//! * A namespace is isolated when some policy's namespace regexes match it; the first such policy in policy-name
//!   order applies (Java iterates its map; loadmgr documents name order).
//! * A broker is *shared* when no policy lists it as primary. Non-isolated namespaces only go to shared brokers.
//! * `min_available` fail-over: secondaries are added when fewer than `min_limit` primaries are available.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;

use super::{namespace_of, CoreError};
use crate::bundle::NamespaceBundles;

/// One namespace isolation policy (`NamespaceIsolationData`).
#[derive(Debug, Clone)]
pub struct IsolationPolicy {
    /// Policy name.
    pub name: String,
    /// Namespace regexes.
    pub namespaces: Vec<Regex>,
    /// Primary broker host regexes.
    pub primary: Vec<Regex>,
    /// Secondary broker host regexes.
    pub secondary: Vec<Regex>,
    /// `min_available` policy's `min_limit`: fewer available primaries than this adds the secondaries.
    pub min_limit: usize,
}

fn full(policy: &str, pattern: &str) -> Result<Regex, CoreError> {
    Regex::new(&format!("^(?:{pattern})$")).map_err(|e| CoreError::InvalidRegex {
        policy: policy.to_owned(),
        pattern: pattern.to_owned(),
        message: e.to_string(),
    })
}

impl IsolationPolicy {
    /// Compiles a policy; patterns must match whole names.
    pub fn new(
        name: &str,
        namespaces: &[String],
        primary: &[String],
        secondary: &[String],
        min_limit: usize,
    ) -> Result<Self, CoreError> {
        let compile = |v: &[String]| {
            v.iter()
                .map(|p| full(name, p))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            name: name.to_owned(),
            namespaces: compile(namespaces)?,
            primary: compile(primary)?,
            secondary: compile(secondary)?,
            min_limit,
        })
    }

    fn applies_to(&self, namespace: &str) -> bool {
        self.namespaces.iter().any(|r| r.is_match(namespace))
    }

    /// Whether `host` is a primary broker of this policy.
    pub fn is_primary(&self, host: &str) -> bool {
        self.primary.iter().any(|r| r.is_match(host))
    }

    /// Whether `host` is a secondary broker of this policy.
    pub fn is_secondary(&self, host: &str) -> bool {
        self.secondary.iter().any(|r| r.is_match(host))
    }
}

/// Per-namespace policies loadmgr reads.
#[derive(Debug, Clone, Default)]
pub struct NamespacePolicy {
    /// The namespace's bundles, when known.
    pub bundles: Option<NamespaceBundles>,
    /// `namespaceAntiAffinityGroup` of its local policies.
    pub anti_affinity_group: Option<String>,
}

/// Everything policy-like the placement pipeline consults.
#[derive(Debug, Clone, Default)]
pub struct ClusterPolicies {
    /// By namespace name.
    pub namespaces: BTreeMap<String, NamespacePolicy>,
    /// Isolation policies, in name order.
    pub isolation: Vec<IsolationPolicy>,
    /// Broker id → failure domain (brokers without one are in `default`).
    pub domains: BTreeMap<String, String>,
    /// Bundles known to hold non-persistent topics (only brokers with non-persistent topics enabled may own
    /// them).
    pub non_persistent_bundles: BTreeSet<String>,
}

/// The host part of a broker id (`host:port` → `host`; ids without `:` are their own host).
pub fn broker_host(broker: &str) -> &str {
    broker.rsplit_once(':').map_or(broker, |(h, _)| h)
}

impl ClusterPolicies {
    /// No policies at all.
    pub fn none() -> Self {
        Self::default()
    }

    /// The isolation policy governing a namespace, if any.
    pub fn isolation_for(&self, namespace: &str) -> Option<&IsolationPolicy> {
        self.isolation.iter().find(|p| p.applies_to(namespace))
    }

    /// Whether no policy lists the broker's host as primary.
    pub fn is_shared_broker(&self, broker: &str) -> bool {
        if self.isolation.is_empty() {
            return true;
        }
        let host = broker_host(broker);
        !self.isolation.iter().any(|p| p.is_primary(host))
    }

    /// The anti-affinity group of the bundle's namespace.
    pub fn anti_affinity_group(&self, namespace: &str) -> Option<&str> {
        self.namespaces
            .get(namespace)
            .and_then(|p| p.anti_affinity_group.as_deref())
    }

    /// The failure domain of a broker (`default` when unset).
    pub fn domain_of(&self, broker: &str) -> &str {
        self.domains.get(broker).map_or("default", String::as_str)
    }

    /// Whether the bundle's namespace has an isolation policy or an anti-affinity group.
    pub fn has_policies(&self, bundle: &str) -> bool {
        let ns = namespace_of(bundle);
        self.isolation_for(ns).is_some() || self.anti_affinity_group(ns).is_some()
    }

    /// Number of bundles of a namespace, when its boundaries are known.
    pub fn bundle_count(&self, namespace: &str) -> Option<usize> {
        self.namespaces
            .get(namespace)
            .and_then(|p| p.bundles.as_ref())
            .map(NamespaceBundles::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn isolation_policy_matching_is_whole_host() {
        let p = IsolationPolicy::new(
            "p1",
            &s(&["tenant/ns-.*"]),
            &s(&["broker-[12]"]),
            &s(&["broker-3"]),
            1,
        )
        .unwrap();
        let policies = ClusterPolicies {
            isolation: vec![p],
            ..Default::default()
        };
        let iso = policies.isolation_for("tenant/ns-a").unwrap();
        assert!(iso.is_primary("broker-1"));
        assert!(!iso.is_primary("broker-12"), "whole-host match");
        assert!(iso.is_secondary("broker-3"));
        assert!(policies.isolation_for("other/ns").is_none());
        assert!(!policies.is_shared_broker("broker-2:8080"));
        assert!(
            policies.is_shared_broker("broker-3:8080"),
            "secondaries are still shared"
        );
        assert_eq!(broker_host("[::1]:8080"), "[::1]");
        let err = IsolationPolicy::new("bad", &s(&["("]), &[], &[], 1).unwrap_err();
        assert!(err.to_string().contains("bad"), "{err}");
    }
}
