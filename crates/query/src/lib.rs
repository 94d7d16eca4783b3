//! Graph queries at one commit. A read-only subset of openCypher is compiled to one SQL
//! `SELECT` (see [`cypher`]); SQL runs as it is. Both run in DataFusion over the tables
//! the caller registers in [`Tables`], one per node and edge type, all at one snapshot:
//! Lance's own table provider for a commit (filters and projections pushed into its
//! scans, key lookups by its indexes), a [`LoadedTable`] for a fresh read. No Lance here:
//! the engine opens the tables.

pub mod cypher;
mod error;
mod params;
mod quote;
mod sql;
mod table;

use std::sync::Arc;

use arrow_array::{RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use tributary_schema::Catalog;

pub use cypher::compile::{Compiled, Expansion, Seed, MAX_HOPS};
pub use error::{Error, Result};
pub use params::{parse_assignment, Params};
pub use sql::{Tables, MAX_EXPANSION_KEYS};
pub use table::{LoadedTable, Loader};

/// Which language a query is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// The read-only openCypher subset.
    #[default]
    Cypher,
    /// SQL over one table per type.
    Sql,
}

/// A query made ready to run, against `catalog`: errors (with their places) come from
/// here, before any table is opened. Compile once, then [`run`] or [`explain`] it.
pub fn prepare(
    language: Language,
    text: &str,
    catalog: &Catalog,
    params: &Params,
) -> Result<Compiled> {
    match language {
        Language::Cypher => {
            let query = cypher::parser::parse(text)?;
            cypher::compile::compile(text, &query, catalog, params)
        }
        Language::Sql => {
            if !params.is_empty() {
                return Err(Error::refused(
                    "parameters are for Cypher queries; in SQL write the values",
                ));
            }
            Ok(Compiled {
                sql: text.to_owned(),
                columns: Vec::new(),
                expansions: Vec::new(),
                // SQL may name any table.
                types: None,
                cypher: false,
            })
        }
    }
}

/// Run a prepared query over `tables`: its rows, at most `max_rows` of them.
pub async fn run(
    tables: &Tables,
    compiled: &Compiled,
    max_rows: Option<usize>,
) -> Result<RecordBatch> {
    tables.expand(&compiled.expansions).await?;
    let rows = tables.run(&compiled.sql, max_rows).await?;
    named(rows, &compiled.columns)
}

/// `rows` with its columns named `names` (a Cypher query's columns as written); as they
/// are when no names are given (SQL's).
fn named(rows: RecordBatch, names: &[String]) -> Result<RecordBatch> {
    if names.is_empty() || names.len() != rows.num_columns() {
        return Ok(rows);
    }
    let fields: Vec<Field> = rows
        .schema()
        .fields()
        .iter()
        .zip(names)
        .map(|(field, name)| field.as_ref().clone().with_name(name))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), rows.columns().to_vec())
        .map_err(|e| Error::internal(format!("cannot name the query's columns: {e}")))
}

/// What a query runs, as rows (`step`, `plan`): the SQL a Cypher query compiles to, the
/// edges it reads by key first (it reads them, to say how many), the optimized logical
/// plan, and the physical plan with what each scan reads and filters.
pub async fn explain(tables: &Tables, compiled: &Compiled) -> Result<RecordBatch> {
    let mut steps = Vec::new();
    if compiled.cypher {
        steps.push(("sql".to_owned(), compiled.sql.clone()));
    }
    let expanded = tables.expand(&compiled.expansions).await?;
    if !expanded.is_empty() {
        steps.push(("read by key".to_owned(), expanded.join("\n")));
    }
    steps.extend(tables.explain(&compiled.sql).await?);
    let schema = Arc::new(Schema::new(vec![
        Field::new("step", DataType::Utf8, false),
        Field::new("plan", DataType::Utf8, false),
    ]));
    let step: StringArray = steps.iter().map(|(s, _)| Some(s.as_str())).collect();
    let plan: StringArray = steps.iter().map(|(_, p)| Some(p.as_str())).collect();
    RecordBatch::try_new(schema, vec![Arc::new(step), Arc::new(plan)])
        .map_err(|e| Error::internal(format!("cannot describe the plan: {e}")))
}

#[cfg(test)]
mod tests;
