//! Branches: create, list, delete. A graph branch is a Lance branch of the same name in
//! every table (a shallow clone at the fork: metadata only, no data copied), so each
//! branch writes its own version lineage of each table; the branch's head row in the
//! manifest is what says it exists. Creating a branch from `main` first folds `main`'s
//! WAL to empty in its write turn, so a branch never forks with an unfolded tail (ingest
//! runs on `main` only, so no other branch has one).

use std::collections::BTreeMap;

use snafu::ResultExt;
use tributary_publisher::{BranchName, CommitKind, CommitRecord, PublishPlan, Publisher};

use crate::error::{
    BranchExistsSnafu, BranchHasChildrenSnafu, LanceSnafu, PublishSnafu, Result, StorageSnafu,
};
use crate::fold::Claim;
use crate::graph::{branch as branch_name, At, Graph, WriteTurn};

const BRANCH_ACTOR: &str = "tributary:branch";

impl Graph {
    /// Create branch `name` at `from` (a branch's head, or any commit): its first commit
    /// pins the same rows, in tables of its own lineage. From `main`, everything
    /// acknowledged before the call is folded first and is in the new branch.
    pub async fn create_branch(&self, name: &str, from: &At) -> Result<CommitRecord> {
        let name = branch_name(name)?;
        // Refused before a lease is taken for the name (which leaves a lease file).
        if self.branch_exists(&name).await? {
            return BranchExistsSnafu { branch: name }.fail();
        }
        let source = self.snapshot(from).await?.branch;
        let (first, second) = self.write_turns(&source, &name).await?;
        let source_turn = if first.branch == source {
            &first
        } else {
            &second
        };
        let created = self
            .create_in_turns(&name, &source, from, source_turn)
            .await;
        second.turn.end().await;
        first.turn.end().await;
        created
    }

    async fn create_in_turns(
        &self,
        name: &BranchName,
        source: &BranchName,
        from: &At,
        source_turn: &NamedTurn,
    ) -> Result<CommitRecord> {
        self.recover_intents(Some(source)).await?;
        if source.lance_branch().is_none() {
            self.fold_locked_with(
                &source_turn.turn,
                source,
                self.settings.fold.policy,
                Claim::All,
            )
            .await?;
        }
        if self.branch_exists(name).await? {
            return BranchExistsSnafu {
                branch: name.clone(),
            }
            .fail();
        }
        let base = self.snapshot(from).await?;
        let mut tables = BTreeMap::new();
        for (path, &version) in &base.tables {
            let forked = self
                .fork_table(path, base.branch.lance_branch(), version, name)
                .await?;
            tables.insert(path.clone(), forked);
        }
        // Tests stop a create here: forked tables with no head are cleanup's to remove,
        // and a create of the name again replaces them.
        #[cfg(feature = "failpoints")]
        fail::fail_point!("branch::before-publish", |_| Err(crate::Error::Fold {
            source: tributary_write::Error::Injected {
                point: "branch::before-publish".to_owned(),
            },
        }));
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
            forked_from: Some(base.id.clone()),
            merged: None,
        };
        match self.publisher.publish(plan).await {
            Ok(record) => Ok(record),
            Err(tributary_publisher::Error::Conflict { .. }) => BranchExistsSnafu {
                branch: name.clone(),
            }
            .fail(),
            Err(source) => Err(crate::Error::Publish { source }),
        }
    }

    /// Branch `name` of the table at `path`, at `version` of the lineage `from`; returns
    /// the new branch's version. A Lance branch of that name with no graph head is left
    /// from a create or delete that stopped midway: the caller holds the name's write
    /// turn, so it is replaced.
    async fn fork_table(
        &self,
        path: &str,
        from: Option<&str>,
        version: u64,
        name: &BranchName,
    ) -> Result<u64> {
        let lance = |action: &'static str| LanceSnafu {
            action,
            table: path,
        };
        let mut root = self
            .store
            .open_dataset(path, None)
            .await
            .context(StorageSnafu)?;
        let existing = root.list_branches().await.context(lance("list branches"))?;
        if existing.contains_key(name.as_str()) {
            root.force_delete_branch(name.as_str())
                .await
                .context(lance("remove a stale branch"))?;
        }
        let forked = root
            .create_branch(name.as_str(), (from, Some(version)), None)
            .await
            .context(lance("create a branch"))?;
        Ok(forked.version().version)
    }

    /// The head of every branch, `main` first.
    pub async fn branches(&self) -> Result<Vec<CommitRecord>> {
        let mut heads = self.publisher.branches().await.context(PublishSnafu)?;
        heads.sort_by_key(|h| h.branch.lance_branch().map(str::to_owned));
        Ok(heads)
    }

    /// Delete branch `name`: its head goes at once (its commits stay readable by id), and
    /// its table lineages go with it; the versions only it pinned are the next cleanup's.
    /// `main` cannot be deleted, nor a branch others were made from.
    pub async fn delete_branch(&self, name: &str) -> Result<()> {
        let name = branch_name(name)?;
        if name.lance_branch().is_none() {
            return Err(crate::Error::MainNotDeletable);
        }
        let head = self.publisher.head(&name).await.context(PublishSnafu)?;
        let children = self.branches_made_from(&name, &head).await?;
        if !children.is_empty() {
            return BranchHasChildrenSnafu {
                branch: name,
                children,
            }
            .fail();
        }
        let turn = self.write_turn(&name).await?;
        let deleted = self.delete_in_turn(&name).await;
        turn.end().await;
        deleted
    }

    async fn delete_in_turn(&self, name: &BranchName) -> Result<()> {
        self.recover_intents(Some(name)).await?;
        let head = self.publisher.head(name).await.context(PublishSnafu)?;
        self.publisher
            .delete_branch(name, &head.id)
            .await
            .context(PublishSnafu)?;
        #[cfg(feature = "failpoints")]
        fail::fail_point!("branch::before-lineages-deleted", |_| Err(
            crate::Error::Fold {
                source: tributary_write::Error::Injected {
                    point: "branch::before-lineages-deleted".to_owned(),
                },
            }
        ));
        for path in head.tables.keys() {
            self.drop_table_branch(path, name).await?;
        }
        Ok(())
    }

    /// Remove the Lance branch `name` of the table at `path`, if it is there.
    pub(crate) async fn drop_table_branch(&self, path: &str, name: &BranchName) -> Result<()> {
        let lance = |action: &'static str| LanceSnafu {
            action,
            table: path,
        };
        let mut root = self
            .store
            .open_dataset(path, None)
            .await
            .context(StorageSnafu)?;
        let existing = root.list_branches().await.context(lance("list branches"))?;
        if existing.contains_key(name.as_str()) {
            root.force_delete_branch(name.as_str())
                .await
                .context(lance("delete a branch"))?;
        }
        Ok(())
    }

    /// Branches whose tables were forked from `name`'s lineage (Lance keeps what they
    /// read of it, so it cannot go first).
    async fn branches_made_from(
        &self,
        name: &BranchName,
        head: &CommitRecord,
    ) -> Result<Vec<String>> {
        let Some(path) = head.tables.keys().next() else {
            return Ok(Vec::new());
        };
        let root = self
            .store
            .open_dataset(path, None)
            .await
            .context(StorageSnafu)?;
        let branches = root.list_branches().await.context(LanceSnafu {
            action: "list branches",
            table: path.to_string(),
        })?;
        let mut children: Vec<String> = branches
            .into_iter()
            .filter(|(_, contents)| contents.parent_branch.as_deref() == Some(name.as_str()))
            .map(|(child, _)| child)
            .collect();
        children.sort();
        Ok(children)
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
