//! Where a table's MemWAL lives: a table and the Lance branch (lineage) it writes.
//!
//! Each Lance branch of a table has a MemWAL of its own, under the branch's directory
//! (pinned by a surface guard). A branch made by a shallow clone inherits its source's
//! MemWAL index, compaction marks included, while its shards' generations start again at
//! one: shard ids are therefore derived from the lineage too, so no mark of the source
//! ever covers a generation of the branch.

use std::fmt;

use lance::Dataset;
use snafu::ResultExt;
use tributary_storage::GraphStore;
use uuid::Uuid;

use crate::error::{Result, StorageSnafu};

/// A table on one lineage: `None` is the table's main lineage.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemWalTable {
    table: String,
    lineage: Option<String>,
}

impl MemWalTable {
    /// `table` on the lineage `lineage` (`None`: its main one).
    pub fn on(table: &str, lineage: Option<&str>) -> MemWalTable {
        MemWalTable {
            table: table.to_owned(),
            lineage: lineage.map(str::to_owned),
        }
    }

    /// `table` on its main lineage.
    pub fn main(table: &str) -> MemWalTable {
        MemWalTable::on(table, None)
    }

    /// The table's path under the graph root.
    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn lineage(&self) -> Option<&str> {
        self.lineage.as_deref()
    }

    /// The lineage's directory under the graph root (Lance's `tree/<branch>` layout, a
    /// `/` in the name being a directory of its own).
    fn directory(&self) -> String {
        match &self.lineage {
            None => self.table.clone(),
            Some(lineage) => format!("{}/tree/{lineage}", self.table),
        }
    }

    /// The MemWAL's directory under the graph root.
    pub(crate) fn mem_wal_dir(&self) -> String {
        format!("{}/_mem_wal", self.directory())
    }

    /// The directory of one shard under the graph root.
    pub fn shard_dir(&self, shard: Uuid) -> String {
        format!("{}/{shard}", self.mem_wal_dir())
    }

    /// The shard of bucket `bucket`: derived, so every process agrees on it and two
    /// writers of the same bucket fence each other.
    pub fn shard_id(&self, bucket: u32) -> Uuid {
        let name = match &self.lineage {
            None => format!("tributary:{}#{bucket}", self.table),
            Some(lineage) => format!("tributary:{}@{lineage}#{bucket}", self.table),
        };
        Uuid::new_v5(&Uuid::NAMESPACE_URL, name.as_bytes())
    }

    /// The table's latest version on this lineage.
    pub(crate) async fn latest(&self, store: &GraphStore) -> Result<Dataset> {
        store
            .open_dataset_on(&self.table, self.lineage.as_deref(), None)
            .await
            .context(StorageSnafu)
    }

    /// The table at `version` of this lineage.
    pub(crate) async fn at_version(&self, store: &GraphStore, version: u64) -> Result<Dataset> {
        store
            .open_dataset_on(&self.table, self.lineage.as_deref(), Some(version))
            .await
            .context(StorageSnafu)
    }
}

impl fmt::Display for MemWalTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.lineage {
            None => write!(f, "{}", self.table),
            Some(lineage) => write!(f, "{} (lineage {lineage})", self.table),
        }
    }
}
