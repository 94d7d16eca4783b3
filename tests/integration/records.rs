//! The record publisher's own mechanism: one immutable record per transaction, won by
//! put-if-absent; finalized by any later writer; read in four GETs whatever the
//! history; pruned behind a boundary. (The rest of the suite runs against it too, with
//! `TRIBUTARY_PUBLISHER=record`.)

use std::time::Duration;

use tributary::{ErrorKind, Graph, LoadOptions, PublisherKind};
use tributary_publisher::{BranchName, Error, Publisher, RecordPublisher};
use tributary_storage::{FaultKind, Faults, GraphStore, OpCounter, StoreOptions};
use tributary_tests::{ndjson, person, temp_graph_on, SCHEMA};

use crate::publisher::plan_on;

async fn load(graph: &Graph, key: &str, age: i32) -> tributary::LoadOutcome {
    graph
        .load(&ndjson(&[person(key, age)]), &LoadOptions::default())
        .await
        .unwrap()
}

/// Two processes racing for one record number on one branch: one wins, the others are
/// refused as a conflict and publish nothing; on two branches both land (the loser of the
/// number takes the next one).
#[tokio::test]
async fn processes_racing_for_one_record_number_one_wins_per_branch() {
    let (_dir, uri, graph) = temp_graph_on(PublisherKind::Record).await;
    graph
        .create_branch("dev", &tributary::At::default())
        .await
        .unwrap();
    let handles: Vec<RecordPublisher> = (0..6)
        .map(|_| RecordPublisher::open(&GraphStore::new(&uri).unwrap()))
        .collect();
    let main = handles[0].head(&BranchName::main()).await.unwrap();
    let dev = handles[0]
        .head(&BranchName::new("dev").unwrap())
        .await
        .unwrap();
    let racing = handles.iter().enumerate().map(|(i, publisher)| {
        let mut plan = plan_on(if i % 2 == 0 { &main } else { &dev }, "racer");
        if i % 2 == 1 {
            plan.branch = BranchName::new("dev").unwrap();
        }
        publisher.publish(plan)
    });
    let results = futures::future::join_all(racing).await;
    let won: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 2, "one per branch: {results:?}");
    for result in &results {
        if let Err(error) = result {
            assert!(matches!(error, Error::Conflict { .. }), "{error}");
        }
    }
    for (branch, base) in [("main", &main), ("dev", &dev)] {
        let log = handles[1]
            .log(&BranchName::new(branch).unwrap(), 10)
            .await
            .unwrap();
        let winner = won.iter().find(|c| c.branch == branch).unwrap();
        assert_eq!(log[0].id, winner.id, "{branch}");
        assert_eq!(
            log[1].id, base.id,
            "{branch}: the winner is built on the base"
        );
    }
}

/// A writer whose record was made but not finalized (writing its commit object failed,
/// so the hint stayed below it): another process reads the commit as the head, finds it by id and in the log,
/// and its next write finishes the finalize.
#[tokio::test]
async fn an_unfinalized_record_is_read_by_others_and_finished_by_the_next_writer() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    Graph::builder(&uri)
        .publisher(PublisherKind::Record)
        .init(SCHEMA)
        .await
        .unwrap();
    let faults = Faults::new();
    let writer = Graph::builder(&uri)
        .store_options(StoreOptions {
            faults: Some(faults.clone()),
            ..Default::default()
        })
        .open()
        .await
        .unwrap();
    // The finalize's first write fails, so it stops before raising the hint.
    faults.fail_next("__txn/commits/", FaultKind::Refused, 1);
    let made = load(&writer, "ada", 36).await.commit;
    assert_eq!(
        faults.injected().values().sum::<u64>(),
        1,
        "{:?}",
        faults.injected()
    );

    let reader = Graph::open(&uri).await.unwrap();
    let store = reader.store();
    let commit_object = format!("__txn/commits/{}.json", made.id);
    assert_eq!(
        store.get(&commit_object).await.unwrap(),
        None,
        "not finalized"
    );
    let log = reader.log("main", 5).await.unwrap();
    assert_eq!(log[0].id, made.id);
    assert_eq!(
        reader.publisher().commit(&made.id).await.unwrap().tables,
        made.tables
    );
    let rows = reader
        .get("Person", "ada", tributary::At::default())
        .await
        .unwrap();
    assert!(
        rows.is_some(),
        "the reader reads the record's pinned versions"
    );

    load(&reader, "bob", 41).await;
    assert!(
        store.get(&commit_object).await.unwrap().is_some(),
        "finished"
    );
    assert_eq!(reader.log("main", 10).await.unwrap().len(), 3);
}

/// Reading the head costs the same object-store calls at 10 and at 1,000 commits.
#[tokio::test]
async fn the_head_costs_the_same_at_10_and_1000_commits() {
    let (_dir, uri, graph) = temp_graph_on(PublisherKind::Record).await;
    let counter = OpCounter::new();
    let counted = GraphStore::open(
        &uri,
        StoreOptions {
            counter: Some(counter.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let publisher = RecordPublisher::open(&counted);
    let mut head = publisher.head(&BranchName::main()).await.unwrap();
    let mut cost_at = std::collections::BTreeMap::new();
    for depth in [10, 1_000] {
        while head.depth < depth {
            head = publisher.publish(plan_on(&head, "fill")).await.unwrap();
        }
        counter.reset();
        let read = publisher.head(&BranchName::main()).await.unwrap();
        assert_eq!(read.id, head.id);
        cost_at.insert(depth, counter.snapshot().total());
    }
    eprintln!("head reads at 10 and 1,000 commits: {cost_at:?}");
    assert_eq!(cost_at[&10], cost_at[&1_000], "{cost_at:?}");
    assert_eq!(
        cost_at[&10], 4,
        "the hint, the boundary, the hint's record, the absent next one"
    );
    drop(graph);
}

/// Make every transaction record of the graph at `uri` look `age` old.
fn age_records(uri: &str, age: Duration) {
    let then = std::time::SystemTime::now() - age;
    for entry in std::fs::read_dir(std::path::Path::new(uri).join("__txn/log")).unwrap() {
        let file = std::fs::File::options()
            .write(true)
            .open(entry.unwrap().path())
            .unwrap();
        file.set_modified(then).unwrap();
    }
}

/// Cleanup removes the records below the newest that are older than its window and than
/// ten minutes (raising the pruned-through boundary first); history stays readable, and a
/// reader whose hint points below the boundary still finds the head.
#[tokio::test]
async fn cleanup_prunes_records_behind_a_boundary_and_history_stays_readable() {
    let (_dir, uri, graph) = temp_graph_on(PublisherKind::Record).await;
    let first = graph.log("main", 1).await.unwrap()[0].clone();
    for i in 0..12 {
        load(&graph, &format!("p{i}"), i).await;
    }
    let young = graph.cleanup(Duration::ZERO).await.unwrap();
    assert_eq!(young.commit_records, 0, "ten minutes at least: {young:?}");
    age_records(&uri, Duration::from_secs(7200));
    let report = graph.cleanup(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(report.commit_records, 12, "{report:?}");
    let store = graph.store();
    assert_eq!(store.list("__txn/log").await.unwrap().len(), 1);
    assert_eq!(graph.log("main", 100).await.unwrap().len(), 13);
    assert_eq!(graph.publisher().commit(&first.id).await.unwrap(), first);
    // A hint left behind by a slow finalizer, below the boundary.
    store.put("__txn/tip", b"0".to_vec()).await.unwrap();
    let reopened = Graph::open(&graph.store().location()).await.unwrap();
    assert_eq!(reopened.log("main", 100).await.unwrap().len(), 13);
    load(&reopened, "late", 1).await;
    age_records(&uri, Duration::from_secs(7200));
    let again = reopened.cleanup(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(again.commit_records, 1, "{again:?}");
}

/// A graph records its publisher; a name this version does not know is refused, naming it.
#[tokio::test]
async fn a_graph_records_its_publisher_and_an_unknown_one_is_refused_by_name() {
    let (_dir, uri, graph) = temp_graph_on(PublisherKind::Record).await;
    assert_eq!(graph.publisher_kind(), PublisherKind::Record);
    assert_eq!(
        Graph::open(&uri).await.unwrap().publisher_kind(),
        PublisherKind::Record
    );
    let again = Graph::builder(&uri)
        .publisher(PublisherKind::Manifest)
        .init(SCHEMA)
        .await
        .unwrap_err();
    assert_eq!(again.kind(), ErrorKind::InvalidInput, "{again}");
    graph
        .store()
        .put("__publisher.json", br#"{"publisher":"future"}"#.to_vec())
        .await
        .unwrap();
    let refused = Graph::open(&uri).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{refused}");
    assert!(refused.to_string().contains("`future`"), "{refused}");
}

/// A writer that stalls between reading the newest record and creating the next, while
/// others commit and cleanup prunes past its number: the number it then creates is
/// behind the boundary, where no reader looks. It must find its record void and take
/// the next free number, so what it acknowledges is visible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_stalled_past_a_prune_lands_its_commit_above_the_boundary() {
    let (_dir, uri, graph) = temp_graph_on(PublisherKind::Record).await;
    graph
        .create_branch("dev", &tributary::At::default())
        .await
        .unwrap();
    let stalled = RecordPublisher::open(&GraphStore::new(&uri).unwrap());
    let other = RecordPublisher::open(&GraphStore::new(&uri).unwrap());
    let main = stalled.head(&BranchName::main()).await.unwrap();
    let dev = BranchName::new("dev").unwrap();
    let _lock = crate::FAILPOINTS.lock().await;
    let scenario = fail::FailScenario::setup();
    fail::cfg("records::before-create", "1*sleep(1500)").unwrap();
    let writer = tokio::spawn(async move {
        let made = stalled.publish(plan_on(&main, "stalled")).await;
        (stalled, made)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut head = other.head(&dev).await.unwrap();
    for _ in 0..3 {
        let mut plan = plan_on(&head, "other");
        plan.branch = dev.clone();
        head = other.publish(plan).await.unwrap();
    }
    age_records(&uri, Duration::from_secs(7200));
    let pruned = other.prune(Duration::ZERO).await.unwrap();
    assert!(pruned >= 3, "{pruned}");
    let (_stalled, made) = writer.await.unwrap();
    scenario.teardown();
    let made = made.unwrap();
    let fresh = RecordPublisher::open(&GraphStore::new(&uri).unwrap());
    assert_eq!(fresh.head(&BranchName::main()).await.unwrap().id, made.id);
    assert_eq!(fresh.head(&dev).await.unwrap().id, head.id);
    let log = fresh.log(&BranchName::main(), 10).await.unwrap();
    assert_eq!(log[0].id, made.id);
}
