//! API errors: a status, a machine-readable kind and a message, as JSON.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use tributary::ErrorKind;

/// The wire name of a `get` whose key has no row (the graph and type exist), so a client
/// can tell "no row" from "no graph" without reading the message.
pub const NO_ROW: &str = ErrorKind::NoRow.name();

/// At most this many conflicting keys travel in a refused merge's body.
pub const CONFLICTS_LISTED: usize = 1_000;

/// Seconds a client should wait before retrying a refused ingest or load.
pub const RETRY_AFTER_S: u64 = 1;

/// One rejected line of a refused load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LineRecord {
    pub line: u64,
    pub error: String,
}

/// An error's `kind` in the API's description: the names of every [`ErrorKind`].
fn kind_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(ErrorKind::ALL.iter().map(|kind| kind.name())))
        .description(Some(
            "What went wrong, for a program to act on: `conflict`, `fenced` and \
             `unavailable` are worth a retry.",
        ))
        .build()
}

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    #[schema(schema_with = kind_schema)]
    pub kind: String,
    pub error: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<LineRecord>,
    /// A refused merge's keys changed differently on both sides (the first 1,000,
    /// `CONFLICTS_LISTED`; the message gives the count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<tributary::ConflictKey>,
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ErrorBody,
}

impl ApiError {
    /// An error of `kind`, answered with the kind's status.
    pub fn new(kind: ErrorKind, error: impl Into<String>) -> ApiError {
        let status =
            StatusCode::from_u16(kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ApiError::with_status(status, kind, error)
    }

    /// An error of `kind` answered with another status than the kind's (405, 415).
    pub fn with_status(status: StatusCode, kind: ErrorKind, error: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                kind: kind.name().to_owned(),
                error: error.into(),
                lines: Vec::new(),
                conflicts: Vec::new(),
            },
        }
    }

    pub fn invalid(error: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::InvalidInput, error)
    }

    pub fn not_found(error: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::NotFound, error)
    }

    pub fn no_row(error: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::NoRow, error)
    }

    pub fn internal(error: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Internal, error)
    }

    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            ErrorKind::TooLarge,
            format!("the body exceeds the limit of {limit} bytes"),
        )
    }
}

impl From<tributary::Error> for ApiError {
    fn from(error: tributary::Error) -> ApiError {
        let mut api = ApiError::new(error.kind(), error.user_message());
        api.body.lines = error
            .line_errors()
            .iter()
            .map(|e| LineRecord {
                line: e.line,
                error: e.to_string(),
            })
            .collect();
        api.body.conflicts = error
            .conflicts()
            .iter()
            .take(CONFLICTS_LISTED)
            .cloned()
            .collect();
        api
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
