//! Prometheus text metrics, kept by hand: a few counters and two histograms.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Histogram bucket bounds, in seconds.
const ACK_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];
const FOLD_BUCKETS: [f64; 9] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0];

struct Histogram {
    bounds: &'static [f64],
    /// One count per bound, plus `+Inf`.
    counts: Vec<AtomicU64>,
    sum_micros: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = self
            .bounds
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(self.bounds.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, count) in self.counts.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let le = self
                .bounds
                .get(i)
                .map_or("+Inf".to_owned(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {cumulative}");
    }
}

/// A per-graph gauge: its name, help text and how to read it.
type Gauge = (&'static str, &'static str, fn(&GraphGauges) -> f64);

/// Pending (unfolded) work of one open graph, read at scrape time.
pub struct GraphGauges {
    pub graph: String,
    pub pending_rows: u64,
    pub pending_bytes: u64,
    /// Age of the oldest unfolded generation.
    pub fold_lag: Option<Duration>,
}

pub struct Metrics {
    ack_latency: Histogram,
    fold_duration: Histogram,
    acked_rows: AtomicU64,
    rejected_lines: AtomicU64,
    http_responses: Mutex<BTreeMap<u16, u64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            ack_latency: Histogram::new(&ACK_BUCKETS),
            fold_duration: Histogram::new(&FOLD_BUCKETS),
            acked_rows: AtomicU64::new(0),
            rejected_lines: AtomicU64::new(0),
            http_responses: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Metrics {
    pub fn acknowledged(&self, elapsed: Duration, rows: u64, rejected: u64) {
        self.ack_latency.observe(elapsed);
        self.acked_rows.fetch_add(rows, Ordering::Relaxed);
        self.rejected_lines.fetch_add(rejected, Ordering::Relaxed);
    }

    pub fn folded(&self, elapsed: Duration) {
        self.fold_duration.observe(elapsed);
    }

    pub fn responded(&self, status: u16) {
        if let Ok(mut counts) = self.http_responses.lock() {
            *counts.entry(status).or_default() += 1;
        }
    }

    pub fn render(&self, graphs: &[GraphGauges]) -> String {
        let mut out = String::new();
        self.ack_latency.render(
            &mut out,
            "tributary_ingest_ack_seconds",
            "Time from a send's arrival to its durable acknowledgement.",
        );
        counter(
            &mut out,
            "tributary_ingest_acked_rows_total",
            "Rows acknowledged durable.",
            self.acked_rows.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "tributary_ingest_rejected_lines_total",
            "Ingest lines rejected by validation.",
            self.rejected_lines.load(Ordering::Relaxed),
        );
        self.fold_duration.render(
            &mut out,
            "tributary_fold_seconds",
            "Duration of folds requested over the API.",
        );
        let gauges: [Gauge; 3] = [
            (
                "tributary_pending_rows",
                "Rows flushed but not yet folded.",
                |g| g.pending_rows as f64,
            ),
            (
                "tributary_pending_bytes",
                "Bytes flushed but not yet folded.",
                |g| g.pending_bytes as f64,
            ),
            (
                "tributary_fold_lag_seconds",
                "Age of the oldest unfolded generation.",
                |g| g.fold_lag.map_or(0.0, |d| d.as_secs_f64()),
            ),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for graph in graphs {
                let _ = writeln!(out, "{name}{{graph=\"{}\"}} {}", graph.graph, value(graph));
            }
        }
        let _ = writeln!(
            out,
            "# HELP tributary_http_responses_total HTTP responses by status."
        );
        let _ = writeln!(out, "# TYPE tributary_http_responses_total counter");
        if let Ok(counts) = self.http_responses.lock() {
            for (status, count) in counts.iter() {
                let _ = writeln!(
                    out,
                    "tributary_http_responses_total{{status=\"{status}\"}} {count}"
                );
            }
        }
        out
    }
}

fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} counter");
    let _ = writeln!(out, "{name} {value}");
}
