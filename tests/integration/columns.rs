//! A result column's values, for assertions.

use arrow_array::{Array, Int32Array, RecordBatch, StringArray};
use tributary::{At, Graph, ReadOptions};

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

/// The keys of a type at the head, sorted.
pub async fn ids(graph: &Graph, ty: &str) -> Vec<String> {
    let batch = graph.read(ty, &ReadOptions::default()).await.unwrap();
    sorted_strings(&batch, "id")
}

/// A person's age at the head (`None` when the row or its age is missing).
pub async fn age_of(graph: &Graph, key: &str) -> Option<i32> {
    let row = graph.get("Person", key, &At::default()).await.unwrap()?;
    let ages = column::<Int32Array>(&row, "age");
    ages.is_valid(0).then(|| ages.value(0))
}
