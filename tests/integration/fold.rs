//! The fold: acknowledged WAL rows → one graph commit, exactly once; fold-time validation
//! and dead letters; the `halt` policy; crash windows; the background folder.

use std::time::Duration;

use arrow_array::Array;
use tributary::{
    At, CommitKind, ErrorKind, FoldSettings, FoldTriggers, Graph, GraphSettings, LoadOptions,
    Recovered, RejectPolicy, FOLD_ACTOR, REJECTS_PATH,
};
use tributary_tests::{company, edge, ndjson, person, person_with_email, temp_graph};

use crate::columns::{age_of, ids, sorted_strings};
use crate::FAILPOINTS;

async fn send(graph: &Graph, lines: &[String]) {
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(lines))
        .await
        .unwrap();
    assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
    assert_eq!(ack.durable_rows, lines.len() as u64);
}

#[tokio::test]
async fn a_fold_publishes_every_acknowledged_row_in_one_commit() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .load(&ndjson(&[company("acme")]), &LoadOptions::default())
        .await
        .unwrap();
    send(
        &graph,
        &[
            person("ada", 36),
            person("alan", 41),
            edge("WorksAt", "ada", "acme"),
        ],
    )
    .await;
    assert!(
        ids(&graph, "Person").await.is_empty(),
        "not visible before the fold"
    );

    let before = graph.log("main", 100).await.unwrap().len();
    let outcome = graph.fold("main").await.unwrap();
    let commit = outcome.commit.expect("a fold commit");
    assert_eq!(commit.kind, CommitKind::Fold);
    assert_eq!(commit.actor, FOLD_ACTOR);
    assert_eq!(commit.rows_written["nodes/Person.lance"], 2);
    assert_eq!(commit.rows_written["edges/WorksAt.lance"], 1);
    assert_eq!(outcome.rows["Person"], 2);
    assert_eq!(outcome.dead_letters, 0);
    assert_eq!(
        commit.folded.len(),
        2,
        "one shard per table: {:?}",
        commit.folded
    );
    assert_eq!(graph.log("main", 100).await.unwrap().len(), before + 1);

    assert_eq!(ids(&graph, "Person").await, ["ada", "alan"]);
    assert_eq!(ids(&graph, "WorksAt").await, ["ada->acme"]);
    let status = graph.ingest_status("main").await.unwrap();
    assert_eq!(status.last_fold.as_deref(), Some(commit.id.as_str()));
    for table in &status.tables {
        assert_eq!(table.pending_rows, 0, "{}", table.table);
        assert_eq!(table.unflushed_rows, 0, "{}", table.table);
    }

    // Nothing pending: no commit.
    let again = graph.fold("main").await.unwrap();
    assert!(again.commit.is_none());
    assert_eq!(graph.log("main", 100).await.unwrap().len(), before + 1);
}

#[tokio::test]
async fn the_newest_acknowledged_write_of_a_key_wins() {
    let (_dir, _uri, graph) = temp_graph().await;
    send(&graph, &[person("ada", 36)]).await;
    graph.close_writers().await.unwrap(); // generation 1
    send(&graph, &[person("ada", 37), person("bob", 5)]).await;
    graph.close_writers().await.unwrap(); // generation 2
    send(&graph, &[person("ada", 38)]).await; // in the memtable: the cut flushes it

    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.rows["Person"], 2, "one row per key");
    let shard = &outcome.folded[0];
    assert!(
        shard.last_generation > shard.first_generation,
        "several generations in one fold: {shard:?}"
    );
    assert_eq!(age_of(&graph, "ada").await, Some(38));

    send(&graph, &[person("ada", 39)]).await;
    graph.fold("main").await.unwrap();
    assert_eq!(age_of(&graph, "ada").await, Some(39));
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
}

#[tokio::test]
async fn validation_spans_chunks_of_one_fold() {
    let (_dir, uri, graph) = temp_graph().await;
    let mut lines = Vec::new();
    for i in 0..9 {
        lines.push(person_with_email(
            &format!("p{i}"),
            &format!("u{}@x.io", i % 3),
        ));
    }
    send(&graph, &lines).await;
    drop(graph);
    let settings = GraphSettings {
        fold: FoldSettings {
            chunk_rows: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    let graph = Graph::builder(&uri)
        .settings(settings)
        .open()
        .await
        .unwrap();
    // The writer of the first handle was never closed: its rows are in the WAL only, and
    // the fold's cut claims the shard to bring them in.
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.rows["Person"], 3, "one owner per email");
    assert_eq!(outcome.dead_letters, 6);
    let rejects = graph.rejects(&At::default()).await.unwrap();
    assert_eq!(rejects.num_rows(), 6);
    assert!(sorted_strings(&rejects, "kind")
        .iter()
        .all(|k| k == "unique"));
}

#[tokio::test]
async fn rows_failing_fold_validation_become_dead_letters_in_the_same_commit() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .load(
            &ndjson(&[
                company("acme"),
                company("beta"),
                person_with_email("zed", "z@x.io"),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    send(
        &graph,
        &[
            person("ada", 1),
            person_with_email("bob", "z@x.io"),
            person("carl", 3),
            edge("Knows", "ada", "ghost"),
            edge("Knows", "ada", "carl"),
            edge("WorksAt", "carl", "acme"),
            edge("WorksAt", "carl", "beta"),
        ],
    )
    .await;
    let outcome = graph.fold("main").await.unwrap();
    let commit = outcome.commit.expect("a fold commit");
    assert_eq!(outcome.dead_letters, 3);
    assert_eq!(commit.rows_written[&REJECTS_PATH], 3);
    assert!(commit.tables.contains_key(&REJECTS_PATH));

    let rejects = graph.rejects(&At::default()).await.unwrap();
    assert_eq!(
        sorted_strings(&rejects, "kind"),
        ["cardinality", "endpoint", "unique"]
    );
    assert_eq!(
        sorted_strings(&rejects, "fold_commit"),
        vec![commit.id.clone(); 3]
    );
    let keys = sorted_strings(&rejects, "key");
    assert!(keys.contains(&"ada->ghost".to_owned()), "{keys:?}");
    let messages = sorted_strings(&rejects, "message");
    assert!(messages.iter().any(|m| m.contains("ghost")), "{messages:?}");
    let rows = sorted_strings(&rejects, "row");
    assert!(rows.iter().all(|r| r.starts_with('{')), "{rows:?}");

    assert_eq!(ids(&graph, "Knows").await, ["ada->carl"]);
    assert_eq!(ids(&graph, "WorksAt").await.len(), 1, "@card(0..1)");
    assert_eq!(
        ids(&graph, "Person").await,
        ["ada", "carl", "zed"],
        "zed keeps the email"
    );

    // Dead letters are part of the snapshot: the commit before the fold has none.
    let parent = commit.parent.clone().unwrap();
    assert_eq!(
        graph.rejects(&At::Commit(parent)).await.unwrap().num_rows(),
        0
    );
}

#[tokio::test]
async fn the_halt_policy_refuses_the_fold_and_reports_the_row() {
    let (_dir, uri, graph) = temp_graph().await;
    send(&graph, &[person("ada", 1), edge("Knows", "ada", "ghost")]).await;
    graph.close_writers().await.unwrap();
    drop(graph);
    let settings = GraphSettings {
        fold: FoldSettings {
            policy: RejectPolicy::Halt,
            ..Default::default()
        },
        ..Default::default()
    };
    let graph = Graph::builder(&uri)
        .settings(settings)
        .open()
        .await
        .unwrap();
    let head = graph.snapshot(&At::default()).await.unwrap();
    let error = graph.fold("main").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    let message = error.to_string();
    assert!(
        message.contains("ada->ghost") && message.contains("endpoint"),
        "{message}"
    );
    assert_eq!(
        graph.snapshot(&At::default()).await.unwrap(),
        head,
        "nothing published"
    );
    let status = graph.ingest_status("main").await.unwrap();
    assert!(status
        .fold_error
        .as_deref()
        .is_some_and(|e| e.contains("ada->ghost")));
    assert!(status.tables.iter().any(|t| t.pending_rows > 0));

    // Another process sees the halt too.
    let other = Graph::open(&uri).await.unwrap();
    let seen = other.ingest_status("main").await.unwrap().fold_error;
    assert!(seen.is_some_and(|e| e.contains("ada->ghost")));

    // The missing endpoint arrives: the next fold applies everything and clears the halt.
    send(&graph, &[person("ghost", 2)]).await;
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.dead_letters, 0);
    assert_eq!(ids(&graph, "Knows").await, ["ada->ghost"]);
    assert!(graph
        .ingest_status("main")
        .await
        .unwrap()
        .fold_error
        .is_none());
}

#[tokio::test]
async fn a_load_after_an_ingest_of_the_same_key_wins() {
    let (_dir, _uri, graph) = temp_graph().await;
    send(&graph, &[person("ada", 36)]).await;
    graph
        .load(&ndjson(&[person("ada", 50)]), &LoadOptions::default())
        .await
        .unwrap();
    assert_eq!(age_of(&graph, "ada").await, Some(50));
    graph.fold("main").await.unwrap();
    assert_eq!(
        age_of(&graph, "ada").await,
        Some(50),
        "the older ingest never lands on top"
    );
    let kinds: Vec<CommitKind> = graph
        .log("main", 3)
        .await
        .unwrap()
        .iter()
        .map(|c| c.kind)
        .collect();
    assert_eq!(
        kinds[..2],
        [CommitKind::Load, CommitKind::Fold],
        "folded first, then loaded"
    );
}

/// Data files of every table (staged or committed).
fn data_files(uri: &str) -> usize {
    ["nodes/Person.lance", "edges/Knows.lance"]
        .iter()
        .map(|t| {
            std::fs::read_dir(std::path::Path::new(uri).join(t).join("data"))
                .map(|d| d.count())
                .unwrap_or(0)
        })
        .sum()
}

/// Ingest two tables' rows and a delete, stop a fold at `point`, reopen (recovery), fold
/// again; every acknowledged row must be visible once, the deleted node and its edges gone,
/// and one fold commit must carry them.
async fn fold_crash_at(point: &str, expect: fn(&Recovered) -> bool) {
    let (_dir, uri, graph) = temp_graph().await;
    graph
        .load(
            &ndjson(&[
                person("cy", 3),
                person("dan", 4),
                edge("Knows", "cy", "dan"),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    // Sent as a producer, so the fold carries its mark too.
    let as_producer = tributary::IngestOptions {
        producer: Some(tributary::Producer::new("p", 1).unwrap()),
        ..Default::default()
    };
    let lines = [
        person("ada", 1),
        person("bob", 2),
        edge("Knows", "ada", "bob"),
        tributary_tests::delete("Person", "cy"),
    ];
    let ack = graph
        .ingestor(&as_producer)
        .unwrap()
        .send(1, &ndjson(&lines))
        .await
        .unwrap();
    assert_eq!(ack.durable_rows, 4);
    let files_before = data_files(&uri);
    {
        let _lock = FAILPOINTS.lock().await;
        let scenario = fail::FailScenario::setup();
        fail::cfg(point, "return").unwrap();
        let error = graph.fold("main").await.unwrap_err();
        assert!(error.to_string().contains(point), "{error}");
        scenario.teardown();
    }
    // What recovery does depends on the window (run on this handle, as open would).
    let report = graph.recover().await.unwrap();
    assert!(
        matches!(report.as_slice(), [one] if expect(one)),
        "{point}: {report:?}"
    );
    if matches!(report.as_slice(), [Recovered::Dropped { .. }]) {
        assert_eq!(
            data_files(&uri),
            files_before,
            "a dropped fold's staged files are removed"
        );
    }
    drop(graph);
    let graph = Graph::open(&uri).await.unwrap();
    assert!(
        graph.store().list("__recovery").await.unwrap().is_empty(),
        "sidecar left"
    );
    assert!(graph.recover().await.unwrap().is_empty());
    graph.fold("main").await.unwrap();

    assert_eq!(ids(&graph, "Person").await, ["ada", "bob", "dan"]);
    assert_eq!(ids(&graph, "Knows").await, ["ada->bob"]);
    let folds: Vec<_> = graph
        .log("main", 20)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.kind == CommitKind::Fold)
        .collect();
    assert_eq!(folds.len(), 1, "exactly one fold commit: {folds:#?}");
    assert_eq!(
        folds[0].rows_written["nodes/Person.lance"], 3,
        "2 rows, 1 delete"
    );
    assert_eq!(
        folds[0].rows_written["edges/Knows.lance"], 2,
        "1 row, 1 cascade"
    );
    assert_eq!(folds[0].producers.get("p"), Some(&4), "the producer's mark");
    let status = graph.ingest_status("main").await.unwrap();
    for table in &status.tables {
        assert_eq!(
            table.pending_rows, 0,
            "{}: nothing left to fold",
            table.table
        );
    }
    // Nothing is folded twice: one more fold has nothing to do.
    assert!(graph.fold("main").await.unwrap().commit.is_none());
}

#[tokio::test]
async fn fold_crash_before_any_table_commit_refolds() {
    fold_crash_at("fold::before-table-commits", |r| {
        matches!(r, Recovered::Dropped { .. })
    })
    .await;
}

#[tokio::test]
async fn fold_crash_between_table_commits_is_rolled_forward() {
    fold_crash_at("fold::between-table-commits", |r| {
        matches!(r, Recovered::RolledForward { .. })
    })
    .await;
}

#[tokio::test]
async fn fold_crash_before_publish_is_rolled_forward() {
    fold_crash_at("fold::before-publish", |r| {
        matches!(r, Recovered::RolledForward { .. })
    })
    .await;
}

#[tokio::test]
async fn fold_crash_after_publish_only_deletes_the_sidecar() {
    fold_crash_at("fold::before-sidecar-delete", |r| {
        matches!(r, Recovered::AlreadyPublished { .. })
    })
    .await;
}

#[tokio::test]
async fn the_background_folder_publishes_and_stops_on_close() {
    let (_dir, uri, graph) = temp_graph().await;
    drop(graph);
    let graph = tributary_tests::quickly_folding(&uri).await;
    assert!(graph.folder_running().await);
    send(&graph, &[person("ada", 1), person("bob", 2)]).await;
    let mut visible = Vec::new();
    for _ in 0..600 {
        visible = ids(&graph, "Person").await;
        if visible.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        visible,
        ["ada", "bob"],
        "the folder published without a fold call"
    );
    graph.close().await.unwrap();
    assert!(!graph.folder_running().await);
    let folds = graph
        .log("main", 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.kind == CommitKind::Fold)
        .count();
    assert!(folds >= 1);
}

#[tokio::test]
async fn fold_triggers_fire_on_generations_bytes_and_lag() {
    let (_dir, uri, graph) = temp_graph().await;
    drop(graph);
    let open = |triggers: FoldTriggers| {
        let uri = uri.clone();
        async move {
            let settings = GraphSettings {
                triggers,
                ..Default::default()
            };
            Graph::builder(&uri)
                .settings(settings)
                .open()
                .await
                .unwrap()
        }
    };
    let quiet = FoldTriggers {
        pending_generations: 2,
        pending_bytes: u64::MAX,
        max_lag: Duration::from_secs(3_600),
        ..Default::default()
    };
    let graph = open(quiet.clone()).await;
    assert!(!graph.fold_due("main").await.unwrap(), "nothing pending");
    send(&graph, &[person("ada", 1)]).await;
    graph.close_writers().await.unwrap();
    assert!(
        !graph.fold_due("main").await.unwrap(),
        "one generation, threshold two"
    );
    send(&graph, &[person("bob", 1)]).await;
    graph.close_writers().await.unwrap();
    assert!(graph.fold_due("main").await.unwrap(), "two generations");
    drop(graph);

    // Unflushed bytes count toward the bytes threshold.
    let graph = open(FoldTriggers {
        pending_generations: usize::MAX,
        pending_bytes: 1,
        ..quiet.clone()
    })
    .await;
    assert!(
        graph.fold_due("main").await.unwrap(),
        "pending generation bytes"
    );
    graph.fold("main").await.unwrap();
    assert!(!graph.fold_due("main").await.unwrap(), "folded");
    send(&graph, &[person("carl", 1)]).await;
    assert!(
        graph.fold_due("main").await.unwrap(),
        "unflushed memtable bytes"
    );
    drop(graph);

    // An acknowledged row older than the lag bound is due on its own.
    let graph = open(FoldTriggers {
        pending_generations: usize::MAX,
        max_lag: Duration::from_millis(1),
        ..quiet
    })
    .await;
    send(&graph, &[person("dan", 1)]).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(graph.fold_due("main").await.unwrap(), "max lag");
}

#[tokio::test]
async fn a_backlog_over_max_rows_folds_in_several_commits_nodes_first() {
    let (_dir, uri, graph) = temp_graph().await;
    for batch in 0..3 {
        let a = format!("a{batch}");
        let b = format!("b{batch}");
        send(&graph, &[person(&a, 1), person(&b, 2)]).await;
        graph.close_writers().await.unwrap(); // one 2-row generation each
    }
    send(
        &graph,
        &[edge("Knows", "a0", "b2"), edge("Knows", "a2", "b0")],
    )
    .await;
    graph.close_writers().await.unwrap();
    drop(graph);
    let settings = GraphSettings {
        fold: FoldSettings {
            max_rows: 3,
            ..Default::default()
        },
        ..Default::default()
    };
    let graph = Graph::builder(&uri)
        .settings(settings)
        .open()
        .await
        .unwrap();
    let outcome = graph.fold("main").await.unwrap();
    assert!(outcome.complete);
    // Three 2-row node generations, then the edges: each fold fits in 3 rows.
    assert_eq!(outcome.commits, 4, "{:?}", outcome.folded);
    assert_eq!(outcome.rows["Person"], 6);
    assert_eq!(outcome.rows["Knows"], 2);
    assert_eq!(outcome.dead_letters, 0, "no edge folded before its nodes");
    let folds: Vec<_> = graph
        .log("main", 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.kind == CommitKind::Fold)
        .collect();
    assert_eq!(folds.len(), 4);
    for fold in &folds {
        let rows: u64 = fold.rows_written.values().sum();
        assert!(rows <= 3, "bounded by max_rows: {fold:?}");
    }
    assert_eq!(ids(&graph, "Knows").await, ["a0->b2", "a2->b0"]);
}

/// The emails of the Person rows at the head, by key.
async fn emails(graph: &Graph) -> Vec<(String, String)> {
    let rows = graph
        .read("Person", &tributary::ReadOptions::default())
        .await
        .unwrap();
    let ids = rows
        .column_by_name("id")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .unwrap();
    let emails = rows
        .column_by_name("email")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .unwrap();
    let mut out: Vec<(String, String)> = (0..rows.num_rows())
        .filter(|&i| arrow_array::Array::is_valid(emails, i))
        .map(|i| (ids.value(i).to_owned(), emails.value(i).to_owned()))
        .collect();
    out.sort();
    out
}

/// A value a row gives up is free only if that row's new version is written: when the
/// change is refused the row keeps its old value, so a row that wanted it is refused too.
/// Two rows that swap their values are both written.
#[tokio::test]
async fn a_unique_value_is_freed_only_by_a_change_that_is_written() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .load(
            &ndjson(&[
                person_with_email("ada", "a@x.io"),
                person_with_email("bob", "b@x.io"),
                person_with_email("eve", "e@x.io"),
                person_with_email("fay", "f@x.io"),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    send(
        &graph,
        &[
            // Refused: bob holds b@x.io. So ada keeps a@x.io, and cy may not have it.
            person_with_email("ada", "b@x.io"),
            person_with_email("cy", "a@x.io"),
            // A swap: both written.
            person_with_email("eve", "f@x.io"),
            person_with_email("fay", "e@x.io"),
        ],
    )
    .await;
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.dead_letters, 2);
    let rejects = graph.rejects(&At::default()).await.unwrap();
    assert_eq!(sorted_strings(&rejects, "key"), ["ada", "cy"]);
    assert_eq!(
        emails(&graph).await,
        [
            ("ada".to_owned(), "a@x.io".to_owned()),
            ("bob".to_owned(), "b@x.io".to_owned()),
            ("eve".to_owned(), "f@x.io".to_owned()),
            ("fay".to_owned(), "e@x.io".to_owned()),
        ],
        "every email held once"
    );
}

/// Every fold commit adds its new versions' metadata to Lance's session cache; a graph's
/// store bounds that cache, so a long fold (or a long-running server) holds at most the
/// bound, not every version it ever read.
#[tokio::test]
async fn many_fold_commits_keep_lance_s_caches_within_the_store_s_bounds() {
    let (_dir, uri, graph) = temp_graph().await;
    drop(graph);
    let bound = 256 << 10;
    let graph = Graph::builder(&uri)
        .store_options(tributary::StoreOptions {
            caches: tributary::SessionCaches {
                metadata_bytes: bound,
                index_bytes: bound,
            },
            ..Default::default()
        })
        .open()
        .await
        .unwrap();
    let mut most = 0;
    for round in 0..30 {
        let lines: Vec<String> = (0..50)
            .map(|i| person(&format!("p{round}-{i}"), i))
            .collect();
        send(&graph, &lines).await;
        graph.fold("main").await.unwrap();
        assert_eq!(ids(&graph, "Person").await.len(), (round + 1) * 50);
        most = most.max(graph.store().cache_bytes());
    }
    assert!(
        most <= 2 * bound as u64,
        "Lance's caches held {most} bytes, over the bounds of {} bytes",
        2 * bound
    );
}
