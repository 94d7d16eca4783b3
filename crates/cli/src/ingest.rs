//! `tributary ingest`: stream NDJSON into the durable WAL, printing acknowledgements.
//!
//! Lines are read on a thread and sent in batches: whatever has arrived while the previous
//! send was in flight goes in the next one (up to `--batch-lines`), so a fast producer gets
//! large batches and a slow one gets low latency.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tributary::{Graph, IngestAck};

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
}

/// Running totals, for the progress line and the summary.
#[derive(Default)]
struct Totals {
    acked: u64,
    rejected: u64,
    through_line: u64,
}

pub async fn run(args: IngestRun, format: Format, out: &mut dyn Write) -> Result<(), Failure> {
    let graph = Arc::new(Graph::open(&args.graph).await?);
    let ingestor = graph.ingest(&args.branch)?;
    if args.fold {
        graph.start_folder(&args.branch).await?;
    }
    let mut lines = spawn_reader(&args.file)?;
    let progress =
        std::io::stderr().is_terminal() && format != Format::Json && format != Format::Ndjson;
    let started = Instant::now();
    let mut totals = Totals::default();
    let mut last_progress = Instant::now();
    let mut next_line = 1u64;
    let mut stopped_at = None;

    while let Some(batch) = next_batch(&mut lines, args.batch_lines).await {
        let first_line = next_line;
        next_line += batch.len() as u64;
        let mut text = batch.join("\n");
        if args.strict {
            if let Some(bad) = ingestor.check(first_line, &text).into_iter().next() {
                // Acknowledge only what precedes the first invalid line.
                let keep = (bad.line - first_line) as usize;
                text = batch[..keep].join("\n");
                let mut ack = ingestor.send(first_line, &text).await?;
                ack.rejected = vec![bad.clone()];
                ack.through_line = bad.line;
                report(out, format, &mut totals, &ack)?;
                stopped_at = Some(bad);
                break;
            }
        }
        let ack = ingestor.send(first_line, &text).await?;
        report(out, format, &mut totals, &ack)?;
        if progress && last_progress.elapsed() > Duration::from_millis(200) {
            let rate = totals.acked as f64 / started.elapsed().as_secs_f64().max(1e-3);
            eprint!(
                "\r{} rows acked, {:.0} rows/s, {} rejected   ",
                totals.acked, rate, totals.rejected
            );
            last_progress = Instant::now();
        }
    }
    if progress {
        eprintln!();
    }
    let seconds = started.elapsed().as_secs_f64();
    // Publish what was acknowledged (unless asked not to), then flush the memtables to
    // generations so other processes (and later folds) see every row.
    let mut fold_commit = None;
    if args.fold {
        graph.stop_folder().await;
        fold_commit = graph.fold(&args.branch).await?.commit.map(|c| c.id);
    }
    graph.close_writers().await?;
    let summary = json!({
        "summary": true,
        "acked": totals.acked,
        "rejected": totals.rejected,
        "through_line": totals.through_line,
        "fold_commit": fold_commit,
        "seconds": seconds,
        "rows_per_s": totals.acked as f64 / seconds.max(1e-9),
    });
    let io = |e: std::io::Error| Failure {
        message: e.to_string(),
        code: 74,
    };
    match format {
        Format::Json | Format::Ndjson => writeln!(out, "{summary}").map_err(io)?,
        _ => writeln!(
            out,
            "{} rows durable, {} lines rejected, through line {} in {seconds:.2}s ({:.0} rows/s); {}",
            totals.acked,
            totals.rejected,
            totals.through_line,
            totals.acked as f64 / seconds.max(1e-9),
            match (&fold_commit, args.fold) {
                (Some(commit), _) => format!("folded, last fold commit {commit}"),
                (None, true) => "folded".to_owned(),
                (None, false) => "a fold publishes them (tributary ingest fold)".to_owned(),
            }
        )
        .map_err(io)?,
    }
    match stopped_at {
        Some(bad) => Err(Failure {
            message: format!("--strict: stopped at {bad}"),
            code: 65,
        }),
        None => Ok(()),
    }
}

fn report(
    out: &mut dyn Write,
    format: Format,
    totals: &mut Totals,
    ack: &IngestAck,
) -> Result<(), Failure> {
    totals.acked += ack.durable_rows;
    totals.rejected += ack.rejected.len() as u64;
    totals.through_line = ack.through_line;
    let io = |e: std::io::Error| Failure {
        message: e.to_string(),
        code: 74,
    };
    match format {
        Format::Json | Format::Ndjson => {
            let rejected: Vec<_> = ack
                .rejected
                .iter()
                .map(|r| json!({ "line": r.line, "error": r.to_string() }))
                .collect();
            let record = json!({
                "acked": totals.acked,
                "through_line": ack.through_line,
                "rows": ack.durable_rows,
                "rejected": rejected,
            });
            writeln!(out, "{record}").map_err(io)?;
            out.flush().map_err(io)
        }
        _ => {
            for reject in &ack.rejected {
                eprintln!("rejected: {reject}");
            }
            Ok(())
        }
    }
}

/// Read lines on a thread: a blocking reader must not stall the runtime.
fn spawn_reader(file: &str) -> Result<tokio::sync::mpsc::Receiver<String>, Failure> {
    let reader: Box<dyn BufRead + Send> = if file == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        let opened = std::fs::File::open(file).map_err(|e| Failure {
            message: format!("cannot read {file}: {e}"),
            code: 65,
        })?;
        Box::new(std::io::BufReader::new(opened))
    };
    let (sender, receiver) = tokio::sync::mpsc::channel(64 * 1024);
    std::thread::spawn(move || {
        for line in reader.lines() {
            let Ok(line) = line else { break };
            if sender.blocking_send(line).is_err() {
                break;
            }
        }
    });
    Ok(receiver)
}

/// Wait for one line, then take whatever else has already arrived, up to `max`.
async fn next_batch(
    lines: &mut tokio::sync::mpsc::Receiver<String>,
    max: usize,
) -> Option<Vec<String>> {
    let mut batch = vec![lines.recv().await?];
    while batch.len() < max {
        match lines.try_recv() {
            Ok(line) => batch.push(line),
            Err(_) => break,
        }
    }
    Some(batch)
}

/// `ingest --server`: stream the lines to the server and print its acknowledgement records
/// as they arrive (the same records an embedded run prints). The server folds in the
/// background; `--no-fold` and `--batch-lines` are the server's to decide.
pub async fn run_remote(
    remote: &crate::remote::Remote,
    args: IngestRun,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    use futures::StreamExt;

    let lines = spawn_reader(&args.file)?;
    let body = futures::stream::unfold(lines, |mut lines| async move {
        let line = lines.recv().await?;
        Some((
            Ok::<_, std::io::Error>(format!("{line}\n").into_bytes()),
            lines,
        ))
    });
    let request = remote
        .request(reqwest::Method::POST, "/ingest")
        .query(&[
            ("branch", args.branch.as_str()),
            ("strict", &args.strict.to_string()),
        ])
        .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
        .body(reqwest::Body::wrap_stream(body));
    let response = remote.send(request).await?;
    let io = |e: std::io::Error| Failure {
        message: e.to_string(),
        code: 74,
    };
    let mut stream = response.bytes_stream();
    let mut buffer = Vec::new();
    let mut summary = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Failure {
            message: format!("the server stream broke: {e}"),
            code: 75,
        })?;
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let record: serde_json::Value = serde_json::from_slice(&line).map_err(|e| Failure {
                message: format!("unreadable record from the server: {e}"),
                code: 70,
            })?;
            if record.get("summary").is_some() {
                summary = Some(record);
                continue;
            }
            match format {
                Format::Json | Format::Ndjson => {
                    out.write_all(&line).map_err(io)?;
                    out.flush().map_err(io)?;
                }
                _ => {
                    for reject in record["rejected"].as_array().into_iter().flatten() {
                        eprintln!("rejected: {}", reject["error"].as_str().unwrap_or_default());
                    }
                }
            }
        }
    }
    let Some(summary) = summary else {
        return Err(Failure {
            message: "the server ended the stream without a summary".into(),
            code: 75,
        });
    };
    match format {
        Format::Json | Format::Ndjson => writeln!(out, "{summary}").map_err(io)?,
        _ => writeln!(
            out,
            "{} rows durable, {} lines rejected, through line {}; the server folds them",
            summary["acked"], summary["rejected"], summary["through_line"]
        )
        .map_err(io)?,
    }
    match summary.get("error") {
        Some(error) => Err(Failure {
            message: error["error"]
                .as_str()
                .unwrap_or("ingest failed")
                .to_owned(),
            code: match error["kind"].as_str() {
                Some("invalid_input") => 65,
                Some("unavailable" | "conflict" | "fenced") => 75,
                _ => 70,
            },
        }),
        None => Ok(()),
    }
}
