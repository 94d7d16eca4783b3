//! WAL tails: rows a shard's WAL holds that no flushed generation does yet.
//!
//! A writer's acknowledged rows sit in its WAL and memtable until a freeze flushes them to
//! a generation. When that writer is gone (its process stopped or crashed) the rows stay
//! only in the WAL, and Lance replays them only when a writer opens the shard. A fold
//! must therefore find such tails and claim their shards (open and close a writer), or
//! the rows would surface later, after newer writes, and overwrite them.

use std::time::{Duration, SystemTime};

use lance::dataset::mem_wal::util::{parse_bit_reversed_filename, wal_entry_filename};
use lance::dataset::mem_wal::DatasetMemWalExt;
use snafu::ResultExt;
use tributary_storage::GraphStore;
use uuid::Uuid;

use arrow_ipc::reader::StreamReader;

use crate::error::{from_lance, Error, LanceSnafu, Result, StorageSnafu};
use crate::location::MemWalTable;
use crate::shards::shard_manifests;
use crate::writer::Enrolled;

/// The WAL entries of one shard above its flushed position (`replay_after`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalTail {
    pub shard: Uuid,
    /// WAL entries above the flushed position that carry rows (a takeover's fence
    /// sentinel carries none and is not counted).
    pub entries: u64,
    /// Rows in those entries (counted only when asked for: it reads every entry).
    pub rows: Option<u64>,
    /// When the newest of them was written.
    pub newest_at: Option<SystemTime>,
    /// Positions above the flushed one and below the newest present with no entry file
    /// (told from the listing): a writer appends positions one after another, so a gap is
    /// a lost file, and a replay would stop at it. (A lost newest entry leaves no gap.)
    pub missing: Vec<u64>,
}

/// How much of a tail to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailDepth {
    /// Whether the tail has rows: reads entries from the newest down to the first with
    /// rows (one read, unless sentinels sit on top).
    Presence,
    /// Every entry, to count rows and entries (for status).
    Count,
}

/// The WAL tails of every shard of the table `at` that has one (shards whose WAL is fully flushed
/// are left out); with `idle_for`, only tails with no entry written for that long (told
/// from the listing, before any entry is read). `None` when the table is not enrolled.
pub async fn wal_tails(
    store: &GraphStore,
    at: &MemWalTable,
    depth: TailDepth,
    idle_for: Option<Duration>,
) -> Result<Option<Vec<WalTail>>> {
    let table = at.table();
    let dataset = at.latest(store).await?;
    let lance = |action: &'static str| LanceSnafu { action, table };
    if dataset
        .mem_wal_index_details()
        .await
        .context(lance("read index"))?
        .is_none()
    {
        return Ok(None);
    }
    let mut tails = Vec::new();
    for (manifests, manifest) in shard_manifests(&dataset, table).await? {
        let shard = manifests.shard_id();
        let flushed = manifest
            .as_ref()
            .map_or(0, |m| m.replay_after_wal_entry_position);
        let wal_dir = format!("{}/wal", at.shard_dir(shard));
        let mut above: Vec<(u64, Option<SystemTime>)> = store
            .entries(&wal_dir)
            .await
            .context(StorageSnafu)?
            .into_iter()
            .filter_map(|entry| {
                let position = parse_bit_reversed_filename(&entry.name)?;
                (position > flushed).then_some((position, entry.modified))
            })
            .collect();
        if above.is_empty() {
            continue;
        }
        if let Some(idle_for) = idle_for {
            let newest = above.iter().filter_map(|(_, modified)| *modified).max();
            let age = newest.and_then(|t| SystemTime::now().duration_since(t).ok());
            if age.is_none_or(|age| age < idle_for) {
                continue;
            }
        }
        // Newest first: a presence check stops at the first entry with rows.
        above.sort_by_key(|entry| std::cmp::Reverse(entry.0));
        let missing = {
            let present: std::collections::BTreeSet<u64> =
                above.iter().map(|(position, _)| *position).collect();
            let newest = above.first().map_or(flushed, |(position, _)| *position);
            let unlisted: Vec<u64> = (flushed + 1..newest)
                .filter(|position| !present.contains(position))
                .collect();
            confirm_missing(store, at, shard, &wal_dir, unlisted).await?
        };
        let current = manifest.as_ref().map_or(0, |m| m.current_generation);
        let mut tail = WalTail {
            shard,
            missing,
            ..WalTail::default()
        };
        let mut rows = 0u64;
        for (position, modified) in above {
            let path = format!("{wal_dir}/{}", wal_entry_filename(position));
            let Some(entry) = read_wal_entry(store, table, &path).await? else {
                continue;
            };
            // A flush's covered position can trail its generation's last entry: entries
            // of a generation already flushed sit above `replay_after`, and replay skips
            // them. They are not a tail (claiming for them would flush nothing).
            let flushed = entry.generation.is_some_and(|g| g < current);
            if entry.rows == 0 || flushed {
                continue;
            }
            tail.entries += 1;
            rows += entry.rows;
            tail.newest_at = tail.newest_at.max(modified);
            if depth == TailDepth::Presence {
                break;
            }
        }
        if depth == TailDepth::Count {
            tail.rows = Some(rows);
        }
        if tail.entries > 0 || !tail.missing.is_empty() {
            tails.push(tail);
        }
    }
    Ok(Some(tails))
}

/// Bring a shard's WAL tail into a generation: claim the shard (which fences its writer,
/// if one still runs, and replays the tail), then close, which flushes the replayed rows.
pub async fn drain_shard(enrolled: &Enrolled, shard: Uuid) -> Result<()> {
    let table = enrolled.table.as_str();
    let writer = enrolled
        .dataset()
        .mem_wal_writer(shard, enrolled.settings.writer_config(shard))
        .await
        .map_err(|e| from_lance(table, &shard, "claim shard", e))?;
    writer
        .close()
        .await
        .map_err(|e| from_lance(table, &shard, "flush claimed shard", e))
}

/// The schema-metadata key under which a WAL entry records its memtable generation
/// (Lance's `GENERATION_KEY`, private to its `wal` module; pinned by a surface guard).
const GENERATION_KEY: &str = "generation";

/// What one WAL entry holds, as far as tails and cleanup need to know.
pub(crate) struct WalEntry {
    /// Rows in the entry; a fence sentinel has none.
    pub rows: u64,
    /// The memtable generation its rows belong to, when recorded.
    pub generation: Option<u64>,
}

/// Read the WAL entry at `path` (an Arrow IPC stream; `None` if it is gone).
pub(crate) async fn read_wal_entry(
    store: &GraphStore,
    table: &str,
    path: &str,
) -> Result<Option<WalEntry>> {
    let Some(bytes) = store.get(path).await.context(StorageSnafu)? else {
        return Ok(None);
    };
    let unreadable = |message: String| Error::InvalidSetting {
        table: table.to_owned(),
        message: format!("unreadable WAL entry {path}: {message}"),
    };
    let reader = StreamReader::try_new(std::io::Cursor::new(bytes), None)
        .map_err(|e| unreadable(e.to_string()))?;
    let generation = reader
        .schema()
        .metadata()
        .get(GENERATION_KEY)
        .and_then(|g| g.parse().ok());
    let mut rows = 0u64;
    for batch in reader {
        rows += batch.map_err(|e| unreadable(e.to_string()))?.num_rows() as u64;
    }
    Ok(Some(WalEntry { rows, generation }))
}

/// How often sealing a shard starts again after another writer claimed it between the
/// drain and the seal.
const SEAL_ATTEMPTS: usize = 5;

/// Drain `shard` and seal it, so no writer can claim it again (Lance refuses a claim of a
/// sealed shard): what any writer acknowledged is in a generation, and nothing can be
/// acknowledged after. The seal is committed with the drain's epoch, so a writer that
/// claimed the shard in between makes the seal fail, and the drain runs again.
pub async fn seal_shard(enrolled: &Enrolled, shard: Uuid) -> Result<()> {
    use lance::dataset::mem_wal::ShardManifestStore;
    use lance_index::mem_wal::{ShardManifest, ShardStatus};
    let table = enrolled.table.as_str();
    let dataset = enrolled.dataset();
    let object_store = dataset
        .object_store(None)
        .await
        .map_err(|e| from_lance(table, &shard, "open the store", e))?;
    let base = dataset.branch_location().path;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let manifests = ShardManifestStore::new(object_store.clone(), &base, shard, 2);
        if manifests
            .refresh_latest()
            .await
            .map_err(|e| from_lance(table, &shard, "read the shard manifest", e))?
            .is_some_and(|m| m.status == ShardStatus::Sealed)
        {
            return Ok(());
        }
        // A writer of another process taking the shard back between the claim and the
        // close fences this drain: wait a moment and drain again.
        let drained = async {
            let writer = dataset
                .mem_wal_writer(shard, enrolled.settings.writer_config(shard))
                .await
                .map_err(|e| from_lance(table, &shard, "claim shard", e))?;
            let epoch = writer.epoch();
            writer
                .close()
                .await
                .map_err(|e| from_lance(table, &shard, "flush claimed shard", e))?;
            Ok::<u64, Error>(epoch)
        }
        .await;
        let epoch = match drained {
            Ok(epoch) => epoch,
            Err(error) if error.is_fenced() && attempt < SEAL_ATTEMPTS => {
                tracing::info!(%error, attempt, "a writer took the shard back during its drain; draining again");
                tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
                continue;
            }
            Err(error) => return Err(error),
        };
        // A store of its own: its position is read from storage, after the close.
        let manifests = ShardManifestStore::new(object_store.clone(), &base, shard, 2);
        let sealed = manifests
            .commit_update(epoch, |current| ShardManifest {
                version: current.next_version(),
                status: ShardStatus::Sealed,
                ..current.clone()
            })
            .await;
        match sealed {
            Ok(_) => return Ok(()),
            Err(error) if attempt < SEAL_ATTEMPTS => {
                tracing::info!(%error, attempt, "another writer claimed the shard before its seal; draining again");
                tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
            }
            Err(error) => return Err(from_lance(table, &shard, "seal shard", error)),
        }
    }
}

/// Of `unlisted` (positions a listing did not show), those still missing: a listing is no
/// snapshot (it is read in pages, or lazily, while a writer of another process appends,
/// and a flush and a cleanup may pass between the manifest's read and the listing), so
/// each is looked up again, and the shard's flushed position read again.
async fn confirm_missing(
    store: &GraphStore,
    at: &MemWalTable,
    shard: Uuid,
    wal_dir: &str,
    unlisted: Vec<u64>,
) -> Result<Vec<u64>> {
    if unlisted.is_empty() {
        return Ok(unlisted);
    }
    let mut missing = Vec::new();
    for position in unlisted {
        let path = format!("{wal_dir}/{}", wal_entry_filename(position));
        if store
            .modified_at(&path)
            .await
            .context(StorageSnafu)?
            .is_none()
        {
            missing.push(position);
        }
    }
    if missing.is_empty() {
        return Ok(missing);
    }
    let dataset = at.latest(store).await?;
    let flushed = shard_manifests(&dataset, at.table())
        .await?
        .into_iter()
        .find(|(manifests, _)| manifests.shard_id() == shard)
        .and_then(|(_, manifest)| manifest.map(|m| m.replay_after_wal_entry_position))
        .unwrap_or(0);
    missing.retain(|&position| position > flushed);
    Ok(missing)
}
