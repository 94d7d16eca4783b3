//! Ingest through the real server, in its own process, over loopback HTTP, with its
//! background folder on: acknowledgement latency tails at many producers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tributary::Graph;
use tributary_server::{AppState, Limits, ServerConfig};
use tributary_tests::{ndjson, person, SCHEMA};

use crate::{percentile, report};

/// The flag that makes this binary the server of [`ack_tails`]:
/// `--http-server=ROOT,STREAMS,FOLDER` (FOLDER `on`, or `held`: no fold in the run).
pub const SERVER_FLAG: &str = "--http-server=";

/// The body of the server process (`spec` is what follows [`SERVER_FLAG`]): serve every
/// graph under ROOT with STREAMS ingest streams a graph and its background folder on
/// (or held back), print the address, and stop
/// (flushing every writer, as `tributary serve` on SIGTERM) when stdin closes.
pub async fn server_process(spec: &str) {
    let mut parts = spec.rsplitn(3, ',');
    let (Some(folder), Some(streams), Some(root)) = (parts.next(), parts.next(), parts.next())
    else {
        panic!("{SERVER_FLAG}ROOT,STREAMS,FOLDER, not {spec}");
    };
    let mut graph_settings = tributary::GraphSettings::default();
    if folder == "held" {
        // No threshold is reached within a run: what the ack path costs on its own.
        graph_settings.triggers = tributary::FoldTriggers {
            pending_generations: usize::MAX,
            pending_bytes: u64::MAX,
            max_lag: Duration::from_secs(3600),
            ..tributary::FoldTriggers::default()
        };
    }
    let config = ServerConfig {
        root: root.to_owned(),
        store: Default::default(),
        graph_settings,
        tokens: None,
        allow_init: false,
        limits: Limits {
            max_ingest_streams: streams.parse().expect("a stream count"),
            ..Limits::default()
        },
        tls: None,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    println!("{}", listener.local_addr().expect("address"));
    let stdin_closed = async {
        let mut stdin = tokio::io::stdin();
        let mut buffer = [0u8; 64];
        while tokio::io::AsyncReadExt::read(&mut stdin, &mut buffer)
            .await
            .is_ok_and(|n| n > 0)
        {}
    };
    tributary_server::serve(listener, AppState::new(config), stdin_closed)
        .await
        .expect("serve");
}

/// A server process of this binary over the graphs under `root`.
pub(crate) struct ServerProcess {
    child: std::process::Child,
    pub(crate) base: String,
}

impl ServerProcess {
    pub(crate) fn start(
        root: &std::path::Path,
        streams: usize,
        folder: Folder,
        allocator: &str,
    ) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(std::env::current_exe().expect("this bench"))
            .arg(format!(
                "{SERVER_FLAG}{},{streams},{}",
                root.display(),
                folder.name()
            ))
            .env("TRIBUTARY_BENCH_ALLOCATOR", allocator)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("the server process");
        let mut address = String::new();
        std::io::BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut address)
            .expect("its address");
        Self {
            child,
            base: format!("http://{}", address.trim()),
        }
    }

    /// CPU time the server process has used so far (user and system).
    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .expect("the server's /proc stat");
        // The fields after the command's closing parenthesis; utime and stime are the
        // 14th and 15th of the line.
        let fields: Vec<u64> = stat[stat.rfind(')').expect("a stat line") + 2..]
            .split(' ')
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        // SAFETY: sysconf only reads a system constant.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Duration::from_secs_f64((fields[11] + fields[12]) as f64 / ticks)
    }

    /// Close its stdin (it flushes its writers and exits) and wait for it.
    pub(crate) fn stop(mut self) {
        drop(self.child.stdin.take());
        let status = self.child.wait().expect("the server's exit");
        assert!(status.success(), "the server process: {status}");
    }
}

/// The server's background folder in a run.
#[derive(Clone, Copy)]
pub enum Folder {
    /// Folding as it would for a user (a fold at least once a second).
    On,
    /// No fold during the run: the ack path's own cost.
    Held,
}

impl Folder {
    fn name(self) -> &'static str {
        match self {
            Folder::On => "on",
            Folder::Held => "held",
        }
    }
}

/// `producers` connections each send ingest requests of `rows` lines, one after another,
/// for `duration`, to a server in its own process (as a user's `tributary serve`: its
/// background folder on, mimalloc its allocator; `allocator` says otherwise): acked rows
/// a second, latency tails, and the server's CPU a request.
pub async fn ack_tails(
    producers: usize,
    rows: usize,
    duration: Duration,
    folder: Folder,
    allocator: &str,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().to_path_buf();
    Graph::init(&root.join("g").to_string_lossy(), SCHEMA)
        .await
        .expect("init");
    // Every producer a stream place (the default is 64 at once; beyond, 503).
    let server = ServerProcess::start(
        &root,
        producers.max(Limits::default().max_ingest_streams),
        folder,
        allocator,
    );
    let base = server.base.clone();
    let cpu_before = server.cpu();
    let url = Arc::new(format!("{base}/graphs/g/ingest"));
    let started = Instant::now();
    let tasks: Vec<_> = (0..producers)
        .map(|p| {
            let url = url.clone();
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut latencies = Vec::new();
                let mut s = 0;
                while started.elapsed() < duration {
                    let lines: Vec<String> = (0..rows)
                        .map(|r| person(&format!("p{p}-{s}-{r}"), 30))
                        .collect();
                    s += 1;
                    let sent = Instant::now();
                    let response = http
                        .post(url.as_str())
                        .header("content-type", "application/x-ndjson")
                        .body(ndjson(&lines))
                        .send()
                        .await
                        .expect("send");
                    assert!(response.status().is_success(), "{}", response.status());
                    response.bytes().await.expect("records");
                    latencies.push(sent.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("producer"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let server_cpu = server.cpu() - cpu_before;
    latencies.sort();
    let p50 = percentile(&latencies, 0.5);
    let p99 = percentile(&latencies, 0.99);
    let waits = send_waits(&base, p99).await;
    server.stop();
    report(json!({
        "scenario": "http_ingest_tails",
        "server_allocator": allocator,
        "folder": folder.name(),
        "producers": producers,
        "rows_per_request": rows,
        "requests": latencies.len(),
        "acked_rows_per_s": (latencies.len() * rows) as f64 / elapsed,
        "p50_ms": p50,
        "p99_ms": p99,
        "p999_ms": percentile(&latencies, 0.999),
        "p99_over_p50": p99 / p50,
        "server_cpu_us_per_request": server_cpu.as_secs_f64() * 1e6 / latencies.len() as f64,
        "server_cpu_cores": server_cpu.as_secs_f64() / elapsed,
        // What the WAL sends waited for: all of them, and those in the buckets at or above
        // the requests' p99 (a send's time is part of its request's).
        "wal_sends": waits,
    }));
}

/// The server's `tributary_wal_sends` counts (cause, fold running, bucket), summed by
/// cause and fold: over every send, and over the sends whose bucket reaches `slow_ms`.
async fn send_waits(base: &str, slow_ms: f64) -> serde_json::Value {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let mut all = std::collections::BTreeMap::<String, u64>::new();
    let mut slow = std::collections::BTreeMap::<String, u64>::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("tributary_wal_sends{"))
    {
        let label = |name: &str| -> String {
            line.split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_default()
                .to_owned()
        };
        let count: u64 = line
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let key = format!(
            "{}{}",
            label("cause"),
            if label("fold") == "yes" { "+fold" } else { "" }
        );
        *all.entry(key.clone()).or_default() += count;
        let bound: f64 = label("le_ms").parse().unwrap_or(f64::INFINITY);
        if bound >= slow_ms {
            *slow.entry(key).or_default() += count;
        }
    }
    json!({ "all": all, "slow": slow, "slow_from_ms": slow_ms })
}
