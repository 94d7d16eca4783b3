//! Many processes on one graph, killed and restarted at random: a server (stopped by
//! SIGKILL or SIGTERM), embedded ingesters and loaders (some killed mid-stream), remote
//! ingests and loads (some abandoned mid-request), and folds. One operation runs at a
//! time, so "acknowledged before" is exact; the processes overlap all the same (the server
//! and its folder live on across operations, and a killed process leaves its WAL, its
//! shard claim or a half-done commit behind).
//!
//! Oracle, after a final fold: every acknowledged key is visible exactly once; each key
//! shows the value of its last acknowledged write (or of a later write whose outcome was
//! unknown: a killed process may have made it durable); no interrupted write is left
//! unresolved; the commit log is a chain.
//!
//! Run twice: on a local disk, and on the test S3 server failing some of its requests
//! (refused, applied with the response lost, refused slowly), reached by the standard
//! AWS environment as a deployment would.
//!
//! Seeded and replayable: the seed is printed; `TORTURE_SEED=<n>` replays one run and
//! `TORTURE_OPS=<n>` sets its length (default 300 operations, under a minute here).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use std::path::PathBuf;

use super::s3_server::{self, S3Server};
use super::{bin_with, empty_graph, examples, ok_by, serve_by, Served};

/// xorshift64*: small, deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const KEYS: u64 = 12;

/// What each key may show at the end: its last acknowledged value, plus the values of
/// later writes whose outcome is unknown.
#[derive(Default)]
struct Oracle {
    allowed: BTreeMap<String, Vec<String>>,
    /// Keys some acknowledged write made exist.
    acknowledged: BTreeSet<String>,
    /// Writes of loads whose clients went away: the server runs a load to its end, so
    /// each may still commit, after writes acknowledged since, until the server stops.
    in_flight: BTreeMap<String, Vec<String>>,
}

impl Oracle {
    fn acknowledged(&mut self, key: &str, value: &str) {
        let mut allowed = vec![value.to_owned()];
        allowed.extend(self.in_flight.get(key).into_iter().flatten().cloned());
        self.allowed.insert(key.to_owned(), allowed);
        self.acknowledged.insert(key.to_owned());
    }

    /// A write of a request the server may still be running.
    fn in_flight(&mut self, key: &str, value: &str) {
        self.maybe(key, value);
        self.in_flight
            .entry(key.to_owned())
            .or_default()
            .push(value.to_owned());
    }

    /// The server stopped: what it was running has committed or never will.
    fn server_stopped(&mut self) {
        self.in_flight.clear();
    }

    fn maybe(&mut self, key: &str, value: &str) {
        self.allowed
            .entry(key.to_owned())
            .or_default()
            .push(value.to_owned());
    }
}

#[derive(Default)]
struct Tally {
    operations: u64,
    sigkills: u64,
    sigterms: u64,
    abandoned: u64,
    folds: u64,
    acked_rows: u64,
}

fn line(key: &str, value: &str) -> String {
    format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"{key}\",\"bio\":\"{value}\"}}}}\n")
}

/// A few writes of distinct keys, each with a value naming the operation.
fn writes(rng: &mut Rng, op: u64) -> Vec<(String, String)> {
    let mut keys = BTreeSet::new();
    for _ in 0..=rng.below(4) {
        keys.insert(format!("k{}", rng.below(KEYS)));
    }
    keys.into_iter()
        .map(|k| {
            let value = format!("op{op}-{k}");
            (k, value)
        })
        .collect()
}

fn text(rows: &[(String, String)]) -> String {
    rows.iter().map(|(k, v)| line(k, v)).collect()
}

/// Parse an ingest's `--format json` output: the lines it acknowledged.
fn acked_through(stdout: &[u8]) -> u64 {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|r| r["through_line"].as_u64())
        .max()
        .unwrap_or(0)
}

fn wait_bounded(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "a process did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigterm(child: &std::process::Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

/// Where a run's graph lives, and how its processes reach it.
struct Place {
    /// Scratch files; on a local disk also the folder of the graphs.
    dir: tempfile::TempDir,
    /// What embedded commands name.
    graph: String,
    /// What `serve` is given (the graph's id there is `g`).
    root: String,
    env: Vec<(String, String)>,
    /// The graph's `__recovery` folder, on the disk that holds it.
    recovery: PathBuf,
    /// The S3 server holding the graph (injecting faults); stopped when dropped.
    s3: Option<S3Server>,
}

impl Place {
    fn local() -> Place {
        let (dir, graph) = empty_graph();
        Place {
            root: dir.path().to_string_lossy().into_owned(),
            recovery: dir.path().join("g").join("__recovery"),
            dir,
            graph,
            env: Vec::new(),
            s3: None,
        }
    }

    /// A graph on the test S3 server, started with `flags`; its processes reach it by the
    /// standard AWS environment.
    fn s3(flags: &[&str]) -> Place {
        let server = S3Server::start_with(flags);
        let place = Place {
            dir: tempfile::tempdir().unwrap(),
            graph: server.uri("g"),
            root: server.uri(""),
            env: server.env(),
            recovery: server
                .dir
                .path()
                .join(s3_server::BUCKET)
                .join("g/__recovery"),
            s3: Some(server),
        };
        let schema = examples().join("schema.tg");
        place.ok(&["init", &place.graph, "--schema", &schema.to_string_lossy()]);
        place
    }

    fn command(&self) -> std::process::Command {
        bin_with(&self.env)
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        self.command().args(args).output().expect("run tributary")
    }

    fn ok(&self, args: &[&str]) -> String {
        ok_by(self.command(), args)
    }

    /// A fold that must succeed: on a store that fails requests, after a few tries.
    fn fold(&self, args: &[&str]) {
        let tries = if self.s3.is_some() { 5 } else { 1 };
        for _ in 1..tries {
            if self.run(args).status.success() {
                return;
            }
        }
        self.ok(args);
    }
}

#[test]
fn many_processes_killed_at_random_lose_and_revert_nothing() {
    torture(Place::local(), 300);
}

/// The same on S3, the server failing 3% of requests (refused, applied with the response
/// lost, refused slowly); the client retries as S3 clients do.
#[test]
fn on_s3_with_failing_requests_many_processes_killed_at_random_lose_and_revert_nothing() {
    torture(Place::s3(&["--fail-percent", "3", "--seed", "17"]), 120);
}

fn torture(place: Place, default_operations: u64) {
    let seed = std::env::var("TORTURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                | 1
        });
    let operations: u64 = std::env::var("TORTURE_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_operations);
    eprintln!("torture: TORTURE_SEED={seed} TORTURE_OPS={operations}");
    let mut rng = Rng(seed);
    let graph = place.graph.clone();
    let input = place.dir.path().join("op.ndjson");
    let input_path = input.to_string_lossy().into_owned();
    let mut server: Option<Served> = None;
    let mut oracle = Oracle::default();
    let mut tally = Tally::default();

    for op in 0..operations {
        tally.operations += 1;
        let rows = writes(&mut rng, op);
        std::fs::write(&input, text(&rows)).unwrap();
        let served = server.get_or_insert_with(|| serve_by(place.command(), &place.root, &[]));
        let url = served.url.clone();
        // A trace to read when the oracle fails: which kind of operation wrote what
        // (0-1 remote ingest, 2-3 embedded ingest, 4 killed ingest, 5-6 load, 7 abandoned
        // remote load, 8 server stop, 9 fold), and how much of it was acknowledged.
        let kind = rng.below(10);
        eprintln!("torture: op{op} kind {kind} writes {rows:?}");
        match kind {
            // A remote ingest through the server.
            0 | 1 => {
                let output = place.run(&[
                    "ingest",
                    "g",
                    &input_path,
                    "--format",
                    "json",
                    "--server",
                    &url,
                ]);
                settle(
                    &mut oracle,
                    &mut tally,
                    &rows,
                    acked_through(&output.stdout),
                );
            }
            // An embedded ingest beside the server (fencing its writer), folding or not.
            2 | 3 => {
                let fold = rng.below(2) == 0;
                let mut args = vec![
                    "ingest",
                    graph.as_str(),
                    input_path.as_str(),
                    "--format",
                    "json",
                ];
                if !fold {
                    args.push("--no-fold");
                }
                let output = place.run(&args);
                settle(
                    &mut oracle,
                    &mut tally,
                    &rows,
                    acked_through(&output.stdout),
                );
            }
            // An embedded ingest killed after some acknowledgements.
            4 => {
                let mut child = place
                    .command()
                    .args(["ingest", &graph, "-", "--format", "json", "--no-fold"])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                let mut stdin = child.stdin.take().unwrap();
                let mut acks = BufReader::new(child.stdout.take().unwrap()).lines();
                let wait_for = 1 + rng.below(rows.len() as u64);
                let mut through = 0;
                for (i, (key, value)) in rows.iter().enumerate() {
                    let _ = stdin.write_all(line(key, value).as_bytes());
                    let _ = stdin.flush();
                    if (i as u64) < wait_for {
                        while through <= i as u64 {
                            let Some(Ok(record)) = acks.next() else { break };
                            through = acked_through(record.as_bytes()).max(through);
                        }
                    }
                }
                child.kill().unwrap();
                child.wait().unwrap();
                tally.sigkills += 1;
                settle(&mut oracle, &mut tally, &rows, through);
            }
            // A load, embedded or remote.
            5 | 6 => {
                let mut args = vec!["load", "g", input_path.as_str()];
                if rng.below(2) == 0 {
                    args[1] = graph.as_str();
                } else {
                    args.extend(["--server", url.as_str()]);
                }
                let output = place.run(&args);
                let through = if output.status.success() {
                    rows.len() as u64
                } else {
                    0
                };
                settle(&mut oracle, &mut tally, &rows, through);
            }
            // A remote load whose client goes away mid-request.
            7 => {
                let mut child = place
                    .command()
                    .args(["load", "g", &input_path, "--server", &url])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                std::thread::sleep(Duration::from_millis(rng.below(150)));
                child.kill().unwrap();
                let status = child.wait().unwrap();
                tally.abandoned += 1;
                if status.success() {
                    settle(&mut oracle, &mut tally, &rows, rows.len() as u64);
                } else {
                    eprintln!("torture:   abandoned; the server may still commit it");
                    for (key, value) in &rows {
                        oracle.in_flight(key, value);
                    }
                }
            }
            // The server stops: killed, or asked to stop.
            8 => {
                let mut stopped = server.take().unwrap();
                if rng.below(2) == 0 {
                    stopped.child.kill().unwrap();
                    stopped.child.wait().unwrap();
                    tally.sigkills += 1;
                } else {
                    sigterm(&stopped.child);
                    let status = wait_bounded(&mut stopped.child);
                    assert!(status.success(), "seed {seed}: serve exited with {status}");
                    tally.sigterms += 1;
                }
                oracle.server_stopped();
            }
            // A fold, embedded or through the server.
            _ => {
                if rng.below(2) == 0 {
                    place.fold(&["ingest", "fold", &graph]);
                } else {
                    place.fold(&["ingest", "fold", "g", "--server", &url]);
                }
                tally.folds += 1;
            }
        }
    }
    if let Some(mut stopped) = server.take() {
        sigterm(&stopped.child);
        let status = wait_bounded(&mut stopped.child);
        assert!(status.success(), "seed {seed}: serve exited with {status}");
    }
    place.fold(&["ingest", "fold", &graph]);
    tally.folds += 1;

    // Every acknowledged key once, each with an allowed value.
    let rows = place.ok(&[
        "read", &graph, "Person", "--select", "id,bio", "--format", "ndjson",
    ]);
    let mut seen = HashSet::new();
    let mut shown = BTreeMap::new();
    for row in rows.lines() {
        let row: serde_json::Value = serde_json::from_str(row).unwrap();
        let id = row["id"].as_str().unwrap().to_owned();
        assert!(
            seen.insert(id.clone()),
            "seed {seed}: {id} is visible twice"
        );
        shown.insert(id, row["bio"].as_str().unwrap_or_default().to_owned());
    }
    for (key, allowed) in &oracle.allowed {
        match shown.get(key) {
            Some(value) => assert!(
                allowed.contains(value),
                "seed {seed}: {key} shows {value}, allowed {allowed:?}"
            ),
            None => assert!(
                !oracle.acknowledged.contains(key),
                "seed {seed}: acknowledged {key} = {allowed:?} is lost"
            ),
        }
    }
    // Nothing half-done is left, and the log is a chain from the head to the first commit.
    let recovery = &place.recovery;
    // (`name#n` files are the local store's staging files of a put a kill cut short;
    // dot files the S3 server's.)
    let left: Vec<_> = std::fs::read_dir(recovery)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| !name.contains('#') && !name.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "seed {seed}: left behind {left:?}");
    let log: Vec<serde_json::Value> = place
        .ok(&["log", &graph, "--limit", "100000", "--format", "ndjson"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut ids = HashSet::new();
    for (i, commit) in log.iter().enumerate() {
        let id = commit["commit"].as_str().unwrap();
        assert!(
            ids.insert(id.to_owned()),
            "seed {seed}: {id} twice in the log"
        );
        let parent = commit["parent"].as_str();
        match log.get(i + 1) {
            Some(next) => assert_eq!(parent, next["commit"].as_str(), "seed {seed}"),
            None => assert_eq!(parent, None, "seed {seed}: the chain does not end at init"),
        }
    }
    eprintln!(
        "torture: seed {seed}: {} operations, {} acknowledged rows, {} SIGKILLs, {} SIGTERMs, \
         {} abandoned requests, {} folds, {} commits",
        tally.operations,
        tally.acked_rows,
        tally.sigkills,
        tally.sigterms,
        tally.abandoned,
        tally.folds,
        log.len()
    );
}

/// Record what an ingest acknowledged: every line up to `through`; the outcome of the
/// rest is unknown (the process failed or was killed before acknowledging them).
fn settle(oracle: &mut Oracle, tally: &mut Tally, rows: &[(String, String)], through: u64) {
    eprintln!(
        "torture:   acknowledged through line {through} of {}",
        rows.len()
    );
    for (i, (key, value)) in rows.iter().enumerate() {
        if (i as u64) < through {
            oracle.acknowledged(key, value);
            tally.acked_rows += 1;
        } else {
            oracle.maybe(key, value);
        }
    }
}
