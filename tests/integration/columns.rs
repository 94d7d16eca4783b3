//! A result column's values, for assertions.

use arrow_array::{Array, Int32Array, RecordBatch, StringArray};

pub fn column<'b, T: 'static>(batch: &'b RecordBatch, column: &str) -> &'b T {
    batch
        .column_by_name(column)
        .unwrap_or_else(|| panic!("no column {column}"))
        .as_any()
        .downcast_ref::<T>()
        .unwrap_or_else(|| panic!("column {column} has another type"))
}

/// A string column's non-null values, in row order.
pub fn strings(batch: &RecordBatch, name: &str) -> Vec<String> {
    column::<StringArray>(batch, name)
        .iter()
        .flatten()
        .map(str::to_owned)
        .collect()
}

/// A string column's non-null values, sorted.
pub fn sorted_strings(batch: &RecordBatch, name: &str) -> Vec<String> {
    let mut values = strings(batch, name);
    values.sort();
    values
}

/// An i32 column's non-null values, in row order.
pub fn ints(batch: &RecordBatch, name: &str) -> Vec<i32> {
    column::<Int32Array>(batch, name).iter().flatten().collect()
}
