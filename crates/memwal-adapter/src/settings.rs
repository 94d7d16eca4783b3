//! The writer knobs of a graph, recorded in each table's MemWAL index so every process
//! writes with the same ones. (Lance stores `writer_config_defaults` but never applies them:
//! the adapter reads them back and builds each writer's config itself.)

use std::collections::HashMap;
use std::time::Duration;

use lance::dataset::mem_wal::ShardWriterConfig;
use uuid::Uuid;

/// Latency/throughput and memory knobs of the ingest writers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterSettings {
    /// A WAL append starts once this many bytes are pending. 1 byte appends on every put:
    /// a lone put is acknowledged after one append, and concurrent puts that arrive while an
    /// append is in flight share the next one (Lance group-commits them).
    pub wal_buffer_bytes: usize,
    /// The background append ticker (Lance refuses zero with durable writes).
    pub wal_flush_interval: Duration,
    /// A memtable freezes (and flushes to a generation) at this many rows…
    pub memtable_rows: usize,
    /// …or this many bytes.
    pub memtable_bytes: usize,
    /// Sends wait, then fail with back-pressure, above this many unflushed bytes.
    pub max_unflushed_bytes: usize,
    /// How long a fold waits for a memtable's flush. Lance retries a failing flush (a
    /// store that keeps failing), waiting longer each time; past this the fold gives up as
    /// unavailable, nothing changed, and a later one takes the rows.
    pub flush_patience: Duration,
}

impl Default for WriterSettings {
    fn default() -> Self {
        WriterSettings {
            wal_buffer_bytes: 1,
            wal_flush_interval: Duration::from_millis(100),
            memtable_rows: 50_000,
            memtable_bytes: 64 << 20,
            max_unflushed_bytes: 256 << 20,
            flush_patience: Duration::from_secs(30),
        }
    }
}

const BUFFER: &str = "max_wal_buffer_size";
const INTERVAL: &str = "max_wal_flush_interval_ms";
const ROWS: &str = "max_memtable_rows";
const BYTES: &str = "max_memtable_size";
const UNFLUSHED: &str = "max_unflushed_memtable_bytes";

impl WriterSettings {
    /// The config of a durable writer on `shard`.
    pub fn writer_config(&self, shard: Uuid) -> ShardWriterConfig {
        let mut config = ShardWriterConfig::new(shard)
            .with_durable_write(true)
            .with_max_wal_buffer_size(self.wal_buffer_bytes)
            .with_max_wal_flush_interval(self.wal_flush_interval)
            .with_stats_log_interval(None);
        config.max_memtable_rows = self.memtable_rows;
        config.max_memtable_size = self.memtable_bytes;
        config.max_unflushed_memtable_bytes = self.max_unflushed_bytes;
        config
    }

    /// Read the settings recorded in a table's MemWAL index; missing keys keep `fallback`'s.
    pub fn from_recorded(
        recorded: &HashMap<String, String>,
        fallback: &WriterSettings,
    ) -> WriterSettings {
        let read = |key: &str, default: usize| {
            recorded
                .get(key)
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        WriterSettings {
            wal_buffer_bytes: read(BUFFER, fallback.wal_buffer_bytes),
            wal_flush_interval: Duration::from_millis(read(
                INTERVAL,
                fallback.wal_flush_interval.as_millis() as usize,
            ) as u64),
            memtable_rows: read(ROWS, fallback.memtable_rows),
            memtable_bytes: read(BYTES, fallback.memtable_bytes),
            max_unflushed_bytes: read(UNFLUSHED, fallback.max_unflushed_bytes),
            // How long this process waits is its own choice, not the table's.
            flush_patience: fallback.flush_patience,
        }
    }
}
