//! The two publishers side by side, on one store at a time (a local disk, the test S3
//! server at 0 and 20 ms per request): 1-row loads through the whole write path
//! (commits/s, p50/p99, object-store operations per load), and the commit point alone at
//! 10, 1,000 and 10,000 commits, the record publisher's also at 100,000 (publish, head read, one commit by id, `log --limit 10`, with the
//! operations of a publish and of a head read).

use std::time::{Duration, Instant};

use serde_json::json;
use tributary::{BranchName, Graph, LoadOptions, PublisherKind};
use tributary_publisher::Publisher;
use tributary_storage::{OpCounter, StoreOptions};
use tributary_tests::s3_server::S3Server;
use tributary_tests::{ndjson, person, s3_options, SCHEMA};

use super::commit_point::plan_on;
use super::{percentile, report};

/// Where the graphs live.
pub enum Place<'a> {
    Local,
    S3 {
        server: &'a S3Server,
        latency_ms: u64,
    },
}

impl Place<'_> {
    fn name(&self) -> String {
        match self {
            Place::Local => "local".to_owned(),
            Place::S3 { latency_ms, .. } => format!("s3_{latency_ms}ms"),
        }
    }
}

fn ms(mut samples: Vec<Duration>) -> serde_json::Value {
    samples.sort();
    json!({
        "p50_ms": percentile(&samples, 0.5),
        "p99_ms": percentile(&samples, 0.99),
    })
}

/// Every measurement of both publishers at `place`; the record publisher's commit point
/// also at `record_depths` (the manifest publisher takes a quarter of an hour per ten
/// thousand commits to get there).
pub async fn side_by_side(
    place: Place<'_>,
    loads: usize,
    depths: &[usize],
    record_depths: &[usize],
    rounds: usize,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    for kind in PublisherKind::ALL {
        let counter = OpCounter::new();
        let (uri, options) = match &place {
            Place::Local => (
                dir.path()
                    .join(kind.to_string())
                    .to_string_lossy()
                    .into_owned(),
                StoreOptions::default(),
            ),
            Place::S3 { server, .. } => (server.uri(&format!("pub-{kind}")), s3_options(server)),
        };
        let graph = Graph::builder(&uri)
            .publisher(kind)
            .store_options(StoreOptions {
                counter: Some(counter.clone()),
                ..options
            })
            .init(SCHEMA)
            .await
            .expect("init");
        one_row_loads(&graph, &place, kind, &counter, loads).await;
        let deeper = match kind {
            PublisherKind::Record => record_depths,
            PublisherKind::Manifest => &[],
        };
        for &depth in depths.iter().chain(deeper) {
            commit_point(&graph, &place, kind, &counter, depth, rounds).await;
        }
    }
}

async fn one_row_loads(
    graph: &Graph,
    place: &Place<'_>,
    kind: PublisherKind,
    counter: &OpCounter,
    loads: usize,
) {
    let mut latencies = Vec::with_capacity(loads);
    counter.reset();
    let started = Instant::now();
    for i in 0..loads {
        let line = ndjson(&[person(&format!("p{i}"), (i % 100) as i32)]);
        let one = Instant::now();
        graph
            .load(&line, &LoadOptions::default())
            .await
            .expect("load");
        latencies.push(one.elapsed());
    }
    let elapsed = started.elapsed().as_secs_f64();
    let ops = counter.snapshot().total() as f64 / loads as f64;
    report(json!({
        "scenario": "publisher_load_1_row",
        "place": place.name(),
        "publisher": kind.to_string(),
        "loads": loads,
        "commits_per_s": loads as f64 / elapsed,
        "ops_per_load": ops,
        "latency": ms(latencies),
    }));
}

async fn commit_point(
    graph: &Graph,
    place: &Place<'_>,
    kind: PublisherKind,
    counter: &OpCounter,
    depth: usize,
    rounds: usize,
) {
    let publisher = graph.publisher();
    let main = BranchName::main();
    let mut head = publisher.head(&main).await.expect("head");
    let grown = Instant::now();
    while (head.depth as usize) < depth {
        head = publisher.publish(plan_on(&head)).await.expect("publish");
    }
    let grow_s = grown.elapsed().as_secs_f64();
    let (mut publish, mut read_head, mut one, mut log) = (vec![], vec![], vec![], vec![]);
    let (mut publish_ops, mut head_ops) = (0u64, 0u64);
    for _ in 0..rounds {
        counter.reset();
        let started = Instant::now();
        head = publisher.publish(plan_on(&head)).await.expect("publish");
        publish.push(started.elapsed());
        publish_ops += counter.snapshot().total();
        counter.reset();
        let started = Instant::now();
        publisher.head(&main).await.expect("head");
        read_head.push(started.elapsed());
        head_ops += counter.snapshot().total();
        let parent = head.parent.clone().expect("parent");
        let started = Instant::now();
        publisher.commit(&parent).await.expect("commit");
        one.push(started.elapsed());
        let started = Instant::now();
        publisher.log(&main, 10).await.expect("log");
        log.push(started.elapsed());
    }
    report(json!({
        "scenario": "publisher_commit_point",
        "place": place.name(),
        "publisher": kind.to_string(),
        "commits": depth,
        "grow_s": grow_s,
        "publish": ms(publish),
        "publish_ops": publish_ops as f64 / rounds as f64,
        "head": ms(read_head),
        "head_ops": head_ops as f64 / rounds as f64,
        "commit_by_id": ms(one),
        "log_10": ms(log),
    }));
}
