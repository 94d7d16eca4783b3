//! `cleanup`: folded MemWAL state and unpinned old versions go; nothing a head or a
//! running write needs does.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tributary::{At, Graph, ReadOptions};
use tributary_tests::{ndjson, person, temp_graph};

fn tree_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() {
                tree_size(&path)
            } else {
                e.metadata().map(|m| m.len()).unwrap_or(0)
            }
        })
        .sum()
}

/// (WAL entries, generation directories) under a table's `_mem_wal`.
fn memwal_counts(table: &Path) -> (usize, usize) {
    let mut wal = 0;
    let mut generations = 0;
    for shard in std::fs::read_dir(table.join("_mem_wal"))
        .into_iter()
        .flatten()
        .flatten()
    {
        wal += std::fs::read_dir(shard.path().join("wal"))
            .into_iter()
            .flatten()
            .count();
        generations += std::fs::read_dir(shard.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("_gen_"))
            .count();
    }
    (wal, generations)
}

async fn person_count(graph: &Graph) -> usize {
    graph
        .read("Person", &ReadOptions::default())
        .await
        .unwrap()
        .num_rows()
}

async fn ingest_round(graph: &Graph, round: usize, rows: usize, key_prefix: &str) {
    let lines: Vec<String> = (0..rows)
        .map(|i| person(&format!("{key_prefix}{i}"), (round % 150) as i32))
        .collect();
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(&lines))
        .await
        .unwrap();
    assert_eq!(ack.durable_rows, rows as u64);
}

#[tokio::test]
async fn disk_usage_returns_to_a_bound_over_ingest_fold_cleanup_cycles() {
    let (_dir, uri, graph) = temp_graph().await;
    let table = Path::new(&uri).join("nodes/Person.lance");
    let mut sizes = Vec::new();
    for round in 0..6 {
        // The same 300 keys every round: the live data does not grow.
        ingest_round(&graph, round, 300, "p").await;
        graph.fold("main").await.unwrap();
        let report = graph.cleanup(Duration::ZERO).await.unwrap();
        // Round 0 made one WAL entry: the tip, which stays.
        assert!(
            round == 0 || report.memwal.wal_entries > 0,
            "round {round}: {report:?}"
        );
        assert!(report.memwal.generations > 0, "round {round}: {report:?}");
        assert_eq!(
            memwal_counts(&table),
            (1, 0),
            "round {round}: folded MemWAL state is gone but for the WAL tip"
        );
        sizes.push(tree_size(&table));
    }
    assert_eq!(person_count(&graph).await, 300);
    let first = sizes[1];
    let last = *sizes.last().unwrap();
    assert!(
        last <= first + first / 2,
        "the table does not grow with rounds of the same keys: {sizes:?}"
    );
    // Reads at the head, fresh reads and further folds still work.
    ingest_round(&graph, 7, 10, "q").await;
    let fresh = ReadOptions {
        fresh: true,
        ..Default::default()
    };
    assert_eq!(graph.read("Person", &fresh).await.unwrap().num_rows(), 310);
    graph.fold("main").await.unwrap();
    assert_eq!(person_count(&graph).await, 310);
}

#[tokio::test]
async fn cleanup_racing_ingest_and_fold_loses_nothing() {
    let (_dir, _uri, graph) = temp_graph().await;
    let graph = Arc::new(graph);
    let writer = {
        let graph = graph.clone();
        tokio::spawn(async move {
            for round in 0..8 {
                ingest_round(&graph, round, 40, &format!("r{round}-")).await;
                graph.fold("main").await.unwrap();
            }
        })
    };
    let cleaner = {
        let graph = graph.clone();
        tokio::spawn(async move {
            for _ in 0..8 {
                graph.cleanup(Duration::ZERO).await.unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    writer.await.unwrap();
    cleaner.await.unwrap();
    graph.fold("main").await.unwrap();
    graph.cleanup(Duration::ZERO).await.unwrap();
    assert_eq!(person_count(&graph).await, 8 * 40);
    let reopened = Graph::open(&graph.store().location()).await.unwrap();
    assert_eq!(person_count(&reopened).await, 8 * 40);
    assert!(reopened.rejects(&At::default()).await.unwrap().num_rows() == 0);
}

/// A branch asked of a commit whose versions a cleanup removed is refused as not found,
/// like every read at it, and leaves no branch; a retention reaching before the calendar's
/// start is refused, not a panic (both found by the OpenAPI fuzzer against a server).
#[tokio::test]
async fn a_branch_from_a_cleaned_commit_and_an_endless_retention_are_refused() {
    let (_dir, _uri, graph) = temp_graph().await;
    let first = graph.snapshot(&At::default()).await.unwrap();
    graph
        .load(&ndjson(&[person("ada", 1)]), &Default::default())
        .await
        .unwrap();
    graph.cleanup(Duration::ZERO).await.unwrap();
    let refused = graph
        .create_branch("late", &At::Commit(first.id.clone()))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), tributary::ErrorKind::NotFound, "{refused}");
    assert!(
        refused.to_string().contains("can no longer be read"),
        "{refused}"
    );
    assert_eq!(graph.branches().await.unwrap().len(), 1);
    for endless in [8_400_000_000_000, u64::MAX / 4] {
        let refused = graph
            .cleanup(Duration::from_secs(endless))
            .await
            .unwrap_err();
        assert_eq!(
            refused.kind(),
            tributary::ErrorKind::InvalidInput,
            "{refused}"
        );
    }
}
