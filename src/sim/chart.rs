//! Charts drawn once against a tiny drawing interface ([`Draw`]) with two backends: SVG text ([`Svg`]) and
//! a raster written as PNG ([`Raster`]). Neither needs a font installed: SVG text is rendered by the viewer,
//! and the raster uses a built-in 3×5 pixel font (upper case, digits, common punctuation). The PNG encoder is
//! hand-written: palette colours, the `Up` row filter and a fixed-Huffman deflate stream with run-length
//! matches, CRC-32 from `crc32fast`.

use std::fmt::Write as _;

use super::engine::RunResult;
use super::metrics::OVERLOADED_SCORE;
use super::suite::ScenarioInfo;

/// Fixed colours (indices into [`COLORS`]).
pub mod ink {
    /// White background.
    pub const WHITE: u8 = 0;
    /// Text and marks.
    pub const BLACK: u8 = 1;
    /// Grid lines.
    pub const GRID: u8 = 2;
    /// Frames and ticks.
    pub const FRAME: u8 = 3;
    /// Panel background.
    pub const PANEL: u8 = 4;
    /// Overload threshold.
    pub const RED: u8 = 5;
    /// Secondary text.
    pub const MUTED: u8 = 6;
    /// First series colour; series `k` uses `SERIES + k % 10`.
    pub const SERIES: u8 = 7;
}

/// The palette: RGB of every colour index.
pub const COLORS: [[u8; 3]; 17] = [
    [0xff, 0xff, 0xff],
    [0x22, 0x22, 0x22],
    [0xe0, 0xe0, 0xe0],
    [0x99, 0x99, 0x99],
    [0xfa, 0xfa, 0xfa],
    [0xd6, 0x27, 0x28],
    [0x55, 0x55, 0x55],
    [0x1f, 0x77, 0xb4],
    [0xff, 0x7f, 0x0e],
    [0x2c, 0xa0, 0x2c],
    [0xd6, 0x27, 0x28],
    [0x94, 0x67, 0xbd],
    [0x8c, 0x56, 0x4b],
    [0xe3, 0x77, 0xc2],
    [0x7f, 0x7f, 0x7f],
    [0xbc, 0xbd, 0x22],
    [0x17, 0xbe, 0xcf],
];

fn series(k: usize) -> u8 {
    ink::SERIES + (k % 10) as u8
}

/// Text alignment on the anchor point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// Text starts at x.
    Start,
    /// Text is centred on x.
    Middle,
    /// Text ends at x.
    End,
}

/// What a chart needs from a backend. Coordinates are in SVG pixels; `y` of text is its baseline.
pub trait Draw {
    /// A filled rectangle, optionally framed.
    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: u8, frame: Option<u8>);
    /// A straight line.
    fn line(&mut self, a: (f64, f64), b: (f64, f64), color: u8, width: f64, dashed: bool);
    /// Connected segments.
    fn polyline(&mut self, points: &[(f64, f64)], color: u8, width: f64);
    /// A label; `title` is larger and bold.
    fn text(&mut self, x: f64, y: f64, text: &str, anchor: Anchor, color: u8, title: bool);
}

fn hex(c: u8) -> String {
    let [r, g, b] = COLORS[c as usize];
    format!("#{r:02x}{g:02x}{b:02x}")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// SVG backend.
#[derive(Debug)]
pub struct Svg {
    out: String,
}

impl Svg {
    /// A document of `w` × `h` pixels with a `<title>`.
    pub fn new(w: f64, h: f64, title: &str) -> Self {
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(
            out,
            r#"<title>{}</title><rect width="100%" height="100%" fill="white"/>"#,
            esc(title)
        );
        Self { out }
    }

    /// The finished document.
    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

impl Draw for Svg {
    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: u8, frame: Option<u8>) {
        let stroke = frame.map_or(String::new(), |f| format!(r#" stroke="{}""#, hex(f)));
        let _ = writeln!(
            self.out,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{}"{stroke}/>"#,
            hex(fill)
        );
    }

    fn line(&mut self, a: (f64, f64), b: (f64, f64), color: u8, width: f64, dashed: bool) {
        let dash = if dashed {
            r#" stroke-dasharray="4 3""#
        } else {
            ""
        };
        let _ = writeln!(
            self.out,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="{width}"{dash}/>"#,
            a.0,
            a.1,
            b.0,
            b.1,
            hex(color)
        );
    }

    fn polyline(&mut self, points: &[(f64, f64)], color: u8, width: f64) {
        if points.len() < 2 {
            return;
        }
        let mut p = String::with_capacity(points.len() * 12);
        for (x, y) in points {
            let _ = write!(p, "{x:.1},{y:.1} ");
        }
        let _ = writeln!(
            self.out,
            r#"<polyline fill="none" stroke="{}" stroke-width="{width}" stroke-opacity="0.9" points="{}"/>"#,
            hex(color),
            p.trim_end()
        );
    }

    fn text(&mut self, x: f64, y: f64, text: &str, anchor: Anchor, color: u8, title: bool) {
        let a = match anchor {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        };
        let style = if title {
            r#" font-size="14" font-weight="bold""#
        } else {
            ""
        };
        let _ = writeln!(
            self.out,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{a}" fill="{}"{style}>{}</text>"#,
            hex(color),
            esc(text)
        );
    }
}

/// 3×5 glyphs: five rows of three bits, most significant bit on the left.
fn glyph(c: char) -> [u8; 5] {
    const fn g(rows: [&str; 5]) -> [u8; 5] {
        let mut out = [0u8; 5];
        let mut i = 0;
        while i < 5 {
            let b = rows[i].as_bytes();
            out[i] =
                ((b[0] == b'#') as u8) << 2 | ((b[1] == b'#') as u8) << 1 | (b[2] == b'#') as u8;
            i += 1;
        }
        out
    }
    match c.to_ascii_uppercase() {
        'A' => g([".#.", "#.#", "###", "#.#", "#.#"]),
        'B' => g(["##.", "#.#", "##.", "#.#", "##."]),
        'C' => g([".##", "#..", "#..", "#..", ".##"]),
        'D' => g(["##.", "#.#", "#.#", "#.#", "##."]),
        'E' => g(["###", "#..", "##.", "#..", "###"]),
        'F' => g(["###", "#..", "##.", "#..", "#.."]),
        'G' => g([".##", "#..", "#.#", "#.#", ".##"]),
        'H' => g(["#.#", "#.#", "###", "#.#", "#.#"]),
        'I' => g(["###", ".#.", ".#.", ".#.", "###"]),
        'J' => g(["..#", "..#", "..#", "#.#", ".#."]),
        'K' => g(["#.#", "#.#", "##.", "#.#", "#.#"]),
        'L' => g(["#..", "#..", "#..", "#..", "###"]),
        'M' => g(["#.#", "###", "###", "#.#", "#.#"]),
        'N' => g(["##.", "#.#", "#.#", "#.#", "#.#"]),
        'O' => g([".#.", "#.#", "#.#", "#.#", ".#."]),
        'P' => g(["##.", "#.#", "##.", "#..", "#.."]),
        'Q' => g([".#.", "#.#", "#.#", "##.", ".##"]),
        'R' => g(["##.", "#.#", "##.", "#.#", "#.#"]),
        'S' => g([".##", "#..", ".#.", "..#", "##."]),
        'T' => g(["###", ".#.", ".#.", ".#.", ".#."]),
        'U' => g(["#.#", "#.#", "#.#", "#.#", "###"]),
        'V' => g(["#.#", "#.#", "#.#", "#.#", ".#."]),
        'W' => g(["#.#", "#.#", "#.#", "###", "#.#"]),
        'X' => g(["#.#", "#.#", ".#.", "#.#", "#.#"]),
        'Y' => g(["#.#", "#.#", ".#.", ".#.", ".#."]),
        'Z' => g(["###", "..#", ".#.", "#..", "###"]),
        '0' => g(["###", "#.#", "#.#", "#.#", "###"]),
        '1' => g([".#.", "##.", ".#.", ".#.", "###"]),
        '2' => g(["##.", "..#", ".#.", "#..", "###"]),
        '3' => g(["##.", "..#", ".#.", "..#", "##."]),
        '4' => g(["#.#", "#.#", "###", "..#", "..#"]),
        '5' => g(["###", "#..", "##.", "..#", "##."]),
        '6' => g([".##", "#..", "###", "#.#", "###"]),
        '7' => g(["###", "..#", ".#.", ".#.", ".#."]),
        '8' => g(["###", "#.#", "###", "#.#", "###"]),
        '9' => g(["###", "#.#", "###", "..#", "##."]),
        ' ' => [0; 5],
        '/' => g(["..#", "..#", ".#.", "#..", "#.."]),
        '-' => g(["...", "...", "###", "...", "..."]),
        '.' => g(["...", "...", "...", "...", ".#."]),
        ',' => g(["...", "...", "...", ".#.", "#.."]),
        ':' => g(["...", ".#.", "...", ".#.", "..."]),
        '(' => g([".#.", "#..", "#..", "#..", ".#."]),
        ')' => g([".#.", "..#", "..#", "..#", ".#."]),
        '%' => g(["#.#", "..#", ".#.", "#..", "#.#"]),
        '_' => g(["...", "...", "...", "...", "###"]),
        '+' => g(["...", ".#.", "###", ".#.", "..."]),
        '=' => g(["...", "###", "...", "###", "..."]),
        '<' => g(["..#", ".#.", "#..", ".#.", "..#"]),
        '>' => g(["#..", ".#.", "..#", ".#.", "#.."]),
        '*' => g(["#.#", ".#.", "#.#", "...", "..."]),
        '\'' => g([".#.", ".#.", "...", "...", "..."]),
        '…' => g(["...", "...", "...", "...", "#.#"]),
        _ => g(["##.", "..#", ".#.", "...", ".#."]),
    }
}

/// Raster backend: palette indices at `scale` device pixels per SVG pixel.
#[derive(Debug)]
pub struct Raster {
    w: usize,
    h: usize,
    scale: f64,
    px: Vec<u8>,
}

impl Raster {
    /// A white canvas for a `w` × `h` SVG-pixel chart at `scale`.
    pub fn new(w: f64, h: f64, scale: f64) -> Self {
        let (w, h) = ((w * scale).ceil() as usize, (h * scale).ceil() as usize);
        Self {
            w,
            h,
            scale,
            px: vec![ink::WHITE; w * h],
        }
    }

    fn fill(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: u8) {
        for y in y0.max(0)..y1.min(self.h as i64) {
            for x in x0.max(0)..x1.min(self.w as i64) {
                self.px[y as usize * self.w + x as usize] = c;
            }
        }
    }

    fn segment(&mut self, a: (f64, f64), b: (f64, f64), c: u8, width: f64, dashed: bool) {
        let s = self.scale;
        let (mut x0, mut y0) = ((a.0 * s).round() as i64, (a.1 * s).round() as i64);
        let (x1, y1) = ((b.0 * s).round() as i64, (b.1 * s).round() as i64);
        let t = ((width * s).round() as i64).max(1);
        let dx = (x1 - x0).abs();
        let dy = -(y1 - y0).abs();
        let sx = if x0 < x1 { 1 } else { -1 };
        let sy = if y0 < y1 { 1 } else { -1 };
        let mut err = dx + dy;
        let dash = (4.0 * s) as i64;
        let mut step = 0i64;
        loop {
            if !dashed || (step / dash) % 2 == 0 {
                self.fill(x0 - t / 2, y0 - t / 2, x0 - t / 2 + t, y0 - t / 2 + t, c);
            }
            if x0 == x1 && y0 == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x0 += sx;
            }
            if e2 <= dx {
                err += dx;
                y0 += sy;
            }
            step += 1;
        }
    }

    /// The image as PNG bytes.
    pub fn png(&self) -> Vec<u8> {
        encode_png(self.w, self.h, &self.px)
    }
}

impl Draw for Raster {
    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: u8, frame: Option<u8>) {
        let s = self.scale;
        let (x0, y0) = ((x * s).round() as i64, (y * s).round() as i64);
        let (x1, y1) = (((x + w) * s).round() as i64, ((y + h) * s).round() as i64);
        self.fill(x0, y0, x1, y1, fill);
        if let Some(f) = frame {
            for (a, b) in [
                ((x, y), (x + w, y)),
                ((x + w, y), (x + w, y + h)),
                ((x + w, y + h), (x, y + h)),
                ((x, y + h), (x, y)),
            ] {
                self.segment(a, b, f, 1.0, false);
            }
        }
    }

    fn line(&mut self, a: (f64, f64), b: (f64, f64), color: u8, width: f64, dashed: bool) {
        self.segment(a, b, color, width, dashed);
    }

    fn polyline(&mut self, points: &[(f64, f64)], color: u8, width: f64) {
        for w in points.windows(2) {
            self.segment(w[0], w[1], color, width, false);
        }
    }

    fn text(&mut self, x: f64, y: f64, text: &str, anchor: Anchor, color: u8, title: bool) {
        let cell = ((if title { 3.0 } else { 2.0 }) * self.scale / 2.0)
            .round()
            .max(1.0) as i64;
        let advance = 4 * cell;
        let chars: Vec<char> = text.chars().collect();
        let width = chars.len() as i64 * advance - cell;
        let mut x0 = (x * self.scale).round() as i64;
        match anchor {
            Anchor::Start => {}
            Anchor::Middle => x0 -= width / 2,
            Anchor::End => x0 -= width,
        }
        let y0 = (y * self.scale).round() as i64 - 5 * cell;
        for (i, ch) in chars.iter().enumerate() {
            let rows = glyph(*ch);
            for (r, bits) in rows.iter().enumerate() {
                for col in 0..3 {
                    if bits & (4 >> col) != 0 {
                        let gx = x0 + i as i64 * advance + col as i64 * cell;
                        let gy = y0 + r as i64 * cell;
                        if title {
                            self.fill(gx, gy, gx + cell + 1, gy + cell, color);
                        } else {
                            self.fill(gx, gy, gx + cell, gy + cell, color);
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// PNG

struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    /// Appends `len` bits of `v`, least significant first (deflate's bit order for headers and extra bits).
    fn put(&mut self, v: u32, len: u32) {
        self.acc |= (v as u64) << self.n;
        self.n += len;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// Appends a Huffman code, most significant bit first.
    fn code(&mut self, code: u32, len: u32) {
        let mut rev = 0;
        for i in 0..len {
            rev |= ((code >> i) & 1) << (len - 1 - i);
        }
        self.put(rev, len);
    }

    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

fn literal(bits: &mut Bits, v: u32) {
    match v {
        0..=143 => bits.code(0x30 + v, 8),
        144..=255 => bits.code(0x190 + v - 144, 9),
        256..=279 => bits.code(v - 256, 7),
        _ => bits.code(0xc0 + v - 280, 8),
    }
}

/// Length code for 3..=258: (symbol, extra bits, extra value).
fn length_code(len: u32) -> (u32, u32, u32) {
    const BASE: [(u32, u32); 29] = [
        (3, 0),
        (4, 0),
        (5, 0),
        (6, 0),
        (7, 0),
        (8, 0),
        (9, 0),
        (10, 0),
        (11, 1),
        (13, 1),
        (15, 1),
        (17, 1),
        (19, 2),
        (23, 2),
        (27, 2),
        (31, 2),
        (35, 3),
        (43, 3),
        (51, 3),
        (59, 3),
        (67, 4),
        (83, 4),
        (99, 4),
        (115, 4),
        (131, 5),
        (163, 5),
        (195, 5),
        (227, 5),
        (258, 0),
    ];
    let i = BASE.iter().rposition(|(b, _)| *b <= len).expect("len >= 3");
    (257 + i as u32, BASE[i].1, len - BASE[i].0)
}

/// zlib stream of `data`: one fixed-Huffman deflate block with run-length matches (distance 1).
pub fn zlib(data: &[u8]) -> Vec<u8> {
    let mut bits = Bits {
        out: vec![0x78, 0x01],
        acc: 0,
        n: 0,
    };
    bits.put(1, 1);
    bits.put(1, 2);
    let mut i = 0;
    while i < data.len() {
        let b = data[i];
        literal(&mut bits, b as u32);
        let mut run = 0;
        while i + 1 + run < data.len() && data[i + 1 + run] == b && run < 258 {
            run += 1;
        }
        i += 1;
        if run >= 3 {
            let (sym, extra, val) = length_code(run as u32);
            literal(&mut bits, sym);
            bits.put(val, extra);
            bits.code(0, 5);
            i += run;
        }
    }
    literal(&mut bits, 256);
    let mut out = bits.finish();
    let (mut a, mut b) = (1u32, 0u32);
    for x in data {
        a = (a + *x as u32) % 65521;
        b = (b + a) % 65521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(kind);
    h.update(data);
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&h.finalize().to_be_bytes());
}

/// A palette PNG of `w` × `h` indices into [`COLORS`].
pub fn encode_png(w: usize, h: usize, px: &[u8]) -> Vec<u8> {
    let mut raw = Vec::with_capacity((w + 1) * h);
    for y in 0..h {
        raw.push(2); // Up filter: each byte minus the one above.
        for x in 0..w {
            let above = if y > 0 { px[(y - 1) * w + x] } else { 0 };
            raw.push(px[y * w + x].wrapping_sub(above));
        }
    }
    let mut out = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&(w as u32).to_be_bytes());
    ihdr.extend_from_slice(&(h as u32).to_be_bytes());
    ihdr.extend_from_slice(&[8, 3, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    let plte: Vec<u8> = COLORS.iter().flatten().copied().collect();
    chunk(&mut out, b"PLTE", &plte);
    chunk(&mut out, b"IDAT", &zlib(&raw));
    chunk(&mut out, b"IEND", &[]);
    out
}

// ---------------------------------------------------------------------------------------------------------
// Charts

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

/// Size of the scores chart for `runs` panels of `brokers` brokers.
pub fn scores_size(runs: usize, brokers: usize) -> (f64, f64) {
    let cols = runs.clamp(1, 3);
    let rows = runs.div_ceil(cols).max(1);
    let legend = brokers.min(20);
    let legend_h = if legend > 0 {
        18.0 * legend.div_ceil(5) as f64 + 8.0
    } else {
        0.0
    };
    (
        cols as f64 * PANEL_W + 10.0,
        rows as f64 * PANEL_H + 34.0 + legend_h,
    )
}

/// Small multiples: one panel per strategy with the same axes, every broker's score over time, the overload
/// threshold dashed, each shedding move a tick on the time axis, a broker legend below.
pub fn draw_scores(d: &mut dyn Draw, info: &ScenarioInfo, runs: &[&RunResult]) {
    let cols = runs.len().clamp(1, 3);
    let rows = runs.len().div_ceil(cols).max(1);
    let y_max = runs
        .iter()
        .flat_map(|r| r.series.scores.iter().flatten().flatten())
        .fold(100.0f32, |a, b| a.max(*b)) as f64;
    let x_max = info.duration_minutes.max(1.0);
    d.text(
        8.0,
        18.0,
        &format!(
            "{}: every broker's score (weighted max usage, %) over time, one panel per strategy",
            info.name
        ),
        Anchor::Start,
        ink::BLACK,
        true,
    );
    for (k, r) in runs.iter().enumerate() {
        let ox = (k % cols) as f64 * PANEL_W + 5.0;
        let oy = (k / cols) as f64 * PANEL_H + 28.0;
        let pw = PANEL_W - MARGIN_L - 12.0;
        let ph = PANEL_H - MARGIN_T - MARGIN_B;
        let px = |m: f64| ox + MARGIN_L + m / x_max * pw;
        let py = |v: f64| oy + MARGIN_T + ph - v / y_max * ph;
        d.text(
            ox + MARGIN_L,
            oy + 16.0,
            &format!("{} / {}", r.strategy, r.placement),
            Anchor::Start,
            ink::BLACK,
            false,
        );
        d.rect(
            ox + MARGIN_L,
            oy + MARGIN_T,
            pw,
            ph,
            ink::PANEL,
            Some(ink::FRAME),
        );
        for v in [0.0, 25.0, 50.0, 75.0, 100.0] {
            d.line((px(0.0), py(v)), (px(x_max), py(v)), ink::GRID, 1.0, false);
            d.text(
                ox + MARGIN_L - 4.0,
                py(v) + 4.0,
                &format!("{v}"),
                Anchor::End,
                ink::BLACK,
                false,
            );
        }
        let step = tick_step(x_max);
        let mut m = 0.0;
        while m <= x_max + 1e-9 {
            d.line(
                (px(m), py(0.0)),
                (px(m), py(0.0) + 4.0),
                ink::FRAME,
                1.0,
                false,
            );
            d.text(
                px(m),
                py(0.0) + 15.0,
                &format!("{m}"),
                Anchor::Middle,
                ink::BLACK,
                false,
            );
            m += step;
        }
        d.text(
            px(x_max),
            py(0.0) + 26.0,
            "minutes",
            Anchor::End,
            ink::MUTED,
            false,
        );
        d.line(
            (px(0.0), py(OVERLOADED_SCORE)),
            (px(x_max), py(OVERLOADED_SCORE)),
            ink::RED,
            1.0,
            true,
        );
        for (b, scores) in r.series.scores.iter().enumerate() {
            let mut pts: Vec<(f64, f64)> = Vec::new();
            for (i, v) in scores.iter().enumerate() {
                match v {
                    Some(v) => pts.push((px(r.series.minutes[i]), py(*v as f64))),
                    None => {
                        d.polyline(&pts, series(b), 1.0);
                        pts.clear();
                    }
                }
            }
            d.polyline(&pts, series(b), 1.0);
        }
        for m in &r.series.move_minutes {
            d.line(
                (px(*m), py(0.0) - 6.0),
                (px(*m), py(0.0)),
                ink::BLACK,
                1.0,
                false,
            );
        }
        d.text(
            px(x_max) - 3.0,
            oy + MARGIN_T + 12.0,
            &format!("{} moves, {} splits", r.metrics.moves, r.metrics.splits),
            Anchor::End,
            ink::MUTED,
            false,
        );
    }
    if let Some(r) = runs.first() {
        let legend = r.series.brokers.len().min(20);
        let top = rows as f64 * PANEL_H + 30.0;
        for (b, id) in r.series.brokers.iter().take(legend).enumerate() {
            let x = 8.0 + (b % 5) as f64 * 150.0;
            let y = top + 14.0 + (b / 5) as f64 * 18.0;
            d.rect(x, y - 6.0, 14.0, 4.0, series(b), None);
            d.text(x + 18.0, y, id, Anchor::Start, ink::BLACK, false);
        }
        if r.series.brokers.len() > legend {
            d.text(
                8.0,
                top + 14.0 + legend.div_ceil(5) as f64 * 18.0,
                &format!(
                    "... {} brokers in all (colours repeat)",
                    r.series.brokers.len()
                ),
                Anchor::Start,
                ink::BLACK,
                false,
            );
        }
    }
}

/// Size of the moves chart.
pub const MOVES_SIZE: (f64, f64) = (720.0, 300.0);

/// Cumulative shedding moves over time, one line per strategy, with a legend.
pub fn draw_moves(d: &mut dyn Draw, info: &ScenarioInfo, runs: &[&RunResult]) {
    let (w, h) = MOVES_SIZE;
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
    d.text(
        8.0,
        18.0,
        &format!("{}: cumulative shedding moves", info.name),
        Anchor::Start,
        ink::BLACK,
        true,
    );
    d.rect(l, t, pw, ph, ink::PANEL, Some(ink::FRAME));
    let ystep = (y_max / 5.0).ceil().max(1.0);
    let mut v = 0.0;
    while v <= y_max + 1e-9 {
        d.line((l, py(v)), (l + pw, py(v)), ink::GRID, 1.0, false);
        d.text(
            l - 4.0,
            py(v) + 4.0,
            &format!("{v}"),
            Anchor::End,
            ink::BLACK,
            false,
        );
        v += ystep;
    }
    let step = tick_step(x_max);
    let mut m = 0.0;
    while m <= x_max + 1e-9 {
        d.text(
            px(m),
            t + ph + 15.0,
            &format!("{m}"),
            Anchor::Middle,
            ink::BLACK,
            false,
        );
        m += step;
    }
    d.text(
        l + pw,
        t + ph + 28.0,
        "minutes",
        Anchor::End,
        ink::MUTED,
        false,
    );
    for (k, r) in runs.iter().enumerate() {
        let mut pts = vec![(px(0.0), py(0.0))];
        for (i, m) in r.series.move_minutes.iter().enumerate() {
            pts.push((px(*m), py(i as f64)));
            pts.push((px(*m), py(i as f64 + 1.0)));
        }
        pts.push((px(x_max), py(r.series.move_minutes.len() as f64)));
        d.polyline(&pts, series(k), 1.6);
        let y = t + 12.0 + k as f64 * 18.0;
        d.rect(l + pw + 12.0, y - 6.0, 14.0, 4.0, series(k), None);
        d.text(
            l + pw + 30.0,
            y,
            &format!("{} ({})", r.strategy, r.series.move_minutes.len()),
            Anchor::Start,
            ink::BLACK,
            false,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal inflate for fixed-Huffman blocks, to check the encoder round-trips.
    fn inflate_fixed(z: &[u8]) -> Vec<u8> {
        assert_eq!(&z[..2], &[0x78, 0x01]);
        let data = &z[2..z.len() - 4];
        let mut pos = 0usize;
        let bit = |pos: &mut usize| -> u32 {
            let b = (data[*pos / 8] >> (*pos % 8)) & 1;
            *pos += 1;
            b as u32
        };
        let bits = |pos: &mut usize, n: u32| -> u32 {
            let mut v = 0;
            for i in 0..n {
                v |= bit(pos) << i;
            }
            v
        };
        assert_eq!(bits(&mut pos, 1), 1, "final block");
        assert_eq!(bits(&mut pos, 2), 1, "fixed Huffman");
        let mut out: Vec<u8> = Vec::new();
        loop {
            // Read a fixed literal/length code.
            let mut code = 0u32;
            for _ in 0..7 {
                code = code << 1 | bit(&mut pos);
            }
            let sym = if code <= 0x17 {
                256 + code
            } else {
                code = code << 1 | bit(&mut pos);
                if (0x30..=0xbf).contains(&code) {
                    code - 0x30
                } else if (0xc0..=0xc7).contains(&code) {
                    280 + code - 0xc0
                } else {
                    code = code << 1 | bit(&mut pos);
                    144 + code - 0x190
                }
            };
            match sym {
                0..=255 => out.push(sym as u8),
                256 => break,
                _ => {
                    let i = (sym - 257) as usize;
                    let base = [
                        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59,
                        67, 83, 99, 115, 131, 163, 195, 227, 258,
                    ][i];
                    let extra = [
                        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5,
                        5, 5, 5, 0,
                    ][i];
                    let len = base + bits(&mut pos, extra);
                    let mut d = 0;
                    for _ in 0..5 {
                        d = d << 1 | bit(&mut pos);
                    }
                    assert_eq!(d, 0, "distance code 0 = distance 1");
                    for _ in 0..len {
                        let last = *out.last().unwrap();
                        out.push(last);
                    }
                }
            }
        }
        let adler = u32::from_be_bytes(z[z.len() - 4..].try_into().unwrap());
        let (mut a, mut b) = (1u32, 0u32);
        for x in &out {
            a = (a + *x as u32) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!(adler, (b << 16) | a);
        out
    }

    #[test]
    fn deflate_round_trips() {
        let mut data = Vec::new();
        for i in 0..5000u32 {
            data.push((i % 7) as u8);
            data.extend(std::iter::repeat((i % 251) as u8).take((i % 300) as usize));
            data.push(200 + (i % 50) as u8);
        }
        let z = zlib(&data);
        assert!(z.len() < data.len() / 4, "{} vs {}", z.len(), data.len());
        assert_eq!(inflate_fixed(&z), data);
        assert_eq!(inflate_fixed(&zlib(&[])), Vec::<u8>::new());
        for len in 3u32..=258 {
            let (sym, extra, val) = length_code(len);
            assert!((257..=285).contains(&sym), "{len}");
            assert!(val < (1 << extra) || (extra == 0 && val == 0), "{len}");
        }
        assert_eq!(length_code(258), (285, 0, 0));
        assert_eq!(length_code(257), (284, 5, 30));
    }

    #[test]
    fn png_structure_and_text_rendering() {
        let mut r = Raster::new(40.0, 12.0, 2.0);
        r.text(2.0, 10.0, "AVG 85%", Anchor::Start, ink::BLACK, false);
        r.line((0.0, 11.0), (39.0, 11.0), ink::RED, 1.0, true);
        assert!(r.px.contains(&ink::BLACK));
        assert!(r.px.contains(&ink::RED));
        let png = r.png();
        assert_eq!(&png[..8], &[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a]);
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 80);
        assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 24);
        assert!(png.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82]));
        // The IDAT payload inflates back to the filtered rows.
        let idat = png.windows(4).position(|w| w == b"IDAT").unwrap();
        let len = u32::from_be_bytes(png[idat - 4..idat].try_into().unwrap()) as usize;
        let raw = inflate_fixed(&png[idat + 4..idat + 4 + len]);
        assert_eq!(raw.len(), (80 + 1) * 24);
        assert!(raw.chunks(81).all(|row| row[0] == 2));
    }
}
