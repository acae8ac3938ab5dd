//! `loadmgr explain`: a thin wrapper over [`crate::core::explain`].

use std::path::PathBuf;

use crate::config::{PlacementKind, Settings, ShedderKind};
use crate::core::explain::{self, ExplainOptions};
use crate::core::snapshot::Snapshot;

/// Flags of `loadmgr explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// Load-data snapshot (JSON, schema metadata-schemas/LoadDataSnapshot.schema.json).
    #[arg(long)]
    pub snapshot: PathBuf,
    /// Shedding strategy (AvgShedder, ThresholdShedder, OverloadShedder, UniformLoadShedder, TransferShedder or a
    /// Java class name); default: the configuration's.
    #[arg(long)]
    pub strategy: Option<String>,
    /// Placement strategy (AvgShedder, LeastLongTermMessageRate, LeastResourceUsageWithWeight or a class name).
    #[arg(long)]
    pub placement: Option<String>,
    /// broker.conf to read settings from (defaults: Pulsar 5.0).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Shedding cycles to run over the snapshot, one shedding interval apart (so hit counters can fire).
    #[arg(long, default_value_t = 1)]
    pub cycles: u32,
    /// Seed of the random choices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command and returns what it prints.
pub fn render(args: &ExplainArgs) -> Result<String, String> {
    let text = std::fs::read_to_string(&args.snapshot)
        .map_err(|e| format!("cannot read {}: {e}", args.snapshot.display()))?;
    let snapshot =
        Snapshot::from_json(&text).map_err(|e| format!("{}: {e}", args.snapshot.display()))?;
    let settings = match &args.config {
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
    };
    let report = explain::run(&snapshot, &options).map_err(|e| e.to_string())?;
    Ok(if args.json {
        serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n"
    } else {
        explain::render_text(&report)
    })
}

/// Runs the command, printing the plan.
pub fn run(args: &ExplainArgs) -> Result<(), String> {
    print!("{}", render(args)?);
    Ok(())
}
