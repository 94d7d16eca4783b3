use snafu::Snafu;
use tributary_storage::lance_text::user_message;

#[derive(Debug, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum Error {
    /// Another writer claimed the shard: this one can never acknowledge again.
    #[snafu(display("writer of {table} shard {shard} was fenced: {message}"))]
    Fenced {
        table: String,
        shard: String,
        message: String,
    },

    /// The shard was sealed: no writer may claim it again.
    #[snafu(display("{table}: shard {shard} is sealed"))]
    Sealed { table: String, shard: String },

    /// Too much unflushed data; retry later.
    #[snafu(display("{table} is over its unflushed-bytes bound: {message}"))]
    Backpressure { table: String, message: String },

    #[snafu(display(
        "{table} already has the primary key ({found}); Tributary keys on `id` and Lance never changes a primary key once set"
    ))]
    PrimaryKeyMismatch { table: String, found: String },

    #[snafu(display("{table}: {message}"))]
    InvalidSetting { table: String, message: String },

    #[snafu(display("MemWAL {action} on {table} failed: {}", user_message(source)))]
    Lance {
        action: String,
        table: String,
        source: lance::Error,
    },

    #[snafu(display("{source}"))]
    Storage { source: tributary_storage::Error },

    #[snafu(display(
        "{table}: {}rows of shard {shard} go to the process that owns it; this process owns \
         shards {owned:?}",
        key.as_ref().map(|key| format!("key `{key}` is in shard {shard}: ")).unwrap_or_default()
    ))]
    NotOwned {
        table: String,
        /// A key of the shard, when one is known.
        key: Option<String>,
        shard: u32,
        owned: Vec<u32>,
    },

    #[snafu(display(
        "{table} shard {shard}: its memtable did not flush within {seconds} s (Lance retries a \
         failing flush, waiting longer each time){}; what it holds is durable in the WAL, and \
         a later fold takes it",
        last_error.as_ref().map(|e| format!("; its last attempt failed: {e}")).unwrap_or_default()
    ))]
    FlushStalled {
        table: String,
        shard: String,
        seconds: u64,
        last_error: Option<String>,
    },

    /// A memtable flush a disk refused: no retry helps until someone frees space or
    /// makes the disk writable. Lance keeps retrying it in the background.
    #[snafu(display(
        "{source}: {table} shard {shard} could not flush its memtable; what it holds is \
         durable in the WAL, and a later fold takes it"
    ))]
    FlushRefused {
        table: String,
        shard: String,
        source: tributary_storage::DiskRefusal,
    },

    /// The put a send was grouped into stopped before it reported: its rows may or may not
    /// be durable, and the send is not acknowledged.
    #[snafu(display(
        "the write to {table} shard {shard} was interrupted before it reported; retry the send"
    ))]
    Interrupted { table: String, shard: String },
}

impl Error {
    /// The writer can never acknowledge again (another writer claimed its shard, or its
    /// own WAL write failed and it poisoned itself): reopen the shard, which replays it.
    pub fn is_fenced(&self) -> bool {
        matches!(self, Error::Fenced { .. })
    }

    /// A flush did not finish within the caller's patience, or a disk refused it.
    pub fn is_flush_stalled(&self) -> bool {
        matches!(
            self,
            Error::FlushStalled { .. } | Error::FlushRefused { .. }
        )
    }

    /// The shard was sealed: its table takes no streamed writes any more.
    pub fn is_sealed(&self) -> bool {
        matches!(self, Error::Sealed { .. })
    }

    /// The same failure for another send of the same grouped put: typed variants keep their
    /// type (a fence fences every send of the group); anything else keeps its message.
    pub(crate) fn duplicate(&self, table: &str) -> Error {
        match self {
            Error::Fenced {
                table,
                shard,
                message,
            } => Error::Fenced {
                table: table.clone(),
                shard: shard.clone(),
                message: message.clone(),
            },
            Error::Backpressure { table, message } => Error::Backpressure {
                table: table.clone(),
                message: message.clone(),
            },
            Error::Interrupted { table, shard } => Error::Interrupted {
                table: table.clone(),
                shard: shard.clone(),
            },
            Error::Lance {
                action,
                table,
                source,
            } => Error::Lance {
                action: action.clone(),
                table: table.clone(),
                source: lance::Error::io(source.to_string()),
            },
            other => Error::Lance {
                action: "put".into(),
                table: table.to_owned(),
                source: lance::Error::io(other.to_string()),
            },
        }
    }
}
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Classify a Lance error from a writer call: fencing and back-pressure are typed, the
/// rest is the action that failed.
pub(crate) fn from_lance(
    table: &str,
    shard: &uuid::Uuid,
    action: &str,
    source: lance::Error,
) -> Error {
    // Two fences are I/O errors in Lance 14, told only by their text (both pinned by
    // surface guards): a writer open that loses the epoch race, and `close` of a writer
    // another one fenced.
    let untyped_fence = tributary_storage::lance_text::is_untyped_fence(&source);
    if source.fence_reason().is_some() || untyped_fence {
        Error::Fenced {
            table: table.to_owned(),
            shard: shard.to_string(),
            message: user_message(&source),
        }
    } else if tributary_storage::lance_text::is_sealed_shard(&source) {
        Error::Sealed {
            table: table.to_owned(),
            shard: shard.to_string(),
        }
    } else if source.is_backpressure() {
        Error::Backpressure {
            table: table.to_owned(),
            message: user_message(&source),
        }
    } else {
        Error::Lance {
            action: action.to_owned(),
            table: table.to_owned(),
            source,
        }
    }
}

impl Error {
    /// What a caller can do about it.
    pub fn kind(&self) -> tributary_storage::ErrorKind {
        use tributary_storage::ErrorKind;
        match self {
            Error::Fenced { .. } => ErrorKind::Fenced,
            Error::FlushRefused { source, .. } => source.condition.kind(),
            Error::Backpressure { .. } | Error::Interrupted { .. } | Error::FlushStalled { .. } => {
                ErrorKind::Unavailable
            }
            Error::PrimaryKeyMismatch { .. }
            | Error::InvalidSetting { .. }
            | Error::Sealed { .. }
            | Error::NotOwned { .. } => ErrorKind::InvalidInput,
            Error::Lance { source, .. } => {
                tributary_storage::store_access_kind(source).unwrap_or(ErrorKind::Internal)
            }
            Error::Storage { source } => source.kind(),
        }
    }
}
