//! The CLI as a user runs it: the real binary, its output formats, errors and exit codes.

// test code: a panic here is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod load;
mod restarts;
mod torture;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tributary"))
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run tributary")
}

fn ok(args: &[&str]) -> String {
    let output = run(args);
    assert!(
        output.status.success(),
        "tributary {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// A new graph with the example schema, in a temporary directory.
fn empty_graph() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("g").to_string_lossy().into_owned();
    let schema = examples().join("schema.tg");
    ok(&["init", &graph, "--schema", &schema.to_string_lossy()]);
    (dir, graph)
}

/// A graph loaded with the example data set.
fn example_graph() -> (tempfile::TempDir, String) {
    let (dir, graph) = empty_graph();
    ok(&[
        "load",
        &graph,
        &examples().join("data.ndjson").to_string_lossy(),
    ]);
    (dir, graph)
}

#[test]
fn every_command_has_help() {
    let top = ok(&["--help"]);
    for command in [
        "init",
        "load",
        "read",
        "get",
        "neighbors",
        "search",
        "log",
        "schema",
        "rejects",
        "cleanup",
    ] {
        assert!(top.contains(command), "top-level help misses {command}");
        let help = ok(&[command, "--help"]);
        assert!(
            help.contains("--format"),
            "{command} --help lacks --format:\n{help}"
        );
        assert!(
            help.contains("Usage: tributary"),
            "{command} --help:\n{help}"
        );
    }
}

#[test]
fn load_then_read_in_every_format() {
    let (_dir, graph) = example_graph();
    let lines = ok(&[
        "read", &graph, "Person", "--filter", "age > 80", "--select", "name,age", "--format",
        "ndjson",
    ]);
    assert!(!lines.is_empty());
    for line in lines.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(row["age"].as_i64().unwrap() > 80);
        assert_eq!(row.as_object().unwrap().len(), 2, "projection: {line}");
    }
    let json = ok(&[
        "read", &graph, "Company", "--limit", "3", "--format", "json",
    ]);
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 3);
    let csv = ok(&[
        "read",
        &graph,
        "Person",
        "--select",
        "name,email",
        "--limit",
        "2",
        "--format",
        "csv",
    ]);
    assert_eq!(csv.lines().next(), Some("name,email"));
    assert_eq!(csv.lines().count(), 3);
    let table = ok(&["get", &graph, "Person", "person-0001", "--format", "table"]);
    assert!(
        table.contains("person-0001") && table.contains("1 row"),
        "{table}"
    );
    let staff = ok(&[
        "neighbors",
        &graph,
        "Company",
        "company-007",
        "--edge",
        "WorksAt",
        "--in",
        "--format",
        "ndjson",
    ]);
    assert!(staff.lines().count() >= 1);
    let log = ok(&["log", &graph, "--format", "ndjson"]);
    let commits: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(commits.len(), 2);
    assert_eq!(commits[0]["kind"], "load");
    let schema = ok(&["schema", &graph]);
    assert!(schema.contains("edge WorksAt"));
}

#[test]
fn load_reads_standard_input() {
    let (_dir, graph) = example_graph();
    let mut child = bin()
        .args(["load", &graph, "-", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"type":"Company","data":{"name":"stdin-co"}}"#)
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    ok(&["get", &graph, "Company", "stdin-co"]);
}

#[test]
fn data_errors_name_the_line_and_exit_65() {
    let (dir, graph) = example_graph();
    let bad = dir.path().join("bad.ndjson");
    std::fs::write(&bad, "{\"type\":\"Company\",\"data\":{\"name\":\"fine\"}}\n{\"type\":\"Person\",\"data\":{\"name\":\"x\",\"age\":\"old\"}}\n").unwrap();
    let output = run(&["load", &graph, &bad.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("line 2") && stderr.contains("age"),
        "{stderr}"
    );
    let missing = run(&["get", &graph, "Company", "fine"]);
    assert_eq!(
        missing.status.code(),
        Some(66),
        "the rejected load wrote nothing"
    );
}

#[test]
fn usage_and_lookup_errors_have_distinct_exit_codes() {
    assert_eq!(run(&["read"]).status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none").to_string_lossy().into_owned();
    let output = run(&["log", &none]);
    assert_eq!(output.status.code(), Some(66));
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("error: "));
    // An input file that is not there is not found; a --server that is no URL is usage.
    let (_graph_dir, graph) = empty_graph();
    let missing = run(&["load", &graph, &none]);
    assert_eq!(missing.status.code(), Some(66), "{missing:?}");
    let not_a_url = run(&["log", "g", "--server", "notaurl"]);
    assert_eq!(not_a_url.status.code(), Some(64), "{not_a_url:?}");
}

/// Where strace is installed, count the fsyncs of a committed load in a child process.
#[test]
fn a_committed_load_is_synced() {
    let (dir, graph) = example_graph();
    let probe = Command::new("strace").arg("-V").output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "strace is not installed: the fsync flag is asserted by the storage tests instead"
        );
        return;
    }
    let trace = dir.path().join("trace");
    let status = Command::new("strace")
        .args(["-f", "-y", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_tributary"))
        .args([
            "load",
            &graph,
            &examples().join("update.ndjson").to_string_lossy(),
        ])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&trace).unwrap();
    let synced: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("fsync(") || l.contains("fdatasync("))
        .collect();
    // With `-y` each call names its file: the table's data file and version, the sidecar
    // and the manifest's new version must all be synced.
    let any = |needle: &[&str]| synced.iter().any(|l| needle.iter().all(|n| l.contains(n)));
    assert!(
        any(&["nodes/Person.lance/data"]),
        "data file not synced:\n{text}"
    );
    assert!(
        any(&["nodes/Person.lance/_versions"]),
        "table version not synced:\n{text}"
    );
    assert!(
        any(&["__manifest.lance/_versions"]),
        "manifest version not synced:\n{text}"
    );
    assert!(any(&["__recovery"]), "sidecar not synced:\n{text}");
}

/// Acknowledged means durable: a child ingests and prints each acknowledgement; it is
/// SIGKILLed mid-stream; every acknowledged row is then found in the WAL (replayed by a
/// new writer and read fresh).
#[tokio::test(flavor = "multi_thread")]
async fn every_acknowledged_row_survives_sigkill() {
    use std::io::{BufRead, BufReader, Write};
    let (_dir, graph) = empty_graph();
    let mut child = bin()
        .args(["ingest", &graph, "-", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut acks = BufReader::new(child.stdout.take().unwrap()).lines();
    let line =
        |i: u64| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"p{i}\",\"age\":30}}}}\n");
    let mut sent = 0u64;
    let mut acked_through = 0u64;
    // One line at a time, waiting for its acknowledgement.
    while acked_through < 40 {
        sent += 1;
        stdin.write_all(line(sent).as_bytes()).unwrap();
        stdin.flush().unwrap();
        while acked_through < sent {
            let ack: serde_json::Value =
                serde_json::from_str(&acks.next().unwrap().unwrap()).unwrap();
            assert!(ack["rejected"].as_array().unwrap().is_empty());
            acked_through = ack["through_line"].as_u64().unwrap();
        }
    }
    // Then a burst, killed while it is being acknowledged.
    for _ in 0..200 {
        sent += 1;
        stdin.write_all(line(sent).as_bytes()).unwrap();
    }
    stdin.flush().unwrap();
    let ack: serde_json::Value = serde_json::from_str(&acks.next().unwrap().unwrap()).unwrap();
    acked_through = ack["through_line"].as_u64().unwrap();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let opened = tributary::Graph::open(&graph).await.unwrap();
    opened.ingest("main").unwrap().warm("Person").await.unwrap();
    let options = tributary::ReadOptions {
        fresh: true,
        select: Some(vec!["id".into()]),
        ..Default::default()
    };
    let batch = opened.read("Person", &options).await.unwrap();
    let ids = batch
        .column(0)
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .unwrap();
    let found: std::collections::HashSet<&str> = ids.iter().flatten().collect();
    for i in 1..=acked_through {
        assert!(
            found.contains(format!("p{i}").as_str()),
            "acknowledged row p{i} was lost (acked through {acked_through})"
        );
    }
}

#[test]
fn fresh_reads_and_search_from_the_command_line() {
    let (_dir, graph) = empty_graph();
    let stream = examples().join("stream.ndjson");
    ok(&[
        "ingest",
        &graph,
        &stream.to_string_lossy(),
        "--no-fold",
        "--format",
        "json",
    ]);
    // Another process: the ingest closed its writers, so the rows are in flushed generations.
    let hits = ok(&[
        "search", &graph, "Person", "--text", "sensor", "--fresh", "--format", "ndjson",
    ]);
    let first: serde_json::Value = serde_json::from_str(hits.lines().next().unwrap()).unwrap();
    assert_eq!(first["id"], "river-01", "{hits}");
    assert!(first["_score"].as_f64().unwrap() > 0.0, "{hits}");
    let none = ok(&[
        "search", &graph, "Person", "--text", "sensor", "--format", "ndjson",
    ]);
    assert!(
        none.trim().is_empty(),
        "the snapshot has not folded it: {none}"
    );
    let row = ok(&[
        "get", &graph, "Person", "river-02", "--fresh", "--format", "ndjson",
    ]);
    assert!(row.contains("river.02@example.org"), "{row}");
    let missing = run(&["get", &graph, "Person", "river-02"]);
    assert_eq!(missing.status.code(), Some(66));

    let no_vector = run(&["search", &graph, "Person", "--nearest", "[0,0,0,0,0,0,0,0]"]);
    assert_eq!(no_vector.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&no_vector.stderr);
    assert!(stderr.contains("no indexed vector field"), "{stderr}");
    let bad_vector = run(&["search", &graph, "Person", "--nearest", "zebra"]);
    assert_eq!(bad_vector.status.code(), Some(64));
    let neither = run(&["search", &graph, "Person"]);
    assert!(!neither.status.success());
}

#[test]
fn ingest_acknowledges_in_json_and_reports_status() {
    let (dir, graph) = empty_graph();
    let data = dir.path().join("in.ndjson");
    std::fs::write(
        &data,
        "{\"type\":\"Person\",\"data\":{\"name\":\"a\"}}\n{\"type\":\"Person\",\"data\":{\"name\":\"b\",\"age\":-3}}\n{\"type\":\"Company\",\"data\":{\"name\":\"c\"}}\n{\"type\":\"Person\",\"data\":{\"name\":\"d\"}}\n",
    )
    .unwrap();
    let out = ok(&[
        "ingest",
        &graph,
        &data.to_string_lossy(),
        "--format",
        "json",
        "--no-fold",
    ]);
    let records: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = records.last().unwrap();
    assert_eq!(summary["acked"], 2);
    assert_eq!(
        summary["rejected"], 2,
        "a bad age and a type without @stream"
    );
    assert_eq!(summary["through_line"], 4);
    let rejected: Vec<u64> = records[..records.len() - 1]
        .iter()
        .flat_map(|r| {
            r["rejected"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["line"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(rejected, [2, 3]);

    // Durable, not yet visible: a fold publishes the two rows.
    let status = ok(&["ingest", "status", &graph, "--format", "ndjson"]);
    let row: serde_json::Value = serde_json::from_str(status.lines().next().unwrap()).unwrap();
    assert_eq!(row["type"], "Person");
    assert_eq!(
        row["pending_rows"], 2,
        "the writer flushed a and d on close"
    );
    assert_eq!(ok(&["read", &graph, "Person", "--format", "ndjson"]), "");
    let folded = ok(&["ingest", "fold", &graph, "--format", "ndjson"]);
    assert!(
        folded.contains(r#"{"type":"Person","rows":"2"}"#),
        "{folded}"
    );
    let people = ok(&[
        "read", &graph, "Person", "--select", "id", "--format", "csv",
    ]);
    assert_eq!(people, "id\na\nd\n");
    let log = ok(&["log", &graph, "--format", "ndjson"]);
    let newest: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(newest["kind"], "fold");
    assert_eq!(newest["actor"], "tributary:ingest");
    assert_eq!(newest["rows_written"], "nodes/Person.lance=2");

    // --strict stops at the first invalid line: only line 1 is acknowledged (and folded).
    let strict = run(&[
        "ingest",
        &graph,
        &data.to_string_lossy(),
        "--format",
        "json",
        "--strict",
    ]);
    assert_eq!(strict.status.code(), Some(65));
    let text = String::from_utf8_lossy(&strict.stdout);
    // Batching depends on how fast lines arrive: sum over the acknowledgements.
    let acks: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r.get("summary").is_none())
        .collect();
    let rows: u64 = acks.iter().map(|a| a["rows"].as_u64().unwrap()).sum();
    let last = acks.last().unwrap();
    assert_eq!(
        (rows, last["through_line"].as_u64()),
        (1, Some(2)),
        "{text}"
    );
    assert_eq!(last["rejected"][0]["line"], 2);
    let status = ok(&["ingest", "status", &graph, "--format", "ndjson"]);
    let row: serde_json::Value = serde_json::from_str(status.lines().next().unwrap()).unwrap();
    assert_eq!(
        row["pending_rows"], 0,
        "the run folded what it acknowledged"
    );
    assert!(ok(&["ingest", "--help"]).contains("through_line"));
}

#[test]
fn dead_letters_and_cleanup_from_the_command_line() {
    let (dir, graph) = empty_graph();
    let data = dir.path().join("in.ndjson");
    std::fs::write(
        &data,
        "{\"type\":\"Person\",\"data\":{\"name\":\"a\"}}\n{\"edge\":\"Knows\",\"from\":\"a\",\"to\":\"nobody\"}\n",
    )
    .unwrap();
    let out = ok(&[
        "ingest",
        &graph,
        &data.to_string_lossy(),
        "--format",
        "json",
    ]);
    let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert!(summary["fold_commit"].is_string(), "{out}");

    let rejects = ok(&["rejects", &graph, "--format", "ndjson"]);
    let rows: Vec<serde_json::Value> = rejects
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{rejects}");
    assert_eq!(rows[0]["kind"], "endpoint");
    assert_eq!(rows[0]["key"], "a->nobody");
    assert_eq!(rows[0]["fold_commit"], summary["fold_commit"]);

    let cleaned = ok(&[
        "cleanup",
        &graph,
        "--older-than",
        "0s",
        "--format",
        "ndjson",
    ]);
    assert!(cleaned.contains(r#""removed":"wal_entries""#), "{cleaned}");
    let bad = run(&["cleanup", &graph, "--older-than", "3 weeks"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unit"));
    // Still readable after cleanup.
    assert_eq!(
        ok(&["read", &graph, "Person", "--select", "id", "--format", "csv"]),
        "id\na\n"
    );
}

/// A graph with `rows` people ingested (durable, flushed, not folded).
fn graph_with_pending(rows: usize) -> (tempfile::TempDir, String) {
    let (dir, graph) = empty_graph();
    let data = dir.path().join("in.ndjson");
    let lines: String = (0..rows)
        .map(|i| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"p{i}\"}}}}\n"))
        .collect();
    std::fs::write(&data, lines).unwrap();
    ok(&["ingest", &graph, &data.to_string_lossy(), "--no-fold"]);
    (dir, graph)
}

fn fold_commits(graph: &str) -> Vec<serde_json::Value> {
    ok(&["log", graph, "--format", "ndjson"])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|c| c["kind"] == "fold")
        .collect()
}

#[test]
fn two_folder_processes_fold_each_generation_once() {
    let (_dir, graph) = graph_with_pending(500);
    let folders: Vec<_> = (0..2)
        .map(|_| {
            bin()
                .args(["ingest", "fold", &graph, "--format", "ndjson"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for folder in folders {
        let output = folder.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let folds = fold_commits(&graph);
    assert_eq!(folds.len(), 1, "{folds:?}");
    assert_eq!(folds[0]["rows_written"], "nodes/Person.lance=500");
    let count = ok(&[
        "read", &graph, "Person", "--select", "id", "--format", "csv",
    ]);
    assert_eq!(count.lines().count(), 501, "header + every row once");
}

#[test]
fn a_folder_killed_mid_fold_is_finished_by_the_next_writer() {
    let (_dir, graph) = graph_with_pending(200);
    let versions = |table: &str| {
        std::fs::read_dir(PathBuf::from(&graph).join(table).join("_versions"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let before = versions("nodes/Person.lance");
    // The folder stops (sleeps) after its table commits, before the publish: kill it there.
    let mut folder = bin()
        .args(["ingest", "fold", &graph])
        .env("FAILPOINTS", "fold::before-publish=sleep(60000)")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while versions("nodes/Person.lance") == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the fold never committed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    folder.kill().unwrap(); // SIGKILL
    folder.wait().unwrap();
    assert_eq!(
        std::fs::read_dir(PathBuf::from(&graph).join("__recovery"))
            .unwrap()
            .count(),
        1,
        "the killed fold left its sidecar"
    );
    // A read never writes: it neither sees the unpublished fold nor finishes it.
    let count = ok(&[
        "read", &graph, "Person", "--select", "id", "--format", "csv",
    ]);
    assert_eq!(count.lines().count(), 1, "header only: {count}");
    assert_eq!(
        std::fs::read_dir(PathBuf::from(&graph).join("__recovery"))
            .unwrap()
            .count(),
        1,
        "a read resolved the sidecar"
    );
    // The next writer rolls the fold forward before its own, which has nothing left.
    let nothing = ok(&["ingest", "fold", &graph, "--format", "ndjson"]);
    assert!(nothing.contains("none (nothing pending)"), "{nothing}");
    let count = ok(&[
        "read", &graph, "Person", "--select", "id", "--format", "csv",
    ]);
    assert_eq!(count.lines().count(), 201);
    assert_eq!(fold_commits(&graph).len(), 1);
}

/// A `tributary serve` child over `root` (on a free port unless `extra` has `--bind`),
/// killed on drop.
struct Served {
    child: std::process::Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(root: &std::path::Path, extra: &[&str]) -> Served {
    use std::io::{BufRead, BufReader};
    let mut command = bin();
    command.args(["serve", &root.to_string_lossy()]);
    if !extra.contains(&"--bind") {
        command.args(["--bind", "127.0.0.1:0"]);
    }
    let mut child = command.args(extra).stdout(Stdio::piped()).spawn().unwrap();
    let first = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap()
        .unwrap();
    let url = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first}"))
        .to_owned();
    Served { child, url }
}

/// Commit ids (12 hex characters) replaced, so two graphs' outputs compare.
fn mask_ids(text: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.len() == 12 && word.chars().all(|c| c.is_ascii_hexdigit()) {
            out.push_str("<id>");
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Every command, embedded and against a server, prints the same output.
#[test]
fn remote_commands_print_what_embedded_ones_print() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let served = serve(&root, &["--init"]);
    let remote = |args: &[&str]| -> String {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--server", &served.url]);
        ok(&all)
    };
    let schema = examples().join("schema.tg").to_string_lossy().into_owned();
    let data = examples()
        .join("data.ndjson")
        .to_string_lossy()
        .into_owned();
    let stream = examples()
        .join("stream.ndjson")
        .to_string_lossy()
        .into_owned();

    // Writes: graph `g` through the server, graph `e` embedded, by the same commands.
    let embedded = root.join("e").to_string_lossy().into_owned();
    let created = remote(&["init", "g", "--schema", &schema, "--format", "ndjson"]);
    let made = ok(&["init", &embedded, "--schema", &schema, "--format", "ndjson"]);
    assert_eq!(
        mask_ids(&created).replace("\"g\"", "\"G\""),
        mask_ids(&made).replace(&format!("{embedded:?}"), "\"G\"")
    );
    let loaded = remote(&["load", "g", &data, "--format", "ndjson"]);
    assert_eq!(
        mask_ids(&loaded),
        mask_ids(&ok(&["load", &embedded, &data, "--format", "ndjson"]))
    );
    // Batching follows arrival, so compare what the acknowledgements add up to.
    let acks = |text: &str| {
        let records: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|r: &serde_json::Value| r.get("summary").is_none())
            .collect();
        let last = records.last().cloned().unwrap();
        let rejected: Vec<serde_json::Value> = records
            .iter()
            .flat_map(|r| r["rejected"].as_array().cloned().unwrap_or_default())
            .collect();
        (
            last["acked"].clone(),
            last["through_line"].clone(),
            rejected,
        )
    };
    let streamed = remote(&["ingest", "g", &stream, "--format", "ndjson"]);
    let local = ok(&["ingest", &embedded, &stream, "--format", "ndjson"]);
    assert_eq!(acks(&streamed), acks(&local));
    // Fold what the server's background folder has not yet (its memtables flush too).
    remote(&["ingest", "fold", "g"]);

    // Reads of the same graph, here and through the server.
    let path = root.join("g").to_string_lossy().into_owned();
    let reads: Vec<Vec<&str>> = vec![
        vec![
            "read", "GRAPH", "Person", "--filter", "age > 60", "--select", "id,age", "--limit", "5",
        ],
        vec![
            "read", "GRAPH", "Person", "--fresh", "--limit", "3", "--format", "table",
        ],
        vec!["get", "GRAPH", "Person", "river-01"],
        vec![
            "get", "GRAPH", "Person", "river-01", "--fresh", "--format", "json",
        ],
        vec![
            "neighbors",
            "GRAPH",
            "Company",
            "company-007",
            "--edge",
            "WorksAt",
            "--in",
        ],
        vec![
            "search",
            "GRAPH",
            "Person",
            "--text",
            "operating systems",
            "-k",
            "3",
        ],
        vec!["log", "GRAPH", "--format", "csv"],
        vec!["schema", "GRAPH"],
        vec!["rejects", "GRAPH"],
        vec!["ingest", "status", "GRAPH"],
    ];
    for args in reads {
        let here: Vec<&str> = args
            .iter()
            .map(|a| if *a == "GRAPH" { path.as_str() } else { a })
            .collect();
        let there: Vec<&str> = args
            .iter()
            .map(|a| if *a == "GRAPH" { "g" } else { a })
            .collect();
        assert_eq!(remote(&there), ok(&here), "{args:?}");
    }
    // Errors keep their message and exit status.
    let missing = run(&["get", "g", "Person", "nobody", "--server", &served.url]);
    assert_eq!(missing.status.code(), Some(66));
    let bad = run(&[
        "read",
        "g",
        "Person",
        "--filter",
        "nope = 1",
        "--server",
        &served.url,
    ]);
    let local_bad = run(&["read", &path, "Person", "--filter", "nope = 1"]);
    assert_eq!(bad.status.code(), local_bad.status.code());
    assert_eq!(bad.stderr, local_bad.stderr);
    let cleaned = remote(&["cleanup", "g", "--older-than", "7d", "--format", "ndjson"]);
    assert!(cleaned.contains("wal_entries"), "{cleaned}");
}

#[test]
fn a_server_with_tokens_refuses_the_wrong_ones() {
    let (dir, graph) = example_graph();
    let root = std::path::Path::new(&graph).parent().unwrap().to_path_buf();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "reader read g\nwriter write *\n").unwrap();
    let served = serve(&root, &["--tokens", &tokens.to_string_lossy()]);
    let with = |token: Option<&str>, args: &[&str]| {
        let mut command = bin();
        command.args(args).args(["--server", &served.url]);
        command.env_remove("TRIBUTARY_TOKEN");
        if let Some(token) = token {
            command.env("TRIBUTARY_TOKEN", token);
        }
        command.output().unwrap()
    };
    let people = ["read", "g", "Person", "--limit", "1"];
    assert_eq!(with(None, &people).status.code(), Some(77));
    assert!(with(Some("reader"), &people).status.success());
    let update = examples().join("update.ndjson");
    let load = ["load", "g", &update.to_string_lossy()];
    let refused = with(Some("reader"), &load);
    assert_eq!(refused.status.code(), Some(77));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("may not write"));
    assert!(with(Some("writer"), &load).status.success());
    // A token file keeps the token out of the process listing.
    let file = dir.path().join("reader.token");
    std::fs::write(&file, "reader\n").unwrap();
    let from_file = bin()
        .args(people)
        .args([
            "--server",
            &served.url,
            "--token-file",
            &file.to_string_lossy(),
        ])
        .env_remove("TRIBUTARY_TOKEN")
        .output()
        .unwrap();
    assert!(from_file.status.success(), "{from_file:?}");
}

fn tls_fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/tls")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// `serve --tls-cert --tls-key` serves HTTPS: a client that trusts the issuer
/// (`--ca-cert`) reads and writes; one that does not, or that speaks plain HTTP, is
/// refused and changes nothing; one that stalls before its handshake is cut; a key that
/// does not fit is refused at start.
#[test]
fn a_server_with_a_certificate_speaks_only_https() {
    let (_dir, graph) = example_graph();
    let root = std::path::Path::new(&graph).parent().unwrap().to_path_buf();
    let (cert, key, ca) = (
        tls_fixture("server.pem"),
        tls_fixture("server.key"),
        tls_fixture("ca.pem"),
    );
    let served = serve(
        &root,
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--header-read-timeout",
            "1",
        ],
    );
    assert!(
        served.url.starts_with("https://127.0.0.1:"),
        "{}",
        served.url
    );
    // A client that never starts its handshake is cut like one that never sends headers.
    let address = served.url.trim_start_matches("https://");
    let mut silent = std::net::TcpStream::connect(address).unwrap();
    silent
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let waited = std::time::Instant::now();
    let mut byte = [0u8; 1];
    let read = std::io::Read::read(&mut silent, &mut byte).unwrap();
    assert_eq!(read, 0, "closed, unanswered");
    assert!(waited.elapsed() >= std::time::Duration::from_millis(900));
    let people = ["read", "g", "Person", "--format", "ndjson"];
    let trusted = |args: &[&str]| {
        let output = bin()
            .args(args)
            .args(["--server", &served.url, "--ca-cert", &ca])
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let before = trusted(&people);
    let update = examples().join("update.ndjson");
    trusted(&["load", "g", &update.to_string_lossy()]);
    let after = trusted(&people);
    assert_ne!(after, before, "the load over HTTPS changed the graph");

    let untrusted = bin()
        .args(people)
        .args(["--server", &served.url])
        .output()
        .unwrap();
    assert_eq!(untrusted.status.code(), Some(75), "{untrusted:?}");
    let plain = bin()
        .args(people)
        .args(["--server", &served.url.replace("https://", "http://")])
        .output()
        .unwrap();
    assert!(!plain.status.success(), "{plain:?}");
    assert_eq!(trusted(&people), after, "refused clients changed nothing");

    let mismatched = bin()
        .args(["serve", &root.to_string_lossy(), "--bind", "127.0.0.1:0"])
        .args(["--tls-cert", &cert, "--tls-key", &ca])
        .output()
        .unwrap();
    assert_eq!(mismatched.status.code(), Some(65), "{mismatched:?}");
    assert!(String::from_utf8_lossy(&mismatched.stderr).contains("ca.pem"));
}
