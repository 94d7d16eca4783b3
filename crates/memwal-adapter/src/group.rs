//! Concurrent sends to one shard joined into one Lance put.
//!
//! Lance group-commits concurrent durable puts into one WAL append, but each put still
//! pays its own memtable insert, index apply and durability watch, and puts that reach the
//! writer spread out start more, smaller appends. Here a shard has at most two puts in
//! flight (one appending, the next inserted and waiting for it); the sends that arrive
//! meanwhile wait in a queue and go out together as the next put. A lone send goes out at
//! once, so its latency is one put's.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arrow_array::RecordBatch;
use futures::stream::{FuturesOrdered, StreamExt};
use lance::dataset::mem_wal::{BatchDurableWatcher, ShardWriter, WriteResult};
use tokio::sync::{oneshot, Notify};
use uuid::Uuid;

use crate::error::{from_lance, Error, Result};

/// Puts in flight per shard: one being appended and the next already inserted, so Lance
/// starts the next append the moment the current one ends.
const PUTS_IN_FLIGHT: usize = 2;

/// A shard writer whose puts are grouped.
pub(crate) struct GroupWriter {
    shared: Arc<Shared>,
    /// Signalled when a drain task has ended and let go of `shared`.
    drained: Arc<Notify>,
}

struct Shared {
    table: String,
    shard: Uuid,
    writer: ShardWriter,
    /// Lance refuses a put larger than one memtable: a group stays below it.
    max_group_rows: usize,
    queue: Mutex<Queue>,
    /// Signalled when a send joins the queue of a running drain.
    arrived: Notify,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    /// A drain task is running and will take everything queued.
    draining: bool,
}

struct Waiting {
    batch: RecordBatch,
    done: oneshot::Sender<Result<()>>,
}

impl GroupWriter {
    pub fn new(table: &str, shard: Uuid, writer: ShardWriter, max_group_rows: usize) -> Self {
        GroupWriter {
            shared: Arc::new(Shared {
                table: table.to_owned(),
                shard,
                writer,
                max_group_rows,
                queue: Mutex::new(Queue::default()),
                arrived: Notify::new(),
            }),
            drained: Arc::new(Notify::new()),
        }
    }

    pub fn writer(&self) -> &ShardWriter {
        &self.shared.writer
    }

    /// Write `batch`; returns once it is durable in the WAL (with the sends it was grouped
    /// with), or with the error their put failed with.
    pub async fn put(&self, batch: RecordBatch) -> Result<()> {
        let (done, acked) = oneshot::channel();
        let start_drain = {
            let mut queue = self.shared.queue();
            queue.waiting.push_back(Waiting { batch, done });
            !std::mem::replace(&mut queue.draining, true)
        };
        if !start_drain {
            self.shared.arrived.notify_one();
        }
        if start_drain {
            // A task of its own: a caller that stops waiting (a dropped request) must not
            // cancel a put other sends are waiting on.
            let shared = self.shared.clone();
            let drained = self.drained.clone();
            tokio::spawn(async move {
                shared.drain().await;
                drop(shared);
                drained.notify_one();
            });
        }
        acked.await.unwrap_or_else(|_| {
            Err(Error::Interrupted {
                table: self.shared.table.clone(),
                shard: self.shared.shard.to_string(),
            })
        })
    }

    /// The writer back, once no drain task holds it.
    pub async fn into_writer(self) -> ShardWriter {
        let mut shared = self.shared;
        loop {
            match Arc::try_unwrap(shared) {
                Ok(only) => return only.writer,
                Err(still_shared) => {
                    shared = still_shared;
                    self.drained.notified().await;
                }
            }
        }
    }
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics while holding the lock; a poisoned queue is still consistent.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn drain(&self) {
        let _unwinding = DrainGuard { shared: self };
        let mut in_flight = FuturesOrdered::new();
        loop {
            // Inserts go in arrival order; only the waits for durability overlap.
            while in_flight.len() < PUTS_IN_FLIGHT {
                let Some(group) = self.next_group(in_flight.is_empty()) else {
                    break;
                };
                let batches = group.iter().map(|w| w.batch.clone()).collect();
                let inserted = self.writer.put_no_wait(batches).await;
                in_flight.push_back(self.settle(group, inserted));
            }
            if in_flight.is_empty() {
                return;
            }
            tokio::select! {
                _ = in_flight.next() => {}
                _ = self.arrived.notified() => {}
            }
        }
    }

    /// Wait until the group's rows are durable, then tell each of its sends.
    async fn settle(
        &self,
        group: Vec<Waiting>,
        inserted: lance::Result<(WriteResult, Option<BatchDurableWatcher>)>,
    ) {
        let durable = match inserted {
            Ok((_, Some(mut watcher))) => watcher.wait().await,
            Ok((_, None)) => Err(lance::Error::invalid_input(
                "the writer is not durable: a send is never acknowledged before its rows are",
            )),
            Err(error) => Err(error),
        };
        let result = durable.map_err(|e| from_lance(&self.table, &self.shard, "put", e));
        for waiting in group {
            // A send whose caller stopped waiting has no one to tell.
            let _ = waiting.done.send(
                result
                    .as_ref()
                    .map(|_| ())
                    .map_err(|e| e.duplicate(&self.table)),
            );
        }
    }

    /// The next sends to put together, oldest first, or `None` when the queue is empty
    /// (then, with `may_stop`, the drain ends: the next send starts another).
    fn next_group(&self, may_stop: bool) -> Option<Vec<Waiting>> {
        let mut queue = self.queue();
        let mut group = Vec::new();
        let mut rows = 0;
        while let Some(next) = queue.waiting.pop_front() {
            let n = next.batch.num_rows();
            if !group.is_empty() && rows + n > self.max_group_rows {
                queue.waiting.push_front(next);
                break;
            }
            rows += n;
            group.push(next);
        }
        if group.is_empty() {
            queue.draining = !may_stop;
            return None;
        }
        Some(group)
    }
}

/// Ends a drain that unwinds: its waiting sends are told (their senders drop) rather than
/// left queued behind a drain that no longer runs.
struct DrainGuard<'a> {
    shared: &'a Shared,
}

impl Drop for DrainGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut queue = self.shared.queue();
            queue.waiting.clear();
            queue.draining = false;
        }
    }
}
