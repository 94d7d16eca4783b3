//! The write paths on the test S3 server (tests/s3-server), with latency added to every
//! request as a distant store has it: 1-row loads, 1-row ingest sends at 1, 16 and 64
//! producers, a fold of what they left, and 1 process on 1 shard beside 4 processes on 4
//! shards (processes of this binary, see [`OWNER_FLAG`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tributary::{Graph, GraphSettings, LoadOptions};
use tributary_tests::s3_server::S3Server;
use tributary_tests::{ndjson, person, s3_options, SCHEMA};

use super::{percentile, report, PRODUCERS};

const SHARDED: &str = r#"
node Person @stream(shards = 4) {
  name: String @key
  age: I32?
}
"#;

/// How long each ingest measurement runs, and how many 1-row loads are timed.
pub struct S3Settings {
    pub duration: Duration,
    pub loads: usize,
}

pub async fn scenarios(latency_ms: u64, settings: &S3Settings) {
    let server = S3Server::start_with(&["--latency-ms", &latency_ms.to_string()]);
    let load_rows_per_s = load_one_row(&server, latency_ms, settings.loads).await;
    for producers in PRODUCERS {
        let uri = server.uri(&format!("ingest{producers}"));
        let graph = Arc::new(open(&server, &uri, Some(SCHEMA), None).await);
        let keys: Vec<String> = (0..4_096).map(|i| format!("p{i}")).collect();
        let ingest = ingest_for(graph.clone(), producers, &keys, settings.duration).await;
        report(json!({
            "scenario": "s3_ingest_1_row",
            "latency_ms": latency_ms,
            "producers": producers,
            "p50_ms": ingest.p50_ms,
            "p99_ms": ingest.p99_ms,
            "first_send_ms": ingest.first_send_ms,
            "rows_per_s": ingest.rows_per_s,
            "load_rows_per_s": load_rows_per_s,
            "ingest_over_load": ingest.rows_per_s / load_rows_per_s,
        }));
        if producers == 64 {
            let started = Instant::now();
            let outcome = graph.fold("main").await.expect("fold");
            let rows: u64 = outcome.rows.values().sum();
            report(json!({
                "scenario": "s3_fold",
                "latency_ms": latency_ms,
                "rows": rows,
                "ms": started.elapsed().as_secs_f64() * 1e3,
                "rows_per_s": rows as f64 / started.elapsed().as_secs_f64(),
            }));
        }
    }
    shards(&server, latency_ms, settings.duration).await;
}

async fn open(server: &S3Server, uri: &str, init: Option<&str>, owned: Option<u32>) -> Graph {
    let builder = Graph::builder(uri)
        .store_options(s3_options(server))
        .settings(GraphSettings {
            owned_shards: owned.map(|shard| [shard].into_iter().collect()),
            ..Default::default()
        });
    match init {
        Some(schema) => builder.init(schema).await.expect("init on S3"),
        None => builder.open().await.expect("open on S3"),
    }
}

async fn load_one_row(server: &S3Server, latency_ms: u64, loads: usize) -> f64 {
    let graph = open(server, &server.uri("load"), Some(SCHEMA), None).await;
    let mut latencies = Vec::with_capacity(loads);
    let started = Instant::now();
    for i in 0..loads {
        let text = ndjson(&[person(&format!("p{i}"), 30)]);
        let t = Instant::now();
        graph
            .load(&text, &LoadOptions::default())
            .await
            .expect("load");
        latencies.push(t.elapsed());
    }
    let per_s = loads as f64 / started.elapsed().as_secs_f64();
    latencies.sort();
    report(json!({
        "scenario": "s3_load_1_row",
        "latency_ms": latency_ms,
        "writes": loads,
        "p50_ms": percentile(&latencies, 0.5),
        "p99_ms": percentile(&latencies, 0.99),
        "commits_per_s": per_s,
    }));
    per_s
}

struct Rate {
    rows_per_s: f64,
    /// Latency percentiles of every send but each producer's first.
    p50_ms: f64,
    p99_ms: f64,
    /// The slowest first send (it waits while the writer opens: its shard claimed and
    /// its WAL replayed).
    first_send_ms: f64,
}

/// `producers` tasks sending 1-row lines of `keys` to `graph` for `duration`.
async fn ingest_for(
    graph: Arc<Graph>,
    producers: usize,
    keys: &[String],
    duration: Duration,
) -> Rate {
    let keys = Arc::new(keys.to_vec());
    let started = Instant::now();
    let tasks: Vec<_> = (0..producers)
        .map(|p| {
            let graph = graph.clone();
            let keys = keys.clone();
            tokio::spawn(async move {
                let ingest = graph.ingest("main").expect("ingest");
                let mut latencies = Vec::new();
                let mut n = p;
                while started.elapsed() < duration {
                    let key = &keys[n % keys.len()];
                    n += producers;
                    let text = ndjson(&[person(key, 30)]);
                    let t = Instant::now();
                    let ack = ingest.send(1, &text).await.expect("send");
                    assert_eq!(ack.durable_rows, 1);
                    latencies.push(t.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut first = Duration::ZERO;
    for task in tasks {
        let mut sent = task.await.expect("producer");
        if !sent.is_empty() {
            first = first.max(sent.remove(0));
        }
        latencies.extend(sent);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let rows = latencies.len() + producers;
    latencies.sort();
    Rate {
        rows_per_s: rows as f64 / elapsed,
        p50_ms: percentile(&latencies, 0.5),
        p99_ms: percentile(&latencies, 0.99),
        first_send_ms: first.as_secs_f64() * 1e3,
    }
}

/// One process owning one shard with 16 producers, beside 4 processes owning one shard
/// each with 16 producers apiece, every row sent to its shard's owner. The owners are
/// processes of this binary (`--s3-owner=`), each with its own runtime and S3 client.
async fn shards(server: &S3Server, latency_ms: u64, duration: Duration) {
    // Each run on a graph of its own: a writer opening on a shard another run left
    // unflushed would first replay that run's WAL.
    let single_uri = server.uri("sharded_one");
    open(server, &single_uri, Some(SHARDED), None).await;
    let single = owner_processes(server, &single_uri, &[0], duration).await;
    let single = &single[0];
    let uri = server.uri("sharded_four");
    open(server, &uri, Some(SHARDED), None).await;
    let four = owner_processes(server, &uri, &[0, 1, 2, 3], duration).await;
    let rows: f64 = four.iter().map(|rate| rate.rows_per_s).sum();
    let p99 = four.iter().map(|rate| rate.p99_ms).fold(0.0, f64::max);
    let first = four
        .iter()
        .map(|rate| rate.first_send_ms)
        .fold(0.0, f64::max);
    report(json!({
        "scenario": "s3_shards",
        "latency_ms": latency_ms,
        "one_process_one_shard": {"rows_per_s": single.rows_per_s, "p50_ms": single.p50_ms, "p99_ms": single.p99_ms, "first_send_ms": single.first_send_ms},
        "four_processes_four_shards": {"rows_per_s": rows, "worst_p99_ms": p99, "worst_first_send_ms": first},
        "four_over_one": rows / single.rows_per_s,
    }));
}

/// The argument that makes this binary one owner process of the shard benchmark:
/// `--s3-owner=URI,SHARD,MILLISECONDS`, the store reached by the AWS_* environment.
pub const OWNER_FLAG: &str = "--s3-owner=";

/// Run one owner process per shard of `shards`, at once, each sending the keys of its
/// shard from 16 producers for `duration`; their rates.
async fn owner_processes(
    server: &S3Server,
    uri: &str,
    shards: &[u32],
    duration: Duration,
) -> Vec<Rate> {
    let exe = std::env::current_exe().expect("the bench binary");
    let children: Vec<_> = shards
        .iter()
        .map(|shard| {
            std::process::Command::new(&exe)
                .arg(format!(
                    "{OWNER_FLAG}{uri},{shard},{}",
                    duration.as_millis()
                ))
                .envs(server.env())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("an owner process")
        })
        .collect();
    let mut rates = Vec::new();
    for child in children {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .expect("join")
            .expect("owner output");
        assert!(output.status.success(), "an owner process failed");
        let rate: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("an owner's rate");
        let field = |name: &str| rate[name].as_f64().expect("a rate field");
        rates.push(Rate {
            rows_per_s: field("rows_per_s"),
            p50_ms: field("p50_ms"),
            p99_ms: field("p99_ms"),
            first_send_ms: field("first_send_ms"),
        });
    }
    rates
}

/// The body of an owner process (`spec` is what follows [`OWNER_FLAG`]): open the graph
/// owning one shard, send its shard's keys from 16 producers, print the rate as JSON.
pub async fn owner_process(spec: &str) {
    let mut parts = spec.split(',');
    let (Some(uri), Some(shard), Some(ms)) = (parts.next(), parts.next(), parts.next()) else {
        panic!("{OWNER_FLAG}URI,SHARD,MILLISECONDS, not {spec}");
    };
    let shard: u32 = shard.parse().expect("a shard number");
    let duration = Duration::from_millis(ms.parse().expect("milliseconds"));
    let graph = Graph::builder(uri)
        .settings(GraphSettings {
            owned_shards: Some([shard].into_iter().collect()),
            ..Default::default()
        })
        .open()
        .await
        .expect("open on S3");
    let keys: Vec<String> = (0..16_384).map(|i| format!("p{i}")).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let shard_of = graph.shards_of("Person", &refs).await.expect("shards");
    let mine: Vec<String> = keys
        .into_iter()
        .zip(shard_of)
        .filter(|(_, of)| *of == shard)
        .map(|(key, _)| key)
        .collect();
    let graph = Arc::new(graph);
    let rate = ingest_for(graph.clone(), 16, &mine, duration).await;
    // As an owner stops: what it acknowledged flushed, no flush cut short at exit.
    graph.close_writers().await.expect("close the writers");
    println!(
        "{}",
        json!({
            "rows_per_s": rate.rows_per_s,
            "p50_ms": rate.p50_ms,
            "p99_ms": rate.p99_ms,
            "first_send_ms": rate.first_send_ms,
        })
    );
}
