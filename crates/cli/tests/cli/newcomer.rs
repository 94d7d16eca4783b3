//! What a new user meets in the first hour: data that round-trips (`export`), summaries
//! that tell the truth, a server that lists its graphs and logs its requests, help that
//! explains, and the small refusals that used to be errors.

use std::io::{Read, Write};

use crate::{bin, empty_graph, example_graph, examples, ok, run};

/// One request on a fresh connection: the status and the body (not chunked).
fn http(url: &str, request: &str) -> (u16, String) {
    let address = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "{request}\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The rows of every type, one sorted NDJSON text per type.
fn rows_by_type(graph: &str, extra: &[&str]) -> Vec<(String, Vec<String>)> {
    ["Person", "Company", "WorksAt", "Knows"]
        .iter()
        .map(|ty| {
            let mut args = vec!["read", graph, ty, "--format", "ndjson"];
            args.extend(extra);
            let mut rows: Vec<String> = ok(&args).lines().map(str::to_owned).collect();
            rows.sort();
            (ty.to_string(), rows)
        })
        .collect()
}

#[test]
fn an_export_loads_into_a_new_graph_as_the_same_rows() {
    let (dir, graph) = example_graph();
    let schema = dir.path().join("g.tg");
    std::fs::write(&schema, ok(&["schema", &graph])).unwrap();
    let file = dir.path().join("g.ndjson");
    let file = file.to_string_lossy();
    let summary: serde_json::Value =
        serde_json::from_str(&ok(&["export", &graph, &file, "--format", "json"])).unwrap();
    let head: serde_json::Value =
        serde_json::from_str(ok(&["log", &graph, "--limit", "1", "--format", "ndjson"]).trim())
            .unwrap();
    assert_eq!(summary["commit"], head["commit"], "{summary}");
    assert_eq!(summary["file"], file.as_ref(), "{summary}");
    assert!(!dir.path().join("g.ndjson.partial").exists());
    // Standard output holds the same lines, node types first.
    let text = ok(&["export", &graph]);
    assert_eq!(text, std::fs::read_to_string(file.as_ref()).unwrap());
    let first_edge = text
        .lines()
        .position(|l| l.starts_with("{\"edge\""))
        .unwrap();
    assert!(text
        .lines()
        .skip(first_edge)
        .all(|l| l.starts_with("{\"edge\"")));
    let total: u64 = summary["rows"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(text.lines().count() as u64, total);

    let copy = dir.path().join("copy").to_string_lossy().into_owned();
    ok(&["init", &copy, "--schema", &schema.to_string_lossy()]);
    ok(&["load", &copy, &file]);
    let (original, copied) = (rows_by_type(&graph, &[]), rows_by_type(&copy, &[]));
    for ((ty, a), (_, b)) in original.iter().zip(&copied) {
        assert!(!a.is_empty(), "{ty} has rows");
        assert_eq!(a, b, "{ty}");
    }

    // At an older commit, and only some types; a wrong type name is named.
    ok(&[
        "load",
        &graph,
        &examples().join("update.ndjson").to_string_lossy(),
    ]);
    let old = ok(&[
        "export",
        &graph,
        "--commit",
        head["commit"].as_str().unwrap(),
        "--types",
        "Person",
    ]);
    assert_eq!(
        old.lines().collect::<Vec<_>>(),
        text.lines()
            .filter(|l| l.starts_with("{\"type\":\"Person\""))
            .collect::<Vec<_>>()
    );
    let wrong = run(&["export", &graph, "--types", "Persn"]);
    assert_eq!(wrong.status.code(), Some(66), "{wrong:?}");
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("did you mean `Person`?"),
        "{wrong:?}"
    );
    // A file that cannot be written leaves nothing behind.
    let nowhere = dir.path().join("missing-dir").join("x.ndjson");
    let refused = run(&["export", &graph, &nowhere.to_string_lossy()]);
    assert_eq!(refused.status.code(), Some(73), "{refused:?}");
}

#[test]
fn a_server_exports_lists_its_graphs_and_logs_each_request_without_the_token() {
    let (dir, graph) = example_graph();
    let root = std::path::Path::new(&graph).parent().unwrap().to_path_buf();
    std::fs::create_dir_all(root.join("not-a-graph")).unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        "all-secret read *\ng-secret read g\nother-secret read other\n",
    )
    .unwrap();
    let log = dir.path().join("server.log");
    let mut command = bin();
    command
        .env("TRIBUTARY_LOG", "info")
        .stderr(std::fs::File::create(&log).unwrap());
    let served = crate::serve_by(
        command,
        &root.to_string_lossy(),
        &["--tokens", &tokens.to_string_lossy()],
    );
    // A schema changed beside the running server: its export and schema show the new
    // field and type (the server opened the graph before the change).
    ok(&[
        "count",
        "g",
        "Person",
        "--server",
        &served.url,
        "--token",
        "g-secret",
    ]);
    let schema = dir.path().join("more.tg");
    let source = std::fs::read_to_string(examples().join("schema.tg")).unwrap()
        + "node Tag { label: String @key }\n";
    let source = source.replacen(
        "embedding: Vector(8)? @embed(bio) @index\n",
        "embedding: Vector(8)? @embed(bio) @index\n  nick: String?\n",
        1,
    );
    std::fs::write(&schema, &source).unwrap();
    ok(&["schema", "apply", &graph, &schema.to_string_lossy()]);
    let more = dir.path().join("more.ndjson");
    std::fs::write(
        &more,
        "{\"type\":\"Person\",\"data\":{\"name\":\"nicked\",\"nick\":\"n\"}}\n{\"type\":\"Tag\",\"data\":{\"label\":\"t\"}}\n",
    )
    .unwrap();
    ok(&["load", &graph, &more.to_string_lossy()]);
    let remote_schema = bin()
        .args([
            "schema",
            "g",
            "--server",
            &served.url,
            "--token",
            "g-secret",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&remote_schema.stdout).contains("nick: String?"),
        "{remote_schema:?}"
    );
    // Streamed through the server, the export is the embedded one.
    let remote = bin()
        .args([
            "export",
            "g",
            "--server",
            &served.url,
            "--token",
            "g-secret",
        ])
        .output()
        .unwrap();
    assert!(remote.status.success(), "{remote:?}");
    let exported = String::from_utf8(remote.stdout).unwrap();
    assert_eq!(exported, ok(&["export", &graph]));
    assert!(
        exported.contains(r#""nick":"n""#)
            && exported.contains(r#"{"type":"Tag","data":{"label":"t"}}"#),
        "a field and a type added beside the server are exported"
    );

    // The graphs a token may read: folders that hold no graph are not listed.
    let listed = |token: &str| {
        http(
            &served.url,
            &format!("GET /graphs HTTP/1.1\r\nAuthorization: Bearer {token}"),
        )
    };
    assert_eq!(listed("all-secret"), (200, r#"[{"graph":"g"}]"#.to_owned()));
    assert_eq!(listed("other-secret"), (200, "[]".to_owned()));
    assert_eq!(listed("nobody").0, 401);

    // A filter the server cannot use answers a JSON error body, also when the client sent
    // its `>` unencoded (as curl does), which the HTTP parser alone refuses bare.
    for filter in ["agee%3E1", "agee>1"] {
        let (status, body) = http(
            &served.url,
            &format!("GET /graphs/g/types/Person?filter={filter} HTTP/1.1\r\nAuthorization: Bearer all-secret"),
        );
        assert_eq!(status, 400, "{filter}: {body}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["kind"], "invalid_input", "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("did you mean `age`"),
            "{body}"
        );
    }
    // A key with bytes a URL may not hold raw reaches the handler whole.
    let (status, body) = http(
        &served.url,
        "GET /graphs/g/types/Person/a{é} HTTP/1.1\r\nAuthorization: Bearer all-secret",
    );
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("Person `a{é}` not found"), "{body}");

    drop(served);
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("serving"), "{log}");
    let access: Vec<&str> = log.lines().filter(|l| l.contains("request")).collect();
    assert!(
        access.iter().any(|l| l.contains("method=GET")
            && l.contains("path=\"/graphs\"")
            && l.contains("status=401")),
        "{log}"
    );
    assert!(
        access
            .iter()
            .any(|l| l.contains("/export") && l.contains("status=200")),
        "{log}"
    );
    assert!(!log.contains("secret"), "a token in the log: {log}");
    // A token is named by the line of the tokens file that grants it.
    assert!(
        access
            .iter()
            .any(|l| l.contains("/export") && l.contains("token=\"line 2\"")),
        "{log}"
    );
    assert!(!log.contains("agee"), "a query string in the log: {log}");
}

#[test]
fn summaries_and_refusals_say_what_happened() {
    let (dir, graph) = empty_graph();
    // An empty load is no error.
    let empty = dir.path().join("empty.ndjson");
    std::fs::write(&empty, "\n  \n").unwrap();
    let loaded = run(&["load", &graph, &empty.to_string_lossy()]);
    assert!(loaded.status.success(), "{loaded:?}");
    assert!(
        String::from_utf8_lossy(&loaded.stderr).contains("nothing to load"),
        "{loaded:?}"
    );
    assert_eq!(
        ok(&["log", &graph, "--format", "ndjson"]).lines().count(),
        1,
        "no commit"
    );

    // An ingest whose every line is rejected fails after its summary; one of nothing says so.
    let bad = dir.path().join("bad.ndjson");
    std::fs::write(&bad, "{\"type\":\"Persn\",\"data\":{}}\n{\"nope\":1}\n").unwrap();
    let refused = run(&[
        "ingest",
        &graph,
        &bad.to_string_lossy(),
        "--format",
        "ndjson",
    ]);
    assert_eq!(refused.status.code(), Some(65), "{refused:?}");
    let stdout = String::from_utf8_lossy(&refused.stdout);
    assert!(stdout.contains("\"summary\":true"), "{stdout}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("all 2 lines of the input were rejected"),
        "{refused:?}"
    );
    let nothing = run(&["ingest", &graph, &empty.to_string_lossy()]);
    assert!(nothing.status.success(), "{nothing:?}");
    assert!(
        String::from_utf8_lossy(&nothing.stderr).contains("nothing was written"),
        "{nothing:?}"
    );

    // --select on get, neighbors and search; a wrong column names the ones there are.
    ok(&[
        "load",
        &graph,
        &examples().join("data.ndjson").to_string_lossy(),
    ]);
    let got = ok(&[
        "get",
        &graph,
        "Person",
        "person-0001",
        "--select",
        "name,age",
        "--format",
        "ndjson",
    ]);
    let row: serde_json::Value = serde_json::from_str(got.trim()).unwrap();
    assert_eq!(row.as_object().unwrap().len(), 2, "{got}");
    let near = ok(&[
        "neighbors",
        &graph,
        "Company",
        "company-007",
        "--edge",
        "WorksAt",
        "--in",
        "--select",
        "id",
        "--format",
        "ndjson",
    ]);
    assert!(
        near.lines()
            .all(|l| l.starts_with("{\"id\":") && !l.contains(',')),
        "{near}"
    );
    let found = ok(&[
        "search",
        &graph,
        "Person",
        "--text",
        "engines",
        "--select",
        "name,_score",
        "--format",
        "ndjson",
    ]);
    assert!(found.lines().all(|l| !l.contains("embedding")), "{found}");
    // Counted: all, and with a filter.
    let counted = |args: &[&str]| -> u64 {
        let mut all = vec!["count", graph.as_str(), "Person", "--format", "ndjson"];
        all.extend(args);
        serde_json::from_str::<serde_json::Value>(ok(&all).trim()).unwrap()["count"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(counted(&[]), 2000);
    let old = ok(&[
        "read", &graph, "Person", "--filter", "age > 60", "--select", "name", "--format", "ndjson",
    ]);
    assert_eq!(
        counted(&["--filter", "age > 60"]),
        old.lines().count() as u64
    );
    // Ordered, then a page of it.
    let page = ok(&[
        "read",
        &graph,
        "Person",
        "--order-by",
        "age:desc,name",
        "--offset",
        "2",
        "--limit",
        "5",
        "--select",
        "name",
        "--format",
        "ndjson",
    ]);
    let all = ok(&[
        "read", &graph, "Person", "--select", "name,age", "--format", "ndjson",
    ]);
    let mut everyone: Vec<(i64, String)> = all
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|r| {
            (
                r["age"].as_i64().unwrap_or(-1),
                r["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // Descending by age with nulls last, then by name.
    everyone.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let expected: Vec<String> = everyone[2..7]
        .iter()
        .map(|(_, n)| format!("{{\"name\":\"{n}\"}}"))
        .collect();
    assert_eq!(page.lines().collect::<Vec<_>>(), expected, "{page}");
    let bad_order = run(&["read", &graph, "Person", "--order-by", "age:down"]);
    assert_eq!(bad_order.status.code(), Some(65), "{bad_order:?}");
    let no_order = run(&["read", &graph, "Person", "--order-by", "embedding"]);
    assert_eq!(no_order.status.code(), Some(65), "{no_order:?}");
    assert!(
        String::from_utf8_lossy(&no_order.stderr).contains("has no order"),
        "{no_order:?}"
    );
    let wrong = run(&["get", &graph, "Person", "person-0001", "--select", "nmae"]);
    assert_eq!(wrong.status.code(), Some(65), "{wrong:?}");
    assert!(
        String::from_utf8_lossy(&wrong.stderr)
            .contains("no column `nmae` (the columns are id, name"),
        "{wrong:?}"
    );
}

#[test]
fn help_explains_and_the_log_fits_a_terminal() {
    let serve = ok(&["serve", "--help"]);
    assert!(
        !serve.contains("--server <") && !serve.contains("--token <"),
        "{serve}"
    );
    assert!(serve.contains("Storage options"), "{serve}");
    let read = ok(&["read", "--help"]);
    assert!(
        read.contains("Client options") && read.contains("Global options"),
        "{read}"
    );
    assert!(read.contains("The graph: a directory"), "{read}");
    assert!(read.contains("At most this many rows"), "{read}");

    let (_dir, graph) = example_graph();
    let table = ok(&["log", &graph, "--format", "table"]);
    let widest = table.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 100, "{widest} columns:\n{table}");
    let wide = ok(&["log", &graph, "--format", "table", "--wide"]);
    assert!(
        wide.contains("tables") && wide.contains("nodes/Person.lance"),
        "{wide}"
    );
    // Piped, a JSON document is one line (a terminal gets it indented).
    let json = ok(&["log", &graph, "--format", "json"]);
    assert_eq!(json.lines().count(), 1, "{json}");
}

#[test]
fn refusals_hint_at_the_next_step() {
    let (dir, graph) = empty_graph();
    let lines = |name: &str, lines: &[&str]| {
        let path = dir.path().join(name);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        path.to_string_lossy().into_owned()
    };
    let refused = |args: &[&str], code: i32, hint: &str| {
        let output = run(args);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(hint), "{args:?}: {stderr}");
    };
    ok(&[
        "load",
        &graph,
        &lines(
            "base.ndjson",
            &[
                r#"{"type":"Person","data":{"name":"ada"}}"#,
                r#"{"type":"Company","data":{"name":"acme"}}"#,
                r#"{"type":"Company","data":{"name":"beta"}}"#,
                r#"{"edge":"WorksAt","from":"ada","to":"acme"}"#,
            ],
        ),
    ]);
    // A second company for a @card(0..1) edge: delete the old edge in the same load.
    let moved = lines(
        "moved.ndjson",
        &[r#"{"edge":"WorksAt","from":"ada","to":"beta"}"#],
    );
    refused(
        &["load", &graph, &moved],
        65,
        r#"delete the old one in the same write ({"delete":"WorksAt","from":"ada","to":…})"#,
    );
    ok(&[
        "load",
        &graph,
        &lines(
            "move.ndjson",
            &[
                r#"{"delete":"WorksAt","from":"ada","to":"acme"}"#,
                r#"{"edge":"WorksAt","from":"ada","to":"beta"}"#,
            ],
        ),
    ]);
    // A text value without quotes is a column to SQL.
    refused(
        &["read", &graph, "Person", "--filter", "name = ada"],
        65,
        "if `ada` is a value, quote it: 'ada'",
    );
    // An edge followed from the end it does not leave.
    refused(
        &["neighbors", &graph, "Company", "beta", "--edge", "WorksAt"],
        65,
        "add --in",
    );
    // A row acknowledged and not folded: `--fresh` reads it.
    ok(&[
        "ingest",
        &graph,
        &lines(
            "bob.ndjson",
            &[r#"{"type":"Person","data":{"name":"bob"}}"#],
        ),
        "--no-fold",
    ]);
    refused(&["get", &graph, "Person", "bob"], 66, "`--fresh` reads it");
    refused(
        &["get", &graph, "Person", "nobody"],
        66,
        "Person `nobody` not found",
    );
    ok(&["get", &graph, "Person", "bob", "--fresh"]);

    // A server that wants a token says how to give one.
    let root = std::path::Path::new(&graph).parent().unwrap().to_path_buf();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "secret read *\n").unwrap();
    let served = crate::serve(&root, &["--tokens", &tokens.to_string_lossy()]);
    refused(
        &["read", "g", "Person", "--server", &served.url],
        77,
        "--token-file FILE, TRIBUTARY_TOKEN or --token",
    );
}
