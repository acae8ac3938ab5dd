//! `loadmgr admin --url`: the same commands as against the store, over a broker's REST API (Pulsar's paths
//! where Pulsar has them, `/loadmgr/v1` otherwise), printing the same lines.

use reqwest::Method;

use super::admin::{AdminCommand, BrokersCommand, NamespacesCommand, TopicsCommand};
use super::rest::Rest;
use super::{CliError, CliResult};
use crate::model::json::reindent;
use crate::model::records::{BundleAssignment, LeaderStatus};
use crate::model::LocalBrokerData;

fn pct(v: f64) -> String {
    format!("{v:.1} %")
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct BrokerReport {
    id: String,
    leader: bool,
    report: Option<LocalBrokerData>,
    error: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    leader: Option<String>,
    status: Option<LeaderStatus>,
}

#[derive(serde::Deserialize)]
struct BundleState {
    bundle: String,
    owner: Option<String>,
    unloading: bool,
    record: Option<BundleAssignment>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct LookupData {
    broker_url: String,
    http_url: String,
    broker_url_tls: Option<String>,
    http_url_tls: Option<String>,
}

/// `tenant/namespace` → `tenant/namespace` checked to have exactly two parts (for the REST paths).
fn ns_path(namespace: &str) -> Result<&str, CliError> {
    match namespace.split('/').collect::<Vec<_>>().as_slice() {
        [t, n] if !t.is_empty() && !n.is_empty() => Ok(namespace),
        _ => Err(CliError::new(format!(
            "namespace {namespace}: expected tenant/namespace"
        ))),
    }
}

/// Runs `loadmgr admin --url ...`. The brokers' configuration applies (defaults such as the bundles of a new
/// namespace); `--config` is not read.
pub fn run(args: super::admin::AdminArgs) -> CliResult {
    let timeout =
        std::time::Duration::from_millis(args.timeout_ms) + std::time::Duration::from_secs(5);
    let rest = Rest::new(&args.rest, timeout)?;
    super::block_on(async move { execute(&rest, args.command).await })
}

/// Runs one admin command over REST.
pub async fn execute(rest: &Rest, command: AdminCommand) -> CliResult {
    match command {
        AdminCommand::Brokers(BrokersCommand::List) => {
            let brokers: Vec<BrokerReport> = rest.get_json("/loadmgr/v1/brokers").await?;
            if brokers.is_empty() {
                println!("no broker is registered (asked {})", rest.base());
            }
            for b in brokers {
                let tag = if b.leader { " (leader)" } else { "" };
                match b.report {
                    Some(r) => println!(
                        "{}{tag}: {} bundles, {} topics, {:.1} msg/s, cpu {}, max usage {}",
                        b.id,
                        r.num_bundles,
                        r.num_topics,
                        r.total_msg_rate(),
                        pct(r.cpu.percent_usage() as f64),
                        pct(r.max_resource_usage() * 100.0)
                    ),
                    None => println!(
                        "{}{tag}: unreadable report ({})",
                        b.id,
                        b.error.unwrap_or_default()
                    ),
                }
            }
            Ok(())
        }
        AdminCommand::Brokers(BrokersCommand::Leader) => {
            let s: Status = rest.get_json("/loadmgr/v1/status").await?;
            let leader = s
                .leader
                .ok_or_else(|| CliError::new(format!("no leader (asked {})", rest.base())))?;
            println!("{leader}");
            if let Some(s) = s.status {
                println!(
                    "  leading since {} ms; reports applied {}, malformed reports {}, shedding cycles {}, moves started {}, completed {}, splits {}, flushes {}, requests answered {}",
                    s.leading_since_ms, s.reports_applied, s.malformed_reports, s.shedding_cycles,
                    s.moves_started, s.moves_completed, s.splits, s.flushes, s.requests_answered
                );
            }
            Ok(())
        }
        AdminCommand::Brokers(BrokersCommand::LoadReport { broker }) => {
            let brokers: Vec<BrokerReport> = rest.get_json("/loadmgr/v1/brokers").await?;
            let b = brokers
                .into_iter()
                .find(|b| b.id == broker)
                .ok_or_else(|| CliError::new(format!("broker {broker} is not registered")))?;
            let report = b.report.ok_or_else(|| {
                CliError::new(format!(
                    "{broker}: unreadable report ({})",
                    b.error.unwrap_or_default()
                ))
            })?;
            println!(
                "{}",
                reindent(&String::from_utf8_lossy(&crate::model::json::to_json_vec(
                    &report
                )))
            );
            Ok(())
        }
        AdminCommand::Namespaces(NamespacesCommand::Create { namespace, bundles }) => {
            // Without --bundles the brokers' defaultNumberOfNamespaceBundles applies, as with pulsar-admin.
            let path = format!("/admin/v2/namespaces/{}", ns_path(&namespace)?);
            let body = bundles.map(|n| serde_json::json!({"bundles": {"numBundles": n}}));
            rest.send(Method::PUT, &path, body).await?;
            let data: crate::model::BundlesData = rest.get_json(&format!("{path}/bundles")).await?;
            let ranges: Vec<String> = data
                .boundaries
                .windows(2)
                .map(|w| format!("{}_{}", w[0], w[1]))
                .collect();
            println!(
                "created {namespace} with {} bundles: {}",
                ranges.len(),
                ranges.join(" ")
            );
            Ok(())
        }
        AdminCommand::Namespaces(NamespacesCommand::Bundles { namespace }) => {
            let rows: Vec<BundleState> = rest
                .get_json(&format!("/loadmgr/v1/namespaces/{}", ns_path(&namespace)?))
                .await?;
            println!("{namespace}: {} bundles", rows.len());
            for row in rows {
                let owner = row.owner.as_deref().map(|o| (o, row.unloading));
                println!(
                    "{}",
                    super::admin::bundle_line(&row.bundle, owner, row.record.as_ref())
                );
            }
            Ok(())
        }
        AdminCommand::Namespaces(NamespacesCommand::Unload {
            namespace,
            bundle,
            destination_broker,
        }) => {
            let ns = ns_path(&namespace)?;
            let path = match (&bundle, &destination_broker) {
                (Some(b), Some(d)) => format!(
                    "/admin/v2/namespaces/{ns}/{b}/unload?destinationBroker={}",
                    form_urlencoded::byte_serialize(d.as_bytes()).collect::<String>()
                ),
                (Some(b), None) => format!("/admin/v2/namespaces/{ns}/{b}/unload"),
                (None, None) => format!("/admin/v2/namespaces/{ns}/unload"),
                (None, Some(_)) => {
                    return Err(CliError::new(
                        "--destination-broker needs --bundle (a namespace's bundles go where placement says)",
                    ))
                }
            };
            rest.send(Method::PUT, &path, None).await?;
            println!(
                "unloaded {}{}",
                bundle.map_or(namespace.clone(), |b| format!("{namespace}/{b}")),
                destination_broker
                    .map(|d| format!(" to {d}"))
                    .unwrap_or_default()
            );
            Ok(())
        }
        AdminCommand::Namespaces(NamespacesCommand::SplitBundle {
            namespace,
            bundle,
            algorithm,
            positions,
            unload,
        }) => {
            let mut path = format!(
                "/admin/v2/namespaces/{}/{bundle}/split?unload={unload}",
                ns_path(&namespace)?
            );
            if let Some(a) = &algorithm {
                path.push_str(&format!("&splitAlgorithmName={a}"));
            }
            let body = (!positions.is_empty()).then(|| serde_json::json!(positions));
            rest.send(Method::PUT, &path, body).await?;
            println!("split {namespace}/{bundle}");
            Ok(())
        }
        AdminCommand::Topics(TopicsCommand::Lookup { topic }) => {
            let t = crate::bundle::TopicName::parse(&topic)
                .map_err(|e| CliError::new(format!("topic {topic}: {e}")))?;
            let (domain, rest_of) = t
                .full_name()
                .split_once("://")
                .ok_or_else(|| CliError::new(format!("topic {topic}: no domain")))?;
            let encoded: Vec<String> = rest_of
                .splitn(3, '/')
                .map(|p| form_urlencoded::byte_serialize(p.as_bytes()).collect())
                .collect();
            let l: LookupData = rest
                .get_json(&format!("/lookup/v2/topic/{domain}/{}", encoded.join("/")))
                .await?;
            println!(
                "{topic} -> {} ({})",
                l.http_url,
                [
                    Some(l.broker_url.as_str()),
                    l.http_url_tls.as_deref(),
                    l.broker_url_tls.as_deref()
                ]
                .into_iter()
                .flatten()
                .filter(|u| !u.is_empty())
                .collect::<Vec<_>>()
                .join(", ")
            );
            Ok(())
        }
        AdminCommand::Shedding { action } => {
            let enabled = action == "enable";
            rest.send(
                Method::POST,
                &format!("/admin/v2/brokers/configuration/loadBalancerSheddingEnabled/{enabled}"),
                None,
            )
            .await?;
            println!(
                "loadBalancerSheddingEnabled={enabled} set through {}",
                rest.base()
            );
            Ok(())
        }
    }
}
