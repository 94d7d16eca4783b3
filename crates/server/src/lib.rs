//! The HTTP API over the engine (axum): every graph under one root directory, addressed
//! by its folder name. Every endpoint is registered with its OpenAPI description
//! ([`openapi`]), served at `GET /openapi.json`.

// A send's future nests the engine's (settling, a fresh read, the puts) inside the
// server's: proving it `Send` walks deeper than the default limit of 128.
#![recursion_limit = "256"]

mod access;
mod admission;
mod auth;
mod branches;
mod changes;
mod connection;
mod embedder;
mod error;
mod export;
mod extract;
mod ingest;
mod lines;
mod metrics;
pub mod openapi;
mod query;
mod routes;
mod snapshots;
mod tls;

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use tokio::sync::{Mutex, OnceCell};
use tributary::Graph;

pub use auth::{Scope, Tokens};
pub use error::{ApiError, ErrorBody, LineRecord, NO_ROW, RETRY_AFTER_S};
pub use ingest::{rows_per_s, to_the_millisecond, AckRecord, IngestSummary, IDLE_STREAM_ENDED};
pub use routes::ARROW_STREAM;
pub use tls::Tls;

/// Size bounds on what clients send.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A load's whole body.
    pub max_body_bytes: usize,
    /// One NDJSON line of an ingest stream; a longer line is rejected, not the stream.
    pub max_line_bytes: usize,
    /// Lines per ingest send (what has arrived is sent at once, up to this many).
    pub batch_lines: usize,
    /// At shutdown, how long requests in flight may take to finish before the server
    /// flushes its writers and stops anyway.
    pub shutdown_grace: std::time::Duration,
    /// Loads of one graph running at once; beyond, 503 with `Retry-After`.
    pub max_loads: usize,
    /// Ingest streams of one graph open at once; beyond, 503 with `Retry-After`.
    pub max_ingest_streams: usize,
    /// Connections open at once; beyond, a new one is answered 503 and closed.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers.
    pub header_read_timeout: std::time::Duration,
    /// How long an ingest stream may send no whole line before the server ends it.
    pub ingest_idle_timeout: std::time::Duration,
    /// How long a load's (or a schema's) whole body may take to arrive.
    pub body_timeout: std::time::Duration,
    /// How long a query may run before it is stopped (and answered 400: it would run as
    /// long again).
    pub query_timeout: std::time::Duration,
    /// The most rows a query answers; more is an error that says to add LIMIT.
    pub max_query_rows: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 64 << 20,
            max_line_bytes: 1 << 20,
            batch_lines: 10_000,
            shutdown_grace: std::time::Duration::from_secs(10),
            max_loads: 16,
            max_ingest_streams: 64,
            // Below the usual 1,024 open files a process may have: Lance needs some too.
            max_connections: 512,
            header_read_timeout: std::time::Duration::from_secs(10),
            ingest_idle_timeout: std::time::Duration::from_secs(60),
            body_timeout: std::time::Duration::from_secs(60),
            query_timeout: std::time::Duration::from_secs(60),
            max_query_rows: 1_000_000,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Every graph is a folder directly under this directory (or `s3://` prefix).
    pub root: String,
    /// How the graphs' store is reached (S3 settings).
    pub store: tributary::StoreOptions,
    /// Settings of every graph it opens (the shards it owns, say).
    pub graph_settings: tributary::GraphSettings,
    /// `None`: no authentication (for loopback use).
    pub tokens: Option<Tokens>,
    /// Allow `POST /graphs/{id}` to create graphs.
    pub allow_init: bool,
    pub limits: Limits,
    /// Serve HTTPS with this certificate; `None`: plain HTTP.
    pub tls: Option<Tls>,
}

pub struct AppState {
    config: ServerConfig,
    /// Each graph opens once, at its first use; its cell is taken under the map's lock,
    /// and filled outside it, so opening (or creating) one graph never holds up another.
    graphs: Mutex<HashMap<String, Arc<OnceCell<Arc<Graph>>>>>,
    metrics: metrics::Metrics,
    admission: admission::Admission,
    /// True once the server stops: ingest streams end with a record saying so.
    stopping: tokio::sync::watch::Sender<bool>,
    /// Each ingest stream holds a read guard; shutdown takes the write lock to know
    /// every stream has ended before it flushes the writers.
    sessions: Arc<tokio::sync::RwLock<()>>,
}

impl AppState {
    pub fn new(config: ServerConfig) -> Arc<AppState> {
        Arc::new(AppState {
            admission: admission::Admission::new(config.limits),
            config,
            graphs: Mutex::new(HashMap::new()),
            metrics: metrics::Metrics::default(),
            stopping: tokio::sync::watch::Sender::new(false),
            sessions: Arc::default(),
        })
    }

    fn authorize(
        &self,
        headers: &HeaderMap,
        scope: Scope,
        graph: Option<&str>,
    ) -> Result<(), ApiError> {
        let Some(tokens) = &self.config.tokens else {
            return Ok(());
        };
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token);
        tokens.check(token, scope, graph)
    }

    fn path_of(&self, id: &str) -> Result<String, ApiError> {
        let valid = !id.is_empty()
            && id.len() <= 128
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            && !id.starts_with('.');
        if !valid {
            return Err(ApiError::invalid(format!(
                "`{id}` is not a graph id (letters, digits, `-`, `_`, `.`; not starting with `.`)"
            )));
        }
        Ok(format!("{}/{id}", self.config.root))
    }

    /// How to open or create graph `id`, once its id is checked.
    fn builder(&self, path: &str) -> tributary::GraphBuilder {
        Graph::builder(path)
            .store_options(self.config.store.clone())
            .settings(self.config.graph_settings.clone())
    }

    /// The open graph `id`, opened at its first use.
    async fn graph(&self, id: &str) -> Result<Arc<Graph>, ApiError> {
        let path = self.path_of(id)?;
        let cell = self.graphs.lock().await.get(id).cloned();
        if let Some(graph) = cell.as_ref().and_then(|cell| cell.get()) {
            return Ok(graph.clone());
        }
        if !self.builder(&path).exists().await? {
            return Err(ApiError::not_found(format!("no graph `{id}`")));
        }
        let cell = self.cell(id).await;
        let graph = cell
            .get_or_try_init(|| async { self.builder(&path).open().await.map(Arc::new) })
            .await?;
        Ok(graph.clone())
    }

    /// The cell of graph `id` (made empty if there is none yet).
    async fn cell(&self, id: &str) -> Arc<OnceCell<Arc<Graph>>> {
        self.graphs
            .lock()
            .await
            .entry(id.to_owned())
            .or_default()
            .clone()
    }

    async fn create_graph(
        &self,
        id: &str,
        schema: &str,
        publisher: Option<tributary::PublisherKind>,
    ) -> Result<Arc<Graph>, ApiError> {
        let path = self.path_of(id)?;
        let exists = || ApiError::invalid(format!("graph `{id}` already exists"));
        if self.builder(&path).exists().await? {
            return Err(exists());
        }
        let cell = self.cell(id).await;
        let mut created = false;
        let graph = cell
            .get_or_try_init(|| async {
                created = true;
                let builder = match publisher {
                    Some(kind) => self.builder(&path).publisher(kind),
                    None => self.builder(&path),
                };
                builder.init(schema).await.map(Arc::new)
            })
            .await;
        let graph = match graph {
            Ok(graph) => graph,
            Err(error) => {
                // A refused schema leaves no entry behind (the map must not grow with
                // every id a client tries).
                let mut graphs = self.graphs.lock().await;
                if graphs.get(id).is_some_and(|c| c.get().is_none()) {
                    graphs.remove(id);
                }
                return Err(error.into());
            }
        };
        if !created {
            return Err(exists());
        }
        Ok(graph.clone())
    }

    /// Every graph opened so far.
    async fn open_graphs(&self) -> Vec<(String, Arc<Graph>)> {
        self.graphs
            .lock()
            .await
            .iter()
            .filter_map(|(id, cell)| Some((id.clone(), cell.get()?.clone())))
            .collect()
    }

    /// Folds publish what ingests acknowledge: each ingest stream has the graph's
    /// background folder fold its branch (started at the graph's first stream; a branch
    /// deleted meanwhile left it, and one made again under the name is taken again here).
    async fn ensure_folder(&self, id: &str, graph: &Arc<Graph>, branch: &str) {
        if let Err(error) = graph.start_folder(branch).await {
            tracing::warn!(%error, graph = id, "could not start the background folder");
        }
    }

    async fn render_metrics(&self) -> String {
        let graphs = self.open_graphs().await;
        let mut gauges = Vec::new();
        for (id, graph) in graphs {
            let Ok(pending) = graph.pending().await else {
                continue;
            };
            gauges.push(metrics::GraphGauges {
                graph: id,
                pending_rows: pending.rows,
                pending_bytes: pending.bytes,
                fold_lag: pending.oldest_age,
            });
        }
        self.metrics.render(&gauges)
    }

    /// Stop the background folders and flush every writer (on shutdown).
    pub async fn close(&self) {
        for (_, graph) in self.open_graphs().await {
            graph.stop_folder().await;
            if let Err(error) = graph.close().await {
                tracing::warn!(%error, "could not close a graph cleanly");
            }
        }
    }
}

/// The router over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    openapi::routes()
        .0
        .fallback(not_found)
        // The load body bound is enforced (with a 413 naming it) by the load handler.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint (see GET /openapi.json)")
}

/// Count each answer's status for the metrics and log one access line per request at
/// info (`TRIBUTARY_LOG=info`): method, path (the query is left out: filters can hold
/// data), status, milliseconds to the answer's head, and which token it was as the line of
/// the tokens file that grants it (never the token, nor anything derived from it).
async fn observe(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    // The access line's parts are gathered only when it is written.
    let logging = tracing::enabled!(target: "tributary::access", tracing::Level::INFO);
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let token = logging
        .then(|| {
            let token = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(bearer_token)?;
            Some(
                match state.config.tokens.as_ref().and_then(|t| t.line_of(token)) {
                    Some(line) => format!("line {line}"),
                    None => "unknown".to_owned(),
                },
            )
        })
        .flatten();
    let response = next.run(request).await;
    state.metrics.responded(response.status().as_u16());
    tracing::info!(
        target: "tributary::access",
        %method,
        path,
        status = response.status().as_u16(),
        ms = (started.elapsed().as_secs_f64() * 1e4).round() / 10.0,
        token = token.as_deref().unwrap_or("-"),
        "request"
    );
    if response.status() == StatusCode::METHOD_NOT_ALLOWED {
        return axum::response::IntoResponse::into_response(ApiError::with_status(
            StatusCode::METHOD_NOT_ALLOWED,
            tributary::ErrorKind::InvalidInput,
            "method not allowed on this endpoint (see GET /openapi.json)",
        ));
    }
    response
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme's case does not
/// matter, as for every HTTP authentication scheme).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start())
}

/// Serve until `shutdown` resolves; then stop accepting, give requests in flight up to
/// `Limits::shutdown_grace` to finish, stop the folders and flush every writer, so what
/// was acknowledged is in generations (any process's next fold publishes it).
///
/// Each connection must send its headers within `Limits::header_read_timeout`; at most
/// `Limits::max_connections` are open at once, and one over it is answered 503 and closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(state.clone());
    let limits = state.config.limits;
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, root = %state.config.root, "serving");
    }
    let open = Arc::new(tokio::sync::Semaphore::new(admission::bounded(
        limits.max_connections,
    )));
    let (stopping, stop) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of file descriptors, say: wait a moment rather than spin.
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        while connections.try_join_next().is_some() {}
        let Ok(permit) = open.clone().try_acquire_owned() else {
            state.metrics.responded(503);
            if state.config.tls.is_none() {
                connections.spawn(connection::refuse(stream));
            }
            continue;
        };
        let (app, timeout, stop) = (app.clone(), limits.header_read_timeout, stop.clone());
        match &state.config.tls {
            Some(tls) => connections.spawn(connection::serve_tls(
                tls.clone(),
                stream,
                app,
                timeout,
                stop,
                permit,
            )),
            None => connections.spawn(connection::serve(stream, app, timeout, stop, permit)),
        };
    }
    tracing::info!(grace = ?limits.shutdown_grace, "stopping: requests in flight may finish");
    let _ = stopping.send(true);
    state.stopping.send_replace(true);
    let grace = limits.shutdown_grace;
    let drained = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
        // Streams run in tasks of their own: no send may be in flight at the flush.
        let _ended = state.sessions.write().await;
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            ?grace,
            "requests still in flight after the shutdown grace; stopping anyway"
        );
        connections.abort_all();
    }
    state.close().await;
    tracing::info!("stopped: every writer flushed");
    Ok(())
}
