//! Several processes on one graph: owners of shares of the shards (`--shards`), servers
//! side by side, folders racing; on a local disk and on the test S3 server.

use super::s3_server::S3Server;
use super::{bin_with, ok, ok_by, run, serve, serve_by};

const SCHEMA: &str = "node Person @stream(shards = 2) { name: String @key  bio: String? }\n";

fn people(n: usize, bio: &str) -> String {
    (0..n)
        .map(|i| {
            format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"p{i}\",\"bio\":\"{bio}\"}}}}\n")
        })
        .collect()
}

/// The `name` of each row of a `read --format ndjson`, sorted.
fn sorted_names(rows: &str) -> Vec<String> {
    let mut names: Vec<String> = rows
        .lines()
        .map(|l| {
            let row: serde_json::Value = serde_json::from_str(l).unwrap();
            row["name"].as_str().unwrap().to_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn a_process_owning_some_shards_refuses_rows_of_the_others_naming_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema.tg");
    std::fs::write(&schema, SCHEMA).unwrap();
    let graph = dir.path().join("g").to_string_lossy().into_owned();
    ok(&["init", &graph, "--schema", &schema.to_string_lossy()]);
    let input = dir.path().join("people.ndjson");
    std::fs::write(&input, people(8, "one")).unwrap();
    let input = input.to_string_lossy().into_owned();

    // `tributary shards` says where each key goes; embedded and remote agree.
    let keys: Vec<String> = (0..8).map(|i| format!("p{i}")).collect();
    let mut args = vec!["shards", graph.as_str(), "Person", "--format", "ndjson"];
    args.extend(keys.iter().map(String::as_str));
    let listed = ok(&args);
    let shard_of: Vec<u64> = listed
        .lines()
        .map(|l| {
            let row: serde_json::Value = serde_json::from_str(l).unwrap();
            row["shard"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(shard_of.len(), 8, "{listed}");
    assert!(shard_of.iter().all(|&s| s < 2), "{listed}");
    assert!(
        shard_of.contains(&1),
        "no key of eight in shard 1: {listed}"
    );

    // Eight keys over two shards: some are in shard 1, and the send is refused whole.
    let refused = run(&["ingest", &graph, &input, "--shards", "0", "--no-fold"]);
    assert_eq!(refused.status.code(), Some(65), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("rows of shard 1") && stderr.contains("owns shards [0]"),
        "{stderr}"
    );
    let first_of_shard_1 = &keys[shard_of.iter().position(|&s| s == 1).unwrap()];
    assert!(
        stderr.contains(&format!("key `{first_of_shard_1}` is in shard 1")),
        "{stderr}"
    );
    ok(&["ingest", "fold", &graph]);
    let rows = ok(&["read", &graph, "Person", "--format", "ndjson"]);
    assert_eq!(rows.lines().count(), 0, "a refused send wrote {rows}");

    // A shard the type does not have is refused, naming the type's shards.
    let beyond = run(&["ingest", &graph, &input, "--shards", "0,9", "--no-fold"]);
    assert_eq!(beyond.status.code(), Some(65), "{beyond:?}");
    let stderr = String::from_utf8_lossy(&beyond.stderr);
    assert!(
        stderr.contains("shard 9") && stderr.contains("shards 0..1"),
        "{stderr}"
    );

    // Owning both, the same input goes through.
    ok(&["ingest", &graph, &input, "--shards", "0,1"]);
    let rows = ok(&["read", &graph, "Person", "--format", "ndjson"]);
    assert_eq!(rows.lines().count(), 8);

    // A server owning shard 0 answers 400, naming the shard; one owning both takes it.
    let served = serve(dir.path(), &["--shards", "0"]);
    let remote = run(&["ingest", "g", &input, "--server", &served.url]);
    assert!(!remote.status.success(), "{remote:?}");
    let stderr = String::from_utf8_lossy(&remote.stderr);
    assert!(stderr.contains("rows of shard 1"), "{stderr}");
    drop(served);
    let served = serve(dir.path(), &["--shards", "0,1"]);
    ok(&["ingest", "g", &input, "--server", &served.url]);

    let mut args = vec![
        "shards",
        "g",
        "Person",
        "--format",
        "ndjson",
        "--server",
        &served.url,
    ];
    args.extend(keys.iter().map(String::as_str));
    assert_eq!(ok(&args), listed, "remote and embedded shards differ");

    // --shards is an embedded ingest's: with --server it is refused.
    let misused = run(&[
        "ingest",
        "g",
        &input,
        "--server",
        &served.url,
        "--shards",
        "0",
    ]);
    assert_eq!(misused.status.code(), Some(64), "{misused:?}");
}

/// Two servers on one graph on S3, each owning half the shards, fed by one remote ingest
/// given both: each line goes to its shard's owner, the acknowledgements come back in the
/// input's line numbers (a rejected line named by its own number), and a third process
/// folds every row once. Without an owner for some shard, or with a producer, the routed
/// ingest is refused before it sends anything.
#[test]
fn one_ingest_routes_each_line_to_the_server_owning_its_shard_on_s3() {
    let s3 = S3Server::start();
    let env = s3.env();
    let command = || bin_with(&env);
    let ok_with = |args: &[&str]| ok_by(command(), args);
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema.tg");
    std::fs::write(
        &schema,
        "node Person @stream(shards = 4) { name: String @key  age: I32? }\n",
    )
    .unwrap();
    let graph = s3.uri("g");
    ok_with(&["init", &graph, "--schema", &schema.to_string_lossy()]);
    let strict_graph = s3.uri("h");
    ok_with(&["init", &strict_graph, "--schema", &schema.to_string_lossy()]);
    let root = s3.uri("");
    let first = serve_by(command(), &root, &["--shards", "0,1"]);
    let second = serve_by(command(), &root, &["--shards", "2,3"]);
    let both = format!("{},{}", first.url, second.url);

    // 200 rows, line 57 invalid, then a delete of p3 and a patch of p4.
    let mut lines: Vec<String> = (0..200)
        .map(|i| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"p{i}\",\"age\":{i}}}}}"))
        .collect();
    lines[56] = r#"{"type":"Person","data":{"name":"bad","age":"old"}}"#.to_owned();
    lines.push(r#"{"delete":"Person","key":"p3"}"#.to_owned());
    lines.push(r#"{"type":"Person","patch":{"name":"p4","age":1000}}"#.to_owned());
    let input = dir.path().join("all.ndjson");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let input = input.to_string_lossy().into_owned();

    // A shard with no owner among the servers, or with two, is refused before anything
    // is sent, naming it; so is a server given twice.
    let third = serve_by(command(), &root, &["--shards", "1"]);
    for (servers, says) in [
        (
            format!("{},{}", third.url, second.url),
            "shard 0 of Person (one of 4) has no owner",
        ),
        (
            format!("{},{}", first.url, third.url),
            "shard 1 of Person is owned by two",
        ),
        (format!("{},{}/", first.url, first.url), "is given twice"),
    ] {
        let refused = bin_with(&env)
            .args(["ingest", "g", &input, "--server", &servers])
            .output()
            .unwrap();
        assert_eq!(refused.status.code(), Some(64), "{refused:?}");
        let message = String::from_utf8_lossy(&refused.stderr);
        assert!(message.contains(says), "{servers}: {message}");
    }
    drop(third);
    let producer = bin_with(&env)
        .args(["ingest", "g", &input, "--server", &both, "--producer", "p"])
        .output()
        .unwrap();
    assert_eq!(producer.status.code(), Some(64), "{producer:?}");

    // --strict: everything before line 57 is acknowledged, nothing after it is sent, and
    // the failure names line 57 of the input.
    let strict = bin_with(&env)
        .args([
            "ingest",
            "h",
            &input,
            "--server",
            &both,
            "--format",
            "json",
            "--strict",
            "--batch-lines",
            "16",
        ])
        .output()
        .unwrap();
    assert_eq!(strict.status.code(), Some(65), "{strict:?}");
    let stdout = String::from_utf8_lossy(&strict.stdout);
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["through_line"], 56, "{summary}");
    assert_eq!(summary["acked"], 56, "{summary}");
    let error = summary["error"]["error"].as_str().unwrap();
    assert!(error.contains("line 57"), "{summary}");

    let records = ok_with(&[
        "ingest",
        "g",
        &input,
        "--server",
        &both,
        "--format",
        "json",
        "--batch-lines",
        "16",
    ]);
    let records: Vec<serde_json::Value> = records
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = records.last().unwrap();
    assert_eq!(summary["summary"], true, "{summary}");
    assert_eq!(summary["acked"], 201, "{summary}");
    assert_eq!(summary["rejected"], 1, "{summary}");
    assert_eq!(summary["through_line"], 202, "{summary}");
    let acks = &records[..records.len() - 1];
    let mut through = 0;
    for record in acks {
        let now = record["through_line"].as_u64().unwrap();
        assert!(now >= through, "through_line went back: {record}");
        through = now;
    }
    let rejects: Vec<&serde_json::Value> = acks
        .iter()
        .flat_map(|r| r["rejected"].as_array().unwrap())
        .collect();
    assert_eq!(rejects.len(), 1, "{rejects:?}");
    assert_eq!(rejects[0]["line"], 57, "{rejects:?}");
    let error = rejects[0]["error"].as_str().unwrap();
    assert!(error.starts_with("line 57, field `age`"), "{error}");
    for server in [&first.url, &second.url] {
        let rows: u64 = acks
            .iter()
            .filter(|r| r["server"] == server.as_str())
            .map(|r| r["rows"].as_u64().unwrap())
            .sum();
        assert!(rows > 0, "server {server} took no row: {acks:?}");
    }

    drop((first, second));
    ok_with(&["ingest", "fold", &graph]);
    let rows = ok_with(&[
        "read", &graph, "Person", "--format", "ndjson", "--limit", "1000",
    ]);
    let mut seen: Vec<(String, i64)> = rows
        .lines()
        .map(|l| {
            let row: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                row["name"].as_str().unwrap().to_owned(),
                row["age"].as_i64().unwrap(),
            )
        })
        .collect();
    seen.sort();
    let mut expected: Vec<(String, i64)> = (0..200)
        .filter(|i| ![3, 56].contains(i))
        .map(|i| (format!("p{i}"), if i == 4 { 1000 } else { i }))
        .collect();
    expected.sort();
    assert_eq!(
        seen, expected,
        "every routed row once, the delete and the patch applied"
    );

    ok_with(&["ingest", "fold", &strict_graph]);
    let rows = ok_with(&[
        "read",
        &strict_graph,
        "Person",
        "--format",
        "ndjson",
        "--limit",
        "1000",
    ]);
    let seen = sorted_names(&rows);
    let mut expected: Vec<String> = (0..56).map(|i| format!("p{i}")).collect();
    expected.sort();
    assert_eq!(
        seen, expected,
        "under --strict, the lines before the bad one and no other"
    );
}

/// Two folder processes racing on one graph on S3 fold each generation once: one fold
/// commit holds every pending row, the other finds nothing left (Lance's compaction marks
/// and conditional commits arbitrate).
#[test]
fn two_folder_processes_on_s3_fold_each_generation_once() {
    let s3 = S3Server::start();
    let env = s3.env();
    let command = || bin_with(&env);
    let ok_with = |args: &[&str]| ok_by(command(), args);
    let dir = tempfile::tempdir().unwrap();
    let graph = s3.uri("g");
    let schema = super::examples().join("schema.tg");
    ok_with(&["init", &graph, "--schema", &schema.to_string_lossy()]);
    let data = dir.path().join("in.ndjson");
    std::fs::write(&data, people(500, "pending")).unwrap();
    ok_with(&["ingest", &graph, &data.to_string_lossy(), "--no-fold"]);
    super::two_folders_fold_once(&env, &graph, 500);
}

/// Failures to reach a graph on S3 exit with the status of their kind, and settings
/// mistakes are named: refused credentials 77, an unreachable store 75, a bucket that is
/// not there 66, a plain-http endpoint without `allow_http` 65 (naming the fix), and a
/// store option no layer reads is warned about.
#[test]
fn s3_failures_exit_with_their_kind_and_name_the_setting() {
    let s3 = S3Server::start();
    let env = s3.env();
    let graph = s3.uri("g");
    let schema = super::examples().join("schema.tg");
    ok_by(
        bin_with(&env),
        &["init", &graph, "--schema", &schema.to_string_lossy()],
    );
    let with = |change: &[(&str, &str)], args: &[&str]| {
        let mut env = env.clone();
        for (key, value) in change {
            env.retain(|(k, _)| k != key);
            if !value.is_empty() {
                env.push((key.to_string(), value.to_string()));
            }
        }
        bin_with(&env).args(args).output().unwrap()
    };
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, i32, &'a str);
    let cases: [Case; 4] = [
        (&[("AWS_SECRET_ACCESS_KEY", "wrong")], &graph, 77, ""),
        (&[("AWS_ENDPOINT", "http://127.0.0.1:1")], &graph, 75, ""),
        (&[], "s3://no-such-bucket/g", 66, ""),
        (&[("AWS_ALLOW_HTTP", "")], &graph, 65, "allow_http=true"),
    ];
    for (change, uri, code, says) in cases {
        let output = with(change, &["log", uri]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{change:?} {uri}: {stderr}"
        );
        assert!(stderr.contains(says), "{change:?}: {stderr}");
    }
    let typo = with(&[], &["log", &graph, "--store-option", "aws_endpiont=x"]);
    assert!(typo.status.success(), "{typo:?}");
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert!(
        stderr.contains("`aws_endpiont` is not a setting"),
        "{stderr}"
    );
}

/// A routed ingest outlives one of its owners: the server owning shard 1 is killed
/// (SIGKILL) mid-run and comes back on its address while lines keep coming; every line
/// is acknowledged, the records count the input's lines in order, and after a fold every
/// row is there once.
#[test]
fn a_routed_ingest_outlives_a_killed_owner() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema.tg");
    std::fs::write(&schema, SCHEMA).unwrap();
    let graph = dir.path().join("g").to_string_lossy().into_owned();
    ok(&["init", &graph, "--schema", &schema.to_string_lossy()]);
    let first = serve(dir.path(), &["--shards", "0"]);
    let mut second = serve(dir.path(), &["--shards", "1"]);
    let address = second.url.trim_start_matches("http://").to_owned();
    let mut ingest = super::bin()
        .args(["ingest", "g", "-", "--format", "json", "--server"])
        .arg(format!("{},{}", first.url, second.url))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut feed = ingest.stdin.take().unwrap();
    let mut records = BufReader::new(ingest.stdout.take().unwrap()).lines();
    feed.write_all(people(100, "before").as_bytes()).unwrap();
    feed.flush().unwrap();
    let mut seen = vec![0];
    while seen.last() != Some(&100) {
        seen.push(super::through_line(&records.next().unwrap().unwrap()));
    }
    second.child.kill().unwrap();
    second.child.wait().unwrap();
    // Lines for both owners while one is gone: the live one takes its share at once.
    let later: String = (100..200)
        .map(|i| {
            format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"p{i}\",\"bio\":\"after\"}}}}\n")
        })
        .collect();
    feed.write_all(later.as_bytes()).unwrap();
    feed.flush().unwrap();
    let _back = serve(dir.path(), &["--shards", "1", "--bind", &address]);
    drop(feed);
    let mut rest: Vec<String> = records.map(Result::unwrap).collect();
    let summary: serde_json::Value = serde_json::from_str(&rest.pop().unwrap()).unwrap();
    seen.extend(rest.iter().map(|record| super::through_line(record)));
    let output = ingest.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&second.url),
        "the retry names the server: {stderr}"
    );
    assert_eq!(summary["acked"], 200, "{summary}");
    assert_eq!(summary["through_line"], 200, "{summary}");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "in order: {seen:?}");
    drop((first, _back));
    ok(&["ingest", "fold", &graph]);
    let rows = ok(&[
        "read", &graph, "Person", "--format", "ndjson", "--limit", "1000",
    ]);
    let names = sorted_names(&rows);
    let mut expected: Vec<String> = (0..200).map(|i| format!("p{i}")).collect();
    expected.sort();
    assert_eq!(names, expected, "every row once");
}
