//! The only code that touches `lance::dataset::mem_wal`: enrollment, warm durable shard
//! writers, and the pending state of a table's MemWAL.

mod error;
mod flush_failures;
mod fresh;
mod gc;
mod generation;
mod group;
mod location;
mod settings;
mod shards;
mod status;
mod tail;
mod waits;
mod writer;

pub use error::{Error, Result};
pub use fresh::fresh_scanner;
pub use gc::{collect_memwal_garbage, MemWalGarbage};
pub use generation::{Generation, GenerationBatch};
pub use lance::dataset::mem_wal::LsmScanner;
pub use location::MemWalTable;
pub use settings::WriterSettings;
pub use status::{table_state, PendingGeneration, ShardState, TableState};
pub use tail::{drain_shard, seal_shard, wal_tails, TailDepth, WalTail};
pub use waits::{fold_running, send_waits, FoldRunning, WaitCause, WaitCounts, BUCKET_MS};
pub use writer::{enroll, enrollment, set_maintained_indexes, Enrolled, Sharding, TableWriter};
