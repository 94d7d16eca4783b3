//! SVG charts of the benchmark's headline comparisons, drawn from its JSON lines.
//!
//! `cargo xtask bench` keeps what the scenarios printed in `docs/bench/results.ndjson`
//! (the first line says when, on what machine and at which commit) and draws from it:
//! ingest vs load vs Lance's own put (ack latency and acknowledged rows/s by producers),
//! fold rows/s by backlog, and fresh vs snapshot point reads by pending rows.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

use crate::Result;

/// What the results file says of where it was measured.
struct Measured {
    text: String,
}

/// One line of a chart: its name, its colour, and its points.
struct Line {
    name: &'static str,
    color: RGBColor,
    points: Vec<(f64, f64)>,
}

const INGEST: RGBColor = RGBColor(31, 119, 180);
const RAW: RGBColor = RGBColor(44, 160, 44);
const LOAD: RGBColor = RGBColor(214, 39, 40);
const OTHER: RGBColor = RGBColor(148, 103, 189);

/// Draw every chart the results hold into `out`; returns the files written.
pub fn draw(results: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string(results)
        .map_err(|e| format!("cannot read {}: {e}", results.display()))?;
    let records: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let measured = Measured {
        text: records
            .iter()
            .find_map(|r| r.get("measured"))
            .map(|m| {
                format!(
                    "{}, {}, commit {}",
                    m["date"].as_str().unwrap_or("?"),
                    m["machine"].as_str().unwrap_or("?"),
                    m["commit"].as_str().unwrap_or("?")
                )
            })
            .unwrap_or_else(|| "when and where unrecorded".to_owned()),
    };
    let of = |scenario: &str| -> Vec<&Value> {
        records
            .iter()
            .filter(|r| r["scenario"] == scenario)
            .collect()
    };
    let number = |v: &Value| v.as_f64();
    let mut written = Vec::new();

    let ingest = of("ingest_1_row");
    if !ingest.is_empty() {
        let series = |path: &[&str]| -> Vec<(f64, f64)> {
            ingest
                .iter()
                .filter_map(|r| {
                    let mut v = *r;
                    for key in path {
                        v = &v[*key];
                    }
                    Some((number(&r["producers"])?, number(v)?))
                })
                .collect()
        };
        written.extend(chart(
            &out.join("ingest-latency.svg"),
            "Acknowledgement latency of a 1-row write",
            &measured,
            ("producers", "p50 / p99 (ms)"),
            vec![
                line("ingest p50", INGEST, series(&["ingest", "p50_ms"])),
                line("ingest p99", OTHER, series(&["ingest", "p99_ms"])),
                line("Lance put p50", RAW, series(&["raw_put", "p50_ms"])),
                line("load p50 (1 row, 1 writer)", LOAD, {
                    let load = of("load_1_row");
                    series_flat(
                        &series(&["ingest", "p50_ms"]),
                        load.first().and_then(|r| number(&r["p50_ms"])),
                    )
                }),
            ],
        )?);
        written.extend(chart(
            &out.join("ingest-throughput.svg"),
            "Acknowledged rows/s, 1-row writes",
            &measured,
            ("producers", "rows/s"),
            vec![
                line("ingest", INGEST, series(&["ingest", "rows_per_s"])),
                line("Lance put", RAW, series(&["raw_put", "rows_per_s"])),
                line("load", LOAD, series(&["load_rows_per_s"])),
            ],
        )?);
    }

    let fold = of("fold_throughput");
    if !fold.is_empty() {
        let points = fold
            .iter()
            .filter_map(|r| Some((number(&r["pending_rows"])?, number(&r["rows_per_s"])?)))
            .collect();
        written.extend(chart(
            &out.join("fold-throughput.svg"),
            "Fold rows/s by backlog",
            &measured,
            ("pending rows", "rows/s folded"),
            vec![line("fold", INGEST, points)],
        )?);
    }

    let reads = of("fresh_vs_snapshot_reads");
    if !reads.is_empty() {
        // Pending 0 cannot sit on a log axis: it is drawn at 1.
        let series = |key: &str| -> Vec<(f64, f64)> {
            reads
                .iter()
                .filter_map(|r| {
                    let pending = number(&r["pending_rows"])?.max(1.0);
                    Some((pending, number(&r["get_p50_ms"][key])?))
                })
                .collect()
        };
        written.extend(chart(
            &out.join("reads.svg"),
            "Point read p50: snapshot vs fresh",
            &measured,
            ("pending rows (0 drawn at 1)", "p50 (ms)"),
            vec![
                line("snapshot", RAW, series("snapshot")),
                line(
                    "fresh, key in the base",
                    INGEST,
                    series("fresh_key_in_base"),
                ),
                line("fresh, key pending", OTHER, series("fresh_key_pending")),
            ],
        )?);
    }
    Ok(written)
}

fn line(name: &'static str, color: RGBColor, points: Vec<(f64, f64)>) -> Line {
    Line {
        name,
        color,
        points,
    }
}

/// A constant `value` at every x of `like` (a one-writer figure beside many-writer ones).
fn series_flat(like: &[(f64, f64)], value: Option<f64>) -> Vec<(f64, f64)> {
    value.map_or_else(Vec::new, |v| like.iter().map(|&(x, _)| (x, v)).collect())
}

/// A number as an axis label: thousands and millions shortened, small ones to two places.
fn short(v: f64) -> String {
    match v.abs() {
        a if a >= 1e6 => format!("{:.1}M", v / 1e6),
        a if a >= 1e4 => format!("{:.0}k", v / 1e3),
        a if a >= 100.0 || v.fract() == 0.0 => format!("{v:.0}"),
        a if a >= 10.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

/// One chart into `path`: x logarithmic, y logarithmic when it spans more than 20x.
fn chart(
    path: &Path,
    title: &str,
    measured: &Measured,
    (x_desc, y_desc): (&str, &str),
    lines: Vec<Line>,
) -> Result<Option<PathBuf>> {
    let lines: Vec<Line> = lines
        .into_iter()
        .filter(|l| l.points.iter().all(|&(x, y)| x > 0.0 && y > 0.0) && !l.points.is_empty())
        .collect();
    let all = lines.iter().flat_map(|l| l.points.iter());
    let (mut x_min, mut x_max, mut y_min, mut y_max) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in all {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    if lines.is_empty() {
        // Nothing measured for it: the chart stays as it was.
        return Ok(None);
    }
    let failed = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
    let root = SVGBackend::new(path, (760, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    let (top, bottom) = root.split_vertically(420);
    bottom
        .draw_text(
            &format!("measured {}", measured.text),
            &("sans-serif", 12).into_font().color(&BLACK.mix(0.7)),
            (10, 2),
        )
        .map_err(|e| failed(&e))?;
    let mut builder = ChartBuilder::on(&top);
    builder
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    let x_range = (x_min * 0.8..x_max * 1.25).log_scale();
    // A y range within a factor of 20 reads better on a linear axis (a log one labels
    // only its powers of ten).
    macro_rules! plot {
        ($y_range:expr) => {{
            let mut chart = builder
                .build_cartesian_2d(x_range, $y_range)
                .map_err(|e| failed(&e))?;
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .x_label_formatter(&|v| short(*v))
                .y_label_formatter(&|v| short(*v))
                .light_line_style(RGBColor(238, 238, 238))
                .draw()
                .map_err(|e| failed(&e))?;
            for l in &lines {
                let color = l.color;
                chart
                    .draw_series(LineSeries::new(l.points.clone(), color.stroke_width(2)))
                    .map_err(|e| failed(&e))?
                    .label(l.name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(l.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| failed(&e))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .draw()
                .map_err(|e| failed(&e))?;
        }};
    }
    if y_max / y_min < 20.0 {
        plot!(0.0..y_max * 1.15);
    } else {
        plot!((y_min * 0.7..y_max * 1.5).log_scale());
    }
    root.present().map_err(|e| failed(&e))?;
    Ok(Some(path.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::draw;

    #[test]
    fn every_headline_chart_is_drawn_from_the_results() {
        let dir = std::env::temp_dir().join(format!("xtask-charts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let results = dir.join("results.ndjson");
        std::fs::write(
            &results,
            concat!(
                r#"{"measured":{"date":"2026-12-06","machine":"2 cores","commit":"abc"}}"#, "\n",
                r#"{"scenario":"load_1_row","p50_ms":20.0,"rows_per_s":45.0}"#, "\n",
                r#"{"scenario":"ingest_1_row","producers":1,"ingest":{"p50_ms":1.0,"p99_ms":2.0,"rows_per_s":900.0},"raw_put":{"p50_ms":0.8,"p99_ms":1.5,"rows_per_s":1100.0},"load_rows_per_s":45.0}"#, "\n",
                r#"{"scenario":"ingest_1_row","producers":16,"ingest":{"p50_ms":2.0,"p99_ms":5.0,"rows_per_s":7000.0},"raw_put":{"p50_ms":1.9,"p99_ms":4.0,"rows_per_s":8000.0},"load_rows_per_s":45.0}"#, "\n",
                r#"{"scenario":"fold_throughput","pending_rows":10000,"rows_per_s":300000.0}"#, "\n",
                r#"{"scenario":"fold_throughput","pending_rows":100000,"rows_per_s":600000.0}"#, "\n",
                r#"{"scenario":"fresh_vs_snapshot_reads","pending_rows":0,"get_p50_ms":{"snapshot":1.0,"fresh_key_in_base":2.0,"fresh_key_pending":null}}"#, "\n",
                r#"{"scenario":"fresh_vs_snapshot_reads","pending_rows":1000,"get_p50_ms":{"snapshot":1.0,"fresh_key_in_base":2.5,"fresh_key_pending":1.5}}"#, "\n",
            ),
        )
        .unwrap();
        let written = draw(&results, &dir).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "ingest-latency.svg",
                "ingest-throughput.svg",
                "fold-throughput.svg",
                "reads.svg"
            ]
        );
        for path in &written {
            let svg = std::fs::read_to_string(path).unwrap();
            assert!(svg.starts_with("<svg"), "{}", path.display());
            assert!(svg.contains("2026-12-06"), "the date is on the chart");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
