//! The deletes of one load: which keys go (the last line per key wins between a row and a
//! delete), the edges that go with a deleted node, and the `@card` minimum a delete must
//! not break.

use std::collections::{BTreeMap, HashMap, HashSet};

use arrow_array::BooleanArray;
use snafu::ResultExt;
use tributary_schema::{Catalog, LineError, TypeBatch, TypeDef, TypeDeletes, TypeKind};
use tributary_storage::quote;
use tributary_write::lookup::string_column;
use tributary_write::{edge_rows, removal_filter, SnapshotTables};

use crate::error::{ArrowSnafu, Result};

/// Key → the line of its delete.
type Keys = BTreeMap<String, u64>;

#[derive(Debug, Default)]
pub(crate) struct Removals {
    /// Type → the keys its delete lines name.
    named: BTreeMap<String, Keys>,
    /// Edge type → edges leaving a deleted node (`src`), and edges reaching one (`dst`).
    cascades: BTreeMap<String, (Keys, Keys)>,
}

impl Removals {
    /// Settle rows against deletes of the same key: the later line wins (a delete, then a
    /// row, leaves the row; a row, then a delete, leaves none). `batches` hold one row
    /// per key already.
    pub fn resolve(
        catalog: &Catalog,
        batches: Vec<TypeBatch>,
        deletes: Vec<TypeDeletes>,
    ) -> Result<(Vec<TypeBatch>, Removals)> {
        let mut removals = Removals::default();
        for delete in deletes {
            let keys = removals.named.entry(delete.type_name).or_default();
            for (id, line) in delete.ids.into_iter().zip(delete.lines) {
                let kept = keys.entry(id).or_insert(line);
                *kept = (*kept).max(line);
            }
        }
        let mut out = Vec::with_capacity(batches.len());
        for batch in batches {
            let Some(keys) = removals.named.get_mut(&batch.type_name) else {
                out.push(batch);
                continue;
            };
            let ids = string_column(&batch.batch, "id");
            let keep: Vec<bool> = (0..batch.batch.num_rows())
                .map(|row| match keys.get(ids.value(row)) {
                    Some(&deleted_on) if deleted_on > batch.lines[row] => false,
                    Some(_) => {
                        keys.remove(ids.value(row));
                        true
                    }
                    None => true,
                })
                .collect();
            if keep.iter().all(|k| *k) {
                out.push(batch);
                continue;
            }
            let lines = batch
                .lines
                .iter()
                .zip(&keep)
                .filter_map(|(line, keep)| keep.then_some(*line))
                .collect();
            let rows =
                arrow_select::filter::filter_record_batch(&batch.batch, &BooleanArray::from(keep))
                    .context(ArrowSnafu {
                        action: "drop rows a later line deletes",
                    })?;
            if rows.num_rows() > 0 {
                out.push(TypeBatch {
                    type_name: batch.type_name,
                    batch: rows,
                    lines,
                });
            }
        }
        removals.named.retain(|_, keys| !keys.is_empty());
        // A delete followed by a row of the same key is that row, edges and all: a stream
        // cannot tell them apart (a memtable keeps a key's newest entry), so a load does
        // not either. Only nodes that stay deleted take their edges.
        removals.cascade_nodes_of(catalog);
        Ok((out, removals))
    }

    /// Every deleted node's edges, in and out, go too.
    fn cascade_nodes_of(&mut self, catalog: &Catalog) {
        for (name, keys) in &self.named {
            let Some(ty) = catalog.get(name).filter(|ty| ty.kind == TypeKind::Node) else {
                continue;
            };
            for edge in &catalog.types {
                let Some(ends) = &edge.edge else { continue };
                if ends.from == ty.name {
                    let cascade = self.cascades.entry(edge.name.clone()).or_default();
                    cascade.0.extend(keys.iter().map(|(k, l)| (k.clone(), *l)));
                }
                if ends.to == ty.name {
                    let cascade = self.cascades.entry(edge.name.clone()).or_default();
                    cascade.1.extend(keys.iter().map(|(k, l)| (k.clone(), *l)));
                }
            }
        }
    }

    /// The types this load deletes rows of.
    pub fn types(&self) -> impl Iterator<Item = &str> {
        let named = self.named.keys();
        let cascaded = self
            .cascades
            .keys()
            .filter(|name| !self.named.contains_key(*name));
        named.chain(cascaded).map(String::as_str)
    }

    /// The line of the delete of `key` of `type_name`, if this request deletes it (and no
    /// later line writes it again).
    pub fn deleted_on(&self, type_name: &str, key: &str) -> Option<u64> {
        self.named.get(type_name)?.get(key).copied()
    }

    /// Type → the keys its delete lines name (and that no later line writes again).
    pub fn named(&self) -> impl Iterator<Item = (&str, impl Iterator<Item = &str>)> {
        self.named
            .iter()
            .map(|(name, keys)| (name.as_str(), keys.keys().map(String::as_str)))
    }

    /// The filter of `ty`'s rows this load deletes, if any.
    pub fn predicate(&self, ty: &TypeDef) -> Option<String> {
        fn keys(keys: Option<&Keys>) -> impl Iterator<Item = &str> {
            keys.into_iter().flat_map(|k| k.keys().map(String::as_str))
        }
        let cascade = self.cascades.get(&ty.name);
        removal_filter(
            keys(self.named.get(&ty.name)),
            keys(cascade.map(|(src, _)| src)),
            keys(cascade.map(|(_, dst)| dst)),
        )
    }

    /// The edges this load deletes of every edge type with a `@card`, as
    /// `(edge type, ids)` for the checker (an edge going frees its place under the
    /// maximum), and the lines that break a minimum: a delete may not leave a surviving
    /// source node below it (its edges in the snapshot, less those going and those the
    /// request moves to another source, plus the ones the request writes).
    pub async fn check(
        &self,
        catalog: &Catalog,
        tables: &SnapshotTables<'_>,
        batches: &[TypeBatch],
    ) -> Result<(Vec<(String, Vec<String>)>, Vec<LineError>)> {
        let mut errors = Vec::new();
        let mut going_ids = Vec::new();
        let empty = Keys::new();
        for edge in &catalog.types {
            let Some(ends) = &edge.edge else { continue };
            let Some(card) = ends.card else { continue };
            let Some(filter) = self.predicate(edge) else {
                continue;
            };
            let named = self.named.get(&edge.name).unwrap_or(&empty);
            let (leaving, reaching) = self
                .cascades
                .get(&edge.name)
                .map_or((&empty, &empty), |(src, dst)| (src, dst));
            let table = tables.open(edge).await?;
            let going = edge_rows(&table, &edge.name, &filter).await?;
            going_ids.push((
                edge.name.clone(),
                going.iter().map(|(id, _, _)| id.clone()).collect(),
            ));
            if card.min == 0 {
                continue;
            }
            // Surviving source → (its edges going, the line that takes the first of them).
            let mut losing: HashMap<String, (HashSet<String>, u64)> = HashMap::new();
            for (id, src, dst) in going {
                if leaving.contains_key(&src) {
                    continue;
                }
                let line = named
                    .get(&id)
                    .or_else(|| reaching.get(&dst))
                    .copied()
                    .unwrap_or_default();
                let entry = losing.entry(src).or_insert_with(|| (HashSet::new(), line));
                entry.0.insert(id);
                entry.1 = entry.1.min(line);
            }
            if losing.is_empty() {
                continue;
            }
            // The request's own edges of this type: id → source.
            let mut written: HashMap<&str, &str> = HashMap::new();
            if let Some(batch) = batches.iter().find(|b| b.type_name == edge.name) {
                let ids = string_column(&batch.batch, "id");
                let srcs = string_column(&batch.batch, "src");
                for row in 0..batch.batch.num_rows() {
                    written.insert(ids.value(row), srcs.value(row));
                }
            }
            let sources: Vec<String> = losing.keys().map(|s| quote(s)).collect();
            let kept = edge_rows(
                &table,
                &edge.name,
                &format!("src IN ({})", sources.join(", ")),
            )
            .await?;
            let mut remaining: HashMap<&str, HashSet<&str>> = HashMap::new();
            for (id, src, _) in &kept {
                let going = losing.get(src).is_some_and(|(going, _)| going.contains(id));
                let moved = written.get(id.as_str()).is_some_and(|to| *to != src);
                if !going && !moved {
                    remaining.entry(src).or_default().insert(id);
                }
            }
            for (id, src) in &written {
                remaining.entry(src).or_default().insert(id);
            }
            for (src, (_, line)) in &losing {
                let left = remaining.get(src.as_str()).map_or(0, HashSet::len);
                if (left as u64) < card.min {
                    errors.push(LineError {
                        line: *line,
                        field: None,
                        reason: format!(
                            "deleting here would leave {} `{src}` with {left} {} edge(s); {} @card({card}) needs at least {}",
                            ends.from, edge.name, edge.name, card.min
                        ),
                    });
                }
            }
        }
        Ok((going_ids, errors))
    }
}
