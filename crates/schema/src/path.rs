//! [`TablePath`]: where a table lives, as a type of its own, so a table's path is never
//! taken for a type name, a branch or a commit id on its way through the layers.

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

/// A table's location relative to the graph root: `nodes/<Type>.lance`,
/// `edges/<Type>.lance`, or one of the graph's own tables (the dead letters). Only the
/// catalog and the graph's own constants make new ones; the rest come back from the
/// manifest as they were written.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(transparent)]
#[schema(value_type = String)]
pub struct TablePath(Cow<'static, str>);

impl TablePath {
    /// A path fixed at compile time (the graph's own tables).
    pub const fn from_static(path: &'static str) -> TablePath {
        TablePath(Cow::Borrowed(path))
    }

    pub(crate) fn new(path: String) -> TablePath {
        TablePath(Cow::Owned(path))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for TablePath {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for TablePath {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for TablePath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TablePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for TablePath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for TablePath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl From<TablePath> for String {
    fn from(path: TablePath) -> String {
        path.0.into_owned()
    }
}
