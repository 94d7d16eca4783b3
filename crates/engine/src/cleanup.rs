//! `cleanup`: remove what no reader at a branch head can need — MemWAL state folded into
//! the published table versions, and Lance versions older than the retention window that
//! no head pins (with the data files only they referenced).

use std::time::Duration;

use chrono::Utc;
use lance::dataset::cleanup::CleanupPolicyBuilder;
use snafu::ResultExt;
use tributary_memwal_adapter::{collect_memwal_garbage, MemWalGarbage};
use tributary_publisher::MANIFEST_PATH;

use crate::error::{Error, LanceSnafu, Result, RetentionTooLongSnafu, StorageSnafu};
use crate::graph::{At, Graph};
use tributary_schema::TablePath;

/// Manifest versions younger than this (seconds) are never removed.
const MANIFEST_MIN_RETENTION_S: i64 = 60;

/// What one cleanup removed.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CleanupReport {
    pub memwal: MemWalGarbage,
    /// Lance versions removed, over all tables (and the manifest table).
    pub versions: u64,
    /// Bytes of data, deletion, index and transaction files removed with them.
    pub version_bytes: u64,
}

impl Graph {
    /// Remove MemWAL state at or below the compaction mark of the versions the `main`
    /// head pins, and Lance versions older than `older_than` except those the head pins.
    /// Safe beside running ingests and folds: nothing a head or an in-flight write can
    /// reach is touched (unreferenced files younger than Lance's own 7-day window stay).
    /// Reads at commits older than `older_than` may fail afterwards.
    pub async fn cleanup(&self, older_than: Duration) -> Result<CleanupReport> {
        let cutoff = Utc::now()
            - chrono::Duration::from_std(older_than)
                .map_err(|_| RetentionTooLongSnafu { older_than }.build())?;
        let head = self.snapshot(&At::default()).await?;
        let mut report = CleanupReport::default();
        let catalog = self.catalog();
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
                let removed = collect_memwal_garbage(&self.store, &path, pinned)
                    .await
                    .map_err(Error::from_memwal)?;
                report.memwal.add(&removed);
            }
            self.remove_old_versions(&path, Some(pinned), cutoff, &mut report)
                .await?;
        }
        // The manifest's head is its latest version, which Lance always keeps; recent
        // versions stay too, because a publisher that read an older one resolves its
        // compare-and-swap conflict through their transaction files.
        let manifest_cutoff =
            cutoff.min(Utc::now() - chrono::Duration::seconds(MANIFEST_MIN_RETENTION_S));
        self.remove_old_versions(MANIFEST_PATH, None, manifest_cutoff, &mut report)
            .await?;
        Ok(report)
    }

    async fn remove_old_versions(
        &self,
        path: &str,
        pinned: Option<u64>,
        cutoff: chrono::DateTime<Utc>,
        report: &mut CleanupReport,
    ) -> Result<()> {
        let mut cutoff = cutoff;
        if let Some(version) = pinned {
            let at_pin = self
                .store
                .open_dataset(path, Some(version))
                .await
                .context(StorageSnafu)?;
            // Versions strictly older than the cutoff go: the pinned one never does.
            cutoff = cutoff.min(at_pin.version().timestamp);
        }
        let latest = self
            .store
            .open_dataset(path, None)
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
