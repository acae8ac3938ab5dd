//! Requests through the store: an asker creates `/loadmgr/requests/request-<seq>` ([`AdminRequest`]), the
//! leader (or the broker named in `target`) writes the response into the same node, and the asker reads it and
//! deletes the node. Brokers have no other channel to each other, so lookups from any broker, `loadmgr admin`
//! operations and the leader's questions to a bundle's owner all go this way.

use std::time::Duration;

use tokio::time::Instant;

use super::clock::Clock;
use super::identity::owner_of;
use super::RuntimeError;
use crate::model::json::to_json_vec;
use crate::model::records::{AdminRequest, LookupAnswer, RequestOp, RequestResponse};
use crate::model::{LeaderBroker, NamespaceEphemeralData};
use crate::paths;
use crate::store::{CreateOptions, DynStore, Error, MetadataStoreExt, Stat};

/// How often a waiting asker re-reads in case a notification was lost.
const POLL: Duration = Duration::from_millis(500);

/// The current leader, if any.
pub async fn current_leader(store: &DynStore) -> Result<Option<LeaderBroker>, RuntimeError> {
    match store.get_json::<LeaderBroker>(paths::LEADER).await {
        Ok(found) => Ok(found.map(|(v, _)| v)),
        Err(Error::Content { path, reason }) => Err(RuntimeError::Malformed { path, reason }),
        Err(e) => Err(e.into()),
    }
}

/// Sends a request and waits up to `timeout` for its answer. `target` names the broker that must answer (the
/// leader when `None`). A request the answerer refused comes back as [`RuntimeError::Rejected`].
pub async fn submit(
    store: &DynStore,
    op: RequestOp,
    target: Option<&str>,
    requester: &str,
    timeout: Duration,
) -> Result<RequestResponse, RuntimeError> {
    let what = op.describe();
    let leader = if target.is_none() {
        match current_leader(store).await? {
            Some(l) => Some(l.broker_id().unwrap_or("?").to_owned()),
            None => {
                return Err(RuntimeError::NoLeader {
                    what,
                    store: store.address(),
                })
            }
        }
    } else {
        None
    };
    let mut notifications = store.watch(paths::REQUESTS).await?;
    let request = AdminRequest {
        op,
        target: target.map(str::to_owned),
        requester: requester.to_owned(),
        created_ms: Clock::new().now_ms(),
        response: None,
    };
    let stat = store
        .put(
            paths::REQUEST_PREFIX,
            &to_json_vec(&request),
            Some(crate::store::CREATE_ONLY),
            CreateOptions::SEQUENTIAL,
        )
        .await?;
    let path = stat.path;
    let deadline = Instant::now() + timeout;
    loop {
        match store.get_json::<AdminRequest>(&path).await {
            Ok(Some((r, _))) => {
                if let Some(response) = r.response {
                    let _ = store.delete(&path, None).await;
                    return if response.ok {
                        Ok(response)
                    } else {
                        Err(RuntimeError::Rejected {
                            what,
                            by: response.answered_by,
                            message: response.message,
                        })
                    };
                }
            }
            Ok(None) => {
                return Err(RuntimeError::Invalid(format!(
                    "the request node {path} for the {what} vanished before it was answered"
                )))
            }
            Err(Error::Content { path, reason }) => {
                return Err(RuntimeError::Malformed { path, reason })
            }
            Err(e) if e.is_transient() => {
                tracing::warn!("reading {path}: {e}; retrying");
            }
            Err(e) => return Err(e.into()),
        }
        let now = Instant::now();
        if now >= deadline {
            let _ = store.delete(&path, None).await;
            return Err(RuntimeError::Timeout {
                what: format!(
                    "the {what} ({})",
                    match (&leader, target) {
                        (_, Some(t)) => format!("asked of broker {t}"),
                        (Some(l), None) => format!("asked of leader {l}"),
                        (None, None) => "asked of the leader".to_owned(),
                    }
                ),
                after: timeout,
            });
        }
        let wait = POLL.min(deadline - now);
        let _ = tokio::time::timeout(wait, async {
            while let Some(n) = notifications.next().await {
                if n.path == path {
                    return;
                }
            }
        })
        .await;
    }
}

/// Writes `response` into an unanswered request node (version-checked, so it is answered once).
pub async fn answer_unfenced(
    store: &DynStore,
    path: &str,
    request: &AdminRequest,
    stat: &Stat,
    response: RequestResponse,
) -> Result<(), RuntimeError> {
    let answered = AdminRequest {
        response: Some(response),
        ..request.clone()
    };
    match store
        .put(
            path,
            &to_json_vec(&answered),
            Some(stat.version),
            CreateOptions::PERSISTENT,
        )
        .await
    {
        Ok(_) | Err(Error::BadVersion { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The owner of a bundle as its ownership node says: `(broker id, data)`, `None` when unowned.
pub async fn read_owner(
    store: &DynStore,
    bundle: &str,
) -> Result<Option<(String, NamespaceEphemeralData, Stat)>, RuntimeError> {
    match store
        .get_json::<NamespaceEphemeralData>(&paths::ownership(bundle))
        .await
    {
        Ok(Some((data, stat))) => {
            let owner = owner_of(&data).unwrap_or_else(|| "?".to_owned());
            Ok(Some((owner, data, stat)))
        }
        Ok(None) => Ok(None),
        Err(Error::Content { path, reason }) => Err(RuntimeError::Malformed { path, reason }),
        Err(e) => Err(e.into()),
    }
}

/// Whether `broker` has a live registration: an ephemeral node at `/loadbalance/brokers/<broker>` (a
/// persistent copy of a report is no broker).
async fn is_registered(store: &DynStore, broker: &str) -> bool {
    matches!(store.get(&paths::broker(broker)).await, Ok(Some(g)) if g.stat.ephemeral)
}

/// Where a topic is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupResult {
    /// The topic's bundle.
    pub bundle: String,
    /// Owner broker id.
    pub broker: String,
    /// The owner's ownership data (its URLs).
    pub data: NamespaceEphemeralData,
}

/// Waits until `bundle` is owned (and not being unloaded) by a registered broker `wanted` accepts, up to
/// `deadline`; `expected` names the broker it is being assigned to, for the error message. An ownership node
/// naming a broker without a live registration (a stale or forged node) is no answer: the leader removes it
/// after the session timeout and places the bundle.
pub async fn wait_owned(
    store: &DynStore,
    bundle: &str,
    expected: Option<&str>,
    wanted: impl Fn(&str) -> bool,
    deadline: Instant,
) -> Result<LookupResult, RuntimeError> {
    let path = paths::ownership(bundle);
    let mut notifications = store.watch(&path).await?;
    let start = Instant::now();
    loop {
        match read_owner(store, bundle).await {
            Ok(Some((broker, data, _)))
                if !data.disabled && wanted(&broker) && is_registered(store, &broker).await =>
            {
                return Ok(LookupResult {
                    bundle: bundle.to_owned(),
                    broker,
                    data,
                })
            }
            Ok(_) => {}
            Err(RuntimeError::Store(e)) if e.is_transient() => {
                tracing::warn!("reading {path}: {e}; retrying");
            }
            Err(e) => return Err(e),
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(RuntimeError::Timeout {
                what: match expected {
                    Some(b) => format!("{b} taking ownership of {bundle}"),
                    None => format!("an owner for {bundle}"),
                },
                after: now - start,
            });
        }
        let _ = tokio::time::timeout(POLL.min(deadline - now), notifications.next()).await;
    }
}

/// Looks a topic up: asks the leader, which answers the owner or assigns the bundle, then waits until the
/// bundle is owned.
pub async fn lookup(
    store: &DynStore,
    topic: &str,
    requester: &str,
    timeout: Duration,
) -> Result<LookupResult, RuntimeError> {
    let deadline = Instant::now() + timeout;
    let response = submit(
        store,
        RequestOp::Lookup {
            topic: topic.to_owned(),
        },
        None,
        requester,
        timeout,
    )
    .await?;
    let answer: LookupAnswer =
        serde_json::from_value(response.result).map_err(|e| RuntimeError::Malformed {
            path: "lookup response".into(),
            reason: e.to_string(),
        })?;
    wait_owned(
        store,
        &answer.bundle,
        Some(&answer.broker),
        |_| true,
        deadline,
    )
    .await
}
