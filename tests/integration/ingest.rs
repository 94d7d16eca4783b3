use tributary::{
    BranchName, ErrorKind, Graph, IngestAck, IngestOptions, OpCounter, ReadOptions, StreamLine,
};
use tributary_tests::{
    company, counted_graph, memwal_files, ndjson, person, temp_graph, wal_entries,
};

async fn fresh_ids(graph: &Graph, ty: &str) -> Vec<String> {
    let options = ReadOptions {
        fresh: true,
        select: Some(vec!["id".into()]),
        ..Default::default()
    };
    let batch = graph.read(ty, &options).await.unwrap();
    let ids = batch
        .column(0)
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .unwrap();
    let mut out: Vec<String> = ids.iter().flatten().map(str::to_owned).collect();
    out.sort();
    out
}

#[tokio::test]
async fn an_ack_counts_durable_rows_and_lists_rejected_lines() {
    let (_dir, uri, graph) = temp_graph().await;
    let ingest = graph.ingest("main").unwrap();
    let text = ndjson(&[
        person("ada", 36),
        person("old", 200),
        person("alan", 41),
        company("acme"),
    ]);
    let ack = ingest.send(1, &text).await.unwrap();
    assert_eq!(ack.durable_rows, 2);
    assert_eq!(ack.through_line, 4);
    let lines: Vec<u64> = ack.rejected.iter().map(|r| r.line).collect();
    assert_eq!(lines, [2, 4]);
    assert!(
        ack.rejected[1].reason.contains("@stream"),
        "says how to enable: {}",
        ack.rejected[1]
    );
    // Durable, not graph-visible.
    assert_eq!(
        graph
            .read("Person", &ReadOptions::default())
            .await
            .unwrap()
            .num_rows(),
        0
    );
    assert_eq!(fresh_ids(&graph, "Person").await, ["ada", "alan"]);
    assert!(wal_entries(&uri, "nodes/Person.lance") >= 1);
}

#[tokio::test]
async fn enrollment_happens_once_and_survives_reopen() {
    let (_dir, uri, graph) = temp_graph().await;
    assert!(
        graph.ingest_status("main").await.unwrap().tables.is_empty(),
        "nothing enrolled before the first write"
    );
    graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(&[person("ada", 1)]))
        .await
        .unwrap();
    let status = graph.ingest_status("main").await.unwrap();
    assert_eq!(status.tables.len(), 1);
    assert_eq!(status.tables[0].shards.len(), 1, "unsharded by default");
    assert_eq!(status.tables[0].unflushed_rows, 1);
    graph.close_writers().await.unwrap();
    drop(graph);
    let graph = Graph::open(&uri).await.unwrap();
    graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(&[person("bob", 1)]))
        .await
        .unwrap();
    let status = graph.ingest_status("main").await.unwrap();
    let shard = &status.tables[0].shards[0];
    assert_eq!(
        shard.writer_epoch, 2,
        "the second process claimed the same shard"
    );
    assert_eq!(
        status.tables[0].pending_rows, 1,
        "the first writer's close flushed a generation"
    );
    assert_eq!(fresh_ids(&graph, "Person").await, ["ada", "bob"]);
}

#[tokio::test]
async fn rejected_lines_write_nothing_durable() {
    let (_dir, uri, graph) = temp_graph().await;
    let ingest = graph.ingest("main").unwrap();
    ingest.send(1, &ndjson(&[person("ada", 1)])).await.unwrap();
    let before = memwal_files(&uri, "nodes/Person.lance");
    let ack = ingest
        .send(
            2,
            "{\"type\":\"Person\",\"data\":{\"name\":\"x\",\"age\":-1}}\nnot json\n",
        )
        .await
        .unwrap();
    assert_eq!(
        ack,
        IngestAck {
            durable_rows: 0,
            rejected: ack.rejected.clone(),
            through_line: 3,
            stopped_at: None,
            duplicates: 0,
        }
    );
    assert_eq!(ack.rejected.len(), 2);
    assert_eq!(
        memwal_files(&uri, "nodes/Person.lance"),
        before,
        "the WAL did not grow"
    );
}

/// Two processes sending to one shard fence each other in turn: each send that meets a
/// fence reopens the shard (replaying it) and is acknowledged there, so they alternate and
/// every acknowledged row is in the shard once.
#[tokio::test]
async fn writers_of_two_processes_alternate_on_one_shard() {
    let (_dir, uri, first) = temp_graph().await;
    let ingest = first.ingest("main").unwrap();
    ingest.send(1, &ndjson(&[person("ada", 1)])).await.unwrap();
    let second = Graph::open(&uri).await.unwrap();
    let other = second.ingest("main").unwrap();
    other.send(1, &ndjson(&[person("bob", 1)])).await.unwrap();
    // `first` is fenced now; its next send reopens the shard, fencing `second`.
    ingest.send(2, &ndjson(&[person("cy", 1)])).await.unwrap();
    let status = second.ingest_status("main").await.unwrap();
    assert_eq!(
        status.tables.len(),
        1,
        "the fenced process still reports status"
    );
    other.send(2, &ndjson(&[person("dee", 1)])).await.unwrap();
    let ids = fresh_ids(&second, "Person").await;
    assert_eq!(ids, ["ada", "bob", "cy", "dee"], "{ids:?}");
    first.close().await.unwrap();
    second.close().await.unwrap();
}

/// Object-store operations of one acknowledged 1-row send.
async fn send_one(
    ingest: &tributary::Ingestor<'_>,
    counter: &OpCounter,
    line: u64,
) -> tributary::OpCounts {
    let text = ndjson(&[person(&format!("p{line}"), 1)]);
    let before = counter.snapshot();
    ingest.send(line, &text).await.unwrap();
    counter.snapshot().since(&before)
}

#[tokio::test]
async fn send_cost_does_not_grow_with_wal_depth_or_commit_history() {
    let dir = tempfile::tempdir().unwrap();
    let counter = OpCounter::new();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let store = tributary_storage::GraphStore::with_counter(&uri, Some(counter.clone())).unwrap();
    let graph = Graph::builder_on(store)
        .init(tributary_tests::SCHEMA)
        .await
        .unwrap();
    let ingest = graph.ingest("main").unwrap();
    let mut line = 0u64;
    macro_rules! send_ops {
        () => {{
            line += 1;
            send_one(&ingest, &counter, line).await
        }};
    }
    send_ops!(); // enrollment and writer open
    let at_depth_1 = send_ops!();
    for _ in 0..98 {
        send_ops!();
    }
    let at_depth_100 = send_ops!();
    assert_eq!(at_depth_100, at_depth_1, "WAL depth 1 vs 100");

    let publisher = graph.publisher();
    use tributary_publisher::Publisher;
    let mut head = publisher.head(&BranchName::main()).await.unwrap();
    for _ in 0..1_000 {
        let plan = tributary_publisher::PublishPlan {
            branch: BranchName::main(),
            expected_head: Some(head.id.clone()),
            tables: Default::default(),
            rows_written: Default::default(),
            actor: "history".into(),
            kind: tributary::CommitKind::Load,
            intent: None,
            commit_id: None,
            folded: Vec::new(),
            idempotency_key: None,
            producers: Default::default(),
            schema: None,
            fork: None,
            merged: None,
        };
        head = publisher.publish(plan).await.unwrap();
    }
    let at_history_1000 = send_ops!();
    eprintln!("object-store ops per acknowledged 1-row send: {at_depth_1}");
    assert_eq!(at_history_1000, at_depth_1, "commit history 1 vs 1,000");
}

/// A new graph whose writers freeze a memtable at `memtable_bytes` and hold at most
/// `max_unflushed_bytes` unflushed.
async fn graph_with_memtables(
    memtable_bytes: usize,
    max_unflushed_bytes: usize,
) -> (tempfile::TempDir, std::sync::Arc<Graph>) {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    Graph::init(&uri, tributary_tests::SCHEMA).await.unwrap();
    let settings = tributary::GraphSettings {
        writer: tributary::WriterSettings {
            memtable_bytes,
            max_unflushed_bytes,
            ..Default::default()
        },
        ..Default::default()
    };
    let graph = Graph::builder(&uri)
        .settings(settings)
        .open()
        .await
        .unwrap();
    (dir, std::sync::Arc::new(graph))
}

#[tokio::test(flavor = "multi_thread")]
async fn unflushed_memory_stays_bounded_under_load() {
    const BOUND: usize = 2 << 20;
    let (_dir, graph) = graph_with_memtables(256 << 10, BOUND).await;
    let producers: Vec<_> = (0..8)
        .map(|p| {
            let graph = graph.clone();
            tokio::spawn(async move {
                let ingest = graph.ingest("main").unwrap();
                let mut peak = 0;
                for s in 0..12 {
                    let lines: Vec<String> = (0..500)
                        .map(|r| person(&format!("p{p}-{s}-{r}"), 30))
                        .collect();
                    let ack = ingest.send(1, &ndjson(&lines)).await.unwrap();
                    assert_eq!(ack.durable_rows, 500);
                    let status = graph.ingest_status("main").await.unwrap();
                    peak = peak.max(status.tables[0].unflushed_bytes);
                }
                peak
            })
        })
        .collect();
    let mut peak = 0;
    for producer in producers {
        peak = peak.max(producer.await.unwrap());
    }
    let status = graph.ingest_status("main").await.unwrap();
    let table = &status.tables[0];
    eprintln!(
        "peak unflushed bytes {peak} (bound {BOUND}); {} rows flushed, {} in memory",
        table.pending_rows, table.unflushed_rows
    );
    // Lance checks the bound before a put, so a put in flight as it is crossed (one group,
    // up to a memtable) and the memtable it freezes can stand above it together.
    assert!(
        peak as usize <= BOUND + 2 * (256 << 10),
        "unflushed memory {peak} passed the bound {BOUND}"
    );
    assert!(
        table.pending_rows > 0,
        "memtables were flushed to generations along the way"
    );
    // While flushes run, a frozen memtable can be counted in neither or both tiers; once
    // the writers close, every acknowledged row is in a generation.
    graph.close_writers().await.unwrap();
    let status = graph.ingest_status("main").await.unwrap();
    assert_eq!(
        status.tables[0].pending_rows,
        8 * 12 * 500,
        "every acknowledged row is in a generation"
    );
}

/// A table writer on Person, enrolled with `settings`, and a batch of `rows` people.
async fn person_writer(
    graph: &Graph,
    settings: &tributary::WriterSettings,
) -> std::sync::Arc<tributary_memwal_adapter::TableWriter> {
    use tributary_memwal_adapter::{enroll, Sharding, TableWriter};
    let store = graph.store();
    let enrolled = enroll(
        store,
        &tributary_memwal_adapter::MemWalTable::main("nodes/Person.lance"),
        Sharding::Unsharded,
        settings,
        &[],
    )
    .await
    .unwrap();
    std::sync::Arc::new(TableWriter::open(&enrolled, None).await.unwrap())
}

fn people(graph: &Graph, prefix: &str, rows: usize) -> arrow_array::RecordBatch {
    let lines: Vec<String> = (0..rows)
        .map(|r| person(&format!("{prefix}-{r}"), 1))
        .collect();
    let decoded = tributary_schema::decode_str(&graph.catalog(), &ndjson(&lines));
    decoded.batches[0].batch.clone()
}

/// `sends` concurrent puts of `rows` people each on `writer`, and what each returned.
async fn concurrent_puts(
    graph: &Graph,
    writer: &std::sync::Arc<tributary_memwal_adapter::TableWriter>,
    sends: usize,
    rows: usize,
) -> Vec<tributary_memwal_adapter::Result<()>> {
    let tasks: Vec<_> = (0..sends)
        .map(|s| {
            let writer = writer.clone();
            let batch = people(graph, &format!("s{s}"), rows);
            tokio::spawn(async move { writer.put(&batch).await })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    results
}

/// As `concurrent_puts`, every send acknowledged; the Lance puts they made.
async fn lance_puts_of_acked_sends(
    graph: &Graph,
    writer: &std::sync::Arc<tributary_memwal_adapter::TableWriter>,
    sends: usize,
    rows: usize,
) -> u64 {
    for result in concurrent_puts(graph, writer, sends, rows).await {
        result.unwrap();
    }
    lance_puts(writer)
}

fn lance_puts(writer: &tributary_memwal_adapter::TableWriter) -> u64 {
    writer.shards().map(|(_, w)| w.stats().put_count).sum()
}

/// Close `writer` (flushing its memtables), then the ids another process reads fresh.
async fn ids_after_close(
    writer: std::sync::Arc<tributary_memwal_adapter::TableWriter>,
    uri: &str,
) -> Vec<String> {
    std::sync::Arc::into_inner(writer)
        .unwrap()
        .close(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    fresh_ids(&Graph::open(uri).await.unwrap(), "Person").await
}

/// Writer settings whose memtables hold `rows` rows and `bytes` bytes.
fn memtable_of(rows: usize, bytes: usize) -> tributary::WriterSettings {
    tributary::WriterSettings {
        memtable_rows: rows,
        memtable_bytes: bytes,
        ..Default::default()
    }
}

/// Concurrent sends to one shard go out as fewer Lance puts, never larger than a memtable,
/// and every acknowledged row is there.
#[tokio::test]
async fn concurrent_sends_share_puts_no_larger_than_a_memtable() {
    let (_dir, uri, graph) = temp_graph().await;
    let writer = person_writer(&graph, &memtable_of(8, 64 << 20)).await;
    let puts = lance_puts_of_acked_sends(&graph, &writer, 16, 2).await;
    assert!(
        (4..16).contains(&puts),
        "16 sends of 2 rows, at most 8 rows a put: {puts} puts"
    );
    assert_eq!(ids_after_close(writer, &uri).await.len(), 32);
}

/// A group also stays within a memtable's bytes: with a 1-byte memtable every send goes
/// alone.
#[tokio::test]
async fn a_group_stays_within_a_memtable_s_bytes() {
    let (_dir, _uri, graph) = temp_graph().await;
    let writer = person_writer(&graph, &memtable_of(100_000, 1)).await;
    assert_eq!(lance_puts_of_acked_sends(&graph, &writer, 6, 1).await, 6);
}

/// A fence fails every send of the grouped put, each with the typed error.
#[tokio::test]
async fn a_fence_fails_every_send_of_a_group() {
    let (_dir, _uri, graph) = temp_graph().await;
    let settings = tributary::WriterSettings::default();
    let first = person_writer(&graph, &settings).await;
    first.put(&people(&graph, "before", 1)).await.unwrap();
    let _second = person_writer(&graph, &settings).await;
    for result in concurrent_puts(&graph, &first, 8, 1).await {
        let error = result.unwrap_err();
        assert!(
            matches!(error, tributary_memwal_adapter::Error::Fenced { .. }),
            "{error}"
        );
    }
    assert!(lance_puts(&first) < 1 + 8, "the sends were grouped");
}

/// A send whose caller gives up after it was queued (a dropped request) cancels nothing:
/// the group it joined is still written, every other send of it is acknowledged, and the
/// writer still closes.
#[tokio::test]
async fn an_abandoned_send_leaves_its_group_whole() {
    let (_dir, uri, graph) = temp_graph().await;
    let writer = person_writer(&graph, &tributary::WriterSettings::default()).await;
    // Polled once (it queues and starts the drain), then dropped.
    let gone = people(&graph, "gone", 1);
    let gave_up = tokio::time::timeout(std::time::Duration::ZERO, writer.put(&gone)).await;
    assert!(gave_up.is_err(), "abandoned before its ack");
    for result in concurrent_puts(&graph, &writer, 8, 1).await {
        result.unwrap();
    }
    let ids = ids_after_close(writer, &uri).await;
    assert_eq!(ids.len(), 9, "{ids:?}");
    assert!(ids.contains(&"gone-0".to_owned()), "{ids:?}");
}

/// Strict mode is the ingestor's: it stops at the first invalid or unreadable line and
/// writes only the lines before it; otherwise such lines are rejected one by one.
#[tokio::test]
async fn a_strict_ingestor_stops_at_the_first_bad_line_and_writes_only_those_before() {
    let (_dir, _uri, graph) = temp_graph().await;
    let (ada, bob, cy) = (person("ada", 1), person("bob", 2), person("cy", 3));
    let lines = [
        StreamLine::Text(&ada),
        StreamLine::Unreadable("the line is not UTF-8"),
        StreamLine::Text(&bob),
    ];
    let lenient = graph.ingest("main").unwrap();
    let ack = lenient.send_lines(1, &lines).await.unwrap();
    assert_eq!((ack.durable_rows, ack.through_line), (2, 3));
    assert_eq!(ack.rejected.len(), 1);
    assert_eq!(ack.rejected[0].line, 2);
    assert_eq!(ack.stopped_at, None);

    let strict = graph
        .ingestor(&IngestOptions {
            strict: true,
            ..IngestOptions::default()
        })
        .unwrap();
    let lines = [
        StreamLine::Text(&cy),
        StreamLine::Text("{\"type\":\"Person\",\"data\":{\"name\":\"dee\",\"age\":-1}}"),
        StreamLine::Unreadable("the line is not UTF-8"),
    ];
    let ack = strict.send_lines(10, &lines).await.unwrap();
    assert_eq!((ack.durable_rows, ack.through_line), (1, 11));
    assert_eq!(ack.rejected.len(), 1);
    assert_eq!(ack.stopped_at.as_ref().map(|e| e.line), Some(11));
    assert_eq!(
        ack.stopped_at.as_ref().and_then(|e| e.field.as_deref()),
        Some("age")
    );

    // A line break inside one stream line would shift every number after it: refused.
    let ack = lenient
        .send_lines(
            20,
            &[StreamLine::Text("{}\n{}"), StreamLine::Unreadable("gone")],
        )
        .await
        .unwrap();
    assert_eq!((ack.durable_rows, ack.through_line), (0, 21));
    let lines: Vec<u64> = ack.rejected.iter().map(|e| e.line).collect();
    assert_eq!(lines, vec![20, 21]);

    graph.fold("main").await.unwrap();
    let people = graph
        .read("Person", &tributary::ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(people.num_rows(), 3, "ada, bob and cy; not dee");
}

/// What the metrics show of unfolded data is read from each table's MemWAL index alone:
/// its cost stays the same however many commits the graph has.
#[tokio::test]
async fn pending_costs_the_same_at_any_commit_depth() {
    let (_dir, _uri, graph, counter) = counted_graph().await;
    let ingest = graph.ingest("main").unwrap();
    ingest.send(1, &ndjson(&[person("ada", 1)])).await.unwrap();
    graph.close_writers().await.unwrap();
    let cost = || async {
        let before = counter.snapshot();
        let pending = graph.pending().await.unwrap();
        (pending, counter.snapshot().since(&before).total())
    };
    // The first call opens what later ones find cached; compare warm calls.
    cost().await;
    let (pending, shallow) = cost().await;
    assert_eq!(pending.rows, 1);
    for i in 0..30 {
        let name = format!("co{i}");
        graph
            .load(
                &ndjson(&[company(&name)]),
                &tributary::LoadOptions::default(),
            )
            .await
            .unwrap();
    }
    let (pending, deep) = cost().await;
    assert_eq!(pending.rows, 1, "loads of a plain type fold nothing");
    assert_eq!(shallow, deep, "ops at 1 vs 31 commits");
}

/// Lance's back-pressure makes a put wait, never fail: sends that pile up behind a put it
/// holds are refused at once with `unavailable` once the shard's unflushed bound already
/// waits, and the ones queued before it are written when the put goes on.
#[tokio::test(flavor = "multi_thread")]
async fn sends_waiting_behind_a_held_put_are_bounded() {
    const BOUND: usize = 1 << 20;
    let _lock = crate::FAILPOINTS.lock().await;
    let scenario = fail::FailScenario::setup();
    let (_dir, graph) = graph_with_memtables(512 << 10, BOUND).await;
    let ingest = graph.ingest("main").unwrap();
    ingest.send(1, &ndjson(&[person("warm", 1)])).await.unwrap();
    fail::cfg("memwal::before-put", "sleep(1500)").unwrap();
    let sends: Vec<_> = (0..16)
        .map(|s| {
            let graph = graph.clone();
            tokio::spawn(async move {
                let lines: Vec<String> = (0..1_000)
                    .map(|r| person(&format!("s{s}-{r}"), 30))
                    .collect();
                let result = graph.ingest("main").unwrap().send(1, &ndjson(&lines)).await;
                (s, result)
            })
        })
        .collect();
    let (mut written, mut refused) = (Vec::new(), Vec::new());
    for send in sends {
        match send.await.unwrap() {
            (s, Ok(ack)) => {
                assert_eq!(ack.durable_rows, 1_000);
                written.push(s);
            }
            (s, Err(error)) => {
                assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
                assert!(error.to_string().contains("already wait"), "{error}");
                refused.push(s);
            }
        }
    }
    fail::remove("memwal::before-put");
    eprintln!("{} sends written, {} refused", written.len(), refused.len());
    assert!(!refused.is_empty(), "the queue was bounded");
    assert!(written.len() >= 2, "sends within the bound were written");
    graph.fold("main").await.unwrap();
    let rows = graph.read("Person", &ReadOptions::default()).await.unwrap();
    assert_eq!(
        rows.num_rows(),
        1 + written.len() * 1_000,
        "written once, refused never"
    );
    scenario.teardown();
}
