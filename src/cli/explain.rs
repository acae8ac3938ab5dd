//! `loadmgr explain`: a thin wrapper over [`crate::core::explain`]. With `--store` the snapshot is the live data
//! of a store ([`crate::runtime::snapshot`]) and the settings include its dynamic configuration; nothing is
//! changed.

use std::path::PathBuf;

use crate::config::{PlacementKind, Settings, ShedderKind};
use crate::core::explain::{self, ExplainOptions};
use crate::core::snapshot::Snapshot;

/// Flags of `loadmgr explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// Load-data snapshot (JSON, schema metadata-schemas/LoadDataSnapshot.schema.json; at most 64 MiB).
    #[arg(long, required_unless_present = "store", conflicts_with = "store")]
    pub snapshot: Option<PathBuf>,
    /// Decide on the live data of this metadata store instead of a snapshot file (changes nothing).
    #[arg(long)]
    pub store: Option<String>,
    /// Shedding strategy (AvgShedder, ThresholdShedder, OverloadShedder, UniformLoadShedder, TransferShedder,
    /// BandShedder or a class name); default: the configuration's.
    #[arg(long)]
    pub strategy: Option<String>,
    /// Placement strategy (AvgShedder, LeastLongTermMessageRate, LeastResourceUsageWithWeight or a class name).
    #[arg(long)]
    pub placement: Option<String>,
    /// broker.conf to read settings from (defaults: Pulsar 5.0).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Shedding cycles to run over the snapshot, one shedding interval apart (so hit counters can fire); at
    /// most 1000000.
    #[arg(long, default_value_t = 1)]
    pub cycles: u32,
    /// Seed of the random choices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also print the shedding strategy's own candidates, before the cycle's checks and placement: bundle,
    /// source, planned destination if any, reason, and whether the cycle kept or dropped it (JSON:
    /// `candidates`).
    #[arg(long)]
    pub candidates: bool,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
    /// The store\'s user, password, ZooKeeper ACL and etcd TLS (over broker.conf).
    #[command(flatten)]
    pub access: super::access::StoreAccessArgs,
}

/// Runs the command and returns what it prints.
pub fn render(args: &ExplainArgs) -> Result<String, String> {
    let mut settings = match &args.config {
        Some(path) => {
            let loaded = Settings::load(path).map_err(|e| e.to_string())?;
            for w in &loaded.warnings {
                if !w.message.starts_with("unknown key") {
                    eprintln!("warning: {w}");
                }
            }
            loaded.settings
        }
        None => Settings::default(),
    };
    let snapshot = match (&args.snapshot, &args.store) {
        (Some(path), _) => {
            let text = crate::model::input::read_file_to_string(path).map_err(|e| e.to_string())?;
            Snapshot::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        (None, Some(url)) => live_snapshot(url, &mut settings, &args.access)?,
        (None, None) => return Err("give --snapshot FILE or --store URL".into()),
    };
    let shedder = args
        .strategy
        .as_deref()
        .map(|s| ShedderKind::from_class_name(s).ok_or_else(|| format!("unknown --strategy {s}")))
        .transpose()?;
    let placement = args
        .placement
        .as_deref()
        .map(|s| {
            PlacementKind::from_class_name(s).ok_or_else(|| format!("unknown --placement {s}"))
        })
        .transpose()?;
    let options = ExplainOptions {
        shedder,
        placement,
        settings,
        cycles: args.cycles,
        seed: args.seed,
        candidates: args.candidates,
    };
    let report = explain::run(&snapshot, &options).map_err(|e| e.to_string())?;
    Ok(if args.json {
        serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n"
    } else {
        explain::render_text(&report)
    })
}

/// Reads the live data of a store and applies its dynamic configuration to `settings`.
fn live_snapshot(
    url: &str,
    settings: &mut Settings,
    access: &super::access::StoreAccessArgs,
) -> Result<Snapshot, String> {
    use crate::store::MetadataStoreExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime.block_on(async {
        let options =
            super::broker::store_options(url, settings, access).map_err(|e| e.to_string())?;
        let store = crate::store::connect(url, options)
            .await
            .map_err(|e| format!("cannot open the store {url}: {e}"))?;
        if let Ok(Some((node, _))) = store
            .get_json::<serde_json::Value>(crate::paths::DYNAMIC_CONFIGURATION)
            .await
        {
            let warnings = settings
                .apply_dynamic_config(&node)
                .unwrap_or_else(|e| vec![e]);
            for w in warnings {
                eprintln!("warning: {}: {w}", crate::paths::DYNAMIC_CONFIGURATION);
            }
        }
        let now = crate::runtime::Clock::new().now_ms();
        let live = crate::runtime::snapshot::read_live(&store, settings, now).await;
        let _ = store.close().await;
        let live = live.map_err(|e| e.to_string())?;
        for w in &live.warnings {
            eprintln!("warning: {w}");
        }
        Snapshot::from_value(live.value).map_err(|e| format!("{url}: {e}"))
    })
}

/// Runs the command, printing the plan.
pub fn run(args: &ExplainArgs) -> Result<(), String> {
    print!("{}", render(args)?);
    Ok(())
}
