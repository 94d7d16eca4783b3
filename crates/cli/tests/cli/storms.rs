//! An S3 store in a storm — requests refused (503 SlowDown), refused after a second,
//! applied with the answer lost, held past the client's timeout, and slowed by latency
//! spikes — under a server as its own process, with producers streaming and folds running
//! beside them.

use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::s3_server::S3Server;
use crate::{bin_with, examples, ok_by, serve_by};

fn lines(producer: usize, rows: usize) -> String {
    (0..rows)
        .map(|i| {
            let age = i % 100;
            format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"w{producer}-{i:03}\",\"age\":{age}}}}}\n")
        })
        .collect()
}

/// `GET path` on the server, its body.
fn http_get(url: &str, path: &str) -> String {
    let address = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

/// Producers on a server whose S3 store fails and stalls a share of its requests: every
/// line is acknowledged in the end (the producers retry), no acknowledgement is false
/// (each acknowledged row is in the graph, once, after the last fold), folds that meet the
/// storm fail whole or publish, and the server's metrics show the store client's retries,
/// which its settings bound (here: at most 10 per request, a 1 s timeout each).
#[test]
fn producers_and_folds_on_s3_in_a_storm_lose_nothing_and_the_retries_show() {
    let s3 = S3Server::start_with(&[
        "--fail-percent",
        "3",
        "--hang-percent",
        "1",
        "--hang-ms",
        "2500",
        "--spike-percent",
        "5",
        "--spike-ms",
        "300",
        "--seed",
        "29",
    ]);
    let env = s3.env();
    let command = || bin_with(&env);
    let options = [
        "--store-option",
        "timeout=1s",
        "--store-option",
        "client_max_retries=10",
    ];
    let schema = examples().join("schema.tg");
    // `init` meets the storm too; the client's retries carry it.
    ok_by(
        command(),
        &["init", &s3.uri("g"), "--schema", &schema.to_string_lossy()],
    );
    let served = serve_by(command(), &s3.uri(""), &options);
    let dir = tempfile::tempdir().unwrap();
    let producers = 4;
    let rows = 400;
    let mut running: Vec<Child> = (0..producers)
        .map(|producer| {
            let input = dir.path().join(format!("p{producer}.ndjson"));
            std::fs::write(&input, lines(producer, rows)).unwrap();
            // Small sends, so the streams last while folds run.
            command()
                .args(["ingest", "g"])
                .arg(&input)
                .args([
                    "--server",
                    &served.url,
                    "--format",
                    "json",
                    "--batch-lines",
                    "10",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Folds while the producers stream: each publishes whole or fails as unavailable.
    let started = Instant::now();
    let (mut folded, mut refused) = (0, 0);
    while running.iter_mut().any(|p| p.try_wait().unwrap().is_none()) {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "the producers never finished"
        );
        let fold = command()
            .args(["ingest", "fold", "g", "--server", &served.url])
            .output()
            .unwrap();
        match fold.status.code() {
            Some(0) => folded += 1,
            Some(75) | Some(70) => refused += 1,
            other => panic!("fold: {other:?} {}", String::from_utf8_lossy(&fold.stderr)),
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    for producer in running {
        let output = producer.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let summary = String::from_utf8_lossy(&output.stdout);
        let summary: serde_json::Value =
            serde_json::from_str(summary.lines().last().unwrap()).unwrap();
        assert_eq!(summary["acked"], rows, "{summary}");
    }
    // The last fold, retried as a client would.
    let last = (0..10).any(|_| {
        let fold = command()
            .args(["ingest", "fold", "g", "--server", &served.url])
            .output()
            .unwrap();
        fold.status.success() || {
            std::thread::sleep(Duration::from_millis(500));
            false
        }
    });
    assert!(last, "no fold got through the storm");
    let read = ok_by(
        command(),
        &[
            "read",
            "g",
            "Person",
            "--select",
            "name",
            "--format",
            "csv",
            "--server",
            &served.url,
        ],
    );
    let mut names: Vec<&str> = read.lines().skip(1).collect();
    let count = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), count, "a row is there twice");
    assert_eq!(count, producers * rows, "acknowledged rows are missing");
    let metrics = http_get(&served.url, "/metrics");
    let retries: u64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("tributary_store_retries "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no retry count in {metrics}"));
    assert!(retries > 0, "the storm's retries do not show: {metrics}");
    eprintln!("storm: {folded} folds published, {refused} refused, {retries} store retries");
}
