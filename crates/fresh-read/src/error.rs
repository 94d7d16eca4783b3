use snafu::Snafu;

#[derive(Debug, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum Error {
    /// The request is wrong: a bad filter, column or search query.
    #[snafu(display("{what} on {table}: {message}"))]
    InvalidQuery {
        table: String,
        what: String,
        message: String,
    },

    #[snafu(display("{action} of {table} failed: {source}"))]
    Lance {
        action: String,
        table: String,
        source: lance::Error,
    },

    #[snafu(display("{source}"))]
    MemWal {
        source: tributary_memwal_adapter::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
