//! `schema apply`: a new schema published as one `schema` commit, for changes the stored
//! tables take in place (see [`tributary_schema::plan_change`]).
//!
//! In `main`'s write turn: everything pending is folded first (claiming every shard with
//! unflushed rows), this process's writers are closed, every shard of a changed table is
//! claimed (writers elsewhere reopen on the changed table), a type losing `@stream` has
//! its shards drained and sealed and is folded again; then new types get their tables,
//! changed types their columns (the default, or null, for every stored row) and indexes,
//! enrolled tables their maintained index set, and one publish moves the head and the
//! schema row together. Other processes take the new schema at their next write turn;
//! rows written under the old one get the new fields' defaults or nulls wherever they
//! are folded or read as a patch's base (`tributary_schema::conform`).
//!
//! Before its first change to a table or shard it records its intent (kind `schema`,
//! with the schema it is applying: the write pipeline of `tributary_write::commit`); a
//! change stopped before its publish (an error, a crash) is finished by the next write
//! turn of `main` in any process, which applies that schema again (each step skips what
//! is there) and publishes it. Until then the tables' new versions are
//! not pinned and nothing reads them, but they are newer than the head, and a write
//! staged on the head would conflict with them.

use std::collections::BTreeMap;
use std::sync::Arc;
use tributary_storage::layout;

use lance::dataset::{NewColumnTransform, UpdateBuilder, WriteMode};
use lance::index::DatasetIndexExt;
use lance::Dataset;
use serde::{Deserialize, Serialize};
use snafu::ResultExt;
use tributary_memwal_adapter::{enrollment, set_maintained_indexes, MemWalTable};
use tributary_publisher::{BranchName, CommitRecord, Publisher, SchemaRecord};
use tributary_schema::{plan_change, Catalog, SchemaChange, TypeDef};
use tributary_write::intent::{Intent, IntentKind};
use tributary_write::{
    clear_intent, publish_intent, record_intent, CrashWindow, Recovered, WriteKind, WriteStep,
};

use crate::error::{Error, LanceSnafu, PublishSnafu, Result, SchemaSnafu, StorageSnafu};
use crate::fold::Claim;
use crate::graph::{table_schema, Graph, WriteTurn};

/// Who publishes a schema change.
const SCHEMA_ACTOR: &str = "tributary:schema";

/// Where an older version recorded the schema a change was applying (now an intent).
fn older_pending_schema() -> String {
    format!("{}/pending.json", layout::SCHEMA)
}

/// What a schema change did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SchemaOutcome {
    /// The schema's version now.
    pub version: u32,
    /// What changed; empty when the new schema equals the old.
    pub change: SchemaChange,
    /// The `schema` commit; `None` when nothing changed.
    pub commit: Option<CommitRecord>,
    /// Rows folded first (what was pending on `@stream` types).
    pub folded_rows: u64,
}

impl Graph {
    /// Apply the schema `source`: additive changes are published as one `schema` commit;
    /// a change the stored tables cannot take is refused with every difference named, and
    /// changes nothing.
    pub async fn apply_schema(&self, source: &str) -> Result<SchemaOutcome> {
        let new = Catalog::parse(source).context(SchemaSnafu)?;
        // Refused before the write turn when it is plain from the schema this process has.
        plan_change(&self.catalog(), &new)
            .map_err(|refused| Error::BreakingSchemaChange { refused })?;
        let branch = BranchName::main();
        let turn = self.write_turn(&branch).await?;
        let applied = self.apply_in_turn(&turn, &branch, new, None).await;
        turn.end().await;
        applied
    }

    /// The change itself, in `main`'s write turn; `resumed` is the intent of a change that
    /// stopped before its publish, which this one finishes under the same id.
    async fn apply_in_turn(
        &self,
        turn: &WriteTurn,
        branch: &BranchName,
        new: Catalog,
        resumed: Option<&Intent>,
    ) -> Result<SchemaOutcome> {
        let (old, version) = (turn.catalog.clone(), self.catalog_and_version().1);
        let change =
            plan_change(&old, &new).map_err(|refused| Error::BreakingSchemaChange { refused })?;
        if change.is_empty() {
            return Ok(SchemaOutcome {
                version,
                change,
                commit: None,
                folded_rows: 0,
            });
        }
        // A branch's tables are its own lineages, which a change on `main` would not
        // reach. In `main`'s turn: a branch made from `main` waits for it.
        let others: Vec<String> = self
            .branches()
            .await?
            .into_iter()
            .filter(|h| !h.branch.is_main())
            .map(|h| h.branch.to_string())
            .collect();
        if !others.is_empty() {
            return Err(Error::BranchesExist {
                operation: "a schema change",
                branches: others,
            });
        }
        // Every default must be writable before anything changes.
        for (type_name, field) in &change.new_fields {
            let ty = type_of(&new, type_name)?;
            if let Some(default) = ty.field(field).and_then(|f| f.default.as_ref()) {
                if sql_literal(default).is_none() {
                    return Err(Error::BreakingSchemaChange {
                        refused: vec![tributary_schema::BreakingChange {
                            type_name: type_name.clone(),
                            field: Some(field.clone()),
                            reason: "a new field's default must be a number, a string, a date or a boolean (a list or an infinite number cannot fill stored rows)".to_owned(),
                        }],
                    });
                }
            }
        }
        // A type streamed before had its shards sealed when it stopped being streamed.
        for name in &change.newly_streamed {
            let path = type_of(&new, name)?.table_path();
            if self.enrolled_on_main(&path).await? {
                return Err(Error::BreakingSchemaChange {
                    refused: vec![tributary_schema::BreakingChange {
                        type_name: name.clone(),
                        field: None,
                        reason: "@stream added back: its shards were sealed when @stream was removed (streaming it again is not supported)".to_owned(),
                    }],
                });
            }
        }
        // Quiescent first: what is pending is folded under the old schema, and every
        // shard of a changed table is claimed (fencing writers of other processes, which
        // reopen on the changed table and fill the new fields of what they send).
        let mut folded = if old.types.iter().any(|t| t.stream.is_some()) {
            self.fold_locked_with(turn, branch, self.settings.fold.policy, Claim::All)
                .await?
        } else {
            Default::default()
        };
        self.close_writers().await?;
        if !turn.confirm().await? {
            return Err(Error::Fold {
                source: tributary_write::Error::LeaseLost {
                    branch: branch.to_string(),
                },
            });
        }
        // From the first change no reader sees until the publish (a seal, a column), the
        // change is recorded: a stop is finished by the next write turn.
        let next = self
            .publisher
            .head(branch)
            .await
            .context(PublishSnafu)?
            .schema_version
            + 1;
        let schema = SchemaRecord {
            version: next,
            source: new.source.clone(),
        };
        let mut intent = match resumed {
            Some(resumed) => Intent {
                kind: IntentKind::Schema { schema },
                ..resumed.clone()
            },
            None => Intent::new(
                IntentKind::Schema { schema },
                branch.clone(),
                None,
                None,
                SCHEMA_ACTOR,
            ),
        };
        let _running = record_intent(&self.store, &intent).await?;
        for name in change.changed_types() {
            self.claim_every_shard(type_of(&old, name)?).await?;
        }
        // A type that stops being streamed: every shard drained and sealed (no writer can
        // claim it again, so nothing more is acknowledged), and what the drains flushed
        // folded, under the old schema.
        if !change.unstreamed.is_empty() {
            for name in &change.unstreamed {
                let ty = type_of(&old, name)?;
                self.seal_every_shard(ty, &MemWalTable::main(&ty.table_path()))
                    .await?;
            }
            folded.absorb(
                self.fold_locked_with(turn, branch, self.settings.fold.policy, Claim::All)
                    .await?,
            );
        }
        // After the folds, which moved the head.
        let head = self.publisher.head(branch).await.context(PublishSnafu)?;
        let mut tables = BTreeMap::new();
        for name in &change.new_types {
            let ty = type_of(&new, name)?;
            let path = ty.table_path();
            // A table the head pins was published already: never replaced.
            let version = match head.tables.get(&path) {
                Some(&pinned) => pinned,
                None => self.create_table(ty).await?,
            };
            tables.insert(path, version);
        }
        for name in change.changed_types() {
            let ty = type_of(&new, name)?;
            let fields: Vec<&str> = change
                .new_fields
                .iter()
                .filter(|(t, _)| t == name)
                .map(|(_, f)| f.as_str())
                .collect();
            tables.insert(ty.table_path(), self.evolve_table(ty, &fields).await?);
        }
        intent.expected_head = Some(head.id.clone());
        let commit = publish_intent(&self.publisher, &intent, tables).await?;
        clear_intent(&self.store, &intent).await?;
        self.set_catalog(Arc::new(new), next);
        // A writer a send of this process opened during the change has the old schema.
        self.close_writers().await?;
        Ok(SchemaOutcome {
            version: next,
            change,
            commit: Some(commit),
            folded_rows: folded.rows.values().sum(),
        })
    }

    /// Finish a schema change that stopped between its first table change and its
    /// publish: apply its schema again (each step skips what is there) and publish it. The
    /// caller holds the write turn of `main` (`turn`), whose schema becomes the change's.
    pub(crate) async fn finish_schema_change(
        &self,
        turn: &mut WriteTurn,
        intent: &Intent,
        schema: SchemaRecord,
    ) -> Result<Recovered> {
        let branch = BranchName::main();
        let head = self.publisher.head(&branch).await.context(PublishSnafu)?;
        if schema.version <= head.schema_version {
            return Ok(Recovered::AlreadyPublished {
                intent: intent.id.clone(),
            });
        }
        tracing::warn!(
            version = schema.version,
            "finishing a schema change that stopped before its publish"
        );
        let new = Catalog::parse(&schema.source).context(SchemaSnafu)?;
        let outcome = self.apply_in_turn(turn, &branch, new, Some(intent)).await?;
        turn.catalog = self.catalog();
        Ok(match outcome.commit {
            Some(commit) => Recovered::RolledForward {
                intent: intent.id.clone(),
                commit: commit.id,
            },
            None => Recovered::Dropped {
                intent: intent.id.clone(),
            },
        })
    }

    /// A schema change an older version of Tributary left unfinished, recorded apart from
    /// the intents (`__schema/pending.json`): finished as an intent would be. Looked for
    /// once per process, at its first write turn of `main`.
    pub(crate) async fn finish_older_schema_change(&self, turn: &mut WriteTurn) -> Result<()> {
        use std::sync::atomic::Ordering;
        // Set once the check succeeded: a failed one is tried again by the next turn.
        if self.older_schema_change_checked.load(Ordering::SeqCst) {
            return Ok(());
        }
        let Some(bytes) = self
            .store
            .get(&older_pending_schema())
            .await
            .context(StorageSnafu)?
        else {
            self.older_schema_change_checked
                .store(true, Ordering::SeqCst);
            return Ok(());
        };
        match serde_json::from_slice::<SchemaRecord>(&bytes) {
            Ok(schema) => {
                let intent = Intent::new(
                    IntentKind::Schema {
                        schema: schema.clone(),
                    },
                    BranchName::main(),
                    None,
                    None,
                    SCHEMA_ACTOR,
                );
                futures::FutureExt::boxed(self.finish_schema_change(turn, &intent, schema)).await?;
            }
            Err(error) => tracing::error!(%error, "unreadable pending schema change; set aside"),
        }
        self.store
            .delete(&older_pending_schema())
            .await
            .context(StorageSnafu)?;
        self.older_schema_change_checked
            .store(true, Ordering::SeqCst);
        Ok(())
    }

    /// The empty table of a new type; one left by a change that stopped before its
    /// publish (never visible) is replaced.
    async fn create_table(&self, ty: &TypeDef) -> Result<u64> {
        let path = ty.table_path();
        let uri = self.store.uri_of(&path);
        let reader = arrow_array::RecordBatchIterator::new(Vec::new(), table_schema(ty));
        let mut dataset = Dataset::write(
            reader,
            uri.as_str(),
            Some(self.store.write_params(WriteMode::Overwrite)),
        )
        .await
        .context(LanceSnafu {
            action: "create table",
            table: path.clone(),
        })?;
        self.index_table(ty, &mut dataset).await?;
        Ok(dataset.version().version)
    }

    /// Claim (open and close a writer on) every shard of the enrolled table of `ty`, so
    /// every writer of another process is fenced before the table changes.
    async fn claim_every_shard(&self, ty: &TypeDef) -> Result<()> {
        if ty.stream.is_none() {
            return Ok(());
        }
        let at = MemWalTable::main(&ty.table_path());
        let Some(enrolled) = enrollment(&self.store, &at, &self.settings.writer)
            .await
            .map_err(Error::from_memwal)?
        else {
            return Ok(());
        };
        for shard in enrolled.shards.clone() {
            tributary_memwal_adapter::drain_shard(&enrolled, shard)
                .await
                .map_err(Error::from_memwal)?;
        }
        Ok(())
    }

    /// Whether the table at `path` is enrolled for streaming on `main`'s lineage (schema
    /// changes run only while `main` is the one branch).
    async fn enrolled_on_main(&self, path: &str) -> Result<bool> {
        Ok(
            enrollment(&self.store, &MemWalTable::main(path), &self.settings.writer)
                .await
                .map_err(Error::from_memwal)?
                .is_some(),
        )
    }

    /// Drain and seal every shard of `ty`'s table on the lineage `at`. A table not
    /// enrolled yet is enrolled first: a process that has not seen the change (or the
    /// branch's delete) would enrol it at its first send, and acknowledge rows no fold
    /// reads; sealed, its claim is refused.
    pub(crate) async fn seal_every_shard(&self, ty: &TypeDef, at: &MemWalTable) -> Result<()> {
        let enrolled = match enrollment(&self.store, at, &self.settings.writer)
            .await
            .map_err(Error::from_memwal)?
        {
            Some(enrolled) => enrolled,
            None => {
                let sharding = match ty.stream.as_ref().and_then(|s| s.shards) {
                    Some(n) if n > 1 => tributary_memwal_adapter::Sharding::Buckets(n),
                    _ => tributary_memwal_adapter::Sharding::Unsharded,
                };
                tributary_memwal_adapter::enroll(
                    &self.store,
                    at,
                    sharding,
                    &self.settings.writer,
                    &[],
                )
                .await
                .map_err(Error::from_memwal)?
            }
        };
        for shard in enrolled.shards.clone() {
            tributary_memwal_adapter::seal_shard(&enrolled, shard)
                .await
                .map_err(Error::from_memwal)?;
        }
        Ok(())
    }

    /// Add `fields` to `ty`'s table (those it lacks), with every stored row's value the
    /// field's default or null, then its indexes and maintained index set.
    async fn evolve_table(&self, ty: &TypeDef, fields: &[&str]) -> Result<u64> {
        let path = ty.table_path();
        let mut dataset = self
            .store
            .open_dataset(&path, None)
            .await
            .context(StorageSnafu)?;
        let missing: Vec<&str> = fields
            .iter()
            .copied()
            .filter(|name| dataset.schema().field(name).is_none())
            .collect();
        if !missing.is_empty() {
            // All nulls first (metadata only: Lance adds no computed column to a table
            // with a MemWAL, whose unfolded rows would miss it), then the defaults.
            // (Nullable in the table, then: the schema holds a defaulted field non-null.)
            let nullable: Vec<arrow_schema::Field> = ty
                .arrow_schema()
                .fields()
                .iter()
                .filter(|f| missing.contains(&f.name().as_str()))
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect();
            let nulls = Arc::new(arrow_schema::Schema::new(nullable));
            dataset
                .add_columns(NewColumnTransform::AllNulls(nulls), None, None)
                .await
                .context(LanceSnafu {
                    action: "add columns",
                    table: path.clone(),
                })?;
        }
        CrashWindow {
            kind: WriteKind::Schema,
            step: WriteStep::BeforeFill,
        }
        .check()?;
        // The defaults, into every stored row that has none; again when a change stopped
        // between adding a column and filling it (nothing else writes the column before
        // the publish).
        for name in fields {
            let Some(default) = ty.field(name).and_then(|f| f.default.as_ref()) else {
                continue;
            };
            let Some(literal) = sql_literal(default) else {
                continue;
            };
            let update = UpdateBuilder::new(Arc::new(dataset.clone()))
                .update_where(&format!("{name} IS NULL"))
                .and_then(|update| update.set(name, &literal))
                .and_then(|update| update.build())
                .context(LanceSnafu {
                    action: "fill a new column",
                    table: path.clone(),
                })?;
            let updated = update.execute().await.context(LanceSnafu {
                action: "fill a new column",
                table: path.clone(),
            })?;
            dataset = updated.new_dataset.as_ref().clone();
        }
        self.index_table(ty, &mut dataset).await?;
        Ok(dataset.version().version)
    }

    /// Give `ty`'s table the indexes its schema derives, and, when it is enrolled, make
    /// them the set its MemWAL maintains.
    async fn index_table(&self, ty: &TypeDef, dataset: &mut Dataset) -> Result<()> {
        let specs = tributary_write::index_specs(ty);
        // Indexes are derived state: a failure is logged, never fatal to the change.
        if let Err(error) =
            tributary_write::maintain_indexes(dataset, &specs, self.settings.indexes, true).await
        {
            tracing::warn!(%error, table = %ty.table_path(), "could not build indexes");
        }
        let path = ty.table_path();
        if !self.enrolled_on_main(&path).await? {
            return Ok(());
        }
        let existing: Vec<String> = dataset
            .load_indices()
            .await
            .context(LanceSnafu {
                action: "list indexes",
                table: path.clone(),
            })?
            .iter()
            .map(|index| index.name.clone())
            .collect();
        let maintained = maintained_indexes(ty, &existing);
        if let Err(error) = set_maintained_indexes(dataset, &path, &maintained).await {
            tracing::warn!(%error, table = %path, "could not update the indexes the MemWAL maintains");
        }
        Ok(())
    }
}

/// The indexes a `@stream` table's MemWAL keeps: the key's and the `@index` fields' that
/// exist (`src`/`dst` serve snapshot joins only).
pub(crate) fn maintained_indexes(ty: &TypeDef, existing: &[String]) -> Vec<String> {
    tributary_write::index_specs(ty)
        .into_iter()
        .filter(|spec| {
            spec.column == "id" || ty.field(&spec.column).is_some_and(|f| f.index.is_some())
        })
        .map(|spec| spec.name)
        .filter(|name| existing.contains(name))
        .collect()
}

/// `default` as a SQL literal (the update casts it to the column's type); `None` for a
/// list.
fn sql_literal(default: &tributary_schema::DefaultValue) -> Option<String> {
    use tributary_schema::DefaultValue;
    Some(match default {
        DefaultValue::Bool(value) => value.to_string(),
        DefaultValue::Int(value) => value.to_string(),
        DefaultValue::Float(value) if value.is_finite() => format!("{value:?}"),
        DefaultValue::Float(_) => return None,
        DefaultValue::String(value) => format!("'{}'", value.replace('\'', "''")),
        DefaultValue::List(_) => return None,
    })
}

fn type_of<'c>(catalog: &'c Catalog, name: &str) -> Result<&'c TypeDef> {
    crate::graph::type_in(catalog, name)
}
