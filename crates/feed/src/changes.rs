//! What one graph commit changed, type by type: the rows it inserted, the rows it updated
//! (their new values) and the keys it deleted.
//!
//! Read from what Lance keeps, never by diffing whole tables: a commit pins one version of
//! each table and its parent pins an earlier one of the same lineage; every Lance version
//! between them has a transaction that says what kind of change it was. A data change
//! (append, delete, merge-insert) adds fragments and grows deletion vectors, so its
//! removed rows are the rows its deletion vectors newly cover (read at the version before,
//! by address) and its added rows are its new fragments; a fragment that keeps its id but
//! holds new data (a column added, values patched in place) counts as all its rows removed
//! and added again. Upkeep versions (compaction, index segments) move or describe rows
//! without changing one, and are passed over. Per key, the first and last of those events give the net change: a key
//! that was there before and is there after was updated; there only after, inserted;
//! there only before, deleted.

use std::collections::{HashMap, HashSet};

use arrow_array::{Array, RecordBatch, StringArray};
use futures::TryStreamExt;
use lance::dataset::transaction::Operation;
use lance::dataset::ProjectionRequest;
use lance::table::format::Fragment;
use lance::Dataset;
use snafu::{OptionExt, ResultExt};
use tributary_publisher::{CommitKind, CommitRecord};
use tributary_schema::{Catalog, TablePath, TypeDef, TypeKind};
use tributary_storage::GraphStore;

use crate::error::{
    ArrowSnafu, CannotDescribeSnafu, ChangeReadSnafu, FragmentMissingSnafu, NoKeyColumnSnafu,
    OpenTableSnafu, Result, VersionsGoneSnafu,
};

/// One type's changes in one commit. Keys in each part are sorted.
#[derive(Debug, Clone)]
pub struct TableChanges {
    pub type_def: TypeDef,
    /// Rows whose key the parent did not have.
    pub inserted: Option<RecordBatch>,
    /// Rows whose key the parent had, with their new values.
    pub updated: Option<RecordBatch>,
    /// Keys the parent had and the commit does not.
    pub deleted: Vec<String>,
}

impl TableChanges {
    pub fn rows(&self) -> (usize, usize, usize) {
        let rows = |batch: &Option<RecordBatch>| batch.as_ref().map_or(0, RecordBatch::num_rows);
        (
            rows(&self.inserted),
            rows(&self.updated),
            self.deleted.len(),
        )
    }
}

/// One commit's changes: node types first, then edge types, each in schema order.
#[derive(Debug, Clone)]
pub struct CommitChanges {
    pub commit: CommitRecord,
    pub tables: Vec<TableChanges>,
}

/// The changes `commit` made over `parent` (its first parent; `None` for a graph's first
/// commit), for the types of `catalog` that `wanted` accepts.
pub async fn commit_changes(
    store: &GraphStore,
    parent: Option<&CommitRecord>,
    commit: &CommitRecord,
    catalog: &Catalog,
    wanted: impl Fn(&TypeDef) -> bool,
) -> Result<CommitChanges> {
    let mut tables = Vec::new();
    // A branch's first commit forks tables: the rows are its parent's, nothing changed.
    if commit.kind != CommitKind::Branch {
        let by_role = catalog
            .types
            .iter()
            .filter(|ty| ty.kind == TypeKind::Node)
            .chain(catalog.types.iter().filter(|ty| ty.kind == TypeKind::Edge));
        for ty in by_role.filter(|ty| wanted(ty)) {
            let path = ty.table_path();
            let Some(&to) = commit.tables.get(&path) else {
                continue;
            };
            let from = parent.and_then(|p| p.tables.get(&path).copied());
            if from == Some(to) {
                continue;
            }
            let net = table_changes(store, commit, &path, from, to).await?;
            let changes = net.finish(ty.clone())?;
            if changes.rows() != (0, 0, 0) {
                tables.push(changes);
            }
        }
    }
    Ok(CommitChanges {
        commit: commit.clone(),
        tables,
    })
}

/// The net change of one table from version `from` (`None`: the table is new) to `to`,
/// both on `commit`'s lineage.
async fn table_changes(
    store: &GraphStore,
    commit: &CommitRecord,
    path: &TablePath,
    from: Option<u64>,
    to: u64,
) -> Result<Net> {
    let lineage = commit.lineage.as_deref();
    let open = |version: u64| async move {
        match store.open_dataset_on(path, lineage, Some(version)).await {
            Ok(dataset) => Ok(dataset),
            Err(tributary_storage::Error::Lance {
                source: lance::Error::DatasetNotFound { .. } | lance::Error::NotFound { .. },
                ..
            }) => VersionsGoneSnafu {
                commit: commit.id.clone(),
                table: path.to_string(),
                version,
            }
            .fail(),
            Err(source) => Err(crate::Error::Storage {
                action: format!("open `{path}` at version {version}"),
                source,
            }),
        }
    };
    let mut net = Net::default();
    let Some(from) = from else {
        let target = commit
            .open_table(store, path)
            .await
            .context(OpenTableSnafu {
                table: path.to_string(),
                commit: commit.id.clone(),
            })?;
        net.add_all(&target, path).await?;
        return Ok(net);
    };
    if to < from {
        return CannotDescribeSnafu {
            table: path.to_string(),
            version: to,
            operation: format!("a version older than its parent's ({from})"),
        }
        .fail();
    }
    let mut before = open(from).await?;
    for version in from + 1..=to {
        let after = open(version).await?;
        let transaction = after.read_transaction().await.context(ChangeReadSnafu {
            table: path.to_string(),
            version,
        })?;
        let operation = transaction.as_ref().map(|t| &t.operation);
        match operation {
            // Rows moved (compaction keeps every live row, under new fragment ids), indexed
            // or described: no row changed.
            Some(
                Operation::Rewrite { .. }
                | Operation::CreateIndex { .. }
                | Operation::ReserveFragments { .. }
                | Operation::Project { .. }
                | Operation::UpdateConfig { .. }
                | Operation::UpdateMemWalState { .. }
                | Operation::Clone { .. }
                | Operation::UpdateBases { .. },
            ) => {}
            // Rows added, deleted, rewritten, or given new column data (a column added,
            // values patched in place): the fragments say which.
            Some(
                Operation::Append { .. }
                | Operation::Delete { .. }
                | Operation::Update { .. }
                | Operation::Merge { .. }
                | Operation::DataReplacement { .. }
                | Operation::DataOverlay { .. },
            ) => {
                net.diff(&before, &after, path).await?;
            }
            Some(Operation::Overwrite { .. } | Operation::Restore { .. }) => {
                net.remove_all(&before, path).await?;
                net.add_all(&after, path).await?;
            }
            Some(other) => {
                return CannotDescribeSnafu {
                    table: path.to_string(),
                    version,
                    operation: other.name(),
                }
                .fail();
            }
            None => {
                return CannotDescribeSnafu {
                    table: path.to_string(),
                    version,
                    operation: "a version without a transaction file",
                }
                .fail();
            }
        }
        before = after;
    }
    Ok(net)
}

/// Per key, whether it existed before the first event and where its last added row is.
#[derive(Default)]
struct Net {
    added: Vec<RecordBatch>,
    keys: HashMap<String, KeyState>,
}

struct KeyState {
    existed_before: bool,
    /// (batch, row) of the key's last added row; `None` once it was last removed.
    last: Option<(usize, usize)>,
}

impl Net {
    fn removed(&mut self, keys: &StringArray) {
        for key in keys.iter().flatten() {
            self.keys
                .entry(key.to_owned())
                .and_modify(|state| state.last = None)
                .or_insert(KeyState {
                    existed_before: true,
                    last: None,
                });
        }
    }

    fn added(&mut self, batch: RecordBatch, path: &str) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if let Some(first) = self.added.first() {
            // Rows added by versions of one commit share its schema: a schema change is a
            // commit of its own.
            if first.schema() != batch.schema() {
                return CannotDescribeSnafu {
                    table: path.to_owned(),
                    version: 0u64,
                    operation: "rows of two schemas in one commit",
                }
                .fail();
            }
        }
        let index = self.added.len();
        let ids = key_column(&batch, path)?;
        for (row, key) in ids.iter().enumerate() {
            let Some(key) = key else { continue };
            self.keys
                .entry(key.to_owned())
                .and_modify(|state| state.last = Some((index, row)))
                .or_insert(KeyState {
                    existed_before: false,
                    last: Some((index, row)),
                });
        }
        self.added.push(batch);
        Ok(())
    }

    async fn add_all(&mut self, dataset: &Dataset, path: &str) -> Result<()> {
        let fragments = dataset.fragments().as_ref().clone();
        for batch in scan(dataset, fragments, None, path).await? {
            self.added(batch, path)?;
        }
        Ok(())
    }

    async fn remove_all(&mut self, dataset: &Dataset, path: &str) -> Result<()> {
        let fragments = dataset.fragments().as_ref().clone();
        for batch in scan(dataset, fragments, Some("id"), path).await? {
            self.removed(key_column(&batch, path)?);
        }
        Ok(())
    }

    /// One data-changing version: `before` → `after`.
    async fn diff(&mut self, before: &Dataset, after: &Dataset, path: &str) -> Result<()> {
        let read = |version: u64| ChangeReadSnafu {
            table: path.to_owned(),
            version,
        };
        if before.manifest().uses_stable_row_ids() {
            // Row ids would not be addresses, which is how removed rows are read.
            return CannotDescribeSnafu {
                table: path.to_owned(),
                version: after.version().version,
                operation: "a table with stable row ids",
            }
            .fail();
        }
        let after_ids: HashMap<u64, &Fragment> =
            after.fragments().iter().map(|f| (f.id, f)).collect();
        let before_ids: HashSet<u64> = before.fragments().iter().map(|f| f.id).collect();
        let mut gone = Vec::new();
        let mut rewritten = HashSet::new();
        let mut addresses = Vec::new();
        for fragment in before.fragments().iter() {
            match after_ids.get(&fragment.id) {
                None => gone.push(fragment.clone()),
                // New data under the same id (a column added, values patched in place):
                // every live row of it is removed before and added after, so a key still
                // there is an update with its new values.
                Some(later) if !same_data(later, fragment) => {
                    gone.push(fragment.clone());
                    rewritten.insert(fragment.id);
                }
                Some(later) if later.deletion_file != fragment.deletion_file => {
                    let newly = newly_deleted(before, after, fragment.id, path).await?;
                    addresses.extend(
                        newly
                            .into_iter()
                            .map(|o| (fragment.id << 32) | u64::from(o)),
                    );
                }
                Some(_) => {}
            }
        }
        if !gone.is_empty() {
            for batch in scan(before, gone, Some("id"), path).await? {
                self.removed(key_column(&batch, path)?);
            }
        }
        if !addresses.is_empty() {
            let batch = before
                .take_rows(
                    &addresses,
                    ProjectionRequest::from_columns(["id"], before.schema()),
                )
                .await
                .with_context(|_| read(before.version().version))?;
            self.removed(key_column(&batch, path)?);
        }
        let new: Vec<_> = after
            .fragments()
            .iter()
            .filter(|f| !before_ids.contains(&f.id) || rewritten.contains(&f.id))
            .cloned()
            .collect();
        if !new.is_empty() {
            for batch in scan(after, new, None, path).await? {
                self.added(batch, path)?;
            }
        }
        Ok(())
    }

    fn finish(self, type_def: TypeDef) -> Result<TableChanges> {
        let mut entries: Vec<(String, KeyState)> = self.keys.into_iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut inserted = Vec::new();
        let mut updated = Vec::new();
        let mut deleted = Vec::new();
        for (key, state) in entries {
            match (state.existed_before, state.last) {
                (false, Some(at)) => inserted.push(at),
                (true, Some(at)) => updated.push(at),
                (true, None) => deleted.push(key),
                (false, None) => {}
            }
        }
        let batches: Vec<&RecordBatch> = self.added.iter().collect();
        let pick = |at: Vec<(usize, usize)>| -> Result<Option<RecordBatch>> {
            if at.is_empty() {
                return Ok(None);
            }
            arrow_select::interleave::interleave_record_batch(&batches, &at)
                .map(Some)
                .context(ArrowSnafu {
                    action: "gather changed rows",
                })
        };
        Ok(TableChanges {
            inserted: pick(inserted)?,
            updated: pick(updated)?,
            deleted,
            type_def,
        })
    }
}

/// The offsets of fragment `id` deleted at `after` and live at `before`.
async fn newly_deleted(before: &Dataset, after: &Dataset, id: u64, path: &str) -> Result<Vec<u32>> {
    let deletions = |dataset: &Dataset| {
        let fragment = dataset.get_fragment(id as usize);
        let version = dataset.version().version;
        async move {
            fragment
                .context(FragmentMissingSnafu { path, fragment: id })?
                .get_deletion_vector()
                .await
                .context(ChangeReadSnafu {
                    table: path.to_owned(),
                    version,
                })
        }
    };
    let (was, now) = (deletions(before).await?, deletions(after).await?);
    Ok(now.map_or_else(Vec::new, |now| {
        now.to_sorted_iter()
            .filter(|&offset| !was.as_ref().is_some_and(|was| was.contains(offset)))
            .collect()
    }))
}

/// Whether two versions of one fragment hold the same rows' data (their deletions aside).
fn same_data(a: &Fragment, b: &Fragment) -> bool {
    a.files == b.files && a.overlays == b.overlays && a.physical_rows == b.physical_rows
}

/// The live rows of `fragments` of `dataset` (every column, or only `column`).
async fn scan(
    dataset: &Dataset,
    fragments: Vec<Fragment>,
    column: Option<&str>,
    path: &str,
) -> Result<Vec<RecordBatch>> {
    let read = || ChangeReadSnafu {
        table: path.to_owned(),
        version: dataset.version().version,
    };
    let mut scanner = dataset.scan();
    scanner.with_fragments(fragments);
    if let Some(column) = column {
        scanner.project(&[column]).with_context(|_| read())?;
    }
    scanner
        .try_into_stream()
        .await
        .with_context(|_| read())?
        .try_collect()
        .await
        .with_context(|_| read())
}

pub(crate) fn key_column<'a>(batch: &'a RecordBatch, path: &str) -> Result<&'a StringArray> {
    batch
        .column_by_name("id")
        .and_then(|column| column.as_any().downcast_ref::<StringArray>())
        .context(NoKeyColumnSnafu { table: path })
}
