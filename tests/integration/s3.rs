//! Graphs on S3: the test S3 server (tests/s3-server, started per test), the same write
//! paths as on a local disk, and the same oracle under injected latency and failures.

use std::collections::{BTreeMap, BTreeSet};

use arrow_array::{Array, StringArray};
use tributary::{Graph, ReadOptions, StoreOptions};
use tributary_storage::{FaultKind, Faults};
use tributary_tests::s3_server::S3Server;
use tributary_tests::{ndjson, s3_options, SCHEMA};

pub(crate) fn line(key: &str, value: &str) -> String {
    format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"{key}\",\"bio\":\"{value}\"}}}}")
}

/// Every Person row as (name, bio), in key order; a key seen twice is a failure.
pub(crate) async fn people(graph: &Graph) -> BTreeMap<String, String> {
    let batch = graph.read("Person", &ReadOptions::default()).await.unwrap();
    let names = batch
        .column_by_name("name")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .clone();
    let bios = batch
        .column_by_name("bio")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .clone();
    let mut rows = BTreeMap::new();
    for i in 0..batch.num_rows() {
        let bio = if bios.is_null(i) {
            String::new()
        } else {
            bios.value(i).to_owned()
        };
        let before = rows.insert(names.value(i).to_owned(), bio);
        assert!(
            before.is_none(),
            "{} is visible twice: {:?} and {}",
            names.value(i),
            before,
            bios.value(i)
        );
    }
    rows
}

/// The log of `main` is a chain from the head to the first commit.
pub(crate) async fn assert_chain(graph: &Graph) {
    let log = graph.log("main", 100_000).await.unwrap();
    for pair in log.windows(2) {
        assert_eq!(
            pair[0].parent.as_ref(),
            Some(&pair[1].id),
            "the log is not a chain"
        );
    }
    assert_eq!(
        log.last().unwrap().parent,
        None,
        "the chain does not end at init"
    );
}

#[tokio::test]
async fn a_graph_on_s3_loads_ingests_folds_and_reopens() {
    let s3 = S3Server::start();
    let uri = s3.uri("people");
    let graph = Graph::builder(&uri)
        .store_options(s3_options(&s3))
        .init(SCHEMA)
        .await
        .unwrap();
    let loaded: Vec<String> = (0..5).map(|i| line(&format!("l{i}"), "loaded")).collect();
    graph
        .load(&ndjson(&loaded), &Default::default())
        .await
        .unwrap();
    let streamed: Vec<String> = (0..7).map(|i| line(&format!("s{i}"), "streamed")).collect();
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(&streamed))
        .await
        .unwrap();
    assert_eq!(ack.durable_rows, 7);
    assert_eq!(
        people(&graph).await.len(),
        5,
        "ingest is not visible before a fold"
    );
    graph.fold("main").await.unwrap();
    assert_eq!(people(&graph).await.len(), 12);
    graph.cleanup(std::time::Duration::ZERO).await.unwrap();
    drop(graph);

    // Everything lives in the bucket: another handle sees the same graph.
    let reopened = Graph::builder(&uri)
        .store_options(s3_options(&s3))
        .open()
        .await
        .unwrap();
    assert_eq!(people(&reopened).await.len(), 12);
    assert_chain(&reopened).await;
    let commit_point = match reopened.publisher_kind() {
        tributary::PublisherKind::Manifest => "__manifest.lance",
        tributary::PublisherKind::Record => "__txn",
    };
    assert!(
        s3.dir
            .path()
            .join("graphs/people")
            .join(commit_point)
            .is_dir(),
        "the graph is not in the bucket"
    );
}

#[tokio::test]
async fn a_store_that_ignores_conditional_put_is_refused_before_anything_is_written() {
    let s3 = S3Server::start_with(&["--ignore-conditional-writes"]);
    let uri = s3.uri("unsafe");
    let error = Graph::builder(&uri)
        .store_options(s3_options(&s3))
        .init(SCHEMA)
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("conditional PUT") && message.contains(&uri),
        "{message}"
    );
    assert_eq!(
        error.kind(),
        tributary::ErrorKind::InvalidInput,
        "{message}"
    );
    let left: Vec<_> = walk(&s3.dir.path().join("graphs"));
    assert!(left.is_empty(), "a refused init left {left:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// What each key may show at the end: the value of its last acknowledged write, or of a
/// later write whose outcome is unknown (it failed, but may have landed).
#[derive(Default)]
pub(crate) struct Oracle {
    allowed: BTreeMap<String, Vec<String>>,
    acknowledged: BTreeSet<String>,
}

impl Oracle {
    pub(crate) fn acknowledged(&mut self, key: &str, value: &str) {
        self.allowed.insert(key.to_owned(), vec![value.to_owned()]);
        self.acknowledged.insert(key.to_owned());
    }

    pub(crate) fn maybe(&mut self, key: &str, value: &str) {
        self.allowed
            .entry(key.to_owned())
            .or_default()
            .push(value.to_owned());
    }

    pub(crate) fn check(&self, seen: &BTreeMap<String, String>, context: &str) {
        for key in &self.acknowledged {
            assert!(
                seen.contains_key(key),
                "{context}: acknowledged {key} is lost"
            );
        }
        for (key, value) in seen {
            let allowed = self.allowed.get(key).map(Vec::as_slice).unwrap_or(&[]);
            assert!(
                allowed.contains(value),
                "{context}: {key} shows {value}, allowed {allowed:?}"
            );
        }
    }
}

/// A fold whose read of the graph's embedder settings fails (the store refused it) fails
/// whole and changes nothing: the acknowledged rows are folded by the next fold, never
/// dead-lettered as if their texts were to blame (found by the faulty-store oracle: an
/// acknowledged send of `k0` reverted to an older load's value).
#[tokio::test]
async fn a_failed_settings_read_fails_the_fold_and_dead_letters_no_acknowledged_row() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    Graph::init(&uri, SCHEMA).await.unwrap();
    let faults = Faults::new();
    let graph = Graph::builder(&uri)
        .store_options(StoreOptions {
            faults: Some(faults.clone()),
            ..Default::default()
        })
        .open()
        .await
        .unwrap();
    graph
        .load(&ndjson(&[line("k0", "old")]), &Default::default())
        .await
        .unwrap();
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(&[line("k0", "new")]))
        .await
        .unwrap();
    assert_eq!(ack.durable_rows, 1);
    faults.fail_next("__settings/embedder.json", FaultKind::Refused, 1);
    let failed = graph.fold("main").await.unwrap_err();
    assert_eq!(failed.kind(), tributary::ErrorKind::Unavailable, "{failed}");
    assert!(failed.to_string().contains("embedder settings"), "{failed}");
    assert_eq!(faults.injected().values().sum::<u64>(), 1);
    graph.fold("main").await.unwrap();
    assert_eq!(people(&graph).await["k0"], "new");
    let rejects = graph.rejects(&tributary::At::default()).await.unwrap();
    assert_eq!(rejects.num_rows(), 0);
}

/// Loads, ingest sends, folds and cleanups against a store that fails `rate` of its
/// operations (every kind of fault), then a last fold on a healthy store: the oracle holds.
async fn run_under_faults(uri: &str, healthy: StoreOptions, faults: Faults, seed: u64) {
    tributary_tests::log_if_asked();
    // A flush that meets a fault is retried by Lance after a growing pause: folds do not
    // wait long for one (they fail as unavailable, and a later one takes the rows).
    let settings = tributary::GraphSettings {
        writer: tributary::WriterSettings {
            flush_patience: std::time::Duration::from_secs(2),
            ..Default::default()
        },
        ..Default::default()
    };
    // Made on a healthy store: an init that meets a fault fails whole, which is not what
    // this test is about.
    Graph::builder(uri)
        .store_options(healthy.clone())
        .init(SCHEMA)
        .await
        .unwrap();
    let graph = Graph::builder(uri)
        .settings(settings)
        .store_options(StoreOptions {
            faults: Some(faults.clone()),
            ..healthy.clone()
        })
        .open()
        .await
        .unwrap();
    let mut oracle = Oracle::default();
    let mut rng = seed;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut failures = 0;
    for op in 0..60u64 {
        let rows: BTreeMap<String, String> = (0..=next(3))
            .map(|_| {
                let key = format!("k{}", next(10));
                let value = format!("op{op}-{key}");
                (key, value)
            })
            .collect();
        let text = ndjson(&rows.iter().map(|(k, v)| line(k, v)).collect::<Vec<_>>());
        match next(5) {
            0 | 1 => match graph.load(&text, &Default::default()).await {
                Ok(_) => rows.iter().for_each(|(k, v)| oracle.acknowledged(k, v)),
                Err(_) => {
                    failures += 1;
                    rows.iter().for_each(|(k, v)| oracle.maybe(k, v));
                }
            },
            2 | 3 => {
                let sent = match graph.ingest("main") {
                    Ok(ingestor) => ingestor.send(1, &text).await,
                    Err(error) => Err(error),
                };
                match sent {
                    Ok(ack) if ack.durable_rows == rows.len() as u64 => {
                        rows.iter().for_each(|(k, v)| oracle.acknowledged(k, v))
                    }
                    _ => {
                        failures += 1;
                        rows.iter().for_each(|(k, v)| oracle.maybe(k, v));
                    }
                }
            }
            _ => {
                if graph.fold("main").await.is_err() {
                    failures += 1;
                }
                if next(4) == 0 && graph.cleanup(std::time::Duration::ZERO).await.is_err() {
                    failures += 1;
                }
            }
        }
    }
    // The store heals; whatever was left half-done is resolved and everything folds. A
    // writer whose memtable flush met a fault may fail to close (Lance refuses to flush a
    // newer memtable past the failed one): what it acknowledged is in its WAL, and the fold
    // claims the shard and replays it.
    faults.set_rate(0.0);
    let _ = graph.close_writers().await;
    graph.recover().await.unwrap();
    graph.fold("main").await.unwrap();
    let injected = faults.injected();
    assert!(
        injected.values().sum::<u64>() > 0 && failures > 0,
        "no fault struck: {injected:?}"
    );
    let context = format!("seed {seed}, faults {injected:?}, {failures} failed operations");
    oracle.check(&people(&graph).await, &context);
    assert_chain(&graph).await;
    drop(graph);
    // A process that starts afterwards, on a healthy store, sees the same.
    let reopened = Graph::builder(uri)
        .store_options(healthy)
        .open()
        .await
        .unwrap();
    oracle.check(&people(&reopened).await, &context);
}

/// `TRIBUTARY_FAULT_SEED` picks another sequence of injected faults (default 7), to hunt
/// with.
#[tokio::test]
async fn on_s3_with_failing_operations_no_acknowledged_write_is_lost_or_doubled() {
    let s3 = S3Server::start();
    let faults = Faults::new().with_random(
        0.03,
        std::env::var("TRIBUTARY_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(7),
    );
    run_under_faults(&s3.uri("faulty"), s3_options(&s3), faults, 0x5eed).await;
}

#[tokio::test]
async fn on_a_local_disk_with_failing_operations_no_acknowledged_write_is_lost_or_doubled() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let faults = Faults::new().with_random(0.03, 11);
    run_under_faults(&uri, StoreOptions::default(), faults, 0xfeed).await;
}

/// Every object a write creates conditionally (table versions, the manifest's, WAL entries
/// and shard manifests, leases), and the sidecars it puts, with the response lost once,
/// both ways a client hears it (an error, or its retry's "already exists"): the write
/// either fails and is resolved, or succeeds; nothing is doubled or lost.
#[tokio::test]
async fn a_lost_response_on_each_conditional_create_is_resolved_safely() {
    let s3 = S3Server::start();
    // The commit point's own conditional creates: a manifest version, or a record.
    let commit_point = match tributary::PublisherKind::default_for_init().unwrap() {
        tributary::PublisherKind::Manifest => "__manifest.lance/_versions/",
        tributary::PublisherKind::Record => "__txn/log/",
    };
    for (round, (pattern, kind)) in [
        ("_versions/", FaultKind::LostThenRetried),
        ("_versions/", FaultKind::LostResponse),
        (commit_point, FaultKind::LostThenRetried),
        (commit_point, FaultKind::LostResponse),
        ("_mem_wal/", FaultKind::LostThenRetried),
        ("_mem_wal/", FaultKind::LostResponse),
        ("__recovery/", FaultKind::LostThenRetried),
        ("__leases/", FaultKind::LostThenRetried),
    ]
    .into_iter()
    .enumerate()
    {
        let faults = Faults::new();
        let mut options = s3_options(&s3);
        options.faults = Some(faults.clone());
        let uri = s3.uri(&format!("lost{round}"));
        let graph = Graph::builder(&uri)
            .store_options(options)
            .init(SCHEMA)
            .await
            .unwrap();
        let mut oracle = Oracle::default();
        let context = format!("{kind:?} on {pattern}");
        // A load, a send and a fold, each meeting the fault once where it writes such an
        // object (a rule its step never meets is dropped after it).
        for (step, value) in ["load", "send", "fold"].into_iter().enumerate() {
            let key = format!("k{step}");
            let text = ndjson(&[line(&key, value)]);
            if value == "fold" {
                let sent = graph.ingest("main").unwrap().send(1, &text).await;
                assert!(sent.is_ok(), "{context}: {sent:?}");
                oracle.acknowledged(&key, value);
            }
            faults.fail_next(pattern, kind, 1);
            let ok = match value {
                "load" => graph.load(&text, &Default::default()).await.is_ok(),
                "send" => graph
                    .ingest("main")
                    .unwrap()
                    .send(1, &text)
                    .await
                    .is_ok_and(|ack| ack.durable_rows == 1),
                _ => graph.fold("main").await.is_ok(),
            };
            faults.clear_rules();
            if (pattern, kind, value) == ("_mem_wal/", FaultKind::LostThenRetried, "send") {
                // The writer's claim, its response lost and retried, reads as a rival's
                // claim: the writer claims again, and the send is acknowledged.
                assert!(ok, "{context}: the send was not acknowledged");
            }
            match (value, ok) {
                ("fold", _) => {}
                (_, true) => oracle.acknowledged(&key, value),
                (_, false) => oracle.maybe(&key, value),
            }
        }
        // The writer a fault fenced heals: the next send is acknowledged.
        let healed = graph
            .ingest("main")
            .unwrap()
            .send(1, &ndjson(&[line("k9", "after")]))
            .await;
        assert!(healed.is_ok_and(|ack| ack.durable_rows == 1), "{context}");
        oracle.acknowledged("k9", "after");
        let struck: u64 = faults.injected().values().sum();
        assert!(struck > 0, "{context}: the fault never struck");
        graph.close_writers().await.unwrap();
        graph.recover().await.unwrap();
        graph.fold("main").await.unwrap();
        oracle.check(&people(&graph).await, &context);
        assert_chain(&graph).await;
    }
}

/// On S3 the commit point is as flat as on a local disk: a publish, a head read, a
/// snapshot open and `log --limit 10` make the same object-store calls at 10 and 10,000
/// commits. Lance reads S3 in 64 KiB blocks, where a local disk is read in 4 KiB ones, so
/// a probe of the deeper index may read a few blocks more (measured: `log --limit 10` 55 KB
/// at 10 commits, 217 KB at 10,000, in the same 47 calls).
#[tokio::test]
async fn on_s3_the_commit_point_costs_the_same_at_10_and_10000_commits() {
    let s3 = S3Server::start();
    crate::publisher::assert_commit_point_is_flat(
        &s3.uri("shallow"),
        &s3.uri("deep"),
        s3_options(&s3),
        262_144.0,
    )
    .await;
}

/// One acknowledged send is one WAL PUT on S3, and a send costs the same at WAL depth 1
/// and 100 and after 300 more commits.
#[tokio::test]
async fn on_s3_one_acknowledged_send_is_one_wal_put_whatever_the_depth_and_history() {
    let s3 = S3Server::start();
    let counter = tributary::OpCounter::new();
    let options = StoreOptions {
        counter: Some(counter.clone()),
        ..s3_options(&s3)
    };
    let graph = Graph::builder(&s3.uri("sends"))
        .store_options(options)
        .init(SCHEMA)
        .await
        .unwrap();
    let ingest = graph.ingest("main").unwrap();
    let mut sent = 0u64;
    let mut send = || {
        sent += 1;
        let text = ndjson(&[line(&format!("p{sent}"), "x")]);
        let counter = counter.clone();
        let ingest = &ingest;
        async move {
            let before = counter.snapshot();
            let ack = ingest.send(sent, &text).await.unwrap();
            assert_eq!(ack.durable_rows, 1);
            counter.snapshot().since(&before)
        }
    };
    send().await; // enrollment and writer open
    let at_depth_1 = send().await;
    assert_eq!(
        at_depth_1.ops,
        BTreeMap::from([((tributary::OpKind::Put, tributary::PathClass::MemWal), 1)]),
        "a send is one WAL PUT: {at_depth_1}"
    );
    for _ in 0..98 {
        send().await;
    }
    assert_eq!(send().await.ops, at_depth_1.ops, "WAL depth 1 vs 100");
    for i in 0..30 {
        graph
            .load(&ndjson(&[line(&format!("l{i}"), "x")]), &Default::default())
            .await
            .unwrap();
    }
    assert_eq!(
        send().await.ops,
        at_depth_1.ops,
        "commit history 1 vs 30 loads"
    );
}

const SHARDED: &str = r#"
node Person @stream(shards = 4) {
  name: String @key
  bio: String?
}
"#;

/// Several processes on one graph on S3, each owning a share of the shards: each writes
/// only its own (a send with a row of another shard is refused whole, naming the shard),
/// and a fold by any of them publishes every acknowledged row once, the last write per key
/// winning. (An explicit fold claims every shard, so the other owner's writers reopen at
/// their next send.)
#[tokio::test]
async fn processes_owning_shares_of_the_shards_write_side_by_side_and_any_of_them_folds() {
    let s3 = S3Server::start();
    let uri = s3.uri("sharded");
    Graph::builder(&uri)
        .store_options(s3_options(&s3))
        .init(SHARDED)
        .await
        .unwrap();
    let owning = |shards: &[u32]| {
        let settings = tributary::GraphSettings {
            owned_shards: Some(shards.iter().copied().collect()),
            ..Default::default()
        };
        Graph::builder(&uri)
            .store_options(s3_options(&s3))
            .settings(settings)
            .open()
    };
    // Each handle has a session and writers of its own, as a process would.
    let first = owning(&[0, 1]).await.unwrap();
    let second = owning(&[2, 3]).await.unwrap();
    let first_ingest = first.ingest("main").unwrap();
    let second_ingest = second.ingest("main").unwrap();
    let mut oracle = Oracle::default();
    let mut by_owner = [0, 0];
    let mut owner_of = BTreeMap::new();
    for round in 0..3 {
        for k in 0..16 {
            let key = format!("k{k}");
            let value = format!("round{round}");
            let text = ndjson(&[line(&key, &value)]);
            // Route as a client would: the owner is whoever does not refuse it.
            match first_ingest.send(1, &text).await {
                Ok(ack) => {
                    assert_eq!(ack.durable_rows, 1);
                    by_owner[0] += 1;
                    owner_of.insert(key.clone(), 0);
                }
                Err(error) => {
                    let message = error.to_string();
                    assert_eq!(
                        error.kind(),
                        tributary::ErrorKind::InvalidInput,
                        "{message}"
                    );
                    assert!(
                        message.contains("rows of shard ") && message.contains("[0, 1]"),
                        "{message}"
                    );
                    let ack = second_ingest.send(1, &text).await.unwrap();
                    assert_eq!(ack.durable_rows, 1);
                    by_owner[1] += 1;
                    owner_of.insert(key.clone(), 1);
                }
            }
            oracle.acknowledged(&key, &value);
        }
        // Either may fold its own shards meanwhile.
        if round == 1 {
            first.fold("main").await.unwrap();
        }
    }
    assert!(
        by_owner[0] > 0 && by_owner[1] > 0,
        "one owner took every key: {by_owner:?}"
    );
    // Once both owners flush, the status counts each shard's pending rows on its own row,
    // and they add up to the table's.
    first.close_writers().await.unwrap();
    second.close_writers().await.unwrap();
    let status = first.ingest_status("main").await.unwrap();
    let table = &status.tables[0];
    let per_shard: Vec<u64> = table.shards.iter().map(|s| s.pending_rows).collect();
    assert_eq!(
        per_shard.iter().sum::<u64>(),
        table.pending_rows,
        "{per_shard:?}"
    );
    assert!(
        per_shard.iter().filter(|&&rows| rows > 0).count() > 1,
        "pending rows in one shard only: {per_shard:?}"
    );
    assert_eq!(status.owned_shards, Some(vec![0, 1]));
    let mut numbers: Vec<Option<u32>> = table.shards.iter().map(|s| s.number).collect();
    numbers.sort();
    assert_eq!(
        numbers,
        vec![Some(0), Some(1), Some(2), Some(3)],
        "shards by number"
    );

    // `shards_of` tells a client where each key goes, as the owners routed them.
    let keys: Vec<&str> = owner_of.keys().map(String::as_str).collect();
    let shards = first.shards_of("Person", &keys).await.unwrap();
    for (key, shard) in keys.iter().zip(shards) {
        let owner = if shard < 2 { 0 } else { 1 };
        assert_eq!(owner_of[*key], owner, "{key} is in shard {shard}");
    }

    // A send whose row is in an owned shard and whose delete is not is refused whole:
    // the row is not written either (rows and deletes go to their shards side by side).
    let owned_key = owner_of.iter().find(|(_, o)| **o == 0).unwrap().0.clone();
    let unowned_key = owner_of.iter().find(|(_, o)| **o == 1).unwrap().0.clone();
    let text = ndjson(&[
        line(&owned_key, "refused"),
        tributary_tests::delete("Person", &unowned_key),
    ]);
    let refused = first_ingest.send(1, &text).await;
    assert!(
        refused.is_err(),
        "a send deleting in an unowned shard was taken"
    );

    // A send mixing shards is refused whole: none of its rows is written.
    let mixed: Vec<String> = (0..16).map(|k| line(&format!("k{k}"), "refused")).collect();
    let refused = first_ingest.send(1, &ndjson(&mixed)).await;
    assert!(
        refused.is_err(),
        "a send with rows of unowned shards was taken"
    );

    // A third process, owning every shard, folds everything.
    let third = Graph::builder(&uri)
        .store_options(s3_options(&s3))
        .open()
        .await
        .unwrap();
    third.fold("main").await.unwrap();
    let seen = people(&third).await;
    oracle.check(&seen, "sharded");
    assert_eq!(seen.len(), 16);
    assert_chain(&third).await;
}

/// On S3 a fold's object-store calls are bounded by what it folds, not by the table or the
/// commit history: folds of ten new rows make as many calls after 90 earlier folds as
/// after none (windows of 18 folds, so the manifest's upkeep every ninth publish and the
/// index merges fall in both alike).
#[tokio::test]
async fn on_s3_a_fold_costs_the_same_after_90_folds() {
    let s3 = S3Server::start();
    let counter = tributary::OpCounter::new();
    let graph = Graph::builder(&s3.uri("folds"))
        .store_options(StoreOptions {
            counter: Some(counter.clone()),
            ..s3_options(&s3)
        })
        .init(SCHEMA)
        .await
        .unwrap();
    let ingest = graph.ingest("main").unwrap();
    let mut cycle = 0;
    let mut fold_ops = |folds: usize| {
        let ingest = &ingest;
        let graph = &graph;
        let counter = counter.clone();
        let first = cycle;
        cycle += folds;
        async move {
            let mut ops = 0;
            for c in first..first + folds {
                let lines: Vec<String> = (0..10).map(|i| line(&format!("c{c}-{i}"), "x")).collect();
                ingest.send(1, &ndjson(&lines)).await.unwrap();
                let before = counter.snapshot();
                let outcome = graph.fold("main").await.unwrap();
                assert_eq!(outcome.rows.values().sum::<u64>(), 10);
                ops += counter.snapshot().since(&before).total();
            }
            ops
        }
    };
    let early = fold_ops(18).await;
    fold_ops(90).await;
    let late = fold_ops(18).await;
    eprintln!("object-store calls of 18 folds: {early} early, {late} after 90 more");
    assert!(
        late as f64 <= early as f64 * 1.25,
        "18 folds made {early} calls early, {late} after 90 folds"
    );
}

/// The probe that checks conditional PUT before a process's first write, its response
/// lost and its create retried (heard as "already exists" for its own object): the store
/// is not taken for one that ignores conditional PUT. Opening and reading write nothing.
#[tokio::test]
async fn a_lost_response_on_the_probe_is_not_taken_for_an_unsafe_store() {
    let s3 = S3Server::start();
    let uri = s3.uri("probed");
    Graph::builder(&uri)
        .store_options(s3_options(&s3))
        .init(SCHEMA)
        .await
        .unwrap();
    for kind in [FaultKind::LostThenRetried, FaultKind::LostResponse] {
        let counter = tributary::OpCounter::new();
        let faults = Faults::new();
        faults.fail_next("__probe/", kind, 1);
        let graph = Graph::builder(&uri)
            .store_options(StoreOptions {
                faults: Some(faults.clone()),
                counter: Some(counter.clone()),
                ..s3_options(&s3)
            })
            .open()
            .await
            .unwrap();
        people(&graph).await;
        assert_eq!(
            counter.snapshot().of_kind(tributary::OpKind::Put),
            0,
            "opening and reading wrote"
        );
        let text = ndjson(&[line("probe", "x")]);
        let loaded = graph.load(&text, &Default::default()).await;
        assert_eq!(faults.injected().get(&kind), Some(&1), "{kind:?}");
        match (kind, loaded) {
            (FaultKind::LostThenRetried, loaded) => {
                assert!(loaded.is_ok(), "{kind:?}: {:?}", loaded.err())
            }
            // An error the client could not retry is an error, never "unsafe store"; the
            // next write probes again.
            (_, Err(error)) => {
                assert!(
                    !error.to_string().contains("conditional PUT"),
                    "{kind:?}: {error}"
                );
                graph.load(&text, &Default::default()).await.unwrap();
            }
            (_, Ok(_)) => {}
        }
    }
}

/// Branches on S3: a create forks every table in the bucket, loads stay on their branch,
/// a merge lands on `main`, and after a delete a cleanup removes the branch's lineage.
#[tokio::test]
async fn branches_on_s3_fork_merge_and_are_cleaned_up() {
    let s3 = S3Server::start();
    let uri = s3.uri("branched");
    let graph = Graph::builder(&uri)
        .store_options(s3_options(&s3))
        .init(SCHEMA)
        .await
        .unwrap();
    let on = |branch: &str| tributary::LoadOptions {
        branch: tributary::branch(branch).unwrap(),
        ..Default::default()
    };
    graph
        .load(&ndjson(&[line("ada", "main")]), &on("main"))
        .await
        .unwrap();
    let created = graph
        .create_branch("dev", &tributary::At::default())
        .await
        .unwrap();
    let lineage = created.lineage.clone().unwrap();
    graph
        .load(
            &ndjson(&[line("ada", "dev"), line("bob", "dev")]),
            &on("dev"),
        )
        .await
        .unwrap();
    // A stream on the branch, in its lineage's MemWAL in the bucket, left unfolded: the
    // merge folds it first.
    let ack = graph
        .ingest("dev")
        .unwrap()
        .send(1, &ndjson(&[line("cy", "streamed")]))
        .await
        .unwrap();
    assert_eq!(ack.durable_rows, 1, "{ack:?}");
    assert_eq!(
        people(&graph).await.len(),
        1,
        "main does not see dev's rows"
    );
    let merged = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    assert_eq!(merged.kind, tributary::MergeKind::FastForward);
    let after = people(&graph).await;
    assert_eq!(after.get("ada").map(String::as_str), Some("dev"));
    assert_eq!(after.get("cy").map(String::as_str), Some("streamed"));
    assert_eq!(after.len(), 3);
    assert_chain(&graph).await;
    let forked = s3
        .dir
        .path()
        .join(format!("graphs/branched/nodes/Person.lance/tree/{lineage}"));
    assert!(forked.is_dir(), "the fork is in the bucket");
    assert!(
        forked.join("_mem_wal").is_dir(),
        "the branch's WAL is in the bucket"
    );
    graph.delete_branch("dev").await.unwrap();
    let report = graph.cleanup(std::time::Duration::ZERO).await.unwrap();
    assert_eq!(report.branches, 1, "{report:?}");
    // The test server keeps emptied folders: no object is left under the lineage.
    fn objects(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).map_or(0, |entries| {
            entries
                .flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => objects(&e.path()),
                    _ => 1,
                })
                .sum()
        })
    }
    assert_eq!(objects(&forked), 0, "the deleted branch's lineage is gone");
    assert_eq!(people(&graph).await.len(), 3);
}
