//! Why a command failed, and the exit status it ends with. Errors of the engine and of a
//! server go through `ErrorKind`'s one table; the command line's own failures (usage, I/O,
//! a signal) have their sysexits.h codes here.

use tributary::ErrorKind;

pub(crate) struct Failure {
    pub(crate) message: String,
    pub(crate) code: u8,
    /// The engine's or server's kind, for an error that has one.
    pub(crate) kind: Option<ErrorKind>,
    /// A refused merge's conflicting keys, written on stdout too in JSON formats so a
    /// script can read them.
    pub(crate) conflicts: Vec<tributary::ConflictKey>,
}

/// clap's own status for a command line it cannot parse; ours match it.
const CLAP_USAGE: u8 = 2;
/// EX_USAGE: an argument clap accepted that is still wrong.
pub(crate) const USAGE: u8 = 64;
/// EX_OSERR: the operating system refused (a socket).
const OS: u8 = 71;
/// EX_CANTCREAT: a directory could not be created.
const CANNOT_CREATE: u8 = 73;
/// EX_IOERR: reading input or writing output failed.
const IO: u8 = 74;
/// 128 + SIGINT: stopped by a signal.
const INTERRUPTED: u8 = 130;

impl Failure {
    fn with(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code,
            kind: None,
            conflicts: Vec::new(),
        }
    }

    /// A failure of `kind`, with the kind's exit status.
    pub(crate) fn of(kind: ErrorKind, message: impl Into<String>) -> Failure {
        Failure {
            kind: Some(kind),
            ..Failure::with(kind.exit_code(), message)
        }
    }

    /// A failure named by a server's error body; an unknown kind is internal.
    pub(crate) fn of_wire(kind: Option<&str>, message: impl Into<String>) -> Failure {
        let kind = kind
            .and_then(ErrorKind::from_name)
            .unwrap_or(ErrorKind::Internal);
        Failure::of(kind, message)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure::of(ErrorKind::InvalidInput, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Failure {
        Failure::of(ErrorKind::Internal, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Failure {
        Failure::of(ErrorKind::NotFound, message)
    }

    /// A retryable interruption (a stream that broke, a server that went away).
    pub(crate) fn unavailable(message: impl Into<String>) -> Failure {
        Failure::of(ErrorKind::Unavailable, message)
    }

    pub(crate) fn missing_argument(message: impl Into<String>) -> Failure {
        Failure::with(CLAP_USAGE, message)
    }

    pub(crate) fn usage(message: impl Into<String>) -> Failure {
        Failure::with(USAGE, message)
    }

    pub(crate) fn os(message: impl Into<String>) -> Failure {
        Failure::with(OS, message)
    }

    pub(crate) fn cannot_create(message: impl Into<String>) -> Failure {
        Failure::with(CANNOT_CREATE, message)
    }

    pub(crate) fn io(message: impl Into<String>) -> Failure {
        Failure::with(IO, message)
    }

    pub(crate) fn interrupted(message: impl Into<String>) -> Failure {
        Failure::with(INTERRUPTED, message)
    }

    /// Reading the input `what` failed: a file that is not there or may not be read is
    /// not found (66), text that is not UTF-8 is invalid input (65), the rest is I/O (74).
    pub(crate) fn reading(what: &str, error: std::io::Error) -> Failure {
        use std::io::ErrorKind as Io;
        let message = format!("cannot read {what}: {error}");
        match error.kind() {
            Io::NotFound | Io::PermissionDenied | Io::IsADirectory => Failure::not_found(message),
            Io::InvalidData => Failure::invalid(message),
            _ => Failure::io(message),
        }
    }
}

impl From<tributary::Error> for Failure {
    fn from(error: tributary::Error) -> Self {
        Failure {
            conflicts: error.conflicts().to_vec(),
            ..Failure::of(error.kind(), error.user_message())
        }
    }
}
