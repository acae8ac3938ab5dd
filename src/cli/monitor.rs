//! `loadmgr monitor`: the broker monitor of Pulsar's docs (`pulsar-perf monitor-brokers`) over any store,
//! including a real Pulsar cluster's ZooKeeper. A thin wrapper over [`crate::runtime::monitor`].

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use super::access::StoreAccessArgs;
use super::broker::{connect, load_settings, store_url};
use super::{CliError, CliResult};
use crate::runtime::monitor::Monitor;

/// Flags of `loadmgr monitor`.
#[derive(Debug, clap::Args)]
pub struct MonitorArgs {
    /// Metadata store URL (e.g. zk:zookeeper:2181 of a Pulsar cluster); default: metadataStoreUrl.
    #[arg(long)]
    pub store: Option<String>,
    /// broker.conf (store timeouts).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Period of the global table, ms (Pulsar: 60000).
    #[arg(long, default_value_t = 60_000)]
    pub global_interval_ms: u64,
    /// The store\'s user, password, ZooKeeper ACL and etcd TLS (over broker.conf).
    #[command(flatten)]
    pub access: StoreAccessArgs,
}

/// Runs the command until SIGINT/SIGTERM or the store closes.
pub fn run(args: MonitorArgs) -> CliResult {
    let settings = load_settings(args.config.as_deref())?;
    let url = store_url(args.store.as_deref(), &settings)?;
    if args.global_interval_ms == 0 {
        return Err(CliError::new("--global-interval-ms must be above 0"));
    }
    super::block_on(async move {
        let store = connect(&url, &settings, &args.access).await?;
        let monitor = Monitor::new(store.clone());
        let printing = monitor.run(Duration::from_millis(args.global_interval_ms), |text| {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        });
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())
            .map_err(|e| CliError::new(format!("cannot listen for SIGTERM: {e}")))?;
        let result = tokio::select! {
            r = printing => r.map_err(|e| CliError::new(e.to_string())),
            _ = tokio::signal::ctrl_c() => Ok(()),
            _ = term.recv() => Ok(()),
        };
        let _ = store.close().await;
        result
    })
}
