//! Branch costs: creating a branch of a graph with a large base, and merging 1,000 changed
//! keys back, as a fast-forward and as a three-way merge (object-store operations and
//! time).

use std::time::Instant;

use serde_json::json;
use tributary::{At, Graph, LoadOptions, OpCounter, OpKind};
use tributary_tests::{ndjson, person, SCHEMA};

use crate::report;

const LOAD_ROWS: usize = 10_000;

async fn load(graph: &Graph, branch: &str, prefix: &str, range: std::ops::Range<usize>, age: i32) {
    let options = LoadOptions {
        branch: tributary::branch(branch).unwrap(),
        ..LoadOptions::default()
    };
    let mut start = range.start;
    while start < range.end {
        let end = (start + LOAD_ROWS).min(range.end);
        let lines: Vec<String> = (start..end)
            .map(|i| person(&format!("{prefix}{i}"), age))
            .collect();
        graph.load(&ndjson(&lines), &options).await.unwrap();
        start = end;
    }
}

/// Operations since `before`: all, and the writes (PUTs) among them.
fn ops(counter: &OpCounter, before: &tributary::OpCounts) -> (u64, u64) {
    let since = counter.snapshot().since(before);
    let puts = since
        .ops
        .iter()
        .filter(|((kind, _), _)| matches!(kind, OpKind::Put | OpKind::PutMultipart))
        .map(|(_, n)| n)
        .sum();
    (since.total(), puts)
}

pub async fn costs(base: usize, changed: usize) {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    Graph::init(&uri, SCHEMA).await.unwrap();
    let counter = OpCounter::new();
    let graph = Graph::builder(&uri)
        .counted(counter.clone())
        .open()
        .await
        .unwrap();
    load(&graph, "main", "p", 0..base, 1).await;

    let before = counter.snapshot();
    let started = Instant::now();
    graph.create_branch("dev", &At::default()).await.unwrap();
    let create_ms = started.elapsed().as_secs_f64() * 1e3;
    let (create_ops, create_puts) = ops(&counter, &before);

    // Half updates of base keys, half new keys, in one load on the branch.
    load(&graph, "dev", "p", 0..changed / 2, 2).await;
    load(&graph, "dev", "new", 0..changed - changed / 2, 2).await;
    let before = counter.snapshot();
    let started = Instant::now();
    let fast = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    let ff_ms = started.elapsed().as_secs_f64() * 1e3;
    let (ff_ops, ff_puts) = ops(&counter, &before);

    // Both sides move: the same number of changes on the branch, others on main.
    load(&graph, "dev", "p", changed..changed + changed / 2, 3).await;
    load(&graph, "dev", "later", 0..changed - changed / 2, 3).await;
    load(&graph, "main", "p", 2 * changed..3 * changed, 4).await;
    let before = counter.snapshot();
    let started = Instant::now();
    let three_way = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    let three_way_ms = started.elapsed().as_secs_f64() * 1e3;
    let (three_way_ops, three_way_puts) = ops(&counter, &before);
    assert_eq!(fast.rows.get("Person").copied(), Some(changed as u64));
    assert_eq!(three_way.rows.get("Person").copied(), Some(changed as u64));

    report(json!({
        "scenario": "branch_costs",
        "base_rows": base,
        "changed_keys": changed,
        "create_ms": create_ms,
        "create_ops": create_ops,
        "create_puts": create_puts,
        "fast_forward_merge_ms": ff_ms,
        "fast_forward_merge_ops": ff_ops,
        "fast_forward_merge_puts": ff_puts,
        "three_way_merge_ms": three_way_ms,
        "three_way_merge_ops": three_way_ops,
        "three_way_merge_puts": three_way_puts,
    }));
}
