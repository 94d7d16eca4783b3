//! `tributary changes`: the change feed, commit by commit after the one the consumer
//! names, as NDJSON change records; `--follow` keeps going as commits are published.
//! Embedded and remote alike, page by page through `GraphOps`.

use std::io::Write;
use std::time::Duration;

use tributary::{ChangeRecord, ChangesQuery};

use crate::backend::{self, ServerArgs};
use crate::Failure;

/// How often `--follow` looks for a new head.
const FOLLOW_POLL: Duration = Duration::from_millis(100);
/// Commits per page asked of the graph.
const PAGE_COMMITS: usize = 256;

#[derive(Debug, clap::Args)]
pub struct ChangesArgs {
    /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
    pub graph: String,
    /// The last commit you processed (`log` lists them): the feed starts after it.
    /// `head` starts at the branch's head now (with `--follow`: only what comes next).
    #[arg(long, value_name = "COMMIT")]
    pub since: String,
    /// The branch whose commits to follow; a merge into it shows the merged changes.
    #[arg(long, default_value = tributary::MAIN_BRANCH)]
    pub branch: String,
    /// Only these types (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "TYPE,…")]
    pub types: Vec<String>,
    /// Keep running: print commits as they are published (folds, loads, merges) until
    /// interrupted or the reader of the output goes away.
    #[arg(long)]
    pub follow: bool,
    /// Stop after this many commits.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

pub async fn run(
    args: ChangesArgs,
    server: &ServerArgs,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let opened = backend::open(&args.graph, server).await?;
    let since = if args.since == "head" {
        let head = opened.log(&args.branch, 1).await?;
        head.first()
            .map(|commit| commit.id.to_string())
            .ok_or_else(|| Failure::io(format!("branch `{}` has no commits", args.branch)))?
    } else {
        args.since.clone()
    };
    let mut query = ChangesQuery {
        branch: args.branch.clone(),
        since,
        types: args.types.clone(),
        max_commits: PAGE_COMMITS,
    };
    let mut left = args.limit;
    loop {
        query.max_commits = left.unwrap_or(PAGE_COMMITS).clamp(1, PAGE_COMMITS);
        let page = opened.changes(&query).await?;
        let commits = page.iter().filter_map(ChangeRecord::closes).count();
        for record in &page {
            let line = serde_json::to_string(record).map_err(|e| Failure::io(e.to_string()))?;
            writeln!(out, "{line}").map_err(|e| Failure::io(e.to_string()))?;
        }
        out.flush().map_err(|e| Failure::io(e.to_string()))?;
        if let Some(last) = page.iter().rev().find_map(ChangeRecord::closes) {
            query.since = last.to_string();
        }
        if let Some(left) = left.as_mut() {
            *left = left.saturating_sub(commits);
            if *left == 0 {
                return Ok(());
            }
        }
        if commits == 0 {
            if !args.follow {
                return Ok(());
            }
            tokio::time::sleep(FOLLOW_POLL).await;
        }
    }
}
