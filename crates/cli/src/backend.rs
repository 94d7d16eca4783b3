//! Where a command runs: on a graph opened here, or on a server (`--server URL`). Both
//! are reached through the engine's `GraphOps`, so a command is written once.

use tributary::{Graph, GraphOps};

use crate::remote::Remote;
use crate::Failure;

/// `--server` and `--token` (or `TRIBUTARY_SERVER` / `TRIBUTARY_TOKEN`).
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Run the command on a `tributary serve` at this URL; GRAPH is then the graph id.
    #[arg(long, global = true, env = "TRIBUTARY_SERVER")]
    pub server: Option<String>,
    /// Bearer token for --server.
    #[arg(long, global = true, env = "TRIBUTARY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

impl ServerArgs {
    /// The client of the server named by `--server`, for `graph`; `None` without one.
    pub fn remote(&self, graph: &str) -> Result<Option<Remote>, Failure> {
        let Some(url) = self.server.as_ref() else {
            return Ok(None);
        };
        match reqwest::Url::parse(url) {
            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
            Ok(_) | Err(_) => {
                return Err(Failure::usage(format!(
                    "--server `{url}` is not an http:// or https:// URL"
                )))
            }
        }
        Ok(Some(Remote::new(url, graph, self.token.clone())))
    }
}

/// Open `graph` here, or reach it on the server `--server` names.
pub async fn open(graph: &str, server: &ServerArgs) -> Result<Box<dyn GraphOps>, Failure> {
    Ok(match server.remote(graph)? {
        Some(remote) => Box::new(remote),
        None => Box::new(Graph::open(graph).await?),
    })
}
