//! What is pending in a table's MemWAL, read from storage by any process.

use std::time::SystemTime;

use lance::dataset::mem_wal::DatasetMemWalExt;
use lance_index::mem_wal::ShardManifest;
use snafu::ResultExt;
use tributary_storage::GraphStore;
use uuid::Uuid;

use crate::error::{LanceSnafu, Result, StorageSnafu};
use crate::location::MemWalTable;
use crate::shards::shard_manifests;

/// A flushed generation the base table has not compacted yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingGeneration {
    pub generation: u64,
    /// Path of the generation dataset, relative to the shard directory.
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone)]
pub struct ShardState {
    pub shard: Uuid,
    pub writer_epoch: u64,
    /// The generation the active memtable will flush as.
    pub current_generation: u64,
    /// Highest generation folded into the base table (its compaction mark), if any.
    pub compacted_through: Option<u64>,
    pub pending: Vec<PendingGeneration>,
    /// When the oldest pending generation was flushed.
    pub oldest_pending_at: Option<SystemTime>,
}

#[derive(Debug, Clone)]
pub struct TableState {
    pub table: String,
    pub shards: Vec<ShardState>,
}

/// The MemWAL state of the table `at` at its latest version, or `None` if it is not
/// enrolled.
pub async fn table_state(store: &GraphStore, at: &MemWalTable) -> Result<Option<TableState>> {
    let table = at.table();
    let dataset = at.latest(store).await?;
    let lance = |action: &'static str| LanceSnafu { action, table };
    let Some(details) = dataset
        .mem_wal_index_details()
        .await
        .context(lance("read index"))?
    else {
        return Ok(None);
    };
    let mut shards = Vec::new();
    for (manifests, manifest) in shard_manifests(&dataset, table).await? {
        let shard = manifests.shard_id();
        let compacted = details
            .compacted_sstables
            .iter()
            .find(|c| c.shard_id == shard)
            .map(|c| c.generation);
        shards.push(shard_state(store, at, shard, manifest, compacted).await?);
    }
    Ok(Some(TableState {
        table: table.to_owned(),
        shards,
    }))
}

async fn shard_state(
    store: &GraphStore,
    at: &MemWalTable,
    shard: Uuid,
    manifest: Option<ShardManifest>,
    compacted: Option<u64>,
) -> Result<ShardState> {
    let Some(manifest) = manifest else {
        return Ok(ShardState {
            shard,
            writer_epoch: 0,
            current_generation: 0,
            compacted_through: compacted,
            pending: vec![],
            oldest_pending_at: None,
        });
    };
    let pending: Vec<PendingGeneration> = manifest
        .sstables
        .iter()
        .filter(|s| compacted.is_none_or(|mark| s.generation > mark))
        .map(|s| PendingGeneration {
            generation: s.generation,
            path: s.path.clone(),
            rows: s.physical_rows.unwrap_or(0),
            bytes: s.in_memory_bytes.unwrap_or(0),
        })
        .collect();
    let oldest_pending_at = match pending.iter().min_by_key(|p| p.generation) {
        Some(oldest) => store
            .modified(&format!(
                "{}/{}/_versions",
                at.shard_dir(shard),
                oldest.path
            ))
            .await
            .context(StorageSnafu)?,
        None => None,
    };
    Ok(ShardState {
        shard,
        writer_epoch: manifest.writer_epoch,
        current_generation: manifest.current_generation,
        compacted_through: compacted,
        pending,
        oldest_pending_at,
    })
}
