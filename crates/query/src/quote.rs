//! How names and values are written into SQL text: quoted, so a name keeps its case and a
//! value is never read as SQL.

/// `name` as a SQL identifier (quoted: names keep their case).
pub(crate) fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `value` as a SQL string literal.
pub(crate) fn string_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}
