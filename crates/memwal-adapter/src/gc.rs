//! Garbage collection of MemWAL state. Lance deletes none of it; what is folded into a
//! *published* table version is ours to remove.

use lance::dataset::mem_wal::util::parse_bit_reversed_filename;
use lance::dataset::mem_wal::DatasetMemWalExt;
use snafu::ResultExt;
use tributary_storage::GraphStore;

use crate::error::{LanceSnafu, Result, StorageSnafu};
use crate::location::MemWalTable;
use crate::shards::shard_manifests;
use crate::tail::read_wal_entry;

/// What one collection removed from one table's MemWAL.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct MemWalGarbage {
    /// WAL entries whose rows are in a flushed generation.
    pub wal_entries: u64,
    /// Generation directories at or below the published compaction mark.
    pub generations: u64,
    /// Old shard-manifest versions (Lance prunes only those older than a day).
    pub manifest_versions: u64,
    pub bytes: u64,
}

impl MemWalGarbage {
    pub fn add(&mut self, other: &MemWalGarbage) {
        self.wal_entries += other.wal_entries;
        self.generations += other.generations;
        self.manifest_versions += other.manifest_versions;
        self.bytes += other.bytes;
    }
}

/// Remove from the MemWAL of the table `at` what can never be read again:
/// - WAL entries at or before the shard's `replay_after` position (flushed to a
///   generation: a writer never replays them), except fence sentinels (see
///   [`is_fence_sentinel`]) and the shard's newest entry (the WAL tip);
/// - generations at or below the compaction mark of `published_version` (the table
///   version the graph head pins; a fold of them is visible, so neither folds nor fresh
///   reads at the head use them);
/// - shard-manifest versions before the latest (through Lance's own prune).
pub async fn collect_memwal_garbage(
    store: &GraphStore,
    at: &MemWalTable,
    published_version: u64,
) -> Result<MemWalGarbage> {
    let table = at.table();
    let lance = |action: &'static str| LanceSnafu { action, table };
    let published = at.at_version(store, published_version).await?;
    let marks = match published
        .mem_wal_index_details()
        .await
        .context(lance("read index"))?
    {
        Some(details) => details.compacted_sstables,
        None => Vec::new(),
    };
    let latest = at.latest(store).await?;
    let mut removed = MemWalGarbage::default();
    for (manifests, manifest) in shard_manifests(&latest, table).await? {
        let shard = manifests.shard_id();
        let Some(manifest) = manifest else {
            continue;
        };
        let shard_dir = at.shard_dir(shard);
        let wal_dir = format!("{shard_dir}/wal");
        let listed: Vec<(u64, String, u64)> = store
            .sizes(&wal_dir)
            .await
            .context(StorageSnafu)?
            .into_iter()
            .filter_map(|(name, size)| Some((parse_bit_reversed_filename(&name)?, name, size)))
            .collect();
        // The tip stays: a writer that claims the shard next finds the tip from the
        // manifest's last position and puts its fence sentinel just past it — the slot
        // the previous writer appends to next. Without the tip it would look lower, and
        // leave that slot free.
        let tip = listed.iter().map(|(position, _, _)| *position).max();
        for (position, name, size) in listed {
            if position > manifest.replay_after_wal_entry_position
                || Some(position) == tip
                || is_fence_sentinel(store, table, &format!("{wal_dir}/{name}"), size).await?
            {
                continue;
            }
            store
                .delete(&format!("{wal_dir}/{name}"))
                .await
                .context(StorageSnafu)?;
            removed.wal_entries += 1;
            removed.bytes += size;
        }
        if let Some(mark) = marks
            .iter()
            .find(|m| m.shard_id == shard)
            .map(|m| m.generation)
        {
            for sstable in manifest.sstables.iter().filter(|s| s.generation <= mark) {
                let (objects, bytes) = store
                    .delete_tree(&format!("{shard_dir}/{}", sstable.path))
                    .await
                    .context(StorageSnafu)?;
                if objects > 0 {
                    removed.generations += 1;
                    removed.bytes += bytes;
                }
            }
        }
        removed.manifest_versions += manifests
            .prune_versions_before(manifest.version)
            .await
            .context(lance("prune shard manifests"))? as u64;
    }
    Ok(removed)
}

/// A fence sentinel (an empty Arrow stream with two metadata keys) is far smaller than
/// this, so only entries below it are read to tell.
const SENTINEL_MAX_BYTES: u64 = 4096;

/// Whether the WAL entry at `path` is a fence sentinel: the data-less entry a new writer
/// puts at the WAL tip when it claims a shard. The fenced writer's next append targets
/// exactly that slot and learns it is fenced by finding it taken; Lance does not re-check
/// the epoch after an append that succeeds. Freeing the slot would let a stalled writer
/// append there and acknowledge rows no writer ever replays, so sentinels are never
/// collected (one small object per writer open).
async fn is_fence_sentinel(store: &GraphStore, table: &str, path: &str, size: u64) -> Result<bool> {
    if size > SENTINEL_MAX_BYTES {
        return Ok(false);
    }
    Ok(read_wal_entry(store, table, path)
        .await?
        .is_some_and(|entry| entry.rows == 0))
}
