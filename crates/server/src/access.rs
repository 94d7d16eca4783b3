//! The prologue every graph endpoint shares, as one extractor: the graph id of the path,
//! the bearer token checked for the endpoint's scope (401/403 before anything is opened),
//! then the graph opened (404 if there is none).

use std::marker::PhantomData;
use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use serde::{Deserialize, Deserializer};
use tributary::{At, Graph, View, MAIN_BRANCH};

use crate::auth::Scope;
use crate::error::ApiError;
use crate::AppState;

/// The scope an endpoint needs, as a type.
pub trait NeedsScope {
    const SCOPE: Scope;
}

pub struct Read;
pub struct Write;

impl NeedsScope for Read {
    const SCOPE: Scope = Scope::Read;
}

impl NeedsScope for Write {
    const SCOPE: Scope = Scope::Write;
}

/// The graph of `/graphs/{id}/…`, which the request's token may act on with `S`'s scope.
pub struct Access<S> {
    pub id: String,
    pub graph: Arc<Graph>,
    pub scope: PhantomData<S>,
}

pub type Reading = Access<Read>;
pub type Writing = Access<Write>;

impl<S: NeedsScope + Send> FromRequestParts<Arc<AppState>> for Access<S> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::invalid(format!("bad path: {}", e.body_text())))?;
        let id = params
            .iter()
            .find(|(name, _)| *name == "id")
            .map(|(_, value)| value.to_owned())
            .ok_or_else(|| ApiError::internal("a graph endpoint without a graph id"))?;
        state.authorize(&parts.headers, S::SCOPE, Some(&id))?;
        let graph = state.graph(&id).await?;
        Ok(Access {
            id,
            graph,
            scope: PhantomData,
        })
    }
}

pub fn main_branch() -> String {
    MAIN_BRANCH.to_owned()
}

/// `fresh=true` from a query string. Query values are strings, and a flattened struct
/// (the endpoints' parameters embed [`AtParams`]) is handed them as such.
pub(crate) fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Flag {
        Bool(bool),
        Text(String),
    }
    match Flag::deserialize(deserializer)? {
        Flag::Bool(value) => Ok(value),
        Flag::Text(text) => match text.as_str() {
            "true" | "1" => Ok(true),
            "false" | "0" | "" => Ok(false),
            other => Err(serde::de::Error::custom(format!(
                "`{other}` is not true or false"
            ))),
        },
    }
}

/// Where a read starts (`commit` wins over `branch`) and whether it is fresh.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AtParams {
    /// Read at this branch's head (for a new branch: start from it).
    #[serde(default = "main_branch")]
    #[param(default = json!("main"))]
    pub branch: String,
    /// Read at this commit instead (wins over `branch`).
    pub commit: Option<String>,
    /// Also see durable, unfolded rows (flushed generations; the server's own memtables).
    #[serde(default, deserialize_with = "flag")]
    pub fresh: bool,
}

impl AtParams {
    pub fn at(&self) -> tributary::Result<At> {
        match &self.commit {
            Some(commit) => Ok(At::Commit(commit.as_str().into())),
            None => At::branch(&self.branch),
        }
    }

    pub fn view(&self) -> tributary::Result<View> {
        Ok(View {
            at: self.at()?,
            fresh: self.fresh,
        })
    }
}

/// The branch a write or a status names, and a fold's `halt`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BranchParams {
    #[serde(default = "main_branch")]
    #[param(default = json!("main"))]
    pub branch: String,
    /// A fold only: refuse on the first row that breaks a constraint (the fold halts and
    /// `ingest/status` says why) instead of turning it into a dead letter.
    #[serde(default, deserialize_with = "flag")]
    pub halt: bool,
}
