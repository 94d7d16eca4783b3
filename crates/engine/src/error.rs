use snafu::Snafu;
use tributary_schema::LineError;
use tributary_storage::lance_text::user_message;
use tributary_storage::{lance_kind, ErrorKind};

#[derive(Debug, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum Error {
    #[snafu(display("schema error: {source}"))]
    Schema {
        source: tributary_schema::SchemaError,
    },

    #[snafu(display("{}", describe_lines(errors)))]
    InvalidData { errors: Vec<LineError> },

    #[snafu(display("{source}"))]
    InvalidBranch {
        source: tributary_publisher::InvalidBranchName,
    },

    /// `meant` is the type the name is closest to, if one is.
    #[snafu(display("unknown type `{name}`{}", meant.as_ref().map(|m| format!(" (did you mean `{m}`?)")).unwrap_or_default()))]
    UnknownType { name: String, meant: Option<String> },

    #[snafu(display("`{name}` is a {actual}, not a {expected}"))]
    WrongKind {
        name: String,
        expected: &'static str,
        actual: &'static str,
    },

    /// `neighbors` of a key with no row (like `get`'s, not an empty answer).
    #[snafu(display("{type_name} `{key}` not found"))]
    NoSuchNode { type_name: String, key: String },

    /// A stream's branch was deleted under it: its shards are sealed, so nothing sent
    /// after the delete is acknowledged.
    #[snafu(display("branch `{branch}` was deleted while this stream wrote to it (or a delete of it stopped midway: run `branch delete` again); lines from here on were not acknowledged"))]
    BranchDeleted { branch: String },

    #[snafu(display("a load needs at least one row; the input holds none"))]
    EmptyLoad,

    #[snafu(display("{type_name} is not declared @stream; load it instead of ingesting it"))]
    NotStreamed { type_name: String },

    #[snafu(display("{type_name} is no longer declared @stream (a schema change removed it and sealed its shards; what was acknowledged is folded); its rows in this send were not written: load them instead"))]
    NoLongerStreamed { type_name: String },

    #[snafu(display("{type_name} has no column `{column}` ({}columns: {})", meant.as_ref().map(|m| format!("did you mean `{m}`? ")).unwrap_or_default(), columns.join(", ")))]
    UnknownColumn {
        type_name: String,
        column: String,
        columns: Vec<String>,
        /// The column the name is closest to, if one is.
        meant: Option<String>,
    },

    #[snafu(display(
        "edge {edge} goes {from} -> {to}, not {way} {node_type}{}",
        other_end_hint(way, from, to, node_type)
    ))]
    NotAnEndpoint {
        edge: String,
        from: String,
        to: String,
        way: &'static str,
        node_type: String,
    },

    /// What is not folded yet is newer than every commit: a fresh read has no old commit
    /// to add it to.
    #[snafu(display(
        "a fresh read starts from a branch head, not a commit: unfolded rows are newer than any commit (leave out --commit, or --fresh)"
    ))]
    FreshAtCommit,

    #[snafu(display("search needs k of at least 1"))]
    ZeroResults,

    /// A query refused (with its place in the text) or failed while it ran.
    #[snafu(display("{source}"))]
    Query { source: tributary_query::Error },

    /// A snapshot or a pin refused or failed.
    #[snafu(display("{source}"))]
    Feed { source: tributary_feed::Error },

    /// Lance sizes a search's buffers by `k`: a huge one could exhaust memory.
    #[snafu(display("k = {k} is over the bound of {max} results a search returns"))]
    TooManyResults { k: usize, max: usize },

    #[snafu(display(
        "limit = {limit} is over the bound of {max} rows; leave the limit out to read every row"
    ))]
    LimitTooLarge { limit: usize, max: usize },

    #[snafu(display(
        "{type_name} has no full-text indexed field; declare one, e.g. `bio: String? @index(fts)`"
    ))]
    NoTextIndex { type_name: String },

    #[snafu(display(
        "{type_name} has no indexed vector field; declare one, e.g. `embedding: Vector(8)? @index`"
    ))]
    NoVectorIndex { type_name: String },

    #[snafu(display("{type_name} has several indexed vector fields ({}); only one is supported", fields.join(", ")))]
    SeveralVectorIndexes {
        type_name: String,
        fields: Vec<String>,
    },

    #[snafu(display(
        "{type_name}.{field} is {declared}, the query vector has {dimension} dimensions"
    ))]
    WrongDimension {
        type_name: String,
        field: String,
        declared: String,
        dimension: usize,
    },

    /// The graph's embedding provider could not embed (a search's text, or a load's rows).
    #[snafu(display("{source}"))]
    Embed { source: tributary_embed::EmbedError },

    #[snafu(display("the embedder settings at `{path}` cannot be read: {problem}; set them again with `tributary embedder`"))]
    EmbedderSettings { path: String, problem: String },

    #[snafu(display("{type_name} has no indexed vector field filled by `@embed`, so text cannot be searched by similarity; declare one, e.g. `embedding: Vector(8)? @embed(bio) @index`"))]
    NotEmbedded { type_name: String },

    #[snafu(display("a retention of {older_than:?} is too long"))]
    RetentionTooLong { older_than: std::time::Duration },

    #[snafu(display(
        "invalid order `{text}`: {problem} (write `column`, `column:asc` or `column:desc`)"
    ))]
    InvalidOrder { text: String, problem: String },

    /// Stored rows that do not hold what their schema declares: a bug or damage.
    #[snafu(display("exporting rows: {problem}"))]
    Export { problem: String },

    /// Arrow refused to build rows the engine made itself: a bug.
    #[snafu(display("{action}: {source}"))]
    Arrow {
        action: &'static str,
        source: arrow_schema::ArrowError,
    },

    #[snafu(display("{source}"))]
    Publish { source: tributary_publisher::Error },

    #[snafu(display("{source}"))]
    Storage { source: tributary_storage::Error },

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

    #[snafu(display("{source}"))]
    Fold { source: tributary_write::Error },

    #[snafu(display("{source}"))]
    Read { source: tributary_fresh_read::Error },

    #[snafu(display("{what} is 1 to {max} printable ASCII characters without spaces"))]
    InvalidToken { what: &'static str, max: usize },

    #[snafu(display("producer `{producer}` is streaming already (process {pid} on {host}); one stream of a producer runs at a time: retry once it ends"))]
    ProducerBusy {
        producer: String,
        pid: u32,
        host: String,
    },

    #[snafu(display("another stream took producer `{producer}` over (this one stalled past the lease's grace); nothing more was written: send again"))]
    ProducerTakenOver { producer: String },

    #[snafu(display("the producer mark `{path}` is unreadable: {reason}"))]
    CorruptProducerMark { path: String, reason: String },

    #[snafu(display("a producer's sequence numbers need a producer id"))]
    SequenceWithoutProducer,

    #[snafu(display("producer `{producer}`: this send starts at line {first} of the stream, but line {expected} is not settled; a producer's sends go in order (send from line {expected} first)"))]
    OutOfSequence {
        producer: String,
        expected: u64,
        first: u64,
    },

    #[snafu(display(
        "sequence numbers run past {}: start the producer's stream lower",
        u64::MAX
    ))]
    SequenceOverflow,

    #[snafu(display("the schema of {type_name} is changing (or changed while this request was read); nothing was written: send it again"))]
    SchemaChanging { type_name: String },

    #[snafu(display("{}", describe_refusals(refused)))]
    BreakingSchemaChange {
        refused: Vec<tributary_schema::BreakingChange>,
    },

    #[snafu(display("the rows this send patches changed while it was written (another process wrote them); nothing was written: send it again"))]
    PatchedRowsChanged,

    #[snafu(display("branch `{branch}` exists already"))]
    BranchExists { branch: String },

    #[snafu(display("`main` cannot be deleted"))]
    MainNotDeletable,

    #[snafu(display("a write to branch `{branch}` is still being settled (another process may be making it); try again shortly"))]
    BranchBusy { branch: String },

    #[snafu(display("{}", describe_conflicts(source_branch, target, keys)))]
    MergeConflict {
        source_branch: String,
        target: String,
        keys: Vec<crate::merge_keys::ConflictKey>,
    },

    #[snafu(display("{}", describe_broken(source_branch, target, broken)))]
    MergeBreaksConstraints {
        source_branch: String,
        target: String,
        broken: Vec<crate::merge_keys::BrokenKey>,
    },

    /// Two heads with no common ancestor: the commit chain is damaged.
    #[snafu(display("commits {a} and {b} have no common ancestor; the commit chain is damaged"))]
    NoMergeBase { a: String, b: String },

    #[snafu(display("cannot merge `{branch}` into itself"))]
    MergeIntoItself { branch: String },

    #[snafu(display("{operation} runs on a graph with no branches but `main`; these exist: {}. Delete them first (merge into `main` what you want to keep)", branches.join(", ")))]
    BranchesExist {
        operation: &'static str,
        branches: Vec<String>,
    },

    /// A shard's WAL has lost entries below its newest: its acknowledged rows after the gap
    /// cannot be replayed in order, so nothing of it is folded.
    #[snafu(display(
        "{table} shard {shard}: {} of its write-ahead log are missing, so the acknowledged \
         rows after them cannot be replayed in order; nothing of the shard was claimed \
         (`tributary check` lists what is damaged)",
        describe_positions(missing)
    ))]
    WalEntriesMissing {
        table: String,
        shard: String,
        missing: Vec<u64>,
    },

    /// What a server answered (or that it could not be reached), for a client of one; a
    /// merge's conflicting keys, when it named them.
    #[snafu(display("{message}"))]
    Remote {
        kind: ErrorKind,
        message: String,
        conflicts: Vec<crate::merge_keys::ConflictKey>,
    },
}

/// "entry 7", "3 entries between positions 7 and 12".
fn describe_positions(positions: &[u64]) -> String {
    match positions {
        [] => "no entries".to_owned(),
        [one] => format!("entry {one}"),
        [first, .., last] => format!(
            "{} entries between positions {first} and {last}",
            positions.len()
        ),
    }
}

fn describe_refusals(refused: &[tributary_schema::BreakingChange]) -> String {
    let mut text = format!(
        "the new schema changes what is stored in {} way{} a schema change cannot apply (it adds types, nullable or defaulted fields after the existing ones, indexes, and @stream); nothing was changed:",
        refused.len(),
        if refused.len() == 1 { "" } else { "s" }
    );
    for refusal in refused {
        text.push_str("\n  ");
        text.push_str(&refusal.to_string());
    }
    text
}

/// A neighbours read from the end an edge does not leave (or enter): the flag that reads
/// it from the other end.
fn other_end_hint(way: &str, from: &str, to: &str, node_type: &str) -> String {
    match way {
        "from" if to == node_type => format!("; to follow it into {node_type}, add --in"),
        "to" if from == node_type => {
            format!("; to follow it out of {node_type}, leave out --in")
        }
        _ => String::new(),
    }
}

/// At most this many keys are named in a merge's refusal; the count says how many.
const KEYS_SHOWN: usize = 10;

fn describe_conflicts(
    source: &str,
    target: &str,
    keys: &[crate::merge_keys::ConflictKey],
) -> String {
    let header = format!(
        "merging `{source}` into `{target}`: {} key{} changed differently on both since they forked; nothing was merged (`--prefer source` or `--prefer target` keeps one side's change):",
        keys.len(),
        if keys.len() == 1 { "" } else { "s" }
    );
    listed(header, keys)
}

fn describe_broken(source: &str, target: &str, broken: &[crate::merge_keys::BrokenKey]) -> String {
    let header = format!(
        "merging `{source}` into `{target}` would break {} constraint{}; nothing was merged:",
        broken.len(),
        if broken.len() == 1 { "" } else { "s" }
    );
    listed(header, broken)
}

/// `header`, then the first [`KEYS_SHOWN`] of `items`, one a line, and how many more.
fn listed(mut text: String, items: &[impl std::fmt::Display]) -> String {
    for item in items.iter().take(KEYS_SHOWN) {
        text.push_str(&format!("\n  {item}"));
    }
    if items.len() > KEYS_SHOWN {
        text.push_str(&format!("\n  … and {} more", items.len() - KEYS_SHOWN));
    }
    text
}

/// Show at most the first ten line errors; the count says how many there were.
fn describe_lines(errors: &[LineError]) -> String {
    const SHOWN: usize = 10;
    let mut text = match errors.len() {
        1 => "1 invalid line, nothing was written:".to_owned(),
        n => format!("{n} invalid lines, nothing was written:"),
    };
    for error in errors.iter().take(SHOWN) {
        text.push_str("\n  ");
        text.push_str(&error.to_string());
    }
    if errors.len() > SHOWN {
        text.push_str(&format!("\n  … and {} more", errors.len() - SHOWN));
    }
    text
}

impl Error {
    /// The branch a write or fold named no longer exists (deleted, or never made).
    pub(crate) fn is_branch_gone(&self) -> bool {
        matches!(
            self,
            Error::BranchDeleted { .. }
                | Error::Publish {
                    source: tributary_publisher::Error::BranchNotFound { .. }
                }
        )
    }

    pub fn kind(&self) -> ErrorKind {
        let kind = self.own_kind();
        // A disk's refusal reaches some paths only as text inside another failure (a
        // shard claim "failed after retries due to contention"); what the user can do
        // about it is what the disk said.
        match kind {
            ErrorKind::Internal | ErrorKind::Unavailable | ErrorKind::Conflict => self
                .disk_refusal()
                .map_or(kind, |refusal| refusal.condition.kind()),
            _ => kind,
        }
    }

    /// The local disk's refusal behind this error, if a disk refused.
    pub fn disk_refusal(&self) -> Option<tributary_storage::DiskRefusal> {
        tributary_storage::DiskRefusal::in_error(self)
    }

    /// What a user reads: a disk's refusal on its own ("the disk is full (writing the
    /// write-ahead log of Person)"), without the internal paths and retries around it;
    /// otherwise the whole message.
    pub fn user_message(&self) -> String {
        match self.kind() {
            ErrorKind::Unavailable | ErrorKind::Forbidden => match self.disk_refusal() {
                Some(refusal) => refusal.to_string(),
                None => self.to_string(),
            },
            _ => self.to_string(),
        }
    }

    fn own_kind(&self) -> ErrorKind {
        match self {
            Error::Schema { .. }
            | Error::InvalidData { .. }
            | Error::InvalidBranch { .. }
            | Error::WrongKind { .. }
            | Error::EmptyLoad
            | Error::NotStreamed { .. }
            | Error::NoLongerStreamed { .. }
            | Error::UnknownColumn { .. }
            | Error::NotAnEndpoint { .. }
            | Error::InvalidOrder { .. }
            | Error::ZeroResults
            | Error::FreshAtCommit
            | Error::TooManyResults { .. }
            | Error::LimitTooLarge { .. }
            | Error::NoTextIndex { .. }
            | Error::NoVectorIndex { .. }
            | Error::SeveralVectorIndexes { .. }
            | Error::WrongDimension { .. }
            | Error::RetentionTooLong { .. }
            | Error::EmbedderSettings { .. }
            | Error::NotEmbedded { .. }
            | Error::MainNotDeletable
            | Error::MergeBreaksConstraints { .. }
            | Error::MergeIntoItself { .. }
            | Error::BranchesExist { .. }
            | Error::BranchExists { .. } => ErrorKind::InvalidInput,
            Error::MergeConflict { .. } => ErrorKind::MergeConflict,
            Error::Arrow { .. } | Error::Export { .. } | Error::NoMergeBase { .. } => {
                ErrorKind::Internal
            }
            Error::PatchedRowsChanged => ErrorKind::Conflict,
            Error::InvalidToken { .. }
            | Error::SequenceWithoutProducer
            | Error::OutOfSequence { .. }
            | Error::SequenceOverflow
            | Error::BreakingSchemaChange { .. } => ErrorKind::InvalidInput,
            Error::ProducerBusy { .. }
            | Error::SchemaChanging { .. }
            | Error::BranchBusy { .. } => ErrorKind::Unavailable,
            Error::ProducerTakenOver { .. } => ErrorKind::Fenced,
            Error::Embed { source } if source.is_transient() => ErrorKind::Unavailable,
            Error::Embed { .. } => ErrorKind::InvalidInput,
            Error::Query { source } if source.is_invalid_input() => ErrorKind::InvalidInput,
            Error::Query { .. } => ErrorKind::Internal,
            Error::Feed { source } => source.kind(),
            Error::CorruptProducerMark { .. } | Error::WalEntriesMissing { .. } => {
                ErrorKind::Internal
            }
            Error::UnknownType { .. } | Error::BranchDeleted { .. } => ErrorKind::NotFound,
            Error::NoSuchNode { .. } => ErrorKind::NoRow,
            Error::Publish { source } => source.kind(),
            Error::Lance { source, .. } => lance_kind(source),
            Error::MemWal { source } => source.kind(),
            Error::Fold { source } => source.kind(),
            Error::Storage { source } => source.kind(),
            Error::Read { source } => source.kind(),
            Error::Remote { kind, .. } => *kind,
        }
    }

    /// An error of `kind` reported by a server (or met reaching it).
    pub fn remote(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error::Remote {
            kind,
            message: message.into(),
            conflicts: Vec::new(),
        }
    }

    /// A server's refusal of a merge, with the keys it named.
    pub fn remote_conflict(
        message: impl Into<String>,
        conflicts: Vec<crate::merge_keys::ConflictKey>,
    ) -> Error {
        Error::Remote {
            kind: ErrorKind::MergeConflict,
            message: message.into(),
            conflicts,
        }
    }

    /// The keys a merge found changed differently on both sides, if that is what this is.
    pub fn conflicts(&self) -> &[crate::merge_keys::ConflictKey] {
        match self {
            Error::MergeConflict { keys, .. } => keys,
            Error::Remote { conflicts, .. } => conflicts,
            _ => &[],
        }
    }

    pub(crate) fn from_read(source: tributary_fresh_read::Error) -> Error {
        Error::Read { source }
    }

    pub(crate) fn from_memwal(source: tributary_memwal_adapter::Error) -> Error {
        Error::MemWal { source }
    }

    /// Per-line errors of a rejected load, if that is what this is.
    pub fn line_errors(&self) -> &[LineError] {
        match self {
            Error::InvalidData { errors } => errors,
            _ => &[],
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<tributary_write::Error> for Error {
    fn from(source: tributary_write::Error) -> Self {
        Error::Fold { source }
    }
}
