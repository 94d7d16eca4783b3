//! Schema errors: every variant carries the position it refers to, so a user can jump
//! straight to the offending token.

use serde::Serialize;
use snafu::Snafu;
use std::fmt;

/// A 1-based line and column (in characters) inside the schema source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// Why a schema was refused. Display always starts with `line L, column C:`.
#[derive(Debug, Clone, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum SchemaError {
    /// The token stream does not fit the grammar (includes lexical errors).
    #[snafu(display("{at}: expected {expected}, found {found}"))]
    Syntax {
        at: Position,
        expected: String,
        found: String,
    },

    #[snafu(display("{at}: type `{name}` is declared twice (first declared at {first})"))]
    DuplicateType {
        at: Position,
        name: String,
        first: Position,
    },

    #[snafu(display("{at}: field `{field}` is declared twice in `{type_name}`"))]
    DuplicateField {
        at: Position,
        type_name: String,
        field: String,
    },

    #[snafu(display(
        "{at}: field name `{field}` is reserved (expected a name other than id, src, dst, \
         not starting with `_`)"
    ))]
    ReservedName { at: Position, field: String },

    #[snafu(display(
        "{at}: expected exactly one @key field in node `{type_name}`, found {found}"
    ))]
    NodeKeyCount {
        at: Position,
        type_name: String,
        found: usize,
    },

    #[snafu(display(
        "{at}: expected at most one @key field in edge `{type_name}`, found {found}"
    ))]
    EdgeKeyCount {
        at: Position,
        type_name: String,
        found: usize,
    },

    #[snafu(display("{at}: @key field `{field}` {problem}"))]
    InvalidKey {
        at: Position,
        field: String,
        problem: String,
    },

    #[snafu(display(
        "{at}: edge `{edge}` endpoint `{endpoint}` {problem} (expected a declared node type{known})"
    ))]
    UnknownEndpoint {
        at: Position,
        edge: String,
        endpoint: String,
        problem: String,
        /// `": A, B"` listing the node types, or empty.
        known: String,
    },

    /// An annotation placed where it does not apply (e.g. `@range` on a String).
    #[snafu(display("{at}: {annotation} {problem}"))]
    MisplacedAnnotation {
        at: Position,
        annotation: String,
        problem: String,
    },

    #[snafu(display("{at}: {annotation} is given twice"))]
    DuplicateAnnotation { at: Position, annotation: String },

    #[snafu(display("{at}: bad default for `{field}`: {problem}"))]
    BadDefault {
        at: Position,
        field: String,
        problem: String,
    },

    #[snafu(display("{at}: @check pattern {pattern:?} is not a valid regex: {problem}"))]
    BadRegex {
        at: Position,
        pattern: String,
        problem: String,
    },

    /// Empty or inverted bounds in `@range`, `@card`, `Vector(n)`, `@stream(shards = n)`.
    #[snafu(display("{at}: {what}: {problem}"))]
    BadBounds {
        at: Position,
        what: String,
        problem: String,
    },

    #[snafu(display("{at}: @embed({target}) on `{field}`: {problem}"))]
    BadEmbed {
        at: Position,
        field: String,
        target: String,
        problem: String,
    },
}

impl SchemaError {
    /// Where in the source the error was found.
    pub fn position(&self) -> Position {
        match self {
            SchemaError::Syntax { at, .. }
            | SchemaError::DuplicateType { at, .. }
            | SchemaError::DuplicateField { at, .. }
            | SchemaError::ReservedName { at, .. }
            | SchemaError::NodeKeyCount { at, .. }
            | SchemaError::EdgeKeyCount { at, .. }
            | SchemaError::InvalidKey { at, .. }
            | SchemaError::UnknownEndpoint { at, .. }
            | SchemaError::MisplacedAnnotation { at, .. }
            | SchemaError::DuplicateAnnotation { at, .. }
            | SchemaError::BadDefault { at, .. }
            | SchemaError::BadRegex { at, .. }
            | SchemaError::BadBounds { at, .. }
            | SchemaError::BadEmbed { at, .. } => *at,
        }
    }
}
