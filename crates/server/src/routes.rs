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
    At, Direction, ErrorKind, LoadMode, LoadOptions, ReadOptions, RejectPolicy, SearchQuery,
};

use crate::access::{main_branch, AtParams, BranchParams, Reading, Writing};
use crate::admission::Work;
use crate::auth::Scope;
use crate::error::ApiError;
use crate::extract::{read_body, Path, Query};
use crate::AppState;

pub use tributary::wire::ARROW_STREAM;

/// Rows as a JSON array of objects, or as an Arrow IPC stream when asked for.
fn rows(headers: &HeaderMap, batch: &RecordBatch) -> Result<Response, ApiError> {
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

pub async fn healthz() -> &'static str {
    "ok\n"
}

pub async fn metrics(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.authorize(&headers, Scope::Metrics, None)?;
    let text = state.render_metrics().await;
    Ok(([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response())
}

/// `POST /graphs/{id}` with the schema as the body (only with `serve --init`).
pub async fn create_graph(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
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
    let graph = state.create_graph(&id, schema).await?;
    let head = graph.snapshot(&At::default()).await?;
    let created = serde_json::json!({
        "graph": id,
        "types": graph.catalog().types.len(),
        "commit": head.id,
    });
    Ok((StatusCode::CREATED, Json(created)).into_response())
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

#[derive(Debug, Deserialize)]
pub struct LoadParams {
    #[serde(default = "main_branch")]
    branch: String,
    /// `upsert` (default) or `insert`.
    mode: Option<String>,
    /// Names the load: a retry with the same key answers with the first one's commit.
    idempotency_key: Option<String>,
}

pub async fn load(
    State(state): State<Arc<AppState>>,
    Writing { id, graph, .. }: Writing,
    Query(params): Query<LoadParams>,
    body: Body,
) -> Result<Response, ApiError> {
    let admitted = state.admission.admit(&id, Work::Load)?;
    let limits = state.config.limits;
    let bytes = read_body(body, limits.max_body_bytes, limits.body_timeout).await?;
    let mode = match params.mode.as_deref() {
        None | Some("upsert") => LoadMode::Upsert,
        Some("insert") => LoadMode::Insert,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "mode must be `upsert` or `insert`, not `{other}`"
            )))
        }
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

#[derive(Debug, Deserialize)]
pub struct ReadParams {
    filter: Option<String>,
    /// Comma-separated columns.
    select: Option<String>,
    limit: Option<usize>,
    #[serde(flatten)]
    at: AtParams,
}

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
        fresh: params.at.fresh,
    };
    rows(&headers, &graph.read(&type_name, &options).await?)
}

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

#[derive(Debug, Deserialize)]
pub struct NeighborParams {
    edge: String,
    /// `out` (default) or `in`.
    direction: Option<String>,
    #[serde(flatten)]
    at: AtParams,
}

pub async fn neighbors(
    Reading { graph, .. }: Reading,
    Path((_, type_name, key)): Path<(String, String, String)>,
    Query(params): Query<NeighborParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let direction = match params.direction.as_deref() {
        None | Some("out") => Direction::Out,
        Some("in") => Direction::In,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "direction must be `out` or `in`, not `{other}`"
            )))
        }
    };
    let view = params.at.view()?;
    let batch = graph
        .neighbors(&type_name, &key, &params.edge, direction, view)
        .await?;
    rows(&headers, &batch)
}

#[derive(Debug, Deserialize)]
pub struct SearchParams {
    text: Option<String>,
    /// A JSON array of numbers.
    nearest: Option<String>,
    #[serde(default = "default_k")]
    k: usize,
    #[serde(flatten)]
    at: AtParams,
}

fn default_k() -> usize {
    10
}

pub async fn search(
    Reading { graph, .. }: Reading,
    Path((_, type_name)): Path<(String, String)>,
    Query(params): Query<SearchParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let query = match (params.text, params.nearest) {
        (Some(text), None) => SearchQuery::Text(text),
        (None, Some(vector)) => {
            SearchQuery::Nearest(serde_json::from_str(&vector).map_err(|e| {
                ApiError::invalid(format!("nearest must be a JSON array of numbers: {e}"))
            })?)
        }
        _ => {
            return Err(ApiError::invalid(
                "give exactly one of `text` and `nearest`",
            ))
        }
    };
    let view = params.at.view()?;
    let batch = graph.search(&type_name, &query, params.k, view).await?;
    rows(&headers, &batch)
}

#[derive(Debug, Deserialize)]
pub struct CommitsParams {
    #[serde(default = "main_branch")]
    branch: String,
    #[serde(default = "default_commits")]
    limit: usize,
}

fn default_commits() -> usize {
    50
}

pub async fn commits(
    Reading { graph, .. }: Reading,
    Query(params): Query<CommitsParams>,
) -> Result<Response, ApiError> {
    Ok(Json(graph.log(&params.branch, params.limit).await?).into_response())
}

pub async fn schema(Reading { graph, .. }: Reading) -> Result<Response, ApiError> {
    let source = graph.schema_source();
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        source,
    )
        .into_response())
}

/// `POST /graphs/{id}/schema` with the new schema as the body.
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

#[derive(Debug, Deserialize)]
pub struct ShardKeys {
    keys: Vec<String>,
}

/// `POST /graphs/{id}/shards/{type}` with `{"keys": [...]}`: the shard of each key. A
/// writer's call: a type no send has reached yet is enrolled, as its first send would.
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

pub async fn status(
    Reading { graph, .. }: Reading,
    Query(params): Query<BranchParams>,
) -> Result<Response, ApiError> {
    Ok(Json(graph.ingest_status(&params.branch).await?).into_response())
}

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

pub async fn rejects(
    Reading { graph, .. }: Reading,
    Query(params): Query<AtParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    rows(&headers, &graph.rejects(&params.at()?).await?)
}

#[derive(Debug, Deserialize)]
pub struct CleanupParams {
    /// Remove unpinned versions older than this many seconds (default 7 days).
    #[serde(default = "week")]
    older_than_s: u64,
}

fn week() -> u64 {
    7 * 24 * 3600
}

pub async fn cleanup(
    Writing { graph, .. }: Writing,
    Query(params): Query<CleanupParams>,
) -> Result<Response, ApiError> {
    let report = graph
        .cleanup(Duration::from_secs(params.older_than_s))
        .await?;
    Ok(Json(report).into_response())
}
