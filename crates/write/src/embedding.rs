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

use crate::error::{ArrowSnafu, Error, Result};
use crate::lookup::{rows_where_in, string_column, Literal};

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

/// Fill the empty `@embed` fields of `batch` (rows of `ty`) whose text is set. `table` is
/// the table the rows are written to, at the version they are written on.
pub async fn fill_embeddings(
    ty: &TypeDef,
    mut batch: RecordBatch,
    table: &Dataset,
    embedder: &dyn Embedder,
) -> Result<std::result::Result<RecordBatch, EmbedFailure>> {
    // The first provider error, and every row left without one of its vectors.
    let mut failed: Option<(String, EmbedError)> = None;
    let mut failed_rows = std::collections::BTreeSet::new();
    for field in embedded_fields(ty) {
        let vectors = vector_column(&batch, field.vector)?.clone();
        let texts = text_column(&batch, field.text)?.clone();
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
                }
                _ => ask.push(row),
            }
        }
        if !ask.is_empty() {
            let asked: Vec<&str> = ask.iter().map(|&row| texts.value(row)).collect();
            match embedder.embed(&asked, field.dimension).await {
                Ok(vectors) => made.extend(ask.iter().copied().zip(vectors)),
                // The graph's settings, not these texts: the write fails whole and leaves
                // every row for the next attempt (a fold must not dead-letter
                // acknowledged rows because a settings read failed).
                Err(error) if error.is_settings() => {
                    return Err(Error::Embedding {
                        type_name: ty.name.clone(),
                        field: field.vector.to_owned(),
                        source: error,
                    })
                }
                Err(error) => {
                    failed_rows.extend(ask.iter().copied());
                    failed.get_or_insert((field.vector.to_owned(), error));
                }
            }
        }
        let column = with_vectors(&vectors, field.dimension, &made)?;
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
    let also = format!(
        "`{}` IS NOT NULL AND `{}` IS NOT NULL",
        field.text, field.vector
    );
    let project = ["id", field.text, field.vector];
    let mut out = HashMap::new();
    for found in rows_where_in(
        table,
        "id",
        keys,
        Literal::Quoted,
        &project,
        Some(&also),
        type_name,
    )
    .await?
    {
        let ids = string_column(&found, "id");
        let texts = text_column(&found, field.text)?;
        let vectors = vector_column(&found, field.vector)?;
        for row in 0..found.num_rows() {
            out.insert(
                ids.value(row).to_owned(),
                (
                    texts.value(row).to_owned(),
                    vector_at(vectors, row)?.values().to_vec(),
                ),
            );
        }
    }
    Ok(out)
}

/// A column that is not what the catalog makes it: a bug, never a row left unfilled.
fn not_as_declared(what: String) -> crate::error::Error {
    crate::error::Error::Arrow {
        action: "fill embedded fields",
        source: arrow_schema::ArrowError::SchemaError(what),
    }
}

fn text_column<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| not_as_declared(format!("`{name}` is not a Utf8 column")))
}

fn vector_column<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b FixedSizeListArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<FixedSizeListArray>())
        .ok_or_else(|| not_as_declared(format!("`{name}` is not a vector column")))
}

/// The floats of row `row` of a vector column.
fn vector_at(vectors: &FixedSizeListArray, row: usize) -> Result<Float32Array> {
    vectors
        .value(row)
        .as_any()
        .downcast_ref::<Float32Array>()
        .cloned()
        .ok_or_else(|| not_as_declared("a vector of other numbers than f32".to_owned()))
}

/// `column` with the rows of `made` set to their vectors.
fn with_vectors(
    column: &FixedSizeListArray,
    dimension: usize,
    made: &HashMap<usize, Vec<f32>>,
) -> Result<FixedSizeListArray> {
    let DataType::FixedSizeList(item, _) = column.data_type() else {
        return Err(not_as_declared(
            "a vector column that is not a list".to_owned(),
        ));
    };
    let mut values = Vec::with_capacity(column.len() * dimension);
    let mut valid = Vec::with_capacity(column.len());
    for row in 0..column.len() {
        if let Some(vector) = made.get(&row) {
            values.extend_from_slice(vector);
        } else if column.is_valid(row) {
            values.extend_from_slice(vector_at(column, row)?.values());
        } else {
            values.extend(std::iter::repeat_n(0.0, dimension));
        }
        valid.push(made.contains_key(&row) || column.is_valid(row));
    }
    FixedSizeListArray::try_new(
        item.clone(),
        dimension as i32,
        Arc::new(Float32Array::from(values)),
        Some(NullBuffer::from(valid)),
    )
    .context(ArrowSnafu {
        action: "fill embedded fields",
    })
}
