//! The change feed: the commits of a branch after one a consumer names, oldest first, each
//! as records a consumer applies in order — rows inserted and updated (new values), keys
//! deleted — and a closing `commit` record. A consumer that stores that commit id with
//! its own write resumes exactly after it.

use serde::{Deserialize, Serialize};
use snafu::ResultExt;
use tributary_publisher::{BranchName, CommitId, CommitKind, CommitRecord, Publisher};
use tributary_schema::Catalog;
use tributary_storage::GraphStore;

use crate::changes::{commit_changes, CommitChanges};
use crate::error::{
    ArrowSnafu, NotOnBranchSnafu, PublisherSnafu, Result, SinceRemovedSnafu, UnknownTypeSnafu,
    UnreadableRowsSnafu,
};

/// Which commits a page of the feed covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangesRequest {
    pub branch: BranchName,
    /// The last commit the consumer processed: the page starts after it.
    pub since: CommitId,
    /// Only these types (empty: every type).
    pub types: Vec<String>,
    /// At most this many commits…
    pub max_commits: usize,
    /// …and no commit begun once this many rows are in the page (a page always holds at
    /// least one commit, whatever its size).
    pub max_rows: usize,
}

/// One line of the feed (read one back with [`ChangeRecord::from_line`]).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ChangeRecord {
    /// A row whose key the commit's parent did not have.
    Insert(RowChange),
    /// A row whose key the parent had, with its new values.
    Update(RowChange),
    /// A key the parent had and the commit does not.
    Delete(KeyChange),
    /// The end of a commit's records: once they are applied, store `commit` and resume
    /// after it.
    Commit(CommitEnd),
    /// A following stream's sign of life while no commit arrives.
    Heartbeat(Heartbeat),
    /// Why a stream that had begun cannot go on: its last record. Resume after the last
    /// `commit` record received.
    Error(StreamError),
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RowChange {
    pub commit: CommitId,
    #[serde(rename = "type")]
    pub type_name: String,
    pub key: String,
    /// Every column of the row (a null as `null`), as a JSON object.
    #[schema(value_type = Object)]
    pub row: Box<serde_json::value::RawValue>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct KeyChange {
    pub commit: CommitId,
    #[serde(rename = "type")]
    pub type_name: String,
    pub key: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CommitEnd {
    pub commit: CommitId,
    pub parent: Option<CommitId>,
    pub branch: BranchName,
    pub kind: CommitKind,
    /// When the commit was published (ISO 8601, UTC).
    pub time: String,
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StreamError {
    /// The error's kind, as in error bodies (`not_found`, `internal`, …).
    pub kind: String,
    pub error: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Heartbeat {
    /// The branch's head when the heartbeat was sent.
    pub head: CommitId,
    pub time: String,
}

impl ChangeRecord {
    /// One NDJSON line of the feed read back. (Serde's tagged enums buffer a record before
    /// choosing its variant, which a row kept as raw JSON cannot go through: the `op` is
    /// read first, then the record as its variant's own type.)
    pub fn from_line(line: &str) -> serde_json::Result<ChangeRecord> {
        #[derive(Deserialize)]
        struct Op {
            op: String,
        }
        let Op { op } = serde_json::from_str(line)?;
        Ok(match op.as_str() {
            "insert" => ChangeRecord::Insert(serde_json::from_str(line)?),
            "update" => ChangeRecord::Update(serde_json::from_str(line)?),
            "delete" => ChangeRecord::Delete(serde_json::from_str(line)?),
            "commit" => ChangeRecord::Commit(serde_json::from_str(line)?),
            "heartbeat" => ChangeRecord::Heartbeat(serde_json::from_str(line)?),
            "error" => ChangeRecord::Error(serde_json::from_str(line)?),
            other => {
                return Err(serde::de::Error::custom(format!(
                    "`{other}` is not a change record's op"
                )))
            }
        })
    }

    /// The commit this record closes, for a `commit` record.
    pub fn closes(&self) -> Option<&CommitId> {
        match self {
            ChangeRecord::Commit(end) => Some(&end.commit),
            _ => None,
        }
    }
}

/// The commits of `request.branch` after `request.since`, oldest first, as records; empty
/// when `since` is the head. `since` must be on the branch's first-parent history.
pub async fn changes_page<P: Publisher + ?Sized>(
    store: &GraphStore,
    publisher: &P,
    catalog: &Catalog,
    request: &ChangesRequest,
) -> Result<Vec<ChangeRecord>> {
    for name in &request.types {
        if !catalog.types.iter().any(|ty| &ty.name == name) {
            return UnknownTypeSnafu { name }.fail();
        }
    }
    let pending = commits_after(publisher, &request.branch, &request.since).await?;
    let pending_ids: Vec<CommitRecord> = pending.clone();
    let mut records = Vec::new();
    let mut rows = 0;
    let mut parent = match pending.first() {
        Some(_) => Some(
            publisher
                .commit(&request.since)
                .await
                .context(PublisherSnafu)?,
        ),
        None => None,
    };
    for (done, commit) in pending.into_iter().enumerate() {
        if done >= request.max_commits.max(1) || (done > 0 && rows >= request.max_rows) {
            break;
        }
        let wanted = |ty: &tributary_schema::TypeDef| {
            request.types.is_empty() || request.types.contains(&ty.name)
        };
        let changes = match commit_changes(store, parent.as_ref(), &commit, catalog, wanted).await {
            Ok(changes) => changes,
            Err(error @ crate::Error::VersionsGone { .. }) => {
                let oldest = oldest_readable(store, &commit, &pending_ids).await?;
                return Err(error).context(SinceRemovedSnafu {
                    since: request.since.clone(),
                    oldest,
                });
            }
            Err(error) => return Err(error),
        };
        let before = records.len();
        push_records(&changes, &mut records)?;
        rows += records.len() - before;
        parent = Some(commit);
    }
    Ok(records)
}

/// The first-parent chain from `branch`'s head back to `since`, oldest first, `since`
/// excluded.
async fn commits_after<P: Publisher + ?Sized>(
    publisher: &P,
    branch: &BranchName,
    since: &CommitId,
) -> Result<Vec<CommitRecord>> {
    let mut chain = Vec::new();
    let mut at = publisher.head(branch).await.context(PublisherSnafu)?;
    while at.id != *since {
        let Some(parent) = at.parent.clone() else {
            return NotOnBranchSnafu {
                commit: since.clone(),
                branch: branch.clone(),
            }
            .fail();
        };
        chain.push(at);
        at = publisher.commit(&parent).await.context(PublisherSnafu)?;
    }
    chain.reverse();
    Ok(chain)
}

/// The oldest of `chain` (oldest first) whose table versions all still open: cleanup
/// removes versions oldest first, so a binary search finds it. `failed` did not.
async fn oldest_readable(
    store: &GraphStore,
    failed: &CommitRecord,
    chain: &[CommitRecord],
) -> Result<CommitId> {
    // The failed commit itself may still be readable (a version between it and its parent
    // went): then resuming after it loses only its own changes.
    let start = chain.iter().position(|c| c.id == failed.id).unwrap_or(0);
    let (mut low, mut high) = (start, chain.len().saturating_sub(1));
    while low < high {
        let middle = (low + high) / 2;
        if readable(store, &chain[middle]).await {
            high = middle;
        } else {
            low = middle + 1;
        }
    }
    Ok(chain
        .get(low)
        .map_or_else(|| failed.id.clone(), |c| c.id.clone()))
}

async fn readable(store: &GraphStore, commit: &CommitRecord) -> bool {
    for path in commit.tables.keys() {
        if commit.open_table(store, path).await.is_err() {
            return false;
        }
    }
    true
}

fn time_of(commit: &CommitRecord) -> String {
    chrono::DateTime::from_timestamp_micros(commit.time_micros)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
        .unwrap_or_default()
}

/// A commit's records: every type's inserted and updated rows (node types first, so an
/// edge's ends are there before it), then the deleted keys in the reverse order (edges
/// before the nodes they reached), then the `commit` record.
fn push_records(changes: &CommitChanges, records: &mut Vec<ChangeRecord>) -> Result<()> {
    let commit = &changes.commit;
    let (mut inserted, mut updated, mut deleted) = (0u64, 0u64, 0u64);
    for table in &changes.tables {
        for (batch, insert) in [(&table.inserted, true), (&table.updated, false)] {
            let Some(batch) = batch else { continue };
            let keys = crate::changes::key_column(batch, &table.type_def.name)?;
            let rows = json_rows(batch, &table.type_def.name)?;
            for (key, row) in keys.iter().zip(rows) {
                let change = RowChange {
                    commit: commit.id.clone(),
                    type_name: table.type_def.name.clone(),
                    key: key.unwrap_or_default().to_owned(),
                    row,
                };
                records.push(if insert {
                    inserted += 1;
                    ChangeRecord::Insert(change)
                } else {
                    updated += 1;
                    ChangeRecord::Update(change)
                });
            }
        }
    }
    for table in changes.tables.iter().rev() {
        for key in &table.deleted {
            deleted += 1;
            records.push(ChangeRecord::Delete(KeyChange {
                commit: commit.id.clone(),
                type_name: table.type_def.name.clone(),
                key: key.clone(),
            }));
        }
    }
    records.push(ChangeRecord::Commit(CommitEnd {
        commit: commit.id.clone(),
        parent: commit.parent.clone(),
        branch: commit.branch.clone(),
        kind: commit.kind,
        time: time_of(commit),
        inserted,
        updated,
        deleted,
    }));
    Ok(())
}

/// Each row as its JSON object, every column named (a null as `null`, so a consumer
/// applying an update sets every field), kept as text: a large commit's page holds one
/// string per row, not a parsed tree.
fn json_rows(
    batch: &arrow_array::RecordBatch,
    type_name: &str,
) -> Result<Vec<Box<serde_json::value::RawValue>>> {
    let action = || ArrowSnafu {
        action: format!("write the changed rows of `{type_name}` as JSON"),
    };
    let mut bytes = Vec::new();
    let mut writer = arrow_json::WriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, arrow_json::writer::LineDelimited>(&mut bytes);
    writer.write(batch).with_context(|_| action())?;
    writer.finish().with_context(|_| action())?;
    drop(writer);
    let text = String::from_utf8(bytes)
        .map_err(|e| serde::de::Error::custom(format!("changed rows are not UTF-8: {e}")));
    let text = text.context(UnreadableRowsSnafu { type_name })?;
    text.lines()
        .map(|line| serde_json::value::RawValue::from_string(line.to_owned()))
        .collect::<Result<_, _>>()
        .context(UnreadableRowsSnafu { type_name })
}

/// The heartbeat a following stream sends while `head` is the branch's head.
pub fn heartbeat(head: &CommitId) -> ChangeRecord {
    ChangeRecord::Heartbeat(Heartbeat {
        head: head.clone(),
        time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    })
}
