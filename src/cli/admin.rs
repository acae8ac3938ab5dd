//! `loadmgr admin`: brokers, namespaces, topics and the shedding switch of a live cluster, on ZooKeeper, etcd
//! or a `memory:NAME` store shared in the process. A thin wrapper over [`crate::runtime::admin`].

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;

use super::access::StoreAccessArgs;
use super::broker::{connect, load_settings, store_url};
use super::{CliError, CliResult};
use crate::model::json::reindent;
use crate::runtime::admin;
use crate::runtime::identity::local_host_name;

/// Flags of `loadmgr admin`.
#[derive(Debug, clap::Args)]
pub struct AdminArgs {
    /// Metadata store URL; default: the configuration's metadataStoreUrl (when no --url is given).
    #[arg(long, conflicts_with = "url")]
    pub store: Option<String>,
    /// A broker's web service: talk REST instead of reading and writing the store.
    #[command(flatten)]
    pub rest: super::rest::RestArgs,
    /// broker.conf (for defaultNumberOfNamespaceBundles, clusterName and the store timeouts).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// How long to wait for the leader's answer and for moves to finish, ms.
    #[arg(long, default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// The store\'s user, password, ZooKeeper ACL and etcd TLS (over broker.conf).
    #[command(flatten)]
    pub access: StoreAccessArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// `loadmgr admin` subcommands.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Registered brokers.
    #[command(subcommand)]
    Brokers(BrokersCommand),
    /// Namespaces and their bundles.
    #[command(subcommand)]
    Namespaces(NamespacesCommand),
    /// Topics.
    #[command(subcommand)]
    Topics(TopicsCommand),
    /// Turn automatic shedding on or off at run time (Pulsar's dynamic configuration).
    Shedding {
        /// `enable` or `disable`.
        #[arg(value_parser = ["enable", "disable"])]
        action: String,
    },
}

/// `loadmgr admin brokers`.
#[derive(Debug, Subcommand)]
pub enum BrokersCommand {
    /// Every registered broker with a summary of its report.
    List,
    /// The leader and its counters.
    Leader,
    /// A broker's report as stored.
    LoadReport {
        /// Broker id (host:port).
        broker: String,
    },
}

/// `loadmgr admin namespaces`.
#[derive(Debug, Subcommand)]
pub enum NamespacesCommand {
    /// Create a namespace with N bundles (defaultNumberOfNamespaceBundles when not given).
    Create {
        /// tenant/namespace
        namespace: String,
        /// Number of bundles.
        #[arg(long)]
        bundles: Option<u64>,
    },
    /// A namespace's bundles with their owners and assignment records.
    Bundles {
        /// tenant/namespace
        namespace: String,
    },
    /// Unload a bundle (optionally to a given broker) or every owned bundle of the namespace.
    Unload {
        /// tenant/namespace
        namespace: String,
        /// Bundle range 0xLLLLLLLL_0xUUUUUUUU (all bundles when absent).
        #[arg(long)]
        bundle: Option<String>,
        /// Broker id to move the bundle to.
        #[arg(long)]
        destination_broker: Option<String>,
    },
    /// Split a bundle.
    SplitBundle {
        /// tenant/namespace
        namespace: String,
        /// Bundle range 0xLLLLLLLL_0xUUUUUUUU.
        #[arg(long)]
        bundle: String,
        /// range_equally_divide, topic_count_equally_divide, specified_positions_divide or
        /// flow_or_qps_equally_divide (default: defaultNamespaceBundleSplitAlgorithm).
        #[arg(long)]
        algorithm: Option<String>,
        /// Positions for specified_positions_divide (0x%08x, comma separated).
        #[arg(long, value_delimiter = ',')]
        positions: Vec<String>,
        /// Place the children anew after the split.
        #[arg(long)]
        unload: bool,
    },
}

/// `loadmgr admin topics`.
#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// The broker serving a topic (the leader assigns its bundle when nobody owns it).
    Lookup {
        /// Full topic name, e.g. persistent://public/default/my-topic
        topic: String,
    },
}

fn err(e: impl std::fmt::Display) -> CliError {
    CliError::new(e.to_string())
}

fn pct(v: f64) -> String {
    format!("{v:.1} %")
}

/// Runs the command.
pub fn run(args: AdminArgs) -> CliResult {
    let settings = load_settings(args.config.as_deref())?;
    let url = store_url(args.store.as_deref(), &settings)?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let requester = format!("loadmgr-admin@{}:{}", local_host_name(), std::process::id());
    super::block_on(async move {
        let store = connect(&url, &settings, &args.access).await?;
        let result = execute(&store, &settings, args.command, timeout, &requester).await;
        let _ = store.close().await;
        result
    })
}

async fn execute(
    store: &crate::store::DynStore,
    settings: &crate::config::Settings,
    command: AdminCommand,
    timeout: Duration,
    requester: &str,
) -> CliResult {
    match command {
        AdminCommand::Brokers(BrokersCommand::List) => {
            let leader = admin::leader(store).await.map_err(err)?;
            let leader_id = leader
                .as_ref()
                .and_then(|(l, _)| l.broker_id().map(str::to_owned));
            let brokers = admin::brokers(store).await.map_err(err)?;
            if brokers.is_empty() {
                println!("no broker is registered in {}", store.address());
            }
            for b in brokers {
                let tag = if leader_id.as_deref() == Some(b.id.as_str()) {
                    " (leader)"
                } else {
                    ""
                };
                match b.report {
                    Ok(r) => println!(
                        "{}{tag}: {} bundles, {} topics, {:.1} msg/s, cpu {}, max usage {}",
                        b.id,
                        r.num_bundles,
                        r.num_topics,
                        r.total_msg_rate(),
                        pct(r.cpu.percent_usage() as f64),
                        pct(r.max_resource_usage() * 100.0)
                    ),
                    Err(why) => println!("{}{tag}: unreadable report ({why})", b.id),
                }
            }
            Ok(())
        }
        AdminCommand::Brokers(BrokersCommand::Leader) => {
            match admin::leader(store).await.map_err(err)? {
                None => Err(CliError::new(format!(
                    "no leader: {} has no /loadbalance/leader node",
                    store.address()
                ))),
                Some((l, status)) => {
                    println!("{}", l.broker_id().unwrap_or("?"));
                    if let Some(s) = status {
                        println!(
                        "  leading since {} ms; reports applied {}, malformed reports {}, shedding cycles {}, moves started {}, completed {}, splits {}, flushes {}, requests answered {}",
                        s.leading_since_ms,
                        s.reports_applied,
                        s.malformed_reports,
                        s.shedding_cycles,
                        s.moves_started,
                        s.moves_completed,
                        s.splits,
                        s.flushes,
                        s.requests_answered
                    );
                    }
                    Ok(())
                }
            }
        }
        AdminCommand::Brokers(BrokersCommand::LoadReport { broker }) => {
            let raw = admin::load_report(store, &broker).await.map_err(err)?;
            let text = String::from_utf8_lossy(&raw);
            match serde_json::from_slice::<serde_json::Value>(&raw) {
                Ok(_) => println!("{}", reindent(&text)),
                Err(e) => {
                    return Err(CliError::new(format!(
                        "{}: the report is not JSON ({e}): {text}",
                        crate::paths::broker(&broker)
                    )))
                }
            }
            Ok(())
        }
        AdminCommand::Namespaces(NamespacesCommand::Create { namespace, bundles }) => {
            let n = bundles.unwrap_or(settings.default_number_of_namespace_bundles.max(1) as u64);
            let b = admin::create_namespace(store, &namespace, n, settings.cluster_name.as_deref())
                .await
                .map_err(err)?;
            println!(
                "created {namespace} with {} bundles: {}",
                b.len(),
                b.ranges()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            Ok(())
        }
        AdminCommand::Namespaces(NamespacesCommand::Bundles { namespace }) => {
            let (info, rows) = admin::namespace_bundles(store, &namespace)
                .await
                .map_err(err)?;
            println!(
                "{namespace}: {} bundles (from {})",
                info.bundles.len(),
                if info.local_version.is_some() {
                    crate::paths::local_policies(&namespace)
                } else {
                    crate::paths::policies(&namespace)
                }
            );
            for row in rows {
                let owner = row.owner.as_ref().map(|(o, d)| (o.as_str(), *d));
                println!("{}", bundle_line(&row.bundle, owner, row.record.as_ref()));
            }
            Ok(())
        }
        AdminCommand::Namespaces(NamespacesCommand::Unload {
            namespace,
            bundle,
            destination_broker,
        }) => {
            let (message, moved) = admin::unload(
                store,
                &namespace,
                bundle.as_deref(),
                destination_broker.as_deref(),
                requester,
                timeout,
            )
            .await
            .map_err(err)?;
            println!("{message}");
            for m in moved {
                println!("unloaded {}: {} -> {}", m.bundle, m.source, m.destination);
            }
            Ok(())
        }
        AdminCommand::Namespaces(NamespacesCommand::SplitBundle {
            namespace,
            bundle,
            algorithm,
            positions,
            unload,
        }) => {
            let (message, _) = admin::split(
                store,
                &admin::SplitArgs {
                    namespace,
                    range: bundle,
                    algorithm,
                    positions,
                    unload,
                },
                requester,
                timeout,
            )
            .await
            .map_err(err)?;
            println!("{message}");
            Ok(())
        }
        AdminCommand::Topics(TopicsCommand::Lookup { topic }) => {
            let found = admin::lookup(store, &topic, requester, timeout)
                .await
                .map_err(err)?;
            println!(
                "{topic} -> {} owned by {} ({})",
                found.bundle,
                found.broker,
                [
                    found.data.http_url.as_deref(),
                    found.data.native_url.as_deref(),
                    found.data.http_url_tls.as_deref(),
                    found.data.native_url_tls.as_deref()
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", ")
            );
            Ok(())
        }
        AdminCommand::Shedding { action } => {
            let enabled = action == "enable";
            admin::set_shedding(store, enabled).await.map_err(err)?;
            println!(
                "loadBalancerSheddingEnabled={enabled} written to {}",
                crate::paths::DYNAMIC_CONFIGURATION
            );
            Ok(())
        }
    }
}

/// One line of `namespaces bundles`: the range, its owner (and whether it is unloading), and the leader's record.
pub(super) fn bundle_line(
    bundle: &str,
    owner: Option<(&str, bool)>,
    record: Option<&crate::runtime::BundleAssignment>,
) -> String {
    let range = bundle.rsplit('/').next().unwrap_or(bundle);
    let owner = match owner {
        Some((o, false)) => o.to_owned(),
        Some((o, true)) => format!("{o} (unloading)"),
        None => "-".into(),
    };
    let record = match record {
        Some(r) if r.state == crate::runtime::AssignmentState::Assigning => {
            format!("moving to {} ({})", r.destination, r.cause.name())
        }
        Some(r) => format!("assigned ({})", r.cause.name()),
        None => "unassigned".into(),
    };
    format!("  {range}  owner {owner:<24} {record}")
}
