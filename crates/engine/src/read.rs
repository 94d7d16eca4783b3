//! Snapshot reads: scan a type, get one row by key, neighbours over an edge type.

use std::collections::BTreeSet;

use arrow_array::RecordBatch;
use ingest_core::TypeDef;
use lance::Dataset;
use tributary_memwal_adapter::{fresh_read, FreshQuery};
use tributary_publisher::CommitRecord;

use crate::error::{Error, Result};
use crate::graph::{At, Graph};
use tributary_fold::lookup::{quote, string_column};

/// How many keys one `IN (…)` filter of a neighbour lookup carries.
const KEYS_PER_SCAN: usize = 512;

#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub at: At,
    /// A SQL predicate (Lance's scanner filter), e.g. `age > 30 AND status = 'active'`.
    pub filter: Option<String>,
    /// Columns to return, in order; all when `None`.
    pub select: Option<Vec<String>>,
    pub limit: Option<usize>,
    /// Also read what is durable but not yet folded: the snapshot's table plus the flushed
    /// generations its MemWAL index has not compacted, plus (in this process) the live
    /// memtables. Newest write per key wins.
    pub fresh: bool,
}

/// Follow edges from their source (`Out`) or to their source (`In`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    #[default]
    Out,
    In,
}

impl Graph {
    /// Rows of a type at a snapshot.
    pub async fn read(&self, type_name: &str, options: &ReadOptions) -> Result<RecordBatch> {
        let ty = self.type_def(type_name)?;
        let snapshot = self.snapshot(&options.at).await?;
        let table = self.open_table(&snapshot, ty).await?;
        if options.fresh {
            let branch = match &options.at {
                At::Branch(branch) => branch.clone(),
                At::Commit(_) => snapshot.branch.clone(),
            };
            let writer = self.warm_writer(&ty.table_path(), &branch).await;
            if let Some(columns) = &options.select {
                check_columns(ty, columns)?;
            }
            let query = FreshQuery {
                filter: options.filter.as_deref(),
                select: options.select.as_deref(),
                limit: options.limit,
            };
            return fresh_read(table, writer.as_deref(), query)
                .await
                .map_err(Error::from_memwal);
        }
        scan(
            &table,
            ty,
            options.filter.as_deref(),
            options.select.as_deref(),
            options.limit,
        )
        .await
    }

    /// One node or edge by key (an edge's key is `src->dst` unless it declares `@key`).
    pub async fn get(&self, type_name: &str, key: &str, at: &At) -> Result<Option<RecordBatch>> {
        let ty = self.type_def(type_name)?;
        let snapshot = self.snapshot(at).await?;
        let table = self.open_table(&snapshot, ty).await?;
        let batch = scan(
            &table,
            ty,
            Some(&format!("id = {}", quote(key))),
            None,
            Some(1),
        )
        .await?;
        Ok((batch.num_rows() > 0).then_some(batch))
    }

    /// The nodes at the other end of `edge` edges of node `key`.
    pub async fn neighbors(
        &self,
        node_type: &str,
        key: &str,
        edge: &str,
        direction: Direction,
        at: &At,
    ) -> Result<RecordBatch> {
        let node = self.node_type(node_type)?;
        let edge_def = self.edge_type(edge)?;
        let Some(ends) = edge_def.edge.as_ref() else {
            return Err(Error::WrongKind {
                name: edge.to_owned(),
                expected: "edge type",
                actual: "node type",
            });
        };
        let (near, far, near_col, far_col) = match direction {
            Direction::Out => (&ends.from, &ends.to, "src", "dst"),
            Direction::In => (&ends.to, &ends.from, "dst", "src"),
        };
        if near != &node.name {
            let way = if direction == Direction::Out {
                "from"
            } else {
                "to"
            };
            return Err(Error::InvalidRequest {
                what: "neighbors".into(),
                message: format!(
                    "edge {edge} goes {} -> {}, not {way} {node_type}",
                    ends.from, ends.to
                ),
            });
        }
        let snapshot = self.snapshot(at).await?;
        let edges = self.open_table(&snapshot, edge_def).await?;
        let hits = scan(
            &edges,
            edge_def,
            Some(&format!("{near_col} = {}", quote(key))),
            Some(&[far_col.to_owned()]),
            None,
        )
        .await?;
        let keys: BTreeSet<String> = string_column(&hits, far_col)
            .iter()
            .flatten()
            .map(str::to_owned)
            .collect();
        let far_def = self.node_type(far)?;
        self.rows_by_key(&snapshot, far_def, keys.into_iter().collect())
            .await
    }

    async fn rows_by_key(
        &self,
        snapshot: &CommitRecord,
        ty: &TypeDef,
        keys: Vec<String>,
    ) -> Result<RecordBatch> {
        let table = self.open_table(snapshot, ty).await?;
        let mut batches = Vec::new();
        for chunk in keys.chunks(KEYS_PER_SCAN) {
            let list: Vec<String> = chunk.iter().map(|k| quote(k)).collect();
            let filter = format!("id IN ({})", list.join(", "));
            batches.push(scan(&table, ty, Some(&filter), None, None).await?);
        }
        if batches.is_empty() {
            return Ok(RecordBatch::new_empty(crate::graph::table_schema(ty)));
        }
        let schema = batches[0].schema();
        arrow_select::concat::concat_batches(&schema, &batches).map_err(|e| Error::InvalidRequest {
            what: "neighbors".into(),
            message: e.to_string(),
        })
    }
}

fn check_columns(ty: &TypeDef, columns: &[String]) -> Result<()> {
    let schema = ty.arrow_schema();
    if let Some(unknown) = columns.iter().find(|c| schema.field_with_name(c).is_err()) {
        let known: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        return Err(Error::InvalidRequest {
            what: "select".into(),
            message: format!(
                "{} has no column `{unknown}` (columns: {})",
                ty.name,
                known.join(", ")
            ),
        });
    }
    Ok(())
}

async fn scan(
    table: &Dataset,
    ty: &TypeDef,
    filter: Option<&str>,
    select: Option<&[String]>,
    limit: Option<usize>,
) -> Result<RecordBatch> {
    let invalid = |what: &str, source: lance::Error| Error::InvalidRequest {
        what: what.to_owned(),
        message: source.to_string(),
    };
    let mut scanner = table.scan();
    if let Some(columns) = select {
        check_columns(ty, columns)?;
        scanner.project(columns).map_err(|e| invalid("select", e))?;
    }
    if let Some(filter) = filter {
        scanner.filter(filter).map_err(|e| invalid("filter", e))?;
    }
    if let Some(limit) = limit {
        scanner
            .limit(Some(limit as i64), None)
            .map_err(|e| invalid("limit", e))?;
    }
    scanner.try_into_batch().await.map_err(|e| match filter {
        Some(_) => invalid("filter", e),
        None => Error::Lance {
            action: "scan".into(),
            table: ty.table_path(),
            source: e,
        },
    })
}
