//! Coordination on top of any [`MetadataStore`](crate::store::MetadataStore): leader election, resource locks
//! and fenced writes, with Pulsar's data layout and rules.
//!
//! Both primitives hold **one ephemeral node at a fixed path** whose value is the JSON of the holder's value
//! (`/loadbalance/leader` holds a [`LeaderBroker`](crate::model::LeaderBroker); broker registration holds the
//! broker's `LocalBrokerData` at `/loadbalance/brokers/<id>`), claimed with a create-only put:
//!
//! * absent → create it (create-only, ephemeral); whoever's create succeeds holds it;
//! * present with an equal value, created by this session → it is ours (adopt it);
//! * present with another value, created by this session → ours with an older value (an update lost while
//!   the connection was down): write the value in place, with its version. Pulsar deletes and re-creates it
//!   instead; for a registration that is a broker gone for an instant, and the leader moves its bundles;
//! * present with an equal value from another session → a stale node of ours (an earlier session the server
//!   has not expired yet): delete it with its version and claim again (Pulsar's rule: holder values must be
//!   unique per holder, e.g. contain the broker id);
//! * present otherwise (or persistent) → someone else holds it.
//!
//! Holders re-check on every notification for their path and session event. A lost connection alone does not
//! end leadership: the leader keeps acting while its session can still be alive on the server (its
//! [`SessionValidity`](crate::store::SessionValidity); its writes are fenced anyway), so a store blip costs no
//! leader. It stops at once when its store declares the session lost (9/10 of the session timeout after the
//! server last answered, before the server can expire the session and let another leader in), and after a
//! reconnection it confirms the node is still its own.
//!
//! Fenced writes ([`LeaderElection::fenced_batch`], [`ResourceLock::fenced_batch`]) prepend an
//! [`Op::Check`](crate::store::Op::Check) of the held node to a batch, so the store applies it only while
//! the holder still holds: ZooKeeper checks the node's version inside the multi sent in the holder's session;
//! etcd compares the node's create revision inside the txn.

mod election;
mod lock;

pub use election::{LeaderElection, LeaderState, DEFAULT_LEADER_PATH};
pub use lock::ResourceLock;

use crate::store::{CreateOptions, DynStore, Error, Guard, Result, CREATE_ONLY};

/// What a claim found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Claim {
    /// We hold the node.
    Held(Guard),
    /// Someone else does, with this value.
    HeldByOther(Vec<u8>),
}

/// JSON equality (falls back to byte equality for non-JSON values).
pub(crate) fn same_value(a: &[u8], b: &[u8]) -> bool {
    match (
        serde_json::from_slice::<serde_json::Value>(a),
        serde_json::from_slice::<serde_json::Value>(b),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// Claims the ephemeral node `path` with `value` following the rules in the module docs.
pub(crate) async fn claim(store: &DynStore, path: &str, value: &[u8]) -> Result<Claim> {
    for _ in 0..8 {
        match store.get(path).await? {
            None => match store
                .put(path, value, Some(CREATE_ONLY), CreateOptions::EPHEMERAL)
                .await
            {
                Ok(stat) => return Ok(Claim::Held(stat.guard())),
                Err(Error::BadVersion { .. }) => continue,
                Err(e) => return Err(e),
            },
            Some(found) => {
                let same = same_value(&found.value, value);
                if !found.stat.ephemeral {
                    return Ok(Claim::HeldByOther(found.value));
                }
                if found.stat.created_by_self && same {
                    return Ok(Claim::Held(found.stat.guard()));
                }
                if found.stat.created_by_self {
                    // Ours, in this session, with an older value (an update that failed while the connection
                    // was down): written in place. Pulsar deletes and re-creates it, which makes the node
                    // vanish for an instant: a broker's registration gone is a dead broker to the leader.
                    match store
                        .put(
                            path,
                            value,
                            Some(found.stat.version),
                            CreateOptions::EPHEMERAL,
                        )
                        .await
                    {
                        Ok(stat) => return Ok(Claim::Held(stat.guard())),
                        Err(Error::BadVersion { .. }) | Err(Error::NotFound { .. }) => continue,
                        Err(e) => return Err(e),
                    }
                }
                if same {
                    tracing::info!(path, "removing a stale node of ours before claiming");
                    match store.delete(path, Some(found.stat.version)).await {
                        Ok(()) | Err(Error::NotFound { .. }) | Err(Error::BadVersion { .. }) => {
                            continue
                        }
                        Err(e) => return Err(e),
                    }
                }
                return Ok(Claim::HeldByOther(found.value));
            }
        }
    }
    Err(Error::Backend {
        backend: store.backend().name(),
        message: format!("{path}: the node kept changing while claiming it"),
    })
}
