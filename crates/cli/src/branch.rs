//! `tributary branch`: create, list, delete and merge branches, embedded or remote.

use std::io::Write;

use clap::Subcommand;
use tributary::{At, MergeKind, Prefer};

use crate::backend::{self, ServerArgs};
use crate::output::{self, Format};
use crate::Failure;

#[derive(Debug, Subcommand)]
pub enum BranchAction {
    /// Create a branch: a new line of commits starting from another branch's head (or
    /// any commit), isolated from it both ways. From a branch's head, everything
    /// acknowledged there by ingest before the command is folded first, so it is in the
    /// new branch. Costs a few small writes per table; no data is copied.
    Create {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
        graph: String,
        /// The new branch's name (letters, digits, `.`, `_`, `-`).
        name: String,
        /// The branch to start from.
        #[arg(long, default_value = tributary::MAIN_BRANCH, conflicts_with = "at")]
        from: String,
        /// Start from this commit instead of a branch's head.
        #[arg(long)]
        at: Option<String>,
    },
    /// List every branch with its head commit, `main` first.
    List { graph: String },
    /// Delete a branch (not `main`): its head goes at once. Its commits stay readable by
    /// id until a cleanup finds their versions needed by no branch (nor by the merge base
    /// of two) and removes them.
    Delete {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
        graph: String,
        /// The branch to delete.
        name: String,
    },
    /// Merge SOURCE into the `--into` branch (default `main`) as one commit there, with
    /// both heads as parents. If that branch has not moved since they forked, every
    /// change of SOURCE is taken (fast-forward); otherwise keys changed on one side take
    /// that side, and keys changed differently on both are a conflict (exit 79, the keys
    /// listed with both sides' values, nothing written) unless `--prefer` names the side
    /// that wins. A merge that would break an edge endpoint, `@card` or `@unique` is
    /// refused with the keys (exit 65). With nothing to take it is "up to date", names
    /// the head the target stays at and writes no commit.
    Merge {
        /// The graph: a directory, a file:// URI or s3://bucket/prefix; with --server, its id.
        graph: String,
        /// The branch whose changes are merged.
        source: String,
        /// The branch that receives them.
        #[arg(long, default_value = tributary::MAIN_BRANCH)]
        into: String,
        /// For keys changed differently on both sides: `source` takes the merged
        /// branch's change, `target` keeps the receiving branch's. Without it such keys
        /// refuse the merge.
        #[arg(long, value_enum)]
        prefer: Option<PreferArg>,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PreferArg {
    Source,
    Target,
}

pub async fn run(
    action: BranchAction,
    server: &ServerArgs,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let emit = |out: &mut dyn Write, batch: &arrow_array::RecordBatch| {
        output::write_batch(out, format, batch).map_err(Failure::io)
    };
    match action {
        BranchAction::Create {
            graph,
            name,
            from,
            at,
        } => {
            let opened = backend::open(&graph, server).await?;
            let from = match at {
                Some(commit) => At::Commit(commit.as_str().into()),
                None => At::branch(&from)?,
            };
            let commit = opened.create_branch(&name, &from).await?;
            let summary = output::Summary::new()
                .with("branch", name)
                .with("commit", commit.id.to_string())
                .with("from", commit.parent.map(|p| p.to_string()));
            summary.write(out, format).map_err(Failure::io)
        }
        BranchAction::List { graph } => {
            let opened = backend::open(&graph, server).await?;
            let heads = opened.branches().await?;
            emit(out, &output::branches_batch(&heads))
        }
        BranchAction::Delete { graph, name } => {
            let opened = backend::open(&graph, server).await?;
            opened.delete_branch(&name).await?;
            let summary = output::Summary::new().with("deleted", name);
            summary.write(out, format).map_err(Failure::io)
        }
        BranchAction::Merge {
            graph,
            source,
            into,
            prefer,
        } => {
            let opened = backend::open(&graph, server).await?;
            let prefer = match prefer {
                None => Prefer::Neither,
                Some(PreferArg::Source) => Prefer::Source,
                Some(PreferArg::Target) => Prefer::Target,
            };
            let outcome = opened.merge(&source, &into, prefer).await?;
            let kind = match outcome.kind {
                MergeKind::UpToDate => "up to date",
                MergeKind::FastForward => "fast-forward",
                MergeKind::ThreeWay => "three-way",
            };
            let summary = output::Summary::new().with("merge", kind);
            // Nothing was committed: name the head the target stays at, not a `commit`.
            let summary = match outcome.kind {
                MergeKind::UpToDate => summary.with("head", outcome.commit.id.to_string()),
                MergeKind::FastForward | MergeKind::ThreeWay => summary
                    .counts("rows", &outcome.rows)
                    .counts("deleted", &outcome.deleted)
                    .with("resolved", outcome.resolved)
                    .with("base", outcome.base.to_string())
                    .with("commit", outcome.commit.id.to_string()),
            };
            summary.write(out, format).map_err(Failure::io)
        }
    }
}
