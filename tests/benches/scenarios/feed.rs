//! The change feed as its consumers meet it: a process replaying one large fold's changes
//! as NDJSON, and the delay from a commit's publish to a following HTTP consumer.

use std::io::Write;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use tributary::{ChangeRecord, ChangesQuery, Graph};
use tributary_tests::{ndjson, person, SCHEMA};

use crate::http::{Folder, ServerProcess};
use crate::{percentile, report};

/// The flag that makes this binary a feed consumer process: `--feed-process=URI,SINCE`
/// prints the records after SINCE as NDJSON on stdout, as `tributary changes` does.
pub const FEED_FLAG: &str = "--feed-process=";

/// The body of the consumer process: open the graph, page through the feed, print.
pub async fn feed_process(spec: &str) {
    let (uri, since) = spec.rsplit_once(',').expect("URI,SINCE");
    let graph = Graph::open(uri).await.expect("open");
    let mut query = ChangesQuery {
        branch: "main".to_owned(),
        since: since.to_owned(),
        types: Vec::new(),
        max_commits: 256,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    loop {
        let page = graph.changes(&query).await.expect("a page");
        let Some(last) = page.iter().rev().find_map(ChangeRecord::closes) else {
            break;
        };
        query.since = last.to_string();
        for record in &page {
            serde_json::to_writer(&mut out, record).expect("write");
            out.write_all(b"\n").expect("write");
        }
    }
    out.flush().expect("flush");
    eprintln!("{}", json!({ "peak_rss_mib": crate::fold::peak_rss_mib() }));
}

/// One fold of `pending` rows (half update rows of a `base`-row table, half new) replayed
/// by a consumer process: rows per second from the process's start to its exit, beside
/// the fold that made them and the same records read in this process.
pub async fn replay(base: usize, pending: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    Graph::init(&uri, SCHEMA).await.expect("init");
    let graph = Graph::open(&uri).await.expect("open");
    let ingest = graph.ingest("main").expect("ingest");
    let send = |names: Vec<String>, age: i32| {
        let ingest = &ingest;
        async move {
            for chunk in names.chunks(10_000) {
                let lines: Vec<String> = chunk.iter().map(|n| person(n, age)).collect();
                ingest.send(1, &ndjson(&lines)).await.expect("send");
            }
        }
    };
    send((0..base).map(|i| format!("b{i}")).collect(), 1).await;
    graph.fold("main").await.expect("base fold");
    let since = graph
        .snapshot(&tributary::At::default())
        .await
        .expect("head")
        .id;
    let mut names: Vec<String> = (0..pending / 2).map(|i| format!("b{i}")).collect();
    names.extend((0..pending - pending / 2).map(|i| format!("n{i}")));
    send(names, 99).await;
    let folded = Instant::now();
    graph.fold("main").await.expect("the fold");
    let fold_s = folded.elapsed().as_secs_f64();

    let read = Instant::now();
    let records = graph
        .changes(&ChangesQuery {
            branch: "main".to_owned(),
            since: since.to_string(),
            types: Vec::new(),
            max_commits: 1,
        })
        .await
        .expect("the fold's changes");
    let in_process_s = read.elapsed().as_secs_f64();
    let updated = records
        .iter()
        .filter(|r| matches!(r, ChangeRecord::Update(_)))
        .count();
    assert_eq!(updated, pending / 2);
    assert_eq!(
        records.len(),
        pending + 1,
        "every row and the commit record"
    );
    drop(records);
    drop(ingest);
    drop(graph);

    let started = Instant::now();
    let output = std::process::Command::new(std::env::current_exe().expect("this bench"))
        .arg(format!("{FEED_FLAG}{uri},{since}"))
        .output()
        .expect("the consumer process");
    let process_s = started.elapsed().as_secs_f64();
    assert!(output.status.success(), "the consumer: {}", output.status);
    let lines = output.stdout.iter().filter(|&&b| b == b'\n').count();
    let consumer: serde_json::Value = String::from_utf8_lossy(&output.stderr)
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_default();
    assert_eq!(lines, pending + 1);
    report(json!({
        "scenario": "feed_replay",
        "base_rows": base,
        "changed_rows": pending,
        "process_ms": process_s * 1e3,
        "process_rows_per_s": pending as f64 / process_s,
        "ndjson_mib": output.stdout.len() as f64 / (1 << 20) as f64,
        "process_peak_rss_mib": consumer["peak_rss_mib"],
        "in_process_ms": in_process_s * 1e3,
        "in_process_rows_per_s": pending as f64 / in_process_s,
        "fold_ms": fold_s * 1e3,
        "replay_over_fold": process_s / fold_s,
    }));
}

/// A server process takes `commits` one-row loads, one every `every`; a client following
/// its feed over HTTP notes when each commit's record arrives. The delay is that time
/// less the commit's own time (one clock: both on this machine).
pub async fn follow_delay(commits: usize, every: Duration) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().to_path_buf();
    Graph::init(&root.join("g").to_string_lossy(), SCHEMA)
        .await
        .expect("init");
    let server = ServerProcess::start(&root, 16, Folder::On, "mimalloc");
    let client = reqwest::Client::new();
    let response = client
        .get(format!(
            "{}/graphs/g/changes?since=head&follow=true",
            server.base
        ))
        .send()
        .await
        .expect("follow");
    assert!(response.status().is_success());
    let mut stream = response.bytes_stream();
    let reader = tokio::spawn(async move {
        let mut delays = Vec::new();
        let mut buffer = Vec::new();
        while delays.len() < commits {
            let chunk = stream.next().await.expect("open").expect("a chunk");
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let record: serde_json::Value = serde_json::from_slice(&line).expect("json");
                if record["op"] == "commit" {
                    let time = chrono::DateTime::parse_from_rfc3339(
                        record["time"].as_str().expect("time"),
                    )
                    .expect("a time");
                    let delay = chrono::Utc::now().signed_duration_since(time);
                    delays.push(delay.to_std().unwrap_or_default());
                }
            }
        }
        delays
    });
    for i in 0..commits {
        let paced = Instant::now();
        let answer = client
            .post(format!("{}/graphs/g/load", server.base))
            .body(ndjson(&[person(&format!("f{i}"), 30)]))
            .send()
            .await
            .expect("load");
        assert!(answer.status().is_success());
        tokio::time::sleep(every.saturating_sub(paced.elapsed())).await;
    }
    let mut delays = reader.await.expect("the follower");
    delays.sort();
    server.stop();
    report(json!({
        "scenario": "feed_follow_delay",
        "commits": commits,
        "load_every_ms": every.as_secs_f64() * 1e3,
        "delay_p50_ms": percentile(&delays, 0.5),
        "delay_p99_ms": percentile(&delays, 0.99),
        "delay_max_ms": delays.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
    }));
}
