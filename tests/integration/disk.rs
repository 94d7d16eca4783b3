//! A local disk that refuses writes: a full one (injected as the local store reports
//! ENOSPC, at each window where a write must become durable). Real full and read-only
//! disks, with real processes, are in the CLI's tests.

use tributary::{ErrorKind, Graph, StoreOptions};
use tributary_storage::{FaultKind, Faults};
use tributary_tests::{ndjson, SCHEMA};

use crate::s3::{assert_chain, line, people, Oracle};

/// Each place a write must reach the disk before it is acknowledged or published — the
/// WAL append of a send, the memtable flush and the table merge of a fold, a load's data,
/// and the commit point of a load and of a fold — meets a full disk once. The write is
/// refused as `unavailable` saying the disk is full and naming what it was writing, the
/// head does not move, and the same graph, space freed, carries on: every acknowledged row
/// is there exactly once after the next fold.
#[tokio::test]
async fn a_full_disk_refuses_each_durable_write_and_the_same_graph_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let faults = Faults::new();
    let graph = Graph::builder(&uri)
        .store_options(StoreOptions {
            faults: Some(faults.clone()),
            ..Default::default()
        })
        .init(SCHEMA)
        .await
        .unwrap();
    let mut oracle = Oracle::default();
    // The commit point's own writes: a manifest version, or a record.
    let (commit_point, its_role) = match tributary::PublisherKind::default_for_init().unwrap() {
        tributary::PublisherKind::Manifest => ("__manifest.lance/", "the graph's commit manifest"),
        tributary::PublisherKind::Record => ("__txn/log/", "the commit records"),
    };
    let windows = [
        (
            "send",
            "Person.lance/_mem_wal/",
            "the write-ahead log of Person",
        ),
        (
            "fold",
            "Person.lance/_mem_wal/",
            "the write-ahead log of Person",
        ),
        ("fold", "Person.lance/data/", "the data of Person"),
        ("fold", commit_point, its_role),
        ("load", "Person.lance/data/", "the data of Person"),
        ("load", commit_point, its_role),
    ];
    for (round, (step, pattern, role)) in windows.into_iter().enumerate() {
        let context = format!("{step} with the disk full at {pattern}");
        // Something for a fold to fold, sent while the disk had room.
        let pending = format!("p{round}");
        graph
            .ingest("main")
            .unwrap()
            .send(1, &ndjson(&[line(&pending, "sent")]))
            .await
            .unwrap();
        oracle.acknowledged(&pending, "sent");
        let head = graph.log("main", 1).await.unwrap()[0].id.clone();
        let before = people(&graph).await;

        let key = format!("k{round}");
        let text = ndjson(&[line(&key, step)]);
        faults.fail_next(pattern, FaultKind::DiskFull, 1_000);
        let refused = match step {
            "send" => graph
                .ingest("main")
                .unwrap()
                .send(1, &text)
                .await
                .map(|_| ()),
            "fold" => graph.fold("main").await.map(|_| ()),
            _ => graph.load(&text, &Default::default()).await.map(|_| ()),
        }
        .expect_err(&context);
        assert!(
            faults.injected().contains_key(&FaultKind::DiskFull),
            "{context}: the full disk was never met"
        );
        assert_eq!(
            refused.kind(),
            ErrorKind::Unavailable,
            "{context}: {refused}"
        );
        assert_eq!(
            refused.user_message(),
            format!("the disk is full (writing {role})"),
            "{context}: {refused}"
        );
        // Nothing half-visible: the head and its rows are as they were.
        assert_eq!(graph.log("main", 1).await.unwrap()[0].id, head, "{context}");
        assert_eq!(people(&graph).await, before, "{context}");

        // Space freed: the same graph takes the same write, and the refused one never
        // shows (a send that could not be made durable is not in the WAL).
        faults.clear_rules();
        match step {
            "send" => {
                let ack = graph.ingest("main").unwrap().send(1, &text).await.unwrap();
                assert_eq!(ack.durable_rows, 1, "{context}");
            }
            "fold" => {
                graph.fold("main").await.unwrap();
            }
            _ => {
                graph.load(&text, &Default::default()).await.unwrap();
            }
        }
        if step != "fold" {
            oracle.acknowledged(&key, step);
        }
        graph.fold("main").await.unwrap();
        oracle.check(&people(&graph).await, &context);
    }
    assert_chain(&graph).await;
    // Refused writes leave nothing a check takes for damage (no gap in a WAL).
    let report = graph.check(|_| {}).await.unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    let seen = people(&graph).await;
    assert_eq!(
        seen.len(),
        9,
        "six sends, one more send and two loads: {seen:?}"
    );
}
