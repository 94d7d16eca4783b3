//! Dead letters: rows a fold could not apply, published in the fold's own graph commit.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use lance::dataset::transaction::Transaction;
use lance::dataset::{InsertBuilder, WriteMode};
use snafu::ResultExt;
use tributary_publisher::CommitRecord;
use tributary_schema::TablePath;
use tributary_storage::GraphStore;

use crate::constraints::RejectKind;
use crate::error::{ArrowSnafu, LanceSnafu, Result, StorageSnafu};

/// Where dead letters live, beside the node and edge tables.
pub const REJECTS_PATH: TablePath = TablePath::from_static(tributary_storage::layout::REJECTS);

pub fn rejects_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("table", DataType::Utf8, false),
        Field::new("key", DataType::Utf8, false),
        Field::new("row", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("message", DataType::Utf8, false),
        Field::new("shard", DataType::Utf8, false),
        Field::new("generation", DataType::UInt64, false),
        Field::new("fold_commit", DataType::Utf8, false),
        Field::new("time_micros", DataType::Int64, false),
    ]))
}

/// One rejected row, as it will be written.
#[derive(Debug, Clone)]
pub struct Reject {
    pub table: String,
    pub key: String,
    /// The row as one JSON object.
    pub row: String,
    pub kind: RejectKind,
    pub message: String,
    pub shard: String,
    pub generation: u64,
}

/// The rejects of one fold, stamped with the commit that will publish them.
pub struct RejectRows {
    commit: String,
    rows: Vec<Reject>,
}

impl RejectRows {
    pub fn new(commit: &str) -> Self {
        RejectRows {
            commit: commit.to_owned(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, reject: Reject) {
        self.rows.push(reject);
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn batch(&self) -> Result<RecordBatch> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or_default();
        let text = |f: &dyn Fn(&Reject) -> String| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(self.rows.iter().map(f)))
        };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(
                (0..self.rows.len()).map(|i| format!("{}:{i}", self.commit)),
            )),
            text(&|r| r.table.clone()),
            text(&|r| r.key.clone()),
            text(&|r| r.row.clone()),
            text(&|r| r.kind.to_string()),
            text(&|r| r.message.clone()),
            text(&|r| r.shard.clone()),
            Arc::new(UInt64Array::from_iter_values(
                self.rows.iter().map(|r| r.generation),
            )),
            text(&|_| self.commit.clone()),
            Arc::new(Int64Array::from_iter_values(self.rows.iter().map(|_| now))),
        ];
        RecordBatch::try_new(rejects_schema(), columns).context(ArrowSnafu {
            action: "build dead letters",
        })
    }

    /// Stage the rows as an append to the dead-letter table of `head`'s lineage (created
    /// on first use). Returns the dataset staged on and the transaction.
    pub async fn stage(
        &self,
        store: &GraphStore,
        head: &CommitRecord,
    ) -> Result<(Arc<lance::Dataset>, Transaction)> {
        if !store
            .dataset_exists(&REJECTS_PATH)
            .await
            .context(StorageSnafu)?
        {
            // Two folders creating it at once: the loser's error is harmless.
            if let Err(error) = store.create_dataset(&REJECTS_PATH, rejects_schema()).await {
                tracing::debug!(%error, "dead-letter table creation raced");
            }
        }
        let lineage = head.lineage.as_deref();
        let mut mode = WriteMode::Append;
        if let Some(lineage) = lineage.filter(|_| !head.tables.contains_key(&REJECTS_PATH)) {
            // The branch forked before the table existed: its lineage starts here, from
            // whatever `main` holds, and its first dead letters replace those rows. (A
            // lineage a stopped fold made is taken as it is: overwritten all the same.)
            let mut root = store
                .open_dataset(&REJECTS_PATH, None)
                .await
                .context(StorageSnafu)?;
            let version = root.version().version;
            if let Err(error) = root
                .create_branch(lineage, (None::<&str>, Some(version)), None)
                .await
            {
                tracing::debug!(%error, lineage, "dead-letter lineage exists already");
            }
            mode = WriteMode::Overwrite;
        }
        let dataset = Arc::new(
            store
                .open_dataset_on(&REJECTS_PATH, lineage, None)
                .await
                .context(StorageSnafu)?,
        );
        let params = store.write_params(mode);
        let transaction = InsertBuilder::new(dataset.clone())
            .with_params(&params)
            .execute_uncommitted(vec![self.batch()?])
            .await
            .context(LanceSnafu {
                action: "stage dead letters",
                table: REJECTS_PATH.as_str(),
            })?;
        Ok((dataset, transaction))
    }
}

/// Row `i` of `batch` as one JSON object.
pub fn row_json(batch: &RecordBatch, i: usize) -> String {
    let mut out = Vec::new();
    {
        let mut writer = arrow_json::LineDelimitedWriter::new(&mut out);
        if writer
            .write(&batch.slice(i, 1))
            .and_then(|_| writer.finish())
            .is_err()
        {
            return "{}".to_owned();
        }
    }
    String::from_utf8_lossy(&out).trim_end().to_owned()
}
