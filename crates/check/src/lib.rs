//! `check`: whether every file the heads of a graph pin is there and reads back whole.
//! For each table version a head pins: its version manifest opens, each fragment's
//! deletion vector and data files read to the row count the manifest records, and each
//! index opens; for each streamed table, every pending MemWAL generation reads to its
//! recorded rows and every WAL entry above the flushed position reads. Nothing is
//! written. What is wrong is reported, named by branch, commit, table and part, never by
//! a store's internal path alone.

use std::collections::BTreeSet;

use futures::TryStreamExt;
use lance::index::DatasetIndexExt;
use serde::Serialize;
use tributary_memwal_adapter::{table_state, wal_tails, MemWalTable, TailDepth};
use tributary_publisher::CommitRecord;
use tributary_storage::lance_text::user_message;
use tributary_storage::GraphStore;

/// One thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub branch: String,
    pub commit: String,
    /// The type (`Person`), as users name it.
    pub table: String,
    /// What is wrong with it: the part and what reading it said.
    pub problem: String,
}

/// What a check read, and what it found wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    pub branches: usize,
    /// Table versions checked (one shared by several heads counts once).
    pub table_versions: usize,
    pub fragments: u64,
    /// Rows read back from the tables' fragments.
    pub rows: u64,
    pub indexes: usize,
    pub generations: usize,
    pub wal_entries: u64,
    pub problems: Vec<Problem>,
}

/// Check every head of `heads`; `progress` hears each table as it starts.
pub async fn check(
    store: &GraphStore,
    heads: &[CommitRecord],
    progress: impl Fn(&str),
) -> CheckReport {
    let mut report = CheckReport {
        branches: heads.len(),
        ..CheckReport::default()
    };
    let mut seen = BTreeSet::new();
    for head in heads {
        for (path, &version) in &head.tables {
            let lineage = head.lineage.clone();
            if !seen.insert((path.clone(), lineage.clone(), version)) {
                continue;
            }
            let table = type_name(path);
            progress(&format!("{} {table} (version {version})", head.branch));
            let mut problems = Vec::new();
            let mut found = |problem: String| problems.push(problem);
            check_table(store, head, path, &mut report, &mut found).await;
            let at = MemWalTable::on(path, lineage.as_deref());
            check_memwal(store, &at, &mut report, &mut found).await;
            report.table_versions += 1;
            report
                .problems
                .extend(problems.into_iter().map(|problem| Problem {
                    branch: head.branch.to_string(),
                    commit: head.id.to_string(),
                    table: table.clone(),
                    problem,
                }));
        }
    }
    report
}

/// `Person` for `nodes/Person.lance`.
fn type_name(path: &str) -> String {
    let last = path.rsplit('/').next().unwrap_or(path);
    last.strip_suffix(".lance").unwrap_or(last).to_owned()
}

async fn check_table(
    store: &GraphStore,
    head: &CommitRecord,
    path: &str,
    report: &mut CheckReport,
    found: &mut impl FnMut(String),
) {
    let version = head.tables.get(path).copied().unwrap_or_default();
    let dataset = match head.open_table(store, path).await {
        Ok(dataset) => dataset,
        Err(error) => {
            return found(format!(
                "its version manifest (Lance version {version}) cannot be opened: {error}"
            ))
        }
    };
    for fragment in dataset.get_fragments() {
        report.fragments += 1;
        let meta = fragment.metadata().clone();
        let files: Vec<&str> = meta.files.iter().map(|f| f.path.as_str()).collect();
        let expected = match fragment.count_rows(None).await {
            Ok(rows) => rows as u64,
            Err(error) => {
                found(format!(
                    "fragment {}: its deletion vector cannot be read: {}",
                    meta.id,
                    user_message(&error)
                ));
                continue;
            }
        };
        match rows_read(&dataset, Some(meta.clone())).await {
            Ok(rows) if rows == expected => report.rows += rows,
            Ok(rows) => found(format!(
                "fragment {} (data files {files:?}) reads {rows} rows; its manifest records \
                 {expected}",
                meta.id
            )),
            Err(error) => found(format!(
                "fragment {} (data files {files:?}) cannot be read: {}",
                meta.id,
                user_message(&error)
            )),
        }
    }
    let indexes = match dataset.load_indices().await {
        Ok(indexes) => indexes,
        Err(error) => {
            return found(format!(
                "its index list cannot be read: {}",
                user_message(&error)
            ))
        }
    };
    let names: BTreeSet<String> = indexes.iter().map(|index| index.name.clone()).collect();
    for name in names {
        report.indexes += 1;
        if let Err(error) = dataset.index_statistics(&name).await {
            found(format!(
                "index `{name}` cannot be opened: {}",
                user_message(&error)
            ));
        }
    }
}

/// Rows read back from every column of `dataset` (of one fragment of it, if given): every
/// page is fetched and decoded, so a missing or damaged file fails here.
async fn rows_read(
    dataset: &lance::Dataset,
    fragment: Option<lance::table::format::Fragment>,
) -> lance::Result<u64> {
    let mut scan = dataset.scan();
    if let Some(fragment) = fragment {
        scan.with_fragments(vec![fragment]);
    }
    scan.try_into_stream()
        .await?
        .try_fold(0u64, |rows, batch| async move {
            Ok(rows + batch.num_rows() as u64)
        })
        .await
}

/// The table's MemWAL, if it is streamed: what is acknowledged and not yet folded.
async fn check_memwal(
    store: &GraphStore,
    at: &MemWalTable,
    report: &mut CheckReport,
    found: &mut impl FnMut(String),
) {
    let state = match table_state(store, at).await {
        Ok(Some(state)) => state,
        Ok(None) => return,
        Err(error) => return found(format!("its MemWAL state cannot be read: {error}")),
    };
    for shard in &state.shards {
        for pending in &shard.pending {
            report.generations += 1;
            let path = format!("{}/{}", at.shard_dir(shard.shard), pending.path);
            let rows = async {
                let dataset = store
                    .open_dataset(&path, None)
                    .await
                    .map_err(|e| e.to_string())?;
                rows_read(&dataset, None)
                    .await
                    .map_err(|e| user_message(&e))
            };
            match rows.await {
                Ok(rows) if rows == pending.rows => {}
                Ok(rows) => found(format!(
                    "shard {} generation {} reads {rows} rows; the shard records {}",
                    shard.shard, pending.generation, pending.rows
                )),
                Err(error) => found(format!(
                    "shard {} generation {} (unfolded, acknowledged rows) cannot be read: \
                     {error}",
                    shard.shard, pending.generation
                )),
            }
        }
    }
    match wal_tails(store, at, TailDepth::Count, None).await {
        Ok(tails) => {
            for tail in tails.unwrap_or_default() {
                report.wal_entries += tail.entries;
                if let (Some(first), Some(last)) = (tail.missing.first(), tail.missing.last()) {
                    found(format!(
                        "shard {}: {} write-ahead log entries between positions {first} and \
                         {last} are missing (acknowledged rows not yet in a generation may be \
                         lost; a fold refuses the shard)",
                        tail.shard,
                        tail.missing.len()
                    ));
                }
            }
        }
        Err(error) => found(format!(
            "its write-ahead log (acknowledged rows not yet in a generation) cannot be read: \
             {error}"
        )),
    }
}
