//! Tributary: a graph store whose node and edge types are Lance tables, with one commit
//! point (the `__manifest` compare-and-swap).
//!
//! [`Graph`] is the composition: init/open, load, streaming ingest, fold, reads and the
//! commit log. [`GraphOps`] is the set of operations every way of reaching a graph (this
//! process, or a server over HTTP) offers alike.

mod cleanup;
mod error;
mod fold;
mod graph;
mod ingest;
mod load;
mod ops;
mod read;
mod recovery;
mod status;
mod validate;

pub use cleanup::CleanupReport;
pub use error::{Error, ErrorKind, Result};
pub use fold::FoldTriggers;
pub use graph::{At, Graph, GraphBuilder, GraphSettings, MAIN_BRANCH};
pub use ingest::{IngestAck, Ingestor};
pub use load::{LoadMode, LoadOptions, LoadOutcome};
pub use ops::GraphOps;
pub use read::{Direction, ReadOptions, SearchQuery, View};
pub use status::{IngestStatus, ShardIngestStatus, TableIngestStatus};

pub use ingest_core::{Catalog, LineError};
pub use tributary_fold::{
    FoldOutcome, FoldSettings, IndexReport, IndexSettings, Recovered, RejectKind, RejectPolicy,
    FOLD_ACTOR, REJECTS_PATH,
};
pub use tributary_memwal_adapter::{MemWalGarbage, WriterSettings};
pub use tributary_publisher::{CommitKind, CommitRecord, FoldedShard};
pub use tributary_storage::{OpCounter, OpCounts, OpKind, PathClass};
