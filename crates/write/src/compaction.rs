//! Small fragments merged as the writes that make them go by. Every load adds a fragment
//! to each table it writes; a table of many one-row loads would otherwise list thousands
//! of fragments in each version's manifest, and a fresh process's read would pay for
//! every one (the manifest it reads, the index segments it probes).

use lance::dataset::optimize::{compact_files, CompactionOptions};
use lance::Dataset;
use snafu::ResultExt;

use crate::error::{LanceSnafu, Result};

/// A fragment below this many rows is small: compaction merges small fragments up to it
/// and rewrites nothing else (not even a large fragment's deleted rows), so the upkeep a
/// write pays stays bounded by the small fragments whatever the table's size.
pub const ROWS_PER_FRAGMENT: usize = 16 * 1024;

/// Compaction runs when a write leaves more small fragments than this: what a read pays
/// per fragment stays bounded, and a run of one-row loads compacts once in this many.
pub const MAX_SMALL_FRAGMENTS: usize = 16;

/// Merge the table's small fragments when there are more than [`MAX_SMALL_FRAGMENTS`].
/// Indexes are remapped by Lance in the same commit.
pub async fn compact_small_fragments(dataset: &mut Dataset) -> Result<()> {
    let small = dataset
        .get_fragments()
        .iter()
        .filter(|f| {
            f.metadata()
                .physical_rows
                .is_some_and(|rows| rows < ROWS_PER_FRAGMENT)
        })
        .count();
    if small <= MAX_SMALL_FRAGMENTS {
        return Ok(());
    }
    let table = dataset.uri().to_owned();
    let options = CompactionOptions {
        target_rows_per_fragment: ROWS_PER_FRAGMENT,
        materialize_deletions: false,
        ..Default::default()
    };
    // Boxed: compaction's future is large, and every write's future would carry it (a
    // test thread's 2 MiB stack overflowed).
    let metrics = Box::pin(compact_files(dataset, options, None))
        .await
        .context(LanceSnafu {
            action: "compact",
            table,
        })?;
    tracing::debug!(
        removed = metrics.fragments_removed,
        added = metrics.fragments_added,
        "small fragments compacted"
    );
    Ok(())
}
