//! An S3-compatible server for tests: `tributary-test-s3` (tests/s3-server), started on
//! loopback in a temporary directory and stopped when dropped. `cargo xtask test` builds it
//! and names it in `TRIBUTARY_TEST_S3`.
//!
//! Standard library only, so the CLI's tests (which link no Lance) include this file too.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub const ACCESS_KEY: &str = "tributary";
pub const SECRET_KEY: &str = "tributary-secret";
pub const BUCKET: &str = "graphs";

/// A running `tributary-test-s3` with one bucket, [`BUCKET`].
pub struct S3Server {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub endpoint: String,
    /// The folder holding the buckets (a bucket is a directory in it).
    pub dir: tempfile::TempDir,
}

/// The server binary: `TRIBUTARY_TEST_S3`, or where `cargo xtask test` builds it.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("TRIBUTARY_TEST_S3") {
        return PathBuf::from(path);
    }
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("xtask").is_dir())
        .map(|root| root.join("target/s3-server/release/tributary-test-s3"));
    match built {
        Some(path) if path.exists() => path,
        _ => panic!(
            "the S3 test server is not built: run the tests with `cargo xtask test`, which \
             builds tests/s3-server, or set TRIBUTARY_TEST_S3 to its binary"
        ),
    }
}

impl S3Server {
    /// A server with no injected latency or faults.
    pub fn start() -> S3Server {
        S3Server::start_with(&[])
    }

    /// A server started with extra flags (`--latency-ms N`, `--fail-percent P`,
    /// `--seed S`, `--ignore-conditional-writes`).
    pub fn start_with(flags: &[&str]) -> S3Server {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join(BUCKET)).expect("bucket directory");
        let mut child = Command::new(binary())
            .arg("--root")
            .arg(dir.path())
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tributary-test-s3");
        let stdout = child.stdout.take().expect("server stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("read the server's address");
        let address = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("tributary-test-s3 said {first:?}"))
            .to_owned();
        S3Server {
            child,
            endpoint: format!("http://{address}"),
            dir,
        }
    }

    /// `s3://graphs/<name>`.
    pub fn uri(&self, name: &str) -> String {
        format!("s3://{BUCKET}/{name}")
    }

    /// The store settings that reach this server (a library's `StoreOptions.settings`, or
    /// the CLI's `--store-option`s).
    pub fn settings(&self) -> Vec<(String, String)> {
        [
            ("aws_endpoint", self.endpoint.as_str()),
            ("aws_access_key_id", ACCESS_KEY),
            ("aws_secret_access_key", SECRET_KEY),
            ("aws_region", "us-east-1"),
            ("allow_http", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// The standard AWS environment that reaches this server (for processes).
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT", self.endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ALLOW_HTTP", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
