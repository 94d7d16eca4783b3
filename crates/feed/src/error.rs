use snafu::Snafu;
use tributary_publisher::CommitId;
use tributary_storage::ErrorKind;

#[derive(Debug, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum Error {
    #[snafu(display("cannot open table `{table}` at commit {commit}: {source}"))]
    OpenTable {
        table: String,
        commit: CommitId,
        #[snafu(source(from(tributary_publisher::Error, Box::new)))]
        source: Box<tributary_publisher::Error>,
    },
    #[snafu(display(
        "the changes of commit {commit} cannot be read: table `{table}` no longer has version {version} (cleanup removed it)"
    ))]
    VersionsGone {
        commit: CommitId,
        table: String,
        version: u64,
    },
    #[snafu(display(
        "the changes after commit {since} can no longer be read: cleanup removed table versions they need; the oldest commit to resume after is {oldest}"
    ))]
    SinceRemoved {
        since: CommitId,
        oldest: CommitId,
        #[snafu(source(from(Error, Box::new)))]
        source: Box<Error>,
    },
    #[snafu(display(
        "commit {commit} is not in the history of branch `{branch}` (the chain of its heads' parents)"
    ))]
    NotOnBranch {
        commit: CommitId,
        branch: tributary_publisher::BranchName,
    },
    #[snafu(display("{source}"))]
    Publisher { source: tributary_publisher::Error },
    #[snafu(display("no type `{name}` in the schema"))]
    UnknownType { name: String },
    #[snafu(display("changed rows of `{type_name}` are not JSON objects: {source}"))]
    UnreadableRows {
        type_name: String,
        source: serde_json::Error,
    },
    #[snafu(display("cannot read the changes of table `{table}` at version {version}: {source}"))]
    ChangeRead {
        table: String,
        version: u64,
        source: lance::Error,
    },
    #[snafu(display(
        "cannot describe the changes of table `{table}` at version {version}: it holds {operation}, which Tributary does not write"
    ))]
    CannotDescribe {
        table: String,
        version: u64,
        operation: String,
    },
    #[snafu(display("table `{path}` lost fragment {fragment} between two reads of one version"))]
    FragmentMissing { path: String, fragment: u64 },
    #[snafu(display("table `{table}` has no text key column `id`"))]
    NoKeyColumn { table: String },
    #[snafu(display("cannot {action}: {source}"))]
    Arrow {
        action: String,
        source: arrow_schema::ArrowError,
    },
    #[snafu(display("cannot count the rows of table `{table}`: {source}"))]
    CountRows { table: String, source: lance::Error },
    #[snafu(display("{action}: {source}"))]
    Storage {
        action: String,
        source: tributary_storage::Error,
    },
    #[snafu(display(
        "pin name `{name}` is not usable: use 1 to 64 letters, digits, `-`, `_` or `.`, not starting with `.`"
    ))]
    PinName { name: String },
    #[snafu(display("pin `{name}` already holds commit {held}; unpin it first to move it"))]
    PinTaken { name: String, held: CommitId },
    #[snafu(display("no pin named `{name}`"))]
    NoPin { name: String },
    #[snafu(display("pin `{name}` cannot be read or written ({path}): {source}"))]
    PinUnreadable {
        name: String,
        path: String,
        source: serde_json::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The public kind of this error: the one table of kinds lives in the store.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::OpenTable { source, .. } => source.kind(),
            Error::CountRows { source, .. } => {
                tributary_storage::store_access_kind(source).unwrap_or(ErrorKind::Internal)
            }
            Error::Storage { source, .. } => source.kind(),
            Error::VersionsGone { .. } | Error::SinceRemoved { .. } => ErrorKind::NotFound,
            Error::NotOnBranch { .. } | Error::UnknownType { .. } => ErrorKind::NotFound,
            Error::Publisher { source } => source.kind(),
            Error::UnreadableRows { .. } => ErrorKind::Internal,
            Error::ChangeRead { source, .. } => {
                tributary_storage::store_access_kind(source).unwrap_or(ErrorKind::Internal)
            }
            Error::CannotDescribe { .. }
            | Error::FragmentMissing { .. }
            | Error::NoKeyColumn { .. }
            | Error::Arrow { .. } => ErrorKind::Internal,
            Error::PinName { .. } => ErrorKind::InvalidInput,
            Error::PinTaken { .. } => ErrorKind::Conflict,
            Error::NoPin { .. } => ErrorKind::NotFound,
            Error::PinUnreadable { .. } => ErrorKind::Internal,
        }
    }
}
