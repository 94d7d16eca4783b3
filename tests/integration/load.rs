use tributary::{At, ErrorKind, LoadMode, LoadOptions, ReadOptions};
use tributary_tests::{company, edge, ndjson, person, person_with_email, temp_graph};

use crate::columns::{sorted_strings, strings};

fn count(batch: &arrow_array::RecordBatch) -> usize {
    batch.num_rows()
}

async fn rows(graph: &tributary::Graph, ty: &str) -> usize {
    count(&graph.read(ty, &ReadOptions::default()).await.unwrap())
}

#[tokio::test]
async fn load_is_one_commit_with_row_counts() {
    let (_dir, _uri, graph) = temp_graph().await;
    let text = ndjson(&[
        company("acme"),
        person("ada", 36),
        person("alan", 41),
        edge("WorksAt", "ada", "acme"),
        edge("Knows", "ada", "alan"),
    ]);
    let outcome = graph.load(&text, &LoadOptions::default()).await.unwrap();
    assert_eq!(outcome.rows.get("Person"), Some(&2));
    assert_eq!(outcome.rows.get("Company"), Some(&1));
    assert_eq!(outcome.rows.get("WorksAt"), Some(&1));
    assert_eq!(outcome.rows.get("Knows"), Some(&1));

    let log = graph.log("main", 10).await.unwrap();
    assert_eq!(log.len(), 2, "init + one load");
    assert_eq!(log[0].id, outcome.commit.id);
    assert_eq!(log[0].kind, tributary::CommitKind::Load);
    assert_eq!(log[0].rows_written.values().sum::<u64>(), 5);
    assert_eq!(log[0].parent.as_deref(), Some(log[1].id.as_str()));
    assert_eq!(rows(&graph, "Person").await, 2);
    assert_eq!(rows(&graph, "Knows").await, 1);
    assert!(
        graph.store().list("__recovery").await.unwrap().is_empty(),
        "sidecar deleted"
    );
}

#[tokio::test]
async fn an_invalid_line_rejects_the_whole_load() {
    let (_dir, _uri, graph) = temp_graph().await;
    let head = graph.snapshot(&At::default()).await.unwrap();
    let text = ndjson(&[person("ada", 36), person("old", 200), company("acme")]);
    let error = graph
        .load(&text, &LoadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    let lines = error.line_errors();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].line, 2);
    assert_eq!(lines[0].field.as_deref(), Some("age"));
    assert!(error.to_string().contains("line 2"), "{error}");
    assert_eq!(
        graph.snapshot(&At::default()).await.unwrap(),
        head,
        "nothing published"
    );
    assert_eq!(rows(&graph, "Person").await, 0);
}

#[tokio::test]
async fn upsert_replaces_and_the_last_duplicate_wins() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .load(&ndjson(&[person("ada", 36)]), &LoadOptions::default())
        .await
        .unwrap();
    let before = graph.snapshot(&At::default()).await.unwrap();
    graph
        .load(
            &ndjson(&[person("ada", 37), person("ada", 38)]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    let now = graph
        .get("Person", "ada", &At::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(now.num_rows(), 1);
    let age = now
        .column_by_name("age")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::Int32Array>()
        .unwrap();
    assert_eq!(age.value(0), 38);
    // The earlier commit still reads the earlier row.
    let then = graph
        .get("Person", "ada", &At::Commit(before.id))
        .await
        .unwrap()
        .unwrap();
    let age = then
        .column_by_name("age")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::Int32Array>()
        .unwrap();
    assert_eq!(age.value(0), 36);
    assert_eq!(rows(&graph, "Person").await, 1);
}

#[tokio::test]
async fn insert_mode_refuses_existing_and_repeated_keys() {
    let (_dir, _uri, graph) = temp_graph().await;
    let insert = LoadOptions {
        mode: LoadMode::Insert,
        ..Default::default()
    };
    graph
        .load(&ndjson(&[person("ada", 36)]), &insert)
        .await
        .unwrap();
    let error = graph
        .load(&ndjson(&[person("bob", 1), person("ada", 37)]), &insert)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert_eq!(error.line_errors()[0].line, 2);
    assert!(error.to_string().contains("already exists"), "{error}");
    let error = graph
        .load(&ndjson(&[person("cy", 1), person("cy", 2)]), &insert)
        .await
        .unwrap_err();
    assert_eq!(error.line_errors()[0].line, 2);
    assert_eq!(
        rows(&graph, "Person").await,
        1,
        "neither rejected load wrote anything"
    );
}

#[tokio::test]
async fn edge_endpoints_must_exist_in_the_snapshot_or_the_request() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .load(&ndjson(&[person("ada", 36)]), &LoadOptions::default())
        .await
        .unwrap();
    // Endpoint from the snapshot (ada) and from the same request (acme): fine.
    graph
        .load(
            &ndjson(&[company("acme"), edge("WorksAt", "ada", "acme")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    let error = graph
        .load(
            &ndjson(&[
                edge("Knows", "ada", "ghost"),
                edge("WorksAt", "nobody", "acme"),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap_err();
    let lines = error.line_errors();
    assert_eq!(lines.len(), 2, "{error}");
    assert_eq!((lines[0].line, lines[0].field.as_deref()), (1, Some("to")));
    assert!(
        lines[0].reason.contains("Person `ghost` does not exist"),
        "{}",
        lines[0].reason
    );
    assert_eq!(
        (lines[1].line, lines[1].field.as_deref()),
        (2, Some("from"))
    );
    assert_eq!(rows(&graph, "Knows").await, 0);
}

#[tokio::test]
async fn unique_is_enforced_against_the_snapshot_and_the_request() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .load(
            &ndjson(&[person_with_email("ada", "a@x.org")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    // Re-upserting the owner with its own value is fine.
    graph
        .load(
            &ndjson(&[person_with_email("ada", "a@x.org")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    let error = graph
        .load(
            &ndjson(&[person_with_email("bob", "a@x.org")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.line_errors()[0].field.as_deref(), Some("email"));
    assert!(error.to_string().contains("ada"), "{error}");
    let error = graph
        .load(
            &ndjson(&[
                person_with_email("cy", "c@x.org"),
                person_with_email("dee", "c@x.org"),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.line_errors()[0].line, 2);
    // Moving the value away from its owner in the same request frees it.
    graph
        .load(
            &ndjson(&[
                person_with_email("ada", "new@x.org"),
                person_with_email("bob", "a@x.org"),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(rows(&graph, "Person").await, 2);
}

#[tokio::test]
async fn cardinality_bounds_out_edges() {
    let (_dir, _uri, graph) = temp_graph().await;
    let base = ndjson(&[
        person("ada", 36),
        company("acme"),
        company("initech"),
        edge("WorksAt", "ada", "acme"),
    ]);
    graph.load(&base, &LoadOptions::default()).await.unwrap();
    let error = graph
        .load(
            &ndjson(&[edge("WorksAt", "ada", "initech")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.to_string().contains("@card(0..1)"), "{error}");
    // Re-loading the same edge is an upsert, not a second edge.
    graph
        .load(
            &ndjson(&[edge("WorksAt", "ada", "acme")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(rows(&graph, "WorksAt").await, 1);
}

#[tokio::test]
async fn an_empty_load_is_refused() {
    let (_dir, _uri, graph) = temp_graph().await;
    let error = graph
        .load("\n\n", &LoadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert_eq!(graph.log("main", 10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_reopened_graph_sees_every_commit() {
    let (_dir, uri, graph) = temp_graph().await;
    graph
        .load(
            &ndjson(&[person("ada", 36), person("alan", 41)]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    drop(graph);
    let graph = tributary::Graph::open(&uri).await.unwrap();
    assert_eq!(rows(&graph, "Person").await, 2);
    assert_eq!(graph.log("main", 10).await.unwrap().len(), 2);
    assert!(graph.schema_source().contains("node Person @stream"));
}

#[tokio::test]
async fn init_refuses_an_existing_graph_and_a_bad_schema() {
    let (_dir, uri, _graph) = temp_graph().await;
    let error = tributary::Graph::init(&uri, tributary_tests::SCHEMA)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    let dir = tempfile::tempdir().unwrap();
    let error = tributary::Graph::init(
        &dir.path().join("g").to_string_lossy(),
        "node P { x: Strin @key }",
    )
    .await
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.to_string().contains("line 1"), "{error}");
    let error = tributary::Graph::open(&dir.path().join("none").to_string_lossy())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound);
}

/// The load and the fold check constraints with one checker: the same broken constraint
/// reads the same, whichever path met it.
#[tokio::test]
async fn a_load_and_a_fold_report_a_broken_constraint_in_the_same_words() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .load(
            &ndjson(&[person_with_email("ada", "a@x.org")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    let ingest = graph.ingest("main").unwrap();
    let broken = ndjson(&[
        person_with_email("bob", "a@x.org"),
        edge("Knows", "ada", "ghost"),
    ]);
    ingest.send(1, &broken).await.unwrap();
    graph.fold("main").await.unwrap();
    let rejects = graph.rejects(&At::default()).await.unwrap();
    let folded = sorted_strings(&rejects, "message");

    let error = graph
        .load(&broken, &LoadOptions::default())
        .await
        .unwrap_err();
    let mut loaded: Vec<String> = error
        .line_errors()
        .iter()
        .map(|e| e.reason.clone())
        .collect();
    loaded.sort();
    assert_eq!(loaded.len(), 2, "{error}");
    assert_eq!(folded, loaded);
    assert!(
        loaded.iter().any(|m| m.contains("is not unique"))
            && loaded
                .iter()
                .any(|m| m.contains("Person `ghost` does not exist")),
        "{loaded:?}"
    );
}

/// A load is a whole request, so it is held to a `@card` minimum; a fold folds part of a
/// stream (the other edges may come in a later fold), so it is held to the maximum only.
#[tokio::test]
async fn a_load_is_held_to_a_card_minimum_and_a_fold_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("graph").to_string_lossy().into_owned();
    let schema = "node P @stream { name: String @key }\nedge Two: P -> P @card(2..3) @stream\n";
    let graph = tributary::Graph::init(&uri, schema).await.unwrap();
    let node = |name: &str| format!(r#"{{"type":"P","data":{{"name":"{name}"}}}}"#);
    let nodes: Vec<String> = ["p1", "p2", "p3", "p4", "p5"].map(node).to_vec();
    graph
        .load(&ndjson(&nodes), &LoadOptions::default())
        .await
        .unwrap();

    let error = graph
        .load(&ndjson(&[edge("Two", "p1", "p2")]), &LoadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert_eq!(error.line_errors()[0].field.as_deref(), Some("from"));
    assert!(
        error.line_errors()[0]
            .reason
            .contains("@card(2..3) needs at least 2"),
        "{error}"
    );
    let two = ndjson(&[edge("Two", "p1", "p2"), edge("Two", "p1", "p3")]);
    graph.load(&two, &LoadOptions::default()).await.unwrap();
    let error = graph
        .load(
            &ndjson(&[edge("Two", "p1", "p4"), edge("Two", "p1", "p5")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        error.line_errors()[0].reason.contains("allows at most 3"),
        "{error}"
    );
    assert_eq!(error.line_errors()[0].line, 2, "the edge past the maximum");

    let ingest = graph.ingest("main").unwrap();
    ingest
        .send(1, &ndjson(&[edge("Two", "p2", "p1")]))
        .await
        .unwrap();
    let folded = graph.fold("main").await.unwrap();
    assert_eq!(folded.dead_letters, 0);
    assert_eq!(folded.rows.get("Two"), Some(&1));
    assert_eq!(rows(&graph, "Two").await, 3);
}

/// A request is refused whole, so an edge to a node of the same request is not blamed
/// when that node's own line is the one refused.
#[tokio::test]
async fn an_edge_to_a_refused_node_of_the_same_request_is_not_blamed() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .load(
            &ndjson(&[person_with_email("ada", "a@x.org")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    let error = graph
        .load(
            &ndjson(&[
                person_with_email("bob", "a@x.org"),
                edge("Knows", "bob", "ada"),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap_err();
    let lines: Vec<u64> = error.line_errors().iter().map(|e| e.line).collect();
    assert_eq!(lines, vec![1], "{error}");
}

/// In a fold, a row refused for one constraint does not count for another: an edge refused
/// as not unique takes no place under its source's `@card` maximum.
#[tokio::test]
async fn a_folded_edge_refused_as_not_unique_takes_no_place_under_card() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("graph").to_string_lossy().into_owned();
    let schema = "node P @stream { name: String @key }\n\
                  edge Owns: P -> P @card(0..1) @stream { tag: String? @unique }\n";
    let graph = tributary::Graph::init(&uri, schema).await.unwrap();
    let node = |name: &str| format!(r#"{{"type":"P","data":{{"name":"{name}"}}}}"#);
    let owns = |from: &str, to: &str, tag: &str| {
        format!(r#"{{"edge":"Owns","from":"{from}","to":"{to}","data":{{"tag":"{tag}"}}}}"#)
    };
    let mut lines: Vec<String> = ["p1", "p2", "p3", "p4"].map(node).to_vec();
    lines.push(owns("p1", "p2", "t"));
    graph
        .load(&ndjson(&lines), &LoadOptions::default())
        .await
        .unwrap();
    let ingest = graph.ingest("main").unwrap();
    let sent = ndjson(&[owns("p3", "p1", "t"), owns("p3", "p4", "u")]);
    ingest.send(1, &sent).await.unwrap();
    let folded = graph.fold("main").await.unwrap();
    assert_eq!(folded.dead_letters, 1);
    assert_eq!(folded.rows.get("Owns"), Some(&1));
    let rejects = graph.rejects(&At::default()).await.unwrap();
    assert_eq!(strings(&rejects, "kind"), vec!["unique"]);
    assert_eq!(rows(&graph, "Owns").await, 2);
}

/// A load to a branch that does not exist is refused before it takes the branch's lease,
/// so no name a client tries leaves anything behind.
#[tokio::test]
async fn a_load_to_a_missing_branch_leaves_nothing_behind() {
    let (_dir, uri, graph) = temp_graph().await;
    let options = LoadOptions {
        branch: tributary::branch("nope").unwrap(),
        ..LoadOptions::default()
    };
    let error = graph
        .load(&ndjson(&[company("acme")]), &options)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound);
    let leases = std::path::Path::new(&uri).join("__leases");
    assert!(!leases.join("nope").exists());
}

/// Lance's merge of a materialized source collected the target into its 300 MB spill pool
/// and refused a load of 150k rows into a table of 150k; a streamed source does not.
#[tokio::test]
async fn a_large_load_into_a_large_table_is_not_refused_for_memory() {
    let (_dir, _uri, graph) = temp_graph().await;
    for prefix in ["m", "n"] {
        let lines: Vec<String> = (0..150_000)
            .map(|i| {
                format!(
                    r#"{{"type":"Person","data":{{"name":"{prefix}{i}","age":{}}}}}"#,
                    i % 100
                )
            })
            .collect();
        graph
            .load(&ndjson(&lines), &LoadOptions::default())
            .await
            .unwrap();
    }
    assert_eq!(rows(&graph, "Person").await, 300_000);
}
