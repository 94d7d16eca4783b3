//! `tributary`: the command-line interface to a Tributary graph.

mod backend;
mod branch;
mod documents;
mod embedder;
mod failure;
mod ingest;
mod output;
mod query;
mod remote;
mod remote_ingest;
mod routed_ingest;
mod serve;
mod signals;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use tributary::{
    At, Direction, ErrorKind, LoadMode, LoadOptions, ReadOptions, RejectPolicy, SearchQuery, View,
};

use backend::ServerArgs;
pub(crate) use failure::Failure;

use output::Format;

const EXIT_HELP: &str = "Exit status: 0 success (also when the reader of the output goes \
away, as `| head` does, except for `ingest`, whose unsent lines make it 74); 2 usage \
error; 64 a usage error found after parsing (--server not an http(s) URL, options that do \
not go together, a --watch interval); 65 invalid input \
(the message names the line and field; also `ingest --strict` and `--fail-on-reject`); 66 \
not found (a graph, branch, type, row or input file); 70 internal error; 74 I/O error \
(reading input, writing output); 75 conflict, fenced or unavailable (retry); 77 \
unauthorized or forbidden; 130 `ingest` stopped by a signal (what it acknowledged stays \
durable).\n\nLogs go to stderr: RUST_LOG (e.g. `info`, `tributary=debug`) or TRIBUTARY_LOG \
(a level) chooses what, --log-format json makes each line a JSON object.";

/// A graph store on Lance tables.
///
/// GRAPH is where a graph lives: a local directory, a file:// URI, or s3://bucket/prefix
/// (reached with the AWS_* environment or --store-option).
#[derive(Debug, Parser)]
#[command(name = "tributary", version, after_help = EXIT_HELP)]
struct Cli {
    /// Output format [default: table on a terminal, ndjson otherwise]
    #[arg(long, global = true, value_enum)]
    format: Option<Format>,

    /// How log lines on stderr are written: `text`, or `json` (one object per line, for a
    /// log collector).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "TRIBUTARY_LOG_FORMAT"
    )]
    log_format: LogFormat,

    #[command(flatten)]
    server: ServerArgs,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a new graph from a schema file.
    Init {
        /// Where to create the graph (must not already hold one).
        graph: String,
        /// The schema file (node and edge type declarations).
        #[arg(long, short)]
        schema: PathBuf,
        /// How commits become visible: `manifest`, one compare-and-swap on the
        /// `__manifest` table; or `record`, one immutable record per commit created with
        /// put-if-absent. Fixed for the graph's life. Default: `TRIBUTARY_PUBLISHER`, else
        /// `manifest`.
        #[arg(long, value_enum)]
        publisher: Option<PublisherArg>,
    },
    /// Print the publisher the graph commits through (`manifest` or `record`).
    Publisher { graph: String },
    /// Load NDJSON as one commit: every line is validated first, and nothing is written
    /// unless all are valid.
    Load {
        graph: String,
        /// NDJSON file, or `-` for standard input.
        #[arg(default_value = "-")]
        file: String,
        /// What an existing key means: `upsert` replaces the row, `insert` refuses the load.
        #[arg(long, value_enum, default_value_t = ModeArg::Upsert)]
        mode: ModeArg,
        #[arg(long, default_value = tributary::MAIN_BRANCH)]
        branch: String,
        /// A key naming this load (1-200 printable ASCII characters): run again with the
        /// same key after a failure you cannot read (a dropped connection, a crash), it
        /// prints the commit the first run made and writes nothing twice.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Read rows of a node or edge type.
    Read {
        graph: String,
        /// Node or edge type name.
        r#type: String,
        /// SQL predicate, e.g. "age > 30 AND status = 'active'".
        #[arg(long)]
        filter: Option<String>,
        /// Comma-separated columns to show.
        #[arg(long, value_delimiter = ',')]
        select: Option<Vec<String>>,
        #[arg(long)]
        limit: Option<usize>,
        #[command(flatten)]
        view: ViewArgs,
    },
    /// Show one node or edge by key (an edge's key is `from->to` unless it declares @key).
    Get {
        graph: String,
        r#type: String,
        key: String,
        #[command(flatten)]
        view: ViewArgs,
    },
    /// Which shard each key of a `@stream(shards = N)` type (node or edge: `SRC->DST` keys an edge) is in: where to send it
    /// when processes own shares of the shards (`serve --shards`, `ingest --shards`).
    Shards {
        graph: String,
        /// The node type.
        r#type: String,
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Show the nodes connected to a node over an edge type.
    Neighbors {
        graph: String,
        /// The node's type.
        r#type: String,
        /// The node's key.
        key: String,
        /// The edge type to follow.
        #[arg(long)]
        edge: String,
        /// Follow edges into the node instead of out of it.
        #[arg(long = "in")]
        incoming: bool,
        #[command(flatten)]
        view: ViewArgs,
    },
    /// Search a type: full text over its @index(fts) fields, or nearest neighbours of a
    /// vector (or of a text's embedding) in its indexed Vector field. Rows come best first
    /// with `_score` (text, BM25) or `_distance` (vector: the squared Euclidean distance,
    /// Lance's `l2`, lowest first).
    #[command(group = clap::ArgGroup::new("query").required(true))]
    Search {
        graph: String,
        r#type: String,
        /// Words to search for.
        #[arg(long, group = "query")]
        text: Option<String>,
        /// A query vector as a JSON array, e.g. "[0.1, 0.2, 0.3]".
        #[arg(long, group = "query")]
        nearest: Option<String>,
        /// A text, embedded by the graph's embedder (see `tributary embedder`) and searched
        /// over the type's indexed `@embed` field. Ingested rows have their vector once
        /// folded: a fresh search does not see the rows not folded yet.
        #[arg(long, group = "query")]
        similar: Option<String>,
        /// How many rows to return.
        #[arg(short, long, default_value_t = 10)]
        k: usize,
        #[command(flatten)]
        view: ViewArgs,
    },
    /// Show or set the graph's embedding provider: what fills `@embed` fields when rows
    /// are folded (and loaded), and embeds `search --similar` texts. The built-in one,
    /// used when none is set, needs no model or network: its vectors are lexical (texts
    /// that share words are near), not semantic.
    Embedder(embedder::EmbedderArgs),
    /// Ask a graph question in Cypher (a read-only subset), at one commit.
    ///
    /// MATCH with node and relationship patterns (labels are the schema's types; `->`,
    /// `<-` and undirected `-`; bounded variable-length `*1..3`; several patterns,
    /// comma-separated, or several MATCH, then OPTIONAL MATCH), WHERE (comparisons, AND/OR/XOR/NOT, IN, IS
    /// [NOT] NULL, STARTS WITH, ENDS WITH, CONTAINS), RETURN with DISTINCT, aliases and
    /// count/sum/min/max/avg/collect (the other items group), ORDER BY, SKIP, LIMIT, and
    /// `$name` parameters. A node returned whole is one column per field. Writes (CREATE,
    /// MERGE, SET, DELETE) are refused: write with load or ingest.
    ///
    /// Example: tributary query g 'MATCH (a:Person {name: $who})-[:Knows*1..2]->(b)
    /// RETURN DISTINCT b.name ORDER BY b.name' --param who=ada
    Query(query::QueryArgs),
    /// Run SQL over the graph at one commit: one table per node and edge type, named as
    /// the type ("Person"; an edge type's table has id, src, dst and its properties).
    /// Read-only; DataFusion's SQL.
    ///
    /// Example: tributary sql g 'SELECT p.name, count(*) AS friends FROM Person p JOIN
    /// Knows k ON k.src = p.id GROUP BY p.name ORDER BY friends DESC LIMIT 5'
    Sql(query::QueryArgs),
    /// Show the commits of a branch, newest first.
    Log {
        graph: String,
        #[arg(long, default_value = tributary::MAIN_BRANCH)]
        branch: String,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Create, list, delete and merge branches. Every read and write command takes
    /// `--branch NAME`, streaming ingest and its folds included.
    #[command(subcommand)]
    Branch(branch::BranchAction),
    /// Print the graph's schema, or change it (`schema apply`).
    Schema(SchemaArgs),
    /// Remove what no reader at the head needs: WAL files and generations already folded
    /// and published, old shard manifests, and table versions older than the retention
    /// window that the head does not pin (reads at commits older than that may fail).
    Cleanup {
        graph: String,
        /// Retention window for old table versions: e.g. 7d, 12h, 30m, 90s, 0s.
        #[arg(long, default_value = "7d", value_parser = parse_duration)]
        older_than: std::time::Duration,
    },
    /// List dead letters: ingested rows a fold could not apply (missing edge endpoint,
    /// @card or @unique broken), with the fold commit that recorded them.
    Rejects {
        graph: String,
        #[command(flatten)]
        at: AtArgs,
    },
    /// Stream NDJSON into the durable write-ahead log of `@stream` types.
    ///
    /// Each batch of lines is acknowledged once it is durable (not yet graph-visible: a
    /// fold publishes it). With `--format json` every acknowledgement is one line:
    /// {"acked": TOTAL, "through_line": L, "rows": N, "rejected": [{"line": L, "error": "…"}]};
    /// every line up to `through_line` is durable or rejected, so a producer can resume
    /// after it. A final summary line follows.
    Ingest(IngestArgs),
    /// Serve every graph under ROOT over HTTP (graph id = folder name). Endpoints are
    /// described at GET /openapi.json (and by `tributary openapi`); every command here takes --server URL to
    /// run against it. Ctrl-C or SIGTERM stops it cleanly: requests in flight get
    /// --shutdown-grace to finish, then every writer is flushed and it exits 0.
    Serve(serve::ServeArgs),
    /// Print a completion script for SHELL, from this command line's own definition:
    /// `tributary completions bash > /etc/bash_completion.d/tributary`, or
    /// `source <(tributary completions zsh)`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), generated from this command line's own definition:
    /// `tributary man > tributary.1 && man ./tributary.1`. With --dir, write a page for
    /// every command there instead (tributary.1, tributary-load.1, tributary-ingest-status.1, …).
    Man {
        /// Write every command's page into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
    /// Print the HTTP API's OpenAPI document (JSON), generated from the server's handlers
    /// and the engine's types: what `GET /openapi.json` serves.
    Openapi,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct IngestArgs {
    #[command(subcommand)]
    action: Option<IngestAction>,
    /// The graph to write to.
    #[arg(required = true)]
    graph: Option<String>,
    /// NDJSON file, or `-` for standard input.
    #[arg(default_value = "-")]
    file: String,
    #[arg(long, default_value = tributary::MAIN_BRANCH)]
    branch: String,
    /// Stop at the first invalid line (exit 65); nothing after it is acknowledged.
    #[arg(long)]
    strict: bool,
    /// Only make rows durable; do not fold them (no background folder, no final fold).
    #[arg(long)]
    no_fold: bool,
    /// Exit 65 (after the summary) when a line was rejected, or a fold of this run put a
    /// row in the dead letters (`tributary rejects GRAPH`): a script notices. With
    /// --server the server folds, so only rejected lines count.
    #[arg(long)]
    fail_on_reject: bool,
    /// At most this many lines per send (lines that arrive during a send are batched).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    batch_lines: u64,
    /// Send as this producer, for exactly-once delivery: the input's lines get sequence
    /// numbers (--sequence for the first, then one more per line), and lines at or below
    /// what was already acknowledged for the producer are acknowledged again without
    /// being written. Running the same command again after a crash or a dropped
    /// connection writes only what was not acknowledged. One stream per producer at a time.
    #[arg(long)]
    producer: Option<String>,
    /// The sequence number of the input's first line (needs --producer).
    #[arg(long, requires = "producer")]
    sequence: Option<u64>,
    /// Write only these shards (numbers, comma-separated: `@stream(shards = N)` numbers a
    /// type's shards 0..N-1; an unsharded type has shard 0), so several processes can
    /// each own some without fencing each other. A send with a row of another shard is
    /// refused whole, naming the shard. Embedded only (a server owns what `serve
    /// --shards` says).
    #[arg(long, value_delimiter = ',', value_name = "N,N,...")]
    shards: Option<Vec<u32>>,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct SchemaArgs {
    #[command(subcommand)]
    action: Option<SchemaAction>,
    /// The graph whose schema to print.
    #[arg(required = true)]
    graph: Option<String>,
}

#[derive(Debug, Subcommand)]
enum SchemaAction {
    /// Change the graph's schema to the one in FILE, as one `schema` commit. Additive
    /// changes only: new types; new fields after a type's existing ones that are nullable
    /// (`T?`) or have a default (stored rows get the default, or null); an `@index` on an
    /// existing field; `@stream` on a type, or off it (everything acknowledged is folded,
    /// its shards are sealed, and ingest of it is refused from then on). Anything else (a
    /// type or field dropped or renamed, a changed type, key, nullability, default or
    /// constraint) is refused with every difference listed, and nothing changes (exit
    /// 65). What is pending on `@stream` types is folded first. Other processes take the
    /// new schema at their next load or fold. Refused while a branch other than `main`
    /// exists.
    Apply {
        graph: String,
        /// The new schema file.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum IngestAction {
    /// Per enrolled table: shards, writer epoch, unfolded generations, rows and bytes, rows
    /// only in a WAL (no generation holds them yet: a live writer's tail, or one a stopped
    /// process left for the next fold), age of the oldest unfolded generation, and the
    /// last fold commit. Then, if streams were sent as producers, a second table: each
    /// producer's acknowledged mark (the highest sequence acknowledged) and folded mark
    /// (the highest whose lines the graph holds); in JSON, one object: {"shards": [...],
    /// "producers": [...]}. CSV holds one table: the shards.
    Status {
        graph: String,
        #[arg(long, default_value = tributary::MAIN_BRANCH)]
        branch: String,
        /// Show it again every SECONDS (2 when not given) until Ctrl-C: a live view of
        /// pending rows, lag and the last fold (the screen is redrawn on a terminal).
        #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "2")]
        watch: Option<f64>,
    },
    /// Fold now: flush what the graph's WALs hold — claiming the shards of writers in other
    /// processes, which reopen on their next send — and publish it as one commit. Prints
    /// rows folded and deleted per type, dead letters, and the commit (none when nothing
    /// was pending).
    Fold {
        graph: String,
        #[arg(long, default_value = tributary::MAIN_BRANCH)]
        branch: String,
        /// Refuse the fold if any row fails validation, instead of writing dead letters.
        #[arg(long)]
        halt: bool,
    },
}

#[derive(Debug, clap::Args)]
struct AtArgs {
    /// Read at this branch's head.
    #[arg(long, default_value = tributary::MAIN_BRANCH)]
    branch: String,
    /// Read at this commit instead of a branch head (`log` lists them; any branch's).
    #[arg(long, conflicts_with = "branch")]
    commit: Option<String>,
}

impl AtArgs {
    fn at(&self) -> tributary::Result<At> {
        match &self.commit {
            Some(commit) => Ok(At::Commit(commit.as_str().into())),
            None => At::branch(&self.branch),
        }
    }
}

#[derive(Debug, clap::Args)]
struct ViewArgs {
    #[command(flatten)]
    at: AtArgs,
    /// Also see rows that are durable (ingested) but not yet folded. From another process
    /// than the writer's, that is up to the writer's last memtable flush.
    #[arg(long)]
    fresh: bool,
}

impl ViewArgs {
    fn view(&self) -> tributary::Result<View> {
        Ok(View {
            at: self.at.at()?,
            fresh: self.fresh,
        })
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PublisherArg {
    Manifest,
    Record,
}

impl From<PublisherArg> for tributary::PublisherKind {
    fn from(arg: PublisherArg) -> Self {
        match arg {
            PublisherArg::Manifest => tributary::PublisherKind::Manifest,
            PublisherArg::Record => tributary::PublisherKind::Record,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    Upsert,
    Insert,
}

/// A `--nearest` vector: a JSON array of numbers.
fn parse_vector(text: &str) -> Result<Vec<f32>, Failure> {
    serde_json::from_str::<Vec<f32>>(text).map_err(|e| {
        Failure::usage(format!(
            "--nearest must be a JSON array of numbers like \"[0.1, 0.2]\": {e}"
        ))
    })
}

/// Allocations of 1 MiB and more are mapped on their own and handed back when freed. glibc
/// otherwise raises this threshold as large blocks are freed and keeps them in its arenas:
/// in the `fold_memory` bench a fold's resident memory then grew with its backlog (1M / 2M
/// / 4M pending rows: 210 / 254 / 283 MiB added, against 193 / 207 / 226 with the threshold
/// fixed; fold time unchanged within noise, `fold_merge`).
fn map_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter, before any thread is started.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

fn main() -> ExitCode {
    map_large_allocations();
    let cli = Cli::parse();
    // A reader gone is the end of the output for a read; for an ingest, the lines not
    // sent yet are not written, which is not a success.
    let ingesting = matches!(&cli.command, Command::Ingest(args) if args.action.is_none());
    // Crash tests stop this process at a named window (`FAILPOINTS=point=action`); inert
    // unless the engine is built with its `failpoints` feature.
    let _failpoints = fail::FailScenario::setup();
    log_to_stderr(cli.log_format);
    let command = <Cli as clap::CommandFactory>::command();
    let about_itself = match &cli.command {
        Command::Completions { shell } => Some(documents::Document::Completions(*shell)),
        Command::Man { dir } => Some(documents::Document::Man(dir.as_deref())),
        Command::Openapi => Some(documents::Document::Openapi),
        _ => None,
    };
    if let Some(document) = about_itself {
        return documents::print(command, document);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(ErrorKind::Internal.exit_code());
        }
    };
    let format = Format::resolve(cli.format);
    match runtime.block_on(run(cli.command, format, cli.server)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) if output::Stdout::reader_gone() && ingesting => {
            eprintln!(
                "error: the reader of the output went away; the ingest stopped there (what \
                 was acknowledged is durable, the rest was not sent)"
            );
            ExitCode::from(74)
        }
        Err(_) if output::Stdout::reader_gone() => ExitCode::SUCCESS,
        Err(failure) => {
            if !failure.conflicts.is_empty() && matches!(format, Format::Json | Format::Ndjson) {
                let refused = serde_json::json!({
                    "merged": false,
                    "kind": ErrorKind::Conflict.name(),
                    "error": failure.message,
                    "conflicts": failure.conflicts,
                });
                println!("{refused}");
            }
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

async fn run(command: Command, format: Format, server: ServerArgs) -> Result<(), Failure> {
    let mut out = output::Stdout::lock();
    let emit = |out: &mut dyn Write, batch: &arrow_array::RecordBatch| {
        output::write_batch(out, format, batch).map_err(Failure::io)
    };
    let summarize = |out: &mut dyn Write, summary: output::Summary| {
        summary.write(out, format).map_err(Failure::io)
    };
    match command {
        Command::Init {
            graph,
            schema,
            publisher,
        } => {
            let source = std::fs::read_to_string(&schema)
                .map_err(|e| Failure::reading(&format!("schema {}", schema.display()), e))?;
            let publisher = publisher.map(tributary::PublisherKind::from);
            let (types, commit, publisher) = match server.remote(&graph)? {
                Some(remote) => remote.create(source, publisher).await?,
                None => {
                    let builder = match publisher {
                        Some(kind) => server.local(&graph).publisher(kind),
                        None => server.local(&graph),
                    };
                    let opened = builder.init(&source).await?;
                    let head = opened.snapshot(&At::default()).await?;
                    let publisher = opened.publisher_kind().to_string();
                    (opened.catalog().types.len(), head.id.to_string(), publisher)
                }
            };
            let summary = output::Summary::new()
                .with("graph", graph)
                .with("types", types)
                .with("commit", commit)
                .with("publisher", publisher);
            summarize(&mut out, summary)
        }
        Command::Load {
            graph,
            file,
            mode,
            branch,
            idempotency_key,
        } => {
            let text = read_input(&file)?;
            let opened = backend::open(&graph, &server).await?;
            let mode = match mode {
                ModeArg::Upsert => LoadMode::Upsert,
                ModeArg::Insert => LoadMode::Insert,
            };
            let options = LoadOptions {
                branch: tributary::branch(&branch)?,
                mode,
                idempotency_key,
                ..Default::default()
            };
            // A load is one request: a spinner says it runs (on a terminal only).
            let spinner = {
                use std::io::IsTerminal;
                (std::io::stderr().is_terminal() && format == Format::Table).then(|| {
                    let spinner = indicatif::ProgressBar::new_spinner();
                    spinner.set_message(format!(
                        "validating and committing {} lines ({} bytes) of {file}",
                        text.lines().count(),
                        text.len()
                    ));
                    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
                    spinner
                })
            };
            let loaded = opened.load(&text, &options).await;
            if let Some(spinner) = spinner {
                spinner.finish_and_clear();
            }
            let outcome = loaded?;
            let summary = output::Summary::new()
                .with("commit", outcome.commit.id.to_string())
                .counts("rows", &outcome.rows)
                .counts("deleted", &outcome.deleted)
                .with("replayed", outcome.replayed);
            summarize(&mut out, summary)
        }
        Command::Read {
            graph,
            r#type,
            filter,
            select,
            limit,
            view,
        } => {
            let opened = backend::open(&graph, &server).await?;
            let options = ReadOptions {
                at: view.at.at()?,
                filter,
                select,
                limit,
                fresh: view.fresh,
            };
            let batch = opened.read(&r#type, &options).await?;
            emit(&mut out, &batch)
        }
        Command::Shards {
            graph,
            r#type,
            keys,
        } => {
            let opened = backend::open(&graph, &server).await?;
            let shards = opened.shards_of(&r#type, &keys).await?;
            emit(&mut out, &output::shards_batch(&keys, &shards))
        }
        Command::Get {
            graph,
            r#type,
            key,
            view,
        } => {
            let opened = backend::open(&graph, &server).await?;
            match opened.get(&r#type, &key, &view.view()?).await? {
                Some(batch) => emit(&mut out, &batch),
                None => Err(Failure::of(
                    ErrorKind::NoRow,
                    format!("{type} `{key}` not found", type = r#type),
                )),
            }
        }
        Command::Neighbors {
            graph,
            r#type,
            key,
            edge,
            incoming,
            view,
        } => {
            let opened = backend::open(&graph, &server).await?;
            let direction = if incoming {
                Direction::In
            } else {
                Direction::Out
            };
            let batch = opened
                .neighbors(&r#type, &key, &edge, direction, &view.view()?)
                .await?;
            emit(&mut out, &batch)
        }
        Command::Search {
            graph,
            r#type,
            text,
            nearest,
            similar,
            k,
            view,
        } => {
            let query = match (text, nearest, similar) {
                (Some(text), _, _) => SearchQuery::Text(text),
                (None, Some(vector), _) => SearchQuery::Nearest(parse_vector(&vector)?),
                (None, None, Some(text)) => SearchQuery::Similar(text),
                (None, None, None) => {
                    return Err(Failure::usage(
                        "search needs --text, --nearest or --similar",
                    ))
                }
            };
            let opened = backend::open(&graph, &server).await?;
            let batch = opened.search(&r#type, &query, k, &view.view()?).await?;
            emit(&mut out, &batch)
        }
        Command::Log {
            graph,
            branch,
            limit,
        } => {
            let opened = backend::open(&graph, &server).await?;
            let commits = opened.log(&branch, limit).await?;
            output::write_commits(&mut out, format, &commits).map_err(Failure::io)
        }
        Command::Ingest(args) => match (args.action, args.graph) {
            (
                Some(IngestAction::Status {
                    graph,
                    branch,
                    watch,
                }),
                _,
            ) => {
                let opened = backend::open(&graph, &server).await?;
                let every = match watch {
                    None => None,
                    Some(seconds) => match std::time::Duration::try_from_secs_f64(seconds) {
                        Ok(every) if !every.is_zero() => Some(every),
                        _ => {
                            return Err(Failure::usage("--watch takes a number of seconds above 0"))
                        }
                    },
                };
                let redraw = every.is_some() && format == Format::Table && {
                    use std::io::IsTerminal;
                    std::io::stdout().is_terminal()
                };
                let mut stop = Box::pin(signals::stop_requested());
                loop {
                    let status = tokio::select! {
                        status = opened.ingest_status(&branch) => status?,
                        _ = &mut stop => return Ok(()),
                    };
                    if redraw {
                        // Clear the screen and go home, then draw the view again.
                        write!(out, "\x1b[2J\x1b[H").map_err(|e| Failure::io(e.to_string()))?;
                    }
                    output::write_status(&mut out, format, &status).map_err(Failure::io)?;
                    out.flush().map_err(|e| Failure::io(e.to_string()))?;
                    let Some(every) = every else { return Ok(()) };
                    tokio::select! {
                        _ = tokio::time::sleep(every) => {}
                        _ = &mut stop => return Ok(()),
                    }
                }
            }
            (
                Some(IngestAction::Fold {
                    graph,
                    branch,
                    halt,
                }),
                _,
            ) => {
                let opened = backend::open(&graph, &server).await?;
                let policy = if halt {
                    RejectPolicy::Halt
                } else {
                    RejectPolicy::DeadLetter
                };
                let outcome = opened.fold(&branch, policy).await?;
                summarize(&mut out, output::fold_summary(&outcome))
            }
            (None, Some(graph)) => {
                if format == Format::Csv {
                    // Acknowledgements and a summary are not one table.
                    return Err(Failure::usage(
                        "ingest reports as text (table), json or ndjson; --format csv is for rows \
                         (read, get, neighbors, search, rejects)",
                    ));
                }
                let run = ingest::IngestRun {
                    graph,
                    file: args.file,
                    branch: args.branch,
                    strict: args.strict,
                    batch_lines: args.batch_lines as usize,
                    fold: !args.no_fold,
                    fail_on_reject: args.fail_on_reject,
                    producer: args.producer,
                    sequence: args.sequence,
                };
                let mut remotes = server.remotes(&run.graph)?;
                match remotes.len() {
                    1.. if args.shards.is_some() => Err(Failure::usage(
                        "--shards is for an embedded ingest; a server owns the shards `serve \
                         --shards` gives it",
                    )),
                    2.. => routed_ingest::run(remotes, &server.server, run, format, &mut out).await,
                    1 => {
                        let remote = remotes.remove(0);
                        remote_ingest::run(&remote, run, format, &mut out).await
                    }
                    _ => {
                        let settings = tributary::GraphSettings {
                            owned_shards: args.shards.map(|s| s.into_iter().collect()),
                            ..Default::default()
                        };
                        let graph = server.local(&run.graph).settings(settings);
                        ingest::run(graph, run, format, &mut out).await
                    }
                }
            }
            (None, None) => Err(Failure::missing_argument("ingest needs a GRAPH")),
        },
        Command::Serve(args) => serve::run(args, &server).await,
        // Answered before the runtime starts.
        Command::Completions { .. } | Command::Man { .. } | Command::Openapi => Ok(()),
        Command::Branch(action) => branch::run(action, &server, format, &mut out).await,
        Command::Embedder(args) => embedder::run(args, &server, format, &mut out).await,
        Command::Query(args) => {
            query::run(args, tributary::Language::Cypher, &server, format, &mut out).await
        }
        Command::Sql(args) => {
            query::run(args, tributary::Language::Sql, &server, format, &mut out).await
        }
        Command::Cleanup { graph, older_than } => {
            let opened = backend::open(&graph, &server).await?;
            let report = opened.cleanup(older_than).await?;
            let summary = output::Summary::new()
                .with("wal_entries", report.memwal.wal_entries)
                .with("generations", report.memwal.generations)
                .with("shard_manifests", report.memwal.manifest_versions)
                .with("table_versions", report.versions)
                .with("branch_lineages", report.branches)
                .with("commit_records", report.commit_records)
                .with("bytes", report.memwal.bytes + report.version_bytes);
            summarize(&mut out, summary)
        }
        Command::Publisher { graph } => {
            let opened = backend::open(&graph, &server).await?;
            let summary = output::Summary::new()
                .with("graph", graph)
                .with("publisher", opened.publisher().await?.to_string());
            summarize(&mut out, summary)
        }
        Command::Rejects { graph, at } => {
            let opened = backend::open(&graph, &server).await?;
            let batch = opened.rejects(&at.at()?).await?;
            // A dead letter's row is JSON: nested as such in JSON output.
            output::write_batch_nesting(&mut out, format, &batch, &["row"]).map_err(Failure::io)
        }
        Command::Schema(SchemaArgs {
            action: Some(SchemaAction::Apply { graph, file }),
            ..
        }) => {
            let source = std::fs::read_to_string(&file)
                .map_err(|e| Failure::reading(&format!("schema {}", file.display()), e))?;
            let opened = backend::open(&graph, &server).await?;
            let outcome = opened.apply_schema(&source).await?;
            output::schema_outcome(&mut out, format, &outcome).map_err(Failure::io)
        }
        Command::Schema(SchemaArgs { graph: None, .. }) => {
            Err(Failure::missing_argument("schema needs a GRAPH"))
        }
        Command::Schema(SchemaArgs {
            graph: Some(graph), ..
        }) => {
            let opened = backend::open(&graph, &server).await?;
            let source = opened.schema().await?;
            let result = match format {
                Format::Table | Format::Csv => write!(out, "{source}"),
                Format::Json | Format::Ndjson => {
                    writeln!(out, "{}", serde_json::json!({ "schema": source }))
                }
            };
            result.map_err(|e| Failure::io(e.to_string()))
        }
    }
}

/// Logs on stderr: what `RUST_LOG` selects (a directive such as `info` or
/// `tributary=debug,lance=warn`), else the level `TRIBUTARY_LOG` names, else warnings (a
/// wait for another process's write lease, a write resolved after a failure).
fn log_to_stderr(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| {
            let named = std::env::var("TRIBUTARY_LOG").unwrap_or_default();
            let level = match named.as_str() {
                level @ ("error" | "info" | "debug" | "trace") => level,
                _ => "warn",
            };
            EnvFilter::new(level)
        });
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_ansi(false);
    match format {
        LogFormat::Text => builder.with_target(false).without_time().init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// A duration such as `7d`, `12h`, `30m`, `90s` or `0s`.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` needs a unit: s, m, h or d (e.g. 7d)"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` does not start with a number"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "unknown unit `{unit}` in `{text}`: use s, m, h or d"
            ))
        }
    };
    number
        .checked_mul(seconds)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is too long"))
}

fn read_input(file: &str) -> Result<String, Failure> {
    if file == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::reading("standard input", e))?;
        Ok(text)
    } else {
        std::fs::read_to_string(file).map_err(|e| Failure::reading(file, e))
    }
}
