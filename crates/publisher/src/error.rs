use snafu::Snafu;

use crate::ids::{BranchName, CommitId};

#[derive(Debug, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum Error {
    /// The branch head moved since the plan was made. Re-read the head and retry.
    #[snafu(display(
        "publish conflict on branch `{branch}`: expected head {}, found {}",
        expected.as_deref().unwrap_or("<none>"),
        actual.as_deref().unwrap_or("<none>")
    ))]
    Conflict {
        branch: BranchName,
        expected: Option<CommitId>,
        actual: Option<CommitId>,
    },

    #[snafu(display("the schema changed meanwhile: this change would be version {actual}, the next is {expected}; apply it again"))]
    SchemaRaced { expected: u32, actual: u32 },

    #[snafu(display("branch `{branch}` does not exist"))]
    BranchNotFound { branch: String },

    #[snafu(display("commit `{id}` does not exist (a commit id is the 12 lowercase hex characters `tributary log` prints)"))]
    CommitNotFound { id: String },

    /// A commit that does not pin a table it is asked for: the commit chain is damaged.
    #[snafu(display("commit {commit} does not pin table {table}"))]
    TableNotPinned { commit: String, table: String },

    #[snafu(display("commit {commit} can no longer be read: its version of {table} is gone (a cleanup removes versions older than the retention window and those of deleted branches; any other loss is damage, which `tributary check` reports)"))]
    VersionsRemoved { commit: String, table: String },

    #[snafu(display("a graph already exists at `{uri}`"))]
    AlreadyExists { uri: String },

    #[snafu(display("no graph at `{uri}` (no __manifest)"))]
    NotAGraph { uri: String },

    #[snafu(display("the manifest row `{key}` is corrupt: {source}"))]
    CorruptRow {
        key: String,
        source: serde_json::Error,
    },

    #[snafu(display("manifest {action} failed: {source}"))]
    Lance {
        action: String,
        source: lance::Error,
    },

    #[snafu(display("{source}"))]
    Storage { source: tributary_storage::Error },

    #[snafu(display("this graph commits through the `{name}` publisher, which this version of Tributary does not know (it knows `manifest` and `record`); use the version that made it"))]
    UnknownPublisher { name: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// What a caller can do about it.
    pub fn kind(&self) -> tributary_storage::ErrorKind {
        use tributary_storage::ErrorKind;
        match self {
            Error::Conflict { .. } | Error::SchemaRaced { .. } => ErrorKind::Conflict,
            Error::BranchNotFound { .. }
            | Error::CommitNotFound { .. }
            | Error::VersionsRemoved { .. }
            | Error::NotAGraph { .. } => ErrorKind::NotFound,
            Error::AlreadyExists { .. } | Error::UnknownPublisher { .. } => ErrorKind::InvalidInput,
            Error::Storage { source } => source.kind(),
            Error::Lance { source, .. } => {
                tributary_storage::store_access_kind(source).unwrap_or(ErrorKind::Internal)
            }
            Error::TableNotPinned { .. } | Error::CorruptRow { .. } => ErrorKind::Internal,
        }
    }
}
