//! The names a commit chain is addressed by, as types: a [`BranchName`] is checked once,
//! where it enters (a command-line argument, an HTTP query, an API call), and every layer
//! below carries it as is; a [`CommitId`] is never confused with a branch or a path.

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The branch every graph starts with.
pub const MAIN_BRANCH: &str = "main";

/// The longest branch name.
const MAX_BRANCH_LEN: usize = 64;

/// A branch name: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`, not
/// ending with `.`, without `..`. It names
/// manifest keys and lease folders, so nothing that could leave its folder or read as an
/// option passes.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(try_from = "String", into = "String")]
pub struct BranchName(String);

/// Why a text is not a branch name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBranchName {
    pub name: String,
}

impl fmt::Display for InvalidBranchName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a branch name: use 1 to {MAX_BRANCH_LEN} ASCII letters, digits, `.`, `_` or `-`, not starting with `.` or `-`, not ending with `.`, without `..`",
            self.name
        )
    }
}

impl std::error::Error for InvalidBranchName {}

impl BranchName {
    pub fn new(name: impl Into<String>) -> Result<BranchName, InvalidBranchName> {
        let name = name.into();
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        // Lance's own branch names (a branch's lineage is `<name>.<suffix>`) take no
        // `..` and no trailing `.`.
        let valid = !name.is_empty()
            && name.len() <= MAX_BRANCH_LEN
            && name.chars().all(allowed)
            && !name.starts_with(['.', '-'])
            && !name.ends_with('.')
            && !name.contains("..");
        if valid {
            Ok(BranchName(name))
        } else {
            Err(InvalidBranchName { name })
        }
    }

    /// `main`, the branch every graph starts with.
    pub fn main() -> BranchName {
        BranchName(MAIN_BRANCH.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is `main`.
    pub fn is_main(&self) -> bool {
        self.0 == MAIN_BRANCH
    }
}

impl Default for BranchName {
    fn default() -> Self {
        BranchName::main()
    }
}

impl TryFrom<String> for BranchName {
    type Error = InvalidBranchName;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        BranchName::new(name)
    }
}

impl TryFrom<&str> for BranchName {
    type Error = InvalidBranchName;

    fn try_from(name: &str) -> Result<Self, Self::Error> {
        BranchName::new(name)
    }
}

impl FromStr for BranchName {
    type Err = InvalidBranchName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        BranchName::new(name)
    }
}

impl From<BranchName> for String {
    fn from(name: BranchName) -> String {
        name.0
    }
}

impl Deref for BranchName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BranchName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for BranchName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for BranchName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// A commit's id. Any text may name one (a lookup of an unknown id is "not found"); new
/// ones are 12 random hex digits.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(transparent)]
pub struct CommitId(String);

impl CommitId {
    /// A new, random id.
    pub fn random() -> CommitId {
        let uuid = uuid::Uuid::new_v4().simple().to_string();
        CommitId(uuid[..12].to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for CommitId {
    fn from(id: String) -> Self {
        CommitId(id)
    }
}

impl From<&str> for CommitId {
    fn from(id: &str) -> Self {
        CommitId(id.to_owned())
    }
}

impl From<CommitId> for String {
    fn from(id: CommitId) -> String {
        id.0
    }
}

impl Deref for CommitId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for CommitId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for CommitId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<CommitId> for String {
    fn eq(&self, other: &CommitId) -> bool {
        *self == other.0
    }
}

impl PartialEq<CommitId> for &str {
    fn eq(&self, other: &CommitId) -> bool {
        *self == other.0
    }
}

impl PartialEq<BranchName> for String {
    fn eq(&self, other: &BranchName) -> bool {
        *self == other.0
    }
}

impl PartialEq<BranchName> for &str {
    fn eq(&self, other: &BranchName) -> bool {
        *self == other.0
    }
}
