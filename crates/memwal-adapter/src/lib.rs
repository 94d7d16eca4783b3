//! The only code that touches `lance::dataset::mem_wal`: enrollment, warm durable shard
//! writers, and the pending state of a table's MemWAL.

mod error;
mod fresh;
mod settings;
mod status;
mod writer;

pub use error::{Error, Result};
pub use fresh::{fresh_read, fresh_scanner, FreshQuery};
pub use settings::WriterSettings;
pub use status::{table_state, PendingGeneration, ShardState, TableState};
pub use writer::{enroll, shard_id, Enrolled, Sharding, TableWriter};
