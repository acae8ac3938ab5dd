//! Operations of `loadmgr admin`, as a library: reads go straight to the store; decisions (lookups, unloads,
//! splits) are requests the leader executes ([`super::requests`]); namespaces and the dynamic configuration are
//! written as Pulsar's admin API writes them.

use std::time::Duration;

use tokio::time::Instant;

use super::namespaces::{self, NamespaceBundlesInfo};
use super::requests::{self, LookupResult};
use super::RuntimeError;
use crate::bundle::{BundleName, BundleRange, NamespaceBundles, NamespaceName, TopicName};
use crate::model::json::to_json_vec;
use crate::model::load_report::parse_report;
use crate::model::records::{BundleAssignment, LeaderStatus, RequestOp, RequestResponse};
use crate::model::{LeaderBroker, LocalBrokerData};
use crate::paths;
use crate::store::{CreateOptions, DynStore, Error, MetadataStoreExt, CREATE_ONLY};

/// One registered broker.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerEntry {
    /// Broker id.
    pub id: String,
    /// Its report, or why it could not be read.
    pub report: Result<LocalBrokerData, String>,
}

/// Every registered broker, in id order.
pub async fn brokers(store: &DynStore) -> Result<Vec<BrokerEntry>, RuntimeError> {
    let mut out = Vec::new();
    for id in store.get_children(paths::BROKERS).await? {
        let report = match store.get(&paths::broker(&id)).await? {
            Some(g) => parse_report(&g.value),
            None => continue,
        };
        out.push(BrokerEntry { id, report });
    }
    Ok(out)
}

/// The leader and its last status, if any.
pub async fn leader(
    store: &DynStore,
) -> Result<Option<(LeaderBroker, Option<LeaderStatus>)>, RuntimeError> {
    let Some(leader) = requests::current_leader(store).await? else {
        return Ok(None);
    };
    let status = match store.get_json::<LeaderStatus>(paths::LEADER_STATUS).await {
        Ok(s) => s
            .map(|(s, _)| s)
            .filter(|s| Some(s.leader.as_str()) == leader.broker_id()),
        Err(_) => None,
    };
    Ok(Some((leader, status)))
}

/// A broker's raw report (the node's text).
pub async fn load_report(store: &DynStore, broker: &str) -> Result<Vec<u8>, RuntimeError> {
    match store.get(&paths::broker(broker)).await? {
        Some(g) => Ok(g.value),
        None => {
            let known = store.get_children(paths::BROKERS).await?;
            Err(RuntimeError::Invalid(format!(
                "broker {broker} is not registered (registered: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )))
        }
    }
}

fn namespace(name: &str) -> Result<NamespaceName, RuntimeError> {
    NamespaceName::parse(name).map_err(|e| RuntimeError::Invalid(format!("namespace {name}: {e}")))
}

/// Creates a namespace with `bundles` bundles (see [`namespaces::create_namespace`]).
pub async fn create_namespace(
    store: &DynStore,
    name: &str,
    bundles: u64,
    cluster: Option<&str>,
) -> Result<NamespaceBundles, RuntimeError> {
    namespaces::create_namespace(store, &namespace(name)?, bundles, cluster).await
}

/// Creates namespace `name` with the given bundles (Pulsar's `BundlesData` of a create request).
pub async fn create_namespace_with(
    store: &DynStore,
    name: &str,
    bundles: NamespaceBundles,
    cluster: Option<&str>,
) -> Result<NamespaceBundles, RuntimeError> {
    namespaces::create_namespace_with(store, &namespace(name)?, bundles, cluster).await
}

/// One bundle of a namespace with its owner and record.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleRow {
    /// Full bundle name.
    pub bundle: String,
    /// The owner, when owned (with `disabled` while it unloads).
    pub owner: Option<(String, bool)>,
    /// The assignment record, when the leader assigned it.
    pub record: Option<BundleAssignment>,
}

/// A namespace's bundles with owners and records.
pub async fn namespace_bundles(
    store: &DynStore,
    name: &str,
) -> Result<(NamespaceBundlesInfo, Vec<BundleRow>), RuntimeError> {
    let ns = namespace(name)?;
    let info = namespaces::read_bundles(store, &ns)
        .await?
        .ok_or_else(|| RuntimeError::Invalid(format!("namespace {ns} does not exist")))?;
    let mut rows = Vec::new();
    for bundle in info.bundle_names() {
        let owner = requests::read_owner(store, &bundle)
            .await?
            .map(|(o, d, _)| (o, d.disabled));
        let record = match store
            .get_json::<BundleAssignment>(&paths::assignment(&bundle))
            .await
        {
            Ok(r) => r.map(|(r, _)| r),
            Err(Error::Content { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        rows.push(BundleRow {
            bundle,
            owner,
            record,
        });
    }
    Ok((info, rows))
}

/// The full bundle name for `namespace` and `range`, checked against the namespace's bundles.
pub async fn bundle_name(
    store: &DynStore,
    namespace_name: &str,
    range: &str,
) -> Result<String, RuntimeError> {
    let ns = namespace(namespace_name)?;
    let range = BundleRange::parse(range)
        .map_err(|e| RuntimeError::Invalid(format!("Invalid bundle range {range}: {e}")))?;
    let info = namespaces::read_bundles(store, &ns)
        .await?
        .ok_or_else(|| RuntimeError::Invalid(format!("namespace {ns} does not exist")))?;
    if !info.bundles.contains_range(range) {
        return Err(RuntimeError::Invalid(format!(
            "{range} is not a bundle of {ns}; its bundles are {}",
            info.bundles
                .ranges()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(BundleName::new(ns, range).to_string())
}

/// A completed move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// Full bundle name.
    pub bundle: String,
    /// Previous owner.
    pub source: String,
    /// New owner.
    pub destination: String,
}

fn moves_of(response: &RequestResponse) -> Vec<(String, String, String)> {
    let one = |v: &serde_json::Value| {
        Some((
            v.get("bundle")?.as_str()?.to_owned(),
            v.get("source")?.as_str()?.to_owned(),
            v.get("destination")?.as_str()?.to_owned(),
        ))
    };
    match &response.result {
        serde_json::Value::Array(items) => items.iter().filter_map(one).collect(),
        v => one(v).into_iter().collect(),
    }
}

/// Unloads one bundle (to `destination`, or where placement says) or every owned bundle of a namespace, and
/// waits until each destination holds its bundle.
pub async fn unload(
    store: &DynStore,
    namespace_name: &str,
    range: Option<&str>,
    destination: Option<&str>,
    requester: &str,
    timeout: Duration,
) -> Result<(String, Vec<Moved>), RuntimeError> {
    let deadline = Instant::now() + timeout;
    let op = match range {
        Some(r) => RequestOp::Unload {
            bundle: bundle_name(store, namespace_name, r).await?,
            destination: destination.map(str::to_owned),
        },
        None => {
            if destination.is_some() {
                return Err(RuntimeError::Invalid(
                    "--destination-broker needs --bundle (a namespace's bundles go where placement says)"
                        .into(),
                ));
            }
            RequestOp::UnloadNamespace {
                namespace: namespace(namespace_name)?.to_string(),
            }
        }
    };
    let response = requests::submit(store, op, None, requester, timeout).await?;
    let mut done = Vec::new();
    for (bundle, source, dest) in moves_of(&response) {
        let d = dest.clone();
        requests::wait_owned(store, &bundle, Some(&dest), move |o| o == d, deadline).await?;
        done.push(Moved {
            bundle,
            source,
            destination: dest,
        });
    }
    Ok((response.message, done))
}

/// What `namespaces split-bundle` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitArgs {
    /// tenant/namespace
    pub namespace: String,
    /// Bundle range.
    pub range: String,
    /// Split algorithm (the configured default when absent).
    pub algorithm: Option<String>,
    /// Positions for `specified_positions_divide`.
    pub positions: Vec<String>,
    /// Place the children anew after the split.
    pub unload: bool,
}

/// Splits a bundle and returns the leader's message and the children's names.
pub async fn split(
    store: &DynStore,
    args: &SplitArgs,
    requester: &str,
    timeout: Duration,
) -> Result<(String, Vec<String>), RuntimeError> {
    let bundle = bundle_name(store, &args.namespace, &args.range).await?;
    let response = requests::submit(
        store,
        RequestOp::Split {
            bundle,
            algorithm: args.algorithm.clone(),
            positions: args.positions.clone(),
            unload: args.unload,
        },
        None,
        requester,
        timeout,
    )
    .await?;
    let children: Vec<String> = serde_json::from_value(response.result.clone()).unwrap_or_default();
    Ok((response.message, children))
}

/// Looks a topic up (the leader assigns an unowned bundle) and waits for its owner.
pub async fn lookup(
    store: &DynStore,
    topic: &str,
    requester: &str,
    timeout: Duration,
) -> Result<LookupResult, RuntimeError> {
    TopicName::parse(topic).map_err(|e| RuntimeError::Invalid(format!("topic {topic}: {e}")))?;
    requests::lookup(store, topic, requester, timeout).await
}

/// Sets `loadBalancerSheddingEnabled` in Pulsar's dynamic configuration (`/admin/configuration`, the map
/// `pulsar-admin brokers update-dynamic-config` writes), keeping every other key; every broker applies it.
pub async fn set_shedding(store: &DynStore, enabled: bool) -> Result<DynamicConfig, RuntimeError> {
    set_dynamic_config(
        store,
        "loadBalancerSheddingEnabled",
        if enabled { "true" } else { "false" },
    )
    .await
}

/// The dynamic configuration as stored: key → JSON value (strings as Pulsar writes them; other values are
/// kept as found, and brokers skip them).
pub type DynamicConfig = serde_json::Map<String, serde_json::Value>;

/// Sets one key of the dynamic configuration (compare-and-set, retried on a concurrent change), keeping the
/// other keys as they are, including values brokers skip (so a bad value can be overwritten this way).
pub async fn set_dynamic_config(
    store: &DynStore,
    key: &str,
    value: &str,
) -> Result<DynamicConfig, RuntimeError> {
    match crate::config::Settings::is_dynamic(key) {
        Some(true) => {}
        Some(false) => {
            return Err(RuntimeError::Invalid(format!(
                "{key} is not a dynamic setting: change broker.conf and restart the brokers"
            )))
        }
        None => return Err(RuntimeError::Invalid(format!("unknown setting {key}"))),
    }
    let mut check = crate::config::Settings::default();
    check
        .set_dynamic(key, value)
        .map_err(RuntimeError::Invalid)?;
    let edited = edit_dynamic_config(store, key, "set", |map| {
        map.insert(key.to_owned(), value.into());
        true
    })
    .await?;
    Ok(edited.unwrap_or_default())
}

/// Reads the dynamic configuration (an empty map when there is none), lets `edit` change it, and writes it back
/// compare-and-set, retrying on a concurrent change up to ten times. `edit` returns whether it changed
/// anything; `Ok(None)` when it did not (nothing is written).
async fn edit_dynamic_config(
    store: &DynStore,
    key: &str,
    what: &str,
    edit: impl Fn(&mut DynamicConfig) -> bool,
) -> Result<Option<DynamicConfig>, RuntimeError> {
    for _ in 0..10 {
        let (mut map, expected) = match store
            .get_json::<DynamicConfig>(paths::DYNAMIC_CONFIGURATION)
            .await
        {
            Ok(Some((m, stat))) => (m, stat.version),
            Ok(None) => (DynamicConfig::new(), CREATE_ONLY),
            Err(Error::Content { path, reason }) => {
                return Err(RuntimeError::Malformed { path, reason })
            }
            Err(e) => return Err(e.into()),
        };
        if !edit(&mut map) {
            return Ok(None);
        }
        match store
            .put(
                paths::DYNAMIC_CONFIGURATION,
                &to_json_vec(&map),
                Some(expected),
                CreateOptions::PERSISTENT,
            )
            .await
        {
            Ok(_) => return Ok(Some(map)),
            Err(Error::BadVersion { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(RuntimeError::Invalid(format!(
        "{} kept changing; {key} not {what}",
        paths::DYNAMIC_CONFIGURATION
    )))
}

/// Removes one key from the dynamic configuration (compare-and-set, retried on a concurrent change); every
/// broker goes back to its `broker.conf` value. `Ok(false)` when the key was not set.
pub async fn delete_dynamic_config(store: &DynStore, key: &str) -> Result<bool, RuntimeError> {
    match crate::config::Settings::is_dynamic(key) {
        Some(true) => {}
        Some(false) => {
            return Err(RuntimeError::Invalid(format!(
                "{key} is not a dynamic setting: it is never in the dynamic configuration"
            )))
        }
        None => return Err(RuntimeError::Invalid(format!("unknown setting {key}"))),
    }
    let edited =
        edit_dynamic_config(store, key, "removed", |map| map.remove(key).is_some()).await?;
    Ok(edited.is_some())
}
