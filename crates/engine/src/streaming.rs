//! The streaming state of an open graph, owned in one place: the warm MemWAL writers per
//! (table, lineage), the fold bookkeeping (the max-lag clock, the last fold's error), the
//! background folder's handle, and the triggers it folds on. Ingest, the fold's cut,
//! fresh reads and status reach it through the graph; it knows nothing of them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex as SyncMutex, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Mutex};
use tributary_memwal_adapter::TableWriter;
use tributary_publisher::BranchName;

/// When the background folder folds: whichever threshold is reached first.
#[derive(Debug, Clone)]
pub struct FoldTriggers {
    /// Flushed, unfolded generations over all enrolled tables.
    pub pending_generations: usize,
    /// Bytes in unfolded generations plus this process's unflushed memtables.
    pub pending_bytes: u64,
    /// The longest an acknowledged row waits before a fold makes it visible.
    pub max_lag: Duration,
    /// How often the folder looks.
    pub poll: Duration,
    /// A shard whose WAL holds rows no generation does, with no writer in this process and
    /// no append for this long, is taken to have lost its writer (a process that stopped
    /// or crashed): the background folder claims it, which flushes the rows, and folds
    /// them. Explicit folds (and the fold before a load) claim such shards at once. Keep
    /// it well above `max_lag`: a live process that folds flushes its own tail sooner, so
    /// its shards are never claimed from under it.
    pub stranded_after: Duration,
}

impl Default for FoldTriggers {
    fn default() -> Self {
        FoldTriggers {
            pending_generations: 8,
            pending_bytes: 64 * 1024 * 1024,
            max_lag: Duration::from_secs(1),
            poll: Duration::from_millis(250),
            stranded_after: Duration::from_secs(10),
        }
    }
}

/// A producer's lines acknowledged through this process's writers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OwnMark {
    /// The producer's mark when this process's stream of it took the lease.
    pub(crate) taken_at: Option<u64>,
    /// The highest sequence this process acknowledged.
    pub(crate) through: u64,
}

/// Producers' marks raised by this process, and whether they can be trusted to be in this
/// process's writers (a fenced writer's lines are in another process's memory).
#[derive(Debug, Default)]
struct OwnMarks {
    /// By (lineage, producer).
    marks: std::collections::BTreeMap<(Option<String>, String), OwnMark>,
    /// A writer was fenced since a fold last read every acknowledged mark.
    unsettled: bool,
}

/// (table path, lineage: `None` for `main`'s) → its warm writer. Keyed by lineage, not
/// branch name: a writer of a branch deleted and made again under the name is never the
/// new branch's.
type WriterMap = HashMap<(String, Option<String>), Arc<TableWriter>>;

/// The running background folder: how to stop it, its task, and the branches it folds.
pub(crate) struct Folder {
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) task: tokio::task::JoinHandle<()>,
    pub(crate) branches: FolderBranches,
}

impl Folder {
    /// Fold `branch` too, from the folder's next look on.
    pub(crate) fn fold(&self, branch: BranchName) {
        self.branches.add(branch);
    }
}

/// The branches a background folder folds, shared with its task: each with the number of
/// the `add` that put it there, so the task's removal of a branch it found gone cannot
/// undo a later `add` of a branch made again under the name.
#[derive(Clone, Default)]
pub(crate) struct FolderBranches(Arc<SyncMutex<(BTreeMap<BranchName, u64>, u64)>>);

impl FolderBranches {
    fn held(&self) -> std::sync::MutexGuard<'_, (BTreeMap<BranchName, u64>, u64)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn add(&self, branch: BranchName) {
        let mut held = self.held();
        held.1 += 1;
        let added = held.1;
        held.0.insert(branch, added);
    }

    /// Remove `branch` unless it was added again since `added`.
    pub(crate) fn remove(&self, branch: &BranchName, added: u64) {
        let mut held = self.held();
        if held.0.get(branch) == Some(&added) {
            held.0.remove(branch);
        }
    }

    /// The branches, each with the number of the `add` that put it there.
    pub(crate) fn list(&self) -> Vec<(BranchName, u64)> {
        self.held()
            .0
            .iter()
            .map(|(branch, &added)| (branch.clone(), added))
            .collect()
    }
}

/// The streaming state of one open graph.
#[derive(Default)]
pub(crate) struct Streaming {
    /// Every send looks its writer up, so the lookup is a plain read lock that never waits
    /// on the scheduler.
    warm: RwLock<WriterMap>,
    /// Opening a writer (enrollment, replay) and the fold's cut are serialised on this
    /// lock, so only cold sends queue behind it, and no writer opens during a cut.
    pub(crate) opening: Mutex<()>,
    /// When this process acknowledged its oldest write that no fold has cut yet, per
    /// branch.
    oldest_unfolded: SyncMutex<HashMap<String, Instant>>,
    /// Why the last fold of each branch failed (`None`: it did not; absent: no fold of
    /// it ran here yet).
    last_error: SyncMutex<HashMap<String, Option<String>>>,
    pub(crate) folder: Mutex<Option<Folder>>,
    /// A send with patches reads the rows it patches and writes them whole: it holds this
    /// exclusively, every other send shared, so no write of this process lands between
    /// its read and its write (another process's write fences this one's writer first).
    pub(crate) patching: tokio::sync::RwLock<()>,
    own_marks: SyncMutex<OwnMarks>,
    /// What this process's folds published, over its life.
    pub(crate) folds_made: SyncMutex<FoldsMade>,
}

/// What the folds of one open graph published: each commit, the rows they folded and
/// the rows they put in the dead letters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoldsMade {
    pub commits: Vec<String>,
    pub rows: u64,
    pub dead_letters: u64,
}

impl FoldsMade {
    pub(crate) fn count(&mut self, outcome: &tributary_write::FoldOutcome) {
        if let Some(commit) = &outcome.commit {
            self.commits.push(commit.id.to_string());
        }
        self.rows += outcome.rows.values().sum::<u64>();
        self.dead_letters += outcome.dead_letters;
    }
}

impl Streaming {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, WriterMap> {
        self.warm.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, WriterMap> {
        self.warm.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The warm writer of a table on a lineage, if this process has one.
    pub(crate) fn writer(&self, path: &str, lineage: Option<&str>) -> Option<Arc<TableWriter>> {
        // A scan of the few warm writers (tables × lineages) rather than a keyed lookup,
        // which would build an owned key on every send.
        self.read()
            .iter()
            .find(|((p, l), _)| p == path && l.as_deref() == lineage)
            .map(|(_, writer)| writer.clone())
    }

    /// The warm writers of every table on `lineage` (for the fold's cut).
    pub(crate) fn writers_of(&self, lineage: Option<&str>) -> Vec<Arc<TableWriter>> {
        self.read()
            .iter()
            .filter(|((_, l), _)| l.as_deref() == lineage)
            .map(|(_, w)| w.clone())
            .collect()
    }

    /// Keep `writer` warm for its table and lineage. The caller holds
    /// [`Streaming::opening`].
    pub(crate) fn keep(&self, writer: Arc<TableWriter>) {
        let at = writer.at();
        let key = (at.table().to_owned(), at.lineage().map(str::to_owned));
        self.write().insert(key, writer);
    }

    /// Drop `writer` from the warm set, if it is still the one there (after a fence).
    pub(crate) fn evict(&self, writer: &Arc<TableWriter>) {
        self.write().retain(|_, w| !Arc::ptr_eq(w, writer));
        self.marks().unsettled = true;
    }

    fn marks(&self) -> std::sync::MutexGuard<'_, OwnMarks> {
        self.own_marks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This process acknowledged `producer`'s lines on `lineage` through `through`, in a
    /// stream that took the producer's lease at mark `taken_at`.
    pub(crate) fn producer_acknowledged(
        &self,
        lineage: Option<&str>,
        producer: &str,
        taken_at: Option<u64>,
        through: u64,
    ) {
        self.marks().marks.insert(
            (lineage.map(str::to_owned), producer.to_owned()),
            OwnMark { taken_at, through },
        );
    }

    /// The marks this process raised on `lineage`, or `None` when a fenced writer makes
    /// them uncertain (until [`Streaming::marks_settled`]).
    pub(crate) fn own_marks(
        &self,
        lineage: Option<&str>,
    ) -> Option<std::collections::BTreeMap<String, OwnMark>> {
        let marks = self.marks();
        (!marks.unsettled).then(|| {
            marks
                .marks
                .iter()
                .filter(|((l, _), _)| l.as_deref() == lineage)
                .map(|((_, producer), mark)| (producer.clone(), *mark))
                .collect()
        })
    }

    /// A fold is about to record every acknowledged mark: this process's are certain again
    /// from here on ([`Streaming::marks_unsettled`] if that fold fails).
    pub(crate) fn marks_settled(&self) {
        self.marks().unsettled = false;
    }

    pub(crate) fn marks_unsettled(&self) {
        self.marks().unsettled = true;
    }

    /// Forget what this process holds of `branch`, whose lineage is `lineage` (it was
    /// deleted: its shards are sealed): writers, clock, own marks, last fold error.
    pub(crate) fn forget_branch(&self, branch: &str, lineage: Option<&str>) {
        self.write().retain(|(_, l), _| l.as_deref() != lineage);
        self.clocks().remove(branch);
        self.marks()
            .marks
            .retain(|(l, _), _| l.as_deref() != lineage);
        self.last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(branch);
    }

    /// Take every warm writer out (to close them).
    pub(crate) fn take_all(&self) -> Vec<Arc<TableWriter>> {
        self.write().drain().map(|(_, w)| w).collect()
    }

    fn clocks(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.oldest_unfolded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Note an acknowledged write on `branch` (starts its max-lag clock if it is not
    /// running).
    pub(crate) fn acknowledged(&self, branch: &str) {
        self.clocks()
            .entry(branch.to_owned())
            .or_insert_with(Instant::now);
    }

    /// When the oldest write on `branch` no fold has cut yet was acknowledged.
    pub(crate) fn oldest_unfolded(&self, branch: &str) -> Option<Instant> {
        self.clocks().get(branch).copied()
    }

    /// Stop `branch`'s max-lag clock (a fold is cutting); [`Streaming::restore_oldest`]
    /// restarts it if the fold fails.
    pub(crate) fn take_oldest(&self, branch: &str) -> Option<Instant> {
        self.clocks().remove(branch)
    }

    pub(crate) fn restore_oldest(&self, branch: &str, at: Option<Instant>) {
        let Some(at) = at else {
            return;
        };
        let mut clocks = self.clocks();
        let oldest = clocks.entry(branch.to_owned()).or_insert(at);
        *oldest = (*oldest).min(at);
    }

    /// Remember the last fold's error on `branch`; true when it differs from what was
    /// remembered.
    pub(crate) fn set_fold_error(&self, branch: &str, error: Option<String>) -> bool {
        let mut last = self.last_error.lock().unwrap_or_else(|e| e.into_inner());
        last.insert(branch.to_owned(), error.clone()) != Some(error)
    }
}
