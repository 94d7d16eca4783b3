//! What a write deletes from a table, for load and fold alike: the rows whose key it
//! deletes and, in an edge table, the edges whose end is a deleted node. One filter says
//! which; Lance's merge-insert removes them (`WhenNotMatchedBySource::DeleteIf`), so a row
//! the same write upserts again is kept.

use lance::Dataset;
use tributary_storage::quote;

use crate::error::{Error, Result};
use crate::lookup::string_column;

/// The filter of a table's rows a write deletes: `id` one of `ids`, or (edge tables) `src`
/// one of `srcs`, or `dst` one of `dsts`. `None` when it deletes nothing.
pub fn removal_filter<'k>(
    ids: impl IntoIterator<Item = &'k str>,
    srcs: impl IntoIterator<Item = &'k str>,
    dsts: impl IntoIterator<Item = &'k str>,
) -> Option<String> {
    let in_list = |column: &str, keys: Vec<String>| {
        (!keys.is_empty()).then(|| format!("{column} IN ({})", keys.join(", ")))
    };
    let quoted = |keys: &mut dyn Iterator<Item = &'k str>| keys.map(quote).collect::<Vec<_>>();
    let parts: Vec<String> = [
        in_list("id", quoted(&mut ids.into_iter())),
        in_list("src", quoted(&mut srcs.into_iter())),
        in_list("dst", quoted(&mut dsts.into_iter())),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| parts.join(" OR "))
}

/// `(id, src, dst)` of the edges of `table` that `filter` selects.
pub async fn edge_rows(
    table: &Dataset,
    name: &str,
    filter: &str,
) -> Result<Vec<(String, String, String)>> {
    let lance = |source| Error::Lance {
        action: "find the edges a delete takes".to_owned(),
        table: name.to_owned(),
        source,
    };
    let mut scan = table.scan();
    scan.filter(filter)
        .and_then(|scan| scan.project(&["id", "src", "dst"]))
        .map_err(lance)?;
    let batch = scan.try_into_batch().await.map_err(lance)?;
    let ids = string_column(&batch, "id");
    let srcs = string_column(&batch, "src");
    let dsts = string_column(&batch, "dst");
    Ok((0..batch.num_rows())
        .map(|row| {
            (
                ids.value(row).to_owned(),
                srcs.value(row).to_owned(),
                dsts.value(row).to_owned(),
            )
        })
        .collect())
}

/// `batch` as the source stream of a merge-insert. Lance plans a materialized source
/// (`execute_uncommitted_batches`, a MemTable) with a hash join that collects the target
/// into its spill pool (300 MB on 2 cores), so a load of 150k rows into a table of 150k
/// was refused; a streamed source gets the plan the fold's merge gets.
pub fn merge_source(
    batch: arrow_array::RecordBatch,
) -> datafusion_physical_plan::SendableRecordBatchStream {
    let schema = batch.schema();
    Box::pin(
        datafusion_physical_plan::stream::RecordBatchStreamAdapter::new(
            schema,
            futures::stream::iter([Ok(batch)]),
        ),
    )
}
