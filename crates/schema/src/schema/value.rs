//! JSON value → validated cell for one declared field. Shared by the decoder and by schema
//! lowering (which runs every `= default` through it, so a default can never fail at
//! decode time).

use super::json::{quote, Json};
use crate::schema::{DefaultValue, FieldDef, FieldType};
use chrono::{DateTime, Datelike, NaiveDate};
use std::borrow::Cow;

/// `NaiveDate::num_days_from_ce()` of 1970-01-01: Date32 counts days from the Unix epoch.
const UNIX_EPOCH_DAYS_FROM_CE: i32 = 719_163;

/// A converted value, ready to append to the column of its field. Dates are days since
/// the epoch and DateTimes microseconds since the epoch, both in `Int`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Cow<'a, str>),
    Vector(Vec<f32>),
    List(Vec<Cell<'a>>),
}

/// Convert a non-null JSON value for `field`: type, overflow, enum, `@range` and `@check`.
/// Null handling is the caller's: it depends on nullability and on where the null is.
/// The error is the human reason, without line or field (the caller adds them).
pub(crate) fn convert_field<'a>(field: &FieldDef, value: Json<'a>) -> Result<Cell<'a>, String> {
    let cell = convert_type(&field.ty, value)?;
    if let Some(range) = &field.range {
        let inside = match cell {
            Cell::Int(value) => range.contains_int(value),
            Cell::Float(value) => range.contains_float(value),
            _ => true,
        };
        if !inside {
            let shown = match cell {
                Cell::Int(value) => value.to_string(),
                // Debug keeps large and tiny floats short (1e39, not 40 digits).
                Cell::Float(value) => format!("{value:?}"),
                _ => String::new(),
            };
            return Err(format!("{shown} is outside {range}"));
        }
    }
    if let (Some(check), Cell::Str(text)) = (&field.check, &cell) {
        if !check.is_match(text) {
            return Err(format!("{} does not match {check}", quote(text)));
        }
    }
    Ok(cell)
}

fn convert_type<'a>(ty: &FieldType, value: Json<'a>) -> Result<Cell<'a>, String> {
    Ok(match (ty, value) {
        (FieldType::String, Json::Str(text)) => Cell::Str(text),
        (FieldType::Bool, Json::Bool(value)) => Cell::Bool(value),
        (FieldType::I32, Json::Int(value)) => match i32::try_from(value) {
            Ok(_) => Cell::Int(value),
            Err(_) => return Err(overflow(value, ty)),
        },
        (FieldType::I64, Json::Int(value)) => Cell::Int(value),
        (FieldType::I32 | FieldType::I64, Json::BigUint(value)) => return Err(overflow(value, ty)),
        (
            FieldType::F32 | FieldType::F64,
            number @ (Json::Int(_) | Json::BigUint(_) | Json::Float(_)),
        ) => {
            let value = as_f64(&number).unwrap_or_default();
            // What overflows is what has no nearest F32: a number that rounds to F32's
            // largest is that largest (an export writes it as 3.4028235e38). `@range` is
            // checked on the number as written.
            if *ty == FieldType::F32 && (value as f32).is_infinite() {
                return Err(overflow(format!("{value:?}"), ty));
            }
            Cell::Float(value)
        }
        (FieldType::Enum(variants), Json::Str(text)) => {
            if !variants.iter().any(|variant| *variant == *text) {
                return Err(format!(
                    "expected one of {}, found {}",
                    variants.join(", "),
                    quote(&text)
                ));
            }
            Cell::Str(text)
        }
        (FieldType::Date, Json::Str(text)) => match parse_date(&text) {
            Some(days) => Cell::Int(i64::from(days)),
            None => {
                return Err(format!(
                    "{} is not a valid Date (expected YYYY-MM-DD)",
                    quote(&text)
                ))
            }
        },
        (FieldType::DateTime, Json::Str(text)) => match DateTime::parse_from_rfc3339(&text) {
            Ok(moment) => Cell::Int(moment.timestamp_micros()),
            Err(_) => {
                return Err(format!(
                    "{} is not a valid DateTime (expected RFC 3339, e.g. 2024-05-01T12:00:00Z)",
                    quote(&text)
                ))
            }
        },
        (FieldType::Vector(dimension), Json::Array(items)) => {
            if items.len() != *dimension {
                return Err(format!(
                    "expected {ty} with {dimension} numbers, found {}",
                    items.len()
                ));
            }
            let mut vector = Vec::with_capacity(items.len());
            for (position, item) in items.iter().enumerate() {
                match as_f64(item) {
                    // A vector holds F32s: one too large for them is refused, not stored
                    // as infinity (which no reader, and no export, can use).
                    Some(value) if (value as f32).is_infinite() => {
                        return Err(format!("element {position}: {value:?} overflows F32"))
                    }
                    Some(value) => vector.push(value as f32),
                    None => {
                        return Err(format!(
                            "element {position}: expected a number, found {}",
                            item.describe()
                        ))
                    }
                }
            }
            Cell::Vector(vector)
        }
        (FieldType::List(item_type), Json::Array(items)) => {
            let mut cells = Vec::with_capacity(items.len());
            for (position, item) in items.into_iter().enumerate() {
                // List items are nullable in the Arrow schema, so a null item is kept.
                let cell = match item {
                    Json::Null => Cell::Null,
                    item => convert_type(item_type, item)
                        .map_err(|reason| format!("item {position}: {reason}"))?,
                };
                cells.push(cell);
            }
            Cell::List(cells)
        }
        (ty, other) => return Err(format!("expected {ty}, found {}", other.describe())),
    })
}

fn as_f64(value: &Json<'_>) -> Option<f64> {
    match *value {
        Json::Int(value) => Some(value as f64),
        Json::BigUint(value) => Some(value as f64),
        Json::Float(value) => Some(value),
        _ => None,
    }
}

fn overflow(value: impl std::fmt::Display, ty: &FieldType) -> String {
    format!("{value} overflows {ty}")
}

/// Strict `YYYY-MM-DD` → days since 1970-01-01. Hand-rolled because chrono's format-string
/// parser costs several times more per value and dates are common columns.
fn parse_date(text: &str) -> Option<i32> {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        bytes[range].iter().try_fold(0u32, |total, byte| {
            byte.is_ascii_digit()
                .then(|| total * 10 + u32::from(byte - b'0'))
        })
    };
    let year = i32::try_from(digits(0..4)?).ok()?;
    let date = NaiveDate::from_ymd_opt(year, digits(5..7)?, digits(8..10)?)?;
    Some(date.num_days_from_ce() - UNIX_EPOCH_DAYS_FROM_CE)
}

/// The JSON a default would have been written as, so defaults go through `convert_field`.
pub(crate) fn default_as_json(default: &DefaultValue) -> Json<'_> {
    match default {
        DefaultValue::Bool(value) => Json::Bool(*value),
        DefaultValue::Int(value) => Json::Int(*value),
        DefaultValue::Float(value) => Json::Float(*value),
        DefaultValue::String(text) => Json::Str(Cow::Borrowed(text)),
        DefaultValue::List(items) => Json::Array(items.iter().map(default_as_json).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_date;

    #[test]
    fn dates_count_days_from_the_unix_epoch() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("2020-01-01"), Some(18262));
        assert_eq!(parse_date("2020-02-30"), None);
        assert_eq!(parse_date("2020-1-01"), None);
        assert_eq!(parse_date("2020-01-0x"), None);
    }
}
