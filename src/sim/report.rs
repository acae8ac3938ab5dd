//! Output: one text table per scenario (strategies as rows, metrics as columns, the best value of each column
//! marked `*`), the JSON document for scripts, and the HTML report with its charts.
//!
//! Charts per scenario: `charts/<scenario>-scores.svg` — small multiples, one panel per strategy with the same
//! axes, every broker's score over time, the overload threshold dashed and each shedding move as a tick on the
//! time axis; `charts/<scenario>-moves.svg` — cumulative shedding moves over time, one line per strategy.
//! Each chart is written as SVG and as PNG, both drawn by [`super::chart`] (plotters; the PNG's text comes from
//! a font compiled into the binary, so no system font is needed). `index.html` embeds every SVG inline (it
//! opens on its own, offline) and links every chart file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::chart;
use super::engine::RunResult;
use super::metrics::Metrics;
use super::suite::SuiteResult;
use super::SimError;

/// Column headers of the tables.
pub const COLUMNS: [&str; 10] = [
    "converge",
    "moves",
    "moves/min",
    "ping-pong",
    "peak max/mean",
    "avg max/mean",
    "avg spread",
    "overload b-min",
    "splits",
    "µs/cycle",
];

fn duration(secs: f64) -> String {
    let s = secs.round() as i64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// The value of column `c` (lower is better for every column; `None` = never converged, the worst).
fn key(m: &Metrics, c: usize) -> Option<f64> {
    match c {
        0 => m.convergence_seconds,
        1 => Some(m.moves as f64),
        2 => m.moves_over_minimum.map(|r| round(r, 2)),
        3 => Some(m.ping_pong_moves as f64),
        4 => Some(round(m.peak_max_over_mean, 2)),
        5 => Some(round(m.avg_max_over_mean, 2)),
        6 => Some(round(m.avg_spread, 1)),
        7 => Some(round(m.overloaded_broker_minutes, 1)),
        8 => Some(m.splits as f64),
        _ => Some(m.decision_micros_per_cycle.round()),
    }
}

fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

fn cell(m: &Metrics, c: usize) -> String {
    match c {
        0 => m
            .convergence_seconds
            .map_or_else(|| "never".to_owned(), duration),
        1 => m.moves.to_string(),
        2 => match (m.moves_over_minimum, m.min_moves) {
            (Some(r), _) => format!("{r:.2}{}", if m.min_moves_exact { "=" } else { "" }),
            (None, Some(0)) => "-".to_owned(),
            _ => "n/a".to_owned(),
        },
        3 => m.ping_pong_moves.to_string(),
        4 => format!("{:.2}", m.peak_max_over_mean),
        5 => format!("{:.2}", m.avg_max_over_mean),
        6 => format!("{:.1}", m.avg_spread),
        7 => format!("{:.1}", m.overloaded_broker_minutes),
        8 => m.splits.to_string(),
        _ => format!("{:.0}", m.decision_micros_per_cycle),
    }
}

/// Per column, the best value among `runs` (`None` when no run has a value).
fn best(runs: &[&RunResult]) -> Vec<Option<f64>> {
    (0..COLUMNS.len())
        .map(|c| {
            runs.iter()
                .filter_map(|r| key(&r.metrics, c))
                .min_by(f64::total_cmp)
        })
        .collect()
}

fn runs_of<'a>(suite: &'a SuiteResult, scenario: &str) -> Vec<&'a RunResult> {
    suite
        .runs
        .iter()
        .filter(|r| r.scenario == scenario)
        .collect()
}

/// The text tables.
pub fn render_tables(suite: &SuiteResult) -> String {
    let mut out = String::new();
    for info in &suite.scenarios {
        let runs = runs_of(suite, &info.name);
        if runs.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "{} — {} brokers, {} bundles, {} min, seed {}",
            info.name, info.brokers, info.bundles, info.duration_minutes, runs[0].seed
        );
        let best = best(&runs);
        let mut rows: Vec<Vec<String>> = vec![{
            let mut h = vec!["strategy".to_owned(), "placement".to_owned()];
            h.extend(COLUMNS.iter().map(|c| c.to_string()));
            h
        }];
        for r in &runs {
            let mut row = vec![r.strategy.clone(), r.placement.clone()];
            for (c, b) in best.iter().enumerate() {
                let mark = if b.is_some() && key(&r.metrics, c) == *b {
                    "*"
                } else {
                    " "
                };
                row.push(format!("{}{mark}", cell(&r.metrics, c)));
            }
            rows.push(row);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        for row in rows {
            let mut line = String::new();
            for (i, v) in row.iter().enumerate() {
                let pad = widths[i] - v.chars().count();
                if i < 2 {
                    line.push_str(v);
                    line.push_str(&" ".repeat(pad + 2));
                } else {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(v);
                    line.push_str("  ");
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out.push('\n');
    }
    out.push_str("* best in column (lower is better); converge = time until the score spread stays <= 10 points for 10 minutes\n");
    out.push_str("moves/min = moves / the fewest moves that balance the state convergence is measured from (a lower bound; = marks a proven minimum; - the state was balanced; n/a no balanced state exists)\n");
    out
}

/// The JSON document `{"runs":[…]}`.
pub fn render_json(suite: &SuiteResult) -> String {
    serde_json::to_string_pretty(suite).expect("metrics serialise") + "\n"
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes `dir/index.html` and `dir/charts/*.svg`; returns the chart files written.
pub fn write_html(suite: &SuiteResult, dir: &Path) -> Result<Vec<PathBuf>, SimError> {
    let io = |p: &Path, e: std::io::Error| SimError::Io(format!("{}: {e}", p.display()));
    let charts = dir.join("charts");
    std::fs::create_dir_all(&charts).map_err(|e| io(&charts, e))?;
    let mut written = Vec::new();
    let mut html = String::new();
    html.push_str(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>loadmgr simulate report</title>
<style>
body{font-family:sans-serif;margin:24px;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:8px 0 16px}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th:nth-child(-n+2),td:nth-child(-n+2){text-align:left}td.best{font-weight:bold;background:#e8f5e9}
figure{margin:8px 0 24px}figcaption{font-size:90%;color:#555}.note{color:#555;font-size:90%}
</style></head><body>
<h1>loadmgr simulate</h1>
<p class="note">Every run drives loadmgr's decision core (shedding, placement, split) in virtual time. Score = a broker's
weighted max resource usage in percent (what AvgShedder scores). Best value of each column in <b>bold</b> (lower is better).
Converge: time from the scenario's start mark until the spread of scores stays &le; 10 points for 10 minutes.
Moves: shedding unloads; ping-pong: a bundle moved back to a broker it left within the hour; overload b-min: broker-minutes
with a score above 85; &micro;s/cycle: wall time of one shedding cycle.</p>
"#,
    );
    let _ = writeln!(html, "<h2>Charts</h2><ul>");
    for info in &suite.scenarios {
        let stem = file_stem(&info.name);
        let _ = writeln!(
            html,
            r##"<li><a href="#{stem}">{}</a>: scores <a href="charts/{stem}-scores.svg">SVG</a> <a href="charts/{stem}-scores.png">PNG</a>, moves <a href="charts/{stem}-moves.svg">SVG</a> <a href="charts/{stem}-moves.png">PNG</a></li>"##,
            esc(&info.name)
        );
    }
    let _ = writeln!(html, "</ul>");
    for info in &suite.scenarios {
        let runs = runs_of(suite, &info.name);
        if runs.is_empty() {
            continue;
        }
        let stem = file_stem(&info.name);
        let _ = writeln!(
            html,
            r#"<h2 id="{stem}">{}</h2><p>{}</p><p class="note">{} brokers, {} bundles, {} minutes, seed {}</p>"#,
            esc(&info.name),
            esc(&info.description),
            info.brokers,
            info.bundles,
            info.duration_minutes,
            runs[0].seed
        );
        let best = best(&runs);
        html.push_str("<table><tr><th>strategy</th><th>placement</th>");
        for c in COLUMNS {
            let _ = write!(html, "<th>{}</th>", esc(c));
        }
        html.push_str("</tr>\n");
        for r in &runs {
            let _ = write!(
                html,
                "<tr><td>{}</td><td>{}</td>",
                esc(&r.strategy),
                esc(&r.placement)
            );
            for (c, b) in best.iter().enumerate() {
                let class = if b.is_some() && key(&r.metrics, c) == *b {
                    r#" class="best""#
                } else {
                    ""
                };
                let _ = write!(html, "<td{class}>{}</td>", esc(&cell(&r.metrics, c)));
            }
            html.push_str("</tr>\n");
        }
        html.push_str("</table>\n");
        for (kind, svg, png, caption) in [
            (
                "scores",
                chart::scores_svg(info, &runs)?,
                chart::scores_png(info, &runs)?,
                "Every broker's score over time; one panel per strategy, same axes; dashed line: overload threshold (85); ticks on the time axis: shedding moves, taller where more happened at once.",
            ),
            (
                "moves",
                chart::moves_svg(info, &runs)?,
                chart::moves_png(info, &runs)?,
                "Cumulative shedding moves over time, one line per strategy, labelled with its total.",
            ),
        ] {
            let name = format!("{stem}-{kind}");
            for (ext, bytes) in [("svg", svg.as_bytes()), ("png", png.as_slice())] {
                let path = charts.join(format!("{name}.{ext}"));
                std::fs::write(&path, bytes).map_err(|e| io(&path, e))?;
                written.push(path);
            }
            let _ = writeln!(
                html,
                r#"<figure>{svg}<figcaption>{caption} <a href="charts/{name}.svg">charts/{name}.svg</a>, <a href="charts/{name}.png">charts/{name}.png</a></figcaption></figure>"#
            );
        }
    }
    html.push_str("</body></html>\n");
    let index = dir.join("index.html");
    std::fs::write(&index, html).map_err(|e| io(&index, e))?;
    Ok(written)
}
