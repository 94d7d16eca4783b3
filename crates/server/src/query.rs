//! Queries: Cypher (`POST /graphs/{id}/query`) and SQL (`POST /graphs/{id}/sql`) at one
//! snapshot, under the server's time limit and row cap. Read scope: they change nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use tributary::{Language, QueryRequest};
use utoipa::ToSchema;

use crate::access::{AtParams, Reading};
use crate::error::ApiError;
use crate::extract::{read_body, Query};
use crate::routes::rows;
use crate::AppState;

/// The largest query body taken.
const MAX_QUERY_BYTES: usize = 1 << 20;

/// A query, and what to do with it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryBody {
    /// The query text.
    query: String,
    /// Values of the query's `$name` parameters (Cypher only): strings, numbers,
    /// booleans, null or lists.
    #[serde(default)]
    #[schema(value_type = Object)]
    params: BTreeMap<String, serde_json::Value>,
    /// Answer with what the query would run (`step`, `plan` rows: the SQL a Cypher query
    /// compiles to, the logical and the physical plan) instead of its rows.
    #[serde(default)]
    explain: bool,
    /// The most rows to answer (at most the server's cap): a query returning more is
    /// refused, never cut short. Use `LIMIT` in the query to take the first rows.
    max_rows: Option<usize>,
}

/// A Cypher query (a read-only subset of openCypher) at one commit.
///
/// `MATCH` (node and relationship patterns; labels are the schema's types; directed,
/// undirected and bounded variable-length `*min..max` relationships; comma-separated
/// patterns; then `OPTIONAL MATCH`), `WHERE`, `RETURN` (`DISTINCT`, aliases, `count/sum/min/max/avg/collect`),
/// `ORDER BY`, `SKIP`, `LIMIT`, `$parameters`. Writes are refused: write with load or
/// ingest. `branch`/`commit` choose the snapshot; `fresh=true` adds what is ingested and
/// not folded yet.
#[utoipa::path(post, path = "/graphs/{id}/query", tag = "reads",
    params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        AtParams),
    request_body(content = QueryBody),
    responses((status = 200, description = "Rows: a JSON array of objects, or an Arrow IPC stream when `Accept` asks for `application/vnd.apache.arrow.stream`.",
        content((Vec<Object> = "application/json"), ("application/vnd.apache.arrow.stream")))))]
pub async fn cypher(
    State(state): State<Arc<AppState>>,
    access: Reading,
    Query(at): Query<AtParams>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    answer(state, access, at, headers, body, Language::Cypher).await
}

/// A SQL query at one commit: one table per node and edge type, named as the type
/// (`"Person"`; an edge's table has `id`, `src`, `dst` and its properties). Read-only.
#[utoipa::path(post, path = "/graphs/{id}/sql", tag = "reads",
    params(
        ("id" = String, Path, description = "Graph id: its folder name under the server root."),
        AtParams),
    request_body(content = QueryBody),
    responses((status = 200, description = "Rows: a JSON array of objects, or an Arrow IPC stream when `Accept` asks for `application/vnd.apache.arrow.stream`.",
        content((Vec<Object> = "application/json"), ("application/vnd.apache.arrow.stream")))))]
pub async fn sql(
    State(state): State<Arc<AppState>>,
    access: Reading,
    Query(at): Query<AtParams>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    answer(state, access, at, headers, body, Language::Sql).await
}

async fn answer(
    state: Arc<AppState>,
    Reading { graph, .. }: Reading,
    at: AtParams,
    headers: HeaderMap,
    body: Body,
    language: Language,
) -> Result<Response, ApiError> {
    let limits = &state.config.limits;
    let body = read_body(body, MAX_QUERY_BYTES, limits.body_timeout).await?;
    let body: QueryBody = serde_json::from_slice(&body).map_err(|e| {
        ApiError::invalid(format!(
            "the body is not a query ({{\"query\": \"...\", \"params\": {{}}, \"explain\": false, \"max_rows\": N}}): {e}"
        ))
    })?;
    let cap = limits.max_query_rows;
    let request = QueryRequest {
        language,
        text: body.query,
        params: body.params,
        view: at.view()?,
        explain: body.explain,
        max_rows: Some(body.max_rows.unwrap_or(cap).min(cap)),
    };
    let timeout = limits.query_timeout;
    let batch = tokio::time::timeout(timeout, graph.query(&request))
        .await
        .map_err(|_| {
            ApiError::invalid(format!(
                "the query ran past this server's limit of {timeout:?} and was stopped: narrow it (WHERE, LIMIT), or run the server with a longer --query-timeout"
            ))
        })??;
    rows(&headers, &batch)
}
