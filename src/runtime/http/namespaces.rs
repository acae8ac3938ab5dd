//! `/admin/v2/namespaces/...`: create a namespace, list its bundles, unload it or one bundle, split a bundle —
//! in Pulsar's paths and shapes, carried out by the leader as `loadmgr admin` does.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::errors::ApiError;
use super::{own, AppState};
use crate::bundle::NamespaceName;
use crate::model::BundlesData;
use crate::runtime::{admin, RuntimeError};

/// How long an unload or split may take before the request answers 503.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(60);

fn namespace(tenant: &str, namespace: &str) -> Result<NamespaceName, ApiError> {
    NamespaceName::parse(&format!("{tenant}/{namespace}"))
        .map_err(|e| ApiError::bad_request(format!("namespace {tenant}/{namespace}: {e}")))
}

/// Creates a namespace with the bundles of the body's `bundles` (Pulsar's `Policies`), or
/// `defaultNumberOfNamespaceBundles`.
#[utoipa::path(put, path = "/admin/v2/namespaces/{tenant}/{namespace}",
    params(("tenant" = String, Path, description = "tenant"), ("namespace" = String, Path, description = "namespace")),
    request_body(content = Object, description = "Pulsar's Policies; only `bundles` (`numBundles` or `boundaries`) is used", content_type = "application/json"),
    responses((status = 204, description = "created"),
    (status = 400, description = "malformed name or body", body = own::ErrorBody),
    (status = 401, body = own::ErrorBody), (status = 403, body = own::ErrorBody),
    (status = 409, description = "exists", body = own::ErrorBody)), tag = "namespaces")]
pub(crate) async fn create(
    State(state): State<AppState>,
    Path((tenant, ns)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    state.auth.admin(&headers)?;
    let name = namespace(&tenant, &ns)?;
    let settings = state.settings();
    let mut count = settings.default_number_of_namespace_bundles.max(1) as u64;
    if !body.iter().all(u8::is_ascii_whitespace) {
        let policies: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("body: not JSON: {e}")))?;
        if let Some(bundles) = policies.get("bundles").filter(|b| !b.is_null()) {
            if let Some(n) = bundles.get("numBundles").and_then(|n| n.as_u64()) {
                count = n;
            } else if let Some(b) = bundles.get("boundaries").and_then(|b| b.as_array()) {
                count = b.len().saturating_sub(1) as u64;
            } else {
                return Err(ApiError::bad_request(
                    "body: bundles needs numBundles or boundaries",
                ));
            }
        }
    }
    if state.view.namespace(&name.to_string()).is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "Namespace already exists",
        ));
    }
    match admin::create_namespace(
        &state.sh.store,
        &name.to_string(),
        count,
        settings.cluster_name.as_deref(),
    )
    .await
    {
        Ok(_) => Ok(StatusCode::NO_CONTENT),
        Err(RuntimeError::Invalid(why)) if why.contains("already exists") => Err(ApiError::new(
            StatusCode::CONFLICT,
            "Namespace already exists",
        )),
        Err(e) => Err(e.into()),
    }
}

/// A namespace's bundles (Pulsar's `BundlesData`).
#[utoipa::path(get, path = "/admin/v2/namespaces/{tenant}/{namespace}/bundles",
    params(("tenant" = String, Path, description = "tenant"), ("namespace" = String, Path, description = "namespace")),
    responses((status = 200, description = "boundaries", body = Object),
    (status = 401, body = own::ErrorBody), (status = 403, body = own::ErrorBody),
    (status = 404, description = "no such namespace", body = own::ErrorBody)), tag = "namespaces")]
pub(crate) async fn bundles(
    State(state): State<AppState>,
    Path((tenant, ns)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<BundlesData>, ApiError> {
    state.auth.admin(&headers)?;
    let name = namespace(&tenant, &ns)?;
    let bundles = state
        .view
        .namespace(&name.to_string())
        .ok_or_else(|| ApiError::not_found("Namespace does not exist"))?;
    Ok(Json(bundles.to_bundles_data()))
}

/// Unloads every owned bundle of a namespace; answers once each is owned again.
#[utoipa::path(put, path = "/admin/v2/namespaces/{tenant}/{namespace}/unload",
    params(("tenant" = String, Path, description = "tenant"), ("namespace" = String, Path, description = "namespace")),
    responses((status = 204, description = "unloaded"),
    (status = 401, body = own::ErrorBody), (status = 403, body = own::ErrorBody),
    (status = 404, description = "no such namespace", body = own::ErrorBody),
    (status = 503, description = "no leader, or too slow", body = own::ErrorBody)), tag = "namespaces")]
pub(crate) async fn unload_namespace(
    State(state): State<AppState>,
    Path((tenant, ns)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    state.auth.admin(&headers)?;
    let name = namespace(&tenant, &ns)?;
    if state.view.namespace(&name.to_string()).is_none() {
        return Err(ApiError::not_found("Namespace does not exist"));
    }
    admin::unload(
        &state.sh.store,
        &name.to_string(),
        None,
        None,
        &state.sh.broker_id,
        OPERATION_TIMEOUT,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The query of a bundle unload.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
pub struct UnloadQuery {
    /// Broker id to move the bundle to (placement chooses when absent).
    pub destination_broker: Option<String>,
    /// Pulsar's redirect flag; accepted and ignored.
    #[allow(dead_code)]
    pub authoritative: Option<bool>,
}

/// Unloads one bundle (to `destinationBroker`, or where placement says); answers once it is owned again.
#[utoipa::path(put, path = "/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload",
    params(("tenant" = String, Path, description = "tenant"), ("namespace" = String, Path, description = "namespace"),
        ("bundle" = String, Path, description = "bundle range, e.g. 0x00000000_0x40000000"), UnloadQuery),
    responses((status = 204, description = "unloaded"),
    (status = 401, body = own::ErrorBody), (status = 403, body = own::ErrorBody),
    (status = 404, description = "no such namespace", body = own::ErrorBody),
    (status = 412, description = "no such bundle, or the leader refused", body = own::ErrorBody),
    (status = 503, description = "no leader, or too slow", body = own::ErrorBody)), tag = "namespaces")]
pub(crate) async fn unload_bundle(
    State(state): State<AppState>,
    Path((tenant, ns, bundle)): Path<(String, String, String)>,
    Query(query): Query<UnloadQuery>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    state.auth.admin(&headers)?;
    let name = namespace(&tenant, &ns)?;
    if state.view.namespace(&name.to_string()).is_none() {
        return Err(ApiError::not_found("Namespace does not exist"));
    }
    admin::unload(
        &state.sh.store,
        &name.to_string(),
        Some(&bundle),
        query
            .destination_broker
            .as_deref()
            .filter(|d| !d.is_empty()),
        &state.sh.broker_id,
        OPERATION_TIMEOUT,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The query of a bundle split.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
pub struct SplitQuery {
    /// Place the two halves anew after the split.
    pub unload: Option<bool>,
    /// `range_equally_divide`, `topic_count_equally_divide`, `specified_positions_divide` or
    /// `flow_or_qps_equally_divide` (the configured default when absent).
    pub split_algorithm_name: Option<String>,
    /// Pulsar's redirect flag; accepted and ignored.
    #[allow(dead_code)]
    pub authoritative: Option<bool>,
}

/// Splits one bundle; the body may list split positions (hash values) for `specified_positions_divide`.
#[utoipa::path(put, path = "/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split",
    params(("tenant" = String, Path, description = "tenant"), ("namespace" = String, Path, description = "namespace"),
        ("bundle" = String, Path, description = "bundle range"), SplitQuery),
    request_body(content = Vec<u64>, description = "split positions (optional)", content_type = "application/json"),
    responses((status = 204, description = "split"),
    (status = 400, description = "malformed body", body = own::ErrorBody),
    (status = 401, body = own::ErrorBody), (status = 403, body = own::ErrorBody),
    (status = 404, description = "no such namespace", body = own::ErrorBody),
    (status = 412, description = "no such bundle, or no split point", body = own::ErrorBody),
    (status = 503, description = "no leader, or too slow", body = own::ErrorBody)), tag = "namespaces")]
pub(crate) async fn split_bundle(
    State(state): State<AppState>,
    Path((tenant, ns, bundle)): Path<(String, String, String)>,
    Query(query): Query<SplitQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    state.auth.admin(&headers)?;
    let name = namespace(&tenant, &ns)?;
    if state.view.namespace(&name.to_string()).is_none() {
        return Err(ApiError::not_found("Namespace does not exist"));
    }
    let positions: Vec<String> = if body.iter().all(u8::is_ascii_whitespace) {
        Vec::new()
    } else {
        let values: Vec<serde_json::Value> = serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(format!("body: expected a JSON array of positions: {e}"))
        })?;
        values
            .iter()
            .map(|v| match v {
                serde_json::Value::Number(n) if n.as_u64().is_some() => {
                    Ok(crate::bundle::format_hash(n.as_u64().unwrap_or_default()))
                }
                serde_json::Value::String(s) => Ok(s.clone()),
                other => Err(ApiError::bad_request(format!(
                    "body: {other} is not a split position"
                ))),
            })
            .collect::<Result<_, _>>()?
    };
    let args = admin::SplitArgs {
        namespace: name.to_string(),
        range: bundle,
        algorithm: query.split_algorithm_name.filter(|a| !a.is_empty()),
        positions,
        unload: query.unload.unwrap_or(false),
    };
    admin::split(
        &state.sh.store,
        &args,
        &state.sh.broker_id,
        OPERATION_TIMEOUT,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
