//! A load's idempotency key: a retry with the same key answers with the commit the first
//! one made and writes nothing, whether the first was acknowledged or stopped in any crash
//! window; a later write is never reverted by the retry.

use tributary::{At, CrashWindow, ErrorKind, Graph, LoadOptions, WriteKind};
use tributary_tests::{company, ndjson, person, temp_graph};

use crate::columns::age_of;
use crate::FAILPOINTS;

fn keyed(key: &str) -> LoadOptions {
    LoadOptions {
        idempotency_key: Some(key.to_owned()),
        ..LoadOptions::default()
    }
}

#[tokio::test]
async fn a_retried_load_answers_with_its_first_commit_and_reverts_nothing() {
    let (_dir, _uri, graph) = temp_graph().await;
    let first = graph
        .load(&ndjson(&[person("ada", 1)]), &keyed("batch-1"))
        .await
        .unwrap();
    assert!(!first.replayed);
    // A newer write of the same row, then the retry of the first.
    graph
        .load(&ndjson(&[person("ada", 2)]), &LoadOptions::default())
        .await
        .unwrap();
    let commits = graph.log("main", 10).await.unwrap().len();
    let retry = graph
        .load(&ndjson(&[person("ada", 1)]), &keyed("batch-1"))
        .await
        .unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.commit.id, first.commit.id);
    assert_eq!(retry.rows.get("Person"), Some(&1));
    assert_eq!(graph.log("main", 10).await.unwrap().len(), commits);
    assert_eq!(
        age_of(&graph, "ada").await,
        Some(2),
        "the retry reverted a later write"
    );
    // Another key is another load.
    let other = graph
        .load(&ndjson(&[person("ada", 3)]), &keyed("batch-2"))
        .await
        .unwrap();
    assert!(!other.replayed);
    assert_eq!(age_of(&graph, "ada").await, Some(3));
    assert_eq!(
        graph.log("main", 1).await.unwrap()[0]
            .idempotency_key
            .as_deref(),
        Some("batch-2")
    );
}

#[tokio::test]
async fn a_bad_idempotency_key_is_refused() {
    let (_dir, _uri, graph) = temp_graph().await;
    for key in ["", "has space", &"k".repeat(201)] {
        let error = graph
            .load(&ndjson(&[person("ada", 1)]), &keyed(key))
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{key:?}");
    }
    assert!(graph
        .get("Person", "ada", &At::default())
        .await
        .unwrap()
        .is_none());
}

/// A first attempt (two tables, so every window exists) stopped in any crash window is, after recovery, either published (the
/// retry finds it) or dropped (the retry writes it): once, either way.
#[tokio::test]
async fn a_load_stopped_in_any_crash_window_is_written_once_by_its_retry() {
    for window in CrashWindow::all(WriteKind::Load) {
        let point = window.name();
        let point = point.as_str();
        let (_dir, uri, graph) = temp_graph().await;
        {
            let _lock = FAILPOINTS.lock().await;
            let scenario = fail::FailScenario::setup();
            fail::cfg(point, "return").unwrap();
            let error = graph
                .load(&ndjson(&[person("ada", 1), company("acme")]), &keyed("k"))
                .await
                .expect_err(point);
            assert!(error.to_string().contains(point), "{error}");
            scenario.teardown();
        }
        drop(graph);
        let graph = Graph::open(&uri).await.unwrap();
        let retry = graph
            .load(&ndjson(&[person("ada", 1), company("acme")]), &keyed("k"))
            .await
            .unwrap();
        let loads: Vec<_> = graph
            .log("main", 10)
            .await
            .unwrap()
            .into_iter()
            .filter(|c| c.idempotency_key.as_deref() == Some("k"))
            .collect();
        assert_eq!(loads.len(), 1, "{point}: {loads:#?}");
        assert_eq!(retry.commit.id, loads[0].id, "{point}");
        // Dropped before any table commit: the retry wrote it; later: recovery had.
        assert_eq!(
            retry.replayed,
            point != "load::before-table-commits",
            "{point}"
        );
        assert_eq!(age_of(&graph, "ada").await, Some(1));
    }
}
