//! The server's metrics, kept in a `prometheus-client` registry and served as OpenMetrics
//! text. Counters and histograms move as requests go; the per-graph gauges are read from
//! each open graph's pending count at scrape time (no commit-log read).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::{text::encode, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// What `/metrics` answers with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Histogram bucket bounds, in seconds.
const ACK_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];
const FOLD_BUCKETS: [f64; 9] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WaitLabel {
    cause: &'static str,
    fold: &'static str,
    /// The bucket's upper bound in milliseconds (`+Inf` for the last).
    le_ms: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GraphLabel {
    graph: String,
}

type GraphGauge = Family<GraphLabel, Gauge<f64, AtomicU64>>;

/// Pending (unfolded) work of one open graph, read at scrape time.
pub struct GraphGauges {
    pub graph: String,
    pub pending_rows: u64,
    pub pending_bytes: u64,
    /// Age of the oldest unfolded generation.
    pub fold_lag: Option<Duration>,
}

pub struct Metrics {
    registry: Registry,
    ack_latency: Histogram,
    fold_duration: Histogram,
    acked_rows: Counter,
    rejected_lines: Counter,
    http_responses: Family<StatusLabel, Counter>,
    pending_rows: GraphGauge,
    pending_bytes: GraphGauge,
    fold_lag: GraphGauge,
    send_waits: Family<WaitLabel, Gauge>,
    store_retries: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let ack_latency = Histogram::new(ACK_BUCKETS);
        registry.register(
            "tributary_ingest_ack_seconds",
            "Time from a send's arrival to its durable acknowledgement",
            ack_latency.clone(),
        );
        let acked_rows = Counter::default();
        registry.register(
            "tributary_ingest_acked_rows",
            "Rows acknowledged durable",
            acked_rows.clone(),
        );
        let rejected_lines = Counter::default();
        registry.register(
            "tributary_ingest_rejected_lines",
            "Ingest lines rejected by validation",
            rejected_lines.clone(),
        );
        let fold_duration = Histogram::new(FOLD_BUCKETS);
        registry.register(
            "tributary_fold_seconds",
            "Duration of folds requested over the API",
            fold_duration.clone(),
        );
        let http_responses = Family::default();
        registry.register(
            "tributary_http_responses",
            "HTTP responses by status",
            http_responses.clone(),
        );
        let pending_rows = GraphGauge::default();
        registry.register(
            "tributary_pending_rows",
            "Rows flushed but not yet folded",
            pending_rows.clone(),
        );
        let pending_bytes = GraphGauge::default();
        registry.register(
            "tributary_pending_bytes",
            "Bytes flushed but not yet folded",
            pending_bytes.clone(),
        );
        let fold_lag = GraphGauge::default();
        registry.register(
            "tributary_fold_lag_seconds",
            "Age of the oldest unfolded generation",
            fold_lag.clone(),
        );
        let send_waits = Family::default();
        registry.register(
            "tributary_wal_sends",
            "Durable sends by what they waited for (cause: backpressure, flush, queued, put), \
             whether a fold was running, and the bucket of their time (each send in one bucket)",
            send_waits.clone(),
        );
        let store_retries = Gauge::default();
        registry.register(
            "tributary_store_retries",
            "Requests to the object store its client retried (a 5xx, a timeout, a dropped \
             connection) since the server started; each is retried a bounded number of \
             times (the store's client_max_retries and client_retry_timeout)",
            store_retries.clone(),
        );
        Metrics {
            registry,
            store_retries,
            send_waits,
            ack_latency,
            fold_duration,
            acked_rows,
            rejected_lines,
            http_responses,
            pending_rows,
            pending_bytes,
            fold_lag,
        }
    }
}

impl Metrics {
    pub fn acknowledged(&self, elapsed: Duration, rows: u64, rejected: u64) {
        self.ack_latency.observe(elapsed.as_secs_f64());
        self.acked_rows.inc_by(rows);
        self.rejected_lines.inc_by(rejected);
    }

    pub fn folded(&self, elapsed: Duration) {
        self.fold_duration.observe(elapsed.as_secs_f64());
    }

    pub fn responded(&self, status: u16) {
        self.http_responses
            .get_or_create(&StatusLabel { status })
            .inc();
    }

    /// The OpenMetrics text of every metric, with the gauges of `graphs` (the open ones;
    /// a graph no longer open drops out).
    pub fn render(&self, graphs: &[GraphGauges]) -> String {
        for gauge in [&self.pending_rows, &self.pending_bytes, &self.fold_lag] {
            gauge.clear();
        }
        for graph in graphs {
            let label = GraphLabel {
                graph: graph.graph.clone(),
            };
            self.pending_rows
                .get_or_create(&label)
                .set(graph.pending_rows as f64);
            self.pending_bytes
                .get_or_create(&label)
                .set(graph.pending_bytes as f64);
            self.fold_lag
                .get_or_create(&label)
                .set(graph.fold_lag.map_or(0.0, |d| d.as_secs_f64()));
        }
        for counts in tributary::send_waits() {
            for (i, &count) in counts.buckets.iter().enumerate() {
                if count == 0 {
                    continue;
                }
                let label = WaitLabel {
                    cause: counts.cause.name(),
                    fold: if counts.during_fold { "yes" } else { "no" },
                    le_ms: tributary::WAIT_BUCKET_MS
                        .get(i)
                        .map_or_else(|| "+Inf".to_owned(), |bound| bound.to_string()),
                };
                self.send_waits.get_or_create(&label).set(count as i64);
            }
        }
        self.store_retries.set(tributary::store_retries() as i64);
        let mut out = String::new();
        if let Err(error) = encode(&mut out, &self.registry) {
            tracing::warn!(%error, "encoding the metrics failed");
        }
        out
    }
}
