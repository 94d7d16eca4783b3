//! The write API's costs beside the plain paths, on one machine in one run: a schema
//! change with and without a backlog to fold first (the fold to quiescence it does), and
//! filling a defaulted field over stored rows; and 1-row sends as a producer (its lease,
//! mark and order checks) beside plain sends.

use std::time::Instant;

use serde_json::json;
use tributary::{Graph, IngestOptions, Producer};
use tributary_tests::{ndjson, person, SCHEMA};

use crate::fold::ingest_rows;
use crate::report;

fn with_fields(fields: &str) -> String {
    SCHEMA.replace(
        "  embedding: Vector(8)? @embed(bio)\n}",
        &format!("  embedding: Vector(8)? @embed(bio)\n{fields}}}"),
    )
}

async fn graph_with(base: usize) -> (tempfile::TempDir, Graph) {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    Graph::init(&uri, SCHEMA).await.expect("init");
    let graph = Graph::open(&uri).await.expect("open");
    ingest_rows(&graph, "b", base).await;
    graph.fold("main").await.expect("base fold");
    (dir, graph)
}

fn ms_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// `schema apply` over `base` stored rows, with `pending` acknowledged rows waiting.
pub async fn schema_apply(base: usize, pending: usize) {
    // The backlog folded on its own, then the change with nothing to fold.
    let (_a, graph) = graph_with(base).await;
    ingest_rows(&graph, "n", pending).await;
    let started = Instant::now();
    graph.fold("main").await.expect("fold");
    let fold_ms = ms_since(started);
    let started = Instant::now();
    graph
        .apply_schema(&with_fields("  nickname: String?\n"))
        .await
        .expect("nullable field");
    let nullable_ms = ms_since(started);
    let started = Instant::now();
    graph
        .apply_schema(&with_fields("  nickname: String?\n  level: I32 = 3\n"))
        .await
        .expect("defaulted field");
    let defaulted_ms = ms_since(started);
    drop(graph);

    // The same change with the backlog still waiting: it folds first.
    let (_b, graph) = graph_with(base).await;
    ingest_rows(&graph, "n", pending).await;
    let started = Instant::now();
    let outcome = graph
        .apply_schema(&with_fields("  nickname: String?\n"))
        .await
        .expect("nullable field over a backlog");
    let with_backlog_ms = ms_since(started);
    assert_eq!(outcome.folded_rows as usize, pending);
    report(json!({
        "scenario": "schema_apply",
        "base_rows": base,
        "pending_rows": pending,
        "fold_alone_ms": fold_ms,
        "apply_nullable_field_ms": nullable_ms,
        "apply_defaulted_field_ms": defaulted_ms,
        "apply_over_backlog_ms": with_backlog_ms,
        "backlog_apply_over_fold_plus_apply": with_backlog_ms / (fold_ms + nullable_ms),
    }));
}

/// 1-row sends, one at a time, plain and as a producer.
pub async fn producer_sends(sends: usize) {
    let mut rates = Vec::new();
    for as_producer in [false, true] {
        let dir = tempfile::tempdir().expect("temp dir");
        let uri = dir.path().join("g").to_string_lossy().into_owned();
        let graph = Graph::init(&uri, SCHEMA).await.expect("init");
        let options = IngestOptions {
            producer: as_producer.then(|| Producer::new("bench", 1).expect("producer")),
            ..IngestOptions::default()
        };
        let ingest = graph.ingestor(&options).expect("ingest");
        let started = Instant::now();
        for i in 0..sends {
            let line = ndjson(&[person(&format!("p{i}"), 1)]);
            let ack = ingest.send(i as u64 + 1, &line).await.expect("send");
            assert_eq!(ack.durable_rows, 1);
        }
        rates.push(sends as f64 / started.elapsed().as_secs_f64());
        drop(ingest);
        graph.close_writers().await.expect("close");
    }
    report(json!({
        "scenario": "producer_sends",
        "sends": sends,
        "plain_sends_per_s": rates[0],
        "producer_sends_per_s": rates[1],
        "producer_over_plain": rates[1] / rates[0],
    }));
}
