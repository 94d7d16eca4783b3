//! Workspace integration tests: one binary (each test binary links Lance), modules inside.

// test code: a panic here is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod acknowledged;
mod branch_ingest;
mod branches;
mod changes;
mod check;
mod cleanup;
mod columns;
mod deletes;
mod disk;
mod embed;
mod fold;
mod fold_model;
mod fresh;
mod idempotent_load;
mod ingest;
mod lance_surface_guards;
mod lease;
mod load;
mod patches;
mod producers;
mod publisher;
mod queries;
mod reads;
mod records;
mod recovery;
mod s3;
mod schema_change;
mod server;
mod snapshots;
mod storage;
mod stream_deletes;

/// Failpoints are process-global: tests that configure them take this lock (nextest runs
/// each test in its own process anyway; `cargo test` does not).
pub static FAILPOINTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
