//! Branch endpoints: list, create, delete, merge. Each runs to its end once started, like
//! every write (a create, delete or merge folds and commits).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use crate::access::{main_branch, AtParams, Reading, Writing};
use crate::error::ApiError;
use crate::extract::{Path, Query};
use crate::routes::to_the_end;

/// `GET /graphs/{id}/branches`: every branch's head, `main` first.
pub async fn list(Reading { graph, .. }: Reading) -> Result<Response, ApiError> {
    Ok(Json(graph.branches().await?).into_response())
}

/// `POST /graphs/{id}/branches/{name}?branch=FROM` (or `?commit=ID`): the new branch's
/// first commit.
pub async fn create(
    Writing { graph, .. }: Writing,
    Path((_, name)): Path<(String, String)>,
    Query(params): Query<AtParams>,
) -> Result<Response, ApiError> {
    let from = params.at()?;
    let commit = to_the_end(async move { graph.create_branch(&name, &from).await }).await?;
    Ok((StatusCode::CREATED, Json(commit)).into_response())
}

/// `DELETE /graphs/{id}/branches/{name}`.
pub async fn delete(
    Writing { graph, .. }: Writing,
    Path((_, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    to_the_end(async move { graph.delete_branch(&name).await }).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Debug, Deserialize)]
pub struct MergeParams {
    #[serde(default = "main_branch")]
    pub into: String,
}

/// `POST /graphs/{id}/branches/{name}/merge?into=TARGET` (default `main`).
pub async fn merge(
    Writing { graph, .. }: Writing,
    Path((_, source)): Path<(String, String)>,
    Query(params): Query<MergeParams>,
) -> Result<Response, ApiError> {
    let outcome =
        to_the_end(async move { graph.merge_branch(&source, &params.into).await }).await?;
    Ok(Json(outcome).into_response())
}
