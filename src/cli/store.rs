//! `loadmgr store --store URL ls|get|put|rm|watch|elect PATH`: inspect and edit any node on any backend.

use std::time::Duration;

use clap::{Args, Subcommand};

use super::access::StoreAccessArgs;
use super::{CliError, CliResult};

use crate::coordination::{LeaderElection, LeaderState};
use crate::model::json::reindent;
use crate::model::{LeaderBroker, NodeType};
use crate::store::{self, CreateOptions, DynStore, Error, MetadataStoreExt, StoreOptions};

/// Store access.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// Store URL: `zk:host:2181[,host:2181][/chroot]`, `etcd:http://host:2379[,...]`, `memory:NAME`.
    #[arg(long)]
    store: String,
    /// Session timeout (metadataStoreSessionTimeoutMillis); also how long ephemerals outlive a crash.
    #[arg(long, default_value_t = 30_000)]
    session_timeout_ms: u64,
    /// Time to wait for the store to answer at start.
    #[arg(long, default_value_t = 10_000)]
    connect_timeout_ms: u64,
    /// Per-operation time limit.
    #[arg(long, default_value_t = 30_000)]
    operation_timeout_ms: u64,
    #[command(flatten)]
    access: StoreAccessArgs,
    #[command(subcommand)]
    command: StoreCommand,
}

#[derive(Debug, Subcommand)]
enum StoreCommand {
    /// List the children of a node.
    Ls {
        /// Node path.
        path: String,
    },
    /// Print a node's value (JSON pretty-printed) and, with --stat, its metadata.
    Get {
        /// Node path.
        path: String,
        /// Validate the JSON against its schema (type told from the keys, or --type).
        #[arg(long)]
        check: bool,
        /// Node type for --check (LocalBrokerData, LeaderBroker, ...).
        #[arg(long = "type")]
        node_type: Option<String>,
        /// Print the value exactly as stored.
        #[arg(long)]
        raw: bool,
        /// Also print version, times, ephemeral flag.
        #[arg(long)]
        stat: bool,
    },
    /// Write a node (VALUE, or `-` to read it from stdin without its final newline).
    Put {
        /// Node path.
        path: String,
        /// The value, or `-` for stdin.
        value: String,
        /// Expected version (compare-and-set); -1 = create only.
        #[arg(long, allow_negative_numbers = true)]
        version: Option<i64>,
        /// Create an ephemeral node and hold it until this process exits.
        #[arg(long)]
        ephemeral: bool,
        /// Create a sequential node (the store appends a 10-digit suffix).
        #[arg(long)]
        sequential: bool,
    },
    /// Delete a node.
    Rm {
        /// Node path.
        path: String,
        /// Expected version.
        #[arg(long)]
        version: Option<i64>,
        /// Delete everything below it too.
        #[arg(short, long)]
        recursive: bool,
    },
    /// Print notifications for a path and everything below it, and session events, until interrupted.
    Watch {
        /// Path prefix.
        path: String,
    },
    /// Campaign for leadership at PATH and print who leads as it changes, until interrupted.
    Elect {
        /// Leader node (Pulsar: /loadbalance/leader).
        path: String,
        /// This candidate's broker id (host:port, unique per candidate).
        #[arg(long)]
        broker_id: String,
        /// Its web service URL (default http://BROKER_ID).
        #[arg(long)]
        service_url: Option<String>,
    },
}

fn options(args: &StoreArgs) -> Result<StoreOptions, String> {
    let o = StoreOptions::default()
        .with_session_timeout(Duration::from_millis(args.session_timeout_ms))
        .with_connect_timeout(Duration::from_millis(args.connect_timeout_ms))
        .with_operation_timeout(Duration::from_millis(args.operation_timeout_ms));
    args.access.apply(o)
}

/// Runs `loadmgr store ...`.
pub fn run(args: StoreArgs) -> CliResult {
    super::block_on(async move {
        let options = options(&args).map_err(CliError::new)?;
        let store = store::connect(&args.store, options).await?;
        let result = command(&store, args.command).await.map_err(CliError::new);
        let _ = store.close().await;
        result
    })
}

async fn command(store: &DynStore, command: StoreCommand) -> Result<(), String> {
    match command {
        StoreCommand::Ls { path } => {
            for child in store.get_children(&path).await.map_err(|e| e.to_string())? {
                println!("{child}");
            }
            Ok(())
        }
        StoreCommand::Get {
            path,
            check,
            node_type,
            raw,
            stat,
        } => get(store, &path, check, node_type.as_deref(), raw, stat).await,
        StoreCommand::Put {
            path,
            value,
            version,
            ephemeral,
            sequential,
        } => put(store, &path, &value, version, ephemeral, sequential).await,
        StoreCommand::Rm {
            path,
            version,
            recursive,
        } => {
            let r = if recursive {
                store.delete_recursive(&path).await
            } else {
                store.delete(&path, version).await
            };
            r.map_err(|e| explain(store, e))
        }
        StoreCommand::Watch { path } => watch(store, &path).await,
        StoreCommand::Elect {
            path,
            broker_id,
            service_url,
        } => elect(store, &path, broker_id, service_url).await,
    }
}

async fn get(
    store: &DynStore,
    path: &str,
    check: bool,
    node_type: Option<&str>,
    raw: bool,
    show_stat: bool,
) -> Result<(), String> {
    let found = store
        .get(path)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{path}: no such node (at {})", store.address()))?;
    let text = String::from_utf8_lossy(&found.value).into_owned();
    let json = serde_json::from_slice::<serde_json::Value>(&found.value);
    if raw || json.is_err() {
        println!("{text}");
    } else {
        println!("{}", reindent(text.trim()));
    }
    if show_stat {
        let s = &found.stat;
        println!(
            "# version={} creation_revision={} modification_revision={} created_ms={} modified_ms={} ephemeral={}",
            s.version, s.creation_revision, s.modification_revision, s.created_ms, s.modified_ms, s.ephemeral
        );
    }
    if check {
        let value = json.map_err(|e| format!("{path}: not JSON: {e}"))?;
        let t = match node_type {
            Some(name) => name.parse::<NodeType>()?,
            None => match NodeType::detect(&value) {
                Ok(t) => t,
                Err(e) => type_from_path(path).ok_or_else(|| format!("{path}: {e}"))?,
            },
        };
        t.validate(&value).map_err(|e| format!("{path}: {e}"))?;
        eprintln!("{path}: valid {t}");
    }
    Ok(())
}

async fn put(
    store: &DynStore,
    path: &str,
    value: &str,
    version: Option<i64>,
    ephemeral: bool,
    sequential: bool,
) -> Result<(), String> {
    let bytes = if value == "-" {
        let mut bytes = super::read_input("-").map_err(|e| e.to_string())?;
        // `echo ... |` adds a newline that is not part of the value.
        if bytes.ends_with(b"\n") {
            bytes.pop();
            if bytes.ends_with(b"\r") {
                bytes.pop();
            }
        }
        bytes
    } else {
        value.as_bytes().to_vec()
    };
    let options = CreateOptions {
        ephemeral,
        sequential,
    };
    let stat = store
        .put(path, &bytes, version, options)
        .await
        .map_err(|e| explain(store, e))?;
    println!("{} version {}", stat.path, stat.version);
    if ephemeral {
        eprintln!("holding ephemeral {} until interrupted (Ctrl-C)", stat.path);
        let mut events = store.session_events();
        loop {
            tokio::select! {
                _ = shutdown() => break,
                e = events.next() => match e {
                    Some(e) => eprintln!("session: {e:?}"),
                    None => break,
                },
            }
        }
    }
    Ok(())
}

async fn watch(store: &DynStore, path: &str) -> Result<(), String> {
    let mut notifications = store.watch(path).await.map_err(|e| e.to_string())?;
    let mut events = store.session_events();
    eprintln!("watching {path} on {} (Ctrl-C to stop)", store.address());
    loop {
        tokio::select! {
            _ = shutdown() => return Ok(()),
            n = notifications.next() => match n {
                Some(n) => println!("{} {}", n.kind, n.path),
                None => return Err("the store closed the notification stream".into()),
            },
            e = events.next() => if let Some(e) = e {
                println!("session {e:?}");
            },
        }
    }
}

async fn elect(
    store: &DynStore,
    path: &str,
    broker_id: String,
    service_url: Option<String>,
) -> Result<(), String> {
    let url = service_url.unwrap_or_else(|| format!("http://{broker_id}"));
    let election = LeaderElection::start(store.clone(), path, LeaderBroker::new(broker_id, url))
        .await
        .map_err(|e| e.to_string())?;
    let mut states = election.subscribe();
    loop {
        let line = match &*states.borrow_and_update() {
            LeaderState::Leading => "leading".to_string(),
            LeaderState::Following(l) => format!("following {}", l.broker_id().unwrap_or("?")),
            LeaderState::NoLeader => "no leader".to_string(),
        };
        println!("{line}");
        tokio::select! {
            _ = shutdown() => break,
            r = states.changed() => if r.is_err() { break },
        }
    }
    election.resign().await.map_err(|e| e.to_string())
}

/// The type Pulsar stores at a path, for values whose keys do not tell it.
fn type_from_path(path: &str) -> Option<NodeType> {
    let under = |prefix: &str| path.starts_with(prefix) && path.len() > prefix.len();
    Some(if path == "/loadbalance/leader" {
        NodeType::LeaderBroker
    } else if under("/loadbalance/brokers/") {
        NodeType::LocalBrokerData
    } else if under("/loadbalance/bundle-data/") {
        NodeType::BundleData
    } else if under("/loadbalance/broker-time-average/") {
        NodeType::TimeAverageBrokerData
    } else if under("/loadbalance/resource-quota/") {
        NodeType::ResourceQuota
    } else if under("/namespace/") {
        NodeType::NamespaceEphemeralData
    } else if under("/admin/local-policies/") {
        NodeType::LocalPolicies
    } else {
        return None;
    })
}

/// Adds what an operator needs to a store error (the current version on a conflict).
fn explain(store: &DynStore, e: Error) -> String {
    match &e {
        Error::BadVersion { .. } => {
            format!(
                "{e}; read the node with `loadmgr store --store {} get --stat PATH`",
                store.address()
            )
        }
        _ => e.to_string(),
    }
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
