//! Shared fixtures for the integration tests and the scenario benchmarks.

// test fixtures: a panic here is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod embeddings_server;
pub mod history;
pub mod s3_server;

use std::path::{Path, PathBuf};

use tempfile::TempDir;
use tributary::Graph;

/// The schema of DESIGN.md's example, used across tests.
pub const SCHEMA: &str = r#"
node Person @stream {
  name: String @key
  age: I32? @range(0..150)
  status: enum(active, inactive) = active
  email: String? @unique @check("^[^@]+@[^@]+$")
  bio: String? @index(fts)
  embedding: Vector(8)? @embed(bio)
}
node Company { name: String @key }
edge WorksAt: Person -> Company @card(0..1) @stream { since: Date? }
edge Knows: Person -> Person @stream
"#;

/// A fresh graph in a temporary directory (removed on drop).
pub async fn temp_graph() -> (TempDir, String, Graph) {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("graph").to_string_lossy().into_owned();
    let graph = Graph::init(&uri, SCHEMA).await.expect("init graph");
    (dir, uri, graph)
}

/// [`temp_graph`] committing through the publisher `kind`, whatever `TRIBUTARY_PUBLISHER`
/// says (for tests of one publisher's own mechanism).
pub async fn temp_graph_on(kind: tributary::PublisherKind) -> (TempDir, String, Graph) {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("graph").to_string_lossy().into_owned();
    let graph = Graph::builder(&uri)
        .publisher(kind)
        .init(SCHEMA)
        .await
        .expect("init graph");
    (dir, uri, graph)
}

/// The graph at `uri` reopened with a background folder that folds within 50 ms, started.
pub async fn quickly_folding(uri: &str) -> std::sync::Arc<Graph> {
    let settings = tributary::GraphSettings {
        triggers: tributary::FoldTriggers {
            max_lag: std::time::Duration::from_millis(50),
            poll: std::time::Duration::from_millis(20),
            ..Default::default()
        },
        ..Default::default()
    };
    let graph = std::sync::Arc::new(
        Graph::builder(uri)
            .settings(settings)
            .open()
            .await
            .expect("reopen with a quick folder"),
    );
    graph.start_folder("main").await.expect("start the folder");
    graph
}

/// A fresh graph like [`temp_graph`], reopened with every object-store operation counted.
pub async fn counted_graph() -> (TempDir, String, Graph, tributary::OpCounter) {
    let (dir, uri, graph) = temp_graph().await;
    drop(graph);
    let counter = tributary::OpCounter::new();
    let graph = Graph::builder(&uri)
        .counted(counter.clone())
        .open()
        .await
        .expect("reopen counted");
    (dir, uri, graph, counter)
}

/// Print the engine's and Lance's log (info and above) on stderr when `TRIBUTARY_TEST_LOG`
/// is set: for a test that misbehaves.
pub fn log_if_asked() {
    if std::env::var_os("TRIBUTARY_TEST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
            .try_init();
    }
}

/// The store options that reach the test S3 server `server`.
pub fn s3_options(server: &s3_server::S3Server) -> tributary::StoreOptions {
    tributary::StoreOptions {
        settings: server.settings().into_iter().collect(),
        ..Default::default()
    }
}

/// One person line.
pub fn person(name: &str, age: i32) -> String {
    format!(r#"{{"type":"Person","data":{{"name":"{name}","age":{age}}}}}"#)
}

/// One person line with an email (`@unique` in [`SCHEMA`]).
pub fn person_with_email(name: &str, email: &str) -> String {
    format!(r#"{{"type":"Person","data":{{"name":"{name}","email":"{email}"}}}}"#)
}

pub fn company(name: &str) -> String {
    format!(r#"{{"type":"Company","data":{{"name":"{name}"}}}}"#)
}

pub fn edge(edge: &str, from: &str, to: &str) -> String {
    format!(r#"{{"edge":"{edge}","from":"{from}","to":"{to}"}}"#)
}

/// A delete line of a node.
pub fn delete(ty: &str, key: &str) -> String {
    format!(r#"{{"delete":"{ty}","key":"{key}"}}"#)
}

/// A delete line of an edge, by its ends.
pub fn delete_edge(ty: &str, from: &str, to: &str) -> String {
    format!(r#"{{"delete":"{ty}","from":"{from}","to":"{to}"}}"#)
}

/// Lines joined as NDJSON.
pub fn ndjson(lines: &[String]) -> String {
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// Every file under a table's `_mem_wal` directory.
pub fn memwal_files(uri: &str, table: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(uri).join(table).join("_mem_wal"), &mut out);
    out.sort();
    out
}

/// WAL entries (one per append) in a table's MemWAL.
pub fn wal_entries(uri: &str, table: &str) -> usize {
    memwal_files(uri, table)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "arrow"))
        .count()
}
