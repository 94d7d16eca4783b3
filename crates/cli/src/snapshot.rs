//! `tributary snapshot`: a commit as a document other Lance readers open, and the pins
//! that keep one from cleanup.

use std::io::Write;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use tributary::{Pin, Snapshot};

use crate::backend::{self, ServerArgs};
use crate::output::{self, Format};
use crate::query::AtArgs;
use crate::Failure;

#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
    pub graph: String,
    #[command(flatten)]
    pub at: AtArgs,
    /// Also pin the snapshot as NAME: cleanup keeps its table versions until `--unpin
    /// NAME`. Pins live in the graph (every process sees them; they survive restarts).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["unpin", "pins"])]
    pub pin: Option<String>,
    /// Remove the pin NAME (the next cleanup may remove what only it kept).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["pins", "branch", "commit"])]
    pub unpin: Option<String>,
    /// List the pins instead.
    #[arg(long, conflicts_with_all = ["branch", "commit"])]
    pub pins: bool,
}

pub async fn run(
    args: SnapshotArgs,
    server: &ServerArgs,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let opened = backend::open(&args.graph, server).await?;
    if args.pins {
        let pins = opened.pins().await?;
        return output::write_batch(out, format, &pin_rows(&pins)).map_err(Failure::io);
    }
    if let Some(name) = &args.unpin {
        let pin = opened.unpin(name).await?;
        return output::write_batch(out, format, &pin_rows(&[pin])).map_err(Failure::io);
    }
    let mut at = args.at.at()?;
    if let Some(name) = &args.pin {
        // Describe the commit pinned, not the branch's head again: it may have moved.
        at = tributary::At::Commit(opened.pin(name, &at).await?.commit);
    }
    let snapshot = opened.snapshot(&at).await?;
    write_snapshot(out, format, &snapshot)
}

/// The document as JSON (see [`output::json_text`]; one line for `ndjson`); as a table,
/// one row per type.
fn write_snapshot(out: &mut dyn Write, format: Format, snapshot: &Snapshot) -> Result<(), Failure> {
    let text = match format {
        Format::Json => output::json_text(snapshot),
        Format::Ndjson => serde_json::to_string(snapshot),
        Format::Table | Format::Csv => {
            return output::write_batch(out, format, &table_rows(snapshot)).map_err(Failure::io)
        }
    };
    let text = text.map_err(|e| Failure::io(e.to_string()))?;
    writeln!(out, "{text}").map_err(|e| Failure::io(e.to_string()))
}

fn strings<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(values.collect::<StringArray>())
}

fn table_rows(snapshot: &Snapshot) -> RecordBatch {
    let tables = &snapshot.tables;
    let commit = snapshot.commit.to_string();
    let role = |t: &tributary::SnapshotTable| match t.role {
        tributary::TableRole::Node => "node",
        tributary::TableRole::Edge => "edge",
    };
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "commit",
            strings(tables.iter().map(|_| Some(commit.as_str()))),
        ),
        (
            "type",
            strings(tables.iter().map(|t| Some(t.type_name.as_str()))),
        ),
        ("role", strings(tables.iter().map(|t| Some(role(t))))),
        (
            "version",
            Arc::new(tables.iter().map(|t| t.version).collect::<UInt64Array>()),
        ),
        (
            "rows",
            Arc::new(tables.iter().map(|t| t.rows).collect::<UInt64Array>()),
        ),
        (
            "lance_branch",
            strings(tables.iter().map(|t| t.lance_branch.as_deref())),
        ),
        ("uri", strings(tables.iter().map(|t| Some(t.uri.as_str())))),
    ];
    batch(columns)
}

fn pin_rows(pins: &[Pin]) -> RecordBatch {
    let commits: Vec<String> = pins.iter().map(|p| p.commit.to_string()).collect();
    let branches: Vec<String> = pins.iter().map(|p| p.branch.to_string()).collect();
    batch(vec![
        ("name", strings(pins.iter().map(|p| Some(p.name.as_str())))),
        ("commit", strings(commits.iter().map(|c| Some(c.as_str())))),
        ("branch", strings(branches.iter().map(|b| Some(b.as_str())))),
        (
            "pinned_at",
            strings(pins.iter().map(|p| Some(p.pinned_at.as_str()))),
        ),
    ])
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns)
        .unwrap_or_else(|_| RecordBatch::new_empty(Arc::new(arrow_schema::Schema::empty())))
}
