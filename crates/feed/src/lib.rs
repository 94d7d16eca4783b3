//! What a graph commit offers readers outside Tributary: a snapshot any Lance reader can
//! open (each type's table, at the version the commit pins), and pins that keep a
//! snapshot's versions from cleanup.
//!
//! Depends on the publisher (the commit and how a table is opened at it), the schema (what
//! each table holds) and the store; the engine wires it into `GraphOps`.

mod error;
mod pins;
mod snapshot;

pub use error::{Error, Result};
pub use pins::{pin, pins, unpin, Pin};
pub use snapshot::{Snapshot, SnapshotColumn, SnapshotTable, TableRole};
