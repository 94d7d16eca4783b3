//! The keys a refused merge names: what its error and its answer carry (a leaf, so the
//! error model does not import the merge).

use std::fmt;

/// A key changed on both sides, differently.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ConflictKey {
    pub type_name: String,
    pub key: String,
    /// What the merged branch did with it, and what the target did: `changed` or `deleted`.
    pub source_change: String,
    pub target_change: String,
    /// A changed row's fields that differ from the other side's (`age: 37`); absent for
    /// a side that deleted the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_value: Option<String>,
}

impl fmt::Display for ConflictKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = |value: &Option<String>| match value {
            Some(value) if !value.is_empty() => format!(" ({value})"),
            _ => String::new(),
        };
        write!(
            f,
            "{} `{}`: {} on the merged branch{}, {} on the target{}",
            self.type_name,
            self.key,
            self.source_change,
            value(&self.source_value),
            self.target_change,
            value(&self.target_value)
        )
    }
}

/// A change the merge would make that breaks a constraint on the target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokenKey {
    /// `Type `key``, or the edge a deleted node would strand.
    pub what: String,
    pub reason: String,
}

impl fmt::Display for BrokenKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.reason)
    }
}
