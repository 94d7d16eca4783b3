//! Flushed generations, read back for the fold.

use std::sync::Arc;

use arrow_array::{Array, BooleanArray, RecordBatch, StringArray};
use arrow_schema::SchemaRef;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use lance::dataset::mem_wal::TOMBSTONE;
use lance::Dataset;
use snafu::ResultExt;
use tributary_storage::GraphStore;
use uuid::Uuid;

use crate::error::{Error, LanceSnafu, Result, StorageSnafu};
use crate::location::MemWalTable;
use crate::status::PendingGeneration;

/// Part of one generation: its rows (in the table's schema) and the keys it deletes. A
/// generation holds one entry per key, its newest: a row or a tombstone.
#[derive(Debug, Clone)]
pub struct GenerationBatch {
    pub rows: RecordBatch,
    pub deleted: Vec<String>,
}

/// One flushed generation, opened once for the fold: first its tombstones (the fold
/// must know every deleted key before it passes any table), then its rows.
pub struct Generation {
    pending: PendingGeneration,
    dataset: Dataset,
    path: String,
    table: String,
}

impl Generation {
    pub async fn open(
        store: &GraphStore,
        at: &MemWalTable,
        shard: Uuid,
        generation: &PendingGeneration,
    ) -> Result<Generation> {
        let path = format!("{}/{}", at.shard_dir(shard), generation.path);
        let dataset = store
            .open_dataset(&path, None)
            .await
            .context(StorageSnafu)?;
        Ok(Generation {
            pending: generation.clone(),
            dataset,
            path,
            table: at.table().to_owned(),
        })
    }

    /// What the shard's state says of this generation (its number, its rows).
    pub fn pending(&self) -> &PendingGeneration {
        &self.pending
    }

    fn lance(&self, action: &'static str) -> LanceSnafu<&'static str, String> {
        LanceSnafu {
            action,
            table: self.path.clone(),
        }
    }

    /// The keys the generation deletes (its tombstones).
    pub async fn tombstones(&self) -> Result<Vec<String>> {
        let mut scan = self.dataset.scan();
        scan.filter(&format!("{TOMBSTONE} = true"))
            .and_then(|s| s.project(&["id"]))
            .context(self.lance("scan tombstones"))?;
        let batch = scan
            .try_into_batch()
            .await
            .context(self.lance("scan tombstones"))?;
        Ok(key_column(&batch, &self.path)?
            .iter()
            .flatten()
            .map(str::to_owned)
            .collect())
    }

    /// The generation as a stream of its rows, in the table's schema (`target`), and its
    /// tombstones. A generation written under an older schema lacks the columns added
    /// since: its rows have the columns of `target` it has, in `target`'s order (the
    /// caller, which knows the fields' defaults, fills the rest).
    pub async fn rows(
        &self,
        target: SchemaRef,
    ) -> Result<BoxStream<'static, Result<GenerationBatch>>> {
        let dataset = &self.dataset;
        let present: Vec<usize> = (0..target.fields().len())
            .filter(|&i| dataset.schema().field(target.field(i).name()).is_some())
            .collect();
        let target = Arc::new(
            target
                .project(&present)
                .map_err(|e| Error::InvalidSetting {
                    table: self.table.clone(),
                    message: format!("project the table schema: {e}"),
                })?,
        );
        let mut columns: Vec<&str> = target.fields().iter().map(|f| f.name().as_str()).collect();
        columns.push(TOMBSTONE);
        let mut scan = dataset.scan();
        scan.project(&columns)
            .context(self.lance("scan generation"))?;
        let stream = scan
            .try_into_stream()
            .await
            .context(self.lance("scan generation"))?;
        let table = self.table.clone();
        let path = self.path.clone();
        let read_path = path.clone();
        Ok(stream
            .map_err(move |source| Error::Lance {
                action: "read generation".into(),
                table: read_path.clone(),
                source,
            })
            .and_then(move |batch| {
                futures::future::ready(split_tombstones(&batch, &target, &table, &path))
            })
            .boxed())
    }
}

/// A generation's batch as rows in the table's schema and the keys it tombstones.
fn split_tombstones(
    batch: &RecordBatch,
    target: &SchemaRef,
    table: &str,
    path: &str,
) -> Result<GenerationBatch> {
    let invalid = |message: String| Error::InvalidSetting {
        table: table.to_owned(),
        message,
    };
    let tombstones = batch
        .column_by_name(TOMBSTONE)
        .and_then(|c| c.as_any().downcast_ref::<BooleanArray>())
        .ok_or_else(|| invalid(format!("generation {path} has no {TOMBSTONE} column")))?;
    let mut deleted = Vec::new();
    let live = if tombstones.true_count() == 0 {
        batch.clone()
    } else {
        let ids = key_column(batch, path)?;
        for row in 0..batch.num_rows() {
            if tombstones.value(row) && ids.is_valid(row) {
                deleted.push(ids.value(row).to_owned());
            }
        }
        let keep: BooleanArray = tombstones.iter().map(|t| Some(t != Some(true))).collect();
        arrow_select::filter::filter_record_batch(batch, &keep)
            .map_err(|e| invalid(format!("filter tombstones: {e}")))?
    };
    // Generations relax non-key columns to nullable; the table's schema is stricter.
    let columns = live.columns()[..target.fields().len()].to_vec();
    let rows = RecordBatch::try_new(target.clone(), columns)
        .map_err(|e| invalid(format!("a generation does not match the table schema: {e}")))?;
    Ok(GenerationBatch { rows, deleted })
}

fn key_column<'b>(batch: &'b RecordBatch, path: &str) -> Result<&'b StringArray> {
    batch
        .column_by_name("id")
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| Error::InvalidSetting {
            table: path.to_owned(),
            message: "a generation has no string key `id`".into(),
        })
}
