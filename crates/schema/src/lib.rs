//! Tributary's schema: the schema language, the catalog it produces, and NDJSON →
//! Arrow decoding with synchronous validation. No Lance dependency, so it compiles and
//! tests in seconds; the storage-facing crates build on the Arrow batches it emits.

pub mod decode;
mod encode;
#[cfg(test)]
mod fuzz;
mod names;
mod path;
pub mod schema;

pub use decode::{
    conform, decode_str, edge_id, patch_rows, patch_schema, Decoded, Decoder, LineError,
    LineTarget, TypeBatch, TypeDeletes, TypePatches,
};
pub use encode::load_lines;
pub use names::nearest_name;
pub use path::TablePath;
pub use schema::{
    plan_change, BreakingChange, Cardinality, Catalog, CheckPattern, DefaultValue, EdgeEnds,
    FieldDef, FieldType, IndexKind, Number, Position, RangeBound, SchemaChange, SchemaError,
    StreamOptions, TypeDef, TypeKind,
};
