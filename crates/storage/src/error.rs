use snafu::Snafu;

#[derive(Debug, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum Error {
    #[snafu(display("invalid graph location `{uri}`: {reason}"))]
    InvalidUri { uri: String, reason: String },

    #[snafu(display("Lance error on `{uri}`: {source}"))]
    Lance { uri: String, source: lance::Error },

    #[snafu(display("object store error on `{path}`: {source}"))]
    ObjectStore {
        path: String,
        source: object_store::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
