//! `loadmgr simulate`: a thin wrapper over [`crate::sim`].

use std::io::IsTerminal;
use std::path::PathBuf;

use crate::config::ShedderKind;
use crate::core::snapshot::Snapshot;
use crate::model::input::read_file_to_string;
use crate::runtime::synthetic::CostModel;
use crate::sim::scenario::{check_duration_minutes, default_suite, BUILT_IN};
use crate::sim::{report, run_suite, Scenario, SuiteOptions, World};

/// Flags of `loadmgr simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Scenarios to run: built-in names (skewed-start, rolling-restart, scale-out, scale-in, hot-bundle,
    /// transient-spike, heterogeneous, diurnal, heterogeneous-large, skew-crash, anti-affinity, scale-out-2x,
    /// diurnal-hot-tenant, large) or scenario files. Default: every built-in but `large`.
    /// Limits: files of at most 64 MiB; at most 100000 brokers, 1000000 namespaces, 10000000 bundles,
    /// 20000000 topics and 525600 minutes (365 days) per scenario.
    pub scenarios: Vec<String>,
    /// Shedding strategy to compare (repeatable; AvgShedder, ThresholdShedder, OverloadShedder,
    /// UniformLoadShedder, TransferShedder, BandShedder or a class name), each with its default placement. Default: all.
    #[arg(long = "strategy")]
    pub strategies: Vec<String>,
    /// broker.conf whose settings apply to every run (over the scenario's own settings).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Seed of every random choice (traffic generation, placement, noise).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write an HTML report with SVG and PNG charts to this directory (index.html, charts/).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Print every metric as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also run a scenario that starts from a load-data snapshot of a live cluster (as `loadmgr explain`
    /// reads, at most 64 MiB); repeatable.
    #[arg(long = "from-snapshot")]
    pub from_snapshot: Vec<PathBuf>,
    /// Simulated minutes (overrides every scenario's length; a snapshot runs 60 minutes by default); at most
    /// 525600 (365 days).
    #[arg(long)]
    pub minutes: Option<f64>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print every decision (unloads, assignments, splits, skipped candidates with their reasons) and
    /// membership change of every run on stderr, after the runs.
    #[arg(long)]
    pub trace: bool,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    pub list: bool,
}

/// Runs the command and returns what it prints on stdout.
pub fn render(args: &SimulateArgs) -> Result<String, String> {
    if args.list {
        let mut out = String::new();
        let width = BUILT_IN.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        for (name, _) in BUILT_IN {
            let s = Scenario::built_in(name).expect("built-in");
            out.push_str(&format!("{name:width$} {}\n", s.description));
        }
        return Ok(out);
    }
    let strategies = if args.strategies.is_empty() {
        ShedderKind::ALL.to_vec()
    } else {
        args.strategies
            .iter()
            .map(|s| {
                ShedderKind::from_class_name(s).ok_or_else(|| {
                    format!(
                        "unknown --strategy {s}; expected one of {}",
                        ShedderKind::ALL.map(|k| k.name()).join(", ")
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    if let Some(m) = args.minutes {
        check_duration_minutes("--minutes", m)?;
    }
    let names: Vec<String> = if args.scenarios.is_empty() && args.from_snapshot.is_empty() {
        default_suite().into_iter().map(str::to_owned).collect()
    } else {
        args.scenarios.clone()
    };
    let mut worlds = Vec::new();
    for n in &names {
        let s = Scenario::load(n).map_err(|e| e.to_string())?;
        let mut w = World::from_scenario(&s, args.seed).map_err(|e| e.to_string())?;
        if let Some(m) = args.minutes {
            w.duration_ms = (m * 60_000.0).round() as i64;
        }
        worlds.push(w);
    }
    for path in &args.from_snapshot {
        let text = read_file_to_string(path).map_err(|e| e.to_string())?;
        let snap = Snapshot::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let stem = path
            .file_stem()
            .map_or("snapshot".into(), |s| s.to_string_lossy().into_owned());
        let w = World::from_snapshot(
            &snap,
            &format!("from-{stem}"),
            args.minutes.unwrap_or(60.0),
            CostModel::default(),
        )
        .map_err(|e| e.to_string())?;
        worlds.push(w);
    }
    let config = match &args.config {
        Some(p) => Some((
            p.display().to_string(),
            read_file_to_string(p).map_err(|e| e.to_string())?,
        )),
        None => None,
    };
    let options = SuiteOptions {
        strategies,
        config,
        seed: args.seed,
        progress: std::io::stderr().is_terminal(),
        threads: args.threads.unwrap_or(0),
        trace: args.trace,
        ..Default::default()
    };
    let suite = run_suite(&worlds, &options).map_err(|e| e.to_string())?;
    for w in &suite.warnings {
        eprintln!("warning: {w}");
    }
    if args.trace {
        for r in &suite.runs {
            for line in &r.trace {
                eprintln!("[{} {}] {line}", r.scenario, r.strategy);
            }
        }
    }
    if let Some(dir) = &args.report {
        report::write_html(&suite, dir).map_err(|e| e.to_string())?;
        eprintln!("report: {}", dir.join("index.html").display());
    }
    Ok(if args.json {
        report::render_json(&suite)
    } else {
        report::render_tables(&suite)
    })
}

/// Runs the command, printing the tables or JSON.
pub fn run(args: &SimulateArgs) -> Result<(), String> {
    print!("{}", render(args)?);
    Ok(())
}
