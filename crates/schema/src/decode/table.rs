//! Per-type row accumulation: the `id` (and `src`/`dst`) columns plus one column per field.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;

use super::columns::Column;
use super::{TypeBatch, TypePatches};
use crate::schema::value::{convert_field, default_as_json, Cell};
use crate::schema::{TypeDef, TypeKind};

/// A key value in the form the `id` column is derived from.
#[derive(Debug, Clone)]
pub(crate) enum KeyValue<'a> {
    Text(Cow<'a, str>),
    Int(i64),
}

impl<'a> KeyValue<'a> {
    pub fn from_cell(cell: &Cell<'a>) -> Option<KeyValue<'a>> {
        match cell {
            Cell::Str(text) => Some(KeyValue::Text(text.clone())),
            Cell::Int(value) => Some(KeyValue::Int(*value)),
            _ => None,
        }
    }

    /// The row id this key becomes.
    pub fn id(&self) -> String {
        match self {
            KeyValue::Text(text) => text.to_string(),
            KeyValue::Int(value) => value.to_string(),
        }
    }

    fn write_to(&self, builder: &mut StringBuilder) {
        // Writing into a StringBuilder cannot fail.
        let _ = match self {
            KeyValue::Text(text) => builder.write_str(text),
            KeyValue::Int(value) => write!(builder, "{value}"),
        };
    }
}

/// A fully validated line, waiting to be appended.
pub(crate) struct StagedRow<'a> {
    pub table: usize,
    /// The `@key` value, when the type has one.
    pub key: Option<KeyValue<'a>>,
    /// `(src, dst)` for edges.
    pub endpoints: Option<(Cow<'a, str>, Cow<'a, str>)>,
    /// One entry per declared field; `None` means absent (default or null applies).
    pub cells: Vec<Option<Cell<'a>>>,
}

pub(crate) struct TableBuilder<'c> {
    pub def: &'c TypeDef,
    schema: SchemaRef,
    ids: StringBuilder,
    sources: StringBuilder,
    targets: StringBuilder,
    columns: Vec<Column>,
    /// Converted `= default` per field, computed once.
    defaults: Vec<Option<Cell<'c>>>,
    /// Position of the `@key` field in `def.fields`.
    pub key_index: Option<usize>,
    lines: Vec<u64>,
    /// Patches: per row, which fields it sets (`None` for rows, whose absent fields take
    /// their default or null).
    set: Option<Vec<Vec<bool>>>,
}

impl<'c> TableBuilder<'c> {
    pub fn new(def: &'c TypeDef) -> TableBuilder<'c> {
        let defaults = def
            .fields
            .iter()
            .map(|field| {
                // Lowering already ran every default through `convert_field`; a hand-built
                // catalog with a bad default simply behaves as if it had none.
                let default = field.default.as_ref()?;
                convert_field(field, default_as_json(default)).ok()
            })
            .collect();
        TableBuilder {
            def,
            schema: def.arrow_schema(),
            ids: StringBuilder::new(),
            sources: StringBuilder::new(),
            targets: StringBuilder::new(),
            columns: def
                .fields
                .iter()
                .map(|field| Column::new(&field.ty))
                .collect(),
            defaults,
            key_index: def
                .key
                .as_ref()
                .and_then(|key| def.fields.iter().position(|field| field.name == *key)),
            lines: Vec::new(),
            set: None,
        }
    }

    /// A builder of patches: every field nullable, no defaults (a field a patch does not
    /// set is null, and flagged unset).
    pub fn for_patches(def: &'c TypeDef) -> TableBuilder<'c> {
        let mut builder = TableBuilder::new(def);
        builder.defaults = def.fields.iter().map(|_| None).collect();
        builder.schema = super::patch_schema(def);
        builder.set = Some(Vec::new());
        builder
    }

    pub fn has_default(&self, field_index: usize) -> bool {
        self.defaults.get(field_index).is_some_and(Option::is_some)
    }

    pub fn row_count(&self) -> usize {
        self.lines.len()
    }

    pub fn append(&mut self, line: u64, row: StagedRow<'_>) {
        match (&row.key, &row.endpoints) {
            (Some(key), _) => key.write_to(&mut self.ids),
            (None, Some((src, dst))) => {
                let _ = self.ids.write_str(&super::edge_id(src, dst));
            }
            // Staging refuses rows with neither; keep the columns aligned regardless.
            (None, None) => {}
        }
        self.ids.append_value("");
        if let Some((src, dst)) = &row.endpoints {
            self.sources.append_value(src);
            self.targets.append_value(dst);
        }
        if let Some(set) = &mut self.set {
            set.push(row.cells.iter().map(Option::is_some).collect());
        }
        for ((column, cell), default) in self.columns.iter_mut().zip(&row.cells).zip(&self.defaults)
        {
            match (cell, default) {
                (Some(cell), _) => column.append(cell),
                (None, Some(default)) => column.append(default),
                (None, None) => column.append_null(),
            }
        }
        self.lines.push(line);
    }

    /// The patches appended so far, and reset for reuse.
    pub fn finish_patches(&mut self) -> TypePatches {
        let set = self.set.as_mut().map(std::mem::take).unwrap_or_default();
        TypePatches {
            rows: self.finish(),
            set,
        }
    }

    /// Build the batch of everything appended so far and reset for reuse.
    pub fn finish(&mut self) -> TypeBatch {
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        arrays.push(Arc::new(self.ids.finish()));
        if self.def.kind == TypeKind::Edge {
            arrays.push(Arc::new(self.sources.finish()));
            arrays.push(Arc::new(self.targets.finish()));
        }
        arrays.extend(self.columns.iter_mut().map(Column::finish));
        #[expect(
            clippy::expect_used,
            reason = "the builders are made from the schema's fields"
        )]
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)
            .expect("column builders are derived from the same field types as the schema");
        TypeBatch {
            type_name: self.def.name.clone(),
            batch,
            lines: std::mem::take(&mut self.lines),
        }
    }
}
