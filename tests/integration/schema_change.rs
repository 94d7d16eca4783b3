//! `schema apply`: additive changes published as one `schema` commit (pending rows folded
//! first, stored rows given the new fields' defaults or nulls, new indexes built and
//! maintained); breaking changes refused with each named and nothing changed; another
//! process takes the new schema at its next write, its rows of the old one folded with
//! the new fields filled; a change stopped before its publish changes nothing visible and
//! is finished by the next write.

use arrow_array::{Array, Int32Array, StringArray};
use lance::index::DatasetIndexExt;
use tributary::{
    CommitKind, CrashWindow, ErrorKind, Graph, LoadOptions, View, WriteKind, WriteStep,
};
use tributary_tests::{ndjson, person, temp_graph, SCHEMA};

use crate::columns::ids;
use crate::FAILPOINTS;

/// The test schema with `Person` gaining `nickname` (nullable), `level` (defaulted) and an
/// index on `age`; a new `City` and `LivesIn`; `Company` streamed.
fn evolved() -> String {
    SCHEMA
        .replace(
            "  age: I32? @range(0..150)\n",
            "  age: I32? @range(0..150) @index\n",
        )
        .replace(
            "  embedding: Vector(8)? @embed(bio)\n}",
            "  embedding: Vector(8)? @embed(bio)\n  nickname: String?\n  level: I32 = 3\n}",
        )
        .replace(
            "node Company { name: String @key }",
            "node Company @stream { name: String @key }\nnode City { name: String @key }\nedge LivesIn: Person -> City",
        )
}

async fn field_of(graph: &Graph, key: &str, field: &str) -> (Option<String>, Option<i32>) {
    let fresh = View {
        fresh: true,
        ..View::default()
    };
    let row = graph.get("Person", key, fresh).await.unwrap().unwrap();
    let column = row.column_by_name(field).unwrap();
    let text = column
        .as_any()
        .downcast_ref::<StringArray>()
        .and_then(|c| c.is_valid(0).then(|| c.value(0).to_owned()));
    let number = column
        .as_any()
        .downcast_ref::<Int32Array>()
        .and_then(|c| c.is_valid(0).then(|| c.value(0)));
    (text, number)
}

#[tokio::test]
async fn additive_changes_apply_as_one_schema_commit() {
    let (_dir, uri, graph) = temp_graph().await;
    graph
        .load(&ndjson(&[person("ada", 36)]), &LoadOptions::default())
        .await
        .unwrap();
    // Pending on a @stream type: folded before the tables change.
    graph
        .ingest("main")
        .unwrap()
        .send(1, &person("bob", 41))
        .await
        .unwrap();

    let outcome = graph.apply_schema(&evolved()).await.unwrap();
    assert_eq!(outcome.version, 2);
    assert_eq!(outcome.folded_rows, 1);
    assert_eq!(outcome.change.new_types, ["City", "LivesIn"]);
    assert_eq!(outcome.change.newly_streamed, ["Company"]);
    assert_eq!(outcome.change.new_indexes.len(), 1);
    let commit = outcome.commit.unwrap();
    assert_eq!(commit.kind, CommitKind::Schema);
    assert_eq!(commit.schema_version, 2);
    assert_eq!(graph.schema_source(), evolved());

    // Stored rows: null for the nullable field, the default for the defaulted one.
    for key in ["ada", "bob"] {
        assert_eq!(field_of(&graph, key, "nickname").await, (None, None));
        assert_eq!(field_of(&graph, key, "level").await, (None, Some(3)));
    }
    // New rows may set the new fields, by load and by ingest; new types take rows.
    let lines = [
        r#"{"type":"Person","data":{"name":"cy","nickname":"c","level":7}}"#.to_owned(),
        r#"{"type":"City","data":{"name":"paris"}}"#.to_owned(),
        r#"{"edge":"LivesIn","from":"cy","to":"paris"}"#.to_owned(),
    ];
    graph
        .load(&ndjson(&lines), &LoadOptions::default())
        .await
        .unwrap();
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(
            1,
            &ndjson(&[
                r#"{"type":"Person","data":{"name":"dee","nickname":"d"}}"#.to_owned(),
                r#"{"type":"Company","data":{"name":"acme"}}"#.to_owned(),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(ack.durable_rows, 2, "{:?}", ack.rejected);
    graph.fold("main").await.unwrap();
    assert_eq!(field_of(&graph, "cy", "level").await, (None, Some(7)));
    assert_eq!(field_of(&graph, "dee", "level").await, (None, Some(3)));
    assert_eq!(
        field_of(&graph, "dee", "nickname").await.0.as_deref(),
        Some("d")
    );
    assert_eq!(ids(&graph, "Company").await, ["acme"]);
    assert_eq!(ids(&graph, "LivesIn").await, ["cy->paris"]);

    // The new index exists, and the MemWAL of the enrolled table maintains it.
    let people = graph
        .store()
        .open_dataset("nodes/Person.lance", None)
        .await
        .unwrap();
    let names: Vec<String> = people
        .load_indices()
        .await
        .unwrap()
        .iter()
        .map(|i| i.name.clone())
        .collect();
    assert!(names.contains(&"age_idx".to_owned()), "{names:?}");
    let details = lance::dataset::mem_wal::DatasetMemWalExt::mem_wal_index_details(&people)
        .await
        .unwrap()
        .unwrap();
    assert!(
        details.maintained_indexes.contains(&"age_idx".to_owned()),
        "{:?}",
        details.maintained_indexes
    );
    // A reopened graph has the new schema; the same schema again changes nothing.
    drop(graph);
    let graph = Graph::open(&uri).await.unwrap();
    assert_eq!(graph.schema_source(), evolved());
    let again = graph.apply_schema(&evolved()).await.unwrap();
    assert!(again.commit.is_none() && again.change.is_empty());
}

#[tokio::test]
async fn breaking_changes_are_refused_and_change_nothing() {
    let (_dir, _uri, graph) = temp_graph().await;
    let head = graph.log("main", 1).await.unwrap().remove(0);
    let breaking = SCHEMA
        .replace("age: I32? @range(0..150)", "age: String?")
        .replace("node Company { name: String @key }\n", "")
        .replace(
            "edge WorksAt: Person -> Company @card(0..1) @stream { since: Date? }\n",
            "",
        );
    let error = graph.apply_schema(&breaking).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    let message = error.to_string();
    for named in [
        "Person.age: the type changed from I32 to String",
        "Company: the type is gone",
        "WorksAt: the type is gone",
        "nothing was changed",
    ] {
        assert!(message.contains(named), "{named}: {message}");
    }
    assert_eq!(graph.log("main", 1).await.unwrap()[0].id, head.id);
    assert_eq!(graph.schema_source(), SCHEMA);
    // A schema that does not parse is refused as such.
    let error = graph.apply_schema("node {").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
}

#[tokio::test]
async fn another_process_takes_the_new_schema_at_its_next_write() {
    let (_dir, uri, graph) = temp_graph().await;
    let other = Graph::open(&uri).await.unwrap();
    // The other process streams under the old schema, before and after the change.
    let before = other.ingest("main").unwrap();
    before.send(1, &person("ada", 1)).await.unwrap();
    graph.apply_schema(&evolved()).await.unwrap();
    let ack = before.send(2, &person("bob", 2)).await.unwrap();
    assert_eq!(ack.durable_rows, 1, "{:?}", ack.rejected);
    // Its writer was fenced by the change's fold and reopened on the changed table: the
    // send took the new schema, so a line naming a new field is taken as well.
    assert_eq!(other.schema_source(), evolved());
    let late = before
        .send(
            3,
            r#"{"type":"Person","data":{"name":"cy","nickname":"c"}}"#,
        )
        .await
        .unwrap();
    assert_eq!(late.durable_rows, 1, "{:?}", late.rejected);
    drop(before);
    other.fold("main").await.unwrap();
    assert_eq!(ids(&other, "Person").await, ["ada", "bob", "cy"]);
    assert_eq!(field_of(&other, "bob", "level").await, (None, Some(3)));
    assert_eq!(
        field_of(&graph, "cy", "nickname").await.0.as_deref(),
        Some("c")
    );
    assert_eq!(field_of(&graph, "cy", "level").await, (None, Some(3)));
    other.close_writers().await.unwrap();
}

#[tokio::test]
async fn a_change_stopped_before_its_publish_is_finished_by_the_next_write() {
    for window in CrashWindow::all(WriteKind::Schema) {
        change_stopped_at(window).await;
    }
}

async fn change_stopped_at(window: CrashWindow) {
    let point = window.name();
    let point = point.as_str();
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .load(&ndjson(&[person("ada", 36)]), &LoadOptions::default())
        .await
        .unwrap();
    {
        let _lock = FAILPOINTS.lock().await;
        let scenario = fail::FailScenario::setup();
        fail::cfg(point, "return").unwrap();
        let error = graph.apply_schema(&evolved()).await.unwrap_err();
        assert!(error.to_string().contains(point), "{error}");
        scenario.teardown();
    }
    // Nothing visible changed until the next write, which finishes the change first (every
    // stored row filled, even when the stop came between a column and its defaults).
    assert_eq!(graph.schema_source(), SCHEMA);
    let published = window.step == WriteStep::BeforeIntentDelete;
    assert_eq!(
        graph.log("main", 1).await.unwrap()[0].schema_version,
        if published { 2 } else { 1 },
        "{point}"
    );
    graph
        .load(&ndjson(&[person("bob", 41)]), &LoadOptions::default())
        .await
        .unwrap();
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
    assert_eq!(graph.schema_source(), evolved(), "{point}");
    assert_eq!(graph.log("main", 5).await.unwrap()[1].schema_version, 2);
    assert_eq!(field_of(&graph, "bob", "level").await, (None, Some(3)));
    assert_eq!(
        field_of(&graph, "ada", "level").await,
        (None, Some(3)),
        "{point}"
    );
    let again = graph.apply_schema(&evolved()).await.unwrap();
    assert!(again.commit.is_none());
}

/// A change an older version left unfinished recorded its schema apart from the intents
/// (`__schema/pending.json`): a process's first write finishes it as it would an intent.
#[tokio::test]
async fn a_change_an_older_version_left_unfinished_is_finished_by_the_next_write() {
    let (_dir, uri, graph) = temp_graph().await;
    graph
        .load(&ndjson(&[person("ada", 36)]), &LoadOptions::default())
        .await
        .unwrap();
    {
        let _lock = FAILPOINTS.lock().await;
        let scenario = fail::FailScenario::setup();
        fail::cfg("schema::before-publish", "return").unwrap();
        graph.apply_schema(&evolved()).await.unwrap_err();
        scenario.teardown();
    }
    // What the older version wrote instead of the intent.
    let store = graph.store().clone();
    let names = store.list("__recovery").await.unwrap();
    assert_eq!(names.len(), 1, "{names:?}");
    let intent_path = format!("__recovery/{}", names[0]);
    let intent: serde_json::Value =
        serde_json::from_slice(&store.get(&intent_path).await.unwrap().unwrap()).unwrap();
    assert_eq!(intent["kind"], "schema", "{intent}");
    let pending = serde_json::to_vec(&intent["schema"]).unwrap();
    store.put("__schema/pending.json", pending).await.unwrap();
    store.delete(&intent_path).await.unwrap();
    drop(graph);

    let graph = Graph::open(&uri).await.unwrap();
    graph
        .load(&ndjson(&[person("bob", 41)]), &LoadOptions::default())
        .await
        .unwrap();
    assert_eq!(graph.schema_source(), evolved());
    assert_eq!(graph.log("main", 5).await.unwrap()[1].schema_version, 2);
    assert_eq!(field_of(&graph, "ada", "level").await, (None, Some(3)));
    assert_eq!(store.get("__schema/pending.json").await.unwrap(), None);
    assert!(store.list("__recovery").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_writer_idle_across_the_change_writes_the_new_fields_filled() {
    let (_dir, uri, graph) = temp_graph().await;
    let other = Graph::open(&uri).await.unwrap();
    // The other process holds a warm writer with nothing unflushed: the change claims its
    // shard anyway, so its next send reopens on the changed table.
    let stale = other.ingest("main").unwrap();
    stale.warm("Person").await.unwrap();
    graph.apply_schema(&evolved()).await.unwrap();
    let ack = stale.send(1, &person("bob", 2)).await.unwrap();
    assert_eq!(ack.durable_rows, 1);
    // The process stops without flushing (its acknowledged row is only in its WAL).
    drop(stale);
    drop(other);
    let folded = graph.fold("main").await.unwrap();
    assert_eq!(folded.rows.get("Person"), Some(&1));
    assert_eq!(field_of(&graph, "bob", "level").await, (None, Some(3)));
    assert_eq!(field_of(&graph, "bob", "nickname").await, (None, None));
}

#[tokio::test]
async fn a_process_behind_the_change_reads_new_lines_and_refuses_stale_patches() {
    let (_dir, uri, graph) = temp_graph().await;
    graph
        .load(&ndjson(&[person("ada", 1)]), &LoadOptions::default())
        .await
        .unwrap();
    let behind = Graph::open(&uri).await.unwrap();
    graph.apply_schema(&evolved()).await.unwrap();
    // A line naming a new field: read again under the new schema, not refused.
    let line = r#"{"type":"Person","data":{"name":"cy","nickname":"c"}}"#;
    behind.load(line, &LoadOptions::default()).await.unwrap();
    assert_eq!(
        field_of(&graph, "cy", "nickname").await.0.as_deref(),
        Some("c")
    );
    // A patch decoded under the old schema meets the new one in its write turn: refused
    // (nothing written), and taken when sent again.
    let stale = Graph::open(&uri).await.unwrap();
    let patch = r#"{"type":"Person","patch":{"name":"ada","age":5}}"#;
    let third = Graph::open(&uri).await.unwrap();
    let newer = evolved().replace("  level: I32 = 3\n", "  level: I32 = 3\n  rank: I64?\n");
    third.apply_schema(&newer).await.unwrap();
    let error = stale
        .load(patch, &LoadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    stale.load(patch, &LoadOptions::default()).await.unwrap();
    assert_eq!(crate::columns::age_of(&graph, "ada").await, Some(5));
}

#[tokio::test]
async fn removing_stream_folds_everything_seals_the_shards_and_refuses_ingest() {
    let (_dir, uri, graph) = temp_graph().await;
    let other = Graph::open(&uri).await.unwrap();
    // Acknowledged in two processes, not folded.
    let elsewhere = other.ingest("main").unwrap();
    elsewhere.send(1, &person("ada", 1)).await.unwrap();
    graph
        .ingest("main")
        .unwrap()
        .send(1, &person("bob", 2))
        .await
        .unwrap();
    let unstreamed = SCHEMA.replace("node Person @stream {", "node Person {");
    let outcome = graph.apply_schema(&unstreamed).await.unwrap();
    assert_eq!(outcome.change.unstreamed, ["Person"]);
    assert_eq!(outcome.folded_rows, 2);
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);

    // This process refuses the type's lines, naming why.
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(1, &person("cy", 3))
        .await
        .unwrap();
    assert_eq!(ack.durable_rows, 0);
    assert!(
        ack.rejected[0].reason.contains("@stream"),
        "{:?}",
        ack.rejected
    );
    // The other process's writer was fenced by the seal; reopening is refused, and
    // nothing it sends is acknowledged.
    let error = elsewhere.send(2, &person("dee", 4)).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    assert!(
        error.to_string().contains("no longer declared @stream"),
        "{error}"
    );
    drop(elsewhere);
    let later = other
        .ingest("main")
        .unwrap()
        .send(1, &person("eve", 5))
        .await
        .unwrap();
    assert_eq!(later.durable_rows, 0, "it took the new schema");
    graph.fold("main").await.unwrap();
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
    // Loads take the type as before.
    graph
        .load(&ndjson(&[person("fay", 6)]), &LoadOptions::default())
        .await
        .unwrap();
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob", "fay"]);
    // Streaming it again is refused: its shards are sealed.
    let error = graph.apply_schema(SCHEMA).await.unwrap_err();
    assert!(error.to_string().contains("sealed"), "{error}");
    assert_eq!(graph.schema_source(), unstreamed);
    // Its folded MemWAL files are cleaned up like a streamed table's; reads hold.
    let report = graph.cleanup(std::time::Duration::ZERO).await.unwrap();
    assert!(report.memwal.generations > 0, "{report:?}");
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob", "fay"]);
}

#[tokio::test]
async fn removing_stream_from_a_type_never_streamed_still_refuses_a_process_behind() {
    let (_dir, uri, graph) = temp_graph().await;
    let behind = Graph::open(&uri).await.unwrap();
    let unstreamed = SCHEMA.replace("node Person @stream {", "node Person {");
    graph.apply_schema(&unstreamed).await.unwrap();
    // The process behind would enrol the table at its first send: the change enrolled and
    // sealed it, so the send is refused, not acknowledged into a MemWAL no fold reads.
    let error = behind
        .ingest("main")
        .unwrap()
        .send(1, &person("ada", 1))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("no longer declared @stream"),
        "{error}"
    );
    behind.fold("main").await.unwrap();
    assert!(ids(&graph, "Person").await.is_empty());
}

#[tokio::test]
async fn a_removal_stopped_after_its_seals_is_finished_by_the_next_write() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .ingest("main")
        .unwrap()
        .send(1, &person("ada", 1))
        .await
        .unwrap();
    let unstreamed = SCHEMA.replace("node Person @stream {", "node Person {");
    {
        let _lock = FAILPOINTS.lock().await;
        let scenario = fail::FailScenario::setup();
        fail::cfg("schema::before-publish", "return").unwrap();
        graph.apply_schema(&unstreamed).await.unwrap_err();
        scenario.teardown();
    }
    graph
        .load(&ndjson(&[person("bob", 2)]), &LoadOptions::default())
        .await
        .unwrap();
    assert_eq!(graph.schema_source(), unstreamed);
    assert_eq!(ids(&graph, "Person").await, ["ada", "bob"]);
}
