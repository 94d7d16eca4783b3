//! `GET /graphs/{id}/export`: a commit's rows as NDJSON load lines, streamed type by type.

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::Response;
use futures::channel::mpsc;
use futures::SinkExt;
use serde::Deserialize;
use tributary::At;

use crate::access::{main_branch, Reading};
use crate::error::ApiError;
use crate::extract::Query;

/// The header naming the commit an export was read at.
pub const COMMIT_HEADER: &str = "x-tributary-commit";

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportParams {
    /// Export this branch's head.
    #[serde(default = "main_branch")]
    #[param(default = json!("main"))]
    pub branch: String,
    /// Export this commit instead (wins over `branch`).
    pub commit: Option<String>,
    /// Only these types (comma-separated names); all when absent.
    pub types: Option<String>,
}

/// A commit's rows as NDJSON load lines — node types first, then edge types, each in
/// schema order — which `load` into a graph made with the same schema (`GET
/// /graphs/{id}/schema`) takes back as they are. Published rows only.
///
/// The commit is chosen and every type named is checked before the answer starts (the
/// `x-tributary-commit` header names the commit); a failure after that cuts the stream
/// short, so a client that does not read to a clean end has not got the whole export.
#[utoipa::path(get, path = "/graphs/{id}/export", tag = "reads", operation_id = "export",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root."), ExportParams),
    responses((status = 200, description = "NDJSON load lines, one row per line: `{\"type\", \"data\"}` or `{\"edge\", \"from\", \"to\", \"data\"?}`.", body = Object, content_type = "application/x-ndjson",
        headers(("x-tributary-commit" = String, description = "The commit exported.")))))]
pub async fn export(
    Reading { graph, .. }: Reading,
    Query(params): Query<ExportParams>,
) -> Result<Response, ApiError> {
    let at = match &params.commit {
        Some(commit) => At::Commit(commit.as_str().into()),
        None => At::branch(&params.branch)?,
    };
    let only: Vec<String> = params
        .types
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    let plan = tributary::plan_export(&*graph, &at, &only).await?;
    let commit = plan.commit.clone();
    let (mut lines, body) = mpsc::channel::<Result<Bytes, std::io::Error>>(2);
    tokio::spawn(async move {
        let at = At::Commit(plan.commit.as_str().into());
        for (type_name, _) in &plan.types {
            let chunk = graph
                .export_type(type_name, &at)
                .await
                .map(Bytes::from)
                .map_err(|error| {
                    tracing::warn!(%error, type_name, "export stream cut short");
                    std::io::Error::other(error.user_message())
                });
            let failed = chunk.is_err();
            if lines.send(chunk).await.is_err() || failed {
                return;
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .header(COMMIT_HEADER, commit)
        .body(Body::from_stream(body))
        .map_err(|e| ApiError::internal(e.to_string()))
}
