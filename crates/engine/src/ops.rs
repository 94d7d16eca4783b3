//! [`GraphOps`]: the operations a graph offers, defined once for every way to reach one:
//! a [`Graph`] opened in this process, or a server through its HTTP client. A command
//! line, a test or an embedding program written against the trait runs either way and
//! prints the same.

use std::time::Duration;

use arrow_array::RecordBatch;

use crate::{
    At, ChangeRecord, ChangesQuery, CleanupReport, CommitRecord, Direction, EmbedderConfig,
    FoldOutcome, Graph, IngestStatus, LoadOptions, LoadOutcome, MergeOutcome, Pin, Prefer,
    PublisherKind, QueryRequest, ReadOptions, RejectPolicy, Result, SchemaOutcome, SearchQuery,
    Snapshot, View,
};

#[async_trait::async_trait]
pub trait GraphOps: Send + Sync {
    /// Validate NDJSON `text` and load it as one graph commit (nothing is written unless
    /// every line is valid).
    async fn load(&self, text: &str, options: &LoadOptions) -> Result<LoadOutcome>;

    /// Rows of `type_name` at a commit (optionally fresh), filtered and projected.
    async fn read(&self, type_name: &str, options: &ReadOptions) -> Result<RecordBatch>;

    /// How many rows of `type_name` match `options` (its filter, commit and freshness).
    async fn count(&self, type_name: &str, options: &ReadOptions) -> Result<u64>;

    /// The row of `type_name` with key `key`, if any.
    async fn get(&self, type_name: &str, key: &str, view: &View) -> Result<Option<RecordBatch>>;

    /// The nodes the edges of type `edge` leaving (or entering) the node `type_name` `key`
    /// reach; `with_edges`: one row per edge, with the edge's properties as `Edge.field`.
    async fn neighbors(
        &self,
        type_name: &str,
        key: &str,
        edge: &str,
        direction: Direction,
        view: &View,
        with_edges: bool,
    ) -> Result<RecordBatch>;

    /// Full-text or nearest-vector search, best `k` first.
    async fn search(
        &self,
        type_name: &str,
        query: &SearchQuery,
        k: usize,
        view: &View,
    ) -> Result<RecordBatch>;

    /// A Cypher or SQL query over every node and edge type at one snapshot (or
    /// `explain`: what it would run).
    async fn query(&self, request: &QueryRequest) -> Result<RecordBatch>;

    /// Commits of `branch`, newest first.
    async fn log(&self, branch: &str, limit: usize) -> Result<Vec<CommitRecord>>;

    /// The graph's schema source.
    async fn schema(&self) -> Result<String>;

    /// The publisher the graph commits through (chosen at its `init`).
    async fn publisher(&self) -> Result<PublisherKind>;

    /// Apply a new schema: additive changes are published as one `schema` commit; a
    /// change the stored tables cannot take is refused with every difference named.
    async fn apply_schema(&self, source: &str) -> Result<SchemaOutcome>;

    /// The graph's embedding provider settings (the built-in embedder when none are set).
    async fn embedder_settings(&self) -> Result<EmbedderConfig>;

    /// Name the graph's embedding provider; refused before anything is stored when the
    /// settings cannot make a provider.
    async fn set_embedder(&self, settings: &EmbedderConfig) -> Result<()>;

    /// What streaming ingest holds that no fold has published yet.
    async fn ingest_status(&self, branch: &str) -> Result<IngestStatus>;

    /// The shard of each of `keys` of the `@stream` node type `type_name`: which process
    /// (of those owning some shards) takes it.
    async fn shards_of(&self, type_name: &str, keys: &[String]) -> Result<Vec<u32>>;

    /// Fold everything acknowledged so far, with `policy` for rows that fail the fold's
    /// checks.
    async fn fold(&self, branch: &str, policy: RejectPolicy) -> Result<FoldOutcome>;

    /// The dead letters of folds, as of `at`.
    async fn rejects(&self, at: &At) -> Result<RecordBatch>;

    /// Remove folded WAL state and table versions older than `older_than` the head does
    /// not pin.
    async fn cleanup(&self, older_than: Duration) -> Result<CleanupReport>;

    /// Create branch `name` at `from` (a branch's head or a commit); its first commit.
    async fn create_branch(&self, name: &str, from: &At) -> Result<CommitRecord>;

    /// Every branch's head, `main` first.
    async fn branches(&self) -> Result<Vec<CommitRecord>>;

    /// Delete branch `name` (not `main`).
    async fn delete_branch(&self, name: &str) -> Result<()>;

    /// Merge branch `source` into branch `into` as one commit on `into`; a key both
    /// changed differently refuses the merge unless `prefer` names the side that wins.
    async fn merge(&self, source: &str, into: &str, prefer: Prefer) -> Result<MergeOutcome>;

    /// The rows of `type_name` at `at` (published rows only) as NDJSON load lines: what
    /// `load` of another graph with the same schema takes back. [`crate::plan_export`]
    /// chooses the commit and the types.
    async fn export(&self, type_name: &str, at: &At) -> Result<String>;

    /// The commit at `at` as a snapshot any Lance reader can open.
    async fn snapshot(&self, at: &At) -> Result<Snapshot>;

    /// Keep the snapshot at `at` from cleanup as `name`.
    async fn pin(&self, name: &str, at: &At) -> Result<Pin>;

    /// Remove the pin `name`.
    async fn unpin(&self, name: &str) -> Result<Pin>;

    /// Every pin.
    async fn pins(&self) -> Result<Vec<Pin>>;

    /// One page of the change feed: the commits after `query.since`, oldest first, each
    /// as its change records closed by a `commit` record.
    async fn changes(&self, query: &ChangesQuery) -> Result<Vec<ChangeRecord>>;
}

#[async_trait::async_trait]
impl GraphOps for Graph {
    async fn load(&self, text: &str, options: &LoadOptions) -> Result<LoadOutcome> {
        Graph::load(self, text, options).await
    }

    async fn read(&self, type_name: &str, options: &ReadOptions) -> Result<RecordBatch> {
        Graph::read(self, type_name, options).await
    }

    async fn count(&self, type_name: &str, options: &ReadOptions) -> Result<u64> {
        Graph::count(self, type_name, options).await
    }

    async fn get(&self, type_name: &str, key: &str, view: &View) -> Result<Option<RecordBatch>> {
        Graph::get(self, type_name, key, view.clone()).await
    }

    async fn neighbors(
        &self,
        type_name: &str,
        key: &str,
        edge: &str,
        direction: Direction,
        view: &View,
        with_edges: bool,
    ) -> Result<RecordBatch> {
        match with_edges {
            true => {
                Graph::neighbors_with_edges(self, type_name, key, edge, direction, view.clone())
                    .await
            }
            false => Graph::neighbors(self, type_name, key, edge, direction, view.clone()).await,
        }
    }

    async fn search(
        &self,
        type_name: &str,
        query: &SearchQuery,
        k: usize,
        view: &View,
    ) -> Result<RecordBatch> {
        Graph::search(self, type_name, query, k, view.clone()).await
    }

    async fn query(&self, request: &QueryRequest) -> Result<RecordBatch> {
        Graph::query(self, request).await
    }

    async fn log(&self, branch: &str, limit: usize) -> Result<Vec<CommitRecord>> {
        Graph::log(self, branch, limit).await
    }

    async fn schema(&self) -> Result<String> {
        // As published now: another process may have changed it since this one read it.
        let catalog = self.current_catalog().await?;
        let source = catalog.source.clone();
        if !catalog
            .types
            .iter()
            .any(tributary_write::has_embedded_fields)
        {
            return Ok(source);
        }
        // Said where the fields are read: the built-in embedder's vectors are lexical.
        let embedder = self.embedder_settings().await?.describe();
        Ok(format!(
            "{}
// `@embed` fields are filled when rows are folded (or loaded) by the graph's embedder: {embedder}
",
            source.trim_end()
        ))
    }

    async fn publisher(&self) -> Result<PublisherKind> {
        Ok(self.publisher_kind())
    }

    async fn apply_schema(&self, source: &str) -> Result<SchemaOutcome> {
        Graph::apply_schema(self, source).await
    }

    async fn embedder_settings(&self) -> Result<EmbedderConfig> {
        Graph::embedder_settings(self).await
    }

    async fn set_embedder(&self, settings: &EmbedderConfig) -> Result<()> {
        Graph::set_embedder(self, settings).await
    }

    async fn ingest_status(&self, branch: &str) -> Result<IngestStatus> {
        Graph::ingest_status(self, branch).await
    }

    async fn shards_of(&self, type_name: &str, keys: &[String]) -> Result<Vec<u32>> {
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        Graph::shards_of(self, type_name, &keys).await
    }

    async fn fold(&self, branch: &str, policy: RejectPolicy) -> Result<FoldOutcome> {
        Graph::fold_with_policy(self, branch, policy).await
    }

    async fn rejects(&self, at: &At) -> Result<RecordBatch> {
        Graph::rejects(self, at).await
    }

    async fn cleanup(&self, older_than: Duration) -> Result<CleanupReport> {
        Graph::cleanup(self, older_than).await
    }

    async fn create_branch(&self, name: &str, from: &At) -> Result<CommitRecord> {
        Graph::create_branch(self, name, from).await
    }

    async fn branches(&self) -> Result<Vec<CommitRecord>> {
        Graph::branches(self).await
    }

    async fn delete_branch(&self, name: &str) -> Result<()> {
        Graph::delete_branch(self, name).await
    }

    async fn merge(&self, source: &str, into: &str, prefer: Prefer) -> Result<MergeOutcome> {
        Graph::merge_branch(self, source, into, prefer).await
    }

    async fn export(&self, type_name: &str, at: &At) -> Result<String> {
        Graph::export_type(self, type_name, at).await
    }

    async fn snapshot(&self, at: &At) -> Result<Snapshot> {
        Graph::describe_snapshot(self, at).await
    }

    async fn pin(&self, name: &str, at: &At) -> Result<Pin> {
        Graph::pin(self, name, at).await
    }

    async fn unpin(&self, name: &str) -> Result<Pin> {
        Graph::unpin(self, name).await
    }

    async fn pins(&self) -> Result<Vec<Pin>> {
        Graph::pins(self).await
    }

    async fn changes(&self, query: &ChangesQuery) -> Result<Vec<ChangeRecord>> {
        Graph::changes(self, query).await
    }
}
