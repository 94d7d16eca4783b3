//! The schema language: source text → validated [`Catalog`].

mod catalog;
mod error;
mod evolution;
pub(crate) mod json;
mod lexer;
mod lower;
mod parser;
pub(crate) mod value;

pub use catalog::{
    Cardinality, Catalog, CheckPattern, DefaultValue, EdgeEnds, FieldDef, FieldType, IndexKind,
    Number, RangeBound, StreamOptions, TypeDef, TypeKind,
};
pub use error::{Position, SchemaError};
pub use evolution::{plan_change, BreakingChange, SchemaChange};

impl Catalog {
    /// Parse and validate a schema: source text → declarations → the lowered catalog.
    /// The catalog's data types know nothing of the parser; the parser and the lowering
    /// build them.
    pub fn parse(source: &str) -> Result<Catalog, SchemaError> {
        // A byte-order mark (an editor's) is no part of the schema.
        let source = source.strip_prefix('\u{feff}').unwrap_or(source);
        let declarations = parser::parse(source)?;
        let types = lower::lower(declarations)?;
        Ok(Catalog {
            source: source.to_owned(),
            types,
        })
    }
}
