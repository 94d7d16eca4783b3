//! The graph's constraints across rows — edge endpoints, `@card`, `@unique` — checked one
//! way for every write: a load feeds its whole request, a fold its rows chunk by chunk
//! (newest first, one row per key). Rows are checked against the snapshot the write
//! commits on plus the rows accepted before them; the state kept between chunks is keys and
//! values, never rows.

use std::collections::{HashMap, HashSet};
use std::fmt;

use arrow_array::RecordBatch;
use lance::Dataset;
use snafu::{OptionExt, ResultExt};
use tributary_publisher::CommitRecord;
use tributary_schema::{Catalog, TypeDef, TypeKind};
use tributary_storage::GraphStore;

use crate::error::{PublishSnafu, Result, UnknownEndpointTypeSnafu};
use crate::lookup::{
    display_values, existing_ids, literal_kind, lookup_values, string_column, Literal,
};

/// Which constraint a row breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectKind {
    /// An edge endpoint exists neither in the snapshot nor among the accepted rows.
    Endpoint,
    /// The edge's source would fall outside its `@card` bounds.
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

/// A row that breaks a constraint: its index in the checked batch, the field a user
/// fixes (`from`/`to` for an edge's endpoints), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub row: usize,
    pub kind: RejectKind,
    pub field: String,
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
        let dataset = self
            .head
            .open_table(self.store, &path)
            .await
            .context(PublishSnafu)?;
        self.opened
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path, dataset.clone());
        Ok(dataset)
    }
}

/// What a write is checked as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A whole request (a load): every edge a source gets is in it, so the `@card`
    /// minimum is enforced too.
    Request,
    /// Part of a stream (a fold): a source below its `@card` minimum may get its other
    /// edges in a later fold, so only the maximum is enforced.
    Stream,
}

/// Checks batches of rows, type by type (nodes before edges, so an edge sees the nodes
/// accepted before it), and remembers the accepted ones for the batches after.
pub struct ConstraintChecker<'a> {
    tables: &'a SnapshotTables<'a>,
    scope: Scope,
    /// Node type → keys accepted so far.
    accepted_nodes: HashMap<String, HashSet<String>>,
    /// (type, field) → value → the key holding it among the accepted rows.
    unique_owner: HashMap<(String, String), HashMap<String, String>>,
    /// Edge type → source → edge ids it has (snapshot + accepted), for `@card` types.
    out_edges: HashMap<String, HashMap<String, HashSet<String>>>,
    /// Type → keys checked so far: their snapshot rows are being replaced.
    replaced: HashMap<String, HashSet<String>>,
}

impl<'a> ConstraintChecker<'a> {
    pub fn new(tables: &'a SnapshotTables<'a>, scope: Scope) -> Self {
        ConstraintChecker {
            tables,
            scope,
            accepted_nodes: HashMap::new(),
            unique_owner: HashMap::new(),
            out_edges: HashMap::new(),
            replaced: HashMap::new(),
        }
    }

    /// Check one batch of `ty`'s rows (unique keys, none checked before) and remember the
    /// accepted ones. Each rejected row is reported once, for the first constraint it
    /// breaks, in row order.
    pub async fn check(&mut self, ty: &TypeDef, batch: &RecordBatch) -> Result<Vec<Violation>> {
        let mut rejected: HashMap<usize, Violation> = HashMap::new();
        let table = self.tables.open(ty).await?;
        let ids = string_column(batch, "id");
        self.replaced
            .entry(ty.name.clone())
            .or_default()
            .extend(ids.iter().flatten().map(str::to_owned));
        if ty.kind == TypeKind::Edge {
            self.check_endpoints(ty, batch, &mut rejected).await?;
            self.check_cardinality(&table, ty, batch, &mut rejected)
                .await?;
        }
        self.check_unique(&table, ty, batch, &mut rejected).await?;
        if ty.kind == TypeKind::Node {
            let keys = self.accepted_nodes.entry(ty.name.clone()).or_default();
            for (i, id) in ids.iter().enumerate() {
                if let (Some(id), false) = (id, rejected.contains_key(&i)) {
                    keys.insert(id.to_owned());
                }
            }
        }
        let mut violations: Vec<Violation> = rejected.into_values().collect();
        violations.sort_by_key(|v| v.row);
        Ok(violations)
    }

    async fn check_endpoints(
        &self,
        ty: &TypeDef,
        batch: &RecordBatch,
        rejected: &mut HashMap<usize, Violation>,
    ) -> Result<()> {
        let Some(ends) = &ty.edge else { return Ok(()) };
        for (column, field, node_type) in [("src", "from", &ends.from), ("dst", "to", &ends.to)] {
            let keys = string_column(batch, column);
            let accepted = self.accepted_nodes.get(node_type.as_str());
            let missing = distinct(
                keys.iter()
                    .flatten()
                    .filter(|k| accepted.is_none_or(|a| !a.contains(*k))),
            );
            if missing.is_empty() {
                continue;
            }
            let node_def =
                self.tables
                    .catalog
                    .get(node_type)
                    .context(UnknownEndpointTypeSnafu {
                        edge: &ty.name,
                        node_type,
                    })?;
            let nodes = self.tables.open(node_def).await?;
            let found = existing_ids(&nodes, "id", &missing, node_type).await?;
            for (i, key) in keys.iter().enumerate() {
                let Some(key) = key else { continue };
                if accepted.is_some_and(|a| a.contains(key)) || found.contains(key) {
                    continue;
                }
                rejected.entry(i).or_insert(Violation {
                    row: i,
                    kind: RejectKind::Endpoint,
                    field: field.to_owned(),
                    message: format!(
                        "{node_type} `{key}` does not exist (edge {} needs it as `{field}`)",
                        ty.name
                    ),
                });
            }
        }
        Ok(())
    }

    /// Out-edges per source: snapshot edges plus accepted ones, an edge counted once
    /// however often it is rewritten.
    async fn check_cardinality(
        &mut self,
        table: &Dataset,
        ty: &TypeDef,
        batch: &RecordBatch,
        rejected: &mut HashMap<usize, Violation>,
    ) -> Result<()> {
        let Some((ends, card)) = ty
            .edge
            .as_ref()
            .and_then(|e| e.card.as_ref().map(|card| (e, *card)))
        else {
            return Ok(());
        };
        let ids = string_column(batch, "id");
        let srcs = string_column(batch, "src");
        let known = self.out_edges.entry(ty.name.clone()).or_default();
        let unknown = distinct(srcs.iter().flatten().filter(|s| !known.contains_key(*s)));
        for src in &unknown {
            known.entry(src.clone()).or_default();
        }
        for (id, src) in lookup_values(table, "src", &unknown, Literal::Quoted, &ty.name).await? {
            known.entry(src).or_default().insert(id);
        }
        let violation = |row: usize, src: &str, count: usize, rule: String| Violation {
            row,
            kind: RejectKind::Cardinality,
            field: "from".to_owned(),
            message: format!(
                "{} `{src}` would have {count} {} edges; {card} {rule}",
                ends.from, ty.name
            ),
        };
        let mut first_row: HashMap<&str, usize> = HashMap::new();
        for i in 0..batch.num_rows() {
            if rejected.contains_key(&i) {
                continue;
            }
            let src = srcs.value(i);
            first_row.entry(src).or_insert(i);
            let edges = known.entry(src.to_owned()).or_default();
            if edges.contains(ids.value(i)) {
                continue;
            }
            match card.max {
                Some(max) if edges.len() as u64 >= max => {
                    let rule = format!("allows at most {max}");
                    rejected.insert(i, violation(i, src, edges.len() + 1, rule));
                }
                _ => {
                    edges.insert(ids.value(i).to_owned());
                }
            }
        }
        if self.scope == Scope::Request && card.min > 0 {
            for (src, row) in first_row {
                let count = known.get(src).map_or(0, HashSet::len);
                if (count as u64) < card.min && !rejected.contains_key(&row) {
                    let rule = format!("needs at least {}", card.min);
                    rejected.insert(row, violation(row, src, count, rule));
                }
            }
        }
        Ok(())
    }

    async fn check_unique(
        &mut self,
        table: &Dataset,
        ty: &TypeDef,
        batch: &RecordBatch,
        rejected: &mut HashMap<usize, Violation>,
    ) -> Result<()> {
        let ids = string_column(batch, "id");
        let ConstraintChecker {
            replaced,
            unique_owner,
            ..
        } = self;
        let replaced = replaced.get(&ty.name);
        for field in ty.fields.iter().filter(|f| f.unique) {
            let Some(column) = batch.column_by_name(&field.name) else {
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
                        Violation {
                            row: i,
                            kind: RejectKind::Unique,
                            field: field.name.clone(),
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
