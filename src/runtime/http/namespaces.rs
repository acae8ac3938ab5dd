//! `/admin/v2/namespaces/...`: create a namespace, list its bundles, unload it or one bundle, split a bundle —
//! in Pulsar's paths and shapes, carried out by the leader as `loadmgr admin` does.

use std::time::Duration;

use super::extract::{Path, Query};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::errors::ApiError;
use super::{errors, AppState};
use crate::bundle::{NamespaceBundles, NamespaceName};
use crate::model::BundlesData;
use crate::runtime::{admin, namespaces, RuntimeError};

/// How long an unload or split may take before the request answers 503.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(60);

fn namespace(tenant: &str, namespace: &str) -> Result<NamespaceName, ApiError> {
    NamespaceName::parse(&format!("{tenant}/{namespace}"))
        .map_err(|e| ApiError::precondition(format!("Namespace name is not valid: {e}")))
}

/// The path's namespace, which must exist: 412 for an invalid name, 404 for an unknown one.
fn existing_namespace(
    state: &AppState,
    tenant: &str,
    ns: &str,
) -> Result<(String, NamespaceBundles), ApiError> {
    let name = namespace(tenant, ns)?.to_string();
    match state.view.namespace(&name) {
        Some(bundles) => Ok((name, bundles)),
        None => Err(ApiError::not_found("Namespace does not exist")),
    }
}

/// Unloads `bundle` of `name` (every owned bundle when `None`) and waits until each is owned again.
async fn unload(
    state: &AppState,
    name: &str,
    bundle: Option<&str>,
    destination: Option<&str>,
) -> Result<StatusCode, ApiError> {
    admin::unload(
        &state.sh.store,
        name,
        bundle,
        destination.filter(|d| !d.is_empty()),
        &state.sh.broker_id,
        OPERATION_TIMEOUT,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The bundles of a create request, as Pulsar's `validatePolicies` chooses them: the body's `bundles` when
/// `numBundles` is above 0 — its `boundaries` when listed, else that many equal bundles — and
/// `defaultNumberOfNamespaceBundles` equal bundles otherwise (no body, no `bundles`, `numBundles` 0 or below).
/// 400 for a body that is not Pulsar's `Policies`; 412 for counts or boundaries Pulsar refuses.
fn initial_bundles(body: &[u8], default_count: i32) -> Result<NamespaceBundles, ApiError> {
    let equal = |count: i64| {
        if count <= 0 || count as u64 > namespaces::MAX_INITIAL_BUNDLES {
            return Err(ApiError::precondition(format!(
                "Invalid number of bundles {count}: loadmgr creates 1 to {} bundles",
                namespaces::MAX_INITIAL_BUNDLES
            )));
        }
        NamespaceBundles::initial(count as u64).map_err(|e| ApiError::precondition(e.to_string()))
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return equal(default_count.into());
    }
    let policies: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("body: not JSON: {e}")))?;
    let bundles = match &policies {
        serde_json::Value::Null => return equal(default_count.into()),
        serde_json::Value::Object(o) => o.get("bundles").filter(|b| !b.is_null()),
        _ => {
            return Err(ApiError::bad_request(
                "body: expected Pulsar's Policies, a JSON object",
            ))
        }
    };
    let Some(bundles) = bundles else {
        return equal(default_count.into());
    };
    let data: BundlesData = serde_json::from_value(bundles.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "body: bundles: expected {{\"numBundles\": n, \"boundaries\": [\"0x00000000\", ...]}}: {e}"
        ))
    })?;
    if data.num_bundles <= 0 {
        equal(default_count.into())
    } else if data.boundaries.is_empty() {
        equal(data.num_bundles.into())
    } else {
        NamespaceBundles::from_bundles_data(&data)
            .map_err(|e| ApiError::precondition(format!("bundles: {e}")))
    }
}

/// Creates a namespace with the bundles of the body's `bundles` (Pulsar's `Policies`), or
/// `defaultNumberOfNamespaceBundles`.
#[utoipa::path(put, path = "/admin/v2/namespaces/{tenant}/{namespace}",
    params(("tenant" = String, Path, description = "tenant: ASCII letters, digits, _ - = : . (else 412, as Pulsar)"), ("namespace" = String, Path, description = "namespace: ASCII letters, digits, _ - = : . (else 412, as Pulsar)")),
    request_body(content = Option<Object>, description = "Pulsar's Policies (optional); only `bundles` (`numBundles` or `boundaries`) is used", content_type = "application/json"),
    responses((status = 204, description = "created"),
    (status = 400, description = "malformed body", body = errors::ErrorBody),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 409, description = "exists", body = errors::ErrorBody),
    (status = 412, description = "Namespace name is not valid, or too few or too many bundles", body = errors::ErrorBody)), tag = "namespaces")]
pub(crate) async fn create(
    State(state): State<AppState>,
    Path((tenant, ns)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    state.auth.admin(&headers)?;
    let settings = state.settings();
    let bundles = initial_bundles(&body, settings.default_number_of_namespace_bundles)?;
    let name = namespace(&tenant, &ns)?;
    if state.view.namespace(&name.to_string()).is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "Namespace already exists",
        ));
    }
    match admin::create_namespace_with(
        &state.sh.store,
        &name.to_string(),
        bundles,
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
    params(("tenant" = String, Path, description = "tenant: ASCII letters, digits, _ - = : . (else 412, as Pulsar)"), ("namespace" = String, Path, description = "namespace: ASCII letters, digits, _ - = : . (else 412, as Pulsar)")),
    responses((status = 200, description = "boundaries", body = Object),
    (status = 400, description = "malformed path or query", body = errors::ErrorBody),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 404, description = "no such namespace", body = errors::ErrorBody),
    (status = 412, description = "Namespace name is not valid", body = errors::ErrorBody)), tag = "namespaces")]
pub(crate) async fn bundles(
    State(state): State<AppState>,
    Path((tenant, ns)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<BundlesData>, ApiError> {
    state.auth.admin(&headers)?;
    let (_, bundles) = existing_namespace(&state, &tenant, &ns)?;
    Ok(Json(bundles.to_bundles_data()))
}

/// Unloads every owned bundle of a namespace; answers once each is owned again.
#[utoipa::path(put, path = "/admin/v2/namespaces/{tenant}/{namespace}/unload",
    params(("tenant" = String, Path, description = "tenant: ASCII letters, digits, _ - = : . (else 412, as Pulsar)"), ("namespace" = String, Path, description = "namespace: ASCII letters, digits, _ - = : . (else 412, as Pulsar)")),
    responses((status = 204, description = "unloaded"),
    (status = 400, description = "malformed path or query", body = errors::ErrorBody),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 404, description = "no such namespace", body = errors::ErrorBody),
    (status = 412, description = "Namespace name is not valid", body = errors::ErrorBody),
    (status = 503, description = "no leader, or too slow", body = errors::ErrorBody)), tag = "namespaces")]
pub(crate) async fn unload_namespace(
    State(state): State<AppState>,
    Path((tenant, ns)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    state.auth.admin(&headers)?;
    let (name, _) = existing_namespace(&state, &tenant, &ns)?;
    unload(&state, &name, None, None).await
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
    params(("tenant" = String, Path, description = "tenant: ASCII letters, digits, _ - = : . (else 412, as Pulsar)"), ("namespace" = String, Path, description = "namespace: ASCII letters, digits, _ - = : . (else 412, as Pulsar)"),
        ("bundle" = String, Path, description = "bundle range, e.g. 0x00000000_0x40000000 (a malformed or unknown one: 412, as Pulsar)"), UnloadQuery),
    responses((status = 204, description = "unloaded"),
    (status = 400, description = "malformed path or query", body = errors::ErrorBody),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 404, description = "no such namespace", body = errors::ErrorBody),
    (status = 412, description = "Namespace name or bundle range not valid, no such bundle, or the leader refused", body = errors::ErrorBody),
    (status = 503, description = "no leader, or too slow", body = errors::ErrorBody)), tag = "namespaces")]
pub(crate) async fn unload_bundle(
    State(state): State<AppState>,
    Path((tenant, ns, bundle)): Path<(String, String, String)>,
    Query(query): Query<UnloadQuery>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    state.auth.admin(&headers)?;
    let (name, _) = existing_namespace(&state, &tenant, &ns)?;
    unload(
        &state,
        &name,
        Some(&bundle),
        query.destination_broker.as_deref(),
    )
    .await
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
    params(("tenant" = String, Path, description = "tenant: ASCII letters, digits, _ - = : . (else 412, as Pulsar)"), ("namespace" = String, Path, description = "namespace: ASCII letters, digits, _ - = : . (else 412, as Pulsar)"),
        ("bundle" = String, Path, description = "bundle range, e.g. 0x00000000_0x40000000 (a malformed or unknown one: 412, as Pulsar)"), SplitQuery),
    request_body(content = Option<Vec<u64>>, description = "split positions as integers (hash values, Java longs), for specified_positions_divide (optional)", content_type = "application/json"),
    responses((status = 204, description = "split"),
    (status = 400, description = "malformed body", body = errors::ErrorBody),
    (status = 401, body = errors::ErrorBody), (status = 403, body = errors::ErrorBody),
    (status = 404, description = "no such namespace", body = errors::ErrorBody),
    (status = 412, description = "Namespace name or bundle range not valid, no such bundle, or no split point", body = errors::ErrorBody),
    (status = 503, description = "no leader, or too slow", body = errors::ErrorBody)), tag = "namespaces")]
pub(crate) async fn split_bundle(
    State(state): State<AppState>,
    Path((tenant, ns, bundle)): Path<(String, String, String)>,
    Query(query): Query<SplitQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    state.auth.admin(&headers)?;
    // The body first, as Pulsar's JAX-RS reads it before the resource method runs.
    let positions: Vec<String> = if body.iter().all(u8::is_ascii_whitespace) {
        Vec::new()
    } else {
        let values: Vec<serde_json::Value> = serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(format!("body: expected a JSON array of positions: {e}"))
        })?;
        values
            .iter()
            .map(|v| match v {
                // Pulsar's positions are Java longs.
                serde_json::Value::Number(n)
                    if n.as_u64().is_some_and(|p| p <= i64::MAX as u64) =>
                {
                    Ok(crate::bundle::format_hash(n.as_u64().unwrap_or_default()))
                }
                other => Err(ApiError::bad_request(format!(
                    "body: {other} is not a split position (an integer hash value)"
                ))),
            })
            .collect::<Result<_, _>>()?
    };
    let (name, _) = existing_namespace(&state, &tenant, &ns)?;
    let args = admin::SplitArgs {
        namespace: name,
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
