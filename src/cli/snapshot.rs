//! `loadmgr snapshot`: writes the live load data of a store in the load-data snapshot format
//! (`metadata-schemas/LoadDataSnapshot.schema.json`), the input of `loadmgr explain --snapshot`.

use std::path::PathBuf;

use super::access::StoreAccessArgs;
use super::broker::{connect, load_settings, store_url};
use super::{CliError, CliResult};
use crate::runtime::snapshot::read_live;
use crate::runtime::Clock;

/// Flags of `loadmgr snapshot`.
#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// Metadata store URL; default: the configuration's metadataStoreUrl.
    #[arg(long)]
    pub store: Option<String>,
    /// broker.conf (grace period, store timeouts).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Write to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// The store\'s user, password, ZooKeeper ACL and etcd TLS (over broker.conf).
    #[command(flatten)]
    pub access: StoreAccessArgs,
}

/// Runs the command.
pub fn run(args: SnapshotArgs) -> CliResult {
    let settings = load_settings(args.config.as_deref())?;
    let url = store_url(args.store.as_deref(), &settings)?;
    super::block_on(async move {
        let store = connect(&url, &settings, &args.access).await?;
        let live = read_live(&store, &settings, Clock::new().now_ms()).await;
        let _ = store.close().await;
        let live = live.map_err(|e| CliError::new(e.to_string()))?;
        for w in &live.warnings {
            eprintln!("warning: {w}");
        }
        // Check that what we write is what `explain --snapshot` accepts.
        crate::core::snapshot::Snapshot::from_value(live.value.clone()).map_err(|e| {
            CliError::new(format!("the live data does not form a valid snapshot: {e}"))
        })?;
        let text = serde_json::to_string_pretty(&live.value).expect("JSON") + "\n";
        match &args.output {
            Some(path) => std::fs::write(path, text)
                .map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))?,
            None => print!("{text}"),
        }
        Ok(())
    })
}
