//! Streaming ingest: validate synchronously, write to the warm MemWAL writers of
//! (table, lineage) of the stream's branch, acknowledge once Lance reports the rows durable.
//!
//! Nothing here is graph-visible: a later fold publishes the rows. An acknowledgement only
//! promises durability.

use std::sync::Arc;

use arrow_array::RecordBatch;
use futures::future::try_join_all;
use lance::index::DatasetIndexExt;
use snafu::ResultExt;
use tributary_memwal_adapter::{enroll, enrollment, Enrolled, MemWalTable, Sharding, TableWriter};
use tributary_publisher::BranchName;
use tributary_schema::{Decoder, LineError, TypeBatch, TypeDef};

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::patches::apply_patches;
use crate::producers::Producer;
use crate::removals::Removals;
use crate::writes::Writes;

/// What one send made durable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestAck {
    /// Rows and deletes durable in the WAL.
    pub durable_rows: u64,
    /// Lines that were refused; none of their rows was written.
    pub rejected: Vec<LineError>,
    /// Every line up to and including this one is durable or rejected.
    pub through_line: u64,
    /// A strict stream stopped at this invalid line: nothing at or after it was written.
    pub stopped_at: Option<LineError>,
    /// Lines of a producer's stream at or below its acknowledged mark: acknowledged
    /// before, so not written again.
    pub duplicates: u64,
}

/// How a stream is ingested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestOptions {
    pub branch: BranchName,
    /// Stop at the first invalid line (acknowledging only the lines before it) instead of
    /// rejecting invalid lines one by one and going on.
    pub strict: bool,
    /// The producer sending the stream, for exactly-once delivery: its lines at or below
    /// the producer's acknowledged mark are acknowledged without being written again.
    /// The stream holds the producer (one stream at a time) until every copy of these
    /// options and of its ingestors is dropped.
    pub producer: Option<Producer>,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            branch: BranchName::main(),
            strict: false,
            producer: None,
        }
    }
}

/// One line of a stream as its reader got it: its text, or why it could not be read (not
/// UTF-8, over a length limit). An unreadable line is rejected with that reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamLine<'a> {
    Text(&'a str),
    Unreadable(&'a str),
}

/// One table's share of a send.
#[derive(Clone, Copy)]
enum TableWrite<'a> {
    Rows(&'a RecordBatch),
    Deletes(&'a [String]),
}

/// A handle for streaming writes to one branch. Cheap; sends may run concurrently (Lance
/// group-commits their WAL appends).
pub struct Ingestor<'g> {
    graph: &'g Graph,
    branch: BranchName,
    /// The branch's lineage, read from its head at the first send and fixed for the
    /// stream: a branch deleted (and made again) under the stream refuses its sends.
    lineage: tokio::sync::OnceCell<Option<String>>,
    strict: bool,
    producer: Option<Producer>,
}

/// Attempts at opening a table's writer whose claim met another claim.
const OPEN_ATTEMPTS: usize = 3;

impl Graph {
    /// The shard (numbered 0..N by `@stream(shards = N)`) of each of `keys` of the
    /// `@stream` type `type_name`: where a process owning some shards must send them.
    /// Nodes only (an edge's key is its ends). Every key of an unsharded type is in
    /// shard 0; a sharded type no send has reached yet is enrolled first, as its first
    /// send would.
    pub async fn shards_of(&self, type_name: &str, keys: &[&str]) -> Result<Vec<u32>> {
        let ty = self.type_def(type_name)?;
        if ty.stream.is_none() {
            return Err(Error::NotStreamed {
                type_name: type_name.to_owned(),
            });
        }
        let shards = ty.stream.as_ref().and_then(|s| s.shards).unwrap_or(1);
        if shards <= 1 {
            return Ok(vec![0; keys.len()]);
        }
        // Routing is the same on every lineage: `main`'s enrollment answers for all.
        let enrolled = self
            .enrolled(&ty, &MemWalTable::main(&ty.table_path()))
            .await?;
        enrolled.shards_of(keys).map_err(Error::from_memwal)
    }

    /// The enrollment of `ty`'s table on the lineage `at`, enrolling it first if no send
    /// has yet (a branch forked from an enrolled table inherits its enrollment). An
    /// enrolled table keeps what it was enrolled with (folds keep its indexes current):
    /// only a first enrollment builds indexes.
    /// Boxed, and `Send` by its type: inline, a send's future grows past what the compiler
    /// can prove `Send`.
    fn enrolled<'a>(
        &'a self,
        ty: &'a TypeDef,
        at: &'a MemWalTable,
    ) -> futures::future::BoxFuture<'a, Result<Enrolled>> {
        Box::pin(async move {
            let known = enrollment(&self.store, at, &self.settings.writer)
                .await
                .map_err(Error::from_memwal)?;
            if let Some(enrolled) = known {
                return Ok(enrolled);
            }
            let sharding = match ty.stream.as_ref().and_then(|s| s.shards) {
                Some(n) if n > 1 => Sharding::Buckets(n),
                _ => Sharding::Unsharded,
            };
            let maintained = self.index_before_enrollment(ty, at).await;
            enroll(
                &self.store,
                at,
                sharding,
                &self.settings.writer,
                &maintained,
            )
            .await
            .map_err(Error::from_memwal)
        })
    }

    /// Start streaming writes to `branch`.
    pub fn ingest(&self, branch: &str) -> Result<Ingestor<'_>> {
        self.ingestor(&IngestOptions {
            branch: crate::graph::branch(branch)?,
            ..IngestOptions::default()
        })
    }

    /// Start streaming writes as `options` say.
    pub fn ingestor(&self, options: &IngestOptions) -> Result<Ingestor<'_>> {
        Ok(Ingestor {
            graph: self,
            branch: options.branch.clone(),
            lineage: tokio::sync::OnceCell::new(),
            strict: options.strict,
            producer: options.producer.clone(),
        })
    }

    /// The warm writer of a table on `branch`'s lineage `lineage`, enrolling the table at
    /// its first write there.
    async fn table_writer(
        &self,
        type_name: &str,
        branch: &str,
        lineage: Option<&str>,
    ) -> Result<Arc<TableWriter>> {
        let catalog = self.catalog();
        let ty = crate::graph::type_in(&catalog, type_name)?;
        let path = ty.table_path();
        if let Some(writer) = self.streaming.writer(&path, lineage) {
            return Ok(writer);
        }
        let _opening = self.streaming.opening.lock().await;
        if let Some(writer) = self.streaming.writer(&path, lineage) {
            return Ok(writer);
        }
        self.store
            .check_conditional_put()
            .await
            .map_err(|source| Error::Storage { source })?;
        let at = MemWalTable::on(&path, lineage);
        let enrolled = self.enrolled(ty, &at).await?;
        self.refuse_wal_gaps(&at).await?;
        let owned = self.settings.owned_shards.as_ref();
        let mut opened = TableWriter::open(&enrolled, owned).await;
        // A claim whose response was lost, then retried, reads as a rival's claim of the
        // same epoch: claim again, at the next one (a live rival would simply win again).
        for _ in 1..OPEN_ATTEMPTS {
            match &opened {
                Err(error) if error.is_fenced() => {
                    tracing::info!(%error, "a writer's claim met another; claiming again");
                    opened = TableWriter::open(&enrolled, owned).await;
                }
                _ => break,
            }
        }
        let writer = match opened {
            Ok(writer) => Arc::new(writer),
            Err(error) if error.is_sealed() && lineage.is_some() => {
                // Only a delete seals a branch's shards (no schema change runs while
                // branches exist).
                return Err(Error::BranchDeleted {
                    branch: branch.to_owned(),
                });
            }
            Err(error) if error.is_sealed() => {
                // A schema change removed `@stream` from the type: take it, so later
                // lines of the type are refused line by line.
                drop(_opening);
                self.newer_catalog().await?;
                return Err(Error::NoLongerStreamed {
                    type_name: type_name.to_owned(),
                });
            }
            Err(error) => return Err(Error::from_memwal(error)),
        };
        // Opening replays what an earlier writer acknowledged but never flushed: that is
        // pending work of this process now.
        if writer.unflushed_rows().await.map_err(Error::from_memwal)? > 0 {
            self.streaming.acknowledged(branch);
        }
        self.streaming.keep(writer.clone());
        Ok(writer)
    }
}

impl Graph {
    /// Give a table its derived indexes before it is enrolled, and name the ones the
    /// MemWAL should maintain: the key's and the `@index` fields' (`src`/`dst` serve
    /// snapshot joins only). Fresh search is then indexed from the first row, and fresh
    /// vector search, which reads only indexed base rows, misses nothing. The key's BTree
    /// is listed although Lance maintains a primary key's implicitly: implicitly, a flushed
    /// generation gets it only as a dedup sidecar, and a fresh point lookup scans the
    /// generation. Listed, it shares the memtable's key index and each generation carries
    /// it (pinned by a test, as Lance's docs say not to list it).
    /// Indexes are derived state: a failure is logged, and the table is enrolled without
    /// the indexes that are missing.
    async fn index_before_enrollment(
        &self,
        ty: &tributary_schema::TypeDef,
        at: &MemWalTable,
    ) -> Vec<String> {
        let path = ty.table_path();
        let mut dataset = match self.store.open_dataset_on(&path, at.lineage(), None).await {
            Ok(dataset) => dataset,
            Err(error) => {
                tracing::warn!(%error, table = %path, "could not open the table to index it");
                return Vec::new();
            }
        };
        let specs = tributary_write::index_specs(ty);
        if let Err(error) =
            tributary_write::maintain_indexes(&mut dataset, &specs, self.settings.indexes, true)
                .await
        {
            tracing::warn!(%error, table = %path, "could not build indexes at enrollment");
        }
        let existing: Vec<String> = match dataset.load_indices().await {
            Ok(indexes) => indexes.iter().map(|i| i.name.clone()).collect(),
            Err(_) => Vec::new(),
        };
        crate::schema_change::maintained_indexes(ty, &existing)
    }
}

impl Ingestor<'_> {
    pub fn branch(&self) -> &str {
        &self.branch
    }

    /// The lineage the stream writes: its branch's when it first sent.
    async fn lineage(&self) -> Result<Option<&str>> {
        let lineage = self
            .lineage
            .get_or_try_init(|| self.graph.lineage_of(&self.branch))
            .await?;
        Ok(lineage.as_deref())
    }

    /// The warm writer of `type_name`'s table on the stream's lineage.
    async fn writer_of(&self, type_name: &str) -> Result<Arc<TableWriter>> {
        let lineage = self.lineage().await?;
        self.graph
            .table_writer(type_name, &self.branch, lineage)
            .await
    }

    /// Validate NDJSON `text` whose first line is line `first_line`, write every valid
    /// row, and return once they are durable. Invalid lines are listed, never written.
    pub async fn send(&self, first_line: u64, text: &str) -> Result<IngestAck> {
        let lines: Vec<StreamLine<'_>> = text.lines().map(StreamLine::Text).collect();
        self.send_lines(first_line, &lines).await
    }

    /// Send `lines`, the first of which is line `first_line`, as read from a stream: write
    /// every valid row and return once they are durable. Invalid and unreadable lines are
    /// rejected, never written; a strict ingestor stops at the first of them, writes only
    /// the lines before it, and names it in [`IngestAck::stopped_at`]. A producer's lines
    /// at or below its acknowledged mark are acknowledged as duplicates, not written.
    pub async fn send_lines(&self, first_line: u64, lines: &[StreamLine<'_>]) -> Result<IngestAck> {
        let Some(producer) = &self.producer else {
            return self.send_new_lines(first_line, lines).await;
        };
        let last_line = (first_line + lines.len() as u64).saturating_sub(1);
        let (Some(first_sequence), Some(_)) = (
            producer.sequence_of(first_line),
            producer.sequence_of(last_line),
        ) else {
            return Err(Error::SequenceOverflow);
        };
        let lineage = self.lineage().await?;
        let mut held = producer.hold(self.graph, &self.branch, lineage).await?;
        held.check_order(producer.id(), first_line)?;
        // Sequences rise with lines, so the lines acknowledged before are a prefix.
        let duplicates = held
            .mark
            .map_or(0, |mark| {
                mark.saturating_add(1).saturating_sub(first_sequence)
            })
            .min(lines.len() as u64);
        let fresh = &lines[duplicates as usize..];
        if fresh.is_empty() {
            held.settled(last_line);
            return Ok(IngestAck {
                through_line: last_line,
                duplicates,
                ..IngestAck::default()
            });
        }
        held.confirm(producer.id()).await?;
        let mut ack = self.send_new_lines(first_line + duplicates, fresh).await?;
        ack.duplicates = duplicates;
        // A strict stream's bad line is not acknowledged: sent again fixed, it is written.
        let settled_through = match &ack.stopped_at {
            Some(bad) => bad.line.saturating_sub(1),
            None => ack.through_line,
        };
        if settled_through >= first_line + duplicates {
            let sequence = producer
                .sequence_of(settled_through)
                .ok_or(Error::SequenceOverflow)?;
            held.raise(self.graph, producer.id(), sequence).await?;
        }
        held.settled(settled_through);
        Ok(ack)
    }

    /// [`Ingestor::send_lines`] of lines no earlier send acknowledged.
    async fn send_new_lines(&self, first_line: u64, lines: &[StreamLine<'_>]) -> Result<IngestAck> {
        let (text, unreadable) = join_lines(first_line, lines);
        let (mut accepted, mut rejected, _) = self.decode(first_line, &text);
        // A line may name what another process's schema change added.
        if !rejected.is_empty() && self.graph.newer_catalog().await?.is_some() {
            (accepted, rejected, _) = self.decode(first_line, &text);
        }
        let last_line = (first_line + lines.len() as u64).saturating_sub(1);
        rejected.extend(unreadable);
        rejected.sort_by_key(|e| e.line);
        let turn = self.turn(&accepted).await?;
        let acked = async {
            let mut settled = self.settle(accepted.clone()).await?;
            rejected.extend(settled.late.iter().cloned());
            rejected.sort_by_key(|e| e.line);
            let mut stopped_at = None;
            if self.strict {
                // A patch settles against what is stored, so a shorter prefix may reject
                // a line the whole send did not: settle again until the first bad line
                // holds.
                while let Some(bad) = rejected.first().cloned() {
                    let before = &lines[..(bad.line - first_line) as usize];
                    accepted = self.decode(first_line, &join_lines(first_line, before).0).0;
                    settled = self.settle(accepted.clone()).await?;
                    rejected = vec![bad.clone()];
                    stopped_at = Some(bad);
                    if settled.late.is_empty() {
                        break;
                    }
                    rejected = settled.late.clone();
                }
            }
            let durable_rows = self.write_settled(settled, &accepted).await?;
            Ok(IngestAck {
                durable_rows,
                rejected,
                through_line: stopped_at.as_ref().map_or(last_line, |bad| bad.line),
                stopped_at,
                duplicates: 0,
            })
        }
        .await;
        turn.end().await;
        acked
    }

    /// Write the decoded rows, patches and deletes of `@stream` types; returns once all
    /// are durable, with the patch lines that had no row to patch (not written). Rows,
    /// patches and deletes of one key in the same send settle by line order, so what is
    /// written names each key once (whole rows and tombstones) and its order within the
    /// send does not matter; across sends, a shard's writes reach its WAL in send order.
    /// Writes carry no sequence numbers: a producer's marks do not apply to them.
    pub async fn write(&self, writes: Writes) -> Result<(u64, Vec<LineError>)> {
        let turn = self.turn(&writes).await?;
        let written = async {
            let settled = self.settle(writes.clone()).await?;
            let late = settled.late.clone();
            Ok((self.write_settled(settled, &writes).await?, late))
        }
        .await;
        turn.end().await;
        written
    }

    /// This send's place among the writes of its branch. A send with patches reads the
    /// rows it patches and writes them whole, so nothing may land in between: it takes
    /// the branch's write turn (no load or fold of any process runs until it is
    /// acknowledged), then this process's send lock exclusively. Other sends share the
    /// lock; writes of other processes fence this one's writer first.
    async fn turn(&self, writes: &Writes) -> Result<SendTurn<'_>> {
        let lock = &self.graph.streaming.patching;
        if writes.patches.is_empty() {
            return Ok(SendTurn::Shared(lock.read().await));
        }
        let branch = crate::graph::branch(&self.branch)?;
        let write_turn = self.graph.write_turn(&branch).await?;
        Ok(SendTurn::Exclusive(
            lock.write().await,
            Box::new(write_turn),
        ))
    }

    /// Settle a send into whole rows and deletes: rows against deletes by line order,
    /// patches laid over the rows they patch (the send's own, or the fresh view's).
    fn settle(&self, writes: Writes) -> futures::future::BoxFuture<'_, Result<Settled>> {
        // Boxed: its futures (a fresh read's among them) inside every send's would make
        // the send's type too deep for the compiler's `Send` check.
        futures::FutureExt::boxed(self.settle_now(writes))
    }

    async fn settle_now(&self, writes: Writes) -> Result<Settled> {
        let catalog = self.graph.catalog();
        for name in writes.types() {
            if crate::graph::type_in(&catalog, name)?.stream.is_none() {
                return Err(Error::NotStreamed {
                    type_name: name.to_owned(),
                });
            }
        }
        if self.graph.settings.owned_shards.is_some() {
            self.check_owned(&writes).await?;
        }
        for patches in &writes.patches {
            self.own_shards_of(&patches.rows.type_name).await?;
        }
        let (batches, removals) = Removals::resolve(&catalog, writes.batches, writes.deletes)?;
        let (batches, late) =
            apply_patches(&catalog, batches, &removals, writes.patches, |ty, keys| {
                self.fresh_rows(ty, keys)
            })
            .await?;
        let deletes = removals
            .named()
            .map(|(name, keys)| (name.to_owned(), keys.map(str::to_owned).collect()))
            .collect();
        Ok(Settled {
            batches,
            deletes,
            late,
        })
    }

    /// Refuse a send of a process owning some shards when any key it writes, deletes or
    /// patches is in a shard of another, before anything of it is written or read.
    async fn check_owned(&self, writes: &Writes) -> Result<()> {
        let ids = |batch: &RecordBatch| -> Vec<String> {
            batch
                .column_by_name("id")
                .and_then(|c| c.as_any().downcast_ref::<arrow_array::StringArray>())
                .map(|ids| ids.iter().flatten().map(str::to_owned).collect())
                .unwrap_or_default()
        };
        let keyed = writes
            .batches
            .iter()
            .map(|b| (b.type_name.as_str(), ids(&b.batch)))
            .chain(
                writes
                    .deletes
                    .iter()
                    .map(|d| (d.type_name.as_str(), d.ids.clone())),
            )
            .chain(
                writes
                    .patches
                    .iter()
                    .map(|p| (p.rows.type_name.as_str(), ids(&p.rows.batch))),
            );
        for (type_name, keys) in keyed {
            if keys.is_empty() {
                continue;
            }
            let writer = self.writer_of(type_name).await?;
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            writer.check_owned(&keys).map_err(Error::from_memwal)?;
        }
        Ok(())
    }

    /// Make this process the writer of `type_name`'s shards before a patch reads them: a
    /// writer that opens replays what every other process acknowledged, so the fresh view
    /// holds every acknowledged row. A warm writer another process fenced reopens.
    async fn own_shards_of(&self, type_name: &str) -> Result<()> {
        let writer = self.writer_of(type_name).await?;
        match writer.check_fenced().await {
            Err(error) if error.is_fenced() => {
                self.graph.streaming.evict(&writer);
                tokio::time::sleep(CLAIM_GRACE).await;
                self.writer_of(type_name).await?;
                Ok(())
            }
            result => result.map_err(Error::from_memwal),
        }
    }

    /// The rows of `ty` whose keys are `keys`, as a fresh read sees them now.
    async fn fresh_rows(&self, ty: &TypeDef, keys: Vec<String>) -> Result<RecordBatch> {
        let view = crate::read::View::fresh(crate::graph::At::Branch(self.branch.clone()));
        let head = self.graph.snapshot(&view.at).await?;
        self.graph.rows_by_key(&head, ty, &keys, &view).await
    }

    /// Write what a send settled to. A send with patches whose writer was fenced settles
    /// again before it writes once more: another process may have written the rows it
    /// patched. If that changes which patch lines have no row, the acknowledgement
    /// already worked out would be wrong: nothing is written and the send is refused.
    async fn write_settled(&self, settled: Settled, writes: &Writes) -> Result<u64> {
        if writes.patches.is_empty() {
            return self.put_settled(&settled, true).await;
        }
        match self.put_settled(&settled, false).await {
            Err(Error::MemWal { source }) if source.is_fenced() => {
                tracing::info!(error = %source, "writer fenced under a patch; settling again");
                tokio::time::sleep(CLAIM_GRACE).await;
                let again = self.settle(writes.clone()).await?;
                if again.late != settled.late {
                    return Err(Error::PatchedRowsChanged);
                }
                self.put_settled(&again, false).await
            }
            result => result,
        }
    }

    async fn put_settled(&self, settled: &Settled, retry_fenced: bool) -> Result<u64> {
        let writes = settled
            .batches
            .iter()
            .filter(|b| b.batch.num_rows() > 0)
            .map(|b| (b.type_name.as_str(), TableWrite::Rows(&b.batch)))
            .chain(
                settled
                    .deletes
                    .iter()
                    .map(|(name, keys): &(String, Vec<String>)| {
                        (name.as_str(), TableWrite::Deletes(keys))
                    }),
            )
            .map(|(name, write)| async move {
                self.apply(name, write, retry_fenced).await?;
                Ok::<_, Error>(match write {
                    TableWrite::Rows(batch) => batch.num_rows() as u64,
                    TableWrite::Deletes(keys) => keys.len() as u64,
                })
            });
        let rows = try_join_all(writes).await?.into_iter().sum();
        self.check_branch_stands().await?;
        if rows > 0 {
            self.graph.streaming.acknowledged(&self.branch);
        }
        Ok(rows)
    }

    /// A branch other than `main` must still be the one the stream began on, after its
    /// rows are durable and before they are acknowledged: a delete seals the branch's
    /// shards (fencing this stream's writers), then removes the lineage's marker, then
    /// its head, and a cleanup may remove the lineage, seals included, only after that;
    /// a marker (or, for a lineage without one, a head naming the lineage) found once the
    /// rows are durable means the delete, if any, came after them. One GET per send, on
    /// branches only (`main` cannot be deleted).
    async fn check_branch_stands(&self) -> Result<()> {
        let Some(lineage) = self.lineage().await? else {
            return Ok(());
        };
        let marker = crate::branches::lineage_marker(lineage);
        if self
            .graph
            .store
            .get(&marker)
            .await
            .map_err(|source| Error::Storage { source })?
            .is_some()
        {
            return Ok(());
        }
        let deleted = || Error::BranchDeleted {
            branch: self.branch.to_string(),
        };
        match self.graph.lineage_of(&self.branch).await {
            Ok(now) if now.as_deref() == Some(lineage) => Ok(()),
            Ok(_) => Err(deleted()),
            Err(error) if error.is_branch_gone() => Err(deleted()),
            Err(error) => Err(error),
        }
    }
}

/// A send settled into whole rows and tombstones.
struct Settled {
    batches: Vec<TypeBatch>,
    /// Type → keys to delete.
    deletes: Vec<(String, Vec<String>)>,
    /// Patch lines with no row to patch.
    late: Vec<LineError>,
}

/// A send's hold on [`crate::streaming::Streaming::patching`] (and, when it patches, on
/// its branch's write turn).
#[expect(dead_code, reason = "the guards are held for their drop")]
enum SendTurn<'a> {
    Shared(tokio::sync::RwLockReadGuard<'a, ()>),
    Exclusive(
        tokio::sync::RwLockWriteGuard<'a, ()>,
        Box<crate::graph::WriteTurn>,
    ),
}

impl SendTurn<'_> {
    async fn end(self) {
        if let SendTurn::Exclusive(lock, turn) = self {
            drop(lock);
            (*turn).end().await;
        }
    }
}

/// How long a send that met a fence waits before it reopens the shard.
const CLAIM_GRACE: std::time::Duration = std::time::Duration::from_millis(300);

impl Ingestor<'_> {
    /// Write one type's rows or deletes on its warm writer. A fenced writer (another
    /// process claimed the shard, or the writer poisoned itself on a failed WAL write)
    /// leaves the warm set and the write goes once more through a writer that reopens —
    /// and so replays — the shard. The fenced write acknowledged nothing, and an upsert
    /// (or a delete) twice is one.
    async fn apply(
        &self,
        type_name: &str,
        write: TableWrite<'_>,
        retry_fenced: bool,
    ) -> Result<()> {
        // A writer opened on a table that took a schema change this process has not
        // seen yet (its writer was fenced and reopened) takes the rows conformed.
        let on = |writer: Arc<TableWriter>| async move {
            match write {
                TableWrite::Rows(batch)
                    if writer.schema().fields().len() != batch.num_columns() =>
                {
                    self.put_under_newer_schema(type_name, batch).await
                }
                TableWrite::Rows(batch) => writer.put(batch).await.map_err(Error::from_memwal),
                TableWrite::Deletes(keys) => writer.delete(keys).await.map_err(Error::from_memwal),
            }
        };
        let fenced =
            |error: &Error| matches!(error, Error::MemWal { source } if source.is_fenced());
        let writer = self.writer_of(type_name).await?;
        match on(writer.clone()).await {
            Err(error) if fenced(&error) && !retry_fenced => {
                self.graph.streaming.evict(&writer);
                Err(error)
            }
            Err(error) if fenced(&error) => {
                tracing::info!(%error, "writer fenced; reopening its shards");
                self.graph.streaming.evict(&writer);
                // A fence by another process is nearly always a fold or a load bringing
                // this shard's tail into a generation (open, replay, flush): give it that
                // moment before taking the shard back, or the two take it from each other
                // in turns and the claim never completes.
                tokio::time::sleep(CLAIM_GRACE).await;
                let writer = self.writer_of(type_name).await?;
                on(writer).await
            }
            result => result,
        }
    }
}

impl Ingestor<'_> {
    /// Put rows decoded under the schema this process held onto a table that took a
    /// schema change since (another process applied it, and this process's writer
    /// reopened on the table): with the schema taken afresh, they get the new fields'
    /// defaults or nulls, as a line that did not name them would.
    async fn put_under_newer_schema(&self, type_name: &str, batch: &RecordBatch) -> Result<()> {
        let catalog = self.graph.current_catalog().await?;
        let ty = crate::graph::type_in(&catalog, type_name)?;
        let writer = self.writer_of(type_name).await?;
        if writer.schema().fields().len() != ty.arrow_schema().fields().len() {
            // The table changed and its schema is not published yet: a change in flight.
            return Err(Error::SchemaChanging {
                type_name: type_name.to_owned(),
            });
        }
        let rows = tributary_schema::conform(ty, batch).context(crate::error::ArrowSnafu {
            action: "conform rows to the schema",
        })?;
        writer.put(&rows).await.map_err(Error::from_memwal)
    }
}

fn not_streamed(name: &str, lines: &[u64]) -> Vec<LineError> {
    lines
        .iter()
        .map(|&line| LineError {
            line,
            field: None,
            reason: format!("{name} is not enrolled for streaming ingest: declare it with @stream (e.g. `node {name} @stream {{ … }}`), or use `load`"),
        })
        .collect()
}

/// The NDJSON text of `lines` (an unreadable line stays as a blank one, so numbering
/// holds) and the rejections of the unreadable ones.
fn join_lines(first_line: u64, lines: &[StreamLine<'_>]) -> (String, Vec<LineError>) {
    let mut text = String::new();
    let mut unreadable = Vec::new();
    for (offset, line) in lines.iter().enumerate() {
        if offset > 0 {
            text.push('\n');
        }
        let refuse = |reason: &str| LineError {
            line: first_line + offset as u64,
            field: None,
            reason: reason.to_owned(),
        };
        match line {
            // One stream line is one line: a break inside would shift every number after.
            StreamLine::Text(line) if line.contains('\n') => {
                unreadable.push(refuse("the line holds a line break"))
            }
            StreamLine::Text(line) => text.push_str(line),
            StreamLine::Unreadable(reason) => unreadable.push(refuse(reason)),
        }
    }
    (text, unreadable)
}

impl Ingestor<'_> {
    /// Decode and validate `text`: the batches of `@stream` types, every rejected line (in
    /// line order; lines of other types are rejected with how to enrol them), and the last
    /// line number.
    fn decode(&self, first_line: u64, text: &str) -> (Writes, Vec<LineError>, u64) {
        let catalog = self.graph.catalog();
        let mut decoder = Decoder::new(&catalog);
        let mut last_line = first_line.saturating_sub(1);
        for (offset, line) in text.lines().enumerate() {
            last_line = first_line.saturating_add(offset as u64);
            decoder.push_line(last_line, line);
        }
        let decoded = decoder.finish();
        let mut rejected = decoded.rejects;
        let streamed = |name: &str| catalog.get(name).is_some_and(|ty| ty.stream.is_some());
        let mut accepted = Writes::default();
        for batch in decoded.batches {
            if streamed(&batch.type_name) {
                accepted.batches.push(batch);
            } else {
                rejected.extend(not_streamed(&batch.type_name, &batch.lines));
            }
        }
        for delete in decoded.deletes {
            if streamed(&delete.type_name) {
                accepted.deletes.push(delete);
            } else {
                rejected.extend(not_streamed(&delete.type_name, &delete.lines));
            }
        }
        for patches in decoded.patches {
            if streamed(&patches.rows.type_name) {
                accepted.patches.push(patches);
            } else {
                rejected.extend(not_streamed(&patches.rows.type_name, &patches.rows.lines));
            }
        }
        rejected.sort_by_key(|e| e.line);
        (accepted, rejected, last_line)
    }

    /// Open (claim) the writers of `type_name` now rather than at its first send. Opening
    /// replays the shard's durable WAL into memory, so a fresh read in this process sees it.
    pub async fn warm(&self, type_name: &str) -> Result<()> {
        self.writer_of(type_name).await.map(|_| ())
    }
}

impl Graph {
    /// Close every warm writer: flush the WAL and memtables to generations, so other
    /// processes (and folds) see everything acknowledged. Later sends re-open writers.
    /// Every writer is attempted; the first failure is returned.
    pub async fn close_writers(&self) -> Result<()> {
        let _opening = self.streaming.opening.lock().await;
        let writers = self.streaming.take_all();
        let mut first_error = None;
        for writer in writers {
            let closed = match Arc::try_unwrap(writer) {
                Ok(writer) => writer.close(self.settings.writer.flush_patience).await,
                // A send still holds it: flush what it acknowledged so far instead.
                Err(writer) => writer.freeze(self.settings.writer.flush_patience).await,
            };
            match closed {
                Ok(()) => {}
                // Another writer owns the shard now and replayed what this one wrote.
                Err(error) if error.is_fenced() => {
                    // What it acknowledged is in another process's writer now.
                    self.streaming.marks_unsettled();
                    tracing::info!(%error, "a fenced writer was not closed");
                }
                Err(error) => {
                    tracing::error!(%error, "could not close a writer");
                    first_error.get_or_insert(Error::from_memwal(error));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
