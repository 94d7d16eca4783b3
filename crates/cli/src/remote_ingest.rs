//! `ingest --server`: stream the lines to a server, print its acknowledgement records as
//! they arrive, and carry on across the server's refusals and restarts.
//!
//! The server acknowledges a stream's lines in order (`through_line`). When a stream ends
//! before the input does — refused at the start, back-pressure or a stopping server after
//! acknowledgements went out (a final record of kind `unavailable`), or a connection that
//! broke — the lines after the last acknowledged one go first in a new stream, after a
//! pause, for up to [`PATIENCE`]. Records keep numbering the input's lines from its
//! start. A line the server took but could not acknowledge may be sent twice; a write is
//! an upsert by key, so the graph ends the same.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::ingest::{spawn_reader, IngestRun, LineSource};
use crate::output::Format;
use crate::remote::Remote;
use crate::Failure;

/// How long `ingest --server` keeps waiting for a server that refused or ended a stream.
pub(crate) const PATIENCE: Duration = Duration::from_secs(300);

/// How often a server that stays unavailable is told of again.
const SAY_AGAIN: Duration = Duration::from_secs(30);

/// The input's lines, re-sendable until the server acknowledges them.
///
/// The source is locked only by the body that reads it, the bookkeeping only briefly.
/// Each stream is an attempt; a body of an attempt that has ended hands back what it read
/// (to go first in the next attempt) instead of sending it.
#[derive(Clone)]
struct Replay {
    source: Arc<tokio::sync::Mutex<LineSource>>,
    book: Arc<std::sync::Mutex<Book>>,
}

#[derive(Default)]
struct Book {
    attempt: u64,
    /// Lines to send before reading more from the source, oldest first.
    resend: VecDeque<Vec<u8>>,
    /// Lines this attempt sent and the server has not acknowledged, oldest first.
    unsettled: VecDeque<Vec<u8>>,
    /// Lines of this attempt acknowledged (or rejected) so far.
    settled: u64,
    /// The input could not be read.
    unreadable: Option<Failure>,
}

fn chunk_of(lines: &[Vec<u8>]) -> Vec<u8> {
    let mut chunk = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        chunk.extend_from_slice(line);
        chunk.push(b'\n');
    }
    chunk
}

impl Replay {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start an attempt: what the last one did not settle goes first.
    fn begin(&self) -> u64 {
        let mut book = self.book();
        let unsettled = std::mem::take(&mut book.unsettled);
        for line in unsettled.into_iter().rev() {
            book.resend.push_front(line);
        }
        book.settled = 0;
        book.attempt += 1;
        book.attempt
    }

    /// Up to `max` lines to send again, as `attempt`'s next chunk; `None` when there are
    /// none, `Some(None)` when `attempt` has ended (its body must end).
    fn take_resend(&self, attempt: u64, max: usize) -> Option<Option<Vec<u8>>> {
        let mut book = self.book();
        if book.attempt != attempt {
            return Some(None);
        }
        if book.resend.is_empty() {
            return None;
        }
        let n = book.resend.len().min(max);
        let lines: Vec<Vec<u8>> = book.resend.drain(..n).collect();
        let chunk = chunk_of(&lines);
        book.unsettled.extend(lines);
        Some(Some(chunk))
    }

    /// The next chunk of `attempt`'s body: lines to send again first, then whatever the
    /// source has read (at least one line), up to `max` lines. `None` ends the body.
    ///
    /// Lines move from the source to the book with the source locked throughout, and
    /// only the current attempt takes lines to send again, so no line overtakes another:
    /// a body of an ended attempt that was waiting on the source hands what it read back
    /// behind everything read before it.
    async fn next_chunk(
        &self,
        attempt: u64,
        max: usize,
    ) -> Option<Result<Vec<u8>, std::io::Error>> {
        if let Some(resent) = self.take_resend(attempt, max) {
            return resent.map(Ok);
        }
        let mut source = self.source.lock().await;
        if let Some(resent) = self.take_resend(attempt, max) {
            return resent.map(Ok);
        }
        let lines = match source.next_batch(max).await? {
            Ok(batch) => batch,
            Err(failure) => {
                let message = failure.message.clone();
                self.book().unreadable = Some(failure);
                return Some(Err(std::io::Error::other(message)));
            }
        };
        let mut book = self.book();
        if book.attempt != attempt {
            book.resend.extend(lines);
            return None;
        }
        let chunk = chunk_of(&lines);
        book.unsettled.extend(lines);
        Some(Ok(chunk))
    }

    /// Every line read so far is settled: none waits to be sent again, none unanswered.
    fn nothing_pending(&self) -> bool {
        let book = self.book();
        book.unsettled.is_empty() && book.resend.is_empty()
    }

    /// The input could not be read (the run fails with this, whatever the server says).
    fn unreadable(&self) -> Option<Failure> {
        self.book().unreadable.take()
    }

    /// The server settled every line of this attempt through `through_line`.
    fn settled(&self, through_line: u64) {
        let mut book = self.book();
        let n = through_line.saturating_sub(book.settled) as usize;
        let n = n.min(book.unsettled.len());
        book.unsettled.drain(..n);
        book.settled = book.settled.max(through_line);
    }
}

/// What earlier attempts settled, so records number the input's lines from its start.
#[derive(Default)]
struct Progress {
    lines: u64,
    acked: u64,
    rejected: u64,
    duplicates: u64,
}

/// How one attempt ended.
enum Ended {
    /// The server's summary of a stream it ran to the end (or ended for a reason a retry
    /// would not cure).
    Summary(Value),
    /// Worth another attempt: why, and what the attempt settled.
    Retry {
        why: String,
        /// The server ended the attempt with a summary (it is there).
        answered: bool,
        lines: u64,
        acked: u64,
        rejected: u64,
        duplicates: u64,
    },
}

/// `ingest --server`: stream the lines to the server and print its acknowledgement records
/// as they arrive (the same records an embedded run prints). The server folds in the
/// background; `--no-fold` is the server's to decide, and `--batch-lines` bounds the lines
/// of one chunk of the body.
pub async fn run(
    remote: &Remote,
    args: IngestRun,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let source = spawn_reader(&args.file)?;
    let summary = {
        let mut print = |record: Value| print_record(&record, format, &mut *out);
        stream_lines(remote, None, source, &args, &mut print).await?
    };
    report(&summary, format, out, "the server folds them")?;
    let count = |field: &str| summary[field].as_u64().unwrap_or(0);
    if args.fail_on_reject {
        // The server folds: its dead letters are not this run's to count.
        crate::ingest::refuse_rejects(count("rejected"), None)?;
    }
    if summary.get("error").is_none() {
        crate::ingest::nothing_written(count("acked"), count("rejected"), count("duplicates"))?;
    }
    Ok(())
}

/// Stream `source`'s lines to the server, resuming after its refusals and restarts: each
/// acknowledgement record goes to `on_record` as it arrives, and the summary of the whole
/// source is returned, both numbering lines from the source's first. `routed` names the
/// server when the source is its share of a routed input (whose line numbers are not the
/// source's, so messages say none).
pub(crate) async fn stream_lines(
    remote: &Remote,
    routed: Option<&str>,
    source: LineSource,
    args: &IngestRun,
    on_record: &mut dyn FnMut(Value) -> Result<(), Failure>,
) -> Result<Value, Failure> {
    let replay = Replay {
        source: Arc::new(tokio::sync::Mutex::new(source)),
        book: Arc::default(),
    };
    // The server makes one send (one WAL append) of each chunk it receives: a chunk holds
    // every line read by the time it goes out, up to `--batch-lines`, so a file streams
    // in large sends and a slow producer's line still goes at once. A read error ends the
    // body with an error: the server answers what it received and the run fails.
    let max_lines = args.batch_lines.max(1);
    let mut progress = Progress::default();
    let mut waited = Duration::ZERO;
    // When the last "unavailable" was said: a long outage is told every SAY_AGAIN.
    let mut said: Option<tokio::time::Instant> = None;
    loop {
        let attempt = replay.begin();
        let body = futures::stream::unfold(replay.clone(), move |replay| async move {
            let chunk = replay.next_chunk(attempt, max_lines).await?;
            Some((chunk, replay))
        });
        let mut query = vec![
            ("branch", args.branch.clone()),
            ("strict", args.strict.to_string()),
        ];
        if let Some(producer) = &args.producer {
            // This attempt's first line is the input's line `progress.lines + 1`.
            let first = args.sequence.unwrap_or(1).saturating_add(progress.lines);
            query.push(("producer", producer.clone()));
            query.push(("sequence", first.to_string()));
        }
        let request = remote
            .request(reqwest::Method::POST, "/ingest")
            .query(&query)
            .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
            .body(reqwest::Body::wrap_stream(body));
        let ended = match remote.send_http(request).await {
            Ok(response) => relay(response, &replay, &progress, on_record).await?,
            // Refused before the stream started (the graph's streams are all taken,
            // back-pressure, or no server there).
            Err(error) if error.kind() == tributary::ErrorKind::Unavailable => Ended::Retry {
                why: error.to_string(),
                answered: false,
                lines: 0,
                acked: 0,
                rejected: 0,
                duplicates: 0,
            },
            Err(error) => return Err(error.into()),
        };
        if let Some(failure) = replay.unreadable() {
            return Err(failure);
        }
        match ended {
            Ended::Summary(summary) => return Ok(whole_summary(summary, &progress)),
            Ended::Retry {
                why,
                answered,
                lines,
                acked,
                rejected,
                duplicates,
            } => {
                // A stream the server ended for its idle timeout while this side had sent
                // and settled everything it read (the input is quiet, or its lines go to
                // other servers) says nothing against the server; one that ended with
                // lines still unsettled (a line slower than the timeout) counts as usual.
                let idle = answered
                    && why.starts_with(tributary_server::IDLE_STREAM_ENDED)
                    && replay.nothing_pending();
                progress.lines += lines;
                progress.acked += acked;
                progress.rejected += rejected;
                progress.duplicates += duplicates;
                // Patience is for a server that makes no progress, not a lifetime total.
                if lines > 0 || idle {
                    waited = Duration::ZERO;
                }
                if waited >= PATIENCE {
                    return Err(Failure::unavailable(match routed {
                        None => format!(
                            "{why}; gave up after {} s with lines 1 to {} settled",
                            PATIENCE.as_secs(),
                            progress.lines
                        ),
                        Some(server) => {
                            format!("{why}; gave up on {server} after {} s", PATIENCE.as_secs())
                        }
                    }));
                }
                let pause = Duration::from_secs(tributary_server::RETRY_AFTER_S)
                    .max(Duration::from_millis(250));
                let now = tokio::time::Instant::now();
                if !idle && said.is_none_or(|at| now - at >= SAY_AGAIN) {
                    said = Some(now);
                    match routed {
                        None => eprintln!(
                            "the server is unavailable ({why}); sending again from line {} in \
                             {pause:?} (for up to {} s)",
                            progress.lines + 1,
                            PATIENCE.as_secs()
                        ),
                        Some(server) => eprintln!(
                            "the server {server} is unavailable ({why}); sending it again what \
                             it has not acknowledged in {pause:?} (for up to {} s)",
                            PATIENCE.as_secs()
                        ),
                    }
                }
                if lines > 0 {
                    said = None;
                }
                tokio::time::sleep(pause).await;
                waited += pause;
            }
        }
    }
}

/// Print the records of one attempt's response as they arrive, renumbered to the input's
/// lines, and say how the attempt ended.
async fn relay(
    response: reqwest::Response,
    replay: &Replay,
    progress: &Progress,
    on_record: &mut dyn FnMut(Value) -> Result<(), Failure>,
) -> Result<Ended, Failure> {
    let mut stream = response.bytes_stream();
    let mut buffer = Vec::new();
    let (mut lines, mut acked, mut rejected, mut duplicates) = (0, 0, 0, 0);
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(error) => {
                return Ok(Ended::Retry {
                    why: format!("the server stream broke: {error}"),
                    answered: false,
                    lines,
                    acked,
                    rejected,
                    duplicates,
                })
            }
        };
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let mut record: Value = serde_json::from_slice(&line).map_err(|e| {
                Failure::internal(format!("unreadable record from the server: {e}"))
            })?;
            let through = record["through_line"].as_u64().unwrap_or(0);
            if record.get("summary").is_some() {
                let resumable = record["error"]["kind"].as_str()
                    == Some(tributary::ErrorKind::Unavailable.name());
                return Ok(if resumable {
                    replay.settled(through);
                    Ended::Retry {
                        answered: true,
                        why: record["error"]["error"]
                            .as_str()
                            .unwrap_or("unavailable")
                            .to_owned(),
                        lines: through,
                        acked: record["acked"].as_u64().unwrap_or(acked),
                        rejected: record["rejected"].as_u64().unwrap_or(rejected),
                        duplicates: record["duplicates"].as_u64().unwrap_or(duplicates),
                    }
                } else {
                    Ended::Summary(record)
                });
            }
            // A strict stop's line is not settled: a resumed stream starts with it.
            let settled = record["stopped_at"]
                .as_u64()
                .map_or(through, |bad| bad.saturating_sub(1));
            replay.settled(settled);
            lines = settled;
            acked = record["acked"].as_u64().unwrap_or(acked);
            let rejects = record["rejected"].as_array().cloned().unwrap_or_default();
            rejected += rejects.len() as u64;
            duplicates += record["duplicates"].as_u64().unwrap_or(0);
            renumber(&mut record, progress);
            on_record(record)?;
        }
    }
    Ok(Ended::Retry {
        why: "the server ended the stream without a summary".into(),
        answered: false,
        lines,
        acked,
        rejected,
        duplicates,
    })
}

/// Line numbers and counts of a record of a later attempt, from the input's start.
fn renumber(record: &mut Value, progress: &Progress) {
    if progress.lines == 0 && progress.acked == 0 {
        return;
    }
    // `get_mut`, not indexing: indexing a missing key would add it as null.
    let add = |value: Option<&mut Value>, base: u64| {
        if let Some(value) = value {
            if let Some(n) = value.as_u64() {
                *value = Value::from(n + base);
            }
        }
    };
    add(record.get_mut("through_line"), progress.lines);
    add(record.get_mut("stopped_at"), progress.lines);
    add(record.get_mut("acked"), progress.acked);
    if let Some(rejects) = record.get_mut("rejected").and_then(Value::as_array_mut) {
        for reject in rejects {
            if let Some(line) = reject["line"].as_u64() {
                renumber_line(reject, line + progress.lines);
            }
        }
    }
}

/// Give a record of one line (a rejection, `{"line": n, "error": "line n: ..."}`) the
/// number `line`, in its text too.
pub(crate) fn renumber_line(reject: &mut Value, line: u64) {
    let Some(old) = reject["line"].as_u64() else {
        return;
    };
    reject["line"] = Value::from(line);
    if let Some(error) = reject.get_mut("error") {
        if let Some(text) = error.as_str() {
            *error = Value::from(renumber_text(text, old, line));
        }
    }
}

/// `text` with its first mention of line `old` ("line 12," / "line 12:" / "line 12" at
/// the end) made line `new`.
pub(crate) fn renumber_text(text: &str, old: u64, new: u64) -> String {
    let mention = format!("line {old}");
    let mut from = 0;
    while let Some(at) = text[from..].find(&mention) {
        let start = from + at;
        let end = start + mention.len();
        if !text[end..].starts_with(|c: char| c.is_ascii_digit()) {
            return format!("{}line {new}{}", &text[..start], &text[end..]);
        }
        from = end;
    }
    text.to_owned()
}

/// Print one acknowledgement record: as it is in JSON, its rejections on stderr in text.
pub(crate) fn print_record(
    record: &Value,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure::io(e.to_string());
    match format {
        Format::Json | Format::Ndjson => {
            writeln!(out, "{record}").map_err(io)?;
            out.flush().map_err(io)?;
        }
        _ => {
            for reject in record["rejected"].as_array().into_iter().flatten() {
                eprintln!("rejected: {}", reject["error"].as_str().unwrap_or_default());
            }
        }
    }
    Ok(())
}

/// The summary of a stream's last attempt, numbered from the source's first line.
fn whole_summary(mut summary: Value, progress: &Progress) -> Value {
    renumber(&mut summary, progress);
    // The message names the first of the error's lines (a strict stop's).
    let first = summary["error"]["lines"][0]["line"].as_u64();
    if let (Some(old), Some(text)) = (first, summary["error"]["error"].as_str()) {
        if progress.lines > 0 {
            summary["error"]["error"] = Value::from(renumber_text(text, old, old + progress.lines));
        }
    }
    let lines = summary
        .get_mut("error")
        .and_then(|error| error.get_mut("lines"))
        .and_then(Value::as_array_mut);
    for line in lines.into_iter().flatten() {
        if let Some(n) = line.get("line").and_then(Value::as_u64) {
            renumber_line(line, n + progress.lines);
        }
    }
    for (field, earlier) in [
        ("rejected", progress.rejected),
        ("duplicates", progress.duplicates),
    ] {
        if let Some(count) = summary.get_mut(field) {
            if let Some(n) = count.as_u64() {
                *count = Value::from(n + earlier);
            }
        }
    }
    summary
}

/// Print the summary of the whole input (`folding` says who folds it) and fail as the
/// summary says the streams did.
pub(crate) fn report(
    summary: &Value,
    format: Format,
    out: &mut dyn Write,
    folding: &str,
) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure::io(e.to_string());
    match format {
        Format::Json | Format::Ndjson => {
            // The same fields as an embedded run's summary. A server's folds run in its
            // background for every client, so this run cannot count its own dead letters:
            // null, not 0 (`tributary rejects` lists them).
            let mut summary = summary.clone();
            if let Some(fields) = summary.as_object_mut() {
                fields
                    .entry("dead_letters")
                    .or_insert(serde_json::Value::Null);
            }
            writeln!(out, "{summary}").map_err(io)?
        }
        _ => writeln!(
            out,
            "{} durable, {}, {}through line {}; {folding}",
            crate::ingest::rows_text(summary["acked"].as_u64().unwrap_or(0)),
            crate::ingest::lines_text(summary["rejected"].as_u64().unwrap_or(0), "rejected"),
            crate::ingest::duplicates_text(summary["duplicates"].as_u64().unwrap_or(0)),
            summary["through_line"]
        )
        .map_err(io)?,
    }
    match summary.get("error") {
        Some(error) => Err(Failure::of_wire(
            error["kind"].as_str(),
            error["error"].as_str().unwrap_or("ingest failed"),
        )),
        None => Ok(()),
    }
}
