//! What a shard's failing memtable flushes said. Lance retries a failing flush in the
//! background, waiting longer each time, and tells only an observer why it failed; a fold
//! waiting for the flush needs the reason to say what is wrong, and to stop waiting when
//! no retry can succeed until someone acts (a full or read-only disk).

use std::sync::Mutex;

use lance::dataset::mem_wal::observer::WalObserver;
use tokio::sync::Notify;
use tributary_storage::DiskRefusal;

/// The flush failures of one shard writer.
#[derive(Debug, Default)]
pub(crate) struct FlushFailures {
    state: Mutex<State>,
    failed: Notify,
}

#[derive(Debug, Default)]
struct State {
    count: u64,
    last: Option<String>,
    refusal: Option<DiskRefusal>,
}

impl FlushFailures {
    /// How many flush attempts have failed so far.
    pub(crate) fn count(&self) -> u64 {
        self.state().count
    }

    /// The message of the last failed attempt, if any failed.
    pub(crate) fn last(&self) -> Option<String> {
        self.state().last.clone()
    }

    /// Wait until an attempt after the `seen`-th failure fails on a disk's refusal, and
    /// return it. Other failures (a store's transient errors) are left to Lance's retries.
    pub(crate) async fn refused_after(&self, seen: u64) -> DiskRefusal {
        loop {
            let notified = self.failed.notified();
            {
                let state = self.state();
                if state.count > seen {
                    if let Some(refusal) = &state.refusal {
                        return refusal.clone();
                    }
                }
            }
            notified.await;
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl WalObserver for FlushFailures {
    fn on_memtable_flush_failure(&self, _generation: u64, error: &lance::Error) {
        {
            let mut state = self.state();
            state.count += 1;
            state.last = Some(tributary_storage::lance_text::user_message(error));
            state.refusal = DiskRefusal::in_error(error);
        }
        self.failed.notify_waiters();
    }
}
