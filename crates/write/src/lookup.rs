//! Key and value lookups against a table at a snapshot, shared by load-time and fold-time
//! validation.

use std::collections::HashSet;

use arrow_array::{Array, RecordBatch, StringArray};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::DataType;
use lance::Dataset;

use snafu::ResultExt;

use crate::error::{ArrowSnafu, Error, Result};

/// How many values one `IN (…)` filter carries (DataFusion hashes long lists).
const IN_LIST_CHUNK: usize = 4096;

/// A non-null Utf8 column (`id`, `src`, `dst` are in every table schema the catalog builds).
pub fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> &'a StringArray {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .unwrap_or_else(|| panic!("column `{name}` is Utf8 in every table"))
}

/// Every value of `column` as text (`None` for nulls), for comparisons and messages.
pub fn display_values(column: &dyn Array) -> Result<Vec<Option<String>>> {
    let formatter =
        ArrayFormatter::try_new(column, &FormatOptions::default()).context(ArrowSnafu {
            action: "format values",
        })?;
    Ok((0..column.len())
        .map(|i| column.is_valid(i).then(|| formatter.value(i).to_string()))
        .collect())
}

/// How a value is written in a SQL filter.
#[derive(Clone, Copy)]
pub enum Literal {
    Quoted,
    Bare,
}

pub fn literal_kind(data_type: &DataType) -> Literal {
    if data_type.is_numeric() {
        Literal::Bare
    } else {
        Literal::Quoted
    }
}

pub use tributary_storage::quote;

/// Which of `keys` exist in `column`.
pub async fn existing_ids(
    table: &Dataset,
    column: &str,
    keys: &[String],
    table_name: &str,
) -> Result<HashSet<String>> {
    Ok(
        lookup_values(table, column, keys, Literal::Quoted, table_name)
            .await?
            .into_iter()
            .map(|(_, value)| value)
            .collect(),
    )
}

/// `(id, value as text)` of the rows whose `column` is one of `values`.
pub async fn lookup_values(
    table: &Dataset,
    column: &str,
    values: &[String],
    literal: Literal,
    table_name: &str,
) -> Result<Vec<(String, String)>> {
    let project: &[&str] = if column == "id" {
        &["id"]
    } else {
        &["id", column]
    };
    let mut out = Vec::new();
    for batch in rows_where_in(table, column, values, literal, project, None, table_name).await? {
        let ids = string_column(&batch, "id");
        let found = match batch.column_by_name(column) {
            Some(c) => display_values(c.as_ref())?,
            None => continue,
        };
        for (i, value) in found.into_iter().enumerate() {
            if let Some(value) = value {
                out.push((ids.value(i).to_owned(), value));
            }
        }
    }
    Ok(out)
}

/// The `project`ed columns of the rows whose `column` is one of `values` (and that pass
/// `also`, a further filter), one batch per `IN (…)` list. Nothing is scanned when
/// `values` or the table is empty.
pub async fn rows_where_in(
    table: &Dataset,
    column: &str,
    values: &[String],
    literal: Literal,
    project: &[&str],
    also: Option<&str>,
    table_name: &str,
) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    if values.is_empty()
        || table
            .count_rows(None)
            .await
            .map_err(|source| lance_error(table_name, source))?
            == 0
    {
        return Ok(out);
    }
    for chunk in values.chunks(IN_LIST_CHUNK) {
        let list: Vec<String> = chunk
            .iter()
            .map(|v| match literal {
                Literal::Quoted => quote(v),
                Literal::Bare => v.clone(),
            })
            .collect();
        let mut filter = format!("`{column}` IN ({})", list.join(", "));
        if let Some(also) = also {
            filter = format!("{filter} AND {also}");
        }
        let mut scan = table.scan();
        scan.filter(&filter)
            .and_then(|s| s.project(project))
            .map_err(|source| lance_error(table_name, source))?;
        out.push(
            scan.try_into_batch()
                .await
                .map_err(|source| lance_error(table_name, source))?,
        );
    }
    Ok(out)
}

fn lance_error(table: &str, source: lance::Error) -> Error {
    Error::Lance {
        action: "look up rows".to_owned(),
        table: table.to_owned(),
        source,
    }
}
