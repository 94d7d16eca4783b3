//! Scenario benchmarks, side by side in one run, reported as JSON lines on stdout.
//!
//! `cargo xtask bench` runs them in release. `-- --quick` shortens every scenario (for a
//! smoke run); timings from a debug build are meaningless.

// bench code: a panic here is a failed bench, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "scenarios/branches.rs"]
mod branches;
#[path = "scenarios/commit_point.rs"]
mod commit_point;
#[path = "scenarios/feed.rs"]
mod feed;
#[path = "scenarios/fold.rs"]
mod fold;
#[path = "scenarios/heap.rs"]
mod heap;
#[path = "scenarios/http.rs"]
mod http;
#[path = "scenarios/publishers.rs"]
mod publishers;
#[path = "scenarios/queries.rs"]
mod queries;
#[path = "scenarios/reads.rs"]
mod reads;
#[path = "scenarios/s3.rs"]
mod s3;
#[path = "scenarios/write_api.rs"]
mod write_api;

#[global_allocator]
static ALLOCATOR: heap::Counting = heap::Counting;

use lance::dataset::mem_wal::DatasetMemWalExt;
use serde_json::json;
use tributary::{Graph, LoadOptions, WriterSettings};
use tributary_tests::{ndjson, person, wal_entries, SCHEMA};

struct Settings {
    one_row_loads: usize,
    thousand_row_loads: usize,
    /// 1-row sends per producer, for 1 / 16 / 64 producers.
    sends_per_producer: [usize; 3],
    thousand_row_sends: usize,
    fold_pending: &'static [usize],
    fold_history: [usize; 2],
    sustained: Duration,
    /// Folded base rows, pending (unfolded) rows per run, and lookups, of the read scenario.
    read_base: usize,
    read_pending: &'static [usize],
    read_lookups: usize,
    /// One-row load commits under a fresh process's cold `get` and `log`.
    cold_read_commits: &'static [usize],
    /// (base rows, pending rows) of the fold-vs-raw-merge scenario.
    fold_merge: &'static [(usize, usize)],
    /// The feed's replay: a table of this many rows, and a fold changing this many.
    feed: (usize, usize),
    /// Commits a following consumer times.
    feed_follow_commits: usize,
    /// (base rows, pending lines) of the fold of upserts beside one with 10% deletes and
    /// 10% patches.
    fold_mix: &'static [(usize, usize)],
    /// Pending rows of the `@embed` fold scenario.
    fold_embed: usize,
    /// Rows per fold, and the backlogs folded with it, of the fold-memory scenario.
    fold_memory: (u64, [usize; 2]),
    /// (base rows, pending rows) of the schema change scenario.
    schema_apply: (usize, usize),
    /// 1-row sends, plain and as a producer.
    producer_sends: usize,
    /// Commit depths of the commit-point scenario, and the rounds timed at each.
    commit_depths: &'static [usize],
    commit_rounds: usize,
    /// Base rows of the branch scenario, and the keys each merge carries.
    branches: (usize, usize),
    /// Nodes, edges and runs per query of the queries-vs-Kuzu scenario.
    queries: (usize, usize, usize),
}

const PRODUCERS: [usize; 3] = [1, 16, 64];

/// Latency and throughput of one scenario.
struct Measured {
    p50_ms: f64,
    p99_ms: f64,
    rows_per_s: f64,
    /// WAL entries (`.arrow` files) the table's MemWAL holds afterwards: how many group
    /// commits the sends shared.
    wal_appends: f64,
}

fn measured(
    mut latencies: Vec<Duration>,
    rows: usize,
    elapsed: Duration,
    graph_dir: &std::path::Path,
) -> Measured {
    latencies.sort();
    Measured {
        p50_ms: percentile(&latencies, 0.5),
        p99_ms: percentile(&latencies, 0.99),
        rows_per_s: rows as f64 / elapsed.as_secs_f64(),
        wal_appends: wal_entries(&graph_dir.to_string_lossy(), "nodes/Person.lance") as f64,
    }
}

/// Ingest and the raw put, each run twice in the order ingest, raw, raw, ingest (the disk
/// and page cache drift over a run, so whichever ran second would be favoured); the mean
/// of the two runs of each.
async fn ingest_and_raw(producers: usize, sends: usize, rows: usize) -> (Measured, Measured) {
    let ingest_first = ingest_scenario(producers, sends, rows).await;
    let raw_first = raw_put_scenario(producers, sends, rows).await;
    let raw_second = raw_put_scenario(producers, sends, rows).await;
    let ingest_second = ingest_scenario(producers, sends, rows).await;
    (
        ingest_first.mean(&ingest_second),
        raw_first.mean(&raw_second),
    )
}

impl Measured {
    fn mean(&self, other: &Measured) -> Measured {
        Measured {
            p50_ms: (self.p50_ms + other.p50_ms) / 2.0,
            p99_ms: (self.p99_ms + other.p99_ms) / 2.0,
            rows_per_s: (self.rows_per_s + other.rows_per_s) / 2.0,
            wal_appends: (self.wal_appends + other.wal_appends) / 2.0,
        }
    }
}

/// `producers` tasks each making `sends` ingest sends of `rows` rows; acked rows/s.
async fn ingest_scenario(producers: usize, sends: usize, rows: usize) -> Measured {
    let dir = tempfile::tempdir().expect("temp dir");
    let graph = Arc::new(
        Graph::init(&dir.path().join("g").to_string_lossy(), SCHEMA)
            .await
            .expect("init"),
    );
    // Enrol and warm the writer outside the measurement.
    graph
        .ingest("main")
        .expect("ingest")
        .send(1, &ndjson(&[person("warm", 1)]))
        .await
        .expect("warm");
    // Like the raw scenario's batches, the producers' texts exist before timing starts.
    let texts = |p: usize| -> Vec<String> {
        (0..sends)
            .map(|s| {
                let lines: Vec<String> = (0..rows)
                    .map(|r| person(&format!("p{p}-{s}-{r}"), 30))
                    .collect();
                ndjson(&lines)
            })
            .collect()
    };
    let texts: Vec<Vec<String>> = (0..producers).map(texts).collect();
    let started = Instant::now();
    let tasks: Vec<_> = texts
        .into_iter()
        .map(|texts| {
            let graph = graph.clone();
            tokio::spawn(async move {
                let ingest = graph.ingest("main").expect("ingest");
                let mut latencies = Vec::with_capacity(sends);
                for text in texts {
                    let t = Instant::now();
                    let ack = ingest.send(1, &text).await.expect("send");
                    assert_eq!(ack.durable_rows as usize, rows);
                    latencies.push(t.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("producer"));
    }
    measured(
        latencies,
        producers * sends * rows,
        started.elapsed(),
        &dir.path().join("g"),
    )
}

/// The same shape of work straight on a Lance `ShardWriter` over the same fsyncing store,
/// with the same writer settings and maintained indexes (the graph enrols the table; the
/// raw writer takes a shard of its own), one Lance put per send: the baseline ingest is
/// measured against (ingest joins concurrent sends into shared puts, so it can beat it).
async fn raw_put_scenario(producers: usize, sends: usize, rows: usize) -> Measured {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let graph = Graph::init(&uri, SCHEMA).await.expect("init");
    graph
        .ingest("main")
        .expect("ingest")
        .warm("Person")
        .await
        .expect("enrol");
    let dataset = graph
        .store()
        .open_dataset("nodes/Person.lance", None)
        .await
        .expect("open");
    let shard = uuid::Uuid::new_v4();
    let writer = Arc::new(
        dataset
            .mem_wal_writer(shard, WriterSettings::default().writer_config(shard))
            .await
            .expect("writer"),
    );
    let schema: arrow_schema::SchemaRef = Arc::new(arrow_schema::Schema::from(dataset.schema()));
    let batch_of = |prefix: String| {
        let lines: Vec<String> = (0..rows)
            .map(|r| person(&format!("{prefix}-{r}"), 30))
            .collect();
        let decoded = tributary_schema::decode_str(&graph.catalog(), &ndjson(&lines));
        let columns = decoded.batches[0].batch.columns().to_vec();
        arrow_array::RecordBatch::try_new(schema.clone(), columns).expect("batch")
    };
    let started = Instant::now();
    let tasks: Vec<_> = (0..producers)
        .map(|p| {
            let writer = writer.clone();
            let batches: Vec<_> = (0..sends).map(|s| batch_of(format!("p{p}-{s}"))).collect();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(sends);
                for batch in batches {
                    let t = Instant::now();
                    writer.put(vec![batch]).await.expect("put");
                    latencies.push(t.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("producer"));
    }
    measured(
        latencies,
        producers * sends * rows,
        started.elapsed(),
        &dir.path().join("g"),
    )
}

/// As `tributary` does at start: allocations of 1 MiB and more mapped on their own.
fn map_large_allocations() {
    // SAFETY: mallopt only sets an allocator parameter, before any thread is started.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1e3
}

fn report(value: serde_json::Value) {
    println!("{value}");
}

/// Interactive load of 1-row writes: one commit per request.
async fn load_one_row(settings: &Settings) -> f64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let graph = Graph::init(&dir.path().join("g").to_string_lossy(), SCHEMA)
        .await
        .expect("init");
    let mut latencies = Vec::with_capacity(settings.one_row_loads);
    let started = Instant::now();
    for i in 0..settings.one_row_loads {
        let text = ndjson(&[person(&format!("p{i}"), 30)]);
        let t = Instant::now();
        graph
            .load(&text, &LoadOptions::default())
            .await
            .expect("load");
        latencies.push(t.elapsed());
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let per_s = settings.one_row_loads as f64 / elapsed;
    report(json!({
        "scenario": "load_1_row",
        "writes": settings.one_row_loads,
        "p50_ms": percentile(&latencies, 0.5),
        "p99_ms": percentile(&latencies, 0.99),
        "commits_per_s": per_s,
        "rows_per_s": per_s,
    }));
    per_s
}

/// Interactive load of 1,000-row writes.
async fn load_thousand_rows(settings: &Settings) -> f64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let graph = Graph::init(&dir.path().join("g").to_string_lossy(), SCHEMA)
        .await
        .expect("init");
    let mut latencies = Vec::new();
    let started = Instant::now();
    for w in 0..settings.thousand_row_loads {
        let lines: Vec<String> = (0..1_000)
            .map(|i| person(&format!("p{w}-{i}"), 30))
            .collect();
        let text = ndjson(&lines);
        let t = Instant::now();
        graph
            .load(&text, &LoadOptions::default())
            .await
            .expect("load");
        latencies.push(t.elapsed());
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let rows_per_s = (settings.thousand_row_loads * 1_000) as f64 / elapsed;
    report(json!({
        "scenario": "load_1000_rows",
        "writes": settings.thousand_row_loads,
        "p50_ms": percentile(&latencies, 0.5),
        "p99_ms": percentile(&latencies, 0.99),
        "rows_per_s": rows_per_s,
    }));
    rows_per_s
}

/// Scenario groups, selectable with `--only=GROUP[,GROUP]` (all by default).
const GROUPS: [&str; 16] = [
    "load",
    "ingest",
    "fold",
    "fold_merge",
    "fold_memory",
    "fold_mix",
    "fold_embed",
    "http",
    "reads",
    "commit_point",
    "write_api",
    "s3",
    "branches",
    "queries",
    "publishers",
    "feed",
];

fn main() {
    let started = Instant::now();
    if let Some(uri) =
        std::env::args().find_map(|a| a.strip_prefix(fold::FOLD_FLAG).map(str::to_owned))
    {
        map_large_allocations();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(fold::fold_process(&uri, started));
        return;
    }
    if let Some(uri) =
        std::env::args().find_map(|a| a.strip_prefix(reads::COLD_READ_FLAG).map(str::to_owned))
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(reads::cold_read_process(&uri, started));
        return;
    }
    if let Some(spec) =
        std::env::args().find_map(|a| a.strip_prefix(http::SERVER_FLAG).map(str::to_owned))
    {
        heap::stop_counting();
        map_large_allocations();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(http::server_process(&spec));
        return;
    }
    if let Some(spec) =
        std::env::args().find_map(|a| a.strip_prefix(feed::FEED_FLAG).map(str::to_owned))
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(feed::feed_process(&spec));
        return;
    }
    if let Some(spec) =
        std::env::args().find_map(|a| a.strip_prefix(s3::OWNER_FLAG).map(str::to_owned))
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(s3::owner_process(&spec));
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let only: Vec<String> = std::env::args()
        .filter_map(|a| a.strip_prefix("--only=").map(str::to_owned))
        .flat_map(|list| list.split(',').map(str::to_owned).collect::<Vec<_>>())
        .collect();
    if let Some(unknown) = only.iter().find(|g| !GROUPS.contains(&g.as_str())) {
        eprintln!(
            "unknown scenario group `{unknown}` (groups: {})",
            GROUPS.join(", ")
        );
        std::process::exit(2);
    }
    let runs = |group: &str| only.is_empty() || only.iter().any(|g| g == group);
    let settings = if quick {
        Settings {
            one_row_loads: 20,
            thousand_row_loads: 3,
            sends_per_producer: [50, 10, 5],
            thousand_row_sends: 10,
            fold_pending: &[10_000],
            fold_history: [10, 100],
            sustained: Duration::from_secs(2),
            read_base: 10_000,
            read_pending: &[0, 1_000],
            read_lookups: 20,
            cold_read_commits: &[20, 100],
            fold_merge: &[(10_000, 10_000)],
            fold_mix: &[(10_000, 10_000)],
            fold_embed: 2_000,
            schema_apply: (10_000, 10_000),
            producer_sends: 100,
            fold_memory: (5_000, [5_000, 20_000]),
            commit_depths: &[10, 1_000],
            commit_rounds: 20,
            branches: (10_000, 1_000),
            queries: (20_000, 100_000, 3),
            feed: (10_000, 10_000),
            feed_follow_commits: 20,
        }
    } else {
        Settings {
            one_row_loads: 300,
            thousand_row_loads: 30,
            sends_per_producer: [2_000, 300, 100],
            thousand_row_sends: 200,
            fold_pending: &[10_000, 100_000, 1_000_000],
            fold_history: [10, 1_000],
            sustained: Duration::from_secs(60),
            read_base: 100_000,
            read_pending: &[0, 10_000, 100_000],
            read_lookups: 200,
            cold_read_commits: &[20, 4_000],
            fold_merge: &[(1_000_000, 100_000), (1_000_000, 1_000_000)],
            fold_mix: &[(1_000_000, 100_000)],
            fold_embed: 100_000,
            schema_apply: (1_000_000, 100_000),
            producer_sends: 2_000,
            fold_memory: (250_000, [250_000, 1_000_000]),
            commit_depths: &[10, 1_000, 100_000],
            commit_rounds: 100,
            branches: (1_000_000, 1_000),
            queries: (1_000_000, 5_000_000, 5),
            feed: (1_000_000, 1_000_000),
            feed_follow_commits: 200,
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        // Ingest and the sustained fold report their rate against the 1-row load's.
        let (load_rows_per_s, load_bulk_rows_per_s) =
            if runs("load") || runs("ingest") || runs("fold") {
                (
                    load_one_row(&settings).await,
                    load_thousand_rows(&settings).await,
                )
            } else {
                (f64::NAN, f64::NAN)
            };
        if runs("ingest") {
            ingest_scenarios(&settings, load_rows_per_s, load_bulk_rows_per_s).await;
        }
        if runs("fold") {
            for &pending in settings.fold_pending {
                fold::fold_throughput(pending).await;
            }
            let [short, long] = settings.fold_history;
            let (ops_short, ms_short) = fold::fold_cost_at_history(short).await;
            let (ops_long, ms_long) = fold::fold_cost_at_history(long).await;
            report(json!({
                "scenario": "fold_cost_growth",
                "histories": [short, long],
                "ops_ratio": ops_long as f64 / ops_short as f64,
                "time_ratio": ms_long / ms_short,
            }));
            fold::sustained(settings.sustained, 4, load_rows_per_s).await;
        }
        if runs("fold_merge") {
            for &(base, pending) in settings.fold_merge {
                fold::fold_vs_merge(base, pending).await;
            }
        }
        if runs("fold_memory") {
            // The cap's worth into an empty table, four times it, and the cap's worth into
            // a table the size the 4x backlog ends at.
            // Then eight, sixteen and thirty-two times it, each beside its last commit
            // alone: resident memory that followed the backlog would show.
            // `FOLD_MEMORY_CASE=N` runs the Nth alone, in a process of its own (what the
            // allocator kept from earlier scenarios then cannot hide a fold's growth).
            let (max_rows, [small, large]) = settings.fold_memory;
            let cases = [
                (small, 0),
                (large, 0),
                (small, large - small),
                (2 * large, 0),
                (small, 2 * large - small),
                (4 * large, 0),
                (small, 4 * large - small),
                (8 * large, 0),
                (small, 8 * large - small),
            ];
            let only: Option<usize> = std::env::var("FOLD_MEMORY_CASE")
                .ok()
                .and_then(|n| n.parse().ok());
            for (i, &(backlog, base)) in cases.iter().enumerate() {
                if only.is_none_or(|n| n == i) {
                    fold::fold_memory(max_rows, backlog, base).await;
                }
            }
        }
        if runs("fold_embed") {
            fold::fold_embed(settings.fold_embed, Duration::from_millis(50)).await;
        }
        if runs("fold_mix") {
            for &(base, pending) in settings.fold_mix {
                fold::fold_mix(base, pending).await;
            }
        }
        if runs("write_api") {
            let (base, pending) = settings.schema_apply;
            write_api::schema_apply(base, pending).await;
            write_api::producer_sends(settings.producer_sends).await;
        }
        if runs("http") {
            let duration = settings.sustained.min(Duration::from_secs(20));
            use http::Folder::{Held, On};
            // As `tributary serve` runs: its allocator is mimalloc.
            for producers in [16, 64] {
                http::ack_tails(producers, 20, duration, On, "mimalloc").await;
            }
            // One line a request, the shape of many small producers.
            for producers in [1, 16, 64, 256] {
                http::ack_tails(producers, 1, duration, On, "mimalloc").await;
            }
            // What the folds cost the acks (the same without them), and what mimalloc
            // saves (the same under the system's allocator).
            http::ack_tails(64, 1, duration, Held, "mimalloc").await;
            http::ack_tails(64, 1, duration, On, "system").await;
        }
        if runs("commit_point") {
            for &depth in settings.commit_depths {
                commit_point::at_depth(depth, settings.commit_rounds).await;
            }
        }
        if runs("publishers") {
            let (loads, rounds) = if quick { (20, 10) } else { (200, 50) };
            let (depths, record_depths): (&[usize], &[usize]) = if quick {
                (&[10, 1_000], &[])
            } else {
                (&[10, 1_000, 10_000], &[100_000])
            };
            let local = publishers::Place::Local;
            publishers::side_by_side(local, loads, depths, record_depths, rounds).await;
            for latency_ms in [0, 20] {
                let server = tributary_tests::s3_server::S3Server::start_with(&[
                    "--latency-ms",
                    &latency_ms.to_string(),
                ]);
                let place = publishers::Place::S3 {
                    server: &server,
                    latency_ms,
                };
                // At 20 ms a request, a thousand commits take minutes to make: 10 only.
                let depths: &[usize] = if latency_ms == 0 {
                    &depths[..2]
                } else {
                    &depths[..1]
                };
                publishers::side_by_side(place, loads.min(50), depths, &[], rounds.min(20)).await;
            }
        }
        if runs("s3") {
            let s3_settings = s3::S3Settings {
                duration: settings.sustained.min(Duration::from_secs(10)),
                loads: if quick { 3 } else { 20 },
            };
            for latency_ms in [0, 20] {
                s3::scenarios(latency_ms, &s3_settings).await;
            }
        }
        if runs("branches") {
            let (base, changed) = settings.branches;
            branches::costs(base, changed).await;
        }
        if runs("feed") {
            let (base, changed) = settings.feed;
            feed::replay(base, changed).await;
            feed::follow_delay(settings.feed_follow_commits, Duration::from_millis(50)).await;
        }
        if runs("queries") {
            let (nodes, edges, query_runs) = settings.queries;
            queries::versus_kuzu(nodes, edges, query_runs).await;
        }
        if runs("reads") {
            for &pending in settings.read_pending {
                reads::fresh_vs_snapshot(settings.read_base, pending, settings.read_lookups).await;
            }
            for &commits in settings.cold_read_commits {
                reads::cold_reads(commits, 10).await;
            }
        }
    });
}

/// 1-row sends at 1, 16 and 64 producers and 1,000-row sends, ingest beside the raw put.
async fn ingest_scenarios(settings: &Settings, load_rows_per_s: f64, load_bulk_rows_per_s: f64) {
    for (i, producers) in PRODUCERS.into_iter().enumerate() {
        let sends = settings.sends_per_producer[i];
        let (ingest, raw) = ingest_and_raw(producers, sends, 1).await;
        report(json!({
            "scenario": "ingest_1_row",
            "producers": producers,
            "sends": producers * sends,
            "ingest": {"p50_ms": ingest.p50_ms, "p99_ms": ingest.p99_ms, "rows_per_s": ingest.rows_per_s, "wal_appends": ingest.wal_appends},
            "raw_put": {"p50_ms": raw.p50_ms, "p99_ms": raw.p99_ms, "rows_per_s": raw.rows_per_s, "wal_appends": raw.wal_appends},
            "load_rows_per_s": load_rows_per_s,
            "ingest_over_load": ingest.rows_per_s / load_rows_per_s,
            "ingest_p50_over_raw_p50": ingest.p50_ms / raw.p50_ms,
            "ingest_over_raw_rows": ingest.rows_per_s / raw.rows_per_s,
        }));
    }
    let (ingest, raw) = ingest_and_raw(1, settings.thousand_row_sends, 1_000).await;
    report(json!({
        "scenario": "ingest_1000_rows",
        "producers": 1,
        "sends": settings.thousand_row_sends,
        "ingest": {"p50_ms": ingest.p50_ms, "p99_ms": ingest.p99_ms, "rows_per_s": ingest.rows_per_s},
        "raw_put": {"p50_ms": raw.p50_ms, "p99_ms": raw.p99_ms, "rows_per_s": raw.rows_per_s},
        "load_rows_per_s": load_bulk_rows_per_s,
        "ingest_over_load": ingest.rows_per_s / load_bulk_rows_per_s,
        "ingest_p50_over_raw_p50": ingest.p50_ms / raw.p50_ms,
    }));
}
