//! `RecordPublisher`: the commit point as one immutable record per transaction, created
//! with put-if-absent (RFC-018's batch-record publisher). Whoever creates record `n + 1`
//! first wins that number; a writer that loses it reads the winner and tries `n + 2`,
//! failing with [`Error::Conflict`] only when its own branch's head moved. There is no
//! table to compare-and-swap on and no manifest version to race for.
//!
//! Objects (below [`TRANSACTIONS`]):
//! - `log/<n>.json` (twenty digits): transaction `n`, immutable — every branch's head and
//!   the schema after it, and which commit it made (none for a branch's deletion), so the
//!   newest record alone answers `head`, `branches` and `schema`;
//! - `tip`: a hint, the newest record known to be finalized (it may lag, never lead);
//! - `pruned`: every record at or below it may be gone (cleanup advances it before it
//!   deletes, so a reader whose hint points below it starts above it);
//! - `commits/<id>.json`: each commit, immutable, for `commit`, `log` and merge bases;
//! - `keys/<branch>/<key>.json`: a load's idempotency key → its commit.
//!
//! Finalizing record `n` (writing its commit and key objects, then raising `tip`) is
//! idempotent, done by the writer that made it and by every later writer for records it
//! finds above `tip`. Readers never write: a commit not yet finalized is found in the
//! records above `tip`. Reading the head costs four GETs (the hint, the boundary, the
//! hint's record, the absent next one) whatever the history.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use snafu::{OptionExt, ResultExt};
use tributary_storage::layout::TRANSACTIONS;
use tributary_storage::GraphStore;

use crate::error::{
    AlreadyExistsSnafu, BranchNotFoundSnafu, CommitNotFoundSnafu, CorruptRowSnafu, Error,
    NotAGraphSnafu, Result, StorageSnafu,
};
use crate::ids::{BranchName, CommitId};
use crate::record::{CommitRecord, PublishPlan, SchemaRecord, TablePath};
use crate::Publisher;

/// How often a publish tries the next number after losing one to another branch's
/// transaction (its own branch's head unchanged).
const NUMBER_ATTEMPTS: usize = 32;

/// Records younger than this are never pruned, whatever cleanup's window: a reader walks
/// from the hint through the newer records, and one stalled that long mid-walk could meet
/// a gap and take an older record for the newest.
pub const MIN_RETENTION: Duration = Duration::from_secs(600);

/// One transaction: the graph's state after it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Txn {
    number: u64,
    /// Every branch's head.
    heads: BTreeMap<BranchName, CommitRecord>,
    schema: SchemaRecord,
    /// The commit this transaction made (a head of `heads`); `None` for a deletion.
    made: Option<CommitId>,
}

impl Txn {
    fn made(&self) -> Option<&CommitRecord> {
        let id = self.made.as_ref()?;
        self.heads.values().find(|head| head.id == *id)
    }
}

/// The newest transaction, and those above the `tip` hint (not known to be finalized).
struct Latest {
    txn: Txn,
    unfinalized: Vec<Txn>,
}

/// Publisher over immutable transaction records of one graph.
pub struct RecordPublisher {
    store: GraphStore,
}

fn log_path(number: u64) -> String {
    format!("{TRANSACTIONS}/log/{number:020}.json")
}

fn tip_path() -> String {
    format!("{TRANSACTIONS}/tip")
}

fn pruned_path() -> String {
    format!("{TRANSACTIONS}/pruned")
}

fn commit_path(id: &str) -> String {
    format!("{TRANSACTIONS}/commits/{id}.json")
}

/// Keys live under the lineage (not the branch name): a late finalize of a deleted
/// branch's load never lands among the keys of a branch made again under its name.
fn keys_dir(lineage: Option<&str>) -> String {
    format!("{TRANSACTIONS}/keys/{}", segment(lineage.unwrap_or("main")))
}

fn key_path(lineage: Option<&str>, key: &str) -> String {
    format!("{}/{}.json", keys_dir(lineage), segment(key))
}

/// A name as one path segment (no `/`, no `.`-only name): percent-encoded.
fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02x}"));
        }
    }
    out
}

/// Create `path` holding `bytes` unless it exists; whether these bytes are there now. A
/// create whose response was lost and which the client retried answers "already exists"
/// for its own object: told apart by the bytes (a record names a fresh commit id).
pub(crate) async fn create_once(store: &GraphStore, path: &str, bytes: Vec<u8>) -> Result<bool> {
    if store
        .put_if_absent(path, bytes.clone())
        .await
        .context(StorageSnafu)?
    {
        return Ok(true);
    }
    Ok(store.get(path).await.context(StorageSnafu)?.as_deref() == Some(bytes.as_slice()))
}

#[expect(clippy::expect_used, reason = "records are plain strings and numbers")]
fn to_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("records serialize")
}

fn parse<T: serde::de::DeserializeOwned>(path: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).context(CorruptRowSnafu { key: path })
}

impl RecordPublisher {
    /// Create the records of a new graph: transaction 0, holding its schema and the first
    /// commit of `main` pinning `tables`.
    pub async fn create(
        store: &GraphStore,
        schema: SchemaRecord,
        tables: BTreeMap<TablePath, u64>,
        actor: &str,
    ) -> Result<(Self, CommitRecord)> {
        let first = CommitRecord::first(&schema, tables, actor);
        let txn = Txn {
            number: 0,
            heads: BTreeMap::from([(first.branch.clone(), first.clone())]),
            schema,
            made: Some(first.id.clone()),
        };
        let publisher = Self {
            store: store.clone(),
        };
        if !create_once(store, &log_path(0), to_bytes(&txn)).await? {
            return AlreadyExistsSnafu {
                uri: store.location(),
            }
            .fail();
        }
        publisher.finalize(&txn).await?;
        Ok((publisher, first))
    }

    /// Whether a graph's first record exists at `store` (or was pruned after it).
    pub async fn has_records(store: &GraphStore) -> Result<bool> {
        for path in [log_path(0), tip_path()] {
            if store.get(&path).await.context(StorageSnafu)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The records of an existing graph (nothing is read until asked).
    pub fn open(store: &GraphStore) -> Self {
        Self {
            store: store.clone(),
        }
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<Option<T>> {
        match self.store.get(path).await.context(StorageSnafu)? {
            Some(bytes) => parse(path, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// The newest transaction: from the `tip` hint (or just above `pruned`, when the hint
    /// is below it), forward while the next number exists.
    async fn latest(&self) -> Result<Latest> {
        let hint: u64 = self.get(&tip_path()).await?.unwrap_or(0);
        // Never below the boundary: a hint a slow finalizer lowered, or a record a failed
        // prune left, would be an older state than the newest.
        let pruned: Option<u64> = self.get(&pruned_path()).await?;
        let mut number = pruned.map_or(hint, |p| hint.max(p + 1));
        let mut txn = self
            .get::<Txn>(&log_path(number))
            .await?
            .context(NotAGraphSnafu {
                uri: self.store.location(),
            })?;
        let mut unfinalized = Vec::new();
        while let Some(next) = self.get::<Txn>(&log_path(number + 1)).await? {
            number += 1;
            unfinalized.push(next.clone());
            txn = next;
        }
        Ok(Latest { txn, unfinalized })
    }

    /// Make `txn`'s commit findable by id (and by its idempotency key), then raise the
    /// hint. Idempotent: every object it writes holds the same bytes each time.
    async fn finalize(&self, txn: &Txn) -> Result<()> {
        if let Some(commit) = txn.made() {
            self.store
                .put(&commit_path(&commit.id), to_bytes(commit))
                .await
                .context(StorageSnafu)?;
            if let Some(key) = &commit.idempotency_key {
                self.store
                    .put(
                        &key_path(commit.lineage.as_deref(), key),
                        to_bytes(&commit.id),
                    )
                    .await
                    .context(StorageSnafu)?;
            }
        }
        self.store
            .put(&tip_path(), to_bytes(&txn.number))
            .await
            .context(StorageSnafu)
    }

    /// Finalize what the last writers left above the hint (a crash between their record
    /// and their finalize).
    async fn finalize_all(&self, unfinalized: &[Txn]) -> Result<()> {
        for txn in unfinalized {
            self.finalize(txn).await?;
        }
        Ok(())
    }

    /// Create transaction `txn` (numbered one above `latest`); `false` if another writer
    /// took the number first.
    async fn append(&self, txn: &Txn) -> Result<bool> {
        let path = log_path(txn.number);
        if !create_once(&self.store, &path, to_bytes(txn)).await? {
            return Ok(false);
        }
        // A writer that stalled between reading the newest record and creating the next
        // may create a number cleanup has pruned: behind the boundary, where no reader
        // looks, the record is void. The boundary is raised before any record goes, so
        // reading it now tells.
        let pruned: Option<u64> = self.get(&pruned_path()).await?;
        if pruned.is_some_and(|p| p >= txn.number) {
            if let Err(error) = self.store.delete(&path).await {
                tracing::warn!(%error, path, "could not remove a void transaction record");
            }
            return Ok(false);
        }
        // Made: a failed finalize fails nothing (the next writer finishes it, and readers
        // find the commit above the hint meanwhile).
        if let Err(error) = self.finalize(txn).await {
            tracing::warn!(%error, number = txn.number, "could not finalize a transaction record");
        }
        Ok(true)
    }

    /// One commit by id: finalized, or made by a record above the hint.
    async fn find_commit(&self, id: &CommitId) -> Result<CommitRecord> {
        if let Some(commit) = self.get::<CommitRecord>(&commit_path(id)).await? {
            return Ok(commit);
        }
        let latest = self.latest().await?;
        if let Some(commit) = latest
            .unfinalized
            .iter()
            .filter_map(Txn::made)
            .find(|commit| commit.id == *id)
        {
            return Ok(commit.clone());
        }
        // Finalized between the two reads (and the hint raised past it).
        self.get::<CommitRecord>(&commit_path(id))
            .await?
            .context(CommitNotFoundSnafu { id: id.as_str() })
    }

    /// Drop the records below the newest that are older than `older_than` (and than
    /// [`MIN_RETENTION`]); every commit is an object of its own by then. The boundary is
    /// raised first, so a reader never looks for a removed record, and a writer that
    /// creates a removed number finds its record void. The caller runs one prune at a
    /// time (cleanup holds `main`'s write turn). Returns how many records went.
    pub async fn prune(&self, older_than: Duration) -> Result<u64> {
        let latest = self.latest().await?;
        self.finalize_all(&latest.unfinalized).await?;
        let newest = latest.txn.number;
        let from: u64 = self.get::<u64>(&pruned_path()).await?.map_or(0, |p| p + 1);
        let retention = older_than.max(MIN_RETENTION);
        let mut through = None;
        for number in from..newest {
            let modified = self
                .store
                .modified_at(&log_path(number))
                .await
                .context(StorageSnafu)?;
            let old = modified
                .and_then(|at| std::time::SystemTime::now().duration_since(at).ok())
                .is_some_and(|age| age >= retention);
            if !old {
                break;
            }
            through = Some(number);
        }
        let Some(through) = through else {
            return Ok(0);
        };
        self.store
            .put(&pruned_path(), to_bytes(&through))
            .await
            .context(StorageSnafu)?;
        let mut removed = 0;
        for number in from..=through {
            // A record left behind is only space: below the boundary nothing reads it.
            match self.store.delete(&log_path(number)).await {
                Ok(()) => removed += 1,
                Err(error) => tracing::warn!(%error, number, "could not remove a pruned record"),
            }
        }
        Ok(removed)
    }
}

#[async_trait]
impl Publisher for RecordPublisher {
    async fn publish(&self, plan: PublishPlan) -> Result<CommitRecord> {
        for _ in 0..NUMBER_ATTEMPTS {
            let latest = self.latest().await?;
            self.finalize_all(&latest.unfinalized).await?;
            let base = latest.txn;
            let head = base.heads.get(&plan.branch);
            let actual = head.map(|h| h.id.clone());
            if actual != plan.expected_head {
                return Err(Error::Conflict {
                    branch: plan.branch,
                    expected: plan.expected_head,
                    actual,
                });
            }
            let fork = match (head, &plan.fork) {
                (None, Some(fork)) => Some(self.find_commit(&fork.from).await?),
                _ => None,
            };
            let merged_depth = match &plan.merged {
                Some(merged) => self.find_commit(merged).await?.depth,
                None => 0,
            };
            let record = CommitRecord::next(head, fork.as_ref(), merged_depth, plan.clone())?;
            let mut heads = base.heads.clone();
            heads.insert(plan.branch.clone(), record.clone());
            let txn = Txn {
                number: base.number + 1,
                heads,
                schema: plan.schema.clone().unwrap_or(base.schema),
                made: Some(record.id.clone()),
            };
            // Tests stall a writer here, between reading the newest record and creating
            // the next.
            fail::fail_point!("records::before-create");
            if self.append(&txn).await? {
                return Ok(record);
            }
        }
        let actual = self.head(&plan.branch).await.ok().map(|h| h.id);
        Err(Error::Conflict {
            branch: plan.branch,
            expected: plan.expected_head,
            actual,
        })
    }

    async fn head(&self, branch: &BranchName) -> Result<CommitRecord> {
        let latest = self.latest().await?;
        latest
            .txn
            .heads
            .get(branch)
            .cloned()
            .context(BranchNotFoundSnafu {
                branch: branch.as_str(),
            })
    }

    async fn commit(&self, id: &CommitId) -> Result<CommitRecord> {
        self.find_commit(id).await
    }

    async fn commit_by_key(&self, branch: &BranchName, key: &str) -> Result<Option<CommitRecord>> {
        let head = self.head(branch).await?;
        // Made by a record above the hint: not in `keys/` yet.
        let latest = self.latest().await?;
        let pending = latest
            .unfinalized
            .iter()
            .filter_map(Txn::made)
            .find(|c| c.branch == *branch && c.idempotency_key.as_deref() == Some(key));
        let commit = match pending {
            Some(commit) => commit.clone(),
            None => match self
                .get::<CommitId>(&key_path(head.lineage.as_deref(), key))
                .await?
            {
                Some(id) => self.find_commit(&id).await?,
                None => return Ok(None),
            },
        };
        // A key of an earlier branch of this name (deleted, made again) answers nothing.
        Ok((commit.lineage == head.lineage).then_some(commit))
    }

    async fn log(&self, branch: &BranchName, limit: usize) -> Result<Vec<CommitRecord>> {
        let mut next = Some(self.head(branch).await?);
        let mut log = Vec::with_capacity(limit.min(1024));
        while let Some(record) = next {
            if log.len() >= limit {
                break;
            }
            next = match &record.parent {
                Some(parent) if log.len() + 1 < limit => Some(self.find_commit(parent).await?),
                _ => None,
            };
            log.push(record);
        }
        Ok(log)
    }

    async fn branches(&self) -> Result<Vec<CommitRecord>> {
        Ok(self.latest().await?.txn.heads.into_values().collect())
    }

    async fn delete_branch(&self, branch: &BranchName, expected_head: &CommitId) -> Result<()> {
        for _ in 0..NUMBER_ATTEMPTS {
            let latest = self.latest().await?;
            self.finalize_all(&latest.unfinalized).await?;
            let base = latest.txn;
            let actual = base.heads.get(branch).map(|h| h.id.clone());
            if actual.as_ref() != Some(expected_head) {
                return Err(Error::Conflict {
                    branch: branch.clone(),
                    expected: Some(expected_head.clone()),
                    actual,
                });
            }
            let mut heads = base.heads.clone();
            let lineage = heads.remove(branch).and_then(|head| head.lineage);
            let txn = Txn {
                number: base.number + 1,
                heads,
                schema: base.schema,
                made: None,
            };
            if self.append(&txn).await? {
                // The keys answer nothing once the head is gone (they name another
                // lineage than any later head's); removing them is tidiness.
                if let Err(error) = self.store.delete_tree(&keys_dir(lineage.as_deref())).await {
                    tracing::warn!(%error, %branch, "could not remove a deleted branch's keys");
                }
                return Ok(());
            }
        }
        Err(Error::Conflict {
            branch: branch.clone(),
            expected: Some(expected_head.clone()),
            actual: Some(expected_head.clone()),
        })
    }

    async fn schema(&self) -> Result<SchemaRecord> {
        Ok(self.latest().await?.txn.schema)
    }
}
