//! Plots, drawn once and rendered twice: SVG (for the HTML report and for editing) and PNG (for
//! documents and chat), from the same drawing code so the two never disagree. Text is drawn with the
//! DejaVu Sans font compiled into the binary, so a PNG looks the same on a server with no fonts
//! installed. Every figure carries a title, axes with units, a legend where there is more than one
//! series, and a footer naming the path and the date, so it can be read by someone who did not run it.

mod latency;
mod run;
mod sweep;
mod transactions;

pub use latency::{discipline_figures, latency_figures};
pub use run::{run_figures, runs_cdf};
pub use sweep::sweep_figures;

use plotters::coord::Shift;
use plotters::prelude::*;
use std::error::Error;
use std::sync::Once;

/// Why a figure could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// Drawing failed.
    #[error("drawing {figure}: {detail}")]
    Draw {
        /// The figure's name.
        figure: String,
        /// Plotters' reason.
        detail: String,
    },
    /// Encoding the drawing as PNG failed.
    #[error("encoding {figure} as PNG: {detail}")]
    Png {
        /// The figure's name.
        figure: String,
        /// The encoder's reason.
        detail: String,
    },
}

/// One figure in both formats.
#[derive(Debug, Clone)]
pub struct Figure {
    /// File stem, e.g. `sweep-3-throughput-vs-window-send`.
    pub name: String,
    /// The caption, as the HTML page shows it.
    pub title: String,
    /// The figure as SVG text.
    pub svg: String,
    /// The figure as PNG bytes.
    pub png: Vec<u8>,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

pub(crate) type DrawResult = Result<(), Box<dyn Error>>;

pub(crate) const FONT: &str = "sans-serif";

/// A chart's legend in the figures' style (a pale box, a thin border) at `pos`, its text `size` px.
pub(crate) fn legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
    size: u32,
) -> DrawResult
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font((FONT, size))
        .draw()?;
    Ok(())
}

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are DejaVu Sans, a valid font: registering cannot fail.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// Something that can draw itself on any backend (a closure cannot: it is one function, of one type).
pub(crate) trait Draw {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static;
}

/// Draws `d` on a white canvas of `width` × `height` into SVG and PNG.
pub(crate) fn render<D: Draw>(
    name: String,
    title: String,
    (width, height): (u32, u32),
    d: &D,
) -> Result<Figure, PlotError> {
    register_fonts();
    let fail = |detail: String| PlotError::Draw {
        figure: name.clone(),
        detail,
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
        d.draw(&root).map_err(|e| fail(e.to_string()))?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
        d.draw(&root).map_err(|e| fail(e.to_string()))?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    let img = image::RgbImage::from_raw(width, height, rgb).ok_or_else(|| fail("buffer size".into()))?;
    let mut png = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|e| PlotError::Png {
            figure: name.clone(),
            detail: e.to_string(),
        })?;
    Ok(Figure {
        name,
        title,
        svg,
        png,
        width,
        height,
    })
}

/// The footer line under a figure: where and when.
pub(crate) fn footer<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, text: &str) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let (_, h) = root.dim_in_pixel();
    root.draw(&Text::new(
        text.to_string(),
        (12, h as i32 - 22),
        (FONT, 13).into_font().color(&RGBColor(90, 90, 90)),
    ))?;
    Ok(())
}

/// A distinct colour for series `i`.
pub(crate) fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    C[i % C.len()]
}
