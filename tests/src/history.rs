//! Deep commit histories, made fast.
//!
//! A publish loop reaches 1,000 commits in seconds but 100,000 in hours. [`grow_history`]
//! appends commits to a graph's `main` the way the manifest would hold them after that
//! many publishes and their upkeep: commit rows in full fragments of
//! [`ROWS_PER_FRAGMENT`], every one of them indexed, the head row moved to the newest.

use std::sync::Arc;

use arrow_array::RecordBatchIterator;
use lance::dataset::{MergeInsertBuilder, WhenMatched, WhenNotMatched, WriteMode};
use lance::index::DatasetIndexExt;
use lance_index::optimize::OptimizeOptions;
use tributary_publisher::{
    commit_key, head_key, manifest_schema, rows_batch, BranchName, CommitId, ManifestCasPublisher,
    Publisher, MANIFEST_PATH, ROWS_PER_FRAGMENT,
};
use tributary_storage::GraphStore;

/// Append `commits` commits to `main` of the graph at `uri`, each a copy of the head with
/// a new id and the previous one as parent.
pub async fn grow_history(uri: &str, commits: usize) {
    grow_history_on(&GraphStore::new(uri).unwrap(), commits).await
}

/// [`grow_history`] on the graph of `store`.
pub async fn grow_history_on(store: &GraphStore, commits: usize) {
    let publisher = ManifestCasPublisher::open(store).await.unwrap();
    let mut head = publisher.head(&BranchName::main()).await.unwrap();
    let mut rows = Vec::with_capacity(commits);
    for _ in 0..commits {
        let mut next = head.clone();
        next.id = CommitId::random();
        next.parent = Some(head.id.clone());
        next.time_micros += 1;
        rows.push((commit_key(&next.id), serde_json::to_string(&next).unwrap()));
        head = next;
    }
    let mut params = store.write_params(WriteMode::Append);
    params.max_rows_per_file = ROWS_PER_FRAGMENT;
    let reader = RecordBatchIterator::new(vec![Ok(rows_batch(&rows))], manifest_schema());
    let dataset = lance::Dataset::write(reader, store.uri_of(MANIFEST_PATH).as_str(), Some(params))
        .await
        .unwrap();
    let head_row = rows_batch(&[(
        head_key(&head.branch),
        serde_json::to_string(&head).unwrap(),
    )]);
    let mut builder = MergeInsertBuilder::try_new(Arc::new(dataset), vec!["key".into()]).unwrap();
    builder
        .when_matched(WhenMatched::UpdateAll)
        .when_not_matched(WhenNotMatched::InsertAll);
    let (dataset, _) = builder
        .try_build()
        .unwrap()
        .execute_batches(vec![head_row])
        .await
        .unwrap();
    let mut dataset = dataset.as_ref().clone();
    dataset
        .optimize_indices(&OptimizeOptions::merge(1))
        .await
        .unwrap();
}
