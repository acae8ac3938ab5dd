//! Topic lookups over HTTP (`GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}`), and the
//! partitioned-topic metadata a client asks for first (`GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions`).
//!
//! # Contract
//!
//! * An owned bundle is answered at once, by any broker, from its watched view: `200` with Pulsar's
//!   `LookupData` of the owner: `brokerUrl`, `brokerUrlTls`, `httpUrl`, `httpUrlTls`, `nativeUrl` and
//!   `brokerUrlSsl`, every one always present (TLS URLs empty when the owner has none; `brokerUrlSsl` always
//!   empty, as Pulsar writes it): older C++ clients refuse an answer without `brokerUrlTls`, later ones without
//!   both `brokerUrlTls` and `brokerUrlSsl`.
//! * An unowned bundle is placed by the leader. On the leader, its leader task places it; elsewhere the request
//!   is **forwarded** to the leader's web service with the client's `Authorization` header, and the leader's
//!   answer returned. Pulsar's modular load manager answers `307` to the leader instead; a forward costs the
//!   client no second request and keeps its token (the C++ client drops the `Authorization` header when a
//!   redirect changes host or port). The leader answers once the chosen broker holds the bundle.
//! * `404 {"reason": "Namespace not found"}` for a namespace that does not exist, `400` for an unknown domain,
//!   `412` for an invalid topic name (Pulsar's "Topic name is not valid"),
//!   `503` while no leader is known or the leader does not answer; a forwarded request that reaches a broker
//!   that no longer leads is `503` too (the client retries).

use std::time::Duration;

use super::extract::{Path, Query};
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use utoipa::{IntoParams, ToSchema};

use super::errors::ApiError;
use super::{errors, AppState};
use crate::bundle::TopicName;
use crate::core::leader::Request;
use crate::model::records::LookupAnswer;
use crate::model::NamespaceEphemeralData;
use crate::paths;
use crate::store::MetadataStoreExt;

/// Header marking a request one broker forwarded to the leader (it is not forwarded again).
const FORWARDED: &str = "x-loadmgr-forwarded";

/// Where a topic is served (Pulsar's `LookupData`). Every field is always present: older C++ clients refuse
/// an answer without `brokerUrlTls`, later ones take `brokerUrlSsl` in its place; the TLS URLs are empty
/// strings when the owner serves no TLS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LookupData {
    /// `pulsar://host:port` of the owner.
    pub broker_url: String,
    /// `pulsar+ssl://host:port` of the owner, or empty when it serves no TLS.
    #[serde(default)]
    pub broker_url_tls: String,
    /// `http://host:port` of the owner.
    pub http_url: String,
    /// `https://host:port` of the owner, or empty when it serves no HTTPS.
    #[serde(default)]
    pub http_url_tls: String,
    /// Same as `brokerUrl`.
    pub native_url: String,
    /// Always empty; kept, as Pulsar does, for older C++ clients.
    #[serde(default)]
    pub broker_url_ssl: String,
}

impl LookupData {
    fn of(data: &NamespaceEphemeralData) -> LookupData {
        let native = data.native_url.clone().unwrap_or_default();
        LookupData {
            broker_url: native.clone(),
            broker_url_tls: data.native_url_tls.clone().unwrap_or_default(),
            http_url: data.http_url.clone().unwrap_or_default(),
            http_url_tls: data.http_url_tls.clone().unwrap_or_default(),
            native_url: native,
            broker_url_ssl: String::new(),
        }
    }
}

/// The lookup's query.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
pub struct LookupQuery {
    /// Pulsar's redirect flag; accepted and ignored (loadmgr forwards instead of redirecting).
    #[allow(dead_code)]
    pub authoritative: Option<bool>,
    /// A listener name of `advertisedListeners`; loadmgr's brokers advertise none, so the default URLs are
    /// answered.
    #[allow(dead_code)]
    pub listener_name: Option<String>,
}

/// Parses the path's topic: 400 for an unknown domain, 412 for an invalid name (Pulsar's "Topic name is not
/// valid").
pub(crate) fn topic(
    domain: &str,
    tenant: &str,
    namespace: &str,
    local: &str,
) -> Result<TopicName, ApiError> {
    if domain != "persistent" && domain != "non-persistent" {
        return Err(ApiError::bad_request(format!(
            "topic domain {domain}: expected persistent or non-persistent"
        )));
    }
    TopicName::parse(&format!("{domain}://{tenant}/{namespace}/{local}")).map_err(|e| {
        ApiError::precondition(format!(
            "Topic name is not valid: {domain}://{tenant}/{namespace}/{local}: {e}"
        ))
    })
}

/// Looks a topic up: answers the owner of its bundle, placing the bundle first when nobody owns it.
#[utoipa::path(
    get,
    path = "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}",
    params(
        ("domain" = String, Path, description = "persistent or non-persistent", pattern = "^(persistent|non-persistent)$"),
        ("tenant" = String, Path, description = "tenant: ASCII letters, digits, _ - = : . (else 412, as Pulsar)"),
        ("namespace" = String, Path, description = "namespace: ASCII letters, digits, _ - = : . (else 412, as Pulsar)"),
        ("topic" = String, Path, description = "topic name (URL-encoded)"),
        LookupQuery
    ),
    responses(
        (status = 200, description = "the owner", body = LookupData),
        (status = 400, description = "unknown domain, or a malformed query", body = errors::ErrorBody),
        (status = 412, description = "Topic name is not valid", body = errors::ErrorBody),
        (status = 401, description = "no valid token", body = errors::ErrorBody),
        (status = 404, description = "namespace not found", body = errors::ErrorBody),
        (status = 503, description = "no leader, or the leader does not answer", body = errors::ErrorBody)
    ),
    tag = "lookup"
)]
pub(crate) async fn lookup(
    State(state): State<AppState>,
    Path((domain, tenant, namespace, local)): Path<(String, String, String, String)>,
    Query(query): Query<LookupQuery>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let (outcome, result) = answer(
        &state, &domain, &tenant, &namespace, &local, &query, &uri, &headers,
    )
    .await;
    state.sh.meters.lookup(outcome, started.elapsed());
    match result {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

#[allow(clippy::too_many_arguments)]
async fn answer(
    state: &AppState,
    domain: &str,
    tenant: &str,
    namespace: &str,
    local: &str,
    _query: &LookupQuery,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> (&'static str, Result<Response, ApiError>) {
    if let Err(e) = state.auth.client(headers) {
        return ("error", Err(e));
    }
    let topic = match topic(domain, tenant, namespace, local) {
        Ok(t) => t,
        Err(e) => return ("error", Err(e)),
    };
    let Some(bundle) = state.view.bundle_of(&topic) else {
        return ("not_found", Err(ApiError::not_found("Namespace not found")));
    };
    let bundle = bundle.to_string();
    if let Some((_, data)) = state.view.owner(&bundle) {
        return ("owned", Ok(Json(LookupData::of(&data)).into_response()));
    }
    if state.leads() {
        return match place(state, &topic, &bundle).await {
            Ok(data) => ("placed", Ok(Json(LookupData::of(&data)).into_response())),
            Err(e) => ("unavailable", Err(e)),
        };
    }
    if headers.contains_key(FORWARDED) {
        return (
            "unavailable",
            Err(ApiError::unavailable(
                "this broker no longer leads: the leader changed, retry the lookup",
            )),
        );
    }
    match forward(state, uri, headers).await {
        Ok(r) => ("forwarded", Ok(r)),
        Err(e) => ("unavailable", Err(e)),
    }
}

/// On the leader: asks the leader task to place the bundle, then waits until a registered broker holds it.
async fn place(
    state: &AppState,
    topic: &TopicName,
    bundle: &str,
) -> Result<NamespaceEphemeralData, ApiError> {
    let deadline = Instant::now() + state.lookup_timeout;
    let mut changes = state.view.changed();
    let answer = state
        .sh
        .ask_leader(Request::Lookup {
            topic: topic.full_name().to_owned(),
        })
        .await
        .ok_or_else(|| ApiError::unavailable("this broker stopped leading: retry the lookup"))?;
    if !answer.ok {
        return Err(ApiError::unavailable(answer.message));
    }
    let placed: Option<LookupAnswer> = serde_json::from_value(answer.result).ok();
    let target = placed.map_or_else(|| bundle.to_owned(), |a| a.bundle);
    loop {
        if let Some((_, data)) = state.view.owner(&target) {
            return Ok(data);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ApiError::unavailable(format!(
                "{target} was assigned but nobody took it within {:?}",
                state.lookup_timeout
            )));
        }
        let _ = tokio::time::timeout(left, changes.changed()).await;
    }
}

/// Forwards a GET to the leader's web service (with the client's `Authorization` header) and returns its answer
/// as is; a request that was itself forwarded is not forwarded again.
pub(crate) async fn forward(
    state: &AppState,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    forward_within(
        state,
        uri,
        headers,
        state.lookup_timeout + Duration::from_secs(5),
    )
    .await
}

/// [`forward`], giving up after `timeout` (the whole exchange).
pub(crate) async fn forward_within(
    state: &AppState,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    timeout: Duration,
) -> Result<Response, ApiError> {
    if headers.contains_key(FORWARDED) {
        return Err(ApiError::unavailable(
            "the leader changed while the request was forwarded: retry",
        ));
    }
    let leader = state
        .view
        .leader()
        .and_then(|l| l.service_url)
        .ok_or_else(|| ApiError::unavailable("no leader is elected: retry the lookup"))?;
    let url = format!(
        "{}{}",
        leader.trim_end_matches('/'),
        uri.path_and_query().map_or(uri.path(), |p| p.as_str())
    );
    let mut request = state
        .client
        .get(&url)
        .header(FORWARDED, "1")
        .timeout(timeout);
    if let Some(auth) = headers.get(axum::http::header::AUTHORIZATION) {
        request = request.header(axum::http::header::AUTHORIZATION, auth.clone());
    }
    let response = request.send().await.map_err(|e| {
        ApiError::unavailable(format!("the leader at {leader} does not answer: {e}"))
    })?;
    let status =
        StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let body = response
        .bytes()
        .await
        .map_err(|e| ApiError::unavailable(format!("reading the leader's answer: {e}")))?;
    Ok((
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// Partitioned-topic metadata (Pulsar's `PartitionedTopicMetadata`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PartitionedTopicMetadata {
    /// Number of partitions; 0 for a topic that is not partitioned.
    pub partitions: u32,
    /// Properties of the partitioned topic, when it has some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<std::collections::BTreeMap<String, String>>,
}

/// The partitions of a topic, from `/admin/partitioned-topics/...` (0 when the topic is not partitioned).
#[utoipa::path(
    get,
    path = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions",
    params(
        ("domain" = String, Path, description = "persistent or non-persistent", pattern = "^(persistent|non-persistent)$"),
        ("tenant" = String, Path, description = "tenant: ASCII letters, digits, _ - = : . (else 412, as Pulsar)"),
        ("namespace" = String, Path, description = "namespace: ASCII letters, digits, _ - = : . (else 412, as Pulsar)"),
        ("topic" = String, Path, description = "topic name (URL-encoded)")
    ),
    responses(
        (status = 200, description = "the metadata", body = PartitionedTopicMetadata),
        (status = 400, description = "unknown domain, or a malformed query", body = errors::ErrorBody),
        (status = 412, description = "Topic name is not valid", body = errors::ErrorBody),
        (status = 401, description = "no valid token", body = errors::ErrorBody),
        (status = 404, description = "namespace not found", body = errors::ErrorBody)
    ),
    tag = "lookup"
)]
pub(crate) async fn partitions(
    State(state): State<AppState>,
    Path((domain, tenant, namespace, local)): Path<(String, String, String, String)>,
    headers: HeaderMap,
) -> Result<Json<PartitionedTopicMetadata>, ApiError> {
    state.auth.client(&headers)?;
    let topic = topic(&domain, &tenant, &namespace, &local)?;
    if state
        .view
        .namespace(&topic.namespace().to_string())
        .is_none()
    {
        return Err(ApiError::not_found("Namespace not found"));
    }
    let encoded: String = form_urlencoded::byte_serialize(local.as_bytes()).collect();
    let path = format!(
        "{}/{tenant}/{namespace}/{domain}/{encoded}",
        paths::PARTITIONED_TOPICS
    );
    match state
        .sh
        .store
        .get_json::<PartitionedTopicMetadata>(&path)
        .await
    {
        Ok(Some((m, _))) => Ok(Json(m)),
        Ok(None) => Ok(Json(PartitionedTopicMetadata {
            partitions: 0,
            properties: None,
        })),
        Err(crate::store::Error::Content { path, reason }) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{path}: malformed partitioned-topic metadata: {reason}"),
        )),
        Err(e) => Err(e.into()),
    }
}
