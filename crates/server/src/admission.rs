//! Per-graph admission: at most [`Limits::max_loads`] loads and
//! [`Limits::max_ingest_streams`] ingest streams of one graph run at once. Beyond that a
//! request is answered 503 with `Retry-After` at once, before its body is read: no queue
//! grows without bound, and one graph's traffic cannot take every other graph's share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tributary::ErrorKind;

use crate::error::ApiError;
use crate::Limits;

/// A place count a semaphore can hold: at least one.
pub(crate) fn bounded(places: usize) -> usize {
    places.clamp(1, Semaphore::MAX_PERMITS)
}

/// What a request asks to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    Load,
    IngestStream,
}

struct Gates {
    loads: Arc<Semaphore>,
    streams: Arc<Semaphore>,
}

pub struct Admission {
    limits: Limits,
    graphs: Mutex<HashMap<String, Gates>>,
}

impl Admission {
    pub fn new(limits: Limits) -> Admission {
        Admission {
            limits,
            graphs: Mutex::new(HashMap::new()),
        }
    }

    /// A place for `work` on graph `id`, held until the permit is dropped.
    pub fn admit(&self, id: &str, work: Work) -> Result<OwnedSemaphorePermit, ApiError> {
        let gate = {
            let mut graphs = self.graphs.lock().unwrap_or_else(|e| e.into_inner());
            let gates = graphs.entry(id.to_owned()).or_insert_with(|| Gates {
                loads: Arc::new(Semaphore::new(bounded(self.limits.max_loads))),
                streams: Arc::new(Semaphore::new(bounded(self.limits.max_ingest_streams))),
            });
            match work {
                Work::Load => gates.loads.clone(),
                Work::IngestStream => gates.streams.clone(),
            }
        };
        gate.try_acquire_owned().map_err(|_| {
            let (what, max, flag) = match work {
                Work::Load => ("loads", self.limits.max_loads, "--max-loads"),
                Work::IngestStream => (
                    "ingest streams",
                    self.limits.max_ingest_streams,
                    "--max-ingest-streams",
                ),
            };
            ApiError::new(
                ErrorKind::Unavailable,
                format!(
                    "graph `{id}` already runs {max} {what} at once (serve {flag}); retry later"
                ),
            )
        })
    }
}
