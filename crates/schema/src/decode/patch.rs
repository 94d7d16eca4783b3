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
/// setting a field wins. An edge's patch also sets its ends.
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
    let mut columns = Vec::with_capacity(base.num_columns());
    for column in 0..base.num_columns() {
        let picks: Vec<(usize, usize)> = plan
            .iter()
            .map(|(row, applied)| {
                let from_patch = applied.iter().rev().find(|&&patch| match column {
                    0 => false,
                    c if c < system => true,
                    c => patches.set[patch][c - system],
                });
                match from_patch {
                    Some(&patch) => (1, patch),
                    None => (0, *row),
                }
            })
            .collect();
        let sources: [&dyn Array; 2] = [
            base.column(column).as_ref(),
            patches.rows.batch.column(column).as_ref(),
        ];
        columns.push(arrow_select::interleave::interleave(&sources, &picks)?);
    }
    RecordBatch::try_new(base.schema(), columns)
}
