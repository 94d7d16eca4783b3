//! `ManifestCasPublisher`: graph heads and commits as rows of the `__manifest` Lance table.
//!
//! Rows are `(key, value)` with `value` a JSON document:
//! - `schema` → [`SchemaRecord`];
//! - `graph_head:<branch>` → the head [`CommitRecord`] (self-contained, so opening a
//!   snapshot at a head reads one row);
//! - `graph_commit:<id>` → every [`CommitRecord`].
//!
//! A publish is one merge-insert of the new head and commit rows with no conflict retries:
//! Lance refuses it if another writer changed the head row since our read, which is the
//! compare-and-swap.
//!
//! The commit point stays flat as history grows: a BTree index on `key` turns every row
//! read (head, schema, one commit) and the publish's own join into index probes, `log`
//! walks parents one probe at a time, and upkeep after a publish keeps the fragments
//! outside the index few (see [`ManifestCasPublisher::maintain`]).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, RecordBatchIterator, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use lance::dataset::optimize::{compact_files, CompactionOptions};
use lance::dataset::{MergeInsertBuilder, WhenMatched, WhenNotMatched, WriteMode};
use lance::index::{DatasetIndexExt, DatasetIndexInternalExt};
use lance::Dataset;
use lance_index::optimize::OptimizeOptions;
use lance_index::scalar::ScalarIndexParams;
use lance_index::IndexType;
use snafu::{OptionExt, ResultExt};
use tokio::sync::Mutex;
use tributary_storage::GraphStore;

use crate::error::{
    AlreadyExistsSnafu, BranchNotFoundSnafu, CommitNotFoundSnafu, CorruptRowSnafu, Error,
    LanceSnafu, NotAGraphSnafu, Result, StorageSnafu,
};
use crate::ids::{BranchName, CommitId};
use crate::record::{CommitRecord, PublishPlan, SchemaRecord, TablePath};
use crate::Publisher;

pub const MANIFEST_PATH: &str = tributary_storage::layout::MANIFEST;
const SCHEMA_KEY: &str = "schema";
const HEAD_PREFIX: &str = "graph_head:";
const COMMIT_PREFIX: &str = "graph_commit:";

/// The BTree index on `key`.
const KEY_INDEX: &str = "manifest_key";

/// Upkeep runs when a publish leaves more fragments than this outside the key index: every
/// read scans those in full, so they bound what a read costs beyond its index probe.
const MAX_UNINDEXED_FRAGMENTS: usize = 8;

/// The manifest's own Lance versions older than this are removed at upkeep. Readers need
/// only its latest version (commits are rows, kept in every version), which Lance finds
/// on a local disk by listing every version (pylance: 0.3 ms at 80 versions, 5.3 ms at
/// 4,000), and old versions hold the fragments compaction replaced. The window covers a
/// reader still reading a version another process just replaced.
pub const MANIFEST_VERSIONS_KEPT: std::time::Duration = std::time::Duration::from_secs(60);

/// Compaction's target fragment size. Fragments that reach it are never rewritten (commit
/// rows are immutable), so one upkeep rewrites at most this many rows whatever the depth.
pub const ROWS_PER_FRAGMENT: usize = 1024;

/// The manifest's two columns, `key` and `value`.
pub fn manifest_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Utf8, false),
    ]))
}

#[expect(
    clippy::expect_used,
    reason = "two string columns for the fixed two-string schema"
)]
/// `(key, value)` rows as one batch of the manifest's schema.
pub fn rows_batch(rows: &[(String, String)]) -> RecordBatch {
    let keys = StringArray::from_iter_values(rows.iter().map(|(k, _)| k.as_str()));
    let values = StringArray::from_iter_values(rows.iter().map(|(_, v)| v.as_str()));
    RecordBatch::try_new(manifest_schema(), vec![Arc::new(keys), Arc::new(values)])
        .expect("manifest rows match the manifest schema")
}

/// The manifest row key of `branch`'s head.
pub fn head_key(branch: &str) -> String {
    format!("{HEAD_PREFIX}{branch}")
}

/// The manifest row key of a load's idempotency key on `branch`.
pub fn idempotency_row_key(branch: &str, key: &str) -> String {
    format!("idempotency/{branch}/{key}")
}

/// The manifest row key of commit `id`.
pub fn commit_key(id: &str) -> String {
    format!("{COMMIT_PREFIX}{id}")
}

fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[expect(clippy::expect_used, reason = "records are plain strings and numbers")]
fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("manifest records serialize")
}

fn parse<T: serde::de::DeserializeOwned>(key: &str, value: &str) -> Result<T> {
    serde_json::from_str(value).context(CorruptRowSnafu { key })
}

fn is_commit_conflict(error: &lance::Error) -> bool {
    matches!(
        error,
        lance::Error::CommitConflict { .. }
            | lance::Error::RetryableCommitConflict { .. }
            | lance::Error::IncompatibleTransaction { .. }
            | lance::Error::TooMuchWriteContention { .. }
    )
}

/// Publisher over the `__manifest` table of one graph.
pub struct ManifestCasPublisher {
    store: GraphStore,
    dataset: Mutex<Dataset>,
}

impl ManifestCasPublisher {
    /// Create the manifest of a new graph: its schema and the first commit of `main`
    /// pinning `tables`.
    pub async fn create(
        store: &GraphStore,
        schema: SchemaRecord,
        tables: std::collections::BTreeMap<TablePath, u64>,
        actor: &str,
    ) -> Result<(Self, CommitRecord)> {
        if store
            .dataset_exists(MANIFEST_PATH)
            .await
            .context(StorageSnafu)?
        {
            return AlreadyExistsSnafu {
                uri: store.location(),
            }
            .fail();
        }
        let first = CommitRecord::first(&schema, tables, actor);
        let rows = vec![
            (SCHEMA_KEY.to_owned(), to_json(&schema)),
            (head_key(&first.branch), to_json(&first)),
            (commit_key(&first.id), to_json(&first)),
        ];
        let uri = store.uri_of(MANIFEST_PATH);
        let reader = RecordBatchIterator::new(vec![Ok(rows_batch(&rows))], manifest_schema());
        let mut dataset = Dataset::write(
            reader,
            uri.as_str(),
            Some(store.write_params(WriteMode::Create)),
        )
        .await
        .context(LanceSnafu { action: "create" })?;
        // The manifest is written: a graph exists. Without its index it is only slower,
        // and the first publish's upkeep builds it.
        if let Err(error) = create_key_index(&mut dataset).await {
            tracing::warn!(%error, "could not index the new manifest; the first publish will");
        }
        Ok((
            Self {
                store: store.clone(),
                dataset: Mutex::new(dataset),
            },
            first,
        ))
    }

    /// Open the manifest of an existing graph.
    pub async fn open(store: &GraphStore) -> Result<Self> {
        if !store
            .dataset_exists(MANIFEST_PATH)
            .await
            .context(StorageSnafu)?
        {
            return NotAGraphSnafu {
                uri: store.location(),
            }
            .fail();
        }
        let dataset = store
            .open_dataset(MANIFEST_PATH, None)
            .await
            .context(StorageSnafu)?;
        Ok(Self {
            store: store.clone(),
            dataset: Mutex::new(dataset),
        })
    }

    /// Lance version of the manifest table (for tests and diagnostics).
    pub async fn manifest_version(&self) -> Result<u64> {
        let mut dataset = self.dataset.lock().await;
        dataset
            .checkout_latest()
            .await
            .context(LanceSnafu { action: "refresh" })?;
        Ok(dataset.version().version)
    }

    /// The graph root this publisher commits to.
    pub fn store(&self) -> &GraphStore {
        &self.store
    }

    async fn latest(&self) -> Result<tokio::sync::MutexGuard<'_, Dataset>> {
        let mut dataset = self.dataset.lock().await;
        dataset
            .checkout_latest()
            .await
            .context(LanceSnafu { action: "refresh" })?;
        Ok(dataset)
    }

    async fn read_rows(dataset: &Dataset, filter: &str) -> Result<HashMap<String, String>> {
        let mut scan = dataset.scan();
        scan.filter(filter)
            .context(LanceSnafu { action: "filter" })?;
        let batch = scan
            .try_into_batch()
            .await
            .context(LanceSnafu { action: "scan" })?;
        let keys = string_column(&batch, "key");
        let values = string_column(&batch, "value");
        let mut rows = HashMap::with_capacity(batch.num_rows());
        if let (Some(keys), Some(values)) = (keys, values) {
            for i in 0..batch.num_rows() {
                rows.insert(keys.value(i).to_owned(), values.value(i).to_owned());
            }
        }
        Ok(rows)
    }

    async fn read_row(dataset: &Dataset, key: &str) -> Result<Option<String>> {
        let mut rows = Self::read_rows(dataset, &format!("key = {}", quote(key))).await?;
        Ok(rows.remove(key))
    }

    async fn read_head(dataset: &Dataset, branch: &str) -> Result<Option<CommitRecord>> {
        let key = head_key(branch);
        match Self::read_row(dataset, &key).await? {
            Some(value) => Ok(Some(parse(&key, &value)?)),
            None => Ok(None),
        }
    }

    /// Keep what a read scans outside the key index bounded. Each publish adds one small
    /// fragment; past [`MAX_UNINDEXED_FRAGMENTS`] of them, compact the fragments below
    /// [`ROWS_PER_FRAGMENT`] rows and merge the new rows into the index. A manifest made
    /// before the index existed gets it here. A failure leaves the published commit
    /// intact, so it is logged and retried on a later publish.
    async fn maintain(dataset: &mut Dataset) {
        if let Err(error) = Self::upkeep(dataset).await {
            tracing::warn!(%error, "manifest upkeep failed; will retry on a later publish");
        }
    }

    async fn upkeep(dataset: &mut Dataset) -> lance::Result<()> {
        let indexed = dataset
            .load_indices()
            .await?
            .iter()
            .any(|index| index.name == KEY_INDEX);
        if !indexed {
            return create_key_index(dataset).await;
        }
        if dataset.unindexed_fragments(KEY_INDEX).await?.len() <= MAX_UNINDEXED_FRAGMENTS {
            return Ok(());
        }
        let options = CompactionOptions {
            target_rows_per_fragment: ROWS_PER_FRAGMENT,
            ..Default::default()
        };
        compact_files(dataset, options, None).await?;
        dataset
            .optimize_indices(&OptimizeOptions::merge(1).index_names(vec![KEY_INDEX.to_owned()]))
            .await?;
        remove_old_manifest_versions(dataset).await
    }

    /// Each commit of `branch` from its head back, newest first, one index probe each.
    async fn walk(
        dataset: &Dataset,
        branch: &BranchName,
        limit: usize,
    ) -> Result<Vec<CommitRecord>> {
        let head = Self::read_head(dataset, branch)
            .await?
            .context(BranchNotFoundSnafu {
                branch: branch.as_str(),
            })?;
        let mut log = Vec::with_capacity(limit.min(1024));
        let mut next = Some(head);
        while let Some(record) = next {
            if log.len() >= limit {
                break;
            }
            next = match &record.parent {
                Some(parent) if log.len() + 1 < limit => {
                    Some(Self::read_commit(dataset, parent).await?)
                }
                _ => None,
            };
            log.push(record);
        }
        Ok(log)
    }

    async fn read_commit(dataset: &Dataset, id: &CommitId) -> Result<CommitRecord> {
        let key = commit_key(id);
        let value = Self::read_row(dataset, &key)
            .await?
            .context(CommitNotFoundSnafu { id: id.as_str() })?;
        parse(&key, &value)
    }
}

async fn create_key_index(dataset: &mut Dataset) -> lance::Result<()> {
    dataset
        .create_index(
            &["key"],
            IndexType::BTree,
            Some(KEY_INDEX.to_owned()),
            &ScalarIndexParams::default(),
            false,
        )
        .await
        .map(|_| ())
}

fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> Option<&'a StringArray> {
    batch
        .column_by_name(name)?
        .as_any()
        .downcast_ref::<StringArray>()
}

#[async_trait]
impl Publisher for ManifestCasPublisher {
    async fn publish(&self, plan: PublishPlan) -> Result<CommitRecord> {
        let mut dataset = self.latest().await?;
        let head = Self::read_head(&dataset, &plan.branch).await?;
        let actual = head.as_ref().map(|h| h.id.clone());
        if actual != plan.expected_head {
            return Err(Error::Conflict {
                branch: plan.branch,
                expected: plan.expected_head,
                actual,
            });
        }
        // A new branch starts from the commit it is created from: its schema, and that
        // commit as its parent.
        let fork = match (&head, &plan.fork) {
            (None, Some(fork)) => Some(Self::read_commit(&dataset, &fork.from).await?),
            _ => None,
        };
        let merged_depth = match &plan.merged {
            Some(merged) => Self::read_commit(&dataset, merged).await?.depth,
            None => 0,
        };
        let record = CommitRecord::next(head.as_ref(), fork.as_ref(), merged_depth, plan.clone())?;
        let json = to_json(&record);
        let mut rows = vec![
            (head_key(&plan.branch), json.clone()),
            (commit_key(&record.id), json),
        ];
        // In the same compare-and-swap as the head: a commit and its key are one write.
        if let Some(key) = &record.idempotency_key {
            rows.push((idempotency_row_key(&plan.branch, key), to_json(&record.id)));
        }
        if let Some(schema) = &plan.schema {
            rows.push((SCHEMA_KEY.to_owned(), to_json(schema)));
        }
        let branch = plan.branch;
        let batch = rows_batch(&rows);

        let mut builder =
            MergeInsertBuilder::try_new(Arc::new(dataset.clone()), vec!["key".to_owned()])
                .context(LanceSnafu { action: "publish" })?;
        builder
            .when_matched(WhenMatched::UpdateAll)
            .when_not_matched(WhenNotMatched::InsertAll)
            .conflict_retries(0)
            .skip_auto_cleanup(true)
            // A branch's first head is an insert: only the full join records inserted keys,
            // so that two first publishes of one branch conflict. Moving a head updates its
            // row, which Lance's conflict check catches either way.
            .use_index(plan.expected_head.is_some());
        let job = builder
            .try_build()
            .context(LanceSnafu { action: "publish" })?;
        match job.execute_batches(vec![batch]).await {
            Ok((published, _stats)) => {
                *dataset = published.as_ref().clone();
            }
            Err(error) if is_commit_conflict(&error) => {
                dataset
                    .checkout_latest()
                    .await
                    .context(LanceSnafu { action: "refresh" })?;
                let actual = Self::read_head(&dataset, &branch).await?.map(|h| h.id);
                return Err(Error::Conflict {
                    branch,
                    expected: plan.expected_head,
                    actual,
                });
            }
            Err(source) => {
                return Err(Error::Lance {
                    action: "publish".to_owned(),
                    source,
                })
            }
        }
        Self::maintain(&mut dataset).await;
        Ok(record)
    }

    async fn head(&self, branch: &BranchName) -> Result<CommitRecord> {
        let dataset = self.latest().await?;
        Self::read_head(&dataset, branch)
            .await?
            .context(BranchNotFoundSnafu {
                branch: branch.as_str(),
            })
    }

    async fn commit(&self, id: &CommitId) -> Result<CommitRecord> {
        let dataset = self.latest().await?;
        Self::read_commit(&dataset, id).await
    }

    async fn commit_by_key(&self, branch: &BranchName, key: &str) -> Result<Option<CommitRecord>> {
        let dataset = self.latest().await?;
        let row = idempotency_row_key(branch, key);
        let Some(value) = Self::read_row(&dataset, &row).await? else {
            return Ok(None);
        };
        let id: CommitId = parse(&row, &value)?;
        Self::read_commit(&dataset, &id).await.map(Some)
    }

    async fn log(&self, branch: &BranchName, limit: usize) -> Result<Vec<CommitRecord>> {
        let dataset = self.latest().await?;
        Self::walk(&dataset, branch, limit).await
    }

    async fn branches(&self) -> Result<Vec<CommitRecord>> {
        let dataset = self.latest().await?;
        let rows = Self::read_rows(
            &dataset,
            &format!("starts_with(key, {})", quote(HEAD_PREFIX)),
        )
        .await?;
        let mut heads = rows
            .iter()
            .map(|(key, value)| parse::<CommitRecord>(key, value))
            .collect::<Result<Vec<_>>>()?;
        heads.sort_by(|a, b| a.branch.cmp(&b.branch));
        Ok(heads)
    }

    async fn delete_branch(&self, branch: &BranchName, expected_head: &CommitId) -> Result<()> {
        // A conflict with another branch's publish leaves this head as it was: try again.
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.delete_head(branch, expected_head).await {
                Err(Error::Conflict { actual, .. })
                    if attempt < 5 && actual.as_ref() == Some(expected_head) => {}
                done => return done,
            }
        }
    }

    async fn schema(&self) -> Result<SchemaRecord> {
        let dataset = self.latest().await?;
        let value = Self::read_row(&dataset, SCHEMA_KEY)
            .await?
            .context(NotAGraphSnafu {
                uri: self.store.location(),
            })?;
        parse(SCHEMA_KEY, &value)
    }
}

impl ManifestCasPublisher {
    /// One attempt of [`Publisher::delete_branch`].
    async fn delete_head(&self, branch: &BranchName, expected_head: &CommitId) -> Result<()> {
        let mut dataset = self.latest().await?;
        let actual = Self::read_head(&dataset, branch).await?.map(|h| h.id);
        if actual.as_ref() != Some(expected_head) {
            return Err(Error::Conflict {
                branch: branch.clone(),
                expected: Some(expected_head.clone()),
                actual,
            });
        }
        // The head and the branch's idempotency keys go in one compare-and-swap: a branch
        // made again under the name starts with no answers for earlier loads.
        let prefix = idempotency_row_key(branch, "");
        let keyed =
            Self::read_rows(&dataset, &format!("starts_with(key, {})", quote(&prefix))).await?;
        let mut rows: Vec<(String, String)> = keyed.into_iter().collect();
        rows.push((head_key(branch), String::new()));
        let mut builder =
            MergeInsertBuilder::try_new(Arc::new(dataset.clone()), vec!["key".to_owned()])
                .context(LanceSnafu {
                    action: "delete a branch",
                })?;
        builder
            .when_matched(WhenMatched::Delete)
            .when_not_matched(WhenNotMatched::DoNothing)
            .conflict_retries(0)
            .skip_auto_cleanup(true);
        let job = builder.try_build().context(LanceSnafu {
            action: "delete a branch",
        })?;
        match job.execute_batches(vec![rows_batch(&rows)]).await {
            Ok((deleted, _)) => {
                *dataset = deleted.as_ref().clone();
                Self::maintain(&mut dataset).await;
                Ok(())
            }
            Err(error) if is_commit_conflict(&error) => {
                dataset
                    .checkout_latest()
                    .await
                    .context(LanceSnafu { action: "refresh" })?;
                let actual = Self::read_head(&dataset, branch).await?.map(|h| h.id);
                Err(Error::Conflict {
                    branch: branch.clone(),
                    expected: Some(expected_head.clone()),
                    actual,
                })
            }
            Err(source) => Err(Error::Lance {
                action: "delete a branch".to_owned(),
                source,
            }),
        }
    }
}

/// Remove the manifest's versions older than [`MANIFEST_VERSIONS_KEPT`] (and the files only
/// they referenced, the fragments compaction replaced).
async fn remove_old_manifest_versions(dataset: &Dataset) -> lance::Result<()> {
    // Tests cannot wait a minute: a failpoint shrinks the window.
    let kept = match fail::eval("manifest::versions-kept-zero", |_| ()) {
        Some(()) => std::time::Duration::ZERO,
        None => MANIFEST_VERSIONS_KEPT,
    };
    let cutoff = chrono::Utc::now()
        - chrono::Duration::from_std(kept).unwrap_or(chrono::Duration::seconds(60));
    let policy = lance::dataset::cleanup::CleanupPolicyBuilder::default()
        .before_timestamp(cutoff)
        .build();
    dataset.cleanup_with_policy(policy).await.map(drop)
}
