//! `--plot FILE.svg`: a latency histogram per workload above a
//! throughput-over-time chart, drawn with plotters' SVG backend.

use super::report::{Timeline, WorkloadResult};
use hdrhistogram::Histogram;
use plotters::prelude::*;
use std::path::Path;

/// Bars in the latency histogram.
const BINS: usize = 60;

/// Why the chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("drawing {path}: {message}")]
pub struct PlotError {
    path: String,
    message: String,
}

/// Log-spaced bin edges: `BINS + 1` values from `lo_ms` to `hi_ms`.
pub fn bin_edges(lo_ms: f64, hi_ms: f64) -> Vec<f64> {
    let ratio = hi_ms / lo_ms;
    (0..=BINS)
        .map(|k| lo_ms * ratio.powf(k as f64 / BINS as f64))
        .collect()
}

/// Counts of a nanosecond histogram in the bins between `edges`; faster
/// operations land in the first bin, slower ones in the last.
pub fn latency_bins(h: &Histogram<u64>, edges: &[f64]) -> Vec<u64> {
    let mut bins = vec![0u64; edges.len().saturating_sub(1).max(1)];
    for v in h.iter_recorded() {
        let ms = v.value_iterated_to() as f64 / 1e6;
        let last = bins.len() - 1;
        let i = edges[1..].partition_point(|edge| *edge <= ms);
        bins[i.min(last)] += v.count_at_value();
    }
    bins
}

/// Draws the two charts into `path`.
pub fn write_svg(
    path: &Path,
    workloads: &[WorkloadResult],
    timeline: &Timeline,
) -> Result<(), PlotError> {
    draw(path, workloads, timeline).map_err(|message| PlotError {
        path: path.display().to_string(),
        message,
    })
}

fn draw(path: &Path, workloads: &[WorkloadResult], timeline: &Timeline) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let root = SVGBackend::new(path, (1000, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (upper, lower) = root.split_vertically(400);

    // Latency on a log axis, from the fastest operation to the slowest p99.9,
    // so one outlier does not flatten the rest.
    let recorded = || workloads.iter().filter(|w| !w.histogram.is_empty());
    let lo_ms = recorded()
        .map(|w| w.histogram.min() as f64 / 1e6)
        .fold(f64::INFINITY, f64::min)
        .clamp(0.0001, 1e6)
        * 0.9;
    let hi_ms = recorded()
        .map(|w| w.histogram.value_at_quantile(0.999) as f64 / 1e6)
        .fold(0.0, f64::max)
        .max(lo_ms * 10.0)
        * 1.1;
    let edges = bin_edges(lo_ms, hi_ms);
    let all_bins: Vec<Vec<u64>> = workloads
        .iter()
        .map(|w| latency_bins(&w.histogram, &edges))
        .collect();
    let max_count = all_bins.iter().flatten().copied().max().unwrap_or(0).max(1);
    let mut chart = ChartBuilder::on(&upper)
        .caption("Latency", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((lo_ms..hi_ms).log_scale(), 0u64..max_count + max_count / 10)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("latency (ms, log scale); the last bar holds everything slower")
        .y_desc("operations")
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (w, bins)) in workloads.iter().zip(&all_bins).enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(
                bins.iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(b, c)| {
                        Rectangle::new([(edges[b], 0), (edges[b + 1], *c)], color.mix(0.5).filled())
                    }),
            )
            .map_err(|x| e(&x))?
            .label(format!(
                "{} (p50 {:.3} ms, p99 {:.3} ms)",
                w.stats.name, w.stats.latency_ms.p50, w.stats.latency_ms.p99
            ))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|x| e(&x))?;

    // Throughput per sampling interval.
    let max_t = timeline.t_s.last().copied().unwrap_or(0.0).max(0.001);
    let max_mb = timeline
        .series
        .iter()
        .flat_map(|s| s.mb_per_s.iter().copied())
        .fold(0.0, f64::max)
        .max(0.001)
        * 1.1;
    let mut chart = ChartBuilder::on(&lower)
        .caption("Throughput", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..max_t, 0f64..max_mb)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("MB/s (10^6 bytes)")
        .draw()
        .map_err(|x| e(&x))?;
    for (i, series) in timeline.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = timeline
            .t_s
            .iter()
            .copied()
            .zip(series.mb_per_s.iter().copied())
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(series.name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::{Counters, TimelineSeries, WorkerTally};
    use std::time::Duration;

    #[test]
    fn bins_put_outliers_in_the_last_bar() {
        let mut h = WorkerTally::new().into_histogram();
        h.record(500_000).unwrap(); // 0.5 ms
        h.record(5_000_000_000).unwrap(); // 5 s
        let edges = bin_edges(0.1, 60.0);
        assert_eq!(edges.len(), BINS + 1);
        assert!((edges[0] - 0.1).abs() < 1e-12 && (edges[BINS] - 60.0).abs() < 1e-9);
        assert!(edges.windows(2).all(|w| w[0] < w[1]));
        h.record(1_000).unwrap(); // 1 us, faster than the first edge
        let bins = latency_bins(&h, &edges);
        assert_eq!(bins[0], 1);
        let half_ms = edges[1..].partition_point(|e| *e <= 0.5);
        assert_eq!(bins[half_ms], 1);
        assert_eq!(bins[BINS - 1], 1);
        assert_eq!(bins.iter().sum::<u64>(), 3);
    }

    #[test]
    fn writes_an_svg() {
        let counters = Counters::default();
        let mut tally = WorkerTally::new();
        for ms in [1, 2, 2, 3, 9] {
            tally.ok(&counters, Duration::from_millis(ms), 65536);
        }
        let w = WorkloadResult::new(
            "positioned",
            1,
            65536,
            &counters,
            vec![tally],
            Duration::from_secs(1),
        );
        let timeline = Timeline {
            t_s: vec![0.5, 1.0],
            series: vec![TimelineSeries {
                name: "positioned".into(),
                ops_per_s: vec![4.0, 6.0],
                mb_per_s: vec![0.2, 0.3],
            }],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.svg");
        write_svg(&path, &[w], &timeline).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("<svg"));
        assert!(svg.contains("positioned"));
    }
}
