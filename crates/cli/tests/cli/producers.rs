//! Exactly-once producers through real processes: an ingest killed mid-stream and run
//! again as the same producer writes only what was not acknowledged; a remote ingest whose
//! server is killed resumes with the right sequence numbers; `ingest status` shows marks.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use super::{bin, empty_graph, ok, serve};

fn person(i: u64, age: i32) -> String {
    format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"p{i}\",\"age\":{age}}}}}\n")
}

fn person_ids(graph: &str) -> Vec<String> {
    let csv = ok(&["read", graph, "Person", "--select", "id", "--format", "csv"]);
    csv.lines().skip(1).map(str::to_owned).collect()
}

fn last_json(output: &str) -> serde_json::Value {
    serde_json::from_str(output.lines().last().unwrap()).unwrap()
}

/// `ingest status`'s producer rows: producer → (acknowledged, folded).
fn marks(graph: &str) -> Vec<(String, i64, Option<i64>)> {
    ok(&["ingest", "status", graph, "--format", "ndjson"])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|row| row.get("producer").is_some())
        .map(|row| {
            (
                row["producer"].as_str().unwrap().to_owned(),
                row["acknowledged"].as_i64().unwrap(),
                row["folded"].as_i64(),
            )
        })
        .collect()
}

#[test]
fn an_ingest_killed_and_run_again_as_its_producer_writes_each_line_once() {
    let (dir, graph) = empty_graph();
    let all: String = (1..=300).map(|i| person(i, 30)).collect();
    let file = dir.path().join("people.ndjson");
    std::fs::write(&file, &all).unwrap();

    // The first run reads standard input; it is killed after some acknowledgements.
    let mut child = bin()
        .args([
            "ingest",
            &graph,
            "-",
            "--format",
            "json",
            "--producer",
            "loader",
        ])
        .args(["--no-fold", "--batch-lines", "10"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut records = BufReader::new(child.stdout.take().unwrap()).lines();
    stdin
        .write_all(all.as_bytes()[..all.len() / 2].as_ref())
        .unwrap();
    stdin.flush().unwrap();
    let first: serde_json::Value = serde_json::from_str(&records.next().unwrap().unwrap()).unwrap();
    let acknowledged = first["through_line"].as_u64().unwrap();
    assert!(acknowledged >= 1);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    // The same command over the whole file: what was acknowledged is not written again.
    let rerun = ok(&[
        "ingest",
        &graph,
        &file.to_string_lossy(),
        "--format",
        "json",
        "--producer",
        "loader",
    ]);
    let summary = last_json(&rerun);
    let duplicates = summary["duplicates"].as_u64().unwrap();
    assert!(duplicates >= acknowledged, "{summary} after {acknowledged}");
    assert_eq!(
        summary["acked"].as_u64().unwrap() + duplicates,
        300,
        "{summary}"
    );
    assert_eq!(person_ids(&graph).len(), 300);
    assert_eq!(marks(&graph), [("loader".to_owned(), 300, Some(300))]);

    // Once more: nothing to write at all.
    let again = last_json(&ok(&[
        "ingest",
        &graph,
        &file.to_string_lossy(),
        "--format",
        "json",
        "--producer",
        "loader",
    ]));
    assert_eq!(
        (again["acked"].as_u64(), again["duplicates"].as_u64()),
        (Some(0), Some(300))
    );
    // A text summary says so.
    let text = ok(&[
        "ingest",
        &graph,
        &file.to_string_lossy(),
        "--producer",
        "loader",
        "--format",
        "table",
    ]);
    assert!(
        text.contains("300 lines acknowledged before (not written again)"),
        "{text}"
    );
}

#[test]
fn a_remote_producer_resumes_after_its_server_is_killed_and_writes_each_line_once() {
    let (dir, graph) = empty_graph();
    let mut served = serve(dir.path(), &[]);
    let address = served.url.trim_start_matches("http://").to_owned();
    let mut ingest = bin()
        .args(["ingest", "g", "-", "--format", "json", "--producer", "feed"])
        .args(["--sequence", "1000", "--server", &served.url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut feed = ingest.stdin.take().unwrap();
    let mut records = BufReader::new(ingest.stdout.take().unwrap()).lines();
    let first: String = (0..100).map(|i| person(i, 30)).collect();
    feed.write_all(first.as_bytes()).unwrap();
    feed.flush().unwrap();
    loop {
        let record: serde_json::Value =
            serde_json::from_str(&records.next().unwrap().unwrap()).unwrap();
        if record["through_line"] == 100 {
            break;
        }
    }
    // Killed: no stream is ended cleanly, nothing is flushed.
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    let second: String = (100..200).map(|i| person(i, 31)).collect();
    feed.write_all(second.as_bytes()).unwrap();
    feed.flush().unwrap();
    let _back = serve(dir.path(), &["--bind", &address]);
    drop(feed);
    let rest: Vec<String> = records.map(Result::unwrap).collect();
    let summary: serde_json::Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    let status = ingest.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut ingest.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{stderr}");
    assert_eq!(summary["through_line"], 200, "{summary}");
    assert_eq!(
        summary["acked"].as_u64().unwrap() + summary["duplicates"].as_u64().unwrap(),
        200,
        "{summary}"
    );
    ok(&["ingest", "fold", &graph]);
    assert_eq!(person_ids(&graph).len(), 200, "every line once");
    // Lines 1..=200 of the input are sequences 1000..=1199.
    assert_eq!(marks(&graph), [("feed".to_owned(), 1199, Some(1199))]);
}

#[test]
fn a_sequence_needs_a_producer() {
    let (_dir, graph) = empty_graph();
    let output = bin()
        .args(["ingest", &graph, "-", "--sequence", "5"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "a usage error");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--producer"), "{stderr}");
}
