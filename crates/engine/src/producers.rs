//! Exactly-once producers: a stream tagged with a producer id numbers its lines with
//! sequence numbers, and a line at or below what is already acknowledged for that producer
//! is acknowledged again without being written.
//!
//! A producer's *acknowledged mark* (`__producers/<scope>/<producer>.json`, the scope being
//! `main` or a branch's lineage, so a branch deleted and made again starts with no marks)
//! is the highest sequence acknowledged for it. One stream of a producer runs at a time,
//! across processes: it holds the producer's lease (`__producers/<scope>/<producer>/`, see
//! [`tributary_write::lease`]), reads the mark once, and, for each send, skips the lines at
//! or below it, writes the rest, and raises the mark once they are durable — before the
//! acknowledgement goes out. So a retry after an ambiguous failure (a dropped connection,
//! a crash) finds the lines it already got acknowledged and writes them no more; a retry of
//! an older send after a newer one was acknowledged writes nothing.
//!
//! A process that dies after its rows are durable and before the mark is raised never
//! acknowledged them: the retry writes those rows again, with the same content and in the
//! same place among the producer's own writes, so among them it is as if written once (a
//! write of another writer to the same key in between is overwritten by the retry, which
//! is acknowledged after it).
//!
//! Within a stream, sends go in line order: a send that starts after a line the stream has
//! not settled (a later send overtaking an earlier one, or one after an earlier send that
//! failed and was not sent again first) is refused, so no line is passed over.
//!
//! The *folded mark*, in the head commit ([`tributary_publisher::CommitRecord::producers`]),
//! is the highest sequence whose lines a fold has published: a fold records the marks its
//! cut holds every line of (see [`Graph::producer_marks_to_fold`]). It trails the
//! acknowledged mark and never passes it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use snafu::ResultExt;
use tributary_publisher::Publisher;
use tributary_write::{path_segment, producers_dir, Acquired, Lease};

use crate::error::{Error, PublishSnafu, Result, StorageSnafu};
use crate::graph::Graph;

/// How long a stream waits for its producer's lease (another stream of the producer ends,
/// or its process is found gone) before it is refused as unavailable.
const LEASE_PATIENCE: Duration = Duration::from_secs(5);

/// Longest idempotency key a load takes.
pub(crate) const MAX_IDEMPOTENCY_KEY: usize = 200;

/// Longest producer id: it names a file (escaped, up to three bytes a character).
pub(crate) const MAX_PRODUCER_ID: usize = 64;

/// Check a client-chosen id (a producer id, an idempotency key): 1 to `max` printable
/// ASCII characters, no spaces.
pub(crate) fn check_token(what: &'static str, value: &str, max: usize) -> Result<()> {
    let fine =
        !value.is_empty() && value.len() <= max && value.chars().all(|c| c.is_ascii_graphic());
    if fine {
        Ok(())
    } else {
        crate::error::InvalidTokenSnafu { what, max }.fail()
    }
}

/// Who sends a stream, and the sequence number of its first line (line `n` of the stream
/// has sequence `first_sequence + n - 1`). Clones share one hold on the producer (its
/// lease and mark), taken at the first send and let go when the last clone is dropped:
/// one value per stream.
#[derive(Clone)]
pub struct Producer {
    id: String,
    first_sequence: u64,
    held: Arc<tokio::sync::OnceCell<tokio::sync::Mutex<Held>>>,
}

impl PartialEq for Producer {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.first_sequence == other.first_sequence
    }
}

impl Eq for Producer {}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("id", &self.id)
            .field("first_sequence", &self.first_sequence)
            .finish_non_exhaustive()
    }
}

impl Producer {
    pub fn new(id: impl Into<String>, first_sequence: u64) -> Result<Producer> {
        let id = id.into();
        check_token("a producer id", &id, MAX_PRODUCER_ID)?;
        Ok(Producer {
            id,
            first_sequence,
            held: Arc::default(),
        })
    }

    /// A stream's producer from a request's parts: sequence numbers need an id; with an id
    /// and no first sequence, the first line is sequence 1.
    pub fn from_parts(id: Option<String>, first_sequence: Option<u64>) -> Result<Option<Producer>> {
        match (id, first_sequence) {
            (Some(id), first) => Producer::new(id, first.unwrap_or(1)).map(Some),
            (None, Some(_)) => Err(Error::SequenceWithoutProducer),
            (None, None) => Ok(None),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn first_sequence(&self) -> u64 {
        self.first_sequence
    }

    /// The sequence number of stream line `line` (1-based); `None` past `u64::MAX`.
    pub fn sequence_of(&self, line: u64) -> Option<u64> {
        self.first_sequence.checked_add(line.checked_sub(1)?)
    }
}

/// A producer's marks, as `ingest status` shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ProducerStatus {
    pub producer: String,
    /// The highest sequence acknowledged (written or rejected).
    pub acknowledged: Option<u64>,
    /// The highest sequence whose lines the head commit holds.
    pub folded: Option<u64>,
}

/// What a mark object says.
#[derive(Debug, Serialize, Deserialize)]
struct MarkRecord {
    producer: String,
    sequence: u64,
}

fn mark_path(scope: &str, producer: &str) -> String {
    format!("{}/{}.json", producers_dir(scope), path_segment(producer))
}

fn lease_dir(scope: &str, producer: &str) -> String {
    format!("{}/{}", producers_dir(scope), path_segment(producer))
}

/// Where a producer's marks and leases are on the branch whose lineage is `lineage`:
/// `main`'s under `main`, another branch's under its lineage (unique to that branch, and
/// never a branch name: it holds a `.`, so it cannot be `main`).
fn scope_of(lineage: Option<&str>) -> String {
    lineage
        .unwrap_or(tributary_publisher::MAIN_BRANCH)
        .to_owned()
}

pub(crate) struct Held {
    lease: Lease,
    /// The lineage of the stream's branch.
    lineage: Option<String>,
    /// The mark when the lease was taken (what earlier holders acknowledged).
    taken_at: Option<u64>,
    pub(crate) mark: Option<u64>,
    /// The stream's first line not yet settled: its next send starts there (or earlier).
    next_line: u64,
}

impl Producer {
    /// The producer's lease and mark, taken at the first send; sends run one at a time
    /// under it.
    pub(crate) async fn hold(
        &self,
        graph: &Graph,
        branch: &str,
        lineage: Option<&str>,
    ) -> Result<tokio::sync::MutexGuard<'_, Held>> {
        let held = self
            .held
            .get_or_try_init(|| async {
                let id = &self.id;
                let what =
                    format!("the lease of producer `{id}` on branch `{branch}`: an ingest stream");
                let scope = scope_of(lineage);
                let dir = lease_dir(&scope, id);
                let acquired =
                    Lease::try_acquire(&graph.store, &dir, &what, Some(LEASE_PATIENCE)).await?;
                let lease = match acquired {
                    Acquired::Held(lease) => *lease,
                    Acquired::Busy(owner) => {
                        return Err(Error::ProducerBusy {
                            producer: id.clone(),
                            pid: owner.pid,
                            host: owner.host,
                        })
                    }
                };
                let mark = graph.acknowledged_mark(&scope, id).await?;
                Ok(tokio::sync::Mutex::new(Held {
                    lease,
                    lineage: lineage.map(str::to_owned),
                    taken_at: mark,
                    mark,
                    next_line: 1,
                }))
            })
            .await?;
        Ok(held.lock().await)
    }
}

impl Held {
    /// Whether the lease is still this stream's (a stream stalled past the grace on
    /// another machine may have been taken over). One listing.
    pub(crate) async fn confirm(&self, producer: &str) -> Result<()> {
        if self.lease.confirm().await? {
            Ok(())
        } else {
            Err(Error::ProducerTakenOver {
                producer: producer.to_owned(),
            })
        }
    }

    /// Refuse a send that starts after a line of the stream not yet settled (that line
    /// would be passed over: once a later one raises the mark, it counts as a duplicate).
    pub(crate) fn check_order(&self, producer: &str, first_line: u64) -> Result<()> {
        if first_line > self.next_line {
            return Err(Error::OutOfSequence {
                producer: producer.to_owned(),
                expected: self.next_line,
                first: first_line,
            });
        }
        Ok(())
    }

    /// The stream's lines through `line` are settled (written, rejected, or duplicates).
    pub(crate) fn settled(&mut self, line: u64) {
        self.next_line = self.next_line.max(line.saturating_add(1));
    }

    /// Raise the acknowledged mark to `sequence`: the lines up to it are durable or
    /// rejected. Written before the acknowledgement goes out, once the lease is confirmed
    /// still this stream's (a stream taken over meanwhile raises nothing and acknowledges
    /// nothing, so the mark never goes back).
    pub(crate) async fn raise(
        &mut self,
        graph: &Graph,
        producer: &str,
        sequence: u64,
    ) -> Result<()> {
        if self.mark.is_some_and(|mark| mark >= sequence) {
            return Ok(());
        }
        // The crash window between rows made durable and their mark.
        #[cfg(feature = "failpoints")]
        fail::fail_point!("ingest::before-producer-mark", |_| {
            Err(tributary_write::Error::Injected {
                point: "ingest::before-producer-mark".to_owned(),
            }
            .into())
        });
        self.confirm(producer).await?;
        let record = MarkRecord {
            producer: producer.to_owned(),
            sequence,
        };
        let bytes = serde_json::to_vec(&record).unwrap_or_default();
        graph
            .store
            .put(
                &mark_path(&scope_of(self.lineage.as_deref()), producer),
                bytes,
            )
            .await
            .context(StorageSnafu)?;
        self.mark = Some(sequence);
        graph.streaming.producer_acknowledged(
            self.lineage.as_deref(),
            producer,
            self.taken_at,
            sequence,
        );
        Ok(())
    }
}

impl Graph {
    /// The mark object at `path`, if there is one.
    async fn read_mark(&self, path: &str) -> Result<Option<MarkRecord>> {
        let Some(bytes) = self.store.get(path).await.context(StorageSnafu)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| Error::CorruptProducerMark {
                path: path.to_owned(),
                reason: error.to_string(),
            })
    }

    /// The acknowledged mark of `producer` in `scope` (see [`scope_of`]).
    async fn acknowledged_mark(&self, scope: &str, producer: &str) -> Result<Option<u64>> {
        let mark = self.read_mark(&mark_path(scope, producer)).await?;
        Ok(mark.map(|record| record.sequence))
    }

    /// Every producer's acknowledged mark on the branch whose lineage is `lineage`.
    pub(crate) async fn acknowledged_marks(
        &self,
        lineage: Option<&str>,
    ) -> Result<BTreeMap<String, u64>> {
        let dir = producers_dir(&scope_of(lineage));
        let mut marks = BTreeMap::new();
        for name in self.store.list(&dir).await.context(StorageSnafu)? {
            if !name.ends_with(".json") {
                continue;
            }
            // An unreadable mark is reported, never a reason to fail a fold or a status.
            match self.read_mark(&format!("{dir}/{name}")).await {
                Ok(Some(record)) => {
                    marks.insert(record.producer, record.sequence);
                }
                Ok(None) => {}
                Err(error @ Error::CorruptProducerMark { .. }) => {
                    tracing::warn!(%error, "unreadable producer mark")
                }
                Err(error) => return Err(error),
            }
        }
        Ok(marks)
    }

    /// Each producer's acknowledged and folded marks on `branch`.
    pub(crate) async fn producer_status(
        &self,
        lineage: Option<&str>,
        folded: &BTreeMap<String, u64>,
    ) -> Result<Vec<ProducerStatus>> {
        let acknowledged = self.acknowledged_marks(lineage).await?;
        let mut names: Vec<&String> = acknowledged.keys().chain(folded.keys()).collect();
        names.sort();
        names.dedup();
        Ok(names
            .into_iter()
            .map(|name| ProducerStatus {
                producer: name.clone(),
                acknowledged: acknowledged.get(name).copied(),
                folded: folded.get(name).copied(),
            })
            .collect())
    }

    /// The producer marks a fold may record, read before its cut.
    ///
    /// A cut that claims every shard (`everything`) holds every line acknowledged before
    /// it, so every acknowledged mark. A cut that leaves live writers of other processes
    /// alone holds this process's lines only: a mark this process raised counts if the
    /// lines before its stream took the lease (`taken_at`) are folded already, and if no
    /// writer of this process was fenced since (its lines would then sit in another
    /// process's memory).
    pub(crate) async fn producer_marks_to_fold(
        &self,
        branch: &str,
        lineage: Option<&str>,
        everything: bool,
    ) -> Result<BTreeMap<String, u64>> {
        if everything {
            self.streaming.marks_settled();
            return self.acknowledged_marks(lineage).await;
        }
        let own = match self.streaming.own_marks(lineage) {
            Some(own) if !own.is_empty() => own,
            _ => return Ok(BTreeMap::new()),
        };
        let head = self
            .publisher
            .head(&crate::graph::branch(branch)?)
            .await
            .context(PublishSnafu)?;
        Ok(own
            .into_iter()
            .filter(|(producer, acked)| {
                let folded = head.producers.get(producer).copied();
                acked.taken_at.is_none_or(|taken| folded >= Some(taken))
            })
            .map(|(producer, acked)| (producer, acked.through))
            .collect())
    }
}
