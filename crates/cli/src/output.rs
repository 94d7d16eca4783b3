//! Rendering results as a table, JSON, NDJSON or CSV. Every result is an Arrow batch.

use std::io::Write;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use clap::ValueEnum;
use tributary::CommitRecord;

use crate::Failure;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for people (the default on a terminal).
    Table,
    /// One JSON array.
    Json,
    /// One JSON object per line (the default when piped).
    Ndjson,
    /// Comma-separated values with a header row.
    Csv,
}

impl Format {
    pub fn resolve(explicit: Option<Format>) -> Format {
        use std::io::IsTerminal;
        explicit.unwrap_or(if std::io::stdout().is_terminal() {
            Format::Table
        } else {
            Format::Ndjson
        })
    }
}

/// Standard output that notes when its reader has gone (`tributary read … | head`): the
/// command then stops and exits 0 without a word, as Unix tools do.
pub struct Stdout {
    inner: std::io::StdoutLock<'static>,
}

static READER_GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Stdout {
    pub fn lock() -> Stdout {
        Stdout {
            inner: std::io::stdout().lock(),
        }
    }

    /// Whether a write found the reader gone.
    pub fn reader_gone() -> bool {
        READER_GONE.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn noted<T>(result: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(error) = &result {
            if error.kind() == std::io::ErrorKind::BrokenPipe {
                READER_GONE.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        result
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Self::noted(self.inner.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Self::noted(self.inner.flush())
    }
}

/// A `--format json` document: indented for a person at a terminal, one line for a
/// program reading a pipe or a file (`ndjson` is always one line per record).
pub fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    }
}

pub fn write_batch(out: &mut dyn Write, format: Format, batch: &RecordBatch) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    match format {
        Format::Table => {
            let shown = arrow_cast::pretty::pretty_format_batches(std::slice::from_ref(batch))
                .map_err(|e| err(&e))?;
            writeln!(out, "{shown}").map_err(|e| err(&e))?;
            let n = batch.num_rows();
            writeln!(out, "{n} row{}", if n == 1 { "" } else { "s" }).map_err(|e| err(&e))
        }
        Format::Json => {
            let text = json_text(&json_rows(batch)?).map_err(|e| err(&e))?;
            writeln!(out, "{text}").map_err(|e| err(&e))
        }
        Format::Ndjson => {
            let mut writer = arrow_json::LineDelimitedWriter::new(&mut *out);
            writer.write(batch).map_err(|e| err(&e))?;
            writer.finish().map_err(|e| err(&e))
        }
        Format::Csv => write_csv(out, batch).map_err(|e| err(&e)),
    }
}

/// [`write_batch`], with the string columns `json_columns` (JSON text, like a dead letter's
/// row) written as the JSON they hold in the `json` and `ndjson` formats.
pub fn write_batch_nesting(
    out: &mut dyn Write,
    format: Format,
    batch: &RecordBatch,
    json_columns: &[&str],
) -> Result<(), String> {
    if !matches!(format, Format::Json | Format::Ndjson) {
        return write_batch(out, format, batch);
    }
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut rows = json_rows(batch)?;
    for row in &mut rows {
        for column in json_columns {
            if let Some(serde_json::Value::String(text)) = row.get(*column) {
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
                    row.insert((*column).to_owned(), value);
                }
            }
        }
    }
    if format == Format::Json {
        let text = json_text(&rows).map_err(|e| err(&e))?;
        writeln!(out, "{text}").map_err(|e| err(&e))
    } else {
        for row in rows {
            let text = serde_json::to_string(&row).map_err(|e| err(&e))?;
            writeln!(out, "{text}").map_err(|e| err(&e))?;
        }
        Ok(())
    }
}

/// The rows of `batch` as JSON objects.
fn json_rows(
    batch: &RecordBatch,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut bytes = Vec::new();
    {
        let mut writer = arrow_json::ArrayWriter::new(&mut bytes);
        writer.write(batch).map_err(|e| err(&e))?;
        writer.finish().map_err(|e| err(&e))?;
    }
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_slice(&bytes).map_err(|e| err(&e))
}

/// `ingest status`: the shards' table, then (when streams were sent as producers) the
/// producers' marks. In `json`, one document holding both lists (`shards`, `producers`);
/// in `csv`, which holds one table, the shards only; otherwise one after the other.
pub fn write_status(
    out: &mut dyn Write,
    format: Format,
    status: &tributary::IngestStatus,
) -> Result<(), String> {
    let shards = status_batch(status);
    let producers = producers_batch(status);
    if format == Format::Json {
        let document = serde_json::json!({
            "shards": json_rows(&shards)?,
            "producers": json_rows(&producers)?,
        });
        return writeln!(out, "{document}").map_err(|e| e.to_string());
    }
    write_batch(out, format, &shards)?;
    if producers.num_rows() > 0 && format != Format::Csv {
        write_batch(out, format, &producers)?;
    }
    Ok(())
}

/// CSV by each value's display form, so nested columns (lists, vectors) render too.
fn write_csv(out: &mut dyn Write, batch: &RecordBatch) -> std::io::Result<()> {
    let header: Vec<String> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| csv_field(f.name()))
        .collect();
    writeln!(out, "{}", header.join(","))?;
    let options = FormatOptions::default();
    let formatters: Vec<ArrayFormatter> = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<Result<_, _>>()
        .map_err(std::io::Error::other)?;
    for row in 0..batch.num_rows() {
        let cells: Vec<String> = batch
            .columns()
            .iter()
            .zip(&formatters)
            .map(|(column, f)| {
                if column.is_null(row) {
                    String::new()
                } else {
                    csv_field(&f.value(row).to_string())
                }
            })
            .collect();
        writeln!(out, "{}", cells.join(","))?;
    }
    Ok(())
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// The commit log: a table (one row per commit, per-table figures as `path=n`) for people,
/// and for `json`/`ndjson` one object per commit whose per-table figures are objects and
/// whose folded shards are a list.
pub fn write_commits(
    out: &mut dyn Write,
    format: Format,
    commits: &[CommitRecord],
    wide: bool,
) -> Result<(), String> {
    if format == Format::Table && !wide {
        // What fits 100 columns; `--wide` (or JSON) adds parents and per-table figures.
        let batch = commits_batch(commits);
        let narrow = ["commit", "kind", "actor", "time", "rows"]
            .map(|name| batch.schema().index_of(name).unwrap_or_default());
        let batch = batch.project(&narrow).map_err(|e| e.to_string())?;
        return write_batch(out, format, &batch);
    }
    if !matches!(format, Format::Json | Format::Ndjson) {
        return write_batch(out, format, &commits_batch(commits));
    }
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let by_table = |map: &std::collections::BTreeMap<tributary::TablePath, u64>| {
        map.iter()
            .map(|(k, &v)| (k.to_string(), serde_json::Value::from(v)))
            .collect::<serde_json::Map<_, _>>()
    };
    let objects: Vec<serde_json::Value> = commits
        .iter()
        .map(|c| {
            serde_json::json!({
                "commit": c.id.to_string(),
                "parent": c.parent.as_ref().map(|p| p.to_string()),
                "merged": c.merged.as_ref().map(|p| p.to_string()),
                "kind": c.kind.to_string(),
                "actor": c.actor,
                "time": chrono::DateTime::from_timestamp_micros(c.time_micros)
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)),
                "rows": c.rows_written.values().sum::<u64>(),
                "rows_written": by_table(&c.rows_written),
                "folded": c.folded.iter().map(|f| serde_json::json!({
                    "table": f.table.to_string(),
                    "shard": f.shard,
                    "first_generation": f.first_generation,
                    "last_generation": f.last_generation,
                    "rows": f.rows,
                })).collect::<Vec<_>>(),
                "tables": by_table(&c.tables),
            })
        })
        .collect();
    if format == Format::Json {
        let text = json_text(&objects).map_err(|e| err(&e))?;
        writeln!(out, "{text}").map_err(|e| err(&e))
    } else {
        for object in objects {
            writeln!(out, "{object}").map_err(|e| err(&e))?;
        }
        Ok(())
    }
}

/// The commit log as a batch: one row per commit.
#[expect(clippy::expect_used, reason = "the columns are built for this schema")]
fn commits_batch(commits: &[CommitRecord]) -> RecordBatch {
    let strings = |f: &dyn Fn(&CommitRecord) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(commits.iter().map(f)))
    };
    let joined = |map: &std::collections::BTreeMap<tributary::TablePath, u64>| {
        map.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let schema = Schema::new(vec![
        Field::new("commit", DataType::Utf8, false),
        Field::new("parent", DataType::Utf8, true),
        Field::new("merged", DataType::Utf8, true),
        Field::new("kind", DataType::Utf8, false),
        Field::new("actor", DataType::Utf8, false),
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("rows", DataType::Int64, false),
        Field::new("rows_written", DataType::Utf8, false),
        Field::new("folded", DataType::Utf8, false),
        Field::new("tables", DataType::Utf8, false),
    ]);
    let columns: Vec<ArrayRef> = vec![
        strings(&|c| c.id.to_string()),
        Arc::new(StringArray::from(
            commits
                .iter()
                .map(|c| c.parent.as_ref().map(|p| p.to_string()))
                .collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            commits
                .iter()
                .map(|c| c.merged.as_ref().map(|p| p.to_string()))
                .collect::<Vec<_>>(),
        )),
        strings(&|c| c.kind.to_string()),
        strings(&|c| c.actor.clone()),
        Arc::new(
            TimestampMicrosecondArray::from_iter_values(commits.iter().map(|c| c.time_micros))
                .with_timezone("UTC"),
        ),
        Arc::new(Int64Array::from_iter_values(
            commits
                .iter()
                .map(|c| c.rows_written.values().sum::<u64>() as i64),
        )),
        strings(&|c| joined(&c.rows_written)),
        strings(&|c| {
            c.folded
                .iter()
                .map(|f| {
                    format!(
                        "{}@{}:gen{}..{}",
                        f.table,
                        &f.shard[..8.min(f.shard.len())],
                        f.first_generation,
                        f.last_generation
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        }),
        strings(&|c| joined(&c.tables)),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).expect("commit columns match their schema")
}

/// Branches: each one's name and head commit.
#[expect(clippy::expect_used, reason = "the columns are built for this schema")]
pub fn branches_batch(heads: &[CommitRecord]) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("branch", DataType::Utf8, false),
        Field::new("head", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
    ]);
    let strings = |f: &dyn Fn(&CommitRecord) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(heads.iter().map(f)))
    };
    let columns: Vec<ArrayRef> = vec![
        strings(&|c| c.branch.to_string()),
        strings(&|c| c.id.to_string()),
        strings(&|c| c.kind.to_string()),
        Arc::new(
            TimestampMicrosecondArray::from_iter_values(heads.iter().map(|c| c.time_micros))
                .with_timezone("UTC"),
        ),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).expect("branch columns match their schema")
}

/// What a fold did: rows per type, rows deleted per type, rows turned into dead letters, commits (the last
/// one's id; none when nothing was pending).
pub fn fold_summary(outcome: &tributary::FoldOutcome) -> Summary {
    Summary::new()
        .counts("rows", &outcome.rows)
        .counts("deleted", &outcome.deleted)
        .with("dead_letters", outcome.dead_letters)
        .with("commits", outcome.commits)
        .with(
            "generations",
            outcome
                .folded
                .iter()
                .map(|f| f.last_generation - f.first_generation + 1)
                .sum::<u64>(),
        )
        .with("commit", outcome.commit.as_ref().map(|c| c.id.to_string()))
}

/// What a command did, as named values: one JSON object for `json` and `ndjson` (counts
/// are numbers, per-type counts an object, ids strings), a `field`/`value` table for
/// `table` and `csv` (an object's entries as `field.key` rows).
/// Only the `columns` of `batch`, in that order (every column for `None`); a name it does
/// not have is refused with the ones it has.
pub fn select(batch: RecordBatch, columns: Option<&[String]>) -> Result<RecordBatch, Failure> {
    let Some(columns) = columns else {
        return Ok(batch);
    };
    let schema = batch.schema();
    let indices = columns
        .iter()
        .map(|name| {
            schema.index_of(name).map_err(|_| {
                let known: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                Failure::invalid(format!(
                    "--select: no column `{name}` (the columns are {})",
                    known.join(", ")
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    batch
        .project(&indices)
        .map_err(|e| Failure::internal(e.to_string()))
}

#[derive(Debug, Default)]
pub struct Summary(Vec<(String, serde_json::Value)>);

impl Summary {
    pub fn new() -> Summary {
        Summary::default()
    }

    /// Add `field` = `value`.
    pub fn with(mut self, field: &str, value: impl Into<serde_json::Value>) -> Summary {
        self.0.push((field.to_owned(), value.into()));
        self
    }

    /// Add `field` = an object of counts (rows per type, say).
    pub fn counts<'a>(
        self,
        field: &str,
        counts: impl IntoIterator<Item = (&'a String, &'a u64)>,
    ) -> Summary {
        let object: serde_json::Map<String, serde_json::Value> = counts
            .into_iter()
            .map(|(k, &v)| (k.clone(), v.into()))
            .collect();
        self.with(field, serde_json::Value::Object(object))
    }

    pub fn write(&self, out: &mut dyn Write, format: Format) -> Result<(), String> {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        match format {
            Format::Json | Format::Ndjson => {
                let object: serde_json::Map<String, serde_json::Value> =
                    self.0.iter().cloned().collect();
                let text = if format == Format::Json {
                    json_text(&object)
                } else {
                    serde_json::to_string(&object)
                };
                writeln!(out, "{}", text.map_err(|e| err(&e))?).map_err(|e| err(&e))
            }
            Format::Table | Format::Csv => {
                let mut rows = Vec::new();
                for (field, value) in &self.0 {
                    match value {
                        serde_json::Value::Object(entries) => {
                            for (key, value) in entries {
                                rows.push((format!("{field}.{key}"), plain(value)));
                            }
                        }
                        value => rows.push((field.clone(), plain(value))),
                    }
                }
                write_batch(out, format, &pairs_batch(("field", "value"), &rows))
            }
        }
    }
}

/// A value as a person reads it: a string without its quotes, `null` as nothing.
fn plain(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Each key's shard (numbers, so JSON has them as numbers).
#[expect(clippy::expect_used, reason = "the columns are built for this schema")]
pub fn shards_batch(keys: &[String], shards: &[u32]) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("shard", DataType::UInt32, false),
    ]);
    let keys = StringArray::from_iter_values(keys.iter().map(String::as_str));
    let shards = arrow_array::UInt32Array::from_iter_values(shards.iter().copied());
    RecordBatch::try_new(Arc::new(schema), vec![Arc::new(keys), Arc::new(shards)])
        .expect("key and shard columns")
}

/// A two-column batch of `(name, value)` pairs, for summaries.
#[expect(
    clippy::expect_used,
    reason = "two string columns for two string fields"
)]
pub fn pairs_batch(names: (&str, &str), rows: &[(String, String)]) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new(names.0, DataType::Utf8, false),
        Field::new(names.1, DataType::Utf8, false),
    ]);
    let keys = StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str()));
    let values = StringArray::from_iter_values(rows.iter().map(|r| r.1.as_str()));
    RecordBatch::try_new(Arc::new(schema), vec![Arc::new(keys), Arc::new(values)])
        .expect("two string columns")
}

/// `ingest status` as a batch: one row per shard of each enrolled table.
#[expect(clippy::expect_used, reason = "the columns are built for this schema")]
fn status_batch(status: &tributary::IngestStatus) -> RecordBatch {
    let mut rows: Vec<(&tributary::TableIngestStatus, &tributary::ShardIngestStatus)> = Vec::new();
    for table in &status.tables {
        for shard in &table.shards {
            rows.push((table, shard));
        }
    }
    let strings = |f: &dyn Fn(
        &tributary::TableIngestStatus,
        &tributary::ShardIngestStatus,
    ) -> String|
     -> ArrayRef {
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(t, s)| f(t, s)),
        ))
    };
    let numbers = |f: &dyn Fn(
        &tributary::TableIngestStatus,
        &tributary::ShardIngestStatus,
    ) -> i64|
     -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|(t, s)| f(t, s)),
        ))
    };
    let schema = Schema::new(vec![
        Field::new("type", DataType::Utf8, false),
        Field::new("shard", DataType::UInt32, true),
        Field::new("shard_id", DataType::Utf8, false),
        Field::new("writer_epoch", DataType::Int64, false),
        Field::new(
            "pending_generations",
            DataType::List(Arc::new(Field::new_list_field(DataType::UInt64, true))),
            false,
        ),
        Field::new("pending_rows", DataType::Int64, false),
        Field::new("pending_bytes", DataType::Int64, false),
        Field::new("unflushed_rows", DataType::Int64, false),
        Field::new("wal_only_entries", DataType::Int64, false),
        Field::new("wal_only_rows", DataType::Int64, false),
        Field::new("oldest_pending_s", DataType::Float64, true),
        Field::new("folded_through", DataType::Int64, true),
        Field::new("last_fold", DataType::Utf8, true),
        Field::new("fold_error", DataType::Utf8, true),
    ]);
    let columns: Vec<ArrayRef> = vec![
        strings(&|t, _| t.type_name.clone()),
        // The number `tributary shards` says (none for a shard no bucket names), and
        // the shard's id.
        Arc::new(arrow_array::UInt32Array::from(
            rows.iter().map(|(_, s)| s.number).collect::<Vec<_>>(),
        )),
        strings(&|_, s| s.shard.clone()),
        numbers(&|_, s| s.writer_epoch as i64),
        Arc::new(arrow_array::ListArray::from_iter_primitive::<
            arrow_array::types::UInt64Type,
            _,
            _,
        >(rows.iter().map(|(_, s)| {
            Some(
                s.pending_generations
                    .iter()
                    .map(|&g| Some(g))
                    .collect::<Vec<_>>(),
            )
        }))),
        numbers(&|_, s| s.pending_rows as i64),
        numbers(&|_, s| s.pending_bytes as i64),
        numbers(&|t, _| t.unflushed_rows as i64),
        numbers(&|_, s| s.wal_only_entries as i64),
        numbers(&|_, s| s.wal_only_rows as i64),
        Arc::new(arrow_array::Float64Array::from(
            rows.iter()
                .map(|(t, _)| t.oldest_pending_age.map(|d| d.as_secs_f64()))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter()
                .map(|(_, s)| s.folded_through.map(|g| g as i64))
                .collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            rows.iter()
                .map(|_| status.last_fold.as_deref())
                .collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            rows.iter()
                .map(|_| status.fold_error.clone())
                .collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).expect("status columns match their schema")
}

/// What `schema apply` did: a line for people, or the outcome as JSON.
pub fn schema_outcome(
    out: &mut dyn Write,
    format: Format,
    outcome: &tributary::SchemaOutcome,
) -> Result<(), String> {
    let err = |e: std::io::Error| e.to_string();
    if matches!(format, Format::Json | Format::Ndjson) {
        let json = serde_json::to_string(outcome).map_err(|e| e.to_string())?;
        return writeln!(out, "{json}").map_err(err);
    }
    let Some(commit) = &outcome.commit else {
        return writeln!(out, "the schema is unchanged (version {})", outcome.version).map_err(err);
    };
    let change = &outcome.change;
    let pairs = |list: &[(String, String)]| {
        list.iter()
            .map(|(ty, field)| format!("{ty}.{field}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if !change.new_types.is_empty() {
        parts.push(format!("new types {}", change.new_types.join(", ")));
    }
    if !change.new_fields.is_empty() {
        parts.push(format!("new fields {}", pairs(&change.new_fields)));
    }
    if !change.new_indexes.is_empty() {
        parts.push(format!("new indexes on {}", pairs(&change.new_indexes)));
    }
    if !change.newly_streamed.is_empty() {
        parts.push(format!("@stream on {}", change.newly_streamed.join(", ")));
    }
    if !change.unstreamed.is_empty() {
        parts.push(format!(
            "@stream off {} (folded, shards sealed)",
            change.unstreamed.join(", ")
        ));
    }
    let folded = if outcome.folded_rows > 0 {
        format!(" ({} pending rows folded first)", outcome.folded_rows)
    } else {
        String::new()
    };
    writeln!(
        out,
        "schema version {}: {}{folded}; commit {}",
        outcome.version,
        parts.join("; "),
        commit.id
    )
    .map_err(err)
}

/// `ingest status`'s second table: each producer's acknowledged and folded marks.
#[expect(clippy::expect_used, reason = "the columns are built for this schema")]
fn producers_batch(status: &tributary::IngestStatus) -> RecordBatch {
    let producers = &status.producers;
    let marks = |f: &dyn Fn(&tributary::ProducerStatus) -> Option<u64>| -> ArrayRef {
        Arc::new(Int64Array::from(
            producers
                .iter()
                .map(|p| f(p).map(|n| n as i64))
                .collect::<Vec<_>>(),
        ))
    };
    let schema = Schema::new(vec![
        Field::new("producer", DataType::Utf8, false),
        Field::new("acknowledged", DataType::Int64, true),
        Field::new("folded", DataType::Int64, true),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            producers.iter().map(|p| p.producer.as_str()),
        )),
        marks(&|p| p.acknowledged),
        marks(&|p| p.folded),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).expect("producer columns match their schema")
}
