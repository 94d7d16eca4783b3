//! Garbage collection of MemWAL state. Lance deletes none of it; what is folded into a
//! *published* table version is ours to remove.

use lance::dataset::mem_wal::util::parse_bit_reversed_filename;
use lance::dataset::mem_wal::DatasetMemWalExt;
use snafu::ResultExt;
use tributary_storage::GraphStore;

use crate::error::{LanceSnafu, Result, StorageSnafu};
use crate::shards::shard_manifests;

/// What one collection removed from one table's MemWAL.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// Remove from `table`'s MemWAL what can never be read again:
/// - WAL entries at or before the shard's `replay_after` position (flushed to a
///   generation: a writer never replays them);
/// - generations at or below the compaction mark of `published_version` (the table
///   version the graph head pins; a fold of them is visible, so neither folds nor fresh
///   reads at the head use them);
/// - shard-manifest versions before the latest (through Lance's own prune).
pub async fn collect_memwal_garbage(
    store: &GraphStore,
    table: &str,
    published_version: u64,
) -> Result<MemWalGarbage> {
    let lance = |action: &'static str| LanceSnafu { action, table };
    let published = store
        .open_dataset(table, Some(published_version))
        .await
        .context(StorageSnafu)?;
    let marks = match published
        .mem_wal_index_details()
        .await
        .context(lance("read index"))?
    {
        Some(details) => details.compacted_sstables,
        None => Vec::new(),
    };
    let latest = store
        .open_dataset(table, None)
        .await
        .context(StorageSnafu)?;
    let mut removed = MemWalGarbage::default();
    for (manifests, manifest) in shard_manifests(&latest, table).await? {
        let shard = manifests.shard_id();
        let Some(manifest) = manifest else {
            continue;
        };
        let shard_dir = format!("{table}/_mem_wal/{shard}");
        let wal_dir = format!("{shard_dir}/wal");
        for (name, size) in store.sizes(&wal_dir).await.context(StorageSnafu)? {
            let flushed = parse_bit_reversed_filename(&name)
                .is_some_and(|position| position <= manifest.replay_after_wal_entry_position);
            if flushed {
                store
                    .delete(&format!("{wal_dir}/{name}"))
                    .await
                    .context(StorageSnafu)?;
                removed.wal_entries += 1;
                removed.bytes += size;
            }
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
