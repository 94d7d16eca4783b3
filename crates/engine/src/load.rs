//! Interactive `load`: one request = one graph commit, acknowledged once visible.

use std::collections::BTreeMap;
use std::sync::Arc;

use ingest_core::TypeBatch;
use lance::dataset::transaction::Transaction;
use lance::dataset::{MergeInsertBuilder, WhenMatched, WhenNotMatched};
use lance::Dataset;
use lance_select::RowAddrTreeMap;
use snafu::ResultExt;
use tributary_fold::commit_intent;
use tributary_fold::intent::{Intent, Owner, StagedTable};
use tributary_fold::StagedWrite;
use tributary_publisher::{CommitKind, CommitRecord};

use crate::error::{EmptyLoadSnafu, Error, InvalidDataSnafu, LanceSnafu, Result};
use crate::graph::{At, Graph, WriteTurn, MAIN_BRANCH};
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoadOutcome {
    pub commit: CommitRecord,
    /// Type name → rows written.
    pub rows: BTreeMap<String, u64>,
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
            return EmptyLoadSnafu.fail();
        }
        let turn = self.write_turn(&options.branch).await?;
        let loaded = self.load_in_turn(&turn, batches, options).await;
        turn.end().await;
        loaded
    }

    /// The load itself, in the branch's write turn: no other writer of the branch, in any
    /// process, reads the head or commits until this one has published, so the checks
    /// against the head (`@unique`, `@card`, endpoints, insert mode) hold at the publish.
    async fn load_in_turn(
        &self,
        turn: &WriteTurn,
        batches: Vec<TypeBatch>,
        options: &LoadOptions,
    ) -> Result<LoadOutcome> {
        self.recover_intents(Some(&options.branch)).await?;
        self.fold_before_load(turn, &options.branch, &batches)
            .await?;

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
            staged.push(StagedWrite {
                dataset,
                path,
                transaction,
                affected,
            });
        }

        let intent = Intent {
            id: Intent::new_id(),
            branch: options.branch.clone(),
            expected_head: head.id.clone(),
            actor: options.actor.clone(),
            kind: CommitKind::Load,
            rows_written,
            owner: Some(Owner::this_process()),
            commit_id: None,
            folded: Vec::new(),
            tables: staged
                .iter()
                .map(|w| {
                    StagedTable::new(w.path.clone(), w.dataset.version().version, &w.transaction)
                })
                .collect::<Result<_, _>>()?,
        };
        let commit = commit_intent(self.target_in(turn), &intent, staged).await?;
        Ok(LoadOutcome { commit, rows })
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
        // Both modes are a merge-insert on `id`, Lance's primary key: its staged transaction
        // then carries the keys it inserts, and Lance refuses to commit it over another
        // writer's commit that inserted one of them (any process). Insert mode also fails
        // on a key the staged-on version already holds.
        let when_matched = match mode {
            LoadMode::Upsert => WhenMatched::UpdateAll,
            LoadMode::Insert => WhenMatched::Fail,
        };
        let mut builder = MergeInsertBuilder::try_new(dataset.clone(), vec!["id".to_owned()])
            .context(lance_err("stage"))?;
        builder
            .when_matched(when_matched)
            .when_not_matched(WhenNotMatched::InsertAll)
            .skip_auto_cleanup(true);
        let job = builder.try_build().context(lance_err("stage"))?;
        let staged = job
            .execute_uncommitted_batches(vec![batch.batch.clone()])
            .await
            .context(lance_err("stage"))?;
        Ok((staged.transaction, staged.affected_rows))
    }
}
