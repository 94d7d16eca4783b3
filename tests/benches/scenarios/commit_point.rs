//! The commit point at depth: publish, head read, snapshot open (one commit by id) and
//! `log --limit 10`, timed at 10, 1,000 and 100,000 commits on `main`.

use std::time::{Duration, Instant};

use serde_json::json;
use tributary::{BranchName, CommitId};
use tributary_publisher::{CommitKind, CommitRecord, PublishPlan, Publisher};

use crate::{percentile, report};

/// A 1-row load's plan on `head` (no table moves: the commit point alone).
pub fn plan_on(head: &CommitRecord) -> PublishPlan {
    PublishPlan {
        branch: BranchName::main(),
        expected_head: Some(head.id.clone()),
        tables: Default::default(),
        rows_written: Default::default(),
        actor: "bench".into(),
        kind: CommitKind::Load,
        intent: None,
        commit_id: None,
        folded: Vec::new(),
        idempotency_key: None,
        producers: Default::default(),
        schema: None,
        fork: None,
        merged: None,
    }
}

fn summary(mut samples: Vec<Duration>) -> serde_json::Value {
    samples.sort();
    let mean = samples.iter().sum::<Duration>().as_secs_f64() * 1e3 / samples.len() as f64;
    json!({
        "mean_ms": mean,
        "p50_ms": percentile(&samples, 0.5),
        "p99_ms": percentile(&samples, 0.99),
    })
}

/// Time each commit-point operation `rounds` times on a graph of `depth` commits. Publishes
/// include their upkeep, so the mean carries its share.
pub async fn at_depth(depth: usize, rounds: usize) {
    let (_dir, uri, graph) = tributary_tests::temp_graph().await;
    drop(graph);
    let built = Instant::now();
    tributary_tests::history::grow_history(&uri, depth.saturating_sub(1)).await;
    let build_s = built.elapsed().as_secs_f64();
    let graph = tributary::Graph::open(&uri).await.expect("open");
    let publisher = graph.publisher();
    let main = BranchName::main();
    let mut head = publisher.head(&main).await.expect("head");
    let (mut publish, mut read_head, mut open, mut log) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let started = Instant::now();
        head = publisher.publish(plan_on(&head)).await.expect("publish");
        publish.push(started.elapsed());
        let started = Instant::now();
        publisher.head(&main).await.expect("head");
        read_head.push(started.elapsed());
        let parent: CommitId = head.parent.clone().expect("parent");
        let started = Instant::now();
        publisher.commit(&parent).await.expect("commit");
        open.push(started.elapsed());
        let started = Instant::now();
        let commits = publisher.log(&main, 10).await.expect("log");
        log.push(started.elapsed());
        assert_eq!(commits.len(), 10.min(depth + publish.len()));
    }
    report(json!({
        "scenario": "commit_point",
        "commits": depth,
        "history_build_s": build_s,
        "publish": summary(publish),
        "head": summary(read_head),
        "snapshot_open": summary(open),
        "log_10": summary(log),
    }));
}
