//! The one write pipeline every graph write follows — load, fold, merge, schema change,
//! branch create and delete:
//!
//! 1. take the branch's write turn (its queue and lease; the engine's `write_turn`, which
//!    first resolves what earlier writes of the branch left);
//! 2. record one durable intent whose kind says what the write is ([`record_intent`]);
//! 3. stage the table changes (table commits the head does not pin yet);
//! 4. publish once, from the plan the intent builds ([`Intent::plan`], [`publish_intent`]);
//! 5. clear the intent ([`clear_intent`]).
//!
//! Between the steps are the kind's crash windows ([`crate::CrashWindow`]). A write of
//! staged table transactions (load, fold, merge) runs steps 2–5 in [`commit_intent`]; its
//! recovery is [`recover_intent`]. The other kinds' stage and recovery are the engine's.

use std::collections::BTreeMap;
use std::sync::Arc;

use lance::dataset::transaction::{Operation, Transaction};
use lance::dataset::CommitBuilder;
use lance::Dataset;
use lance_select::RowAddrTreeMap;
use snafu::ResultExt;
use tributary_publisher::{CommitId, CommitRecord, Error as PublishError, PublishPlan, Publisher};
use tributary_storage::GraphStore;

use tributary_schema::{Catalog, TablePath};

use crate::compaction::compact_small_fragments;
use crate::error::{Error, LanceSnafu, LeaseLostSnafu, PublishSnafu, Result, StorageSnafu};
use crate::indexes::{index_specs, maintain_indexes, IndexSettings};
use crate::intent::{InFlight, Intent, StagedTable};
use crate::lease::Lease;
use crate::window::WriteStep;

/// How often a write retries its publish after losing the head to another writer.
const PUBLISH_ATTEMPTS: usize = 5;

/// How many recent commits of the branch are searched for an intent's publish. Missing an
/// older one only re-publishes versions that are already visible: harmless.
const RECENT_COMMITS: usize = 256;

/// Where a graph write commits: the graph's store, its publisher, and the catalog whose
/// derived indexes each written table carries.
#[derive(Clone, Copy)]
pub struct GraphTarget<'a> {
    pub store: &'a GraphStore,
    pub publisher: &'a dyn Publisher,
    pub catalog: &'a Catalog,
    pub indexes: IndexSettings,
    /// The branch lease the write holds, confirmed before its first table commit.
    pub lease: Option<&'a Lease>,
}

/// One table's staged write: the dataset it was staged on, its path, the transaction and
/// the rows it touches (which lets Lance tell a real conflict from a concurrent write
/// elsewhere).
pub struct StagedWrite {
    pub dataset: Arc<Dataset>,
    pub path: TablePath,
    pub transaction: Transaction,
    pub affected: Option<RowAddrTreeMap>,
}

/// What recovery did with one sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    AlreadyPublished {
        intent: String,
    },
    Dropped {
        intent: String,
    },
    RolledForward {
        intent: String,
        commit: CommitId,
    },
    /// The writing process may still be running it; left alone.
    InFlight {
        intent: String,
    },
    /// Could not be resolved (kept for the next attempt). Reported by `recover`; in a write
    /// turn, a load, fold or merge left so fails the turn instead (a write beside it could
    /// double a key), while a branch create or delete does not hold the branch.
    Failed {
        intent: String,
        error: String,
    },
}

/// Where a commit's time went, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CommitTimings {
    /// The sidecar and the table commits.
    pub tables_ms: f64,
    /// The committed tables' upkeep: small fragments compacted, derived indexes brought
    /// up to date.
    pub indexes_ms: f64,
    /// The publish (and deleting the sidecar).
    pub publish_ms: f64,
}

/// A write made visible, and where its commit's time went.
#[derive(Debug, Clone)]
pub struct Committed {
    pub record: CommitRecord,
    pub timings: CommitTimings,
}

/// Milliseconds since `started`, for the timings writes report.
pub(crate) fn ms_since(started: std::time::Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}

/// Record `intent` durably, before the write's first change to any table: from here a
/// crash leaves work that recovery finishes or drops. The mark it returns tells this
/// process's recoverers that the write is still running.
pub async fn record_intent(store: &GraphStore, intent: &Intent) -> Result<InFlight> {
    let in_flight = InFlight::start(&intent.id);
    store
        .put(&Intent::sidecar_path(&intent.id), intent.to_bytes())
        .await
        .context(StorageSnafu)?;
    Ok(in_flight)
}

/// Publish what `intent`'s write moved (`tables`: path → the version it made), re-basing
/// on a head another writer moved.
pub async fn publish_intent(
    publisher: &dyn Publisher,
    intent: &Intent,
    tables: BTreeMap<TablePath, u64>,
) -> Result<CommitRecord> {
    intent.window(WriteStep::BeforePublish).check()?;
    publish_with_retry(publisher, intent.plan(intent.expected_head.clone(), tables)).await
}

/// Clear a published intent. A failed delete fails nothing: the intent is only clutter
/// then, which recovery finds published and removes.
pub async fn clear_intent(store: &GraphStore, intent: &Intent) -> Result<()> {
    intent.window(WriteStep::BeforeIntentDelete).check()?;
    delete_sidecar(store, &Intent::sidecar_path(&intent.id)).await;
    Ok(())
}

/// Make a staged write visible: intent, table commits, one publish, intent cleared.
/// The caller holds the branch's write turn (its queue and lease). A failure after the
/// intent is recorded is resolved at once (rolled forward or dropped) unless it is a
/// simulated crash, which leaves everything for recovery.
pub async fn commit_intent(
    target: GraphTarget<'_>,
    intent: &Intent,
    staged: Vec<StagedWrite>,
) -> Result<Committed> {
    let started = std::time::Instant::now();
    let _in_flight = record_intent(target.store, intent).await?;
    let mut timings = CommitTimings::default();
    let committed = commit_and_publish(target, intent, staged, &mut timings).await;
    timings.tables_ms = ms_since(started) - timings.indexes_ms - timings.publish_ms;
    let published = std::time::Instant::now();
    let record = match committed {
        Ok(commit) => commit,
        Err(error @ Error::Injected { .. }) => return Err(error),
        // A table commit conflict or a lost publish race: never leave committed tables
        // behind unpublished; finish the write or drop it now.
        Err(error) => {
            tracing::warn!(%error, intent = %intent.id, "write failed after staging; resolving its intent");
            let resolved = recover_intent(target, intent).await?;
            delete_sidecar(target.store, &Intent::sidecar_path(&intent.id)).await;
            return match resolved {
                // Published after all (a publish whose answer was lost): the write stands.
                Recovered::RolledForward { .. } | Recovered::AlreadyPublished { .. } => {
                    Ok(Committed {
                        record: target
                            .publisher
                            .head(&intent.branch)
                            .await
                            .context(PublishSnafu)?,
                        timings,
                    })
                }
                _ => Err(error),
            };
        }
    };
    clear_intent(target.store, intent).await?;
    timings.publish_ms += ms_since(published);
    Ok(Committed { record, timings })
}

async fn commit_and_publish(
    target: GraphTarget<'_>,
    intent: &Intent,
    staged: Vec<StagedWrite>,
    timings: &mut CommitTimings,
) -> Result<CommitRecord> {
    intent.window(WriteStep::BeforeTableCommits).check()?;
    // The last moment a write can still give up with nothing committed: a holder that
    // stalled past the lease's grace may have been taken over meanwhile.
    if let Some(lease) = target.lease {
        if !lease.confirm().await? {
            return LeaseLostSnafu {
                branch: intent.branch.clone(),
            }
            .fail();
        }
    }
    let mut versions = BTreeMap::new();
    for (i, write) in staged.into_iter().enumerate() {
        if i == 1 {
            intent.window(WriteStep::BetweenTableCommits).check()?;
        }
        let committed = commit_staged(
            write.dataset,
            &write.path,
            write.transaction,
            write.affected,
        )
        .await?;
        let upkeep = std::time::Instant::now();
        let version = table_upkeep(target, &write.path, committed).await;
        timings.indexes_ms += ms_since(upkeep);
        versions.insert(write.path, version);
    }
    let publishing = std::time::Instant::now();
    let published = publish_intent(target.publisher, intent, versions).await;
    timings.publish_ms += ms_since(publishing);
    published
}

/// The write is published: a sidecar left behind is only clutter (recovery finds its
/// commit and deletes it), so a failed delete must not fail the acknowledged write.
async fn delete_sidecar(store: &GraphStore, sidecar: &str) {
    if let Err(error) = store.delete(sidecar).await {
        tracing::warn!(%error, sidecar, "could not delete a recovery sidecar");
    }
}

/// Upkeep of a just-committed table: its small fragments compacted and its derived
/// indexes brought up to date; the version to publish. A failure is logged, not returned:
/// the data commit stands, and the next write retries.
async fn table_upkeep(target: GraphTarget<'_>, path: &str, mut dataset: Dataset) -> u64 {
    let Some(ty) = target.catalog.types.iter().find(|t| t.table_path() == path) else {
        return dataset.version().version;
    };
    if let Err(error) = compact_small_fragments(&mut dataset).await {
        tracing::warn!(%error, table = %path, "could not compact small fragments");
    }
    let force = ty.stream.is_some();
    match maintain_indexes(&mut dataset, &index_specs(ty), target.indexes, force).await {
        Ok(report) if report.changed() => {
            tracing::debug!(table = %path, ?report, "indexes refreshed");
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, table = %path, "could not refresh indexes"),
    }
    dataset.version().version
}

/// Commit a staged transaction on top of the table's latest version.
pub async fn commit_staged(
    dataset: Arc<Dataset>,
    path: &str,
    transaction: Transaction,
    affected: Option<RowAddrTreeMap>,
) -> Result<Dataset> {
    let mut builder = CommitBuilder::new(dataset).with_skip_auto_cleanup(true);
    if let Some(affected) = affected {
        builder = builder.with_affected_rows(affected);
    }
    builder.execute(transaction).await.context(LanceSnafu {
        action: "commit",
        table: path,
    })
}

/// Publish, re-basing on a moved head a few times. Lance table history is linear, so the
/// newer of our version and the head's version of a table holds both writes.
pub async fn publish_with_retry(
    publisher: &dyn Publisher,
    mut plan: PublishPlan,
) -> Result<CommitRecord> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match publisher.publish(plan.clone()).await {
            Ok(commit) => return Ok(commit),
            Err(conflict @ PublishError::Conflict { .. }) if attempt < PUBLISH_ATTEMPTS => {
                let head = match publisher.head(&plan.branch).await {
                    // A branch's first commit lost the manifest to another branch's
                    // publish: its name is still free.
                    Err(PublishError::BranchNotFound { .. }) if plan.fork.is_some() => continue,
                    Err(source) => return Err(Error::Publish { source }),
                    // The name was taken meanwhile.
                    Ok(_) if plan.fork.is_some() => {
                        return Err(Error::Publish { source: conflict })
                    }
                    Ok(head) => head,
                };
                // The head is this plan's own commit: a publish whose answer was lost.
                if plan.intent.is_some() && head.intent == plan.intent {
                    return Ok(head);
                }
                for (path, version) in plan.tables.iter_mut() {
                    if let Some(theirs) = head.tables.get(path) {
                        *version = (*version).max(*theirs);
                    }
                }
                plan.expected_head = Some(head.id);
            }
            Err(source) => return Err(Error::Publish { source }),
        }
    }
}

/// Resolve one intent (the caller holds the branch's write turn (its queue and lease)):
/// - publish recorded (a commit carries the intent id): nothing to do;
/// - no table committed: nothing is visible and nothing was acknowledged; drop it (the
///   staged data files are orphans for cleanup);
/// - some or all tables committed: commit the rest from the staged transactions, then
///   publish — never leave a half-visible write behind.
pub async fn recover_intent(target: GraphTarget<'_>, intent: &Intent) -> Result<Recovered> {
    // Staged on a branch since deleted (or deleted and made again on another lineage):
    // nothing is left to finish. Its files stay: they may be a published commit's, still
    // read by id or as a merge base, and go with the lineage at a cleanup.
    let head = match target.publisher.head(&intent.branch).await {
        Ok(head) => Some(head),
        Err(PublishError::BranchNotFound { .. }) => None,
        Err(source) => return Err(Error::Publish { source }),
    };
    if head.is_none_or(|head| head.lineage != intent.lineage) {
        return Ok(Recovered::Dropped {
            intent: intent.id.clone(),
        });
    }
    let recent = target
        .publisher
        .log(&intent.branch, RECENT_COMMITS)
        .await
        .context(PublishSnafu)?;
    if recent
        .iter()
        .any(|c| c.intent.as_deref() == Some(intent.id.as_str()))
    {
        return Ok(Recovered::AlreadyPublished {
            intent: intent.id.clone(),
        });
    }
    let mut versions = BTreeMap::new();
    let mut pending = Vec::new();
    for table in &intent.tables {
        match committed_version(target.store, intent.lineage.as_deref(), table).await? {
            Some(version) => {
                versions.insert(table.path.clone(), version);
            }
            None => pending.push(table),
        }
    }
    if versions.is_empty() {
        remove_staged_files(target.store, intent).await;
        return Ok(Recovered::Dropped {
            intent: intent.id.clone(),
        });
    }
    for table in pending {
        let dataset = target
            .store
            .open_dataset_on(
                &table.path,
                intent.lineage.as_deref(),
                Some(table.read_version),
            )
            .await
            .context(StorageSnafu)?;
        let committed = commit_staged(
            Arc::new(dataset),
            &table.path,
            table.decode(&intent.id)?,
            None,
        )
        .await?;
        versions.insert(table.path.clone(), committed.version().version);
    }
    let head = target
        .publisher
        .head(&intent.branch)
        .await
        .context(PublishSnafu)?;
    let commit = publish_with_retry(target.publisher, intent.plan(Some(head.id), versions)).await?;
    Ok(Recovered::RolledForward {
        intent: intent.id.clone(),
        commit: commit.id,
    })
}

/// A dropped intent's staged data files can never be committed: remove them now rather
/// than leave them for a time-based sweep. Best effort: a file left behind is only space.
async fn remove_staged_files(store: &GraphStore, intent: &Intent) {
    for table in &intent.tables {
        let transaction = match table.decode(&intent.id) {
            Ok(transaction) => transaction,
            Err(error) => {
                tracing::warn!(%error, "cannot read a dropped intent's staged files");
                continue;
            }
        };
        let fragments = match &transaction.operation {
            Operation::Append { fragments } => fragments.as_slice(),
            Operation::Update { new_fragments, .. } => new_fragments.as_slice(),
            _ => &[],
        };
        for file in fragments.iter().flat_map(|f| f.files.iter()) {
            let path = match &intent.lineage {
                Some(lineage) => format!("{}/tree/{lineage}/data/{}", table.path, file.path),
                None => format!("{}/data/{}", table.path, file.path),
            };
            if let Err(error) = store.delete(&path).await {
                tracing::warn!(%error, path, "could not remove a staged data file");
            }
        }
    }
}

/// The version to publish for a staged transaction that was committed: the highest version
/// above it up to which every later version is upkeep (compaction, indexes, configuration),
/// made by the same write before it stopped; the transaction's own version when a data
/// change lies between. Publishing below a compaction would leave the next write staging on
/// fragments it rewrote, a conflict at that write's commit; publishing above another
/// write's data change would show that write half done.
async fn committed_version(
    store: &GraphStore,
    lineage: Option<&str>,
    table: &StagedTable,
) -> Result<Option<u64>> {
    let dataset = store
        .open_dataset_on(&table.path, lineage, None)
        .await
        .context(StorageSnafu)?;
    let latest = dataset.version().version;
    // Walking down from the latest: the highest version below any data change seen so far.
    let mut publishable = latest;
    for version in (table.read_version + 1..=latest).rev() {
        let transaction =
            dataset
                .read_transaction_by_version(version)
                .await
                .context(LanceSnafu {
                    action: "read transaction",
                    table: table.path.clone(),
                })?;
        match transaction {
            Some(t) if t.uuid == table.transaction_uuid => return Ok(Some(publishable)),
            Some(t) if is_upkeep(&t.operation) => {}
            _ => publishable = version - 1,
        }
    }
    Ok(None)
}

/// A table version that changes no rows: what a write's upkeep commits after its data.
fn is_upkeep(operation: &Operation) -> bool {
    matches!(
        operation,
        Operation::Rewrite { .. }
            | Operation::CreateIndex { .. }
            | Operation::ReserveFragments { .. }
            | Operation::UpdateConfig { .. }
    )
}
