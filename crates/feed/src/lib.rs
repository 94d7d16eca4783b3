//! What a graph commit offers readers outside Tributary: a snapshot any Lance reader can
//! open (each type's table, at the version the commit pins), pins that keep a snapshot's
//! versions from cleanup, and the change feed (what each commit inserted, updated and
//! deleted, read from the Lance versions between it and its parent).
//!
//! Depends on the publisher (the commit and how a table is opened at it), the schema (what
//! each table holds) and the store; the engine wires it into `GraphOps`.

mod changes;
mod error;
mod feed;
mod pins;
mod snapshot;

pub use changes::{commit_changes, CommitChanges, TableChanges};
pub use error::{Error, Result};
pub use feed::{
    changes_page, heartbeat, ChangeRecord, ChangesRequest, CommitEnd, Heartbeat, KeyChange,
    RowChange, StreamError,
};
pub use pins::{pin, pins, unpin, Pin};
pub use snapshot::{Snapshot, SnapshotColumn, SnapshotTable, TableRole};
