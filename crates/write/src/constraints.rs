//! The graph's constraints across rows — edge endpoints, `@card`, `@unique` — checked one
//! way for every write: a load feeds its whole request, a fold its rows chunk by chunk
//! (newest first, one row per key). Rows are checked against the snapshot the write
//! commits on plus the rows accepted before them; the state kept between chunks is keys and
//! values, never rows.

use std::collections::{HashMap, HashSet};
use std::fmt;

use ahash::{AHashMap, AHashSet};

use arrow_array::{RecordBatch, StringArray};
use lance::Dataset;
use snafu::{OptionExt, ResultExt};
use tributary_publisher::CommitRecord;
use tributary_schema::{Cardinality, Catalog, TablePath, TypeDef, TypeKind};
use tributary_storage::GraphStore;

use crate::error::{ArrowSnafu, PublishSnafu, Result, UnknownEndpointTypeSnafu};
use crate::keys::KeySet;
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
    /// The embedding provider gave no vector for the row's `@embed` field.
    Embedding,
}

impl fmt::Display for RejectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectKind::Endpoint => "endpoint",
            RejectKind::Cardinality => "cardinality",
            RejectKind::Unique => "unique",
            RejectKind::Embedding => "embedding",
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
    opened: std::sync::Mutex<HashMap<TablePath, Dataset>>,
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

/// The key length the fold's key set is sized for at most, per expected key.
const MAX_RESERVED_KEY_BYTES: usize = 64;

/// Checks batches of rows, type by type (nodes before edges, so an edge sees the nodes
/// accepted before it), and remembers the accepted ones for the batches after.
pub struct ConstraintChecker<'a> {
    tables: &'a SnapshotTables<'a>,
    scope: Scope,
    /// Node type → keys accepted so far (in a request: every key it writes).
    accepted_nodes: AHashMap<String, AHashSet<String>>,
    /// Node types whose accepted keys are remembered (`None`: every type). A fold names
    /// the endpoint types of the edge tables it folds; no other lookup needs the keys.
    remembered_nodes: Option<HashSet<String>>,
    /// (type, field) → value → the key holding it among the accepted rows.
    unique_owner: AHashMap<(String, String), AHashMap<String, String>>,
    /// Edge type → source → edge ids it has (snapshot + accepted), for `@card` types.
    out_edges: HashMap<String, HashMap<String, HashSet<String>>>,
    /// Type → keys checked so far: their snapshot rows are being replaced. In a stream
    /// the same set keeps the newest row per key ([`ConstraintChecker::unseen_rows`]).
    replaced: AHashMap<String, KeySet>,
    /// Type → keys whose new rows were refused: their snapshot rows (and values) stay.
    refused: AHashMap<String, AHashSet<String>>,
    /// Type → keys the write deletes: no edge may name a deleted node, a deleted row's
    /// `@unique` values are free, and a deleted edge takes no place under a `@card`.
    deleted: AHashMap<String, AHashSet<String>>,
}

/// A `@unique` field of one batch: its values, and which key holds each in the snapshot
/// (keys the write replaces left out).
struct UniqueField {
    name: String,
    values: Vec<Option<String>>,
    in_snapshot: HashMap<String, String>,
    /// Values whose snapshot holder this write replaces: free only if the holder's own
    /// new row is written.
    freed: HashMap<String, String>,
}

impl<'a> ConstraintChecker<'a> {
    pub fn new(tables: &'a SnapshotTables<'a>, scope: Scope) -> Self {
        ConstraintChecker {
            tables,
            scope,
            accepted_nodes: AHashMap::new(),
            remembered_nodes: None,
            unique_owner: AHashMap::new(),
            out_edges: HashMap::new(),
            replaced: AHashMap::new(),
            refused: AHashMap::new(),
            deleted: AHashMap::new(),
        }
    }

    /// Keys of `type_name` the write deletes (rows it does not write again): an edge
    /// naming a deleted node is refused, whatever the snapshot holds; a deleted row's
    /// `@unique` values and a deleted edge's place under a `@card` are free.
    pub fn deleting<'k>(&mut self, type_name: &str, keys: impl IntoIterator<Item = &'k str>) {
        self.deleted
            .entry(type_name.to_owned())
            .or_default()
            .extend(keys.into_iter().map(str::to_owned));
    }

    /// Remember accepted keys only of these node types (the endpoints of the edges still
    /// to be checked); by default every node type's are.
    pub fn remember_nodes_of(mut self, types: impl IntoIterator<Item = String>) -> Self {
        self.remembered_nodes = Some(types.into_iter().collect());
        self
    }

    /// The rows of `batch` (a stream's, newest first) whose key was not seen yet: the
    /// first sighting is the newest write. Marks them seen, which is also what `@unique`
    /// checks treat as replaced. `expected` (the rows the stream holds) sizes the set once.
    pub fn unseen_rows(
        &mut self,
        ty: &TypeDef,
        batch: &RecordBatch,
        expected: usize,
    ) -> Result<RecordBatch> {
        let ids = string_column(batch, "id");
        let seen = self.replaced.entry(ty.name.clone()).or_default();
        if seen.is_empty() && batch.num_rows() > 0 {
            // The slice's own bytes (a filtered batch shares a larger buffer), capped: this
            // only sizes the arena once.
            let offsets = ids.value_offsets();
            let bytes = (offsets[batch.num_rows()] - offsets[0]) as usize;
            seen.reserve(
                expected,
                (bytes / batch.num_rows()).min(MAX_RESERVED_KEY_BYTES),
            );
        }
        let keep: arrow_array::BooleanArray = ids
            .iter()
            .map(|id| Some(id.is_some_and(|id| seen.insert(id))))
            .collect();
        arrow_select::filter::filter_record_batch(batch, &keep).context(ArrowSnafu {
            action: "filter fold rows",
        })
    }

    /// Mark keys a stream deletes (newest first, with [`ConstraintChecker::unseen_rows`])
    /// as seen: an older row of any of them is not written.
    pub fn mark_seen(&mut self, ty: &TypeDef, keys: &[String]) {
        if keys.is_empty() {
            return;
        }
        let seen = self.replaced.entry(ty.name.clone()).or_default();
        for key in keys {
            seen.insert(key);
        }
    }

    fn remembers(&self, ty: &TypeDef) -> bool {
        ty.kind == TypeKind::Node
            && self
                .remembered_nodes
                .as_ref()
                .is_none_or(|types| types.contains(&ty.name))
    }

    /// Check one batch of `ty`'s rows (unique keys, none checked before) and remember the
    /// accepted ones. What the snapshot holds is looked up for the whole batch at once;
    /// then each row, in order, is accepted or rejected for the first constraint it breaks
    /// (endpoints, then `@unique`, then `@card`), and only an accepted row counts for the
    /// rows after it. Returns the rejected rows, in row order.
    pub async fn check(&mut self, ty: &TypeDef, batch: &RecordBatch) -> Result<Vec<Violation>> {
        let table = self.tables.open(ty).await?;
        let ids = string_column(batch, "id");
        // Only `@unique` checks ask which snapshot rows the write replaces; a stream's
        // rows were marked by `unseen_rows`.
        if self.scope == Scope::Request && ty.fields.iter().any(|f| f.unique) {
            self.replaced
                .entry(ty.name.clone())
                .or_default()
                .extend(ids.iter().flatten());
        }
        if ty.kind == TypeKind::Node && self.scope == Scope::Request {
            // A request is accepted or refused whole: an edge names a node of the same
            // request whether or not that node's own line is refused.
            self.accepted_nodes
                .entry(ty.name.clone())
                .or_default()
                .extend(ids.iter().flatten().map(str::to_owned));
        }
        let missing = self.missing_endpoints(ty, batch).await?;
        let unique = self.unique_fields(&table, ty, batch).await?;
        let card = self.out_edges_of(&table, ty, batch).await?;

        let mut violations = Vec::new();
        let mut first_row_of_source: HashMap<&str, usize> = HashMap::new();
        for row in 0..batch.num_rows() {
            let id = ids.value(row);
            let violation = missing
                .iter()
                .find_map(|(field, keys)| keys.get(&row).map(|m| (field, m)))
                .map(|(field, message)| Violation {
                    row,
                    kind: RejectKind::Endpoint,
                    field: (*field).to_owned(),
                    message: message.clone(),
                })
                .or_else(|| self.unique_violation(ty, &unique, row, id))
                .or_else(|| {
                    let (card, srcs) = card.as_ref()?;
                    let src = srcs.value(row);
                    first_row_of_source.entry(src).or_insert(row);
                    self.card_violation(ty, card, row, src, id)
                });
            match violation {
                Some(violation) => violations.push(violation),
                None => self.accept(ty, &unique, card.as_ref().map(|c| c.1), row, id),
            }
        }
        self.refuse_what_counted_on_refused_rows(
            ty,
            &unique,
            card.as_ref().map(|c| c.1),
            ids,
            &mut violations,
        );
        if let (Some((card, _)), Scope::Request) = (card.as_ref(), self.scope) {
            for (src, row) in first_row_of_source {
                let count = self.out_edges[&ty.name].get(src).map_or(0, HashSet::len);
                if (count as u64) < card.min && violations.iter().all(|v| v.row != row) {
                    let rule = format!("needs at least {}", card.min);
                    violations.push(card_message(ty, card, row, src, count, rule));
                }
            }
            violations.sort_by_key(|v| v.row);
        }
        Ok(violations)
    }

    /// Remember an accepted row: its key, its `@unique` values, its place among its
    /// source's out-edges.
    fn accept(
        &mut self,
        ty: &TypeDef,
        unique: &[UniqueField],
        srcs: Option<&StringArray>,
        row: usize,
        id: &str,
    ) {
        if self.remembers(ty) {
            self.accepted_nodes
                .entry(ty.name.clone())
                .or_default()
                .insert(id.to_owned());
        }
        for field in unique {
            if let Some(value) = &field.values[row] {
                self.unique_owner
                    .entry((ty.name.clone(), field.name.clone()))
                    .or_default()
                    .insert(value.clone(), id.to_owned());
            }
        }
        if let Some(srcs) = srcs {
            self.out_edges
                .entry(ty.name.clone())
                .or_default()
                .entry(srcs.value(row).to_owned())
                .or_default()
                .insert(id.to_owned());
        }
    }

    /// Per endpoint field (`from`, `to`): the rows whose node exists neither in the
    /// snapshot nor among the accepted rows, with why.
    async fn missing_endpoints(
        &self,
        ty: &TypeDef,
        batch: &RecordBatch,
    ) -> Result<Vec<(&'static str, HashMap<usize, String>)>> {
        let mut out = Vec::new();
        let Some(ends) = &ty.edge else {
            return Ok(out);
        };
        for (column, field, node_type) in [("src", "from", &ends.from), ("dst", "to", &ends.to)] {
            let keys = string_column(batch, column);
            let accepted = self.accepted_nodes.get(node_type.as_str());
            let deleted = self.deleted.get(node_type.as_str());
            let unknown = distinct(
                keys.iter()
                    .flatten()
                    .filter(|k| accepted.is_none_or(|a| !a.contains(*k))),
            );
            if unknown.is_empty() {
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
            let found = existing_ids(&nodes, "id", &unknown, node_type).await?;
            let mut rows = HashMap::new();
            for (row, key) in keys.iter().enumerate() {
                let Some(key) = key else { continue };
                // A node the write deletes and then writes again (a stream may) exists.
                let message = if accepted.is_some_and(|a| a.contains(key)) {
                    continue;
                } else if deleted.is_some_and(|d| d.contains(key)) {
                    format!(
                        "{node_type} `{key}` is deleted by this write (edge {} needs it as `{field}`)",
                        ty.name
                    )
                } else if found.contains(key) {
                    continue;
                } else {
                    format!(
                        "{node_type} `{key}` does not exist (edge {} needs it as `{field}`)",
                        ty.name
                    )
                };
                rows.insert(row, message);
            }
            out.push((field, rows));
        }
        Ok(out)
    }

    /// The values of `ty`'s `@unique` fields in `batch`, and which other key holds each
    /// in the snapshot.
    async fn unique_fields(
        &self,
        table: &Dataset,
        ty: &TypeDef,
        batch: &RecordBatch,
    ) -> Result<Vec<UniqueField>> {
        let replaced = self.replaced.get(&ty.name);
        let refused = self.refused.get(&ty.name);
        let deleted = self.deleted.get(&ty.name);
        let mut out = Vec::new();
        for field in ty.fields.iter().filter(|f| f.unique) {
            let Some(column) = batch.column_by_name(&field.name) else {
                continue;
            };
            if column.null_count() == column.len() {
                continue;
            }
            let values = display_values(column.as_ref())?;
            let wanted = distinct(values.iter().flatten().map(String::as_str));
            let literal = literal_kind(column.data_type());
            let mut in_snapshot = HashMap::new();
            let mut freed = HashMap::new();
            for (id, value) in lookup_values(table, &field.name, &wanted, literal, &ty.name).await?
            {
                // A holder this write deletes holds nothing once it commits.
                if deleted.is_some_and(|d| d.contains(&id)) {
                    continue;
                }
                let replacing = replaced.is_some_and(|r| r.contains(&id))
                    && refused.is_none_or(|r| !r.contains(&id));
                if replacing {
                    freed.insert(value, id);
                } else {
                    in_snapshot.insert(value, id);
                }
            }
            out.push(UniqueField {
                name: field.name.clone(),
                values,
                in_snapshot,
                freed,
            });
        }
        Ok(out)
    }

    /// A value another row gave up is free only if that row's new version is written.
    /// When it was refused (in this batch or an earlier one), its old value stays: a row
    /// accepted on the strength of it is refused too, and its own old value stays in
    /// turn, until nothing changes. Then the refused keys are remembered.
    fn refuse_what_counted_on_refused_rows(
        &mut self,
        ty: &TypeDef,
        unique: &[UniqueField],
        srcs: Option<&StringArray>,
        ids: &StringArray,
        violations: &mut Vec<Violation>,
    ) {
        if unique.iter().all(|field| field.freed.is_empty()) {
            self.note_refused(ty, ids, violations);
            return;
        }
        let mut refused: AHashSet<String> = self.refused.get(&ty.name).cloned().unwrap_or_default();
        refused.extend(violations.iter().map(|v| ids.value(v.row).to_owned()));
        let mut rejected: AHashSet<usize> = violations.iter().map(|v| v.row).collect();
        loop {
            let mut more = Vec::new();
            for row in (0..arrow_array::Array::len(ids)).filter(|row| !rejected.contains(row)) {
                let id = ids.value(row);
                let kept = unique.iter().find_map(|field| {
                    let value = field.values[row].as_ref()?;
                    let holder = field.freed.get(value)?;
                    (holder != id && refused.contains(holder)).then_some((field, value, holder))
                });
                if let Some((field, value, holder)) = kept {
                    more.push(Violation {
                        row,
                        kind: RejectKind::Unique,
                        field: field.name.clone(),
                        message: format!(
                            "{}.{} {value:?} is not unique: {} `{holder}` has it (its own change was refused)",
                            ty.name, field.name, ty.name
                        ),
                    });
                }
            }
            if more.is_empty() {
                break;
            }
            for violation in more {
                let id = ids.value(violation.row);
                self.unaccept(ty, unique, srcs, violation.row, id);
                refused.insert(id.to_owned());
                rejected.insert(violation.row);
                violations.push(violation);
            }
        }
        violations.sort_by_key(|v| v.row);
        self.note_refused(ty, ids, violations);
    }

    fn note_refused(&mut self, ty: &TypeDef, ids: &StringArray, violations: &[Violation]) {
        if violations.is_empty() || !ty.fields.iter().any(|f| f.unique) {
            return;
        }
        self.refused
            .entry(ty.name.clone())
            .or_default()
            .extend(violations.iter().map(|v| ids.value(v.row).to_owned()));
    }

    /// Undo [`Self::accept`] for a row refused after all.
    fn unaccept(
        &mut self,
        ty: &TypeDef,
        unique: &[UniqueField],
        srcs: Option<&StringArray>,
        row: usize,
        id: &str,
    ) {
        if self.scope == Scope::Stream {
            if let Some(accepted) = self.accepted_nodes.get_mut(&ty.name) {
                accepted.remove(id);
            }
        }
        for field in unique {
            if let Some(value) = &field.values[row] {
                if let Some(owners) = self
                    .unique_owner
                    .get_mut(&(ty.name.clone(), field.name.clone()))
                {
                    if owners.get(value).is_some_and(|owner| owner == id) {
                        owners.remove(value);
                    }
                }
            }
        }
        if let Some(srcs) = srcs {
            if let Some(edges) = self
                .out_edges
                .get_mut(&ty.name)
                .and_then(|by_source| by_source.get_mut(srcs.value(row)))
            {
                edges.remove(id);
            }
        }
    }

    fn unique_violation(
        &self,
        ty: &TypeDef,
        unique: &[UniqueField],
        row: usize,
        id: &str,
    ) -> Option<Violation> {
        unique.iter().find_map(|field| {
            let value = field.values[row].as_ref()?;
            let holder = self
                .unique_owner
                .get(&(ty.name.clone(), field.name.clone()))
                .and_then(|owners| owners.get(value))
                .or_else(|| field.in_snapshot.get(value))
                .filter(|holder| holder.as_str() != id)?;
            Some(Violation {
                row,
                kind: RejectKind::Unique,
                field: field.name.clone(),
                message: format!(
                    "{}.{} {value:?} is not unique: {} `{holder}` has it",
                    ty.name, field.name, ty.name
                ),
            })
        })
    }

    /// For an edge type whose `@card` this write must hold: the bound and the batch's
    /// sources, with every source's snapshot out-edges loaded into `out_edges`. A stream
    /// with no maximum has nothing to hold.
    async fn out_edges_of<'b>(
        &mut self,
        table: &Dataset,
        ty: &TypeDef,
        batch: &'b RecordBatch,
    ) -> Result<Option<(Cardinality, &'b StringArray)>> {
        let Some(card) = ty.edge.as_ref().and_then(|e| e.card) else {
            return Ok(None);
        };
        if self.scope == Scope::Stream && card.max.is_none() {
            return Ok(None);
        }
        let srcs = string_column(batch, "src");
        let known = self.out_edges.entry(ty.name.clone()).or_default();
        let unknown = distinct(srcs.iter().flatten().filter(|s| !known.contains_key(*s)));
        for src in &unknown {
            known.entry(src.clone()).or_default();
        }
        let deleted = self.deleted.get(&ty.name);
        for (id, src) in lookup_values(table, "src", &unknown, Literal::Quoted, &ty.name).await? {
            if deleted.is_none_or(|d| !d.contains(&id)) {
                known.entry(src).or_default().insert(id);
            }
        }
        Ok(Some((card, srcs)))
    }

    /// Whether one more edge `id` of `src` goes over the `@card` maximum (an edge it
    /// already has is rewritten, not added).
    fn card_violation(
        &self,
        ty: &TypeDef,
        card: &Cardinality,
        row: usize,
        src: &str,
        id: &str,
    ) -> Option<Violation> {
        let max = card.max?;
        let edges = self.out_edges.get(&ty.name)?.get(src)?;
        if edges.contains(id) || (edges.len() as u64) < max {
            return None;
        }
        // Replacing the edge (a person changing company) is a delete of the old one and
        // the new one together.
        let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
        let delete = match &ty.key {
            // An edge type with its own key is deleted by it.
            Some(_) => format!("{{\"delete\":{},\"key\":…}}", quoted(&ty.name)),
            None => format!(
                "{{\"delete\":{},\"from\":{},\"to\":…}}",
                quoted(&ty.name),
                quoted(src)
            ),
        };
        let rule = format!(
            "allows at most {max}; to replace an edge, delete the old one in the same write \
             ({delete})"
        );
        Some(card_message(ty, card, row, src, edges.len() + 1, rule))
    }
}

fn card_message(
    ty: &TypeDef,
    card: &Cardinality,
    row: usize,
    src: &str,
    count: usize,
    rule: String,
) -> Violation {
    let from = ty.edge.as_ref().map_or("", |e| e.from.as_str());
    Violation {
        row,
        kind: RejectKind::Cardinality,
        field: "from".to_owned(),
        message: format!(
            "{from} `{src}` would have {count} {} edges; {card} {rule}",
            ty.name
        ),
    }
}

/// Each value once, for an `IN (…)` lookup.
fn distinct<'v>(values: impl Iterator<Item = &'v str>) -> Vec<String> {
    let set: HashSet<&str> = values.collect();
    set.into_iter().map(str::to_owned).collect()
}
