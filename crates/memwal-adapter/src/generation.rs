//! Flushed generations, read back for the fold.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use lance::dataset::mem_wal::TOMBSTONE;
use snafu::ResultExt;
use tributary_storage::GraphStore;
use uuid::Uuid;

use crate::error::{Error, LanceSnafu, Result, StorageSnafu};
use crate::status::PendingGeneration;

/// The live rows of one flushed generation, in the table's schema (`target`), as a stream
/// of batches. A generation already keeps only the newest row per key.
pub async fn generation_rows(
    store: &GraphStore,
    table: &str,
    shard: Uuid,
    generation: &PendingGeneration,
    target: SchemaRef,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    let path = format!("{table}/_mem_wal/{shard}/{}", generation.path);
    let dataset = store
        .open_dataset(&path, None)
        .await
        .context(StorageSnafu)?;
    let lance = |action: &'static str| LanceSnafu {
        action,
        table: path.clone(),
    };
    let columns: Vec<&str> = target.fields().iter().map(|f| f.name().as_str()).collect();
    let mut scan = dataset.scan();
    scan.filter(&format!("{TOMBSTONE} = false"))
        .and_then(|s| s.project(&columns))
        .context(lance("scan generation"))?;
    let stream = scan
        .try_into_stream()
        .await
        .context(lance("scan generation"))?;
    let table = table.to_owned();
    Ok(stream
        .map_err(move |source| Error::Lance {
            action: "read generation".into(),
            table: path.clone(),
            source,
        })
        .and_then(move |batch| {
            // Generations relax non-key columns to nullable; the table's schema is stricter.
            let result =
                RecordBatch::try_new(target.clone(), batch.columns().to_vec()).map_err(|e| {
                    Error::InvalidSetting {
                        table: table.clone(),
                        message: format!("a generation does not match the table schema: {e}"),
                    }
                });
            futures::future::ready(result)
        })
        .boxed())
}
