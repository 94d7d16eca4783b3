//! `GET /graphs/{id}/changes`: the change feed as an NDJSON stream, commit by commit after
//! the one the consumer names; with `follow=true` it stays open, sends commits as they are
//! published and a heartbeat while none is.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::Response;
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use tributary::{At, ChangeRecord, ChangesQuery};

use crate::access::{main_branch, Reading};
use crate::error::ApiError;
use crate::extract::Query;
use crate::AppState;

/// How often a following stream looks for a new head.
const FOLLOW_POLL: Duration = Duration::from_millis(100);
/// Commits per page the stream asks the graph for.
const PAGE_COMMITS: usize = 256;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChangesParams {
    /// The branch whose commits to stream.
    #[serde(default = "main_branch")]
    #[param(default = json!("main"))]
    pub branch: String,
    /// The last commit the consumer processed (the stream starts after it), or `head`
    /// for the branch's head now.
    pub since: String,
    /// Only these types (comma-separated names).
    pub types: Option<String>,
    /// Keep the stream open: send commits as they are published, and a heartbeat after
    /// `heartbeat_secs` without one.
    #[serde(default, deserialize_with = "crate::access::flag")]
    pub follow: bool,
    /// End the stream after this many commits.
    pub limit: Option<usize>,
    /// While following, the longest quiet time before a heartbeat record (default 10).
    pub heartbeat_secs: Option<u64>,
    /// Answer one page and end: at most `limit` commits (default 256), and no commit begun
    /// past 50,000 rows (what a client paging through the feed asks for).
    #[serde(default, deserialize_with = "crate::access::flag")]
    pub page: bool,
}

/// The change feed: after `since`, each commit of `branch` in commit order as its records —
/// rows inserted and updated (`op` `insert`/`update`, with every column), keys deleted
/// (`delete`) — closed by a `commit` record naming it. A consumer that stores the last
/// `commit` it applied resumes exactly there.
///
/// An unknown commit, one not in the branch's history, or one whose table versions cleanup
/// removed (the message names the oldest commit to resume after) is refused before the
/// stream starts; a stream that cannot go on ends with an `error` record. With
/// `follow=true` the stream stays open until the client leaves or the server stops.
#[utoipa::path(get, path = "/graphs/{id}/changes", tag = "reads", operation_id = "changes",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root."), ChangesParams),
    responses((status = 200, description = "NDJSON change records, one per line.", body = ChangeRecord, content_type = "application/x-ndjson")))]
pub async fn changes(
    State(state): State<Arc<AppState>>,
    Reading { graph, .. }: Reading,
    Query(params): Query<ChangesParams>,
) -> Result<Response, ApiError> {
    let since = match params.since.as_str() {
        "head" => graph
            .snapshot(&At::branch(&params.branch)?)
            .await?
            .id
            .to_string(),
        since => since.to_owned(),
    };
    let mut query = ChangesQuery {
        branch: params.branch.clone(),
        since,
        types: params
            .types
            .as_deref()
            .map(|types| {
                types
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        max_commits: page_size(params.limit),
    };
    // The first page before the answer starts: a wrong or cleaned commit is an error
    // status with a body, not a stream cut short.
    let first = graph.changes(&query).await?;
    let (mut lines, body) = mpsc::channel::<Bytes>(8);
    let mut stopping = state.stopping.subscribe();
    tokio::spawn(async move {
        let mut left = params.limit;
        let mut page = first;
        let heartbeat = Duration::from_secs(params.heartbeat_secs.unwrap_or(10).max(1));
        let mut quiet_since = Instant::now();
        loop {
            let commits = page.iter().filter(|r| r.closes().is_some()).count();
            if let Some(last) = page.iter().rev().find_map(ChangeRecord::closes) {
                query.since = last.to_string();
            }
            if !page.is_empty() {
                quiet_since = Instant::now();
                if send(&mut lines, &page).await.is_err() {
                    return;
                }
            }
            if let Some(left) = left.as_mut() {
                *left = left.saturating_sub(commits);
                if *left == 0 {
                    return;
                }
            }
            if params.page {
                return;
            }
            if commits == 0 {
                if !params.follow {
                    return;
                }
                if quiet_since.elapsed() >= heartbeat {
                    quiet_since = Instant::now();
                    let beat = [tributary::heartbeat(&query.since.as_str().into())];
                    if send(&mut lines, &beat).await.is_err() {
                        return;
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(FOLLOW_POLL) => {}
                    _ = stopping.wait_for(|stopping| *stopping) => return,
                }
            }
            query.max_commits = page_size(left);
            page = match graph.changes(&query).await {
                Ok(page) => page,
                Err(error) => {
                    // The status is sent: the stream's last record says why it ends.
                    tracing::warn!(%error, since = %query.since, "change feed stream ended");
                    let stopped = [ChangeRecord::Error(tributary::StreamError {
                        kind: error.kind().name().to_owned(),
                        error: error.user_message(),
                    })];
                    let _ = send(&mut lines, &stopped).await;
                    return;
                }
            };
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(Body::from_stream(
            body.map(Ok::<_, std::convert::Infallible>),
        ))
        .map_err(|e| ApiError::internal(e.to_string()))
}

fn page_size(left: Option<usize>) -> usize {
    left.unwrap_or(PAGE_COMMITS).clamp(1, PAGE_COMMITS)
}

async fn send(lines: &mut mpsc::Sender<Bytes>, records: &[ChangeRecord]) -> Result<(), ()> {
    let mut text = Vec::new();
    for record in records {
        // Serializing our own records cannot fail: every field is a string, a number or
        // a JSON value already.
        serde_json::to_writer(&mut text, record).map_err(|_| ())?;
        text.push(b'\n');
    }
    lines.send(Bytes::from(text)).await.map_err(|_| ())
}
