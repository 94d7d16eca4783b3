//! Where a command runs: on a graph opened here, or on a server (`--server URL`).

use std::time::Duration;

use arrow_array::RecordBatch;
use tributary::{
    At, CleanupReport, CommitRecord, Direction, FoldOutcome, Graph, IngestStatus, LoadOptions,
    LoadOutcome, ReadOptions, RejectPolicy, SearchQuery, View,
};

use crate::remote::Remote;
use crate::Failure;

pub enum Backend {
    Local(Box<Graph>),
    Remote(Remote),
}

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

impl Backend {
    pub async fn open(graph: &str, server: &ServerArgs) -> Result<Backend, Failure> {
        Ok(match &server.server {
            Some(url) => Backend::Remote(Remote::new(url, graph, server.token.clone())),
            None => Backend::Local(Box::new(Graph::open(graph).await?)),
        })
    }

    pub async fn load(&self, text: String, options: &LoadOptions) -> Result<LoadOutcome, Failure> {
        match self {
            Backend::Local(graph) => Ok(graph.load(&text, options).await?),
            Backend::Remote(remote) => remote.load(text, options).await,
        }
    }

    pub async fn read(
        &self,
        type_name: &str,
        options: &ReadOptions,
    ) -> Result<RecordBatch, Failure> {
        match self {
            Backend::Local(graph) => Ok(graph.read(type_name, options).await?),
            Backend::Remote(remote) => remote.read(type_name, options).await,
        }
    }

    pub async fn get(
        &self,
        type_name: &str,
        key: &str,
        view: View,
    ) -> Result<Option<RecordBatch>, Failure> {
        match self {
            Backend::Local(graph) => Ok(graph.get(type_name, key, view).await?),
            Backend::Remote(remote) => remote.get(type_name, key, &view).await,
        }
    }

    pub async fn neighbors(
        &self,
        type_name: &str,
        key: &str,
        edge: &str,
        direction: Direction,
        view: View,
    ) -> Result<RecordBatch, Failure> {
        match self {
            Backend::Local(graph) => Ok(graph
                .neighbors(type_name, key, edge, direction, view)
                .await?),
            Backend::Remote(remote) => {
                remote
                    .neighbors(type_name, key, edge, direction, &view)
                    .await
            }
        }
    }

    pub async fn search(
        &self,
        type_name: &str,
        query: &SearchQuery,
        k: usize,
        view: View,
    ) -> Result<RecordBatch, Failure> {
        match self {
            Backend::Local(graph) => Ok(graph.search(type_name, query, k, view).await?),
            Backend::Remote(remote) => remote.search(type_name, query, k, &view).await,
        }
    }

    pub async fn log(&self, branch: &str, limit: usize) -> Result<Vec<CommitRecord>, Failure> {
        match self {
            Backend::Local(graph) => Ok(graph.log(branch, limit).await?),
            Backend::Remote(remote) => remote.log(branch, limit).await,
        }
    }

    pub async fn schema(&self) -> Result<String, Failure> {
        match self {
            Backend::Local(graph) => Ok(graph.schema_source().to_owned()),
            Backend::Remote(remote) => remote.schema().await,
        }
    }

    pub async fn ingest_status(&self, branch: &str) -> Result<IngestStatus, Failure> {
        match self {
            Backend::Local(graph) => Ok(graph.ingest_status(branch).await?),
            Backend::Remote(remote) => remote.ingest_status(branch).await,
        }
    }

    pub async fn fold(&self, branch: &str, halt: bool) -> Result<FoldOutcome, Failure> {
        match self {
            Backend::Local(graph) => {
                let policy = if halt {
                    RejectPolicy::Halt
                } else {
                    RejectPolicy::DeadLetter
                };
                Ok(graph.fold_with_policy(branch, policy).await?)
            }
            Backend::Remote(remote) => remote.fold(branch, halt).await,
        }
    }

    pub async fn rejects(&self, at: &At) -> Result<RecordBatch, Failure> {
        match self {
            Backend::Local(graph) => Ok(graph.rejects(at).await?),
            Backend::Remote(remote) => remote.rejects(at).await,
        }
    }

    pub async fn cleanup(&self, older_than: Duration) -> Result<CleanupReport, Failure> {
        match self {
            Backend::Local(graph) => Ok(graph.cleanup(older_than).await?),
            Backend::Remote(remote) => remote.cleanup(older_than).await,
        }
    }
}
