//! Every other endpoint: load, reads, search, commits, schema, status, fold, rejects,
//! cleanup, graph creation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use tributary::{
    At, CleanupReport, CommitRecord, Direction, ErrorKind, FoldOutcome, IngestStatus, LoadMode,
    LoadOptions, LoadOutcome, ReadOptions, RejectPolicy, SchemaOutcome, SearchQuery, SortKey,
};
use utoipa::{IntoParams, ToSchema};

use crate::access::{main_branch, AtParams, BranchParams, Reading, Writing};
use crate::admission::Work;
use crate::auth::Scope;
use crate::error::ApiError;
use crate::extract::{read_body, Path, Query};
use crate::AppState;

pub use tributary::wire::ARROW_STREAM;

/// Rows as a JSON array of objects, or as an Arrow IPC stream when asked for.
pub(crate) fn rows(headers: &HeaderMap, batch: &RecordBatch) -> Result<Response, ApiError> {
    let wants_arrow = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains(ARROW_STREAM));
    let internal = |e: &dyn std::fmt::Display| ApiError::internal(e.to_string());
    let mut bytes = Vec::new();
    let content_type = if wants_arrow {
        let mut writer = arrow_ipc::writer::StreamWriter::try_new(&mut bytes, &batch.schema())
            .map_err(|e| internal(&e))?;
        writer.write(batch).map_err(|e| internal(&e))?;
        writer.finish().map_err(|e| internal(&e))?;
        ARROW_STREAM
    } else {
        let mut writer = arrow_json::ArrayWriter::new(&mut bytes);
        writer.write(batch).map_err(|e| internal(&e))?;
        writer.finish().map_err(|e| internal(&e))?;
        if bytes.is_empty() {
            bytes.extend_from_slice(b"[]");
        }
        "application/json"
    };
    Ok(([(header::CONTENT_TYPE, content_type)], Body::from(bytes)).into_response())
}

/// Liveness (no auth).
#[utoipa::path(get, path = "/healthz", tag = "server",
    responses((status = 200, description = "`ok`", body = String, content_type = "text/plain")))]
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// OpenMetrics text.
///
/// Needs a token with the metrics grant (`TOKEN metrics *`) when the server has tokens.
#[utoipa::path(get, path = "/metrics", tag = "server",
    responses((status = 200, description = "The server's metrics.", body = String,
        content_type = "application/openmetrics-text")))]
pub async fn metrics(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.authorize(&headers, Scope::Metrics, None)?;
    let text = state.render_metrics().await;
    Ok(([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response())
}

/// The graphs this server serves that the request's token may read, by id (their folder
/// names under the root), sorted. Creating one over the API (`POST /graphs/{id}`) needs
/// a server started with `--init`.
#[utoipa::path(get, path = "/graphs", tag = "graphs", operation_id = "list_graphs",
    responses((status = 200, description = "The graphs.", body = Vec<GraphListed>)))]
pub async fn list_graphs(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.authorize(&headers, Scope::Read, None)?;
    let ids = tributary::graphs_under(&state.config.root, state.config.store.clone()).await?;
    let listed: Vec<GraphListed> = ids
        .into_iter()
        .filter(|id| state.authorize(&headers, Scope::Read, Some(id)).is_ok())
        .map(|graph| GraphListed { graph })
        .collect();
    Ok(Json(listed).into_response())
}

/// A graph the server serves.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct GraphListed {
    /// Its id: the folder name under the server root.
    pub graph: String,
}

/// Create a graph from a schema.
///
/// Only when the server was started with `--init`; needs the write scope.
#[utoipa::path(post, path = "/graphs/{id}", tag = "graphs", params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        CreateParams),
    request_body(content = String, content_type = "text/plain", description = "The schema source."),
    responses((status = 201, description = "Created.", body = GraphCreated)))]
pub async fn create_graph(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(params): Query<CreateParams>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // Who asks, and whether creating is on, are settled before a byte of the body is read.
    state.authorize(&headers, Scope::Write, Some(&id))?;
    if !state.config.allow_init {
        return Err(ApiError::new(
            ErrorKind::Forbidden,
            "creating graphs over the API is off; start the server with --init",
        ));
    }
    let body = read_body(body, MAX_SCHEMA_BYTES, state.config.limits.body_timeout).await?;
    let schema = text_body(&body)?;
    let graph = state.create_graph(&id, schema, params.publisher).await?;
    let head = graph.snapshot(&At::default()).await?;
    let created = GraphCreated {
        graph: id,
        types: graph.catalog().types.len(),
        commit: head.id.to_string(),
        publisher: graph.publisher_kind(),
    };
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// A new graph.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct GraphCreated {
    pub graph: String,
    /// Node and edge types its schema declares.
    pub types: usize,
    /// Its first commit.
    pub commit: String,
    /// The publisher it commits through.
    pub publisher: tributary::PublisherKind,
}

/// The largest schema `POST /graphs/{id}` takes.
const MAX_SCHEMA_BYTES: usize = 1 << 20;

/// Run a write to its end even when its client goes away: axum drops a handler's future
/// when the connection closes, and a commit must not stop half-way (between its table
/// commits and its publish) because of that.
pub(crate) async fn to_the_end<T: Send + 'static>(
    write: impl std::future::Future<Output = tributary::Result<T>> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::spawn(write).await {
        Ok(result) => result.map_err(ApiError::from),
        Err(error) => Err(ApiError::internal(format!(
            "the write stopped abnormally: {error}"
        ))),
    }
}

fn text_body(body: &[u8]) -> Result<&str, ApiError> {
    std::str::from_utf8(body).map_err(|e| ApiError::invalid(format!("the body is not UTF-8: {e}")))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LoadParams {
    /// The branch to load into.
    #[serde(default = "main_branch")]
    #[param(default = json!("main"))]
    branch: String,
    /// `upsert` (default): a row replaces the row of its key; `insert`: a key that exists
    /// refuses the load.
    mode: Option<LoadModeName>,
    /// Names the load (1-200 printable ASCII characters). A retry with the same key on the
    /// same branch answers with the commit the first load made (`"replayed": true`) and
    /// writes nothing; the key is published with the commit, in the same compare-and-swap.
    idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LoadModeName {
    Upsert,
    Insert,
}

/// Load NDJSON as one visible commit.
///
/// Nothing is written unless every line is valid: a bad line refuses the load (400) with
/// every bad line listed.
#[utoipa::path(post, path = "/graphs/{id}/load", tag = "writes", params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        LoadParams),
    request_body(content = String, content_type = "application/x-ndjson", description = "One line per row, patch or delete. Rows: `{\"type\":T,\"data\":{...}}` (a node), `{\"edge\":E,\"from\":KEY,\"to\":KEY,\"data\":{...}}` (an edge). Patches: a row's line with `patch` in place of `data`, holding the key and the fields to set, laid over the head's row or an earlier line's; a patch of a key that does not exist refuses the load. Deletes: `{\"delete\":T,\"key\":KEY}` (a node, or an edge type with its own @key), `{\"delete\":E,\"from\":KEY,\"to\":KEY}` (an edge without one). Between a row and a delete of one key the later line wins; a deleted node's edges are deleted in the same commit; a delete that would leave a source below its edge type's @card minimum is refused."),
    responses((status = 200, description = "The commit, rows written and deleted per type.", body = LoadOutcome)))]
pub async fn load(
    State(state): State<Arc<AppState>>,
    Writing { id, graph, .. }: Writing,
    Query(params): Query<LoadParams>,
    body: Body,
) -> Result<Response, ApiError> {
    let admitted = state.admission.admit(&id, Work::Load)?;
    let limits = state.config.limits;
    let bytes = read_body(body, limits.max_body_bytes, limits.body_timeout).await?;
    let mode = match params.mode {
        None | Some(LoadModeName::Upsert) => LoadMode::Upsert,
        Some(LoadModeName::Insert) => LoadMode::Insert,
    };
    let options = LoadOptions {
        branch: tributary::branch(&params.branch)?,
        mode,
        actor: "tributary:server".to_owned(),
        idempotency_key: params.idempotency_key,
    };
    let text = text_body(&bytes)?.to_owned();
    let outcome = to_the_end(async move {
        let _admitted = admitted;
        graph.load(&text, &options).await
    })
    .await?;
    Ok(Json(outcome).into_response())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReadParams {
    /// A filter in SQL (`age > 60 AND name LIKE 'a%'`).
    filter: Option<String>,
    /// Comma-separated columns.
    select: Option<String>,
    /// At most this many rows.
    limit: Option<usize>,
    /// Rows to skip first (after `order_by`).
    offset: Option<usize>,
    /// Comma-separated columns to sort by, each `column`, `column:asc` or `column:desc`.
    order_by: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    at: AtParams,
}

/// Rows of a type.
#[utoipa::path(get, path = "/graphs/{id}/types/{type}", tag = "reads",
    params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        ("type" = String, Path, description = "A node or edge type of the schema."),
        ReadParams, AtParams),
    responses((status = 200, description = "Rows: a JSON array of objects, or an Arrow IPC stream when `Accept` asks for `application/vnd.apache.arrow.stream`.",
        content((Vec<Object> = "application/json"), ("application/vnd.apache.arrow.stream")))))]
pub async fn read(
    Reading { graph, .. }: Reading,
    Path((_, type_name)): Path<(String, String)>,
    Query(params): Query<ReadParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let options = ReadOptions {
        at: params.at.at()?,
        filter: params.filter,
        select: params
            .select
            .map(|s| s.split(',').map(|c| c.trim().to_owned()).collect()),
        limit: params.limit,
        offset: params.offset,
        order_by: params
            .order_by
            .as_deref()
            .map(|text| text.split(',').map(SortKey::parse).collect())
            .transpose()?
            .unwrap_or_default(),
        fresh: params.at.fresh,
    };
    rows(&headers, &graph.read(&type_name, &options).await?)
}

/// How many rows of a type match `filter`, at a commit or fresh.
#[utoipa::path(get, path = "/graphs/{id}/count/{type}", tag = "reads", operation_id = "count",
    params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        ("type" = String, Path, description = "A node or edge type of the schema."),
        CountParams, AtParams),
    responses((status = 200, description = "The count.", body = Counted)))]
pub async fn count(
    Reading { graph, .. }: Reading,
    Path((_, type_name)): Path<(String, String)>,
    Query(params): Query<CountParams>,
) -> Result<Response, ApiError> {
    let options = ReadOptions {
        at: params.at.at()?,
        filter: params.filter,
        fresh: params.at.fresh,
        ..ReadOptions::default()
    };
    let count = graph.count(&type_name, &options).await?;
    Ok(Json(Counted { count }).into_response())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CountParams {
    /// A filter in SQL (`age > 60`); every row when absent.
    filter: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    at: AtParams,
}

/// A count of rows.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct Counted {
    pub count: u64,
}

/// One row by key.
#[utoipa::path(get, path = "/graphs/{id}/types/{type}/{key}", tag = "reads",
    params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        ("type" = String, Path, description = "A node or edge type of the schema."),
        ("key" = String, Path, description = "The row's key."),
        AtParams),
    responses((status = 200, description = "Rows: a JSON array of objects, or an Arrow IPC stream when `Accept` asks for `application/vnd.apache.arrow.stream`.",
        content((Vec<Object> = "application/json"), ("application/vnd.apache.arrow.stream")))))]
pub async fn get_one(
    Reading { graph, .. }: Reading,
    Path((_, type_name, key)): Path<(String, String, String)>,
    Query(params): Query<AtParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    match graph.get(&type_name, &key, params.view()?).await? {
        Some(batch) => rows(&headers, &batch),
        None => Err(ApiError::no_row(format!("{type_name} `{key}` not found"))),
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NeighborParams {
    /// The edge type to follow.
    edge: String,
    /// `out` (default): edges from the node; `in`: edges into it.
    direction: Option<DirectionName>,
    /// One row per edge, with the edge's properties as `Edge.field` columns after the
    /// node's.
    #[serde(default, deserialize_with = "crate::access::flag")]
    edges: bool,
    #[serde(flatten)]
    #[param(ignore)]
    at: AtParams,
}

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DirectionName {
    Out,
    In,
}

/// Nodes at the other end of an edge type.
///
/// A node that does not exist is "not found" (404, kind `no_row`), like a `get`.
#[utoipa::path(get, path = "/graphs/{id}/neighbors/{type}/{key}", tag = "reads",
    params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        ("type" = String, Path, description = "A node or edge type of the schema."),
        ("key" = String, Path, description = "The row's key."),
        NeighborParams, AtParams),
    responses((status = 200, description = "Rows: a JSON array of objects, or an Arrow IPC stream when `Accept` asks for `application/vnd.apache.arrow.stream`.",
        content((Vec<Object> = "application/json"), ("application/vnd.apache.arrow.stream")))))]
pub async fn neighbors(
    Reading { graph, .. }: Reading,
    Path((_, type_name, key)): Path<(String, String, String)>,
    Query(params): Query<NeighborParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let direction = match params.direction {
        None | Some(DirectionName::Out) => Direction::Out,
        Some(DirectionName::In) => Direction::In,
    };
    let view = params.at.view()?;
    // One operation, as every client reaches it.
    let batch = tributary::GraphOps::neighbors(
        &*graph,
        &type_name,
        &key,
        &params.edge,
        direction,
        &view,
        params.edges,
    )
    .await?;
    rows(&headers, &batch)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchParams {
    /// Full-text query over the type's `@index(fts)` fields (rows get `_score`).
    text: Option<String>,
    /// A vector as a JSON array of numbers, searched over the type's vector field (rows get
    /// `_distance`, the squared Euclidean distance).
    nearest: Option<String>,
    /// A text, embedded by the graph's embedding provider and searched over the type's
    /// indexed `@embed` field (rows get `_distance`; rows not yet folded have no vector).
    similar: Option<String>,
    /// How many rows, best first.
    #[serde(default = "default_k")]
    #[param(default = 10, minimum = 1, maximum = 10_000)]
    k: usize,
    #[serde(flatten)]
    #[param(ignore)]
    at: AtParams,
}

fn default_k() -> usize {
    10
}

/// Full-text or vector search, best first.
///
/// Give exactly one of `text` and `nearest`.
#[utoipa::path(get, path = "/graphs/{id}/search/{type}", tag = "reads",
    params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        ("type" = String, Path, description = "A node or edge type of the schema."),
        SearchParams, AtParams),
    responses((status = 200, description = "Rows: a JSON array of objects, or an Arrow IPC stream when `Accept` asks for `application/vnd.apache.arrow.stream`.",
        content((Vec<Object> = "application/json"), ("application/vnd.apache.arrow.stream")))))]
pub async fn search(
    Reading { graph, .. }: Reading,
    Path((_, type_name)): Path<(String, String)>,
    Query(params): Query<SearchParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let query = match (params.text, params.nearest, params.similar) {
        (Some(text), None, None) => SearchQuery::Text(text),
        (None, Some(vector), None) => {
            SearchQuery::Nearest(serde_json::from_str(&vector).map_err(|e| {
                ApiError::invalid(format!("nearest must be a JSON array of numbers: {e}"))
            })?)
        }
        (None, None, Some(text)) => SearchQuery::Similar(text),
        _ => {
            return Err(ApiError::invalid(
                "give exactly one of `text`, `nearest` and `similar`",
            ))
        }
    };
    let view = params.at.view()?;
    let batch = graph.search(&type_name, &query, params.k, view).await?;
    rows(&headers, &batch)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CreateParams {
    /// How the graph's commits become visible: `manifest` (a compare-and-swap on the
    /// `__manifest` table) or `record` (one immutable record per transaction). Absent: the
    /// server's default (`TRIBUTARY_PUBLISHER` where it runs, else `manifest`).
    #[serde(default)]
    #[param(value_type = Option<String>)]
    publisher: Option<tributary::PublisherKind>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CommitsParams {
    #[serde(default = "main_branch")]
    #[param(default = json!("main"))]
    branch: String,
    #[serde(default = "default_commits")]
    #[param(default = 50)]
    limit: usize,
}

fn default_commits() -> usize {
    50
}

/// Commits of a branch, newest first.
#[utoipa::path(get, path = "/graphs/{id}/commits", tag = "reads", params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        CommitsParams),
    responses((status = 200, description = "The branch's commits.", body = Vec<CommitRecord>)))]
pub async fn commits(
    Reading { graph, .. }: Reading,
    Query(params): Query<CommitsParams>,
) -> Result<Response, ApiError> {
    Ok(Json(graph.log(&params.branch, params.limit).await?).into_response())
}

/// The schema source (with a closing comment naming the embedder of `@embed` fields).
#[utoipa::path(get, path = "/graphs/{id}/schema", tag = "reads", params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root.")),
    responses((status = 200, description = "The schema, as text.", body = String, content_type = "text/plain")))]
pub async fn schema(Reading { graph, .. }: Reading) -> Result<Response, ApiError> {
    let source = tributary::GraphOps::schema(graph.as_ref()).await?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        source,
    )
        .into_response())
}

/// The publisher the graph commits through: `manifest` (a compare-and-swap on the
/// `__manifest` table) or `record` (one immutable record per transaction), chosen when
/// the graph was made.
#[utoipa::path(get, path = "/graphs/{id}/publisher", tag = "reads", params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root.")),
    responses((status = 200, description = "The publisher's name.", body = tributary::PublisherKind)))]
pub async fn publisher(Reading { graph, .. }: Reading) -> Result<Response, ApiError> {
    Ok(Json(tributary::GraphOps::publisher(graph.as_ref()).await?).into_response())
}

/// Apply a new schema as one `schema` commit.
///
/// Additive changes only: new types; new fields after a type's existing ones that are
/// nullable or have a default (stored rows get the default, or null); an index on an
/// existing field; `@stream` on a type, or off it (everything acknowledged is folded, its
/// shards sealed, and ingest of it refused from then on). Anything else is refused (400,
/// kind `invalid_input`) with every difference listed, and nothing changes. What is
/// pending on `@stream` types is folded first; other processes take the new schema at
/// their next load or fold. Needs the write scope.
#[utoipa::path(post, path = "/graphs/{id}/schema", tag = "writes", params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root.")),
    request_body(content = String, content_type = "text/plain", description = "The whole new schema."),
    responses((status = 200, description = "What changed, and the commit (null when nothing did).", body = SchemaOutcome)))]
pub async fn apply_schema(
    State(state): State<Arc<AppState>>,
    Writing { id, graph, .. }: Writing,
    body: Body,
) -> Result<Response, ApiError> {
    let admitted = state.admission.admit(&id, Work::Load)?;
    let body = read_body(body, MAX_SCHEMA_BYTES, state.config.limits.body_timeout).await?;
    let source = text_body(&body)?.to_owned();
    let outcome = to_the_end(async move {
        let _admitted = admitted;
        graph.apply_schema(&source).await
    })
    .await?;
    Ok(Json(outcome).into_response())
}

/// The largest key list `POST /graphs/{id}/shards/{type}` takes.
const MAX_SHARD_KEYS_BYTES: usize = 1 << 20;

#[derive(Debug, Deserialize, ToSchema)]
pub struct ShardKeys {
    keys: Vec<String>,
}

/// The shard of each key of a `@stream` type (node or edge).
///
/// Where a process owning some shards (`serve --shards`) takes it. A writer's call (write
/// scope): a type no send has reached yet is enrolled, as its first send would.
#[utoipa::path(post, path = "/graphs/{id}/shards/{type}", tag = "ingest",
    params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        ("type" = String, Path, description = "A `@stream` type.")),
    request_body(content = ShardKeys),
    responses((status = 200, description = "The shard of each key, in order.", body = Vec<u32>)))]
pub async fn shards(
    State(state): State<Arc<AppState>>,
    Writing { graph, .. }: Writing,
    Path((_, type_name)): Path<(String, String)>,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_body(body, MAX_SHARD_KEYS_BYTES, state.config.limits.body_timeout).await?;
    let keys: ShardKeys = serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid(format!("the body is not {{\"keys\": [...]}}: {e}")))?;
    let keys: Vec<&str> = keys.keys.iter().map(String::as_str).collect();
    Ok(Json(graph.shards_of(&type_name, &keys).await?).into_response())
}

/// Pending (unfolded) work per enrolled table.
///
/// Per table its shards (each with its `number`, 0..N as `shards_of` gives it, and its
/// pending rows and bytes) and what is pending; `owned_shards`: the shards this server
/// writes (`serve --shards`), null for all; `producers`: each producer's `acknowledged`
/// mark and `folded` mark (the highest sequence whose lines the head commit holds).
#[utoipa::path(get, path = "/graphs/{id}/ingest/status", tag = "ingest", params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        BranchParams),
    responses((status = 200, description = "What is pending, and the last fold.", body = IngestStatus)))]
pub async fn status(
    Reading { graph, .. }: Reading,
    Query(params): Query<BranchParams>,
) -> Result<Response, ApiError> {
    Ok(Json(graph.ingest_status(&params.branch).await?).into_response())
}

/// Fold now: publish what is acknowledged as one graph commit (or several for a large
/// backlog).
#[utoipa::path(post, path = "/graphs/{id}/ingest/fold", tag = "ingest", params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        BranchParams),
    responses((status = 200, description = "What the fold did.", body = FoldOutcome)))]
pub async fn fold(
    State(state): State<Arc<AppState>>,
    Writing { graph, .. }: Writing,
    Query(params): Query<BranchParams>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let outcome = to_the_end(async move {
        if params.halt {
            graph
                .fold_with_policy(&params.branch, RejectPolicy::Halt)
                .await
        } else {
            graph.fold(&params.branch).await
        }
    })
    .await?;
    state.metrics.folded(started.elapsed());
    Ok(Json(outcome).into_response())
}

/// Dead letters of folds: rows a fold could not publish, with why.
#[utoipa::path(get, path = "/graphs/{id}/rejects", tag = "ingest", params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        AtParams),
    responses((status = 200, description = "Rows: a JSON array of objects, or an Arrow IPC stream when `Accept` asks for `application/vnd.apache.arrow.stream`.",
        content((Vec<Object> = "application/json"), ("application/vnd.apache.arrow.stream")))))]
pub async fn rejects(
    Reading { graph, .. }: Reading,
    Query(params): Query<AtParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    rows(&headers, &graph.rejects(&params.at()?).await?)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CleanupParams {
    /// Remove unpinned versions older than this many seconds (default 7 days).
    #[serde(default = "week")]
    #[param(default = 604800)]
    older_than_s: u64,
}

fn week() -> u64 {
    7 * 24 * 3600
}

/// Remove folded WAL state, deleted branches' data and unpinned old versions.
#[utoipa::path(post, path = "/graphs/{id}/cleanup", tag = "operations", params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        CleanupParams),
    responses((status = 200, description = "What was removed.", body = CleanupReport)))]
pub async fn cleanup(
    Writing { graph, .. }: Writing,
    Query(params): Query<CleanupParams>,
) -> Result<Response, ApiError> {
    let report = graph
        .cleanup(Duration::from_secs(params.older_than_s))
        .await?;
    Ok(Json(report).into_response())
}
