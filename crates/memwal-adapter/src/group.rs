//! Concurrent sends to one shard joined into one Lance put.
//!
//! Lance group-commits concurrent durable puts into one WAL append, but each put still
//! pays its own memtable insert, index apply and durability watch, and puts that reach the
//! writer spread out start more, smaller appends. Here a shard has one put in flight; the
//! sends that arrive meanwhile wait in a queue and go out together as the next put. A lone
//! send goes out at once, so its latency is one put's. (Two puts in flight, the next
//! inserted while the current one appends, measured worse: the second put leaves with
//! whatever is queued, often one send, and appends multiply.)
//!
//! Deletes (Lance tombstones) wait in the same queue, so a shard's writes reach its WAL in
//! the order they were sent; a group is a run of sends of one kind.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use arrow_array::RecordBatch;
use lance::dataset::mem_wal::ShardWriter;
use tokio::sync::{oneshot, Notify};
use uuid::Uuid;

use crate::error::{from_lance, Error, Result};
use crate::waits::{self, WaitCause};

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
    limits: GroupLimits,
    queue: Mutex<Queue>,
}

/// A group fits one memtable: Lance refuses a put of more rows or batches than a memtable
/// holds, and its bytes bound the memory a group adds at once.
struct GroupLimits {
    rows: usize,
    batches: usize,
    bytes: usize,
    /// Bytes that may wait behind the put in flight. Lance's own back-pressure makes a put
    /// wait (it never fails), so without this bound the queue in front of it would grow
    /// without end; it is the writer's own unflushed bound, so what waits in front of it
    /// is at most what it may hold.
    queued_bytes: usize,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    /// Bytes of the batches in `waiting`.
    waiting_bytes: usize,
    /// A drain task is running and will take everything queued.
    draining: bool,
}

struct Waiting {
    queued_at: Instant,
    kind: Kind,
    batch: RecordBatch,
    done: oneshot::Sender<Result<()>>,
}

/// What a queued send writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Rows, in the table's schema.
    Put,
    /// Tombstones: a batch of keys (the `id` column).
    Delete,
}

impl GroupWriter {
    pub fn new(table: &str, shard: Uuid, writer: ShardWriter) -> Self {
        let config = writer.config();
        let limits = GroupLimits {
            rows: config.max_memtable_rows,
            batches: config.max_memtable_batches,
            bytes: config.max_memtable_size,
            queued_bytes: config.max_unflushed_memtable_bytes,
        };
        GroupWriter {
            shared: Arc::new(Shared {
                table: table.to_owned(),
                shard,
                writer,
                limits,
                queue: Mutex::new(Queue::default()),
            }),
            drained: Arc::new(Notify::new()),
        }
    }

    pub fn writer(&self) -> &ShardWriter {
        &self.shared.writer
    }

    /// Write `batch`; returns once it is durable in the WAL (with the sends it was grouped
    /// with), or with the error their put failed with. Refused at once with
    /// [`Error::Backpressure`] when more than the shard's unflushed bound already waits.
    pub async fn put(&self, batch: RecordBatch) -> Result<()> {
        self.send(Kind::Put, batch).await
    }

    /// Tombstone the keys of `keys` (its `id` column), in order with the puts around it;
    /// returns as [`GroupWriter::put`] does.
    pub async fn delete(&self, keys: RecordBatch) -> Result<()> {
        self.send(Kind::Delete, keys).await
    }

    async fn send(&self, kind: Kind, batch: RecordBatch) -> Result<()> {
        let (done, acked) = oneshot::channel();
        let bytes = batch.get_array_memory_size();
        let start_drain = {
            let mut queue = self.shared.queue();
            let bound = self.shared.limits.queued_bytes;
            if !queue.waiting.is_empty() && queue.waiting_bytes + bytes > bound {
                return Err(Error::Backpressure {
                    table: self.shared.table.clone(),
                    message: format!(
                        "{} MiB of sends already wait for shard {}'s writer (bound {} MiB); retry later",
                        queue.waiting_bytes >> 20,
                        self.shared.shard,
                        bound >> 20
                    ),
                });
            }
            queue.waiting_bytes += bytes;
            queue.waiting.push_back(Waiting {
                queued_at: Instant::now(),
                kind,
                batch,
                done,
            });
            !std::mem::replace(&mut queue.draining, true)
        };
        if start_drain {
            // A task of its own: a caller that stops waiting (a dropped request) must not
            // cancel a put other sends are waiting on.
            let shared = self.shared.clone();
            let ended = NotifyOnDrop(self.drained.clone());
            tokio::spawn(async move {
                // Declared first, so dropped last (after `shared`), also when the drain
                // unwinds: `into_writer` waits for it.
                let _ended = ended;
                let shared = shared;
                shared.drain().await;
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

/// A group's sends as one batch: the memtable holds each batch it is given, and a
/// one-line send's batch costs far more memtable bytes than its row (buffers sized for
/// many rows), so a group of 64 one-row batches brought Lance's back-pressure (a flush
/// behind) hundreds of times a minute, every time a slow acknowledgement. Sends of
/// differing schemas (none today: a shard's rows share its table's) stay apart.
fn one_batch(group: &[Waiting]) -> Vec<RecordBatch> {
    let batches: Vec<RecordBatch> = group.iter().map(|w| w.batch.clone()).collect();
    if batches.len() < 2 {
        return batches;
    }
    let schema = batches[0].schema();
    if batches.iter().any(|b| b.schema() != schema) {
        return batches;
    }
    match arrow_select::concat::concat_batches(&schema, &batches) {
        Ok(one) => vec![one],
        Err(_) => batches,
    }
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics while holding the lock; a poisoned queue is still consistent.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn drain(&self) {
        let mut unfinished = DrainGuard {
            shared: self,
            armed: true,
        };
        let mut last_group = 0;
        loop {
            self.gather(last_group).await;
            let Some(group) = self.next_group() else {
                unfinished.armed = false;
                return;
            };
            last_group = group.len();
            let batches = one_batch(&group);
            // A put Lance holds (tests: what its back-pressure wait looks like from here).
            fail::fail_point!("memwal::before-put");
            let held_before = self.writer.backpressure_stats();
            let flushed_before = self.writer.stats().memtable_flush_count;
            let started = Instant::now();
            let result = match group[0].kind {
                Kind::Put => self.writer.put(batches).await,
                Kind::Delete => self.writer.delete(batches).await,
            };
            let put = started.elapsed();
            let held_after = self.writer.backpressure_stats();
            let put_cause = if held_after.total_count > held_before.total_count
                || held_after.total_wait_ms > held_before.total_wait_ms
            {
                WaitCause::Backpressure
            } else if self.writer.stats().memtable_flush_count > flushed_before {
                WaitCause::Flush
            } else {
                WaitCause::Put
            };
            let during_fold = waits::folding();
            for waiting in &group {
                let queued = started.duration_since(waiting.queued_at);
                let cause = match put_cause {
                    WaitCause::Put if queued > put => WaitCause::Queued,
                    cause => cause,
                };
                waits::record(cause, during_fold, waiting.queued_at.elapsed());
            }
            let result = result
                .map(|_| ())
                .map_err(|e| from_lance(&self.table, &self.shard, "put", e));
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
    }

    /// Let the senders the last put acknowledged come back before the next put: a
    /// producer that waits for its ack before sending again would otherwise miss it by a
    /// wake-up, and every round would split into a put of one send and a put of the rest.
    /// Yields to the scheduler (no timer) only while sends keep arriving, up to the last
    /// group's size, so a lone producer waits for nothing.
    async fn gather(&self, expected: usize) {
        let mut queued = self.queue().waiting.len();
        while queued < expected {
            tokio::task::yield_now().await;
            let now = self.queue().waiting.len();
            if now == queued {
                break;
            }
            queued = now;
        }
    }

    /// The next sends to write together (oldest first, all of one kind), or `None` (and no
    /// drain running) when the queue is empty.
    fn next_group(&self) -> Option<Vec<Waiting>> {
        let mut queue = self.queue();
        let mut group = Vec::new();
        let (mut rows, mut bytes) = (0, 0);
        while let Some(next) = queue.waiting.pop_front() {
            let more_rows = rows + next.batch.num_rows();
            let size = next.batch.get_array_memory_size();
            let more_bytes = bytes + size;
            let full = more_rows > self.limits.rows
                || more_bytes > self.limits.bytes
                || group.len() == self.limits.batches
                || group
                    .first()
                    .is_some_and(|first: &Waiting| first.kind != next.kind);
            // A send too large on its own still goes alone, and Lance judges it.
            if full && !group.is_empty() {
                queue.waiting.push_front(next);
                break;
            }
            (rows, bytes) = (more_rows, more_bytes);
            queue.waiting_bytes -= size;
            group.push(next);
        }
        if group.is_empty() {
            queue.draining = false;
            return None;
        }
        Some(group)
    }
}

/// Ends a drain that stops early (it panicked, or its runtime dropped it): its waiting sends
/// are told (their senders drop) rather than left queued behind a drain that no longer runs.
struct DrainGuard<'a> {
    shared: &'a Shared,
    armed: bool,
}

impl Drop for DrainGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut queue = self.shared.queue();
            queue.waiting.clear();
            queue.waiting_bytes = 0;
            queue.draining = false;
        }
    }
}

/// Signals its `Notify` when dropped.
struct NotifyOnDrop(Arc<Notify>);

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}
