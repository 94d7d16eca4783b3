//! Patches: a line that sets only the named fields of an existing row, on `load` (laid
//! over the head, in line order with the request's rows and deletes) and on `ingest`
//! (laid over the fresh view when acknowledged, in acknowledgement order).

use std::sync::Arc;

use arrow_array::{Array, Int32Array, RecordBatch, StringArray};
use tributary::{At, ErrorKind, Graph, LoadOptions, ReadOptions, View};
use tributary_tests::{company, delete, edge, ndjson, person, temp_graph};

use crate::columns::sorted_strings;

fn patch(key: &str, fields: &str) -> String {
    format!(r#"{{"type":"Person","patch":{{"name":"{key}",{fields}}}}}"#)
}

fn full(name: &str, age: i32, email: &str, bio: &str) -> String {
    format!(
        r#"{{"type":"Person","data":{{"name":"{name}","age":{age},"email":"{email}","bio":"{bio}"}}}}"#
    )
}

async fn load(graph: &Graph, lines: &[String]) -> tributary::Result<tributary::LoadOutcome> {
    graph.load(&ndjson(lines), &LoadOptions::default()).await
}

async fn row(graph: &Graph, key: &str, view: impl Into<View>) -> Option<RecordBatch> {
    graph.get("Person", key, view).await.unwrap()
}

fn age(row: &RecordBatch) -> Option<i32> {
    let ages = row
        .column_by_name("age")
        .unwrap()
        .as_any()
        .downcast_ref::<Int32Array>()
        .unwrap();
    ages.is_valid(0).then(|| ages.value(0))
}

fn text(row: &RecordBatch, field: &str) -> Option<String> {
    let values = row
        .column_by_name(field)
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    values.is_valid(0).then(|| values.value(0).to_owned())
}

#[tokio::test]
async fn a_loaded_patch_sets_only_its_fields() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[full("ada", 36, "a@x.io", "math")])
        .await
        .unwrap();
    let outcome = load(&graph, &[patch("ada", r#""age":37,"bio":null"#)])
        .await
        .unwrap();
    assert_eq!(outcome.rows.get("Person"), Some(&1));
    let ada = row(&graph, "ada", &At::default()).await.unwrap();
    assert_eq!(age(&ada), Some(37));
    assert_eq!(text(&ada, "email").as_deref(), Some("a@x.io"));
    assert_eq!(text(&ada, "bio"), None, "null is set");
    assert_eq!(text(&ada, "status").as_deref(), Some("active"));
}

#[tokio::test]
async fn a_loaded_patch_of_a_missing_key_refuses_the_load() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[person("ada", 1)]).await.unwrap();
    let commits = graph.log("main", 10).await.unwrap().len();
    let error = load(&graph, &[person("bob", 2), patch("nobody", r#""age":3"#)])
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    let lines = error.line_errors();
    assert_eq!(lines.len(), 1, "{error}");
    assert_eq!(lines[0].line, 2);
    assert!(lines[0].reason.contains("`nobody`"), "{error}");
    assert_eq!(graph.log("main", 10).await.unwrap().len(), commits);
    assert!(row(&graph, "bob", &At::default()).await.is_none());
}

#[tokio::test]
async fn rows_patches_and_deletes_of_a_load_apply_in_line_order() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[person("cy", 3), person("dan", 4)])
        .await
        .unwrap();
    load(
        &graph,
        &[
            full("ada", 1, "a@x.io", "first"),
            patch("ada", r#""age":2"#),
            patch("ada", r#""bio":"second""#),
            patch("bob", r#""age":5"#), // bob's row comes later and replaces it
            person("bob", 6),
            patch("cy", r#""age":30"#),
            delete("Person", "cy"),
            delete("Person", "dan"),
            person("dan", 40),
            patch("dan", r#""age":41"#),
        ],
    )
    .await
    .unwrap();
    let ada = row(&graph, "ada", &At::default()).await.unwrap();
    assert_eq!(age(&ada), Some(2));
    assert_eq!(text(&ada, "bio").as_deref(), Some("second"));
    assert_eq!(text(&ada, "email").as_deref(), Some("a@x.io"));
    assert_eq!(
        age(&row(&graph, "bob", &At::default()).await.unwrap()),
        Some(6)
    );
    assert!(row(&graph, "cy", &At::default()).await.is_none());
    assert_eq!(
        age(&row(&graph, "dan", &At::default()).await.unwrap()),
        Some(41)
    );

    let error = load(
        &graph,
        &[delete("Person", "ada"), patch("ada", r#""age":9"#)],
    )
    .await
    .unwrap_err();
    assert!(
        error.line_errors()[0]
            .reason
            .contains("an earlier line deletes it"),
        "{error}"
    );
}

#[tokio::test]
async fn a_patch_is_held_to_the_constraints_of_a_whole_row() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(
        &graph,
        &[
            full("ada", 1, "a@x.io", "x"),
            full("bob", 2, "b@x.io", "y"),
            company("acme"),
            edge("WorksAt", "ada", "acme"),
        ],
    )
    .await
    .unwrap();
    let error = load(&graph, &[patch("bob", r#""email":"a@x.io""#)])
        .await
        .unwrap_err();
    assert!(error.to_string().contains("a@x.io"), "{error}");
    // An edge's fields patch as a node's do.
    load(
        &graph,
        &[
            r#"{"edge":"WorksAt","from":"ada","to":"acme","patch":{"since":"2020-01-01"}}"#
                .to_owned(),
        ],
    )
    .await
    .unwrap();
    let edges = graph
        .read("WorksAt", &ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(sorted_strings(&edges, "id"), ["ada->acme"]);
}

async fn send(graph: &Graph, lines: &[String]) -> tributary::IngestAck {
    graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(lines))
        .await
        .unwrap()
}

#[tokio::test]
async fn an_ingested_patch_lays_over_the_fresh_row_and_folds_whole() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[full("ada", 1, "a@x.io", "folded")])
        .await
        .unwrap();
    // Over a row only the memtable holds, and over one the head holds.
    let ack = send(
        &graph,
        &[
            full("bob", 2, "b@x.io", "fresh"),
            patch("ada", r#""age":10"#),
        ],
    )
    .await;
    assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
    let ack = send(&graph, &[patch("bob", r#""age":20"#)]).await;
    assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
    assert_eq!(ack.durable_rows, 1);
    let fresh = || View::fresh(At::default());
    assert_eq!(age(&row(&graph, "bob", fresh()).await.unwrap()), Some(20));
    assert_eq!(age(&row(&graph, "ada", fresh()).await.unwrap()), Some(10));
    graph.fold("main").await.unwrap();
    let bob = row(&graph, "bob", &At::default()).await.unwrap();
    assert_eq!(age(&bob), Some(20));
    assert_eq!(text(&bob, "bio").as_deref(), Some("fresh"));
    let ada = row(&graph, "ada", &At::default()).await.unwrap();
    assert_eq!(age(&ada), Some(10));
    assert_eq!(text(&ada, "email").as_deref(), Some("a@x.io"));
}

#[tokio::test]
async fn an_ingested_patch_with_no_row_is_a_rejected_line_and_strict_stops_there() {
    let (_dir, _uri, graph) = temp_graph().await;
    send(&graph, &[person("gone", 1)]).await;
    send(&graph, &[delete("Person", "gone")]).await;
    let ack = send(
        &graph,
        &[
            person("ada", 1),
            patch("nobody", r#""age":2"#),
            patch("gone", r#""age":3"#),
            person("bob", 4),
        ],
    )
    .await;
    let lines: Vec<u64> = ack.rejected.iter().map(|e| e.line).collect();
    assert_eq!(lines, [2, 3], "{:?}", ack.rejected);
    assert!(ack.rejected[0].reason.contains("does not exist"));
    assert_eq!(ack.durable_rows, 2);

    let strict = graph
        .ingestor(&tributary::IngestOptions {
            strict: true,
            ..Default::default()
        })
        .unwrap();
    let lines = [
        person("cy", 1),
        patch("nobody", r#""age":2"#),
        person("dan", 3),
    ];
    let stream: Vec<tributary::StreamLine<'_>> = lines
        .iter()
        .map(|l| tributary::StreamLine::Text(l))
        .collect();
    let ack = strict.send_lines(1, &stream).await.unwrap();
    assert_eq!(ack.stopped_at.map(|e| e.line), Some(2));
    assert_eq!(ack.durable_rows, 1);
    graph.fold("main").await.unwrap();
    let ids = graph.read("Person", &ReadOptions::default()).await.unwrap();
    assert_eq!(sorted_strings(&ids, "id"), ["ada", "bob", "cy"]);
}

/// Concurrent sends patching different fields of one row all land: a patch's read and
/// write are not split by another send of the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_patches_of_one_row_lose_no_field() {
    let (_dir, _uri, graph) = temp_graph().await;
    let graph = Arc::new(graph);
    let keys: Vec<String> = (0..8).map(|n| format!("p{n}")).collect();
    let rows: Vec<String> = keys.iter().map(|k| person(k, 1)).collect();
    send(&graph, &rows).await;
    let mut tasks = Vec::new();
    for key in &keys {
        let email = format!(r#""email":"{key}@x.io""#);
        for fields in [
            r#""age":50"#,
            &email,
            r#""bio":"patched""#,
            r#""status":"inactive""#,
        ] {
            let graph = graph.clone();
            let line = patch(key, fields);
            tasks.push(tokio::spawn(async move {
                let ack = send(&graph, &[line]).await;
                assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(graph.fold("main").await.unwrap().dead_letters, 0);
    for key in &keys {
        let row = row(&graph, key, &At::default()).await.unwrap();
        assert_eq!(age(&row), Some(50), "{key}");
        assert_eq!(text(&row, "email"), Some(format!("{key}@x.io")), "{key}");
        assert_eq!(text(&row, "bio").as_deref(), Some("patched"), "{key}");
        assert_eq!(text(&row, "status").as_deref(), Some("inactive"), "{key}");
    }
}

/// A patch whose writer another process fenced is laid again over what that process
/// wrote, not written from what this one had read.
#[tokio::test]
async fn a_patch_fenced_by_another_process_settles_again() {
    let (_dir, uri, first) = temp_graph().await;
    send(&first, &[person("ada", 1)]).await;
    let second = Graph::open(&uri).await.unwrap();
    let ack = send(&second, &[patch("ada", r#""email":"ada@x.io""#)]).await;
    assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
    // `first` is fenced, and its memtable never saw the email.
    let ack = send(&first, &[patch("ada", r#""age":2"#)]).await;
    assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
    second.close().await.unwrap();
    first.fold("main").await.unwrap();
    let ada = row(&first, "ada", &At::default()).await.unwrap();
    assert_eq!(age(&ada), Some(2));
    assert_eq!(text(&ada, "email").as_deref(), Some("ada@x.io"));
    first.close().await.unwrap();
}

/// A load while a patch is between its read and its write waits for the patch (the patch
/// holds the branch's write turn): the load, acknowledged later, wins whole, and the patch
/// never writes back the row it read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_waits_for_a_patch_in_flight() {
    let (_dir, _uri, graph) = temp_graph().await;
    let graph = Arc::new(graph);
    load(&graph, &[full("ada", 1, "a@x.io", "old")])
        .await
        .unwrap();
    let _lock = crate::FAILPOINTS.lock().await;
    let scenario = fail::FailScenario::setup();
    fail::cfg("memwal::before-put", "sleep(500)").unwrap();
    let patching = {
        let graph = graph.clone();
        tokio::spawn(async move { send(&graph, &[patch("ada", r#""age":2"#)]).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    load(&graph, &[full("ada", 3, "a@x.io", "new")])
        .await
        .unwrap();
    let ack = patching.await.unwrap();
    scenario.teardown();
    assert_eq!(ack.durable_rows, 1);
    graph.fold("main").await.unwrap();
    let ada = row(&graph, "ada", &At::default()).await.unwrap();
    assert_eq!(age(&ada), Some(3));
    assert_eq!(text(&ada, "bio").as_deref(), Some("new"));
}

/// A patch whose writer another process fences between its read and its put (held here
/// before the put) is laid again over what that process wrote; if that process deleted
/// the row, the send writes nothing and is refused as a conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_fenced_before_its_put_settles_again_or_writes_nothing() {
    let (_dir, uri, first) = temp_graph().await;
    let first = Arc::new(first);
    send(&first, &[person("ada", 1), person("bob", 1)]).await;
    let second = Graph::open(&uri).await.unwrap();
    let _lock = crate::FAILPOINTS.lock().await;
    let scenario = fail::FailScenario::setup();
    let patch_held = |key: &'static str| {
        fail::cfg("memwal::before-put", "1*sleep(600)").unwrap();
        let first = first.clone();
        tokio::spawn(async move {
            let ingest = first.ingest("main").unwrap();
            ingest.send(1, &ndjson(&[patch(key, r#""age":2"#)])).await
        })
    };
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(200));

    // ada is written whole by the other process while the patch waits: laid again over it.
    let patching = patch_held("ada");
    pause().await;
    send(&second, &[full("ada", 9, "a@x.io", "new")]).await;
    assert_eq!(patching.await.unwrap().unwrap().durable_rows, 1);

    // bob is deleted while the patch waits: nothing is written, and the send is refused.
    let patching = patch_held("bob");
    pause().await;
    send(&second, &[delete("Person", "bob")]).await;
    let refused = patching.await.unwrap().unwrap_err();
    scenario.teardown();
    assert_eq!(refused.kind(), ErrorKind::Conflict, "{refused}");

    second.close().await.unwrap();
    first.fold("main").await.unwrap();
    let ada = row(&first, "ada", &At::default()).await.unwrap();
    assert_eq!(age(&ada), Some(2));
    assert_eq!(
        text(&ada, "bio").as_deref(),
        Some("new"),
        "the other process's row stays"
    );
    assert!(row(&first, "bob", &At::default()).await.is_none());
}
