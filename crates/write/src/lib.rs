//! Every graph write, load or fold, and what they share:
//!
//! - the one write pipeline (write turn → intent → stage → one publish → clear the
//!   intent), its crash windows and the recovery of staged writes ([`commit`],
//!   [`intent`], [`window`]);
//! - leases across processes: one graph writer per branch, one stream per producer
//!   ([`lease`]);
//! - the constraint checker, the one place endpoints, `@card` and `@unique` are enforced
//!   ([`constraints`]);
//! - the fold: durable MemWAL generations → one graph commit, exactly once; its dead
//!   letters ([`rejects`]);
//! - what a delete removes, the same filter for load and fold, and a merge's source
//!   ([`removal`]);
//! - table upkeep after a commit: small fragments compacted ([`compaction`]) and indexes
//!   refreshed ([`indexes`]).

pub mod commit;
pub mod compaction;
pub mod constraints;
pub mod embedding;
mod error;
pub mod indexes;
pub mod intent;
mod keys;
pub mod lease;
pub mod lookup;
pub mod rejects;
pub mod removal;
mod run;
pub mod window;

pub use commit::{
    clear_intent, commit_intent, publish_intent, record_intent, recover_intent, CommitTimings,
    Committed, GraphTarget, Recovered, StagedWrite,
};
pub use constraints::{ConstraintChecker, RejectKind, Scope, SnapshotTables, Violation};
pub use embedding::{fill_embeddings, has_embedded_fields, EmbedFailure};
pub use error::{Error, Result};
pub use indexes::{index_specs, maintain_indexes, IndexReport, IndexSettings, IndexSpec};
pub use lease::{path_segment, producers_dir, Acquired, Lease, LEASE_DIR, PRODUCER_DIR};
pub use rejects::{rejects_schema, REJECTS_PATH};
pub use removal::{edge_rows, merge_source, removal_filter};
pub use run::{fold_pending, FoldOutcome, FoldSettings, FoldTimings, RejectPolicy, FOLD_ACTOR};
pub use window::{CrashWindow, WriteKind, WriteStep};
