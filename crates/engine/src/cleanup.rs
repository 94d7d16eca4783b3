//! `cleanup`: remove what no reader at a branch head can need — MemWAL state folded into
//! the published table versions, branch lineages nothing reads, and Lance versions older
//! than the retention window that no head or merge base pins (with the data files only
//! they referenced).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;
use tributary_storage::layout;

use chrono::Utc;
use lance::dataset::cleanup::CleanupPolicyBuilder;
use snafu::ResultExt;
use tributary_memwal_adapter::{collect_memwal_garbage, MemWalGarbage, MemWalTable};
use tributary_publisher::{
    BranchName, CommitRecord, GraphPublisher, Publisher, MANIFEST_PATH, MANIFEST_VERSIONS_KEPT,
};

use crate::error::{Error, LanceSnafu, PublishSnafu, Result, RetentionTooLongSnafu, StorageSnafu};
use crate::graph::{At, Graph};
use tributary_schema::TablePath;

/// What one cleanup removed.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct CleanupReport {
    pub memwal: MemWalGarbage,
    /// Lance versions removed, over all tables (and the manifest table).
    pub versions: u64,
    /// Bytes of data, deletion, index and transaction files removed with them.
    pub version_bytes: u64,
    /// Branch lineages removed (a deleted branch's, or a stopped create's), each counted
    /// once whatever the number of tables.
    #[serde(default)]
    pub branches: u64,
    /// Transaction records removed (a graph on the record publisher; its commits stay,
    /// each an object of its own).
    #[serde(default)]
    pub commit_records: u64,
    /// The pins whose snapshots were kept: each pin's name, commit and the table
    /// versions kept for it.
    #[serde(default)]
    pub kept_for_pins: Vec<KeptPin>,
}

/// A pin cleanup honoured.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct KeptPin {
    pub pin: String,
    pub commit: String,
    /// Table path → the Lance version kept.
    pub tables: BTreeMap<TablePath, u64>,
}

/// (table, Lance branch or `None` for main's lineage) → the oldest version to keep.
type Pins = BTreeMap<(TablePath, Option<String>), u64>;

impl Graph {
    /// Remove MemWAL state at or below the compaction mark of the versions each branch's
    /// head pins; branch lineages no head and no merge base of two heads reads; and, in
    /// every lineage, Lance versions older than `older_than` except from the oldest a head
    /// or a merge base pins on.
    /// Safe beside running ingests and folds: nothing a head or an in-flight write can
    /// reach is touched (unreferenced files younger than Lance's own 7-day window stay).
    /// Reads at commits older than `older_than` may fail afterwards.
    pub async fn cleanup(&self, older_than: Duration) -> Result<CleanupReport> {
        // A retention reaching before the calendar's start is as wrong as one past
        // chrono's range: both are refused, never a panic.
        let cutoff = chrono::Duration::from_std(older_than)
            .ok()
            .and_then(|retention| Utc::now().checked_sub_signed(retention))
            .ok_or_else(|| RetentionTooLongSnafu { older_than }.build())?;
        let head = self.snapshot(&At::default()).await?;
        let heads = self.branches().await?;
        let mut report = CleanupReport::default();
        let pins = self.oldest_pins(&heads, &mut report).await?;
        // Lineages nothing reads go first, then the branches' old versions: what they
        // held of `main`'s files is then free for `main`'s pass, in this same cleanup.
        self.remove_stale_lineages(&heads, &pins, &mut report)
            .await?;
        self.remove_lineage_versions(&pins, cutoff, &mut report)
            .await?;
        let catalog = self.catalog();
        // Each branch's MemWAL, under its head's versions, as `main`'s below.
        for branch in heads.iter().filter(|h| !h.branch.is_main()) {
            for ty in &catalog.types {
                let path = ty.table_path();
                let Some(&pinned) = branch.tables.get(&path) else {
                    continue;
                };
                let at = MemWalTable::on(&path, branch.lineage.as_deref());
                let removed = collect_memwal_garbage(&self.store, &at, pinned)
                    .await
                    .map_err(Error::from_memwal)?;
                report.memwal.add(&removed);
            }
        }
        let mut tables: Vec<TablePath> = catalog.types.iter().map(|t| t.table_path()).collect();
        tables.push(tributary_write::REJECTS_PATH);
        for path in tables {
            let Some(&pinned) = head.tables.get(&path) else {
                continue;
            };
            // Every type's table: one that stopped being streamed keeps its sealed
            // MemWAL, whose folded files go like any other's.
            let typed = catalog.types.iter().any(|t| t.table_path() == path);
            if typed {
                let removed =
                    collect_memwal_garbage(&self.store, &MemWalTable::main(&path), pinned)
                        .await
                        .map_err(Error::from_memwal)?;
                report.memwal.add(&removed);
            }
            let oldest = pins.get(&(path.clone(), None)).copied().unwrap_or(pinned);
            self.remove_old_versions(&path, None, Some(oldest), cutoff, &mut report)
                .await?;
        }
        match &self.publisher {
            // The manifest's head is its latest version, which Lance always keeps; recent
            // versions stay too, because a publisher that read an older one resolves its
            // compare-and-swap conflict through their transaction files.
            GraphPublisher::Manifest(_) => {
                let manifest_cutoff = cutoff.min(
                    Utc::now() - chrono::Duration::seconds(MANIFEST_VERSIONS_KEPT.as_secs() as i64),
                );
                self.remove_old_versions(MANIFEST_PATH, None, None, manifest_cutoff, &mut report)
                    .await?;
            }
            // Every commit is an object of its own once finalized; the records below the
            // newest go, the pruned-through boundary raised first.
            // One prune at a time: in `main`'s write turn.
            GraphPublisher::Record(records) => {
                let turn = self.write_turn(&BranchName::main()).await?;
                let pruned = records.prune(older_than).await.context(PublishSnafu);
                turn.end().await;
                report.commit_records = pruned?;
            }
        }
        Ok(report)
    }

    /// Every other branch's lineages lose their old versions as `main`'s do (Lance keeps,
    /// in a lineage, what the branches made from it still read).
    async fn remove_lineage_versions(
        &self,
        pins: &Pins,
        cutoff: chrono::DateTime<Utc>,
        report: &mut CleanupReport,
    ) -> Result<()> {
        for ((path, lance_branch), &oldest) in pins {
            let Some(lance_branch) = lance_branch else {
                continue;
            };
            self.remove_old_versions(path, Some(lance_branch), Some(oldest), cutoff, report)
                .await?;
        }
        Ok(())
    }

    /// Remove the lineages no head and no merge base of two heads reads (a deleted
    /// branch's, a stopped create's).
    async fn remove_stale_lineages(
        &self,
        heads: &[CommitRecord],
        pins: &Pins,
        report: &mut CleanupReport,
    ) -> Result<()> {
        let live: HashSet<&str> = pins.keys().filter_map(|(_, l)| l.as_deref()).collect();
        // Every table a head pins, and the dead letters, which a branch's first fold with
        // rejects may have forked with no head pinning them yet.
        let mut tables: BTreeSet<TablePath> = heads
            .iter()
            .flat_map(|h| h.tables.keys().cloned())
            .collect();
        if self
            .store
            .dataset_exists(&tributary_write::REJECTS_PATH)
            .await
            .context(StorageSnafu)?
        {
            tables.insert(tributary_write::REJECTS_PATH);
        }
        let mut stale: BTreeSet<String> = BTreeSet::new();
        for path in &tables {
            let lineages = self.lineages_of(path).await?;
            stale.extend(lineages.into_iter().filter(|l| !live.contains(l.as_str())));
        }
        // A lineage forked from another keeps it until it goes itself: pass again while
        // a pass removes something.
        let mut left: Vec<String> = stale.into_iter().collect();
        loop {
            let before = left.len();
            let mut kept = Vec::new();
            for lineage in left {
                if self.remove_stale_lineage(&tables, &lineage).await? {
                    report.branches += 1;
                } else {
                    kept.push(lineage);
                }
            }
            left = kept;
            if left.is_empty() || left.len() == before {
                return Ok(());
            }
        }
    }

    /// Remove `lineage` from every table unless a head names it; `false` if it stays.
    async fn remove_stale_lineage(
        &self,
        tables: &BTreeSet<TablePath>,
        lineage: &str,
    ) -> Result<bool> {
        // A lineage is `<branch>.<suffix>`; a create holds the branch's turn until its head
        // is published, so in the turn a lineage no head names is nobody's.
        let Some(name) = lineage
            .rsplit_once('.')
            .and_then(|(name, _)| BranchName::new(name).ok())
        else {
            return Ok(false);
        };
        let turn = self.write_turn(&name).await?;
        let removed: Result<bool> = async {
            let head = match self.publisher.head(&name).await {
                Ok(head) => head.lineage,
                Err(tributary_publisher::Error::BranchNotFound { .. }) => None,
                Err(source) => return Err(Error::Publish { source }),
            };
            if head.as_deref() == Some(lineage) {
                return Ok(false);
            }
            // The marker goes before the tables: a send may rely on it only while the
            // lineage's seals stand.
            self.store
                .delete(&crate::branches::lineage_marker(lineage))
                .await
                .context(StorageSnafu)?;
            let mut removed = true;
            for path in tables {
                removed &= self.drop_lineage(path, lineage).await?;
            }
            if removed {
                // What streams kept beside the lineage: producer marks and leases, the
                // last fold error.
                for dir in [
                    tributary_write::producers_dir(lineage),
                    format!(
                        "{}/{}",
                        layout::STATUS,
                        tributary_write::path_segment(lineage)
                    ),
                ] {
                    self.store.delete_tree(&dir).await.context(StorageSnafu)?;
                }
            }
            Ok(removed)
        }
        .await;
        turn.end().await;
        removed
    }

    /// The names of the Lance branches of the table at `path`.
    async fn lineages_of(&self, path: &str) -> Result<Vec<String>> {
        let root = self
            .store
            .open_dataset(path, None)
            .await
            .context(StorageSnafu)?;
        let listed = root.list_branches().await.context(LanceSnafu {
            action: "list branches",
            table: path.to_owned(),
        })?;
        Ok(listed.into_keys().collect())
    }

    /// Remove the Lance branch `lineage` of the table at `path`, if it is there; `false`
    /// when Lance keeps it because a lineage forked from it still reads it (it goes at a
    /// cleanup after that one).
    async fn drop_lineage(&self, path: &str, lineage: &str) -> Result<bool> {
        // A forced delete of a lineage a table does not have (a stopped create forks the
        // tables one by one) removes nothing and is no error.
        let mut root = self
            .store
            .open_dataset(path, None)
            .await
            .context(StorageSnafu)?;
        match root.force_delete_branch(lineage).await {
            Ok(()) => Ok(true),
            Err(lance::Error::RefConflict { message, .. }) => {
                tracing::info!(table = path, lineage, %message, "a branch lineage is still read by another");
                Ok(false)
            }
            Err(source) => Err(Error::Lance {
                action: "delete a branch".to_owned(),
                table: path.to_owned(),
                source,
            }),
        }
    }

    /// Per table and lineage, the oldest version a reader may still need: what each
    /// branch head pins, and what the merge base of each two heads pins (a later merge
    /// of them compares both sides against it).
    async fn oldest_pins(
        &self,
        heads: &[CommitRecord],
        report: &mut CleanupReport,
    ) -> Result<Pins> {
        let mut needed: Vec<CommitRecord> = heads.to_vec();
        for (i, a) in heads.iter().enumerate() {
            for b in &heads[i + 1..] {
                needed.push(self.merge_base(a, b).await?);
            }
        }
        // A pinned snapshot is needed as a head is: its versions, and its lineage.
        for pin in self.pins().await? {
            let commit = self.snapshot(&At::Commit(pin.commit.clone())).await?;
            report.kept_for_pins.push(KeptPin {
                pin: pin.name,
                commit: commit.id.to_string(),
                tables: commit.tables.clone(),
            });
            needed.push(commit);
        }
        let mut pins = Pins::new();
        for commit in &needed {
            let lineage = commit.lineage.clone();
            for (path, &version) in &commit.tables {
                let oldest = pins
                    .entry((path.clone(), lineage.clone()))
                    .or_insert(version);
                *oldest = (*oldest).min(version);
            }
        }
        Ok(pins)
    }

    async fn remove_old_versions(
        &self,
        path: &str,
        lance_branch: Option<&str>,
        pinned: Option<u64>,
        cutoff: chrono::DateTime<Utc>,
        report: &mut CleanupReport,
    ) -> Result<()> {
        let mut cutoff = cutoff;
        if let Some(version) = pinned {
            let at_pin = self
                .store
                .open_dataset_on(path, lance_branch, Some(version))
                .await
                .context(StorageSnafu)?;
            // Versions strictly older than the cutoff go: the pinned one never does.
            cutoff = cutoff.min(at_pin.version().timestamp);
        }
        let latest = self
            .store
            .open_dataset_on(path, lance_branch, None)
            .await
            .context(StorageSnafu)?;
        let policy = CleanupPolicyBuilder::default()
            .before_timestamp(cutoff)
            .build();
        let stats = latest
            .cleanup_with_policy(policy)
            .await
            .context(LanceSnafu {
                action: "remove old versions",
                table: path,
            })?;
        report.versions += stats.old_versions;
        report.version_bytes += stats.bytes_removed;
        Ok(())
    }
}
