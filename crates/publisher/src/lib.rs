//! The graph's single commit point.
//!
//! A [`Publisher`] makes table versions graph-visible by moving a branch head with one
//! atomic step. [`ManifestCasPublisher`] does it with a compare-and-swap on the
//! `__manifest` Lance table; [`RecordPublisher`] by creating the next immutable
//! transaction record with put-if-absent. A graph records which ([`GraphPublisher`]).

mod choice;
mod error;
mod ids;
mod manifest;
mod record;
mod txn;

use async_trait::async_trait;

pub use choice::{GraphPublisher, PublisherKind};
pub use error::{Error, Result};
pub use ids::{BranchName, CommitId, InvalidBranchName, MAIN_BRANCH};
pub use manifest::{
    commit_key, head_key, manifest_schema, rows_batch, ManifestCasPublisher, MANIFEST_PATH,
    MANIFEST_VERSIONS_KEPT, ROWS_PER_FRAGMENT,
};
pub use record::{
    CommitKind, CommitRecord, FoldedShard, Fork, PublishPlan, SchemaRecord, TablePath,
};
pub use txn::RecordPublisher;

/// Publishes commits and resolves snapshots, whatever the commit point.
#[async_trait]
pub trait Publisher: Send + Sync {
    /// Move `plan.branch` from `plan.expected_head` to a new commit. A head that moved
    /// meanwhile is [`Error::Conflict`]: nothing was published; re-read and retry.
    async fn publish(&self, plan: PublishPlan) -> Result<CommitRecord>;

    /// The commit at the head of `branch`.
    async fn head(&self, branch: &BranchName) -> Result<CommitRecord>;

    /// One commit by id.
    async fn commit(&self, id: &CommitId) -> Result<CommitRecord>;

    /// The commit a load with idempotency key `key` made on `branch`, if one did.
    async fn commit_by_key(&self, branch: &BranchName, key: &str) -> Result<Option<CommitRecord>>;

    /// Commits of `branch`, newest first, following parents from the head.
    async fn log(&self, branch: &BranchName, limit: usize) -> Result<Vec<CommitRecord>>;

    /// The head of every branch, by name.
    async fn branches(&self) -> Result<Vec<CommitRecord>>;

    /// Remove `branch`'s head (and its loads' idempotency keys) if it is still
    /// `expected_head`; a head that moved is [`Error::Conflict`] and nothing is removed.
    /// Its commits stay readable by id.
    async fn delete_branch(&self, branch: &BranchName, expected_head: &CommitId) -> Result<()>;

    /// The graph's schema.
    async fn schema(&self) -> Result<SchemaRecord>;
}
