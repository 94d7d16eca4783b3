//! What a graph commit records.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::TableNotPinnedSnafu;
use crate::ids::{BranchName, CommitId};
pub use tributary_schema::TablePath;

/// Why a commit was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CommitKind {
    Load,
    Fold,
    Schema,
    Branch,
    Merge,
}

impl fmt::Display for CommitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            CommitKind::Load => "load",
            CommitKind::Fold => "fold",
            CommitKind::Schema => "schema",
            CommitKind::Branch => "branch",
            CommitKind::Merge => "merge",
        };
        f.write_str(name)
    }
}

/// One graph commit: the exact table versions a snapshot reads, and how it came to be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CommitRecord {
    pub id: CommitId,
    /// The commit this one was built on: the branch's previous head, or for a branch's
    /// first commit the commit it was created from.
    pub parent: Option<CommitId>,
    /// A merge's second parent: the head of the branch merged in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<CommitId>,
    pub branch: BranchName,
    /// The Lance branch of every table holding this commit's versions: `None` for `main`'s
    /// lineage; for another branch, a name made for it at its creation, so a branch
    /// deleted and made again never reads the old one's versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<String>,
    /// One more than the deepest parent's (a branch's first commit: its fork's), so a walk
    /// of history can visit descendants before ancestors whatever the clocks said.
    #[serde(default)]
    pub depth: u64,
    pub actor: String,
    pub kind: CommitKind,
    /// Microseconds since the Unix epoch.
    pub time_micros: i64,
    /// Table path (e.g. `nodes/Person.lance`) → Lance version pinned by this commit.
    pub tables: BTreeMap<TablePath, u64>,
    /// Table path → rows written by this commit.
    pub rows_written: BTreeMap<TablePath, u64>,
    /// The id of the recovery sidecar that made this commit, so recovery can tell
    /// whether a sidecar's publish already happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    /// For a fold: the MemWAL generations it folded, per table and shard.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folded: Vec<FoldedShard>,
    /// The newest fold commit at or below this one, carried forward by every publish so
    /// status reads it from the head instead of walking history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fold: Option<CommitId>,
    /// The idempotency key of the load that made this commit: a retry of that load
    /// answers with this commit instead of writing again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Producer → the highest sequence number whose lines are in the graph at this commit
    /// (every line of that producer up to it is folded). Carried forward by every publish,
    /// so the head holds every producer's mark.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub producers: BTreeMap<String, u64>,
    /// The version of the graph's schema at this commit (carried forward; a `schema`
    /// commit raises it), so a writer holding the head knows whether its schema is current.
    #[serde(default = "first_schema_version")]
    pub schema_version: u32,
}

fn first_schema_version() -> u32 {
    1
}

impl CommitRecord {
    /// Open the table at `path` at the version this commit pins: the one way every read,
    /// load and fold opens a table at a snapshot.
    pub async fn open_table(
        &self,
        store: &tributary_storage::GraphStore,
        path: &str,
    ) -> crate::Result<lance::Dataset> {
        use snafu::OptionExt;
        let version = self
            .tables
            .get(path)
            .copied()
            .context(TableNotPinnedSnafu {
                commit: self.id.clone(),
                table: path,
            })?;
        match store
            .open_dataset_on(path, self.lineage.as_deref(), Some(version))
            .await
        {
            Ok(dataset) => Ok(dataset),
            // A commit whose versions a cleanup removed (older than its retention window,
            // or a deleted branch's) is gone for reading.
            Err(tributary_storage::Error::Lance {
                source: lance::Error::DatasetNotFound { .. } | lance::Error::NotFound { .. },
                ..
            }) => crate::error::VersionsRemovedSnafu {
                commit: self.id.clone(),
                table: path,
            }
            .fail(),
            Err(source) => Err(crate::Error::Storage { source }),
        }
    }
}

impl CommitRecord {
    /// A graph's first commit: `main`'s, pinning the new tables, at the first schema.
    pub(crate) fn first(
        schema: &SchemaRecord,
        tables: BTreeMap<TablePath, u64>,
        actor: &str,
    ) -> CommitRecord {
        CommitRecord {
            id: CommitId::random(),
            parent: None,
            merged: None,
            lineage: None,
            depth: 1,
            branch: BranchName::main(),
            actor: actor.to_owned(),
            kind: CommitKind::Schema,
            time_micros: now_micros(),
            tables,
            rows_written: Default::default(),
            intent: None,
            folded: Vec::new(),
            last_fold: None,
            idempotency_key: None,
            producers: Default::default(),
            schema_version: schema.version,
        }
    }

    /// The commit `plan` makes on `head` (the branch's head; `None` for a branch's first
    /// commit, which starts from `fork`, the commit it is created from); `merged_depth` is
    /// the depth of a merge's second parent. What every publisher records, whatever its
    /// commit point: pins never lowered, marks carried forward and raised, the schema
    /// version one more only with a new schema.
    pub(crate) fn next(
        head: Option<&CommitRecord>,
        fork: Option<&CommitRecord>,
        merged_depth: u64,
        plan: PublishPlan,
    ) -> crate::Result<CommitRecord> {
        // Lance table history is linear: a newer version holds every older write, so a
        // publish never lowers a pin (a late recovery must not roll a table back).
        let mut tables = head.map(|h| h.tables.clone()).unwrap_or_default();
        for (path, version) in plan.tables {
            let pinned = tables.entry(path).or_insert(version);
            *pinned = (*pinned).max(version);
        }
        let id = plan.commit_id.unwrap_or_else(CommitId::random);
        // Marks carried forward from the parent, raised (never lowered) by the plan's.
        let mut producers = head.map(|h| h.producers.clone()).unwrap_or_default();
        for (producer, sequence) in plan.producers {
            let mark = producers.entry(producer).or_insert(sequence);
            *mark = (*mark).max(sequence);
        }
        let head_schema = head.or(fork).map_or(1, |h| h.schema_version);
        if let Some(schema) = &plan.schema {
            if schema.version != head_schema + 1 {
                return Err(crate::Error::SchemaRaced {
                    expected: head_schema + 1,
                    actual: schema.version,
                });
            }
        }
        let schema_version = plan.schema.as_ref().map_or(head_schema, |s| s.version);
        let last_fold = match plan.kind {
            CommitKind::Fold => Some(id.clone()),
            _ => head.and_then(|h| h.last_fold.clone()),
        };
        let depth = head.or(fork).map_or(0, |h| h.depth).max(merged_depth) + 1;
        let lineage = match (head, &plan.fork) {
            (Some(head), _) => head.lineage.clone(),
            (None, Some(fork)) => Some(fork.lineage.clone()),
            (None, None) => None,
        };
        Ok(CommitRecord {
            id,
            parent: head.or(fork).map(|h| h.id.clone()),
            merged: plan.merged,
            lineage,
            depth,
            branch: plan.branch,
            actor: plan.actor,
            kind: plan.kind,
            time_micros: now_micros(),
            tables,
            rows_written: plan.rows_written,
            intent: plan.intent,
            folded: plan.folded,
            last_fold,
            idempotency_key: plan.idempotency_key,
            producers,
            schema_version,
        })
    }
}

/// The generations of one shard that a fold merged into its table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FoldedShard {
    pub table: TablePath,
    pub shard: String,
    /// Lowest and highest generation folded (the highest is the table's new compaction mark).
    pub first_generation: u64,
    pub last_generation: u64,
    pub rows: u64,
}

/// What a writer asks the publisher to make visible.
#[derive(Debug, Clone)]
pub struct PublishPlan {
    pub branch: BranchName,
    /// The head this plan was built on; `None` only for a branch's first commit.
    pub expected_head: Option<CommitId>,
    /// Tables whose version changes; tables not named keep the parent's version, and a
    /// version below the parent's is raised to it (table history is linear).
    pub tables: BTreeMap<TablePath, u64>,
    pub rows_written: BTreeMap<TablePath, u64>,
    pub actor: String,
    pub kind: CommitKind,
    pub intent: Option<String>,
    /// The new commit's id, when the writer needs to know it before publishing (a fold
    /// stamps its dead letters with it); otherwise the publisher picks one.
    pub commit_id: Option<CommitId>,
    pub folded: Vec<FoldedShard>,
    /// Recorded with the commit, and findable by [`crate::Publisher::commit_by_key`].
    pub idempotency_key: Option<String>,
    /// Producers' marks this commit advances (a fold's); a mark never moves back.
    pub producers: BTreeMap<String, u64>,
    /// A new schema, written with the commit (a `schema` commit); its version must be one
    /// more than the head's.
    pub schema: Option<SchemaRecord>,
    /// A new branch's first commit (`expected_head` is `None`): where it forks. `tables`
    /// then names every table (versions of the new lineage).
    pub fork: Option<Fork>,
    /// A merge: the head of the branch merged in, recorded as the second parent.
    pub merged: Option<CommitId>,
}

/// A new branch's start: the commit it is created from (its parent, whose schema version
/// it takes) and the Lance branch its tables were forked to.
#[derive(Debug, Clone)]
pub struct Fork {
    pub from: CommitId,
    pub lineage: String,
}

/// The schema as stored in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaRecord {
    pub version: u32,
    pub source: String,
}

pub(crate) fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}
