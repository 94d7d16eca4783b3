//! Branches: create, list, delete. A graph branch keeps its table versions in a Lance
//! branch of every table (a shallow clone at the fork: metadata only, no data copied),
//! named for the branch and made unique at its creation (its lineage), so each branch
//! writes its own version lineage of each table and a branch deleted and made again never
//! meets the old one's versions. The lineage has a MemWAL of its own, so every branch
//! takes streaming ingest. The branch's head row in the manifest is what says it exists.
//! Creating a branch from a branch's head first folds that branch's WAL to empty in its
//! write turn, so a branch never forks with an unfolded tail; deleting one first drains
//! and seals every shard of its lineage, so no writer of any process acknowledges a row
//! into a branch that is gone.

use std::collections::BTreeMap;

use snafu::ResultExt;
use tributary_publisher::{BranchName, CommitKind, CommitRecord, Fork, PublishPlan, Publisher};

use crate::error::{
    BranchBusySnafu, BranchExistsSnafu, LanceSnafu, PublishSnafu, Result, StorageSnafu,
};
use crate::fold::Claim;
use crate::graph::{branch as branch_name, At, Graph, WriteTurn};
use tributary_memwal_adapter::MemWalTable;
use tributary_write::{CrashWindow, Recovered, WriteStep};

const BRANCH_ACTOR: &str = "tributary:branch";

/// A small object that stands while a branch's lineage does: put before the branch's first
/// head is published, removed once its shards are sealed and before its head goes. A send
/// on the branch reads it (one GET) before acknowledging, instead of the head (five
/// operations); a lineage without one (made before it existed) is checked at the head.
pub(crate) fn lineage_marker(lineage: &str) -> String {
    format!("__lineages/{}", tributary_write::path_segment(lineage))
}

/// How often a create publishes again after losing a race on the manifest to another
/// branch's publish (its own head still absent).
const CREATE_ATTEMPTS: usize = 5;

impl Graph {
    /// Create branch `name` at `from` (a branch's head, or any commit): its first commit
    /// pins the same rows, in tables of its own lineage. From a branch's head, everything
    /// acknowledged on that branch before the call is folded first and is in the new one.
    pub async fn create_branch(&self, name: &str, from: &At) -> Result<CommitRecord> {
        let name = branch_name(name)?;
        // Refused before a lease is taken for the name (which leaves a lease file).
        if self.branch_exists(&name).await? {
            return BranchExistsSnafu { branch: name }.fail();
        }
        if let At::Branch(source) = from {
            // The source must exist before a lease is taken for it.
            self.publisher.head(source).await.context(PublishSnafu)?;
            let (first, second) = self.write_turns(source, &name).await?;
            let source_turn = if &first.branch == source {
                &first
            } else {
                &second
            };
            let created = async {
                // The fold resolves the source's intents first.
                self.fold_locked_with(
                    &source_turn.turn,
                    source,
                    self.settings.fold.policy,
                    Claim::All,
                )
                .await?;
                self.create_in_turn(&name, from).await
            }
            .await;
            second.turn.end().await;
            first.turn.end().await;
            created
        } else {
            // A commit is a fixed point: only the new name's turn is needed (a commit of
            // an earlier branch of this name included).
            self.snapshot(from).await?;
            let turn = self.write_turn(&name).await?;
            let created = self.create_in_turn(&name, from).await;
            turn.end().await;
            created
        }
    }

    /// The create itself, in the new name's write turn.
    async fn create_in_turn(&self, name: &BranchName, from: &At) -> Result<CommitRecord> {
        if self.branch_exists(name).await? {
            return BranchExistsSnafu {
                branch: name.clone(),
            }
            .fail();
        }
        let base = self.snapshot(from).await?;
        let lineage = format!(
            "{name}.{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let mut tables = BTreeMap::new();
        for (path, &version) in &base.tables {
            let forked = self
                .fork_table(path, base.lineage.as_deref(), version, &lineage)
                .await?;
            tables.insert(path.clone(), forked);
        }
        self.store
            .put(&lineage_marker(&lineage), name.to_string().into_bytes())
            .await
            .context(StorageSnafu)?;
        // Forked tables with no head are cleanup's to remove.
        CrashWindow {
            kind: CommitKind::Branch,
            step: WriteStep::BeforePublish,
        }
        .check()?;
        let plan = PublishPlan {
            branch: name.clone(),
            expected_head: None,
            tables,
            rows_written: BTreeMap::new(),
            actor: BRANCH_ACTOR.to_owned(),
            kind: CommitKind::Branch,
            intent: None,
            commit_id: None,
            folded: Vec::new(),
            idempotency_key: None,
            producers: BTreeMap::new(),
            schema: None,
            fork: Some(Fork {
                from: base.id.clone(),
                lineage,
            }),
            merged: None,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.publisher.publish(plan.clone()).await {
                Ok(record) => return Ok(record),
                // Another branch's publish won the manifest: the name is still free.
                Err(tributary_publisher::Error::Conflict { actual: None, .. })
                    if attempt < CREATE_ATTEMPTS => {}
                Err(tributary_publisher::Error::Conflict { .. }) => {
                    return BranchExistsSnafu {
                        branch: name.clone(),
                    }
                    .fail()
                }
                Err(source) => return Err(crate::Error::Publish { source }),
            }
        }
    }

    /// Fork the table at `path`, at `version` of the lineage `from`, to the Lance branch
    /// `lineage`; returns the new lineage's version.
    async fn fork_table(
        &self,
        path: &str,
        from: Option<&str>,
        version: u64,
        lineage: &str,
    ) -> Result<u64> {
        let mut root = self
            .store
            .open_dataset(path, None)
            .await
            .context(StorageSnafu)?;
        let forked = root
            .create_branch(lineage, (from, Some(version)), None)
            .await
            .context(LanceSnafu {
                action: "create a branch",
                table: path,
            })?;
        Ok(forked.version().version)
    }

    /// The head of every branch, `main` first.
    pub async fn branches(&self) -> Result<Vec<CommitRecord>> {
        let mut heads = self.publisher.branches().await.context(PublishSnafu)?;
        heads.sort_by_key(|h| (!h.branch.is_main(), h.branch.clone()));
        Ok(heads)
    }

    /// Delete branch `name` (not `main`): every shard of its lineage is drained and
    /// sealed (a writer of any process streaming to it is fenced, and its next send is
    /// refused), then its head goes in one compare-and-swap; its commits stay readable by
    /// id until a cleanup finds their versions needed by no branch (nor by a merge base of
    /// two), and removes them.
    pub async fn delete_branch(&self, name: &str) -> Result<()> {
        let name = branch_name(name)?;
        if name.is_main() {
            return Err(crate::Error::MainNotDeletable);
        }
        self.publisher.head(&name).await.context(PublishSnafu)?;
        let turn = self.write_turn(&name).await?;
        let deleted = self.delete_in_turn(&name).await;
        turn.end().await;
        deleted
    }

    async fn delete_in_turn(&self, name: &BranchName) -> Result<()> {
        // A write left half-done on the branch is settled first: published or dropped.
        let unsettled = self
            .recover_intents(Some(name))
            .await?
            .into_iter()
            .any(|r| matches!(r, Recovered::InFlight { .. } | Recovered::Failed { .. }));
        if unsettled {
            return BranchBusySnafu {
                branch: name.clone(),
            }
            .fail();
        }
        let head = self.publisher.head(name).await.context(PublishSnafu)?;
        self.seal_lineage(&head).await?;
        if let Some(lineage) = head.lineage.as_deref() {
            self.store
                .delete(&lineage_marker(lineage))
                .await
                .context(StorageSnafu)?;
        }
        self.streaming.forget_branch(name, head.lineage.as_deref());
        self.publisher
            .delete_branch(name, &head.id)
            .await
            .context(PublishSnafu)
    }

    /// Drain and seal every shard of every `@stream` table on `head`'s lineage. Sealed
    /// before the head goes: a writer that read the head first and opens after is refused.
    async fn seal_lineage(&self, head: &CommitRecord) -> Result<()> {
        let Some(lineage) = head.lineage.as_deref() else {
            return Ok(());
        };
        let catalog = self.catalog();
        for ty in catalog.types.iter().filter(|t| t.stream.is_some()) {
            let path = ty.table_path();
            if !head.tables.contains_key(&path) {
                continue;
            }
            self.seal_every_shard(ty, &MemWalTable::on(&path, Some(lineage)))
                .await?;
        }
        Ok(())
    }

    pub(crate) async fn branch_exists(&self, name: &BranchName) -> Result<bool> {
        match self.publisher.head(name).await {
            Ok(_) => Ok(true),
            Err(tributary_publisher::Error::BranchNotFound { .. }) => Ok(false),
            Err(source) => Err(crate::Error::Publish { source }),
        }
    }

    /// The write turns of two branches, always taken in name order so that two
    /// operations that each need both cannot wait on each other.
    pub(crate) async fn write_turns(
        &self,
        a: &BranchName,
        b: &BranchName,
    ) -> Result<(NamedTurn, NamedTurn)> {
        let (first, second) = if a <= b { (a, b) } else { (b, a) };
        let first_turn = self.write_turn(first).await?;
        let second_turn = match self.write_turn(second).await {
            Ok(turn) => turn,
            Err(error) => {
                first_turn.end().await;
                return Err(error);
            }
        };
        Ok((
            NamedTurn {
                branch: first.clone(),
                turn: first_turn,
            },
            NamedTurn {
                branch: second.clone(),
                turn: second_turn,
            },
        ))
    }
}

/// A write turn and the branch it is of.
pub(crate) struct NamedTurn {
    pub branch: BranchName,
    pub turn: WriteTurn,
}
