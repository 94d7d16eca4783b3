//! `tributary query` (Cypher) and `tributary sql`: a query at one snapshot, embedded or
//! on a server, printed in the output format; `--explain` prints what it would run.

use std::io::{Read, Write};

use tributary::{parse_assignment, At, Language, Params, QueryRequest, View};

use crate::backend::{self, ServerArgs};
use crate::failure::Failure;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// The graph: its folder or URI (`s3://…`), or with --server its id there.
    graph: String,
    /// The query; `-` reads it from standard input.
    query: String,
    /// A value of a `$NAME` parameter (Cypher): NAME=VALUE, the value read as JSON when it
    /// is JSON (`36`, `true`, `'["a","b"]'`), else as a string. Repeat for each.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    #[command(flatten)]
    view: ViewArgs,
    /// Print what the query would run instead of running it: the SQL a Cypher query
    /// compiles to, DataFusion's logical plan and its physical plan (each table scan with
    /// the filters and columns pushed into it).
    #[arg(long)]
    explain: bool,
    /// The most rows to take: a query returning more is refused, never cut short (use
    /// LIMIT in the query to take the first rows). Default: 10,000,000; a server caps it.
    #[arg(long)]
    max_rows: Option<usize>,
}

pub async fn run(
    args: QueryArgs,
    language: Language,
    server: &ServerArgs,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let text = if args.query == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::io(format!("cannot read the query from standard input: {e}")))?;
        text
    } else {
        args.query
    };
    let mut params = Params::new();
    for assignment in &args.params {
        let (name, value) =
            parse_assignment(assignment).map_err(|e| Failure::invalid(e.to_string()))?;
        params.insert(name, value);
    }
    let request = QueryRequest {
        language,
        text,
        params,
        view: View {
            at: args.view.at.at()?,
            fresh: args.view.fresh,
        },
        explain: args.explain,
        max_rows: args.max_rows,
    };
    let opened = backend::open(&args.graph, server).await?;
    let batch = opened.query(&request).await?;
    if args.explain && format == Format::Table {
        return write_plan(out, &batch).map_err(|e| Failure::io(e.to_string()));
    }
    output::write_batch(out, format, &batch).map_err(Failure::io)
}

/// An explanation for people: each step's heading, then its text.
fn write_plan(out: &mut dyn Write, batch: &arrow_array::RecordBatch) -> std::io::Result<()> {
    use arrow_array::cast::AsArray;
    let (Some(steps), Some(plans)) = (
        batch
            .column_by_name("step")
            .and_then(|c| c.as_string_opt::<i32>()),
        batch
            .column_by_name("plan")
            .and_then(|c| c.as_string_opt::<i32>()),
    ) else {
        return Ok(());
    };
    for (step, plan) in steps.iter().zip(plans.iter()) {
        writeln!(out, "== {} ==", step.unwrap_or_default())?;
        writeln!(out, "{}", plan.unwrap_or_default().trim_end())?;
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct AtArgs {
    /// Read at this branch's head.
    #[arg(long, default_value = tributary::MAIN_BRANCH)]
    pub(crate) branch: String,
    /// Read at this commit instead of a branch head (`log` lists them; any branch's).
    #[arg(long, conflicts_with = "branch")]
    pub(crate) commit: Option<String>,
}

impl AtArgs {
    pub(crate) fn at(&self) -> tributary::Result<At> {
        match &self.commit {
            Some(commit) => Ok(At::Commit(commit.as_str().into())),
            None => At::branch(&self.branch),
        }
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct ViewArgs {
    #[command(flatten)]
    pub(crate) at: AtArgs,
    /// Also see rows that are durable (ingested) but not yet folded. From another process
    /// than the writer's, that is up to the writer's last memtable flush.
    #[arg(long)]
    pub(crate) fresh: bool,
}

impl ViewArgs {
    pub(crate) fn view(&self) -> tributary::Result<View> {
        Ok(View {
            at: self.at.at()?,
            fresh: self.fresh,
        })
    }
}
