use tributary::{At, Direction, ErrorKind, LoadOptions, ReadOptions};
use tributary_tests::{company, edge, ndjson, person, temp_graph};

use crate::columns::sorted_strings;

async fn small_graph() -> (tempfile::TempDir, tributary::Graph) {
    let (dir, _uri, graph) = temp_graph().await;
    let text = ndjson(&[
        company("acme"),
        company("initech"),
        person("ada", 36),
        person("alan", 41),
        person("grace", 85),
        edge("WorksAt", "ada", "acme"),
        edge("WorksAt", "alan", "acme"),
        edge("WorksAt", "grace", "initech"),
        edge("Knows", "ada", "alan"),
        edge("Knows", "ada", "grace"),
        edge("Knows", "grace", "ada"),
    ]);
    graph.load(&text, &LoadOptions::default()).await.unwrap();
    (dir, graph)
}

#[tokio::test]
async fn scan_with_filter_projection_and_limit() {
    let (_dir, graph) = small_graph().await;
    let options = ReadOptions {
        filter: Some("age > 40".into()),
        select: Some(vec!["name".into(), "age".into()]),
        ..Default::default()
    };
    let batch = graph.read("Person", &options).await.unwrap();
    assert_eq!(sorted_strings(&batch, "name"), ["alan", "grace"]);
    assert_eq!(batch.num_columns(), 2);
    let limited = graph
        .read(
            "Person",
            &ReadOptions {
                limit: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(limited.num_rows(), 1);
    // Defaults were applied at load.
    let active = ReadOptions {
        filter: Some("status = 'active'".into()),
        ..Default::default()
    };
    assert_eq!(graph.read("Person", &active).await.unwrap().num_rows(), 3);
}

#[tokio::test]
async fn bad_requests_are_invalid_input() {
    let (_dir, graph) = small_graph().await;
    let bad_filter = ReadOptions {
        filter: Some("no_such_column = 1".into()),
        ..Default::default()
    };
    assert_eq!(
        graph.read("Person", &bad_filter).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    // A typo names the field and the one meant, at a snapshot and fresh alike; no store
    // URI and no source location.
    for fresh in [false, true] {
        let typo = ReadOptions {
            filter: Some("agee > 3".into()),
            fresh,
            ..Default::default()
        };
        let error = graph.read("Person", &typo).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            error.to_string(),
            "unknown field `agee` of Person (did you mean `age`?)"
        );
    }
    let broken = ReadOptions {
        filter: Some("age >".into()),
        ..Default::default()
    };
    let error = graph.read("Person", &broken).await.unwrap_err().to_string();
    assert!(error.starts_with("invalid filter on Person: "), "{error}");
    assert!(!error.contains(".rs:") && !error.contains("://"), "{error}");
    // Lance keeps the first complete expression and drops the rest: refused here instead.
    for (filter, rest) in [
        ("age > 3 garbage", "garbage"),
        ("age > 3 LIMIT 1", "LIMIT"),
        ("age > 200; DROP TABLE x", ";"),
        ("age > 3) OR (1=1", ")"),
    ] {
        let trailing = ReadOptions {
            filter: Some(filter.into()),
            ..Default::default()
        };
        let error = graph.read("Person", &trailing).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{filter}");
        assert_eq!(
            error.to_string(),
            format!("invalid filter on Person: unexpected `{rest}` after a complete expression")
        );
    }
    for filter in [
        "age == 3",
        "name LIKE 'a%' AND (age > 3 OR age IS NULL)",
        "id IN ('a', 'b')",
    ] {
        let fine = ReadOptions {
            filter: Some(filter.into()),
            ..Default::default()
        };
        graph.read("Person", &fine).await.unwrap();
    }
    let bad_select = ReadOptions {
        select: Some(vec!["nope".into()]),
        ..Default::default()
    };
    let error = graph.read("Person", &bad_select).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.to_string().contains("no column `nope`"), "{error}");
    assert_eq!(
        graph
            .read("Nope", &ReadOptions::default())
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    let error = graph
        .read(
            "Person",
            &ReadOptions {
                at: At::Commit("feedbeef".into()),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(error.unwrap_err().kind(), ErrorKind::NotFound);
    // Unfolded rows are newer than any commit: a fresh read starts from a branch head.
    let head = graph.log("main", 1).await.unwrap().remove(0);
    let error = graph
        .read(
            "Person",
            &ReadOptions {
                at: At::Commit(head.id),
                fresh: true,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.to_string().contains("branch head"), "{error}");
}

#[tokio::test]
async fn get_by_key_for_nodes_and_edges() {
    let (_dir, graph) = small_graph().await;
    let ada = graph
        .get("Person", "ada", &At::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sorted_strings(&ada, "name"), ["ada"]);
    let works = graph
        .get("WorksAt", "ada->acme", &At::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sorted_strings(&works, "dst"), ["acme"]);
    assert!(graph
        .get("Person", "nobody", &At::default())
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn neighbours_out_and_in() {
    let (_dir, graph) = small_graph().await;
    let out = graph
        .neighbors("Person", "ada", "Knows", Direction::Out, &At::default())
        .await
        .unwrap();
    assert_eq!(sorted_strings(&out, "id"), ["alan", "grace"]);
    let into = graph
        .neighbors("Person", "ada", "Knows", Direction::In, &At::default())
        .await
        .unwrap();
    assert_eq!(sorted_strings(&into, "id"), ["grace"]);
    let staff = graph
        .neighbors("Company", "acme", "WorksAt", Direction::In, &At::default())
        .await
        .unwrap();
    assert_eq!(sorted_strings(&staff, "id"), ["ada", "alan"]);
    let employer = graph
        .neighbors("Person", "grace", "WorksAt", Direction::Out, &At::default())
        .await
        .unwrap();
    assert_eq!(sorted_strings(&employer, "id"), ["initech"]);
    let none = graph
        .neighbors("Person", "alan", "Knows", Direction::Out, &At::default())
        .await
        .unwrap();
    assert_eq!(none.num_rows(), 0);
    // WorksAt leaves a Person, so it cannot leave a Company.
    let error = graph
        .neighbors("Company", "acme", "WorksAt", Direction::Out, &At::default())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
}

/// Object-store operations (and their kinds) of opening the graph afresh and getting one
/// row, after `commits` one-row loads.
async fn cold_get_ops(commits: usize) -> tributary::OpCounts {
    let (_dir, uri, graph) = tributary_tests::temp_graph().await;
    for i in 0..commits {
        let line = ndjson(&[person(&format!("p{i}"), (i % 90) as i32)]);
        graph.load(&line, &LoadOptions::default()).await.unwrap();
    }
    drop(graph);
    let counter = tributary::OpCounter::new();
    let graph = tributary::Graph::builder(&uri)
        .counted(counter.clone())
        .open()
        .await
        .unwrap();
    let row = graph.get("Person", "p0", At::default()).await.unwrap();
    assert!(row.is_some());
    counter.snapshot()
}

/// What a fresh process's `get` reads of the tables' manifests does not grow with history:
/// small fragments are compacted as loads go by, so a table's manifest does not list one
/// fragment per one-row load. (The index and data pages a get reads grow with the rows,
/// up to Lance's page size, and the rows grow here with the commits.)
#[tokio::test]
async fn a_cold_get_reads_no_more_manifest_after_ten_times_the_commits() {
    let few = cold_get_ops(20).await;
    let many = cold_get_ops(200).await;
    eprintln!("20 commits: {few:?}\n200 commits: {many:?}");
    let manifests = |counts: &tributary::OpCounts| counts.of_class(tributary::PathClass::Manifest);
    assert_eq!(
        manifests(&many),
        manifests(&few),
        "manifest reads grew with history: {few} -> {many}"
    );
    let bytes = |counts: &tributary::OpCounts| {
        counts.bytes_of(tributary::OpKind::Get, tributary::PathClass::Manifest)
    };
    assert!(
        bytes(&many) * 4 <= bytes(&few) * 5,
        "manifest bytes grew with history: {few:?} -> {many:?}"
    );
}

/// A fresh process finds the manifest's latest version by listing them all, so upkeep
/// removes the manifest's old versions (past a window, shrunk here by a failpoint): their
/// count stays bounded however many commits the graph makes, and every commit stays
/// readable (commits are rows of every version).
#[tokio::test]
async fn the_manifest_keeps_a_bounded_number_of_versions() {
    let _lock = crate::FAILPOINTS.lock().await;
    let scenario = fail::FailScenario::setup();
    fail::cfg("manifest::versions-kept-zero", "return").unwrap();
    let (_dir, uri, graph) =
        tributary_tests::temp_graph_on(tributary::PublisherKind::Manifest).await;
    let commits = 60;
    for i in 0..commits {
        let line = ndjson(&[person(&format!("p{i}"), 30)]);
        graph.load(&line, &LoadOptions::default()).await.unwrap();
    }
    let versions = std::fs::read_dir(std::path::Path::new(&uri).join("__manifest.lance/_versions"))
        .unwrap()
        .count();
    assert!(
        versions < 30,
        "{versions} manifest versions after {commits} commits"
    );
    let log = graph.log("main", 1000).await.unwrap();
    assert_eq!(log.len(), commits + 1, "every commit, and the first");
    drop(graph);
    let graph = tributary::Graph::open(&uri).await.unwrap();
    let row = graph.get("Person", "p0", At::default()).await.unwrap();
    assert!(row.is_some());
    scenario.teardown();
}
