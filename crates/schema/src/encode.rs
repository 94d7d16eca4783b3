//! Arrow → NDJSON load lines: the inverse of the decoder, so rows read out of a graph load
//! back into another one unchanged. Every declared field is written (a null as `null`, so
//! a nullable field with a default stays null), in the forms the decoder takes: dates as
//! `YYYY-MM-DD`, date-times as RFC 3339 in UTC, vectors and lists as arrays.

use std::fmt::Write as _;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType,
};
use arrow_array::{Array, RecordBatch};
use chrono::{DateTime, NaiveDate, SecondsFormat};

use crate::schema::{FieldType, TypeDef, TypeKind};

/// Append one load line per row of `batch` (rows of `ty`, as its table stores them) to
/// `out`: `{"type":T,"data":{…}}` for a node, `{"edge":E,"from":…,"to":…,"data":{…}}` for
/// an edge. The error names the column that does not hold what the schema declares.
pub fn load_lines(ty: &TypeDef, batch: &RecordBatch, out: &mut String) -> Result<(), String> {
    let column = |name: &str| {
        batch
            .column_by_name(name)
            .ok_or_else(|| format!("{}: the table has no column `{name}`", ty.name))
    };
    let fields = ty
        .fields
        .iter()
        .map(|field| column(&field.name).map(|array| (field, array)))
        .collect::<Result<Vec<_>, _>>()?;
    let ends = match ty.kind {
        TypeKind::Node => None,
        TypeKind::Edge => {
            let strings = |name: &str| {
                column(name)?
                    .as_string_opt::<i32>()
                    .cloned()
                    .ok_or_else(|| format!("{}: column `{name}` is not a string", ty.name))
            };
            Some((strings("src")?, strings("dst")?))
        }
    };
    let name = json_string(&ty.name);
    for row in 0..batch.num_rows() {
        match &ends {
            None => {
                let _ = write!(out, "{{\"type\":{name}");
            }
            Some((src, dst)) => {
                let _ = write!(
                    out,
                    "{{\"edge\":{name},\"from\":{},\"to\":{}",
                    json_string(src.value(row)),
                    json_string(dst.value(row))
                );
            }
        }
        // An edge without properties needs no body.
        if !fields.is_empty() {
            out.push_str(",\"data\":{");
            for (position, (field, array)) in fields.iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                out.push_str(&json_string(&field.name));
                out.push(':');
                value(&field.ty, array.as_ref(), row, out)
                    .map_err(|found| format!("{}.{}: {found}", ty.name, field.name))?;
            }
            out.push('}');
        }
        out.push_str("}\n");
    }
    Ok(())
}

fn json_string(text: &str) -> String {
    // Serializing a string cannot fail.
    serde_json::to_string(text).unwrap_or_default()
}

/// Write the cell at `row` of `array` (a column of type `ty`) as JSON.
fn value(ty: &FieldType, array: &dyn Array, row: usize, out: &mut String) -> Result<(), String> {
    if array.is_null(row) {
        out.push_str("null");
        return Ok(());
    }
    let mismatch = || format!("expected a column of {ty}, found {}", array.data_type());
    match ty {
        FieldType::String | FieldType::Enum(_) => {
            let strings = array.as_string_opt::<i32>().ok_or_else(mismatch)?;
            out.push_str(&json_string(strings.value(row)));
        }
        FieldType::Bool => {
            let bools = array.as_boolean_opt().ok_or_else(mismatch)?;
            out.push_str(if bools.value(row) { "true" } else { "false" });
        }
        FieldType::I32 => {
            let ints = array.as_primitive_opt::<Int32Type>().ok_or_else(mismatch)?;
            let _ = write!(out, "{}", ints.value(row));
        }
        FieldType::I64 => {
            let ints = array.as_primitive_opt::<Int64Type>().ok_or_else(mismatch)?;
            let _ = write!(out, "{}", ints.value(row));
        }
        FieldType::F32 => {
            let floats = array
                .as_primitive_opt::<Float32Type>()
                .ok_or_else(mismatch)?;
            float(
                f64::from(floats.value(row)),
                format!("{:?}", floats.value(row)),
                out,
            )?;
        }
        FieldType::F64 => {
            let floats = array
                .as_primitive_opt::<Float64Type>()
                .ok_or_else(mismatch)?;
            float(floats.value(row), format!("{:?}", floats.value(row)), out)?;
        }
        FieldType::Date => {
            let days = array
                .as_primitive_opt::<Date32Type>()
                .ok_or_else(mismatch)?;
            let date = NaiveDate::from_ymd_opt(1970, 1, 1)
                .and_then(|epoch| {
                    epoch.checked_add_signed(chrono::TimeDelta::days(i64::from(days.value(row))))
                })
                .ok_or_else(|| format!("day {} is out of range", days.value(row)))?;
            let _ = write!(out, "\"{}\"", date.format("%Y-%m-%d"));
        }
        FieldType::DateTime => {
            let micros = array
                .as_primitive_opt::<TimestampMicrosecondType>()
                .ok_or_else(mismatch)?;
            let moment = DateTime::from_timestamp_micros(micros.value(row))
                .ok_or_else(|| format!("{} µs is out of range", micros.value(row)))?;
            let _ = write!(
                out,
                "\"{}\"",
                moment.to_rfc3339_opts(SecondsFormat::AutoSi, true)
            );
        }
        FieldType::Vector(_) => {
            let list = array.as_fixed_size_list_opt().ok_or_else(mismatch)?;
            let items = list.value(row);
            let floats = items
                .as_primitive_opt::<Float32Type>()
                .ok_or_else(mismatch)?;
            out.push('[');
            for (position, item) in floats.iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                let item = item.ok_or("a vector holds a null")?;
                float(f64::from(item), format!("{item:?}"), out)?;
            }
            out.push(']');
        }
        FieldType::List(item) => {
            let list = array.as_list_opt::<i32>().ok_or_else(mismatch)?;
            let items = list.value(row);
            out.push('[');
            for position in 0..items.len() {
                if position > 0 {
                    out.push(',');
                }
                value(item, items.as_ref(), position, out)?;
            }
            out.push(']');
        }
    }
    Ok(())
}

/// A float in its shortest form that reads back as the same value (`0.1`, not
/// `0.10000000149011612` for an `F32`; `1e-300`, not 300 zeros); JSON has no NaN or
/// infinity.
fn float(value: f64, shortest: String, out: &mut String) -> Result<(), String> {
    if !value.is_finite() {
        return Err(format!("{value} cannot be written as JSON"));
    }
    out.push_str(&shortest);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode_str, Catalog};

    const SCHEMA: &str = r#"
node Person {
  name: String @key
  age: I32?
  big: I64 = 7
  score: F32?
  ratio: F64?
  alive: Bool?
  mood: enum(calm, loud)?
  born: Date?
  seen: DateTime?
  tags: [String]?
  nums: [I64]?
  v: Vector(3)?
  nickname: String? = "none"
}
node Company { name: String @key }
edge WorksAt: Person -> Company { since: Date? }
edge Knows: Person -> Person
"#;

    /// Every type and form round-trips: decode, encode, decode again, same batches.
    #[test]
    fn encoded_rows_decode_to_the_same_rows() {
        let catalog = Catalog::parse(SCHEMA).unwrap();
        let input = [
            r#"{"type":"Person","data":{"name":"ada \"the\" first","age":36,"big":-9007199254740993,"score":0.1,"ratio":1e-300,"alive":true,"mood":"calm","born":"1815-12-10","seen":"2024-05-01T12:00:00.123456Z","tags":["a","é"],"nums":[1,-2],"v":[0.1,2.5,-3e-7],"nickname":null}}"#,
            r#"{"type":"Person","data":{"name":"bob"}}"#,
            r#"{"type":"Person","data":{"name":"cy","seen":"2024-05-01T14:00:00+02:00","tags":[]}}"#,
            r#"{"type":"Company","data":{"name":"a->b\\c"}}"#,
            r#"{"edge":"WorksAt","from":"ada \"the\" first","to":"a->b\\c","data":{"since":"2020-02-29"}}"#,
            r#"{"edge":"Knows","from":"bob","to":"cy"}"#,
        ]
        .join("\n");
        let first = decode_str(&catalog, &input);
        assert!(first.rejects.is_empty(), "{:?}", first.rejects);
        let mut text = String::new();
        for batch in &first.batches {
            load_lines(
                catalog.get(&batch.type_name).unwrap(),
                &batch.batch,
                &mut text,
            )
            .unwrap();
        }
        let second = decode_str(&catalog, &text);
        assert!(second.rejects.is_empty(), "{:?}\n{text}", second.rejects);
        assert_eq!(first.batches.len(), 4);
        for (a, b) in first.batches.iter().zip(&second.batches) {
            assert_eq!(a.type_name, b.type_name);
            assert_eq!(a.batch, b.batch, "{}", a.type_name);
        }
        // The shortest forms, and an explicit null that keeps a default from applying.
        assert!(text.contains(r#""score":0.1,"#), "{text}");
        assert!(text.contains(r#""nickname":null"#), "{text}");
        assert!(text.contains(r#""seen":"2024-05-01T12:00:00Z""#), "{text}");
        assert!(
            text.contains(r#"{"edge":"Knows","from":"bob","to":"cy"}"#),
            "{text}"
        );
    }

    /// The ends of F32: its largest value exports in a form that reads back as itself;
    /// a vector element or a scalar past it is refused when written, never stored as
    /// infinity.
    #[test]
    fn the_largest_f32_round_trips_and_past_it_is_refused() {
        let catalog = Catalog::parse(SCHEMA).unwrap();
        let largest = decode_str(
            &catalog,
            r#"{"type":"Person","data":{"name":"a","score":3.4028234e38,"v":[3.4028234e38,0,0]}}"#,
        );
        assert!(largest.rejects.is_empty(), "{:?}", largest.rejects);
        let mut text = String::new();
        load_lines(
            catalog.get("Person").unwrap(),
            &largest.batches[0].batch,
            &mut text,
        )
        .unwrap();
        let again = decode_str(&catalog, &text);
        assert!(again.rejects.is_empty(), "{:?}\n{text}", again.rejects);
        assert_eq!(again.batches[0].batch, largest.batches[0].batch);
        for past in [r#""score":1e39"#, r#""v":[1e39,0,0]"#] {
            let line = format!(r#"{{"type":"Person","data":{{"name":"b",{past}}}}}"#);
            let refused = decode_str(&catalog, &line);
            assert_eq!(refused.rejects.len(), 1, "{past}");
            assert!(
                refused.rejects[0].reason.contains("overflows F32"),
                "{:?}",
                refused.rejects
            );
        }
    }

    #[test]
    fn a_column_of_another_type_is_named() {
        let catalog = Catalog::parse(SCHEMA).unwrap();
        let person = catalog.get("Person").unwrap();
        let company = catalog.get("Company").unwrap();
        let decoded = decode_str(&catalog, r#"{"type":"Company","data":{"name":"x"}}"#);
        let error = load_lines(person, &decoded.batches[0].batch, &mut String::new()).unwrap_err();
        assert!(
            error.contains("Person: the table has no column `age`"),
            "{error}"
        );
        let mut text = String::new();
        load_lines(company, &decoded.batches[0].batch, &mut text).unwrap();
        assert_eq!(text, "{\"type\":\"Company\",\"data\":{\"name\":\"x\"}}\n");
    }
}
