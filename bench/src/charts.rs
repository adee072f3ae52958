//! SVG charts of a report (plotters, SVG backend: text is written as SVG `<text>`, no font is
//! loaded): the B4 scale curve, the peer ratios, and the chaos suite's recovery times.
//!
//! They are drawn from the JSON files (`report.json`, and the chaos suite's
//! `<target>/chaos/report.json` when there is one), so `mcr-bench charts` redraws them
//! without running anything. A chart without data in the report is skipped, and says so.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use plotters::prelude::*;
use serde_json::Value;

const SIZE: (u32, u32) = (760, 420);
const BLUE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);

/// Draws every chart the data allows into `dir`; returns the files written.
pub fn write_all(report: &Path, chaos: Option<&Path>, dir: &Path) -> Result<Vec<PathBuf>> {
    let report: Value = serde_json::from_slice(
        &std::fs::read(report).with_context(|| format!("reading {}", report.display()))?,
    )
    .with_context(|| format!("parsing {}", report.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let mut one = |name: &str, drawn: Result<bool>| -> Result<()> {
        let path = dir.join(name);
        if drawn? {
            written.push(path);
        } else {
            eprintln!("chart {name}: no data in the report, skipped");
        }
        Ok(())
    };
    let path = dir.join("b4-scale.svg");
    one("b4-scale.svg", b4_scale(&report, &path))?;
    let path = dir.join("peer-ratios.svg");
    one("peer-ratios.svg", peer_ratios(&report, &path))?;
    if let Some(chaos) = chaos.filter(|p| p.is_file()) {
        let chaos: Value = serde_json::from_slice(&std::fs::read(chaos)?)
            .with_context(|| format!("parsing {}", chaos.display()))?;
        let path = dir.join("chaos-recovery.svg");
        one("chaos-recovery.svg", chaos_recovery(&chaos, &path))?;
    }
    Ok(written)
}

fn scenario<'a>(report: &'a Value, id: &str) -> Option<&'a Value> {
    report["scenarios"]
        .as_array()?
        .iter()
        .find(|s| s["id"].as_str().is_some_and(|i| i.eq_ignore_ascii_case(id)))
}

fn plot_err<E: std::fmt::Display>(err: E) -> anyhow::Error {
    anyhow::anyhow!("drawing: {err}")
}

/// The bounds of `values`, padded, never empty.
fn range(values: impl Iterator<Item = f64>, floor_zero: bool) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo > hi { (0.0, 1.0) } else { (lo, hi) };
    let lo = if floor_zero { 0.0 } else { lo };
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.05).max(1e-9);
    (lo, hi + pad)
}

/// B4: RSS per cluster (left axis) and time to reconciled (right axis) against cluster count.
fn b4_scale(report: &Value, path: &Path) -> Result<bool> {
    let Some(runs) = scenario(report, "B4").and_then(|s| s["runs"].as_array()) else {
        return Ok(false);
    };
    let points: Vec<(f64, f64, f64)> = runs
        .iter()
        .filter_map(|r| {
            Some((
                r["engaged"].as_f64()?,
                r["hwm_kib_per_cluster"].as_f64()?,
                r["seconds"].as_f64()?,
            ))
        })
        .collect();
    if points.is_empty() {
        return Ok(false);
    }
    let x = range(points.iter().map(|p| p.0), true);
    let rss = range(points.iter().map(|p| p.1), true);
    let secs = range(points.iter().map(|p| p.2), true);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("B4: scale over HTTPS", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .right_y_label_area_size(60)
        .build_cartesian_2d(x.0..x.1, rss.0..rss.1)
        .map_err(plot_err)?
        .set_secondary_coord(x.0..x.1, secs.0..secs.1);
    chart
        .configure_mesh()
        .x_desc("clusters")
        .y_desc("peak RSS per cluster (KiB)")
        .draw()
        .map_err(plot_err)?;
    chart
        .configure_secondary_axes()
        .y_desc("start to every object reconciled (s)")
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|p| (p.0, p.1)),
            BLUE.stroke_width(2),
        ))
        .map_err(plot_err)?
        .label("peak RSS per cluster (KiB)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLUE));
    chart
        .draw_series(
            points
                .iter()
                .map(|p| Circle::new((p.0, p.1), 4, BLUE.filled())),
        )
        .map_err(plot_err)?;
    chart
        .draw_secondary_series(LineSeries::new(
            points.iter().map(|p| (p.0, p.2)),
            ORANGE.stroke_width(2),
        ))
        .map_err(plot_err)?
        .label("time to reconciled (s)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], ORANGE));
    chart
        .draw_secondary_series(
            points
                .iter()
                .map(|p| Circle::new((p.0, p.2), 4, ORANGE.filled())),
        )
        .map_err(plot_err)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(true)
}

/// Every `ratio mcr / <peer>` metric of B1, B2, B2m, B8, B10, B11, B12, and B13 against Go
/// projected (see [`b13_projected`]): horizontal bars, the line at 1 is parity (below: mcr
/// needs less).
fn peer_ratios(report: &Value, path: &Path) -> Result<bool> {
    let mut bars: Vec<(String, f64)> = Vec::new();
    for id in ["B1", "B2", "B2m", "B8", "B10", "B11", "B12"] {
        let Some(metrics) = scenario(report, id).and_then(|s| s["metrics"].as_array()) else {
            continue;
        };
        for m in metrics {
            let (Some(name), Some(value)) = (m["name"].as_str(), m["value"].as_f64()) else {
                continue;
            };
            if name.contains("ratio mcr /") {
                bars.push((format!("{id}: {}", name.trim()), value));
            }
        }
    }
    if let Some(bar) = b13_projected(report) {
        bars.push(bar);
    }
    if bars.is_empty() {
        return Ok(false);
    }
    // Segment 0 is drawn at the bottom: reversed, the first ratio is on top.
    bars.reverse();
    let n = bars.len();
    let hi = bars.iter().map(|b| b.1).fold(1.0_f64, f64::max) * 1.15;
    let height = (80 + 28 * n as u32).max(200);
    let root = SVGBackend::new(path, (SIZE.0 + 200, height)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "mcr / peer (1 = parity, lower is better)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(420)
        .build_cartesian_2d(0.0..hi, (0..n).into_segmented())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .light_line_style(WHITE)
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) if *i < n => bars[*i].0.clone(),
            _ => String::new(),
        })
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            let color = if *v <= 1.0 { BLUE } else { ORANGE };
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (*v, SegmentValue::Exact(i + 1)),
                ],
                color.filled(),
            );
            bar.set_margin(4, 4, 0, 0);
            bar
        }))
        .map_err(plot_err)?;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Exact(n))],
            BLACK.stroke_width(1),
        )))
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(true)
}

/// B13 against Go, projected: Go's multicluster-runtime was not run at B13's size, so its
/// memory there is B8's peak RSS per cluster at B8's largest fleet, times B13's clusters. The
/// bar is mcr's peak RSS per cluster over all of B13's replicas, divided by that; its label
/// says it is a projection, and from which B8 fleet.
fn b13_projected(report: &Value) -> Option<(String, f64)> {
    let metric = |id: &str, wanted: &dyn Fn(&str) -> bool| -> Vec<(String, f64)> {
        scenario(report, id)
            .and_then(|s| s["metrics"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|m| Some((m["name"].as_str()?.trim().to_owned(), m["value"].as_f64()?)))
            .filter(|(name, _)| wanted(name))
            .collect()
    };
    let (_, mcr) = metric("B13", &|n| n == "peak RSS per cluster, all replicas")
        .into_iter()
        .next()?;
    // B8 names its figures "<N> clusters: ..."; the largest fleet is the fairest projection.
    let (at, go) = metric("B8", &|n| n.ends_with("peak RSS per cluster Go"))
        .into_iter()
        .filter_map(|(name, v)| {
            let n: u64 = name.split(' ').next()?.parse().ok()?;
            Some((n, v))
        })
        .max_by_key(|(n, _)| *n)?;
    (go > 0.0).then(|| {
        (
            format!("B13: peak RSS per cluster mcr / Go, Go projected from B8 at {at} clusters"),
            mcr / go,
        )
    })
}

/// The chaos suite's time to recover (heal to faulted member caught up): a histogram.
fn chaos_recovery(chaos: &Value, path: &Path) -> Result<bool> {
    let samples: Vec<f64> = chaos["recover_seconds"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    if samples.is_empty() {
        return Ok(false);
    }
    let max = samples.iter().copied().fold(0.0_f64, f64::max);
    const BINS: usize = 24;
    let width = (max / BINS as f64).max(0.05);
    let mut counts = [0u32; BINS + 1];
    for s in &samples {
        counts[((s / width) as usize).min(BINS)] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(1);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let caption = format!(
        "chaos: time to recover, {} samples ({} clusters, seed {})",
        samples.len(),
        chaos["clusters"],
        chaos["seed"]
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..width * (BINS + 1) as f64, 0u32..top + top / 10 + 1)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("heal to caught up (s)")
        .y_desc("faulted members")
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(counts.iter().enumerate().map(|(i, c)| {
            let x0 = i as f64 * width;
            let mut bar = Rectangle::new([(x0, 0), (x0 + width, *c)], BLUE.filled());
            bar.set_margin(0, 0, 1, 1);
            bar
        }))
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_from_a_small_report() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let report = serde_json::json!({
            "scenarios": [
                {"id": "B4", "metrics": [], "runs": [
                    {"engaged": 100, "hwm_kib_per_cluster": 90.0, "seconds": 1.2},
                    {"engaged": 1000, "hwm_kib_per_cluster": 40.0, "seconds": 6.5}]},
                {"id": "B1", "runs": [], "metrics": [
                    {"name": "time ratio mcr / kube-runtime", "value": 0.8, "unit": ""},
                    {"name": "median", "value": 3.0, "unit": "s"}]}
            ]
        });
        let chaos =
            serde_json::json!({"seed": 7, "clusters": 12, "recover_seconds": [0.4, 0.9, 2.5]});
        let (r, c) = (
            dir.path().join("report.json"),
            dir.path().join("chaos.json"),
        );
        std::fs::write(&r, report.to_string())?;
        std::fs::write(&c, chaos.to_string())?;
        let written = write_all(&r, Some(&c), &dir.path().join("charts"))?;
        assert_eq!(written.len(), 3, "{written:?}");
        let ratios = std::fs::read_to_string(dir.path().join("charts/peer-ratios.svg"))?;
        assert!(ratios.starts_with("<svg"), "{ratios}");
        assert!(ratios.contains("B1: time ratio mcr / kube-runtime"));
        assert!(!ratios.contains("median"));
        assert!(!ratios.contains("B13"), "no B13 bar without B13 and B8");
        Ok(())
    }

    #[test]
    fn b13_is_set_against_go_projected_from_the_largest_b8_fleet() {
        let report = serde_json::json!({
            "scenarios": [
                {"id": "B13", "runs": [], "metrics": [
                    {"name": "peak RSS per cluster, all replicas", "value": 40.0, "unit": "KiB"}]},
                {"id": "B8", "runs": [], "metrics": [
                    {"name": "10 clusters: peak RSS per cluster Go", "value": 2000.0, "unit": "KiB"},
                    {"name": "1000 clusters: peak RSS per cluster Go", "value": 400.0, "unit": "KiB"},
                    {"name": "1000 clusters: peak RSS per cluster mcr", "value": 90.0, "unit": "KiB"}]}
            ]
        });
        let (label, ratio) = b13_projected(&report).expect("a B13 bar");
        assert!(
            label.contains("projected from B8 at 1000 clusters"),
            "{label}"
        );
        assert!((ratio - 0.1).abs() < 1e-9, "{ratio}");
        let without_b8 = serde_json::json!({"scenarios": [report["scenarios"][0].clone()]});
        assert!(b13_projected(&without_b8).is_none());
    }

    #[test]
    fn a_report_without_the_data_draws_nothing() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let r = dir.path().join("report.json");
        std::fs::write(
            &r,
            r#"{"scenarios": [{"id": "B5", "metrics": [], "runs": []}]}"#,
        )?;
        assert!(write_all(&r, None, dir.path())?.is_empty());
        Ok(())
    }
}
