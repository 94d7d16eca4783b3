//! Fold-time validation: what a WAL row could not be checked for when it was acknowledged
//! (edge endpoints, `@card`, `@unique`), checked against the snapshot plus the rows folded
//! so far. Rows arrive newest first (one row per key), chunk by chunk; the state kept
//! between chunks is keys and values, never rows.

use std::collections::{HashMap, HashSet};
use std::fmt;

use arrow_array::RecordBatch;
use ingest_core::{Catalog, TypeDef, TypeKind};
use lance::Dataset;
use snafu::{OptionExt, ResultExt};
use tributary_publisher::CommitRecord;
use tributary_storage::GraphStore;

use crate::error::{InvalidSnafu, Result, StorageSnafu};
use crate::lookup::{
    display_values, existing_ids, literal_kind, lookup_values, string_column, Literal,
};

/// Why a folded row was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectKind {
    /// An edge endpoint exists neither in the snapshot nor in the fold.
    Endpoint,
    /// The edge would take its source over the `@card` maximum.
    Cardinality,
    /// A `@unique` value another key already holds.
    Unique,
}

impl fmt::Display for RejectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectKind::Endpoint => "endpoint",
            RejectKind::Cardinality => "cardinality",
            RejectKind::Unique => "unique",
        })
    }
}

#[derive(Debug, Clone)]
pub struct RowReject {
    pub row: usize,
    pub kind: RejectKind,
    pub message: String,
}

/// The tables of a graph at one commit, each opened once however often it is asked for.
pub struct SnapshotTables<'a> {
    store: &'a GraphStore,
    pub catalog: &'a Catalog,
    head: &'a CommitRecord,
    opened: std::sync::Mutex<HashMap<String, Dataset>>,
}

impl<'a> SnapshotTables<'a> {
    pub fn new(store: &'a GraphStore, catalog: &'a Catalog, head: &'a CommitRecord) -> Self {
        SnapshotTables {
            store,
            catalog,
            head,
            opened: Default::default(),
        }
    }

    pub async fn open(&self, ty: &TypeDef) -> Result<Dataset> {
        let path = ty.table_path();
        let cached = self
            .opened
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&path)
            .cloned();
        if let Some(dataset) = cached {
            return Ok(dataset);
        }
        let version = self.head.tables.get(&path).copied().context(InvalidSnafu {
            what: "snapshot",
            message: format!("commit {} does not pin table {path}", self.head.id),
        })?;
        let dataset = self
            .store
            .open_dataset(&path, Some(version))
            .await
            .context(StorageSnafu)?;
        self.opened
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path, dataset.clone());
        Ok(dataset)
    }
}

pub struct FoldChecker<'a> {
    tables: &'a SnapshotTables<'a>,
    /// Node type → keys this fold writes (accepted rows only).
    folded_nodes: HashMap<String, HashSet<String>>,
    /// (type, field) → value → the key holding it in this fold.
    unique_owner: HashMap<(String, String), HashMap<String, String>>,
    /// Edge type → source → edge ids it has (snapshot + fold), for `@card` types.
    out_edges: HashMap<String, HashMap<String, HashSet<String>>>,
    /// Type → keys checked so far: their snapshot rows are being replaced.
    replaced: HashMap<String, HashSet<String>>,
}

impl<'a> FoldChecker<'a> {
    pub fn new(tables: &'a SnapshotTables<'a>) -> Self {
        FoldChecker {
            tables,
            folded_nodes: HashMap::new(),
            unique_owner: HashMap::new(),
            out_edges: HashMap::new(),
            replaced: HashMap::new(),
        }
    }

    /// Check one chunk of `ty`'s rows (unique keys, none seen before in this fold) and
    /// remember the accepted ones for the chunks after it.
    pub async fn check(&mut self, ty: &TypeDef, chunk: &RecordBatch) -> Result<Vec<RowReject>> {
        let mut rejected: HashMap<usize, RowReject> = HashMap::new();
        let table = self.tables.open(ty).await?;
        let ids = string_column(chunk, "id");
        self.replaced
            .entry(ty.name.clone())
            .or_default()
            .extend(ids.iter().flatten().map(str::to_owned));
        if ty.kind == TypeKind::Edge {
            self.check_endpoints(ty, chunk, &mut rejected).await?;
            self.check_cardinality(&table, ty, chunk, &mut rejected)
                .await?;
        }
        self.check_unique(&table, ty, chunk, &mut rejected).await?;
        if ty.kind == TypeKind::Node {
            let keys = self.folded_nodes.entry(ty.name.clone()).or_default();
            for (i, id) in ids.iter().enumerate() {
                if let (Some(id), false) = (id, rejected.contains_key(&i)) {
                    keys.insert(id.to_owned());
                }
            }
        }
        let mut rejects: Vec<RowReject> = rejected.into_values().collect();
        rejects.sort_by_key(|r| r.row);
        Ok(rejects)
    }

    async fn check_endpoints(
        &self,
        ty: &TypeDef,
        chunk: &RecordBatch,
        rejected: &mut HashMap<usize, RowReject>,
    ) -> Result<()> {
        let Some(ends) = &ty.edge else { return Ok(()) };
        for (column, node_type) in [("src", &ends.from), ("dst", &ends.to)] {
            let keys = string_column(chunk, column);
            let folded = self.folded_nodes.get(node_type.as_str());
            let missing = distinct(
                keys.iter()
                    .flatten()
                    .filter(|k| folded.is_none_or(|f| !f.contains(*k))),
            );
            if missing.is_empty() {
                continue;
            }
            let node_def = self.tables.catalog.get(node_type).context(InvalidSnafu {
                what: "schema",
                message: format!("edge {} names unknown node type {node_type}", ty.name),
            })?;
            let nodes = self.tables.open(node_def).await?;
            let found = existing_ids(&nodes, "id", &missing, node_type).await?;
            for (i, key) in keys.iter().enumerate() {
                let Some(key) = key else { continue };
                if folded.is_some_and(|f| f.contains(key)) || found.contains(key) {
                    continue;
                }
                rejected.entry(i).or_insert(RowReject {
                    row: i,
                    kind: RejectKind::Endpoint,
                    message: format!(
                        "{node_type} `{key}` does not exist (edge {} needs it as `{}`)",
                        ty.name,
                        if column == "src" { "from" } else { "to" }
                    ),
                });
            }
        }
        Ok(())
    }

    /// Folded edges only add out-edges, so only the `@card` maximum can be broken here.
    async fn check_cardinality(
        &mut self,
        table: &Dataset,
        ty: &TypeDef,
        chunk: &RecordBatch,
        rejected: &mut HashMap<usize, RowReject>,
    ) -> Result<()> {
        let Some(max) = ty
            .edge
            .as_ref()
            .and_then(|e| e.card.as_ref())
            .and_then(|c| c.max)
        else {
            return Ok(());
        };
        let ids = string_column(chunk, "id");
        let srcs = string_column(chunk, "src");
        let known = self.out_edges.entry(ty.name.clone()).or_default();
        let unknown = distinct(srcs.iter().flatten().filter(|s| !known.contains_key(*s)));
        for src in &unknown {
            known.entry(src.clone()).or_default();
        }
        for (id, src) in lookup_values(table, "src", &unknown, Literal::Quoted, &ty.name).await? {
            known.entry(src).or_default().insert(id);
        }
        for i in 0..chunk.num_rows() {
            if rejected.contains_key(&i) {
                continue;
            }
            let edges = known.entry(srcs.value(i).to_owned()).or_default();
            if edges.contains(ids.value(i)) {
                continue;
            }
            if edges.len() as u64 >= max {
                rejected.insert(
                    i,
                    RowReject {
                        row: i,
                        kind: RejectKind::Cardinality,
                        message: format!(
                            "{} already has {} {} edges; @card allows at most {max}",
                            srcs.value(i),
                            edges.len(),
                            ty.name
                        ),
                    },
                );
            } else {
                edges.insert(ids.value(i).to_owned());
            }
        }
        Ok(())
    }

    async fn check_unique(
        &mut self,
        table: &Dataset,
        ty: &TypeDef,
        chunk: &RecordBatch,
        rejected: &mut HashMap<usize, RowReject>,
    ) -> Result<()> {
        let ids = string_column(chunk, "id");
        let FoldChecker {
            replaced,
            unique_owner,
            ..
        } = self;
        let replaced = replaced.get(&ty.name);
        for field in ty.fields.iter().filter(|f| f.unique) {
            let Some(column) = chunk.column_by_name(&field.name) else {
                continue;
            };
            let values = display_values(column.as_ref())?;
            let wanted = distinct(values.iter().flatten().map(String::as_str));
            let mut in_snapshot: HashMap<String, String> = HashMap::new();
            let literal = literal_kind(column.data_type());
            for (id, value) in lookup_values(table, &field.name, &wanted, literal, &ty.name).await?
            {
                if replaced.is_none_or(|r| !r.contains(&id)) {
                    in_snapshot.insert(value, id);
                }
            }
            let owners = unique_owner
                .entry((ty.name.clone(), field.name.clone()))
                .or_default();
            for (i, value) in values.iter().enumerate() {
                let Some(value) = value else { continue };
                if rejected.contains_key(&i) {
                    continue;
                }
                let id = ids.value(i);
                let holder = owners
                    .get(value)
                    .or_else(|| in_snapshot.get(value))
                    .filter(|holder| holder.as_str() != id);
                if let Some(holder) = holder {
                    rejected.insert(
                        i,
                        RowReject {
                            row: i,
                            kind: RejectKind::Unique,
                            message: format!(
                                "{}.{} {value:?} is not unique: {} `{holder}` has it",
                                ty.name, field.name, ty.name
                            ),
                        },
                    );
                } else {
                    owners.insert(value.clone(), id.to_owned());
                }
            }
        }
        Ok(())
    }
}

/// Each value once, for an `IN (…)` lookup.
fn distinct<'v>(values: impl Iterator<Item = &'v str>) -> Vec<String> {
    let set: HashSet<&str> = values.collect();
    set.into_iter().map(str::to_owned).collect()
}
