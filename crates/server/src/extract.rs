//! axum's extractors, answering as every other error does: a query string or a path that
//! does not parse is a JSON `invalid_input` error, never axum's plain-text rejection; a
//! body is read up to its route's bound, and a client that goes away mid-body is not told
//! its body was too large.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use futures::StreamExt;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The query string, parsed into `T`.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| Query(value))
            .map_err(|rejection| {
                ApiError::invalid(format!("bad query string: {}", rejection.body_text()))
            })
    }
}

/// The path's parameters, parsed into `T`.
pub struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Path(value))
            .map_err(|rejection| ApiError::invalid(format!("bad path: {}", rejection.body_text())))
    }
}

/// The whole body, refused with 413 as soon as it passes `limit` bytes (the rest is never
/// read). A body that breaks off (its client went away) is `invalid_input`, and so is one
/// that takes longer than `within` (a slow client holds a load place and a connection).
pub async fn read_body(body: Body, limit: usize, within: Duration) -> Result<Bytes, ApiError> {
    tokio::time::timeout(within, read_all(body, limit))
        .await
        .unwrap_or_else(|_| {
            Err(ApiError::invalid(format!(
                "the body took over {} s to arrive (serve --body-timeout)",
                within.as_secs_f64()
            )))
        })
}

async fn read_all(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::invalid(format!("the body broke off: {e}")))?;
        if bytes.len() + chunk.len() > limit {
            return Err(ApiError::too_large(limit));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(bytes))
}
