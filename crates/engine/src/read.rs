//! Reads: scan a type, get one row by key, neighbours over an edge type, search — at a
//! snapshot, or fresh (the snapshot plus what is durable but not yet folded).

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::RecordBatch;
use snafu::ResultExt;
use tributary_fresh_read::{Query, Search, TableReader, Tier};
use tributary_memwal_adapter::TableWriter;
use tributary_publisher::CommitRecord;
use tributary_schema::{FieldType, IndexKind, TypeDef};
use tributary_storage::quote;

use crate::error::{Error, Result};
use crate::graph::{At, Graph};
use tributary_write::lookup::string_column;

/// Which snapshot a read starts from, and whether it also sees unfolded writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    pub at: At,
    /// Also read what is durable but not yet folded: the snapshot's table plus the flushed
    /// generations its MemWAL index has not compacted, plus (in this process) the live
    /// memtables. Newest write per key wins. Default reads never see unfolded data.
    pub fresh: bool,
}

impl View {
    /// The fresh tier over the snapshot at `at`.
    pub fn fresh(at: At) -> View {
        View { at, fresh: true }
    }
}

impl From<&At> for View {
    fn from(at: &At) -> View {
        View {
            at: at.clone(),
            fresh: false,
        }
    }
}

impl From<At> for View {
    fn from(at: At) -> View {
        View { at, fresh: false }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub at: At,
    /// A SQL predicate (Lance's scanner filter), e.g. `age > 30 AND status = 'active'`.
    pub filter: Option<String>,
    /// Columns to return, in order; all when `None`.
    pub select: Option<Vec<String>>,
    pub limit: Option<usize>,
    /// Rows to skip before the first returned (after ordering).
    pub offset: Option<usize>,
    /// Sort by these columns, the first deciding first; unordered when empty.
    pub order_by: Vec<SortKey>,
    /// See [`View::fresh`].
    pub fresh: bool,
}

/// One column of a read's order: `age` ascending, `age:desc` descending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    pub column: String,
    pub descending: bool,
}

impl SortKey {
    /// `column` or `column:asc` / `column:desc`.
    pub fn parse(text: &str) -> Result<SortKey> {
        let text = text.trim();
        let (column, descending) = match text.rsplit_once(':') {
            Some((column, "desc")) => (column, true),
            Some((column, "asc")) => (column, false),
            Some((_, other)) => {
                return Err(Error::InvalidOrder {
                    text: text.to_owned(),
                    problem: format!("`{other}` is not asc or desc"),
                })
            }
            None => (text, false),
        };
        if column.is_empty() {
            return Err(Error::InvalidOrder {
                text: text.to_owned(),
                problem: "no column named".to_owned(),
            });
        }
        Ok(SortKey {
            column: column.to_owned(),
            descending,
        })
    }
}

impl std::fmt::Display for SortKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.descending {
            true => write!(f, "{}:desc", self.column),
            false => f.write_str(&self.column),
        }
    }
}

/// Follow edges from their source (`Out`) or to their source (`In`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    #[default]
    Out,
    In,
}

/// What to search for.
#[derive(Debug, Clone, PartialEq)]
pub enum SearchQuery {
    /// Full text over the type's `@index(fts)` fields (BM25; `_score`, highest first).
    Text(String),
    /// Nearest neighbours in the type's indexed vector field (L2; `_distance`, lowest first).
    Nearest(Vec<f32>),
    /// Nearest neighbours of a text: embedded by the graph's provider, searched over the
    /// type's indexed `@embed` field. A fresh search sees rows once folded (their vectors
    /// are made by the fold).
    Similar(String),
}

/// One table opened for a read: the snapshot's version and, when fresh, the warm writer
/// whose memtables the read also sees (held so the reader can borrow it).
pub(crate) struct OpenTable {
    pub(crate) base: lance::Dataset,
    /// The commit the table is read at.
    pub(crate) commit: String,
    fresh: bool,
    pub(crate) writer: Option<Arc<TableWriter>>,
}

impl OpenTable {
    fn reader(&self) -> TableReader<'_> {
        let tier = if self.fresh {
            Tier::Fresh {
                writer: self.writer.as_deref(),
            }
        } else {
            Tier::Snapshot
        };
        TableReader::new(self.base.clone(), tier).at_commit(&self.commit)
    }
}

/// The most results one search returns.
pub const MAX_SEARCH_K: usize = 10_000;

/// The largest `limit` a read takes; a read without one returns every row.
pub const MAX_READ_LIMIT: usize = 10_000_000;

impl Graph {
    /// Rows of a type.
    pub async fn read(&self, type_name: &str, options: &ReadOptions) -> Result<RecordBatch> {
        let ty = &self.type_def(type_name)?;
        if let Some(limit) = options.limit.filter(|&limit| limit > MAX_READ_LIMIT) {
            return Err(Error::LimitTooLarge {
                limit,
                max: MAX_READ_LIMIT,
            });
        }
        if let Some(columns) = &options.select {
            check_columns(ty, columns)?;
        }
        let order: Vec<String> = options.order_by.iter().map(|k| k.column.clone()).collect();
        check_columns(ty, &order)?;
        if let Some(key) = options.order_by.iter().find(|key| {
            ty.field(&key.column)
                .is_some_and(|f| matches!(f.ty, FieldType::Vector(_) | FieldType::List(_)))
        }) {
            return Err(Error::InvalidOrder {
                text: key.to_string(),
                problem: "a list or a vector has no order".to_owned(),
            });
        }
        let view = View {
            at: options.at.clone(),
            fresh: options.fresh,
        };
        let snapshot = self.snapshot(&view.at).await?;
        let table = self.open_for_read(&snapshot, ty, &view).await?;
        // Ordered, every matching row is read and sorted here; unordered, Lance stops at
        // the last row wanted.
        let offset = options.offset.unwrap_or(0);
        let scan_limit = match order.is_empty() {
            true => options.limit.map(|limit| limit.saturating_add(offset)),
            false => None,
        };
        // The columns the order needs are read too, and left out after the sort.
        let scanned: Option<Vec<String>> = options.select.as_ref().map(|select| {
            let mut columns = select.clone();
            columns.extend(order.iter().filter(|c| !select.contains(c)).cloned());
            columns
        });
        let query = Query {
            filter: options.filter.as_deref(),
            select: scanned.as_deref(),
            limit: scan_limit,
        };
        let rows = table
            .reader()
            .scan(&query)
            .await
            .map_err(Error::from_read)?;
        if order.is_empty() && offset == 0 {
            return Ok(rows);
        }
        let rows = sorted(rows, &options.order_by)?;
        let start = offset.min(rows.num_rows());
        let length = options
            .limit
            .unwrap_or(usize::MAX)
            .min(rows.num_rows() - start);
        let rows = rows.slice(start, length);
        match &options.select {
            Some(select) if select.len() < rows.num_columns() => {
                let indices: Vec<usize> = (0..select.len()).collect();
                rows.project(&indices).map_err(|source| Error::Arrow {
                    action: "leave out the columns only the order read",
                    source,
                })
            }
            _ => Ok(rows),
        }
    }

    /// How many rows of a type `options` reads (its filter, at its commit, fresh or not);
    /// its select, order, offset and limit play no part.
    pub async fn count(&self, type_name: &str, options: &ReadOptions) -> Result<u64> {
        let keys = ReadOptions {
            at: options.at.clone(),
            filter: options.filter.clone(),
            select: Some(vec!["id".to_owned()]),
            fresh: options.fresh,
            ..ReadOptions::default()
        };
        Ok(self.read(type_name, &keys).await?.num_rows() as u64)
    }

    /// One node or edge by key (an edge's key is `src->dst` unless it declares `@key`).
    pub async fn get(
        &self,
        type_name: &str,
        key: &str,
        view: impl Into<View>,
    ) -> Result<Option<RecordBatch>> {
        let view = view.into();
        let ty = &self.type_def(type_name)?;
        let snapshot = self.snapshot(&view.at).await?;
        let table = self.open_for_read(&snapshot, ty, &view).await?;
        let filter = format!("id = {}", quote(key));
        let query = Query {
            filter: Some(&filter),
            select: None,
            limit: Some(1),
        };
        let batch = table
            .reader()
            .scan(&query)
            .await
            .map_err(Error::from_read)?;
        Ok((batch.num_rows() > 0).then_some(batch))
    }

    /// The nodes at the other end of `edge` edges of node `key`.
    pub async fn neighbors(
        &self,
        node_type: &str,
        key: &str,
        edge: &str,
        direction: Direction,
        view: impl Into<View>,
    ) -> Result<RecordBatch> {
        self.neighbors_of(node_type, key, edge, direction, view.into(), false)
            .await
    }

    /// [`Graph::neighbors`], one row per edge: the node at its other end, then the edge's
    /// properties as `Edge.field` columns.
    pub async fn neighbors_with_edges(
        &self,
        node_type: &str,
        key: &str,
        edge: &str,
        direction: Direction,
        view: impl Into<View>,
    ) -> Result<RecordBatch> {
        self.neighbors_of(node_type, key, edge, direction, view.into(), true)
            .await
    }

    async fn neighbors_of(
        &self,
        node_type: &str,
        key: &str,
        edge: &str,
        direction: Direction,
        view: View,
        with_edges: bool,
    ) -> Result<RecordBatch> {
        let node = &self.node_type(node_type)?;
        let edge_def = &self.edge_type(edge)?;
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
            return Err(Error::NotAnEndpoint {
                edge: edge.to_owned(),
                from: ends.from.clone(),
                to: ends.to.clone(),
                way,
                node_type: node_type.to_owned(),
            });
        }
        let snapshot = self.snapshot(&view.at).await?;
        let edges = self.open_for_read(&snapshot, edge_def, &view).await?;
        let near_key = vec![key.to_owned()];
        let far_column = [far_col.to_owned()];
        // With the edges, every column: a commit older than a field of the edge type has
        // no column for it, which `conform` fills as a read of today's schema expects.
        let columns = (!with_edges).then_some(&far_column[..]);
        let hits = edges
            .reader()
            .rows_where_in(near_col, &near_key, columns)
            .await
            .map_err(Error::from_read)?;
        let hits = match with_edges {
            true => tributary_schema::conform(edge_def, &hits).map_err(|source| Error::Arrow {
                action: "bring the edges to the current schema",
                source,
            })?,
            false => hits,
        };
        let keys: Vec<String> = string_column(&hits, far_col)
            .iter()
            .flatten()
            .map(str::to_owned)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if keys.is_empty() {
            // No edge: say whether the node itself is there, as `get` would.
            let near_nodes = self.open_for_read(&snapshot, node, &view).await?;
            let found = near_nodes
                .reader()
                .rows_where_in("id", &near_key, Some(&["id".to_owned()]))
                .await
                .map_err(Error::from_read)?;
            if found.num_rows() == 0 {
                return Err(Error::NoSuchNode {
                    type_name: node.name.clone(),
                    key: key.to_owned(),
                });
            }
        }
        let far_def = &self.node_type(far)?;
        let nodes = self.open_for_read(&snapshot, far_def, &view).await?;
        let nodes = nodes
            .reader()
            .rows_where_in("id", &keys, None)
            .await
            .map_err(Error::from_read)?;
        if !with_edges {
            return Ok(nodes);
        }
        beside_their_edges(&nodes, &hits, far_col, &edge_def.name)
    }

    /// The best `k` rows of a type for `query`, with their scores.
    pub async fn search(
        &self,
        type_name: &str,
        query: &SearchQuery,
        k: usize,
        view: impl Into<View>,
    ) -> Result<RecordBatch> {
        let view = view.into();
        let ty = &self.type_def(type_name)?;
        let text_columns: Vec<String>;
        let embedded: Vec<f32>;
        let search = match query {
            SearchQuery::Text(text) => {
                text_columns = text_search_columns(ty)?;
                Search::Text {
                    columns: &text_columns,
                    text,
                }
            }
            SearchQuery::Nearest(vector) => Search::Nearest {
                column: vector_search_column(ty, vector.len())?,
                vector,
            },
            SearchQuery::Similar(text) => {
                let (column, dimension) = embedded_search_column(ty)?;
                embedded = self
                    .embedder()
                    .await?
                    .embed(&[text.as_str()], dimension)
                    .await
                    .context(crate::error::EmbedSnafu)?
                    .pop()
                    .unwrap_or_default();
                Search::Nearest {
                    column,
                    vector: &embedded,
                }
            }
        };
        if k == 0 {
            return Err(Error::ZeroResults);
        }
        if k > MAX_SEARCH_K {
            return Err(Error::TooManyResults {
                k,
                max: MAX_SEARCH_K,
            });
        }
        let snapshot = self.snapshot(&view.at).await?;
        let table = self.open_for_read(&snapshot, ty, &view).await?;
        table
            .reader()
            .search(&search, k)
            .await
            .map_err(Error::from_read)
    }

    /// The rows of `ty` whose keys are `keys`, in the type's schema, as `view` of
    /// `snapshot` sees them (the rows a patch lays over).
    pub(crate) async fn rows_by_key(
        &self,
        snapshot: &CommitRecord,
        ty: &TypeDef,
        keys: &[String],
        view: &View,
    ) -> Result<RecordBatch> {
        let schema = ty.arrow_schema();
        let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let table = self.open_for_read(snapshot, ty, view).await?;
        let rows = table
            .reader()
            .rows_where_in("id", keys, Some(&columns))
            .await
            .map_err(Error::from_read)?;
        // Rows stored or replayed before a field was added get its default.
        tributary_schema::conform(ty, &rows).map_err(|source| Error::Arrow {
            action: "read rows by key",
            source,
        })
    }

    pub(crate) async fn open_for_read(
        &self,
        snapshot: &CommitRecord,
        ty: &TypeDef,
        view: &View,
    ) -> Result<OpenTable> {
        if view.fresh && matches!(view.at, At::Commit(_)) {
            return Err(Error::FreshAtCommit);
        }
        let base = self.open_table(snapshot, ty).await?;
        let writer = if view.fresh {
            self.streaming
                .writer(&ty.table_path(), snapshot.lineage.as_deref())
        } else {
            None
        };
        Ok(OpenTable {
            base,
            commit: snapshot.id.to_string(),
            fresh: view.fresh,
            writer,
        })
    }
}

/// The `@index(fts)` fields full-text search runs over.
fn text_search_columns(ty: &TypeDef) -> Result<Vec<String>> {
    let columns: Vec<String> = ty
        .fields
        .iter()
        .filter(|f| f.index == Some(IndexKind::Fts))
        .map(|f| f.name.clone())
        .collect();
    if columns.is_empty() {
        return Err(Error::NoTextIndex {
            type_name: ty.name.clone(),
        });
    }
    Ok(columns)
}

/// The indexed `@embed` field a text's similarity search runs over, and its dimension.
fn embedded_search_column(ty: &TypeDef) -> Result<(&str, usize)> {
    ty.fields
        .iter()
        .find_map(|f| match (&f.ty, &f.embed, f.index) {
            (FieldType::Vector(dimension), Some(_), Some(_)) => Some((f.name.as_str(), *dimension)),
            _ => None,
        })
        .ok_or_else(|| Error::NotEmbedded {
            type_name: ty.name.clone(),
        })
}

/// The indexed vector field nearest-neighbour search runs over; `dimension` must match it.
fn vector_search_column(ty: &TypeDef, dimension: usize) -> Result<&str> {
    let fields: Vec<_> = ty
        .fields
        .iter()
        .filter(|f| matches!(f.ty, FieldType::Vector(_)) && f.index.is_some())
        .collect();
    let field = match fields.as_slice() {
        [one] => one,
        [] => {
            return Err(Error::NoVectorIndex {
                type_name: ty.name.clone(),
            })
        }
        _ => {
            return Err(Error::SeveralVectorIndexes {
                type_name: ty.name.clone(),
                fields: fields.iter().map(|f| f.name.clone()).collect(),
            });
        }
    };
    if field.ty != FieldType::Vector(dimension) {
        return Err(Error::WrongDimension {
            type_name: ty.name.clone(),
            field: field.name.clone(),
            declared: field.ty.to_string(),
            dimension,
        });
    }
    Ok(&field.name)
}

/// One row per edge of `hits`: the node of `nodes` its `far_col` names, then the edge's
/// properties as `Edge.column`. An edge whose node `nodes` lacks is left out (a commit
/// holds every edge's ends; a fresh read may see an edge before its node's fold).
fn beside_their_edges(
    nodes: &RecordBatch,
    hits: &RecordBatch,
    far_col: &str,
    edge: &str,
) -> Result<RecordBatch> {
    use std::collections::HashMap;
    let arrow = |source| Error::Arrow {
        action: "join the neighbours with their edges",
        source,
    };
    let ids = string_column(nodes, "id");
    let row_of: HashMap<&str, u32> = ids
        .iter()
        .enumerate()
        .filter_map(|(row, id)| Some((id?, row as u32)))
        .collect();
    let far = string_column(hits, far_col);
    let (mut node_rows, mut edge_rows) = (Vec::new(), Vec::new());
    for (hit, key) in far.iter().enumerate() {
        if let Some(&row) = key.and_then(|key| row_of.get(key)) {
            node_rows.push(row);
            edge_rows.push(hit as u32);
        }
    }
    let node_rows = arrow_array::UInt32Array::from(node_rows);
    let edge_rows = arrow_array::UInt32Array::from(edge_rows);
    let mut fields: Vec<arrow_schema::FieldRef> = nodes.schema().fields().iter().cloned().collect();
    let mut columns = nodes
        .columns()
        .iter()
        .map(|column| arrow_select::take::take(column, &node_rows, None))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(arrow)?;
    for (field, column) in hits.schema().fields().iter().zip(hits.columns()) {
        // The edge's own columns: its ends and id are the rows' keys already.
        if matches!(field.name().as_str(), "id" | "src" | "dst") {
            continue;
        }
        let renamed = field
            .as_ref()
            .clone()
            .with_name(format!("{edge}.{}", field.name()));
        fields.push(std::sync::Arc::new(renamed));
        columns.push(arrow_select::take::take(column, &edge_rows, None).map_err(arrow)?);
    }
    RecordBatch::try_new(
        std::sync::Arc::new(arrow_schema::Schema::new(fields)),
        columns,
    )
    .map_err(arrow)
}

/// `rows` in the order of `keys` (nulls last), or as they are without keys.
fn sorted(rows: RecordBatch, keys: &[SortKey]) -> Result<RecordBatch> {
    if keys.is_empty() || rows.num_rows() == 0 {
        return Ok(rows);
    }
    let arrow = |source| Error::Arrow {
        action: "sort the rows read",
        source,
    };
    let columns =
        keys.iter()
            .map(|key| {
                let values = rows.column_by_name(&key.column).cloned().ok_or_else(|| {
                    arrow(arrow_schema::ArrowError::SchemaError(key.column.clone()))
                })?;
                Ok(arrow_ord::sort::SortColumn {
                    values,
                    options: Some(arrow_ord::sort::SortOptions {
                        descending: key.descending,
                        nulls_first: false,
                    }),
                })
            })
            .collect::<Result<Vec<_>>>()?;
    let indices = arrow_ord::sort::lexsort_to_indices(&columns, None).map_err(arrow)?;
    arrow_select::take::take_record_batch(&rows, &indices).map_err(arrow)
}

fn check_columns(ty: &TypeDef, columns: &[String]) -> Result<()> {
    let schema = ty.arrow_schema();
    if let Some(unknown) = columns.iter().find(|c| schema.field_with_name(c).is_err()) {
        let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        return Err(Error::UnknownColumn {
            type_name: ty.name.clone(),
            column: unknown.clone(),
            meant: tributary_schema::nearest_name(unknown, columns.iter().map(String::as_str))
                .map(str::to_owned),
            columns,
        });
    }
    Ok(())
}
