//! `merge`: bring one branch's changes into another as one graph commit.
//!
//! The merge base is the newest commit both heads descend from. When the target has not
//! moved since then, the merge is a fast-forward: every change of the source is taken.
//! Otherwise it is a key-level three-way merge: a key changed on one side only takes that
//! side; a key changed on both sides to different values is a conflict, and nothing is
//! written. The changes are written to the target's own lineage through the load path
//! (one staged merge-insert per table, the same constraint checker, sidecar and publish),
//! so a merge that would break an edge endpoint, `@card` or `@unique` is refused with the
//! keys, and the commit records both parents.
//!
//! A side's changes are found from Lance's fragments, not by scanning the tables: rows in
//! fragments the base does not have are written (or rewritten) rows, and rows of the
//! base's fragments gone or deleted on the side are removed (or rewritten) rows; a key
//! whose row is the same as at the base counts as unchanged.

use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, UInt32Array, UInt64Array};
use futures::TryStreamExt;
use lance::Dataset;
use lance_table::format::Fragment;
use snafu::ResultExt;
use tributary_publisher::{BranchName, CommitId, CommitRecord, Publisher};
use tributary_schema::{TypeBatch, TypeDef, TypeDeletes, TypeKind};
use tributary_write::lookup::string_column;

pub use crate::merge_keys::{BrokenKey, ConflictKey};

use crate::error::{
    ArrowSnafu, Error, LanceSnafu, MergeBreaksConstraintsSnafu, MergeConflictSnafu,
    MergeIntoItselfSnafu, PublishSnafu, Result,
};
use crate::fold::Claim;
use crate::graph::{branch as branch_name, Graph};
use crate::load::{LoadOptions, Merging};
use crate::writes::Writes;

const MERGE_ACTOR: &str = "tributary:merge";

/// How a merge went.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MergeKind {
    /// Nothing of the source's was missing from the target: nothing was written.
    UpToDate,
    /// The target had not moved since the merge base: the source's changes, all taken.
    FastForward,
    /// Both moved: the changes of each side, key by key.
    ThreeWay,
}

/// Which side's change a merge keeps for a key both branches changed differently.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Prefer {
    /// Keep neither: the merge is refused, naming every such key.
    #[default]
    Neither,
    /// The merged branch's change wins.
    Source,
    /// The target's change stays.
    Target,
}

/// A finished merge.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct MergeOutcome {
    pub kind: MergeKind,
    /// The target's head after the merge (its head before, when up to date).
    pub commit: CommitRecord,
    /// The commit the merge compared both sides against.
    pub base: CommitId,
    /// Type name → rows the merge wrote on the target.
    pub rows: BTreeMap<String, u64>,
    /// Type name → rows the merge deleted on the target.
    pub deleted: BTreeMap<String, u64>,
    /// Keys both sides changed differently, settled by the merge's preference.
    #[serde(default)]
    pub resolved: u64,
}

impl MergeOutcome {
    /// Nothing to take: the target's head as it is.
    fn up_to_date(base: CommitId, head: CommitRecord) -> MergeOutcome {
        MergeOutcome {
            kind: MergeKind::UpToDate,
            commit: head,
            base,
            rows: BTreeMap::new(),
            deleted: BTreeMap::new(),
            resolved: 0,
        }
    }
}

/// One side's changes to one table since the base: keys written with their rows, keys
/// deleted.
#[derive(Default)]
struct Changes {
    /// Rows of the keys written, in the type's schema.
    rows: Option<RecordBatch>,
    /// Key → row in `rows`.
    written: HashMap<String, usize>,
    deleted: HashSet<String>,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.written.is_empty() && self.deleted.is_empty()
    }

    fn change(&self, key: &str) -> Option<Option<usize>> {
        if let Some(&row) = self.written.get(key) {
            return Some(Some(row));
        }
        self.deleted.contains(key).then_some(None)
    }
}

impl Graph {
    /// Merge branch `source` into branch `into` as one commit on `into` (see the module
    /// doc). Everything acknowledged on either side before the call is folded first.
    pub async fn merge_branch(
        &self,
        source: &str,
        into: &str,
        prefer: Prefer,
    ) -> Result<MergeOutcome> {
        let source = branch_name(source)?;
        let target = branch_name(into)?;
        if source == target {
            return MergeIntoItselfSnafu { branch: source }.fail();
        }
        // Both must exist before leases are taken for them.
        self.publisher.head(&source).await.context(PublishSnafu)?;
        self.publisher.head(&target).await.context(PublishSnafu)?;
        let (first, second) = self.write_turns(&source, &target).await?;
        let (source_turn, target_turn) = if first.branch == source {
            (&first, &second)
        } else {
            (&second, &first)
        };
        let merged = async {
            for (branch, turn) in [(&source, source_turn), (&target, target_turn)] {
                // The fold resolves the branch's intents first.
                self.fold_locked_with(&turn.turn, branch, self.settings.fold.policy, Claim::All)
                    .await?;
            }
            self.merge_in_turns(&source, &target, &target_turn.turn, prefer)
                .await
        }
        .await;
        second.turn.end().await;
        first.turn.end().await;
        merged
    }

    async fn merge_in_turns(
        &self,
        source: &BranchName,
        target: &BranchName,
        target_turn: &crate::graph::WriteTurn,
        prefer: Prefer,
    ) -> Result<MergeOutcome> {
        let theirs = self.publisher.head(source).await.context(PublishSnafu)?;
        let ours = self.publisher.head(target).await.context(PublishSnafu)?;
        let base = self.merge_base(&theirs, &ours).await?;
        if base.id == theirs.id {
            return Ok(MergeOutcome::up_to_date(base.id, ours));
        }
        let fast_forward = base.id == ours.id;
        let catalog = target_turn.catalog.clone();
        let mut ordered: Vec<&TypeDef> = catalog.types.iter().collect();
        ordered.sort_by_key(|ty| ty.kind == TypeKind::Edge);

        let mut writes = Writes::default();
        let mut conflicts = Vec::new();
        let mut resolved = 0;
        // Line number → the type and key it stands for, to name what a check refuses.
        let mut lines: Vec<(String, String)> = Vec::new();
        for ty in ordered {
            let path = ty.table_path();
            let theirs_changed = self.changes_since_base(ty, &base, &theirs, &path).await?;
            if theirs_changed.is_empty() {
                continue;
            }
            let ours_changed = if fast_forward {
                Changes::default()
            } else {
                self.changes_since_base(ty, &base, &ours, &path).await?
            };
            let mut take = Vec::new();
            let mut take_lines = Vec::new();
            let mut deletes = TypeDeletes {
                type_name: ty.name.clone(),
                ids: Vec::new(),
                lines: Vec::new(),
            };
            let mut keys: Vec<&String> = theirs_changed
                .written
                .keys()
                .chain(theirs_changed.deleted.iter())
                .collect();
            keys.sort();
            for key in keys {
                let Some(their_change) = theirs_changed.change(key) else {
                    continue;
                };
                if let Some(our_change) = ours_changed.change(key) {
                    let same = match (their_change, our_change) {
                        (None, None) => true,
                        (Some(a), Some(b)) => same_row(
                            theirs_changed.rows.as_ref(),
                            a,
                            ours_changed.rows.as_ref(),
                            b,
                        ),
                        _ => false,
                    };
                    if same {
                        continue;
                    }
                    match prefer {
                        Prefer::Neither => {
                            let (source_value, target_value) = differences(
                                theirs_changed.rows.as_ref().zip(their_change),
                                ours_changed.rows.as_ref().zip(our_change),
                            );
                            conflicts.push(ConflictKey {
                                type_name: ty.name.clone(),
                                key: key.clone(),
                                source_change: change_name(their_change).to_owned(),
                                target_change: change_name(our_change).to_owned(),
                                source_value,
                                target_value,
                            });
                            continue;
                        }
                        Prefer::Target => {
                            resolved += 1;
                            continue;
                        }
                        // Taken below like a change the target did not make.
                        Prefer::Source => resolved += 1,
                    }
                }
                lines.push((ty.name.clone(), key.clone()));
                let line = lines.len() as u64;
                match their_change {
                    Some(row) => {
                        take.push(row as u32);
                        take_lines.push(line);
                    }
                    None => {
                        deletes.ids.push(key.clone());
                        deletes.lines.push(line);
                    }
                }
            }
            if let (Some(rows), false) = (&theirs_changed.rows, take.is_empty()) {
                let indices = UInt32Array::from(take);
                let columns = rows
                    .columns()
                    .iter()
                    .map(|c| arrow_select::take::take(c.as_ref(), &indices, None))
                    .collect::<Result<Vec<_>, _>>()
                    .and_then(|columns| RecordBatch::try_new(rows.schema(), columns))
                    .context(ArrowSnafu {
                        action: "gather the merged rows",
                    })?;
                writes.batches.push(TypeBatch {
                    type_name: ty.name.clone(),
                    batch: columns,
                    lines: take_lines,
                });
            }
            if !deletes.ids.is_empty() {
                writes.deletes.push(deletes);
            }
        }
        // Nothing of the source's is missing from the target (it changed nothing since
        // the base, or the target made each change too): no commit.
        // So is a merge whose every difference the target's side settled (`resolved`
        // says how many): the merge base stays, and a later merge without a preference
        // meets those keys again.
        if writes.is_empty() && conflicts.is_empty() && lines.is_empty() {
            return Ok(MergeOutcome {
                resolved,
                ..MergeOutcome::up_to_date(base.id, ours)
            });
        }
        if !conflicts.is_empty() {
            return MergeConflictSnafu {
                source_branch: source.to_string(),
                target: target.to_string(),
                keys: conflicts,
            }
            .fail();
        }
        let kind = if fast_forward {
            MergeKind::FastForward
        } else {
            MergeKind::ThreeWay
        };
        let options = LoadOptions {
            branch: target.clone(),
            actor: MERGE_ACTOR.to_owned(),
            ..LoadOptions::default()
        };
        let merging = Merging {
            source: source.clone(),
            head: theirs.id.clone(),
        };
        let loaded = self
            .load_in_turn(target_turn, writes, &options, Some(&merging))
            .await;
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(Error::InvalidData { errors }) => {
                let broken: Vec<BrokenKey> = errors
                    .into_iter()
                    .map(|error| {
                        let what = match lines.get((error.line as usize).wrapping_sub(1)) {
                            Some((type_name, key)) => format!("{type_name} `{key}`"),
                            None => error.field.clone().unwrap_or_default(),
                        };
                        BrokenKey {
                            what,
                            reason: error.reason,
                        }
                    })
                    .collect();
                return MergeBreaksConstraintsSnafu {
                    source_branch: source.to_string(),
                    target: target.to_string(),
                    broken,
                }
                .fail();
            }
            Err(error) => return Err(error),
        };
        Ok(MergeOutcome {
            kind,
            base: base.id,
            commit: loaded.commit,
            rows: loaded.rows,
            deleted: loaded.deleted,
            resolved,
        })
    }

    /// The nearest commit both `a` and `b` descend from (through first and merge parents):
    /// commits are visited deepest first from both heads until one is reached from both.
    pub(crate) async fn merge_base(
        &self,
        a: &CommitRecord,
        b: &CommitRecord,
    ) -> Result<CommitRecord> {
        const FROM_A: u8 = 1;
        const FROM_B: u8 = 2;
        let mut seen: HashMap<CommitId, u8> = HashMap::new();
        // Deepest first: a commit is visited after every commit that descends from it,
        // so the sides it is reached from are all known when it is (clocks may disagree).
        let mut queue: BinaryHeap<(u64, i64, CommitId)> = BinaryHeap::new();
        let mut records: HashMap<CommitId, CommitRecord> = HashMap::new();
        for (record, side) in [(a, FROM_A), (b, FROM_B)] {
            *seen.entry(record.id.clone()).or_default() |= side;
            queue.push((record.depth, record.time_micros, record.id.clone()));
            records.insert(record.id.clone(), record.clone());
        }
        while let Some((_, _, id)) = queue.pop() {
            let Some(record) = records.remove(&id) else {
                continue;
            };
            let sides = seen.get(&id).copied().unwrap_or_default();
            if sides == FROM_A | FROM_B {
                return Ok(record);
            }
            for parent in record.parent.iter().chain(record.merged.iter()) {
                let known = seen.contains_key(parent);
                *seen.entry(parent.clone()).or_default() |= sides;
                if !known {
                    let parent_record =
                        self.publisher.commit(parent).await.context(PublishSnafu)?;
                    queue.push((
                        parent_record.depth,
                        parent_record.time_micros,
                        parent.clone(),
                    ));
                    records.insert(parent.clone(), parent_record);
                }
            }
        }
        // Every branch starts from `main`'s first commit, so two heads always meet.
        Err(Error::NoMergeBase {
            a: a.id.to_string(),
            b: b.id.to_string(),
        })
    }

    /// What `side` changed in `ty`'s table since `base`.
    async fn changes_since_base(
        &self,
        ty: &TypeDef,
        base: &CommitRecord,
        side: &CommitRecord,
        path: &str,
    ) -> Result<Changes> {
        let Some(side_table) = self.table_at(side, path).await? else {
            return Ok(Changes::default());
        };
        let base_table = self.table_at(base, path).await?;
        let base_fragments: Vec<Fragment> = base_table
            .as_ref()
            .map(|t| t.manifest().fragments.as_ref().clone())
            .unwrap_or_default();
        let side_fragments = side_table.manifest().fragments.as_ref().clone();
        let side_by_id: HashMap<u64, &Fragment> =
            side_fragments.iter().map(|f| (f.id, f)).collect();
        let base_by_id: HashMap<u64, &Fragment> =
            base_fragments.iter().map(|f| (f.id, f)).collect();

        // Fragments the side wrote: every row in them is a write (or a rewrite).
        let added: Vec<Fragment> = side_fragments
            .iter()
            .filter(|f| !base_by_id.get(&f.id).is_some_and(|b| same_files(b, f)))
            .cloned()
            .collect();
        // The base's fragments the side dropped or deleted rows of.
        let touched: Vec<Fragment> = base_fragments
            .iter()
            .filter(|b| match side_by_id.get(&b.id) {
                Some(s) => !same_files(b, s) || s.deletion_file != b.deletion_file,
                None => true,
            })
            .cloned()
            .collect();

        let mut changes = Changes::default();
        let written = match added.is_empty() {
            true => None,
            false => Some(conformed(
                ty,
                scan(&side_table, added, Read::Rows, path).await?,
            )?),
        };
        let mut removed: HashMap<String, usize> = HashMap::new();
        let mut removed_rows = None;
        if let (Some(base_table), false) = (&base_table, touched.is_empty()) {
            let old = scan(base_table, touched.clone(), Read::RowsAndAddresses, path).await?;
            let still: Vec<Fragment> = touched
                .iter()
                .filter_map(|b| side_by_id.get(&b.id).filter(|s| same_files(b, s)))
                .map(|s| (*s).clone())
                .collect();
            let live: HashSet<u64> = if still.is_empty() {
                HashSet::new()
            } else {
                let rows = scan(&side_table, still, Read::Addresses, path).await?;
                addresses(&rows).into_iter().collect()
            };
            let ids = string_column(&old, "id");
            for (row, address) in addresses(&old).into_iter().enumerate() {
                if !live.contains(&address) {
                    removed.insert(ids.value(row).to_owned(), row);
                }
            }
            removed_rows = Some(conformed(ty, old)?);
        }
        if let Some(rows) = &written {
            let ids = string_column(rows, "id");
            for row in 0..rows.num_rows() {
                let key = ids.value(row);
                let unchanged = removed
                    .get(key)
                    .is_some_and(|&old| same_row(Some(rows), row, removed_rows.as_ref(), old));
                if !unchanged {
                    changes.written.insert(key.to_owned(), row);
                }
            }
        }
        let rewritten: HashSet<&str> = written
            .as_ref()
            .map(|rows| string_column(rows, "id").iter().flatten().collect())
            .unwrap_or_default();
        for key in removed.keys() {
            if !rewritten.contains(key.as_str()) {
                changes.deleted.insert(key.clone());
            }
        }
        changes.rows = written;
        Ok(changes)
    }

    /// `path` at the version `commit` pins, if it pins one (a type added after it does not).
    async fn table_at(&self, commit: &CommitRecord, path: &str) -> Result<Option<Dataset>> {
        if !commit.tables.contains_key(path) {
            return Ok(None);
        }
        commit
            .open_table(&self.store, path)
            .await
            .context(PublishSnafu)
            .map(Some)
    }
}

/// Two fragments hold the same rows (less deletions) when they have the same data files.
fn same_files(a: &Fragment, b: &Fragment) -> bool {
    a.files.len() == b.files.len() && a.files.iter().zip(&b.files).all(|(x, y)| x.path == y.path)
}

/// The live rows of `fragments` of `table`, with their row addresses when asked.
/// What [`scan`] reads of each live row.
#[derive(Clone, Copy, PartialEq)]
enum Read {
    Rows,
    RowsAndAddresses,
    /// Only which rows are live (the key is read too: a scan needs a column).
    Addresses,
}

async fn scan(
    table: &Dataset,
    fragments: Vec<Fragment>,
    read: Read,
    path: &str,
) -> Result<RecordBatch> {
    let lance = || LanceSnafu {
        action: "read a branch's changes",
        table: path,
    };
    let with_address = read != Read::Rows;
    let mut scan = table.scan();
    scan.with_fragments(fragments);
    if read == Read::Addresses {
        scan.project(&["id"]).context(lance())?;
    }
    if with_address {
        scan.with_row_address();
    }
    let batches: Vec<RecordBatch> = scan
        .try_into_stream()
        .await
        .context(lance())?
        .try_collect()
        .await
        .context(lance())?;
    let schema = match batches.first() {
        Some(batch) => batch.schema(),
        None => Arc::new(scan_schema(table, with_address)),
    };
    arrow_select::concat::concat_batches(&schema, &batches).context(ArrowSnafu {
        action: "gather a branch's changes",
    })
}

fn scan_schema(table: &Dataset, with_address: bool) -> arrow_schema::Schema {
    let mut fields: Vec<arrow_schema::FieldRef> = arrow_schema::Schema::from(table.schema())
        .fields()
        .iter()
        .cloned()
        .collect();
    if with_address {
        fields.push(Arc::new(arrow_schema::Field::new(
            "_rowaddr",
            arrow_schema::DataType::UInt64,
            true,
        )));
    }
    arrow_schema::Schema::new(fields)
}

fn addresses(rows: &RecordBatch) -> Vec<u64> {
    rows.column_by_name("_rowaddr")
        .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
        .map(|a| a.values().to_vec())
        .unwrap_or_default()
}

/// Rows in the type's current schema (a side written before a schema change lacks the
/// new fields), without the row addresses.
fn conformed(ty: &TypeDef, rows: RecordBatch) -> Result<RecordBatch> {
    tributary_schema::conform(ty, &rows).context(ArrowSnafu {
        action: "conform a branch's rows to the schema",
    })
}

/// Whether row `a` of `left` equals row `b` of `right` (both in one type's schema).
fn same_row(left: Option<&RecordBatch>, a: usize, right: Option<&RecordBatch>, b: usize) -> bool {
    let (Some(left), Some(right)) = (left, right) else {
        return false;
    };
    left.columns()
        .iter()
        .zip(right.columns())
        .all(|(x, y)| x.slice(a, 1).as_ref() == y.slice(b, 1).as_ref())
}

/// What each side holds for a conflicting key, as the fields in which they differ
/// (`age: 37, status: active`), or `None` for a side that deleted it. Long values are cut.
fn differences(
    source: Option<(&RecordBatch, usize)>,
    target: Option<(&RecordBatch, usize)>,
) -> (Option<String>, Option<String>) {
    const LONGEST: usize = 40;
    let render = |side: Option<(&RecordBatch, usize)>, other: Option<(&RecordBatch, usize)>| {
        let (rows, row) = side?;
        let options = arrow_cast::display::FormatOptions::default().with_null("null");
        let mut fields = Vec::new();
        for (position, field) in rows.schema().fields().iter().enumerate() {
            if field.name() == "id" {
                continue;
            }
            let column = rows.column(position);
            let same = other.is_some_and(|(other_rows, other_row)| {
                other_rows
                    .column_by_name(field.name())
                    .is_some_and(|theirs| {
                        theirs.slice(other_row, 1).as_ref() == column.slice(row, 1).as_ref()
                    })
            });
            // Against a deletion the whole row is news, but its empty fields are not.
            if same || (other.is_none() && column.is_null(row)) {
                continue;
            }
            let shown = arrow_cast::display::ArrayFormatter::try_new(column.as_ref(), &options)
                .map(|formatter| formatter.value(row).to_string())
                .unwrap_or_else(|_| "?".to_owned());
            let shown = match shown.char_indices().nth(LONGEST) {
                Some((cut, _)) => format!("{}…", &shown[..cut]),
                None => shown,
            };
            fields.push(format!("{}: {shown}", field.name()));
        }
        Some(fields.join(", "))
    };
    (render(source, target), render(target, source))
}

fn change_name(change: Option<usize>) -> &'static str {
    match change {
        Some(_) => "changed",
        None => "deleted",
    }
}
