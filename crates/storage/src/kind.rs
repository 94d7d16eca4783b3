//! [`ErrorKind`]: what a caller can do about an error. Every crate's error reports its
//! own kind; this is the one table the HTTP status, the wire name in error bodies and the
//! CLI's exit status derive from.

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
    /// A merge found keys changed differently on both branches: retrying never helps;
    /// choose a side (`--prefer`) or change one branch.
    MergeConflict,
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

    pub const ALL: [ErrorKind; 11] = [
        ErrorKind::InvalidInput,
        ErrorKind::TooLarge,
        ErrorKind::Conflict,
        ErrorKind::MergeConflict,
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
            ErrorKind::MergeConflict => ("merge_conflict", 409, 79),
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

/// The kind of an error Lance reported: a lost commit race is a conflict, a refusal of
/// the input is invalid input, a failure to reach the store is what [`store_access_kind`]
/// says, anything else is internal.
pub fn lance_kind(source: &lance::Error) -> ErrorKind {
    if let Some(refusal) = crate::DiskRefusal::in_error(source) {
        return refusal.condition.kind();
    }
    match source {
        lance::Error::CommitConflict { .. }
        | lance::Error::RetryableCommitConflict { .. }
        | lance::Error::IncompatibleTransaction { .. }
        | lance::Error::TooMuchWriteContention { .. } => ErrorKind::Conflict,
        lance::Error::InvalidInput { .. } | lance::Error::Schema { .. } => ErrorKind::InvalidInput,
        _ => store_access_kind(source).unwrap_or(ErrorKind::Internal),
    }
}

/// The kind of a failure to reach an object, when that is what `source` is: an object
/// that is not there, credentials the store refused, or a store the S3 client gave up
/// retrying (unreachable, or failing).
pub fn store_access_kind(source: &lance::Error) -> Option<ErrorKind> {
    if let Some(refusal) = crate::DiskRefusal::in_error(source) {
        return Some(refusal.condition.kind());
    }
    match source {
        lance::Error::NotFound { .. } => Some(ErrorKind::NotFound),
        lance::Error::IO { source, .. } => source
            .downcast_ref::<object_store::Error>()
            .and_then(object_store_kind),
        _ => None,
    }
}

fn object_store_kind(error: &object_store::Error) -> Option<ErrorKind> {
    if let Some(refusal) = crate::DiskRefusal::in_error(error) {
        return Some(refusal.condition.kind());
    }
    match error {
        object_store::Error::NotFound { .. } => Some(ErrorKind::NotFound),
        object_store::Error::Unauthenticated { .. } => Some(ErrorKind::Unauthorized),
        object_store::Error::PermissionDenied { .. } => Some(ErrorKind::Forbidden),
        // What the S3 client reports for a request that failed for good: some paths
        // (listings) give a refusal only as text; otherwise a network failure or the
        // store's 5xx, its retries spent. (A local disk's errors stay internal.)
        object_store::Error::Generic { store: "S3", .. } => {
            Some(match refused_status(&error.to_string()) {
                Some(401) => ErrorKind::Unauthorized,
                Some(403) => ErrorKind::Forbidden,
                Some(404) => ErrorKind::NotFound,
                // Worth retrying: the store failing or shedding load, or no answer at all.
                Some(408 | 429 | 500..=599) | None => ErrorKind::Unavailable,
                // A refusal a retry will not change (a wrong region, an unsupported
                // request): not an outage.
                Some(_) => ErrorKind::Internal,
            })
        }
        _ => None,
    }
}

/// The HTTP status in an S3 client's message ("Server returned non-2xx status code: 403
/// Forbidden"): object_store keeps its typed status private. Pinned by the CLI test of S3
/// failures' exit statuses.
fn refused_status(message: &str) -> Option<u16> {
    let (_, rest) = message.split_once("status code: ")?;
    rest.get(..3)?.parse().ok()
}

impl crate::Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            crate::Error::InvalidUri { .. } => ErrorKind::InvalidInput,
            crate::Error::Lance { source, .. } => lance_kind(source),
            crate::Error::ObjectStore { source, .. } => {
                object_store_kind(source).unwrap_or(ErrorKind::Internal)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3_error(message: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: Box::new(std::io::Error::other(message.to_owned())),
        }
    }

    /// Only what a retry may cure is unavailable; a refusal a retry will not change is
    /// not taken for an outage (it sent clients into minutes of retries).
    #[test]
    fn an_s3_failure_is_unavailable_only_when_a_retry_may_cure_it() {
        let kind = |message: &str| object_store_kind(&s3_error(message));
        let status = |code: &str| {
            kind(&format!(
                "Error performing GET - Server returned non-2xx status code: {code} Reason"
            ))
        };
        assert_eq!(status("401"), Some(ErrorKind::Unauthorized));
        assert_eq!(status("403"), Some(ErrorKind::Forbidden));
        assert_eq!(status("404"), Some(ErrorKind::NotFound));
        assert_eq!(status("503"), Some(ErrorKind::Unavailable));
        assert_eq!(status("429"), Some(ErrorKind::Unavailable));
        assert_eq!(status("400"), Some(ErrorKind::Internal));
        assert_eq!(status("301"), Some(ErrorKind::Internal));
        assert_eq!(
            kind("error sending request: connection refused"),
            Some(ErrorKind::Unavailable)
        );
        let local = object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(std::io::Error::other("disk full")),
        };
        assert_eq!(object_store_kind(&local), None);
        let full = object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(std::io::Error::from_raw_os_error(28)),
        };
        assert_eq!(object_store_kind(&full), Some(ErrorKind::Unavailable));
    }
}
