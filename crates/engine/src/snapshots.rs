//! A commit for readers outside Tributary: its snapshot document, and pins that keep a
//! snapshot's table versions from cleanup (`tributary-feed` owns both; this wires them to
//! the graph's commits).

use snafu::ResultExt;
use tributary_feed::{Pin, Snapshot};

use crate::error::{FeedSnafu, Result};
use crate::graph::{At, Graph};

impl Graph {
    /// The snapshot at `at`: each type's table, the Lance version the commit pins, its key
    /// and columns. Refused, naming the table, when cleanup has removed the commit's
    /// versions.
    pub async fn describe_snapshot(&self, at: &At) -> Result<Snapshot> {
        let commit = self.snapshot(at).await?;
        Snapshot::describe(&self.store, &commit, &self.catalog())
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
}
