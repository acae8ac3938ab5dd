//! The report's charts, drawn once with [`plotters`] for two backends: SVG text (`plotters-svg`) and an RGB
//! bitmap (`plotters-bitmap`) that the `png` crate encodes. Coordinates are SVG pixels; the PNG is drawn at
//! [`PNG_SCALE`] device pixels per SVG pixel.
//!
//! No chart needs an installed font. Text is measured, and on the bitmap drawn, with Noto Sans (regular and
//! bold, Apache-2.0) compiled into the binary by the `ttf-noto-sans` crate: `ab_glyph` lays out and rasterises
//! the glyphs (`font::Fonted`, a thin layer over either backend). The SVG names the generic `sans-serif`
//! family and leaves its text to the viewer.
//!
//! Colour is never the only cue, and the palettes are colour-blind safe: broker lines use Paul Tol's *muted*
//! scheme plus a grey (brokers past the tenth repeat it dashed), strategy lines Okabe–Ito (past the seventh,
//! dashed) with a label at each line's end; the overload threshold is a dashed dark line whose value is on
//! the score axis.

use std::collections::BTreeMap;
use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::engine::RunResult;
use super::metrics::OVERLOADED_SCORE;
use super::suite::ScenarioInfo;
use super::SimError;

mod font;

use font::{faces, Fonted};

/// Device pixels per SVG pixel of the PNG charts.
pub const PNG_SCALE: f64 = 2.0;

/// Broker lines: Paul Tol's colour-blind-safe *muted* scheme (indigo, cyan, teal, green, olive, sand, rose,
/// wine, purple) and a grey. Broker `b` uses colour `b % 10`, dashed when `b / 10` is odd.
pub const BROKER_COLORS: [RGBColor; 10] = [
    RGBColor(0x33, 0x22, 0x88),
    RGBColor(0x88, 0xcc, 0xee),
    RGBColor(0x44, 0xaa, 0x99),
    RGBColor(0x11, 0x77, 0x33),
    RGBColor(0x99, 0x99, 0x33),
    RGBColor(0xdd, 0xcc, 0x77),
    RGBColor(0xcc, 0x66, 0x77),
    RGBColor(0x88, 0x22, 0x55),
    RGBColor(0xaa, 0x44, 0x99),
    RGBColor(0x77, 0x77, 0x77),
];

/// Strategy lines: the Okabe–Ito colours (blue, orange, bluish green, reddish purple, vermillion, sky blue,
/// black; the yellow is too light on white). Strategy `k` uses colour `k % 7`, dashed when `k / 7` is odd.
pub const STRATEGY_COLORS: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xb2),
    RGBColor(0xe6, 0x9f, 0x00),
    RGBColor(0x00, 0x9e, 0x73),
    RGBColor(0xcc, 0x79, 0xa7),
    RGBColor(0xd5, 0x5e, 0x00),
    RGBColor(0x56, 0xb4, 0xe9),
    RGBColor(0x00, 0x00, 0x00),
];

const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
const MUTED: RGBColor = RGBColor(0x55, 0x55, 0x55);
const GRID: RGBColor = RGBColor(0xe0, 0xe0, 0xe0);
const FRAME: RGBColor = RGBColor(0x99, 0x99, 0x99);
const PANEL: RGBColor = RGBColor(0xfa, 0xfa, 0xfa);
const THRESHOLD: RGBColor = RGBColor(0x22, 0x22, 0x22);

/// The font family every chart names.
const FONT: &str = "sans-serif";

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// SVG pixels to device pixels, and styles at that scale.
#[derive(Debug, Clone, Copy)]
struct Scale(f64);

impl Scale {
    fn px(self, v: f64) -> i32 {
        (v * self.0).round() as i32
    }

    fn stroke(self, color: RGBColor, width: f64) -> ShapeStyle {
        Color::stroke_width(&color, ((width * self.0).round() as u32).max(1))
    }

    /// Text of `em` SVG pixels. (plotters sizes text by its line height: 1.24 em; plotters-svg writes
    /// `font-size` = size / 1.24.)
    fn text(self, em: f64, color: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
        TextStyle {
            font: (FONT, em * 1.24 * self.0).into_font(),
            color: color.to_backend_color(),
            pos: Pos::new(h, v),
        }
    }

    fn bold(self, em: f64, color: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
        TextStyle {
            font: (FONT, em * 1.24 * self.0, FontStyle::Bold).into_font(),
            ..self.text(em, color, h, v)
        }
    }
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy)]
struct Line {
    color: RGBColor,
    dashed: bool,
    width: f64,
}

fn broker_line(b: usize) -> Line {
    Line {
        color: BROKER_COLORS[b % BROKER_COLORS.len()],
        dashed: (b / BROKER_COLORS.len()) % 2 == 1,
        width: 1.0,
    }
}

fn strategy_line(k: usize) -> Line {
    Line {
        color: STRATEGY_COLORS[k % STRATEGY_COLORS.len()],
        dashed: (k / STRATEGY_COLORS.len()) % 2 == 1,
        width: 2.0,
    }
}

/// A polyline in device pixels, on `root`.
fn path<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    s: Scale,
    points: Vec<(i32, i32)>,
    line: Line,
) -> DrawResult<DB> {
    if points.len() < 2 {
        return Ok(());
    }
    let style = s.stroke(line.color, line.width);
    if line.dashed {
        root.draw(&DashedPathElement::new(points, s.px(6.0), s.px(3.0), style))
    } else {
        root.draw(&PathElement::new(points, style))
    }
}

/// Drops points that add nothing at device resolution: repeats, and the middle of three points on one
/// horizontal or vertical line when it lies between the other two.
fn simplify(points: impl IntoIterator<Item = (i32, i32)>) -> Vec<(i32, i32)> {
    let mut out: Vec<(i32, i32)> = Vec::new();
    for p in points {
        if out.last() == Some(&p) {
            continue;
        }
        if let [.., a, b] = out[..] {
            let between = |a: i32, b: i32, c: i32| a.min(c) <= b && b <= a.max(c);
            if ((a.0 == b.0 && b.0 == p.0) || (a.1 == b.1 && b.1 == p.1))
                && between(a.0, b.0, p.0)
                && between(a.1, b.1, p.1)
            {
                out.pop();
            }
        }
        out.push(p);
    }
    out
}

/// A linear axis with the given ticks (labels and grid lines).
#[derive(Debug, Clone)]
struct Ticked {
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl Ticked {
    /// `0..max` with ticks every `step` from 0.
    fn new(max: f64, step: f64) -> Self {
        Self {
            range: 0.0..max,
            ticks: (0..)
                .map(|i| i as f64 * step)
                .take_while(|v| *v <= max + 1e-9)
                .collect(),
        }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        let f = if span > 0.0 {
            (v - self.range.start) / span
        } else {
            0.5
        };
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }
}

/// A minutes axis step that gives at most 8 intervals.
fn tick_step(span: f64) -> f64 {
    for s in [5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 240.0, 360.0, 720.0] {
        if span / s <= 8.0 {
            return s;
        }
    }
    1440.0
}

/// A count axis step (1, 2 or 5 × 10^k) that gives at most 6 intervals.
fn count_step(max: f64) -> f64 {
    let mut unit = 1.0;
    loop {
        for f in [1.0, 2.0, 5.0] {
            if max / (f * unit) <= 6.0 {
                return f * unit;
            }
        }
        unit *= 10.0;
    }
}

fn integer(v: &f64) -> String {
    format!("{v:.0}")
}

/// Spreads label positions `ys` (any order) at least `gap` apart within `lo..=hi`, moving each as little as
/// this simple two-pass rule allows; returns them in the input order.
fn spread(ys: &[f64], gap: f64, lo: f64, hi: f64) -> Vec<f64> {
    let mut order: Vec<usize> = (0..ys.len()).collect();
    order.sort_by(|a, b| ys[*a].total_cmp(&ys[*b]));
    let mut placed: Vec<f64> = order.iter().map(|i| ys[*i].clamp(lo, hi)).collect();
    for i in 1..placed.len() {
        placed[i] = placed[i].max(placed[i - 1] + gap);
    }
    if let Some(last) = placed.last_mut() {
        *last = last.min(hi);
    }
    for i in (0..placed.len().saturating_sub(1)).rev() {
        placed[i] = placed[i].min(placed[i + 1] - gap);
    }
    let mut out = vec![0.0; ys.len()];
    for (slot, i) in order.into_iter().enumerate() {
        out[i] = placed[slot];
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A chart that can be drawn on any plotters backend.
trait Chart {
    /// Width and height in SVG pixels.
    fn size(&self) -> (u32, u32);
    /// The SVG's `<title>`.
    fn title(&self) -> String;
    /// Draws on a white `root` at `s`.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, s: Scale) -> DrawResult<DB>;
}

fn chart_error(e: impl std::fmt::Display) -> SimError {
    SimError::Chart(e.to_string())
}

fn svg(chart: &impl Chart) -> Result<String, SimError> {
    let faces = faces()?;
    let mut out = String::new();
    {
        let root = Fonted {
            inner: SVGBackend::with_string(&mut out, chart.size()),
            faces,
            glyphs: false,
        }
        .into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        chart.draw(&root, Scale(1.0)).map_err(chart_error)?;
        root.present().map_err(chart_error)?;
    }
    // A title for screen readers and tooltips, as the root element's first child.
    let start = out.find('>').map_or(0, |i| i + 1);
    out.insert_str(start, &format!("\n<title>{}</title>", esc(&chart.title())));
    Ok(out)
}

fn png(chart: &impl Chart) -> Result<Vec<u8>, SimError> {
    let faces = faces()?;
    let (w, h) = chart.size();
    let (w, h) = (
        (w as f64 * PNG_SCALE).round() as u32,
        (h as f64 * PNG_SCALE).round() as u32,
    );
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = Fonted {
            inner: BitMapBackend::with_buffer(&mut rgb, (w, h)),
            faces,
            glyphs: true,
        }
        .into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        chart.draw(&root, Scale(PNG_SCALE)).map_err(chart_error)?;
        root.present().map_err(chart_error)?;
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Balanced);
    let mut writer = encoder.write_header().map_err(chart_error)?;
    writer.write_image_data(&rgb).map_err(chart_error)?;
    writer.finish().map_err(chart_error)?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------------
// Scores: small multiples

const PAD: f64 = 10.0;
const TITLE_H: f64 = 36.0;
const PANEL_W: f64 = 360.0;
const PANEL_H: f64 = 262.0;
/// Space between a panel's axis title and the next row's caption.
const PANEL_GAP: f64 = 10.0;
const CAPTION_H: f64 = 36.0;
const LEGEND_ROW: f64 = 22.0;
const LEGEND_COL: f64 = 150.0;
/// Brokers named in the legend; past that the colours repeat and the legend says how many there are.
const LEGEND_BROKERS: usize = 20;

struct Scores<'a> {
    info: &'a ScenarioInfo,
    runs: &'a [&'a RunResult],
}

impl Scores<'_> {
    fn brokers(&self) -> usize {
        self.runs.first().map_or(0, |r| r.series.brokers.len())
    }

    /// Columns of panels, rows of panels, panel width.
    fn grid(&self) -> (usize, usize, f64) {
        let cols = self.runs.len().clamp(1, 3);
        let rows = self.runs.len().div_ceil(cols).max(1);
        (cols, rows, PANEL_W.max(560.0 / cols as f64))
    }

    /// Legend columns, legend rows (broker rows and the key row).
    fn legend(&self) -> (usize, usize) {
        let (cols, _, panel_w) = self.grid();
        let lcols = (((cols as f64 * panel_w) / LEGEND_COL) as usize).clamp(1, 5);
        let named = self.brokers().min(LEGEND_BROKERS);
        (lcols, named.div_ceil(lcols) + 1)
    }
}

impl Chart for Scores<'_> {
    fn size(&self) -> (u32, u32) {
        let (cols, rows, panel_w) = self.grid();
        let (_, legend_rows) = self.legend();
        (
            (cols as f64 * panel_w + 2.0 * PAD).ceil() as u32,
            (TITLE_H + rows as f64 * PANEL_H + legend_rows as f64 * LEGEND_ROW + PAD).ceil() as u32,
        )
    }

    fn title(&self) -> String {
        format!("{}: broker scores over time per strategy", self.info.name)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, s: Scale) -> DrawResult<DB> {
        let (cols, rows, panel_w) = self.grid();
        root.draw(&Text::new(
            format!(
                "{}: every broker's score (weighted max usage, %) over time, one panel per strategy",
                self.info.name
            ),
            (s.px(PAD), s.px(TITLE_H / 2.0)),
            s.bold(14.0, INK, HPos::Left, VPos::Center),
        ))?;
        let y_max = self
            .runs
            .iter()
            .flat_map(|r| r.series.scores.iter().flatten().flatten())
            .fold(100.0f32, |a, b| a.max(*b)) as f64;
        let x_max = self.info.duration_minutes.max(1.0);
        // Moves per time bucket (about a pixel of a panel), on one scale for every panel.
        let buckets: Vec<BTreeMap<i64, usize>> = self
            .runs
            .iter()
            .map(|r| {
                let mut b = BTreeMap::new();
                for m in &r.series.move_minutes {
                    *b.entry((m / x_max * 300.0).round() as i64).or_insert(0) += 1;
                }
                b
            })
            .collect();
        let most = buckets
            .iter()
            .flat_map(|b| b.values())
            .copied()
            .max()
            .unwrap_or(1);
        for (k, r) in self.runs.iter().enumerate() {
            let ox = PAD + (k % cols) as f64 * panel_w;
            let oy = TITLE_H + (k / cols) as f64 * PANEL_H;
            let panel = Panel {
                ox,
                oy,
                w: panel_w,
                x_max,
                y_max,
            };
            panel.draw(root, s, r, &buckets[k], most)?;
        }
        self.draw_legend(root, s, rows)
    }
}

struct Panel {
    ox: f64,
    oy: f64,
    w: f64,
    x_max: f64,
    y_max: f64,
}

impl Panel {
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        s: Scale,
        r: &RunResult,
        moves: &BTreeMap<i64, usize>,
        most: usize,
    ) -> DrawResult<DB> {
        const Y_AREA: f64 = 46.0;
        const RIGHT: f64 = 12.0;
        let (ox, oy) = (self.ox, self.oy);
        root.draw(&Text::new(
            r.strategy.clone(),
            (s.px(ox + Y_AREA), s.px(oy + 11.0)),
            s.bold(11.5, INK, HPos::Left, VPos::Center),
        ))?;
        root.draw(&Text::new(
            format!("{} moves, {} splits", r.metrics.moves, r.metrics.splits),
            (s.px(ox + self.w - RIGHT), s.px(oy + 11.0)),
            s.text(10.5, MUTED, HPos::Right, VPos::Center),
        ))?;
        root.draw(&Text::new(
            format!("placement: {}", r.placement),
            (s.px(ox + Y_AREA), s.px(oy + 27.0)),
            s.text(10.5, MUTED, HPos::Left, VPos::Center),
        ))?;
        let area = root.clone().shrink(
            (s.px(ox), s.px(oy + CAPTION_H)),
            (s.px(self.w), s.px(PANEL_H - CAPTION_H - PANEL_GAP)),
        );
        // Score ticks every 25 points, and the overload threshold.
        let mut scores = Ticked::new(self.y_max, 25.0);
        scores.ticks.push(OVERLOADED_SCORE);
        let mut chart = ChartBuilder::on(&area)
            .margin_top(s.px(8.0))
            .margin_right(s.px(RIGHT))
            .x_label_area_size(s.px(38.0))
            .y_label_area_size(s.px(Y_AREA))
            .build_cartesian_2d(Ticked::new(self.x_max, tick_step(self.x_max)), scores)?;
        chart.plotting_area().fill(&PANEL)?;
        chart
            .configure_mesh()
            .x_desc("minutes")
            .y_desc("score (%)")
            .label_style(s.text(10.5, INK, HPos::Center, VPos::Center))
            .axis_desc_style(s.text(10.5, MUTED, HPos::Center, VPos::Center))
            .bold_line_style(s.stroke(GRID, 1.0))
            .light_line_style(TRANSPARENT)
            .axis_style(s.stroke(FRAME, 1.0))
            .set_all_tick_mark_size(s.px(4.0))
            .x_label_formatter(&integer)
            .y_label_formatter(&integer)
            .draw()?;
        let plot = chart.plotting_area();
        let at = |m: f64, v: f64| plot.map_coordinate(&(m, v));
        for (b, scores) in r.series.scores.iter().enumerate() {
            let mut run: Vec<(i32, i32)> = Vec::new();
            for (i, v) in scores.iter().enumerate() {
                match v {
                    Some(v) => run.push(at(r.series.minutes[i], *v as f64)),
                    None => path(root, s, simplify(run.drain(..)), broker_line(b))?,
                }
            }
            path(root, s, simplify(run), broker_line(b))?;
        }
        let (left, y) = at(0.0, OVERLOADED_SCORE);
        let (right, _) = at(self.x_max, OVERLOADED_SCORE);
        root.draw(&DashedPathElement::new(
            [(left, y), (right, y)],
            s.px(5.0),
            s.px(3.0),
            s.stroke(THRESHOLD, 1.0),
        ))?;
        let bucket_minutes = self.x_max / 300.0;
        for (bucket, n) in moves {
            let (x, bottom) = at(*bucket as f64 * bucket_minutes, 0.0);
            let len = 3.0 + 9.0 * (*n as f64 / most.max(1) as f64).sqrt();
            root.draw(&PathElement::new(
                [(x, bottom), (x, bottom - s.px(len))],
                s.stroke(INK, 1.0),
            ))?;
        }
        Ok(())
    }
}

impl Scores<'_> {
    fn draw_legend<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        s: Scale,
        panel_rows: usize,
    ) -> DrawResult<DB> {
        let Some(first) = self.runs.first() else {
            return Ok(());
        };
        let (lcols, rows) = self.legend();
        let top = TITLE_H + panel_rows as f64 * PANEL_H + LEGEND_ROW / 2.0;
        let entry = |i: usize| {
            (
                PAD + (i % lcols) as f64 * LEGEND_COL,
                top + (i / lcols) as f64 * LEGEND_ROW,
            )
        };
        let brokers = &first.series.brokers;
        for (b, id) in brokers.iter().take(LEGEND_BROKERS).enumerate() {
            let (x, y) = entry(b);
            let line = Line {
                width: 2.0,
                ..broker_line(b)
            };
            path(
                root,
                s,
                vec![(s.px(x), s.px(y)), (s.px(x + 22.0), s.px(y))],
                line,
            )?;
            root.draw(&Text::new(
                id.clone(),
                (s.px(x + 28.0), s.px(y)),
                s.text(10.5, INK, HPos::Left, VPos::Center),
            ))?;
        }
        // The key row: the threshold, the move ticks, and how many brokers there are when not all are named.
        let y = top + (rows - 1) as f64 * LEGEND_ROW;
        let mut x = PAD;
        root.draw(&DashedPathElement::new(
            [(s.px(x), s.px(y)), (s.px(x + 22.0), s.px(y))],
            s.px(5.0),
            s.px(3.0),
            s.stroke(THRESHOLD, 1.0),
        ))?;
        let key = s.text(10.5, INK, HPos::Left, VPos::Center);
        let label = format!("overload threshold ({OVERLOADED_SCORE})");
        root.draw(&Text::new(
            label.clone(),
            (s.px(x + 28.0), s.px(y)),
            key.clone(),
        ))?;
        x += 28.0 + text_width(root, s, &label, &key) + 24.0;
        for (dx, len) in [(0.0, 5.0), (4.0, 9.0), (8.0, 12.0)] {
            root.draw(&PathElement::new(
                [
                    (s.px(x + dx), s.px(y + 6.0)),
                    (s.px(x + dx), s.px(y + 6.0 - len)),
                ],
                s.stroke(INK, 1.0),
            ))?;
        }
        let label = "shedding moves at that time (taller: more moves)".to_owned();
        root.draw(&Text::new(
            label.clone(),
            (s.px(x + 16.0), s.px(y)),
            key.clone(),
        ))?;
        x += 16.0 + text_width(root, s, &label, &key) + 24.0;
        if brokers.len() > LEGEND_BROKERS {
            root.draw(&Text::new(
                format!(
                    "{} brokers in all; past the {LEGEND_BROKERS}th the line styles repeat",
                    brokers.len()
                ),
                (s.px(x), s.px(y)),
                s.text(10.5, MUTED, HPos::Left, VPos::Center),
            ))?;
        }
        Ok(())
    }
}

/// The width of `text` in SVG pixels (measured with the embedded font).
fn text_width<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    s: Scale,
    text: &str,
    style: &TextStyle,
) -> f64 {
    root.estimate_text_size(text, style)
        .map_or(text.len() as f64 * 7.0, |(w, _)| w as f64 / s.0)
}

// ---------------------------------------------------------------------------------------------------------
// Moves: one line per strategy

const MOVES_W: f64 = 800.0;
const MOVES_LABELS_W: f64 = 220.0;
const MOVES_LABEL_GAP: f64 = 17.0;

struct Moves<'a> {
    info: &'a ScenarioInfo,
    runs: &'a [&'a RunResult],
}

impl Chart for Moves<'_> {
    fn size(&self) -> (u32, u32) {
        let labels = TITLE_H + 60.0 + self.runs.len() as f64 * MOVES_LABEL_GAP;
        (MOVES_W as u32, labels.max(320.0).ceil() as u32)
    }

    fn title(&self) -> String {
        format!("{}: shedding moves over time", self.info.name)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, s: Scale) -> DrawResult<DB> {
        let (w, h) = self.size();
        let (w, h) = (w as f64, h as f64);
        root.draw(&Text::new(
            format!(
                "{}: cumulative shedding moves, one line per strategy",
                self.info.name
            ),
            (s.px(PAD), s.px(TITLE_H / 2.0)),
            s.bold(14.0, INK, HPos::Left, VPos::Center),
        ))?;
        let x_max = self.info.duration_minutes.max(1.0);
        let most = self
            .runs
            .iter()
            .map(|r| r.series.move_minutes.len())
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let area = root.clone().shrink(
            (0, s.px(TITLE_H)),
            (s.px(w - MOVES_LABELS_W), s.px(h - TITLE_H)),
        );
        let mut chart = ChartBuilder::on(&area)
            .margin_top(s.px(6.0))
            .margin_left(s.px(PAD))
            .margin_bottom(s.px(6.0))
            .x_label_area_size(s.px(40.0))
            .y_label_area_size(s.px(50.0))
            .build_cartesian_2d(
                Ticked::new(x_max, tick_step(x_max)),
                Ticked {
                    range: 0.0..most * 1.05,
                    ..Ticked::new(most, count_step(most))
                },
            )?;
        chart.plotting_area().fill(&PANEL)?;
        chart
            .configure_mesh()
            .x_desc("minutes")
            .y_desc("moves so far")
            .label_style(s.text(10.5, INK, HPos::Center, VPos::Center))
            .axis_desc_style(s.text(10.5, MUTED, HPos::Center, VPos::Center))
            .bold_line_style(s.stroke(GRID, 1.0))
            .light_line_style(TRANSPARENT)
            .axis_style(s.stroke(FRAME, 1.0))
            .set_all_tick_mark_size(s.px(4.0))
            .x_label_formatter(&integer)
            .y_label_formatter(&integer)
            .draw()?;
        let plot = chart.plotting_area();
        let at = |m: f64, v: f64| plot.map_coordinate(&(m, v));
        let mut ends = Vec::new();
        for (k, r) in self.runs.iter().enumerate() {
            let moves = &r.series.move_minutes;
            let mut points = vec![at(0.0, 0.0)];
            for (i, m) in moves.iter().enumerate() {
                points.push(at(*m, i as f64));
                points.push(at(*m, i as f64 + 1.0));
            }
            points.push(at(x_max, moves.len() as f64));
            path(root, s, simplify(points), strategy_line(k))?;
            ends.push(at(x_max, moves.len() as f64));
        }
        // Labels at the lines' ends, spread apart, each joined to its line by a leader.
        let (_, top) = at(0.0, most * 1.05);
        let (_, bottom) = at(0.0, 0.0);
        let wanted: Vec<f64> = ends.iter().map(|(_, y)| *y as f64 / s.0).collect();
        let placed = spread(
            &wanted,
            MOVES_LABEL_GAP,
            top as f64 / s.0,
            (bottom as f64 / s.0).max(top as f64 / s.0 + MOVES_LABEL_GAP * ends.len() as f64),
        );
        for (k, r) in self.runs.iter().enumerate() {
            let x = ends[k].0 as f64 / s.0;
            let label_y = placed[k];
            let line = strategy_line(k);
            root.draw(&PathElement::new(
                [(s.px(x), ends[k].1), (s.px(x + 8.0), s.px(label_y))],
                s.stroke(line.color, 1.0),
            ))?;
            path(
                root,
                s,
                vec![
                    (s.px(x + 8.0), s.px(label_y)),
                    (s.px(x + 28.0), s.px(label_y)),
                ],
                line,
            )?;
            root.draw(&Text::new(
                format!("{} ({})", r.strategy, r.series.move_minutes.len()),
                (s.px(x + 34.0), s.px(label_y)),
                s.text(10.5, INK, HPos::Left, VPos::Center),
            ))?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------------------
// The charts of a scenario

/// The small-multiples score chart of one scenario (one panel per run, same axes), as SVG.
pub fn scores_svg(info: &ScenarioInfo, runs: &[&RunResult]) -> Result<String, SimError> {
    svg(&Scores { info, runs })
}

/// The score chart as PNG, at [`PNG_SCALE`].
pub fn scores_png(info: &ScenarioInfo, runs: &[&RunResult]) -> Result<Vec<u8>, SimError> {
    png(&Scores { info, runs })
}

/// Cumulative shedding moves over time, one line per run, as SVG.
pub fn moves_svg(info: &ScenarioInfo, runs: &[&RunResult]) -> Result<String, SimError> {
    svg(&Moves { info, runs })
}

/// The moves chart as PNG, at [`PNG_SCALE`].
pub fn moves_png(info: &ScenarioInfo, runs: &[&RunResult]) -> Result<Vec<u8>, SimError> {
    png(&Moves { info, runs })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ab_glyph::Font;

    use super::*;
    use crate::sim::engine::Series;
    use crate::sim::Metrics;

    fn info(minutes: f64) -> ScenarioInfo {
        ScenarioInfo {
            name: "test".to_owned(),
            description: String::new(),
            brokers: 0,
            bundles: 0,
            duration_minutes: minutes,
        }
    }

    /// A run of `brokers` brokers over an hour: broker b starts at 90 − 7b and settles at 30; broker 1 is down
    /// from minute 20 to 25.
    fn run(strategy: &str, brokers: usize, moves: &[f64]) -> RunResult {
        let minutes: Vec<f64> = (0..=720).map(|i| i as f64 / 12.0).collect();
        let scores = (0..brokers)
            .map(|b| {
                minutes
                    .iter()
                    .map(|m| {
                        if b == 1 && (20.0..25.0).contains(m) {
                            None
                        } else if *m < 10.0 {
                            Some(90.0 - 7.0 * b as f32)
                        } else {
                            Some(30.0)
                        }
                    })
                    .collect()
            })
            .collect();
        RunResult {
            scenario: "test".to_owned(),
            strategy: strategy.to_owned(),
            placement: format!("{strategy}Placement"),
            seed: 1,
            metrics: Metrics {
                moves: moves.len() as _,
                ..Default::default()
            },
            wall_seconds: 0.0,
            simulated_cycles_per_second: 0.0,
            series: Series {
                brokers: (1..=brokers)
                    .map(|b| format!("broker-{b:02}:8080"))
                    .collect(),
                minutes,
                scores,
                move_minutes: moves.to_vec(),
                split_minutes: Vec::new(),
                duration_minutes: 60.0,
            },
            moves: Vec::new(),
            trace: Vec::new(),
            reports: Vec::new(),
            records: Vec::new(),
            splits: Vec::new(),
            owners: BTreeMap::new(),
        }
    }

    const SIX: [&str; 6] = [
        "AvgShedder",
        "ThresholdShedder",
        "OverloadShedder",
        "UniformLoadShedder",
        "TransferShedder",
        "BandShedder",
    ];

    fn decode(png: &[u8]) -> (u32, u32, Vec<u8>) {
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let frame = reader.next_frame(&mut buf).unwrap();
        assert_eq!(frame.color_type, png::ColorType::Rgb);
        buf.truncate(frame.buffer_size());
        (frame.width, frame.height, buf)
    }

    fn svg_size(svg: &str) -> (u32, u32) {
        let attr = |name: &str| -> u32 {
            let at = svg.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            svg[at..].split('"').next().unwrap().parse().unwrap()
        };
        (attr("width"), attr("height"))
    }

    #[test]
    fn charts_of_six_strategies_as_svg_and_png() {
        let runs: Vec<RunResult> = SIX
            .iter()
            .enumerate()
            .map(|(k, s)| run(s, 10, &[1.0, 1.0, 2.0, 30.0 + k as f64]))
            .collect();
        let runs: Vec<&RunResult> = runs.iter().collect();
        let info = info(60.0);
        for (svg, png) in [
            (
                scores_svg(&info, &runs).unwrap(),
                scores_png(&info, &runs).unwrap(),
            ),
            (
                moves_svg(&info, &runs).unwrap(),
                moves_png(&info, &runs).unwrap(),
            ),
        ] {
            assert!(svg.starts_with("<svg "), "{}", &svg[..80]);
            assert!(svg.contains(r#"xmlns="http://www.w3.org/2000/svg""#));
            assert!(svg.contains("<title>test: "));
            assert!(svg.trim_end().ends_with("</svg>"));
            assert!(svg.contains("<polyline"));
            for s in SIX {
                assert!(
                    svg.contains(&format!(">\n{s}")) || svg.contains(&format!(">{s}")),
                    "{s}"
                );
            }
            let (w, h) = svg_size(&svg);
            let (pw, ph, rgb) = decode(&png);
            assert_eq!(
                (pw, ph),
                ((w as f64 * PNG_SCALE) as u32, (h as f64 * PNG_SCALE) as u32)
            );
            // Dark ink (text) in the title band, none outside the image's white margin at the top.
            let dark = |x0: u32, y0: u32, x1: u32, y1: u32| {
                (y0..y1)
                    .flat_map(|y| (x0..x1).map(move |x| (x, y)))
                    .filter(|(x, y)| {
                        let i = (*y * pw + *x) as usize * 3;
                        rgb[i..i + 3].iter().all(|c| *c < 80)
                    })
                    .count()
            };
            assert!(dark(0, 0, pw, (TITLE_H * PNG_SCALE) as u32) > 1000);
            assert_eq!(dark(0, 0, pw, 4), 0);
        }
        // One panel per strategy, each with its axes, the threshold in the legend, every broker named.
        let svg = scores_svg(&info, &runs).unwrap();
        assert_eq!(svg.matches("score (%)").count(), 6);
        assert!(svg.contains("placement: BandShedderPlacement"));
        assert!(svg.contains("overload threshold (85)"));
        for b in 1..=10 {
            assert!(svg.contains(&format!("broker-{b:02}:8080")));
        }
        assert_eq!(
            svg_size(&svg),
            Scores {
                info: &info,
                runs: &runs
            }
            .size()
        );
        // The moves chart labels each line with its total.
        let svg = moves_svg(&info, &runs).unwrap();
        assert!(svg.contains("BandShedder (4)"));
    }

    #[test]
    fn many_strategies_and_brokers_keep_distinct_styles() {
        let names: Vec<String> = (0..8).map(|k| format!("Strategy{k}")).collect();
        let runs: Vec<RunResult> = names.iter().map(|s| run(s, 25, &[5.0])).collect();
        let runs: Vec<&RunResult> = runs.iter().collect();
        let info = info(60.0);
        let scores = Scores {
            info: &info,
            runs: &runs,
        };
        assert_eq!(scores.grid().0, 3);
        assert_eq!(scores.grid().1, 3);
        let svg = scores_svg(&info, &runs).unwrap();
        assert!(svg.contains("25 brokers in all"));
        assert!(svg.contains("broker-20:8080"));
        assert!(!svg.contains("broker-21:8080"));
        let moves = moves_svg(&info, &runs).unwrap();
        for n in &names {
            assert!(moves.contains(n.as_str()), "{n}");
        }
        // Styles: 10 broker colours then dashed, 7 strategy colours then dashed.
        let key = |l: Line| (l.color, l.dashed);
        let brokers: Vec<_> = (0..20).map(|b| key(broker_line(b))).collect();
        let strategies: Vec<_> = (0..14).map(|k| key(strategy_line(k))).collect();
        for styles in [brokers, strategies] {
            for (i, a) in styles.iter().enumerate() {
                assert!(!styles[i + 1..].contains(a), "style {i} repeats");
            }
        }
    }

    #[test]
    fn text_is_drawn_with_the_embedded_font_where_it_is_measured() {
        let faces = faces().unwrap();
        // Every character of the charts' fixed labels has a glyph (no missing-glyph boxes).
        for text in [
            "every broker's score (weighted max usage, %) over time, one panel per strategy",
            "cumulative shedding moves, one line per strategy 0123456789",
            "placement: moves, splits minutes score (%) moves so far overload threshold (85)",
            "shedding moves at that time (taller: more moves) ABCDEFGHIJKLMNOPQRSTUVWXYZ_-/:.",
        ] {
            for c in text.chars() {
                assert_ne!(faces.regular.glyph_id(c).0, 0, "{c:?}");
                assert_ne!(faces.bold.glyph_id(c).0, 0, "{c:?}");
            }
        }
        let (w, h) = (400u32, 60u32);
        let mut rgb = vec![255u8; (w * h * 3) as usize];
        let style = Scale(2.0).text(10.5, INK, HPos::Right, VPos::Center);
        let text = "ThresholdShedder (1064)";
        let width;
        {
            let root = Fonted {
                inner: BitMapBackend::with_buffer(&mut rgb, (w, h)),
                faces,
                glyphs: true,
            }
            .into_drawing_area();
            width = root.estimate_text_size(text, &style).unwrap().0 as i32;
            root.draw(&Text::new(text, (380, 30), style.clone()))
                .unwrap();
            root.present().unwrap();
        }
        let inked: Vec<(i32, i32)> = (0..h as i32)
            .flat_map(|y| (0..w as i32).map(move |x| (x, y)))
            .filter(|(x, y)| rgb[((*y as u32 * w + *x as u32) * 3) as usize] < 128)
            .collect();
        let (x0, x1) = (
            inked.iter().map(|p| p.0).min().unwrap(),
            inked.iter().map(|p| p.0).max().unwrap(),
        );
        let (y0, y1) = (
            inked.iter().map(|p| p.1).min().unwrap(),
            inked.iter().map(|p| p.1).max().unwrap(),
        );
        // Right-aligned at x = 380 and as wide as measured (side bearings are a pixel or two).
        assert!((376..=380).contains(&x1), "{x1}");
        assert!((x0 - (380 - width)).abs() <= 4, "{x0} vs {}", 380 - width);
        // Centred as SVG centres (baseline half an x-height below y = 30; em 21 px): capitals and
        // parentheses reach from about 20 to 40.
        assert!(
            (17..=23).contains(&y0) && (36..=42).contains(&y1),
            "{y0}..{y1}"
        );
        // Anti-aliased glyphs, not blocks: intermediate greys exist.
        assert!(rgb.chunks(3).any(|p| p[0] > 40 && p[0] < 200));
    }

    #[test]
    fn simplify_keeps_the_shape() {
        let pts = vec![
            (0, 5),
            (1, 5),
            (1, 5),
            (2, 5),
            (3, 5),
            (3, 9),
            (3, 2),
            (3, 4),
            (4, 4),
        ];
        // The horizontal run collapses; the vertical excursion to 2 stays.
        assert_eq!(
            simplify(pts),
            vec![(0, 5), (3, 5), (3, 9), (3, 2), (3, 4), (4, 4)]
        );
        assert_eq!(simplify(vec![(0, 0), (1, 1), (2, 2)]).len(), 3);
        assert!(simplify(Vec::new()).is_empty());
    }

    #[test]
    fn labels_spread_apart_in_bounds_and_order() {
        let placed = spread(&[100.0, 101.0, 50.0, 102.0], 16.0, 0.0, 200.0);
        let mut sorted = placed.clone();
        sorted.sort_by(f64::total_cmp);
        for w in sorted.windows(2) {
            assert!(w[1] - w[0] >= 16.0 - 1e-9, "{placed:?}");
        }
        assert_eq!(placed[2], 50.0);
        assert!(placed[0] < placed[1] && placed[1] < placed[3]);
        // Pushed back up from the bottom.
        let placed = spread(&[199.0, 200.0], 16.0, 0.0, 200.0);
        assert_eq!(placed, vec![184.0, 200.0]);
    }

    #[test]
    fn axis_steps() {
        assert_eq!(tick_step(60.0), 10.0);
        assert_eq!(tick_step(120.0), 15.0);
        assert_eq!(tick_step(1440.0), 240.0);
        assert_eq!(count_step(1064.0), 200.0);
        assert_eq!(count_step(8.0), 2.0);
        assert_eq!(count_step(1.0), 1.0);
        assert_eq!(
            Ticked::new(100.0, 25.0).ticks,
            vec![0.0, 25.0, 50.0, 75.0, 100.0]
        );
    }
}
