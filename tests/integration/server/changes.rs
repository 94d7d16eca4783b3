//! The change feed over HTTP: a finished answer, a following stream, a refused commit.

use reqwest::StatusCode;
use serde_json::Value;
use tributary_server::Limits;
use tributary_tests::{ndjson, person};

use super::{start, Records};

/// The change feed over HTTP: a finished answer up to the head, a following stream that
/// sends a heartbeat while nothing happens and a commit once it is published, and a wrong
/// commit refused with a JSON error before any record.
#[tokio::test(flavor = "multi_thread")]
async fn the_change_feed_streams_commits_and_heartbeats() {
    let server = start(None, Limits::default()).await;
    let commits = server.get_json("/graphs/g/commits?limit=1").await;
    let start = commits[0]["id"].as_str().unwrap().to_owned();
    let loaded = server
        .post_json(
            "/graphs/g/load",
            ndjson(&[person("ada", 36), person("bob", 41)]),
        )
        .await;
    let first = loaded["commit"]["id"].as_str().unwrap().to_owned();

    let answer = server
        .get(&format!("/graphs/g/changes?since={start}"))
        .await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(
        answer.headers()["content-type"].to_str().unwrap(),
        "application/x-ndjson"
    );
    let text = answer.text().await.unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 3, "{text}");
    assert_eq!(records[0]["op"], "insert");
    assert_eq!(records[0]["row"]["age"], 36);
    assert_eq!(records[2]["op"], "commit");
    assert_eq!(records[2]["commit"], first.as_str());

    let response = server
        .get("/graphs/g/changes?since=head&follow=true&heartbeat_secs=1")
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut records = Records::new(response);
    let beat = records.next().await.unwrap();
    assert_eq!(beat["op"], "heartbeat", "{beat}");
    assert_eq!(beat["head"], first.as_str());
    let again = server
        .post_json("/graphs/g/load", ndjson(&[person("ada", 37)]))
        .await;
    let second = again["commit"]["id"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    loop {
        let record = records.next().await.unwrap();
        match record["op"].as_str().unwrap() {
            "heartbeat" => continue,
            "commit" => {
                assert_eq!(record["commit"], second.as_str());
                break;
            }
            _ => seen.push(record),
        }
    }
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["op"], "update");
    assert_eq!(seen[0]["row"]["age"], 37);

    let wrong = server.get("/graphs/g/changes?since=000000000000").await;
    assert_eq!(wrong.status(), StatusCode::NOT_FOUND);
    let body: Value = wrong.json().await.unwrap();
    assert_eq!(body["kind"], "not_found", "{body}");
    let limited = server
        .get(&format!("/graphs/g/changes?since={start}&limit=1"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(limited.lines().count(), 3, "one commit: {limited}");
}
