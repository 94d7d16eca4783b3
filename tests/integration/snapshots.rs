//! Snapshots for other engines and the pins that keep them from cleanup.

use std::time::Duration;

use tributary::{At, ErrorKind, Graph, LoadOptions, ReadOptions, TableRole};
use tributary_tests::{company, edge, ndjson, person, temp_graph};

async fn load(graph: &Graph, lines: &[String]) -> tributary::CommitId {
    let outcome = graph
        .load(&ndjson(lines), &LoadOptions::default())
        .await
        .unwrap();
    outcome.commit.id
}

fn read_at(commit: &tributary::CommitId) -> ReadOptions {
    ReadOptions {
        at: At::Commit(commit.clone()),
        ..Default::default()
    }
}

/// Ages of every Person at `commit`, by name.
async fn ages(graph: &Graph, commit: &tributary::CommitId) -> Vec<(String, i32)> {
    let batch = graph.read("Person", &read_at(commit)).await.unwrap();
    let names = batch
        .column_by_name("name")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .unwrap()
        .clone();
    let ages = batch
        .column_by_name("age")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::Int32Array>()
        .unwrap()
        .clone();
    let mut rows: Vec<(String, i32)> = (0..batch.num_rows())
        .map(|i| (names.value(i).to_owned(), ages.value(i)))
        .collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn a_snapshot_names_each_table_at_the_version_its_commit_pins() {
    let (_dir, uri, graph) = temp_graph().await;
    let first = load(
        &graph,
        &[
            person("ada", 36),
            person("bob", 41),
            company("acme"),
            edge("WorksAt", "ada", "acme"),
        ],
    )
    .await;
    let snapshot = graph.describe_snapshot(&At::default()).await.unwrap();
    let head = graph.snapshot(&At::default()).await.unwrap();
    assert_eq!(snapshot.commit, first);
    assert_eq!(snapshot.branch.as_str(), "main");
    let names: Vec<&str> = snapshot
        .tables
        .iter()
        .map(|t| t.type_name.as_str())
        .collect();
    assert_eq!(
        names,
        ["Person", "Company", "WorksAt", "Knows"],
        "nodes first"
    );
    for table in &snapshot.tables {
        let path = head
            .tables
            .keys()
            .find(|p| {
                p.to_string()
                    .contains(&format!("/{}.lance", table.type_name))
            })
            .unwrap();
        assert_eq!(table.version, head.tables[path], "{}", table.type_name);
        assert!(table.uri.starts_with(&uri), "{} under the graph", table.uri);
        assert_eq!(table.key, "id");
        assert!(table.lance_branch.is_none());
        assert!(table.columns.iter().any(|c| c.name == "id" && !c.nullable));
    }
    let person_table = &snapshot.tables[0];
    assert_eq!(person_table.role, TableRole::Node);
    assert_eq!(person_table.rows, 2);
    assert!(person_table
        .columns
        .iter()
        .any(|c| c.name == "age" && c.data_type == "Int32" && c.nullable));
    let works_at = &snapshot.tables[2];
    assert_eq!(works_at.role, TableRole::Edge);
    assert_eq!(
        (works_at.from.as_deref(), works_at.to.as_deref()),
        (Some("Person"), Some("Company"))
    );
    assert_eq!(works_at.rows, 1);

    // A later commit moves the head's snapshot; the first one still describes itself.
    load(&graph, &[person("cy", 29)]).await;
    let later = graph.describe_snapshot(&At::default()).await.unwrap();
    assert!(later.tables[0].version > person_table.version);
    assert_eq!(later.tables[0].rows, 3);
    let again = graph
        .describe_snapshot(&At::Commit(first.clone()))
        .await
        .unwrap();
    assert_eq!(again, snapshot);

    // A commit that never was is refused as not found.
    let error = graph
        .describe_snapshot(&At::Commit("no-such-commit".into()))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
}

#[tokio::test]
async fn a_snapshot_off_main_names_the_lance_branch_holding_it() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[person("ada", 36)]).await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    let options = LoadOptions {
        branch: tributary::branch("dev").unwrap(),
        ..Default::default()
    };
    graph
        .load(&ndjson(&[person("bob", 41)]), &options)
        .await
        .unwrap();
    let snapshot = graph
        .describe_snapshot(&At::branch("dev").unwrap())
        .await
        .unwrap();
    assert_eq!(snapshot.branch.as_str(), "dev");
    let person_table = &snapshot.tables[0];
    assert!(person_table.lance_branch.is_some(), "{person_table:?}");
    assert_eq!(person_table.rows, 2);
}

#[tokio::test]
async fn a_pinned_snapshot_outlives_cleanup_until_it_is_unpinned() {
    let (_dir, uri, graph) = temp_graph().await;
    let pinned = load(&graph, &[person("ada", 36), person("bob", 41)]).await;
    let pin = graph.pin("nightly", &At::default()).await.unwrap();
    assert_eq!(pin.commit, pinned);
    // Later commits change the same rows: the pinned versions are history now.
    for age in 50..54 {
        load(&graph, &[person("ada", age), person("bob", age)]).await;
    }
    let report = graph.cleanup(Duration::ZERO).await.unwrap();
    assert_eq!(report.kept_for_pins.len(), 1, "{report:?}");
    assert_eq!(report.kept_for_pins[0].pin, "nightly");
    assert_eq!(report.kept_for_pins[0].commit, pinned.to_string());
    // The pinned snapshot reads as it was; pins survive a reopen.
    drop(graph);
    let graph = Graph::open(&uri).await.unwrap();
    assert_eq!(graph.pins().await.unwrap(), vec![pin.clone()]);
    graph
        .describe_snapshot(&At::Commit(pinned.clone()))
        .await
        .unwrap();
    assert_eq!(
        ages(&graph, &pinned).await,
        [("ada".to_owned(), 36), ("bob".to_owned(), 41)]
    );

    // Unpinned, the next cleanup removes its versions and the snapshot is refused.
    assert_eq!(graph.unpin("nightly").await.unwrap(), pin);
    let report = graph.cleanup(Duration::ZERO).await.unwrap();
    assert!(report.kept_for_pins.is_empty(), "{report:?}");
    assert!(report.versions > 0, "{report:?}");
    let error = graph
        .describe_snapshot(&At::Commit(pinned.clone()))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("Person"),
        "names the table: {error}"
    );
    // And it cannot be pinned again once gone.
    let error = graph.pin("late", &At::Commit(pinned)).await.unwrap_err();
    assert!(error.to_string().contains("Person"), "{error}");
    assert!(graph.pins().await.unwrap().is_empty());
}

#[tokio::test]
async fn pins_are_named_once_and_refused_clearly() {
    let (_dir, _uri, graph) = temp_graph().await;
    let first = load(&graph, &[person("ada", 36)]).await;
    graph.pin("a", &At::default()).await.unwrap();
    // The same commit again: a no-op.
    assert_eq!(graph.pin("a", &At::default()).await.unwrap().commit, first);
    load(&graph, &[person("bob", 41)]).await;
    let taken = graph.pin("a", &At::default()).await.unwrap_err();
    assert_eq!(taken.kind(), ErrorKind::Conflict, "{taken}");
    assert!(taken.to_string().contains(first.as_str()), "{taken}");
    for bad in ["", "../a", ".hidden", "a/b", &"x".repeat(65)] {
        let error = graph.pin(bad, &At::default()).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{bad:?}: {error}");
    }
    let missing = graph.unpin("nope").await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    graph.pin("b", &At::default()).await.unwrap();
    let names: Vec<String> = graph
        .pins()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
}
