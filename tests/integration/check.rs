//! A graph whose files went missing or bad: `check` names each problem by branch, commit,
//! table and part; reads and folds fail with an error naming the table (and, for reads,
//! the commit), never a panic and never fewer rows; a clean graph checks clean.

use std::path::{Path, PathBuf};

use tributary::{ErrorKind, Graph, ReadOptions};
use tributary_tests::{ndjson, person, SCHEMA};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().is_dir() {
            files_under(&entry.path(), out);
        } else {
            out.push(entry.path());
        }
    }
}

/// The first file under `dir` (sorted) whose path satisfies `pick`.
fn file(dir: &Path, pick: impl Fn(&str) -> bool) -> PathBuf {
    let mut files = Vec::new();
    files_under(dir, &mut files);
    files.sort();
    files
        .into_iter()
        .find(|p| pick(&p.to_string_lossy()))
        .unwrap_or_else(|| panic!("no such file under {}", dir.display()))
}

/// A way to damage a copy of the graph at its root.
type Damage = Box<dyn Fn(&Path)>;

fn corrupt(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let end = bytes.len().saturating_sub(64);
    for byte in bytes.iter_mut().take(end).skip(64).step_by(7) {
        *byte ^= 0x5a;
    }
    std::fs::write(path, bytes).unwrap();
}

/// 300 loaded people, a pending generation of 10 sent ones (flushed, not folded), and 5
/// more sent ones only in the WAL.
async fn graph_with_everything(uri: &str) {
    let graph = Graph::init(uri, SCHEMA).await.unwrap();
    let people: Vec<String> = (0..300).map(|i| person(&format!("p{i:03}"), 30)).collect();
    graph
        .load(&ndjson(&people), &Default::default())
        .await
        .unwrap();
    let sent: Vec<String> = (0..10).map(|i| person(&format!("s{i}"), 40)).collect();
    graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(&sent))
        .await
        .unwrap();
    graph.close_writers().await.unwrap();
    let tail: Vec<String> = (0..5).map(|i| person(&format!("t{i}"), 50)).collect();
    graph
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(&tail))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_check_names_every_damaged_file_and_reads_and_folds_fail_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean");
    graph_with_everything(&clean.to_string_lossy()).await;

    let graph = Graph::open(&clean.to_string_lossy()).await.unwrap();
    let report = graph.check(|_| {}).await.unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.rows, 300, "{report:?}");
    assert!(
        report.generations >= 1 && report.wal_entries >= 1,
        "{report:?}"
    );
    assert!(report.indexes >= 1, "{report:?}");
    let pinned = graph.log("main", 1).await.unwrap()[0].tables["nodes/Person.lance"];
    drop(graph);

    let person_table = |root: &Path| root.join("nodes/Person.lance");
    let cases: [(&str, Damage); 5] = [
        (
            "a data file missing",
            Box::new(move |root: &Path| {
                std::fs::remove_file(file(&person_table(root).join("data"), |_| true)).unwrap()
            }),
        ),
        (
            "a data file corrupt",
            Box::new(move |root: &Path| corrupt(&file(&person_table(root).join("data"), |_| true))),
        ),
        (
            "the pinned version manifest missing",
            Box::new(move |root: &Path| {
                // Lance names version v's manifest u64::MAX - v.
                let name = format!("{}.manifest", u64::MAX - pinned);
                std::fs::remove_file(person_table(root).join("_versions").join(name)).unwrap()
            }),
        ),
        (
            "a pending generation's data missing",
            Box::new(move |root: &Path| {
                let wal = person_table(root).join("_mem_wal");
                std::fs::remove_file(file(&wal, |p| p.contains("_gen_") && p.contains("/data/")))
                    .unwrap()
            }),
        ),
        (
            "a WAL entry below the newest missing",
            Box::new(move |root: &Path| {
                let wal = person_table(root).join("_mem_wal");
                let mut entries = Vec::new();
                files_under(&wal, &mut entries);
                entries.retain(|p| p.extension().is_some_and(|e| e == "arrow"));
                // Named by their bit-reversed positions: "01…" is position 2 of 1, 2, 3.
                // (A lost newest entry leaves no trace to check against.)
                let second = entries
                    .iter()
                    .find(|p| {
                        p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with("01000"))
                    })
                    .unwrap()
                    .clone();
                std::fs::remove_file(second).unwrap()
            }),
        ),
    ];
    for (round, (what, damage)) in cases.iter().enumerate() {
        let root = dir.path().join(format!("damaged{round}"));
        copy_dir(&clean, &root);
        damage(&root);
        let graph = Graph::open(&root.to_string_lossy()).await.unwrap();
        let head = graph.log("main", 1).await.unwrap()[0].id.to_string();

        let report = graph.check(|_| {}).await.unwrap();
        assert!(!report.problems.is_empty(), "{what}: check found nothing");
        for problem in &report.problems {
            assert_eq!(
                (
                    problem.table.as_str(),
                    problem.commit.as_str(),
                    problem.branch.as_str()
                ),
                ("Person", head.as_str(), "main"),
                "{what}: {problem:?}"
            );
        }
        eprintln!("{what}: {:?}", report.problems);

        // Reads at the head: all rows, or an error naming the table — never fewer rows.
        let read = graph.read("Person", &ReadOptions::default()).await;
        let get = graph.get("Person", "p001", tributary::At::default()).await;
        if what.starts_with("a pending") || what.starts_with("a WAL") {
            assert_eq!(read.unwrap().num_rows(), 300, "{what}");
            assert!(get.is_ok(), "{what}: {get:?}");
        } else {
            let error = read.unwrap_err();
            assert!(
                matches!(error.kind(), ErrorKind::NotFound | ErrorKind::Internal),
                "{what}: {error}"
            );
            let message = error.to_string();
            assert!(
                message.contains("Person") && message.contains(&head[..]),
                "{what}: {message}"
            );
            let error = get.unwrap_err();
            assert!(
                matches!(error.kind(), ErrorKind::NotFound | ErrorKind::Internal),
                "{what}: a damaged file is no bad filter: {error}"
            );
        }
        if what.starts_with("a WAL") {
            // A writer opening the shard would replay up to the gap and write over it,
            // dropping the acknowledged rows after it: a send is refused instead.
            let sent = graph
                .ingest("main")
                .unwrap()
                .send(1, &ndjson(&[person("late", 1)]))
                .await
                .unwrap_err();
            assert_eq!(sent.kind(), ErrorKind::Internal, "{what}: {sent}");
            assert!(sent.to_string().contains("missing"), "{what}: {sent}");
        }
        // A fold: done whole, or refused naming the table.
        match graph.fold("main").await {
            Ok(_) => {
                let rows = graph.read("Person", &ReadOptions::default()).await;
                if let Ok(rows) = rows {
                    assert_eq!(rows.num_rows(), 315, "{what}: a fold lost rows");
                }
            }
            Err(error) => {
                assert!(
                    matches!(error.kind(), ErrorKind::NotFound | ErrorKind::Internal),
                    "{what}: {error}"
                );
                assert!(error.to_string().contains("Person"), "{what}: {error}");
            }
        }
    }
}
