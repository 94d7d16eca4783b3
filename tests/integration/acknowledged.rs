//! An acknowledged write is never lost and never overtaken by an older one: across a writer
//! that stops without flushing, a writer fenced by another, interrupted commits resolved
//! by other handles, and cleanup beside a stalled writer. Each `Graph` handle here stands
//! for one process (dropping a handle without `close` is a crash: its memtables are gone,
//! its WAL stays).

use std::time::Duration;

use tributary::{At, Graph, GraphSettings, LoadOptions, ReadOptions, Recovered};
use tributary_tests::{edge, ndjson, person, temp_graph};

use crate::columns::{age_of, sorted_strings};
use crate::FAILPOINTS;

async fn send(graph: &Graph, lines: &[String]) {
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(lines))
        .await
        .unwrap();
    assert!(ack.rejected.is_empty(), "{ack:?}");
    assert_eq!(ack.durable_rows, lines.len() as u64);
}

async fn people(graph: &Graph) -> Vec<String> {
    let batch = graph.read("Person", &ReadOptions::default()).await.unwrap();
    sorted_strings(&batch, "id")
}

/// A handle whose writer acknowledged `lines` and then stopped without flushing.
async fn crashed_writer(uri: &str, lines: &[String]) {
    let writer = Graph::open(uri).await.unwrap();
    send(&writer, lines).await;
    drop(writer);
}

#[tokio::test]
async fn a_load_after_a_crashed_writer_is_not_overwritten_by_its_replay() {
    let (_dir, uri, graph) = temp_graph().await;
    drop(graph);
    crashed_writer(&uri, &[person("ada", 30)]).await;

    let loader = Graph::open(&uri).await.unwrap();
    loader
        .load(&ndjson(&[person("ada", 31)]), &LoadOptions::default())
        .await
        .unwrap();
    assert_eq!(age_of(&loader, "ada").await, Some(31));

    // A later ingest to the same table opens (and replays) the shard; the fold after it
    // must not bring the older 30 back.
    send(&loader, &[person("bob", 40)]).await;
    loader.fold("main").await.unwrap();
    assert_eq!(
        age_of(&loader, "ada").await,
        Some(31),
        "the older write won"
    );
    assert_eq!(age_of(&loader, "bob").await, Some(40));
}

#[tokio::test]
async fn rows_only_in_a_stopped_writers_wal_are_counted_and_folded() {
    let (_dir, uri, graph) = temp_graph().await;
    drop(graph);
    crashed_writer(&uri, &[person("ada", 30), person("bob", 40)]).await;

    let other = Graph::open(&uri).await.unwrap();
    let status = other.ingest_status("main").await.unwrap();
    let person_status = &status.tables[0];
    assert_eq!(person_status.pending_rows, 0, "{status:?}");
    assert_eq!(person_status.wal_only_rows, 2, "{status:?}");
    assert_eq!(person_status.shards[0].wal_only_entries, 1, "{status:?}");

    let outcome = other.fold("main").await.unwrap();
    assert!(outcome.commit.is_some(), "{outcome:?}");
    assert_eq!(people(&other).await, ["ada", "bob"]);
    let status = other.ingest_status("main").await.unwrap();
    assert_eq!(status.tables[0].wal_only_rows, 0, "{status:?}");
}

#[tokio::test]
async fn the_background_folder_claims_only_an_idle_tail() {
    let (_dir, uri, graph) = temp_graph().await;
    drop(graph);
    // A live writer: its tail is fresh.
    let live = Graph::open(&uri).await.unwrap();
    send(&live, &[person("ada", 30)]).await;

    let patient = GraphSettings {
        triggers: tributary::FoldTriggers {
            stranded_after: Duration::from_secs(3600),
            ..Default::default()
        },
        ..Default::default()
    };
    let folder = Graph::builder(&uri).settings(patient).open().await.unwrap();
    assert!(
        !folder.fold_due("main").await.unwrap(),
        "a live writer's fresh tail is not stranded"
    );
    let eager = GraphSettings {
        triggers: tributary::FoldTriggers {
            stranded_after: Duration::ZERO,
            ..Default::default()
        },
        ..Default::default()
    };
    let folder = Graph::builder(&uri).settings(eager).open().await.unwrap();
    assert!(
        folder.fold_due("main").await.unwrap(),
        "an idle tail is due"
    );
}

#[tokio::test]
async fn a_fenced_writer_reopens_and_every_row_is_folded_once() {
    let (_dir, uri, first) = temp_graph().await;
    let second = Graph::open(&uri).await.unwrap();
    send(&first, &[person("a1", 1)]).await;
    send(&second, &[person("b1", 2)]).await; // claims the shard: `first` is fenced
    send(&first, &[person("a2", 3)]).await; // reopens, claiming it back
    send(&second, &[person("b2", 4)]).await;
    // Each fold cuts its own writer; a fenced one leaves the warm set instead of failing.
    first.fold("main").await.unwrap();
    second.fold("main").await.unwrap();
    first.fold("main").await.unwrap();
    assert_eq!(people(&first).await, ["a1", "a2", "b1", "b2"]);
    assert_eq!(age_of(&first, "a2").await, Some(3));
    first.close().await.unwrap();
    second.close().await.unwrap();
}

#[tokio::test]
async fn cleanup_keeps_the_slot_a_stalled_writer_would_fill() {
    let (_dir, uri, stalled) = temp_graph().await;
    // `stalled` appends WAL entry 1 and caches slot 2 as its next.
    send(&stalled, &[person("ada", 30)]).await;
    // Another process takes the shard over (its fence sentinel takes slot 2), writes,
    // folds and cleans up everything the fold made redundant.
    let taker = Graph::open(&uri).await.unwrap();
    send(&taker, &[person("bob", 40)]).await;
    taker.fold("main").await.unwrap();
    taker.close().await.unwrap();
    let removed = taker.cleanup(Duration::ZERO).await.unwrap();
    assert!(removed.memwal.wal_entries > 0, "{removed:?}");

    // The stalled writer wakes: its append must find slot 2 taken and learn it is fenced,
    // never acknowledge into a slot no writer replays.
    send(&stalled, &[person("cy", 50)]).await;
    stalled.fold("main").await.unwrap();
    stalled.close().await.unwrap();
    let reader = Graph::open(&uri).await.unwrap();
    assert_eq!(people(&reader).await, ["ada", "bob", "cy"]);
}

#[tokio::test]
async fn reads_never_resolve_an_interrupted_write_and_writers_resolve_it_once() {
    let (_dir, uri, graph) = temp_graph().await;
    {
        let _lock = FAILPOINTS.lock().await;
        let scenario = fail::FailScenario::setup();
        fail::cfg("load::before-publish", "return").unwrap();
        graph
            .load(
                &ndjson(&[person("ada", 36), edge("Knows", "ada", "ada")]),
                &LoadOptions::default(),
            )
            .await
            .unwrap_err();
        scenario.teardown();
    }
    drop(graph);
    let reader = Graph::open(&uri).await.unwrap();
    assert!(people(&reader).await.is_empty(), "half a load is visible");
    assert_eq!(reader.store().list("__recovery").await.unwrap().len(), 1);

    // Two writers resolve at once: exactly one rolls the load forward.
    let (a, b) = (
        Graph::open(&uri).await.unwrap(),
        Graph::open(&uri).await.unwrap(),
    );
    let (ra, rb) = tokio::join!(a.recover(), b.recover());
    let rolled: usize = [ra.unwrap(), rb.unwrap()]
        .iter()
        .flatten()
        .filter(|r| matches!(r, Recovered::RolledForward { .. }))
        .count();
    assert_eq!(rolled, 1);
    assert_eq!(people(&reader).await, ["ada"]);
    let loads = reader
        .log("main", 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.rows_written.values().sum::<u64>() == 2)
        .count();
    assert_eq!(loads, 1, "the interrupted load is published exactly once");
    assert!(reader.store().list("__recovery").await.unwrap().is_empty());
}

#[tokio::test]
async fn an_unreadable_sidecar_is_set_aside_not_blocking_writes() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .store()
        .put("__recovery/garbled.json", b"{ not json".to_vec())
        .await
        .unwrap();
    graph
        .load(&ndjson(&[person("ada", 36)]), &LoadOptions::default())
        .await
        .unwrap();
    assert_eq!(people(&graph).await, ["ada"]);
    assert_eq!(
        graph.store().list("__recovery").await.unwrap(),
        ["garbled.unreadable"]
    );
}

#[tokio::test]
async fn edges_whose_keys_hold_the_separator_stay_distinct() {
    let (_dir, _uri, graph) = temp_graph().await;
    let lines = [
        person("a", 1),
        person("b->c", 2),
        person("a->b", 3),
        person("c", 4),
        edge("Knows", "a", "b->c"),
        edge("Knows", "a->b", "c"),
    ];
    graph
        .load(&ndjson(&lines), &LoadOptions::default())
        .await
        .unwrap();
    let edges = graph.read("Knows", &ReadOptions::default()).await.unwrap();
    assert_eq!(edges.num_rows(), 2, "one edge overwrote the other");
}

#[tokio::test]
async fn an_edge_is_not_dead_lettered_while_its_endpoints_wait_in_a_stopped_writers_wal() {
    let (_dir, uri, graph) = temp_graph().await;
    drop(graph);
    crashed_writer(&uri, &[person("ada", 30), person("bob", 40)]).await;
    let folder = Graph::open(&uri).await.unwrap();
    send(&folder, &[edge("Knows", "ada", "bob")]).await;
    folder.fold("main").await.unwrap();
    let rejects = folder.rejects(&At::default()).await.unwrap();
    assert_eq!(
        rejects.num_rows(),
        0,
        "an acknowledged endpoint was judged missing"
    );
    let edges = folder.read("Knows", &ReadOptions::default()).await.unwrap();
    assert_eq!(edges.num_rows(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_inserting_one_new_key_leave_one_row() {
    let (_dir, uri, graph) = temp_graph().await;
    drop(graph);
    let first = std::sync::Arc::new(Graph::open(&uri).await.unwrap());
    let second = std::sync::Arc::new(Graph::open(&uri).await.unwrap());
    let insert = LoadOptions {
        mode: tributary::LoadMode::Insert,
        ..LoadOptions::default()
    };
    let _lock = FAILPOINTS.lock().await;
    let scenario = fail::FailScenario::setup();
    // The first insert validates and stages, then waits before committing while the
    // second starts. (Separate tasks: the failpoint's sleep blocks its thread.)
    fail::cfg("load::before-table-commits", "1*sleep(3000)").unwrap();
    let slow = tokio::spawn({
        let (graph, insert) = (first.clone(), insert.clone());
        async move { graph.load(&ndjson(&[person("ada", 1)]), &insert).await }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let fast = tokio::spawn({
        let (graph, insert) = (second.clone(), insert.clone());
        async move { graph.load(&ndjson(&[person("ada", 2)]), &insert).await }
    });
    let (slow, fast) = (slow.await.unwrap(), fast.await.unwrap());
    scenario.teardown();
    // The second waits for the first's write turn and then finds the key taken. (Were the
    // two to commit at once, Lance's inserted-keys check would refuse one: a conflict.)
    assert!(slow.is_ok(), "{slow:?}");
    let error = fast.expect_err("both inserts of one new key succeeded");
    assert_eq!(error.kind(), tributary::ErrorKind::InvalidInput, "{error}");
    assert_eq!(people(&first).await, ["ada"]);
    assert_eq!(age_of(&first, "ada").await, Some(1));
}

#[tokio::test]
async fn cleanup_keeps_the_tip_a_new_writers_sentinel_goes_after() {
    let (_dir, uri, stalled) = temp_graph().await;
    // Five WAL entries, all flushed by a fold: `stalled` caches slot 6 as its next.
    for i in 0..5 {
        send(&stalled, &[person(&format!("p{i}"), i)]).await;
    }
    stalled.fold("main").await.unwrap();
    let cleaner = Graph::open(&uri).await.unwrap();
    cleaner.cleanup(Duration::ZERO).await.unwrap();
    // A new writer claims the shard. It places its sentinel just past the tip; had the tip
    // been removed it would look lower and leave slot 6 free for `stalled`, whose append
    // there would be acknowledged before the new writer's own appends reach it.
    let taker = Graph::open(&uri).await.unwrap();
    taker.ingest("main").unwrap().warm("Person").await.unwrap();
    send(&stalled, &[person("cy", 50)]).await;
    send(&taker, &[person("bob", 40)]).await;
    taker.fold("main").await.unwrap();
    stalled.fold("main").await.unwrap();
    let reader = Graph::open(&uri).await.unwrap();
    assert_eq!(
        people(&reader).await,
        ["bob", "cy", "p0", "p1", "p2", "p3", "p4"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_load_beside_a_live_streaming_ingester_claims_its_shard_and_wins() {
    let (_dir, uri, graph) = temp_graph().await;
    drop(graph);
    let streamer = std::sync::Arc::new(Graph::open(&uri).await.unwrap());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Another process streams without pause; each send heals a fence by reopening.
    let stream = tokio::spawn({
        let (streamer, stop) = (streamer.clone(), stop.clone());
        async move {
            let mut acked = Vec::new();
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let name = format!("s{i}");
                let sent = streamer
                    .ingest("main")
                    .unwrap()
                    .send(1, &ndjson(&[person(&name, 20)]))
                    .await;
                if sent.is_ok_and(|ack| ack.durable_rows == 1) {
                    acked.push(name);
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            acked
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Loads of the streamed type claim the streamer's shard (the fold before the load).
    let loader = Graph::open(&uri).await.unwrap();
    for age in [31, 32, 33] {
        loader
            .load(&ndjson(&[person("ada", age)]), &LoadOptions::default())
            .await
            .expect("a load beside a live ingester gave up");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acked = stream.await.unwrap();
    assert!(acked.len() > 5, "the stream made progress: {}", acked.len());
    streamer.fold("main").await.unwrap();
    let reader = Graph::open(&uri).await.unwrap();
    let people = people(&reader).await;
    for name in &acked {
        assert!(people.contains(name), "acknowledged {name} is missing");
    }
    assert_eq!(age_of(&reader, "ada").await, Some(33));
}
