//! Deletes on `load`: by key, in line order with the rows of the same request, a deleted
//! node's edges going with it in the same commit, and the `@card` minimum held.

use tributary::{At, ErrorKind, Graph, LoadOptions};
use tributary_tests::{company, delete, delete_edge, edge, ndjson, person, temp_graph};

use crate::columns::ids;

async fn load(graph: &Graph, lines: &[String]) -> tributary::LoadOutcome {
    graph
        .load(&ndjson(lines), &LoadOptions::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_deleted_node_goes_with_its_edges_in_one_commit() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(
        &graph,
        &[
            person("ada", 36),
            person("bob", 40),
            person("cy", 20),
            company("acme"),
            edge("WorksAt", "ada", "acme"),
            edge("Knows", "ada", "bob"),
            edge("Knows", "bob", "ada"),
            edge("Knows", "bob", "cy"),
        ],
    )
    .await;
    let before = graph.log("main", 10).await.unwrap().len();
    let outcome = load(&graph, &[delete("Person", "ada")]).await;
    assert_eq!(outcome.deleted.get("Person"), Some(&1));
    assert_eq!(outcome.deleted.get("Knows"), Some(&2), "both directions");
    assert_eq!(outcome.deleted.get("WorksAt"), Some(&1));
    assert_eq!(graph.log("main", 10).await.unwrap().len(), before + 1);
    assert_eq!(ids(&graph, "Person").await, ["bob", "cy"]);
    assert_eq!(ids(&graph, "Knows").await, ["bob->cy"]);
    assert!(ids(&graph, "WorksAt").await.is_empty());
    assert_eq!(
        ids(&graph, "Company").await,
        ["acme"],
        "the other end stays"
    );
}

#[tokio::test]
async fn an_edge_is_deleted_by_its_ends_and_a_missing_key_is_no_error() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(
        &graph,
        &[
            person("ada", 36),
            person("bob", 40),
            edge("Knows", "ada", "bob"),
            edge("Knows", "bob", "ada"),
        ],
    )
    .await;
    let outcome = load(
        &graph,
        &[
            delete_edge("Knows", "ada", "bob"),
            delete("Person", "nobody"),
        ],
    )
    .await;
    assert_eq!(outcome.deleted.get("Knows"), Some(&1));
    assert_eq!(outcome.deleted.get("Person"), None);
    assert_eq!(ids(&graph, "Knows").await, ["bob->ada"]);
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
}

#[tokio::test]
async fn the_later_line_wins_between_a_row_and_a_delete_of_one_key() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[person("ada", 1), person("bob", 1)]).await;
    load(
        &graph,
        &[
            // Delete, then write: the row stays, with the new value.
            delete("Person", "ada"),
            person("ada", 2),
            // Write, then delete: nothing stays.
            person("bob", 2),
            delete("Person", "bob"),
            person("cy", 3),
        ],
    )
    .await;
    assert_eq!(ids(&graph, "Person").await, ["ada", "cy"]);
    let ada = graph
        .get("Person", "ada", At::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        crate::columns::column::<arrow_array::Int32Array>(&ada, "age").value(0),
        2
    );
}

#[tokio::test]
async fn an_edge_to_a_node_deleted_in_the_same_load_is_refused_and_nothing_is_written() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[person("ada", 1), person("bob", 1)]).await;
    let head = graph.snapshot(&At::default()).await.unwrap();
    let error = graph
        .load(
            &ndjson(&[delete("Person", "bob"), edge("Knows", "ada", "bob")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    let lines = error.line_errors();
    assert_eq!(lines.len(), 1, "{error}");
    assert_eq!(lines[0].line, 2);
    assert!(lines[0].reason.contains("deleted by this write"), "{error}");
    assert_eq!(graph.snapshot(&At::default()).await.unwrap(), head);
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
}

#[tokio::test]
async fn bad_delete_lines_name_their_line_and_field() {
    let (_dir, _uri, graph) = temp_graph().await;
    let error = graph
        .load(
            &ndjson(&[
                r#"{"delete":"Person"}"#.to_owned(),
                r#"{"delete":"Nope","key":"x"}"#.to_owned(),
                r#"{"delete":"Knows","key":"x"}"#.to_owned(),
                r#"{"delete":"Person","key":"x","data":{}}"#.to_owned(),
                r#"{"delete":"Person","key":7}"#.to_owned(),
                r#"{"type":"Person","key":"x","data":{"name":"x"}}"#.to_owned(),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap_err();
    let lines = error.line_errors();
    let at: Vec<u64> = lines.iter().map(|l| l.line).collect();
    assert_eq!(at, [1, 2, 3, 4, 5, 6], "{error}");
    assert_eq!(lines[0].field.as_deref(), Some("key"), "{error}");
    assert!(lines[1].reason.contains("unknown type"), "{error}");
    assert!(lines[2].reason.contains("has no @key"), "{error}");
    assert!(lines[3].reason.contains("not \"data\""), "{error}");
    assert_eq!(lines[4].field.as_deref(), Some("key"), "{error}");
    assert!(lines[5].reason.contains("delete line"), "{error}");
}

#[tokio::test]
async fn a_delete_may_not_leave_a_source_below_its_card_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let schema = r#"
node Person { name: String @key }
node Team { name: String @key }
edge MemberOf: Person -> Team @card(1..2)
"#;
    let graph = Graph::init(&uri, schema).await.unwrap();
    let team = |n: &str| format!(r#"{{"type":"Team","data":{{"name":"{n}"}}}}"#);
    let member = |p: &str| format!(r#"{{"type":"Person","data":{{"name":"{p}"}}}}"#);
    load(
        &graph,
        &[
            team("red"),
            team("blue"),
            member("ada"),
            member("bob"),
            edge("MemberOf", "ada", "red"),
            edge("MemberOf", "ada", "blue"),
            edge("MemberOf", "bob", "red"),
        ],
    )
    .await;
    // Deleting team red takes bob's only membership: refused, naming the line.
    let error = graph
        .load(
            &ndjson(&[team("green"), delete("Team", "red")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap_err();
    let lines = error.line_errors();
    assert_eq!(lines.len(), 1, "{error}");
    assert_eq!(lines[0].line, 2);
    assert!(lines[0].reason.contains("Person `bob`"), "{error}");
    assert_eq!(ids(&graph, "Team").await, ["blue", "red"]);
    // With bob moved to green in the same load, it goes (ada keeps blue).
    let outcome = load(
        &graph,
        &[
            team("green"),
            edge("MemberOf", "bob", "green"),
            delete("Team", "red"),
        ],
    )
    .await;
    assert_eq!(outcome.deleted.get("MemberOf"), Some(&2));
    assert_eq!(ids(&graph, "Team").await, ["blue", "green"]);
    assert_eq!(ids(&graph, "MemberOf").await, ["ada->blue", "bob->green"]);
    // Deleting a source node takes its edges whatever its minimum.
    load(&graph, &[delete("Person", "ada")]).await;
    assert_eq!(ids(&graph, "MemberOf").await, ["bob->green"]);
    // Deleting bob's last edge by its ends is refused.
    let error = graph
        .load(
            &ndjson(&[delete_edge("MemberOf", "bob", "green")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.line_errors().len(), 1, "{error}");
}

#[tokio::test]
async fn a_deleted_edge_makes_room_under_a_card_maximum() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(
        &graph,
        &[
            person("ada", 1),
            company("acme"),
            company("globex"),
            company("initech"),
            edge("WorksAt", "ada", "acme"),
        ],
    )
    .await;
    load(
        &graph,
        &[
            delete_edge("WorksAt", "ada", "acme"),
            edge("WorksAt", "ada", "globex"),
        ],
    )
    .await;
    assert_eq!(ids(&graph, "WorksAt").await, ["ada->globex"]);
    load(
        &graph,
        &[
            delete("Company", "globex"),
            edge("WorksAt", "ada", "initech"),
        ],
    )
    .await;
    assert_eq!(ids(&graph, "WorksAt").await, ["ada->initech"]);
}

/// A deleted node's `@unique` values are free for the rows of the same load.
#[tokio::test]
async fn a_deleted_nodes_unique_value_is_free_in_the_same_load() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(
        &graph,
        &[tributary_tests::person_with_email("ada", "a@x.io")],
    )
    .await;
    load(
        &graph,
        &[
            delete("Person", "ada"),
            tributary_tests::person_with_email("ada2", "a@x.io"),
        ],
    )
    .await;
    assert_eq!(ids(&graph, "Person").await, ["ada2"]);
}

/// A delete followed by a row of the same key is that row: the node keeps its edges (a
/// stream cannot tell the two apart, so a load does not either).
#[tokio::test]
async fn a_node_deleted_and_written_again_keeps_its_edges() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(
        &graph,
        &[
            person("ada", 1),
            person("bob", 1),
            edge("Knows", "ada", "bob"),
            edge("Knows", "bob", "ada"),
        ],
    )
    .await;
    load(&graph, &[delete("Person", "bob"), person("bob", 2)]).await;
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
    assert_eq!(ids(&graph, "Knows").await, ["ada->bob", "bob->ada"]);
}

/// A keyed edge the load moves to another source no longer counts for the old one.
#[tokio::test]
async fn a_keyed_edge_moved_away_does_not_hold_its_old_source_above_the_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let schema = r#"
node Person { name: String @key }
node Item { name: String @key }
edge Owns: Person -> Item @card(1..) { oid: String @key }
"#;
    let graph = Graph::init(&uri, schema).await.unwrap();
    let node = |ty: &str, n: &str| format!(r#"{{"type":"{ty}","data":{{"name":"{n}"}}}}"#);
    let owns = |oid: &str, from: &str, to: &str| {
        format!(r#"{{"edge":"Owns","from":"{from}","to":"{to}","data":{{"oid":"{oid}"}}}}"#)
    };
    load(
        &graph,
        &[
            node("Person", "ada"),
            node("Person", "bob"),
            node("Item", "i1"),
            node("Item", "i2"),
            owns("o1", "ada", "i1"),
            owns("o2", "ada", "i2"),
            owns("o3", "bob", "i1"),
        ],
    )
    .await;
    let error = graph
        .load(
            &ndjson(&[delete("Owns", "o1"), owns("o2", "bob", "i2")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.line_errors().len(), 1, "{error}");
    assert!(error.to_string().contains("Person `ada`"), "{error}");
    assert_eq!(ids(&graph, "Owns").await, ["o1", "o2", "o3"]);
}
