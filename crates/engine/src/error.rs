use snafu::Snafu;
use tributary_schema::LineError;
use tributary_storage::lance_text::user_message;

/// What a caller can do about an error: the small public classification every error maps
/// to. It is the one table the HTTP status, the wire name in error bodies and the CLI's
/// exit status derive from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request is wrong (schema, data, filter); retrying it unchanged will fail again.
    InvalidInput,
    /// A body or a line over a limit of the server.
    TooLarge,
    /// Another writer won a race; re-read and retry.
    Conflict,
    /// Another process took over a writer this one held.
    Fenced,
    /// Temporarily unable to accept work; retry later.
    Unavailable,
    /// A graph, branch, commit or type that does not exist.
    NotFound,
    /// A key with no row, in a graph and type that exist.
    NoRow,
    /// No valid credentials.
    Unauthorized,
    /// Credentials without the scope the request needs.
    Forbidden,
    /// A bug or an I/O failure.
    Internal,
}

impl ErrorKind {
    /// The wire name (`invalid_input`, `no_row`, …), as in error bodies.
    pub const fn name(self) -> &'static str {
        self.row().0
    }

    /// The HTTP status of an error of this kind.
    pub const fn http_status(self) -> u16 {
        self.row().1
    }

    /// The exit status of a command failing with this kind (sysexits.h).
    pub const fn exit_code(self) -> u8 {
        self.row().2
    }

    /// The kind of a wire name; `None` for a name this version does not know.
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::InvalidInput,
        ErrorKind::TooLarge,
        ErrorKind::Conflict,
        ErrorKind::Fenced,
        ErrorKind::Unavailable,
        ErrorKind::NotFound,
        ErrorKind::NoRow,
        ErrorKind::Unauthorized,
        ErrorKind::Forbidden,
        ErrorKind::Internal,
    ];

    /// (wire name, HTTP status, exit status): the one table.
    const fn row(self) -> (&'static str, u16, u8) {
        match self {
            ErrorKind::InvalidInput => ("invalid_input", 400, 65),
            ErrorKind::TooLarge => ("too_large", 413, 65),
            ErrorKind::Conflict => ("conflict", 409, 75),
            ErrorKind::Fenced => ("fenced", 409, 75),
            ErrorKind::Unavailable => ("unavailable", 503, 75),
            ErrorKind::NotFound => ("not_found", 404, 66),
            ErrorKind::NoRow => ("no_row", 404, 66),
            ErrorKind::Unauthorized => ("unauthorized", 401, 77),
            ErrorKind::Forbidden => ("forbidden", 403, 77),
            ErrorKind::Internal => ("internal", 500, 70),
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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

    #[snafu(display("unknown type `{name}`"))]
    UnknownType { name: String },

    #[snafu(display("`{name}` is a {actual}, not a {expected}"))]
    WrongKind {
        name: String,
        expected: &'static str,
        actual: &'static str,
    },

    /// Streaming ingest, folds and the background folder run on `main` only, for now.
    #[snafu(display("{operation} runs on the `main` branch only (branches are not implemented yet), not `{branch}`"))]
    MainBranchOnly {
        operation: &'static str,
        branch: String,
    },

    #[snafu(display("a load needs at least one row; the input holds none"))]
    EmptyLoad,

    #[snafu(display("{type_name} is not declared @stream; load it instead of ingesting it"))]
    NotStreamed { type_name: String },

    #[snafu(display("{type_name} has no column `{column}` (columns: {})", columns.join(", ")))]
    UnknownColumn {
        type_name: String,
        column: String,
        columns: Vec<String>,
    },

    #[snafu(display("edge {edge} goes {from} -> {to}, not {way} {node_type}"))]
    NotAnEndpoint {
        edge: String,
        from: String,
        to: String,
        way: &'static str,
        node_type: String,
    },

    #[snafu(display("search needs k of at least 1"))]
    ZeroResults,

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

    #[snafu(display("a retention of {older_than:?} is too long"))]
    RetentionTooLong { older_than: std::time::Duration },

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

    /// What a server answered (or that it could not be reached), for a client of one.
    #[snafu(display("{message}"))]
    Remote { kind: ErrorKind, message: String },
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
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Schema { .. }
            | Error::InvalidData { .. }
            | Error::InvalidBranch { .. }
            | Error::WrongKind { .. }
            | Error::MainBranchOnly { .. }
            | Error::EmptyLoad
            | Error::NotStreamed { .. }
            | Error::UnknownColumn { .. }
            | Error::NotAnEndpoint { .. }
            | Error::ZeroResults
            | Error::NoTextIndex { .. }
            | Error::NoVectorIndex { .. }
            | Error::SeveralVectorIndexes { .. }
            | Error::WrongDimension { .. }
            | Error::RetentionTooLong { .. } => ErrorKind::InvalidInput,
            Error::Arrow { .. } => ErrorKind::Internal,
            Error::UnknownType { .. } => ErrorKind::NotFound,
            Error::Publish { source } => publish_kind(source),
            Error::Lance { source, .. } => lance_kind(source),
            Error::MemWal { source } => memwal_kind(source),
            Error::Fold { source } => {
                use tributary_write::Error as F;
                match source {
                    F::Publish { source } => publish_kind(source),
                    F::Lance { source, .. } => lance_kind(source),
                    F::MemWal { source } => memwal_kind(source),
                    F::Halted { .. } => ErrorKind::InvalidInput,
                    F::LeaseLost { .. } => ErrorKind::Conflict,
                    F::Storage { .. }
                    | F::Recovery { .. }
                    | F::Injected { .. }
                    | F::Arrow { .. }
                    | F::UnknownEndpointType { .. } => ErrorKind::Internal,
                }
            }
            Error::Storage { .. } => ErrorKind::Internal,
            Error::Remote { kind, .. } => *kind,
            Error::Read { source } => {
                use tributary_fresh_read::Error as R;
                match source {
                    R::InvalidQuery { .. } => ErrorKind::InvalidInput,
                    R::Lance { source, .. } => lance_kind(source),
                    R::MemWal { source } => memwal_kind(source),
                    R::Arrow { .. } => ErrorKind::Internal,
                }
            }
        }
    }

    /// An error of `kind` reported by a server (or met reaching it).
    pub fn remote(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error::Remote {
            kind,
            message: message.into(),
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

fn publish_kind(source: &tributary_publisher::Error) -> ErrorKind {
    use tributary_publisher::Error as P;
    match source {
        P::Conflict { .. } => ErrorKind::Conflict,
        P::BranchNotFound { .. } | P::CommitNotFound { .. } | P::NotAGraph { .. } => {
            ErrorKind::NotFound
        }
        P::AlreadyExists { .. } => ErrorKind::InvalidInput,
        _ => ErrorKind::Internal,
    }
}

fn lance_kind(source: &lance::Error) -> ErrorKind {
    match source {
        lance::Error::CommitConflict { .. }
        | lance::Error::RetryableCommitConflict { .. }
        | lance::Error::IncompatibleTransaction { .. }
        | lance::Error::TooMuchWriteContention { .. } => ErrorKind::Conflict,
        lance::Error::InvalidInput { .. } | lance::Error::Schema { .. } => ErrorKind::InvalidInput,
        _ => ErrorKind::Internal,
    }
}

fn memwal_kind(source: &tributary_memwal_adapter::Error) -> ErrorKind {
    use tributary_memwal_adapter::Error as M;
    match source {
        M::Fenced { .. } => ErrorKind::Fenced,
        M::Backpressure { .. } | M::Interrupted { .. } => ErrorKind::Unavailable,
        M::PrimaryKeyMismatch { .. } | M::InvalidSetting { .. } => ErrorKind::InvalidInput,
        M::Lance { .. } | M::Storage { .. } => ErrorKind::Internal,
    }
}
