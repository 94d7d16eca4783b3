//! A table whose rows are loaded when a query scans it, with only the columns the query
//! reads: how a fresh read's tier (snapshot + unfolded writes, merged by the reader)
//! becomes a table of a query.

use std::fmt;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use futures::future::BoxFuture;

/// Loads the rows of the named columns (all of them, in the schema's order, when `None`).
pub type Loader = Arc<
    dyn Fn(Option<Vec<String>>) -> BoxFuture<'static, Result<RecordBatch, String>> + Send + Sync,
>;

pub struct LoadedTable {
    name: String,
    schema: SchemaRef,
    load: Loader,
}

impl LoadedTable {
    pub fn new(name: impl Into<String>, schema: SchemaRef, load: Loader) -> LoadedTable {
        LoadedTable {
            name: name.into(),
            schema,
            load,
        }
    }
}

impl fmt::Debug for LoadedTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedTable")
            .field("name", &self.name)
            .finish()
    }
}

#[async_trait]
impl TableProvider for LoadedTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let mut columns: Option<Vec<String>> = projection.map(|indices| {
            indices
                .iter()
                .map(|&i| self.schema.field(i).name().clone())
                .collect()
        });
        // No column at all (`count(*)`): load the narrowest one, keep none.
        let keep_none = columns.as_ref().is_some_and(Vec::is_empty);
        if keep_none {
            columns = Some(vec![self.schema.field(0).name().clone()]);
        }
        let batch = (self.load)(columns).await.map_err(|message| {
            DataFusionError::External(format!("{}: {message}", self.name).into())
        })?;
        let schema = batch.schema();
        let projection = keep_none.then(Vec::new);
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            schema,
            projection,
        )?)
    }
}
