//! Filling `@embed` fields before rows are written, the same for a load (before its
//! commit) and a fold (chunk by chunk, before the merge). A row that carries a vector
//! keeps it; an empty one is filled with the vector the table already holds for the key
//! when the text is unchanged (no provider call), else with the provider's.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, FixedSizeListArray, Float32Array, RecordBatch, StringArray};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;
use lance::Dataset;
use snafu::ResultExt;
use tributary_embed::{EmbedError, Embedder};
use tributary_schema::{FieldType, TypeDef};

use crate::error::{ArrowSnafu, LanceSnafu, Result};
use crate::lookup::{quote, string_column, IN_LIST_CHUNK};

/// One `@embed` field: the vector column, the text column it embeds, its dimension.
struct Embedded<'t> {
    vector: &'t str,
    text: &'t str,
    dimension: usize,
}

fn embedded_fields(ty: &TypeDef) -> Vec<Embedded<'_>> {
    ty.fields
        .iter()
        .filter_map(|field| match (&field.ty, &field.embed) {
            (FieldType::Vector(dimension), Some(text)) => Some(Embedded {
                vector: &field.name,
                text,
                dimension: *dimension,
            }),
            _ => None,
        })
        .collect()
}

/// Whether rows of `ty` have vectors to fill.
pub fn has_embedded_fields(ty: &TypeDef) -> bool {
    ty.fields.iter().any(|field| field.embed.is_some())
}

/// The provider failed for some rows: the batch as far as it could be filled, and the
/// rows that still lack their vector.
#[derive(Debug)]
pub struct EmbedFailure {
    pub batch: RecordBatch,
    pub rows: Vec<usize>,
    pub field: String,
    pub error: EmbedError,
}

/// What filling took: provider calls are counted by the provider; this counts texts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Filled {
    /// Vectors the provider made.
    pub embedded: u64,
    /// Vectors kept from the table (the text had not changed).
    pub kept: u64,
}

/// Fill the empty `@embed` fields of `batch` (rows of `ty`) whose text is set. `table` is
/// the table the rows are written to, at the version they are written on.
pub async fn fill_embeddings(
    ty: &TypeDef,
    mut batch: RecordBatch,
    table: &Dataset,
    embedder: &dyn Embedder,
    filled: &mut Filled,
) -> Result<std::result::Result<RecordBatch, EmbedFailure>> {
    // The first provider error, and every row left without one of its vectors.
    let mut failed: Option<(String, EmbedError)> = None;
    let mut failed_rows = std::collections::BTreeSet::new();
    for field in embedded_fields(ty) {
        let (Some(vectors), Some(texts)) = (
            batch.column_by_name(field.vector).cloned(),
            batch.column_by_name(field.text).cloned(),
        ) else {
            continue;
        };
        let texts = texts.as_any().downcast_ref::<StringArray>().cloned();
        let Some(texts) = texts else { continue };
        let empty: Vec<usize> = (0..batch.num_rows())
            .filter(|&row| vectors.is_null(row) && texts.is_valid(row))
            .collect();
        if empty.is_empty() {
            continue;
        }
        let ids = string_column(&batch, "id");
        let keys: Vec<String> = empty.iter().map(|&row| ids.value(row).to_owned()).collect();
        let stored = stored_vectors(table, &ty.name, &field, &keys).await?;
        let mut made: HashMap<usize, Vec<f32>> = HashMap::with_capacity(empty.len());
        let mut ask = Vec::new();
        for &row in &empty {
            match stored.get(ids.value(row)) {
                Some((text, vector)) if text == texts.value(row) => {
                    made.insert(row, vector.clone());
                    filled.kept += 1;
                }
                _ => ask.push(row),
            }
        }
        if !ask.is_empty() {
            let asked: Vec<&str> = ask.iter().map(|&row| texts.value(row)).collect();
            match embedder.embed(&asked, field.dimension).await {
                Ok(vectors) => {
                    filled.embedded += vectors.len() as u64;
                    made.extend(ask.iter().copied().zip(vectors));
                }
                Err(error) => {
                    failed_rows.extend(ask.iter().copied());
                    failed.get_or_insert((field.vector.to_owned(), error));
                }
            }
        }
        let column = with_vectors(vectors.as_ref(), field.dimension, &made)?;
        let index = batch.schema().index_of(field.vector).context(ArrowSnafu {
            action: "find an embedded field",
        })?;
        let mut columns = batch.columns().to_vec();
        columns[index] = Arc::new(column);
        batch = RecordBatch::try_new(batch.schema(), columns).context(ArrowSnafu {
            action: "fill embedded fields",
        })?;
    }
    Ok(match failed {
        None => Ok(batch),
        Some((field, error)) => Err(EmbedFailure {
            batch,
            rows: failed_rows.into_iter().collect(),
            field,
            error,
        }),
    })
}

/// Key → (text, vector) of the stored rows among `keys` that have a vector.
async fn stored_vectors(
    table: &Dataset,
    type_name: &str,
    field: &Embedded<'_>,
    keys: &[String],
) -> Result<HashMap<String, (String, Vec<f32>)>> {
    let lance = || LanceSnafu {
        action: "read stored embeddings",
        table: type_name.to_owned(),
    };
    let mut out = HashMap::new();
    if table.count_rows(None).await.with_context(|_| lance())? == 0 {
        return Ok(out);
    }
    for chunk in keys.chunks(IN_LIST_CHUNK) {
        let list: Vec<String> = chunk.iter().map(|key| quote(key)).collect();
        let mut scan = table.scan();
        scan.filter(&format!(
            "id IN ({}) AND `{}` IS NOT NULL AND `{}` IS NOT NULL",
            list.join(", "),
            field.text,
            field.vector
        ))
        .and_then(|s| s.project(&["id", field.text, field.vector]))
        .with_context(|_| lance())?;
        let found = scan.try_into_batch().await.with_context(|_| lance())?;
        let ids = string_column(&found, "id");
        let (Some(texts), Some(vectors)) = (
            found
                .column_by_name(field.text)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>()),
            found
                .column_by_name(field.vector)
                .and_then(|c| c.as_any().downcast_ref::<FixedSizeListArray>()),
        ) else {
            continue;
        };
        for row in 0..found.num_rows() {
            let values = vectors.value(row);
            let Some(values) = values.as_any().downcast_ref::<Float32Array>() else {
                continue;
            };
            out.insert(
                ids.value(row).to_owned(),
                (texts.value(row).to_owned(), values.values().to_vec()),
            );
        }
    }
    Ok(out)
}

/// `column` with the rows of `made` set to their vectors.
fn with_vectors(
    column: &dyn Array,
    dimension: usize,
    made: &HashMap<usize, Vec<f32>>,
) -> Result<FixedSizeListArray> {
    let (item, current) = match (
        column.data_type(),
        column.as_any().downcast_ref::<FixedSizeListArray>(),
    ) {
        (DataType::FixedSizeList(item, _), Some(current)) => (item.clone(), current),
        _ => {
            return Err(crate::error::Error::Arrow {
                action: "fill embedded fields",
                source: arrow_schema::ArrowError::SchemaError(format!(
                    "an embedded field is {}, not a vector",
                    column.data_type()
                )),
            })
        }
    };
    let mut values = Vec::with_capacity(column.len() * dimension);
    let mut valid = Vec::with_capacity(column.len());
    for row in 0..column.len() {
        if let Some(vector) = made.get(&row) {
            values.extend_from_slice(vector);
            valid.push(true);
        } else if current.is_valid(row) {
            let stored = current.value(row);
            match stored.as_any().downcast_ref::<Float32Array>() {
                Some(floats) => values.extend_from_slice(floats.values()),
                None => values.extend(std::iter::repeat_n(0.0, dimension)),
            }
            valid.push(true);
        } else {
            values.extend(std::iter::repeat_n(0.0, dimension));
            valid.push(false);
        }
    }
    FixedSizeListArray::try_new(
        item,
        dimension as i32,
        Arc::new(Float32Array::from(values)),
        Some(NullBuffer::from(valid)),
    )
    .context(ArrowSnafu {
        action: "fill embedded fields",
    })
}
