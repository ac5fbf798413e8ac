//! `text_to_chart`: a small chart spec in (bar, line or pie; labels; series), an SVG file
//! under the memory root out (`charts/<kind>-<hash>.svg`), with its path and a one-line
//! summary as the result. Every text is escaped; the file is written through the memory
//! store, so it stays under the root.

use crate::store::MemoryStore;
use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt::Write as _;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 400.0;
const MARGIN: f64 = 48.0;
const COLORS: &[&str] = &["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"];

#[derive(Deserialize)]
struct Spec {
    kind: Kind,
    #[serde(default)]
    title: String,
    labels: Vec<String>,
    series: Vec<Series>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Bar,
    Line,
    Pie,
}

#[derive(Deserialize)]
struct Series {
    name: String,
    values: Vec<f64>,
}

/// Writes the chart `input` describes; the file's path under the memory root and a summary.
pub async fn write(memory: &MemoryStore, input: &Value) -> Result<Value, super::Failure> {
    let invalid = |why: String| (why, "invalid_input");
    let spec: Spec = serde_json::from_value(input.clone()).map_err(|e| invalid(e.to_string()))?;
    for series in &spec.series {
        if series.values.len() != spec.labels.len() {
            let (name, n, labels) = (&series.name, series.values.len(), spec.labels.len());
            return Err(invalid(format!("series `{name}` has {n} values for {labels} labels")));
        }
        if series.values.iter().any(|v| !v.is_finite()) {
            return Err(invalid(format!("series `{}` has a value that is not a finite number", series.name)));
        }
    }
    if spec.kind == Kind::Pie && (spec.series.len() != 1 || spec.series[0].values.iter().any(|v| *v < 0.0)) {
        return Err(invalid("a pie takes one series of values that are not negative".into()));
    }
    let svg = render(&spec);
    let name = match spec.kind {
        Kind::Bar => "bar",
        Kind::Line => "line",
        Kind::Pie => "pie",
    };
    let hash = fnv_hash(&svg);
    let path = format!("charts/{name}-{hash}.svg");
    memory.write(&path, &svg, false).await.map_err(|e| (format!("cannot write {path}: {e}"), "io"))?;
    let summary = format!(
        "{name} chart{} of {} series over {} labels",
        if spec.title.is_empty() { String::new() } else { format!(" \"{}\"", spec.title) },
        spec.series.len(),
        spec.labels.len()
    );
    Ok(json!({"path": path, "summary": summary}))
}

/// A short, stable name for the file's content (FNV-1a, 64 bits).
fn fnv_hash(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&apos;")
}

fn render(spec: &Spec) -> String {
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    if !spec.title.is_empty() {
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">{}</text>",
            WIDTH / 2.0,
            escape(&spec.title)
        );
    }
    match spec.kind {
        Kind::Pie => pie(&mut svg, spec),
        kind => axes(&mut svg, spec, kind),
    }
    for (i, series) in spec.series.iter().enumerate() {
        let (x, y) = (MARGIN + i as f64 * 120.0, HEIGHT - 12.0);
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(svg, "<rect x=\"{x}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{color}\"/>", y - 9.0);
        let _ = writeln!(svg, "<text x=\"{}\" y=\"{y}\">{}</text>", x + 14.0, escape(&series.name));
    }
    svg.push_str("</svg>\n");
    svg
}

fn axes(svg: &mut String, spec: &Spec, kind: Kind) {
    let values = spec.series.iter().flat_map(|s| s.values.iter().copied());
    let (low, high) = values.fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let span = if high - low == 0.0 { 1.0 } else { high - low };
    let (left, right, top, bottom) = (MARGIN, WIDTH - MARGIN / 2.0, MARGIN, HEIGHT - MARGIN);
    let y = |v: f64| bottom - (v - low) / span * (bottom - top);
    let _ = writeln!(svg, "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"black\"/>");
    let zero = y(0.0);
    let _ = writeln!(svg, "<line x1=\"{left}\" y1=\"{zero:.1}\" x2=\"{right}\" y2=\"{zero:.1}\" stroke=\"black\"/>");
    let _ = writeln!(svg, "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{high}</text>", left - 4.0, top + 4.0);
    let _ = writeln!(svg, "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{low}</text>", left - 4.0, bottom);
    let slot = (right - left) / spec.labels.len() as f64;
    for (i, label) in spec.labels.iter().enumerate() {
        let x = left + slot * (i as f64 + 0.5);
        let _ =
            writeln!(svg, "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>", bottom + 16.0, escape(label));
    }
    let n = spec.series.len() as f64;
    for (s, series) in spec.series.iter().enumerate() {
        let color = COLORS[s % COLORS.len()];
        if kind == Kind::Bar {
            let width = slot * 0.8 / n;
            for (i, v) in series.values.iter().enumerate() {
                let x = left + slot * i as f64 + slot * 0.1 + width * s as f64;
                let (top, height) = (y(*v).min(zero), (y(*v) - zero).abs());
                let _ = writeln!(
                    svg,
                    "<rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"{width:.1}\" height=\"{height:.1}\" fill=\"{color}\"/>"
                );
            }
        } else {
            let points: Vec<String> = series
                .values
                .iter()
                .enumerate()
                .map(|(i, v)| format!("{:.1},{:.1}", left + slot * (i as f64 + 0.5), y(*v)))
                .collect();
            let _ = writeln!(
                svg,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
                points.join(" ")
            );
        }
    }
}

fn pie(svg: &mut String, spec: &Spec) {
    let values = &spec.series[0].values;
    let total: f64 = values.iter().sum();
    let (cx, cy, r) = (WIDTH / 2.0, HEIGHT / 2.0 + 8.0, HEIGHT / 2.0 - MARGIN);
    if total <= 0.0 {
        let _ = writeln!(svg, "<circle cx=\"{cx}\" cy=\"{cy}\" r=\"{r}\" fill=\"none\" stroke=\"black\"/>");
        return;
    }
    let mut angle = -std::f64::consts::FRAC_PI_2;
    for (i, (value, label)) in values.iter().zip(&spec.labels).enumerate() {
        let sweep = value / total * std::f64::consts::TAU;
        let color = COLORS[i % COLORS.len()];
        if sweep >= std::f64::consts::TAU - 1e-9 {
            let _ = writeln!(svg, "<circle cx=\"{cx}\" cy=\"{cy}\" r=\"{r}\" fill=\"{color}\"/>");
        } else if sweep > 0.0 {
            let (x1, y1) = (cx + r * angle.cos(), cy + r * angle.sin());
            let (x2, y2) = (cx + r * (angle + sweep).cos(), cy + r * (angle + sweep).sin());
            let large = i32::from(sweep > std::f64::consts::PI);
            let _ = writeln!(
                svg,
                "<path d=\"M{cx},{cy} L{x1:.1},{y1:.1} A{r},{r} 0 {large} 1 {x2:.1},{y2:.1} Z\" fill=\"{color}\"/>"
            );
        }
        let middle = angle + sweep / 2.0;
        let (lx, ly) = (cx + (r + 14.0) * middle.cos(), cy + (r + 14.0) * middle.sin());
        let _ = writeln!(svg, "<text x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"middle\">{}</text>", escape(label));
        angle += sweep;
    }
}
