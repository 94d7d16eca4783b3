//! The fresh tier: a table at a snapshot plus what its MemWAL holds beyond it.

use std::sync::{Arc, LazyLock};

use lance::dataset::mem_wal::scanner::SsTableCache;
use lance::dataset::mem_wal::{DatasetMemWalExt, LsmScanner, ShardSnapshot};
use lance::Dataset;
use snafu::ResultExt;

use crate::error::{from_lance, LanceSnafu, Result};
use crate::shards::shard_manifests;
use crate::writer::TableWriter;

/// Flushed generations opened by fresh reads, for the whole process. Lance writes each
/// generation once to a unique path, so an entry never goes stale; without it every fresh
/// read re-opened every pending generation (manifest reads per read).
static GENERATIONS: LazyLock<Arc<SsTableCache>> =
    LazyLock::new(|| Arc::new(SsTableCache::new(256)));

/// An LSM scanner over `base` (the table at a snapshot) + the flushed generations `base`'s
/// MemWAL index has not compacted + `writer`'s in-memory memtables (same process only).
/// Newest write per `id` wins.
pub async fn fresh_scanner(base: Dataset, writer: Option<&TableWriter>) -> Result<LsmScanner> {
    let table = base.uri().to_owned();
    let lance = |action: &'static str| LanceSnafu {
        action,
        table: table.clone(),
    };
    let details = base
        .mem_wal_index_details()
        .await
        .context(lance("read index"))?;
    // Shards are listed from storage, not from `base`'s version, so shards created
    // after `base` are included without moving to the latest version.
    let mut snapshots = Vec::new();
    for (store, manifest) in shard_manifests(&base, &table).await? {
        let shard = store.shard_id();
        let Some(manifest) = manifest else {
            continue;
        };
        let compacted = details
            .as_ref()
            .and_then(|d| d.compacted_sstables.iter().find(|c| c.shard_id == shard))
            .map(|c| c.generation);
        let mut snapshot =
            ShardSnapshot::new(shard).with_current_generation(manifest.current_generation);
        for sstable in manifest
            .sstables
            .iter()
            .filter(|s| compacted.is_none_or(|mark| s.generation > mark))
        {
            snapshot = snapshot.with_sstable(sstable.generation, sstable.path.clone());
        }
        snapshots.push(snapshot);
    }
    let mut scanner = LsmScanner::new(Arc::new(base), snapshots, vec!["id".to_owned()])
        .with_sstable_cache(GENERATIONS.clone());
    if let Some(writer) = writer {
        for (shard, shard_writer) in writer.shards() {
            let memtables = shard_writer
                .in_memory_memtable_refs()
                .await
                .map_err(|e| from_lance(&table, shard, "read memtables", e))?;
            scanner = scanner.with_in_memory_memtables(*shard, memtables);
        }
    }
    Ok(scanner)
}
