//! The graph's embedding provider: its settings shown, and set (JSON, as stored).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use tributary::EmbedderConfig;

use crate::access::{Reading, Writing};
use crate::error::ApiError;
use crate::extract::read_body;
use crate::AppState;

/// The largest settings document `POST /graphs/{id}/embedder` takes.
const MAX_SETTINGS_BYTES: usize = 64 << 10;

/// The graph's embedding provider: what fills `@embed` fields when rows are folded or
/// loaded, and embeds `similar` searches.
#[utoipa::path(get, path = "/graphs/{id}/embedder", tag = "reads", operation_id = "embedder",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root.")),
    responses((status = 200, description = "The provider's settings (`builtin` when none are set).", body = EmbedderConfig)))]
pub async fn show(Reading { graph, .. }: Reading) -> Result<Response, ApiError> {
    Ok(Json(graph.embedder_settings().await?).into_response())
}

/// Name the graph's embedding provider.
///
/// Settings that cannot make a provider (not an http(s) URL, an empty model) are refused
/// before anything is stored. Vectors already written stay as they are.
#[utoipa::path(post, path = "/graphs/{id}/embedder", tag = "writes", operation_id = "set_embedder",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root.")),
    request_body(content = EmbedderConfig, content_type = "application/json"),
    responses((status = 200, description = "The settings now stored.", body = EmbedderConfig)))]
pub async fn set(
    State(state): State<Arc<AppState>>,
    Writing { graph, .. }: Writing,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_body(body, MAX_SETTINGS_BYTES, state.config.limits.body_timeout).await?;
    let settings: EmbedderConfig = serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid(format!("bad embedder settings: {e}")))?;
    graph.set_embedder(&settings).await?;
    Ok(Json(settings).into_response())
}
