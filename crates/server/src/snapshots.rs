//! Snapshot and pin endpoints: a commit as a document other Lance readers open, and the
//! named pins that keep such a snapshot from cleanup.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use tributary::{Pin, Snapshot};

use crate::access::{AtParams, Reading, Writing};
use crate::error::ApiError;
use crate::extract::{Path, Query};
use crate::routes::to_the_end;

/// A commit as a snapshot: per node and edge type, the table's URI, the Lance version the
/// commit pins (and the Lance branch holding it, off `main`), its key and columns.
///
/// The URIs are where the server stores the graph: a reader opens them on the server's
/// machine or, for a graph on S3, anywhere with access to the bucket.
#[utoipa::path(get, path = "/graphs/{id}/snapshot", tag = "reads", operation_id = "snapshot",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root."), AtParams),
    responses((status = 200, description = "The snapshot.", body = Snapshot)))]
pub async fn snapshot(
    Reading { graph, .. }: Reading,
    Query(params): Query<AtParams>,
) -> Result<Response, ApiError> {
    Ok(Json(graph.describe_snapshot(&params.at()?).await?).into_response())
}

/// Every pin: named snapshots that cleanup keeps.
#[utoipa::path(get, path = "/graphs/{id}/pins", tag = "reads", operation_id = "list_pins",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root.")),
    responses((status = 200, description = "The pins, by name.", body = Vec<Pin>)))]
pub async fn list(Reading { graph, .. }: Reading) -> Result<Response, ApiError> {
    Ok(Json(graph.pins().await?).into_response())
}

/// Pin the snapshot at a branch's head (`branch`, default `main`) or at `commit` as
/// `name`: cleanup keeps its table versions until it is unpinned.
///
/// Pinning the same commit again is a no-op; a name that holds another commit is a 409.
#[utoipa::path(post, path = "/graphs/{id}/pins/{name}", tag = "operations", operation_id = "pin",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root."), ("name" = String, Path, description = "Pin name: 1 to 64 letters, digits, `.`, `_` or `-`."), AtParams),
    responses((status = 201, description = "The pin.", body = Pin)))]
pub async fn pin(
    Writing { graph, .. }: Writing,
    Path((_, name)): Path<(String, String)>,
    Query(params): Query<AtParams>,
) -> Result<Response, ApiError> {
    let at = params.at()?;
    let pin = to_the_end(async move { graph.pin(&name, &at).await }).await?;
    Ok((StatusCode::CREATED, Json(pin)).into_response())
}

/// Remove a pin; the next cleanup may remove what only it kept.
#[utoipa::path(delete, path = "/graphs/{id}/pins/{name}", tag = "operations", operation_id = "unpin",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root."), ("name" = String, Path, description = "Pin name.")),
    responses((status = 200, description = "The pin removed.", body = Pin)))]
pub async fn unpin(
    Writing { graph, .. }: Writing,
    Path((_, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let pin = to_the_end(async move { graph.unpin(&name).await }).await?;
    Ok(Json(pin).into_response())
}
