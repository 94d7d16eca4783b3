use snafu::Snafu;
use tributary_storage::lance_text::user_message;

#[derive(Debug, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum Error {
    /// The request is wrong: a bad filter, column or search query.
    #[snafu(display("{message}"))]
    InvalidQuery { message: String },

    #[snafu(display("{table}: {action} failed: {}", user_message(source)))]
    Lance {
        action: String,
        table: String,
        source: lance::Error,
    },

    /// Arrow refused rows Lance returned: a bug, never the request's fault.
    #[snafu(display("{action} of {table} failed: {source}"))]
    Arrow {
        action: String,
        table: String,
        source: arrow_schema::ArrowError,
    },

    #[snafu(display("{source}"))]
    MemWal {
        source: tributary_memwal_adapter::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// What a caller can do about it.
    pub fn kind(&self) -> tributary_storage::ErrorKind {
        use tributary_storage::ErrorKind;
        match self {
            Error::InvalidQuery { .. } => ErrorKind::InvalidInput,
            Error::Lance { source, .. } => tributary_storage::lance_kind(source),
            Error::MemWal { source } => source.kind(),
            Error::Arrow { .. } => ErrorKind::Internal,
        }
    }
}
