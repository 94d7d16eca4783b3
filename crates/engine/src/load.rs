//! Interactive `load`: one request = one graph commit, acknowledged once visible.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, UInt32Array};
use lance::dataset::{
    MergeInsertBuilder, UncommittedMergeInsert, WhenMatched, WhenNotMatched, WhenNotMatchedBySource,
};
use lance::Dataset;
use snafu::ResultExt;
use tributary_publisher::{BranchName, CommitRecord, Publisher, MAIN_BRANCH};
use tributary_schema::{Catalog, LineError, TypeBatch, TypeDef, TypeKind};
use tributary_write::intent::{Intent, IntentKind, StagedTable};
use tributary_write::lookup::{existing_ids, string_column};
use tributary_write::{
    commit_intent, edge_rows, ConstraintChecker, Scope, SnapshotTables, StagedWrite,
};

use crate::error::{
    ArrowSnafu, EmptyLoadSnafu, InvalidDataSnafu, LanceSnafu, PublishSnafu, Result,
};
use crate::graph::{type_in, At, Graph, WriteTurn};
use crate::patches::apply_patches;
use crate::read::View;
use crate::removals::Removals;
use crate::writes::Writes;

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
    pub branch: BranchName,
    pub mode: LoadMode,
    pub actor: String,
    /// A key naming this load: a retry with the same key on the same branch (after a
    /// dropped connection, a crash) answers with the commit the first one made and writes
    /// nothing. Recorded with the commit, in the same publish.
    pub idempotency_key: Option<String>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            branch: BranchName::main(),
            mode: LoadMode::Upsert,
            actor: "tributary:load".to_owned(),
            idempotency_key: None,
        }
    }
}

/// A visible load.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct LoadOutcome {
    pub commit: CommitRecord,
    /// Type name → rows written.
    pub rows: BTreeMap<String, u64>,
    /// Type name → rows deleted (by delete lines, and edges of deleted nodes).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deleted: BTreeMap<String, u64>,
    /// The load's idempotency key named an earlier load: this is that load's commit, and
    /// nothing was written now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

impl Graph {
    /// Validate and load NDJSON `text` as one graph commit. Nothing is written unless
    /// every line is valid.
    pub async fn load(&self, text: &str, options: &LoadOptions) -> Result<LoadOutcome> {
        let mut decoded = tributary_schema::decode_str(&self.catalog(), text);
        if !decoded.rejects.is_empty() {
            // A line may name what another process's schema change added.
            if let Some(newer) = self.newer_catalog().await? {
                decoded = tributary_schema::decode_str(&newer, text);
            }
        }
        if !decoded.rejects.is_empty() {
            return InvalidDataSnafu {
                errors: decoded.rejects,
            }
            .fail();
        }
        self.load_writes(decoded.into(), options).await
    }

    /// Load already-decoded rows, patches and deletes as one graph commit.
    pub async fn load_writes(&self, writes: Writes, options: &LoadOptions) -> Result<LoadOutcome> {
        if writes.is_empty() {
            return EmptyLoadSnafu.fail();
        }
        if let Some(key) = &options.idempotency_key {
            crate::producers::check_token(
                "an idempotency key",
                key,
                crate::producers::MAX_IDEMPOTENCY_KEY,
            )?;
        }
        if options.branch != MAIN_BRANCH {
            // Only a head says a branch exists: ask before taking its lease, which would
            // leave a lease folder behind for any name a client tries.
            self.publisher
                .head(&options.branch)
                .await
                .context(PublishSnafu)?;
        }
        // Tests hold a load here, before its turn, as a turn held by a fold would.
        #[cfg(feature = "failpoints")]
        if fail::list()
            .iter()
            .any(|(name, _)| name == "load::before-turn")
        {
            tokio::task::block_in_place(|| fail::fail_point!("load::before-turn"));
        }
        let turn = self.write_turn(&options.branch).await?;
        let loaded = self.load_in_turn(&turn, writes, options, None).await;
        turn.end().await;
        loaded
    }

    /// The load itself, in the branch's write turn: no other writer of the branch, in any
    /// process, reads the head or commits until this one has published, so the checks
    /// against the head (`@unique`, `@card`, endpoints, insert mode) hold at the publish.
    /// A merge writes its changes through here too (`merging`): a merge commit with two
    /// parents, and a node it deletes may not take edges of the target with it.
    pub(crate) async fn load_in_turn(
        &self,
        turn: &WriteTurn,
        writes: Writes,
        options: &LoadOptions,
        merging: Option<&Merging>,
    ) -> Result<LoadOutcome> {
        // In the turn, after recovery: a first attempt that crashed mid-commit is either
        // published by now (and found) or dropped (and this one writes).
        if let Some(key) = &options.idempotency_key {
            let earlier = self
                .publisher
                .commit_by_key(&options.branch, key)
                .await
                .context(PublishSnafu)?;
            if let Some(commit) = earlier {
                return Ok(self.replayed(commit));
            }
        }
        // The schema of the turn: rows decoded before a newer one was found take its
        // added fields' defaults (or nulls), as a line that does not name them would.
        let catalog = &turn.catalog;
        let batches = conform_all(catalog, writes.batches)?;
        let batches = dedupe_keys(catalog, batches, options.mode)?;
        let (batches, removals) = Removals::resolve(catalog, batches, writes.deletes)?;
        let touched: Vec<&str> = batches
            .iter()
            .map(|b| b.type_name.as_str())
            .chain(removals.types())
            .chain(writes.patches.iter().map(|p| p.rows.type_name.as_str()))
            .collect();
        // A merge folded before it read either side.
        if merging.is_none() {
            self.fold_before_load(turn, &options.branch, &touched)
                .await?;
        }

        let head = self.snapshot(&At::Branch(options.branch.clone())).await?;
        let tables = SnapshotTables::new(&self.store, catalog, &head);
        // Patches are laid over the rows the head holds, after everything pending folded.
        let (batches, mut errors) =
            apply_patches(catalog, batches, &removals, writes.patches, |ty, keys| {
                let head = &head;
                async move {
                    let view = View::from(&At::Branch(head.branch.clone()));
                    self.rows_by_key(head, ty, &keys, &view).await
                }
            })
            .await?;
        let (going, more) = removals.check(catalog, &tables, &batches).await?;
        errors.extend(more);
        if let Some(merging) = merging {
            errors.extend(
                merging
                    .stranded(catalog, &tables, &removals, &batches)
                    .await?,
            );
        }
        errors.extend(
            self.check_request(&tables, &batches, &removals, &going, options.mode)
                .await?,
        );
        if !errors.is_empty() {
            errors.sort_by_key(|e| e.line);
            return InvalidDataSnafu { errors }.fail();
        }

        // Fill `@embed` fields before anything is staged: a provider that fails fails the
        // load whole, never a row without its vector.
        let batches = self.fill_embeddings(&tables, batches).await?;

        // Stage every table; nothing is committed yet.
        let mut staged = Vec::with_capacity(batches.len());
        let mut rows = BTreeMap::new();
        let mut deleted = BTreeMap::new();
        let mut rows_written = BTreeMap::new();
        let empty: Vec<TypeBatch> = removals
            .types()
            .filter(|name| !batches.iter().any(|b| b.type_name == *name))
            .map(|name| Ok(TypeBatch::empty(type_in(catalog, name)?)))
            .collect::<Result<_>>()?;
        for batch in batches.iter().chain(&empty) {
            let ty = type_in(catalog, &batch.type_name)?;
            let path = ty.table_path();
            let dataset = Arc::new(tables.open(ty).await?);
            let predicate = removals.predicate(ty);
            let merged = self
                .stage(&dataset, &path, batch, predicate.as_deref(), options.mode)
                .await?;
            let n = batch.batch.num_rows() as u64;
            if n > 0 {
                rows.insert(batch.type_name.clone(), n);
            }
            if merged.stats.num_deleted_rows > 0 {
                deleted.insert(batch.type_name.clone(), merged.stats.num_deleted_rows);
            }
            rows_written.insert(path.clone(), n + merged.stats.num_deleted_rows);
            staged.push(StagedWrite {
                dataset,
                path,
                transaction: merged.transaction,
                affected: merged.affected_rows,
            });
        }

        let kind = match merging {
            Some(merging) => IntentKind::Merge {
                merged: merging.head.clone(),
            },
            None => IntentKind::Load,
        };
        let mut intent = Intent::new(
            kind,
            options.branch.clone(),
            head.lineage.clone(),
            Some(head.id.clone()),
            &options.actor,
        );
        intent.idempotency_key = options.idempotency_key.clone();
        intent.rows_written = rows_written;
        intent.tables = staged
            .iter()
            .map(|w| StagedTable::new(w.path.clone(), w.dataset.version().version, &w.transaction))
            .collect::<Result<_, _>>()?;
        let commit = commit_intent(self.target_in(turn), &intent, staged)
            .await?
            .record;
        Ok(LoadOutcome {
            commit,
            rows,
            deleted,
            replayed: false,
        })
    }

    /// The request's rows with their empty `@embed` fields filled (see
    /// [`tributary_write::fill_embeddings`]).
    async fn fill_embeddings(
        &self,
        tables: &SnapshotTables<'_>,
        batches: Vec<TypeBatch>,
    ) -> Result<Vec<TypeBatch>> {
        let embedder = self.embedder_for_writes();
        let mut out = Vec::with_capacity(batches.len());
        for mut batch in batches {
            let ty = type_in(tables.catalog, &batch.type_name)?;
            if tributary_write::has_embedded_fields(ty) && batch.batch.num_rows() > 0 {
                let table = tables.open(ty).await?;
                let rows =
                    std::mem::replace(&mut batch.batch, RecordBatch::new_empty(ty.arrow_schema()));
                batch.batch = tributary_write::fill_embeddings(ty, rows, &table, &embedder)
                    .await?
                    .map_err(|failure| tributary_write::Error::Embedding {
                        type_name: ty.name.clone(),
                        field: failure.field,
                        source: failure.error,
                    })?;
            }
            out.push(batch);
        }
        Ok(out)
    }

    /// Check the request against the head it commits on: the keys `--mode insert`
    /// refuses, then the graph's constraints (endpoints, `@card`, `@unique`) through the
    /// checker the fold uses. Returns every violation, in line order.
    async fn check_request(
        &self,
        tables: &SnapshotTables<'_>,
        batches: &[TypeBatch],
        removals: &Removals,
        going: &[(String, Vec<String>)],
        mode: LoadMode,
    ) -> Result<Vec<LineError>> {
        let mut errors = Vec::new();
        let mut checker = ConstraintChecker::new(tables, Scope::Request);
        for (type_name, keys) in removals.named() {
            checker.deleting(type_name, keys);
        }
        for (edge_type, ids) in going {
            checker.deleting(edge_type, ids.iter().map(String::as_str));
        }
        // Nodes first: an edge may name a node this request writes.
        let mut ordered: Vec<(&TypeDef, &TypeBatch)> = batches
            .iter()
            .map(|batch| Ok((type_in(tables.catalog, &batch.type_name)?, batch)))
            .collect::<Result<_>>()?;
        ordered.sort_by_key(|(ty, _)| ty.kind == TypeKind::Edge);
        for (ty, batch) in ordered {
            if mode == LoadMode::Insert {
                let table = tables.open(ty).await?;
                let ids = string_column(&batch.batch, "id");
                let wanted: Vec<String> = ids.iter().flatten().map(str::to_owned).collect();
                let existing = existing_ids(&table, "id", &wanted, &ty.name).await?;
                for (i, id) in ids.iter().enumerate() {
                    if let Some(id) = id.filter(|id| existing.contains(*id)) {
                        errors.push(LineError {
                            line: batch.lines[i],
                            field: ty.key.clone(),
                            reason: format!("{} `{id}` already exists (--mode insert)", ty.name),
                        });
                    }
                }
            }
            for violation in checker.check(ty, &batch.batch).await? {
                errors.push(LineError {
                    line: batch.lines[violation.row],
                    field: Some(violation.field),
                    reason: violation.message,
                });
            }
        }
        errors.sort_by_key(|e| e.line);
        Ok(errors)
    }

    /// Stage one table's rows, and the deletion of the rows `delete_if` selects (rows the
    /// batch does not rewrite): data files are written, no version is committed. One
    /// merge-insert does both, so the table gets one transaction.
    async fn stage(
        &self,
        dataset: &Arc<Dataset>,
        path: &str,
        batch: &TypeBatch,
        delete_if: Option<&str>,
        mode: LoadMode,
    ) -> Result<UncommittedMergeInsert> {
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
        if let Some(predicate) = delete_if {
            builder.when_not_matched_by_source(
                WhenNotMatchedBySource::delete_if(dataset, predicate)
                    .context(lance_err("stage"))?,
            );
        }
        let job = builder.try_build().context(lance_err("stage"))?;
        job.execute_uncommitted(tributary_write::merge_source(batch.batch.clone()))
            .await
            .context(lance_err("stage"))
    }
}

/// A merge written through the load path: the branch merged in and its head.
pub(crate) struct Merging {
    pub source: BranchName,
    pub head: tributary_publisher::CommitId,
}

impl Merging {
    /// The target's edges a merge would delete only because they reach a node the merge
    /// deletes (a load takes them along; a merge refuses, as the merged branch never
    /// decided about them). The line is 0: the edge is named in the field.
    async fn stranded(
        &self,
        catalog: &Catalog,
        tables: &SnapshotTables<'_>,
        removals: &Removals,
        batches: &[TypeBatch],
    ) -> Result<Vec<LineError>> {
        // An edge the merge deletes or writes again (moved to another end) is decided.
        let mut named: HashMap<&str, std::collections::HashSet<&str>> = removals
            .named()
            .map(|(type_name, keys)| (type_name, keys.collect()))
            .collect();
        for batch in batches {
            let ids = string_column(&batch.batch, "id");
            named
                .entry(batch.type_name.as_str())
                .or_default()
                .extend(ids.iter().flatten());
        }
        let mut errors = Vec::new();
        for edge in catalog.types.iter().filter(|t| t.kind == TypeKind::Edge) {
            let Some(filter) = removals.predicate(edge) else {
                continue;
            };
            let table = tables.open(edge).await?;
            for (id, _, _) in edge_rows(&table, &edge.name, &filter).await? {
                if named
                    .get(edge.name.as_str())
                    .is_some_and(|keys| keys.contains(id.as_str()))
                {
                    continue;
                }
                errors.push(LineError {
                    line: 0,
                    field: Some(format!("{} `{id}`", edge.name)),
                    reason: format!(
                        "this edge reaches a node `{}` deletes; delete or move it on one side first",
                        self.source
                    ),
                });
            }
        }
        Ok(errors)
    }
}

/// Within one request a key may appear once per type. Upsert keeps the last line's row
/// (the newest write wins); insert refuses duplicates.
fn dedupe_keys(
    catalog: &Catalog,
    batches: Vec<TypeBatch>,
    mode: LoadMode,
) -> Result<Vec<TypeBatch>> {
    let mut errors = Vec::new();
    let mut out = Vec::with_capacity(batches.len());
    for batch in batches {
        let ids = string_column(&batch.batch, "id");
        let key_field = catalog.get(&batch.type_name).and_then(|ty| ty.key.clone());
        let mut last: HashMap<&str, usize> = HashMap::with_capacity(ids.len());
        let mut first_line: HashMap<&str, u64> = HashMap::new();
        for i in 0..ids.len() {
            let id = ids.value(i);
            if let Some(previous) = last.insert(id, i) {
                if mode == LoadMode::Insert {
                    let first = *first_line.entry(id).or_insert(batch.lines[previous]);
                    errors.push(LineError {
                        line: batch.lines[i],
                        field: key_field.clone(),
                        reason: format!("{} `{id}` appears again (first on line {first}); --mode insert refuses duplicates", batch.type_name),
                    });
                }
            }
        }
        if last.len() == ids.len() {
            out.push(batch);
            continue;
        }
        let mut keep: Vec<u32> = last.into_values().map(|i| i as u32).collect();
        keep.sort_unstable();
        let indices = UInt32Array::from(keep.clone());
        let columns = batch
            .batch
            .columns()
            .iter()
            .map(|c| arrow_select::take::take(c.as_ref(), &indices, None))
            .collect::<Result<Vec<_>, _>>()
            .and_then(|columns| RecordBatch::try_new(batch.batch.schema(), columns))
            .context(ArrowSnafu {
                action: "keep the last row of each key",
            })?;
        let lines = keep.iter().map(|&i| batch.lines[i as usize]).collect();
        out.push(TypeBatch {
            type_name: batch.type_name,
            batch: columns,
            lines,
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        errors.sort_by_key(|e| e.line);
        InvalidDataSnafu { errors }.fail()
    }
}

/// Rows decoded under an older schema, with every column of `catalog`'s.
fn conform_all(catalog: &Catalog, batches: Vec<TypeBatch>) -> Result<Vec<TypeBatch>> {
    batches
        .into_iter()
        .map(|mut batch| {
            let ty = type_in(catalog, &batch.type_name)?;
            batch.batch =
                tributary_schema::conform(ty, &batch.batch).context(crate::error::ArrowSnafu {
                    action: "conform rows to the schema",
                })?;
            Ok(batch)
        })
        .collect()
}

impl Graph {
    /// The outcome of a load that already happened: its commit, its rows by type.
    fn replayed(&self, commit: CommitRecord) -> LoadOutcome {
        let rows = self
            .catalog()
            .types
            .iter()
            .filter_map(|ty| {
                let n = *commit.rows_written.get(&ty.table_path())?;
                (n > 0).then(|| (ty.name.clone(), n))
            })
            .collect();
        LoadOutcome {
            commit,
            rows,
            deleted: BTreeMap::new(),
            replayed: true,
        }
    }
}
