//! The HTTP server with a real client on loopback: routes vs the OpenAPI document, streamed
//! acknowledgements, disconnects, auth, limits, and a bounded load test. Hostile and slow
//! clients are in `hostile`.

mod changes;
mod hostile;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::response::IntoResponse;
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::Value;
use tributary::Graph;
use tributary_server::{openapi, AppState, Limits, ServerConfig, Tokens};
use tributary_tests::{ndjson, person, SCHEMA};

struct Server {
    _dir: tempfile::TempDir,
    base: String,
    client: reqwest::Client,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    async fn get_json(&self, path: &str) -> Value {
        self.get(path).await.json().await.unwrap()
    }

    async fn post(&self, path: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .body(body)
            .send()
            .await
            .unwrap()
    }

    async fn post_json(&self, path: &str, body: impl Into<reqwest::Body>) -> Value {
        self.post(path, body).await.json().await.unwrap()
    }

    /// An NDJSON body to `/graphs/g/ingest`, read whole.
    async fn ingest(&self, text: String) -> reqwest::Response {
        self.client
            .post(self.url("/graphs/g/ingest"))
            .header("content-type", "application/x-ndjson")
            .body(text)
            .send()
            .await
            .unwrap()
    }
}

/// A server over a new root holding one graph, `g`.
async fn start(tokens: Option<&str>, limits: Limits) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    Graph::init(&root.join("g").to_string_lossy(), SCHEMA)
        .await
        .unwrap();
    let config = ServerConfig {
        root: root.display().to_string(),
        store: Default::default(),
        graph_settings: Default::default(),
        tokens: tokens.map(|t| Tokens::parse(t).unwrap()),
        allow_init: true,
        limits,
        tls: None,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = AppState::new(config);
    tokio::spawn(tributary_server::serve(
        listener,
        state,
        std::future::pending(),
    ));
    Server {
        _dir: dir,
        base,
        client: reqwest::Client::new(),
    }
}

/// A streaming request body fed by the returned sender.
fn streamed_body() -> (mpsc::Sender<Result<Vec<u8>, std::io::Error>>, reqwest::Body) {
    let (sender, receiver) = mpsc::channel(16);
    (sender, reqwest::Body::wrap_stream(receiver))
}

/// Reads NDJSON records off a streaming response.
/// An ingest stream to `g` that has sent `line` and stays open while `feed` lives.
async fn open_stream(
    server: &Server,
    line: String,
) -> (
    mpsc::Sender<Result<Vec<u8>, std::io::Error>>,
    reqwest::Response,
) {
    let (mut feed, body) = streamed_body();
    let request = server
        .client
        .post(server.url("/graphs/g/ingest"))
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send();
    feed.send(Ok(ndjson(&[line]).into_bytes())).await.unwrap();
    (feed, request.await.unwrap())
}

struct Records {
    stream: futures::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    buffer: Vec<u8>,
}

impl Records {
    fn new(response: reqwest::Response) -> Records {
        Records {
            stream: response.bytes_stream().boxed(),
            buffer: Vec::new(),
        }
    }

    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            match tokio::time::timeout(Duration::from_secs(30), self.stream.next()).await {
                Ok(Some(Ok(chunk))) => self.buffer.extend_from_slice(&chunk),
                Ok(_) => return None,
                Err(_) => panic!("no record within 30 s"),
            }
        }
    }
}

async fn fresh_ids(server: &Server) -> BTreeSet<String> {
    let rows = server
        .get_json("/graphs/g/types/Person?fresh=true&select=id")
        .await;
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_documented_operation_is_answered_by_its_handler() {
    let document = openapi::document();
    let operations = openapi::operations_of(&document);
    assert_eq!(operations.len(), 35, "{operations:?}");
    // Every answer names its types: none is an untyped object but rows and the document.
    let text = document.to_json().unwrap();
    for schema in [
        "EmbedderConfig",
        "LoadOutcome",
        "FoldOutcome",
        "IngestStatus",
        "CommitRecord",
        "MergeOutcome",
        "Ack",
        "Error",
        "SchemaOutcome",
        "CleanupReport",
        "Snapshot",
        "Pin",
        "ChangeRecord",
    ] {
        assert!(
            text.contains(&format!("\"#/components/schemas/{schema}\"")),
            "{schema} is not referenced"
        );
    }
    // An ingest stream's last record, described beside the records before it.
    let schemas = &document.components.as_ref().unwrap().schemas;
    assert!(
        schemas.contains_key("IngestSummary"),
        "{:?}",
        schemas.keys()
    );
    assert!(text.contains("\"#/components/schemas/IngestRecord\""));
    // Every reference leads somewhere.
    let reference = "\"$ref\":\"#/components/schemas/";
    for (at, _) in text.match_indices(reference) {
        let name = text[at + reference.len()..].split('"').next().unwrap();
        assert!(
            schemas.contains_key(name),
            "a reference to `{name}`, which is not described"
        );
    }
    let json = serde_json::to_value(&document).unwrap();
    let names = |path: &str, method: &str| -> Vec<String> {
        let parameters = json["paths"][path][method]["parameters"]
            .as_array()
            .unwrap();
        parameters
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        names("/graphs/{id}/load", "post"),
        ["id", "branch", "mode", "idempotency_key"]
    );
    let parameters = names("/graphs/{id}/types/{type}", "get");
    assert_eq!(
        parameters,
        [
            "id", "type", "filter", "select", "limit", "offset", "order_by", "branch", "commit",
            "fresh"
        ]
    );
    for query in ["/graphs/{id}/query", "/graphs/{id}/sql"] {
        assert_eq!(names(query, "post"), ["id", "branch", "commit", "fresh"]);
        assert_eq!(
            json["paths"][query]["post"]["requestBody"]["content"]["application/json"]["schema"]
                ["$ref"],
            "#/components/schemas/QueryBody"
        );
    }

    // The committed copy, for readers without a server, is the generated document.
    let committed = include_str!("../../../crates/server/openapi.json");
    assert!(
        committed.trim_end() == document.to_pretty_json().unwrap(),
        "crates/server/openapi.json is not what the server generates: \
         run `target/debug/tributary openapi > crates/server/openapi.json`"
    );

    // Every route is answered by its handler, not the fallback.
    let server = start(None, Limits::default()).await;
    for (method, path) in &operations {
        let concrete = path
            .replace("{id}", "nope")
            .replace("{type}", "Person")
            .replace("{key}", "k")
            .replace("{name}", "dev");
        let request = match method.as_str() {
            "GET" => server.client.get(server.url(&concrete)),
            "DELETE" => server.client.delete(server.url(&concrete)),
            _ => server.client.post(server.url(&concrete)),
        };
        let response = request.send().await.unwrap();
        let status = response.status();
        let body = response.text().await.unwrap();
        assert!(
            !body.contains("no such endpoint"),
            "{method} {path} fell through to the fallback: {status} {body}"
        );
    }
    let missing = server.get("/nothing").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let health = server.get("/healthz").await;
    assert_eq!(health.status(), StatusCode::OK);
    let served = server.get_json("/openapi.json").await;
    assert_eq!(served, serde_json::to_value(&document).unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn acknowledgements_stream_back_before_the_body_ends() {
    let server = start(None, Limits::default()).await;
    let (mut body, request_body) = streamed_body();
    let request = server
        .client
        .post(server.url("/graphs/g/ingest"))
        .header("content-type", "application/x-ndjson")
        .body(request_body)
        .send();
    let line = |name: &str, age: i32| format!("{}\n", person(name, age)).into_bytes();
    body.send(Ok(line("ada", 36))).await.unwrap();
    let response = request.await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut records = Records::new(response);
    let first = records.next().await.unwrap();
    assert_eq!(first["acked"], 1);
    assert_eq!(first["through_line"], 1);
    // The body is still open: the next line is acknowledged on its own.
    body.send(Ok(
        b"{\"type\":\"Person\",\"data\":{\"name\":\"bad\",\"age\":900}}\n".to_vec(),
    ))
    .await
    .unwrap();
    let second = records.next().await.unwrap();
    assert_eq!(second["through_line"], 2);
    assert_eq!(second["rows"], 0);
    assert_eq!(second["rejected"][0]["line"], 2);
    body.send(Ok(b"not json\n".to_vec())).await.unwrap();
    body.send(Ok(line("alan", 41))).await.unwrap();
    drop(body);
    let mut last = Value::Null;
    while let Some(record) = records.next().await {
        last = record;
    }
    assert_eq!(last["summary"], true);
    assert_eq!(last["acked"], 2);
    assert_eq!(last["rejected"], 2);
    assert_eq!(last["through_line"], 4);
    assert_eq!(
        fresh_ids(&server).await,
        BTreeSet::from(["ada".to_owned(), "alan".to_owned()])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_reading_only_at_the_end_gets_the_same_records() {
    let server = start(None, Limits::default()).await;
    let text = ndjson(&[person("a", 1), person("b", 2), person("c", 900)]);
    let response = server.ingest(text).await;
    let body = response.text().await.unwrap();
    let records: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let acked: u64 = records
        .iter()
        .filter(|r| r.get("summary").is_none())
        .map(|r| r["rows"].as_u64().unwrap())
        .sum();
    assert_eq!(acked, 2);
    let summary = records.last().unwrap();
    assert_eq!(summary["summary"], true);
    assert_eq!(summary["through_line"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_disconnect_mid_stream_loses_no_acked_row_and_writes_no_half_line() {
    let server = start(None, Limits::default()).await;
    let (mut body, request_body) = streamed_body();
    let request = server
        .client
        .post(server.url("/graphs/g/ingest"))
        .header("content-type", "application/x-ndjson")
        .body(request_body)
        .send();
    body.send(Ok(
        ndjson(&[person("kept1", 1), person("kept2", 2)]).into_bytes()
    ))
    .await
    .unwrap();
    body.send(Ok(b"\n".to_vec())).await.unwrap();
    let response = request.await.unwrap();
    let mut records = Records::new(response);
    let mut through = 0;
    while through < 3 {
        through = records.next().await.unwrap()["through_line"]
            .as_u64()
            .unwrap();
    }
    // Half a line, then the client goes away.
    body.send(Ok(
        b"{\"type\":\"Person\",\"data\":{\"name\":\"half\"".to_vec()
    ))
    .await
    .unwrap();
    body.send(Err(std::io::Error::other("client gone")))
        .await
        .unwrap();
    drop(records);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ids = fresh_ids(&server).await;
    assert!(ids.contains("kept1") && ids.contains("kept2"), "{ids:?}");
    assert!(!ids.contains("half"), "{ids:?}");
    // And the fold publishes exactly the acknowledged rows.
    let fold = server.post_json("/graphs/g/ingest/fold", "").await;
    assert_eq!(fold["rows"]["Person"], 2, "{fold}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_scope_reads_and_writes() {
    let tokens = "# token scope graph\nw1 write g\nr1 read *\nm1 metrics *\n";
    let server = start(Some(tokens), Limits::default()).await;
    let load = |token: Option<&str>| {
        let mut request = server
            .client
            .post(server.url("/graphs/g/load"))
            .body(ndjson(&[tributary_tests::company("acme")]));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    assert_eq!(load(None).await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let wrong = load(Some("nope")).await.unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(wrong.headers().contains_key("www-authenticate"));
    assert_eq!(
        load(Some("r1")).await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(load(Some("w1")).await.unwrap().status(), StatusCode::OK);
    let get_as = |path: &str, token: &'static str| {
        server
            .client
            .get(server.url(path))
            .bearer_auth(token)
            .send()
    };
    let read = |token: &'static str| get_as("/graphs/g/types/Company", token);
    assert_eq!(read("r1").await.unwrap().status(), StatusCode::OK);
    // The scheme's case does not matter.
    let lowercase = server
        .client
        .get(server.url("/graphs/g/types/Company"))
        .header("authorization", "bearer r1")
        .send()
        .await
        .unwrap();
    assert_eq!(lowercase.status(), StatusCode::OK);
    assert_eq!(
        read("w1").await.unwrap().status(),
        StatusCode::OK,
        "write implies read"
    );
    let metrics = server.get("/metrics").await;
    assert_eq!(metrics.status(), StatusCode::UNAUTHORIZED);
    // Only a metrics grant reads /metrics, and it reads nothing else.
    let scraped = |token: &'static str| get_as("/metrics", token);
    assert_eq!(scraped("m1").await.unwrap().status(), StatusCode::OK);
    assert_eq!(scraped("w1").await.unwrap().status(), StatusCode::FORBIDDEN);
    assert_eq!(scraped("r1").await.unwrap().status(), StatusCode::FORBIDDEN);
    assert_eq!(read("m1").await.unwrap().status(), StatusCode::FORBIDDEN);
    assert!(Tokens::parse("m2 metrics g").unwrap_err().contains("`*`"));
    let health = server.get("/healthz").await;
    assert_eq!(health.status(), StatusCode::OK);
    let error = Tokens::parse("secret-token admin *").unwrap_err();
    assert!(
        error.contains("line 1") && !error.contains("secret-token"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bodies_and_lines_are_bounded() {
    let limits = Limits {
        max_body_bytes: 1_000,
        max_line_bytes: 200,
        ..Limits::default()
    };
    let server = start(None, limits).await;
    let big: Vec<String> = (0..50).map(|i| person(&format!("p{i}"), 1)).collect();
    let response = server.post("/graphs/g/load", ndjson(&big)).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("1000 bytes"),
        "{body}"
    );

    let long = format!(
        r#"{{"type":"Person","data":{{"name":"{}","age":1}}}}"#,
        "x".repeat(300)
    );
    let text = ndjson(&[person("short", 1), long, person("after", 2)]);
    let response = server.ingest(text).await;
    let body = response.text().await.unwrap();
    let records: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rejected: Vec<&Value> = records
        .iter()
        .filter_map(|r| r["rejected"].as_array())
        .flatten()
        .collect();
    assert_eq!(rejected.len(), 1, "{body}");
    assert_eq!(rejected[0]["line"], 2);
    assert!(rejected[0]["error"].as_str().unwrap().contains("200 bytes"));
    assert_eq!(records.last().unwrap()["acked"], 2);

    let wrong_type = server.post("/graphs/g/ingest", "{}").await;
    assert_eq!(wrong_type.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn backpressure_is_a_503_with_retry_after() {
    let error = tributary::Error::MemWal {
        source: tributary_memwal_adapter::Error::Backpressure {
            table: "nodes/Person.lance".into(),
            message: "over the bound".into(),
        },
    };
    let response = tributary_server::ApiError::from(error).into_response();
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_search_commits_and_metrics_over_http() {
    let server = start(None, Limits::default()).await;
    let load = server
        .post_json(
            "/graphs/g/load",
            ndjson(&[person("ada", 36), person("alan", 41)]),
        )
        .await;
    assert_eq!(load["rows"]["Person"], 2);
    let row = server.get_json("/graphs/g/types/Person/ada").await;
    assert_eq!(row[0]["age"], 36);
    let missing = server.get("/graphs/g/types/Person/zed").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["kind"], "no_row", "{body}");
    let no_graph = server.get("/graphs/nope/types/Person/zed").await;
    assert_eq!(no_graph.status(), StatusCode::NOT_FOUND);
    let body: Value = no_graph.json().await.unwrap();
    assert_eq!(body["kind"], "not_found", "{body}");
    let bad = server
        .get("/graphs/g/types/Person?filter=nope%20%3D%201")
        .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let commits = server.get_json("/graphs/g/commits").await;
    assert_eq!(commits.as_array().unwrap().len(), 2, "init and load");
    // One durable send (a load writes no WAL): counted once, by what it waited for.
    let streamed = server.ingest(ndjson(&[person("cy", 20)])).await;
    assert_eq!(streamed.status(), StatusCode::OK);
    streamed.text().await.unwrap();
    let metrics = server.get("/metrics").await;
    assert_eq!(
        metrics.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let metrics = metrics.text().await.unwrap();
    assert!(metrics.ends_with("# EOF\n"), "OpenMetrics text:\n{metrics}");
    for name in [
        "tributary_ingest_ack_seconds_bucket",
        "tributary_ingest_acked_rows_total",
        "tributary_pending_rows{graph=\"g\"}",
        "tributary_fold_lag_seconds",
        "tributary_http_responses_total{status=\"200\"}",
    ] {
        assert!(metrics.contains(name), "metrics lack {name}:\n{metrics}");
    }
    let sends: u64 = metrics
        .lines()
        .filter(|line| line.starts_with("tributary_wal_sends{cause="))
        .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(sends, 1, "{metrics}");
}

/// The ids of `Person` on `branch`'s head.
async fn ids_on(server: &Server, branch: &str) -> BTreeSet<String> {
    let rows = server
        .get_json(&format!("/graphs/g/types/Person?branch={branch}"))
        .await;
    rows.as_array()
        .map(|rows| {
            rows.iter()
                .filter_map(|r| r["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Wait (up to a minute) until `branch`'s head holds `want`.
async fn wait_for(server: &Server, branch: &str, want: &[&str]) {
    let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
    let started = Instant::now();
    loop {
        let got = ids_on(server, branch).await;
        if got == want {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{branch}: {got:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_to_a_branch_is_folded_in_the_background_and_again_once_it_is_made_again() {
    let server = start(None, Limits::default()).await;
    let ingest_on = |branch: &str, line: String| {
        server
            .client
            .post(server.url(&format!("/graphs/g/ingest?branch={branch}")))
            .header("content-type", "application/x-ndjson")
            .body(ndjson(&[line]))
            .send()
    };
    let created = server.post("/graphs/g/branches/dev", "").await;
    assert!(created.status().is_success(), "{created:?}");
    let acked = ingest_on("dev", person("ada", 36)).await.unwrap();
    assert_eq!(acked.status(), StatusCode::OK);
    wait_for(&server, "dev", &["ada"]).await;
    assert!(ids_on(&server, "main").await.is_empty());

    let deleted = server
        .client
        .delete(server.url("/graphs/g/branches/dev"))
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{deleted:?}");
    let created = server.post("/graphs/g/branches/dev", "").await;
    assert!(created.status().is_success(), "{created:?}");
    let acked = ingest_on("dev", person("bob", 40)).await.unwrap();
    assert_eq!(acked.status(), StatusCode::OK);
    wait_for(&server, "dev", &["bob"]).await;
    let status = server.get_json("/graphs/g/ingest/status?branch=dev").await;
    assert_eq!(status["branch"], "dev", "{status}");
}

/// A bounded load test: 16 connections, 2,000 small ingest requests; zero errors, zero
/// lost rows. The rate is printed (timing is for the bench notes, not asserted).
#[tokio::test(flavor = "multi_thread")]
async fn sixteen_connections_two_thousand_requests_lose_nothing() {
    const CONNECTIONS: usize = 16;
    const REQUESTS: usize = 125;
    let server = Arc::new(start(None, Limits::default()).await);
    let started = Instant::now();
    let workers: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            let server = server.clone();
            tokio::spawn(async move {
                let mut acked = 0u64;
                for r in 0..REQUESTS {
                    let text = ndjson(&[
                        person(&format!("c{c}-r{r}-a"), 1),
                        person(&format!("c{c}-r{r}-b"), 2),
                    ]);
                    let response = server.ingest(text).await;
                    assert_eq!(response.status(), StatusCode::OK);
                    let body = response.text().await.unwrap();
                    let summary: Value =
                        serde_json::from_str(body.lines().last().unwrap()).unwrap();
                    assert!(summary.get("error").is_none(), "{body}");
                    acked += summary["acked"].as_u64().unwrap();
                }
                acked
            })
        })
        .collect();
    let mut acked = 0;
    for worker in workers {
        acked += worker.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let requests = CONNECTIONS * REQUESTS;
    eprintln!(
        "load test: {requests} requests over {CONNECTIONS} connections in {elapsed:.2}s = {:.0} requests/s",
        requests as f64 / elapsed
    );
    assert_eq!(acked as usize, requests * 2);
    assert_eq!(
        fresh_ids(&server).await.len(),
        requests * 2,
        "no acknowledged row lost"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_drops_a_load_mid_commit_leaves_it_whole() {
    let _lock = crate::FAILPOINTS.lock().await;
    let scenario = fail::FailScenario::setup();
    let server = start(None, Limits::default()).await;
    // The load pauses between its table commits, and its client gives up meanwhile.
    fail::cfg("load::between-table-commits", "sleep(1500)").unwrap();
    let lines = ndjson(&[
        person("ada", 36),
        tributary_tests::company("acme"),
        tributary_tests::edge("WorksAt", "ada", "acme"),
    ]);
    let dropped = server
        .client
        .post(server.url("/graphs/g/load"))
        .timeout(Duration::from_millis(300))
        .body(lines)
        .send()
        .await;
    assert!(dropped.is_err(), "the client was meant to give up");
    // The commit runs to its end without its client.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let commits = server.get_json("/graphs/g/commits").await;
        if commits.as_array().is_some_and(|c| c.len() == 2) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the load never landed: {commits}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fail::remove("load::between-table-commits");
    for (ty, rows) in [("Person", 1), ("Company", 1), ("WorksAt", 1)] {
        let response = server.get(&format!("/graphs/g/types/{ty}")).await;
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body.as_array().map(Vec::len), Some(rows), "{ty}: {body}");
    }
    scenario.teardown();
}

#[test]
fn error_kinds_have_one_wire_name_status_and_exit_code() {
    use tributary::ErrorKind;
    for kind in ErrorKind::ALL {
        assert_eq!(ErrorKind::from_name(kind.name()), Some(kind));
        let json = serde_json::to_string(&kind).unwrap();
        assert_eq!(
            json,
            format!("\"{}\"", kind.name()),
            "serde and the table agree"
        );
    }
    assert_eq!(ErrorKind::from_name("no_such_kind"), None);
    assert_eq!(tributary_server::NO_ROW, "no_row");
    assert_eq!(ErrorKind::NoRow.http_status(), 404);
    assert_eq!(
        ErrorKind::NoRow.exit_code(),
        ErrorKind::NotFound.exit_code()
    );
    assert_eq!(ErrorKind::Unavailable.http_status(), 503);
    assert_eq!(
        ErrorKind::TooLarge.exit_code(),
        ErrorKind::InvalidInput.exit_code()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn queries_answer_rows_within_the_servers_cap_and_time() {
    let limits = Limits {
        max_query_rows: 2,
        ..Limits::default()
    };
    let server = start(None, limits).await;
    let loaded = server
        .post(
            "/graphs/g/load",
            ndjson(&[person("ada", 36), person("bob", 41), person("cy", 29)]),
        )
        .await;
    assert_eq!(loaded.status(), StatusCode::OK);
    let ask = |path: &'static str, body: Value| {
        let request = server.client.post(server.url(path)).json(&body);
        async move { request.send().await.unwrap() }
    };
    let answer = ask(
        "/graphs/g/query",
        serde_json::json!({"query": "MATCH (p:Person) WHERE p.age > $min RETURN p.name ORDER BY p.name", "params": {"min": 30}}),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::OK);
    let rows: Value = answer.json().await.unwrap();
    assert_eq!(
        rows,
        serde_json::json!([{"p.name": "ada"}, {"p.name": "bob"}])
    );
    let sql = ask(
        "/graphs/g/sql",
        serde_json::json!({"query": "SELECT name FROM Person ORDER BY name LIMIT 1"}),
    )
    .await;
    assert_eq!(
        sql.json::<Value>().await.unwrap(),
        serde_json::json!([{"name": "ada"}])
    );
    // More rows than the cap: refused, naming the cap, never cut short.
    let over = ask(
        "/graphs/g/query",
        serde_json::json!({"query": "MATCH (p:Person) RETURN p.name"}),
    )
    .await;
    assert_eq!(over.status(), StatusCode::BAD_REQUEST);
    let body: Value = over.json().await.unwrap();
    assert_eq!(body["kind"], "invalid_input", "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("more than 2 rows"),
        "{body}"
    );
    // A refusal names its place; a body that is not a query says what one is.
    let refused = ask(
        "/graphs/g/query",
        serde_json::json!({"query": "MATCH (p:Persn) RETURN p"}),
    )
    .await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("line 1, column 10: unknown node type `Persn`"),
        "{body}"
    );
    let malformed = server.post("/graphs/g/query", "MATCH (p) RETURN p").await;
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);
    let body: Value = malformed.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("\"query\""),
        "{body}"
    );

    // A query past the server's time is stopped and refused (it stalls at a failpoint).
    let _failpoints = crate::FAILPOINTS.lock().await;
    fail::cfg("query::stall", "return").unwrap();
    let hurried = start(
        None,
        Limits {
            query_timeout: Duration::from_millis(200),
            ..Limits::default()
        },
    )
    .await;
    let late = hurried
        .client
        .post(hurried.url("/graphs/g/query"))
        .json(&serde_json::json!({"query": "MATCH (p:Person) RETURN count(*)"}))
        .send()
        .await
        .unwrap();
    assert_eq!(late.status(), StatusCode::BAD_REQUEST);
    let body: Value = late.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("ran past this server's limit of 200ms"),
        "{body}"
    );
    fail::remove("query::stall");
}

#[test]
fn a_summary_rate_keeps_three_significant_digits_below_a_hundred() {
    use tributary_server::rows_per_s;
    // 2 rows in 9 s was once shown as 0.
    assert_eq!(rows_per_s(2, 9.0), 0.222);
    assert_eq!(rows_per_s(1234, 100.0), 12.3);
    assert_eq!(rows_per_s(1234, 1.0), 1234.0);
    assert_eq!(rows_per_s(0, 1.0), 0.0);
}
