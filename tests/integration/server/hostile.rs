//! Hostile and slow clients: bodies before tokens, malformed requests, bounds on loads,
//! streams, connections and time, a graph slow to open, and shutdown with live streams.

use super::*;

/// Read from a raw connection until a whole answer arrived (headers and as many body bytes
/// as they announce) or the server closed; `None` if it did neither within 30 s.
async fn read_answer(stream: &mut tokio::net::TcpStream) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buffer)).await;
        match read {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buffer[..n]),
        }
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_owned())
                })
                .and_then(|v| v.parse::<usize>().ok());
            if length.is_some_and(|length| body.len() >= length) {
                break;
            }
        }
    }
    Some(String::from_utf8_lossy(&answer).into_owned())
}

/// Send raw bytes on a new connection and read the answer's status and body (the rest of
/// what the request announced is never sent).
async fn raw_exchange(server: &Server, request: &[u8]) -> (u16, String) {
    use tokio::io::AsyncWriteExt;
    let address = server.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request).await.unwrap();
    let text = read_answer(&mut stream)
        .await
        .expect("the server answers without the announced body");
    let status = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Hostile requests each get their status and a JSON body naming the error's kind, with no
/// server path in it, and the server goes on serving honest clients.
/// A connection whose load sent its headers and no body, holding the graph's one load
/// place (`max_loads: 1`), and the 503 another load got meanwhile. An honest load that
/// reached the server first would take the place instead: then try again.
async fn hold_the_load_place(server: &Server) -> (tokio::net::TcpStream, reqwest::Response) {
    use tokio::io::AsyncWriteExt;
    let address = server.base.trim_start_matches("http://");
    let head = "POST /graphs/g/load HTTP/1.1\r\nhost: t\r\ncontent-length: 100000\r\n\r\n";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut slow = tokio::net::TcpStream::connect(address).await.unwrap();
        slow.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let probe = server
            .post("/graphs/g/load", ndjson(&[person("probe", 1)]))
            .await;
        if probe.status() == StatusCode::SERVICE_UNAVAILABLE {
            return (slow, probe);
        }
        assert!(
            Instant::now() < deadline,
            "no slow load ever held the place"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_requests_get_json_errors_and_the_server_keeps_serving() {
    let tokens = "w1 write *\nr1 read g\n";
    let server = start(Some(tokens), Limits::default()).await;
    let root = server._dir.path().to_string_lossy().into_owned();
    let kind_of = |body: &str| -> String {
        let value: Value = serde_json::from_str(body.trim()).unwrap_or_else(|_| panic!("{body}"));
        assert!(!body.contains(&root), "a server path in {body}");
        value["kind"].as_str().unwrap_or_default().to_owned()
    };

    // A graph creation without credentials announcing 10 GB: refused before any body.
    let unauthenticated =
        b"POST /graphs/x HTTP/1.1\r\nhost: t\r\ncontent-length: 10000000000\r\n\r\nnode A";
    let (status, body) = raw_exchange(&server, unauthenticated).await;
    assert_eq!((status, kind_of(&body).as_str()), (401, "unauthorized"));
    // With credentials, a schema over its bound is refused as soon as it passes it.
    let oversized = format!(
        "POST /graphs/x HTTP/1.1\r\nhost: t\r\nauthorization: Bearer w1\r\ncontent-length: 10000000000\r\n\r\n{}",
        "x".repeat((1 << 20) + 1)
    );
    let (status, body) = raw_exchange(&server, oversized.as_bytes()).await;
    assert_eq!((status, kind_of(&body).as_str()), (413, "too_large"));

    let get = |path: &str| server.client.get(server.url(path)).bearer_auth("r1").send();
    for (path, status, needle) in [
        (
            "/graphs/g/search/Person?text=a&k=1099511627776",
            400,
            "bound of 10000",
        ),
        (
            "/graphs/g/types/Person?limit=99999999999",
            400,
            "bound of 10000000",
        ),
        ("/graphs/g/types/Person?limit=abc", 400, "bad query string"),
        (
            "/graphs/g/types/Person?fresh=maybe",
            400,
            "bad query string",
        ),
        (
            "/graphs/g/types/Person?branch=../../etc",
            400,
            "is not a branch name",
        ),
        ("/graphs/g/commits?limit=-1", 400, "bad query string"),
        ("/graphs/g/types/%FF%FE", 400, "bad path"),
        ("/graphs/g/nope/nope/nope", 404, "no such endpoint"),
        ("/graphs/other/schema", 403, ""),
    ] {
        let response = get(path).await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{path}");
        let body = response.text().await.unwrap();
        assert!(!kind_of(&body).is_empty(), "{path}: {body}");
        assert!(body.contains(needle), "{path}: {body}");
    }

    // Creating a graph that exists says so, without saying where it lives.
    let existing = server
        .client
        .post(server.url("/graphs/g"))
        .bearer_auth("w1")
        .body("node A { k: String @key }")
        .send()
        .await
        .unwrap();
    assert_eq!(existing.status(), StatusCode::BAD_REQUEST);
    let body = existing.text().await.unwrap();
    assert!(body.contains("graph `g` already exists"), "{body}");
    kind_of(&body);

    // The honest client is served throughout.
    let schema = get("/graphs/g/schema").await.unwrap();
    assert_eq!(schema.status(), StatusCode::OK);
}

/// A load whose client goes away mid-body is not answered "too large" (the metrics count
/// what was answered).
#[tokio::test]
async fn a_load_body_that_breaks_off_is_not_too_large() {
    use tokio::io::AsyncWriteExt;
    let server = start(None, Limits::default()).await;
    let address = server.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let head = "POST /graphs/g/load HTTP/1.1\r\nhost: t\r\ncontent-length: 100000\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(person("ada", 1).as_bytes()).await.unwrap();
    stream.shutdown().await.unwrap();
    // The server saw the body break off; wait for its answer to be counted.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = server.get("/metrics").await.text().await.unwrap();
        assert!(!metrics.contains("status=\"413\""), "{metrics}");
        if metrics.contains("status=\"400\"") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the broken load was never answered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A graph that is slow to open holds up no request to another graph.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opening_one_graph_holds_up_no_other() {
    let server = start(None, Limits::default()).await;
    Graph::init(&server._dir.path().join("slow").to_string_lossy(), SCHEMA)
        .await
        .unwrap();
    // `g` is open and cached before `slow` starts opening.
    assert_eq!(
        server.get("/graphs/g/schema").await.status(),
        StatusCode::OK
    );
    let _lock = crate::FAILPOINTS.lock().await;
    let scenario = fail::FailScenario::setup();
    fail::cfg("graph::open", "pause").unwrap();
    let slow = tokio::spawn({
        let request = server.client.get(server.url("/graphs/slow/schema")).send();
        async move { request.await.unwrap().status() }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let other = tokio::time::timeout(Duration::from_secs(20), server.get("/graphs/g/schema")).await;
    // Unpause before judging, so a failure does not leave the slow open blocked forever.
    fail::cfg("graph::open", "off").unwrap();
    let other = other.expect("a request to another graph waited for the slow open");
    assert_eq!(other.status(), StatusCode::OK);
    assert_eq!(slow.await.unwrap(), StatusCode::OK);
    scenario.teardown();
}

/// Beyond `max_loads` loads (or `max_ingest_streams` streams) of one graph at once, a
/// request is answered 503 with `Retry-After` before its body is read; a place freed is
/// taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn loads_and_streams_beyond_their_bound_are_503_with_retry_after() {
    let limits = Limits {
        max_loads: 1,
        max_ingest_streams: 1,
        ..Limits::default()
    };
    let server = start(None, limits).await;
    // A load whose body is still arriving holds the graph's one load place.
    let (slow, refused) = hold_the_load_place(&server).await;
    let load = || server.post("/graphs/g/load", ndjson(&[person("ada", 1)]));
    let deadline = Instant::now() + Duration::from_secs(30);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["kind"], "unavailable");
    assert!(
        body["error"].as_str().unwrap().contains("--max-loads"),
        "{body}"
    );
    drop(slow);
    loop {
        if load().await.status() == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "the freed place was never taken");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // An open ingest stream holds the one stream place.
    let (feed, open) = open_stream(&server, person("bob", 2)).await;
    assert_eq!(open.status(), StatusCode::OK);
    let second = server.ingest(ndjson(&[person("cy", 3)])).await;
    assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(second.headers().contains_key("retry-after"));
    drop(feed);
    drop(open);
}

/// Slow clients cannot hold the server: one that never finishes its headers is cut after
/// the header-read timeout, connections over the cap are answered 503 and closed, and an
/// ingest stream that sends nothing is ended, its acknowledged rows kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_clients_are_cut_and_connections_are_capped() {
    use tokio::io::AsyncWriteExt;
    let limits = Limits {
        header_read_timeout: Duration::from_secs(1),
        ingest_idle_timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    let server = start(None, limits).await;
    let address = server.base.trim_start_matches("http://").to_owned();

    let mut slow = tokio::net::TcpStream::connect(&address).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n")
        .await
        .unwrap();
    let cut = read_answer(&mut slow).await;
    assert!(
        cut.is_some(),
        "a client that never finished its headers was kept"
    );
    assert!(!cut.unwrap().contains("200 OK"));

    // On a server of three connections (and a header timer far longer than this takes),
    // three idle connections fill the cap.
    let capped = start(
        None,
        Limits {
            max_connections: 3,
            ..Limits::default()
        },
    )
    .await;
    let address = capped.base.trim_start_matches("http://").to_owned();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(tokio::net::TcpStream::connect(&address).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut over = tokio::net::TcpStream::connect(&address).await.unwrap();
    let refused = read_answer(&mut over).await.unwrap_or_default();
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("retry-after"), "{refused}");
    assert!(refused.contains("\"kind\":\"unavailable\""), "{refused}");
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let served = server.client.get(server.url("/healthz")).send().await;
        if served.is_ok_and(|r| r.status() == StatusCode::OK) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "freed connections were never served again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // An ingest stream that sends one line, then nothing.
    let (feed, response) = open_stream(&server, person("ada", 1)).await;
    let text = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("an idle stream was never ended")
        .unwrap();
    let summary: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["acked"], 1, "{text}");
    assert_eq!(summary["error"]["kind"], "unavailable", "{text}");
    drop(feed);
}

/// A load body that never completes is ended after the body timeout, freeing its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_load_body_that_never_completes_frees_its_place() {
    let limits = Limits {
        max_loads: 1,
        body_timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    let server = start(None, limits).await;
    let (mut slow, _) = hold_the_load_place(&server).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = server
            .post("/graphs/g/load", ndjson(&[person("ada", 1)]))
            .await;
        if response.status() == StatusCode::OK {
            break;
        }
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(Instant::now() < deadline, "the slow body kept its place");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answer = read_answer(&mut slow).await.unwrap_or_default();
    assert!(answer.contains("took over"), "{answer}");
}

/// When the server stops, a live ingest stream ends with a record saying so, and the
/// server returns once the stream has ended; what was acknowledged is durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopping_server_ends_live_streams_with_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    Graph::init(&root.join("g").to_string_lossy(), SCHEMA)
        .await
        .unwrap();
    let config = ServerConfig {
        root: root.display().to_string(),
        store: Default::default(),
        graph_settings: Default::default(),
        tokens: None,
        allow_init: false,
        limits: Limits::default(),
        tls: None,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(tributary_server::serve(
        listener,
        AppState::new(config),
        async move {
            let _ = stopped.await;
        },
    ));
    let (mut feed, body) = streamed_body();
    let request = reqwest::Client::new()
        .post(format!("{base}/graphs/g/ingest"))
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send();
    feed.send(Ok(ndjson(&[person("ada", 1)]).into_bytes()))
        .await
        .unwrap();
    let response = request.await.unwrap();
    let mut records = Records::new(response);
    assert_eq!(records.next().await.unwrap()["acked"], 1);
    stop.send(()).unwrap();
    let summary = records.next().await.unwrap();
    assert_eq!(summary["summary"], true, "{summary}");
    assert!(
        summary["error"]["error"]
            .as_str()
            .unwrap()
            .contains("stopping"),
        "{summary}"
    );
    tokio::time::timeout(Duration::from_secs(30), served)
        .await
        .expect("the server never returned")
        .unwrap()
        .unwrap();
    drop(feed);
    let graph = Graph::open(&root.join("g").to_string_lossy())
        .await
        .unwrap();
    graph.fold("main").await.unwrap();
    assert!(graph
        .get("Person", "ada", tributary::View::default())
        .await
        .unwrap()
        .is_some());
}

/// A client that streams lines but never reads its acknowledgements cannot hold a stream
/// place: once the records it leaves unread fill the pipe for the idle timeout, the
/// server ends its stream and the place is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_never_reads_its_records_frees_its_place() {
    use tokio::io::AsyncWriteExt;
    let limits = Limits {
        max_ingest_streams: 1,
        ingest_idle_timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    let server = start(None, limits).await;
    let address = server.base.trim_start_matches("http://").to_owned();
    // Rejected lines make long records fast (each names its line and why), and take no
    // WAL append: the unread records outgrow the socket buffers in a few seconds.
    let chunk: String = (0..1_000)
        .map(|i| format!("{{\"type\":\"Nobody\",\"data\":{{\"name\":\"n{i}\"}}}}\n"))
        .collect();
    // Set once the deaf client is seen holding the place: from then on it does not come
    // back, so only the server ending its stream can free the place.
    let held = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let deaf = {
        let held = held.clone();
        tokio::spawn(async move {
            let head = "POST /graphs/g/ingest HTTP/1.1\r\nhost: t\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n";
            let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
            // Refused (a probe held the place first): it tries again.
            while !held.load(std::sync::atomic::Ordering::SeqCst) {
                let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
                stream.write_all(head.as_bytes()).await.unwrap();
                // Never reads; writes until the server stops taking the body.
                while stream.write_all(framed.as_bytes()).await.is_ok() {}
            }
        })
    };
    // The deaf client holds the one place…
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = server.ingest(ndjson(&[person("probe", 1)])).await;
        if response.status() == StatusCode::SERVICE_UNAVAILABLE {
            held.store(true, std::sync::atomic::Ordering::SeqCst);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the deaf stream never took the place"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // …until its unread records have waited out the idle timeout.
    loop {
        let response = server.ingest(ndjson(&[person("honest", 1)])).await;
        if response.status() == StatusCode::OK {
            break;
        }
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(Instant::now() < deadline, "the deaf stream held its place");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    deaf.abort();
}
