//! Finish or drop writes interrupted by a crash, from their sidecars.
//!
//! - publish recorded (a commit carries the intent id): only the sidecar is left; delete it;
//! - no table committed: nothing is visible and nothing was acknowledged; drop it (the
//!   staged data files are orphans for cleanup);
//! - some or all tables committed: commit the rest from the staged transactions in the
//!   sidecar, then publish — never leave a half-visible write behind.

use std::collections::BTreeMap;
use std::sync::Arc;

use snafu::ResultExt;
use tributary_publisher::{PublishPlan, Publisher};

use crate::error::{LanceSnafu, PublishSnafu, Result, StorageSnafu};
use crate::graph::Graph;
use crate::intent::{may_be_running, Intent, StagedTable, RECOVERY_DIR};
use crate::load::commit_staged;

/// How many recent commits of the branch are searched for an intent's publish. Missing an
/// older one only re-publishes versions that are already visible: harmless.
const RECENT_COMMITS: usize = 256;

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
        commit: String,
    },
    /// The writing process may still be running it; left alone.
    InFlight {
        intent: String,
    },
    /// Could not be resolved (kept for the next attempt); the graph stays usable.
    Failed {
        intent: String,
        error: String,
    },
}

impl Graph {
    /// Resolve every sidecar whose writer is gone. Runs on open; safe to run again.
    pub async fn recover(&self) -> Result<Vec<Recovered>> {
        let mut report = Vec::new();
        for name in self.store.list(RECOVERY_DIR).await.context(StorageSnafu)? {
            let Some(id) = name.strip_suffix(".json") else {
                continue;
            };
            let path = Intent::sidecar_path(id);
            let Some(bytes) = self.store.get(&path).await.context(StorageSnafu)? else {
                continue;
            };
            let intent = Intent::from_bytes(id, &bytes)?;
            let age = self
                .store
                .modified_at(&path)
                .await
                .context(StorageSnafu)?
                .and_then(|t| std::time::SystemTime::now().duration_since(t).ok());
            if may_be_running(&intent, age) {
                report.push(Recovered::InFlight { intent: intent.id });
                continue;
            }
            let queue = self.write_queue(&intent.branch).await;
            let _turn = queue.lock().await;
            match self.recover_intent(&intent).await {
                Ok(outcome) => {
                    tracing::info!(?outcome, "resolved an interrupted write");
                    self.store.delete(&path).await.context(StorageSnafu)?;
                    report.push(outcome);
                }
                Err(error) => {
                    tracing::error!(%error, intent = %intent.id, "could not resolve an interrupted write; keeping its sidecar");
                    report.push(Recovered::Failed {
                        intent: intent.id,
                        error: error.to_string(),
                    });
                }
            }
        }
        Ok(report)
    }

    /// Resolve one intent (the caller holds the branch's write queue).
    pub(crate) async fn recover_intent(&self, intent: &Intent) -> Result<Recovered> {
        let recent = self
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
            match self.committed_version(table).await? {
                Some(version) => {
                    versions.insert(table.path.clone(), version);
                }
                None => pending.push(table),
            }
        }
        if versions.is_empty() {
            return Ok(Recovered::Dropped {
                intent: intent.id.clone(),
            });
        }
        for table in pending {
            let dataset = self
                .store
                .open_dataset(&table.path, Some(table.read_version))
                .await
                .context(StorageSnafu)?;
            let version = commit_staged(
                Arc::new(dataset),
                &table.path,
                table.decode(&intent.id)?,
                None,
            )
            .await?;
            versions.insert(table.path.clone(), version);
        }
        let head = self
            .publisher
            .head(&intent.branch)
            .await
            .context(PublishSnafu)?;
        let plan = PublishPlan {
            branch: intent.branch.clone(),
            expected_head: Some(head.id),
            tables: versions,
            rows_written: intent.rows_written.clone(),
            actor: intent.actor.clone(),
            kind: intent.kind,
            intent: Some(intent.id.clone()),
        };
        let commit = self.publish_with_retry(plan).await?;
        Ok(Recovered::RolledForward {
            intent: intent.id.clone(),
            commit: commit.id,
        })
    }

    /// The version a staged transaction produced, if it was committed.
    async fn committed_version(&self, table: &StagedTable) -> Result<Option<u64>> {
        let dataset = self
            .store
            .open_dataset(&table.path, None)
            .await
            .context(StorageSnafu)?;
        let latest = dataset.version().version;
        for version in (table.read_version + 1..=latest).rev() {
            let transaction =
                dataset
                    .read_transaction_by_version(version)
                    .await
                    .context(LanceSnafu {
                        action: "read transaction",
                        table: table.path.clone(),
                    })?;
            if transaction.is_some_and(|t| t.uuid == table.transaction_uuid) {
                return Ok(Some(version));
            }
        }
        Ok(None)
    }
}
