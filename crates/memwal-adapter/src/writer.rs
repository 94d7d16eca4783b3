//! Enrollment and the warm writers of one table.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::{BooleanArray, Int32Array, RecordBatch};
use arrow_schema::SchemaRef;
use futures::future::try_join_all;
use lance::dataset::mem_wal::{evaluate_sharding_spec, DatasetMemWalExt, ShardWriter};
use lance::datatypes::LANCE_UNENFORCED_PRIMARY_KEY_POSITION;
use lance::Dataset;
use lance_index::mem_wal::ShardingSpec;
use snafu::ResultExt;
use tributary_storage::GraphStore;
use uuid::Uuid;

use crate::error::{
    from_lance, Error, FlushStalledSnafu, InvalidSettingSnafu, LanceSnafu, NotOwnedSnafu, Result,
};
use crate::flush_failures::FlushFailures;
use crate::group::GroupWriter;
use crate::location::MemWalTable;
use crate::settings::WriterSettings;

/// How a table's writes are spread over shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharding {
    /// One shard: one writer per table and branch.
    Unsharded,
    /// `n` shards, rows routed by a hash of `id`.
    Buckets(u32),
}

/// An enrolled table: its MemWAL index exists and its key is Lance's primary key.
#[derive(Debug, Clone)]
pub struct Enrolled {
    pub table: String,
    /// The table and lineage whose MemWAL this is.
    pub at: MemWalTable,
    /// The settings recorded at enrollment (shared by every process).
    pub settings: WriterSettings,
    /// Shard of each bucket, by bucket number.
    pub shards: Vec<Uuid>,
    spec: Option<ShardingSpec>,
    /// The table as the enrollment was read from it: the writers open from it.
    dataset: Dataset,
}

impl Enrolled {
    /// The table as the enrollment was read from it.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// The shard (bucket number) of each of `keys`, as every writer routes them.
    pub fn shards_of(&self, keys: &[&str]) -> Result<Vec<u32>> {
        let Some(spec) = &self.spec else {
            return Ok(vec![0; keys.len()]);
        };
        let schema: SchemaRef = Arc::new(arrow_schema::Schema::from(self.dataset.schema()));
        shards_of_keys(&self.table, &schema, spec, self.dataset.schema(), keys)
    }
}

/// The shard (bucket number) of each of `keys` of `table` (whose Arrow schema is `schema`,
/// Lance's `lance_schema`), as `spec` routes them.
fn shards_of_keys(
    table: &str,
    schema: &SchemaRef,
    spec: &ShardingSpec,
    lance_schema: &lance::datatypes::Schema,
    keys: &[&str],
) -> Result<Vec<u32>> {
    let field = schema
        .field_with_name("id")
        .map_err(|e| Error::InvalidSetting {
            table: table.to_owned(),
            message: format!("the table has no key: {e}"),
        })?;
    let ids: arrow_array::ArrayRef = Arc::new(arrow_array::StringArray::from_iter_values(
        keys.iter().copied(),
    ));
    let batch = RecordBatch::try_new(
        Arc::new(arrow_schema::Schema::new(vec![field.clone()])),
        vec![ids],
    )
    .map_err(|e| Error::InvalidSetting {
        table: table.to_owned(),
        message: format!("keys do not match the table's key: {e}"),
    })?;
    let buckets = buckets_of(table, &batch, spec, lance_schema)?;
    Ok(buckets.iter().map(|b| b.unwrap_or(0) as u32).collect())
}

/// The bucket of each row of `batch`, by the hash of its `id` (Lance's bucket sharding).
fn buckets_of(
    table: &str,
    batch: &RecordBatch,
    spec: &ShardingSpec,
    schema: &lance::datatypes::Schema,
) -> Result<Int32Array> {
    let buckets = evaluate_sharding_spec(batch, spec, schema).map_err(|source| Error::Lance {
        action: "route".into(),
        table: table.to_owned(),
        source,
    })?;
    buckets
        .column(0)
        .as_any()
        .downcast_ref::<Int32Array>()
        .cloned()
        .ok_or_else(|| Error::InvalidSetting {
            table: table.to_owned(),
            message: "bucket column is not Int32".into(),
        })
}

/// The enrollment of the table `at`, when it has one: one open of the table, no write.
pub async fn enrollment(
    store: &GraphStore,
    at: &MemWalTable,
    defaults: &WriterSettings,
) -> Result<Option<Enrolled>> {
    let dataset = at.latest(store).await?;
    enrollment_of(&dataset, at, defaults).await
}

/// Enrol `table` for streaming writes. Idempotent, and safe when processes race: a lost
/// race on the index is the "already initialized" case. `maintained` names base-table
/// indexes the MemWAL keeps on memtables and flushed generations (they must exist; the
/// primary key's is kept implicitly). They are fixed at enrollment.
pub async fn enroll(
    store: &GraphStore,
    at: &MemWalTable,
    sharding: Sharding,
    defaults: &WriterSettings,
    maintained: &[String],
) -> Result<Enrolled> {
    let table = at.table();
    let mut dataset = at.latest(store).await?;
    ensure_primary_key(&mut dataset, table).await?;
    if let Some(enrolled) = enrollment_of(&dataset, at, defaults).await? {
        return Ok(enrolled);
    }
    let builder = dataset.initialize_mem_wal();
    let builder = match sharding {
        Sharding::Unsharded => builder.unsharded(),
        Sharding::Buckets(n) => builder.bucket_sharding("id", n),
    };
    let outcome = builder
        .maintained_indexes(maintained.iter().cloned())
        .writer_config_defaults(defaults.writer_config(Uuid::nil()))
        .execute()
        .await;
    match outcome {
        Ok(()) => {}
        Err(error) if is_lost_race(&error) => {
            dataset.checkout_latest().await.context(LanceSnafu {
                action: "refresh",
                table,
            })?;
        }
        Err(source) => {
            return Err(Error::Lance {
                action: "initialize".into(),
                table: table.into(),
                source,
            })
        }
    }
    enrollment_of(&dataset, at, defaults)
        .await?
        .ok_or_else(|| Error::InvalidSetting {
            table: table.into(),
            message: "MemWAL index missing after initialization".into(),
        })
}

/// Make `maintained` the base-table indexes the MemWAL of the enrolled table `dataset`
/// keeps on memtables and generations (a schema change adds some). Commits a table version
/// only when the set changes; writers open after it carry the new set.
pub async fn set_maintained_indexes(
    dataset: &mut Dataset,
    table: &str,
    maintained: &[String],
) -> Result<()> {
    let details = dataset.mem_wal_index_details().await.context(LanceSnafu {
        action: "read the MemWAL index",
        table,
    })?;
    let Some(details) = details else {
        return Ok(());
    };
    let mut current = details.maintained_indexes.clone();
    let mut wanted = maintained.to_vec();
    current.sort();
    wanted.sort();
    if current == wanted {
        return Ok(());
    }
    dataset
        .update_mem_wal_maintained_indexes(Some(wanted))
        .await
        .context(LanceSnafu {
            action: "update the indexes the MemWAL maintains",
            table,
        })
}

/// What `dataset`'s MemWAL index records: the settings every process uses, and the shards.
async fn enrollment_of(
    dataset: &Dataset,
    at: &MemWalTable,
    defaults: &WriterSettings,
) -> Result<Option<Enrolled>> {
    let table = at.table();
    let details = dataset.mem_wal_index_details().await.context(LanceSnafu {
        action: "read index",
        table,
    })?;
    Ok(details.map(|details| {
        let buckets = details.num_shards.max(1);
        Enrolled {
            table: table.to_owned(),
            at: at.clone(),
            settings: WriterSettings::from_recorded(&details.writer_config_defaults, defaults),
            shards: (0..buckets).map(|b| at.shard_id(b)).collect(),
            spec: details
                .sharding_specs
                .first()
                .cloned()
                .filter(|_| buckets > 1),
            dataset: dataset.clone(),
        }
    }))
}

fn is_lost_race(error: &lance::Error) -> bool {
    tributary_storage::lance_text::is_already_enrolled(error)
        || matches!(
            error,
            lance::Error::CommitConflict { .. }
                | lance::Error::RetryableCommitConflict { .. }
                | lance::Error::IncompatibleTransaction { .. }
        )
}

/// `id` must be the table's (only) unenforced primary key: set it when there is none,
/// accept it when it is `id`, refuse anything else (Lance never changes it once set).
async fn ensure_primary_key(dataset: &mut Dataset, table: &str) -> Result<()> {
    let keys: Vec<String> = dataset
        .schema()
        .unenforced_primary_key()
        .iter()
        .map(|f| f.name.clone())
        .collect();
    match keys.as_slice() {
        [key] if key == "id" => Ok(()),
        [] => {
            let lance = |source| Error::Lance {
                action: "set primary key".into(),
                table: table.into(),
                source,
            };
            let builder = dataset
                .update_field_metadata()
                .update("id", [(LANCE_UNENFORCED_PRIMARY_KEY_POSITION, "1")])
                .map_err(lance)?;
            builder.await.map_err(lance)?;
            Ok(())
        }
        other => Err(Error::PrimaryKeyMismatch {
            table: table.into(),
            found: other.join(", "),
        }),
    }
}

/// Warm durable writers of every shard of one table.
pub struct TableWriter {
    table: String,
    /// The table and lineage it writes.
    at: MemWalTable,
    schema: SchemaRef,
    /// The writers of the shards this process owns.
    shards: Vec<(Uuid, GroupWriter)>,
    /// What each of `shards`' failing memtable flushes said.
    flush_failures: Vec<Arc<FlushFailures>>,
    /// The bucket number of each of `shards`.
    buckets: Vec<u32>,
    /// How many buckets the table has.
    bucket_count: u32,
    routing: Option<(ShardingSpec, lance::datatypes::Schema)>,
}

impl TableWriter {
    /// Open (and claim) a writer per shard, or per shard of `owned` (bucket numbers) when
    /// given: this fences any earlier writer of those shards, and replays their durable
    /// WAL. Rows of a shard it does not own are refused ([`Error::NotOwned`]).
    pub async fn open(enrolled: &Enrolled, owned: Option<&BTreeSet<u32>>) -> Result<TableWriter> {
        let table = enrolled.table.as_str();
        let dataset = &enrolled.dataset;
        let count = enrolled.shards.len() as u32;
        if let Some(beyond) = owned.and_then(|owned| owned.iter().find(|&&b| b >= count)) {
            return InvalidSettingSnafu {
                table,
                message: format!(
                    "this process is to own shard {beyond}, but the table has shards 0..{}",
                    count.saturating_sub(1)
                ),
            }
            .fail();
        }
        let schema: SchemaRef = Arc::new(arrow_schema::Schema::from(dataset.schema()));
        let held: Vec<(u32, Uuid)> = (0u32..)
            .zip(enrolled.shards.iter().copied())
            .filter(|(bucket, _)| owned.is_none_or(|owned| owned.contains(bucket)))
            .collect();
        let opens = held.iter().map(|&(_, shard)| {
            let mut config = enrolled.settings.writer_config(shard);
            let failures = Arc::new(FlushFailures::default());
            config.observer = Some(failures.clone());
            async move {
                let writer = dataset
                    .mem_wal_writer(shard, config)
                    .await
                    .map_err(|e| from_lance(table, &shard, "open writer", e))?;
                let grouped = GroupWriter::new(table, shard, writer);
                Ok::<_, Error>(((shard, grouped), failures))
            }
        });
        let (shards, flush_failures) = try_join_all(opens).await?.into_iter().unzip();
        let routing = enrolled
            .spec
            .clone()
            .map(|spec| (spec, dataset.schema().clone()));
        Ok(TableWriter {
            table: enrolled.table.clone(),
            at: enrolled.at.clone(),
            schema,
            shards,
            flush_failures,
            buckets: held.iter().map(|&(bucket, _)| bucket).collect(),
            bucket_count: enrolled.shards.len() as u32,
            routing,
        })
    }

    /// Whether this writer holds every shard of its table.
    pub fn holds_every_shard(&self) -> bool {
        self.buckets.len() as u32 == self.bucket_count
    }

    /// Refuse `keys` when one of them is in a shard this writer does not own (before a send
    /// writes anything, to any table).
    pub fn check_owned(&self, keys: &[&str]) -> Result<()> {
        if self.holds_every_shard() || keys.is_empty() {
            return Ok(());
        }
        let Some((spec, schema)) = &self.routing else {
            // Unsharded: every key is in shard 0.
            return NotOwnedSnafu {
                table: self.table.clone(),
                key: Some(keys[0].to_owned()),
                shard: 0u32,
                owned: self.buckets.clone(),
            }
            .fail();
        };
        match shards_of_keys(&self.table, &self.schema, spec, schema, keys)?
            .into_iter()
            .zip(keys)
            .find(|(b, _)| !self.buckets.contains(b))
        {
            Some((shard, key)) => NotOwnedSnafu {
                table: self.table.clone(),
                key: Some((*key).to_owned()),
                shard,
                owned: self.buckets.clone(),
            }
            .fail(),
            None => Ok(()),
        }
    }

    /// `parts` (by bucket) with each bucket's writer, or the first bucket this writer
    /// does not own: nothing is written then.
    fn owned_parts(
        &self,
        parts: Vec<(usize, RecordBatch)>,
    ) -> Result<Vec<(&GroupWriter, RecordBatch)>> {
        parts
            .into_iter()
            .map(|(bucket, part)| {
                let at = self.buckets.iter().position(|&b| b as usize == bucket);
                match at {
                    Some(at) => Ok((&self.shards[at].1, part)),
                    None => NotOwnedSnafu {
                        table: self.table.clone(),
                        key: None::<String>,
                        shard: bucket as u32,
                        owned: self.buckets.clone(),
                    }
                    .fail(),
                }
            })
            .collect()
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// The table and lineage this writer writes.
    pub fn at(&self) -> &MemWalTable {
        &self.at
    }

    /// The table's schema as this writer opened it.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Write `batch` and return once every row is durable in the WAL.
    pub async fn put(&self, batch: &RecordBatch) -> Result<()> {
        let batch =
            RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec()).map_err(|e| {
                Error::InvalidSetting {
                    table: self.table.clone(),
                    message: format!("batch does not match the table: {e}"),
                }
            })?;
        let parts = self.owned_parts(self.route(batch)?)?;
        try_join_all(parts.into_iter().map(|(writer, part)| writer.put(part)))
            .await
            .map(|_| ())
    }

    /// Tombstone `keys` (each shard's in order with its puts) and return once every
    /// tombstone is durable in the WAL.
    pub async fn delete(&self, keys: &[String]) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let field = self
            .schema
            .field_with_name("id")
            .map_err(|e| Error::InvalidSetting {
                table: self.table.clone(),
                message: format!("the table has no key: {e}"),
            })?;
        let ids: arrow_array::ArrayRef = Arc::new(arrow_array::StringArray::from_iter_values(keys));
        let schema = Arc::new(arrow_schema::Schema::new(vec![field.clone()]));
        let batch = RecordBatch::try_new(schema, vec![ids]).map_err(|e| Error::InvalidSetting {
            table: self.table.clone(),
            message: format!("keys do not match the table's key: {e}"),
        })?;
        let parts = self.owned_parts(self.route(batch)?)?;
        try_join_all(parts.into_iter().map(|(writer, part)| writer.delete(part)))
            .await
            .map(|_| ())
    }

    /// `batch` split by shard (bucket number, its rows): routed by the hash of `id`.
    fn route(&self, batch: RecordBatch) -> Result<Vec<(usize, RecordBatch)>> {
        let Some((spec, schema)) = &self.routing else {
            return Ok(vec![(0, batch)]);
        };
        let buckets = buckets_of(&self.table, &batch, spec, schema)?;
        let mut parts = Vec::new();
        for b in 0..self.bucket_count as usize {
            let mask: BooleanArray = buckets.iter().map(|v| Some(v == Some(b as i32))).collect();
            let part = arrow_select::filter::filter_record_batch(&batch, &mask).map_err(|e| {
                Error::InvalidSetting {
                    table: self.table.clone(),
                    message: format!("routing failed: {e}"),
                }
            })?;
            if part.num_rows() > 0 {
                parts.push((b, part));
            }
        }
        let routed: usize = parts.iter().map(|(_, p)| p.num_rows()).sum();
        if routed != batch.num_rows() {
            return Err(Error::InvalidSetting {
                table: self.table.clone(),
                message: format!(
                    "{} of {} rows map to no shard",
                    batch.num_rows() - routed,
                    batch.num_rows()
                ),
            });
        }
        Ok(parts)
    }

    /// Fails with a fence error when another writer has claimed any of the shards since
    /// this one opened (one read of each shard's manifest): what this writer holds may
    /// then be behind what was acknowledged.
    pub async fn check_fenced(&self) -> Result<()> {
        for (shard, writer) in &self.shards {
            writer
                .writer()
                .check_fenced()
                .await
                .map_err(|e| from_lance(&self.table, shard, "check fence", e))?;
        }
        Ok(())
    }

    /// The writers, for status and (later) the fold's freeze.
    pub fn shards(&self) -> impl Iterator<Item = (&Uuid, &ShardWriter)> {
        self.shards.iter().map(|(id, w)| (id, w.writer()))
    }

    /// Rows in memory (durable in the WAL, not yet flushed to a generation): the active
    /// memtables and the frozen ones still flushing. A fenced writer hands out no
    /// memtables; its active one is still counted.
    pub async fn unflushed_rows(&self) -> Result<u64> {
        let mut rows = 0;
        for (shard, writer) in &self.shards {
            let writer = writer.writer();
            rows += match writer.in_memory_memtable_refs().await {
                Ok(memtables) => std::iter::once(&memtables.active)
                    .chain(&memtables.frozen)
                    .map(|m| m.batch_store.total_rows() as u64)
                    .sum::<u64>(),
                Err(_) => {
                    let stats = writer
                        .memtable_stats()
                        .await
                        .map_err(|e| from_lance(&self.table, shard, "memtable stats", e))?;
                    stats.row_count as u64
                }
            };
        }
        Ok(rows)
    }

    /// Freeze every shard's active memtable and wait until it is a flushed generation:
    /// the fold's cut. Rows acknowledged before this call are in a generation after it.
    /// Flushes that take longer than `patience` in all (Lance retries a failing one,
    /// waiting longer each time, up to minutes) are not waited for: [`Error::FlushStalled`],
    /// with what the last attempt said; one a disk refuses (full, read-only) is not waited
    /// for at all: [`Error::FlushRefused`]. What a memtable holds is durable in the WAL
    /// either way. Every shard is attempted (one fenced shard must not leave the others
    /// unflushed); the first failure is returned.
    pub async fn freeze(&self, patience: std::time::Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut first_error = None;
        for ((shard, writer), failures) in self.shards.iter().zip(&self.flush_failures) {
            let frozen = async {
                let seen = failures.count();
                let fence = writer
                    .writer()
                    .force_freeze_active()
                    .await
                    .map_err(|e| from_lance(&self.table, shard, "freeze", e))?;
                tokio::select! {
                    flushed = tokio::time::timeout_at(deadline, fence.wait()) => match flushed {
                        Ok(flushed) => {
                            flushed.map_err(|e| from_lance(&self.table, shard, "flush", e))
                        }
                        Err(_) => FlushStalledSnafu {
                            table: self.table.clone(),
                            shard: shard.to_string(),
                            seconds: patience.as_secs(),
                            last_error: failures.last(),
                        }
                        .fail(),
                    },
                    refusal = failures.refused_after(seen) => Err(Error::FlushRefused {
                        table: self.table.clone(),
                        shard: shard.to_string(),
                        source: refusal,
                    }),
                }
            }
            .await;
            if let Err(error) = frozen {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Flush the WAL and the memtables to generations, and release the shards, taking at
    /// most `patience` in all (past it, [`Error::FlushStalled`]: what a writer holds is
    /// durable in its WAL, for the shard's next writer to replay). Every shard is
    /// attempted; the first failure is returned.
    pub async fn close(self, patience: std::time::Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut first_error = None;
        for ((shard, writer), failures) in self.shards.into_iter().zip(self.flush_failures) {
            let closing = async { writer.into_writer().await.close().await };
            let closed = match tokio::time::timeout_at(deadline, closing).await {
                Ok(closed) => closed.map_err(|e| from_lance(&self.table, &shard, "close", e)),
                Err(_) => FlushStalledSnafu {
                    table: self.table.clone(),
                    shard: shard.to_string(),
                    seconds: patience.as_secs(),
                    last_error: failures.last(),
                }
                .fail(),
            };
            if let Err(error) = closed {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Bytes written but not yet flushed to a generation, over all shards.
    pub fn unflushed_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|(_, w)| w.writer().memory().unflushed_bytes())
            .sum()
    }
}
