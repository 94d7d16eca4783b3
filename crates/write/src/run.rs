//! One fold: every flushed, uncompacted generation of every enrolled table of a branch →
//! validated → one staged merge-insert per table carrying its compaction marks → one
//! graph commit (with the dead letters).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::{Schema, SchemaRef};
use datafusion_physical_plan::stream::RecordBatchStreamAdapter;
use datafusion_physical_plan::SendableRecordBatchStream;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use lance::dataset::{MergeInsertBuilder, WhenMatched, WhenNotMatched};
use lance_table::system_index::mem_wal::CompactedSsTable;
use snafu::ResultExt;
use tributary_memwal_adapter::{generation_rows, table_state, PendingGeneration};
use tributary_publisher::{BranchName, CommitId, CommitKind, CommitRecord, FoldedShard};
use tributary_schema::{Catalog, TablePath, TypeDef, TypeKind};
use uuid::Uuid;

use crate::commit::{commit_intent, GraphTarget, StagedWrite};
use crate::constraints::{ConstraintChecker, Scope, SnapshotTables};
use crate::error::{ArrowSnafu, HaltedSnafu, LanceSnafu, MemWalSnafu, PublishSnafu, Result};
use crate::intent::{Intent, Owner, StagedTable};
use crate::lookup::string_column;
use crate::rejects::{row_json, Reject, RejectRows, REJECTS_PATH};

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
    /// Rows validated at once; bounds the fold's memory (with keys kept, not rows).
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
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FoldOutcome {
    /// The graph commit; `None` when nothing was pending.
    pub commit: Option<CommitRecord>,
    /// Type name → rows folded into its table.
    pub rows: BTreeMap<String, u64>,
    pub rejected: u64,
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
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FoldTimings {
    /// Listing the pending generations.
    pub plan_ms: f64,
    /// Pass 1: reading the generations, newest row per key, constraint checks, dead letters.
    pub validate_ms: f64,
    /// Pass 2: reading them again into one staged merge-insert per table.
    pub merge_ms: f64,
    /// The sidecar and the table commits.
    pub tables_ms: f64,
    /// Bringing the tables' derived indexes up to date.
    pub indexes_ms: f64,
    /// The publish.
    pub publish_ms: f64,
}

impl FoldTimings {
    fn add(&mut self, other: &FoldTimings) {
        self.plan_ms += other.plan_ms;
        self.validate_ms += other.validate_ms;
        self.merge_ms += other.merge_ms;
        self.tables_ms += other.tables_ms;
        self.indexes_ms += other.indexes_ms;
        self.publish_ms += other.publish_ms;
    }
}

fn ms_since(started: std::time::Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}

impl FoldOutcome {
    /// Add a later fold's outcome to this one.
    pub fn absorb(&mut self, later: FoldOutcome) {
        for (ty, n) in later.rows {
            *self.rows.entry(ty).or_default() += n;
        }
        self.rejected += later.rejected;
        self.folded.extend(later.folded);
        self.commits += later.commits;
        self.timings.add(&later.timings);
        if later.commit.is_some() {
            self.commit = later.commit;
        }
        self.complete = later.complete;
    }
}

/// The pending generations of one table, per shard in ascending order.
struct TablePlan<'c> {
    ty: &'c TypeDef,
    shards: Vec<(Uuid, Vec<PendingGeneration>)>,
}

/// Fold every flushed generation of `branch`'s enrolled tables above their compaction
/// marks. The caller holds the branch's write turn (its queue and lease) and has frozen its own writers (the
/// cut); generations flushed by other processes are folded as they stand.
pub async fn fold_pending(
    target: GraphTarget<'_>,
    catalog: &Catalog,
    branch: &BranchName,
    settings: &FoldSettings,
) -> Result<FoldOutcome> {
    let started = std::time::Instant::now();
    let mut timings = FoldTimings::default();
    let head = target.publisher.head(branch).await.context(PublishSnafu)?;
    let (plans, complete) = plan(target, catalog, settings.max_rows).await?;
    timings.plan_ms = ms_since(started);
    if plans.is_empty() {
        return Ok(FoldOutcome {
            complete: true,
            ..Default::default()
        });
    }
    let commit_id = CommitId::random();
    let tables = SnapshotTables::new(target.store, catalog, &head);

    // Pass 1: validate, newest row per key first; keep only keys between chunks.
    let validating = std::time::Instant::now();
    let mut checker = ConstraintChecker::new(&tables, Scope::Stream);
    let mut rejects = RejectRows::new(&commit_id);
    let mut rejected_keys: HashMap<TablePath, HashSet<String>> = HashMap::new();
    let mut folded = Vec::new();
    let mut rows = BTreeMap::new();
    for plan in &plans {
        let ty = plan.ty;
        let path = ty.table_path();
        let schema = table_arrow_schema(&tables, ty).await?;
        let mut seen = HashSet::new();
        let mut table_rows = 0;
        for (shard, generations) in &plan.shards {
            let mut shard_rows = 0;
            for generation in generations.iter().rev() {
                let mut stream =
                    generation_rows(target.store, &path, *shard, generation, schema.clone())
                        .await
                        .context(MemWalSnafu)?;
                let mut chunk = Vec::new();
                let mut chunk_len = 0;
                loop {
                    let next = stream.try_next().await.context(MemWalSnafu)?;
                    let done = next.is_none();
                    if let Some(batch) = next {
                        let batch = unseen_rows(&batch, &mut seen)?;
                        chunk_len += batch.num_rows();
                        chunk.push(batch);
                    }
                    if chunk_len > 0 && (done || chunk_len >= settings.chunk_rows) {
                        let batch = concat(&schema, &chunk)?;
                        let failed = checker.check(ty, &batch).await?;
                        let ids = string_column(&batch, "id");
                        for reject in &failed {
                            let key = ids.value(reject.row).to_owned();
                            if settings.policy == RejectPolicy::Halt {
                                return HaltedSnafu {
                                    table: ty.name.clone(),
                                    key,
                                    kind: reject.kind.to_string(),
                                    message: reject.message.clone(),
                                }
                                .fail();
                            }
                            rejected_keys
                                .entry(path.clone())
                                .or_default()
                                .insert(key.clone());
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
                        shard_rows += (batch.num_rows() - failed.len()) as u64;
                        chunk.clear();
                        chunk_len = 0;
                    }
                    if done {
                        break;
                    }
                }
            }
            if let (Some(first), Some(last)) = (generations.first(), generations.last()) {
                folded.push(FoldedShard {
                    table: path.clone(),
                    shard: shard.to_string(),
                    first_generation: first.generation,
                    last_generation: last.generation,
                    rows: shard_rows,
                });
            }
            table_rows += shard_rows;
        }
        rows.insert(ty.name.clone(), table_rows);
    }

    timings.validate_ms = ms_since(validating);

    // Pass 2: stage one merge-insert per table, streaming the same rows minus rejects.
    let merging = std::time::Instant::now();
    let mut staged = Vec::new();
    let mut rows_written = BTreeMap::new();
    for plan in &plans {
        let path = plan.ty.table_path();
        let dataset = Arc::new(tables.open(plan.ty).await?);
        let schema: SchemaRef = Arc::new(Schema::from(dataset.schema()));
        let source = merge_source(
            target,
            &path,
            &plan.shards,
            schema.clone(),
            rejected_keys.remove(&path).unwrap_or_default(),
        )
        .await?;
        let marks = plan
            .shards
            .iter()
            .filter_map(|(shard, gens)| {
                gens.last()
                    .map(|g| CompactedSsTable::new(*shard, g.generation))
            })
            .collect();
        let lance = |action: &'static str| LanceSnafu {
            action,
            table: path.clone(),
        };
        let mut builder = MergeInsertBuilder::try_new(dataset.clone(), vec!["id".to_owned()])
            .context(lance("stage fold"))?;
        builder
            .when_matched(WhenMatched::UpdateAll)
            .when_not_matched(WhenNotMatched::InsertAll)
            .skip_auto_cleanup(true)
            .mark_sstables_as_compacted(marks);
        let job = builder.try_build().context(lance("stage fold"))?;
        let source: SendableRecordBatchStream =
            Box::pin(RecordBatchStreamAdapter::new(schema, source));
        let result = job
            .execute_uncommitted(source)
            .await
            .context(lance("stage fold"))?;
        rows_written.insert(path.clone(), rows.get(&plan.ty.name).copied().unwrap_or(0));
        staged.push(StagedWrite {
            dataset,
            path,
            transaction: result.transaction,
            affected: result.affected_rows,
        });
    }
    timings.merge_ms = ms_since(merging);
    let rejected = rejects.len() as u64;
    if !rejects.is_empty() {
        let (dataset, transaction) = rejects.stage(target.store).await?;
        rows_written.insert(REJECTS_PATH, rejected);
        staged.push(StagedWrite {
            dataset,
            path: REJECTS_PATH,
            transaction,
            affected: None,
        });
    }

    let intent = Intent {
        id: Intent::new_id(),
        branch: branch.clone(),
        expected_head: head.id.clone(),
        actor: FOLD_ACTOR.to_owned(),
        kind: CommitKind::Fold,
        rows_written,
        owner: Some(Owner::this_process()),
        commit_id: Some(commit_id),
        folded: folded.clone(),
        tables: staged
            .iter()
            .map(|w| StagedTable::new(w.path.clone(), w.dataset.version().version, &w.transaction))
            .collect::<Result<_>>()?,
    };
    let committed = commit_intent(target, &intent, staged).await?;
    timings.tables_ms = committed.timings.tables_ms;
    timings.indexes_ms = committed.timings.indexes_ms;
    timings.publish_ms = committed.timings.publish_ms;
    Ok(FoldOutcome {
        commit: Some(committed.record),
        rows,
        rejected,
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
            let Some(state) = table_state(target.store, &ty.table_path())
                .await
                .context(MemWalSnafu)?
            else {
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
                    taken.push(generation);
                }
                if !taken.is_empty() {
                    shards.push((shard.shard, taken));
                }
            }
            if !shards.is_empty() {
                plans.push(TablePlan { ty, shards });
            }
        }
    }
    Ok((plans, complete))
}

async fn table_arrow_schema(tables: &SnapshotTables<'_>, ty: &TypeDef) -> Result<SchemaRef> {
    let dataset = tables.open(ty).await?;
    Ok(Arc::new(Schema::from(dataset.schema())))
}

/// The rows of `batch` whose key was not seen yet (newest first, so the first sighting is
/// the newest write); marks them seen.
fn unseen_rows(batch: &RecordBatch, seen: &mut HashSet<String>) -> Result<RecordBatch> {
    let ids = string_column(batch, "id");
    let keep: BooleanArray = ids
        .iter()
        .map(|id| Some(id.is_some_and(|id| seen.insert(id.to_owned()))))
        .collect();
    filter(batch, &keep)
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

/// The merge source of one table: its pending generations newest first, one row per key,
/// rejected keys left out — the same rows pass 1 accepted, streamed again.
async fn merge_source(
    target: GraphTarget<'_>,
    path: &str,
    shards: &[(Uuid, Vec<PendingGeneration>)],
    schema: SchemaRef,
    rejected: HashSet<String>,
) -> Result<BoxStream<'static, datafusion_common::Result<RecordBatch>>> {
    let mut streams = Vec::new();
    for (shard, generations) in shards {
        for generation in generations.iter().rev() {
            streams.push(
                generation_rows(target.store, path, *shard, generation, schema.clone())
                    .await
                    .context(MemWalSnafu)?,
            );
        }
    }
    let mut seen = HashSet::new();
    let stream = futures::stream::iter(streams)
        .flatten()
        .map(move |batch| {
            let batch =
                batch.map_err(|e| datafusion_common::DataFusionError::External(Box::new(e)))?;
            let ids = string_column(&batch, "id");
            let keep: BooleanArray = ids
                .iter()
                .map(|id| {
                    Some(id.is_some_and(|id| !rejected.contains(id) && seen.insert(id.to_owned())))
                })
                .collect();
            filter(&batch, &keep)
                .map_err(|e| datafusion_common::DataFusionError::External(Box::new(e)))
        })
        .boxed();
    Ok(stream)
}
