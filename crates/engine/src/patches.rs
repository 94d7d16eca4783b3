//! The patches of one request (a load, or one ingest send): each laid over the row it
//! patches, in line order, so what is written is whole rows. A patch after a row or a
//! patch of the same key in the request applies to it; a row or a delete after a patch
//! overrides it; a patch of a key that does not exist (or that an earlier line deletes)
//! is an error of its line.

use std::collections::HashMap;
use std::future::Future;

use arrow_array::{Array, RecordBatch};
use snafu::ResultExt;
use tributary_schema::{patch_rows, Catalog, LineError, TypeBatch, TypeDef, TypePatches};
use tributary_write::lookup::string_column;

use crate::error::{ArrowSnafu, Result};
use crate::removals::Removals;

/// Where the row a patch lays over comes from.
#[derive(Default)]
struct Plan {
    /// Row of the request's own batch → the patches laid over it, in order.
    on_request: Vec<(usize, Vec<usize>)>,
    /// Key the store holds → the patches laid over it, in order.
    on_stored: Vec<(String, Vec<usize>)>,
}

/// Lay `patches` over the rows they patch. `stored` reads the rows a type's keys have
/// where the request is written (the head for a load, the fresh view for a send); a key
/// it does not return does not exist. Returns the batches, patched rows in place of
/// their rows (whole, under the line of their last patch), and the lines of patches that
/// have no row to patch.
pub(crate) async fn apply_patches<'c, F, Fut>(
    catalog: &'c Catalog,
    mut batches: Vec<TypeBatch>,
    removals: &Removals,
    patches: Vec<TypePatches>,
    stored: F,
) -> Result<(Vec<TypeBatch>, Vec<LineError>)>
where
    F: Fn(&'c TypeDef, Vec<String>) -> Fut,
    Fut: Future<Output = Result<RecordBatch>>,
{
    let mut errors = Vec::new();
    for patches in patches {
        let Some(ty) = catalog.get(&patches.rows.type_name) else {
            continue;
        };
        // Decoded under a schema older than the one the write runs with: resent, the
        // lines are read under the new one.
        if patches.rows.batch.num_columns() != tributary_schema::patch_schema(ty).fields().len() {
            return Err(crate::error::Error::SchemaChanging {
                type_name: ty.name.clone(),
            });
        }
        let position = batches.iter().position(|b| b.type_name == ty.name);
        let request_rows: HashMap<&str, usize> = position
            .map(|at| {
                let ids = string_column(&batches[at].batch, "id");
                (0..ids.len()).map(|row| (ids.value(row), row)).collect()
            })
            .unwrap_or_default();
        let mut plan = Plan::default();
        let mut on_request: HashMap<usize, usize> = HashMap::new();
        let mut on_stored: HashMap<String, usize> = HashMap::new();
        let patch_ids = string_column(&patches.rows.batch, "id");
        for (patch, &line) in patches.rows.lines.iter().enumerate() {
            let key = patch_ids.value(patch);
            if let Some(&row) = request_rows.get(key) {
                let row_line = position.map_or(0, |at| batches[at].lines[row]);
                if row_line > line {
                    continue; // a later whole row replaces it
                }
                let slot = *on_request.entry(row).or_insert_with(|| {
                    plan.on_request.push((row, Vec::new()));
                    plan.on_request.len() - 1
                });
                plan.on_request[slot].1.push(patch);
            } else if let Some(deleted_on) = removals.deleted_on(&ty.name, key) {
                if deleted_on < line {
                    errors.push(missing(ty, key, line, "an earlier line deletes it"));
                }
            } else {
                let slot = *on_stored.entry(key.to_owned()).or_insert_with(|| {
                    plan.on_stored.push((key.to_owned(), Vec::new()));
                    plan.on_stored.len() - 1
                });
                plan.on_stored[slot].1.push(patch);
            }
        }
        let mut patched = Vec::new();
        let mut lines = Vec::new();
        let last_line =
            |applied: &[usize]| applied.last().map_or(0, |&patch| patches.rows.lines[patch]);
        if let Some(at) = position.filter(|_| !plan.on_request.is_empty()) {
            let rows = patch_rows(ty, &batches[at].batch, &patches, &plan.on_request).context(
                ArrowSnafu {
                    action: "patch rows",
                },
            )?;
            lines.extend(
                plan.on_request
                    .iter()
                    .map(|(_, applied)| last_line(applied)),
            );
            patched.push(rows);
            // The rows patched are replaced by their patched form.
            let keep: arrow_array::BooleanArray = (0..batches[at].batch.num_rows())
                .map(|row| Some(!on_request.contains_key(&row)))
                .collect();
            let batch = &mut batches[at];
            batch.batch = arrow_select::filter::filter_record_batch(&batch.batch, &keep).context(
                ArrowSnafu {
                    action: "patch rows",
                },
            )?;
            batch.lines = batch
                .lines
                .iter()
                .enumerate()
                .filter(|(row, _)| !on_request.contains_key(row))
                .map(|(_, line)| *line)
                .collect();
        }
        if !plan.on_stored.is_empty() {
            let keys: Vec<String> = plan.on_stored.iter().map(|(k, _)| k.clone()).collect();
            let found = stored(ty, keys).await?;
            let ids = string_column(&found, "id");
            let found_at: HashMap<&str, usize> =
                (0..ids.len()).map(|row| (ids.value(row), row)).collect();
            let mut on_found = Vec::new();
            for (key, applied) in &plan.on_stored {
                match found_at.get(key.as_str()) {
                    Some(&row) => on_found.push((row, applied.clone())),
                    None => errors.push(missing(
                        ty,
                        key,
                        patches.rows.lines[applied[0]],
                        "it does not exist",
                    )),
                }
            }
            if !on_found.is_empty() {
                let rows = patch_rows(ty, &found, &patches, &on_found).context(ArrowSnafu {
                    action: "patch rows",
                })?;
                lines.extend(on_found.iter().map(|(_, applied)| last_line(applied)));
                patched.push(rows);
            }
        }
        if patched.is_empty() {
            continue;
        }
        let schema = ty.arrow_schema();
        let mut parts: Vec<RecordBatch> = Vec::new();
        let mut all_lines = Vec::new();
        if let Some(at) = position {
            parts.push(batches[at].batch.clone());
            all_lines.extend(batches[at].lines.iter().copied());
        }
        parts.extend(patched);
        all_lines.extend(lines);
        let batch = arrow_select::concat::concat_batches(&schema, &parts).context(ArrowSnafu {
            action: "patch rows",
        })?;
        let merged = TypeBatch {
            type_name: ty.name.clone(),
            batch,
            lines: all_lines,
        };
        match position {
            Some(at) => batches[at] = merged,
            None => batches.push(merged),
        }
    }
    errors.sort_by_key(|e| e.line);
    Ok((batches, errors))
}

fn missing(ty: &TypeDef, key: &str, line: u64, why: &str) -> LineError {
    LineError {
        line,
        field: None,
        reason: format!(
            "a patch sets fields of an existing row, but {} `{key}` has none: {why} (write the whole row with \"data\")",
            ty.name
        ),
    }
}
