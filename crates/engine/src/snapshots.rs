//! A commit for readers outside Tributary: its snapshot document, pins that keep a
//! snapshot's table versions from cleanup, and the change feed (`tributary-feed` owns
//! them; this wires them to the graph's commits).

use serde::{Deserialize, Serialize};
use snafu::ResultExt;
use tributary_feed::{ChangeRecord, ChangesRequest, Pin, Snapshot};
use tributary_publisher::CommitId;

use crate::error::{FeedSnafu, Result};
use crate::graph::{At, Graph};

/// A page of the change feed asks for the commits after `since` on `branch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangesQuery {
    pub branch: String,
    /// The last commit the consumer processed.
    pub since: String,
    /// Only these types (empty: every type).
    pub types: Vec<String>,
    /// At most this many commits in the page.
    pub max_commits: usize,
}

/// Rows past which a page begins no further commit: a page of small commits stays a
/// few MiB of JSON, and a large commit still comes whole.
pub const CHANGES_PAGE_ROWS: usize = 50_000;

impl Graph {
    /// The snapshot at `at`: each type's table, the Lance version the commit pins, its key
    /// and columns. Refused, naming the table, when cleanup has removed the commit's
    /// versions.
    pub async fn describe_snapshot(&self, at: &At) -> Result<Snapshot> {
        let commit = self.snapshot(at).await?;
        // The schema as published now: a long-running process may hold an older one.
        let catalog = self.current_catalog().await?;
        Snapshot::describe(&self.store, &commit, &catalog)
            .await
            .context(FeedSnafu)
    }

    /// Keep the snapshot at `at` from cleanup, as `name`, until [`Graph::unpin`]. A commit
    /// whose versions are already gone is refused (and left unpinned).
    pub async fn pin(&self, name: &str, at: &At) -> Result<Pin> {
        let commit = self.snapshot(at).await?;
        Snapshot::describe(&self.store, &commit, &self.catalog())
            .await
            .context(FeedSnafu)?;
        tributary_feed::pin(&self.store, name, &commit)
            .await
            .context(FeedSnafu)
    }

    /// Remove the pin `name`: the next cleanup may remove what only it kept.
    pub async fn unpin(&self, name: &str) -> Result<Pin> {
        tributary_feed::unpin(&self.store, name)
            .await
            .context(FeedSnafu)
    }

    /// Every pin, by name.
    pub async fn pins(&self) -> Result<Vec<Pin>> {
        tributary_feed::pins(&self.store).await.context(FeedSnafu)
    }

    /// The commits of `query.branch` after `query.since`, oldest first, as change records
    /// (each commit's rows and keys, then its `commit` record); empty when `since` is the
    /// head. At most `max_commits` commits, and no commit begun past
    /// [`CHANGES_PAGE_ROWS`] rows.
    pub async fn changes(&self, query: &ChangesQuery) -> Result<Vec<ChangeRecord>> {
        let request = ChangesRequest {
            branch: crate::graph::branch(&query.branch)?,
            since: CommitId::from(query.since.as_str()),
            types: query.types.clone(),
            max_commits: query.max_commits,
            max_rows: CHANGES_PAGE_ROWS,
        };
        let catalog = self.current_catalog().await?;
        tributary_feed::changes_page(&self.store, &self.publisher, &catalog, &request)
            .await
            .context(FeedSnafu)
    }
}
