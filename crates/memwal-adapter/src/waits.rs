//! What each durable send waited for, counted for the whole process: the answer to "why
//! was that acknowledgement slow?" that a latency histogram alone cannot give.
//!
//! A send's time is its wait in the shard's queue (behind the put in flight) plus the put
//! it went out with. Each put is put down to one cause, the first that holds: Lance held
//! it for back-pressure (a memtable flush behind), a memtable flush finished while it ran,
//! the send waited longer in the queue than its put took, or the put itself (the WAL
//! append and its fsync, the memtable insert). Whether a fold was running in this process
//! is counted beside it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Why a send took the time it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitCause {
    /// Lance's back-pressure held its put until a memtable flush freed room.
    Backpressure,
    /// A memtable flush finished during its put (its I/O shared the disk and cores).
    Flush,
    /// It waited in the shard's queue longer than its own put took.
    Queued,
    /// Its put: the WAL append and fsync, the memtable insert.
    Put,
}

impl WaitCause {
    pub const ALL: [WaitCause; 4] = [
        WaitCause::Backpressure,
        WaitCause::Flush,
        WaitCause::Queued,
        WaitCause::Put,
    ];

    pub fn name(self) -> &'static str {
        match self {
            WaitCause::Backpressure => "backpressure",
            WaitCause::Flush => "flush",
            WaitCause::Queued => "queued",
            WaitCause::Put => "put",
        }
    }
}

/// Upper bounds of the buckets, in milliseconds: 0.25 ms doubling to 4 s, then the rest.
pub const BUCKET_MS: [f64; 15] = [
    0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0,
];
const BUCKETS: usize = BUCKET_MS.len() + 1;

/// Sends counted by cause, by whether a fold ran, by time bucket.
static COUNTS: [[[AtomicU64; BUCKETS]; 2]; 4] =
    [const { [const { [const { AtomicU64::new(0) }; BUCKETS] }; 2] }; 4];
static FOLDS_RUNNING: AtomicU64 = AtomicU64::new(0);

/// Counts of one cause and fold state, per bucket of [`BUCKET_MS`] (the last: longer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitCounts {
    pub cause: WaitCause,
    pub during_fold: bool,
    pub buckets: [u64; BUCKETS],
}

/// Every count so far.
pub fn send_waits() -> Vec<WaitCounts> {
    let mut all = Vec::new();
    for cause in WaitCause::ALL {
        for during_fold in [false, true] {
            let counts = &COUNTS[cause as usize][usize::from(during_fold)];
            all.push(WaitCounts {
                cause,
                during_fold,
                buckets: std::array::from_fn(|i| counts[i].load(Ordering::Relaxed)),
            });
        }
    }
    all
}

/// A fold began in this process; it ends when the guard drops.
pub fn fold_running() -> FoldRunning {
    FOLDS_RUNNING.fetch_add(1, Ordering::Relaxed);
    FoldRunning(())
}

pub struct FoldRunning(());

impl Drop for FoldRunning {
    fn drop(&mut self) {
        FOLDS_RUNNING.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(crate) fn record(cause: WaitCause, during_fold: bool, took: Duration) {
    let ms = took.as_secs_f64() * 1e3;
    let bucket = BUCKET_MS
        .iter()
        .position(|&bound| ms <= bound)
        .unwrap_or(BUCKETS - 1);
    COUNTS[cause as usize][usize::from(during_fold)][bucket].fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn folding() -> bool {
    FOLDS_RUNNING.load(Ordering::Relaxed) > 0
}
