//! The CLI as a user runs it: the real binary, its output formats, errors and exit codes.

// test code: a panic here is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod branches;
mod disk;
mod docs;
mod embed;
mod load;
mod newcomer;
mod processes;
mod producers;
mod remote;
mod restarts;
mod storms;
mod torture;
mod unix;

// Shared with the library's tests; the CLI's reach the server by environment only.
#[allow(dead_code)]
#[path = "../../../../tests/src/s3_server.rs"]
mod s3_server;

pub(crate) use remote::{serve, serve_by, Served};

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
    ok_by(bin(), args)
}

/// `tributary` with `env` set (an S3 server's `AWS_*` environment, say).
fn bin_with(env: &[(String, String)]) -> Command {
    let mut command = bin();
    command.envs(env.iter().map(|(k, v)| (k, v)));
    command
}

/// `command` run with `args`: its output, or a failed test showing its stderr.
fn ok_by(mut command: Command, args: &[&str]) -> String {
    let output = command.args(args).output().expect("run tributary");
    assert!(
        output.status.success(),
        "tributary {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// The `through_line` of an ingest's acknowledgement record.
fn through_line(record: &str) -> u64 {
    let record: serde_json::Value = serde_json::from_str(record).unwrap();
    record["through_line"].as_u64().unwrap()
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

/// `schema g > s.tg` (stdout not a terminal) writes the schema's text, which `schema
/// apply` takes back; the JSON form is there when asked for.
#[test]
fn a_printed_schema_applies_back() {
    let (dir, graph) = example_graph();
    let printed = ok(&["schema", &graph]);
    assert!(!printed.trim_start().starts_with('{'), "{printed}");
    let file = dir.path().join("s.tg");
    std::fs::write(&file, &printed).unwrap();
    let applied = run(&["schema", "apply", &graph, &file.to_string_lossy()]);
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["schema", &graph, "--format", "json"])).unwrap();
    assert_eq!(json["schema"].as_str().unwrap(), printed);
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
    let commit_point = match tributary::PublisherKind::default_for_init().unwrap() {
        tributary::PublisherKind::Manifest => "__manifest.lance/_versions",
        tributary::PublisherKind::Record => "__txn/log",
    };
    assert!(
        any(&[commit_point]),
        "the commit point ({commit_point}) not synced:\n{text}"
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

    let wrong_dimension = run(&["search", &graph, "Person", "--nearest", "[0,0]"]);
    assert_eq!(wrong_dimension.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&wrong_dimension.stderr);
    assert!(
        stderr.contains("the query vector has 2 dimensions"),
        "{stderr}"
    );
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
    // Typed: the shard's number, its id, and the pending generations as a list.
    assert_eq!(row["shard"], 0, "{row}");
    assert!(row["shard_id"].is_string(), "{row}");
    assert!(row["pending_generations"].is_array(), "{row}");
    assert_eq!(ok(&["read", &graph, "Person", "--format", "ndjson"]), "");
    let folded = ok(&["ingest", "fold", &graph, "--format", "ndjson"]);
    let folded: serde_json::Value = serde_json::from_str(&folded).unwrap();
    assert_eq!(folded["rows"]["Person"], 2, "{folded}");
    let people = ok(&[
        "read", &graph, "Person", "--select", "id", "--format", "csv",
    ]);
    assert_eq!(people, "id\na\nd\n");
    let log = ok(&["log", &graph, "--format", "ndjson"]);
    let newest: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(newest["kind"], "fold");
    assert_eq!(newest["actor"], "tributary:ingest");
    assert_eq!(newest["rows_written"]["nodes/Person.lance"], 2, "{newest}");
    assert!(newest["folded"].is_array(), "{newest}");

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
    // Every fold the run made is named, with the rows it folded.
    let commits = summary["fold_commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "{out}");
    assert_eq!(summary["rows_folded"], 1, "{out}");

    assert_eq!(summary["dead_letters"], 1, "{out}");
    // The same input again, asked to fail on rejects: the summary, then exit 65.
    let failed = run(&[
        "ingest",
        &graph,
        &data.to_string_lossy(),
        "--fail-on-reject",
        "--format",
        "table",
    ]);
    assert_eq!(failed.status.code(), Some(65), "{failed:?}");
    let stdout = String::from_utf8_lossy(&failed.stdout);
    assert!(
        stdout.contains("could not apply 1 row") && stdout.contains("tributary rejects"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("--fail-on-reject"), "{stderr}");
    let good = dir.path().join("good.ndjson");
    std::fs::write(&good, "{\"type\":\"Person\",\"data\":{\"name\":\"b\"}}\n").unwrap();
    ok(&[
        "ingest",
        &graph,
        &good.to_string_lossy(),
        "--fail-on-reject",
        "--producer",
        "p1",
    ]);
    // In JSON, the status is one document: the shards, then the producers' marks.
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["ingest", "status", &graph, "--format", "json"])).unwrap();
    assert!(!status["shards"].as_array().unwrap().is_empty(), "{status}");
    assert_eq!(status["producers"][0]["producer"], "p1", "{status}");
    // Acknowledgements and a summary are no table: CSV is refused before anything is sent.
    let csv = run(&["ingest", &graph, &good.to_string_lossy(), "--format", "csv"]);
    assert_eq!(csv.status.code(), Some(64), "{csv:?}");
    assert!(
        String::from_utf8_lossy(&csv.stderr).contains("csv"),
        "{csv:?}"
    );

    let rejects = ok(&["rejects", &graph, "--format", "ndjson"]);
    let rows: Vec<serde_json::Value> = rejects
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{rejects}");
    assert_eq!(rows[0]["kind"], "endpoint");
    assert_eq!(rows[0]["key"], "a->nobody");
    assert_eq!(rows[0]["fold_commit"], summary["fold_commits"][0]);
    // A dead letter's row is JSON in JSON output, not a string holding JSON.
    assert_eq!(rows[0]["row"]["src"], "a", "{rejects}");

    let cleaned = ok(&[
        "cleanup",
        &graph,
        "--older-than",
        "0s",
        "--format",
        "ndjson",
    ]);
    let cleaned: serde_json::Value = serde_json::from_str(&cleaned).unwrap();
    assert!(cleaned["wal_entries"].is_u64(), "{cleaned}");
    let bad = run(&["cleanup", &graph, "--older-than", "3 weeks"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unit"));
    // Still readable after cleanup.
    assert_eq!(
        ok(&["read", &graph, "Person", "--select", "id", "--format", "csv"]),
        "id\na\nb\n"
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
    fold_commits_with(&[], graph)
}

/// The fold commits in `graph`'s log, read by a process with `env`.
fn fold_commits_with(env: &[(String, String)], graph: &str) -> Vec<serde_json::Value> {
    ok_by(bin_with(env), &["log", graph, "--format", "ndjson"])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|c| c["kind"] == "fold")
        .collect()
}

/// Two `ingest fold` processes at once on `graph` (with `env`), which holds `rows` pending
/// Person rows: one fold commit holds them all, and each is visible once.
fn two_folders_fold_once(env: &[(String, String)], graph: &str, rows: usize) {
    let folders: Vec<_> = (0..2)
        .map(|_| {
            bin_with(env)
                .args(["ingest", "fold", graph, "--format", "ndjson"])
                .stdout(Stdio::null())
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
    let folds = fold_commits_with(env, graph);
    assert_eq!(folds.len(), 1, "{folds:?}");
    assert_eq!(
        folds[0]["rows_written"]["nodes/Person.lance"], rows as u64,
        "{folds:?}"
    );
    let ids = ok_by(
        bin_with(env),
        &[
            "read", graph, "Person", "--select", "id", "--format", "csv", "--limit", "10000",
        ],
    );
    assert_eq!(ids.lines().count(), rows + 1, "header + every row once");
}

#[test]
fn two_folder_processes_fold_each_generation_once() {
    let (_dir, graph) = graph_with_pending(500);
    two_folders_fold_once(&[], &graph, 500);
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
    let nothing: serde_json::Value = serde_json::from_str(&nothing).unwrap();
    assert_eq!(nothing["commit"], serde_json::Value::Null, "{nothing}");
    assert_eq!(nothing["commits"], 0, "{nothing}");
    let count = ok(&[
        "read", &graph, "Person", "--select", "id", "--format", "csv",
    ]);
    assert_eq!(count.lines().count(), 201);
    assert_eq!(fold_commits(&graph).len(), 1);
}
