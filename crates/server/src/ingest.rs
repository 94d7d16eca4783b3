//! `POST /graphs/{id}/ingest`: a streamed NDJSON body in, a stream of acknowledgement
//! records out while the body is still arriving, then a summary.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use futures::channel::{mpsc, oneshot};
use futures::{FutureExt, SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use tributary::{ErrorKind, Graph, IngestAck, IngestOptions, StreamLine, MAIN_BRANCH};

use crate::access::Writing;
use crate::admission::Work;
use crate::error::{ApiError, ErrorBody, LineRecord};
use crate::extract::Query;
use crate::lines::{LineSplitter, Piece};
use crate::AppState;

/// How the message of a stream ended by the idle timeout begins: a client resumes such a
/// stream without counting it against the server.
pub const IDLE_STREAM_ENDED: &str = "the stream sent no whole line for";

/// One acknowledgement: every line up to `through_line` is durable or rejected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Ack)]
pub struct AckRecord {
    /// Rows acknowledged so far in this request.
    pub acked: u64,
    pub through_line: u64,
    /// Rows this acknowledgement made durable.
    pub rows: u64,
    pub rejected: Vec<LineRecord>,
    /// Lines of this acknowledgement at or below the producer's mark: acknowledged
    /// before, not written again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duplicates: u64,
    /// A strict stream stopped at this line: it is not settled (sent again, fixed or not,
    /// it is read again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<u64>,
}

/// A summary's rate in rows per second: whole from 100 up, else three significant digits
/// (2 rows in 9 s is 0.222, not 0).
pub fn rows_per_s(rows: u64, seconds: f64) -> f64 {
    let rate = rows as f64 / seconds.max(1e-9);
    if rate == 0.0 || rate >= 100.0 {
        return rate.round();
    }
    let scale = 10f64.powi(2 - rate.log10().floor() as i32);
    (rate * scale).round() / scale
}

/// A summary's duration: seconds to the millisecond.
pub fn to_the_millisecond(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A line of an ingest stream's answer: acknowledgements, then one summary.
#[derive(utoipa::ToSchema)]
#[serde(untagged)]
#[expect(
    dead_code,
    reason = "describes the answer's lines; each is written as its own type"
)]
pub enum IngestRecord {
    Ack(AckRecord),
    Summary(IngestSummary),
}

/// The last record of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IngestSummary {
    pub summary: bool,
    pub acked: u64,
    pub rejected: u64,
    pub through_line: u64,
    /// Lines at or below the producer's mark, acknowledged without being written.
    #[serde(default)]
    pub duplicates: u64,
    /// The folds of this stream's rows, as `tributary ingest` names its own: always null
    /// here, since the server folds in its background folder, not per request (and so
    /// `rows_folded`).
    #[serde(default)]
    pub fold_commits: Option<Vec<String>>,
    #[serde(default)]
    pub rows_folded: Option<u64>,
    pub seconds: f64,
    pub rows_per_s: f64,
    /// Why the stream ended early (`--strict`'s first bad line, or a failed send).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct IngestParams {
    #[serde(default = "main_branch")]
    #[param(default = json!("main"))]
    pub branch: String,
    /// Stop at the first bad line (its record carries `stopped_at`) instead of rejecting
    /// it and going on.
    #[serde(default)]
    pub strict: bool,
    /// A producer id (1-64 printable ASCII characters), for exactly-once delivery: the
    /// stream's lines get sequence numbers (`sequence` for the first line, then one more
    /// per line), and a line at or below what is already acknowledged for this producer on
    /// the branch is acknowledged as a duplicate and not written again. The mark is raised
    /// once a send's lines are durable, before its record goes out, and holds across
    /// restarts and processes. One stream per producer at a time: another one waits up to
    /// 5 s, then gets 503 with `Retry-After`. Resume a broken stream from the line after
    /// the last acknowledged one, with `sequence` set to that line's number.
    pub producer: Option<String>,
    /// The sequence number of the stream's first line (needs `producer`; default 1).
    /// Sequences may skip numbers; they must rise.
    pub sequence: Option<u64>,
}

fn main_branch() -> String {
    MAIN_BRANCH.to_owned()
}

/// Resolves once the server is stopping (never, if it cannot tell).
async fn stopped(stopping: &mut tokio::sync::watch::Receiver<bool>) {
    if stopping.wait_for(|stopping| *stopping).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// What a stream holds while it runs: its place among the graph's streams, and its
/// share of the server's shutdown (which waits for every stream to end).
pub(crate) struct Held {
    pub(crate) _place: tokio::sync::OwnedSemaphorePermit,
    pub(crate) _running: tokio::sync::OwnedRwLockReadGuard<()>,
}

/// The most body bytes gathered into one send.
const MAX_SEND_BYTES: usize = 8 << 20;

/// How long a send waits out back-pressure, in total, once the stream has started.
const BACKPRESSURE_PATIENCE: Duration = Duration::from_secs(30);

/// Stream NDJSON: acknowledgement records stream back while the body arrives, then a
/// summary.
///
/// Valid rows are acknowledged once durable in the table's MemWAL (a fsynced WAL append),
/// not yet visible: a fold publishes them. Every line up to a record's `through_line` is
/// durable or rejected, so a client resumes after it. Types must be declared `@stream`.
#[utoipa::path(post, path = "/graphs/{id}/ingest", tag = "ingest",
    params(("id" = String, Path, description = "Graph id: its folder name under the server root."), IngestParams),
    request_body(content = String, content_type = "application/x-ndjson", description = "One line per row, patch or delete, as for a load. A patch is laid over the row a fresh read sees when it is acknowledged; a patch of a key that does not exist is a rejected line. A delete is acknowledged once its tombstone is durable; between a row and a delete of one key the later acknowledged wins at the fold, and a deleted node's edges are deleted in the fold's commit. Fresh reads hide a deleted key at once."),
    responses((status = 200, description = "NDJSON: `Ack` records as sends become durable, then one `IngestSummary` (`\"summary\": true`).",
        body = IngestRecord, content_type = "application/x-ndjson"),
        (status = 415, description = "The body is not sent as `Content-Type: application/x-ndjson`.",
        body = crate::ErrorBody, content_type = "application/json")))]
pub async fn ingest(
    State(state): State<Arc<AppState>>,
    Writing { id, graph, .. }: Writing,
    Query(params): Query<IngestParams>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let ndjson = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-ndjson"));
    if !ndjson {
        return Err(ApiError::with_status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorKind::InvalidInput,
            "ingest takes Content-Type: application/x-ndjson",
        ));
    }
    let options = IngestOptions {
        branch: tributary::branch(&params.branch)?,
        strict: params.strict,
        producer: tributary::Producer::from_parts(params.producer, params.sequence)?,
    };
    graph.ingestor(&options)?;
    let held = Held {
        _place: state.admission.admit(&id, Work::IngestStream)?,
        _running: state.sessions.clone().read_owned().await,
    };
    state.ensure_folder(&id, &graph, &options.branch).await;
    let (records, stream) = mpsc::channel::<Bytes>(16);
    let (started, first) = oneshot::channel();
    tokio::spawn(run(
        state.clone(),
        held,
        graph,
        options,
        body,
        records,
        started,
    ));
    if let Ok(Err(error)) = first.await {
        return Err(error);
    }
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(Body::from_stream(
            stream.map(Ok::<_, std::convert::Infallible>),
        ))
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// Why the stream stopped before the body ended.
enum Stop {
    /// The client went away: nothing more can be acknowledged.
    Disconnected,
    Failed(ErrorBody),
}

struct Session {
    state: Arc<AppState>,
    graph: Arc<Graph>,
    options: IngestOptions,
    records: mpsc::Sender<Bytes>,
    started: Option<oneshot::Sender<Result<(), ApiError>>>,
    acked: u64,
    rejected: u64,
    through_line: u64,
    duplicates: u64,
}

/// The stream, to its end whether or not its client stays; it holds its place among the
/// graph's streams (`admitted`) as long.
async fn run(
    state: Arc<AppState>,
    held: Held,
    graph: Arc<Graph>,
    options: IngestOptions,
    body: Body,
    records: mpsc::Sender<Bytes>,
    started: oneshot::Sender<Result<(), ApiError>>,
) {
    let _held = held;
    let limits = state.config.limits;
    let begun = Instant::now();
    let mut session = Session {
        state,
        graph,
        options,
        records,
        started: Some(started),
        acked: 0,
        rejected: 0,
        through_line: 0,
        duplicates: 0,
    };
    let mut splitter = LineSplitter::new(limits.max_line_bytes);
    let mut body = body.into_data_stream();
    // The end or the break of the body, met while gathering chunks: handled next turn.
    let mut lookahead = None;
    // A stream must bring a whole line within the idle timeout (a byte now and then does
    // not count): one that does not holds a stream place and a connection for nothing.
    let mut line_due = tokio::time::Instant::now() + limits.ingest_idle_timeout;
    let mut stopping = session.state.stopping.subscribe();
    let stop = loop {
        let next = match lookahead.take() {
            Some(next) => next,
            None => tokio::select! {
                next = tokio::time::timeout_at(line_due, body.next()) => match next {
                    Ok(next) => next,
                    // What it sent before is acknowledged; its partial last line is not.
                    Err(_) => break Some(Stop::Failed(ErrorBody {
                        kind: ErrorKind::Unavailable.name().into(),
                        error: format!(
                            "{IDLE_STREAM_ENDED} {} s and was ended (serve --ingest-idle-timeout); send the rest in a new stream",
                            limits.ingest_idle_timeout.as_secs_f64()
                        ),
                        lines: Vec::new(),
                        conflicts: Vec::new(),
                    })),
                },
                // The server is stopping: acknowledge nothing more, say so, and end.
                _ = stopped(&mut stopping) => break Some(Stop::Failed(ErrorBody {
                    kind: ErrorKind::Unavailable.name().into(),
                    error: "the server is stopping; send the rest again when it is back".into(),
                    lines: Vec::new(),
                    conflicts: Vec::new(),
                })),
            },
        };
        let mut pieces = match next {
            Some(Ok(chunk)) => splitter.push(&chunk),
            // A broken body (client gone): its partial last line is never sent.
            Some(Err(_)) => break Some(Stop::Disconnected),
            None => {
                let last = splitter.finish();
                match session
                    .send_pieces(last.into_iter().collect(), limits.batch_lines)
                    .await
                {
                    Ok(()) => break None,
                    Err(stop) => break Some(stop),
                }
            }
        };
        // Chunks that have arrived meanwhile join this send (one WAL append), up to a
        // batch of lines and bytes: how a client cuts its body does not decide how many
        // appends it costs.
        let mut gathered = 0;
        while pieces.len() < limits.batch_lines && gathered < MAX_SEND_BYTES {
            match body.next().now_or_never() {
                Some(Some(Ok(chunk))) => {
                    gathered += chunk.len();
                    pieces.extend(splitter.push(&chunk));
                }
                Some(ended) => {
                    lookahead = Some(ended);
                    break;
                }
                None => break,
            }
        }
        if !pieces.is_empty() {
            line_due = tokio::time::Instant::now() + limits.ingest_idle_timeout;
        }
        if let Err(stop) = session.send_pieces(pieces, limits.batch_lines).await {
            break Some(stop);
        }
    };
    let error = match stop {
        Some(Stop::Disconnected) => return,
        Some(Stop::Failed(error)) => Some(error),
        None => None,
    };
    session.start(Ok(()));
    let seconds = begun.elapsed().as_secs_f64();
    let summary = IngestSummary {
        summary: true,
        acked: session.acked,
        rejected: session.rejected,
        through_line: session.through_line,
        duplicates: session.duplicates,
        fold_commits: None,
        rows_folded: None,
        seconds: to_the_millisecond(seconds),
        rows_per_s: rows_per_s(session.acked, seconds),
        error,
    };
    session.emit(&summary).await;
}

impl Session {
    /// Release the response (headers) with `result`, once.
    fn start(&mut self, result: Result<(), ApiError>) {
        if let Some(started) = self.started.take() {
            let _ = started.send(result);
        }
    }

    /// Queue one record for the client; false when it is gone, or has not read its
    /// records for the idle timeout (it holds a stream place and a connection: let go).
    async fn emit<T: Serialize>(&mut self, record: &T) -> bool {
        let mut line = serde_json::to_vec(record).unwrap_or_default();
        line.push(b'\n');
        let patience = self.state.config.limits.ingest_idle_timeout;
        let sent = tokio::time::timeout(patience, self.records.send(Bytes::from(line))).await;
        matches!(sent, Ok(Ok(())))
    }

    async fn send_pieces(&mut self, pieces: Vec<Piece>, batch_lines: usize) -> Result<(), Stop> {
        for batch in pieces.chunks(batch_lines.max(1)) {
            self.send_batch(batch).await?;
        }
        Ok(())
    }

    async fn send_batch(&mut self, pieces: &[Piece]) -> Result<(), Stop> {
        let Some(first) = pieces.first() else {
            return Ok(());
        };
        let first_line = first.line();
        let too_long = format!(
            "the line exceeds the limit of {} bytes",
            self.state.config.limits.max_line_bytes
        );
        let lines: Vec<StreamLine<'_>> = pieces
            .iter()
            .map(|piece| match piece {
                Piece::Line { text, .. } => StreamLine::Text(text),
                Piece::TooLong { .. } => StreamLine::Unreadable(&too_long),
                Piece::NotUtf8 { .. } => StreamLine::Unreadable("the line is not UTF-8"),
            })
            .collect();
        let started = Instant::now();
        let ack = self.send_with_patience(first_line, &lines).await?;
        self.state.metrics.acknowledged(
            started.elapsed(),
            ack.durable_rows,
            ack.rejected.len() as u64,
        );
        self.record(&ack).await?;
        match ack.stopped_at {
            Some(bad) => Err(Stop::Failed(ErrorBody {
                kind: ErrorKind::InvalidInput.name().into(),
                error: format!("strict: stopped at {bad}"),
                lines: vec![LineRecord {
                    line: bad.line,
                    error: bad.to_string(),
                }],
                conflicts: Vec::new(),
            })),
            None => Ok(()),
        }
    }

    /// Send, waiting out back-pressure — except before the response started, where it
    /// becomes a 503 with `Retry-After`.
    async fn send_with_patience(
        &mut self,
        first_line: u64,
        lines: &[StreamLine<'_>],
    ) -> Result<IngestAck, Stop> {
        let graph = self.graph.clone();
        let ingestor = graph.ingestor(&self.options).map_err(failed)?;
        let deadline = Instant::now() + BACKPRESSURE_PATIENCE;
        let mut pause = Duration::from_millis(20);
        loop {
            match ingestor.send_lines(first_line, lines).await {
                Ok(ack) => return Ok(ack),
                Err(error) if error.kind() == ErrorKind::Unavailable => {
                    if self.started.is_some() || Instant::now() >= deadline {
                        let body = ApiError::from(error);
                        let record = body.body.clone();
                        self.start(Err(body));
                        return Err(Stop::Failed(record));
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                Err(error) => {
                    let body = ApiError::from(error);
                    let record = body.body.clone();
                    self.start(Err(body));
                    return Err(Stop::Failed(record));
                }
            }
        }
    }

    async fn record(&mut self, ack: &IngestAck) -> Result<(), Stop> {
        self.acked += ack.durable_rows;
        self.rejected += ack.rejected.len() as u64;
        self.through_line = ack.through_line;
        self.duplicates += ack.duplicates;
        let record = AckRecord {
            acked: self.acked,
            through_line: ack.through_line,
            rows: ack.durable_rows,
            duplicates: ack.duplicates,
            stopped_at: ack.stopped_at.as_ref().map(|bad| bad.line),
            rejected: ack
                .rejected
                .iter()
                .map(|r| LineRecord {
                    line: r.line,
                    error: r.to_string(),
                })
                .collect(),
        };
        self.start(Ok(()));
        if self.emit(&record).await {
            Ok(())
        } else {
            Err(Stop::Disconnected)
        }
    }
}

fn failed(error: tributary::Error) -> Stop {
    Stop::Failed(ErrorBody {
        kind: error.kind().name().to_owned(),
        error: error.user_message(),
        lines: Vec::new(),
        conflicts: Vec::new(),
    })
}
