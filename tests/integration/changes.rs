//! The change feed: what each commit inserted, updated and deleted, replayed by a consumer
//! that ends equal to the graph, resumes after a kill from its stored commit, and is
//! refused a commit it cannot be given.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};
use tributary::{
    At, ChangeRecord, ChangesQuery, CommitId, ErrorKind, Graph, LoadOptions, ReadOptions,
    MAX_READ_LIMIT,
};
use tributary_tests::{company, delete, delete_edge, edge, ndjson, person, temp_graph};

type Row = Map<String, Value>;
/// (type, key) → row: what a consumer keeps.
type Mirror = BTreeMap<(String, String), Row>;

async fn load(graph: &Graph, lines: &[String]) -> CommitId {
    graph
        .load(&ndjson(lines), &LoadOptions::default())
        .await
        .unwrap()
        .commit
        .id
}

fn query(since: &CommitId, max_commits: usize) -> ChangesQuery {
    ChangesQuery {
        branch: "main".to_owned(),
        since: since.to_string(),
        types: Vec::new(),
        max_commits,
    }
}

async fn head(graph: &Graph) -> CommitId {
    graph.snapshot(&At::default()).await.unwrap().id
}

/// Every record after `since` (all pages).
async fn all_changes(graph: &Graph, since: &CommitId) -> Vec<ChangeRecord> {
    let mut since = since.clone();
    let mut records = Vec::new();
    loop {
        let page = graph.changes(&query(&since, 4)).await.unwrap();
        let Some(last) = page.iter().rev().find_map(ChangeRecord::closes) else {
            assert!(page.is_empty(), "a page ends with a commit record");
            return records;
        };
        since = last.clone();
        records.extend(page);
    }
}

fn row_of(change: &tributary::RowChange) -> Row {
    serde_json::from_str(change.row.get()).unwrap()
}

fn apply(mirror: &mut Mirror, record: &ChangeRecord) {
    match record {
        ChangeRecord::Insert(change) => {
            let old = mirror.insert(
                (change.type_name.clone(), change.key.clone()),
                row_of(change),
            );
            assert!(
                old.is_none(),
                "an insert of a key the consumer has: {change:?}"
            );
        }
        ChangeRecord::Update(change) => {
            let old = mirror.insert(
                (change.type_name.clone(), change.key.clone()),
                row_of(change),
            );
            assert!(
                old.is_some(),
                "an update of a key the consumer lacks: {change:?}"
            );
        }
        ChangeRecord::Delete(change) => {
            let old = mirror.remove(&(change.type_name.clone(), change.key.clone()));
            assert!(
                old.is_some(),
                "a delete of a key the consumer lacks: {change:?}"
            );
        }
        ChangeRecord::Commit(_) | ChangeRecord::Heartbeat(_) => {}
        ChangeRecord::Error(stopped) => panic!("the feed stopped: {stopped:?}"),
    }
}

/// The graph's rows at its head, as the consumer keeps them.
async fn graph_rows(graph: &Graph) -> Mirror {
    let mut rows = Mirror::new();
    for ty in ["Person", "Company", "WorksAt", "Knows"] {
        let options = ReadOptions {
            limit: Some(MAX_READ_LIMIT),
            ..Default::default()
        };
        let batch = graph.read(ty, &options).await.unwrap();
        let mut bytes = Vec::new();
        let mut writer = arrow_json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow_json::writer::JsonArray>(&mut bytes);
        writer.write(&batch).unwrap();
        writer.finish().unwrap();
        let parsed: Vec<Row> = if batch.num_rows() == 0 {
            Vec::new()
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        for row in parsed {
            let key = row["id"].as_str().unwrap().to_owned();
            rows.insert((ty.to_owned(), key), row);
        }
    }
    rows
}

/// A small seeded generator: the mix is the same on every run.
struct Seeded(u64);

impl Seeded {
    fn below(&mut self, n: usize) -> usize {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

fn summary(records: &[ChangeRecord]) -> Vec<(String, String, String)> {
    records
        .iter()
        .filter_map(|record| match record {
            ChangeRecord::Insert(c) => Some(("insert".into(), c.type_name.clone(), c.key.clone())),
            ChangeRecord::Update(c) => Some(("update".into(), c.type_name.clone(), c.key.clone())),
            ChangeRecord::Delete(c) => Some(("delete".into(), c.type_name.clone(), c.key.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn each_commit_says_what_it_inserted_updated_and_deleted() {
    let (_dir, _uri, graph) = temp_graph().await;
    let start = head(&graph).await;
    let first = load(
        &graph,
        &[
            person("ada", 36),
            person("bob", 41),
            company("acme"),
            edge("WorksAt", "ada", "acme"),
            edge("Knows", "ada", "bob"),
        ],
    )
    .await;
    let second = load(
        &graph,
        &[person("ada", 37), person("cy", 29), delete("Person", "bob")],
    )
    .await;

    let records = all_changes(&graph, &start).await;
    let commits: Vec<&CommitId> = records.iter().filter_map(ChangeRecord::closes).collect();
    assert_eq!(commits, [&first, &second], "commit order, each closed once");
    let cut = records
        .iter()
        .position(|r| r.closes() == Some(&first))
        .unwrap();
    let mut firsts = summary(&records[..cut]);
    firsts.sort();
    assert_eq!(firsts.len(), 5);
    assert!(firsts.iter().all(|(op, _, _)| op == "insert"), "{firsts:?}");
    let seconds = summary(&records[cut + 1..]);
    let ops: Vec<(&str, &str)> = seconds
        .iter()
        .map(|(op, ty, _)| (op.as_str(), ty.as_str()))
        .collect();
    assert_eq!(
        ops,
        [
            ("insert", "Person"),
            ("update", "Person"),
            // An edge goes before the node it reached.
            ("delete", "Knows"),
            ("delete", "Person"),
        ]
    );
    assert_eq!(
        [&seconds[0].2, &seconds[1].2, &seconds[3].2],
        ["cy", "ada", "bob"]
    );
    let ChangeRecord::Update(ada) = &records[cut + 2] else {
        panic!("ada's update: {:?}", records[cut + 2]);
    };
    assert_eq!(row_of(ada)["age"], 37, "an update carries the new values");
    assert_eq!(ada.commit, second);
    let Some(ChangeRecord::Commit(end)) = records.last() else {
        panic!("a commit record ends the feed");
    };
    assert_eq!((end.inserted, end.updated, end.deleted), (1, 1, 2));
    assert_eq!(end.parent.as_ref(), Some(&first));

    // Only one type, and nothing after the head.
    let people = graph
        .changes(&ChangesQuery {
            types: vec!["Person".to_owned()],
            ..query(&first, 10)
        })
        .await
        .unwrap();
    assert_eq!(summary(&people).len(), 3);
    assert!(graph.changes(&query(&second, 10)).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_consumer_that_replays_the_feed_ends_equal_to_the_graph_through_kills_and_restarts() {
    let (_dir, uri, graph) = temp_graph().await;
    let mut graph = std::sync::Arc::new(graph);
    let start = head(&graph).await;
    let mut random = Seeded(0x5EED_0018);
    let names: Vec<String> = (0..12).map(|i| format!("p{i}")).collect();
    // loads, streamed folds, merges, restarts
    let mut mix = [0; 4];
    for round in 0..40 {
        let pick = |random: &mut Seeded| names[random.below(names.len())].clone();
        match random.below(6) {
            // A load of rows, edges and deletes.
            0..=1 => {
                mix[0] += 1;
                let mut lines = Vec::new();
                for _ in 0..1 + random.below(5) {
                    lines.push(person(&pick(&mut random), random.below(100) as i32));
                }
                lines.push(company("acme"));
                let (a, b) = (pick(&mut random), pick(&mut random));
                lines.push(person(&a, 1));
                lines.push(person(&b, 2));
                lines.push(edge("Knows", &a, &b));
                lines.push(edge("WorksAt", &a, "acme"));
                if random.chance(50) {
                    let gone = pick(&mut random);
                    if gone != a && gone != b {
                        lines.push(delete("Person", &gone));
                    }
                }
                graph
                    .load(&ndjson(&lines), &LoadOptions::default())
                    .await
                    .unwrap();
            }
            // Streamed rows, patches and deletes, then a fold.
            2..=3 => {
                mix[1] += 1;
                let mut lines = vec![person(&pick(&mut random), random.below(100) as i32)];
                let patched = pick(&mut random);
                lines.push(person(&patched, 5));
                lines.push(format!(
                    r#"{{"type":"Person","patch":{{"name":"{patched}","bio":"round {round}"}}}}"#
                ));
                lines.push(delete("Person", &pick(&mut random)));
                let (a, b) = (pick(&mut random), pick(&mut random));
                lines.push(person(&a, 3));
                lines.push(person(&b, 4));
                lines.push(edge("Knows", &a, &b));
                if random.chance(30) {
                    lines.push(delete_edge("Knows", &a, &b));
                }
                let ack = graph
                    .ingest("main")
                    .unwrap()
                    .send(1, &ndjson(&lines))
                    .await
                    .unwrap();
                assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
                graph.fold("main").await.unwrap();
            }
            // Work on a branch, merged back.
            4 => {
                mix[2] += 1;
                let name = format!("b{round}");
                graph.create_branch(&name, &At::default()).await.unwrap();
                let lines = [
                    person(&format!("from-{name}"), 9),
                    person(&pick(&mut random), 8),
                ];
                graph
                    .load(
                        &ndjson(&lines),
                        &LoadOptions {
                            branch: tributary::branch(&name).unwrap(),
                            ..Default::default()
                        },
                    )
                    .await
                    .unwrap();
                graph
                    .merge_branch(&name, "main", tributary::Prefer::Neither)
                    .await
                    .unwrap();
            }
            // A restart.
            _ => {
                mix[3] += 1;
                drop(graph);
                graph = std::sync::Arc::new(Graph::open(&uri).await.unwrap());
            }
        }
    }

    // The consumer: its mirror and the last commit it applied are stored together at each
    // commit record; a kill loses what came after.
    let mut stored: (Mirror, CommitId) = (Mirror::new(), start.clone());
    let mut mirror = Mirror::new();
    let mut kills = 0;
    let mut commits = 0;
    loop {
        let page = graph.changes(&query(&stored.1, 3)).await.unwrap();
        if page.is_empty() {
            break;
        }
        let kill_at = random.chance(30).then(|| random.below(page.len()));
        for (i, record) in page.iter().enumerate() {
            if Some(i) == kill_at {
                kills += 1;
                mirror = stored.0.clone();
                break;
            }
            apply(&mut mirror, record);
            if let Some(commit) = record.closes() {
                commits += 1;
                stored = (mirror.clone(), commit.clone());
            }
        }
    }
    assert!(
        mix.iter().all(|&n| n > 0),
        "every kind of write in the mix: {mix:?}"
    );
    assert!(kills > 0, "the seed kills the consumer at least once");
    assert_eq!(
        stored.1,
        head(&graph).await,
        "the consumer reached the head"
    );
    let expected = graph_rows(&graph).await;
    assert!(expected.len() > 10, "the mix left rows: {}", expected.len());
    assert_eq!(
        stored.0, expected,
        "after {commits} commits and {kills} kills"
    );
}

#[tokio::test]
async fn a_merge_shows_the_merged_rows_on_the_target_and_a_new_branch_shows_none() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[person("ada", 36), person("bob", 41)]).await;
    let before = head(&graph).await;
    let fork = graph.create_branch("side", &At::default()).await.unwrap();
    let on_side = graph
        .load(
            &ndjson(&[person("ada", 50), person("eve", 22)]),
            &LoadOptions {
                branch: tributary::branch("side").unwrap(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .commit;
    // The branch's own feed: its creation changed nothing; its load changed two rows.
    let side = graph
        .changes(&ChangesQuery {
            branch: "side".to_owned(),
            ..query(&before, 10)
        })
        .await
        .unwrap();
    let closed: Vec<&CommitId> = side.iter().filter_map(ChangeRecord::closes).collect();
    assert_eq!(closed, [&fork.id, &on_side.id]);
    assert!(matches!(side[0], ChangeRecord::Commit(_)), "{:?}", side[0]);
    assert_eq!(summary(&side).len(), 2);

    graph
        .merge_branch("side", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    let merged = all_changes(&graph, &before).await;
    assert_eq!(
        summary(&merged),
        [
            ("insert".to_owned(), "Person".to_owned(), "eve".to_owned()),
            ("update".to_owned(), "Person".to_owned(), "ada".to_owned()),
        ]
    );
    let Some(ChangeRecord::Commit(end)) = merged.last() else {
        panic!("closed by the merge commit");
    };
    assert_eq!(end.kind, tributary::CommitKind::Merge);
}

#[tokio::test]
async fn a_commit_off_the_branch_or_past_cleanup_is_refused_naming_where_to_resume() {
    let (_dir, _uri, graph) = temp_graph().await;
    let old = load(&graph, &[person("ada", 1)]).await;
    let error = graph
        .changes(&query(&"no-such-commit".into(), 10))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
    graph.create_branch("side", &At::default()).await.unwrap();
    let on_side = graph
        .load(
            &ndjson(&[person("eve", 2)]),
            &LoadOptions {
                branch: tributary::branch("side").unwrap(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .commit;
    let error = graph.changes(&query(&on_side.id, 10)).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
    assert!(error.to_string().contains("not in the history"), "{error}");

    // A branch keeps the versions from its fork on: it goes first.
    graph.delete_branch("side").await.unwrap();
    for age in 2..6 {
        load(&graph, &[person("ada", age)]).await;
    }
    // The loads so far fall out of the retention window; the next two stay in it (both
    // margins are far wider than a load).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let kept = load(&graph, &[person("bob", 7)]).await;
    let last = load(&graph, &[person("bob", 8)]).await;
    graph.cleanup(Duration::from_millis(750)).await.unwrap();
    let error = graph.changes(&query(&old, 10)).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
    let message = error.to_string();
    assert!(
        message.contains("oldest commit to resume after is"),
        "{message}"
    );
    let named: CommitId = message
        .rsplit("resume after is ")
        .next()
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .trim()
        .into();
    // The commit named is the oldest the feed serves from.
    assert_eq!(named, kept, "{message}");
    let resumed = graph.changes(&query(&named, 10)).await.unwrap();
    assert_eq!(
        resumed.iter().rev().find_map(ChangeRecord::closes),
        Some(&last)
    );
}

#[tokio::test]
async fn a_commit_whose_upkeep_compacts_the_table_shows_only_its_own_rows() {
    let (_dir, _uri, graph) = temp_graph().await;
    let start = head(&graph).await;
    // One small fragment per load: past 16 of them a load's upkeep compacts them, which
    // rewrites every row without changing one.
    for i in 0..24 {
        load(&graph, &[person(&format!("p{i:02}"), i)]).await;
    }
    let records = all_changes(&graph, &start).await;
    let mut per_commit = Vec::new();
    let mut rows = 0;
    for record in &records {
        match record {
            ChangeRecord::Commit(_) => {
                per_commit.push(rows);
                rows = 0;
            }
            other => {
                assert!(matches!(other, ChangeRecord::Insert(_)), "{other:?}");
                rows += 1;
            }
        }
    }
    assert_eq!(per_commit, [1; 24]);
}

/// A defaulted field is filled into every stored row (an update of each).
#[tokio::test]
async fn a_column_added_by_a_schema_change_reaches_every_row_as_an_update() {
    let (_dir, _uri, graph) = temp_graph().await;
    let start = head(&graph).await;
    load(&graph, &[person("ada", 36), person("bob", 41)]).await;
    let evolved = tributary_tests::SCHEMA.replace(
        "  embedding: Vector(8)? @embed(bio)\n}",
        "  embedding: Vector(8)? @embed(bio)\n  nickname: String?\n  level: I32 = 3\n}",
    );
    graph.apply_schema(&evolved).await.unwrap();
    let records = all_changes(&graph, &start).await;
    let mut mirror = Mirror::new();
    for record in &records {
        apply(&mut mirror, record);
    }
    let updates: Vec<Row> = records
        .iter()
        .filter_map(|r| match r {
            ChangeRecord::Update(change) => Some(row_of(change)),
            _ => None,
        })
        .collect();
    assert_eq!(updates.len(), 2, "each stored row, with its new fields");
    assert!(updates
        .iter()
        .all(|row| row["nickname"].is_null() && row["level"] == 3));
    assert_eq!(mirror, graph_rows(&graph).await);
}

#[tokio::test]
async fn a_nullable_field_added_by_a_schema_change_changes_no_row() {
    let (_dir, _uri, graph) = temp_graph().await;
    load(&graph, &[person("ada", 36), person("bob", 41)]).await;
    let start = head(&graph).await;
    let evolved = tributary_tests::SCHEMA.replace(
        "  embedding: Vector(8)? @embed(bio)\n}",
        "  embedding: Vector(8)? @embed(bio)\n  nickname: String?\n}",
    );
    graph.apply_schema(&evolved).await.unwrap();
    let records = all_changes(&graph, &start).await;
    // Lance adds a column of nulls as metadata: no stored value changed, so the schema
    // commit closes with no row (a consumer reads an absent field as null).
    assert_eq!(summary(&records), Vec::<(String, String, String)>::new());
    assert!(
        matches!(records.as_slice(), [ChangeRecord::Commit(_)]),
        "{records:?}"
    );
}
