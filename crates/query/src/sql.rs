//! Running SQL over a graph's tables in DataFusion: one table provider per node and edge
//! type, registered under the type's own name, read-only.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use datafusion::datasource::MemTable;
use datafusion::prelude::{col, lit, Expr};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::execution::context::{SQLOptions, SessionConfig, SessionContext};
use datafusion::physical_plan::displayable;
use datafusion::sql::TableReference;
use futures::TryStreamExt;
use snafu::ResultExt;

use crate::cypher::compile::{Expansion, Seed};
use crate::error::{EngineSnafu, Error, Result};

/// A plan's text with each scan's `uri=` cut to the table's own path (`nodes/T.lance/…`):
/// where a server keeps its graphs is not its clients' business.
fn without_store_paths(plan: &str) -> String {
    let mut out = String::with_capacity(plan.len());
    let mut rest = plan;
    while let Some(at) = rest.find("uri=") {
        let (before, after) = rest.split_at(at + "uri=".len());
        out.push_str(before);
        let end = after.find([',', ' ', '\n']).unwrap_or(after.len());
        let uri = &after[..end];
        let table = ["/nodes/", "/edges/"]
            .iter()
            .filter_map(|dir| uri.rfind(dir).map(|i| &uri[i + 1..]))
            .next()
            .unwrap_or(uri);
        out.push_str(table);
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The distinct values of `columns` (node keys) of `batch`; `None` when one is not a
/// string column, so the caller reads the whole table rather than trust an empty set.
fn other_ends(batch: &RecordBatch, columns: &[&str]) -> Option<BTreeSet<String>> {
    let mut keys = BTreeSet::new();
    for column in columns {
        let values = batch.column_by_name(column)?.as_string_opt::<i32>()?;
        keys.extend(values.iter().flatten().map(str::to_owned));
    }
    Some(keys)
}

/// The most keys an expansion looks up in an index; past it, the query reads the whole
/// table (a hash join over one scan is then cheaper than the lookups).
pub const MAX_EXPANSION_KEYS: usize = 50_000;

/// The tables a query reads: one per type, named as the type.
pub struct Tables {
    context: SessionContext,
    /// Whether the tables answer a filter on `src`/`dst` from an index (Lance's, at a
    /// commit), so reading an edge table by key beats reading it whole.
    indexed: bool,
}

impl Default for Tables {
    fn default() -> Self {
        Tables::new()
    }
}

impl Tables {
    pub fn new() -> Tables {
        let config = SessionConfig::new()
            // `Person` means the table `Person`, as in the schema.
            .set_bool("datafusion.sql_parser.enable_ident_normalization", false)
            // Conditions nest as deep as a query's (the parser bounds those).
            .set_usize("datafusion.sql_parser.recursion_limit", 256)
            .with_information_schema(false);
        Tables {
            context: SessionContext::new_with_config(config),
            indexed: true,
        }
    }

    /// Tables that filter by scanning (the fresh tier): expansions read them whole.
    pub fn unindexed(mut self) -> Tables {
        self.indexed = false;
        self
    }

    /// Run `expansions` in order, registering what each finds under its name; what each
    /// did, for an explanation.
    pub async fn expand(&self, expansions: &[Expansion]) -> Result<Vec<String>> {
        let mut found: BTreeMap<&str, RecordBatch> = BTreeMap::new();
        let mut notes = Vec::new();
        for expansion in expansions {
            let table = TableReference::bare(expansion.table.as_str());
            let whole = self
                .context
                .table_provider(table.clone())
                .await
                .context(EngineSnafu {
                    action: "find an edge table",
                })?;
            let keys: Option<BTreeSet<String>> = match &expansion.seed {
                Seed::Keys(keys) => Some(keys.iter().cloned().collect()),
                Seed::Reached { expansion, columns } => found
                    .get(expansion.as_str())
                    .and_then(|batch| other_ends(batch, columns)),
            };
            let keys = keys.filter(|k| self.indexed && k.len() <= MAX_EXPANSION_KEYS);
            let Some(keys) = keys else {
                self.register(&expansion.name, whole)?;
                notes.push(format!(
                    "{} AS {}: the whole table (too many keys, or no index to look them up)",
                    expansion.table, expansion.name
                ));
                continue;
            };
            let listed: Vec<Expr> = keys.iter().map(|k| lit(k.as_str())).collect();
            let filter = expansion
                .near
                .iter()
                .map(|column| {
                    if listed.is_empty() {
                        lit(false)
                    } else {
                        col(*column).in_list(listed.clone(), false)
                    }
                })
                .reduce(Expr::or)
                .unwrap_or_else(|| lit(false));
            let frame = self
                .context
                .table(table)
                .await
                .and_then(|frame| frame.filter(filter))
                .context(EngineSnafu {
                    action: "read edges by key",
                })?;
            let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
            let batches = frame.collect().await.context(EngineSnafu {
                action: "read edges by key",
            })?;
            let batch = arrow_select::concat::concat_batches(&schema, &batches)
                .map_err(|e| Error::internal(format!("cannot put edges together: {e}")))?;
            notes.push(format!(
                "{} AS {}: {} IN {} key{} -> {} row{}",
                expansion.table,
                expansion.name,
                expansion.near.join(" or "),
                keys.len(),
                if keys.len() == 1 { "" } else { "s" },
                batch.num_rows(),
                if batch.num_rows() == 1 { "" } else { "s" },
            ));
            let rows =
                MemTable::try_new(schema, vec![vec![batch.clone()]]).context(EngineSnafu {
                    action: "hold edges read by key",
                })?;
            self.register(&expansion.name, Arc::new(rows))?;
            found.insert(&expansion.name, batch);
        }
        Ok(notes)
    }

    /// Register `table` under `name`, in place of any table of that name (a query's
    /// expansions replace an earlier query's on the same tables).
    pub fn register(&self, name: &str, table: Arc<dyn TableProvider>) -> Result<()> {
        self.context
            .deregister_table(TableReference::bare(name))
            .context(EngineSnafu {
                action: "replace a table",
            })?;
        self.context
            .register_table(TableReference::bare(name), table)
            .map(|_| ())
            .context(EngineSnafu {
                action: "register a table",
            })
    }

    /// Run read-only `sql`; at most `max_rows` rows (more is an error, never a silent cut).
    pub async fn run(&self, sql: &str, max_rows: Option<usize>) -> Result<RecordBatch> {
        let frame = self.plan(sql).await?;
        let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
        let mut stream = frame.execute_stream().await.context(EngineSnafu {
            action: "run the query",
        })?;
        let mut batches = Vec::new();
        let mut rows = 0usize;
        while let Some(batch) = stream.try_next().await.context(EngineSnafu {
            action: "run the query",
        })? {
            rows += batch.num_rows();
            if let Some(max) = max_rows.filter(|&max| rows > max) {
                return Err(Error::TooManyRows { max });
            }
            batches.push(batch);
        }
        let schema = batches.first().map_or(schema, |b| b.schema());
        arrow_select::concat::concat_batches(&schema, &batches)
            .map_err(|e| Error::internal(format!("cannot put the query's rows together: {e}")))
    }

    /// What `sql` runs: the optimized logical plan and the physical plan (with the scans'
    /// pushed filters and projections).
    pub async fn explain(&self, sql: &str) -> Result<Vec<(String, String)>> {
        let frame = self.plan(sql).await?;
        let logical = frame
            .clone()
            .into_optimized_plan()
            .context(EngineSnafu {
                action: "plan the query",
            })?
            .display_indent()
            .to_string();
        let physical = frame.create_physical_plan().await.context(EngineSnafu {
            action: "plan the query",
        })?;
        let physical =
            without_store_paths(&displayable(physical.as_ref()).indent(true).to_string());
        Ok(vec![
            ("logical plan".to_owned(), logical),
            ("physical plan".to_owned(), physical),
        ])
    }

    async fn plan(&self, sql: &str) -> Result<datafusion::dataframe::DataFrame> {
        let read_only = SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false);
        self.context
            .sql_with_options(sql, read_only)
            .await
            .context(EngineSnafu {
                action: "plan the query",
            })
    }
}
