//! The shards of a table's MemWAL and their latest manifests, read from storage.

use lance::dataset::mem_wal::{DatasetMemWalExt, ShardManifestStore};
use lance::Dataset;
use lance_index::mem_wal::ShardManifest;
use snafu::ResultExt;

use crate::error::{LanceSnafu, Result};

/// Every shard `dataset`'s MemWAL knows, with its manifest store and latest manifest
/// (`None` for a shard that never wrote one).
pub(crate) async fn shard_manifests(
    dataset: &Dataset,
    table: &str,
) -> Result<Vec<(ShardManifestStore, Option<ShardManifest>)>> {
    let lance = |action: &'static str| LanceSnafu { action, table };
    let object_store = dataset
        .object_store(None)
        .await
        .context(lance("object store"))?;
    let mut out = Vec::new();
    for shard in dataset
        .list_mem_wal_latest_shard_ids()
        .await
        .context(lance("list shards"))?
    {
        let store = ShardManifestStore::new(
            object_store.clone(),
            &dataset.branch_location().path,
            shard,
            2,
        );
        let manifest = store.latest().await.context(lance("read shard manifest"))?;
        out.push((store, manifest));
    }
    Ok(out)
}
