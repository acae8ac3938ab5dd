//! What the dashboard shows, as JSON under `/loadmgr/v1`: the cluster now (`cluster`), each broker's score over
//! the last hour with the moves (`history`), the latest moves with filters (`moves`) and every namespace's
//! bundles with their owners (`rings`).
//!
//! `cluster`, `history` and `moves` come from the leader's memory ([`crate::runtime::history`]): a broker that
//! does not lead forwards them to the leader, waiting at most 2 s. When the leader cannot be reached, `cluster` answers from the
//! reports in the store with `degraded` saying why, and the other two answer 503 with the reason. `rings` is
//! answered by any broker from its watched view of the ownership nodes. None of them reads more than the
//! registrations from the store.

use axum::extract::{OriginalUri, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::errors::{ApiError, ErrorBody};
use super::extract::{namespace_param, Query};
use super::AppState;
use crate::model::records::LeaderStatus;
use crate::runtime::admin;
use crate::runtime::history::{BrokerState, BrokerSummary, MoveEntry, SplitEntry, MAX_MOVES};

/// How long a follower waits for the leader's answer: a paused leader must not hang the page, which polls
/// every few seconds.
const LEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The thresholds a broker's score is compared with, percent.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Thresholds {
    /// `loadBalancerBrokerOverloadedThresholdPercentage`: OverloadShedder sheds above it; placement avoids it.
    pub overloaded: f64,
    /// `loadBalancerBrokerUnderloadedThresholdPercentage`.
    pub underloaded: f64,
    /// `loadBalancerAvgShedderLowThreshold`: AvgShedder's smaller gap (needs more consecutive hits).
    pub avg_shedder_low_gap: f64,
    /// `loadBalancerAvgShedderHighThreshold`: AvgShedder's larger gap.
    pub avg_shedder_high_gap: f64,
    /// `loadBalancerBrokerThresholdShedderPercentage`: ThresholdShedder's distance above the mean.
    pub threshold_shedder: f64,
}

/// A broker as the dashboard lists it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterBroker {
    /// The broker and its latest report.
    #[serde(flatten)]
    pub state: BrokerState,
    /// Whether it leads.
    pub leader: bool,
}

/// A namespace and its bundle count.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceCount {
    /// `tenant/namespace`.
    pub namespace: String,
    /// Bundles.
    pub bundles: usize,
}

/// The cluster now.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// The broker that built the answer (the leader, unless `degraded`).
    pub broker: String,
    /// The leader's broker id, if one is elected.
    pub leader: Option<String>,
    /// When the leader's memory of the cluster starts (it took over), epoch ms; absent when `degraded`.
    pub since_ms: Option<i64>,
    /// The answering broker's clock, epoch ms.
    pub now_ms: i64,
    /// Why this answer was built without the leader, when it was.
    pub degraded: Option<String>,
    /// The shedding strategy.
    pub strategy: String,
    /// The placement strategy.
    pub placement: String,
    /// Thresholds, percent.
    pub thresholds: Thresholds,
    /// Brokers in id order: registered ones, then ones whose registration went in the last 10 minutes.
    pub brokers: Vec<ClusterBroker>,
    /// Highest minus lowest score of the registered brokers with a report, points.
    pub spread: Option<f64>,
    /// Mean score of the same brokers, percent.
    pub mean: Option<f64>,
    /// The leader's counters.
    #[schema(value_type = Option<Object>)]
    pub status: Option<LeaderStatus>,
    /// Namespaces and their bundle counts.
    pub namespaces: Vec<NamespaceCount>,
}

/// Answers `uri` from the leader when this broker does not lead: `Ok(Some(response))` is the leader's
/// answer, `Ok(None)` means answer here, `Err` why the leader cannot be reached.
async fn from_leader(
    state: &AppState,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> Result<Option<Response>, ApiError> {
    if state.leads() {
        return Ok(None);
    }
    super::lookup::forward_within(state, uri, headers, LEADER_TIMEOUT)
        .await
        .map(Some)
}

fn spread_of(brokers: &[ClusterBroker]) -> (Option<f64>, Option<f64>) {
    let scores: Vec<f64> = brokers
        .iter()
        .filter(|b| b.state.gone_ms.is_none())
        .filter_map(|b| b.state.summary.as_ref().map(|s| s.score))
        .collect();
    if scores.is_empty() {
        return (None, None);
    }
    let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let min = scores.iter().cloned().fold(f64::INFINITY, f64::min);
    (
        Some(max - min),
        Some(scores.iter().sum::<f64>() / scores.len() as f64),
    )
}

/// The cluster now: every broker's score and resources against the thresholds, the leader's counters.
#[utoipa::path(get, path = "/loadmgr/v1/cluster", responses(
    (status = 200, description = "the cluster", body = Cluster),
    (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    (status = 503, description = "neither the leader nor the store answers", body = ErrorBody)), tag = "loadmgr")]
pub(crate) async fn cluster(
    State(state): State<AppState>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.auth.admin(&headers)?;
    let degraded = match from_leader(&state, &uri, &headers).await {
        Ok(Some(r)) if r.status().is_success() || r.status().is_client_error() => return Ok(r),
        Ok(Some(r)) => Some(format!("the leader answered {}", r.status())),
        Ok(None) => None,
        Err(e) => Some(e.reason),
    };
    let settings = state.settings();
    let now = state.sh.now_ms();
    let leader = state
        .view
        .leader()
        .and_then(|l| l.broker_id().map(str::to_owned));
    let (since_ms, mut brokers, status) = match &degraded {
        None => {
            let history = state.sh.history.lock().unwrap();
            let Some(h) = history.as_ref() else {
                return Err(ApiError::unavailable(
                    "this broker stopped leading while answering: retry",
                ));
            };
            (
                Some(h.since_ms()),
                h.brokers(now),
                state.sh.leader_status.lock().unwrap().clone(),
            )
        }
        Some(_) => {
            let weights = settings.resource_weights();
            let brokers = admin::brokers(&state.sh.store)
                .await?
                .into_iter()
                .map(|b| BrokerState {
                    id: b.id,
                    first_seen_ms: 0,
                    new: false,
                    gone_ms: None,
                    summary: b
                        .report
                        .as_ref()
                        .ok()
                        .map(|r| BrokerSummary::of(r, &weights)),
                    error: b.report.err(),
                })
                .collect();
            let status = admin::leader(&state.sh.store)
                .await
                .ok()
                .flatten()
                .and_then(|(_, s)| s);
            (None, brokers, status)
        }
    };
    // The view's registrations are current even when the leader has not read a new broker's report yet.
    let registered = state.view.brokers();
    for id in registered.keys() {
        if !brokers.iter().any(|b| &b.id == id) {
            brokers.push(BrokerState {
                id: id.clone(),
                first_seen_ms: now,
                new: true,
                gone_ms: None,
                summary: None,
                error: Some("no report read yet".into()),
            });
        }
    }
    brokers.sort_by(|a, b| a.id.cmp(&b.id));
    let brokers: Vec<ClusterBroker> = brokers
        .into_iter()
        .map(|b| ClusterBroker {
            leader: leader.as_deref() == Some(b.id.as_str()),
            state: b,
        })
        .collect();
    let (spread, mean) = spread_of(&brokers);
    let pct = |x: i32| x as f64;
    Ok(Json(Cluster {
        broker: state.sh.broker_id.clone(),
        leader,
        since_ms,
        now_ms: now,
        degraded,
        strategy: settings
            .load_balancer_load_shedding_strategy
            .name()
            .to_owned(),
        placement: settings
            .load_balancer_load_placement_strategy
            .name()
            .to_owned(),
        thresholds: Thresholds {
            overloaded: pct(settings.load_balancer_broker_overloaded_threshold_percentage),
            underloaded: pct(settings.load_balancer_broker_underloaded_threshold_percentage),
            avg_shedder_low_gap: pct(settings.load_balancer_avg_shedder_low_threshold),
            avg_shedder_high_gap: pct(settings.load_balancer_avg_shedder_high_threshold),
            threshold_shedder: pct(settings.load_balancer_broker_threshold_shedder_percentage),
        },
        brokers,
        spread,
        mean,
        status,
        namespaces: state
            .view
            .namespace_sizes()
            .into_iter()
            .map(|(namespace, bundles)| NamespaceCount { namespace, bundles })
            .collect(),
    })
    .into_response())
}

/// The query of the history.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct HistoryQuery {
    /// How far back, minutes (1–60, default 60).
    pub minutes: Option<u32>,
    /// Samples per broker at most (10–1000, default 240).
    pub points: Option<u32>,
}

/// Each broker's score over time, with the moves and splits of the same time.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryAnswer {
    /// The leader.
    pub broker: String,
    /// When the leader's memory starts, epoch ms.
    pub since_ms: i64,
    /// The first instant asked for, epoch ms.
    pub from_ms: i64,
    /// The leader's clock, epoch ms.
    pub now_ms: i64,
    /// Broker id → `[epoch ms, score percent]` samples, oldest first.
    #[schema(value_type = Object)]
    pub scores: std::collections::BTreeMap<String, Vec<(i64, f64)>>,
    /// Moves of bundles that had an owner (not first assignments), decided in the window, newest first
    /// (at most 500).
    pub moves: Vec<MoveEntry>,
    /// Splits in the window, newest first.
    pub splits: Vec<SplitEntry>,
}

/// Each broker's score over the last hour (from the reports the leader saw), with the moves and splits.
#[utoipa::path(get, path = "/loadmgr/v1/history", params(HistoryQuery), responses(
    (status = 200, description = "the history", body = HistoryAnswer),
    (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    (status = 503, description = "the leader cannot be reached", body = ErrorBody)), tag = "loadmgr")]
pub(crate) async fn history(
    State(state): State<AppState>,
    OriginalUri(uri): OriginalUri,
    Query(query): Query<HistoryQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.auth.admin(&headers)?;
    let minutes = query.minutes.unwrap_or(60);
    let points = query.points.unwrap_or(240);
    if !(1..=60).contains(&minutes) {
        return Err(ApiError::bad_request(format!(
            "minutes must be 1 to 60, not {minutes}"
        )));
    }
    if !(10..=1000).contains(&points) {
        return Err(ApiError::bad_request(format!(
            "points must be 10 to 1000, not {points}"
        )));
    }
    if let Some(r) = from_leader(&state, &uri, &headers).await? {
        return Ok(r);
    }
    let now = state.sh.now_ms();
    let from = now - minutes as i64 * 60_000;
    let history = state.sh.history.lock().unwrap();
    let h = history.as_ref().ok_or_else(|| {
        ApiError::unavailable("this broker stopped leading while answering: retry")
    })?;
    Ok(Json(HistoryAnswer {
        broker: state.sh.broker_id.clone(),
        since_ms: h.since_ms(),
        from_ms: from,
        now_ms: now,
        scores: h.scores(from, now, points as usize),
        moves: h.moves(500, |m| m.source.is_some() && m.created_ms >= from),
        splits: h.splits().into_iter().filter(|s| s.at_ms >= from).collect(),
    })
    .into_response())
}

/// The query of the moves.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct MovesQuery {
    /// Only bundles of this namespace (`tenant/namespace`).
    pub namespace: Option<String>,
    /// Only moves from or to this broker.
    pub broker: Option<String>,
    /// Only this cause (`lookup`, `shedding`, `unload`, `orphan`, `replaced`, `split`, `adopted`).
    pub cause: Option<String>,
    /// At most this many (1–2000, default 200).
    pub limit: Option<usize>,
}

/// The latest moves the leader made (its assignment records as written), newest first.
#[utoipa::path(get, path = "/loadmgr/v1/moves", params(MovesQuery), responses(
    (status = 200, description = "moves, newest first", body = Vec<MoveEntry>),
    (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    (status = 503, description = "the leader cannot be reached", body = ErrorBody)), tag = "loadmgr")]
pub(crate) async fn moves(
    State(state): State<AppState>,
    OriginalUri(uri): OriginalUri,
    Query(query): Query<MovesQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.auth.admin(&headers)?;
    let limit = query.limit.unwrap_or(200);
    if !(1..=MAX_MOVES).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be 1 to {MAX_MOVES}, not {limit}"
        )));
    }
    let prefix = match &query.namespace {
        Some(ns) => Some(format!("{}/", namespace_param(ns)?)),
        None => None,
    };
    const CAUSES: [&str; 7] = [
        "lookup", "shedding", "unload", "orphan", "replaced", "split", "adopted",
    ];
    if let Some(c) = &query.cause {
        if !CAUSES.contains(&c.as_str()) {
            return Err(ApiError::bad_request(format!(
                "cause must be one of {}, not {c}",
                CAUSES.join(", ")
            )));
        }
    }
    if let Some(r) = from_leader(&state, &uri, &headers).await? {
        return Ok(r);
    }
    let history = state.sh.history.lock().unwrap();
    let h = history.as_ref().ok_or_else(|| {
        ApiError::unavailable("this broker stopped leading while answering: retry")
    })?;
    let broker = query.broker.as_deref();
    Ok(Json(h.moves(limit, |m| {
        prefix.as_deref().map_or(true, |p| m.bundle.starts_with(p))
            && broker.map_or(true, |b| {
                m.destination == b || m.source.as_deref() == Some(b)
            })
            && query.cause.as_deref().map_or(true, |c| m.cause == c)
    }))
    .into_response())
}

/// The query of the rings.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct RingsQuery {
    /// Only this namespace (`tenant/namespace`).
    pub namespace: Option<String>,
}

/// A bundle of a ring.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RingBundle {
    /// Full bundle name.
    pub bundle: String,
    /// Lower end of its hash range (inclusive), 0 to 2^32 − 1.
    pub lower: u64,
    /// Upper end (exclusive, but for the last bundle, which includes `0xffffffff`).
    pub upper: u64,
    /// Whoever holds its ownership node.
    pub owner: Option<String>,
    /// Whether the holder is unloading it.
    pub unloading: bool,
}

/// A namespace's bundles around the hash ring.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ring {
    /// `tenant/namespace`.
    pub namespace: String,
    /// Bundles in hash order.
    pub bundles: Vec<RingBundle>,
}

/// Every namespace's bundles with their owners, as this broker's view holds them.
#[utoipa::path(get, path = "/loadmgr/v1/rings", params(RingsQuery), responses(
    (status = 200, description = "namespaces in name order", body = Vec<Ring>),
    (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    tag = "loadmgr")]
pub(crate) async fn rings(
    State(state): State<AppState>,
    Query(query): Query<RingsQuery>,
    headers: HeaderMap,
) -> Result<Json<Vec<Ring>>, ApiError> {
    state.auth.admin(&headers)?;
    // One namespace is read alone, not picked out of a copy of all of them.
    let namespaces = match &query.namespace {
        Some(ns) => {
            let name = namespace_param(ns)?.to_string();
            state
                .view
                .namespace(&name)
                .map(|b| vec![(name, b)])
                .unwrap_or_default()
        }
        None => state.view.namespaces(),
    };
    let mut out = Vec::new();
    for (namespace, bundles) in namespaces {
        let bundles = bundles
            .ranges()
            .map(|r| {
                let bundle = format!("{namespace}/{r}");
                let holder = state.view.holder(&bundle);
                RingBundle {
                    lower: r.lower(),
                    upper: r.upper(),
                    unloading: holder.as_ref().is_some_and(|h| h.1),
                    owner: holder.map(|h| h.0),
                    bundle,
                }
            })
            .collect();
        out.push(Ring { namespace, bundles });
    }
    Ok(Json(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(id: &str, score: Option<f64>, gone: bool) -> ClusterBroker {
        ClusterBroker {
            state: BrokerState {
                id: id.into(),
                first_seen_ms: 0,
                new: false,
                gone_ms: gone.then_some(1),
                summary: score.map(|score| BrokerSummary {
                    score,
                    cpu: score,
                    memory: 0.0,
                    direct_memory: 0.0,
                    bandwidth_in: 0.0,
                    bandwidth_out: 0.0,
                    bundles: 0,
                    topics: 0,
                    msg_rate_in: 0.0,
                    msg_rate_out: 0.0,
                    msg_throughput_in: 0.0,
                    msg_throughput_out: 0.0,
                    last_update_ms: 0,
                    version: None,
                }),
                error: None,
            },
            leader: false,
        }
    }

    #[test]
    fn the_spread_leaves_out_gone_brokers_and_brokers_without_a_report() {
        let brokers = vec![
            broker("a", Some(20.0), false),
            broker("b", Some(50.0), false),
            broker("c", Some(99.0), true),
            broker("d", None, false),
        ];
        assert_eq!(spread_of(&brokers), (Some(30.0), Some(35.0)));
        assert_eq!(spread_of(&[]), (None, None));
    }
}
