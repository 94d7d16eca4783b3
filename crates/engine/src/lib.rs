//! Tributary: a graph store whose node and edge types are Lance tables, with one commit
//! point (the `__manifest` compare-and-swap).
//!
//! [`Graph`] is the composition: init/open, load, streaming ingest, fold, reads and the
//! commit log. [`GraphOps`] is the set of operations every way of reaching a graph (this
//! process, or a server over HTTP) offers alike.
//!
//! ```
//! use tributary::{Graph, LoadOptions, ReadOptions, View};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = std::env::temp_dir().join(format!("tributary-doc-{}", std::process::id()));
//! let schema = "node Person @stream {\n  name: String @key\n  age: I32?\n}\n";
//! let graph = Graph::init(root.to_str().ok_or("a UTF-8 path")?, schema).await?;
//!
//! // Interactive load: one graph commit, visible when it returns.
//! let ada = r#"{"type":"Person","data":{"name":"ada","age":36}}"#;
//! graph.load(ada, &LoadOptions::default()).await?;
//!
//! // Streaming ingest: acknowledged once durable in Lance's MemWAL, not yet folded...
//! let bob = r#"{"type":"Person","data":{"name":"bob","age":41}}"#;
//! let ack = graph.ingest("main")?.send(1, bob).await?;
//! assert_eq!(ack.durable_rows, 1);
//! // ...so a snapshot read does not see it, and a fresh read does.
//! let fresh = View { fresh: true, ..View::default() };
//! assert!(graph.get("Person", "bob", View::default()).await?.is_none());
//! assert!(graph.get("Person", "bob", fresh).await?.is_some());
//!
//! // A fold publishes everything acknowledged as one graph commit.
//! graph.fold("main").await?;
//! let people = graph.read("Person", &ReadOptions::default()).await?;
//! assert_eq!(people.num_rows(), 2);
//! assert_eq!(graph.log("main", 10).await?.len(), 3); // init, load, fold
//!
//! graph.close_writers().await?;
//! std::fs::remove_dir_all(&root)?;
//! # Ok(())
//! # }
//! ```

mod branches;
mod check;
mod cleanup;
mod embedding;
mod error;
mod export;
mod fold;
mod graph;
mod ingest;
mod load;
mod merge;
mod merge_keys;
mod ops;
mod patches;
mod producers;
mod query;
mod read;
mod recovery;
mod removals;
mod schema_change;
mod snapshots;
mod status;
mod streaming;
pub mod wire;
mod writes;

pub use cleanup::{CleanupReport, KeptPin};
pub use embedding::EMBEDDER_PATH;
pub use error::{Error, Result};
pub use export::{plan_export, ExportPlan};
pub use graph::{branch, graphs_under, At, Graph, GraphBuilder, GraphSettings};
pub use ingest::{IngestAck, IngestOptions, Ingestor, StreamLine};
pub use load::{LoadMode, LoadOptions, LoadOutcome};
pub use merge::{BrokenKey, ConflictKey, MergeKind, MergeOutcome, Prefer};
pub use ops::GraphOps;
pub use producers::{Producer, ProducerStatus};
pub use query::{parse_assignment, Language, Params, QueryRequest};
pub use read::{Direction, ReadOptions, SearchQuery, SortKey, View, MAX_READ_LIMIT, MAX_SEARCH_K};
pub use schema_change::SchemaOutcome;
pub use snapshots::{ChangesQuery, CHANGES_PAGE_ROWS};
pub use status::{IngestStatus, Pending, ShardIngestStatus, TableIngestStatus};
pub use streaming::{FoldTriggers, FoldsMade};
pub use tributary_check::{CheckReport, Problem};
pub use tributary_embed::{
    EmbedError, Embedder, EmbedderConfig, HttpSettings, Lexical, DEFAULT_KEY_VARIABLE,
};
pub use tributary_feed::{
    heartbeat, ChangeRecord, CommitEnd, Heartbeat, KeyChange, Pin, RowChange, Snapshot,
    SnapshotColumn, SnapshotTable, StreamError, TableRole,
};
pub use tributary_storage::ErrorKind;
pub use tributary_storage::{
    count_store_retry, layout, store_retries, DiskCondition, DiskRefusal, SessionCaches,
    StoreOptions, STORE_RETRY_TARGET,
};
pub use writes::Writes;

pub use tributary_memwal_adapter::{
    send_waits, MemWalGarbage, WaitCause, WaitCounts, WriterSettings, BUCKET_MS as WAIT_BUCKET_MS,
};
pub use tributary_publisher::{
    BranchName, CommitId, CommitKind, CommitRecord, FoldedShard, InvalidBranchName, PublisherKind,
    MAIN_BRANCH,
};
pub use tributary_schema::{
    BreakingChange, Catalog, Decoder, LineError, LineTarget, SchemaChange, TablePath,
};
pub use tributary_storage::{OpCounter, OpCounts, OpKind, PathClass};
pub use tributary_write::{
    CrashWindow, FoldOutcome, FoldSettings, FoldTimings, IndexReport, IndexSettings, Recovered,
    RejectKind, RejectPolicy, WriteKind, WriteStep, FOLD_ACTOR, REJECTS_PATH,
};
