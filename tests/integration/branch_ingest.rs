//! Streaming ingest on branches: each branch's lineage has a MemWAL of its own, folded
//! into that branch only; branch operations fold the affected branches first; a delete
//! seals the branch's shards so no writer anywhere acknowledges into it afterwards.

use std::time::Duration;

use tributary::{At, ErrorKind, Graph, ReadOptions};
use tributary_tests::{company, edge, ndjson, person, quickly_folding, temp_graph};

use arrow_array::{Array, Int32Array, StringArray};

use crate::columns::{column, sorted_strings};

async fn send(graph: &Graph, branch: &str, lines: &[String]) -> tributary::IngestAck {
    let ack = graph
        .ingest(branch)
        .unwrap()
        .send(1, &ndjson(lines))
        .await
        .unwrap();
    assert!(ack.rejected.is_empty(), "{ack:?}");
    assert_eq!(ack.durable_rows, lines.len() as u64, "{ack:?}");
    ack
}

async fn people(graph: &Graph, branch: &str, fresh: bool) -> Vec<String> {
    let options = ReadOptions {
        at: At::branch(branch).unwrap(),
        fresh,
        ..ReadOptions::default()
    };
    sorted_strings(&graph.read("Person", &options).await.unwrap(), "id")
}

/// A graph with ada on `main`, `Person` enrolled on `main` and one fold behind it (so the
/// table's MemWAL index carries a compaction mark a branch forked now inherits).
async fn streamed_graph() -> (tempfile::TempDir, String, Graph) {
    let (dir, uri, graph) = temp_graph().await;
    send(&graph, "main", &[person("ada", 36)]).await;
    graph.fold("main").await.unwrap();
    (dir, uri, graph)
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &std::path::Path) -> Vec<String> {
    fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if let Ok(relative) = path.strip_prefix(root) {
                out.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out
}

#[tokio::test]
async fn a_branch_streams_and_folds_apart_from_main() {
    let (_dir, uri, graph) = streamed_graph().await;
    let dev = graph.create_branch("dev", &At::default()).await.unwrap();
    let lineage = dev.lineage.clone().unwrap();

    send(&graph, "dev", &[person("bob", 40)]).await;
    send(&graph, "main", &[person("cy", 50)]).await;
    // Fresh reads see each branch's own stream only.
    assert_eq!(people(&graph, "dev", true).await, ["ada", "bob"]);
    assert_eq!(people(&graph, "main", true).await, ["ada", "cy"]);
    assert_eq!(people(&graph, "dev", false).await, ["ada"]);

    let status = graph.ingest_status("dev").await.unwrap();
    let streamed = status.tables.iter().find(|t| t.type_name == "Person");
    assert_eq!(streamed.unwrap().unflushed_rows, 1, "{status:?}");

    // The branch's first generation is folded although `main`'s mark, inherited by the
    // fork, is at or above its number.
    let folded = graph.fold("dev").await.unwrap();
    assert_eq!(folded.rows.get("Person"), Some(&1), "{folded:?}");
    assert_eq!(people(&graph, "dev", false).await, ["ada", "bob"]);
    assert_eq!(people(&graph, "main", false).await, ["ada"]);
    let status = graph.ingest_status("dev").await.unwrap();
    assert!(
        status
            .tables
            .iter()
            .all(|t| t.pending_rows == 0 && t.unflushed_rows == 0),
        "{status:?}"
    );

    graph.fold("main").await.unwrap();
    assert_eq!(people(&graph, "main", false).await, ["ada", "cy"]);
    assert_eq!(people(&graph, "dev", false).await, ["ada", "bob"]);

    // The branch's WAL lives in its lineage's directory, `main`'s stays where it was.
    let table = std::path::Path::new(&uri).join("nodes/Person.lance");
    let branch_wal = files_under(&table.join("tree").join(&lineage).join("_mem_wal"));
    assert!(!branch_wal.is_empty(), "no MemWAL under the branch");
    assert!(!files_under(&table.join("_mem_wal")).is_empty());

    // Another process reading the branch after a restart sees the same.
    drop(graph);
    let reopened = Graph::open(&uri).await.unwrap();
    assert_eq!(people(&reopened, "dev", true).await, ["ada", "bob"]);
}

#[tokio::test]
async fn a_stream_on_a_branch_a_process_left_behind_is_folded_by_another() {
    let (_dir, uri, graph) = streamed_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    // Acknowledged, then the process stops without flushing: the rows are in the branch's
    // WAL only.
    send(&graph, "dev", &[person("bob", 40), person("cy", 50)]).await;
    drop(graph);

    let other = Graph::open(&uri).await.unwrap();
    let status = other.ingest_status("dev").await.unwrap();
    let wal_only: u64 = status.tables.iter().map(|t| t.wal_only_rows).sum();
    assert_eq!(wal_only, 2, "{status:?}");
    other.fold("dev").await.unwrap();
    assert_eq!(people(&other, "dev", false).await, ["ada", "bob", "cy"]);
    assert_eq!(people(&other, "main", false).await, ["ada"]);
}

#[tokio::test]
async fn creating_a_branch_from_a_branch_folds_that_branch_first() {
    let (_dir, _uri, graph) = streamed_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    send(&graph, "dev", &[person("bob", 40)]).await;
    graph
        .create_branch("dev2", &At::branch("dev").unwrap())
        .await
        .unwrap();
    assert_eq!(people(&graph, "dev2", false).await, ["ada", "bob"]);
    assert_eq!(people(&graph, "dev", false).await, ["ada", "bob"]);
    // The new branch's stream starts empty: nothing of `dev`'s WAL is replayed into it.
    let status = graph.ingest_status("dev2").await.unwrap();
    assert!(
        status
            .tables
            .iter()
            .all(|t| t.pending_rows == 0 && t.wal_only_rows == 0),
        "{status:?}"
    );
    send(&graph, "dev2", &[person("cy", 50)]).await;
    graph.fold("dev2").await.unwrap();
    assert_eq!(people(&graph, "dev2", false).await, ["ada", "bob", "cy"]);
    assert_eq!(people(&graph, "dev", false).await, ["ada", "bob"]);
}

#[tokio::test]
async fn a_merge_folds_both_sides_streams_first() {
    let (_dir, _uri, graph) = streamed_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    send(&graph, "dev", &[person("bob", 40)]).await;
    send(&graph, "main", &[person("cy", 50)]).await;
    let merged = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    assert_eq!(merged.rows.get("Person"), Some(&1), "{merged:?}");
    assert_eq!(people(&graph, "main", false).await, ["ada", "bob", "cy"]);
    assert_eq!(people(&graph, "dev", false).await, ["ada", "bob"]);
}

#[tokio::test]
async fn a_deleted_branch_takes_no_more_acknowledgements_from_a_warm_writer_elsewhere() {
    let (_dir, uri, graph) = streamed_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    // Another process streams to `dev` and keeps its writer warm.
    let writer = Graph::open(&uri).await.unwrap();
    send(&writer, "dev", &[person("bob", 40)]).await;

    graph.delete_branch("dev").await.unwrap();
    let refused = writer
        .ingest("dev")
        .unwrap()
        .send(1, &ndjson(&[person("cy", 50)]))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::NotFound, "{refused}");

    // A branch of the same name starts afresh: the same warm process streams to it, and
    // nothing of the old branch (folded or not) is in it.
    graph.create_branch("dev", &At::default()).await.unwrap();
    send(&writer, "dev", &[person("dee", 60)]).await;
    assert_eq!(people(&writer, "dev", true).await, ["ada", "dee"]);
    writer.fold("dev").await.unwrap();
    assert_eq!(people(&graph, "dev", false).await, ["ada", "dee"]);
}

#[tokio::test]
async fn a_warm_writer_acknowledges_nothing_once_cleanup_removed_its_deleted_branch() {
    let (_dir, uri, graph) = streamed_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    let writer = Graph::open(&uri).await.unwrap();
    let stream = writer.ingest("dev").unwrap();
    let ack = stream.send(1, &ndjson(&[person("bob", 40)])).await.unwrap();
    assert_eq!(ack.durable_rows, 1);
    // The delete seals the lineage's shards; the cleanup then removes the whole lineage,
    // its seals and fence markers with it.
    graph.delete_branch("dev").await.unwrap();
    let report = graph.cleanup(Duration::ZERO).await.unwrap();
    assert_eq!(report.branches, 1, "{report:?}");
    let refused = stream
        .send(2, &ndjson(&[person("cy", 50)]))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::NotFound, "{refused}");
    // A branch made again under the name does not take the old stream's sends either.
    graph.create_branch("dev", &At::default()).await.unwrap();
    let refused = stream
        .send(3, &ndjson(&[person("dee", 60)]))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::NotFound, "{refused}");
    // A new stream does.
    send(&writer, "dev", &[person("eve", 70)]).await;
    writer.fold("dev").await.unwrap();
    assert_eq!(people(&graph, "dev", false).await, ["ada", "eve"]);
}

#[tokio::test]
async fn a_patch_streamed_to_a_branch_patches_the_branch_row() {
    let (_dir, _uri, graph) = streamed_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    // `ada` is 36 on `main`; on `dev` she is 40 and has a bio, and `bob` exists there only.
    send(
        &graph,
        "dev",
        &[
            r#"{"type":"Person","data":{"name":"ada","age":40,"bio":"on dev"}}"#.to_owned(),
            person("bob", 20),
        ],
    )
    .await;
    send(
        &graph,
        "dev",
        &[
            r#"{"type":"Person","patch":{"name":"ada","bio":"patched"}}"#.to_owned(),
            r#"{"type":"Person","patch":{"name":"bob","age":21}}"#.to_owned(),
        ],
    )
    .await;
    graph.fold("dev").await.unwrap();
    let row = |key: &'static str, branch: &'static str| {
        let graph = &graph;
        async move {
            let batch = graph
                .get("Person", key, &At::branch(branch).unwrap())
                .await
                .unwrap()
                .unwrap();
            let age = column::<Int32Array>(&batch, "age").value(0);
            let bio = column::<StringArray>(&batch, "bio");
            (age, bio.is_valid(0).then(|| bio.value(0).to_owned()))
        }
    };
    // The patch kept the branch's age, not `main`'s, and found `bob`, who is on `dev` only.
    assert_eq!(row("ada", "dev").await, (40, Some("patched".to_owned())));
    assert_eq!(row("bob", "dev").await, (21, None));
    assert_eq!(row("ada", "main").await, (36, None));
}

#[tokio::test]
async fn dead_letters_of_a_branch_fold_stay_on_the_branch() {
    let (_dir, _uri, graph) = streamed_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    // An edge to a company nobody wrote: the fold refuses it into the dead letters.
    send(&graph, "dev", &[edge("WorksAt", "ada", "nowhere")]).await;
    let folded = graph.fold("dev").await.unwrap();
    assert_eq!(folded.dead_letters, 1, "{folded:?}");
    let on = |branch: &str| At::branch(branch).unwrap();
    assert_eq!(graph.rejects(&on("dev")).await.unwrap().num_rows(), 1);
    assert_eq!(graph.rejects(&on("main")).await.unwrap().num_rows(), 0);

    // `main`'s own dead letters do not reach the branch, nor the branch's `main`.
    send(&graph, "main", &[edge("WorksAt", "ada", "elsewhere")]).await;
    assert_eq!(graph.fold("main").await.unwrap().dead_letters, 1);
    send(&graph, "dev", &[edge("WorksAt", "ada", "void")]).await;
    assert_eq!(graph.fold("dev").await.unwrap().dead_letters, 1);
    assert_eq!(graph.rejects(&on("dev")).await.unwrap().num_rows(), 2);
    assert_eq!(graph.rejects(&on("main")).await.unwrap().num_rows(), 1);

    // A branch forked after `main` had dead letters starts with them.
    graph.create_branch("later", &At::default()).await.unwrap();
    assert_eq!(graph.rejects(&on("later")).await.unwrap().num_rows(), 1);
    // A valid edge folds normally on the branch.
    graph
        .load(
            &ndjson(&[company("acme")]),
            &tributary::LoadOptions {
                branch: tributary::branch("dev").unwrap(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    send(&graph, "dev", &[edge("WorksAt", "ada", "acme")]).await;
    assert_eq!(graph.fold("dev").await.unwrap().dead_letters, 0);
}

#[tokio::test]
async fn the_background_folder_folds_every_branch_it_was_started_for() {
    let (_dir, uri, graph) = streamed_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    drop(graph);
    let folding = quickly_folding(&uri).await;
    folding.start_folder("dev").await.unwrap();
    send(&folding, "dev", &[person("bob", 40)]).await;
    send(&folding, "main", &[person("cy", 50)]).await;
    let mut waited = Duration::ZERO;
    loop {
        let dev = people(&folding, "dev", false).await;
        let main = people(&folding, "main", false).await;
        if dev == ["ada", "bob"] && main == ["ada", "cy"] {
            break;
        }
        assert!(
            waited < Duration::from_secs(60),
            "not folded: dev {dev:?}, main {main:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    // A deleted branch leaves the folder; `main` is still folded.
    folding.delete_branch("dev").await.unwrap();
    send(&folding, "main", &[person("dee", 60)]).await;
    loop {
        if people(&folding, "main", false).await == ["ada", "cy", "dee"] {
            break;
        }
        assert!(waited < Duration::from_secs(120), "main no longer folded");
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    folding.close().await.unwrap();
}

#[tokio::test]
async fn cleanup_collects_a_branch_memwal_and_a_deleted_branch_leaves_nothing() {
    let (_dir, uri, graph) = streamed_graph().await;
    let dev = graph.create_branch("dev", &At::default()).await.unwrap();
    let lineage = dev.lineage.unwrap();
    for (i, name) in ["bob", "cy", "dee"].iter().enumerate() {
        send(&graph, "dev", &[person(name, 40 + i as i32)]).await;
        graph.fold("dev").await.unwrap();
    }
    send(&graph, "dev", &[edge("WorksAt", "ada", "nowhere")]).await;
    graph.fold("dev").await.unwrap();
    let report = graph.cleanup(Duration::ZERO).await.unwrap();
    assert!(
        report.memwal.generations >= 3,
        "the branch's folded generations are garbage: {report:?}"
    );
    assert_eq!(
        people(&graph, "dev", true).await,
        ["ada", "bob", "cy", "dee"]
    );

    graph.delete_branch("dev").await.unwrap();
    let report = graph.cleanup(Duration::ZERO).await.unwrap();
    assert_eq!(report.branches, 1, "{report:?}");
    let root = std::path::Path::new(&uri);
    for table in [
        "nodes/Person.lance",
        "nodes/Company.lance",
        "edges/WorksAt.lance",
        "edges/Knows.lance",
        "_ingest_rejects.lance",
    ] {
        let left = files_under(&root.join(table).join("tree").join(&lineage));
        assert!(left.is_empty(), "{table}: {left:?}");
    }
    assert_eq!(people(&graph, "main", true).await, ["ada"]);
}

#[tokio::test]
async fn a_stream_to_a_missing_branch_is_refused_and_writes_nothing() {
    let (_dir, uri, graph) = streamed_graph().await;
    let refused = graph
        .ingest("nope")
        .unwrap()
        .send(1, &ndjson(&[person("bob", 40)]))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::NotFound, "{refused}");
    let status = graph.ingest_status("nope").await.unwrap_err();
    assert_eq!(status.kind(), ErrorKind::NotFound, "{status}");
    let tree = std::path::Path::new(&uri).join("nodes/Person.lance/tree");
    assert!(files_under(&tree).is_empty(), "{:?}", files_under(&tree));
}

/// One stream of producer `id` on `branch` (first line sequence 1) sending `lines`.
async fn produce(graph: &Graph, branch: &str, id: &str, lines: &[String]) -> tributary::IngestAck {
    let options = tributary::IngestOptions {
        branch: tributary::branch(branch).unwrap(),
        producer: Some(tributary::Producer::new(id, 1).unwrap()),
        ..Default::default()
    };
    let ingestor = graph.ingestor(&options).unwrap();
    ingestor.send(1, &ndjson(lines)).await.unwrap()
}

#[tokio::test]
async fn a_producer_marks_are_per_branch_and_start_afresh_on_a_branch_made_again() {
    let (_dir, _uri, graph) = streamed_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    let lines = [person("bob", 40), person("cy", 50)];
    let on_dev = produce(&graph, "dev", "p", &lines).await;
    assert_eq!((on_dev.durable_rows, on_dev.duplicates), (2, 0));
    // The same producer on `main` has marks of its own: nothing there is a duplicate.
    let on_main = produce(&graph, "main", "p", &lines[..1]).await;
    assert_eq!((on_main.durable_rows, on_main.duplicates), (1, 0));
    // A resend on `dev` is all duplicates.
    let again = produce(&graph, "dev", "p", &lines).await;
    assert_eq!((again.durable_rows, again.duplicates), (0, 2));
    graph.fold("dev").await.unwrap();
    let status = graph.ingest_status("dev").await.unwrap();
    let mark = status.producers.iter().find(|p| p.producer == "p").unwrap();
    assert_eq!((mark.acknowledged, mark.folded), (Some(2), Some(2)));

    // Deleted and made again, `dev` knows nothing of the old stream: the same lines are
    // written, not skipped as duplicates of a branch that is gone.
    graph.delete_branch("dev").await.unwrap();
    graph.create_branch("dev", &At::default()).await.unwrap();
    let afresh = produce(&graph, "dev", "p", &lines).await;
    assert_eq!((afresh.durable_rows, afresh.duplicates), (2, 0));
    graph.fold("dev").await.unwrap();
    assert_eq!(people(&graph, "dev", false).await, ["ada", "bob", "cy"]);
}

#[tokio::test]
async fn a_halted_fold_on_a_branch_is_reported_on_that_branch_only() {
    let (_dir, _uri, graph) = streamed_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    send(&graph, "dev", &[edge("WorksAt", "ada", "nowhere")]).await;
    let halted = graph
        .fold_with_policy("dev", tributary::RejectPolicy::Halt)
        .await
        .unwrap_err();
    let dev = graph.ingest_status("dev").await.unwrap();
    let main = graph.ingest_status("main").await.unwrap();
    assert!(dev.fold_error.is_some(), "{halted}: {dev:?}");
    assert_eq!(main.fold_error, None, "{main:?}");
    // A fold of `main` does not clear the branch's error; the branch's own fold does.
    send(&graph, "main", &[person("bob", 40)]).await;
    graph.fold("main").await.unwrap();
    assert!(graph
        .ingest_status("dev")
        .await
        .unwrap()
        .fold_error
        .is_some());
    graph.fold("dev").await.unwrap();
    assert_eq!(graph.ingest_status("dev").await.unwrap().fold_error, None);
}

/// What a send on a branch costs beyond one on `main`: exactly one read of its
/// lineage marker (the check that the branch still stands before the acknowledgement).
#[tokio::test]
async fn a_send_on_a_branch_costs_one_read_more_than_on_main() {
    let (_dir, _uri, graph, counter) = tributary_tests::counted_graph().await;
    send(&graph, "main", &[person("ada", 36)]).await;
    graph.fold("main").await.unwrap();
    graph.create_branch("dev", &At::default()).await.unwrap();
    let cost = |branch: &'static str| {
        let graph = &graph;
        let counter = counter.clone();
        async move {
            let ingest = graph.ingest(branch).unwrap();
            // The first send opens the writer; the second is the steady cost.
            ingest.send(1, &ndjson(&[person("warm", 1)])).await.unwrap();
            let before = counter.snapshot();
            ingest.send(2, &ndjson(&[person("bob", 40)])).await.unwrap();
            counter.snapshot().since(&before).total()
        }
    };
    let on_main = cost("main").await;
    let on_dev = cost("dev").await;
    eprintln!("object-store ops per 1-row send: main {on_main}, branch {on_dev}");
    assert_eq!(on_dev, on_main + 1, "one GET of the lineage's marker");
    // A lineage without a marker (a branch made before markers) is checked at its head.
    let markers = graph.store().list("__lineages").await.unwrap();
    assert_eq!(markers.len(), 1, "{markers:?}");
    graph
        .store()
        .delete(&format!("__lineages/{}", markers[0]))
        .await
        .unwrap();
    let ingest = graph.ingest("dev").unwrap();
    ingest.send(1, &ndjson(&[person("cy", 50)])).await.unwrap();
    graph.fold("dev").await.unwrap();
    assert_eq!(
        people(&graph, "dev", false).await,
        ["ada", "bob", "cy", "warm"]
    );
}
