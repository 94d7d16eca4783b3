//! Pins every Lance behaviour the code relies on, so a Lance upgrade shows what moved.

mod branches;
mod detached;

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchIterator, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use lance::dataset::transaction::Transaction;
use lance::dataset::{CommitBuilder, MergeInsertBuilder, WhenMatched, WhenNotMatched, WriteMode};
use lance::Dataset;
use lance_table::format::pb;
use prost::Message;
use tributary_storage::{lance_text, GraphStore};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Utf8, false),
    ]))
}

fn batch(rows: &[(&str, &str)]) -> RecordBatch {
    let keys = StringArray::from_iter_values(rows.iter().map(|r| r.0));
    let values = StringArray::from_iter_values(rows.iter().map(|r| r.1));
    RecordBatch::try_new(schema(), vec![Arc::new(keys), Arc::new(values)]).unwrap()
}

async fn table(rows: &[(&str, &str)]) -> (tempfile::TempDir, GraphStore, Dataset) {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::new(&dir.path().to_string_lossy()).unwrap();
    let reader = RecordBatchIterator::new(vec![Ok(batch(rows))], schema());
    let uri = store.uri_of("t.lance");
    let dataset = Dataset::write(
        reader,
        uri.as_str(),
        Some(store.write_params(WriteMode::Create)),
    )
    .await
    .unwrap();
    (dir, store, dataset)
}

fn upsert(dataset: &Dataset, retries: u32) -> MergeInsertBuilder {
    let mut builder =
        MergeInsertBuilder::try_new(Arc::new(dataset.clone()), vec!["key".into()]).unwrap();
    builder
        .when_matched(WhenMatched::UpdateAll)
        .when_not_matched(WhenNotMatched::InsertAll)
        .conflict_retries(retries);
    builder
}

async fn value_of(dataset: &Dataset, key: &str) -> Vec<String> {
    let mut scan = dataset.scan();
    scan.filter(&format!("key = '{key}'")).unwrap();
    let rows = scan.try_into_batch().await.unwrap();
    let values = rows
        .column_by_name("value")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    values.iter().flatten().map(str::to_owned).collect()
}

/// The publisher's compare-and-swap: a merge-insert with no conflict retries from a stale
/// handle that touches the same row is refused, and the first value stays.
#[tokio::test]
async fn merge_insert_without_retries_is_a_compare_and_swap() {
    let (_dir, _store, dataset) = table(&[("head", "0")]).await;
    let stale = dataset.clone();
    upsert(&dataset, 0)
        .try_build()
        .unwrap()
        .execute_batches(vec![batch(&[("head", "1")])])
        .await
        .unwrap();
    let error = upsert(&stale, 0)
        .try_build()
        .unwrap()
        .execute_batches(vec![batch(&[("head", "2")])])
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            lance::Error::TooMuchWriteContention { .. }
                | lance::Error::CommitConflict { .. }
                | lance::Error::RetryableCommitConflict { .. }
                | lance::Error::IncompatibleTransaction { .. }
        ),
        "unexpected error kind: {error:?}"
    );
    let mut latest = dataset.clone();
    latest.checkout_latest().await.unwrap();
    assert_eq!(value_of(&latest, "head").await, ["1"]);
}

/// Why `load` dedupes keys itself: a merge-insert source that repeats a new key inserts
/// it twice (two rows, one key), and one that repeats an existing key is refused.
#[tokio::test]
async fn merge_insert_does_not_dedupe_source_keys() {
    let (_dir, _store, dataset) = table(&[("a", "0")]).await;
    let (inserted, _) = upsert(&dataset, 0)
        .try_build()
        .unwrap()
        .execute_batches(vec![batch(&[("k", "1"), ("k", "2")])])
        .await
        .unwrap();
    assert_eq!(
        value_of(&inserted, "k").await.len(),
        2,
        "a repeated new key is inserted twice"
    );
    let result = upsert(&inserted, 0)
        .try_build()
        .unwrap()
        .execute_batches(vec![batch(&[("a", "1"), ("a", "2")])])
        .await;
    assert!(result.is_err(), "a repeated existing key was accepted");
}

/// Recovery sidecars carry staged transactions as protobuf; they must commit later, and
/// the committed version must carry the same transaction uuid.
#[tokio::test]
async fn a_staged_transaction_round_trips_through_protobuf_and_commits_later() {
    let (_dir, _store, dataset) = table(&[("a", "0")]).await;
    let version = dataset.version().version;
    let staged = upsert(&dataset, 0)
        .try_build()
        .unwrap()
        .execute_uncommitted_batches(vec![batch(&[("a", "1"), ("b", "2")])])
        .await
        .unwrap();
    let mut latest = dataset.clone();
    latest.checkout_latest().await.unwrap();
    assert_eq!(
        latest.version().version,
        version,
        "staging committed something"
    );

    let bytes = pb::Transaction::try_from(&staged.transaction)
        .unwrap()
        .encode_to_vec();
    let decoded =
        Transaction::try_from(pb::Transaction::decode(bytes.as_slice()).unwrap()).unwrap();
    assert_eq!(decoded.uuid, staged.transaction.uuid);
    assert_eq!(decoded.read_version, version);

    let committed = CommitBuilder::new(Arc::new(dataset.clone()))
        .execute(decoded)
        .await
        .unwrap();
    assert_eq!(committed.version().version, version + 1);
    let recorded = committed
        .read_transaction_by_version(version + 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(recorded.uuid, staged.transaction.uuid);
    assert_eq!(committed.count_rows(None).await.unwrap(), 2);
    assert_eq!(value_of(&committed, "a").await, ["1"]);
}

/// A staged transaction committed on a dataset handle older than the table's latest
/// version is rebased onto it (load stages on the pinned version, commits on latest).
#[tokio::test]
async fn a_transaction_staged_on_an_older_version_rebases_onto_the_latest() {
    let (_dir, _store, dataset) = table(&[("a", "0")]).await;
    let staged = upsert(&dataset, 0)
        .try_build()
        .unwrap()
        .execute_uncommitted_batches(vec![batch(&[("b", "1")])])
        .await
        .unwrap();
    upsert(&dataset, 0)
        .try_build()
        .unwrap()
        .execute_batches(vec![batch(&[("c", "2")])])
        .await
        .unwrap();
    let committed = CommitBuilder::new(Arc::new(dataset.clone()))
        .execute(staged.transaction)
        .await
        .unwrap();
    assert_eq!(committed.version().version, dataset.version().version + 2);
    assert_eq!(committed.count_rows(None).await.unwrap(), 3);
}

/// The unenforced primary key marked at table creation is kept by Lance (the MemWAL and
/// merge-insert key on it).
#[tokio::test]
async fn the_primary_key_marked_at_creation_is_kept() {
    let (_dir, uri, _graph) = tributary_tests::temp_graph().await;
    let store = GraphStore::new(&uri).unwrap();
    let dataset = store
        .open_dataset("nodes/Person.lance", None)
        .await
        .unwrap();
    let keys: Vec<&str> = dataset
        .schema()
        .unenforced_primary_key()
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(keys, ["id"]);
}

/// Graph tables are written without Lance's automatic cleanup: graph commits pin old
/// versions, so only the graph's own cleanup may remove them.
#[tokio::test]
async fn graph_tables_have_no_auto_cleanup() {
    let (_dir, uri, _graph) =
        tributary_tests::temp_graph_on(tributary::PublisherKind::Manifest).await;
    let store = GraphStore::new(&uri).unwrap();
    for path in ["nodes/Person.lance", "__manifest.lance"] {
        let dataset = store.open_dataset(path, None).await.unwrap();
        let config = &dataset.manifest().config;
        assert!(
            !config.keys().any(|k| k.contains("auto_cleanup")),
            "{path} has auto-cleanup configured: {config:?}"
        );
    }
}

async fn person_table() -> (tempfile::TempDir, GraphStore, Dataset) {
    let (dir, uri, _graph) = tributary_tests::temp_graph().await;
    let store = GraphStore::new(&uri).unwrap();
    let dataset = store
        .open_dataset("nodes/Person.lance", None)
        .await
        .unwrap();
    (dir, store, dataset)
}

/// Lance records `writer_config_defaults` in the MemWAL index but never applies them to a
/// writer: the adapter reads them back itself. A second initialize is an error whose text
/// says "already initialized" (the idempotent case of enrollment).
#[tokio::test]
async fn memwal_writer_defaults_are_recorded_and_reinitialize_is_refused() {
    use lance::dataset::mem_wal::{DatasetMemWalExt, ShardWriterConfig};
    let (_dir, _store, mut dataset) = person_table().await;
    let defaults = ShardWriterConfig::new(uuid::Uuid::nil()).with_max_wal_buffer_size(1);
    dataset
        .initialize_mem_wal()
        .unsharded()
        .writer_config_defaults(defaults)
        .execute()
        .await
        .unwrap();
    let details = dataset.mem_wal_index_details().await.unwrap().unwrap();
    assert_eq!(
        details
            .writer_config_defaults
            .get("max_wal_buffer_size")
            .map(String::as_str),
        Some("1")
    );
    let error = dataset
        .initialize_mem_wal()
        .unsharded()
        .execute()
        .await
        .unwrap_err();
    assert!(lance_text::is_already_enrolled(&error), "{error}");

    let shard = uuid::Uuid::new_v4();
    let writer = dataset
        .mem_wal_writer(shard, ShardWriterConfig::new(shard))
        .await
        .unwrap();
    assert_eq!(
        writer.config().max_wal_buffer_size,
        ShardWriterConfig::new(shard).max_wal_buffer_size,
        "defaults are not applied by Lance"
    );
    writer.abort().await.unwrap();
}

/// Two writers of one MemWAL shard of an enrolled Person table: `first` put one row
/// (WAL entry 1), then `second` claimed the shard, fencing `first`.
struct FencedPair {
    _dir: tempfile::TempDir,
    store: GraphStore,
    shard: uuid::Uuid,
    first: lance::dataset::mem_wal::ShardWriter,
    second: lance::dataset::mem_wal::ShardWriter,
    /// The table as `second` opened it.
    reopened: Dataset,
    /// A one-row Person batch.
    batch: RecordBatch,
}

async fn fenced_pair() -> FencedPair {
    use lance::dataset::mem_wal::{DatasetMemWalExt, ShardWriterConfig};
    let (dir, store, mut dataset) = person_table().await;
    dataset
        .initialize_mem_wal()
        .unsharded()
        .execute()
        .await
        .unwrap();
    let shard = uuid::Uuid::new_v4();
    let config = ShardWriterConfig::new(shard).with_max_wal_buffer_size(1);
    let first = dataset.mem_wal_writer(shard, config.clone()).await.unwrap();
    let schema: SchemaRef = Arc::new(arrow_schema::Schema::from(dataset.schema()));
    let catalog = tributary_schema::Catalog::parse(tributary_tests::SCHEMA).unwrap();
    let decoded = tributary_schema::decode_str(&catalog, &tributary_tests::person("ada", 1));
    let batch = RecordBatch::try_new(schema, decoded.batches[0].batch.columns().to_vec()).unwrap();
    first.put(vec![batch.clone()]).await.unwrap();
    let reopened = store
        .open_dataset("nodes/Person.lance", None)
        .await
        .unwrap();
    let second = reopened.mem_wal_writer(shard, config).await.unwrap();
    FencedPair {
        _dir: dir,
        store,
        shard,
        first,
        second,
        reopened,
        batch,
    }
}

/// A second writer on a shard fences the first: its next put fails with a typed fence,
/// which the adapter maps to `Fenced`.
#[tokio::test]
async fn a_fenced_writer_fails_with_a_typed_fence() {
    let FencedPair {
        _dir,
        first,
        second,
        batch,
        ..
    } = fenced_pair().await;
    assert_eq!(second.epoch(), first.epoch() + 1);
    let error = first.put(vec![batch]).await.unwrap_err();
    assert!(
        error.fence_reason().is_some(),
        "not a typed fence: {error:?}"
    );
}

/// Closing a fenced writer with rows in its memtable fails as an untyped I/O error (its
/// flush's durability result) carrying the fence's text ("Writer fenced"): the adapter
/// tells it by that text.
#[tokio::test]
async fn closing_a_fenced_writer_fails_with_an_untyped_fence() {
    // (`_dir` and `second` bound, so neither is dropped before the close.)
    let FencedPair {
        _dir,
        first,
        second: _second,
        ..
    } = fenced_pair().await;
    let error = first.close().await.unwrap_err();
    assert!(error.fence_reason().is_none(), "now typed: {error:?}");
    assert!(lance_text::is_untyped_fence(&error), "{error}");
}

/// A writer claiming a shard puts a data-less sentinel at the WAL tip: the slot the
/// previous writer appends to next, which is how that writer learns it is fenced. Lance's
/// appender re-checks the epoch only when a slot is taken, so with the sentinel's slot
/// freed the fenced writer's put succeeds — an acknowledgement no writer will ever replay.
/// Cleanup therefore keeps sentinels; it tells them by reading entries under 4 KiB. Each
/// entry also names its memtable generation.
#[tokio::test]
async fn a_fenced_writer_acknowledges_into_a_freed_sentinel_slot() {
    use lance::dataset::mem_wal::util::wal_entry_filename;
    use lance::dataset::mem_wal::WalTailer;
    let FencedPair {
        _dir,
        store,
        shard,
        first,
        second: _second,
        reopened,
        batch,
    } = fenced_pair().await;

    let wal_dir = format!("nodes/Person.lance/_mem_wal/{shard}/wal");
    // An entry records the memtable generation of its rows under the schema-metadata
    // key "generation" (tails skip entries of generations already flushed).
    let first_entry = store
        .get(&format!("{wal_dir}/{}", wal_entry_filename(1)))
        .await
        .unwrap()
        .unwrap();
    let reader =
        arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(first_entry), None).unwrap();
    assert_eq!(
        reader
            .schema()
            .metadata()
            .get("generation")
            .map(String::as_str),
        Some("1"),
        "{:?}",
        reader.schema().metadata()
    );
    let sizes: std::collections::HashMap<String, u64> =
        store.sizes(&wal_dir).await.unwrap().into_iter().collect();
    let sentinel_name = wal_entry_filename(2);
    assert!(
        sizes[&sentinel_name] < 4096,
        "sentinel of {} bytes",
        sizes[&sentinel_name]
    );
    let tailer = WalTailer::new(
        reopened.object_store(None).await.unwrap(),
        reopened.branch_location().path.clone(),
        shard,
    );
    let sentinel = tailer.read_entry(2).await.unwrap().unwrap();
    assert!(sentinel.batches.is_empty(), "the sentinel carries rows");

    store
        .delete(&format!("{wal_dir}/{sentinel_name}"))
        .await
        .unwrap();
    first
        .put(vec![batch])
        .await
        .expect("Lance now re-checks the fence after an append: the sentinel rule may go");
}

/// RFC open question Q1: the MemWAL compaction marker rides a *staged* merge-insert and
/// lands atomically with its data; staging alone changes nothing; folding the same
/// generation again is refused at commit ("Stale SSTable compaction").
#[tokio::test]
async fn the_compaction_marker_rides_a_staged_merge_and_is_refused_twice() {
    use lance::dataset::mem_wal::DatasetMemWalExt;
    use lance_table::system_index::mem_wal::CompactedSsTable;

    let (_dir, _uri, graph) = tributary_tests::temp_graph().await;
    let line = tributary_tests::person("ada", 1);
    graph.ingest("main").unwrap().send(1, &line).await.unwrap();
    graph.close_writers().await.unwrap(); // flushed as generation 1
    let dataset = graph
        .store()
        .open_dataset("nodes/Person.lance", None)
        .await
        .unwrap();
    let shard = dataset.list_mem_wal_latest_shard_ids().await.unwrap()[0];
    let marker = vec![CompactedSsTable::new(shard, 1)];
    let rows = tributary_schema::decode_str(&graph.catalog(), &line).batches[0]
        .batch
        .clone();
    let stage = |base: &Dataset| {
        let mut builder =
            MergeInsertBuilder::try_new(Arc::new(base.clone()), vec!["id".into()]).unwrap();
        builder
            .when_matched(WhenMatched::UpdateAll)
            .when_not_matched(WhenNotMatched::InsertAll)
            .mark_sstables_as_compacted(marker.clone());
        builder.try_build().unwrap()
    };
    let compacted = |d: Dataset| async move {
        d.mem_wal_index_details()
            .await
            .unwrap()
            .unwrap()
            .compacted_sstables
    };

    let staged = stage(&dataset)
        .execute_uncommitted_batches(vec![rows.clone()])
        .await
        .unwrap();
    let mut latest = dataset.clone();
    latest.checkout_latest().await.unwrap();
    assert!(
        compacted(latest).await.is_empty(),
        "staging records nothing"
    );

    let committed = CommitBuilder::new(Arc::new(dataset.clone()))
        .execute(staged.transaction)
        .await
        .unwrap();
    assert_eq!(compacted(committed.clone()).await, marker);

    let again = stage(&committed)
        .execute_uncommitted_batches(vec![rows])
        .await
        .unwrap();
    let error = CommitBuilder::new(Arc::new(committed))
        .execute(again.transaction)
        .await
        .unwrap_err();
    assert!(lance_text::is_stale_compaction(&error), "{error}");
}

/// Lance's LSM vector search reads base rows through their vector index only
/// (`fast_search`): rows no index covers are invisible to a fresh nearest-neighbour query,
/// while a snapshot query searches them flat. This is why streamed tables get their
/// indexes at enrollment and every fold folds new fragments into them.
#[tokio::test]
async fn lsm_vector_search_sees_only_indexed_base_rows() {
    use arrow_array::{FixedSizeListArray, Float32Array};
    use lance::dataset::mem_wal::LsmScanner;
    use lance::index::vector::VectorIndexParams;
    use lance::index::DatasetIndexExt;
    use lance_index::IndexType;
    use lance_linalg::distance::DistanceType;

    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let schema = "node Doc { name: String @key\n embedding: Vector(4)? @index }";
    tributary::Graph::init(&uri, schema).await.unwrap();
    let store = GraphStore::new(&uri).unwrap();
    let mut dataset = store.open_dataset("nodes/Doc.lance", None).await.unwrap();
    let table_schema: SchemaRef = Arc::new(Schema::from(dataset.schema()));
    let ids = StringArray::from_iter_values((0..10).map(|i| format!("d{i}")));
    let values = Float32Array::from_iter_values((0..40).map(|i| i as f32));
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let vectors = FixedSizeListArray::try_new(item, 4, Arc::new(values), None).unwrap();
    let rows = RecordBatch::try_new(
        table_schema.clone(),
        vec![Arc::new(ids.clone()), Arc::new(ids), Arc::new(vectors)],
    )
    .unwrap();
    dataset
        .append(RecordBatchIterator::new(vec![Ok(rows)], table_schema), None)
        .await
        .unwrap();
    let query = Float32Array::from(vec![0.0, 1.0, 2.0, 3.0]);
    let nearest = |dataset: &Dataset| {
        let scanner = LsmScanner::new(Arc::new(dataset.clone()), vec![], vec!["id".into()]);
        let query = query.clone();
        async move {
            let scanner = scanner.nearest("embedding", &query, 3).unwrap();
            scanner.try_into_batch().await.unwrap().num_rows()
        }
    };
    let mut flat = dataset.scan();
    flat.nearest("embedding", &query, 3).unwrap();
    assert_eq!(flat.try_into_batch().await.unwrap().num_rows(), 3);
    assert_eq!(
        nearest(&dataset).await,
        0,
        "unindexed base rows are skipped"
    );
    let params = VectorIndexParams::ivf_flat(1, DistanceType::L2);
    dataset
        .create_index(&["embedding"], IndexType::Vector, None, &params, false)
        .await
        .unwrap();
    assert_eq!(nearest(&dataset).await, 3);
}

/// A filter naming a column the table lacks fails at planning with DataFusion's "No field
/// named …. Did you mean '…'?", which is how a user is told the field and the likely one;
/// Lance appends a source location that a user must not see.
#[tokio::test]
async fn a_filter_on_an_unknown_column_names_it_and_a_suggestion() {
    let (_dir, _store, dataset) = table(&[("a", "1")]).await;
    let mut scan = dataset.scan();
    let error = match scan.filter("valeu = '1'") {
        Err(error) => error,
        Ok(scan) => scan.try_into_batch().await.unwrap_err(),
    };
    assert_eq!(
        lance_text::unknown_field(&error),
        Some(lance_text::UnknownField {
            field: "valeu".into(),
            suggestion: Some("value".into()),
        }),
        "{error}"
    );
    let message = lance_text::user_message(&error);
    assert!(!message.contains(".rs:"), "{message}");
    assert!(
        error.to_string().contains(".rs:"),
        "Lance no longer appends a location"
    );
}

/// Lance parses a filter as the `WHERE` of a statement and drops whatever follows the
/// first complete expression, so `value = '1' garbage` is `value = '1'`. The read path
/// refuses such filters itself (`fresh-read`'s filter check); when this guard fails, Lance
/// refuses them too and the check can go.
#[tokio::test]
async fn a_filter_with_trailing_input_is_cut_silently() {
    let (_dir, _store, dataset) = table(&[("a", "1"), ("b", "2")]).await;
    let mut scan = dataset.scan();
    scan.filter("value = '1' garbage").unwrap();
    let rows = scan.try_into_batch().await.unwrap();
    assert_eq!(rows.num_rows(), 1);
}

/// Writers claiming one shard at the same moment: a loser of the shard manifest's
/// put-if-absent fails with an untyped I/O error saying "another writer claimed epoch",
/// which the adapter tells by that text (a fence: the send reopens the shard). The race is
/// real, not staged: rounds of eight simultaneous claims run until one loses that way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_writer_losing_a_claim_race_fails_with_an_untyped_fence() {
    use lance::dataset::mem_wal::{DatasetMemWalExt, ShardWriterConfig};
    let (_dir, _store, mut dataset) = person_table().await;
    dataset
        .initialize_mem_wal()
        .unsharded()
        .execute()
        .await
        .unwrap();
    let shard = uuid::Uuid::new_v4();
    let config = ShardWriterConfig::new(shard);
    for _round in 0..50 {
        let start = Arc::new(tokio::sync::Barrier::new(8));
        let claims = (0..8).map(|_| {
            let (dataset, config, start) = (dataset.clone(), config.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                dataset.mem_wal_writer(shard, config).await.map(drop)
            })
        });
        for claim in futures::future::join_all(claims).await {
            let Err(error) = claim.unwrap() else { continue };
            if error.to_string().contains("another writer claimed epoch") {
                assert!(error.fence_reason().is_none(), "now typed: {error:?}");
                assert!(lance_text::is_untyped_fence(&error), "{error}");
                return;
            }
        }
    }
    panic!("no claim lost to another writer in 50 rounds of 8");
}

async fn three_rows_and_a_staged_upsert() -> (tempfile::TempDir, Dataset, Transaction) {
    let (dir, _store, dataset) = table(&[("a", "0"), ("b", "0"), ("c", "0")]).await;
    let merged = upsert(&dataset, 0)
        .try_build()
        .unwrap()
        .execute_uncommitted_batches(vec![batch(&[("b", "1"), ("d", "1")])])
        .await
        .unwrap();
    (dir, dataset, merged.transaction)
}

/// Commit `deletion` (staged on `dataset`'s version, it deletes "a"), then try the staged
/// upsert of [`three_rows_and_a_staged_upsert`]: how Lance refuses it.
async fn upsert_after_committed_deletion(
    dataset: &Dataset,
    deletion: Transaction,
    upsert: Transaction,
) -> lance::Error {
    let read = Arc::new(dataset.clone());
    let after_delete = CommitBuilder::new(read.clone())
        .execute(deletion)
        .await
        .unwrap();
    assert_eq!(after_delete.count_rows(None).await.unwrap(), 2);
    CommitBuilder::new(read).execute(upsert).await.unwrap_err()
}

/// Two merge-inserts staged on one version that touch the same fragment do not rebase:
/// a delete pass (`WhenMatched::Delete`) committed first makes the staged upsert a
/// retryable conflict, and so does a staged `DeleteBuilder` delete. A write that deletes
/// and upserts in one table cannot stage both passes on one version.
#[tokio::test]
async fn a_staged_upsert_is_preempted_by_a_delete_on_its_fragment() {
    use lance::dataset::DeleteBuilder;
    let (_dir, dataset, upsert_transaction) = three_rows_and_a_staged_upsert().await;
    let mut deleting =
        MergeInsertBuilder::try_new(Arc::new(dataset.clone()), vec!["key".into()]).unwrap();
    deleting
        .when_matched(WhenMatched::Delete)
        .when_not_matched(WhenNotMatched::DoNothing)
        .conflict_retries(0);
    // A key that is not there ("z") deletes nothing and is no error.
    let delete_pass = deleting
        .try_build()
        .unwrap()
        .execute_uncommitted_batches(vec![batch(&[("a", ""), ("z", "")])])
        .await
        .unwrap();
    let error =
        upsert_after_committed_deletion(&dataset, delete_pass.transaction, upsert_transaction)
            .await;
    assert!(
        matches!(error, lance::Error::RetryableCommitConflict { .. }),
        "{error}"
    );

    let (_dir, dataset, upsert_transaction) = three_rows_and_a_staged_upsert().await;
    let deleted = DeleteBuilder::new(Arc::new(dataset.clone()), "key IN ('a')")
        .execute_uncommitted()
        .await
        .unwrap();
    let error =
        upsert_after_committed_deletion(&dataset, deleted.transaction, upsert_transaction).await;
    assert!(
        matches!(error, lance::Error::RetryableCommitConflict { .. }),
        "{error}"
    );
}

/// One merge-insert both upserts and deletes: the deleted keys are left out of the source
/// and removed by `WhenNotMatchedBySource::DeleteIf` — one staged transaction, so a write
/// that deletes stays one table commit (and a fold's compaction mark can ride it).
#[tokio::test]
async fn one_staged_merge_upserts_and_deletes_by_key() {
    use lance::dataset::WhenNotMatchedBySource;
    let (_dir, _store, dataset) = table(&[("a", "0"), ("b", "0"), ("c", "0")]).await;
    let read = Arc::new(dataset.clone());
    let mut builder = MergeInsertBuilder::try_new(read.clone(), vec!["key".into()]).unwrap();
    builder
        .when_matched(WhenMatched::UpdateAll)
        .when_not_matched(WhenNotMatched::InsertAll)
        .when_not_matched_by_source(
            WhenNotMatchedBySource::delete_if(&dataset, "key IN ('a', 'z')").unwrap(),
        )
        .conflict_retries(0);
    let staged = builder
        .try_build()
        .unwrap()
        .execute_uncommitted_batches(vec![batch(&[("b", "1"), ("d", "1")])])
        .await
        .unwrap();
    let committed = CommitBuilder::new(read)
        .execute(staged.transaction)
        .await
        .unwrap();
    assert_eq!(committed.version().version, dataset.version().version + 1);
    assert_eq!(committed.count_rows(None).await.unwrap(), 3);
    assert!(value_of(&committed, "a").await.is_empty());
    assert_eq!(value_of(&committed, "b").await, ["1"]);
    assert_eq!(value_of(&committed, "c").await, ["0"]);
    assert_eq!(value_of(&committed, "d").await, ["1"]);
}

/// A writer's claim of a sealed shard is refused with a message `lance_text` tells apart
/// (Lance 14 has no typed accessor for it).
#[tokio::test]
async fn a_claim_of_a_sealed_shard_is_refused_and_told_apart() {
    let (_dir, _uri, graph) = tributary_tests::temp_graph().await;
    graph
        .ingest("main")
        .unwrap()
        .send(1, &tributary_tests::person("ada", 1))
        .await
        .unwrap();
    graph.close_writers().await.unwrap();
    let enrolled = tributary_memwal_adapter::enrollment(
        graph.store(),
        &tributary_memwal_adapter::MemWalTable::main("nodes/Person.lance"),
        &tributary::WriterSettings::default(),
    )
    .await
    .unwrap()
    .unwrap();
    for shard in enrolled.shards.clone() {
        tributary_memwal_adapter::seal_shard(&enrolled, shard)
            .await
            .unwrap();
        // Sealing again is a no-op.
        tributary_memwal_adapter::seal_shard(&enrolled, shard)
            .await
            .unwrap();
    }
    let shard = enrolled.shards[0];
    use lance::dataset::mem_wal::DatasetMemWalExt;
    let refused = enrolled
        .dataset()
        .mem_wal_writer(shard, enrolled.settings.writer_config(shard))
        .await
        .err()
        .expect("a sealed shard is not claimed");
    assert!(lance_text::is_sealed_shard(&refused), "{refused}");
    let opened = tributary_memwal_adapter::TableWriter::open(&enrolled, None).await;
    assert!(opened.err().is_some_and(|e| e.is_sealed()));
}
