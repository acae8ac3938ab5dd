//! Every metadata-store path loadmgr reads or writes, in one place.
//!
//! The first group is Pulsar's own layout (the table in `docs/compatibility.md`, "The paths"), so Java
//! brokers, `pulsar-admin`, `pulsar-perf monitor-brokers` and `zkCli.sh` see what loadmgr writes and loadmgr
//! sees what they write. The second group lives under [`LOADMGR_ROOT`] and is loadmgr's own; each node there
//! has a JSON schema in `metadata-schemas/`.
//!
//! | path | kind | written by | payload |
//! |---|---|---|---|
//! | `/loadbalance/brokers/<broker id>` | ephemeral | each broker (its registration lock) | `LocalBrokerData` |
//! | `/loadbalance/leader` | ephemeral | the elected leader | `LeaderBroker` |
//! | `/loadbalance/bundle-data/<bundle>` | persistent | leader (flush) | `BundleData` |
//! | `/loadbalance/broker-time-average/<broker id>` | persistent | each broker at start (zeros, create-only), leader (flush) | `TimeAverageBrokerData` |
//! | `/loadbalance/resource-quota/<bundle>` (3.2+), `/loadbalance/resource-quota/namespace/<bundle>` (older) | persistent | admins; read only | `ResourceQuota` |
//! | `/namespace/<bundle>` | ephemeral | the owning broker | `NamespaceEphemeralData` |
//! | `/admin/policies/<tenant>` | persistent | `loadmgr admin namespaces create` when missing | `TenantInfo` |
//! | `/admin/policies/<namespace>` | persistent | `loadmgr admin namespaces create` | `Policies` (its `bundles`) |
//! | `/admin/local-policies/<namespace>` | persistent | `namespaces create`; leader on split | `LocalPolicies` |
//! | `/admin/configuration` | persistent | `loadmgr admin shedding enable/disable`, `pulsar-admin brokers update-dynamic-config` | JSON map key → string |
//! | `/loadmgr/assignments/<bundle>` | persistent | leader (fenced) | `BundleAssignment` |
//! | `/loadmgr/requests/request-<seq>` | persistent sequential | `loadmgr admin` and brokers ask; the leader (or the target broker) answers in place | `AdminRequest` |
//! | `/loadmgr/leader-status` | persistent | leader (fenced, every flush) | `LeaderStatus` |
//!
//! `<bundle>` is the full bundle name `tenant/ns/0xLLLLLLLL_0xUUUUUUUU` (V1 namespaces have one more segment),
//! so the bundle paths nest as `<tenant>/<ns>/<range>`.

use crate::bundle::{BundleName, BundleRange, NamespaceName};

/// Parent of the broker registrations.
pub const BROKERS: &str = "/loadbalance/brokers";
/// The leader-election node.
pub const LEADER: &str = "/loadbalance/leader";
/// Parent of the flushed bundle data.
pub const BUNDLE_DATA: &str = "/loadbalance/bundle-data";
/// Parent of the flushed broker time averages.
pub const BROKER_TIME_AVERAGE: &str = "/loadbalance/broker-time-average";
/// Parent of the bundle resource quotas (3.2+ layout).
pub const RESOURCE_QUOTA: &str = "/loadbalance/resource-quota";
/// Parent of the bundle resource quotas in the layout of Pulsar 2.x–3.1.
pub const RESOURCE_QUOTA_LEGACY: &str = "/loadbalance/resource-quota/namespace";
/// Parent of the ownership nodes (Pulsar's `OWNER_INFO_ROOT`).
pub const OWNERSHIP: &str = "/namespace";
/// Parent of the namespace policies (and tenants' `TenantInfo`).
pub const POLICIES: &str = "/admin/policies";
/// Parent of the namespace local policies.
pub const LOCAL_POLICIES: &str = "/admin/local-policies";
/// Pulsar's dynamic configuration (`DynamicConfigurationResources`): a JSON object of key → string value.
pub const DYNAMIC_CONFIGURATION: &str = "/admin/configuration";
/// Partitioned topics' metadata: `/admin/partitioned-topics/<tenant>/<ns>/<domain>/<encoded name>`.
pub const PARTITIONED_TOPICS: &str = "/admin/partitioned-topics";
/// Everything loadmgr adds lives below this node.
pub const LOADMGR_ROOT: &str = "/loadmgr";
/// Parent of the assignment records (intent and desired owner of every assigned bundle).
pub const ASSIGNMENTS: &str = "/loadmgr/assignments";
/// Parent of every broker's inbox: `/loadmgr/inbox/<broker>/<bundle>` exists while the bundle's record names
/// the broker as its destination, or as the source of an unfinished move. The leader writes an entry in the
/// same transaction as the record, so a broker watches its own inbox, not every record.
pub const INBOX: &str = "/loadmgr/inbox";
/// Parent of every cluster's configuration (Pulsar's `ClusterResources`).
pub const CLUSTERS: &str = "/admin/clusters";
/// Parent of the request nodes.
pub const REQUESTS: &str = "/loadmgr/requests";
/// Prefix of a request node; the store appends a 10-digit sequence number.
pub const REQUEST_PREFIX: &str = "/loadmgr/requests/request-";
/// The leader's counters, rewritten every flush.
pub const LEADER_STATUS: &str = "/loadmgr/leader-status";

/// `/loadbalance/brokers/<broker>`.
pub fn broker(broker: &str) -> String {
    format!("{BROKERS}/{broker}")
}

/// `/loadbalance/bundle-data/<bundle>`.
pub fn bundle_data(bundle: &str) -> String {
    format!("{BUNDLE_DATA}/{bundle}")
}

/// `/loadbalance/broker-time-average/<broker>`.
pub fn time_average(broker: &str) -> String {
    format!("{BROKER_TIME_AVERAGE}/{broker}")
}

/// `/loadbalance/resource-quota/<bundle>`.
pub fn resource_quota(bundle: &str) -> String {
    format!("{RESOURCE_QUOTA}/{bundle}")
}

/// `/loadbalance/resource-quota/namespace/<bundle>` (Pulsar ≤ 3.1).
pub fn resource_quota_legacy(bundle: &str) -> String {
    format!("{RESOURCE_QUOTA_LEGACY}/{bundle}")
}

/// `/namespace/<bundle>`.
pub fn ownership(bundle: &str) -> String {
    format!("{OWNERSHIP}/{bundle}")
}

/// `/namespace/<namespace>`: the parent of a namespace's ownership nodes.
pub fn ownership_namespace(namespace: &str) -> String {
    format!("{OWNERSHIP}/{namespace}")
}

/// `/admin/policies/<namespace>` (or `/admin/policies/<tenant>` for a tenant).
pub fn policies(namespace: &str) -> String {
    format!("{POLICIES}/{namespace}")
}

/// `/admin/local-policies/<namespace>`.
pub fn local_policies(namespace: &str) -> String {
    format!("{LOCAL_POLICIES}/{namespace}")
}

/// `/admin/clusters/<cluster>`.
pub fn cluster(cluster: &str) -> String {
    format!("{CLUSTERS}/{cluster}")
}

/// One node holding a cluster's namespace isolation policies: a JSON map policy name → `NamespaceIsolationData`
/// (Pulsar's `NamespaceResources.IsolationPolicyResources`).
pub fn isolation_policies(cluster: &str) -> String {
    format!("{CLUSTERS}/{cluster}/namespaceIsolationPolicies")
}

/// The parent of a cluster's failure-domain nodes, `<name>` → `{"brokers": [...]}` (Pulsar's
/// `ClusterResources.FailureDomainResources`).
pub fn failure_domains(cluster: &str) -> String {
    format!("{CLUSTERS}/{cluster}/failureDomain")
}

/// `/loadmgr/assignments/<bundle>`.
pub fn assignment(bundle: &str) -> String {
    format!("{ASSIGNMENTS}/{bundle}")
}

/// `/loadmgr/inbox/<broker>`: what a broker watches and scans.
pub fn inbox_of(broker: &str) -> String {
    format!("{INBOX}/{broker}")
}

/// `/loadmgr/inbox/<broker>/<bundle>`, the bundle's name one node (`%` → `%25`, `/` → `%2F`): every entry of a
/// broker has the same parent, created once (a parent per namespace would cost a create, and on ZooKeeper a
/// failed transaction, for nearly every entry of a large cluster).
pub fn inbox(broker: &str, bundle: &str) -> String {
    format!(
        "{INBOX}/{broker}/{}",
        bundle.replace('%', "%25").replace('/', "%2F")
    )
}

/// The bundle of an inbox entry's node name (see [`inbox`]), when it names one.
pub fn inbox_bundle(name: &str) -> Option<BundleName> {
    BundleName::parse(&name.replace("%2F", "/").replace("%25", "%")).ok()
}

/// The text of `path` below `root` (`None` when `path` is not strictly below it).
pub fn below<'a>(root: &str, path: &'a str) -> Option<&'a str> {
    path.strip_prefix(root)?
        .strip_prefix('/')
        .filter(|rest| !rest.is_empty())
}

/// The bundle named by a node path below `root` (ownership, assignment, bundle-data, quota paths), when the
/// rest of the path is a valid full bundle name.
pub fn bundle_below(root: &str, path: &str) -> Option<BundleName> {
    BundleName::parse(below(root, path)?).ok()
}

/// The namespace named by a policies path below `root`, when the rest is a valid namespace name.
pub fn namespace_below(root: &str, path: &str) -> Option<NamespaceName> {
    NamespaceName::parse(below(root, path)?).ok()
}

/// Whether a node name is a bundle range (`0xLLLLLLLL_0xUUUUUUUU`).
pub fn is_range_segment(name: &str) -> bool {
    BundleRange::parse(name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pulsar_layout() {
        let b = "public/default/0x00000000_0x40000000";
        assert_eq!(broker("b1:8080"), "/loadbalance/brokers/b1:8080");
        assert_eq!(
            bundle_data(b),
            "/loadbalance/bundle-data/public/default/0x00000000_0x40000000"
        );
        assert_eq!(
            time_average("b1:8080"),
            "/loadbalance/broker-time-average/b1:8080"
        );
        assert_eq!(
            resource_quota(b),
            "/loadbalance/resource-quota/public/default/0x00000000_0x40000000"
        );
        assert_eq!(
            resource_quota_legacy(b),
            "/loadbalance/resource-quota/namespace/public/default/0x00000000_0x40000000"
        );
        assert_eq!(
            ownership(b),
            "/namespace/public/default/0x00000000_0x40000000"
        );
        assert_eq!(policies("public/default"), "/admin/policies/public/default");
        assert_eq!(
            local_policies("public/default"),
            "/admin/local-policies/public/default"
        );
        assert_eq!(
            assignment(b),
            "/loadmgr/assignments/public/default/0x00000000_0x40000000"
        );
        assert_eq!(failure_domains("c1"), "/admin/clusters/c1/failureDomain");
        for p in [
            BROKERS,
            LEADER,
            BUNDLE_DATA,
            OWNERSHIP,
            DYNAMIC_CONFIGURATION,
            ASSIGNMENTS,
            INBOX,
            REQUESTS,
            LEADER_STATUS,
        ] {
            crate::store::validate_path(p).unwrap();
        }
    }

    #[test]
    fn inbox_entries_name_their_bundle() {
        let entry = inbox("10.0.0.1:8080", "public/default/0x00000000_0x40000000");
        assert_eq!(
            entry,
            "/loadmgr/inbox/10.0.0.1:8080/public%2Fdefault%2F0x00000000_0x40000000"
        );
        crate::store::validate_path(&entry).unwrap();
        let name = below(&inbox_of("10.0.0.1:8080"), &entry).unwrap();
        let b = inbox_bundle(name).unwrap();
        assert_eq!(b.to_string(), "public/default/0x00000000_0x40000000");
        // Version 1 names (with a cluster) survive the round trip; a node that names no bundle is none.
        let v1 = inbox("b:1", "prop/cl/ns/0x00000000_0x40000000");
        let back = inbox_bundle(below(&inbox_of("b:1"), &v1).unwrap()).unwrap();
        assert_eq!(back.to_string(), "prop/cl/ns/0x00000000_0x40000000");
        assert!(inbox_bundle("not-a-bundle").is_none());
    }

    #[test]
    fn bundles_from_paths() {
        let name =
            bundle_below(OWNERSHIP, "/namespace/public/default/0x00000000_0x40000000").unwrap();
        assert_eq!(name.to_string(), "public/default/0x00000000_0x40000000");
        let v1 = bundle_below(
            ASSIGNMENTS,
            "/loadmgr/assignments/prop/cl/ns/0x00000000_0xffffffff",
        )
        .unwrap();
        assert_eq!(v1.namespace().cluster(), Some("cl"));
        assert!(bundle_below(OWNERSHIP, "/namespace/public/default").is_none());
        assert!(bundle_below(OWNERSHIP, "/namespace").is_none());
        assert!(bundle_below(OWNERSHIP, "/namespacex/a/b/0x0_0x1").is_none());
        assert_eq!(
            namespace_below(LOCAL_POLICIES, "/admin/local-policies/public/default")
                .unwrap()
                .to_string(),
            "public/default"
        );
        assert!(namespace_below(LOCAL_POLICIES, "/admin/local-policies/public").is_none());
        assert!(is_range_segment("0x00000000_0xffffffff"));
        assert!(!is_range_segment("default"));
    }
}
