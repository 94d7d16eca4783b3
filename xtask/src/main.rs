//! `cargo xtask`: the project's set-up commands. No Lance dependency, so it builds in seconds.
//!
//! - `demo`  build the CLI and run it on `examples/` (init, load, read, neighbours, a
//!   Cypher and a SQL query, ingest, similarity search, log);
//! - `lint`  fmt check, no import circles between a crate's modules, and clippy `-D warnings`
//!   (the quick loop while editing);
//! - `test`  `lint`, then the test suite (nextest when installed), once per publisher
//!   (`TRIBUTARY_PUBLISHER=manifest`, then `record`);
//! - `bench` the decode benchmark and the scenario benchmarks, in release; the scenarios'
//!   records are kept in `docs/bench/results.ndjson` and drawn as SVG charts there;
//! - `charts [RESULTS]` draw the charts again from a results file;
//! - `ci`    what CI runs: `test`.
//!
//! Lance's build needs `protoc`; every cargo call here gets it from `protoc-bin-vendored`.

mod charts;
mod circles;
mod example;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo(),
        Some("charts") => charts(args.get(1).map(PathBuf::from)),
        Some("lint") => lint(),
        Some("test") | Some("ci") => test(&args[1..]),
        Some("bench") => bench(&args[1..]),
        Some("gen-example") => example::write(&root().join("examples")),
        _ => {
            eprintln!(
                "usage: cargo xtask <demo|lint|test|bench|charts|ci>\n\n  demo   build the CLI and run it on examples/\n  \
                 lint   fmt check, import circles, clippy -D warnings (no tests)\n  \
                 test   fmt check, clippy -D warnings, the whole test suite (extra args go to the test runner)\n  \
                 bench  benchmarks in release, JSON lines on stdout, kept and drawn in docs/bench/\n  \
                 charts draw docs/bench/*.svg again from docs/bench/results.ndjson (or a given file)\n  \
                 ci     same as test"
            );
            Err("unknown command".into())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

type Result<T = ()> = std::result::Result<T, String>;

fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // xtask lives one folder below the workspace root.
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

fn cargo() -> Result<Command> {
    let protoc =
        protoc_bin_vendored::protoc_bin_path().map_err(|e| format!("no vendored protoc: {e}"))?;
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(root()).env("PROTOC", protoc);
    // `cargo run` hands the xtask its own package's variables (CARGO_MANIFEST_DIR,
    // CARGO_PKG_NAME, ...). Build scripts such as ring's ask to rerun when those change,
    // and cargo compares them in its own environment: passed on, they would make a build
    // through the xtask and a direct cargo call rebuild ring, and Lance above it, in turn.
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(is_package_variable) {
            command.env_remove(key);
        }
    }
    Ok(command)
}

/// The variables cargo sets for the package it runs, as opposed to cargo's own settings
/// (CARGO, CARGO_HOME, CARGO_TARGET_DIR, ...), which must pass through.
fn is_package_variable(key: &str) -> bool {
    key.starts_with("CARGO_PKG_")
        || matches!(
            key,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_RUSTC_CURRENT_DIR"
        )
}

fn run(mut command: Command) -> Result {
    // The command line only: the environment it gets would bury it.
    let line: Vec<String> = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let line = line.join(" ");
    eprintln!("xtask: running {line}");
    let status = command
        .status()
        .map_err(|e| format!("cannot run {line}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{line}` failed with {status}"))
    }
}

fn cargo_with(args: &[&str]) -> Result<Command> {
    let mut command = cargo()?;
    command.args(args);
    Ok(command)
}

fn lint() -> Result {
    run(cargo_with(&["fmt", "--all", "--check"])?)?;
    let circles = circles::import_circles(&root().join("crates"))?;
    if !circles.is_empty() {
        return Err(format!(
            "modules of a crate import each other in a circle (ARCHITECTURE.md: no import \
             circles):\n  {}",
            circles.join("\n  ")
        ));
    }
    demo_shares_the_test_build()?;
    run(cargo_with(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--features",
        "tributary/failpoints",
        "--",
        "-D",
        "warnings",
    ])?)
}

/// The demo builds only the CLI; it reuses the test build's dependencies only while
/// every package it compiles has the features the workspace's test build gives it.
/// Otherwise the first `cargo xtask test` after a demo would compile Lance again.
fn demo_shares_the_test_build() -> Result {
    let features =
        |selection: &[&str], edges: &str| -> Result<std::collections::BTreeSet<String>> {
            let mut tree = cargo_with(&["tree", "--prefix", "none", "--format", "{p} {f}"])?;
            tree.args(selection)
                .args(["--edges", edges, "--features", "tributary/failpoints"]);
            let output = tree
                .output()
                .map_err(|e| format!("cannot run cargo tree: {e}"))?;
            if !output.status.success() {
                return Err(format!(
                    "cargo tree failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
            Ok(String::from_utf8_lossy(&output.stdout)
                .lines()
                .map(|line| line.replace(" (*)", "").replace(" (proc-macro)", ""))
                .filter(|line| !line.trim().is_empty())
                .collect())
        };
    let demo = features(&["--package", "tributary-cli"], "normal,build")?;
    let tests = features(&["--workspace"], "normal,build,dev")?;
    let differ: Vec<&String> = demo.difference(&tests).collect();
    if differ.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the demo's build would compile these packages with other features than the tests \
         (enable the tests' features in the workspace manifest):\n  {}",
        differ
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    ))
}

fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("target"))
}

/// Build the S3-compatible server the tests and S3 benchmarks start (tests/s3-server,
/// from crates.io), in a target folder of its own so its dependencies' features never
/// touch the workspace's; returns its binary. Release: it serves every S3 test.
fn s3_server() -> Result<PathBuf> {
    let dir = target_dir().join("s3-server");
    let started = std::time::Instant::now();
    let mut build = cargo_with(&["build", "--release", "--manifest-path"])?;
    build
        .arg(root().join("tests/s3-server/Cargo.toml"))
        .arg("--target-dir")
        .arg(&dir);
    run(build)?;
    eprintln!(
        "xtask: the S3 test server is ready ({:.0} s)",
        started.elapsed().as_secs_f64()
    );
    Ok(dir.join("release").join("tributary-test-s3"))
}

fn test(extra: &[String]) -> Result {
    lint()?;
    let s3 = s3_server()?;
    let nextest = Command::new("cargo-nextest")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    // The whole suite once per publisher: every graph a test makes without naming one
    // commits through `TRIBUTARY_PUBLISHER`'s.
    for publisher in ["manifest", "record"] {
        eprintln!("xtask: the tests with the {publisher} publisher");
        let mut command = if nextest {
            cargo_with(&[
                "nextest",
                "run",
                "--workspace",
                "--features",
                "tributary/failpoints",
                "--no-fail-fast",
            ])?
        } else {
            cargo_with(&[
                "test",
                "--workspace",
                "--features",
                "tributary/failpoints",
                "--no-fail-fast",
            ])?
        };
        command
            .args(extra)
            .env("TRIBUTARY_TEST_S3", &s3)
            .env("TRIBUTARY_PUBLISHER", publisher);
        run(command)?;
    }
    // nextest does not run doctests.
    if nextest {
        run(cargo_with(&[
            "test",
            "--workspace",
            "--doc",
            "--features",
            "tributary/failpoints",
        ])?)?;
    }
    python_tests()
}

/// The Python client's tests, against the `tributary` binary the tests just built, in a
/// virtual environment of the project's own (`target/python-venv`) with the client and
/// its dependencies installed from PyPI (`python/pyproject.toml`).
fn python_tests() -> Result {
    let python = python_venv("test")?;
    let mut pytest = Command::new(&python);
    pytest
        .args(["-m", "pytest", "-q"])
        .arg(root().join("python").join("tests"))
        .env(
            "TRIBUTARY_BIN",
            target_dir().join("debug").join("tributary"),
        );
    run(pytest)
}

/// The project's virtual environment (`target/python-venv`), made on first use, with the
/// client and the dependencies of its `extra` (`test`, `bench`) installed from PyPI.
fn python_venv(extra: &str) -> Result<PathBuf> {
    let venv = target_dir().join("python-venv");
    let python = venv.join("bin").join("python");
    if !python.exists() {
        let interpreter = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        let mut create = Command::new(&interpreter);
        create.args(["-m", "venv"]).arg(&venv);
        run(create).map_err(|e| {
            format!("{e}: the Python client's tests need Python 3.9 or later as `{interpreter}` (or set PYTHON)")
        })?;
    }
    let mut install = Command::new(&python);
    install
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-e",
        ])
        .arg(format!("{}[{extra}]", root().join("python").display()));
    run(install)?;
    Ok(python)
}

fn bench(extra: &[String]) -> Result {
    let s3 = s3_server()?;
    let mut scenarios = cargo_with(&[
        "bench",
        "-p",
        "tributary-tests",
        "--bench",
        "scenarios",
        "--",
    ])?;
    // The query scenario's peer, Kuzu, runs in the project's Python.
    let python = python_venv("bench")?;
    scenarios
        .args(extra)
        .env("TRIBUTARY_TEST_S3", &s3)
        .env("TRIBUTARY_BENCH_PYTHON", &python);
    let records = run_keeping_records(scenarios)?;
    // Only a whole run replaces the kept results: the charts then match their data.
    let whole = !extra
        .iter()
        .any(|a| a.starts_with("--only") || a == "--quick");
    run(cargo_with(&[
        "bench",
        "-p",
        "tributary-schema",
        "--bench",
        "decode",
    ])?)?;
    if whole {
        keep_results(&records)?;
    }
    Ok(())
}

fn demo() -> Result {
    // Only the CLI, with the test build's features: every dependency then compiles with
    // exactly the features `cargo xtask test` unifies over the workspace (the workspace
    // manifest enables the few a test-only dependency would add), so the test run reuses
    // them and compiles only the tests. `cargo tree` shows the two sets are equal.
    run(cargo_with(&[
        "build",
        "--package",
        "tributary-cli",
        "--bin",
        "tributary",
        "--features",
        "tributary/failpoints",
    ])?)?;
    let target = target_dir();
    let bin = target.join("debug").join("tributary");
    let examples = root().join("examples");
    let graph = target.join("demo-graph");
    if graph.exists() {
        std::fs::remove_dir_all(&graph)
            .map_err(|e| format!("cannot remove old demo graph: {e}"))?;
    }
    let graph = graph.to_string_lossy().into_owned();
    let schema = examples.join("schema.tg").to_string_lossy().into_owned();
    let data = examples.join("data.ndjson").to_string_lossy().into_owned();
    let step = |what: &str, args: &[&str]| -> Result {
        println!("\n$ tributary {}   # {what}", args.join(" "));
        let mut command = Command::new(&bin);
        command.args(args).args(["--format", "table"]);
        let status = command
            .status()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!(
                "`tributary {}` failed with {status}",
                args.join(" ")
            ))
        }
    };
    step(
        "create a graph from the example schema",
        &["init", &graph, "--schema", &schema],
    )?;
    step(
        "load the example data set as one commit",
        &["load", &graph, &data],
    )?;
    step(
        "read with a filter, a projection and a limit",
        &[
            "read",
            &graph,
            "Person",
            "--filter",
            "age > 60",
            "--select",
            "name,age,status",
            "--limit",
            "5",
        ],
    )?;
    step(
        "get one node by key",
        &["get", &graph, "Company", "company-007"],
    )?;
    step(
        "who works at company-007 (edges into it)",
        &[
            "neighbors",
            &graph,
            "Company",
            "company-007",
            "--edge",
            "WorksAt",
            "--in",
        ],
    )?;
    step(
        "who person-0001 knows",
        &[
            "neighbors",
            &graph,
            "Person",
            "person-0001",
            "--edge",
            "Knows",
        ],
    )?;
    step(
        "a graph question in Cypher: whom person-0001 reaches in two hops, and where they work",
        &[
            "query",
            &graph,
            "MATCH (a:Person {name: 'person-0001'})-[:Knows]->()-[:Knows]->(c:Person)-[:WorksAt]->(w:Company) \
             RETURN DISTINCT c.name AS person, w.name AS company ORDER BY person LIMIT 5",
        ],
    )?;
    step(
        "the same graph in SQL: the companies with the most people",
        &[
            "sql",
            &graph,
            "SELECT c.name AS company, count(*) AS people FROM WorksAt w JOIN Company c ON c.id = w.dst \
             GROUP BY c.name ORDER BY people DESC, company LIMIT 3",
        ],
    )?;
    step(
        "upsert one row: a second, visible commit",
        &[
            "load",
            &graph,
            &examples.join("update.ndjson").to_string_lossy(),
        ],
    )?;
    step(
        "stream rows: acknowledged once durable in the WAL, published by a fold",
        &[
            "ingest",
            &graph,
            &examples.join("stream.ndjson").to_string_lossy(),
        ],
    )?;
    step(
        "the streamed rows, visible after the fold (the newest write of river-01 won)",
        &[
            "read",
            &graph,
            "Person",
            "--filter",
            "name LIKE 'river-%'",
            "--select",
            "name,age,bio",
        ],
    )?;
    step(
        "the embedder that filled `embedding` from `bio` (the built-in one: offline, lexical)",
        &["embedder", &graph],
    )?;
    step(
        "nearest people to a text, by the embeddings the load and the fold made",
        &[
            "search",
            &graph,
            "Person",
            "--similar",
            "storage engines",
            "-k",
            "3",
        ],
    )?;
    step(
        "a streamed edge to a node that does not exist became a dead letter",
        &["rejects", &graph],
    )?;
    step("the commit log: loads, then the fold", &["log", &graph])?;
    println!(
        "\nThe demo graph is in {graph}; try `{} --help`.",
        bin.display()
    );
    Ok(())
}

/// Run `command`, passing its output through, and keep the JSON records it prints (one
/// per line, with a `scenario`).
fn run_keeping_records(mut command: Command) -> Result<Vec<String>> {
    use std::io::{BufRead, BufReader, Write};
    // The command line only: the environment it gets would bury it.
    let line: Vec<String> = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    eprintln!("xtask: running {}", line.join(" "));
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    let mut records = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        let mut out = std::io::stdout();
        for line in BufReader::new(stdout).lines() {
            let line = line.map_err(|e| format!("reading the benchmark's output: {e}"))?;
            let _ = writeln!(out, "{line}");
            if line.starts_with('{') && line.contains("\"scenario\"") {
                records.push(line);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {command:?}: {e}"))?;
    if status.success() {
        Ok(records)
    } else {
        Err(format!("{command:?} failed with {status}"))
    }
}

/// Keep a run's records in `docs/bench/results.ndjson`, after a line saying when, on what
/// machine and at which commit, and draw the charts from them.
fn keep_results(records: &[String]) -> Result {
    if records.is_empty() {
        return Ok(());
    }
    let dir = root().join("docs").join("bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let measured = serde_json::json!({"measured": {
        "date": today(),
        "machine": machine(),
        "commit": commit(),
    }});
    let mut text = format!("{measured}\n");
    for record in records {
        text.push_str(record);
        text.push('\n');
    }
    let results = dir.join("results.ndjson");
    std::fs::write(&results, text)
        .map_err(|e| format!("cannot write {}: {e}", results.display()))?;
    charts(Some(results))
}

/// `cargo xtask charts [RESULTS]`: draw the charts of a results file (by default the
/// last run's) into `docs/bench/`.
fn charts(results: Option<PathBuf>) -> Result {
    let dir = root().join("docs").join("bench");
    let results = results.unwrap_or_else(|| dir.join("results.ndjson"));
    for path in charts::draw(&results, &dir)? {
        eprintln!("xtask: drew {}", path.display());
    }
    Ok(())
}

/// Today's date (UTC), as YYYY-MM-DD.
fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Cores, memory and CPU model of this machine.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU", str::trim)
        .to_owned();
    format!("{cores} cores, {gib:.0} GiB, {model}")
}

/// The commit benchmarked (short id; `+changes` when the tree differs from it).
fn commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let id = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{id}+changes")
    } else {
        id
    }
}
