//! Many runs: every (scenario, strategy) pair on a pool of threads (one per available core), with an optional
//! progress bar on stderr. Results come back in scenario, then strategy order, whatever the thread timing.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use super::engine::{effective_settings, run, RunOptions, RunResult};
use super::world::World;
use super::SimError;
use crate::config::ShedderKind;

/// What a suite runs.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// Shedding strategies, each with its default (or configured) placement.
    pub strategies: Vec<ShedderKind>,
    /// `--config`: file name and text.
    pub config: Option<(String, String)>,
    /// Seed of every run.
    pub seed: u64,
    /// Chart sample period, ms.
    pub chart_interval_ms: i64,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// Worker threads (0 = available cores).
    pub threads: usize,
    /// Keep every run's decision log.
    pub trace: bool,
}

impl Default for SuiteOptions {
    fn default() -> Self {
        Self {
            strategies: ShedderKind::ALL.to_vec(),
            config: None,
            seed: 1,
            chart_interval_ms: 60_000,
            progress: false,
            threads: 0,
            trace: false,
        }
    }
}

/// A scenario's facts for table headers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioInfo {
    /// The scenario's short name (table headers, file names).
    pub name: String,
    /// What the scenario shows (its file's `description`; may be empty).
    pub description: String,
    /// Brokers (ever present).
    pub brokers: usize,
    /// Bundles owned at the start (unowned ones are not counted).
    pub bundles: usize,
    /// Length, minutes.
    pub duration_minutes: f64,
}

impl ScenarioInfo {
    /// The facts of a world.
    pub fn of(w: &World) -> Self {
        Self {
            name: w.name.clone(),
            description: w.description.clone(),
            brokers: w.brokers.len(),
            bundles: w.bundles.iter().filter(|b| b.owner.is_some()).count(),
            duration_minutes: w.duration_ms as f64 / 60_000.0,
        }
    }
}

/// Every run of a suite.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteResult {
    /// The scenarios, in order.
    #[serde(skip)]
    pub scenarios: Vec<ScenarioInfo>,
    /// The runs, scenario-major.
    pub runs: Vec<RunResult>,
    /// Configuration warnings (once per distinct message).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// Runs every strategy over every world.
pub fn run_suite(worlds: &[World], options: &SuiteOptions) -> Result<SuiteResult, SimError> {
    let mut jobs = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    for (wi, w) in worlds.iter().enumerate() {
        for s in &options.strategies {
            let config = options
                .config
                .as_ref()
                .map(|(f, t)| (f.as_str(), t.as_str()));
            let (settings, warn) = effective_settings(&w.settings_text, config, *s)?;
            for m in warn {
                if !warnings.contains(&m) {
                    warnings.push(m);
                }
            }
            jobs.push((
                wi,
                RunOptions {
                    settings,
                    seed: options.seed,
                    chart_interval_ms: options.chart_interval_ms,
                    trace: options.trace,
                },
            ));
        }
    }
    let threads = if options.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        options.threads
    }
    .clamp(1, jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let finished = AtomicBool::new(false);
    let progress: Vec<AtomicI64> = jobs.iter().map(|_| AtomicI64::new(0)).collect();
    let results: Mutex<Vec<Option<RunResult>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((wi, opts)) = jobs.get(i) else {
                    break;
                };
                let r = run(&worlds[*wi], opts, Some(&progress[i]));
                results.lock().expect("no poisoned lock")[i] = Some(r);
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
        if options.progress {
            scope.spawn(|| {
                let total: f64 = jobs
                    .iter()
                    .map(|(wi, _)| worlds[*wi].duration_ms.max(1) as f64)
                    .sum();
                loop {
                    let reached: f64 = {
                        let r = results.lock().expect("no poisoned lock");
                        jobs.iter()
                            .enumerate()
                            .map(|(i, (wi, _))| {
                                let d = worlds[*wi].duration_ms.max(1) as f64;
                                if r[i].is_some() {
                                    d
                                } else {
                                    (progress[i].load(Ordering::Relaxed) as f64).min(d)
                                }
                            })
                            .sum()
                    };
                    draw(reached / total, done.load(Ordering::Relaxed), jobs.len());
                    if finished.load(Ordering::Relaxed) {
                        eprint!("\r{:78}\r", "");
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(150));
                }
            });
        }
        while done.load(Ordering::Relaxed) < jobs.len() {
            std::thread::sleep(Duration::from_millis(20));
        }
        finished.store(true, Ordering::Relaxed);
    });
    let runs = results
        .into_inner()
        .expect("no poisoned lock")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect();
    Ok(SuiteResult {
        scenarios: worlds.iter().map(ScenarioInfo::of).collect(),
        runs,
        warnings,
    })
}

fn draw(fraction: f64, done: usize, total: usize) {
    let width = 40;
    let filled = ((fraction.clamp(0.0, 1.0)) * width as f64).round() as usize;
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\rsimulate [{}{}] {:3.0}%  {done}/{total} runs",
        "#".repeat(filled),
        "-".repeat(width - filled),
        fraction * 100.0
    );
    let _ = err.flush();
}
