//! Exactly-once producers: lines at or below a producer's acknowledged mark are acknowledged
//! again without being written, across streams, restarts and graph handles; a retry of an
//! older send never reverts a newer write; one stream of a producer runs at a time; folds
//! record the marks their commit holds every line of.

use std::time::Duration;

use tributary::{ErrorKind, Graph, IngestAck, IngestOptions, Producer, View};
use tributary_tests::{delete, ndjson, person, temp_graph, wal_entries};

use crate::columns::{age_of, ids};
use crate::FAILPOINTS;

fn as_producer(id: &str, first_sequence: u64) -> IngestOptions {
    IngestOptions {
        producer: Some(Producer::new(id, first_sequence).unwrap()),
        ..IngestOptions::default()
    }
}

/// One stream of `id` whose first line is sequence `first_sequence`, sending `lines`.
async fn stream(graph: &Graph, id: &str, first_sequence: u64, lines: &[String]) -> IngestAck {
    let ingestor = graph.ingestor(&as_producer(id, first_sequence)).unwrap();
    ingestor.send(1, &ndjson(lines)).await.unwrap()
}

fn mark_of(status: &tributary::IngestStatus, id: &str) -> (Option<u64>, Option<u64>) {
    status
        .producers
        .iter()
        .find(|p| p.producer == id)
        .map_or((None, None), |p| (p.acknowledged, p.folded))
}

#[tokio::test]
async fn a_resent_stream_writes_only_the_lines_not_acknowledged_before() {
    let (_dir, uri, graph) = temp_graph().await;
    let first = stream(&graph, "orders", 1, &[person("ada", 1), person("bob", 2)]).await;
    assert_eq!((first.durable_rows, first.duplicates), (2, 0));
    // The producer did not hear back and sends again, with one line more.
    let lines = [person("ada", 1), person("bob", 2), person("cy", 3)];
    let again = stream(&graph, "orders", 1, &lines).await;
    assert_eq!(
        (again.durable_rows, again.duplicates, again.through_line),
        (1, 2, 3)
    );
    // Every line acknowledged already: nothing is written, everything acknowledged.
    let entries = wal_entries(&uri, "nodes/Person.lance");
    let all = stream(&graph, "orders", 1, &lines).await;
    assert_eq!((all.durable_rows, all.duplicates), (0, 3));
    assert_eq!(
        wal_entries(&uri, "nodes/Person.lance"),
        entries,
        "a WAL append"
    );
    let status = graph.ingest_status("main").await.unwrap();
    assert_eq!(mark_of(&status, "orders"), (Some(3), None));

    let folded = graph.fold("main").await.unwrap();
    assert_eq!(folded.rows.get("Person"), Some(&3));
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob", "cy"]);
    let head = &graph.log("main", 1).await.unwrap()[0];
    assert_eq!(head.producers.get("orders"), Some(&3));
    let status = graph.ingest_status("main").await.unwrap();
    assert_eq!(mark_of(&status, "orders"), (Some(3), Some(3)));
    // Another producer has marks of its own.
    let other = stream(&graph, "billing", 1, &[person("dee", 4)]).await;
    assert_eq!((other.durable_rows, other.duplicates), (1, 0));
}

#[tokio::test]
async fn a_late_retry_of_an_older_send_never_reverts_a_newer_write() {
    let (_dir, _uri, graph) = temp_graph().await;
    stream(&graph, "p", 1, &[person("ada", 1)]).await;
    stream(&graph, "p", 2, &[person("ada", 2), delete("Person", "bob")]).await;
    // The first send again, and an older one that overlaps the newest.
    let late = stream(&graph, "p", 1, &[person("ada", 1)]).await;
    assert_eq!((late.durable_rows, late.duplicates), (0, 1));
    let overlap = stream(&graph, "p", 2, &[person("ada", 9), person("cy", 3)]).await;
    assert_eq!((overlap.durable_rows, overlap.duplicates), (0, 2));
    // Sequences may skip: the mark moves to the highest acknowledged.
    let gap = stream(&graph, "p", 10, &[person("eve", 5)]).await;
    assert_eq!((gap.durable_rows, gap.duplicates), (1, 0));
    let below = stream(&graph, "p", 7, &[person("eve", 6)]).await;
    assert_eq!(below.duplicates, 1);
    let fresh = View {
        fresh: true,
        ..View::default()
    };
    let ada = graph.get("Person", "ada", fresh).await.unwrap();
    assert!(ada.is_some());
    graph.fold("main").await.unwrap();
    assert_eq!(age_of(&graph, "ada").await, Some(2));
    assert_eq!(age_of(&graph, "eve").await, Some(5));
    assert_eq!(ids(&graph, "Person").await, ["ada", "eve"]);
}

#[tokio::test]
async fn marks_hold_across_a_restart_and_another_graph_handle() {
    let (_dir, uri, graph) = temp_graph().await;
    stream(&graph, "p", 1, &[person("ada", 1), person("bob", 2)]).await;
    graph.close_writers().await.unwrap();
    drop(graph);

    let graph = Graph::open(&uri).await.unwrap();
    let retry = stream(&graph, "p", 1, &[person("ada", 1), person("bob", 2)]).await;
    assert_eq!((retry.durable_rows, retry.duplicates), (0, 2));
    // A second handle (as another process would) sees the same mark once the first
    // handle's stream has ended.
    let other = Graph::open(&uri).await.unwrap();
    let ack = stream(&other, "p", 2, &[person("bob", 2), person("cy", 3)]).await;
    assert_eq!((ack.durable_rows, ack.duplicates), (1, 1));
    other.close_writers().await.unwrap();
    graph.fold("main").await.unwrap();
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob", "cy"]);
}

#[tokio::test]
async fn one_stream_of_a_producer_runs_at_a_time() {
    let (_dir, _uri, graph) = temp_graph().await;
    let first = graph.ingestor(&as_producer("p", 1)).unwrap();
    first.send(1, &person("ada", 1)).await.unwrap();
    // The first stream is still open: a second is refused (after a short wait) as
    // unavailable, and writes nothing.
    let second = graph.ingestor(&as_producer("p", 2)).unwrap();
    let error = second.send(1, &person("bob", 2)).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(
        error.to_string().contains("producer `p` is streaming"),
        "{error}"
    );
    // Once the first ends, the second goes on from its mark.
    drop(first);
    let mut ack = None;
    for _ in 0..100 {
        match second.send(1, &person("bob", 2)).await {
            Ok(done) => {
                ack = Some(done);
                break;
            }
            Err(error) if error.kind() == ErrorKind::Unavailable => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(error) => panic!("{error}"),
        }
    }
    let ack = ack.expect("the lease was handed on");
    assert_eq!((ack.durable_rows, ack.duplicates), (1, 0));
    graph.fold("main").await.unwrap();
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
}

#[tokio::test]
async fn a_send_stopped_before_its_mark_is_written_once_by_its_retry() {
    let (_dir, _uri, graph) = temp_graph().await;
    stream(&graph, "p", 1, &[person("ada", 1)]).await;
    {
        let _lock = FAILPOINTS.lock().await;
        let scenario = fail::FailScenario::setup();
        fail::cfg("ingest::before-producer-mark", "return").unwrap();
        let ingestor = graph.ingestor(&as_producer("p", 2)).unwrap();
        let error = ingestor
            .send(1, &ndjson(&[person("bob", 2), person("ada", 3)]))
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("before-producer-mark"),
            "{error}"
        );
        scenario.teardown();
    }
    // Not acknowledged, so the producer sends again: the rows are written again, the
    // same rows in the same place among the producer's writes.
    let retry = stream(&graph, "p", 2, &[person("bob", 2), person("ada", 3)]).await;
    assert_eq!((retry.durable_rows, retry.duplicates), (2, 0));
    let folded = graph.fold("main").await.unwrap();
    assert_eq!(folded.rows.get("Person"), Some(&2), "each key once");
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
    assert_eq!(age_of(&graph, "ada").await, Some(3));
    let head = &graph.log("main", 1).await.unwrap()[0];
    assert_eq!(head.producers.get("p"), Some(&3));
}

#[tokio::test]
async fn a_strict_streams_bad_line_is_not_acknowledged_and_is_written_once_fixed() {
    let (_dir, _uri, graph) = temp_graph().await;
    let strict = IngestOptions {
        strict: true,
        ..as_producer("p", 1)
    };
    let ingestor = graph.ingestor(&strict).unwrap();
    let lines = [person("ada", 1), person("bob", 999), person("cy", 3)];
    let ack = ingestor.send(1, &ndjson(&lines)).await.unwrap();
    assert_eq!(ack.stopped_at.as_ref().map(|bad| bad.line), Some(2));
    // The stream ends when the last copy of its producer goes.
    drop((ingestor, strict));
    let status = graph.ingest_status("main").await.unwrap();
    assert_eq!(
        mark_of(&status, "p").0,
        Some(1),
        "only the line before the bad one"
    );
    // Sent again fixed, from the bad line on.
    let fixed = stream(
        &graph,
        "p",
        1,
        &[person("ada", 1), person("bob", 2), person("cy", 3)],
    )
    .await;
    assert_eq!((fixed.durable_rows, fixed.duplicates), (2, 1));
    graph.fold("main").await.unwrap();
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob", "cy"]);
}

fn lines_of(n: usize) -> Vec<String> {
    (0..n).map(|i| person(&format!("n{i}"), 1)).collect()
}

#[tokio::test]
async fn a_producers_sends_go_in_line_order() {
    let (_dir, _uri, graph) = temp_graph().await;
    let ingestor = graph.ingestor(&as_producer("p", 1)).unwrap();
    // Lines 11-20 before lines 1-10 (sent at once, or after a failed first send):
    // refused, so lines 1-10 are not later taken for duplicates.
    let error = ingestor.send(11, &ndjson(&lines_of(10))).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(
        error.to_string().contains("line 1 is not settled"),
        "{error}"
    );
    let first = ingestor.send(1, &ndjson(&lines_of(10))).await.unwrap();
    assert_eq!(first.durable_rows, 10);
    let later: Vec<String> = (10..20).map(|i| person(&format!("n{i}"), 1)).collect();
    let second = ingestor.send(11, &ndjson(&later)).await.unwrap();
    assert_eq!((second.durable_rows, second.duplicates), (10, 0));
    // Sending settled lines again is fine: they are duplicates.
    let again = ingestor.send(5, &ndjson(&later[..3])).await.unwrap();
    assert_eq!((again.durable_rows, again.duplicates), (0, 3));
    drop(ingestor);
    graph.fold("main").await.unwrap();
    assert_eq!(ids(&graph, "Person").await.len(), 20);
}

#[tokio::test]
async fn producer_ids_and_sequences_are_checked() {
    for bad in ["", "has space", &"x".repeat(65)] {
        let error = Producer::new(bad, 1).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        assert!(
            error.to_string().contains("a producer id is 1 to 64"),
            "{error}"
        );
    }
    let error = Producer::from_parts(None, Some(3)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert_eq!(Producer::from_parts(None, None).unwrap(), None);
    let producer = Producer::from_parts(Some("a/../b".into()), None)
        .unwrap()
        .unwrap();
    assert_eq!(producer.sequence_of(1), Some(1));
    // Sequences that would run past the largest number are refused, not wrapped.
    let (_dir, _uri, graph) = temp_graph().await;
    let near_the_end = IngestOptions {
        producer: Some(Producer::new("p", u64::MAX - 1).unwrap()),
        ..IngestOptions::default()
    };
    let ingestor = graph.ingestor(&near_the_end).unwrap();
    let error = ingestor.send(1, &ndjson(&lines_of(3))).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    let ack = ingestor.send(1, &ndjson(&lines_of(2))).await.unwrap();
    assert_eq!(ack.durable_rows, 2);
}

#[tokio::test]
async fn a_producer_id_that_looks_like_a_path_stays_in_its_folder() {
    let (dir, uri, graph) = temp_graph().await;
    stream(&graph, "../../escape", 1, &[person("ada", 1)]).await;
    let status = graph.ingest_status("main").await.unwrap();
    assert_eq!(mark_of(&status, "../../escape"), (Some(1), None));
    assert!(std::path::Path::new(&uri).join("__producers/main").is_dir());
    assert!(!dir.path().join("escape.json").exists());
}

#[tokio::test]
async fn the_background_folder_records_the_marks_of_this_process() {
    let (_dir, uri, graph) = temp_graph().await;
    drop(graph);
    let graph = tributary_tests::quickly_folding(&uri).await;
    stream(&graph, "p", 5, &[person("ada", 1), person("bob", 2)]).await;
    let mut folded = None;
    for _ in 0..600 {
        folded = graph.log("main", 1).await.unwrap()[0]
            .producers
            .get("p")
            .copied();
        if folded.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(folded, Some(6));
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
    graph.close().await.unwrap();
}
