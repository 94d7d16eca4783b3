use tributary::{LoadOptions, OpCounter, OpKind, PathClass};
use tributary_storage::{GraphStore, GraphStoreWrapper};
use tributary_tests::{ndjson, person, SCHEMA};

#[test]
fn the_local_store_fsyncs_files_and_directories() {
    // object_store's LocalFileSystem syncs files and parent directories only when built
    // `with_fsync(true)`; its Debug output is the only place the flag shows.
    let store = GraphStoreWrapper::new(true, None, None).local_store();
    assert!(format!("{store:?}").contains("fsync: true"), "{store:?}");
    let counted = GraphStoreWrapper::new(true, Some(OpCounter::new()), None).local_store();
    assert!(
        format!("{counted:?}").contains("fsync: true"),
        "{counted:?}"
    );
}

#[tokio::test]
async fn every_write_of_a_load_goes_through_the_graph_store() {
    let dir = tempfile::tempdir().unwrap();
    let counter = OpCounter::new();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let store = GraphStore::with_counter(&uri, Some(counter.clone())).unwrap();
    let graph = tributary::Graph::builder_on(store)
        .init(SCHEMA)
        .await
        .unwrap();
    let before = counter.snapshot();
    graph
        .load(&ndjson(&[person("ada", 36)]), &LoadOptions::default())
        .await
        .unwrap();
    let load = counter.snapshot().since(&before);
    let writes = |class| {
        load.ops
            .iter()
            .filter(|((k, c), _)| {
                *c == class
                    && matches!(
                        k,
                        OpKind::Put | OpKind::PutMultipart | OpKind::Copy | OpKind::Rename
                    )
            })
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    assert!(
        writes(PathClass::Data) >= 1,
        "data file not written through the store: {load}"
    );
    assert!(
        writes(PathClass::Manifest) >= 2,
        "table + __manifest versions: {load}"
    );
    assert_eq!(writes(PathClass::Recovery), 1, "one sidecar: {load}");
    assert_eq!(
        load.of_kind(OpKind::Delete),
        1,
        "the sidecar is deleted: {load}"
    );
}

#[tokio::test]
async fn reopened_and_checked_out_datasets_keep_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let counter = OpCounter::new();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let store = GraphStore::with_counter(&uri, Some(counter.clone())).unwrap();
    let graph = tributary::Graph::builder_on(store.clone())
        .init(SCHEMA)
        .await
        .unwrap();
    graph
        .load(&ndjson(&[person("ada", 36)]), &LoadOptions::default())
        .await
        .unwrap();
    graph
        .load(&ndjson(&[person("bob", 36)]), &LoadOptions::default())
        .await
        .unwrap();

    // A second store on the same root (a fresh process) with its own counter.
    let fresh = OpCounter::new();
    let other = GraphStore::with_counter(&uri, Some(fresh.clone())).unwrap();
    let dataset = other
        .open_dataset("nodes/Person.lance", None)
        .await
        .unwrap();
    let opened = fresh.snapshot().total();
    assert!(opened > 0, "open did not use the wrapped store");
    let old = dataset.checkout_version(2).await.unwrap();
    assert_eq!(old.count_rows(None).await.unwrap(), 1);
    let rows = old.scan().try_into_batch().await.unwrap();
    assert_eq!(rows.num_rows(), 1);
    assert!(
        fresh.snapshot().total() > opened,
        "checkout_version dropped the wrapper"
    );
    assert!(
        fresh.snapshot().of_class(PathClass::Data) >= 1,
        "data reads bypassed the wrapper"
    );
}
