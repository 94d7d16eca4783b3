//! `tributary serve`: the HTTP server over every graph under a root directory or S3 prefix.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use tributary_server::{AppState, Limits, ServerConfig, Tls, Tokens};

use crate::Failure;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Directory (or `s3://bucket/prefix`) whose sub-folders are the graphs (a graph's id
    /// is its folder name). On S3, --store-option and the AWS_* environment say how to
    /// reach it.
    root: String,
    /// Address to listen on (port 0 picks a free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    bind: String,
    /// Bearer tokens, one per line: `TOKEN SCOPE GRAPH` (scope `read` or `write`, a write
    /// token may also read; GRAPH an id or `*`), or `TOKEN metrics *`, the only grant that
    /// reads /metrics. Without it nothing is checked.
    #[arg(long)]
    tokens: Option<PathBuf>,
    /// Allow creating graphs over the API (`tributary init --server …`).
    #[arg(long)]
    init: bool,
    /// Largest load body accepted (413 above it).
    #[arg(long, default_value_t = Limits::default().max_body_bytes)]
    max_body_bytes: usize,
    /// Longest ingest line accepted (a longer one is rejected, the stream goes on).
    #[arg(long, default_value_t = Limits::default().max_line_bytes)]
    max_line_bytes: usize,
    /// On SIGINT or SIGTERM: seconds requests in flight may take to finish before the
    /// server flushes every writer (what was acknowledged is then in generations, and any
    /// process's next fold publishes it) and exits 0.
    #[arg(long, default_value_t = Limits::default().shutdown_grace.as_secs())]
    shutdown_grace: u64,
    /// Loads of one graph running at once; beyond, a load is answered 503 with
    /// Retry-After (the CLI's remote commands report it as `unavailable`, exit 75).
    #[arg(long, default_value_t = Limits::default().max_loads)]
    max_loads: usize,
    /// Ingest streams of one graph open at once; beyond, 503 with Retry-After.
    #[arg(long, default_value_t = Limits::default().max_ingest_streams)]
    max_ingest_streams: usize,
    /// Connections open at once; beyond, a new one is answered 503 and closed.
    #[arg(long, default_value_t = Limits::default().max_connections)]
    max_connections: usize,
    /// Seconds a connection may take to send a request's headers (slow clients are cut).
    #[arg(long, default_value_t = Limits::default().header_read_timeout.as_secs())]
    header_read_timeout: u64,
    /// Seconds an ingest stream may send nothing before the server ends it (its
    /// acknowledged rows stay acknowledged).
    #[arg(long, default_value_t = Limits::default().ingest_idle_timeout.as_secs())]
    ingest_idle_timeout: u64,
    /// Seconds a load's whole body may take to arrive (a slow one holds a load place).
    #[arg(long, default_value_t = Limits::default().body_timeout.as_secs())]
    body_timeout: u64,
    /// Seconds a query (`query`, `sql`) may run before it is stopped and refused.
    #[arg(long, default_value_t = Limits::default().query_timeout.as_secs())]
    query_timeout: u64,
    /// The most rows a query answers; a query returning more is refused (it says to add
    /// LIMIT), never cut short.
    #[arg(long, default_value_t = Limits::default().max_query_rows)]
    max_query_rows: usize,
    /// Serve HTTPS with this PEM certificate chain (leaf first); needs --tls-key.
    /// Clients that do not trust its issuer pass it to --ca-cert.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Write only these shards of every graph (numbers, comma-separated; see `ingest
    /// --shards`): run one server per share of the shards, and send each row to the
    /// server that owns its shard. Sends with a row of another shard are refused (400,
    /// naming the shard). Default: all.
    #[arg(long, value_delimiter = ',', value_name = "N,N,...")]
    shards: Option<Vec<u32>>,
}

pub async fn run(args: ServeArgs, store: &crate::backend::ServerArgs) -> Result<(), Failure> {
    let local = !args.root.contains("://") || args.root.starts_with("file://");
    if local {
        let root = PathBuf::from(args.root.strip_prefix("file://").unwrap_or(&args.root));
        if args.init {
            std::fs::create_dir_all(&root).map_err(|e| {
                Failure::cannot_create(format!("cannot create {}: {e}", root.display()))
            })?;
        }
        if !root.is_dir() {
            return Err(Failure::not_found(format!(
                "{} is not a directory",
                root.display()
            )));
        }
        check_writable(&root)?;
    }
    let tokens = match &args.tokens {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Failure::not_found(format!("cannot read {}: {e}", path.display())))?;
            Some(
                Tokens::parse(&text)
                    .map_err(|e| Failure::invalid(format!("{}: {e}", path.display())))?,
            )
        }
        None => None,
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(Tls::from_pem_files(cert, key).map_err(Failure::invalid)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = tokio::net::TcpListener::bind(&args.bind)
        .await
        .map_err(|e| Failure::os(format!("cannot listen on {}: {e}", args.bind)))?;
    let address: SocketAddr = listener
        .local_addr()
        .map_err(|e| Failure::os(e.to_string()))?;
    if tls.is_none() && tokens.is_some() && !address.ip().is_loopback() {
        eprintln!(
            "warning: serving {address} without --tls-cert: tokens cross the network in clear"
        );
    }
    if tokens.is_none() && !address.ip().is_loopback() {
        eprintln!("warning: serving {address} without --tokens: anyone who can reach it may write");
    }
    let config = ServerConfig {
        root: args.root.trim_end_matches('/').to_owned(),
        store: store.store(),
        graph_settings: tributary::GraphSettings {
            owned_shards: args.shards.map(|s| s.into_iter().collect()),
            ..Default::default()
        },
        tokens,
        allow_init: args.init,
        tls,
        limits: Limits {
            max_body_bytes: args.max_body_bytes,
            max_line_bytes: args.max_line_bytes,
            shutdown_grace: std::time::Duration::from_secs(args.shutdown_grace),
            max_loads: args.max_loads.max(1),
            max_ingest_streams: args.max_ingest_streams.max(1),
            max_connections: args.max_connections.max(1),
            // A day at most: hyper adds it to the clock, which must not overflow.
            header_read_timeout: std::time::Duration::from_secs(
                args.header_read_timeout.clamp(1, 86_400),
            ),
            ingest_idle_timeout: std::time::Duration::from_secs(
                args.ingest_idle_timeout.clamp(1, 86_400),
            ),
            body_timeout: std::time::Duration::from_secs(args.body_timeout.clamp(1, 86_400)),
            query_timeout: std::time::Duration::from_secs(args.query_timeout.clamp(1, 86_400)),
            max_query_rows: args.max_query_rows.max(1),
            ..Limits::default()
        },
    };
    // Watch for stop signals before saying where to connect: from then on a SIGTERM
    // means a clean stop.
    let stop = crate::signals::stop_requested();
    // The first line says where to connect (a parent process may have asked for port 0).
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "listening on {scheme}://{address}");
    let _ = stdout.flush();
    tributary_server::serve(listener, AppState::new(config), stop)
        .await
        .map_err(|e| Failure::internal(format!("server failed: {e}")))
}

/// Refuse to serve a root, or a graph in it, that this process may not write (a read-only
/// mount, another owner's folder): a server that started would accept writes it cannot
/// make. A full disk is no reason to refuse: reads work, and writes succeed once space is
/// freed.
fn check_writable(root: &std::path::Path) -> Result<(), Failure> {
    let graphs = std::fs::read_dir(root)
        .map_err(|e| Failure::reading(&root.display().to_string(), e))?
        .filter_map(|entry| entry.ok())
        // A graph's folder holds its commit manifest or its publisher's record.
        .filter(|entry| {
            let path = entry.path();
            path.join(tributary::layout::MANIFEST).is_dir()
                || path.join(tributary::layout::PUBLISHER).is_file()
        })
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            (entry.path(), format!("graph `{name}`'s folder"))
        });
    let folders = std::iter::once((root.to_path_buf(), "the root folder".to_owned())).chain(graphs);
    for (folder, role) in folders {
        let probe = folder.join(format!(".tributary-write-probe-{}", std::process::id()));
        let created = std::fs::File::create(&probe);
        let _ = std::fs::remove_file(&probe);
        let Err(error) = created else { continue };
        let refusal = tributary::DiskRefusal::of_io(&error, "", true)
            .filter(|refusal| refusal.condition != tributary::DiskCondition::Full);
        if let Some(mut refusal) = refusal {
            refusal.role = role;
            return Err(Failure::of(
                refusal.condition.kind(),
                format!(
                    "cannot serve {}: {refusal}; a server must be able to write every graph \
                     it serves",
                    root.display()
                ),
            ));
        }
    }
    Ok(())
}
