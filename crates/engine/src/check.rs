//! `check`, wired: the heads of every branch, handed to the check crate.

use tributary_check::CheckReport;

use crate::{Graph, Result};

impl Graph {
    /// Whether every file the heads of all branches pin is there and reads back whole:
    /// version manifests, data files and deletion vectors (to the row counts the
    /// manifests record), indexes, and the unfolded MemWAL generations and WAL entries of
    /// streamed tables. Reads only. `progress` hears each table as it starts.
    pub async fn check(&self, progress: impl Fn(&str)) -> Result<CheckReport> {
        let heads = self.branches().await?;
        Ok(tributary_check::check(&self.store, &heads, progress).await)
    }
}
