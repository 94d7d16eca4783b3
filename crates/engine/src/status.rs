//! `ingest status`: what each enrolled table holds that no fold has published yet.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tributary_memwal_adapter::{table_state, wal_tails, MemWalTable, TailDepth};

use crate::error::{Error, Result};
use crate::graph::Graph;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ShardIngestStatus {
    pub shard: String,
    /// The shard's number (`@stream(shards = N)` numbers them 0..N), as `shards_of` says it.
    #[serde(default)]
    pub number: Option<u32>,
    pub writer_epoch: u64,
    /// Generations flushed but not folded.
    pub pending_generations: Vec<u64>,
    /// Rows and bytes of this shard's pending generations.
    #[serde(default)]
    pub pending_rows: u64,
    #[serde(default)]
    pub pending_bytes: u64,
    /// Highest generation folded into the base table.
    pub folded_through: Option<u64>,
    /// WAL entries (and their rows) not yet in any generation: a live writer's unflushed
    /// tail, or what a writer that stopped left behind (the next fold claims it).
    #[serde(default)]
    pub wal_only_entries: u64,
    #[serde(default)]
    pub wal_only_rows: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TableIngestStatus {
    pub type_name: String,
    pub table: String,
    pub shards: Vec<ShardIngestStatus>,
    /// Rows and bytes in flushed, unfolded generations (visible to every process).
    pub pending_rows: u64,
    pub pending_bytes: u64,
    /// Rows acknowledged by this process but still in memory (in the WAL, not yet flushed).
    pub unflushed_rows: u64,
    /// Memtable bytes of this process not yet flushed to a generation (bounded by the
    /// writer's `max_unflushed_bytes`).
    pub unflushed_bytes: u64,
    /// How long the oldest unfolded generation has waited.
    #[schema(value_type = Option<SerdeDuration>)]
    pub oldest_pending_age: Option<Duration>,
    /// Rows durable only in a WAL (of any process): no generation holds them yet.
    #[serde(default)]
    pub wal_only_rows: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IngestStatus {
    pub branch: String,
    pub tables: Vec<TableIngestStatus>,
    /// The newest fold commit of the branch, if any.
    pub last_fold: Option<tributary_publisher::CommitId>,
    /// Why this process's last fold failed, if it did (under the `halt` policy: the first
    /// offending row).
    pub fold_error: Option<String>,
    /// Each producer's acknowledged and folded marks.
    #[serde(default)]
    pub producers: Vec<crate::ProducerStatus>,
    /// The shards this process writes (`serve --shards`); null: every shard.
    #[serde(default)]
    pub owned_shards: Option<Vec<u32>>,
}

/// How serde writes a [`Duration`]: whole seconds and the nanoseconds beyond them.
#[derive(utoipa::ToSchema)]
#[schema(as = Duration)]
#[expect(
    dead_code,
    reason = "describes the JSON form of a Duration; never built"
)]
pub struct SerdeDuration {
    secs: u64,
    nanos: u32,
}

/// What no fold has published yet, over every enrolled table, read from each table's
/// MemWAL index alone (no WAL entry, no commit): cheap enough for every metrics scrape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pending {
    /// Rows and bytes in flushed, unfolded generations.
    pub rows: u64,
    pub bytes: u64,
    /// How long the oldest of them has waited.
    pub oldest_age: Option<Duration>,
}

impl Pending {
    /// Count one shard's flushed, unfolded generations.
    fn add(&mut self, shard: &tributary_memwal_adapter::ShardState) {
        self.rows += shard.pending.iter().map(|p| p.rows).sum::<u64>();
        self.bytes += shard.pending.iter().map(|p| p.bytes).sum::<u64>();
        let age = shard
            .oldest_pending_at
            .and_then(|t| SystemTime::now().duration_since(t).ok());
        self.oldest_age = self.oldest_age.max(age);
    }
}

impl Graph {
    /// See [`Pending`].
    pub async fn pending(&self) -> Result<Pending> {
        let mut pending = Pending::default();
        for ty in self.catalog().types.iter().filter(|t| t.stream.is_some()) {
            let Some(state) = table_state(&self.store, &MemWalTable::main(&ty.table_path()))
                .await
                .map_err(Error::from_memwal)?
            else {
                continue;
            };
            for shard in &state.shards {
                pending.add(shard);
            }
        }
        Ok(pending)
    }

    pub async fn ingest_status(&self, branch: &str) -> Result<IngestStatus> {
        let lineage = self.lineage_of(&crate::graph::branch(branch)?).await?;
        let mut tables = Vec::new();
        for ty in self.catalog().types.iter().filter(|t| t.stream.is_some()) {
            let path = ty.table_path();
            let at = MemWalTable::on(&path, lineage.as_deref());
            let Some(state) = table_state(&self.store, &at)
                .await
                .map_err(Error::from_memwal)?
            else {
                continue;
            };
            let mut status = TableIngestStatus {
                type_name: ty.name.clone(),
                table: path.to_string(),
                shards: Vec::new(),
                pending_rows: 0,
                pending_bytes: 0,
                unflushed_rows: 0,
                unflushed_bytes: 0,
                oldest_pending_age: None,
                wal_only_rows: 0,
            };
            let tails = wal_tails(&self.store, &at, TailDepth::Count, None)
                .await
                .map_err(Error::from_memwal)?
                .unwrap_or_default();
            for shard in &state.shards {
                let mut pending = Pending::default();
                pending.add(shard);
                status.pending_rows += pending.rows;
                status.pending_bytes += pending.bytes;
                status.oldest_pending_age = status.oldest_pending_age.max(pending.oldest_age);
                let tail = tails.iter().find(|t| t.shard == shard.shard);
                let wal_only_rows = tail.and_then(|t| t.rows).unwrap_or(0);
                status.wal_only_rows += wal_only_rows;
                let count = ty.stream.as_ref().and_then(|s| s.shards).unwrap_or(1);
                status.shards.push(ShardIngestStatus {
                    shard: shard.shard.to_string(),
                    number: (0..count.max(1)).find(|&n| at.shard_id(n) == shard.shard),
                    writer_epoch: shard.writer_epoch,
                    pending_generations: shard.pending.iter().map(|p| p.generation).collect(),
                    pending_rows: pending.rows,
                    pending_bytes: pending.bytes,
                    folded_through: shard.compacted_through,
                    wal_only_entries: tail.map_or(0, |t| t.entries),
                    wal_only_rows,
                });
            }
            if let Some(writer) = self.streaming.writer(&path, lineage.as_deref()) {
                status.unflushed_rows =
                    writer.unflushed_rows().await.map_err(Error::from_memwal)?;
                status.unflushed_bytes = writer.unflushed_bytes() as u64;
            }
            tables.push(status);
        }
        let head = self.log(branch, 1).await?.into_iter().next();
        let folded = head
            .as_ref()
            .map(|h| h.producers.clone())
            .unwrap_or_default();
        Ok(IngestStatus {
            branch: branch.to_owned(),
            tables,
            last_fold: head.and_then(|head| head.last_fold),
            fold_error: self.last_fold_error(lineage.as_deref()).await?,
            producers: self.producer_status(lineage.as_deref(), &folded).await?,
            owned_shards: self
                .settings
                .owned_shards
                .as_ref()
                .map(|owned| owned.iter().copied().collect()),
        })
    }
}
