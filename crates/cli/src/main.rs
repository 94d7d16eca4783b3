//! `tributary`: the command-line interface to a Tributary graph.

mod allocator;
mod args;
mod backend;
mod branch;
mod changes;
mod documents;
mod embedder;
mod export;
mod failure;
mod ingest;
mod output;
mod query;
mod remote;
mod remote_ingest;
mod routed_ingest;
mod serve;
mod signals;
mod snapshot;

use std::io::{Read, Write};
use std::process::ExitCode;

use tributary::{
    At, Direction, ErrorKind, LoadMode, LoadOptions, ReadOptions, RejectPolicy, SearchQuery,
};

use args::{
    parse_vector, Cli, Command, IngestAction, LogFormat, ModeArg, SchemaAction, SchemaArgs,
};
use backend::ServerArgs;
pub(crate) use failure::Failure;

use output::Format;

#[global_allocator]
static ALLOCATOR: allocator::ByCommand = allocator::ByCommand;

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

/// The command line, parsed as `Cli` declares it. `serve --help` leaves out the options
/// that reach a server: they are global, so every other command takes them.
fn parse_command_line() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().try_get_matches_from(std::env::args_os());
    let matches = match matches {
        Ok(matches) => matches,
        Err(error) => {
            let args: Vec<String> = std::env::args().skip(1).collect();
            let serve = args
                .iter()
                .find(|a| !a.starts_with('-'))
                .is_some_and(|a| a == "serve");
            let help = matches!(
                error.kind(),
                clap::error::ErrorKind::DisplayHelp
                    | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            );
            if serve && help {
                print_serve_help(args.iter().any(|a| a == "--help"));
            }
            error.exit()
        }
    };
    Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

/// `serve`'s help without the client's options, then exit.
fn print_serve_help(long: bool) {
    use clap::CommandFactory;
    let mut command = Cli::command();
    command.build();
    let Some(serve) = command.find_subcommand_mut("serve") else {
        return;
    };
    let mut serve = ["server", "token", "token_file", "ca_cert"]
        .into_iter()
        .fold(serve.clone(), |serve, id| {
            serve.mut_arg(id, |arg| arg.hide(true))
        });
    let printed = if long {
        serve.print_long_help()
    } else {
        serve.print_help()
    };
    std::process::exit(i32::from(printed.is_err()));
}

fn main() -> ExitCode {
    map_large_allocations();
    let cli = parse_command_line();
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
    if let (Command::Changes(_), Some(chosen)) = (&cli.command, cli.format) {
        if chosen != Format::Ndjson {
            eprintln!(
                "error: `changes` writes one NDJSON change record per line; --format {} does \
                 not apply (leave it out, or pass ndjson)",
                format!("{chosen:?}").to_lowercase()
            );
            return ExitCode::from(failure::USAGE);
        }
    }
    let format = match (&cli.command, cli.format) {
        // A schema is shown as its text whatever stdout is, so `schema g > s.tg` gives a
        // file `schema apply` takes; its JSON form only when asked for.
        (Command::Schema(SchemaArgs { action: None, .. }), None) => Format::Table,
        // A snapshot is a document for programs: JSON unless asked otherwise.
        (Command::Snapshot(args), None) if !args.pins && args.unpin.is_none() => Format::Json,
        (_, chosen) => Format::resolve(chosen),
    };
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
                    "kind": ErrorKind::MergeConflict.name(),
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
            // Nothing to load is no error: a script that loads whatever a day produced
            // goes on. The graph is opened first, so a wrong one still fails.
            if text.trim_start_matches('\u{feff}').trim().is_empty() {
                eprintln!("nothing to load: {file} holds no lines; nothing was written");
                return Ok(());
            }
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
            offset,
            order_by,
            view,
        } => {
            let opened = backend::open(&graph, &server).await?;
            let options = ReadOptions {
                at: view.at.at()?,
                filter,
                select,
                limit,
                offset,
                order_by: order_by
                    .iter()
                    .map(|key| tributary::SortKey::parse(key))
                    .collect::<tributary::Result<_>>()?,
                fresh: view.fresh,
            };
            let batch = opened.read(&r#type, &options).await?;
            emit(&mut out, &batch)
        }
        Command::Count {
            graph,
            r#type,
            filter,
            view,
        } => {
            let opened = backend::open(&graph, &server).await?;
            let options = ReadOptions {
                at: view.at.at()?,
                filter,
                fresh: view.fresh,
                ..ReadOptions::default()
            };
            let count = opened.count(&r#type, &options).await?;
            summarize(&mut out, output::Summary::new().with("count", count))
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
            select,
            view,
        } => {
            let opened = backend::open(&graph, &server).await?;
            let view = view.view()?;
            match opened.get(&r#type, &key, &view).await? {
                Some(batch) => emit(&mut out, &output::select(batch, select.as_deref())?),
                None => {
                    // Acknowledged and not folded yet: the one read that would see it.
                    let pending = match (&view.at, view.fresh) {
                        (At::Branch(_), false) => {
                            let fresh = tributary::View::fresh(view.at.clone());
                            matches!(opened.get(&r#type, &key, &fresh).await, Ok(Some(_)))
                        }
                        _ => false,
                    };
                    let hint = if pending {
                        "; it is acknowledged and not folded yet: `--fresh` reads it, and a \
                         fold (`tributary ingest fold`) publishes it"
                    } else {
                        ""
                    };
                    Err(Failure::of(
                        ErrorKind::NoRow,
                        format!("{type} `{key}` not found{hint}", type = r#type),
                    ))
                }
            }
        }
        Command::Neighbors {
            graph,
            r#type,
            key,
            edge,
            incoming,
            with_edges,
            select,
            view,
        } => {
            let opened = backend::open(&graph, &server).await?;
            let direction = if incoming {
                Direction::In
            } else {
                Direction::Out
            };
            let batch = opened
                .neighbors(&r#type, &key, &edge, direction, &view.view()?, with_edges)
                .await?;
            emit(&mut out, &output::select(batch, select.as_deref())?)
        }
        Command::Search {
            graph,
            r#type,
            text,
            nearest,
            similar,
            k,
            select,
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
            emit(&mut out, &output::select(batch, select.as_deref())?)
        }
        Command::Log {
            graph,
            branch,
            limit,
            wide,
        } => {
            let opened = backend::open(&graph, &server).await?;
            let commits = opened.log(&branch, limit).await?;
            output::write_commits(&mut out, format, &commits, wide).map_err(Failure::io)
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
        Command::Snapshot(args) => snapshot::run(args, &server, format, &mut out).await,
        Command::Changes(args) => changes::run(args, &server, &mut out).await,
        Command::Export(args) => export::run(args, &server, format, &mut out).await,
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
                .with("bytes", report.memwal.bytes + report.version_bytes)
                .with(
                    "kept_for_pins",
                    report
                        .kept_for_pins
                        .iter()
                        .map(|kept| (kept.pin.clone(), kept.commit.clone().into()))
                        .collect::<serde_json::Map<String, serde_json::Value>>(),
                );
            summarize(&mut out, summary)
        }
        Command::Check { graph } => {
            if server.remote(&graph)?.is_some() {
                return Err(Failure::usage(
                    "check reads the graph's files directly: run it without --server, where \
                     the graph's storage is reachable",
                ));
            }
            let opened = server.local(&graph).open().await?;
            let verbose = std::io::IsTerminal::is_terminal(&std::io::stderr());
            let report = opened
                .check(|table| {
                    if verbose {
                        eprintln!("checking {table}");
                    }
                })
                .await?;
            for problem in &report.problems {
                output::Summary::new()
                    .with("branch", problem.branch.clone())
                    .with("commit", problem.commit.clone())
                    .with("table", problem.table.clone())
                    .with("problem", problem.problem.clone())
                    .write(&mut out, format)
                    .map_err(Failure::io)?;
            }
            let summary = output::Summary::new()
                .with("ok", report.problems.is_empty())
                .with("problems", report.problems.len())
                .with("branches", report.branches)
                .with("table_versions", report.table_versions)
                .with("fragments", report.fragments)
                .with("rows", report.rows)
                .with("indexes", report.indexes)
                .with("generations", report.generations)
                .with("wal_entries", report.wal_entries);
            summarize(&mut out, summary)?;
            match report.problems.len() {
                0 => Ok(()),
                n => Err(Failure::internal(format!(
                    "the graph is damaged: {n} problem{} (listed above)",
                    if n == 1 { "" } else { "s" }
                ))),
            }
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
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let fmt = match format {
        LogFormat::Text => fmt.with_target(false).without_time().boxed(),
        LogFormat::Json => fmt.json().boxed(),
    };
    tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(
            StoreRetries.with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                meta.target() == tributary::STORE_RETRY_TARGET
            })),
        )
        .init();
}

/// Counts the store client's retries (its log lines) for the metrics, whatever the log
/// level shows.
struct StoreRetries;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for StoreRetries {
    fn on_event(
        &self,
        _event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        tributary::count_store_retry();
    }
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
