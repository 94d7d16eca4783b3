//! The schema language: source text → validated [`Catalog`].

mod catalog;
mod error;
mod lexer;
mod lower;
mod parser;

pub use catalog::{
    Cardinality, Catalog, CheckPattern, DefaultValue, EdgeEnds, FieldDef, FieldType, IndexKind,
    Number, RangeBound, StreamOptions, TypeDef, TypeKind,
};
pub use error::{Position, SchemaError};
