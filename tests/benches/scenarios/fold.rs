//! Fold scenarios: throughput by pending rows, cost at table history 10 vs 1,000, and
//! sustained ingest with the background folder on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use serde_json::json;
use tributary::{Graph, GraphSettings, LoadOptions, OpCounter, ReadOptions};
use tributary_tests::{company, ndjson, person, SCHEMA};

use crate::report;

const SEND_ROWS: usize = 10_000;

pub(crate) async fn ingest_rows(graph: &Graph, prefix: &str, rows: usize) {
    let ingest = graph.ingest("main").expect("ingest");
    let mut sent = 0;
    while sent < rows {
        let n = SEND_ROWS.min(rows - sent);
        let lines: Vec<String> = (sent..sent + n)
            .map(|i| person(&format!("{prefix}{i}"), (i % 100) as i32))
            .collect();
        let ack = ingest.send(1, &ndjson(&lines)).await.expect("send");
        assert_eq!(ack.durable_rows as usize, n);
        sent += n;
    }
}

/// A new graph whose object-store operations are counted.
async fn counted_graph() -> (tempfile::TempDir, OpCounter, Graph) {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    Graph::init(&uri, SCHEMA).await.expect("init");
    let counter = OpCounter::new();
    let graph = Graph::builder(&uri)
        .counted(counter.clone())
        .open()
        .await
        .expect("open");
    (dir, counter, graph)
}

/// Fold `pending` acknowledged rows into an empty table: rows/s of the fold alone.
pub async fn fold_throughput(pending: usize) {
    let (_dir, counter, graph) = counted_graph().await;
    ingest_rows(&graph, "p", pending).await;
    // Memtables flush to generations as they fill, on the ingest path; what is still
    // flushing when the producers stop is timed apart, so the fold's rate is its own.
    let flushing = Instant::now();
    graph.close_writers().await.expect("flush");
    let flush_ms = flushing.elapsed().as_secs_f64() * 1e3;
    let before = counter.snapshot();
    let started = Instant::now();
    let outcome = graph.fold("main").await.expect("fold");
    let elapsed = started.elapsed();
    assert_eq!(outcome.rows["Person"] as usize, pending);
    let generations: u64 = outcome
        .folded
        .iter()
        .map(|f| f.last_generation - f.first_generation + 1)
        .sum();
    report(json!({
        "scenario": "fold_throughput",
        "pending_rows": pending,
        "generations": generations,
        "flush_after_ingest_ms": flush_ms,
        "fold_ms": elapsed.as_secs_f64() * 1e3,
        "rows_per_s": pending as f64 / elapsed.as_secs_f64(),
        "object_store_ops": counter.snapshot().since(&before).total(),
        "stages_ms": outcome.timings,
    }));
}

/// Peak memory of folding a backlog of `backlog` rows with at most `max_rows` per fold
/// (one graph commit each), into a table already holding `base` rows: whether it follows
/// the backlog, or the fold's size and the table's.
pub async fn fold_memory(max_rows: u64, backlog: usize, base: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    Graph::init(&uri, SCHEMA).await.expect("init");
    let mut settings = GraphSettings::default();
    settings.fold.max_rows = max_rows;
    // The CLI's variables for the caches' bounds, to measure others than the defaults.
    let mut caches = tributary::SessionCaches::default();
    let mib_of = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
    };
    if let Some(mib) = mib_of("TRIBUTARY_METADATA_CACHE_MIB") {
        caches.metadata_bytes = mib << 20;
    }
    if let Some(mib) = mib_of("TRIBUTARY_INDEX_CACHE_MIB") {
        caches.index_bytes = mib << 20;
    }
    let counter = OpCounter::new();
    let graph = Graph::builder(&uri)
        .settings(settings)
        .store_options(tributary::StoreOptions {
            caches,
            ..Default::default()
        })
        .counted(counter.clone())
        .open()
        .await
        .expect("open");
    if base > 0 {
        ingest_rows(&graph, "base", base).await;
        graph.fold("main").await.expect("base fold");
    }
    ingest_rows(&graph, "m", backlog).await;
    graph.close_writers().await.expect("flush");
    reset_peak_rss();
    let before = rss_mib();
    let heap_before = crate::heap::reset_peak();
    let (metadata_before, index_before) = graph.store().cache_usage().await;
    let ops_before = counter.snapshot();
    let outcome = graph.fold("main").await.expect("fold");
    let ops = counter.snapshot().since(&ops_before);
    let peak = peak_rss_mib();
    let heap_peak = crate::heap::peak();
    let (metadata_after, index_after) = graph.store().cache_usage().await;
    let added_mib =
        |after: usize, before: usize| after.saturating_sub(before) as f64 / f64::from(1 << 20);
    assert_eq!(outcome.rows["Person"] as usize, backlog);
    report(json!({
        "scenario": "fold_memory",
        "metadata_cache_mib": caches.metadata_bytes >> 20,
        "index_cache_mib": caches.index_bytes >> 20,
        "max_rows_per_fold": max_rows,
        "backlog_rows": backlog,
        "base_rows": base,
        "commits": outcome.commits,
        "fold_peak_rss_added_mib": peak - before,
        // The fold's own allocations at their peak (resident memory adds what the
        // allocator keeps of freed memory).
        "fold_peak_heap_added_mib": heap_peak - heap_before,
        // What each of Lance's session caches took on during the fold.
        "metadata_cache_added_mib": added_mib(metadata_after, metadata_before),
        "index_cache_added_mib": added_mib(index_after, index_before),
        // What the fold read, by kind of object: which reads grow with the table.
        "read_mib": ops
            .bytes
            .iter()
            .filter(|((kind, _), _)| *kind == tributary::OpKind::Get)
            .map(|((_, class), bytes)| (format!("{class:?}"), *bytes as f64 / f64::from(1 << 20)))
            .collect::<std::collections::BTreeMap<_, _>>(),
    }));
}

/// Cost of folding 1,000 rows into a table with `history` earlier commits.
pub async fn fold_cost_at_history(history: usize) -> (u64, f64) {
    let (_dir, counter, graph) = counted_graph().await;
    // History: one small ingest + fold per commit, so the table's versions and the
    // graph's commits both grow.
    for h in 0..history {
        let ack = graph
            .ingest("main")
            .expect("ingest")
            .send(1, &person(&format!("h{h}"), 1))
            .await
            .expect("send");
        assert_eq!(ack.durable_rows, 1);
        graph.fold("main").await.expect("fold");
    }
    let mut measured = Vec::new();
    let mut ops = Vec::new();
    for round in 0..5 {
        ingest_rows(&graph, &format!("r{round}-"), 1_000).await;
        let before = counter.snapshot();
        let started = Instant::now();
        graph.fold("main").await.expect("fold");
        measured.push(started.elapsed());
        ops.push(counter.snapshot().since(&before).total());
    }
    measured.sort();
    ops.sort();
    let median_ms = measured[2].as_secs_f64() * 1e3;
    report(json!({
        "scenario": "fold_cost",
        "table_history": history,
        "rows_folded": 1_000,
        "fold_ms_p50": median_ms,
        "object_store_ops_p50": ops[2],
    }));
    (ops[2], median_ms)
}

/// Producers stream 100-row sends for `duration` with the background folder on; what is
/// acknowledged and what is visible at the end.
pub async fn sustained(duration: Duration, producers: usize, load_rows_per_s: f64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    Graph::init(&uri, SCHEMA).await.expect("init");
    let graph = Arc::new(
        Graph::builder(&uri)
            .settings(GraphSettings::default())
            .open()
            .await
            .expect("open"),
    );
    graph
        .load(&ndjson(&[company("warm")]), &LoadOptions::default())
        .await
        .expect("load");
    graph.start_folder("main").await.expect("folder");
    let started = Instant::now();
    // Producer 0 notes when some of its sends were acknowledged; a watcher sees when the
    // send's first row becomes visible in the snapshot: the acknowledgement-to-visibility
    // lag.
    let (acked_at, mut acks) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let tasks: Vec<_> = (0..producers)
        .map(|p| {
            let graph = graph.clone();
            let acked_at = acked_at.clone();
            tokio::spawn(async move {
                let ingest = graph.ingest("main").expect("ingest");
                let mut rows = 0u64;
                let mut s = 0;
                while started.elapsed() < duration {
                    let lines: Vec<String> = (0..100)
                        .map(|r| person(&format!("p{p}-{s}-{r}"), 30))
                        .collect();
                    rows += ingest
                        .send(1, &ndjson(&lines))
                        .await
                        .expect("send")
                        .durable_rows;
                    // Every tenth send of producer 0: few enough that the watcher keeps up,
                    // so what it measures is the lag, not its own backlog.
                    if p == 0 && s % 10 == 0 {
                        let _ = acked_at.send((format!("p0-{s}-0"), Instant::now()));
                    }
                    s += 1;
                }
                rows
            })
        })
        .collect();
    drop(acked_at);
    let watcher = {
        let graph = graph.clone();
        tokio::spawn(async move {
            // Every 20 ms: the oldest sends not yet seen, checked oldest first (a fold
            // publishes whole generations in order, so visibility follows ack order).
            let mut lags = Vec::new();
            let mut waiting = std::collections::VecDeque::new();
            let mut open = true;
            while open || !waiting.is_empty() {
                loop {
                    match acks.try_recv() {
                        Ok(ack) => waiting.push_back(ack),
                        Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                        Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                            open = false;
                            break;
                        }
                    }
                }
                while let Some((key, at)) = waiting.front() {
                    let seen = graph
                        .get("Person", key, tributary::At::default())
                        .await
                        .expect("get");
                    if seen.is_none() {
                        break;
                    }
                    lags.push(at.elapsed());
                    waiting.pop_front();
                }
                if !open && started.elapsed() > duration + Duration::from_secs(120) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            lags
        })
    };
    let mut acked = 0;
    for task in tasks {
        acked += task.await.expect("producer");
    }
    let ingest_elapsed = started.elapsed();
    let visible_at_end = graph
        .read("Person", &ReadOptions::default())
        .await
        .expect("read")
        .num_rows();
    graph.stop_folder().await;
    let drain = Instant::now();
    graph.fold("main").await.expect("final fold");
    let drain_ms = drain.elapsed().as_secs_f64() * 1e3;
    let folds = graph
        .log("main", 100_000)
        .await
        .expect("log")
        .iter()
        .filter(|c| c.kind == tributary::CommitKind::Fold)
        .count();
    let visible = graph
        .read("Person", &ReadOptions::default())
        .await
        .expect("read")
        .num_rows();
    assert_eq!(
        visible as u64, acked,
        "every acknowledged row is visible after the last fold"
    );
    let mut lags = watcher.await.expect("watcher");
    lags.sort();
    let rows_per_s = acked as f64 / ingest_elapsed.as_secs_f64();
    report(json!({
        "scenario": "sustained_ingest_with_folder",
        "producers": producers,
        "seconds": ingest_elapsed.as_secs_f64(),
        "acked_rows": acked,
        "acked_rows_per_s": rows_per_s,
        "visible_when_producers_stopped": visible_at_end,
        "final_fold_ms": drain_ms,
        "fold_commits": folds,
        "ack_to_visible_samples": lags.len(),
        "ack_to_visible_p50_ms": crate::percentile(&lags, 0.5),
        "ack_to_visible_p99_ms": crate::percentile(&lags, 0.99),
        "over_load_1_row": rows_per_s / load_rows_per_s,
    }));
}

/// Copy a directory tree (a table's folder).
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create copy");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// This process's peak resident memory since the last [`reset_peak_rss`], in MiB.
pub(crate) fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// This process's resident memory now, in MiB.
fn rss_mib() -> f64 {
    status_mib("VmRSS:")
}

fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// Give freed heap back to the system first, so the peak that follows counts what is
/// allocated from here on, not what earlier scenarios left in the allocator's free lists.
fn reset_peak_rss() {
    // SAFETY: malloc_trim only releases free memory of glibc's allocator; it touches no
    // live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The flag that makes this binary a fold process: `--fold-process=URI`.
pub const FOLD_FLAG: &str = "--fold-process=";

/// The body of a fold process, as `tributary ingest fold URI`: open the graph, fold
/// `main`, print what it took as JSON (`started` is when `main` began).
pub async fn fold_process(uri: &str, started: Instant) {
    let heap_before = crate::heap::reset_peak();
    let start_ms = started.elapsed().as_secs_f64() * 1e3;
    let opening = Instant::now();
    let graph = Graph::open(uri).await.expect("open");
    let open_ms = opening.elapsed().as_secs_f64() * 1e3;
    let folding = Instant::now();
    let outcome = graph.fold("main").await.expect("fold");
    let fold_ms = folding.elapsed().as_secs_f64() * 1e3;
    println!(
        "{}",
        json!({
            "start_ms": start_ms,
            "open_ms": open_ms,
            "fold_ms": fold_ms,
            "rows": outcome.rows.values().sum::<u64>(),
            "timings": outcome.timings,
            "peak_rss_mib": peak_rss_mib(),
            "peak_heap_added_mib": crate::heap::peak() - heap_before,
        })
    );
}

/// Fold `pending` streamed rows (half updates of base rows, half new keys) into a table of
/// `base` rows, in a process of its own as `tributary ingest fold` would; beside it,
/// Lance's own merge-insert of the same rows into a copy of the same base table. The
/// ratios (the whole process's and the fold's), where the time went, and peak memory.
pub async fn fold_vs_merge(base: usize, pending: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    Graph::init(&uri, SCHEMA).await.expect("init");
    let graph = Graph::open(&uri).await.expect("open");
    let ingest = graph.ingest("main").expect("ingest");
    let send = |names: Vec<String>, age: i32| {
        let ingest = &ingest;
        async move {
            for chunk in names.chunks(SEND_ROWS) {
                let lines: Vec<String> = chunk.iter().map(|n| person(n, age)).collect();
                ingest.send(1, &ndjson(&lines)).await.expect("send");
            }
        }
    };
    send((0..base).map(|i| format!("b{i}")).collect(), 1).await;
    graph.fold("main").await.expect("base fold");
    let table = dir.path().join("g/nodes/Person.lance");
    let copy = dir.path().join("raw/Person.lance");
    copy_tree(&table, &copy);
    let unindexed_join = dir.path().join("raw-hash-join/Person.lance");
    copy_tree(&table, &unindexed_join);
    // The pending rows are the only ones aged 99: half update base rows, half are new.
    let mut names: Vec<String> = (0..pending / 2).map(|i| format!("b{i}")).collect();
    names.extend((0..pending - pending / 2).map(|i| format!("n{i}")));
    send(names, 99).await;
    graph.close_writers().await.expect("flush");
    drop(ingest);
    drop(graph);

    // The fold as a user runs it: `tributary ingest fold`, a process that opens the graph
    // and folds, timed from its start to its exit.
    let started = Instant::now();
    let output = std::process::Command::new(std::env::current_exe().expect("this bench"))
        .arg(format!("{FOLD_FLAG}{uri}"))
        .output()
        .expect("the fold process");
    let process_s = started.elapsed().as_secs_f64();
    assert!(
        output.status.success(),
        "the fold process: {}",
        output.status
    );
    let fold: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the fold process's report");
    assert_eq!(fold["rows"].as_u64(), Some(pending as u64));
    let fold_s = fold["fold_ms"].as_f64().expect("fold_ms") / 1e3;

    // The same rows, as the fold left them, merged by Lance alone into the copied base.
    let folded = lance::Dataset::open(&table.to_string_lossy())
        .await
        .expect("open folded");
    let mut scan = folded.scan();
    scan.filter("age = 99").expect("filter");
    let rows: Vec<arrow_array::RecordBatch> = scan
        .try_into_stream()
        .await
        .expect("scan")
        .try_collect()
        .await
        .expect("rows");
    let schema = rows[0].schema();
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), pending);
    reset_peak_rss();
    let raw_rss_before = rss_mib();
    let raw_heap_before = crate::heap::reset_peak();
    let raw_s = raw_merge(&copy, rows.clone(), schema.clone(), true).await;
    let raw_peak = peak_rss_mib();
    let raw_heap_peak = crate::heap::peak();
    // Lance's merge joins through the key's index when there is one; its hash join of
    // the whole key column beside it.
    let hash_join_s = raw_merge(&unindexed_join, rows, schema, false).await;
    report(json!({
        "scenario": "fold_vs_raw_merge",
        "allocator": crate::heap::allocator(),
        "base_rows": base,
        "pending_rows": pending,
        "fold_process_ms": process_s * 1e3,
        "fold_process_over_raw": process_s / raw_s,
        "fold_ms": fold_s * 1e3,
        "raw_merge_ms": raw_s * 1e3,
        "raw_merge_hash_join_ms": hash_join_s * 1e3,
        "fold_process_over_hash_join": process_s / hash_join_s,
        "fold_over_raw": fold_s / raw_s,
        "fold_rows_per_s": pending as f64 / fold_s,
        "raw_rows_per_s": pending as f64 / raw_s,
        // Where the fold process's time went before its fold, and the fold's stages.
        "fold_process_start_ms": fold["start_ms"],
        "fold_process_open_ms": fold["open_ms"],
        "stages_ms": fold["timings"],
        // Peak resident memory: the fold process's whole, and what the raw merge added
        // to this process; and their own allocations at their peak.
        "fold_process_peak_rss_mib": fold["peak_rss_mib"],
        "raw_merge_peak_rss_added_mib": raw_peak - raw_rss_before,
        "fold_peak_heap_added_mib": fold["peak_heap_added_mib"],
        "raw_merge_peak_heap_added_mib": raw_heap_peak - raw_heap_before,
    }));
}

/// Lance's merge-insert alone of `rows` into the table at `path` (an upsert on `id`),
/// through the key's index or not; its seconds.
async fn raw_merge(
    path: &std::path::Path,
    rows: Vec<arrow_array::RecordBatch>,
    schema: arrow_schema::SchemaRef,
    use_index: bool,
) -> f64 {
    use lance::dataset::{MergeInsertBuilder, WhenMatched, WhenNotMatched};
    let table = Arc::new(
        lance::Dataset::open(&path.to_string_lossy())
            .await
            .expect("open copy"),
    );
    let started = Instant::now();
    let mut builder = MergeInsertBuilder::try_new(table, vec!["id".into()]).expect("merge");
    builder
        .when_matched(WhenMatched::UpdateAll)
        .when_not_matched(WhenNotMatched::InsertAll)
        .use_index(use_index);
    let source = arrow_array::RecordBatchIterator::new(rows.into_iter().map(Ok), schema);
    builder
        .try_build()
        .expect("build")
        .execute_reader(Box::new(source))
        .await
        .expect("raw merge");
    started.elapsed().as_secs_f64()
}

/// One fold of `pending` lines into a table of `base` rows, all upserts (half of base
/// keys, half new), beside the same with 10% deletes and 10% patches of other base keys
/// in place of upserts: what deletes and patches cost at the fold, and at the send.
pub async fn fold_mix(base: usize, pending: usize) {
    let mut runs = Vec::new();
    for mixed in [false, true] {
        let dir = tempfile::tempdir().expect("temp dir");
        let uri = dir.path().join("g").to_string_lossy().into_owned();
        Graph::init(&uri, SCHEMA).await.expect("init");
        let graph = Graph::open(&uri).await.expect("open");
        ingest_rows(&graph, "b", base).await;
        graph.fold("main").await.expect("base fold");
        let tenth = if mixed { pending / 10 } else { 0 };
        let upserts = pending - 2 * tenth;
        let mut lines: Vec<String> = (0..upserts / 2)
            .map(|i| person(&format!("b{i}"), 99))
            .chain((0..upserts - upserts / 2).map(|i| person(&format!("n{i}"), 99)))
            .collect();
        // Deletes and patches name base keys the upserts leave alone.
        let spare = upserts / 2;
        lines.extend(
            (spare..spare + tenth).map(|i| tributary_tests::delete("Person", &format!("b{i}"))),
        );
        lines.extend(
            (spare + tenth..spare + 2 * tenth)
                .map(|i| format!(r#"{{"type":"Person","patch":{{"name":"b{i}","age":98}}}}"#)),
        );
        // Spread deletes and patches through the stream, as producers would send them.
        lines.sort_by_key(|line| {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            line.hash(&mut hasher);
            hasher.finish()
        });
        let ingest = graph.ingest("main").expect("ingest");
        let sending = Instant::now();
        for chunk in lines.chunks(SEND_ROWS) {
            let ack = ingest.send(1, &ndjson(chunk)).await.expect("send");
            assert!(ack.rejected.is_empty(), "{:?}", ack.rejected.first());
        }
        let send_s = sending.elapsed().as_secs_f64();
        graph.close_writers().await.expect("flush");
        let started = Instant::now();
        let outcome = graph.fold("main").await.expect("fold");
        let fold_s = started.elapsed().as_secs_f64();
        assert_eq!(
            outcome.deleted.get("Person").copied().unwrap_or(0) as usize,
            tenth
        );
        runs.push((send_s, fold_s, outcome.timings));
    }
    let [(upsert_send, upsert_fold, upsert_stages), (mixed_send, mixed_fold, mixed_stages)] =
        [runs[0], runs[1]];
    report(json!({
        "scenario": "fold_with_deletes_and_patches",
        "base_rows": base,
        "pending_lines": pending,
        "upserts_only_fold_ms": upsert_fold * 1e3,
        "mixed_fold_ms": mixed_fold * 1e3,
        "mixed_over_upserts_fold": mixed_fold / upsert_fold,
        "upserts_only_send_lines_per_s": pending as f64 / upsert_send,
        "mixed_send_lines_per_s": pending as f64 / mixed_send,
        "upserts_only_stages_ms": upsert_stages,
        "mixed_stages_ms": mixed_stages,
    }));
}

/// Fold rows/s of `rows` pending rows with a text each, into an `@embed` field: with no
/// text (nothing to embed: the baseline), with the built-in embedder, and with an
/// OpenAI-compatible provider (the test server) that answers each batch in `delay`. Then
/// the same rows again, texts unchanged: their stored vectors are read, no text is sent.
pub async fn fold_embed(rows: usize, delay: Duration) {
    use tributary::{EmbedderConfig, HttpSettings};
    use tributary_tests::embeddings_server::{Behaviour, EmbeddingsServer};
    const EMBED_SCHEMA: &str = "node Doc @stream {\n  title: String @key\n  text: String?\n  embedding: Vector(8)? @embed(text)\n}\n";
    let server = EmbeddingsServer::start().await;
    server.behave(Behaviour {
        delay,
        ..Default::default()
    });
    let mut baseline = None;
    for provider in ["none", "builtin", "http"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let uri = dir.path().join("g").to_string_lossy().into_owned();
        let graph = Graph::init(&uri, EMBED_SCHEMA).await.expect("init");
        if provider == "http" {
            let settings =
                EmbedderConfig::Openai(HttpSettings::new(server.url.clone(), "test-model"));
            graph.set_embedder(&settings).await.expect("embedder");
        }
        for round in ["new", "unchanged"] {
            let ingest = graph.ingest("main").expect("ingest");
            for start in (0..rows).step_by(SEND_ROWS) {
                let lines: Vec<String> = (start..(start + SEND_ROWS).min(rows))
                    .map(|i| {
                        let text = (provider != "none")
                            .then(|| format!("document {i} about topic {}", i % 97));
                        json!({"type": "Doc", "data": {"title": format!("d{i}"), "text": text}})
                            .to_string()
                    })
                    .collect();
                ingest.send(1, &ndjson(&lines)).await.expect("send");
            }
            graph.close_writers().await.expect("flush");
            let requests_before = server.requests();
            let started = Instant::now();
            let outcome = graph.fold("main").await.expect("fold");
            let elapsed = started.elapsed().as_secs_f64();
            assert_eq!(outcome.rows["Doc"] as usize, rows);
            assert_eq!(outcome.dead_letters, 0);
            let requests = server.requests() - requests_before;
            if round == "unchanged" {
                assert_eq!(requests, 0, "unchanged texts are not sent again");
            }
            let rows_per_s = rows as f64 / elapsed;
            let baseline_rows_per_s = *baseline.get_or_insert(rows_per_s);
            report(json!({
                "scenario": "fold_embed",
                "provider": provider,
                "round": round,
                "provider_ms_per_batch": if provider == "http" { delay.as_secs_f64() * 1e3 } else { 0.0 },
                "pending_rows": rows,
                "fold_ms": elapsed * 1e3,
                "rows_per_s": rows_per_s,
                "embed_ms": outcome.timings.embed_ms,
                "provider_requests": requests,
                "vs_no_embedding_new": rows_per_s / baseline_rows_per_s,
            }));
        }
    }
}
