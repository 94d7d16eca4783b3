//! The fold: durable MemWAL generations → one graph commit, exactly once.
//!
//! Also home of the commit protocol every multi-table graph write follows (stage →
//! sidecar → commit tables → one publish → delete sidecar) and of its recovery, which the
//! engine's `load` shares.

pub mod check;
pub mod commit;
mod error;
pub mod indexes;
pub mod intent;
pub mod lease;
pub mod lookup;
pub mod rejects;
mod run;

pub use check::RejectKind;
pub use commit::{commit_intent, recover_intent, GraphTarget, Recovered, StagedWrite};
pub use error::{Error, Result};
pub use indexes::{index_specs, maintain_indexes, IndexReport, IndexSettings, IndexSpec};
pub use lease::{BranchLease, LEASE_DIR};
pub use rejects::{rejects_schema, REJECTS_PATH};
pub use run::{fold_pending, FoldOutcome, FoldSettings, RejectPolicy, FOLD_ACTOR};
