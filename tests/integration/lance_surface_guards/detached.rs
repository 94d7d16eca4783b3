//! Lance 14's detached commits, which a publisher that stages table versions without
//! moving the tables' heads would stand on. Three facts decide that design: a detached
//! version is readable by its number while the head stays put; the head can only take its
//! rows by a second, attached commit with another number; and cleanup does not count a
//! detached version as a reader of its files.

use std::sync::Arc;

use lance::dataset::cleanup::CleanupPolicyBuilder;
use lance::dataset::CommitBuilder;
use lance_table::format::is_detached_version;

use super::{batch, table, upsert, value_of};

#[tokio::test]
async fn a_detached_version_reads_beside_the_head_and_cleanup_does_not_keep_its_files() {
    let (_dir, store, dataset) = table(&[("a", "0")]).await;
    let head = dataset.version().version;
    let staged = upsert(&dataset, 0)
        .try_build()
        .unwrap()
        .execute_uncommitted_batches(vec![batch(&[("a", "1"), ("b", "2")])])
        .await
        .unwrap();
    let detached = CommitBuilder::new(Arc::new(dataset.clone()))
        .with_detached(true)
        .execute(staged.transaction.clone())
        .await
        .unwrap();
    let number = detached.version().version;
    assert!(
        is_detached_version(number),
        "{number} is an ordinary version"
    );

    let latest = store.open_dataset("t.lance", None).await.unwrap();
    assert_eq!(
        latest.version().version,
        head,
        "a detached commit moved the head"
    );
    assert_eq!(value_of(&latest, "a").await, ["0"]);
    let pinned = latest.checkout_version(number).await.unwrap();
    assert_eq!(pinned.count_rows(None).await.unwrap(), 2);
    assert_eq!(value_of(&pinned, "a").await, ["1"]);

    // No fast-forward: the head takes the staged rows by committing the transaction again,
    // as a new attached version whose number a record written before it could not name.
    let promoted = CommitBuilder::new(Arc::new(latest.clone()))
        .execute(staged.transaction)
        .await
        .unwrap();
    assert_eq!(promoted.version().version, head + 1);
    assert_eq!(value_of(&promoted, "a").await, ["1"]);

    // A second detached version that is never promoted: its rows live only in files no
    // attached version lists. Cleanup keeps such files only while they are younger than its
    // unverified-file threshold (7 days by default), as if a write were still in flight;
    // past it, or with `delete_unverified`, they go and the detached version breaks.
    let orphan = upsert(&promoted, 0)
        .try_build()
        .unwrap()
        .execute_uncommitted_batches(vec![batch(&[("c", "3")])])
        .await
        .unwrap();
    let orphan = CommitBuilder::new(Arc::new(promoted.clone()))
        .with_detached(true)
        .execute(orphan.transaction)
        .await
        .unwrap()
        .version()
        .version;
    let policy = CleanupPolicyBuilder::default()
        .before_timestamp(chrono::Utc::now() + chrono::Duration::seconds(1))
        .build();
    let young = promoted.cleanup_with_policy(policy.clone()).await.unwrap();
    let kept = promoted.checkout_version(orphan).await.unwrap();
    let rows = kept.scan().try_into_batch().await.unwrap();
    assert_eq!(rows.num_rows(), 3, "{young:?}");
    let policy = CleanupPolicyBuilder::default()
        .before_timestamp(chrono::Utc::now() + chrono::Duration::seconds(1))
        .delete_unverified(true)
        .build();
    let removed = promoted.cleanup_with_policy(policy).await.unwrap();
    // A fresh handle: the cleaned one's caches may still hold the removed file.
    let fresh = lance::Dataset::open(&store.uri_of("t.lance"))
        .await
        .unwrap();
    let after = match fresh.checkout_version(orphan).await {
        // A full scan: a row count comes from the manifest and opens no data file.
        Ok(dataset) => match dataset.scan().try_into_batch().await {
            Ok(rows) => Ok(rows.num_rows()),
            Err(error) => Err(error.to_string()),
        },
        Err(error) => Err(error.to_string()),
    };
    assert!(
        after.is_err(),
        "cleanup kept a detached version's files: {removed:?}"
    );
}
