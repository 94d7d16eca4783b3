//! Model test: random sequences of ingest and load (rows, patches, deletes), a producer's
//! sends (new, retried, out of order, and stopped before their mark), a schema change, fold,
//! crash-and-reopen and crashes inside a fold; after a final fold the graph equals a model
//! that keeps the last acknowledged write per key (a patch laid over the row it saw, a
//! deleted node's edges gone, a producer's retries written once), every rejected edge is a
//! dead letter, and the producer's marks are what it had acknowledged.

use std::collections::{BTreeMap, BTreeSet};

use arrow_array::{Array, Int32Array, StringArray};
use proptest::prelude::*;
use tributary::{At, Graph, IngestOptions, LoadOptions, Producer, ReadOptions};
use tributary_tests::{delete, edge, ndjson, person, SCHEMA};

use crate::FAILPOINTS;

const KEYS: usize = 5;
const FOLD_WINDOWS: [&str; 4] = [
    "fold::before-table-commits",
    "fold::between-table-commits",
    "fold::before-publish",
    "fold::before-sidecar-delete",
];

#[derive(Debug, Clone)]
enum Op {
    Ingest(usize, i32),
    IngestEdge(usize, usize),
    IngestDelete(usize),
    IngestPatch(usize, i32),
    Load(usize, i32),
    LoadDelete(usize),
    LoadPatch(usize, i32),
    /// The producer's next send, `skip` sequence numbers past its mark.
    Produce(usize, i32, u64),
    /// The producer sends again a line at or below its mark (any content: it must not land).
    ProduceAgain(usize, i32, u64),
    /// The producer's next send stops after its row is durable and before its mark is
    /// raised; the producer, unacknowledged, sends it again.
    ProduceUnacknowledged(usize, i32),
    /// A schema change adding fields to `Person` (the first time; again, nothing).
    AddFields,
    Fold,
    CrashAndReopen,
    CrashInFold(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..KEYS, 0..150i32).prop_map(|(k, a)| Op::Ingest(k, a)),
        2 => (0..KEYS, 0..KEYS).prop_map(|(a, b)| Op::IngestEdge(a, b)),
        1 => (0..KEYS).prop_map(Op::IngestDelete),
        1 => (0..KEYS, 0..150i32).prop_map(|(k, a)| Op::IngestPatch(k, a)),
        1 => (0..KEYS, 0..150i32).prop_map(|(k, a)| Op::Load(k, a)),
        1 => (0..KEYS).prop_map(Op::LoadDelete),
        1 => (0..KEYS, 0..150i32).prop_map(|(k, a)| Op::LoadPatch(k, a)),
        2 => (0..KEYS, 0..150i32, 0..3u64).prop_map(|(k, a, s)| Op::Produce(k, a, s)),
        1 => (0..KEYS, 0..150i32, 0..4u64).prop_map(|(k, a, b)| Op::ProduceAgain(k, a, b)),
        1 => (0..KEYS, 0..150i32).prop_map(|(k, a)| Op::ProduceUnacknowledged(k, a)),
        1 => Just(Op::AddFields),
        2 => Just(Op::Fold),
        1 => Just(Op::CrashAndReopen),
        1 => (0..FOLD_WINDOWS.len()).prop_map(Op::CrashInFold),
    ]
}

/// What the graph must hold: published rows, and acknowledged writes not yet folded.
#[derive(Default, Debug)]
struct Model {
    people: BTreeMap<String, i32>,
    knows: BTreeSet<String>,
    /// Acknowledged, not folded: an age, or a delete (`None`).
    pending_people: Vec<(String, Option<i32>)>,
    pending_knows: Vec<(String, String)>,
    rejected: usize,
    /// The producer's highest acknowledged sequence.
    producer_mark: Option<u64>,
}

impl Model {
    fn fold(&mut self) {
        // Nodes whose newest write is a delete take their edges with them.
        let mut gone = BTreeSet::new();
        for (key, age) in self.pending_people.drain(..) {
            match age {
                Some(age) => {
                    gone.remove(&key);
                    self.people.insert(key, age);
                }
                None => {
                    self.people.remove(&key);
                    gone.insert(key);
                }
            }
        }
        self.cascade(&gone);
        let edges: BTreeSet<(String, String)> = self.pending_knows.drain(..).collect();
        for (a, b) in edges {
            if self.people.contains_key(&a) && self.people.contains_key(&b) {
                self.knows.insert(format!("{a}->{b}"));
            } else {
                self.rejected += 1;
            }
        }
    }
}

impl Model {
    /// A node's row as a fresh read sees it: the newest acknowledged write.
    fn current(&self, key: &str) -> Option<i32> {
        match self.pending_people.iter().rev().find(|(k, _)| k == key) {
            Some((_, age)) => *age,
            None => self.people.get(key).copied(),
        }
    }

    fn cascade(&mut self, gone: &BTreeSet<String>) {
        self.knows.retain(|id| {
            let (a, b) = id.split_once("->").unwrap();
            !gone.contains(a) && !gone.contains(b)
        });
    }
}

fn patch(k: usize, age: i32) -> String {
    format!(
        r#"{{"type":"Person","patch":{{"name":"{}","age":{age}}}}}"#,
        key(k)
    )
}

fn evolved_schema() -> String {
    SCHEMA.replace(
        "  embedding: Vector(8)? @embed(bio)\n}",
        "  embedding: Vector(8)? @embed(bio)\n  nickname: String?\n  level: I32 = 3\n}",
    )
}

fn key(i: usize) -> String {
    format!("k{i}")
}

/// One stream of the producer, sending `line` as sequence `sequence`.
async fn produce(
    graph: &Graph,
    sequence: u64,
    line: &str,
) -> tributary::Result<tributary::IngestAck> {
    let options = IngestOptions {
        producer: Some(Producer::new("p", sequence).unwrap()),
        ..IngestOptions::default()
    };
    graph.ingestor(&options).unwrap().send(1, line).await
}

async fn reopen(uri: &str) -> Graph {
    let graph = Graph::open(uri).await.unwrap();
    // Claiming the writers replays what the previous process acknowledged but had not
    // flushed, so the next cut covers it.
    let ingest = graph.ingest("main").unwrap();
    ingest.warm("Person").await.unwrap();
    ingest.warm("Knows").await.unwrap();
    graph
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let mut graph = Graph::init(&uri, SCHEMA).await.unwrap();
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Ingest(k, age) => {
                let ack = graph
                    .ingest("main")
                    .unwrap()
                    .send(1, &person(&key(k), age))
                    .await
                    .unwrap();
                prop_assert_eq!(ack.durable_rows, 1);
                model.pending_people.push((key(k), Some(age)));
            }
            Op::IngestDelete(k) => {
                let line = delete("Person", &key(k));
                let ack = graph.ingest("main").unwrap().send(1, &line).await.unwrap();
                prop_assert_eq!(ack.durable_rows, 1);
                model.pending_people.push((key(k), None));
            }
            Op::IngestPatch(k, age) => {
                let ack = graph
                    .ingest("main")
                    .unwrap()
                    .send(1, &patch(k, age))
                    .await
                    .unwrap();
                if model.current(&key(k)).is_some() {
                    prop_assert_eq!(ack.durable_rows, 1, "{:?}", ack.rejected);
                    model.pending_people.push((key(k), Some(age)));
                } else {
                    prop_assert_eq!(ack.rejected.len(), 1);
                }
            }
            Op::IngestEdge(a, b) => {
                let line = edge("Knows", &key(a), &key(b));
                let ack = graph.ingest("main").unwrap().send(1, &line).await.unwrap();
                prop_assert_eq!(ack.durable_rows, 1);
                model.pending_knows.push((key(a), key(b)));
            }
            Op::Load(k, age) => {
                graph
                    .load(&ndjson(&[person(&key(k), age)]), &LoadOptions::default())
                    .await
                    .unwrap();
                model.fold();
                model.people.insert(key(k), age);
            }
            Op::LoadDelete(k) => {
                let line = delete("Person", &key(k));
                graph
                    .load(&ndjson(&[line]), &LoadOptions::default())
                    .await
                    .unwrap();
                model.fold();
                model.people.remove(&key(k));
                model.cascade(&BTreeSet::from([key(k)]));
            }
            Op::LoadPatch(k, age) => {
                let loaded = graph
                    .load(&ndjson(&[patch(k, age)]), &LoadOptions::default())
                    .await;
                // The load folds what is pending first, whether or not it is refused.
                model.fold();
                match model.people.get_mut(&key(k)) {
                    Some(stored) => {
                        prop_assert!(loaded.is_ok(), "{:?}", loaded.err());
                        *stored = age;
                    }
                    None => prop_assert!(loaded.is_err()),
                }
            }
            Op::Produce(k, age, skip) => {
                let sequence = model.producer_mark.map_or(1, |m| m + 1) + skip;
                let ack = produce(&graph, sequence, &person(&key(k), age))
                    .await
                    .unwrap();
                prop_assert_eq!((ack.durable_rows, ack.duplicates), (1, 0));
                model.pending_people.push((key(k), Some(age)));
                model.producer_mark = Some(sequence);
            }
            Op::ProduceAgain(k, age, back) => {
                let Some(mark) = model.producer_mark else {
                    continue;
                };
                let sequence = mark.saturating_sub(back).max(1);
                let ack = produce(&graph, sequence, &person(&key(k), age))
                    .await
                    .unwrap();
                prop_assert_eq!((ack.durable_rows, ack.duplicates), (0, 1));
            }
            Op::ProduceUnacknowledged(k, age) => {
                let sequence = model.producer_mark.map_or(1, |m| m + 1);
                let line = person(&key(k), age);
                let scenario = fail::FailScenario::setup();
                fail::cfg("ingest::before-producer-mark", "return").unwrap();
                let stopped = produce(&graph, sequence, &line).await;
                scenario.teardown();
                prop_assert!(stopped.is_err());
                // Durable though unacknowledged: it is folded whether or not it is sent again.
                model.pending_people.push((key(k), Some(age)));
                let ack = produce(&graph, sequence, &line).await.unwrap();
                prop_assert_eq!((ack.durable_rows, ack.duplicates), (1, 0));
                model.pending_people.push((key(k), Some(age)));
                model.producer_mark = Some(sequence);
            }
            Op::AddFields => {
                // Folds what is pending first; rows keep their values, the new fields
                // are null or their default.
                let outcome = graph.apply_schema(&evolved_schema()).await.unwrap();
                if outcome.commit.is_some() {
                    model.fold();
                }
            }
            Op::Fold => {
                graph.fold("main").await.unwrap();
                model.fold();
            }
            Op::CrashAndReopen => {
                drop(graph);
                graph = reopen(&uri).await;
            }
            Op::CrashInFold(window) => {
                let point = FOLD_WINDOWS[window];
                let scenario = fail::FailScenario::setup();
                fail::cfg(point, "return").unwrap();
                let result = graph.fold("main").await;
                scenario.teardown();
                drop(graph);
                graph = reopen(&uri).await;
                // Stopped before any table commit: nothing happened (the generations are
                // folded later). Anywhere after: recovery finished the fold on open.
                if result.is_ok() || window > 0 {
                    model.fold();
                }
            }
        }
    }
    graph.fold("main").await.unwrap();
    model.fold();

    let people = graph.read("Person", &ReadOptions::default()).await.unwrap();
    let ids = people
        .column_by_name("id")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    let ages = people
        .column_by_name("age")
        .unwrap()
        .as_any()
        .downcast_ref::<Int32Array>()
        .unwrap();
    let found: BTreeMap<String, i32> = (0..people.num_rows())
        .map(|i| (ids.value(i).to_owned(), ages.value(i)))
        .collect();
    prop_assert_eq!(&found, &model.people);
    let knows = graph.read("Knows", &ReadOptions::default()).await.unwrap();
    let ids = knows
        .column_by_name("id")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    let found: BTreeSet<String> = ids.iter().flatten().map(str::to_owned).collect();
    prop_assert_eq!(&found, &model.knows);
    let rejects = graph.rejects(&At::default()).await.unwrap();
    prop_assert_eq!(rejects.num_rows(), model.rejected);
    // Every fold of what the producer sent recorded its mark by the end.
    let head = graph.log("main", 1).await.unwrap().remove(0);
    prop_assert_eq!(head.producers.get("p").copied(), model.producer_mark);
    let status = graph.ingest_status("main").await.unwrap();
    let acknowledged = status.producers.iter().find(|p| p.producer == "p");
    prop_assert_eq!(
        acknowledged.and_then(|p| p.acknowledged),
        model.producer_mark
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 12,
        failure_persistence: None,
        max_shrink_iters: 64,
        ..ProptestConfig::default()
    })]

    #[test]
    fn folds_match_a_last_write_wins_model(ops in proptest::collection::vec(op(), 1..14)) {
        let _lock = FAILPOINTS.blocking_lock();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(ops))?;
    }
}
