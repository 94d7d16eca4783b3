//! `tributary ingest`: stream NDJSON into the durable WAL, printing acknowledgements.
//!
//! Lines are read on a thread and sent in batches: whatever has arrived while the previous
//! send was in flight goes in the next one (up to `--batch-lines`), so a fast producer gets
//! large batches and a slow one gets low latency.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tributary::{Graph, IngestAck, IngestOptions, StreamLine};

use crate::output::Format;
use crate::Failure;

pub struct IngestRun {
    pub graph: String,
    pub file: String,
    pub branch: String,
    pub strict: bool,
    pub batch_lines: usize,
    /// Fold in the background while streaming, and once more at the end.
    pub fold: bool,
    /// Fail (after the summary) when a line was rejected or a row went to dead letters.
    pub fail_on_reject: bool,
    /// The producer and the sequence number of the input's first line.
    pub producer: Option<String>,
    pub sequence: Option<u64>,
}

/// Running totals, for the progress line and the summary.
#[derive(Default)]
struct Totals {
    acked: u64,
    rejected: u64,
    through_line: u64,
    /// A producer's lines acknowledged before: not written again.
    duplicates: u64,
}

/// How a run ended before its input did.
enum Stop {
    /// `--strict` met an invalid line.
    Strict(tributary::LineError),
    /// SIGINT or SIGTERM.
    Signal,
}

pub async fn run(
    graph: tributary::GraphBuilder,
    args: IngestRun,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let stop_requested = crate::signals::stop_requested();
    let graph = Arc::new(graph.open().await?);
    let streamed = stream(&graph, &args, format, out, stop_requested).await;
    // Whatever happened (an error, a broken pipe, a signal), flush what was acknowledged
    // to generations, so no acknowledged row waits in this process's WAL for a replay.
    graph.stop_folder().await;
    let closed = graph.close_writers().await;
    let (totals, stop, seconds) = streamed?;
    closed?;
    // Only this run's folds (its background folder and its last fold) count.
    let folds = graph.folds_made();
    let dead_letters = folds.dead_letters;
    let summary = json!({
        "summary": true,
        "acked": totals.acked,
        "rejected": totals.rejected,
        "dead_letters": dead_letters,
        "through_line": totals.through_line,
        "duplicates": totals.duplicates,
        "fold_commits": folds.commits,
        "rows_folded": folds.rows,
        "interrupted": matches!(stop, Some(Stop::Signal)),
        "seconds": tributary_server::to_the_millisecond(seconds),
        "rows_per_s": tributary_server::rows_per_s(totals.acked, seconds),
    });
    let io = |e: std::io::Error| Failure::io(e.to_string());
    match format {
        Format::Json | Format::Ndjson => writeln!(out, "{summary}").map_err(io)?,
        _ => writeln!(
            out,
            "{} durable, {}, {}through line {} in {seconds:.2}s ({} rows/s); {}{}",
            rows_text(totals.acked),
            lines_text(totals.rejected, "rejected"),
            duplicates_text(totals.duplicates),
            totals.through_line,
            tributary_server::rows_per_s(totals.acked, seconds),
            match (folds.commits.as_slice(), args.fold, &stop) {
                (_, _, Some(Stop::Signal)) => {
                    "interrupted: what was acknowledged is flushed; a fold publishes it".to_owned()
                }
                ([commit], _, _) => format!("{} folded in commit {commit}", rows_text(folds.rows)),
                ([.., last], _, _) => format!(
                    "{} folded in {} commits, the last {last}",
                    rows_text(folds.rows),
                    folds.commits.len()
                ),
                ([], true, _) => "nothing to fold".to_owned(),
                ([], false, _) => "a fold publishes them (tributary ingest fold)".to_owned(),
            },
            match dead_letters {
                0 => String::new(),
                n => format!(
                    "; the fold could not apply {} (see `tributary rejects {}{}`)",
                    rows_text(n),
                    args.graph,
                    if args.branch == tributary::MAIN_BRANCH {
                        String::new()
                    } else {
                        format!(" --branch {}", args.branch)
                    }
                ),
            }
        )
        .map_err(io)?,
    }
    if stop.is_none() && args.fail_on_reject {
        refuse_rejects(totals.rejected, args.fold.then_some(dead_letters))?;
    }
    if stop.is_none() {
        nothing_written(totals.acked, totals.rejected, totals.duplicates)?;
    }
    match stop {
        Some(Stop::Strict(bad)) => Err(Failure::invalid(format!("--strict: stopped at {bad}"))),
        Some(Stop::Signal) => Err(Failure::interrupted(format!(
            "interrupted after line {}; acknowledged rows are durable",
            totals.through_line
        ))),
        None => Ok(()),
    }
}

/// The streaming part of a run: read, send, report, and fold at the end. Returns the
/// totals, why it stopped early (if it did) and its duration.
async fn stream(
    graph: &Arc<Graph>,
    args: &IngestRun,
    format: Format,
    out: &mut dyn Write,
    stop_requested: impl std::future::Future<Output = ()>,
) -> Result<(Totals, Option<Stop>, f64), Failure> {
    let ingestor = graph.ingestor(&IngestOptions {
        branch: tributary::branch(&args.branch)?,
        strict: args.strict,
        producer: tributary::Producer::from_parts(args.producer.clone(), args.sequence)?,
    })?;
    if args.fold {
        graph.start_folder(&args.branch).await?;
    }
    let mut lines = spawn_reader(&args.file)?;
    let progress =
        (std::io::stderr().is_terminal() && format != Format::Json && format != Format::Ndjson)
            .then(|| progress_bar(&args.file));
    let started = Instant::now();
    let mut totals = Totals::default();
    let mut next_line = 1u64;
    let mut stop = None;
    tokio::pin!(stop_requested);

    loop {
        // A signal interrupts the wait for input, never a send in flight.
        let batch = tokio::select! {
            biased;
            _ = &mut stop_requested => {
                stop = Some(Stop::Signal);
                break;
            }
            batch = lines.next_batch(args.batch_lines) => batch,
        };
        let Some(batch) = batch else { break };
        let batch = batch?;
        let first_line = next_line;
        next_line += batch.len() as u64;
        let bytes: u64 = batch.iter().map(|line| line.len() as u64 + 1).sum();
        let received = stream_lines(&batch);
        let ack = ingestor.send_lines(first_line, &received).await?;
        report(out, format, &mut totals, &ack, progress.as_ref())?;
        if let Some(bad) = ack.stopped_at {
            stop = Some(Stop::Strict(bad));
            break;
        }
        if let Some(bar) = &progress {
            bar.inc(bytes);
            bar.set_message(match totals.rejected {
                0 => format!("{} acked", totals.acked),
                rejected => format!("{} acked, {rejected} rejected", totals.acked),
            });
        }
    }
    if let Some(bar) = &progress {
        bar.finish_and_clear();
    }
    let seconds = started.elapsed().as_secs_f64();
    // Publish what was acknowledged (unless asked not to, or stopped by a signal). A
    // signal during this fold abandons it: a fold stopped half-way is resolved by the next
    // writer, like one a crash stopped, and nothing acknowledged depends on it.
    if args.fold && !matches!(stop, Some(Stop::Signal)) {
        graph.stop_folder().await;
        tokio::select! {
            biased;
            _ = &mut stop_requested => stop = Some(Stop::Signal),
            folded = graph.fold(&args.branch) => drop(folded?),
        }
    }
    Ok((totals, stop, seconds))
}

/// A progress bar on stderr for reading `file`: bytes read of its size, rate and time
/// left (for standard input, or any input of unknown size, bytes read and rate). The
/// message takes what is left of the terminal's width and is cut there, so the line never
/// wraps (a wrapped line is redrawn as a new one).
pub(crate) fn progress_bar(file: &str) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let size = (file != "-")
        .then(|| std::fs::metadata(file).ok())
        .flatten()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let (bar, template) = match size {
        Some(size) => (
            ProgressBar::with_draw_target(Some(size), ProgressDrawTarget::stderr()),
            "{bar:12} {bytes}/{total_bytes} {bytes_per_sec}, {eta} left · {wide_msg}",
        ),
        None => (
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
            "{spinner} {bytes} read, {bytes_per_sec} · {wide_msg}",
        ),
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}

/// The lines of `batch` as the ingestor takes them: one that is not UTF-8 is rejected on
/// its own.
fn stream_lines(batch: &[Vec<u8>]) -> Vec<StreamLine<'_>> {
    batch
        .iter()
        .map(|line| match std::str::from_utf8(line) {
            Ok(text) => StreamLine::Text(text),
            Err(_) => StreamLine::Unreadable("the line is not UTF-8"),
        })
        .collect()
}

fn report(
    out: &mut dyn Write,
    format: Format,
    totals: &mut Totals,
    ack: &IngestAck,
    progress: Option<&indicatif::ProgressBar>,
) -> Result<(), Failure> {
    totals.acked += ack.durable_rows;
    totals.rejected += ack.rejected.len() as u64;
    totals.through_line = ack.through_line;
    totals.duplicates += ack.duplicates;
    let io = |e: std::io::Error| Failure::io(e.to_string());
    match format {
        Format::Json | Format::Ndjson => {
            let rejected: Vec<_> = ack
                .rejected
                .iter()
                .map(|r| json!({ "line": r.line, "error": r.to_string() }))
                .collect();
            let mut record = json!({
                "acked": totals.acked,
                "through_line": ack.through_line,
                "rows": ack.durable_rows,
                "rejected": rejected,
            });
            if ack.duplicates > 0 {
                record["duplicates"] = ack.duplicates.into();
            }
            writeln!(out, "{record}").map_err(io)?;
            out.flush().map_err(io)
        }
        _ => {
            // Above the progress bar, not through it.
            let print = || {
                for reject in &ack.rejected {
                    eprintln!("rejected: {reject}");
                }
            };
            match progress {
                Some(bar) if !ack.rejected.is_empty() => bar.suspend(print),
                _ => print(),
            }
            Ok(())
        }
    }
}

/// Lines read on a thread (a blocking reader must not stall the runtime), as bytes: a
/// line that is not UTF-8 is rejected on its own by whoever decodes it. A read error ends
/// the stream, naming the line it happened on.
pub(crate) struct LineSource {
    receiver: tokio::sync::mpsc::Receiver<Result<Vec<u8>, Failure>>,
    /// A read error met while gathering a batch: returned after that batch.
    failed: Option<Failure>,
}

pub(crate) fn spawn_reader(file: &str) -> Result<LineSource, Failure> {
    let mut reader: Box<dyn BufRead + Send> = if file == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        let opened = std::fs::File::open(file).map_err(|e| Failure::reading(file, e))?;
        Box::new(std::io::BufReader::new(opened))
    };
    let (sender, receiver) = tokio::sync::mpsc::channel(64 * 1024);
    let file = file.to_owned();
    std::thread::spawn(move || {
        for line_no in 1u64.. {
            let mut bytes = Vec::new();
            let line = match reader.read_until(b'\n', &mut bytes) {
                Ok(0) => break,
                Ok(_) => {
                    if bytes.last() == Some(&b'\n') {
                        bytes.pop();
                        if bytes.last() == Some(&b'\r') {
                            bytes.pop();
                        }
                    }
                    Ok(bytes)
                }
                Err(error) => Err(Failure::io(format!(
                    "cannot read line {line_no} of {file}: {error}"
                ))),
            };
            let failed = line.is_err();
            if sender.blocking_send(line).is_err() || failed {
                break;
            }
        }
    });
    Ok(LineSource {
        receiver,
        failed: None,
    })
}

impl LineSource {
    /// A source fed by another task (which sends `Ok` lines and ends it by dropping the
    /// sender), holding at most `capacity` lines not yet taken.
    pub(crate) fn channel(
        capacity: usize,
    ) -> (
        tokio::sync::mpsc::Sender<Result<Vec<u8>, Failure>>,
        LineSource,
    ) {
        let (sender, receiver) = tokio::sync::mpsc::channel(capacity.max(1));
        (
            sender,
            LineSource {
                receiver,
                failed: None,
            },
        )
    }

    /// The next line, or the read error that ended the input.
    async fn next_line(&mut self) -> Option<Result<Vec<u8>, Failure>> {
        if let Some(failure) = self.failed.take() {
            return Some(Err(failure));
        }
        self.receiver.recv().await
    }

    /// Wait for one line, then take whatever else has already arrived, up to `max`.
    pub(crate) async fn next_batch(&mut self, max: usize) -> Option<Result<Vec<Vec<u8>>, Failure>> {
        let mut batch = match self.next_line().await? {
            Ok(line) => vec![line],
            Err(failure) => return Some(Err(failure)),
        };
        while batch.len() < max {
            match self.receiver.try_recv() {
                Ok(Ok(line)) => batch.push(line),
                Ok(Err(failure)) => {
                    self.failed = Some(failure);
                    break;
                }
                Err(_) => break,
            }
        }
        Some(Ok(batch))
    }
}

/// "1 line rejected", "2 lines rejected".
pub(crate) fn lines_text(n: u64, what: &str) -> String {
    match n {
        1 => format!("1 line {what}"),
        n => format!("{n} lines {what}"),
    }
}

/// "N lines acknowledged before, " for a producer's duplicates (nothing without them).
pub(crate) fn duplicates_text(duplicates: u64) -> String {
    match duplicates {
        0 => String::new(),
        1 => "1 line acknowledged before (not written again), ".to_owned(),
        n => format!("{n} lines acknowledged before (not written again), "),
    }
}

/// `n` rows, as a phrase.
pub(crate) fn rows_text(n: u64) -> String {
    if n == 1 {
        "1 row".to_owned()
    } else {
        format!("{n} rows")
    }
}

/// A run that wrote nothing says so on stderr; one whose every line was rejected fails
/// (exit 65, after the summary), `--fail-on-reject` or not: a script notices.
pub(crate) fn nothing_written(acked: u64, rejected: u64, duplicates: u64) -> Result<(), Failure> {
    match (acked, rejected, duplicates) {
        (0, 0, 0) => eprintln!("nothing was written: the input holds no lines"),
        (0, 0, duplicates) => eprintln!(
            "nothing new was written: {} acknowledged before (duplicates)",
            lines_text(duplicates, "were")
        ),
        (0, rejected, 0) => {
            return Err(Failure::invalid(match rejected {
                1 => "the input's only line was rejected; nothing was written".to_owned(),
                n => format!("all {n} lines of the input were rejected; nothing was written"),
            }))
        }
        _ => {}
    }
    Ok(())
}

/// `--fail-on-reject`: the run fails (exit 65) when a line was rejected or a row went to
/// the dead letters; the summary has been printed.
/// `dead_letters` is `None` where the run cannot know them (a server folds).
pub(crate) fn refuse_rejects(rejected: u64, dead_letters: Option<u64>) -> Result<(), Failure> {
    let letters = dead_letters.unwrap_or(0);
    if rejected == 0 && letters == 0 {
        return Ok(());
    }
    let message = match dead_letters {
        Some(letters) => format!(
            "--fail-on-reject: {} and {} in the dead letters",
            lines_text(rejected, "rejected"),
            rows_text(letters)
        ),
        None => format!(
            "--fail-on-reject: {} (the server folds: its dead letters are in `tributary rejects`)",
            lines_text(rejected, "rejected")
        ),
    };
    Err(Failure::invalid(message))
}
