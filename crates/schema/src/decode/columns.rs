//! Typed Arrow column builders, one per declared field. Vectors and lists are built by
//! hand (values + offsets + validity) so that nesting works for any item type without
//! boxing builders behind `dyn ArrayBuilder`.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Date32Builder, Float32Builder, Float64Builder, Int32Builder,
    Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array, ListArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef};

use crate::schema::value::Cell;
use crate::schema::FieldType;

pub(crate) enum Column {
    Utf8(StringBuilder),
    Bool(BooleanBuilder),
    I32(Int32Builder),
    I64(Int64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    Vector {
        item: FieldRef,
        dimension: usize,
        values: Vec<f32>,
        validity: NullBufferBuilder,
    },
    List {
        item: FieldRef,
        /// Always starts with 0; one more entry per row.
        offsets: Vec<i32>,
        items: Box<Column>,
        validity: NullBufferBuilder,
    },
}

/// Rows a validity bitmap starts with room for; it grows as needed.
const INITIAL_ROWS: usize = 1024;

impl Column {
    pub fn new(ty: &FieldType) -> Column {
        match ty {
            FieldType::String | FieldType::Enum(_) => Column::Utf8(StringBuilder::new()),
            FieldType::Bool => Column::Bool(BooleanBuilder::new()),
            FieldType::I32 => Column::I32(Int32Builder::new()),
            FieldType::I64 => Column::I64(Int64Builder::new()),
            FieldType::F32 => Column::F32(Float32Builder::new()),
            FieldType::F64 => Column::F64(Float64Builder::new()),
            FieldType::Date => Column::Date(Date32Builder::new()),
            FieldType::DateTime => {
                Column::Timestamp(TimestampMicrosecondBuilder::new().with_timezone("UTC"))
            }
            FieldType::Vector(dimension) => Column::Vector {
                item: Arc::new(Field::new("item", DataType::Float32, true)),
                dimension: *dimension,
                values: Vec::new(),
                validity: NullBufferBuilder::new(INITIAL_ROWS),
            },
            FieldType::List(item_type) => Column::List {
                item: Arc::new(Field::new("item", item_type.arrow_type(), true)),
                offsets: vec![0],
                items: Box::new(Column::new(item_type)),
                validity: NullBufferBuilder::new(INITIAL_ROWS),
            },
        }
    }

    /// Append one converted value. `convert` produced the cell for this very field type, so
    /// a mismatch is a bug in this crate; it is appended as null rather than panicking.
    pub fn append(&mut self, cell: &Cell<'_>) {
        match (self, cell) {
            (column, Cell::Null) => column.append_null(),
            (Column::Utf8(builder), Cell::Str(text)) => builder.append_value(text),
            (Column::Bool(builder), Cell::Bool(value)) => builder.append_value(*value),
            // Range-checked against i32 during conversion.
            (Column::I32(builder), Cell::Int(value)) => builder.append_value(*value as i32),
            (Column::I64(builder), Cell::Int(value)) => builder.append_value(*value),
            (Column::F32(builder), Cell::Float(value)) => builder.append_value(*value as f32),
            (Column::F64(builder), Cell::Float(value)) => builder.append_value(*value),
            // Days since the epoch, checked by the date parser to be a real date.
            (Column::Date(builder), Cell::Int(days)) => builder.append_value(*days as i32),
            (Column::Timestamp(builder), Cell::Int(micros)) => builder.append_value(*micros),
            (
                Column::Vector {
                    dimension,
                    values,
                    validity,
                    ..
                },
                Cell::Vector(vector),
            ) if vector.len() == *dimension => {
                values.extend_from_slice(vector);
                validity.append_non_null();
            }
            (
                Column::List {
                    offsets,
                    items,
                    validity,
                    ..
                },
                Cell::List(cells),
            ) => {
                for item in cells {
                    items.append(item);
                }
                offsets.push(list_offset(items.len()));
                validity.append_non_null();
            }
            (column, _) => {
                debug_assert!(false, "cell does not match its column type");
                column.append_null();
            }
        }
    }

    pub fn append_null(&mut self) {
        match self {
            Column::Utf8(builder) => builder.append_null(),
            Column::Bool(builder) => builder.append_null(),
            Column::I32(builder) => builder.append_null(),
            Column::I64(builder) => builder.append_null(),
            Column::F32(builder) => builder.append_null(),
            Column::F64(builder) => builder.append_null(),
            Column::Date(builder) => builder.append_null(),
            Column::Timestamp(builder) => builder.append_null(),
            Column::Vector {
                dimension,
                values,
                validity,
                ..
            } => {
                // A fixed-size list keeps `dimension` child slots even for a null row.
                values.resize(values.len() + *dimension, 0.0);
                validity.append_null();
            }
            Column::List {
                offsets,
                validity,
                items,
                ..
            } => {
                offsets.push(list_offset(items.len()));
                validity.append_null();
            }
        }
    }

    /// Number of rows appended since the last `finish`.
    pub fn len(&self) -> usize {
        match self {
            Column::Utf8(builder) => builder.len(),
            Column::Bool(builder) => builder.len(),
            Column::I32(builder) => builder.len(),
            Column::I64(builder) => builder.len(),
            Column::F32(builder) => builder.len(),
            Column::F64(builder) => builder.len(),
            Column::Date(builder) => builder.len(),
            Column::Timestamp(builder) => builder.len(),
            Column::Vector { validity, .. } | Column::List { validity, .. } => validity.len(),
        }
    }

    /// Build the array and reset the builder for reuse.
    pub fn finish(&mut self) -> ArrayRef {
        match self {
            Column::Utf8(builder) => Arc::new(builder.finish()),
            Column::Bool(builder) => Arc::new(builder.finish()),
            Column::I32(builder) => Arc::new(builder.finish()),
            Column::I64(builder) => Arc::new(builder.finish()),
            Column::F32(builder) => Arc::new(builder.finish()),
            Column::F64(builder) => Arc::new(builder.finish()),
            Column::Date(builder) => Arc::new(builder.finish()),
            Column::Timestamp(builder) => Arc::new(builder.finish()),
            Column::Vector {
                item,
                dimension,
                values,
                validity,
            } => {
                let values = Float32Array::from(std::mem::take(values));
                Arc::new(FixedSizeListArray::new(
                    item.clone(),
                    i32::try_from(*dimension).unwrap_or(i32::MAX),
                    Arc::new(values),
                    validity.finish(),
                ))
            }
            Column::List {
                item,
                offsets,
                items,
                validity,
            } => {
                let offsets = std::mem::replace(offsets, vec![0]);
                Arc::new(ListArray::new(
                    item.clone(),
                    OffsetBuffer::new(ScalarBuffer::from(offsets)),
                    items.finish(),
                    validity.finish(),
                ))
            }
        }
    }
}

/// List offsets are i32 (Arrow `List`, not `LargeList`); more than 2^31 list items in one
/// batch would need tens of gigabytes of rows, so running out is treated as a bug.
#[expect(
    clippy::expect_used,
    reason = "2^31 list items in one batch is beyond any batch size"
)]
fn list_offset(item_count: usize) -> i32 {
    i32::try_from(item_count).expect("list column exceeds 2^31 items in one batch")
}
