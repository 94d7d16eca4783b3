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
use tributary_storage::layout;

use snafu::ResultExt;
use tributary_publisher::{BranchName, CommitId, CommitRecord, Publisher};

use crate::error::{
    BranchBusySnafu, BranchExistsSnafu, LanceSnafu, PublishSnafu, Result, StorageSnafu,
};
use crate::fold::Claim;
use crate::graph::{branch as branch_name, At, Graph, WriteTurn};
use tributary_memwal_adapter::MemWalTable;
use tributary_write::intent::{Intent, IntentKind};
use tributary_write::{
    clear_intent, publish_intent, record_intent, CrashWindow, Recovered, WriteKind, WriteStep,
};

const BRANCH_ACTOR: &str = "tributary:branch";

/// A small object that stands while a branch's lineage does: put before the branch's first
/// head is published, removed once its shards are sealed and before its head goes. A send
/// on the branch reads it (one GET) before acknowledging, instead of the head (five
/// operations); a lineage without one (made before it existed) is checked at the head.
pub(crate) fn lineage_marker(lineage: &str) -> String {
    format!(
        "{}/{}",
        layout::LINEAGES,
        tributary_write::path_segment(lineage)
    )
}

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
        // A base whose versions a cleanup removed is refused as not found, before
        // anything is written for the new branch.
        for path in base.tables.keys() {
            base.open_table(&self.store, path)
                .await
                .context(PublishSnafu)?;
        }
        let lineage = format!(
            "{name}.{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let intent = Intent::new(
            IntentKind::Branch {
                from: base.id.clone(),
            },
            name.clone(),
            Some(lineage.clone()),
            None,
            BRANCH_ACTOR,
        );
        let _running = record_intent(&self.store, &intent).await?;
        self.store
            .put(&lineage_marker(&lineage), name.to_string().into_bytes())
            .await
            .context(StorageSnafu)?;
        let mut tables = BTreeMap::new();
        for (path, &version) in &base.tables {
            let forked = self
                .fork_table(path, base.lineage.as_deref(), version, &lineage)
                .await?;
            tables.insert(path.clone(), forked);
        }
        let record = match publish_intent(&self.publisher, &intent, tables).await {
            Ok(record) => record,
            // The name was taken meanwhile (by another process's create).
            Err(tributary_write::Error::Publish {
                source: tributary_publisher::Error::Conflict { .. },
            }) => {
                // A publish whose answer was lost may have landed: then the branch is ours.
                let settled = self.drop_branch_create(&intent).await?;
                self.store
                    .delete(&Intent::sidecar_path(&intent.id))
                    .await
                    .context(StorageSnafu)?;
                if let Recovered::AlreadyPublished { .. } = settled {
                    return self.publisher.head(name).await.context(PublishSnafu);
                }
                return BranchExistsSnafu {
                    branch: name.clone(),
                }
                .fail();
            }
            Err(error) => return Err(error.into()),
        };
        clear_intent(&self.store, &intent).await?;
        Ok(record)
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
        let deleted = self.delete_in_turn(&turn, &name).await;
        turn.end().await;
        deleted
    }

    async fn delete_in_turn(&self, turn: &WriteTurn, name: &BranchName) -> Result<()> {
        // A write left half-done on the branch was settled as the turn began: published
        // or dropped. One still running, or that could not be settled, holds the delete.
        let unsettled = turn
            .recovered
            .iter()
            .any(|r| matches!(r, Recovered::InFlight { .. } | Recovered::Failed { .. }));
        if unsettled {
            return BranchBusySnafu {
                branch: name.clone(),
            }
            .fail();
        }
        let head = self.publisher.head(name).await.context(PublishSnafu)?;
        let intent = Intent::new(
            IntentKind::Delete {
                head: head.id.clone(),
            },
            name.clone(),
            head.lineage.clone(),
            Some(head.id.clone()),
            BRANCH_ACTOR,
        );
        let _running = record_intent(&self.store, &intent).await?;
        self.delete_from(name, &head).await?;
        intent.window(WriteStep::BeforeIntentDelete).check()?;
        self.store
            .delete(&Intent::sidecar_path(&intent.id))
            .await
            .context(StorageSnafu)
    }

    /// The delete's steps from its head `head`, each idempotent, so recovery can run them
    /// again: every shard sealed, the lineage's marker removed, the head removed.
    async fn delete_from(&self, name: &BranchName, head: &CommitRecord) -> Result<()> {
        self.seal_lineage(head).await?;
        if let Some(lineage) = head.lineage.as_deref() {
            self.store
                .delete(&lineage_marker(lineage))
                .await
                .context(StorageSnafu)?;
        }
        self.streaming.forget_branch(name, head.lineage.as_deref());
        CrashWindow {
            kind: WriteKind::Delete,
            step: WriteStep::BeforePublish,
        }
        .check()?;
        self.publisher
            .delete_branch(name, &head.id)
            .await
            .context(PublishSnafu)
    }

    /// Finish a delete that stopped midway, while the branch's head is still the one it
    /// started from (otherwise the branch was deleted, or made again: nothing to do).
    pub(crate) async fn finish_branch_delete(
        &self,
        intent: &Intent,
        from: &CommitId,
    ) -> Result<Recovered> {
        let head = match self.publisher.head(&intent.branch).await {
            Ok(head) if head.id == *from => head,
            Ok(_) | Err(tributary_publisher::Error::BranchNotFound { .. }) => {
                return Ok(Recovered::AlreadyPublished {
                    intent: intent.id.clone(),
                })
            }
            Err(source) => return Err(crate::Error::Publish { source }),
        };
        self.delete_from(&intent.branch, &head).await?;
        Ok(Recovered::RolledForward {
            intent: intent.id.clone(),
            commit: head.id,
        })
    }

    /// A create that stopped before its publish is dropped: its forked tables, read by no
    /// head, are cleanup's; its lineage's marker goes now. One that published is done.
    pub(crate) async fn drop_branch_create(&self, intent: &Intent) -> Result<Recovered> {
        let published = match self.publisher.head(&intent.branch).await {
            Ok(head) => head.lineage == intent.lineage,
            Err(tributary_publisher::Error::BranchNotFound { .. }) => false,
            Err(source) => return Err(crate::Error::Publish { source }),
        };
        if published {
            return Ok(Recovered::AlreadyPublished {
                intent: intent.id.clone(),
            });
        }
        if let Some(lineage) = intent.lineage.as_deref() {
            self.store
                .delete(&lineage_marker(lineage))
                .await
                .context(StorageSnafu)?;
        }
        Ok(Recovered::Dropped {
            intent: intent.id.clone(),
        })
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
