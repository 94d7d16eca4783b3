//! Interactive `load`: one request = one graph commit, acknowledged once visible.

use std::collections::BTreeMap;
use std::sync::Arc;

use ingest_core::TypeBatch;
use lance::dataset::transaction::Transaction;
use lance::dataset::{
    CommitBuilder, InsertBuilder, MergeInsertBuilder, WhenMatched, WhenNotMatched, WriteMode,
};
use lance::Dataset;
use lance_select::RowAddrTreeMap;
use snafu::ResultExt;
use tributary_publisher::{
    CommitKind, CommitRecord, Error as PublishError, PublishPlan, Publisher,
};

use crate::error::{
    Error, InvalidDataSnafu, InvalidRequestSnafu, LanceSnafu, PublishSnafu, Result, StorageSnafu,
};
use crate::graph::{At, Graph, MAIN_BRANCH};
use crate::intent::{InFlight, Intent, Owner, StagedTable};
use crate::recovery::Recovered;
use crate::validate;

/// What to do with a row whose key already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadMode {
    /// Replace the existing row (the default; makes retries idempotent).
    #[default]
    Upsert,
    /// Refuse the whole load if any key already exists.
    Insert,
}

#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub branch: String,
    pub mode: LoadMode,
    pub actor: String,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            branch: MAIN_BRANCH.to_owned(),
            mode: LoadMode::Upsert,
            actor: "tributary:load".to_owned(),
        }
    }
}

/// A visible load.
#[derive(Debug, Clone)]
pub struct LoadOutcome {
    pub commit: CommitRecord,
    /// Type name → rows written.
    pub rows: BTreeMap<String, u64>,
}

/// How often a load retries its publish after losing the head to another writer.
const PUBLISH_ATTEMPTS: usize = 5;

macro_rules! crash_window {
    ($name:literal) => {
        fail::fail_point!($name, |_| Err(Error::Injected {
            point: $name.to_owned()
        }))
    };
}

impl Graph {
    /// Validate and load NDJSON `text` as one graph commit. Nothing is written unless
    /// every line is valid.
    pub async fn load(&self, text: &str, options: &LoadOptions) -> Result<LoadOutcome> {
        let decoded = ingest_core::decode_str(&self.catalog, text);
        if !decoded.rejects.is_empty() {
            return InvalidDataSnafu {
                errors: decoded.rejects,
            }
            .fail();
        }
        self.load_batches(decoded.batches, options).await
    }

    /// Load already-decoded batches as one graph commit.
    pub async fn load_batches(
        &self,
        batches: Vec<TypeBatch>,
        options: &LoadOptions,
    ) -> Result<LoadOutcome> {
        if batches.iter().all(|b| b.batch.num_rows() == 0) {
            return InvalidRequestSnafu {
                what: "load",
                message: "the input holds no rows",
            }
            .fail();
        }
        let queue = self.write_queue(&options.branch).await;
        let _turn = queue.lock().await;

        let head = self.snapshot(&At::Branch(options.branch.clone())).await?;
        let batches = validate::dedupe_keys(batches, options.mode)
            .map_err(|errors| Error::InvalidData { errors })?;
        let errors = validate::against_snapshot(self, &head, &batches, options.mode).await?;
        if !errors.is_empty() {
            return InvalidDataSnafu { errors }.fail();
        }

        // Stage every table; nothing is committed yet.
        let mut staged = Vec::with_capacity(batches.len());
        let mut rows = BTreeMap::new();
        let mut rows_written = BTreeMap::new();
        for batch in &batches {
            let ty = self.type_def(&batch.type_name)?;
            let path = ty.table_path();
            let dataset = Arc::new(self.open_table(&head, ty).await?);
            let (transaction, affected) = self.stage(&dataset, &path, batch, options.mode).await?;
            let n = batch.batch.num_rows() as u64;
            rows.insert(batch.type_name.clone(), n);
            rows_written.insert(path.clone(), n);
            staged.push((dataset, path, transaction, affected));
        }

        let intent = Intent {
            id: Intent::new_id(),
            branch: options.branch.clone(),
            expected_head: head.id.clone(),
            actor: options.actor.clone(),
            kind: CommitKind::Load,
            rows_written: rows_written.clone(),
            owner: Some(Owner::this_process()),
            tables: staged
                .iter()
                .map(|(dataset, path, txn, _)| {
                    StagedTable::new(path.clone(), dataset.version().version, txn)
                })
                .collect::<Result<_>>()?,
        };
        let sidecar = Intent::sidecar_path(&intent.id);
        let _in_flight = InFlight::start(&intent.id);
        self.store
            .put(&sidecar, intent.to_bytes())
            .await
            .context(StorageSnafu)?;

        let commit = match self.commit_and_publish(&intent, staged, &head).await {
            Ok(commit) => commit,
            // A simulated crash leaves everything as a crash would, for recovery on open.
            Err(error @ Error::Injected { .. }) => return Err(error),
            // Anything else (a table commit conflict, a lost publish race): never leave
            // committed tables behind unpublished; finish the load or drop it now.
            Err(error) => {
                tracing::warn!(%error, intent = %intent.id, "load failed after staging; resolving its intent");
                let resolved = self.recover_intent(&intent).await?;
                self.delete_sidecar(&sidecar).await;
                return match resolved {
                    Recovered::RolledForward { .. } => {
                        let commit = self
                            .publisher
                            .head(&options.branch)
                            .await
                            .context(PublishSnafu)?;
                        Ok(LoadOutcome { commit, rows })
                    }
                    _ => Err(error),
                };
            }
        };
        crash_window!("load::before-sidecar-delete");
        self.delete_sidecar(&sidecar).await;
        Ok(LoadOutcome { commit, rows })
    }

    /// Commit each staged table, then publish once.
    async fn commit_and_publish(
        &self,
        intent: &Intent,
        staged: Vec<StagedWrite>,
        head: &CommitRecord,
    ) -> Result<CommitRecord> {
        crash_window!("load::before-table-commits");
        let mut versions = BTreeMap::new();
        for (i, (dataset, path, transaction, affected)) in staged.into_iter().enumerate() {
            if i == 1 {
                crash_window!("load::between-table-commits");
            }
            let version = commit_staged(dataset, &path, transaction, affected).await?;
            versions.insert(path, version);
        }
        crash_window!("load::before-publish");
        let plan = PublishPlan {
            branch: intent.branch.clone(),
            expected_head: Some(head.id.clone()),
            tables: versions,
            rows_written: intent.rows_written.clone(),
            actor: intent.actor.clone(),
            kind: intent.kind,
            intent: Some(intent.id.clone()),
        };
        self.publish_with_retry(plan).await
    }

    /// The write is published: a sidecar left behind is only clutter (recovery finds its
    /// commit and deletes it), so a failed delete must not fail the acknowledged load.
    async fn delete_sidecar(&self, sidecar: &str) {
        if let Err(error) = self.store.delete(sidecar).await {
            tracing::warn!(%error, sidecar, "could not delete a recovery sidecar");
        }
    }

    /// Stage one table's rows: data files are written, no version is committed.
    async fn stage(
        &self,
        dataset: &Arc<Dataset>,
        path: &str,
        batch: &TypeBatch,
        mode: LoadMode,
    ) -> Result<(Transaction, Option<RowAddrTreeMap>)> {
        let lance_err = |action: &'static str| LanceSnafu {
            action,
            table: path,
        };
        let data = batch.batch.clone();
        match mode {
            LoadMode::Upsert => {
                let mut builder =
                    MergeInsertBuilder::try_new(dataset.clone(), vec!["id".to_owned()])
                        .context(lance_err("stage upsert"))?;
                builder
                    .when_matched(WhenMatched::UpdateAll)
                    .when_not_matched(WhenNotMatched::InsertAll)
                    .skip_auto_cleanup(true);
                let job = builder.try_build().context(lance_err("stage upsert"))?;
                let staged = job
                    .execute_uncommitted_batches(vec![data])
                    .await
                    .context(lance_err("stage upsert"))?;
                Ok((staged.transaction, staged.affected_rows))
            }
            LoadMode::Insert => {
                let params = self.store.write_params(WriteMode::Append);
                let transaction = InsertBuilder::new(dataset.clone())
                    .with_params(&params)
                    .execute_uncommitted(vec![data])
                    .await
                    .context(lance_err("stage insert"))?;
                Ok((transaction, None))
            }
        }
    }

    /// Publish, re-basing on a moved head a few times. Lance table history is linear, so
    /// the newer of our version and the head's version of a table holds both writes.
    pub(crate) async fn publish_with_retry(&self, mut plan: PublishPlan) -> Result<CommitRecord> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.publisher.publish(plan.clone()).await {
                Ok(commit) => return Ok(commit),
                Err(PublishError::Conflict { .. }) if attempt < PUBLISH_ATTEMPTS => {
                    let head = self
                        .publisher
                        .head(&plan.branch)
                        .await
                        .context(PublishSnafu)?;
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
}

/// A staged table: the dataset it was staged on, its path, the transaction and the rows it
/// touches (which lets Lance tell a real conflict from a concurrent write elsewhere).
type StagedWrite = (Arc<Dataset>, String, Transaction, Option<RowAddrTreeMap>);

/// Commit a staged transaction on top of the table's latest version.
pub(crate) async fn commit_staged(
    dataset: Arc<Dataset>,
    path: &str,
    transaction: Transaction,
    affected: Option<RowAddrTreeMap>,
) -> Result<u64> {
    let mut builder = CommitBuilder::new(dataset).with_skip_auto_cleanup(true);
    if let Some(affected) = affected {
        builder = builder.with_affected_rows(affected);
    }
    let committed = builder.execute(transaction).await.context(LanceSnafu {
        action: "commit",
        table: path,
    })?;
    Ok(committed.version().version)
}
