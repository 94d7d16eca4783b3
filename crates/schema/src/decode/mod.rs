//! NDJSON → Arrow record batches, one per type, with per-line validation.
//!
//! A line is either `{"type": T, "data": {...}}` (a node),
//! `{"edge": E, "from": KEY, "to": KEY, "data": {...}}` (an edge), or a delete:
//! `{"delete": T, "key": KEY}` (a node, or an edge with its own `@key`) or
//! `{"delete": E, "from": KEY, "to": KEY}` (an edge without one), or a patch, a row's line
//! with `"patch"` in place of `"data"`: the key and the fields to set. Every value of a
//! line is converted and checked before anything is appended, so a rejected line
//! contributes no row at all.

mod columns;
mod conform;
mod decoder;
mod patch;
mod table;

use std::fmt;

use arrow_array::RecordBatch;

pub use conform::conform;
pub use decoder::{Decoder, LineTarget};
pub use patch::{patch_rows, patch_schema};

/// The id of an edge without its own `@key`: `src->dst`, with `\` and `->` inside either
/// key escaped (`\\`, `\->`) so that no two endpoint pairs share an id (`a`→`b->c` and
/// `a->b`→`c` would otherwise both be `a->b->c`). Keys without those characters — almost
/// all — keep the plain `src->dst`.
pub fn edge_id(src: &str, dst: &str) -> String {
    let mut id = String::with_capacity(src.len() + dst.len() + 2);
    escape_endpoint(src, &mut id);
    id.push_str("->");
    escape_endpoint(dst, &mut id);
    id
}

fn escape_endpoint(key: &str, out: &mut String) {
    let mut chars = key.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            '-' if chars.peek() == Some(&'>') => out.push_str("\\-"),
            c => out.push(c),
        }
    }
}

use crate::schema::Catalog;

/// Everything decoded since the last `finish`.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// One batch per type that received rows, in declaration order.
    pub batches: Vec<TypeBatch>,
    /// The keys delete lines name, one entry per type that has any, in declaration order.
    pub deletes: Vec<TypeDeletes>,
    /// The patch lines, one entry per type that has any, in declaration order.
    pub patches: Vec<TypePatches>,
    /// Rejected lines, in line order.
    pub rejects: Vec<LineError>,
}

impl Decoded {
    /// Total number of valid rows over all batches.
    pub fn row_count(&self) -> usize {
        self.batches
            .iter()
            .map(|batch| batch.batch.num_rows())
            .sum()
    }

    pub fn batch(&self, type_name: &str) -> Option<&TypeBatch> {
        self.batches
            .iter()
            .find(|batch| batch.type_name == type_name)
    }
}

/// The valid rows of one type.
#[derive(Debug, Clone)]
pub struct TypeBatch {
    pub type_name: String,
    /// Schema is exactly `TypeDef::arrow_schema()`.
    pub batch: RecordBatch,
    /// Source line of each row, parallel to the batch rows.
    pub lines: Vec<u64>,
}

impl TypeBatch {
    /// No rows of `ty`.
    pub fn empty(ty: &crate::schema::TypeDef) -> TypeBatch {
        TypeBatch {
            type_name: ty.name.clone(),
            batch: RecordBatch::new_empty(ty.arrow_schema()),
            lines: Vec::new(),
        }
    }
}

/// The keys (`id` values) the delete lines of one type name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeDeletes {
    pub type_name: String,
    pub ids: Vec<String>,
    /// Source line of each id, parallel to `ids`.
    pub lines: Vec<u64>,
}

/// The patch lines of one type, in line order (a key may be patched more than once).
#[derive(Debug, Clone)]
pub struct TypePatches {
    /// Schema: [`patch_schema`] of the type (every field nullable); a field a patch does
    /// not set is null.
    pub rows: TypeBatch,
    /// Per row, per field of the type (`TypeDef::fields` order): whether the patch sets it.
    pub set: Vec<Vec<bool>>,
}

/// Why one input line was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line number.
    pub line: u64,
    /// The data field at fault, or `from`/`to` on edges; `None` for whole-line problems.
    pub field: Option<String>,
    pub reason: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "line {}, field `{field}`: {}", self.line, self.reason),
            None => write!(f, "line {}: {}", self.line, self.reason),
        }
    }
}

impl std::error::Error for LineError {}

/// Decode a whole NDJSON text, numbering lines from 1 (blank lines count but are skipped).
pub fn decode_str(catalog: &Catalog, text: &str) -> Decoded {
    let mut decoder = Decoder::new(catalog);
    for (index, line) in text.lines().enumerate() {
        decoder.push_line(index as u64 + 1, line);
    }
    decoder.finish()
}
