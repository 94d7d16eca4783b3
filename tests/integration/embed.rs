//! `@embed` fields: filled by the fold (and a load) through the graph's embedding
//! provider, the built-in one or an OpenAI-compatible service (a local test server here).

use std::collections::BTreeMap;
use std::time::Duration;

use arrow_array::{Array, FixedSizeListArray, Float32Array, StringArray};
use tributary::{
    At, CommitKind, CrashWindow, Embedder, EmbedderConfig, ErrorKind, Graph, HttpSettings, Lexical,
    LoadOptions, ReadOptions, Recovered, RejectPolicy, SearchQuery, View, WriteKind,
};
use tributary_tests::embeddings_server::{Behaviour, EmbeddingsServer};
use tributary_tests::ndjson;

use crate::FAILPOINTS;

const SCHEMA: &str = r#"
node Doc @stream {
  title: String @key
  text: String?
  embedding: Vector(8)? @embed(text) @index
}
edge Cites: Doc -> Doc @stream
node Note {
  title: String @key
  text: String?
  embedding: Vector(8)? @embed(text)
}
"#;

async fn graph() -> (tempfile::TempDir, String, Graph) {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let graph = Graph::init(&uri, SCHEMA).await.unwrap();
    (dir, uri, graph)
}

fn doc(title: &str, text: Option<&str>) -> String {
    serde_json::json!({"type": "Doc", "data": {"title": title, "text": text}}).to_string()
}

fn note(title: &str, text: &str) -> String {
    serde_json::json!({"type": "Note", "data": {"title": title, "text": text}}).to_string()
}

async fn ingest(graph: &Graph, lines: &[String]) {
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(lines))
        .await
        .unwrap();
    assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
}

async fn lexical(text: &str) -> Vec<f32> {
    Lexical.embed(&[text], 8).await.unwrap().pop().unwrap()
}

/// Key → its vector (`None`: empty), as the head holds them.
async fn vectors(graph: &Graph, type_name: &str) -> BTreeMap<String, Option<Vec<f32>>> {
    let options = ReadOptions {
        select: Some(vec!["id".to_owned(), "embedding".to_owned()]),
        ..Default::default()
    };
    let rows = graph.read(type_name, &options).await.unwrap();
    let ids = rows
        .column_by_name("id")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    let list = rows
        .column_by_name("embedding")
        .unwrap()
        .as_any()
        .downcast_ref::<FixedSizeListArray>()
        .unwrap();
    (0..rows.num_rows())
        .map(|i| {
            let vector = list.is_valid(i).then(|| {
                list.value(i)
                    .as_any()
                    .downcast_ref::<Float32Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            });
            (ids.value(i).to_owned(), vector)
        })
        .collect()
}

/// The test server as the graph's provider: one text per batch unless `batch_size`
/// says, one request at a time (so batches arrive in order), short pauses.
async fn use_server(graph: &Graph, server: &EmbeddingsServer, batch_size: usize, timeout_ms: u64) {
    let settings = EmbedderConfig::Openai(HttpSettings {
        batch_size,
        concurrency: 1,
        timeout_ms,
        retries: 2,
        backoff_ms: 10,
        ..HttpSettings::new(server.url.clone(), "test-model")
    });
    graph.set_embedder(&settings).await.unwrap();
    assert_eq!(graph.embedder_settings().await.unwrap(), settings);
}

#[tokio::test]
async fn the_fold_fills_embed_fields_with_the_built_in_embedder_and_similar_search_finds_them() {
    let (_dir, _uri, graph) = graph().await;
    ingest(
        &graph,
        &[
            doc("a", Some("graph databases on lance")),
            doc("b", Some("baking sourdough bread at home")),
            doc("c", None),
        ],
    )
    .await;
    // Not folded yet: the acknowledged rows have no vector, and a fresh similarity search
    // does not see them.
    let fresh = graph
        .search(
            "Doc",
            &SearchQuery::Similar("lance".into()),
            5,
            View::fresh(At::default()),
        )
        .await
        .unwrap();
    assert_eq!(fresh.num_rows(), 0, "rows not folded have no vector");
    graph.fold("main").await.unwrap();
    let held = vectors(&graph, "Doc").await;
    assert_eq!(held["a"], Some(lexical("graph databases on lance").await));
    assert_eq!(
        held["b"],
        Some(lexical("baking sourdough bread at home").await)
    );
    assert_eq!(held["c"], None, "no text, no vector");
    let found = graph
        .search(
            "Doc",
            &SearchQuery::Similar("Lance graph".into()),
            1,
            View::default(),
        )
        .await
        .unwrap();
    let ids = found
        .column_by_name("id")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    assert_eq!(ids.value(0), "a");
    // `schema` says what the vectors are.
    let schema = tributary::GraphOps::schema(&graph).await.unwrap();
    assert!(schema.contains("lexical"), "{schema}");
    assert!(schema.contains("not semantic"), "{schema}");
    // A type without an indexed `@embed` field cannot be searched by similarity.
    let error = graph
        .search(
            "Note",
            &SearchQuery::Similar("x".into()),
            1,
            View::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.to_string().contains("@embed"), "{error}");
}

#[tokio::test]
async fn a_provider_is_asked_in_batches_and_again_after_transient_failures() {
    let (_dir, _uri, graph) = graph().await;
    let server = EmbeddingsServer::start().await;
    use_server(&graph, &server, 2, 5_000).await;
    server.behave(Behaviour {
        failures: 2,
        fail_status: 503,
        ..Default::default()
    });
    let texts = ["one", "two", "three", "four", "five"];
    let lines: Vec<String> = texts
        .iter()
        .map(|t| doc(&format!("d-{t}"), Some(t)))
        .collect();
    ingest(&graph, &lines).await;
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.dead_letters, 0);
    assert_eq!(server.batches(), [2, 2, 1], "five texts in batches of two");
    assert_eq!(
        server.requests(),
        5,
        "three batches, the first sent three times"
    );
    let held = vectors(&graph, "Doc").await;
    for t in texts {
        assert_eq!(held[&format!("d-{t}")], Some(lexical(t).await), "{t}");
    }
}

#[tokio::test]
async fn rows_a_stalled_provider_gives_no_vector_become_dead_letters_never_empty_vectors() {
    let (_dir, _uri, graph) = graph().await;
    let server = EmbeddingsServer::start().await;
    use_server(&graph, &server, 16, 200).await;
    server.behave(Behaviour {
        delay: Duration::from_secs(3),
        ..Default::default()
    });
    ingest(
        &graph,
        &[
            doc("a", Some("alpha")),
            doc("b", Some("beta")),
            doc("c", None),
        ],
    )
    .await;
    let outcome = graph.fold("main").await.unwrap();
    assert_eq!(outcome.dead_letters, 2);
    assert_eq!(outcome.rows["Doc"], 1, "the row without text folds");
    assert_eq!(
        server.requests(),
        3,
        "sent, then sent again twice, each timed out"
    );
    let held = vectors(&graph, "Doc").await;
    assert_eq!(held.keys().collect::<Vec<_>>(), ["c"]);
    let rejects = graph.rejects(&At::default()).await.unwrap();
    assert_eq!(rejects.num_rows(), 2);
    let column = |name: &str| {
        let c = rejects
            .column_by_name(name)
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .clone();
        (0..c.len())
            .map(|i| c.value(i).to_owned())
            .collect::<Vec<_>>()
    };
    assert!(column("kind").iter().all(|k| k == "embedding"));
    let message = &column("message")[0];
    assert!(
        message.contains("did not answer within 200 ms"),
        "{message}"
    );
    assert!(message.contains("`embedding`"), "{message}");

    // The provider back: the rows sent again fold with their vectors.
    server.behave(Behaviour::default());
    ingest(&graph, &[doc("a", Some("alpha")), doc("b", Some("beta"))]).await;
    graph.fold("main").await.unwrap();
    let held = vectors(&graph, "Doc").await;
    assert_eq!(held["a"], Some(lexical("alpha").await));
    assert_eq!(held["b"], Some(lexical("beta").await));
}

#[tokio::test]
async fn the_halt_policy_stops_the_fold_on_a_provider_failure_and_status_says_why() {
    let (_dir, _uri, graph) = graph().await;
    let server = EmbeddingsServer::start().await;
    use_server(&graph, &server, 16, 5_000).await;
    server.behave(Behaviour {
        always: Some(400),
        ..Default::default()
    });
    ingest(&graph, &[doc("a", Some("alpha"))]).await;
    let error = graph
        .fold_with_policy("main", RejectPolicy::Halt)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("answered 400"), "{error}");
    assert_eq!(server.requests(), 1, "a 400 is not sent again");
    let folds = graph.log("main", 10).await.unwrap();
    assert!(
        folds.iter().all(|c| c.kind != CommitKind::Fold),
        "nothing published"
    );
    let status = graph.ingest_status("main").await.unwrap();
    let why = status.fold_error.expect("status names the failed fold");
    assert!(
        why.contains("answered 400") && why.contains("halt"),
        "{why}"
    );

    server.behave(Behaviour::default());
    graph
        .fold_with_policy("main", RejectPolicy::Halt)
        .await
        .unwrap();
    assert_eq!(
        vectors(&graph, "Doc").await["a"],
        Some(lexical("alpha").await)
    );
    assert!(graph
        .ingest_status("main")
        .await
        .unwrap()
        .fold_error
        .is_none());
}

#[tokio::test]
async fn unchanged_texts_are_not_embedded_again_changed_ones_are_and_given_vectors_stay() {
    let (_dir, _uri, graph) = graph().await;
    let server = EmbeddingsServer::start().await;
    use_server(&graph, &server, 16, 5_000).await;
    ingest(
        &graph,
        &[
            doc("a", Some("alpha")),
            doc("b", Some("beta")),
            doc("c", Some("gamma")),
        ],
    )
    .await;
    graph.fold("main").await.unwrap();
    assert_eq!(server.texts(), 3);

    // `a` again unchanged, `b` with a new text, `c` with a vector of its own.
    let own = vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    let c = serde_json::json!({"type": "Doc", "data": {"title": "c", "text": "delta", "embedding": own}});
    ingest(
        &graph,
        &[
            doc("a", Some("alpha")),
            doc("b", Some("beta two")),
            c.to_string(),
        ],
    )
    .await;
    graph.fold("main").await.unwrap();
    assert_eq!(server.seen(), ["alpha", "beta", "gamma", "beta two"]);
    let held = vectors(&graph, "Doc").await;
    assert_eq!(held["a"], Some(lexical("alpha").await), "kept");
    assert_eq!(held["b"], Some(lexical("beta two").await), "embedded again");
    assert_eq!(held["c"], Some(own.clone()), "a given vector is kept");

    // A patch of the text embeds the new text.
    let patch = |key: &str, fields: &str| {
        format!(r#"{{"type":"Doc","patch":{{"title":"{key}",{fields}}}}}"#)
    };
    ingest(&graph, &[patch("a", r#""text":"alpha two""#)]).await;
    graph.fold("main").await.unwrap();
    assert_eq!(server.texts(), 5);
    assert_eq!(
        vectors(&graph, "Doc").await["a"],
        Some(lexical("alpha two").await)
    );
    // A patch that sets the same text keeps the vector the row has (its own here).
    ingest(&graph, &[patch("c", r#""text":"delta""#)]).await;
    graph.fold("main").await.unwrap();
    assert_eq!(server.texts(), 5, "the text did not change");
    assert_eq!(vectors(&graph, "Doc").await["c"], Some(own));
}

#[tokio::test]
async fn a_load_fills_embed_fields_before_its_commit_and_fails_whole_when_the_provider_fails() {
    let (_dir, _uri, graph) = graph().await;
    let server = EmbeddingsServer::start().await;
    use_server(&graph, &server, 16, 5_000).await;
    graph
        .load(
            &ndjson(&[note("n1", "first"), note("n2", "second")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    let held = vectors(&graph, "Note").await;
    assert_eq!(held["n1"], Some(lexical("first").await));
    assert_eq!(held["n2"], Some(lexical("second").await));
    assert_eq!(server.requests(), 1);

    server.behave(Behaviour {
        always: Some(503),
        ..Default::default()
    });
    let commits = graph.log("main", 100).await.unwrap().len();
    let error = graph
        .load(&ndjson(&[note("n3", "third")]), &LoadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(error.to_string().contains("Note.embedding"), "{error}");
    assert!(
        error.to_string().contains("gave up after 3 attempts"),
        "{error}"
    );
    assert_eq!(
        graph.log("main", 100).await.unwrap().len(),
        commits,
        "nothing committed"
    );
    assert!(!vectors(&graph, "Note").await.contains_key("n3"));
}

#[tokio::test]
async fn bad_embedder_settings_are_refused_before_they_are_stored() {
    let (_dir, _uri, graph) = graph().await;
    for (settings, says) in [
        (HttpSettings::new("localhost:11434", "m"), "not an http"),
        (
            HttpSettings::new("http://localhost:1/v1", " "),
            "model is empty",
        ),
    ] {
        let error = graph
            .set_embedder(&EmbedderConfig::Openai(settings))
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        assert!(error.to_string().contains(says), "{error}");
    }
    assert_eq!(
        graph.embedder_settings().await.unwrap(),
        EmbedderConfig::Builtin
    );
}

/// A fold that embeds, stopped in each of its crash windows, then recovered and folded
/// again: every row is folded once, with its vector.
#[tokio::test]
async fn a_fold_that_embeds_stopped_in_any_window_folds_every_row_once_with_its_vector() {
    for window in CrashWindow::all(WriteKind::Fold) {
        let point = window.name();
        let point = point.as_str();
        let (_dir, uri, graph) = graph().await;
        let server = EmbeddingsServer::start().await;
        use_server(&graph, &server, 16, 5_000).await;
        // Two tables, so the fold has a window between their commits.
        let cites = tributary_tests::edge("Cites", "a", "b");
        ingest(
            &graph,
            &[doc("a", Some("alpha")), doc("b", Some("beta")), cites],
        )
        .await;
        {
            let _lock = FAILPOINTS.lock().await;
            let scenario = fail::FailScenario::setup();
            fail::cfg(point, "return").unwrap();
            let error = graph.fold("main").await.unwrap_err();
            assert!(error.to_string().contains(point), "{error}");
            scenario.teardown();
        }
        let report = graph.recover().await.unwrap();
        assert_eq!(report.len(), 1, "{point}: {report:?}");
        drop(graph);
        let graph = Graph::open(&uri).await.unwrap();
        graph.fold("main").await.unwrap();
        let held = vectors(&graph, "Doc").await;
        assert_eq!(held["a"], Some(lexical("alpha").await), "{point}");
        assert_eq!(held["b"], Some(lexical("beta").await), "{point}");
        assert_eq!(held.len(), 2, "{point}");
        let folds = graph
            .log("main", 10)
            .await
            .unwrap()
            .into_iter()
            .filter(|c| c.kind == CommitKind::Fold)
            .count();
        assert_eq!(folds, 1, "{point}: one fold commit");
        let dropped = matches!(report[0], Recovered::Dropped { .. });
        assert_eq!(
            server.texts(),
            if dropped { 4 } else { 2 },
            "{point}: a dropped fold embeds again; one rolled forward does not"
        );
    }
}
