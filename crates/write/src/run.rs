//! One fold: every flushed, uncompacted generation of every enrolled table of a branch →
//! validated → one staged merge-insert per table carrying its compaction marks → one
//! graph commit (with the dead letters).
//!
//! Deletes are the generations' tombstones. Read newest first with the rows, a key's
//! newest entry wins, a row or a tombstone; the merge removes every tombstoned key it is
//! not given a row for, and the edges of the nodes that stay deleted. A node deleted and
//! written again within one fold keeps its edges (a memtable keeps only a key's newest
//! entry, so the stream cannot tell more, and a load does the same); when the delete and
//! the rewrite fall into different folds (a backlog past `max_rows`), the node is deleted
//! in between and its edges go.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::{Schema, SchemaRef};
use datafusion_physical_plan::stream::RecordBatchStreamAdapter;
use datafusion_physical_plan::SendableRecordBatchStream;
use futures::TryStreamExt;
use lance::dataset::{MergeInsertBuilder, WhenMatched, WhenNotMatched, WhenNotMatchedBySource};
use lance_table::system_index::mem_wal::CompactedSsTable;
use snafu::ResultExt;
use tributary_embed::Embedder;
use tributary_memwal_adapter::{table_state, Generation, MemWalTable};
use tributary_publisher::{BranchName, CommitId, CommitRecord, FoldedShard};
use tributary_schema::{Catalog, TablePath, TypeDef, TypeKind};
use uuid::Uuid;

use crate::commit::{commit_intent, ms_since, GraphTarget, StagedWrite};
use crate::constraints::{ConstraintChecker, RejectKind, Scope, SnapshotTables};
use crate::embedding::{fill_embeddings, has_embedded_fields};
use crate::error::{ArrowSnafu, HaltedSnafu, LanceSnafu, MemWalSnafu, PublishSnafu, Result};
use crate::intent::{Intent, IntentKind, StagedTable};
use crate::lookup::string_column;
use crate::rejects::{row_json, Reject, RejectRows, REJECTS_PATH};
use crate::removal::{edge_rows, removal_filter};

/// The actor of every fold commit.
pub const FOLD_ACTOR: &str = "tributary:ingest";

/// What a fold does with a row that fails fold-time validation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RejectPolicy {
    /// Write it to `_ingest_rejects` in the fold's commit and fold the rest.
    #[default]
    DeadLetter,
    /// Refuse the whole fold; publish nothing; report the first offending row.
    Halt,
}

#[derive(Debug, Clone)]
pub struct FoldSettings {
    pub policy: RejectPolicy,
    /// Rows validated at once. The fold keeps its keys (not rows) whole; Lance's merge-insert
    /// grows with the rows it merges and the table it merges into, so `max_rows` is what
    /// bounds a fold's memory.
    pub chunk_rows: usize,
    /// At most this many pending rows per fold (whole generations; at least one): a
    /// backlog larger than this is folded by several commits, oldest generations first.
    pub max_rows: u64,
}

impl Default for FoldSettings {
    fn default() -> Self {
        FoldSettings {
            policy: RejectPolicy::DeadLetter,
            chunk_rows: 65_536,
            max_rows: 1_000_000,
        }
    }
}

/// What one fold did.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct FoldOutcome {
    /// The graph commit; `None` when nothing was pending.
    pub commit: Option<CommitRecord>,
    /// Type name → rows folded into its table.
    pub rows: BTreeMap<String, u64>,
    /// Type name → rows removed from its table (tombstoned keys, and edges of tombstoned
    /// nodes).
    #[serde(default)]
    pub deleted: BTreeMap<String, u64>,
    /// Rows the fold could not apply, written to the dead letters (`rejects`) instead.
    /// (An ingest's `rejected` counts lines refused before they were acknowledged.)
    #[serde(alias = "rejected")]
    pub dead_letters: u64,
    pub folded: Vec<FoldedShard>,
    /// Graph commits made (a backlog over `max_rows` takes several folds).
    pub commits: usize,
    /// False when `max_rows` left generations for another fold.
    pub complete: bool,
    /// Where the time went (summed over the commits of a backlog).
    #[serde(default)]
    pub timings: FoldTimings,
}

/// Where a fold's time went, in milliseconds, stage by stage.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct FoldTimings {
    /// The cut: freezing this process's writers (their memtables flush to generations)
    /// and claiming the WAL tails of writers that are gone. Set by the caller of the fold.
    #[serde(default)]
    pub cut_ms: f64,
    /// Listing the pending generations.
    pub plan_ms: f64,
    /// Reading the generations, newest row per key, checks and dead letters, and the staged
    /// merge-insert they stream into, overlapped; the four below split the reading side.
    pub stage_ms: f64,
    /// Reading generation rows.
    pub read_ms: f64,
    /// Keeping the newest row per key.
    pub dedup_ms: f64,
    /// Constraint checks and dead letters.
    pub check_ms: f64,
    /// Filling `@embed` fields: reading the vectors of unchanged texts, and the provider.
    #[serde(default)]
    pub embed_ms: f64,
    /// Waiting for the merge-insert to take accepted rows (the merge is the slower side).
    pub merge_wait_ms: f64,
    /// The sidecar and the table commits.
    pub tables_ms: f64,
    /// The tables' upkeep: small fragments compacted, derived indexes brought up to date.
    pub indexes_ms: f64,
    /// The publish.
    pub publish_ms: f64,
}

impl FoldTimings {
    fn add(&mut self, other: &FoldTimings) {
        self.cut_ms += other.cut_ms;
        self.plan_ms += other.plan_ms;
        self.stage_ms += other.stage_ms;
        self.read_ms += other.read_ms;
        self.dedup_ms += other.dedup_ms;
        self.check_ms += other.check_ms;
        self.embed_ms += other.embed_ms;
        self.merge_wait_ms += other.merge_wait_ms;
        self.tables_ms += other.tables_ms;
        self.indexes_ms += other.indexes_ms;
        self.publish_ms += other.publish_ms;
    }
}

impl FoldOutcome {
    /// Add a later fold's outcome to this one.
    pub fn absorb(&mut self, later: FoldOutcome) {
        for (ty, n) in later.rows {
            *self.rows.entry(ty).or_default() += n;
        }
        for (ty, n) in later.deleted {
            *self.deleted.entry(ty).or_default() += n;
        }
        self.dead_letters += later.dead_letters;
        self.folded.extend(later.folded);
        self.commits += later.commits;
        self.timings.add(&later.timings);
        if later.commit.is_some() {
            self.commit = later.commit;
        }
        self.complete = later.complete;
    }
}

/// The pending generations of one table, per shard in ascending order, and the keys they
/// tombstone. An edge table may have none, and only lose the edges of deleted nodes.
struct TablePlan<'c> {
    ty: &'c TypeDef,
    /// Per shard, the generations to fold, oldest first, each opened once: their
    /// tombstones are read when the fold is planned, their rows when the table is passed.
    shards: Vec<(Uuid, Vec<Generation>)>,
    tombstoned: Vec<String>,
}

impl TablePlan<'_> {
    /// The rows of every generation the plan folds.
    fn pending_rows(&self) -> u64 {
        self.shards
            .iter()
            .flat_map(|(_, generations)| generations.iter().map(|g| g.pending().rows))
            .sum()
    }
}

/// A fold joins its rows to the table through the key's index only while they are fewer
/// than this share of the table (1/N); above, Lance's hash join of the key column is
/// faster. Measured on a 1M-row table (`fold_merge` bench, release): the indexed join took
/// 201 ms for 100k rows and 1,790 ms for 1M, the hash join 91 ms and 512 ms. A linear fit
/// puts the crossing near 1.5% of the table; the index only wins for small folds.
const INDEXED_JOIN_SHARE: u64 = 64;

/// Fold every flushed generation of `branch`'s enrolled tables above their compaction
/// marks. The caller holds the branch's write turn (its queue and lease) and has frozen its own writers (the
/// cut); generations flushed by other processes are folded as they stand. `producers` are
/// the marks of the producers whose lines the cut holds: the commit that takes the last of
/// what is pending records them.
pub async fn fold_pending(
    target: GraphTarget<'_>,
    catalog: &Catalog,
    branch: &BranchName,
    settings: &FoldSettings,
    producers: &BTreeMap<String, u64>,
    embedder: &dyn Embedder,
) -> Result<FoldOutcome> {
    let started = std::time::Instant::now();
    let mut timings = FoldTimings::default();
    let head = target.publisher.head(branch).await.context(PublishSnafu)?;
    let lineage = head.lineage.as_deref();
    let (plans, complete) = plan(target, catalog, lineage, settings.max_rows).await?;
    let plans = with_tombstones(catalog, plans).await?;
    timings.plan_ms = ms_since(started);
    if plans.is_empty() {
        return Ok(FoldOutcome {
            complete: true,
            ..Default::default()
        });
    }
    let commit_id = CommitId::random();
    let tables = SnapshotTables::new(target.store, catalog, &head);

    // One pass per table, nodes before edges: its generations are read newest first, one
    // row per key, checked chunk by chunk, and what is accepted streams straight into the
    // table's staged merge-insert while the next chunk is read.
    let folding = std::time::Instant::now();
    // Accepted node keys matter only to the endpoint checks of the edges this fold takes.
    let endpoints = plans
        .iter()
        .filter_map(|plan| plan.ty.edge.as_ref())
        .flat_map(|ends| [ends.from.clone(), ends.to.clone()]);
    let mut checker = ConstraintChecker::new(&tables, Scope::Stream).remember_nodes_of(endpoints);
    // Every tombstoned key counts as deleted for the checks: an edge to a tombstoned node
    // is refused unless the fold writes the node again, and a deleted row's `@unique`
    // values are free.
    for plan in &plans {
        checker.deleting(&plan.ty.name, plan.tombstoned.iter().map(String::as_str));
    }
    // Node type → the keys this fold removes (tombstoned, and not written again): their
    // edges go too. Filled as node tables are passed, before any edge table.
    let mut gone_nodes: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut deleted = BTreeMap::new();
    let mut rejects = RejectRows::new(&commit_id);
    let mut folded = Vec::new();
    let mut rows = BTreeMap::new();
    let mut staged = Vec::new();
    let mut rows_written = BTreeMap::new();
    for plan in &plans {
        let path = plan.ty.table_path();
        let lance = |action: &'static str| LanceSnafu {
            action,
            table: path.clone(),
        };
        let dataset = Arc::new(tables.open(plan.ty).await?);
        let schema: SchemaRef = Arc::new(Schema::from(dataset.schema()));
        let marks = plan
            .shards
            .iter()
            .filter_map(|(shard, gens)| {
                gens.last()
                    .map(|g| CompactedSsTable::new(*shard, g.pending().generation))
            })
            .collect();
        let mut builder = MergeInsertBuilder::try_new(dataset.clone(), vec!["id".to_owned()])
            .context(lance("stage fold"))?;
        let pending = plan.pending_rows();
        let table_rows = dataset
            .count_rows(None)
            .await
            .context(lance("count rows"))? as u64;
        builder
            .when_matched(WhenMatched::UpdateAll)
            .when_not_matched(WhenNotMatched::InsertAll)
            .use_index(pending.saturating_mul(INDEXED_JOIN_SHARE) < table_rows)
            .skip_auto_cleanup(true)
            .mark_sstables_as_compacted(marks);
        let ends = |pick: fn(&tributary_schema::EdgeEnds) -> &String| {
            plan.ty
                .edge
                .as_ref()
                .and_then(|ends| gone_nodes.get(pick(ends).as_str()))
                .into_iter()
                .flatten()
                .map(String::as_str)
        };
        let removal = removal_filter(
            plan.tombstoned.iter().map(String::as_str),
            ends(|e| &e.from),
            ends(|e| &e.to),
        );
        if plan.shards.is_empty() && removal.is_none() {
            continue;
        }
        if let Some(filter) = &removal {
            if plan
                .ty
                .edge
                .as_ref()
                .is_some_and(|e| e.card.is_some_and(|c| c.max.is_some()))
            {
                // The edges going free their places under the `@card` maximum.
                let going = edge_rows(&dataset, &plan.ty.name, filter).await?;
                checker.deleting(&plan.ty.name, going.iter().map(|(id, _, _)| id.as_str()));
            }
            builder.when_not_matched_by_source(
                WhenNotMatchedBySource::delete_if(&dataset, filter).context(lance("stage fold"))?,
            );
        }
        let job = builder.try_build().context(lance("stage fold"))?;
        let (accepted, receiver) = tokio::sync::mpsc::channel(ACCEPTED_IN_FLIGHT);
        let source = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|batch| (batch, receiver))
        });
        let source: SendableRecordBatchStream =
            Box::pin(RecordBatchStreamAdapter::new(schema.clone(), source));
        let pass = TablePass {
            plan,
            path: &path,
            schema,
            settings,
            embedding: has_embedded_fields(plan.ty).then_some((dataset.as_ref(), embedder)),
        };
        // The merge runs on its own task, so it and the reading side use both cores.
        let mut merging = AbortOnDrop(tokio::spawn(async move {
            job.execute_uncommitted(source).await
        }));
        let checked = pass
            .run(&mut checker, &mut rejects, &mut timings, accepted)
            .await;
        let merged = (&mut merging.0).await;
        let PassOutcome {
            rows: table_rows,
            folded: shards_folded,
            fed,
            written_again,
        } = checked?;
        if plan.ty.kind == TypeKind::Node && !plan.tombstoned.is_empty() {
            let gone = plan
                .tombstoned
                .iter()
                .filter(|key| !written_again.contains(key.as_str()))
                .cloned()
                .collect();
            gone_nodes.insert(plan.ty.name.as_str(), gone);
        }
        let result = merged
            .map_err(|joined| lance::Error::io(joined.to_string()))
            .and_then(|merged| merged)
            .and_then(|merged| {
                // A merge that stopped taking rows yet succeeded would stage a part of the
                // table under marks that cover all of it: never commit that.
                if fed {
                    Ok(merged)
                } else {
                    Err(lance::Error::io(
                        "the merge-insert ended before it took every row",
                    ))
                }
            })
            .context(lance("stage fold"))?;
        folded.extend(shards_folded);
        let removed = result.stats.num_deleted_rows;
        if removed > 0 {
            deleted.insert(plan.ty.name.clone(), removed);
        }
        if !plan.shards.is_empty() {
            rows.insert(plan.ty.name.clone(), table_rows);
        }
        rows_written.insert(path.clone(), table_rows + removed);
        staged.push(StagedWrite {
            dataset,
            path,
            transaction: result.transaction,
            affected: result.affected_rows,
        });
    }
    timings.stage_ms = ms_since(folding);
    let rejected = rejects.len() as u64;
    if !rejects.is_empty() {
        let (dataset, transaction) = rejects.stage(target.store, &head).await?;
        rows_written.insert(REJECTS_PATH, rejected);
        staged.push(StagedWrite {
            dataset,
            path: REJECTS_PATH,
            transaction,
            affected: None,
        });
    }

    let mut intent = Intent::new(
        IntentKind::Fold,
        branch.clone(),
        head.lineage.clone(),
        Some(head.id.clone()),
        FOLD_ACTOR,
    );
    intent.rows_written = rows_written;
    intent.commit_id = Some(commit_id);
    intent.folded = folded.clone();
    if complete {
        intent.producers = producers.clone();
    }
    intent.tables = staged
        .iter()
        .map(|w| StagedTable::new(w.path.clone(), w.dataset.version().version, &w.transaction))
        .collect::<Result<_>>()?;
    let committed = commit_intent(target, &intent, staged).await?;
    timings.tables_ms = committed.timings.tables_ms;
    timings.indexes_ms = committed.timings.indexes_ms;
    timings.publish_ms = committed.timings.publish_ms;
    Ok(FoldOutcome {
        commit: Some(committed.record),
        rows,
        deleted,
        dead_letters: rejected,
        folded,
        commits: 1,
        complete,
        timings,
    })
}

/// The enrolled `@stream` tables with pending generations: nodes before edges, so edge
/// endpoints are checked against the nodes of the same fold. At most `max_rows` rows, in
/// whole generations, oldest first (always at least one generation); once a node table
/// is cut short no edge table is folded, so an edge never folds before a node that was
/// acknowledged ahead of it. Returns the plans and whether they cover everything pending.
async fn plan<'c>(
    target: GraphTarget<'_>,
    catalog: &'c Catalog,
    lineage: Option<&str>,
    max_rows: u64,
) -> Result<(Vec<TablePlan<'c>>, bool)> {
    let mut plans = Vec::new();
    let mut budget = max_rows;
    let mut taken_any = false;
    let mut complete = true;
    for kind in [TypeKind::Node, TypeKind::Edge] {
        if kind == TypeKind::Edge && !complete {
            break;
        }
        for ty in catalog
            .types
            .iter()
            .filter(|t| t.kind == kind && t.stream.is_some())
        {
            let at = MemWalTable::on(&ty.table_path(), lineage);
            let Some(state) = table_state(target.store, &at).await.context(MemWalSnafu)? else {
                continue;
            };
            let mut shards = Vec::new();
            for shard in state.shards {
                let mut pending = shard.pending;
                pending.sort_by_key(|g| g.generation);
                let mut taken = Vec::new();
                for generation in pending {
                    if taken_any && generation.rows > budget {
                        complete = false;
                        break;
                    }
                    budget = budget.saturating_sub(generation.rows);
                    taken_any = true;
                    taken.push(
                        Generation::open(target.store, &at, shard.shard, &generation)
                            .await
                            .context(MemWalSnafu)?,
                    );
                }
                if !taken.is_empty() {
                    shards.push((shard.shard, taken));
                }
            }
            if !shards.is_empty() {
                plans.push(TablePlan {
                    ty,
                    shards,
                    tombstoned: Vec::new(),
                });
            }
        }
    }
    Ok((plans, complete))
}

/// The keys each plan's generations tombstone, and a plan for every other edge table
/// whose end type lost nodes: the edges of a deleted node go in the same commit.
async fn with_tombstones<'c>(
    catalog: &'c Catalog,
    mut plans: Vec<TablePlan<'c>>,
) -> Result<Vec<TablePlan<'c>>> {
    for plan in &mut plans {
        let mut keys = std::collections::BTreeSet::new();
        for generation in plan.shards.iter().flat_map(|(_, generations)| generations) {
            keys.extend(generation.tombstones().await.context(MemWalSnafu)?);
        }
        plan.tombstoned = keys.into_iter().collect();
    }
    let losing: Vec<&str> = plans
        .iter()
        .filter(|plan| plan.ty.kind == TypeKind::Node && !plan.tombstoned.is_empty())
        .map(|plan| plan.ty.name.as_str())
        .collect();
    let cascaded: Vec<&'c TypeDef> = catalog
        .types
        .iter()
        .filter(|ty| {
            ty.edge.as_ref().is_some_and(|ends| {
                losing.contains(&ends.from.as_str()) || losing.contains(&ends.to.as_str())
            }) && plans.iter().all(|plan| plan.ty.name != ty.name)
        })
        .collect();
    plans.extend(cascaded.into_iter().map(|ty| TablePlan {
        ty,
        shards: Vec::new(),
        tombstoned: Vec::new(),
    }));
    Ok(plans)
}

fn filter(batch: &RecordBatch, keep: &BooleanArray) -> Result<RecordBatch> {
    arrow_select::filter::filter_record_batch(batch, keep).context(ArrowSnafu {
        action: "filter fold rows",
    })
}

fn concat(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<RecordBatch> {
    arrow_select::concat::concat_batches(schema, batches).context(ArrowSnafu {
        action: "gather fold rows",
    })
}

/// A spawned task that ends when its handle is dropped: a fold given up (dropped) leaves
/// no merge running behind it.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Accepted batches of a table waiting for its merge-insert: a little read-ahead, so
/// reading and checking the next chunk overlaps the merge of the last one.
const ACCEPTED_IN_FLIGHT: usize = 2;

/// One table's pass: its pending generations, newest first, one row per key, checked
/// chunk by chunk; rejects become dead letters (or halt the fold), the rest go to the
/// merge-insert through `accepted`.
struct TablePass<'a, 'c> {
    plan: &'a TablePlan<'c>,
    path: &'a TablePath,
    schema: SchemaRef,
    settings: &'a FoldSettings,
    /// The table as the fold stages on it, and the provider, when the type has `@embed`
    /// fields.
    embedding: Option<(&'a lance::Dataset, &'a dyn Embedder)>,
}

type Accepted = tokio::sync::mpsc::Sender<datafusion_common::Result<RecordBatch>>;

/// What one table's pass did.
struct PassOutcome {
    /// Rows accepted.
    rows: u64,
    folded: Vec<FoldedShard>,
    /// Whether the merge took every accepted row.
    fed: bool,
    /// Tombstoned keys the merge was given a row for: they stay.
    written_again: std::collections::HashSet<String>,
}

impl TablePass<'_, '_> {
    /// Fill the chunk's `@embed` fields. Rows the provider gave no vector for become dead
    /// letters with its error, or halt the fold: never a row without its vector.
    async fn embed(
        &self,
        batch: RecordBatch,
        rejects: &mut RejectRows,
        shard: &Uuid,
        generation: u64,
    ) -> Result<RecordBatch> {
        let Some((table, embedder)) = self.embedding else {
            return Ok(batch);
        };
        let ty = self.plan.ty;
        let failure = match fill_embeddings(ty, batch, table, embedder).await? {
            Ok(batch) => return Ok(batch),
            Err(failure) => failure,
        };
        let ids = string_column(&failure.batch, "id");
        let message = format!("`{}`: {}", failure.field, failure.error);
        if self.settings.policy == RejectPolicy::Halt {
            let key = failure
                .rows
                .first()
                .map(|&row| ids.value(row).to_owned())
                .unwrap_or_default();
            return HaltedSnafu {
                table: ty.name.clone(),
                key,
                kind: RejectKind::Embedding.to_string(),
                message,
            }
            .fail();
        }
        let mut keep = vec![true; failure.batch.num_rows()];
        for &row in &failure.rows {
            keep[row] = false;
            rejects.push(Reject {
                table: ty.name.clone(),
                key: ids.value(row).to_owned(),
                row: row_json(&failure.batch, row),
                kind: RejectKind::Embedding,
                message: message.clone(),
                shard: shard.to_string(),
                generation,
            });
        }
        filter(&failure.batch, &BooleanArray::from(keep))
    }

    /// A halt also fails the merge (its source ends in an error), so nothing of the
    /// table is staged.
    async fn run(
        self,
        checker: &mut ConstraintChecker<'_>,
        rejects: &mut RejectRows,
        timings: &mut FoldTimings,
        accepted: Accepted,
    ) -> Result<PassOutcome> {
        let result = self
            .read_and_check(checker, rejects, timings, &accepted)
            .await;
        if let Err(error) = &result {
            let halted = datafusion_common::DataFusionError::Execution(error.to_string());
            let _ = accepted.send(Err(halted)).await;
        }
        result
    }

    async fn read_and_check(
        &self,
        checker: &mut ConstraintChecker<'_>,
        rejects: &mut RejectRows,
        timings: &mut FoldTimings,
        accepted: &Accepted,
    ) -> Result<PassOutcome> {
        use std::time::Instant;
        let ty = self.plan.ty;
        let expected = self.plan.pending_rows();
        let mut table_rows = 0;
        let mut folded = Vec::new();
        let tombstoned: std::collections::HashSet<&str> =
            self.plan.tombstoned.iter().map(String::as_str).collect();
        let mut written_again = std::collections::HashSet::new();
        for (shard, generations) in &self.plan.shards {
            let mut shard_rows = 0;
            for opened in generations.iter().rev() {
                let generation = opened.pending();
                let mut stream = opened
                    .rows(self.schema.clone())
                    .await
                    .context(MemWalSnafu)?;
                let mut chunk = Vec::new();
                let mut chunk_len = 0;
                loop {
                    let reading = Instant::now();
                    let next = stream.try_next().await.context(MemWalSnafu)?;
                    timings.read_ms += ms_since(reading);
                    let done = next.is_none();
                    if let Some(part) = next {
                        let deduping = Instant::now();
                        // Rows of a generation written before a field was added lack
                        // its column, and rows replayed from an older WAL hold nulls in
                        // it: either takes the field's default.
                        let rows =
                            tributary_schema::conform(ty, &part.rows).context(ArrowSnafu {
                                action: "conform fold rows to the schema",
                            })?;
                        let batch = checker.unseen_rows(ty, &rows, expected as usize)?;
                        // A generation holds one entry per key, so its rows and its
                        // tombstones name different keys; an older row of either goes.
                        checker.mark_seen(ty, &part.deleted);
                        timings.dedup_ms += ms_since(deduping);
                        chunk_len += batch.num_rows();
                        chunk.push(batch);
                    }
                    if chunk_len > 0 && (done || chunk_len >= self.settings.chunk_rows) {
                        let checking = Instant::now();
                        let batch = concat(&self.schema, &chunk)?;
                        chunk.clear();
                        chunk_len = 0;
                        let failed = checker.check(ty, &batch).await?;
                        let ids = string_column(&batch, "id");
                        let mut keep = vec![true; batch.num_rows()];
                        for reject in &failed {
                            let key = ids.value(reject.row).to_owned();
                            if self.settings.policy == RejectPolicy::Halt {
                                return HaltedSnafu {
                                    table: ty.name.clone(),
                                    key,
                                    kind: reject.kind.to_string(),
                                    message: reject.message.clone(),
                                }
                                .fail();
                            }
                            keep[reject.row] = false;
                            rejects.push(Reject {
                                table: ty.name.clone(),
                                key,
                                row: row_json(&batch, reject.row),
                                kind: reject.kind,
                                message: reject.message.clone(),
                                shard: shard.to_string(),
                                generation: generation.generation,
                            });
                        }
                        let batch = if failed.is_empty() {
                            batch
                        } else {
                            filter(&batch, &BooleanArray::from(keep))?
                        };
                        timings.check_ms += ms_since(checking);
                        let embedding = Instant::now();
                        let batch = self
                            .embed(batch, rejects, shard, generation.generation)
                            .await?;
                        timings.embed_ms += ms_since(embedding);
                        let checking = Instant::now();
                        shard_rows += batch.num_rows() as u64;
                        if !tombstoned.is_empty() {
                            let ids = string_column(&batch, "id");
                            written_again.extend(
                                ids.iter()
                                    .flatten()
                                    .filter(|id| tombstoned.contains(id))
                                    .map(str::to_owned),
                            );
                        }
                        timings.check_ms += ms_since(checking);
                        let waiting = Instant::now();
                        let sent = accepted.send(Ok(batch)).await;
                        timings.merge_wait_ms += ms_since(waiting);
                        // The merge gone (it failed): its error tells why; stop reading.
                        if sent.is_err() {
                            return Ok(PassOutcome {
                                rows: table_rows + shard_rows,
                                folded,
                                fed: false,
                                written_again,
                            });
                        }
                    }
                    if done {
                        break;
                    }
                }
            }
            if let (Some(first), Some(last)) = (generations.first(), generations.last()) {
                folded.push(FoldedShard {
                    table: self.path.clone(),
                    shard: shard.to_string(),
                    first_generation: first.pending().generation,
                    last_generation: last.pending().generation,
                    rows: shard_rows,
                });
            }
            table_rows += shard_rows;
        }
        Ok(PassOutcome {
            rows: table_rows,
            folded,
            fed: true,
            written_again,
        })
    }
}
