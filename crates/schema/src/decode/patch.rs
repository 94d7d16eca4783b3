//! Patches: a row's key and some of its fields, laid over the row it patches.

use std::sync::Arc;

use arrow_array::{Array, RecordBatch};
use arrow_schema::{ArrowError, Schema, SchemaRef};

use super::TypePatches;
use crate::schema::{TypeDef, TypeKind};

/// The schema of a type's patches: the type's own, every field nullable (a patch sets
/// only some).
pub fn patch_schema(def: &TypeDef) -> SchemaRef {
    let schema = def.arrow_schema();
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .map(|field| field.as_ref().clone().with_nullable(true))
        .collect();
    Arc::new(Schema::new(fields))
}

/// Whole rows of `def` from rows it already has and the patches laid over them: row `j`
/// of the result is row `plan[j].0` of `base` (in the type's schema) with every field the
/// patches `plan[j].1` (rows of `patches`, in the order they apply) set; the last patch
/// setting a field wins. An edge's patch also sets its ends. A patch that sets the text an
/// `@embed` field embeds, and not the field, empties the field: the fold embeds the new
/// text, where the old vector would have stayed beside it.
pub fn patch_rows(
    def: &TypeDef,
    base: &RecordBatch,
    patches: &TypePatches,
    plan: &[(usize, Vec<usize>)],
) -> Result<RecordBatch, ArrowError> {
    let system = match def.kind {
        TypeKind::Node => 1,
        TypeKind::Edge => 3,
    };
    let field_index = |name: &str| def.fields.iter().position(|f| f.name == name);
    let mut columns = Vec::with_capacity(base.num_columns());
    for column in 0..base.num_columns() {
        let embeds = column
            .checked_sub(system)
            .and_then(|f| def.fields.get(f))
            .and_then(|f| f.embed.as_deref())
            .and_then(field_index);
        let picks: Vec<(usize, usize)> = plan
            .iter()
            .map(|(row, applied)| {
                let from_patch = applied.iter().rev().find(|&&patch| match column {
                    0 => false,
                    c if c < system => true,
                    c => patches.set[patch][c - system],
                });
                let text_changed = embeds
                    .is_some_and(|source| applied.iter().any(|&patch| patches.set[patch][source]));
                match from_patch {
                    Some(&patch) => (1, patch),
                    None if text_changed => (2, 0),
                    None => (0, *row),
                }
            })
            .collect();
        let empty = arrow_array::new_null_array(base.column(column).data_type(), 1);
        let sources: [&dyn Array; 3] = [
            base.column(column).as_ref(),
            patches.rows.batch.column(column).as_ref(),
            empty.as_ref(),
        ];
        columns.push(arrow_select::interleave::interleave(&sources, &picks)?);
    }
    RecordBatch::try_new(base.schema(), columns)
}
