//! API errors: a status, a machine-readable kind and a message, as JSON.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use tributary::ErrorKind;

/// The error kind of a `get` whose key has no row (the graph and type exist), so a client
/// can tell "no row" from "no graph" without reading the message.
pub const NO_ROW: &str = "no_row";

/// Seconds a client should wait before retrying a refused ingest or load.
pub const RETRY_AFTER_S: u64 = 1;

/// One rejected line of a refused load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRecord {
    pub line: u64,
    pub error: String,
}

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// `invalid_input`, `not_found`, `no_row`, `conflict`, `fenced`, `unavailable`, `internal`,
    /// `unauthorized`, `forbidden`, `too_large`.
    pub kind: String,
    pub error: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<LineRecord>,
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ErrorBody,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &str, error: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                kind: kind.to_owned(),
                error: error.into(),
                lines: Vec::new(),
            },
        }
    }

    pub fn invalid(error: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", error)
    }

    pub fn not_found(error: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", error)
    }

    pub fn no_row(error: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, NO_ROW, error)
    }

    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the body exceeds the limit of {limit} bytes"),
        )
    }
}

/// The wire name of an engine error kind.
pub fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidInput => "invalid_input",
        ErrorKind::Conflict => "conflict",
        ErrorKind::Fenced => "fenced",
        ErrorKind::Unavailable => "unavailable",
        ErrorKind::NotFound => "not_found",
        ErrorKind::Internal => "internal",
    }
}

impl From<tributary::Error> for ApiError {
    fn from(error: tributary::Error) -> ApiError {
        let kind = error.kind();
        let status = match kind {
            ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict | ErrorKind::Fenced => StatusCode::CONFLICT,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let lines = error
            .line_errors()
            .iter()
            .map(|e| LineRecord {
                line: e.line,
                error: e.to_string(),
            })
            .collect();
        ApiError {
            status,
            body: ErrorBody {
                kind: kind_name(kind).to_owned(),
                error: error.to_string(),
                lines,
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body)).into_response();
        let headers = response.headers_mut();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
