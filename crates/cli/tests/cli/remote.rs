//! The CLI against a `tributary serve`: remote commands print what embedded ones print,
//! tokens and TLS.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::{bin, example_graph, examples, ok, run};

/// A `tributary serve` child over `root` (on a free port unless `extra` has `--bind`),
/// killed on drop.
pub(crate) struct Served {
    pub(crate) child: std::process::Child,
    pub(crate) url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn serve(root: &std::path::Path, extra: &[&str]) -> Served {
    serve_by(bin(), &root.to_string_lossy(), extra)
}

/// `tributary serve ROOT` started by `command` (with its environment, say).
pub(crate) fn serve_by(mut command: Command, root: &str, extra: &[&str]) -> Served {
    use std::io::{BufRead, BufReader};
    command.args(["serve", root]);
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
pub(crate) fn mask_ids(text: &str) -> String {
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
    // Deletes, by key and by an edge's ends; a deleted node's edges go with it.
    let deletes = dir.path().join("deletes.ndjson");
    std::fs::write(
        &deletes,
        concat!(
            r#"{"delete":"Person","key":"person-0000"}"#,
            "\n",
            r#"{"delete":"WorksAt","from":"person-0001","to":"company-015"}"#,
            "\n",
            r#"{"type":"Person","patch":{"name":"person-0002","age":77}}"#,
            "\n",
        ),
    )
    .unwrap();
    let deletes = deletes.to_string_lossy().into_owned();
    let deleted = remote(&["load", "g", &deletes, "--format", "ndjson"]);
    let summary: serde_json::Value = serde_json::from_str(&deleted).unwrap();
    assert_eq!(summary["deleted"]["Person"], 1, "{deleted}");
    assert_eq!(
        mask_ids(&deleted),
        mask_ids(&ok(&["load", &embedded, &deletes, "--format", "ndjson"]))
    );
    // A load retried with its idempotency key prints the first one's commit, replayed.
    let keyed = ["--idempotency-key", "deletes-1", "--format", "ndjson"];
    let first = remote(&[&["load", "g", &deletes][..], &keyed[..]].concat());
    let again = remote(&[&["load", "g", &deletes][..], &keyed[..]].concat());
    assert!(first.contains(r#""replayed":false"#), "{first}");
    assert!(again.contains(r#""replayed":true"#), "{again}");
    let commit_of = |text: &str| {
        let summary: serde_json::Value = serde_json::from_str(text).unwrap();
        summary["commit"].as_str().unwrap().to_owned()
    };
    assert_eq!(commit_of(&first), commit_of(&again));
    let here = ok(&[&["load", &embedded, &deletes][..], &keyed[..]].concat());
    let here_again = ok(&[&["load", &embedded, &deletes][..], &keyed[..]].concat());
    assert_eq!(commit_of(&here), commit_of(&here_again));
    assert!(here_again.contains(r#""replayed":true"#), "{here_again}");
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
    // Both summaries have the same fields; a server's background folds are not this
    // run's alone, so its dead letters are unknown (null), not 0.
    let summary_of = |text: &str| -> serde_json::Value {
        serde_json::from_str(text.lines().last().unwrap()).unwrap()
    };
    let (remote_summary, local_summary) = (summary_of(&streamed), summary_of(&local));
    assert!(remote_summary["dead_letters"].is_null(), "{remote_summary}");
    assert!(local_summary["dead_letters"].is_u64(), "{local_summary}");
    for summary in [&remote_summary, &local_summary] {
        // Whole from 100 rows/s up, else three significant digits.
        let rate = summary["rows_per_s"].as_f64().unwrap();
        let digits = format!("{rate}")
            .trim_start_matches(['0', '.'])
            .replace('.', "")
            .len();
        assert!(
            rate >= 100.0 && rate.fract() == 0.0 || digits <= 3,
            "{summary}"
        );
        assert!(rate > 0.0, "{summary}");
        // The same fields embedded and remote; the server's folds are not the stream's.
        assert!(summary["fold_commits"].is_array() || summary["fold_commits"].is_null());
        assert!(summary.get("rows_folded").is_some(), "{summary}");
    }
    assert!(remote_summary["fold_commits"].is_null(), "{remote_summary}");
    // Deletes and patches stream too: river-03 is acknowledged, then deleted before any
    // fold; river-02 gets a new age and keeps its email.
    let stream_deletes = dir.path().join("stream-deletes.ndjson");
    std::fs::write(
        &stream_deletes,
        concat!(
            r#"{"delete":"Person","key":"river-03"}"#,
            "\n",
            r#"{"delete":"Company","key":"company-001"}"#,
            "\n",
            r#"{"type":"Person","patch":{"name":"river-02","age":45}}"#,
            "\n",
            r#"{"type":"Person","patch":{"name":"nobody","age":1}}"#,
            "\n",
        ),
    )
    .unwrap();
    let stream_deletes = stream_deletes.to_string_lossy().into_owned();
    let streamed = remote(&["ingest", "g", &stream_deletes, "--format", "ndjson"]);
    let local = ok(&["ingest", &embedded, &stream_deletes, "--format", "ndjson"]);
    assert_eq!(acks(&streamed), acks(&local));
    assert_eq!(acks(&streamed).0, 2, "{streamed}");
    let rejected = acks(&streamed).2;
    assert_eq!(rejected.len(), 2, "{streamed}");
    assert!(rejected[0].to_string().contains("@stream"), "{streamed}");
    assert!(
        rejected[1].to_string().contains("does not exist"),
        "{streamed}"
    );
    // Fold what the server's background folder has not yet (its memtables flush too).
    remote(&["ingest", "fold", "g"]);

    // A schema change, here and through the server: the same outcome; a breaking one is
    // refused alike (exit 65), every difference named.
    let source = std::fs::read_to_string(&schema).unwrap();
    let evolved = dir.path().join("evolved.tg");
    std::fs::write(
        &evolved,
        source.replace(
            "  embedding: Vector(8)? @embed(bio) @index\n}",
            "  embedding: Vector(8)? @embed(bio) @index\n  nickname: String?\n}\nnode City { name: String @key }",
        ),
    )
    .unwrap();
    let evolved = evolved.to_string_lossy().into_owned();
    let applied = remote(&["schema", "apply", "g", &evolved, "--format", "table"]);
    assert!(
        applied.starts_with("schema version 2: new types City; new fields Person.nickname"),
        "{applied}"
    );
    assert_eq!(
        mask_ids(&applied),
        mask_ids(&ok(&[
            "schema", "apply", &embedded, &evolved, "--format", "table"
        ]))
    );
    assert_eq!(remote(&["schema", "g"]), ok(&["schema", &embedded]));
    // The publisher, chosen at init, shown the same both ways.
    assert_eq!(
        remote(&["publisher", "g", "--format", "ndjson"]).replace("\"g\"", "\"G\""),
        ok(&["publisher", &embedded, "--format", "ndjson"])
            .replace(&format!("{embedded:?}"), "\"G\"")
    );
    for kind in ["manifest", "record"] {
        let said = format!("\"publisher\":\"{kind}\"");
        let name = format!("p-{kind}");
        let here = root
            .join(format!("local-{kind}"))
            .to_string_lossy()
            .into_owned();
        for (graph, answer) in [
            (
                &name,
                remote(&[
                    "init",
                    &name,
                    "--schema",
                    &schema,
                    "--publisher",
                    kind,
                    "--format",
                    "ndjson",
                ]),
            ),
            (
                &here,
                ok(&[
                    "init",
                    &here,
                    "--schema",
                    &schema,
                    "--publisher",
                    kind,
                    "--format",
                    "ndjson",
                ]),
            ),
        ] {
            assert!(answer.contains(&said), "{answer}");
            let shown = if graph == &name {
                remote(&["publisher", graph, "--format", "ndjson"])
            } else {
                ok(&["publisher", graph, "--format", "ndjson"])
            };
            assert!(shown.contains(&said), "{shown}");
        }
    }
    let breaking = dir.path().join("breaking.tg");
    std::fs::write(
        &breaking,
        source.replace("age: I32? @range(0..150)", "age: String?"),
    )
    .unwrap();
    let breaking = breaking.to_string_lossy().into_owned();
    let here = run(&["schema", "apply", &embedded, &breaking]);
    let there = run(&["schema", "apply", "g", &breaking, "--server", &served.url]);
    assert_eq!(here.status.code(), Some(65));
    assert_eq!(there.status.code(), Some(65));
    let said = String::from_utf8_lossy(&there.stderr);
    assert!(
        said.contains("Person.age: the type changed from I32 to String"),
        "{said}"
    );
    assert_eq!(String::from_utf8_lossy(&here.stderr), said);

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
        vec![
            "query",
            "GRAPH",
            "MATCH (p:Person)-[:WorksAt]->(c:Company) RETURN c.name AS company, count(*) AS people ORDER BY people DESC, company LIMIT 3",
        ],
        vec![
            "query",
            "GRAPH",
            "MATCH (a:Person {name: $who})-[:Knows*1..2]->(b) RETURN DISTINCT b.name ORDER BY b.name",
            "--param",
            "who=person-0005",
            "--format",
            "csv",
        ],
        vec![
            "query",
            "GRAPH",
            "MATCH (p:Person) WHERE p.name STARTS WITH 'river' RETURN p.name, p.age ORDER BY p.name",
            "--fresh",
            "--format",
            "json",
        ],
        vec!["sql", "GRAPH", "SELECT count(*) AS n FROM Knows"],
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
    let deleted = run(&["get", "g", "Person", "river-03", "--server", &served.url]);
    assert_eq!(
        deleted.status.code(),
        Some(66),
        "a streamed delete was folded"
    );
    let patched = remote(&["get", "g", "Person", "river-02", "--format", "json"]);
    assert!(patched.contains("\"age\":45"), "{patched}");
    assert!(patched.contains("river.02@example.org"), "{patched}");
    let patched = remote(&["get", "g", "Person", "person-0002", "--format", "json"]);
    assert!(patched.contains("\"age\":77"), "{patched}");
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
    // A refused query reads the same, with its place, here and through the server.
    let query = "MATCH (p:Persn) RETURN p.name";
    let bad = run(&["query", "g", query, "--server", &served.url]);
    let local_bad = run(&["query", &path, query]);
    assert_eq!(bad.status.code(), Some(65));
    assert_eq!(local_bad.status.code(), Some(65));
    assert_eq!(bad.stderr, local_bad.stderr);
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(
        said.contains("line 1, column 10: unknown node type `Persn` (did you mean `Person`?)"),
        "{said}"
    );
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
    // Far above the server's 1 s: a read that ends with 0 bytes, not this timeout's
    // error, is the server closing the connection.
    silent
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut byte = [0u8; 1];
    let read = std::io::Read::read(&mut silent, &mut byte).unwrap();
    assert_eq!(read, 0, "closed, unanswered");
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

/// `snapshot` prints the same document embedded and remote; a pin outlives cleanup until
/// it is unpinned, and the commands say so.
#[test]
fn snapshots_and_pins_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let served = serve(&root, &["--init"]);
    let schema = examples().join("schema.tg").to_string_lossy().into_owned();
    let data = examples()
        .join("data.ndjson")
        .to_string_lossy()
        .into_owned();
    let remote = |args: &[&str]| -> String {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--server", &served.url]);
        ok(&all)
    };
    let embedded = root.join("e").to_string_lossy().into_owned();
    remote(&["init", "g", "--schema", &schema]);
    ok(&["init", &embedded, "--schema", &schema]);
    remote(&["load", "g", &data]);
    ok(&["load", &embedded, &data]);

    // JSON by default, piped or not; the same document either way but for ids and paths.
    let there: serde_json::Value = serde_json::from_str(&remote(&["snapshot", "g"])).unwrap();
    let here: serde_json::Value = serde_json::from_str(&ok(&["snapshot", &embedded])).unwrap();
    let shape = |snapshot: &serde_json::Value| -> Vec<(String, u64, u64)> {
        snapshot["tables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["type"].as_str().unwrap().to_owned(),
                    t["version"].as_u64().unwrap(),
                    t["rows"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(shape(&there), shape(&here));
    assert!(shape(&here).iter().any(|(_, _, rows)| *rows > 0), "{here}");
    let uri = here["tables"][0]["uri"].as_str().unwrap();
    assert!(
        std::path::Path::new(uri).is_dir(),
        "a path other programs open: {uri}"
    );
    let table = ok(&["snapshot", &embedded, "--format", "csv"]);
    assert!(
        table.starts_with("commit,type,role,version,rows,lance_branch,uri"),
        "{table}"
    );

    // Pin, write more, clean up: the pinned commit still reads; unpinned, it goes.
    let pinned = remote(&["snapshot", "g", "--pin", "nightly"]);
    let pinned: serde_json::Value = serde_json::from_str(&pinned).unwrap();
    let commit = pinned["commit"].as_str().unwrap().to_owned();
    let pins = remote(&["snapshot", "g", "--pins", "--format", "ndjson"]);
    assert!(
        pins.contains(r#""name":"nightly""#) && pins.contains(&commit),
        "{pins}"
    );
    remote(&["load", "g", &data]);
    let cleaned = remote(&["cleanup", "g", "--older-than", "0s", "--format", "ndjson"]);
    let cleaned: serde_json::Value = serde_json::from_str(&cleaned).unwrap();
    assert_eq!(
        cleaned["kept_for_pins"]["nightly"],
        commit.as_str(),
        "{cleaned}"
    );
    remote(&["snapshot", "g", "--commit", &commit]);
    remote(&["snapshot", "g", "--unpin", "nightly"]);
    let again = run(&[
        "snapshot",
        "g",
        "--unpin",
        "nightly",
        "--server",
        &served.url,
    ]);
    assert_eq!(again.status.code(), Some(66), "no such pin");
    assert!(String::from_utf8_lossy(&again.stderr).contains("nightly"));
    let taken = run(&["snapshot", &embedded, "--pin", "a/b"]);
    assert_eq!(taken.status.code(), Some(65), "a bad pin name");
    // Listing pins takes no commit: a usage error, not a silent listing.
    let both = run(&["snapshot", &embedded, "--pins", "--commit", &commit]);
    assert_eq!(both.status.code(), Some(2), "--pins with --commit");
}

/// `changes` prints the same records embedded and remote; `--follow` prints a commit as it
/// is published, and a consumer resumes after the last commit record it stored.
#[test]
fn changes_from_the_command_line() {
    use std::io::{BufRead, BufReader};

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let served = serve(&root, &["--init"]);
    let schema = examples().join("schema.tg").to_string_lossy().into_owned();
    let data = examples()
        .join("data.ndjson")
        .to_string_lossy()
        .into_owned();
    let update = examples()
        .join("update.ndjson")
        .to_string_lossy()
        .into_owned();
    let remote = |args: &[&str]| -> String {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--server", &served.url]);
        ok(&all)
    };
    let embedded = root.join("e").to_string_lossy().into_owned();
    let first = |init: String| -> String {
        let init: serde_json::Value = serde_json::from_str(&init).unwrap();
        init["commit"].as_str().unwrap().to_owned()
    };
    let remote_start = first(remote(&[
        "init", "g", "--schema", &schema, "--format", "json",
    ]));
    let embedded_start = first(ok(&[
        "init", &embedded, "--schema", &schema, "--format", "json",
    ]));
    for file in [&data, &update] {
        remote(&["load", "g", file]);
        ok(&["load", &embedded, file]);
    }
    // What each record says, without the commit ids and times of one graph.
    let shape = |text: &str| -> Vec<String> {
        text.lines()
            .map(|line| {
                let record: serde_json::Value = serde_json::from_str(line).unwrap();
                match record["op"].as_str().unwrap() {
                    "commit" => format!(
                        "commit {} {} {} {}",
                        record["kind"], record["inserted"], record["updated"], record["deleted"]
                    ),
                    op => format!(
                        "{op} {} {} {}",
                        record["type"], record["key"], record["row"]
                    ),
                }
            })
            .collect()
    };
    let there = remote(&["changes", "g", "--since", &remote_start]);
    let here = ok(&["changes", &embedded, "--since", &embedded_start]);
    assert_eq!(shape(&there), shape(&here));
    let commits: Vec<String> = shape(&here)
        .into_iter()
        .filter(|line| line.starts_with("commit"))
        .collect();
    assert_eq!(
        commits,
        [
            "commit \"load\" 7903 0 0".to_owned(),
            "commit \"load\" 0 1 0".to_owned()
        ]
    );
    let only_first = ok(&[
        "changes",
        &embedded,
        "--since",
        &embedded_start,
        "--limit",
        "1",
    ]);
    assert_eq!(only_first.lines().count(), 7904);
    let companies = ok(&[
        "changes",
        &embedded,
        "--since",
        &embedded_start,
        "--types",
        "Company",
    ]);
    assert_eq!(companies.lines().count(), 100 + 2, "100 rows, 2 commits");

    // A follower sees the next commit as it is published.
    let mut follower = bin()
        .args([
            "changes",
            "g",
            "--since",
            "head",
            "--follow",
            "--server",
            &served.url,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follower.stdout.take().unwrap()).lines();
    // Give the follower its head before the next commit exists.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let loaded: serde_json::Value =
        serde_json::from_str(&remote(&["load", "g", &update, "--format", "json"])).unwrap();
    let mut got = Vec::new();
    let closed = loop {
        let line = lines.next().unwrap().unwrap();
        let record: serde_json::Value = serde_json::from_str(&line).unwrap();
        if record["op"] == "commit" {
            break record["commit"].as_str().unwrap().to_owned();
        }
        got.push(record);
    };
    let _ = follower.kill();
    let _ = follower.wait();
    assert_eq!(closed, loaded["commit"].as_str().unwrap());
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["op"], "update");
    // Resumed after the commit it stored: nothing new.
    assert_eq!(remote(&["changes", "g", "--since", &closed]), "");

    let unknown = run(&["changes", &embedded, "--since", "000000000000"]);
    assert_eq!(unknown.status.code(), Some(66), "not found");
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("000000000000"));
    let table = run(&["changes", &embedded, "--since", "head", "--format", "table"]);
    assert_eq!(table.status.code(), Some(64), "records are NDJSON only");
    assert!(String::from_utf8_lossy(&table.stderr).contains("NDJSON"));
    let no_type = run(&["changes", &embedded, "--since", "head", "--types", "Nope"]);
    assert_eq!(no_type.status.code(), Some(66));
    assert!(String::from_utf8_lossy(&no_type.stderr).contains("Nope"));
}
