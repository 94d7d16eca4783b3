//! Graph queries (Cypher and SQL) at one snapshot: every type's table opened at the
//! versions one commit pins — or, fresh, that snapshot plus what is durable but not
//! folded — and handed to `tributary-query`, which plans and runs them in DataFusion.

use std::sync::Arc;

use arrow_array::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::datasource::MemTable;
use futures::future::try_join_all;
use futures::FutureExt;
use lance::datafusion::LanceTableProvider;
use snafu::ResultExt;
use tributary_fresh_read::{Query, TableReader, Tier};
use tributary_publisher::CommitRecord;
use tributary_query::{LoadedTable, Tables};
use tributary_schema::TypeDef;

pub use tributary_query::{parse_assignment, Language, Params};

use crate::error::{Error, QuerySnafu, Result};
use crate::graph::Graph;
use crate::read::{View, MAX_READ_LIMIT};

/// A query and where it reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryRequest {
    pub language: Language,
    pub text: String,
    /// Values of the `$name` parameters of a Cypher query.
    pub params: Params,
    pub view: View,
    /// Say what the query would run (the SQL of a Cypher query, the plans) instead of
    /// running it.
    pub explain: bool,
    /// The most rows the answer may hold: more is an error, never a silent cut.
    pub max_rows: Option<usize>,
}

impl QueryRequest {
    pub fn cypher(text: impl Into<String>) -> QueryRequest {
        QueryRequest {
            language: Language::Cypher,
            text: text.into(),
            ..QueryRequest::default()
        }
    }

    pub fn sql(text: impl Into<String>) -> QueryRequest {
        QueryRequest {
            language: Language::Sql,
            text: text.into(),
            ..QueryRequest::default()
        }
    }
}

impl Graph {
    /// Run a Cypher or SQL query over every node and edge type at one snapshot.
    pub async fn query(&self, request: &QueryRequest) -> Result<RecordBatch> {
        if let Some(max) = request.max_rows.filter(|&max| max > MAX_READ_LIMIT) {
            return Err(Error::LimitTooLarge {
                limit: max,
                max: MAX_READ_LIMIT,
            });
        }
        let catalog = self.catalog();
        // Compiled once, before a table is opened: a refusal opens nothing.
        let compiled =
            tributary_query::prepare(request.language, &request.text, &catalog, &request.params)
                .context(QuerySnafu)?;
        let snapshot = self.snapshot(&request.view.at).await?;
        // The fresh tier filters by scanning: read its edge tables whole.
        let tables = if request.view.fresh {
            Tables::new().unindexed()
        } else {
            Tables::new()
        };
        // Only the types the query reads (a Cypher query says; SQL may read any).
        let read: Vec<&TypeDef> = catalog
            .types
            .iter()
            .filter(|ty| compiled.types.as_ref().is_none_or(|t| t.contains(&ty.name)))
            .collect();
        let opened = try_join_all(
            read.iter()
                .map(|ty| self.query_table(&snapshot, ty, &request.view)),
        )
        .await?;
        for (ty, table) in read.iter().zip(opened) {
            tables.register(&ty.name, table).context(QuerySnafu)?;
        }
        if stalled() {
            // Held here until its caller's time runs out (tests of query timeouts).
            std::future::pending::<()>().await;
        }
        let run = if request.explain {
            tributary_query::explain(&tables, &compiled).await
        } else {
            let max_rows = Some(request.max_rows.unwrap_or(MAX_READ_LIMIT));
            tributary_query::run(&tables, &compiled, max_rows).await
        };
        run.context(QuerySnafu)
    }

    /// The table of `ty` a query reads: Lance's own provider at the snapshot's version,
    /// or the fresh tier's rows; an empty one for a type the snapshot does not hold yet.
    async fn query_table(
        &self,
        snapshot: &CommitRecord,
        ty: &TypeDef,
        view: &View,
    ) -> Result<Arc<dyn TableProvider>> {
        if !snapshot.tables.contains_key(&ty.table_path()) {
            let empty = MemTable::try_new(ty.arrow_schema(), vec![vec![]]).map_err(|source| {
                Error::Query {
                    source: tributary_query::Error::Engine {
                        action: "make an empty table",
                        source,
                    },
                }
            })?;
            return Ok(Arc::new(empty));
        }
        let table = self.open_for_read(snapshot, ty, view).await?;
        if !view.fresh {
            let provider = LanceTableProvider::new(Arc::new(table.base), false, false);
            return Ok(Arc::new(provider));
        }
        let schema = Arc::new(arrow_schema::Schema::from(table.base.schema()));
        let (base, writer) = (table.base, table.writer);
        let load: tributary_query::Loader = Arc::new(move |columns: Option<Vec<String>>| {
            let base = base.clone();
            let writer = writer.clone();
            async move {
                let tier = Tier::Fresh {
                    writer: writer.as_deref(),
                };
                let query = Query {
                    filter: None,
                    select: columns.as_deref(),
                    limit: None,
                };
                TableReader::new(base, tier)
                    .scan(&query)
                    .await
                    .map_err(|e| e.to_string())
            }
            .boxed()
        });
        Ok(Arc::new(LoadedTable::new(ty.name.clone(), schema, load)))
    }
}

/// Whether a test has asked queries to stall (the `query::stall` failpoint).
fn stalled() -> bool {
    fail::fail_point!("query::stall", |_| true);
    false
}
