//! Where a command runs: on a graph opened here, or on a server (`--server URL`). Both
//! are reached through the engine's `GraphOps`, so a command is written once.

use tributary::{Graph, GraphBuilder, GraphOps, SessionCaches, StoreOptions};

use crate::remote::Remote;
use crate::Failure;

/// The help heading of the options that reach a server (not `serve`'s own).
pub const CLIENT: &str = "Client options (run on a server)";
/// The help heading of the options that say how storage is reached.
const STORAGE: &str = "Storage options";

/// `--server` and `--token` (or `TRIBUTARY_SERVER` / `TRIBUTARY_TOKEN`, or
/// `--token-file`, so a token never has to appear in a process listing), and `--ca-cert`
/// for a server whose certificate the system does not trust.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Run the command on a `tributary serve` at this URL; GRAPH is then the graph id.
    /// `ingest` takes several (repeated or comma-separated): servers that each own some
    /// shards (`serve --shards`), each line going to the owner of its key's shard.
    #[arg(long, global = true, env = "TRIBUTARY_SERVER", value_delimiter = ',', help_heading = CLIENT)]
    pub server: Vec<String>,
    /// Bearer token for --server. Prefer TRIBUTARY_TOKEN or --token-file: a command
    /// line is visible to every user of the machine.
    #[arg(long, global = true, env = "TRIBUTARY_TOKEN", hide_env_values = true, help_heading = CLIENT)]
    pub token: Option<String>,
    /// Read the bearer token for --server from this file (its first line); it wins over
    /// --token.
    #[arg(long, global = true, env = "TRIBUTARY_TOKEN_FILE", help_heading = CLIENT)]
    pub token_file: Option<std::path::PathBuf>,
    /// Trust this PEM certificate (a CA's, or the server's own) for an https:// --server,
    /// besides the system's roots.
    #[arg(long, global = true, env = "TRIBUTARY_CA_CERT", help_heading = CLIENT)]
    pub ca_cert: Option<std::path::PathBuf>,
    /// An object-store setting for a graph on S3, KEY=VALUE; repeat for more (e.g.
    /// `--store-option aws_endpoint=http://127.0.0.1:9000 --store-option allow_http=true`).
    /// The standard AWS_* environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    /// AWS_REGION, AWS_ENDPOINT, ...) fills what is not given.
    #[arg(long = "store-option", global = true, value_name = "KEY=VALUE", help_heading = STORAGE,
          value_parser = StoreOptions::parse_setting)]
    pub store_options: Vec<(String, String)>,
    /// MiB of Lance metadata (manifests, fragment and index metadata) each open graph may
    /// cache; the least recently used goes first.
    #[arg(long, global = true, value_name = "MIB", env = "TRIBUTARY_METADATA_CACHE_MIB", help_heading = STORAGE,
          default_value_t = SessionCaches::default().metadata_bytes >> 20)]
    pub metadata_cache_mib: usize,
    /// MiB of index pages (key lookups, text and vector search) each open graph may cache.
    #[arg(long, global = true, value_name = "MIB", env = "TRIBUTARY_INDEX_CACHE_MIB", help_heading = STORAGE,
          default_value_t = SessionCaches::default().index_bytes >> 20)]
    pub index_cache_mib: usize,
}

impl ServerArgs {
    /// How to open `graph` here, with the store options given.
    pub fn local(&self, graph: &str) -> GraphBuilder {
        Graph::builder(graph).store_options(self.store())
    }

    /// The store options given: settings and cache bounds.
    pub fn store(&self) -> StoreOptions {
        StoreOptions {
            settings: self.store_options.iter().cloned().collect(),
            caches: SessionCaches {
                metadata_bytes: self.metadata_cache_mib.saturating_mul(1 << 20),
                index_bytes: self.index_cache_mib.saturating_mul(1 << 20),
            },
            ..Default::default()
        }
    }

    /// The client of the server named by `--server`, for `graph`; `None` without one.
    pub fn remote(&self, graph: &str) -> Result<Option<Remote>, Failure> {
        let mut remotes = self.remotes(graph)?;
        if remotes.len() > 1 {
            return Err(Failure::usage(format!(
                "{} servers given (--server); only `ingest` takes several, sending each line \
                 to the server that owns its shard",
                remotes.len()
            )));
        }
        Ok(remotes.pop())
    }

    /// The clients of every server `--server` names, for `graph`.
    pub fn remotes(&self, graph: &str) -> Result<Vec<Remote>, Failure> {
        self.server
            .iter()
            .map(|url| self.remote_at(url, graph))
            .collect()
    }

    fn remote_at(&self, url: &str, graph: &str) -> Result<Remote, Failure> {
        match reqwest::Url::parse(url) {
            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
            Ok(_) | Err(_) => {
                return Err(Failure::usage(format!(
                    "--server `{url}` is not an http:// or https:// URL"
                )))
            }
        }
        let token = match &self.token_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| Failure::reading(&path.display().to_string(), e))?;
                let token = text.lines().next().unwrap_or_default().trim().to_owned();
                if token.is_empty() {
                    return Err(Failure::usage(format!(
                        "{} holds no token on its first line",
                        path.display()
                    )));
                }
                Some(token)
            }
            None => self.token.clone(),
        };
        let mut http = reqwest::Client::builder();
        if let Some(path) = &self.ca_cert {
            let pem = std::fs::read(path)
                .map_err(|e| Failure::reading(&path.display().to_string(), e))?;
            let certificate = reqwest::Certificate::from_pem(&pem).map_err(|e| {
                Failure::usage(format!("{}: not a PEM certificate: {e}", path.display()))
            })?;
            http = http.add_root_certificate(certificate);
        }
        let http = http
            .build()
            .map_err(|e| Failure::usage(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Remote::new(url, graph, token, http))
    }
}

/// Open `graph` here, or reach it on the server `--server` names.
pub async fn open(graph: &str, server: &ServerArgs) -> Result<Box<dyn GraphOps>, Failure> {
    Ok(match server.remote(graph)? {
        Some(remote) => Box::new(remote),
        None => Box::new(server.local(graph).open().await?),
    })
}
