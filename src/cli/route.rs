//! `loadmgr route`: tools around the locality-aware, load-aware router ([`crate::routing`]).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::routing::simulate::{simulate, SimOptions, SimSpec, MAX_DURATION};

/// Arguments of `loadmgr route`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct RouteArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: RouteCommand,
}

/// Subcommands of `loadmgr route`.
#[derive(Debug, Clone, PartialEq, clap::Subcommand)]
pub enum RouteCommand {
    /// Simulate traffic through the load-aware router and through a plain shuffle, and compare them.
    ///
    /// A sender on one worker emits a base rate with periodic bursts that overload the targets on its
    /// own worker. For each mode it prints the share of traffic kept worker-local, host-local and
    /// rack-local (cumulative), the peak receive-queue fill, the messages delayed (queued behind a full
    /// receive queue) and dropped (backlog full), and, for the load-aware router, every scope change with
    /// its time. Time is virtual: the run is instant and depends only on the inputs and --seed.
    ///
    /// Without --targets a built-in topology is used: 12 targets of 2000 msg/s each (2 on the sender's
    /// worker, 2 on another worker of its host, 4 on its rack, 4 on another rack) and 3000 msg/s with
    /// 5 s bursts of 12000 msg/s every 20 s from 10 s on.
    ///
    /// --targets FILE is JSON with camelCase keys (unknown keys are errors):
    ///
    ///   {
    ///     "source":  {"host": "h1", "worker": "w1", "rack": "r1"},
    ///     "targets": [
    ///       {"id": 1, "host": "h1", "worker": "w1", "rack": "r1", "capacity": 2000},
    ///       {"id": 2, "host": "h1", "worker": "w2", "capacity": 2000, "queueCapacity": 512},
    ///       {"id": 3, "host": "h2", "worker": "w1", "rack": "r2", "capacity": 4000},
    ///       {"id": 4, "capacity": 1000}
    ///     ],
    ///     "traffic": {"baseRate": 3000, "burstRate": 12000,
    ///                 "firstBurstSecs": 10, "burstEverySecs": 20, "burstSecs": 5}
    ///   }
    ///
    /// source: where the sender runs ("rack" optional; unknown racks all count as one default rack).
    /// targets: "id" (unique number), "capacity" (msg/s processed, > 0), "queueCapacity" (receive-queue
    /// size in messages, default 1024), and the location "host" + "worker" (+ optional "rack"); leave the
    /// location out for a target whose placement is unknown. traffic: optional, defaults as above.
    #[command(verbatim_doc_comment)]
    Simulate(SimulateArgs),
}

/// Arguments of `loadmgr route simulate`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct SimulateArgs {
    /// JSON file with the sender, the targets and the traffic (see above); built-in topology without it.
    #[arg(long, value_name = "FILE")]
    pub targets: Option<PathBuf>,
    /// Simulated time: a number with unit ms, s, m or h (`90s`, `5m`, `1.5h`); a bare number is seconds.
    /// At most 1h.
    #[arg(long, value_name = "D", default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Seed of the traffic variation, the ring shuffles and the refresh jitter.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Print the report as JSON (stable camelCase keys) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `loadmgr route …`, printing to standard output.
///
/// # Errors
///
/// A message for the user: an unreadable or invalid targets file, or an invalid simulation.
pub fn run(args: RouteArgs) -> Result<(), String> {
    match args.command {
        RouteCommand::Simulate(args) => {
            let text = run_simulation(&args)?;
            std::io::stdout()
                .lock()
                .write_all(text.as_bytes())
                .map_err(|e| format!("writing the report: {e}"))
        }
    }
}

/// Runs the simulation and returns what `route simulate` prints (a table, or JSON with a final newline).
///
/// # Errors
///
/// As [`run`].
pub fn run_simulation(args: &SimulateArgs) -> Result<String, String> {
    let spec = match &args.targets {
        Some(path) => load_spec(path)?,
        None => SimSpec::builtin(),
    };
    let report =
        simulate(&spec, &SimOptions::new(args.duration, args.seed)).map_err(|e| e.to_string())?;
    if args.json {
        let mut text = serde_json::to_string_pretty(&report)
            .map_err(|e| format!("encoding the report: {e}"))?;
        text.push('\n');
        Ok(text)
    } else {
        Ok(report.to_text())
    }
}

/// Reads a `--targets` file.
///
/// # Errors
///
/// The file cannot be read, is not JSON of the documented shape (the message has line and column), or
/// describes an invalid simulation.
pub fn load_spec(path: &Path) -> Result<SimSpec, String> {
    let text = crate::model::input::read_file_to_string(path)
        .map_err(|e| format!("reading {}: {}", e.what, e.reason))?;
    let spec: SimSpec =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    spec.validate()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(spec)
}

/// Parses a duration: a non-negative number followed by `ms`, `s`, `m` or `h`, or a bare number of seconds.
///
/// # Errors
///
/// Empty text, an unknown unit, a negative or non-finite number, or more than [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("unknown unit in '{text}' (use ms, s, m or h)")),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a duration like 60s, 5m or 1h"))?;
    let duration = Duration::try_from_secs_f64(value * scale)
        .map_err(|_| format!("'{text}' is not a non-negative, finite duration"))?;
    if duration > MAX_DURATION {
        return Err(format!(
            "'{text}' is longer than the {} s maximum",
            MAX_DURATION.as_secs()
        ));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Top,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Top {
        Route(RouteArgs),
    }

    fn parse(args: &[&str]) -> Result<SimulateArgs, clap::Error> {
        let cli = Cli::try_parse_from(["loadmgr", "route"].iter().chain(args))?;
        let Top::Route(RouteArgs {
            command: RouteCommand::Simulate(a),
        }) = cli.command;
        Ok(a)
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        for bad in ["", "s", "5 parsecs", "-1s", "NaNs", "2h", "1d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags_and_defaults() {
        let a = parse(&["simulate"]).unwrap();
        assert_eq!(
            a,
            SimulateArgs {
                targets: None,
                duration: Duration::from_secs(60),
                seed: 1,
                json: false
            }
        );
        let a = parse(&[
            "simulate",
            "--targets",
            "t.json",
            "--duration",
            "5m",
            "--seed",
            "9",
            "--json",
        ])
        .unwrap();
        assert_eq!(a.targets, Some(PathBuf::from("t.json")));
        assert_eq!(a.duration, Duration::from_secs(300));
        assert_eq!((a.seed, a.json), (9, true));
        assert!(parse(&["simulate", "--duration", "forever"]).is_err());
    }

    #[test]
    fn builtin_simulation_prints_a_table_and_json() {
        let mut args = parse(&["simulate", "--duration", "30s"]).unwrap();
        let text = run_simulation(&args).unwrap();
        assert!(text.starts_with("route simulate: 12 targets"), "{text}");
        assert!(text.contains("kept rack-local"));
        args.json = true;
        let json = run_simulation(&args).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["seed"], 1);
        assert_eq!(v["durationSecs"], 30.0);
        assert!(v["loadAware"]["workerLocalShare"].as_f64().unwrap() > 0.5);
        assert_eq!(json, run_simulation(&args).unwrap(), "deterministic");
    }

    #[test]
    fn targets_files() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.json");
        std::fs::write(
            &good,
            r#"{"source": {"host": "h1", "worker": "w1"},
                "targets": [{"id": 1, "host": "h1", "worker": "w1", "capacity": 5000},
                            {"id": 2, "host": "h2", "worker": "w1", "capacity": 5000}],
                "traffic": {"baseRate": 1000, "burstRate": 1000, "firstBurstSecs": 0,
                            "burstEverySecs": 10, "burstSecs": 0}}"#,
        )
        .unwrap();
        let args = SimulateArgs {
            targets: Some(good),
            duration: Duration::from_secs(10),
            seed: 3,
            json: true,
        };
        let v: serde_json::Value = serde_json::from_str(&run_simulation(&args).unwrap()).unwrap();
        assert_eq!(v["targets"], 2);
        assert_eq!(
            v["loadAware"]["workerLocalShare"], 1.0,
            "an idle local target keeps everything"
        );

        let broken = dir.path().join("broken.json");
        std::fs::write(
            &broken,
            r#"{"source": {"host": "h1", "worker": "w1"}, "targets": ["#,
        )
        .unwrap();
        let err = load_spec(&broken).unwrap_err();
        assert!(err.contains("broken.json") && err.contains("line"), "{err}");
        let invalid = dir.path().join("invalid.json");
        std::fs::write(
            &invalid,
            r#"{"source": {"host": "h1", "worker": "w1"}, "targets": [{"id": 1, "capacity": -1}]}"#,
        )
        .unwrap();
        assert!(load_spec(&invalid).unwrap_err().contains("capacity"));
        let missing = dir.path().join("missing.json");
        assert!(load_spec(&missing).unwrap_err().starts_with("reading"));
    }
}
