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
    /// See [`View::fresh`].
    pub fresh: bool,
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
        let view = View {
            at: options.at.clone(),
            fresh: options.fresh,
        };
        let snapshot = self.snapshot(&view.at).await?;
        let table = self.open_for_read(&snapshot, ty, &view).await?;
        let query = Query {
            filter: options.filter.as_deref(),
            select: options.select.as_deref(),
            limit: options.limit,
        };
        table.reader().scan(&query).await.map_err(Error::from_read)
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
        let view = view.into();
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
        let hits = edges
            .reader()
            .rows_where_in(near_col, &near_key, Some(&far_column))
            .await
            .map_err(Error::from_read)?;
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
        nodes
            .reader()
            .rows_where_in("id", &keys, None)
            .await
            .map_err(Error::from_read)
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
