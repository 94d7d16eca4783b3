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
            Error::PinName { .. } => ErrorKind::InvalidInput,
            Error::PinTaken { .. } => ErrorKind::Conflict,
            Error::NoPin { .. } => ErrorKind::NotFound,
            Error::PinUnreadable { .. } => ErrorKind::Internal,
        }
    }
}
