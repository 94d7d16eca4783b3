use snafu::Snafu;
use tributary_storage::lance_text::user_message;

#[derive(Debug, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum Error {
    #[snafu(display("{source}"))]
    Storage { source: tributary_storage::Error },

    #[snafu(display("{source}"))]
    Publish { source: tributary_publisher::Error },

    #[snafu(display("{source}"))]
    MemWal {
        source: tributary_memwal_adapter::Error,
    },

    #[snafu(display("{action} on `{table}` failed: {}", user_message(source)))]
    Lance {
        action: String,
        table: String,
        source: lance::Error,
    },

    #[snafu(display("recovery of intent `{intent}` failed: {message}"))]
    Recovery { intent: String, message: String },

    #[snafu(display("injected failure at `{point}`"))]
    Injected { point: String },

    /// The `halt` policy refused a fold: nothing was published.
    #[snafu(display("fold halted by the `halt` reject policy: {table} `{key}` ({kind}): {message}; nothing was folded"))]
    Halted {
        table: String,
        key: String,
        kind: String,
        message: String,
    },

    /// Arrow refused to build, filter or format rows the fold made itself: a bug.
    #[snafu(display("{action}: {source}"))]
    Arrow {
        action: &'static str,
        source: arrow_schema::ArrowError,
    },

    /// The embedding provider gave no vectors for a write's `@embed` field.
    #[snafu(display("{type_name}.{field}: {source}"))]
    Embedding {
        type_name: String,
        field: String,
        source: tributary_embed::EmbedError,
    },

    /// The catalog names a node type an edge type's endpoint does not resolve to.
    #[snafu(display("edge {edge} names unknown node type {node_type}"))]
    UnknownEndpointType { edge: String, node_type: String },

    /// This write's branch lease was taken over (it stalled past the lease's grace);
    /// nothing was committed. Retry.
    #[snafu(display("another process took over the write lease of branch `{branch}` while this write ran; nothing was committed"))]
    LeaseLost { branch: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// What a caller can do about it.
    pub fn kind(&self) -> tributary_storage::ErrorKind {
        use tributary_storage::ErrorKind;
        match self {
            Error::Storage { source } => source.kind(),
            Error::Publish { source } => source.kind(),
            Error::MemWal { source } => source.kind(),
            Error::Lance { source, .. } => tributary_storage::lance_kind(source),
            Error::Halted { .. } => ErrorKind::InvalidInput,
            Error::LeaseLost { .. } => ErrorKind::Conflict,
            Error::Embedding { source, .. } if source.is_transient() => ErrorKind::Unavailable,
            Error::Embedding { .. } => ErrorKind::InvalidInput,
            Error::Recovery { .. }
            | Error::Injected { .. }
            | Error::Arrow { .. }
            | Error::UnknownEndpointType { .. } => ErrorKind::Internal,
        }
    }

    /// Whether another folder won the race for these generations: Lance refused our
    /// compaction mark (stale) or our commit conflicted with theirs. Re-planning folds
    /// whatever is still pending.
    pub fn is_lost_fold_race(&self) -> bool {
        match self {
            Error::Lance { source, .. } => match source {
                lance::Error::CommitConflict { .. }
                | lance::Error::RetryableCommitConflict { .. }
                | lance::Error::IncompatibleTransaction { .. }
                | lance::Error::TooMuchWriteContention { .. } => true,
                other => tributary_storage::lance_text::is_stale_compaction(other),
            },
            _ => false,
        }
    }
}
