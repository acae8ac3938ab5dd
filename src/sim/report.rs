//! Output: one text table per scenario (strategies as rows, metrics as columns, the best value of each column
//! marked `*`), the JSON document for scripts, and the HTML report with hand-written SVG charts.
//!
//! Charts per scenario: `charts/<scenario>-scores.svg` — small multiples, one panel per strategy with the same
//! axes, every broker's score over time, the overload threshold dashed and each shedding move as a tick on the
//! time axis; `charts/<scenario>-moves.svg` — cumulative shedding moves over time, one line per strategy.
//! `index.html` embeds every chart inline (it opens on its own, offline) and links each chart file. PNG is not
//! produced (see the README: it would need a rasteriser and a font).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::engine::RunResult;
use super::metrics::{Metrics, OVERLOADED_SCORE};
use super::suite::{ScenarioInfo, SuiteResult};
use super::SimError;

/// Column headers of the tables.
pub const COLUMNS: [&str; 9] = [
    "converge",
    "moves",
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
        2 => Some(m.ping_pong_moves as f64),
        3 => Some(round(m.peak_max_over_mean, 2)),
        4 => Some(round(m.avg_max_over_mean, 2)),
        5 => Some(round(m.avg_spread, 1)),
        6 => Some(round(m.overloaded_broker_minutes, 1)),
        7 => Some(m.splits as f64),
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
        2 => m.ping_pong_moves.to_string(),
        3 => format!("{:.2}", m.peak_max_over_mean),
        4 => format!("{:.2}", m.avg_max_over_mean),
        5 => format!("{:.1}", m.avg_spread),
        6 => format!("{:.1}", m.overloaded_broker_minutes),
        7 => m.splits.to_string(),
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

const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

fn tick_step(span: f64) -> f64 {
    for s in [5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 240.0, 360.0, 720.0] {
        if span / s <= 8.0 {
            return s;
        }
    }
    1440.0
}

const PANEL_W: f64 = 360.0;
const PANEL_H: f64 = 210.0;
const MARGIN_L: f64 = 40.0;
const MARGIN_T: f64 = 26.0;
const MARGIN_B: f64 = 30.0;

/// The small-multiples score chart of one scenario.
pub fn scores_svg(info: &ScenarioInfo, runs: &[&RunResult]) -> String {
    let cols = runs.len().clamp(1, 3);
    let rows = runs.len().div_ceil(cols).max(1);
    let legend = runs.first().map_or(0, |r| r.series.brokers.len()).min(20);
    let legend_h = if legend > 0 {
        18.0 * legend.div_ceil(5) as f64 + 8.0
    } else {
        0.0
    };
    let width = cols as f64 * PANEL_W + 10.0;
    let height = rows as f64 * PANEL_H + 34.0 + legend_h;
    let y_max = runs
        .iter()
        .flat_map(|r| r.series.scores.iter().flatten().flatten())
        .fold(100.0f32, |a, b| a.max(*b)) as f64;
    let x_max = info.duration_minutes.max(1.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<title>{}: broker scores over time per strategy</title><rect width="100%" height="100%" fill="white"/>"#,
        esc(&info.name)
    );
    let _ = writeln!(
        s,
        r#"<text x="8" y="18" font-size="14" font-weight="bold">{}: every broker's score (weighted max usage, %) over time, one panel per strategy</text>"#,
        esc(&info.name)
    );
    for (k, r) in runs.iter().enumerate() {
        let ox = (k % cols) as f64 * PANEL_W + 5.0;
        let oy = (k / cols) as f64 * PANEL_H + 28.0;
        let pw = PANEL_W - MARGIN_L - 12.0;
        let ph = PANEL_H - MARGIN_T - MARGIN_B;
        let px = |m: f64| ox + MARGIN_L + m / x_max * pw;
        let py = |v: f64| oy + MARGIN_T + ph - v / y_max * ph;
        let _ = writeln!(
            s,
            r#"<g><text x="{:.1}" y="{:.1}" font-weight="bold">{} / {}</text>"#,
            ox + MARGIN_L,
            oy + 16.0,
            esc(&r.strategy),
            esc(&r.placement)
        );
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="{pw:.1}" height="{ph:.1}" fill="#fafafa" stroke="#999"/>"##,
            ox + MARGIN_L,
            oy + MARGIN_T
        );
        for v in [0.0, 25.0, 50.0, 75.0, 100.0] {
            let _ = writeln!(
                s,
                r##"<line x1="{:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" text-anchor="end">{v}</text>"##,
                px(0.0),
                px(x_max),
                ox + MARGIN_L - 4.0,
                py(v) + 4.0,
                y = py(v)
            );
        }
        let step = tick_step(x_max);
        let mut m = 0.0;
        while m <= x_max + 1e-9 {
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="#999"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{m}</text>"##,
                py(0.0),
                py(0.0) + 4.0,
                py(0.0) + 15.0,
                x = px(m)
            );
            m += step;
        }
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#555">minutes</text>"##,
            px(x_max),
            py(0.0) + 26.0
        );
        let _ = writeln!(
            s,
            r##"<line x1="{:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#d62728" stroke-dasharray="4 3"/>"##,
            px(0.0),
            px(x_max),
            y = py(OVERLOADED_SCORE)
        );
        for (b, scores) in r.series.scores.iter().enumerate() {
            let color = PALETTE[b % PALETTE.len()];
            let mut pts = String::new();
            let flush = |pts: &mut String, s: &mut String| {
                if pts.matches(' ').count() >= 1 {
                    let _ = writeln!(
                        s,
                        r#"<polyline fill="none" stroke="{color}" stroke-width="1" stroke-opacity="0.85" points="{}"/>"#,
                        pts.trim_end()
                    );
                }
                pts.clear();
            };
            for (i, v) in scores.iter().enumerate() {
                match v {
                    Some(v) => {
                        let _ = write!(pts, "{:.1},{:.1} ", px(r.series.minutes[i]), py(*v as f64));
                    }
                    None => flush(&mut pts, &mut s),
                }
            }
            flush(&mut pts, &mut s);
        }
        for m in &r.series.move_minutes {
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="#000" stroke-opacity="0.5"/>"##,
                py(0.0) - 6.0,
                py(0.0),
                x = px(*m)
            );
        }
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{} moves, {} splits</text></g>"##,
            px(x_max) - 3.0,
            oy + MARGIN_T + 12.0,
            r.metrics.moves,
            r.metrics.splits
        );
    }
    if let Some(r) = runs.first() {
        let top = rows as f64 * PANEL_H + 30.0;
        for (b, id) in r.series.brokers.iter().take(legend).enumerate() {
            let x = 8.0 + (b % 5) as f64 * 150.0;
            let y = top + 14.0 + (b / 5) as f64 * 18.0;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="14" height="4" fill="{}"/><text x="{:.1}" y="{y:.1}">{}</text>"#,
                y - 6.0,
                PALETTE[b % PALETTE.len()],
                x + 18.0,
                esc(id)
            );
        }
        if r.series.brokers.len() > legend {
            let _ = writeln!(
                s,
                r#"<text x="8" y="{:.1}">… {} brokers in all (colours repeat)</text>"#,
                top + 14.0 + legend.div_ceil(5) as f64 * 18.0,
                r.series.brokers.len()
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

/// Cumulative shedding moves over time, one line per strategy.
pub fn moves_svg(info: &ScenarioInfo, runs: &[&RunResult]) -> String {
    let (w, h) = (720.0, 300.0);
    let (l, r_m, t, b) = (50.0, 190.0, 30.0, 34.0);
    let pw = w - l - r_m;
    let ph = h - t - b;
    let x_max = info.duration_minutes.max(1.0);
    let y_max = runs
        .iter()
        .map(|r| r.series.move_minutes.len())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let px = |m: f64| l + m / x_max * pw;
    let py = |v: f64| t + ph - v / y_max * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<title>{}: shedding moves over time</title><rect width="100%" height="100%" fill="white"/>"#,
        esc(&info.name)
    );
    let _ = writeln!(
        s,
        r#"<text x="8" y="18" font-size="14" font-weight="bold">{}: cumulative shedding moves</text>"#,
        esc(&info.name)
    );
    let _ = writeln!(
        s,
        r##"<rect x="{l}" y="{t}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#999"/>"##
    );
    let ystep = (y_max / 5.0).ceil().max(1.0);
    let mut v = 0.0;
    while v <= y_max + 1e-9 {
        let _ = writeln!(
            s,
            r##"<line x1="{l}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" text-anchor="end">{v}</text>"##,
            l + pw,
            l - 4.0,
            py(v) + 4.0,
            y = py(v)
        );
        v += ystep;
    }
    let step = tick_step(x_max);
    let mut m = 0.0;
    while m <= x_max + 1e-9 {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{m}</text>"##,
            px(m),
            t + ph + 15.0
        );
        m += step;
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#555">minutes</text>"##,
        l + pw,
        t + ph + 28.0
    );
    for (k, r) in runs.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let mut pts = format!("{:.1},{:.1}", px(0.0), py(0.0));
        for (i, m) in r.series.move_minutes.iter().enumerate() {
            let _ = write!(
                pts,
                " {:.1},{:.1} {:.1},{:.1}",
                px(*m),
                py(i as f64),
                px(*m),
                py(i as f64 + 1.0)
            );
        }
        let _ = write!(
            pts,
            " {:.1},{:.1}",
            px(x_max),
            py(r.series.move_minutes.len() as f64)
        );
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{pts}"/>"#
        );
        let y = t + 12.0 + k as f64 * 18.0;
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="14" height="4" fill="{color}"/><text x="{:.1}" y="{y:.1}">{} ({})</text>"#,
            l + pw + 12.0,
            y - 6.0,
            l + pw + 30.0,
            esc(&r.strategy),
            r.series.move_minutes.len()
        );
    }
    s.push_str("</svg>\n");
    s
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
            r##"<li><a href="#{stem}">{}</a>: <a href="charts/{stem}-scores.svg">charts/{stem}-scores.svg</a>, <a href="charts/{stem}-moves.svg">charts/{stem}-moves.svg</a></li>"##,
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
        for (kind, svg, caption) in [
            (
                "scores",
                scores_svg(info, &runs),
                "Every broker's score over time; one panel per strategy, same axes; dashed line: overload threshold (85); ticks on the time axis: shedding moves.",
            ),
            (
                "moves",
                moves_svg(info, &runs),
                "Cumulative shedding moves over time, per strategy.",
            ),
        ] {
            let name = format!("{stem}-{kind}.svg");
            let path = charts.join(&name);
            std::fs::write(&path, &svg).map_err(|e| io(&path, e))?;
            written.push(path);
            let _ = writeln!(
                html,
                r#"<figure>{svg}<figcaption>{caption} <a href="charts/{name}">charts/{name}</a></figcaption></figure>"#
            );
        }
    }
    html.push_str("</body></html>\n");
    let index = dir.join("index.html");
    std::fs::write(&index, html).map_err(|e| io(&index, e))?;
    Ok(written)
}
