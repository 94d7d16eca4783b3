//! Query parameters (`$name`): JSON values, written into the SQL as literals (quoted, so a
//! value is never read as SQL).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::quote::string_literal;

/// Parameter name → value.
pub type Params = BTreeMap<String, Value>;

/// `name=value` from a command line: the value as JSON when it reads as JSON (`36`,
/// `true`, `"ada"`, `["a","b"]`), otherwise as the string it is (`ada`).
pub fn parse_assignment(assignment: &str) -> Result<(String, Value)> {
    let Some((name, value)) = assignment.split_once('=') else {
        return Err(Error::refused(format!(
            "`{assignment}` is not a parameter: write NAME=VALUE (`--param name=ada`, `--param age=36`)"
        )));
    };
    let name = name.trim().trim_start_matches('$');
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return Err(Error::refused(format!(
            "`{name}` is not a parameter name: letters, digits and `_`"
        )));
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
    Ok((name.to_owned(), value))
}

/// The SQL literal of parameter `name`'s value.
pub(crate) fn json_sql(name: &str, value: &Value) -> Result<String> {
    Ok(match value {
        Value::Null => "NULL".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string_literal(s),
        Value::Array(items) => {
            let items: Vec<String> = items
                .iter()
                .map(|v| json_sql(name, v))
                .collect::<Result<_>>()?;
            format!("make_array({})", items.join(", "))
        }
        Value::Object(_) => {
            return Err(Error::refused(format!(
            "parameter `${name}` is a map: a parameter is a string, number, boolean, null or list"
        )))
        }
    })
}
