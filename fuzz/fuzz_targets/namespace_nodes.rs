//! The namespace and ownership nodes, each read as the runtime reads it, tried on every input:
//!
//! * `LeaderBroker` (`/loadbalance/leader`) and its `broker_id()` fallback for the ≤ 3.1 form;
//! * `NamespaceEphemeralData` (`/namespace/<ns>/<range>`, the ownership node);
//! * `BundlesData` and its decoding into `NamespaceBundles` (`from_bundles_data`), as `runtime::namespaces`
//!   decodes the `bundles` of `/admin/local-policies/<ns>` (`LocalPolicies`) and of `/admin/policies/<ns>`
//!   (read as a JSON value, then its `bundles` member);
//! * a failure domain (`model::nodes::parse_failure_domain`) and the isolation policies map
//!   (`/admin/clusters/<c>/namespaceIsolationPolicies`: a JSON map of `IsolationData`, each compiled), the
//!   two halves of `runtime::cluster_policies::read_cluster_policies` without the store around them.
//!
//! Every type loadmgr writes must round-trip; decoded bundles must be a partition of the hash space that
//! re-encodes to boundaries that decode to the same bundles.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use loadmgr::bundle::NamespaceBundles;
use loadmgr::core::snapshot::IsolationData;
use loadmgr::model::nodes::parse_failure_domain;
use loadmgr::model::{BundlesData, LeaderBroker, LocalPolicies, NamespaceEphemeralData};
use loadmgr_fuzz::read_and_round_trip;

fn check_bundles(data: &BundlesData) {
    let Ok(bundles) = NamespaceBundles::from_bundles_data(data) else {
        return;
    };
    let mut next = 0u64;
    for range in bundles.ranges() {
        assert_eq!(
            range.lower(),
            next,
            "bundles leave a gap or overlap: {data:?}"
        );
        assert!(
            range.lower() < range.upper(),
            "empty bundle {range} in {data:?}"
        );
        next = range.upper();
    }
    assert_eq!(
        next, 0xffff_ffff,
        "bundles do not end at 0xffffffff: {data:?}"
    );
    let again = NamespaceBundles::from_bundles_data(&bundles.to_bundles_data())
        .expect("loadmgr's own BundlesData decodes");
    assert_eq!(again, bundles);
}

fuzz_target!(|data: &[u8]| {
    if let Some(leader) = read_and_round_trip::<LeaderBroker>("LeaderBroker", data) {
        let _ = leader.broker_id();
    }
    let _ = read_and_round_trip::<NamespaceEphemeralData>("NamespaceEphemeralData", data);
    if let Some(b) = read_and_round_trip::<BundlesData>("BundlesData", data) {
        check_bundles(&b);
    }
    if let Some(local) = read_and_round_trip::<LocalPolicies>("LocalPolicies", data) {
        check_bundles(&local.bundles);
    }
    if let Ok(policies) = serde_json::from_slice::<serde_json::Value>(data) {
        if let Some(b) = policies.get("bundles").filter(|b| !b.is_null()) {
            if let Ok(b) = serde_json::from_value::<BundlesData>(b.clone()) {
                check_bundles(&b);
            }
        }
    }
    let _ = parse_failure_domain(data);
    if let Ok(map) = serde_json::from_slice::<BTreeMap<String, serde_json::Value>>(data) {
        for (name, value) in map {
            if let Ok(d) = serde_json::from_value::<IsolationData>(value) {
                if let Ok(policy) = d.compile(&name) {
                    let _ = policy.is_primary("broker-1.example");
                    let _ = policy.is_secondary("broker-1.example");
                }
            }
        }
    }
});
