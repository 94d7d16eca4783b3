//! A graph's folder: every name in it that is not a node or edge table (those are
//! `nodes/<Type>.lance` and `edges/<Type>.lance`, `tributary_schema::TablePath`), in one
//! place. Each owner names its objects below these.

/// The manifest publisher's commit chain (a Lance table of heads, commits and keys).
pub const MANIFEST: &str = "__manifest.lance";
/// The record publisher's commit chain: one immutable record per transaction.
pub const TRANSACTIONS: &str = "__txn";
/// Which publisher the graph was made with (absent: the manifest, the first one).
pub const PUBLISHER: &str = "__publisher.json";
/// The intents of graph writes not yet cleared (`<id>.json`) and recoverers' claims.
pub const RECOVERY: &str = "__recovery";
/// Leases: a branch's graph writer, a producer's stream.
pub const LEASES: &str = "__leases";
/// Producers' acknowledged marks, per scope (`main` or a lineage).
pub const PRODUCERS: &str = "__producers";
/// Where an older version recorded a schema change in progress (now an intent).
pub const SCHEMA: &str = "__schema";
/// Graph settings written by users.
pub const SETTINGS: &str = "__settings";
/// The graph's embedder settings.
pub const EMBEDDER: &str = "__settings/embedder.json";
/// Notes for `ingest status` (the last failed fold), per lineage.
pub const STATUS: &str = "__status";
/// One marker per branch lineage, standing while the lineage does.
pub const LINEAGES: &str = "__lineages";
/// The conditional-PUT probe objects of [`crate::GraphStore::check_conditional_put`].
pub const PROBE: &str = "__probe";
/// Pins: named snapshots cleanup keeps (`<name>.json`).
pub const PINS: &str = "__pins";
/// The dead-letter table of folds.
pub const REJECTS: &str = "_ingest_rejects.lance";
