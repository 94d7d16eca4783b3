//! The crate's single integration-test binary.

// test code: a panic here is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod decode;
mod schema;

/// The schema from DESIGN.md, verbatim.
pub const DESIGN_SCHEMA: &str = r#"
node Person @stream {
  name: String @key
  age: I32? @range(0..150)
  status: enum(active, inactive) = active
  email: String? @unique @check("^[^@]+@[^@]+$")
  bio: String? @index(fts)
  embedding: Vector(8)? @embed(bio)
}
node Company { name: String @key }
edge WorksAt: Person -> Company @card(0..1) @stream { since: Date? }
edge Knows: Person -> Person @stream        // no properties: no body needed
"#;
