use datafusion::error::DataFusionError;
use snafu::Snafu;

#[derive(Debug, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum Error {
    /// Something wrong at a place in the query text.
    #[snafu(display("line {line}, column {column}: {message}"))]
    AtPlace {
        line: usize,
        column: usize,
        message: String,
    },
    /// A request that is wrong as a whole (a parameter, a statement kind).
    #[snafu(display("{message}"))]
    Refused { message: String },
    #[snafu(display(
        "the query returns more than {max} rows: add LIMIT (or a narrower WHERE), or raise the cap"
    ))]
    TooManyRows { max: usize },
    /// A failure of the query engine itself, not of the request.
    #[snafu(display("{message}"))]
    Internal { message: String },
    #[snafu(display("{action}: {}", describe(source)))]
    Engine {
        action: &'static str,
        source: DataFusionError,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error at byte offset `at` of `text`, with its line and column (both from 1).
    pub(crate) fn syntax(text: &str, at: usize, message: &str) -> Error {
        let (line, column) = place(text, at);
        Error::AtPlace {
            line,
            column,
            message: message.to_owned(),
        }
    }

    pub(crate) fn internal(message: impl Into<String>) -> Error {
        Error::Internal {
            message: message.into(),
        }
    }

    pub(crate) fn refused(message: impl Into<String>) -> Error {
        Error::Refused {
            message: message.into(),
        }
    }

    /// Whether the request is at fault (retrying it unchanged fails again), as opposed to
    /// the store or a bug.
    pub fn is_invalid_input(&self) -> bool {
        match self {
            Error::AtPlace { .. } | Error::Refused { .. } | Error::TooManyRows { .. } => true,
            Error::Internal { .. } => false,
            Error::Engine { source, .. } => matches!(
                source.find_root(),
                DataFusionError::Plan(_)
                    | DataFusionError::SchemaError(..)
                    | DataFusionError::SQL(..)
                    | DataFusionError::NotImplemented(_)
                    | DataFusionError::Execution(_)
                    | DataFusionError::ArrowError(..)
            ),
        }
    }
}

/// DataFusion's message without its nesting, and without the source locations Lance
/// puts in its errors (`…, /path/to/file.rs:12:34`): a user reads what went wrong, not
/// where in a library.
fn describe(source: &DataFusionError) -> String {
    without_locations(&source.find_root().message())
}

pub(crate) fn without_locations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(".rs:") {
        let start = rest[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(0, |(i, c)| i + c.len_utf8());
        let end = rest[at + 4..]
            .find(|c: char| !(c.is_ascii_digit() || c == ':'))
            .map_or(rest.len(), |i| at + 4 + i);
        out.push_str(rest[..start].trim_end().trim_end_matches(','));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Line and column (from 1, columns in characters) of byte offset `at`.
pub(crate) fn place(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}
