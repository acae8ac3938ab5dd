//! The `loadmgr` command line: one module per subcommand, each a thin clap wrapper over the library.

pub mod access;
pub mod admin;
pub mod admin_rest;
pub mod bench;
pub mod bench_cluster;
pub mod bench_lookups;
pub mod broker;
pub mod bundles;
pub mod config;
pub mod explain;
pub mod health;
pub mod json;
pub mod monitor;
pub mod rest;
pub mod route;
pub mod simulate;
pub mod snapshot;
pub mod store;

use std::fmt;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A command failure: the message for stderr and the exit status.
#[derive(Debug)]
pub struct CliError {
    message: String,
    code: u8,
}

impl CliError {
    /// A failure reported with exit status 1.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error> From<E> for CliError {
    fn from(e: E) -> Self {
        Self::new(e.to_string())
    }
}

/// What a subcommand returns.
pub type CliResult = Result<(), CliError>;

/// loadmgr — a load manager for Pulsar-style broker clusters.
#[derive(Debug, Parser)]
#[command(name = "loadmgr", version, about, long_about = None)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Namespace bundles: initial boundaries, topic lookup, splits.
    #[command(subcommand)]
    Bundles(bundles::BundlesCommand),
    /// Validate and normalise stored JSON nodes.
    #[command(subcommand)]
    Json(json::JsonCommand),
    /// Read broker.conf and print the effective load-balancer settings.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Run the shedding strategy over a load-data snapshot and print the plan with every reason.
    Explain(explain::ExplainArgs),
    /// Replay scenarios (or a snapshot of a live cluster) through the decision core in virtual time, compare
    /// shedding strategies and report metrics, tables and charts.
    Simulate(simulate::SimulateArgs),
    /// Locality-aware, load-aware routing (Storm-style); `route simulate` compares it with a plain shuffle.
    Route(route::RouteArgs),
    /// Inspect and edit nodes of a metadata store (zk:, etcd:, memory:).
    Store(store::StoreArgs),
    /// Benchmarks against a live store.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Run a broker agent (registration, reports, ownership, leader tasks) until SIGINT/SIGTERM.
    Broker(broker::BrokerArgs),
    /// Operate a live cluster: brokers, namespaces, unloads, splits, lookups, the shedding switch.
    Admin(admin::AdminArgs),
    /// Write the live load data of a store as a load-data snapshot.
    Snapshot(snapshot::SnapshotArgs),
    /// Watch brokers' reports and print Pulsar's broker-monitor tables.
    Monitor(monitor::MonitorArgs),
    /// Ask a broker's web service whether it is healthy or ready (exit 0 when it is).
    Health(health::HealthArgs),
    /// Print the OpenAPI document of the brokers' web service (the one committed as docs/openapi.json and
    /// served at /loadmgr/v1/openapi.json).
    Openapi,
}

/// Runs a parsed command line and turns the outcome into an exit status.
pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Bundles(cmd) => bundles::run(cmd),
        Command::Json(cmd) => json::run(cmd),
        Command::Config(cmd) => config::run(cmd),
        Command::Explain(args) => explain::run(&args).map_err(CliError::new),
        Command::Simulate(args) => simulate::run(&args).map_err(CliError::new),
        Command::Route(args) => route::run(args).map_err(CliError::new),
        Command::Store(args) => store::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Broker(args) => broker::run(args),
        Command::Admin(args) if args.rest.url.is_some() => admin_rest::run(args),
        Command::Admin(args) => admin::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Monitor(args) => monitor::run(args),
        Command::Health(args) => health::run(args),
        Command::Openapi => {
            println!("{}", crate::runtime::http::openapi::openapi_json());
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.code)
        }
    }
}

/// Runs an async command on a fresh multi-threaded runtime, with `LOADMGR_LOG` (default `warn`) logging to
/// stderr.
pub(crate) fn block_on<F: std::future::Future<Output = CliResult>>(future: F) -> CliResult {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LOADMGR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(format!("cannot start the async runtime: {e}")))?;
    let result = rt.block_on(future);
    // The command is done: work still running (a store session closing on a server too busy to answer, a
    // blocking name lookup) gets a few seconds and is then left to the process's exit.
    rt.shutdown_timeout(SHUTDOWN_GRACE);
    result
}

/// How long a finished command waits for its runtime's remaining work.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads a file, or standard input for `-`; errors name the file.
/// At most [`crate::model::input::MAX_INPUT_BYTES`] are read.
pub(crate) fn read_input(path: &str) -> Result<Vec<u8>, CliError> {
    use crate::model::input;
    if path == "-" {
        input::read_limited(std::io::stdin(), "standard input", input::MAX_INPUT_BYTES)
    } else {
        input::read_file(std::path::Path::new(path))
    }
    .map_err(|e| CliError::new(e.to_string()))
}
