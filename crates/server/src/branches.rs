//! Branch endpoints: list, create, delete, merge. Each runs to its end once started, like
//! every write (a create, delete or merge folds and commits).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use tributary::{CommitRecord, MergeOutcome, Prefer};

use crate::access::{main_branch, AtParams, Reading, Writing};
use crate::error::ApiError;
use crate::extract::{Path, Query};
use crate::routes::to_the_end;

/// Every branch's head commit, `main` first.
#[utoipa::path(get, path = "/graphs/{id}/branches", tag = "branches", operation_id = "list_branches",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root.")),
    responses((status = 200, description = "The heads.", body = Vec<CommitRecord>)))]
pub async fn list(Reading { graph, .. }: Reading) -> Result<Response, ApiError> {
    Ok(Json(graph.branches().await?).into_response())
}

/// Create a branch at another branch's head (`branch`, default `main`) or at a commit
/// (`commit`).
///
/// Everything acknowledged on the source branch is folded first.
#[utoipa::path(post, path = "/graphs/{id}/branches/{name}", tag = "branches", operation_id = "create_branch",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root."), ("name" = String, Path, description = "Branch name: 1 to 64 letters, digits, `.`, `_` or `-`."), AtParams),
    responses((status = 201, description = "The new branch's first commit.", body = CommitRecord)))]
pub async fn create(
    Writing { graph, .. }: Writing,
    Path((_, name)): Path<(String, String)>,
    Query(params): Query<AtParams>,
) -> Result<Response, ApiError> {
    let from = params.at()?;
    let commit = to_the_end(async move { graph.create_branch(&name, &from).await }).await?;
    Ok((StatusCode::CREATED, Json(commit)).into_response())
}

/// Delete a branch (not `main`).
///
/// Its commits stay readable by id until a cleanup finds them needed by no branch.
#[utoipa::path(delete, path = "/graphs/{id}/branches/{name}", tag = "branches", operation_id = "delete_branch",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root."), ("name" = String, Path, description = "Branch name: 1 to 64 letters, digits, `.`, `_` or `-`.")),
    responses((status = 204, description = "Deleted.")))]
pub async fn delete(
    Writing { graph, .. }: Writing,
    Path((_, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    to_the_end(async move { graph.delete_branch(&name).await }).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MergeParams {
    /// The branch that receives the changes.
    #[serde(default = "main_branch")]
    #[param(default = json!("main"))]
    pub into: String,
    /// For keys both sides changed differently: `source` takes the merged branch's
    /// change, `target` keeps the target's. Absent: such keys refuse the merge.
    #[serde(default)]
    pub prefer: Option<Prefer>,
}

/// Merge branch `name` into `into` as one commit with both heads as parents.
///
/// A fast-forward when `into` has not moved since the merge base, else a key-level
/// three-way merge. Keys changed differently on both sides: 409 (`merge_conflict`)
/// listing them with both sides' values, unless `prefer` names the side that wins. A change
/// that breaks an endpoint, `@card` or `@unique`: 400 naming the keys. Nothing is written
/// on either branch then.
#[utoipa::path(post, path = "/graphs/{id}/branches/{name}/merge", tag = "branches", operation_id = "merge_branch",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root."), ("name" = String, Path, description = "Branch name: 1 to 64 letters, digits, `.`, `_` or `-`."), MergeParams),
    responses((status = 200, description = "How the merge went.", body = MergeOutcome)))]
pub async fn merge(
    Writing { graph, .. }: Writing,
    Path((_, source)): Path<(String, String)>,
    Query(params): Query<MergeParams>,
) -> Result<Response, ApiError> {
    let prefer = params.prefer.unwrap_or_default();
    let outcome =
        to_the_end(async move { graph.merge_branch(&source, &params.into, prefer).await }).await?;
    Ok(Json(outcome).into_response())
}
