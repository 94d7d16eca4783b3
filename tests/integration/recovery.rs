//! Crash windows of `load`: a failpoint stops the load where a crash would, the graph is
//! dropped and reopened, and recovery must leave the load fully visible exactly once or
//! not visible at all.

use tributary::{ErrorKind, Graph, LoadOptions, ReadOptions, Recovered};
use tributary_tests::{company, edge, ndjson, person, temp_graph};

use crate::FAILPOINTS;

/// A load touching three tables, so there is a "between table commits".
fn three_tables() -> String {
    ndjson(&[
        person("ada", 36),
        company("acme"),
        edge("WorksAt", "ada", "acme"),
    ])
}

async fn rows(graph: &Graph, ty: &str) -> usize {
    graph
        .read(ty, &ReadOptions::default())
        .await
        .unwrap()
        .num_rows()
}

/// Run a load that stops at `point`, reopen (which recovers), and return the graph after
/// one more load on top.
async fn crash_at(point: &str) -> (tempfile::TempDir, Graph) {
    let (dir, uri, graph) = temp_graph().await;
    {
        let _lock = FAILPOINTS.lock().await;
        let scenario = fail::FailScenario::setup();
        fail::cfg(point, "return").unwrap();
        let error = graph
            .load(&three_tables(), &LoadOptions::default())
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Internal);
        assert!(error.to_string().contains(point), "{error}");
        scenario.teardown();
    }
    drop(graph);
    let graph = Graph::open(&uri).await.unwrap();
    // Opening and reading never write: the sidecar waits for the next writer.
    rows(&graph, "Person").await;
    assert_eq!(
        graph.store().list("__recovery").await.unwrap().len(),
        1,
        "a read resolved the interrupted write"
    );
    // The next write resolves it first, and the graph takes writes on every table.
    graph
        .load(
            &ndjson(&[person("later", 1), company("later-co")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    let again = graph.recover().await.unwrap();
    assert!(again.is_empty(), "the load left work behind: {again:?}");
    assert!(
        graph.store().list("__recovery").await.unwrap().is_empty(),
        "sidecar or claim left behind"
    );
    (dir, graph)
}

async fn assert_fully_visible_once(graph: &Graph) {
    assert_eq!(rows(graph, "Person").await, 2, "ada + later");
    assert_eq!(rows(graph, "Company").await, 2, "acme + later-co");
    assert_eq!(rows(graph, "WorksAt").await, 1);
    let log = graph.log("main", 10).await.unwrap();
    let loads = log
        .iter()
        .filter(|c| c.rows_written.values().sum::<u64>() == 3)
        .count();
    assert_eq!(
        loads, 1,
        "the interrupted load is published exactly once: {log:#?}"
    );
}

#[tokio::test]
async fn crash_before_any_table_commit_leaves_nothing() {
    let (_dir, graph) = crash_at("load::before-table-commits").await;
    assert_eq!(rows(&graph, "Person").await, 1, "only the later load");
    assert_eq!(rows(&graph, "WorksAt").await, 0);
    assert_eq!(
        graph.log("main", 10).await.unwrap().len(),
        2,
        "init + later load"
    );
}

#[tokio::test]
async fn crash_between_table_commits_is_completed() {
    let (_dir, graph) = crash_at("load::between-table-commits").await;
    assert_fully_visible_once(&graph).await;
}

#[tokio::test]
async fn crash_before_publish_is_rolled_forward() {
    let (_dir, graph) = crash_at("load::before-publish").await;
    assert_fully_visible_once(&graph).await;
}

#[tokio::test]
async fn crash_after_publish_only_deletes_the_sidecar() {
    let (_dir, graph) = crash_at("load::before-sidecar-delete").await;
    assert_fully_visible_once(&graph).await;
}

#[tokio::test]
async fn recovery_reports_what_it_did() {
    let (_dir, uri, graph) = temp_graph().await;
    {
        let _lock = FAILPOINTS.lock().await;
        let scenario = fail::FailScenario::setup();
        fail::cfg("load::before-publish", "return").unwrap();
        graph
            .load(&three_tables(), &LoadOptions::default())
            .await
            .unwrap_err();
        scenario.teardown();
    }
    // Recovery of the same process's graph handle, without reopening.
    let report = graph.recover().await.unwrap();
    assert!(
        matches!(report.as_slice(), [Recovered::RolledForward { .. }]),
        "{report:?}"
    );
    assert_eq!(rows(&graph, "WorksAt").await, 1);
    drop(graph);
    let graph = Graph::open(&uri).await.unwrap();
    assert!(graph.recover().await.unwrap().is_empty());
}

/// A load that stopped after its table commit and the compaction that followed it (the
/// write's upkeep) is published at the compacted version: the next load, which updates a
/// row the compaction moved, commits instead of conflicting with the rewrite.
#[tokio::test]
async fn a_load_stopped_after_its_compaction_is_rolled_forward_with_it() {
    let (_dir, uri, graph) = temp_graph().await;
    let small = tributary_write::compaction::MAX_SMALL_FRAGMENTS;
    for i in 0..small {
        let line = ndjson(&[person(&format!("p{i}"), 1)]);
        graph.load(&line, &LoadOptions::default()).await.unwrap();
    }
    {
        let _lock = FAILPOINTS.lock().await;
        let scenario = fail::FailScenario::setup();
        fail::cfg("load::before-publish", "return").unwrap();
        let line = ndjson(&[person("last", 1)]);
        graph
            .load(&line, &LoadOptions::default())
            .await
            .unwrap_err();
        scenario.teardown();
    }
    drop(graph);
    let graph = Graph::open(&uri).await.unwrap();
    graph
        .load(&ndjson(&[person("p0", 99)]), &LoadOptions::default())
        .await
        .unwrap();
    assert_eq!(rows(&graph, "Person").await, small + 1);
    let p0 = graph
        .get("Person", "p0", tributary::At::default())
        .await
        .unwrap()
        .unwrap();
    let age = p0
        .column_by_name("age")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::Int32Array>()
        .unwrap()
        .value(0);
    assert_eq!(age, 99);
}

/// Rolling a stopped load forward publishes its table through its own upkeep only: a data
/// change above it that no graph commit made (here a delete written to the table directly,
/// standing for another write that stopped before its publish) stays invisible.
#[tokio::test]
async fn a_rolled_forward_load_never_publishes_another_writes_data_change() {
    let (_dir, uri, graph) = temp_graph().await;
    for name in ["p0", "p1"] {
        graph
            .load(&ndjson(&[person(name, 1)]), &LoadOptions::default())
            .await
            .unwrap();
    }
    {
        let _lock = FAILPOINTS.lock().await;
        let scenario = fail::FailScenario::setup();
        fail::cfg("load::before-publish", "return").unwrap();
        let line = ndjson(&[person("last", 1)]);
        graph
            .load(&line, &LoadOptions::default())
            .await
            .unwrap_err();
        scenario.teardown();
    }
    drop(graph);
    let table = format!("{}/nodes/Person.lance", uri.trim_end_matches('/'));
    let mut person_table = lance::Dataset::open(&table).await.unwrap();
    person_table.delete("id = 'p1'").await.unwrap();

    let graph = Graph::open(&uri).await.unwrap();
    graph
        .load(&ndjson(&[company("later-co")]), &LoadOptions::default())
        .await
        .unwrap();
    let get = |key: &'static str| graph.get("Person", key, tributary::At::default());
    assert!(
        get("last").await.unwrap().is_some(),
        "the load was rolled forward"
    );
    assert!(
        get("p1").await.unwrap().is_some(),
        "an unpublished delete became visible with the rolled-forward load"
    );
}
