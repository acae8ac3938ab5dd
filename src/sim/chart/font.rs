//! Text for the charts without an installed font: Noto Sans (regular and bold, Apache-2.0) compiled in by
//! the `ttf-noto-sans` crate, laid out and rasterised by `ab_glyph`, behind a thin plotters backend layer.

use std::sync::OnceLock;

use ab_glyph::{point, Font, FontRef, PxScale, ScaleFont};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind, FontTransform,
};

use super::super::SimError;

/// The embedded faces.
#[derive(Debug)]
pub(super) struct Faces {
    pub(super) regular: FontRef<'static>,
    pub(super) bold: FontRef<'static>,
}

pub(super) fn faces() -> Result<&'static Faces, SimError> {
    static FACES: OnceLock<Option<Faces>> = OnceLock::new();
    FACES
        .get_or_init(|| {
            Some(Faces {
                regular: FontRef::try_from_slice(ttf_noto_sans::REGULAR).ok()?,
                bold: FontRef::try_from_slice(ttf_noto_sans::BOLD).ok()?,
            })
        })
        .as_ref()
        .ok_or_else(|| SimError::Chart("the embedded font does not load".to_owned()))
}

/// A line of text laid out in one face: glyphs on a baseline at y = 0 starting at x = 0.
struct Laid<'f> {
    font: &'f FontRef<'static>,
    glyphs: Vec<ab_glyph::Glyph>,
    width: f32,
    em: f32,
}

impl Faces {
    fn lay_out<S: BackendTextStyle>(&self, text: &str, style: &S) -> Laid<'_> {
        let font = match style.style() {
            plotters_backend::FontStyle::Bold => &self.bold,
            _ => &self.regular,
        };
        // The em of plotters-svg's `font-size` for this style, so that PNG and SVG text are the same size.
        let em = (style.size() / 1.24) as f32;
        let scale =
            PxScale::from(em * font.height_unscaled() / font.units_per_em().unwrap_or(1000.0));
        let scaled = font.as_scaled(scale);
        let mut glyphs = Vec::with_capacity(text.len());
        let mut pen = 0.0;
        let mut prev = None;
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                pen += scaled.kern(p, id);
            }
            glyphs.push(id.with_scale_and_position(scale, point(pen, 0.0)));
            pen += scaled.h_advance(id);
            prev = Some(id);
        }
        Laid {
            font,
            glyphs,
            width: pen,
            em,
        }
    }
}

impl Laid<'_> {
    /// The x-height, for centring text vertically as an SVG viewer does (`dy="0.5ex"`).
    fn ex(&self) -> f32 {
        let x = self.font.glyph_id('x');
        self.font.outline(x).map_or(0.5 * self.em, |o| {
            (o.bounds.max.y - o.bounds.min.y).abs() / self.font.units_per_em().unwrap_or(1000.0)
                * self.em
        })
    }
}

/// A plotters backend whose text is measured with the embedded font and, when `glyphs` is set, drawn with
/// it (glyph by glyph through `draw_pixel`, anchored as plotters-svg anchors text); everything else is
/// passed through. The SVG backend keeps drawing text as `<text>`; the bitmap backend gets real glyphs.
/// (plotters 0.3.7's own `ab_glyph` text path drops each glyph's side bearing, which spaces letters unevenly.)
pub(super) struct Fonted<B> {
    pub(super) inner: B,
    pub(super) faces: &'static Faces,
    pub(super) glyphs: bool,
}

impl<B: DrawingBackend> DrawingBackend for Fonted<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<B::ErrorType>> {
        let laid = self.faces.lay_out(text, style);
        Ok((laid.width.ceil() as u32, laid.em.ceil() as u32))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        if !self.glyphs {
            return self.inner.draw_text(text, style, pos);
        }
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let laid = self.faces.lay_out(text, style);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Center => -laid.width / 2.0,
            HPos::Right => -laid.width,
        };
        // plotters-svg's `dy` for each vertical anchor.
        let baseline = match style.anchor().v_pos {
            VPos::Top => 0.76 * laid.em,
            VPos::Center => 0.5 * laid.ex(),
            VPos::Bottom => -0.5 * laid.ex(),
        };
        let turn: FontTransform = style.transform();
        let mut result = Ok(());
        for mut glyph in laid.glyphs {
            glyph.position.x += dx;
            glyph.position.y += baseline;
            let Some(outline) = laid.font.outline_glyph(glyph) else {
                continue;
            };
            let corner = outline.px_bounds().min;
            outline.draw(|x, y, coverage| {
                if result.is_err() || coverage <= 0.0 {
                    return;
                }
                let (x, y) = turn.transform(corner.x as i32 + x as i32, corner.y as i32 + y as i32);
                result = self.inner.draw_pixel(
                    (pos.0 + x, pos.1 + y),
                    BackendColor {
                        alpha: color.alpha * coverage.min(1.0) as f64,
                        rgb: color.rgb,
                    },
                );
            });
        }
        result
    }
}
