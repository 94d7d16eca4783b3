//! Rows written under an older schema, brought to the current one: a field the schema
//! added since is filled with its default, or null.

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::ArrowError;

use super::columns::Column;
use crate::schema::value::{convert_field, default_as_json};
use crate::schema::TypeDef;

/// `rows` copies of `field`'s default, or nulls.
fn filled(declared: &crate::schema::FieldDef, rows: usize) -> ArrayRef {
    let default = declared
        .default
        .as_ref()
        .and_then(|value| convert_field(declared, default_as_json(value)).ok());
    let mut column = Column::new(&declared.ty);
    for _ in 0..rows {
        match &default {
            Some(cell) => column.append(cell),
            None => column.append_null(),
        }
    }
    column.finish()
}

/// `batch` (rows of `def` under an older schema, or the current one) with every column of
/// `def`'s current table schema, in its order: a column the batch lacks is the field's
/// default for every row, or null, and a null in a required field with a default (a row
/// stored, or replayed from a WAL, before the field existed) is the default. A batch that
/// needs none of that comes back as it is.
pub fn conform(def: &TypeDef, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let schema = def.arrow_schema();
    let current = batch.schema();
    let defaulted_nulls = def.fields.iter().any(|field| {
        !field.nullable
            && field.default.is_some()
            && batch
                .column_by_name(&field.name)
                .is_some_and(|column| column.null_count() > 0)
    });
    if !defaulted_nulls
        && current.fields().len() == schema.fields().len()
        && current
            .fields()
            .iter()
            .zip(schema.fields())
            .all(|(have, want)| have.name() == want.name())
    {
        return Ok(batch.clone());
    }
    let rows = batch.num_rows();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        if let Some(column) = batch.column_by_name(field.name()) {
            let declared = def
                .field(field.name())
                .filter(|f| !f.nullable && f.default.is_some() && column.null_count() > 0);
            match declared {
                Some(declared) => {
                    let present = arrow_array::BooleanArray::from(
                        (0..rows).map(|i| column.is_valid(i)).collect::<Vec<_>>(),
                    );
                    let defaults = filled(declared, rows);
                    columns.push(arrow_select::zip::zip(&present, column, &defaults)?);
                }
                None => columns.push(column.clone()),
            }
            continue;
        }
        let Some(declared) = def.field(field.name()) else {
            return Err(ArrowError::SchemaError(format!(
                "rows of {} have no column `{}`",
                def.name,
                field.name()
            )));
        };
        columns.push(filled(declared, rows));
    }
    RecordBatch::try_new(schema, columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;
    use arrow_array::{Array, StringArray};

    #[test]
    fn an_older_batch_gains_defaults_and_nulls() {
        let old = Catalog::parse("node P { name: String @key }").unwrap();
        let new =
            Catalog::parse("node P {\n name: String @key\n status: enum(a, b) = b\n age: I32?\n}")
                .unwrap();
        let decoded = crate::decode_str(&old, r#"{"type":"P","data":{"name":"x"}}"#);
        let batch = &decoded.batches[0].batch;
        let conformed = conform(&new.types[0], batch).unwrap();
        assert_eq!(conformed.schema(), new.types[0].arrow_schema());
        let status = conformed
            .column_by_name("status")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(status.value(0), "b");
        assert!(conformed.column_by_name("age").unwrap().is_null(0));
        // A current batch is untouched.
        assert_eq!(conform(&new.types[0], &conformed).unwrap(), conformed);
    }

    #[test]
    fn a_null_in_a_required_defaulted_field_takes_the_default() {
        let def = &Catalog::parse("node P {\n name: String @key\n level: I32 = 3\n}")
            .unwrap()
            .types[0];
        let replayed = RecordBatch::try_new(
            std::sync::Arc::new(arrow_schema::Schema::new(vec![
                arrow_schema::Field::new("id", arrow_schema::DataType::Utf8, false),
                arrow_schema::Field::new("name", arrow_schema::DataType::Utf8, false),
                arrow_schema::Field::new("level", arrow_schema::DataType::Int32, true),
            ])),
            vec![
                std::sync::Arc::new(StringArray::from(vec!["a", "b"])),
                std::sync::Arc::new(StringArray::from(vec!["a", "b"])),
                std::sync::Arc::new(arrow_array::Int32Array::from(vec![None, Some(7)])),
            ],
        )
        .unwrap();
        let conformed = conform(def, &replayed).unwrap();
        let level = conformed
            .column_by_name("level")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::Int32Array>()
            .unwrap();
        assert_eq!(level.values().to_vec(), [3, 7]);
        assert_eq!(level.null_count(), 0);
    }
}
