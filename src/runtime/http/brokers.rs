//! `/admin/v2/brokers/...` and `/admin/v2/broker-stats/load-report`: who is registered and who leads, what a
//! broker owns, health and readiness, the dynamic configuration, and this broker's load report, in Pulsar's
//! shapes.

use std::collections::BTreeMap;

use super::extract::Path;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::errors::ApiError;
use super::{errors, AppState};
use crate::paths;
use crate::runtime::admin;

/// The leader (Pulsar's `BrokerInfo`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerInfo {
    /// The leader's web service URL.
    pub service_url: String,
    /// The leader's broker id.
    pub broker_id: String,
}

/// How a broker holds a bundle (Pulsar's `NamespaceOwnershipStatus`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NamespaceOwnershipStatus {
    /// `shared` (loadmgr has no primary/secondary brokers).
    pub broker_assignment: String,
    /// Whether an isolation policy controls the namespace (not tracked: false).
    pub is_controlled: bool,
    /// False while the bundle is being unloaded.
    pub is_active: bool,
}

fn check_cluster(state: &AppState, cluster: &str) -> Result<(), ApiError> {
    match &state.settings().cluster_name {
        Some(c) if c != cluster => Err(ApiError::not_found(format!(
            "Cluster {cluster} does not exist (this broker is in {c})"
        ))),
        _ => Ok(()),
    }
}

/// The registered brokers (`host:port`).
#[utoipa::path(get, path = "/admin/v2/brokers", responses(
    (status = 200, description = "broker ids", body = Vec<String>),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody)), tag = "brokers")]
pub(crate) async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Vec<String>>, ApiError> {
    state.auth.admin(&headers)?;
    Ok(Json(state.view.brokers().into_keys().collect()))
}

/// The registered brokers of a cluster.
#[utoipa::path(get, path = "/admin/v2/brokers/{cluster}",
    params(("cluster" = String, Path, description = "cluster name")),
    responses((status = 200, description = "broker ids", body = Vec<String>),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 404, description = "another cluster", body = errors::ErrorBody)), tag = "brokers")]
pub(crate) async fn list_in(
    State(state): State<AppState>,
    Path(cluster): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Vec<String>>, ApiError> {
    state.auth.admin(&headers)?;
    check_cluster(&state, &cluster)?;
    Ok(Json(state.view.brokers().into_keys().collect()))
}

/// The leader.
#[utoipa::path(get, path = "/admin/v2/brokers/leaderBroker", responses(
    (status = 200, description = "the leader", body = BrokerInfo),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 404, description = "no leader", body = errors::ErrorBody)), tag = "brokers")]
pub(crate) async fn leader(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<BrokerInfo>, ApiError> {
    state.auth.admin(&headers)?;
    let leader = state
        .view
        .leader()
        .ok_or_else(|| ApiError::not_found("Couldn't find leader broker"))?;
    Ok(Json(BrokerInfo {
        broker_id: leader.broker_id().unwrap_or_default().to_owned(),
        service_url: leader.service_url.unwrap_or_default(),
    }))
}

/// The bundles a broker owns.
#[utoipa::path(get, path = "/admin/v2/brokers/{cluster}/{broker}/ownedNamespaces",
    params(("cluster" = String, Path, description = "cluster name"), ("broker" = String, Path, description = "broker id host:port")),
    responses((status = 200, description = "bundle → status", body = BTreeMap<String, NamespaceOwnershipStatus>),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 404, description = "no such broker", body = errors::ErrorBody)), tag = "brokers")]
pub(crate) async fn owned_namespaces(
    State(state): State<AppState>,
    Path((cluster, broker)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<BTreeMap<String, NamespaceOwnershipStatus>>, ApiError> {
    state.auth.admin(&headers)?;
    check_cluster(&state, &cluster)?;
    if !state.view.is_registered(&broker) {
        return Err(ApiError::not_found(format!(
            "Broker {broker} is not registered"
        )));
    }
    Ok(Json(
        state
            .view
            .owned_by(&broker)
            .into_iter()
            .map(|(bundle, data)| {
                (
                    bundle,
                    NamespaceOwnershipStatus {
                        broker_assignment: "shared".into(),
                        is_controlled: false,
                        is_active: !data.disabled,
                    },
                )
            })
            .collect(),
    ))
}

fn ok_text() -> Response {
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "text/plain")],
        "ok",
    )
        .into_response()
}

/// `ok` while this broker can do its work: its store session is valid, it is registered, and a leader is
/// elected.
#[utoipa::path(get, path = "/admin/v2/brokers/health", responses(
    (status = 200, description = "ok", body = String, content_type = "text/plain"),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 503, description = "why not", body = errors::ErrorBody)), tag = "brokers")]
pub(crate) async fn health(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.auth.admin(&headers)?;
    if !state.sh.store.session_validity().is_valid() {
        return Err(ApiError::unavailable("the store session is not valid"));
    }
    if !state.view.is_registered(&state.sh.broker_id) {
        return Err(ApiError::unavailable(format!(
            "{} is not registered",
            state.sh.broker_id
        )));
    }
    if state.view.leader().is_none() {
        return Err(ApiError::unavailable("no leader is elected"));
    }
    Ok(ok_text())
}

/// `ok` once this broker is registered with a connected store (a readiness probe).
#[utoipa::path(get, path = "/admin/v2/brokers/ready", responses(
    (status = 200, description = "ok", body = String, content_type = "text/plain"),
    (status = 401, body = errors::ErrorBody),
    (status = 503, description = "why not", body = errors::ErrorBody)), tag = "brokers")]
pub(crate) async fn ready(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.auth.client(&headers)?;
    if !state.sh.store.is_connected() {
        return Err(ApiError::unavailable("not connected to the store"));
    }
    if !state.view.is_registered(&state.sh.broker_id) {
        return Err(ApiError::unavailable(format!(
            "{} is not registered yet",
            state.sh.broker_id
        )));
    }
    Ok(ok_text())
}

/// The keys of the dynamic configuration.
#[utoipa::path(get, path = "/admin/v2/brokers/configuration", responses(
    (status = 200, description = "dynamic keys", body = Vec<String>),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody)), tag = "configuration")]
pub(crate) async fn dynamic_keys(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Vec<String>>, ApiError> {
    state.auth.admin(&headers)?;
    Ok(Json(
        crate::config::KEYS
            .iter()
            .filter(|(_, dynamic)| *dynamic)
            .map(|(k, _)| (*k).to_owned())
            .collect(),
    ))
}

/// The values set in the dynamic configuration (`/admin/configuration`).
#[utoipa::path(get, path = "/admin/v2/brokers/configuration/values", responses(
    (status = 200, description = "key → value", body = BTreeMap<String, String>),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody)), tag = "configuration")]
pub(crate) async fn dynamic_values(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    state.auth.admin(&headers)?;
    use crate::store::MetadataStoreExt;
    match state
        .sh
        .store
        .get_json::<serde_json::Value>(paths::DYNAMIC_CONFIGURATION)
        .await
    {
        Ok(Some((v, _))) => Ok(Json(v)),
        Ok(None) => Ok(Json(serde_json::json!({}))),
        Err(crate::store::Error::Content { path, reason }) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{path}: {reason}"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Every setting in effect on this broker (passwords masked).
#[utoipa::path(get, path = "/admin/v2/brokers/configuration/runtime", responses(
    (status = 200, description = "key → value", body = BTreeMap<String, String>),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody)), tag = "configuration")]
pub(crate) async fn runtime_values(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<BTreeMap<String, String>>, ApiError> {
    state.auth.admin(&headers)?;
    Ok(Json(
        state
            .settings()
            .entries()
            .into_iter()
            .map(|(k, v)| {
                let masked = (k.ends_with("Password") || k == "tokenSecretKey") && !v.is_empty();
                (k.to_owned(), if masked { "********".to_owned() } else { v })
            })
            .collect(),
    ))
}

/// Sets one key of the dynamic configuration; every broker applies it.
#[utoipa::path(post, path = "/admin/v2/brokers/configuration/{name}/{value}",
    params(("name" = String, Path, description = "a dynamic key"), ("value" = String, Path, description = "its value")),
    responses((status = 204, description = "set"),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 412, description = "not a dynamic key, or a bad value", body = errors::ErrorBody)), tag = "configuration")]
pub(crate) async fn set_dynamic(
    State(state): State<AppState>,
    Path((name, value)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    state.auth.admin(&headers)?;
    admin::set_dynamic_config(&state.sh.store, &name, &value).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Removes one key from the dynamic configuration (brokers go back to their broker.conf value).
#[utoipa::path(delete, path = "/admin/v2/brokers/configuration/{name}",
    params(("name" = String, Path, description = "a dynamic key")),
    responses((status = 204, description = "removed, or was not set"),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 412, description = "not a dynamic key", body = errors::ErrorBody)), tag = "configuration")]
pub(crate) async fn delete_dynamic(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    state.auth.admin(&headers)?;
    admin::delete_dynamic_config(&state.sh.store, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// This broker's load report as written at `/loadbalance/brokers/<id>` (Pulsar's `LocalBrokerData`).
#[utoipa::path(get, path = "/admin/v2/broker-stats/load-report", responses(
    (status = 200, description = "LocalBrokerData", body = Object),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 404, description = "not registered", body = errors::ErrorBody)), tag = "brokers")]
pub(crate) async fn load_report(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.auth.admin(&headers)?;
    match state
        .sh
        .store
        .get(&paths::broker(&state.sh.broker_id))
        .await?
    {
        Some(g) => Ok((
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            g.value,
        )
            .into_response()),
        None => Err(ApiError::not_found(format!(
            "{} has no load report (not registered)",
            state.sh.broker_id
        ))),
    }
}
