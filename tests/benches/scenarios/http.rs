//! Ingest through the real server over loopback HTTP, with its background folder on:
//! acknowledgement latency tails at many producers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tributary::Graph;
use tributary_server::{AppState, Limits, ServerConfig};
use tributary_tests::{ndjson, person, SCHEMA};

use crate::{percentile, report};

/// `producers` connections each send ingest requests of `rows` lines, one after another,
/// for `duration`; the server folds in the background meanwhile.
pub async fn ack_tails(producers: usize, rows: usize, duration: Duration) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().to_path_buf();
    Graph::init(&root.join("g").to_string_lossy(), SCHEMA)
        .await
        .expect("init");
    let config = ServerConfig {
        root: root.display().to_string(),
        store: Default::default(),
        graph_settings: Default::default(),
        tokens: None,
        allow_init: false,
        // Every producer a stream place (the default is 64 at once; beyond, 503).
        limits: Limits {
            max_ingest_streams: producers.max(Limits::default().max_ingest_streams),
            ..Limits::default()
        },
        tls: None,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(tributary_server::serve(
        listener,
        AppState::new(config),
        async move {
            let _ = stopped.await;
        },
    ));
    let url = Arc::new(format!("{base}/graphs/g/ingest"));
    let started = Instant::now();
    let tasks: Vec<_> = (0..producers)
        .map(|p| {
            let url = url.clone();
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut latencies = Vec::new();
                let mut s = 0;
                while started.elapsed() < duration {
                    let lines: Vec<String> = (0..rows)
                        .map(|r| person(&format!("p{p}-{s}-{r}"), 30))
                        .collect();
                    s += 1;
                    let sent = Instant::now();
                    let response = http
                        .post(url.as_str())
                        .header("content-type", "application/x-ndjson")
                        .body(ndjson(&lines))
                        .send()
                        .await
                        .expect("send");
                    assert!(response.status().is_success(), "{}", response.status());
                    response.bytes().await.expect("records");
                    latencies.push(sent.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("producer"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let _ = stop.send(());
    let _ = server.await;
    latencies.sort();
    let p50 = percentile(&latencies, 0.5);
    let p99 = percentile(&latencies, 0.99);
    report(json!({
        "scenario": "http_ingest_tails",
        "producers": producers,
        "rows_per_request": rows,
        "requests": latencies.len(),
        "acked_rows_per_s": (latencies.len() * rows) as f64 / elapsed,
        "p50_ms": p50,
        "p99_ms": p99,
        "p999_ms": percentile(&latencies, 0.999),
        "p99_over_p50": p99 / p50,
    }));
}
