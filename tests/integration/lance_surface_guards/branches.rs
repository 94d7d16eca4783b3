//! Lance's dataset branches as graph branches use them: a shallow clone with a lineage
//! of its own, fragments shared with the source until rewritten (the merge's diff reads
//! them), writes staged on a branch handle committing to the branch, a stale branch
//! replaced after a forced delete, and the source's cleanup keeping what a branch reads.

use std::sync::Arc;

use lance::dataset::cleanup::CleanupPolicyBuilder;
use lance::dataset::CommitBuilder;
use lance::Dataset;

use super::{batch, table, upsert, value_of};

fn files(dataset: &Dataset) -> Vec<(u64, Vec<String>)> {
    dataset
        .manifest()
        .fragments
        .iter()
        .map(|f| (f.id, f.files.iter().map(|d| d.path.clone()).collect()))
        .collect()
}

#[tokio::test]
async fn a_table_branch_is_a_shallow_clone_with_a_lineage_of_its_own() {
    let (dir, store, mut main) = table(&[("a", "1"), ("b", "1")]).await;
    let forked_at = main.version().version;
    let shared = files(&main);
    let dev = main
        .create_branch("dev", (None, Some(forked_at)), None)
        .await
        .unwrap();
    assert_eq!(dev.manifest().branch.as_deref(), Some("dev"));
    assert_eq!(
        dev.version().version,
        forked_at,
        "a fork keeps the version number"
    );
    assert_eq!(
        files(&dev),
        shared,
        "no data copied: the same fragments and files"
    );

    // A write staged on a handle of the branch commits to the branch.
    let on_dev = store
        .open_dataset_on("t.lance", Some("dev"), Some(forked_at))
        .await
        .unwrap();
    let staged = upsert(&on_dev, 0)
        .try_build()
        .unwrap()
        .execute_uncommitted_batches(vec![batch(&[("a", "2"), ("c", "2")])])
        .await
        .unwrap();
    let committed = CommitBuilder::new(Arc::new(on_dev))
        .execute(staged.transaction)
        .await
        .unwrap();
    assert_eq!(committed.manifest().branch.as_deref(), Some("dev"));
    assert_eq!(committed.version().version, forked_at + 1);
    let latest_main = store.open_dataset("t.lance", None).await.unwrap();
    assert_eq!(
        latest_main.version().version,
        forked_at,
        "main did not move"
    );
    assert_eq!(value_of(&latest_main, "a").await, ["1"]);
    assert_eq!(value_of(&committed, "a").await, ["2"]);
    // The untouched fragment is still the source's, under its id; the new rows are in
    // fragments the source does not have, written under the branch's folder.
    let after = files(&committed);
    let (id, old_files) = &shared[0];
    assert!(
        after.iter().any(|(i, f)| i == id && f == old_files),
        "{after:?}"
    );
    assert!(after.len() > shared.len(), "{after:?}");
    let written = std::fs::read_dir(dir.path().join("t.lance/tree/dev/data"))
        .unwrap()
        .count();
    assert!(
        written > 0,
        "a branch's data files live under tree/<branch>/data"
    );
    // Reopened by branch and version, as a commit record pins it.
    let again = store
        .open_dataset_on("t.lance", Some("dev"), Some(forked_at + 1))
        .await
        .unwrap();
    assert_eq!(value_of(&again, "c").await, ["2"]);
}

#[tokio::test]
async fn a_stale_table_branch_blocks_its_name_until_force_deleted() {
    let (_dir, _store, mut main) = table(&[("a", "1")]).await;
    let v = main.version().version;
    main.create_branch("dev", (None, Some(v)), None)
        .await
        .unwrap();
    assert!(main
        .create_branch("dev", (None, Some(v)), None)
        .await
        .is_err());
    main.force_delete_branch("dev").await.unwrap();
    main.create_branch("dev", (None, Some(v)), None)
        .await
        .unwrap();
    assert!(main.list_branches().await.unwrap().contains_key("dev"));
    // A forced delete of a branch the table does not have removes nothing and is no error
    // (cleanup drops a lineage from every table, some of which may lack it).
    main.force_delete_branch("never-made").await.unwrap();
    assert!(main.list_branches().await.unwrap().contains_key("dev"));
}

#[tokio::test]
async fn cleanup_of_the_source_keeps_what_a_branch_reads_until_it_is_deleted() {
    let (_dir, store, mut main) = table(&[("a", "1"), ("b", "1")]).await;
    let v = main.version().version;
    main.create_branch("dev", (None, Some(v)), None)
        .await
        .unwrap();
    for round in 2..5 {
        let latest = store.open_dataset("t.lance", None).await.unwrap();
        upsert(&latest, 0)
            .try_build()
            .unwrap()
            .execute_batches(vec![batch(&[("a", &round.to_string()), ("b", "x")])])
            .await
            .unwrap();
    }
    let policy = || {
        CleanupPolicyBuilder::default()
            .before_timestamp(chrono::Utc::now())
            .build()
    };
    let latest = store.open_dataset("t.lance", None).await.unwrap();
    let kept = latest.cleanup_with_policy(policy()).await.unwrap();
    assert!(kept.old_versions > 0);
    let dev = store
        .open_dataset_on("t.lance", Some("dev"), None)
        .await
        .unwrap();
    assert_eq!(
        value_of(&dev, "a").await,
        ["1"],
        "the branch still reads its rows"
    );

    let mut latest = store.open_dataset("t.lance", None).await.unwrap();
    latest.delete_branch("dev").await.unwrap();
    let freed = latest.cleanup_with_policy(policy()).await.unwrap();
    assert!(
        freed.bytes_removed > 0,
        "the branch's rows are freed: {freed:?}"
    );
    assert_eq!(value_of(&latest, "a").await, ["4"]);
}

/// What per-branch ingest would build on. A table branch has a MemWAL of its own: a
/// writer opened on the branch writes under `tree/<branch>/_mem_wal`, and `main`'s shard
/// is untouched. But the branch's MemWAL index is the source's, compaction marks
/// included, while its shard starts its generations afresh: with the adapter's shard ids
/// (from the table path, the same on every branch) a fold of the branch would take its
/// new generations for folded ones. So ingest stays on `main` until shards are named per
/// branch.
#[tokio::test]
async fn a_table_branch_has_its_own_memwal_but_inherits_the_sources_compaction_marks() {
    use lance::dataset::mem_wal::{DatasetMemWalExt, ShardManifestStore, ShardWriterConfig};
    use tributary::At;
    let (dir, uri, graph) = tributary_tests::temp_graph().await;
    let ingest = graph.ingest("main").unwrap();
    for round in 0..3 {
        let line = tributary_tests::person(&format!("p{round}"), round);
        ingest.send(1, &line).await.unwrap();
        graph.fold("main").await.unwrap();
    }
    let lineage = graph
        .create_branch("dev", &At::default())
        .await
        .unwrap()
        .lineage
        .unwrap();
    let store = tributary_storage::GraphStore::new(&uri).unwrap();
    let path = "nodes/Person.lance";
    let shard = tributary_memwal_adapter::MemWalTable::main(path).shard_id(0);
    let main_before = store.open_dataset(path, None).await.unwrap();
    let main_mark = |d: lance_index::mem_wal::MemWalIndexDetails| {
        d.compacted_sstables
            .iter()
            .find(|c| c.shard_id == shard)
            .map(|c| c.generation)
    };
    let main_generation = main_mark(main_before.mem_wal_index_details().await.unwrap().unwrap());
    let dev = store
        .open_dataset_on(path, Some(&lineage), None)
        .await
        .unwrap();
    let inherited = main_mark(dev.mem_wal_index_details().await.unwrap().unwrap());
    assert_eq!(
        inherited, main_generation,
        "the clone carries the source's marks"
    );
    assert!(inherited >= Some(3), "{inherited:?}");

    let writer = dev
        .mem_wal_writer(
            shard,
            ShardWriterConfig::new(shard).with_max_wal_buffer_size(1),
        )
        .await
        .unwrap();
    let schema: arrow_schema::SchemaRef = Arc::new(arrow_schema::Schema::from(dev.schema()));
    let catalog = tributary_schema::Catalog::parse(tributary_tests::SCHEMA).unwrap();
    let decoded = tributary_schema::decode_str(&catalog, &tributary_tests::person("zed", 1));
    let batch =
        arrow_array::RecordBatch::try_new(schema, decoded.batches[0].batch.columns().to_vec())
            .unwrap();
    writer.put(vec![batch]).await.unwrap();
    writer
        .force_freeze_active()
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert!(dir
        .path()
        .join(format!("graph/nodes/Person.lance/tree/{lineage}/_mem_wal"))
        .join(shard.to_string())
        .exists());
    let manifests = ShardManifestStore::new(
        dev.object_store(None).await.unwrap(),
        &dev.branch_location().path,
        shard,
        2,
    );
    let flushed = manifests.latest().await.unwrap().unwrap();
    let first = flushed.sstables.iter().map(|s| s.generation).min().unwrap();
    assert!(
        Some(first) <= inherited,
        "the branch's first generation {first} is at or below the inherited mark {inherited:?}"
    );
    let main_after = store.open_dataset(path, None).await.unwrap();
    assert_eq!(
        main_mark(main_after.mem_wal_index_details().await.unwrap().unwrap()),
        main_generation
    );
}
