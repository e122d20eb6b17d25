//! The last hour of the gateway's own metrics, sampled every few seconds
//! ([`SAMPLE_EVERY`](crate::SAMPLE_EVERY) by default), and the charts drawn from them:
//! request rate, throughput and latency percentiles. Charts are SVG drawn
//! on the server; nothing runs in the browser.

use crate::document::size;
use crate::Console;
use futures::future::BoxFuture;
use maud::{html, Markup};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The Prometheus text of the metrics, however the console reaches them
/// (the process's own recorder, or a gateway's /metrics).
pub type MetricsSource = Arc<dyn Fn() -> BoxFuture<'static, Result<String, String>> + Send + Sync>;

/// How far back the charts go.
const WINDOW: Duration = Duration::from_secs(3600);

/// The gateway's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
struct Sample {
    /// Seconds since the epoch.
    at: f64,
    requests: f64,
    bytes_in: f64,
    bytes_out: f64,
    /// Request latency buckets: upper bound in seconds, cumulative count.
    latency: Vec<(f64, f64)>,
}

/// The samples of the window, oldest first, and one before it (so that the
/// oldest interval has a start).
pub(crate) struct Samples {
    ring: Mutex<VecDeque<Sample>>,
    every: Duration,
}

impl Samples {
    pub(crate) fn new(every: Duration) -> Self {
        Self {
            ring: Mutex::new(VecDeque::new()),
            every,
        }
    }

    fn push(&self, sample: Sample) {
        let mut ring = self.ring.lock();
        let oldest = sample.at - WINDOW.as_secs_f64();
        while ring.len() > 1 && ring[1].at <= oldest {
            ring.pop_front();
        }
        ring.push_back(sample);
    }

    fn snapshot(&self) -> Vec<Sample> {
        self.ring.lock().iter().cloned().collect()
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// Samples the metrics until the console stops.
pub(crate) async fn sample_forever(console: Arc<Console>, source: MetricsSource) {
    let mut tick = tokio::time::interval(console.charts.every);
    loop {
        tick.tick().await;
        match source().await.and_then(|text| parse(&text, now())) {
            Ok(sample) => console.charts.push(sample),
            Err(e) => tracing::debug!("console: no metrics sample: {e}"),
        }
    }
}

/// The counters of interest in a Prometheus text page.
fn parse(text: &str, at: f64) -> Result<Sample, String> {
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .map_err(|e| e.to_string())?;
    let mut sample = Sample {
        at,
        ..Sample::default()
    };
    for metric in scrape.samples {
        match (metric.metric.as_str(), metric.value) {
            ("tessera_s3_requests_total", prometheus_parse::Value::Counter(v)) => {
                sample.requests += v;
            }
            ("tessera_s3_bytes_in_total", prometheus_parse::Value::Counter(v)) => {
                sample.bytes_in += v;
            }
            ("tessera_s3_bytes_out_total", prometheus_parse::Value::Counter(v)) => {
                sample.bytes_out += v;
            }
            ("tessera_s3_request_seconds", prometheus_parse::Value::Histogram(buckets)) => {
                for bucket in buckets {
                    match sample
                        .latency
                        .iter_mut()
                        .find(|(bound, _)| *bound == bucket.less_than)
                    {
                        Some((_, count)) => *count += bucket.count,
                        None => sample.latency.push((bucket.less_than, bucket.count)),
                    }
                }
            }
            _ => {}
        }
    }
    sample
        .latency
        .sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    Ok(sample)
}

/// The `q` quantile (0..1) of the latencies recorded between two samples,
/// as the upper bound of the bucket it falls in; None without requests.
fn quantile(before: &Sample, after: &Sample, q: f64) -> Option<f64> {
    let counts: Vec<(f64, f64)> = after
        .latency
        .iter()
        .map(|(bound, count)| {
            let earlier = before
                .latency
                .iter()
                .find(|(b, _)| b == bound)
                .map_or(0.0, |(_, c)| *c);
            (*bound, count - earlier)
        })
        .collect();
    let total = counts.last().map(|(_, c)| *c)?;
    if total <= 0.0 {
        return None;
    }
    let finite_top = counts
        .iter()
        .rev()
        .find(|(b, _)| b.is_finite())
        .map_or(0.0, |(b, _)| *b);
    counts
        .iter()
        .find(|(_, cumulative)| *cumulative >= q * total)
        .map(|(bound, _)| {
            if bound.is_finite() {
                *bound
            } else {
                finite_top
            }
        })
}

/// A line over the window: (seconds ago, value).
type Line = Vec<(f64, f64)>;

/// Per interval between consecutive samples: `value(before, after, seconds)`.
fn per_interval(
    samples: &[Sample],
    at: f64,
    value: impl Fn(&Sample, &Sample, f64) -> Option<f64>,
) -> Line {
    samples
        .windows(2)
        .filter_map(|pair| {
            let seconds = pair[1].at - pair[0].at;
            if seconds <= 0.0 {
                return None;
            }
            Some((at - pair[1].at, value(&pair[0], &pair[1], seconds)?))
        })
        .collect()
}

const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 160.0;
const LEFT: f64 = 8.0;
const TOP: f64 = 18.0;
const BOTTOM: f64 = 20.0;

/// An SVG line chart of `lines` (at most two) over the last hour.
fn chart(title: &str, lines: &[(&str, Line)], format: impl Fn(f64) -> String) -> Markup {
    let max = lines
        .iter()
        .flat_map(|(_, line)| line.iter().map(|(_, v)| *v))
        .fold(0.0_f64, f64::max);
    let scale = if max > 0.0 { max } else { 1.0 };
    let window = WINDOW.as_secs_f64();
    let points = |line: &Line| -> String {
        line.iter()
            .map(|(ago, v)| {
                let x = LEFT + (WIDTH - 2.0 * LEFT) * (1.0 - ago / window).clamp(0.0, 1.0);
                let y = HEIGHT - BOTTOM - (HEIGHT - TOP - BOTTOM) * (v / scale);
                format!("{x:.1},{y:.1}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let latest: Vec<String> = lines
        .iter()
        .map(|(name, line)| {
            let value = line
                .last()
                .map_or("no data".to_string(), |(_, v)| format(*v));
            format!("{name} {value}")
        })
        .collect();
    let summary = format!("{title}, latest: {}", latest.join(", "));
    html! {
        figure {
            svg viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img" aria-label=(summary) {
                text x=(LEFT) y="12" { "max " (format(max)) }
                text x=(LEFT) y=(HEIGHT - 4.0) { "60 min ago" }
                text x=(WIDTH - 40.0) y=(HEIGHT - 4.0) { "now" }
                @for (i, (_, line)) in lines.iter().enumerate() {
                    polyline class=(if i == 0 { "first" } else { "second" }) points=(points(line)) {}
                }
            }
            figcaption { (summary) }
        }
    }
}

/// The charts of the last hour.
pub(crate) fn charts(console: &Console) -> Markup {
    let samples = console.charts.snapshot();
    let at = now();
    let rate = per_interval(&samples, at, |a, b, s| Some((b.requests - a.requests) / s));
    let bytes_in = per_interval(&samples, at, |a, b, s| Some((b.bytes_in - a.bytes_in) / s));
    let bytes_out = per_interval(&samples, at, |a, b, s| {
        Some((b.bytes_out - a.bytes_out) / s)
    });
    let p50 = per_interval(&samples, at, |a, b, _| quantile(a, b, 0.5).map(|q| q * 1e3));
    let p99 = per_interval(&samples, at, |a, b, _| {
        quantile(a, b, 0.99).map(|q| q * 1e3)
    });
    let throughput = |v: f64| format!("{}/s", size(v as u64));
    html! {
        div.charts {
            (chart("Requests per second", &[("all", rate)], |v| format!("{v:.1}/s")))
            (chart("Throughput", &[("in", bytes_in), ("out", bytes_out)], throughput))
            (chart("Latency", &[("p50", p50), ("p99", p99)], |v| format!("{v:.1} ms")))
        }
        @if samples.len() < 2 {
            p.muted { "The charts fill in as samples arrive (one every "
                (console.charts.every.as_secs_f64()) " seconds)." }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"# TYPE tessera_s3_requests_total counter
tessera_s3_requests_total{op="GetObject",status="200"} 10
tessera_s3_requests_total{op="PutObject",status="200"} 5
# TYPE tessera_s3_bytes_in_total counter
tessera_s3_bytes_in_total 2048
# TYPE tessera_s3_bytes_out_total counter
tessera_s3_bytes_out_total 4096
# TYPE tessera_s3_request_seconds histogram
tessera_s3_request_seconds_bucket{op="GetObject",le="0.001"} 4
tessera_s3_request_seconds_bucket{op="GetObject",le="0.01"} 9
tessera_s3_request_seconds_bucket{op="GetObject",le="+Inf"} 10
tessera_s3_request_seconds_sum{op="GetObject"} 0.5
tessera_s3_request_seconds_count{op="GetObject"} 10
tessera_s3_request_seconds_bucket{op="PutObject",le="0.001"} 0
tessera_s3_request_seconds_bucket{op="PutObject",le="0.01"} 1
tessera_s3_request_seconds_bucket{op="PutObject",le="+Inf"} 5
tessera_s3_request_seconds_sum{op="PutObject"} 5
tessera_s3_request_seconds_count{op="PutObject"} 5
"#;

    #[test]
    fn the_page_sums_every_operation() {
        let sample = parse(PAGE, 100.0).unwrap();
        assert_eq!(sample.requests, 15.0);
        assert_eq!(sample.bytes_in, 2048.0);
        assert_eq!(sample.bytes_out, 4096.0);
        assert_eq!(
            sample.latency,
            vec![(0.001, 4.0), (0.01, 10.0), (f64::INFINITY, 15.0)]
        );
    }

    #[test]
    fn quantiles_come_from_the_requests_between_two_samples() {
        let before = Sample {
            latency: vec![(0.001, 4.0), (0.01, 10.0), (f64::INFINITY, 15.0)],
            ..Sample::default()
        };
        // Ten more requests: 1 under 1 ms, 8 under 10 ms, 1 slower.
        let after = Sample {
            latency: vec![(0.001, 5.0), (0.01, 18.0), (f64::INFINITY, 25.0)],
            ..Sample::default()
        };
        assert_eq!(quantile(&before, &after, 0.1), Some(0.001));
        assert_eq!(quantile(&before, &after, 0.5), Some(0.01));
        assert_eq!(
            quantile(&before, &after, 0.99),
            Some(0.01),
            "+Inf reads as the top bound"
        );
        assert_eq!(quantile(&after, &after, 0.5), None);
    }

    #[test]
    fn rates_are_per_second_between_samples_and_the_ring_keeps_an_hour() {
        let samples = Samples::new(Duration::from_secs(10));
        let hour = 360;
        for i in 0..(hour + 6) {
            samples.push(Sample {
                at: i as f64 * 10.0,
                requests: i as f64 * 50.0,
                ..Sample::default()
            });
        }
        let kept = samples.snapshot();
        assert_eq!(kept.len(), hour + 1, "an hour of intervals and their start");
        assert_eq!(kept[0].at, 50.0);
        let at = kept.last().unwrap().at;
        let rate = per_interval(&kept, at, |a, b, s| Some((b.requests - a.requests) / s));
        assert_eq!(rate.len(), hour);
        assert!(rate.iter().all(|(_, v)| *v == 5.0));
        assert_eq!(rate.last().unwrap().0, 0.0);
    }

    #[test]
    fn a_chart_names_its_latest_values() {
        let line = vec![(60.0, 1.0), (0.0, 3.0)];
        let html = chart("Requests", &[("all", line)], |v| format!("{v:.1}/s")).into_string();
        assert!(
            html.contains(r#"aria-label="Requests, latest: all 3.0/s""#),
            "{html}"
        );
        assert!(html.contains("max 3.0/s"), "{html}");
        // The latest point is at the right edge, at the top.
        assert!(
            html.contains(&format!("{:.1},{:.1}", WIDTH - LEFT, TOP)),
            "{html}"
        );
    }
}
