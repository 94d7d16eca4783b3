//! The command line's grammar: every command, its arguments and their help.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::backend::ServerArgs;
use crate::output::Format;
use crate::query::{AtArgs, ViewArgs};
use crate::Failure;
use crate::{branch, changes, embedder, export, query, serve, snapshot};

pub(crate) const EXIT_HELP: &str =
    "Exit status: 0 success (also when the reader of the output goes \
away, as `| head` does, except for `ingest`, whose unsent lines make it 74); 2 usage \
error; 64 a usage error found after parsing (--server not an http(s) URL, options that do \
not go together, a --watch interval); 65 invalid input \
(the message names the line and field; also `ingest --strict` and `--fail-on-reject`); 66 \
not found (a graph, branch, type, row or input file); 70 internal error; 74 I/O error \
(reading input, writing output); 75 conflict, fenced or unavailable (retry); 77 \
unauthorized or forbidden; 79 a merge conflict (keys changed differently on both \
branches: retrying does not help, `branch merge --prefer` does); 130 `ingest` stopped by a signal (what it acknowledged stays \
durable).\n\nLogs go to stderr: RUST_LOG (e.g. `info`, `tributary=debug`) or TRIBUTARY_LOG \
(a level) chooses what, --log-format json makes each line a JSON object.";

/// A graph store on Lance tables.
///
/// GRAPH is where a graph lives: a local directory, a file:// URI, or s3://bucket/prefix
/// (reached with the AWS_* environment or --store-option).
#[derive(Debug, Parser)]
#[command(name = "tributary", version, after_help = EXIT_HELP)]
pub(crate) struct Cli {
    /// Output format [default: table on a terminal, ndjson otherwise]
    #[arg(long, global = true, value_enum, help_heading = "Global options")]
    pub(crate) format: Option<Format>,

    /// How log lines on stderr are written: `text`, or `json` (one object per line, for a
    /// log collector).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "TRIBUTARY_LOG_FORMAT",
        help_heading = "Global options"
    )]
    pub(crate) log_format: LogFormat,

    #[command(flatten)]
    pub(crate) server: ServerArgs,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
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
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
        graph: String,
        /// Node or edge type name.
        r#type: String,
        /// SQL predicate, e.g. "age > 30 AND status = 'active'".
        #[arg(long)]
        filter: Option<String>,
        /// Comma-separated columns to show.
        #[arg(long, value_delimiter = ',')]
        select: Option<Vec<String>>,
        /// At most this many rows (every row when not given).
        #[arg(long)]
        limit: Option<usize>,
        /// Skip this many rows first (after --order-by).
        #[arg(long)]
        offset: Option<usize>,
        /// Sort by these columns (comma-separated; `age:desc` for descending), the first
        /// deciding first. Every matching row is read to sort them.
        #[arg(long, value_delimiter = ',', value_name = "COLUMN[:desc],...")]
        order_by: Vec<String>,
        #[command(flatten)]
        view: ViewArgs,
    },
    /// Count the rows of a node or edge type (that match --filter).
    Count {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
        graph: String,
        /// Node or edge type name.
        r#type: String,
        /// SQL predicate, e.g. "age > 30".
        #[arg(long)]
        filter: Option<String>,
        #[command(flatten)]
        view: ViewArgs,
    },
    /// Show one node or edge by key (an edge's key is `from->to` unless it declares @key).
    Get {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
        graph: String,
        /// Node or edge type name.
        r#type: String,
        /// The row's key.
        key: String,
        /// Comma-separated columns to show (all when not given).
        #[arg(long, value_delimiter = ',')]
        select: Option<Vec<String>>,
        #[command(flatten)]
        view: ViewArgs,
    },
    /// Which shard each key of a `@stream(shards = N)` type (node or edge: `SRC->DST` keys an edge) is in: where to send it
    /// when processes own shares of the shards (`serve --shards`, `ingest --shards`).
    Shards {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
        graph: String,
        /// The node type.
        r#type: String,
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Show the nodes connected to a node over an edge type.
    Neighbors {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
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
        /// One row per edge, with the edge's properties (`WorksAt.since`) after the node's
        /// columns.
        #[arg(long)]
        with_edges: bool,
        /// Comma-separated columns to show (all when not given).
        #[arg(long, value_delimiter = ',')]
        select: Option<Vec<String>>,
        #[command(flatten)]
        view: ViewArgs,
    },
    /// Search a type: full text over its @index(fts) fields, or nearest neighbours of a
    /// vector (or of a text's embedding) in its indexed Vector field. Rows come best first
    /// with `_score` (text, BM25) or `_distance` (vector: the squared Euclidean distance,
    /// Lance's `l2`, lowest first).
    #[command(group = clap::ArgGroup::new("query").required(true))]
    Search {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
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
        /// Comma-separated columns to show (all when not given).
        #[arg(long, value_delimiter = ',')]
        select: Option<Vec<String>>,
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
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
        graph: String,
        /// The branch whose commits to show.
        #[arg(long, default_value = tributary::MAIN_BRANCH)]
        branch: String,
        /// At most this many commits, newest first.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// As a table, also show each commit's parents, its rows per table, the shards it
        /// folded and the table versions it pins (JSON always has them).
        #[arg(long)]
        wide: bool,
    },
    /// Print a commit as a snapshot any Lance reader can open (JSON unless `--format`
    /// says otherwise): per node and edge type, the table's URI, the Lance version the
    /// commit pins (and the Lance branch holding it, off `main`), its key and columns.
    /// With `--pin NAME` cleanup keeps the snapshot's versions until `--unpin NAME`.
    ///
    /// Example: tributary snapshot g --pin nightly, then in Python
    /// lance.dataset(uri, version=version) for each table (with a `lance_branch`:
    /// lance.dataset(uri).checkout_version((lance_branch, version))). Like a branch head, a
    /// pin keeps its tables' versions from the pinned one on.
    Snapshot(snapshot::SnapshotArgs),
    /// Write a commit's rows as NDJSON load lines (node types, then edge types, every
    /// field; published rows only), so a graph made with the same schema takes them back:
    ///
    ///     tributary schema g > g.tg && tributary export g g.ndjson
    ///
    ///     tributary init h --schema g.tg && tributary load h g.ndjson
    ///
    /// With a FILE it prints what it wrote: the commit and the rows per type.
    Export(export::ExportArgs),
    /// Print what each commit after `--since` changed, in commit order, as NDJSON (always:
    /// `--format` other than ndjson is refused): per
    /// type the rows inserted and updated (`"op":"insert"`/`"update"`, every column under
    /// `row`) and the keys deleted (`"op":"delete"`), then a `"op":"commit"` record naming
    /// the commit. Store that id with what you applied and pass it as `--since` to resume
    /// exactly after it. Computed from the Lance versions each commit pins, never by
    /// comparing whole tables.
    ///
    /// Example: tributary changes g --since head --follow | my-consumer
    Changes(changes::ChangesArgs),
    /// Create, list, delete and merge branches. Every read and write command takes
    /// `--branch NAME`, streaming ingest and its folds included.
    #[command(subcommand)]
    Branch(branch::BranchAction),
    /// Print the graph's schema as its text (what `schema apply` takes, also when stdout
    /// is a file or a pipe; `--format json` for `{"schema": "..."}`), or change it
    /// (`schema apply`).
    Schema(SchemaArgs),
    /// Remove what no reader at the head needs: WAL files and generations already folded
    /// and published, old shard manifests, and table versions older than the retention
    /// window that no branch head and no pin (`snapshot --pin`) holds (reads at other commits
    /// older than that may fail). `kept_for_pins` names the pins it honoured.
    Cleanup {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
        graph: String,
        /// Retention window for old table versions: e.g. 7d, 12h, 30m, 90s, 0s.
        #[arg(long, default_value = "7d", value_parser = parse_duration)]
        older_than: std::time::Duration,
    },
    /// Verify that every file the heads of all branches pin is there and reads back whole:
    /// each table version's manifest, data files and deletion vectors (to the row counts
    /// the manifests record) and indexes, and the unfolded MemWAL generations and WAL
    /// entries of streamed tables. Reads only, and reads everything: as long as a full
    /// scan. Prints one record per problem (branch, commit, table, what is wrong), then a
    /// summary; exits 70 when anything is wrong. Runs where the graph's storage is
    /// (not through --server).
    Check {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix.
        graph: String,
    },
    /// List dead letters: ingested rows a fold could not apply (missing edge endpoint,
    /// @card or @unique broken), with the fold commit that recorded them.
    Rejects {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
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
pub(crate) struct IngestArgs {
    #[command(subcommand)]
    pub(crate) action: Option<IngestAction>,
    /// The graph to write to.
    #[arg(required = true)]
    pub(crate) graph: Option<String>,
    /// NDJSON file, or `-` for standard input.
    #[arg(default_value = "-")]
    pub(crate) file: String,
    #[arg(long, default_value = tributary::MAIN_BRANCH)]
    pub(crate) branch: String,
    /// Stop at the first invalid line (exit 65); nothing after it is acknowledged.
    #[arg(long)]
    pub(crate) strict: bool,
    /// Only make rows durable; do not fold them (no background folder, no final fold).
    #[arg(long)]
    pub(crate) no_fold: bool,
    /// Exit 65 (after the summary) when a line was rejected, or a fold of this run put a
    /// row in the dead letters (`tributary rejects GRAPH`): a script notices. With
    /// --server the server folds, so only rejected lines count.
    #[arg(long)]
    pub(crate) fail_on_reject: bool,
    /// At most this many lines per send (lines that arrive during a send are batched).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) batch_lines: u64,
    /// Send as this producer, for exactly-once delivery: the input's lines get sequence
    /// numbers (--sequence for the first, then one more per line), and lines at or below
    /// what was already acknowledged for the producer are acknowledged again without
    /// being written. Running the same command again after a crash or a dropped
    /// connection writes only what was not acknowledged. One stream per producer at a time.
    #[arg(long)]
    pub(crate) producer: Option<String>,
    /// The sequence number of the input's first line (needs --producer).
    #[arg(long, requires = "producer")]
    pub(crate) sequence: Option<u64>,
    /// Write only these shards (numbers, comma-separated: `@stream(shards = N)` numbers a
    /// type's shards 0..N-1; an unsharded type has shard 0), so several processes can
    /// each own some without fencing each other. A send with a row of another shard is
    /// refused whole, naming the shard. Embedded only (a server owns what `serve
    /// --shards` says).
    #[arg(long, value_delimiter = ',', value_name = "N,N,...")]
    pub(crate) shards: Option<Vec<u32>>,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct SchemaArgs {
    #[command(subcommand)]
    pub(crate) action: Option<SchemaAction>,
    /// The graph whose schema to print.
    #[arg(required = true)]
    pub(crate) graph: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum SchemaAction {
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
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
        graph: String,
        /// The new schema file.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum IngestAction {
    /// Per enrolled table: shards, writer epoch, unfolded generations, rows and bytes, rows
    /// only in a WAL (no generation holds them yet: a live writer's tail, or one a stopped
    /// process left for the next fold), age of the oldest unfolded generation, and the
    /// last fold commit. Then, if streams were sent as producers, a second table: each
    /// producer's acknowledged mark (the highest sequence acknowledged) and folded mark
    /// (the highest whose lines the graph holds); in JSON, one object: {"shards": [...],
    /// "producers": [...]}. CSV holds one table: the shards.
    Status {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
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
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
        graph: String,
        #[arg(long, default_value = tributary::MAIN_BRANCH)]
        branch: String,
        /// Refuse the fold if any row fails validation, instead of writing dead letters.
        #[arg(long)]
        halt: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum PublisherArg {
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
pub(crate) enum ModeArg {
    Upsert,
    Insert,
}

/// A `--nearest` vector: a JSON array of numbers.
pub(crate) fn parse_vector(text: &str) -> Result<Vec<f32>, Failure> {
    serde_json::from_str::<Vec<f32>>(text).map_err(|e| {
        Failure::usage(format!(
            "--nearest must be a JSON array of numbers like \"[0.1, 0.2]\": {e}"
        ))
    })
}

/// A duration such as `7d`, `12h`, `30m`, `90s` or `0s`.
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
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
