//! `GET /metrics`: Prometheus metrics, with Pulsar's names and labels where Pulsar has them and loadmgr's own
//! otherwise. A scraper that accepts OpenMetrics (Prometheus does) gets OpenMetrics 1.0; anything else (curl,
//! `promtool check metrics`, older agents) gets the Prometheus text format 0.0.4, where a counter's `# TYPE`
//! line names the `_total` series itself.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `pulsar_lb_cpu_usage`, `pulsar_lb_memory_usage`, `pulsar_lb_directMemory_usage`, `pulsar_lb_bandwidth_in_usage`, `pulsar_lb_bandwidth_out_usage` | `cluster`, `broker` (host), `metric="loadBalancing"` | this broker's usage in its last report, percent |
//! | `pulsar_lb_unload_broker_total`, `pulsar_lb_unload_bundle_total` | `cluster`, `metric="bundleUnloading"` | brokers and bundles unloaded by shedding (counted on the leader) |
//! | `pulsar_lb_bundles_split_total` | `cluster`, `metric="bundlesSplit"` | bundles split (on the leader) |
//! | `loadmgr_leader` | | 1 while this broker leads |
//! | `loadmgr_store_session_valid`, `loadmgr_session_losses_total` | | the store session, and how often it was declared lost |
//! | `loadmgr_brokers_registered`, `loadmgr_bundles_owned`, `loadmgr_bundles_served` | | what this broker sees, owns and serves |
//! | `loadmgr_reports_written_total`, `loadmgr_reports_applied_total`, `loadmgr_reports_malformed_total`, `loadmgr_report_lag_seconds` | | reports written here; applied or skipped by the leader, and their lag from `lastUpdate` |
//! | `loadmgr_shedding_cycle_seconds` | | a shedding cycle on the leader |
//! | `loadmgr_moves_started_total`, `loadmgr_moves_completed_total` | `cause` | moves, by cause |
//! | `loadmgr_move_duration_seconds` | | record to completion |
//! | `loadmgr_flush_seconds`, `loadmgr_flush_nodes_total` | | flushes |
//! | `loadmgr_lookups_total`, `loadmgr_lookup_seconds` | `outcome` | HTTP lookups |
//! | `loadmgr_store_operations_total`, `loadmgr_store_errors_total`, `loadmgr_store_operation_seconds` | `operation` | store calls |

use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::errors::ApiError;
use super::{errors, AppState};

type Labels = Vec<(String, String)>;

fn gauge(value: f64) -> Gauge<f64, AtomicU64> {
    let g = Gauge::<f64, AtomicU64>::default();
    g.set(value);
    g
}

/// The metrics of this broker (see the module docs).
#[utoipa::path(get, path = "/metrics", responses(
    (status = 200, description = "OpenMetrics 1.0 when accepted, else the Prometheus text format 0.0.4",
        content((String = "text/plain"), (String = "application/openmetrics-text"))),
    (status = 401, description = "no valid token (with authenticateMetricsEndpoint)", body = errors::ErrorBody)), tag = "metrics")]
pub(crate) async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let openmetrics = headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    state.auth.metrics(&headers)?;
    let settings = state.settings();
    let cluster = settings
        .cluster_name
        .clone()
        .unwrap_or_else(|| "standalone".to_owned());
    let host = state.sh.identity.advertised_address.clone();
    let m = &state.sh.meters;
    let mut r = Registry::default();

    // Pulsar's load-balancing gauges, from this broker's last report.
    let last_usage = *state.sh.last_usage.lock().unwrap();
    if let Some(usage) = last_usage {
        let labels: Labels = vec![
            ("cluster".into(), cluster.clone()),
            ("broker".into(), host.clone()),
            ("metric".into(), "loadBalancing".into()),
        ];
        for (name, resource) in [
            ("pulsar_lb_cpu_usage", usage.cpu),
            ("pulsar_lb_memory_usage", usage.memory),
            ("pulsar_lb_directMemory_usage", usage.direct_memory),
            ("pulsar_lb_bandwidth_in_usage", usage.bandwidth_in),
            ("pulsar_lb_bandwidth_out_usage", usage.bandwidth_out),
        ] {
            let family = Family::<Labels, Gauge<f64, AtomicU64>>::default();
            family
                .get_or_create(&labels)
                .set(f64::from(resource.percent_usage()));
            r.register(
                name,
                "usage in percent, from the broker's last load report",
                family,
            );
        }
    }
    for (name, help, metric, counter) in [
        (
            "pulsar_lb_unload_broker",
            "brokers shedding unloaded bundles from",
            "bundleUnloading",
            &m.unload_brokers,
        ),
        (
            "pulsar_lb_unload_bundle",
            "bundles unloaded by shedding",
            "bundleUnloading",
            &m.unload_bundles,
        ),
        (
            "pulsar_lb_bundles_split",
            "bundles split",
            "bundlesSplit",
            &m.splits,
        ),
    ] {
        let family = Family::<Labels, Counter>::default();
        family
            .get_or_create(&vec![
                ("cluster".into(), cluster.clone()),
                ("metric".into(), metric.into()),
            ])
            .inc_by(counter.get());
        r.register(name, help, family);
    }

    // loadmgr's own.
    r.register(
        "loadmgr_leader",
        "1 while this broker leads",
        gauge(if state.leads() { 1.0 } else { 0.0 }),
    );
    r.register(
        "loadmgr_store_session_valid",
        "1 while the store session can be alive on the server",
        gauge(if state.sh.store.session_validity().is_valid() {
            1.0
        } else {
            0.0
        }),
    );
    r.register(
        "loadmgr_session_losses",
        "times the store session was declared lost",
        m.session_losses.clone(),
    );
    r.register(
        "loadmgr_brokers_registered",
        "live registrations this broker sees",
        gauge(state.view.brokers().len() as f64),
    );
    r.register(
        "loadmgr_bundles_owned",
        "bundles whose ownership node this broker holds",
        gauge(state.sh.owned.lock().unwrap().len() as f64),
    );
    r.register(
        "loadmgr_bundles_served",
        "bundles this broker's host serves",
        gauge(state.sh.served.lock().unwrap().len() as f64),
    );
    let written: Counter = Counter::default();
    written.inc_by(state.sh.metrics.reports_written.load(Ordering::Relaxed));
    r.register(
        "loadmgr_reports_written",
        "load reports this broker wrote",
        written,
    );
    r.register(
        "loadmgr_reports_applied",
        "reports the leader applied (on the leader)",
        m.reports_applied.clone(),
    );
    let malformed: Counter = Counter::default();
    malformed.inc_by(state.sh.metrics.malformed_reports.load(Ordering::Relaxed));
    r.register(
        "loadmgr_reports_malformed",
        "registrations the leader skipped as no report (on the leader)",
        malformed,
    );
    r.register(
        "loadmgr_report_lag_seconds",
        "from a report's lastUpdate to the leader applying it",
        m.report_lag.clone(),
    );
    r.register(
        "loadmgr_shedding_cycle_seconds",
        "a shedding cycle: decision and starting its moves (on the leader)",
        m.shedding_cycle.clone(),
    );
    r.register(
        "loadmgr_moves_started",
        "moves the leader started, by cause",
        m.moves_started.clone(),
    );
    r.register(
        "loadmgr_moves_completed",
        "moves completed, by cause",
        m.moves_completed.clone(),
    );
    r.register(
        "loadmgr_move_duration_seconds",
        "from a move's record to its completion",
        m.move_duration.clone(),
    );
    r.register(
        "loadmgr_flush_seconds",
        "a flush batch (on the leader)",
        m.flush_duration.clone(),
    );
    r.register(
        "loadmgr_flush_nodes",
        "nodes written by flushes",
        m.flush_nodes.clone(),
    );
    r.register(
        "loadmgr_lookups",
        "HTTP lookups, by outcome",
        m.lookups.clone(),
    );
    r.register(
        "loadmgr_lookup_seconds",
        "HTTP lookup latency, by outcome",
        m.lookup_latency.clone(),
    );
    r.register(
        "loadmgr_store_operations",
        "store calls, by operation",
        m.store_operations.clone(),
    );
    r.register(
        "loadmgr_store_errors",
        "store calls that failed, by operation",
        m.store_errors.clone(),
    );
    r.register(
        "loadmgr_store_operation_seconds",
        "store call latency, by operation",
        m.store_latency.clone(),
    );
    let mut text = String::new();
    encode(&mut text, &r).map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding the metrics: {e}"),
        )
    })?;
    let (content_type, text) = if openmetrics {
        (
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            text,
        )
    } else {
        (
            "text/plain; version=0.0.4; charset=utf-8",
            prometheus_text(&text),
        )
    };
    Ok(([(axum::http::header::CONTENT_TYPE, content_type)], text).into_response())
}

/// Rewrites OpenMetrics text as the Prometheus text format 0.0.4: no `# EOF` or `# UNIT` lines, and a counter's
/// `# HELP` and `# TYPE` lines name its `_total` series, as 0.0.4 parsers expect.
fn prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let comment = ["# HELP ", "# TYPE "]
            .into_iter()
            .find(|p| line.starts_with(p));
        match comment {
            Some(prefix) => {
                let rest = &line[prefix.len()..];
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                if counters.contains(name) {
                    out.push_str(&format!("{prefix}{name}_total {tail}"));
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_text_names_counters_by_their_total_series() {
        let om = "# HELP a_seconds how long.\n# TYPE a_seconds gauge\n# UNIT a_seconds seconds\na_seconds 1.5\n\
                  # HELP b things done.\n# TYPE b counter\nb_total{k=\"v\"} 3\n# EOF\n";
        assert_eq!(
            prometheus_text(om),
            "# HELP a_seconds how long.\n# TYPE a_seconds gauge\na_seconds 1.5\n\
             # HELP b_total things done.\n# TYPE b_total counter\nb_total{k=\"v\"} 3\n"
        );
    }
}
