//! Fresh reads (snapshot + unfolded tier), derived indexes, and search.

use arrow_array::{Float32Array, RecordBatch};
use lance::index::DatasetIndexExt;
use tributary::{
    At, Direction, ErrorKind, Graph, GraphSettings, IndexSettings, LoadOptions, ReadOptions,
    SearchQuery, View,
};
use tributary_tests::{edge, ndjson, person, temp_graph};

use crate::columns::{ints, sorted_strings, strings};

/// A schema whose streamed type has both a full-text and a vector index.
const SEARCH_SCHEMA: &str = r#"
node Doc @stream {
  name: String @key
  rank: I32?
  body: String? @index(fts)
  embedding: Vector(4)? @index
}
"#;

fn doc(name: &str, rank: i32, body: &str, embedding: [f32; 4]) -> String {
    format!(
        r#"{{"type":"Doc","data":{{"name":"{name}","rank":{rank},"body":"{body}","embedding":{embedding:?}}}}}"#
    )
}

fn fresh() -> View {
    View::fresh(At::default())
}

async fn fresh_rows(graph: &Graph, ty: &str) -> RecordBatch {
    let options = ReadOptions {
        fresh: true,
        ..Default::default()
    };
    graph.read(ty, &options).await.unwrap()
}

async fn search_graph() -> (tempfile::TempDir, String, Graph) {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("graph").to_string_lossy().into_owned();
    Graph::init(&uri, SEARCH_SCHEMA).await.unwrap();
    let graph = Graph::open(&uri).await.unwrap();
    (dir, uri, graph)
}

/// Index names and, per name, whether its segments cover every fragment of the table.
async fn index_coverage(graph: &Graph, path: &str) -> Vec<(String, bool)> {
    let head = graph.snapshot(&At::default()).await.unwrap();
    let dataset = graph
        .store()
        .open_dataset(path, Some(head.tables[path]))
        .await
        .unwrap();
    let indexes = dataset.load_indices().await.unwrap();
    let fragments: Vec<u32> = dataset.fragments().iter().map(|f| f.id as u32).collect();
    // Lance's own system indexes (the MemWAL's `__lance_mem_wal`) are not ours.
    let mut names: Vec<String> = indexes
        .iter()
        .map(|i| i.name.clone())
        .filter(|n| !n.starts_with("__"))
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let covered = fragments.iter().all(|f| {
                indexes.iter().any(|i| {
                    i.name == name && i.fragment_bitmap.as_ref().is_some_and(|b| b.contains(*f))
                })
            });
            (name, covered)
        })
        .collect()
}

#[tokio::test]
async fn a_read_right_after_an_ack_sees_it_in_process() {
    let (_dir, _uri, graph) = temp_graph().await;
    let ingest = graph.ingest("main").unwrap();
    let text = ndjson(&[
        person("ada", 36),
        person("alan", 41),
        edge("Knows", "ada", "alan"),
    ]);
    let ack = ingest.send(1, &text).await.unwrap();
    assert_eq!(ack.durable_rows, 3);

    let row = graph.get("Person", "ada", fresh()).await.unwrap();
    assert_eq!(ints(&row.expect("fresh get sees the ack"), "age"), [36]);
    assert!(
        graph
            .get("Person", "ada", &At::default())
            .await
            .unwrap()
            .is_none(),
        "a default read never sees unfolded data"
    );
    let friends = graph
        .neighbors("Person", "ada", "Knows", Direction::Out, fresh())
        .await
        .unwrap();
    assert_eq!(strings(&friends, "id"), ["alan"]);
    let back = graph
        .neighbors("Person", "alan", "Knows", Direction::In, fresh())
        .await
        .unwrap();
    assert_eq!(strings(&back, "id"), ["ada"]);
    // At the snapshot `ada` is not there yet: not found, as `get` says.
    let snapshot = graph
        .neighbors("Person", "ada", "Knows", Direction::Out, &At::default())
        .await
        .unwrap_err();
    assert_eq!(snapshot.kind(), ErrorKind::NoRow, "{snapshot}");
}

#[tokio::test]
async fn another_process_sees_what_the_writer_flushed() {
    let (_dir, uri, writer) = temp_graph().await;
    // A second open of the same root shares nothing in memory with the writer: it is what
    // another process sees.
    let reader = Graph::open(&uri).await.unwrap();
    let ingest = writer.ingest("main").unwrap();
    ingest
        .send(1, &ndjson(&[person("ada", 36), person("bob", 7)]))
        .await
        .unwrap();
    assert_eq!(
        fresh_rows(&reader, "Person").await.num_rows(),
        0,
        "memtables are private to the writing process"
    );
    writer.close_writers().await.unwrap();
    let rows = fresh_rows(&reader, "Person").await;
    assert_eq!(sorted_strings(&rows, "id"), ["ada", "bob"]);
    let bob = reader.get("Person", "bob", fresh()).await.unwrap().unwrap();
    assert_eq!(ints(&bob, "age"), [7]);
    assert_eq!(
        reader
            .read("Person", &ReadOptions::default())
            .await
            .unwrap()
            .num_rows(),
        0
    );
}

/// Every flushed generation carries a BTree on the key in its own manifest, so a fresh
/// point lookup probes an index in each generation instead of scanning it.
#[tokio::test]
async fn flushed_generations_carry_the_key_index() {
    let (_dir, uri, graph) = temp_graph().await;
    let ingest = graph.ingest("main").unwrap();
    for round in 0..2 {
        let name = format!("p{round}");
        ingest
            .send(round, &ndjson(&[person(&name, 1)]))
            .await
            .unwrap();
        graph.close_writers().await.unwrap();
    }
    let generations: Vec<_> = tributary_tests::memwal_files(&uri, "nodes/Person.lance")
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "bloom_filter.bin"))
        .filter_map(|p| p.parent().map(|dir| dir.to_string_lossy().into_owned()))
        .collect();
    assert_eq!(generations.len(), 2, "one generation per flush");
    for generation in &generations {
        let dataset = lance::Dataset::open(generation).await.unwrap();
        let names: Vec<String> = dataset
            .load_indices()
            .await
            .unwrap()
            .iter()
            .map(|i| i.name.clone())
            .collect();
        assert!(
            names.contains(&"id_idx".to_owned()),
            "{generation}: {names:?}"
        );
    }
    let reader = Graph::open(&uri).await.unwrap();
    for name in ["p0", "p1"] {
        assert!(reader.get("Person", name, fresh()).await.unwrap().is_some());
    }
}

#[tokio::test]
async fn an_upserted_key_returns_one_row_the_newest_across_tiers() {
    let (_dir, _uri, graph) = temp_graph().await;
    let ingest = graph.ingest("main").unwrap();
    // The base (folded), a flushed generation, and the live memtable each hold `ada`.
    ingest.send(1, &ndjson(&[person("ada", 30)])).await.unwrap();
    graph.fold("main").await.unwrap();
    ingest.send(2, &ndjson(&[person("ada", 31)])).await.unwrap();
    graph.close_writers().await.unwrap();
    ingest
        .send(3, &ndjson(&[person("ada", 32), person("ada", 33)]))
        .await
        .unwrap();

    let options = ReadOptions {
        fresh: true,
        filter: Some("id = 'ada'".into()),
        ..Default::default()
    };
    let rows = graph.read("Person", &options).await.unwrap();
    assert_eq!(ints(&rows, "age"), [33]);
    let row = graph.get("Person", "ada", fresh()).await.unwrap().unwrap();
    assert_eq!(ints(&row, "age"), [33]);
    let scan = fresh_rows(&graph, "Person").await;
    assert_eq!(strings(&scan, "id"), ["ada"]);
    assert_eq!(ints(&scan, "age"), [33]);
    let snapshot = graph.get("Person", "ada", &At::default()).await.unwrap();
    assert_eq!(ints(&snapshot.unwrap(), "age"), [30]);
}

#[tokio::test]
async fn fresh_equals_snapshot_after_a_fold() {
    let (_dir, _uri, graph) = temp_graph().await;
    let ingest = graph.ingest("main").unwrap();
    let mut lines = Vec::new();
    for i in 0..200 {
        lines.push(person(&format!("p{}", i % 120), i % 100));
    }
    lines.push(edge("Knows", "p1", "p2"));
    ingest.send(1, &ndjson(&lines)).await.unwrap();
    graph.fold("main").await.unwrap();

    for ty in ["Person", "Knows"] {
        let by_id = |batch: RecordBatch| {
            let ids = strings(&batch, "id");
            let mut rows: Vec<(String, String)> = (0..batch.num_rows())
                .map(|i| {
                    let row = batch.slice(i, 1);
                    (ids[i].clone(), format!("{:?}", row.columns()))
                })
                .collect();
            rows.sort();
            rows
        };
        let snapshot = graph.read(ty, &ReadOptions::default()).await.unwrap();
        let fresh_batch = fresh_rows(&graph, ty).await;
        assert_eq!(fresh_batch.num_rows(), snapshot.num_rows(), "{ty}");
        let columns: Vec<String> = snapshot
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let fresh_same_columns = fresh_batch.project(
            &columns
                .iter()
                .map(|c| fresh_batch.schema().index_of(c).unwrap())
                .collect::<Vec<_>>(),
        );
        assert_eq!(by_id(fresh_same_columns.unwrap()), by_id(snapshot), "{ty}");
    }
    assert_eq!(fresh_rows(&graph, "Person").await.num_rows(), 120);
}

#[tokio::test]
async fn search_finds_unfolded_rows_by_text_and_by_vector() {
    let (_dir, uri, graph) = search_graph().await;
    let ingest = graph.ingest("main").unwrap();
    let text = ndjson(&[
        doc("a", 1, "the zebra crossing", [1.0, 0.0, 0.0, 0.0]),
        doc("b", 2, "a quiet library", [0.0, 1.0, 0.0, 0.0]),
        doc("c", 3, "zebra stripes and lions", [0.0, 0.0, 1.0, 0.0]),
    ]);
    assert_eq!(ingest.send(1, &text).await.unwrap().durable_rows, 3);

    let zebra = SearchQuery::Text("zebra".into());
    let hits = graph.search("Doc", &zebra, 10, fresh()).await.unwrap();
    assert_eq!(sorted_strings(&hits, "id"), ["a", "c"]);
    assert!(hits.column_by_name("_score").is_some(), "scores come back");
    let none = graph
        .search("Doc", &zebra, 10, &At::default())
        .await
        .unwrap();
    assert_eq!(none.num_rows(), 0, "the snapshot has nothing yet");

    let near_b = SearchQuery::Nearest(vec![0.0, 0.9, 0.1, 0.0]);
    let hits = graph.search("Doc", &near_b, 2, fresh()).await.unwrap();
    assert_eq!(strings(&hits, "id")[0], "b");
    let distances = hits
        .column_by_name("_distance")
        .expect("distances come back")
        .as_any()
        .downcast_ref::<Float32Array>()
        .unwrap();
    assert!(distances.value(0) <= distances.value(1));

    // Flushed but unfolded rows, seen from another process.
    graph.close_writers().await.unwrap();
    let other = Graph::open(&uri).await.unwrap();
    let hits = other.search("Doc", &zebra, 10, fresh()).await.unwrap();
    assert_eq!(sorted_strings(&hits, "id"), ["a", "c"]);
    let hits = other.search("Doc", &near_b, 1, fresh()).await.unwrap();
    assert_eq!(strings(&hits, "id"), ["b"]);

    // Folded: the snapshot finds them too, and an update moves a row out of the results.
    graph.fold("main").await.unwrap();
    let hits = graph
        .search("Doc", &zebra, 10, &At::default())
        .await
        .unwrap();
    assert_eq!(sorted_strings(&hits, "id"), ["a", "c"]);
    let hits = graph
        .search("Doc", &near_b, 1, &At::default())
        .await
        .unwrap();
    assert_eq!(strings(&hits, "id"), ["b"]);
    ingest
        .send(
            2,
            &ndjson(&[doc("c", 4, "only lions now", [0.0, 0.0, 1.0, 0.0])]),
        )
        .await
        .unwrap();
    let hits = graph.search("Doc", &zebra, 10, fresh()).await.unwrap();
    assert_eq!(
        strings(&hits, "id"),
        ["a"],
        "the newest version of c has no zebra"
    );
}

#[tokio::test]
async fn bad_searches_are_invalid_input() {
    let (_dir, _uri, graph) = search_graph().await;
    let wrong_dimension = SearchQuery::Nearest(vec![1.0, 2.0]);
    let error = graph
        .search("Doc", &wrong_dimension, 3, &At::default())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.to_string().contains("Vector(4)"), "{error}");

    let (_dir2, _uri2, people) = temp_graph().await;
    let error = people
        .search(
            "Person",
            &SearchQuery::Nearest(vec![0.0; 8]),
            3,
            &At::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(
        error.to_string().contains("no indexed vector field"),
        "{error}"
    );
    let error = people
        .search("Company", &SearchQuery::Text("x".into()), 3, &At::default())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("@index(fts)"), "{error}");
    let error = graph
        .search("Doc", &SearchQuery::Text("x".into()), 0, &At::default())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
}

#[tokio::test]
async fn loads_build_indexes_once_a_table_is_large_enough() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("graph").to_string_lossy().into_owned();
    Graph::init(&uri, tributary_tests::SCHEMA).await.unwrap();
    let settings = GraphSettings {
        indexes: IndexSettings { min_rows: 50 },
        ..Default::default()
    };
    let graph = Graph::builder(&uri)
        .settings(settings)
        .open()
        .await
        .unwrap();
    let companies = |range: std::ops::Range<usize>| {
        ndjson(
            &range
                .map(|i| tributary_tests::company(&format!("c{i}")))
                .collect::<Vec<_>>(),
        )
    };
    let path = "nodes/Company.lance";
    graph
        .load(&companies(0..10), &LoadOptions::default())
        .await
        .unwrap();
    assert!(
        index_coverage(&graph, path).await.is_empty(),
        "10 rows: no index"
    );
    graph
        .load(&companies(10..60), &LoadOptions::default())
        .await
        .unwrap();
    assert_eq!(
        index_coverage(&graph, path).await,
        [("id_idx".into(), true)]
    );
    // Later writes are folded into the index, in the version the commit publishes.
    graph
        .load(&companies(60..70), &LoadOptions::default())
        .await
        .unwrap();
    assert_eq!(
        index_coverage(&graph, path).await,
        [("id_idx".into(), true)]
    );
    let row = graph.get("Company", "c65", &At::default()).await.unwrap();
    assert_eq!(strings(&row.unwrap(), "id"), ["c65"]);
}

#[tokio::test]
async fn streamed_tables_are_indexed_at_enrollment_and_after_every_fold() {
    let (_dir, _uri, graph) = search_graph().await;
    let ingest = graph.ingest("main").unwrap();
    ingest
        .send(1, &ndjson(&[doc("a", 1, "zebra", [1.0, 0.0, 0.0, 0.0])]))
        .await
        .unwrap();
    graph.fold("main").await.unwrap();
    let path = "nodes/Doc.lance";
    let expected: Vec<(String, bool)> = ["body_idx", "embedding_idx", "id_idx"]
        .into_iter()
        .map(|n| (n.to_owned(), true))
        .collect();
    assert_eq!(index_coverage(&graph, path).await, expected);
    ingest
        .send(2, &ndjson(&[doc("b", 2, "lion", [0.0, 1.0, 0.0, 0.0])]))
        .await
        .unwrap();
    graph.fold("main").await.unwrap();
    assert_eq!(index_coverage(&graph, path).await, expected);
    let hits = graph
        .search(
            "Doc",
            &SearchQuery::Nearest(vec![0.0, 1.0, 0.0, 0.0]),
            1,
            &At::default(),
        )
        .await
        .unwrap();
    assert_eq!(strings(&hits, "id"), ["b"]);
}

#[tokio::test]
async fn a_fresh_read_returns_exactly_the_selected_columns() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .load(&ndjson(&[person("ada", 36)]), &LoadOptions::default())
        .await
        .unwrap();
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(&[person("bob", 40)]))
        .await
        .unwrap();
    assert_eq!(ack.durable_rows, 1);
    for fresh in [false, true] {
        let options = ReadOptions {
            select: Some(vec!["name".to_owned(), "age".to_owned()]),
            fresh,
            ..Default::default()
        };
        let batch = graph.read("Person", &options).await.unwrap();
        let names: Vec<&str> = batch
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["name", "age"], "fresh: {fresh}");
        assert_eq!(batch.num_rows(), if fresh { 2 } else { 1 });
    }
}
