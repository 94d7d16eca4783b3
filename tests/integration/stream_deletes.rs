//! Deletes on `ingest`: Lance tombstones, applied by the fold in acknowledgement order with
//! the rows, a deleted node's edges going in the same commit, hidden from fresh reads at
//! once.

use tributary::{At, Graph, LoadOptions, ReadOptions, View};
use tributary_tests::{
    company, delete, delete_edge, edge, ndjson, person, person_with_email, temp_graph,
};

use crate::columns::{age_of, ids, sorted_strings};

async fn fresh_ids(graph: &Graph, ty: &str) -> Vec<String> {
    let options = ReadOptions {
        fresh: true,
        ..ReadOptions::default()
    };
    let rows = graph.read(ty, &options).await.unwrap();
    sorted_strings(&rows, "id")
}

async fn load(graph: &Graph, lines: &[String]) {
    graph
        .load(&ndjson(lines), &LoadOptions::default())
        .await
        .unwrap();
}

async fn send(graph: &Graph, lines: &[String]) {
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(lines))
        .await
        .unwrap();
    assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
}

#[tokio::test]
async fn a_streamed_delete_takes_the_node_and_its_edges_in_the_fold_commit() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[company("acme")]).await;
    send(
        &graph,
        &[
            person("ada", 36),
            person("bob", 40),
            edge("Knows", "ada", "bob"),
            edge("Knows", "bob", "ada"),
            edge("WorksAt", "ada", "acme"),
        ],
    )
    .await;
    graph.fold("main").await.unwrap();
    let before = graph.log("main", 10).await.unwrap().len();

    send(&graph, &[delete("Person", "ada")]).await;
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.commits, 1);
    assert_eq!(graph.log("main", 10).await.unwrap().len(), before + 1);
    assert_eq!(outcome.deleted.get("Person"), Some(&1));
    assert_eq!(outcome.deleted.get("Knows"), Some(&2), "both directions");
    assert_eq!(outcome.deleted.get("WorksAt"), Some(&1));
    let commit = outcome.commit.unwrap();
    assert_eq!(commit.rows_written["edges/Knows.lance"], 2);
    assert_eq!(ids(&graph, "Person").await, ["bob"]);
    assert!(ids(&graph, "Knows").await.is_empty());
    assert!(ids(&graph, "WorksAt").await.is_empty());
    assert_eq!(ids(&graph, "Company").await, ["acme"]);
    // Nothing is left to fold, and the tombstone is not applied again.
    assert!(graph.fold("main").await.unwrap().commit.is_none());
}

#[tokio::test]
async fn rows_and_deletes_of_a_key_apply_in_acknowledgement_order() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(
        &graph,
        &[person("ada", 1), person("bob", 2), person("cy", 3)],
    )
    .await;
    // Within one send, by line order.
    send(
        &graph,
        &[
            delete("Person", "ada"),
            person("ada", 10),
            person("bob", 20),
            delete("Person", "bob"),
        ],
    )
    .await;
    // Across sends in one memtable.
    send(&graph, &[person("cy", 30)]).await;
    send(&graph, &[delete("Person", "cy")]).await;
    send(&graph, &[person("dan", 4)]).await;
    send(&graph, &[delete("Person", "dan")]).await;
    send(&graph, &[person("dan", 40)]).await;
    graph.fold("main").await.unwrap();
    assert_eq!(ids(&graph, "Person").await, ["ada", "dan"]);
    assert_eq!(age_of(&graph, "ada").await, Some(10));
    assert_eq!(age_of(&graph, "dan").await, Some(40));

    // Across generations of one fold: each close flushes one.
    send(&graph, &[delete("Person", "ada")]).await;
    graph.close_writers().await.unwrap();
    send(&graph, &[person("ada", 11)]).await;
    graph.close_writers().await.unwrap();
    send(&graph, &[person("eve", 5)]).await;
    graph.close_writers().await.unwrap();
    send(&graph, &[delete("Person", "eve")]).await;
    graph.close_writers().await.unwrap();
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.commits, 1);
    assert_eq!(ids(&graph, "Person").await, ["ada", "dan"]);
    assert_eq!(age_of(&graph, "ada").await, Some(11));
}

#[tokio::test]
async fn an_edge_to_a_node_deleted_in_the_same_fold_is_a_dead_letter() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(
        &graph,
        &[person("ada", 1), person("bob", 2), person("cy", 3)],
    )
    .await;
    send(
        &graph,
        &[
            delete("Person", "ada"),
            edge("Knows", "bob", "ada"),
            edge("Knows", "bob", "cy"),
        ],
    )
    .await;
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.dead_letters, 1);
    assert_eq!(ids(&graph, "Knows").await, ["bob->cy"]);
    let rejects = graph.rejects(&At::default()).await.unwrap();
    assert_eq!(sorted_strings(&rejects, "key"), ["bob->ada"]);
    let messages = sorted_strings(&rejects, "message");
    assert!(messages[0].contains("is deleted"), "{messages:?}");
}

/// A delete followed by a row of the same key is that row, edges and all, whether the two
/// met in one memtable (which keeps only the row) or in two generations of one fold. A
/// row written again but refused leaves the delete standing, and its edges go.
#[tokio::test]
async fn a_node_deleted_and_written_again_keeps_its_edges() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(
        &graph,
        &[
            person_with_email("ada", "a@x.io"),
            person("bob", 2),
            person("cy", 3),
            person_with_email("zed", "z@x.io"),
            edge("Knows", "ada", "bob"),
            edge("Knows", "bob", "cy"),
            edge("Knows", "cy", "zed"),
        ],
    )
    .await;
    send(&graph, &[delete("Person", "ada")]).await;
    send(&graph, &[person("ada", 5), edge("Knows", "ada", "cy")]).await;
    send(&graph, &[delete("Person", "bob")]).await;
    graph.close_writers().await.unwrap();
    send(
        &graph,
        &[
            person("bob", 6),
            edge("Knows", "zed", "bob"),
            edge("Knows", "ada", "zed"),
        ],
    )
    .await;
    send(&graph, &[delete("Person", "cy")]).await;
    graph.close_writers().await.unwrap();
    // cy comes back with zed's email: refused, so cy stays deleted.
    send(&graph, &[person_with_email("cy", "z@x.io")]).await;
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.dead_letters, 2);
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob", "zed"]);
    assert_eq!(age_of(&graph, "ada").await, Some(5));
    assert_eq!(age_of(&graph, "bob").await, Some(6));
    // ada and bob keep theirs and may gain some; cy's go, and the edge sent to cy is a
    // dead letter.
    assert_eq!(
        ids(&graph, "Knows").await,
        ["ada->bob", "ada->zed", "zed->bob"]
    );
    let rejects = graph.rejects(&At::default()).await.unwrap();
    assert_eq!(sorted_strings(&rejects, "key"), ["ada->cy", "cy"]);
}

#[tokio::test]
async fn an_edge_is_deleted_by_its_ends_and_frees_its_card_place() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(
        &graph,
        &[
            person("ada", 1),
            person("bob", 2),
            company("acme"),
            company("beta"),
            edge("Knows", "ada", "bob"),
            edge("Knows", "bob", "ada"),
            edge("WorksAt", "ada", "acme"),
        ],
    )
    .await;
    // WorksAt is @card(0..1): ada may move only because her old edge goes.
    send(
        &graph,
        &[
            delete_edge("Knows", "ada", "bob"),
            delete_edge("WorksAt", "ada", "acme"),
            edge("WorksAt", "ada", "beta"),
            delete("Person", "nobody"),
        ],
    )
    .await;
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.dead_letters, 0);
    assert_eq!(ids(&graph, "Knows").await, ["bob->ada"]);
    assert_eq!(ids(&graph, "WorksAt").await, ["ada->beta"]);
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
}

#[tokio::test]
async fn a_deleted_node_frees_its_unique_value_for_the_same_fold() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[person_with_email("ada", "a@x.io")]).await;
    send(
        &graph,
        &[delete("Person", "ada"), person_with_email("bob", "a@x.io")],
    )
    .await;
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.dead_letters, 0);
    assert_eq!(ids(&graph, "Person").await, ["bob"]);
}

#[tokio::test]
async fn a_delete_cascades_into_an_edge_table_that_is_not_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let schema = r#"
node Person @stream { name: String @key }
node Team { name: String @key }
edge MemberOf: Person -> Team
"#;
    let graph = Graph::init(&uri, schema).await.unwrap();
    load(
        &graph,
        &[
            r#"{"type":"Person","data":{"name":"ada"}}"#.to_owned(),
            r#"{"type":"Person","data":{"name":"bob"}}"#.to_owned(),
            r#"{"type":"Team","data":{"name":"core"}}"#.to_owned(),
            edge("MemberOf", "ada", "core"),
            edge("MemberOf", "bob", "core"),
        ],
    )
    .await;
    send(&graph, &[delete("Person", "ada")]).await;
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.deleted.get("MemberOf"), Some(&1));
    assert_eq!(ids(&graph, "MemberOf").await, ["bob->core"]);
    assert_eq!(ids(&graph, "Person").await, ["bob"]);
}

#[tokio::test]
async fn fresh_reads_hide_a_deleted_key_at_once() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[person("ada", 1), person("bob", 2)]).await;
    send(&graph, &[delete("Person", "ada"), person("cy", 3)]).await;
    let fresh = View::fresh(At::default());
    assert!(graph.get("Person", "ada", fresh).await.unwrap().is_none());
    assert_eq!(fresh_ids(&graph, "Person").await, ["bob", "cy"]);
    // The snapshot keeps it until the fold.
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
    // A flushed tombstone hides it too.
    graph.close_writers().await.unwrap();
    let fresh = View::fresh(At::default());
    assert!(graph.get("Person", "ada", fresh).await.unwrap().is_none());
    assert_eq!(fresh_ids(&graph, "Person").await, ["bob", "cy"]);
}

#[tokio::test]
async fn deletes_are_refused_line_by_line_where_they_cannot_stream() {
    let (_dir, _uri, graph) = temp_graph().await;
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(
            1,
            &ndjson(&[
                delete("Company", "acme"),
                delete("Nope", "x"),
                r#"{"delete":"Person"}"#.to_owned(),
                delete("Person", "ada"),
            ]),
        )
        .await
        .unwrap();
    let lines: Vec<u64> = ack.rejected.iter().map(|e| e.line).collect();
    assert_eq!(lines, [1, 2, 3]);
    assert!(
        ack.rejected[0].reason.contains("@stream"),
        "{:?}",
        ack.rejected
    );
    assert_eq!(ack.durable_rows, 1);
}

#[tokio::test]
async fn deletes_reach_the_shard_of_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let schema = "node Person @stream(shards = 4) { name: String @key }";
    let graph = Graph::init(&uri, schema).await.unwrap();
    let person = |n: usize| format!(r#"{{"type":"Person","data":{{"name":"p{n:02}"}}}}"#);
    send(&graph, &(0..20).map(person).collect::<Vec<_>>()).await;
    graph.fold("main").await.unwrap();
    let deletes: Vec<String> = (0..20)
        .filter(|n| n % 2 == 0)
        .map(|n| delete("Person", &format!("p{n:02}")))
        .collect();
    send(&graph, &deletes).await;
    let status = graph.ingest_status("main").await.unwrap();
    assert_eq!(status.tables[0].shards.len(), 4);
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.deleted.get("Person"), Some(&10));
    let expected: Vec<String> = (0..20)
        .filter(|n| n % 2 == 1)
        .map(|n| format!("p{n:02}"))
        .collect();
    assert_eq!(ids(&graph, "Person").await, expected);
}
