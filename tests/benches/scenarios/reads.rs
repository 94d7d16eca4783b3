//! Read scenarios: point lookups and filtered scans, snapshot vs fresh, over a folded base
//! with 0, 10k and 100k acknowledged rows pending (flushed, not folded).

use std::time::{Duration, Instant};

use serde_json::json;
use tributary::{At, Graph, ReadOptions, View};
use tributary_tests::{ndjson, person, SCHEMA};

use crate::{percentile, report};

const SEND_ROWS: usize = 10_000;

async fn ingest_people(graph: &Graph, prefix: &str, rows: usize, age: impl Fn(usize) -> i32) {
    let ingest = graph.ingest("main").expect("ingest");
    let mut sent = 0;
    while sent < rows {
        let n = SEND_ROWS.min(rows - sent);
        let lines: Vec<String> = (sent..sent + n)
            .map(|i| person(&format!("{prefix}{i}"), age(i)))
            .collect();
        ingest.send(1, &ndjson(&lines)).await.expect("send");
        sent += n;
    }
}

/// Median latency of `lookups` gets of spread-out keys, in ms.
async fn point_lookups(graph: &Graph, view: &View, keys: &[String]) -> f64 {
    let mut latencies = Vec::with_capacity(keys.len());
    for key in keys {
        let started = Instant::now();
        let row = graph.get("Person", key, view.clone()).await.expect("get");
        latencies.push(started.elapsed());
        assert!(row.is_some(), "{key} exists");
    }
    latencies.sort();
    percentile(&latencies, 0.5)
}

/// Median latency of a filtered scan (about 1% of the rows), in ms.
async fn scans(graph: &Graph, fresh: bool, runs: usize) -> (f64, usize) {
    let options = ReadOptions {
        fresh,
        filter: Some("age = 7".into()),
        ..Default::default()
    };
    let mut latencies: Vec<Duration> = Vec::with_capacity(runs);
    let mut rows = 0;
    for _ in 0..runs {
        let started = Instant::now();
        rows = graph
            .read("Person", &options)
            .await
            .expect("scan")
            .num_rows();
        latencies.push(started.elapsed());
    }
    latencies.sort();
    (percentile(&latencies, 0.5), rows)
}

/// A base of `base` folded rows, then `pending` more acknowledged and flushed but not
/// folded; lookups of keys in the base and (when there are any) in the pending tier.
pub async fn fresh_vs_snapshot(base: usize, pending: usize, lookups: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let graph = Graph::init(&uri, SCHEMA).await.expect("init");
    // Ages 0..100 in the base: the scan filter `age = 7` keeps 1% of it, and every
    // pending row.
    ingest_people(&graph, "b", base, |i| (i % 100) as i32).await;
    graph.fold("main").await.expect("fold");
    ingest_people(&graph, "n", pending, |_| 7).await;
    graph.close_writers().await.expect("flush");
    // A separate open reads what another process would: the base plus flushed generations.
    let reader = Graph::open(&uri).await.expect("open");

    let step = (base / lookups).max(1);
    let base_keys: Vec<String> = (0..lookups).map(|i| format!("b{}", i * step)).collect();
    let snapshot = View::from(At::default());
    let fresh = View::fresh(At::default());
    let snapshot_ms = point_lookups(&reader, &snapshot, &base_keys).await;
    let fresh_base_ms = point_lookups(&reader, &fresh, &base_keys).await;
    let fresh_pending_ms = if pending > 0 {
        let step = (pending / lookups).max(1);
        let keys: Vec<String> = (0..lookups).map(|i| format!("n{}", i * step)).collect();
        Some(point_lookups(&reader, &fresh, &keys).await)
    } else {
        None
    };
    let (scan_snapshot_ms, snapshot_rows) = scans(&reader, false, 10).await;
    let (scan_fresh_ms, fresh_rows) = scans(&reader, true, 10).await;
    assert_eq!(fresh_rows, snapshot_rows + pending);
    report(json!({
        "scenario": "fresh_vs_snapshot_reads",
        "base_rows": base,
        "pending_rows": pending,
        "get_p50_ms": {
            "snapshot": snapshot_ms,
            "fresh_key_in_base": fresh_base_ms,
            "fresh_key_pending": fresh_pending_ms,
        },
        "fresh_get_over_snapshot_get": fresh_base_ms / snapshot_ms,
        "scan_p50_ms": {"snapshot": scan_snapshot_ms, "fresh": scan_fresh_ms},
        "scan_rows": {"snapshot": snapshot_rows, "fresh": fresh_rows},
        "fresh_scan_over_snapshot_scan": scan_fresh_ms / scan_snapshot_ms,
    }));
}

/// The flag that makes this binary a cold reader: `--cold-read=URI`.
pub const COLD_READ_FLAG: &str = "--cold-read=";

/// The body of a cold reader, as `tributary get URI Person p0` then `tributary log URI
/// --limit 5` would run: open, get, log; prints what each took as JSON (`started` is
/// when `main` began).
pub async fn cold_read_process(uri: &str, started: Instant) {
    let start_ms = started.elapsed().as_secs_f64() * 1e3;
    let opening = Instant::now();
    let graph = Graph::open(uri).await.expect("open");
    let open_ms = opening.elapsed().as_secs_f64() * 1e3;
    let getting = Instant::now();
    let row = graph.get("Person", "p0", At::default()).await.expect("get");
    let get_ms = getting.elapsed().as_secs_f64() * 1e3;
    assert!(row.is_some_and(|r| r.num_rows() == 1), "p0 is there");
    let logging = Instant::now();
    let commits = graph.log("main", 5).await.expect("log");
    let log_ms = logging.elapsed().as_secs_f64() * 1e3;
    assert_eq!(commits.len(), 5);
    println!(
        "{}",
        json!({"start_ms": start_ms, "open_ms": open_ms, "get_ms": get_ms, "log_ms": log_ms})
    );
}

/// A fresh process's `get` and `log --limit 5` on a graph of `commits` one-row load
/// commits (each moves the Person table a version): `processes` of them one after
/// another, each timed from its start to its exit, with its open, get and log apart.
pub async fn cold_reads(commits: usize, processes: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let graph = Graph::init(&uri, SCHEMA).await.expect("init");
    let built = Instant::now();
    for i in 0..commits {
        let text = ndjson(&[person(&format!("p{i}"), 30)]);
        graph
            .load(&text, &tributary::LoadOptions::default())
            .await
            .expect("load");
    }
    let build_s = built.elapsed().as_secs_f64();
    drop(graph);
    let exe = std::env::current_exe().expect("this bench");
    let mut wall = Vec::new();
    let mut parts: Vec<serde_json::Value> = Vec::new();
    for _ in 0..processes {
        let started = Instant::now();
        let output = std::process::Command::new(&exe)
            .arg(format!("{COLD_READ_FLAG}{uri}"))
            .output()
            .expect("a cold reader");
        wall.push(started.elapsed());
        assert!(
            output.status.success(),
            "the cold reader: {}",
            output.status
        );
        parts.push(serde_json::from_slice(&output.stdout).expect("its report"));
    }
    wall.sort();
    let median = |field: &str| {
        let mut values: Vec<f64> = parts.iter().filter_map(|p| p[field].as_f64()).collect();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    report(json!({
        "scenario": "cold_reads",
        "commits": commits,
        "history_build_s": build_s,
        "processes": processes,
        "process_p50_ms": percentile(&wall, 0.5),
        "open_p50_ms": median("open_ms"),
        "get_p50_ms": median("get_ms"),
        "log_5_p50_ms": median("log_ms"),
    }));
}
