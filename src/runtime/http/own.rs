//! loadmgr's own endpoints under `/loadmgr/v1`: the leader's status, the live plan (what the configured
//! strategy would do now on the live data, changing nothing), the assignment records, and the OpenAPI
//! document of everything the web service serves.

use super::extract::Query;
use axum::extract::{OriginalUri, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::errors::{ApiError, ErrorBody};
use super::AppState;
use crate::config::{PlacementKind, ShedderKind};
use crate::core::explain::{self, ExplainOptions};
use crate::core::snapshot::Snapshot;
use crate::model::records::{BundleAssignment, LeaderStatus};
use crate::paths;
use crate::runtime::admin;
use crate::store::MetadataStoreExt;

/// The leader and its last status.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The leader's broker id, if one is elected.
    pub leader: Option<String>,
    /// The leader's web service URL.
    pub service_url: Option<String>,
    /// Its counters as it last wrote them to `/loadmgr/leader-status`.
    #[schema(value_type = Option<Object>)]
    pub status: Option<LeaderStatus>,
    /// The broker answering.
    pub broker: String,
    /// Whether the broker answering leads.
    pub leading: bool,
}

/// The leader's status.
#[utoipa::path(get, path = "/loadmgr/v1/status", responses(
    (status = 200, description = "status", body = Status),
    (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)), tag = "loadmgr")]
pub(crate) async fn status(
    State(state): State<AppState>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Result<axum::response::Response, ApiError> {
    state.auth.admin(&headers)?;
    let live = state.sh.leader_status.lock().unwrap().clone();
    if live.is_none() {
        // The leader's counters are current on the leader only: ask it, else fall back to what it last flushed.
        if let Ok(response) = super::lookup::forward(&state, &uri, &headers).await {
            if response.status().is_success() {
                return Ok(response);
            }
        }
    }
    let leader = admin::leader(&state.sh.store).await?;
    Ok(Json(Status {
        leader: leader
            .as_ref()
            .and_then(|(l, _)| l.broker_id().map(str::to_owned)),
        service_url: leader.as_ref().and_then(|(l, _)| l.service_url.clone()),
        status: live.or_else(|| leader.and_then(|(_, s)| s)),
        broker: state.sh.broker_id.clone(),
        leading: state.leads(),
    })
    .into_response())
}

/// The query of the live plan.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct PlanQuery {
    /// Shedding strategy (a name such as AvgShedder or a class name); the configured one when absent.
    pub strategy: Option<String>,
    /// Placement strategy; the configured one when absent.
    pub placement: Option<String>,
}

/// What the shedding strategy would do now on the live data, with its reasons (`loadmgr explain --store`);
/// changes nothing.
#[utoipa::path(get, path = "/loadmgr/v1/plan", params(PlanQuery), responses(
    (status = 200, description = "the plan, as `loadmgr explain --json` prints it", body = Object),
    (status = 400, description = "unknown strategy", body = ErrorBody),
    (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)), tag = "loadmgr")]
pub(crate) async fn plan(
    State(state): State<AppState>,
    Query(query): Query<PlanQuery>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    state.auth.admin(&headers)?;
    let shedder = query
        .strategy
        .as_deref()
        .map(|s| {
            ShedderKind::from_class_name(s)
                .ok_or_else(|| ApiError::bad_request(format!("unknown strategy {s}")))
        })
        .transpose()?;
    let placement = query
        .placement
        .as_deref()
        .map(|s| {
            PlacementKind::from_class_name(s)
                .ok_or_else(|| ApiError::bad_request(format!("unknown placement {s}")))
        })
        .transpose()?;
    let settings = state.settings();
    let live =
        crate::runtime::snapshot::read_live(&state.sh.store, &settings, state.sh.now_ms()).await?;
    let snapshot = Snapshot::from_value(live.value)
        .map_err(|e| ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let options = ExplainOptions {
        shedder,
        placement,
        settings,
        cycles: 1,
        seed: state.sh.seed,
        candidates: false,
    };
    let report = explain::run(&snapshot, &options)
        .map_err(|e| ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let mut value = serde_json::to_value(&report)
        .map_err(|e| ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    if let Some(o) = value.as_object_mut() {
        o.insert("warnings".into(), serde_json::json!(live.warnings));
    }
    Ok(Json(value))
}

/// A registered broker with its report.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerReport {
    /// Broker id.
    pub id: String,
    /// Whether it leads.
    pub leader: bool,
    /// Its load report (`LocalBrokerData`), or null when it cannot be read.
    #[schema(value_type = Option<Object>)]
    pub report: Option<crate::model::LocalBrokerData>,
    /// Why the report cannot be read, when it cannot.
    pub error: Option<String>,
}

/// Every registered broker with its load report.
#[utoipa::path(get, path = "/loadmgr/v1/brokers", responses(
    (status = 200, description = "brokers in id order", body = Vec<BrokerReport>),
    (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)), tag = "loadmgr")]
pub(crate) async fn brokers(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Vec<BrokerReport>>, ApiError> {
    state.auth.admin(&headers)?;
    let leader = state
        .view
        .leader()
        .and_then(|l| l.broker_id().map(str::to_owned));
    Ok(Json(
        admin::brokers(&state.sh.store)
            .await?
            .into_iter()
            .map(|b| BrokerReport {
                leader: leader.as_deref() == Some(b.id.as_str()),
                id: b.id,
                error: b.report.as_ref().err().cloned(),
                report: b.report.ok(),
            })
            .collect(),
    ))
}

/// One bundle of a namespace: its owner and the leader's record.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleState {
    /// Full bundle name.
    pub bundle: String,
    /// The owner, when owned.
    pub owner: Option<String>,
    /// Whether the owner is unloading it.
    pub unloading: bool,
    /// The assignment record, when the leader assigned it.
    #[schema(value_type = Option<Object>)]
    pub record: Option<BundleAssignment>,
}

/// A namespace's bundles with owners and records (what `loadmgr admin namespaces bundles` prints).
#[utoipa::path(get, path = "/loadmgr/v1/namespaces/{tenant}/{namespace}",
    params(("tenant" = String, Path, description = "tenant: letters, digits, _ - = : .", pattern = "^[-=:.A-Za-z0-9_]+$"), ("namespace" = String, Path, description = "namespace: letters, digits, _ - = : .", pattern = "^[-=:.A-Za-z0-9_]+$")),
    responses((status = 200, description = "bundles", body = Vec<BundleState>),
    (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    (status = 400, description = "malformed namespace", body = ErrorBody), (status = 412, description = "no such namespace", body = ErrorBody)), tag = "loadmgr")]
pub(crate) async fn namespace(
    State(state): State<AppState>,
    super::extract::Path((tenant, ns)): super::extract::Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<Vec<BundleState>>, ApiError> {
    state.auth.admin(&headers)?;
    let name = super::extract::namespace_param(&format!("{tenant}/{ns}"))?;
    let (_, rows) = admin::namespace_bundles(&state.sh.store, &name.to_string()).await?;
    Ok(Json(
        rows.into_iter()
            .map(|r| BundleState {
                bundle: r.bundle,
                unloading: r.owner.as_ref().is_some_and(|(_, d)| *d),
                owner: r.owner.map(|(o, _)| o),
                record: r.record,
            })
            .collect(),
    ))
}

/// The query of the assignment records.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct AssignmentsQuery {
    /// Only this namespace's records (`tenant/namespace`).
    pub namespace: Option<String>,
}

/// The assignment records the leader wrote (`/loadmgr/assignments`), with their causes and reasons.
#[utoipa::path(get, path = "/loadmgr/v1/assignments", params(AssignmentsQuery), responses(
    (status = 200, description = "records, by bundle", body = Vec<Object>),
    (status = 400, description = "malformed namespace", body = ErrorBody),
    (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)), tag = "loadmgr")]
pub(crate) async fn assignments(
    State(state): State<AppState>,
    Query(query): Query<AssignmentsQuery>,
    headers: HeaderMap,
) -> Result<Json<Vec<BundleAssignment>>, ApiError> {
    state.auth.admin(&headers)?;
    let root = match &query.namespace {
        Some(ns) => {
            let ns = super::extract::namespace_param(ns)?;
            format!("{}/{ns}", paths::ASSIGNMENTS)
        }
        None => paths::ASSIGNMENTS.to_owned(),
    };
    let mut out = Vec::new();
    for bundle in crate::runtime::ownership::list_bundles(&state.sh.store, &root).await? {
        let path = format!("{root}/{bundle}");
        if let Ok(Some((r, _))) = state.sh.store.get_json::<BundleAssignment>(&path).await {
            out.push(r);
        }
    }
    out.sort_by(|a, b| a.bundle.cmp(&b.bundle));
    Ok(Json(out))
}
