//! Folding, from the engine: the cut over this process's writers, the fold itself (in
//! `tributary_write`), the background folder, and the dead letters.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tributary_storage::layout;

use arrow_array::RecordBatch;
use snafu::ResultExt;
use tokio::sync::watch;
use tributary_memwal_adapter::{
    drain_shard, enrollment, table_state, wal_tails, MemWalTable, TailDepth, WalTail,
};
use tributary_publisher::BranchName;
use tributary_schema::TablePath;
use tributary_write::{fold_pending, rejects_schema, FoldOutcome, REJECTS_PATH};

use crate::error::{Error, LanceSnafu, Result, StorageSnafu, WalEntriesMissingSnafu};
use crate::graph::{branch as branch_name, At, Graph, WriteTurn};
use crate::streaming::{Folder, FolderBranches, FoldsMade};

/// How often a fold re-plans after another process folded the same generations first.
const FOLD_ATTEMPTS: usize = 3;

/// How often the cut claims a shard whose live writer took it back before the claim had
/// flushed; the writer waits a moment before it does (the ingest path's claim grace).
const DRAIN_ATTEMPTS: u32 = 5;

/// Claim `shard` and flush its WAL tail into a generation. A live writer of another
/// process that takes the shard back meanwhile has replayed the tail into its memtable,
/// so the claim is made again (and replays it again) after a pause.
async fn drain_claimed(
    enrolled: &tributary_memwal_adapter::Enrolled,
    shard: uuid::Uuid,
) -> Result<()> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match drain_shard(enrolled, shard).await {
            Err(error) if error.is_fenced() && attempt < DRAIN_ATTEMPTS => {
                tracing::info!(%error, attempt, "a live writer took the claimed shard back; claiming again");
                tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
            }
            result => return result.map_err(Error::from_memwal),
        }
    }
}

/// Hand back to the system what the allocator keeps of memory freed by a fold commit.
/// A commit allocates and frees on the order of a hundred MiB over the worker threads;
/// glibc keeps much of it in per-thread arenas, so without this a fold of several
/// commits grew in resident memory with the backlog (the `fold_memory` bench).
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of glibc's allocator to the system; it
    // touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The last failed fold of a branch, for `ingest status` (a note, not graph state):
/// `main`'s at `__status/fold_error.json`, another branch's under its lineage (so a branch
/// made again under the name starts with none).
fn fold_error_path(lineage: Option<&str>) -> String {
    match lineage {
        None => format!("{}/fold_error.json", layout::STATUS),
        Some(lineage) => format!(
            "{}/{}/fold_error.json",
            layout::STATUS,
            tributary_write::path_segment(lineage)
        ),
    }
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or_default()
}

/// Which WAL tails of shards this process does not write a fold claims (see
/// [`FoldTriggers::stranded_after`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Every tail: the fold must include everything acknowledged before it started.
    All,
    /// Tails with no append for this long.
    IdleFor(Duration),
}

impl Graph {
    /// Fold everything acknowledged so far on `branch`: freeze this process's writers (the
    /// cut), then fold every flushed generation of every enrolled table — one graph
    /// commit, or one per `max_rows` of backlog. Returns what was folded (no commit when
    /// nothing was pending).
    pub async fn fold(&self, branch: &str) -> Result<FoldOutcome> {
        self.fold_with_policy(branch, self.settings.fold.policy)
            .await
    }

    /// [`Graph::fold`] with another reject policy than the graph's settings name (e.g. a
    /// one-off `halt` fold).
    pub async fn fold_with_policy(
        &self,
        branch: &str,
        policy: tributary_write::RejectPolicy,
    ) -> Result<FoldOutcome> {
        self.fold_claiming(&branch_name(branch)?, policy, Claim::All)
            .await
    }

    async fn fold_claiming(
        &self,
        branch: &BranchName,
        policy: tributary_write::RejectPolicy,
        claim: Claim,
    ) -> Result<FoldOutcome> {
        let turn = self.write_turn(branch).await?;
        let folded = self.fold_locked_with(&turn, branch, policy, claim).await;
        turn.end().await;
        folded
    }

    /// The fold of the background folder: it leaves the WAL tails of live writers alone.
    async fn fold_in_background(&self, branch: &BranchName) -> Result<FoldOutcome> {
        let claim = Claim::IdleFor(self.settings.triggers.stranded_after);
        self.fold_claiming(branch, self.settings.fold.policy, claim)
            .await
    }

    pub(crate) async fn fold_locked_with(
        &self,
        turn: &WriteTurn,
        branch: &BranchName,
        policy: tributary_write::RejectPolicy,
        claim: Claim,
    ) -> Result<FoldOutcome> {
        // Sends acknowledged meanwhile are counted as waiting beside a fold.
        let _running = tributary_memwal_adapter::fold_running();
        let lineage = self.lineage_of(branch).await?;
        let oldest = self.streaming.take_oldest(branch);
        let everything = claim == Claim::All;
        let result: Result<FoldOutcome> = async {
            let cutting = std::time::Instant::now();
            // Read before the cut: every line under these marks is durable by then.
            let mut producers = self
                .producer_marks_to_fold(branch, lineage.as_deref(), everything)
                .await?;
            self.cut(lineage.as_deref(), claim).await?;
            if !everything && self.streaming.own_marks(lineage.as_deref()).is_none() {
                // A writer of this process was fenced during the cut.
                producers.clear();
            }
            let mut total = FoldOutcome::default();
            total.timings.cut_ms = cutting.elapsed().as_secs_f64() * 1e3;
            loop {
                let outcome = self.fold_once(turn, branch, policy, &producers).await?;
                self.streaming
                    .folds_made
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .count(&outcome);
                let committed = outcome.commit.is_some();
                total.absorb(outcome);
                if committed {
                    release_freed_memory();
                }
                if total.complete {
                    break Ok(total);
                }
            }
        }
        .await;
        match &result {
            Ok(outcome) => {
                if let Some(commit) = &outcome.commit {
                    self.record_fold_error(branch, lineage.as_deref(), None)
                        .await;
                    tracing::info!(commit = %commit.id, rows = ?outcome.rows, dead_letters = outcome.dead_letters, "folded");
                }
            }
            Err(error) => {
                self.streaming.restore_oldest(branch, oldest);
                if everything {
                    self.streaming.marks_unsettled();
                }
                self.record_fold_error(branch, lineage.as_deref(), Some(error.to_string()))
                    .await;
            }
        }
        result
    }

    /// One fold (one graph commit, at most `max_rows`), re-planned if another process
    /// folded the same generations first.
    async fn fold_once(
        &self,
        turn: &WriteTurn,
        branch: &BranchName,
        policy: tributary_write::RejectPolicy,
        producers: &std::collections::BTreeMap<String, u64>,
    ) -> Result<FoldOutcome> {
        let settings = tributary_write::FoldSettings {
            policy,
            ..self.settings.fold.clone()
        };
        let embedder = self.embedder_for_writes();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let target = self.target_in(turn);
            match fold_pending(
                target,
                &turn.catalog,
                branch,
                &settings,
                producers,
                &embedder,
            )
            .await
            {
                Err(error) if error.is_lost_fold_race() && attempt < FOLD_ATTEMPTS => {
                    tracing::info!(%error, "another folder folded first; planning again");
                }
                result => return result.map_err(Error::from),
            }
        }
    }

    /// The fold's cut: every row acknowledged before it, by any process, ends up in a
    /// flushed generation. This process's writers freeze (a fenced one leaves the warm set:
    /// its shard has another writer now); then every shard whose WAL still holds rows no
    /// generation does, and that no writer of this process holds, is claimed per `claim`
    /// (opening a writer replays its tail, closing it flushes). `lineage` is the branch's.
    async fn cut(&self, lineage: Option<&str>, claim: Claim) -> Result<()> {
        // No writer of this process opens during the cut: an open replays a tail, and a
        // writer opened after the freeze below would keep it out of the fold.
        let _opening = self.streaming.opening.lock().await;
        for writer in self.streaming.writers_of(lineage) {
            match writer.freeze(self.settings.writer.flush_patience).await {
                Ok(()) => {}
                Err(error) if error.is_fenced() => {
                    tracing::info!(%error, "a writer of this process was fenced; dropping it");
                    self.streaming.evict(&writer);
                }
                // Lance keeps retrying the flush (one a full disk refused too), waiting
                // longer each time, and may refuse later flushes meanwhile: drop the writer, so the next fold claims its
                // shard (replaying its WAL) instead of waiting on it again.
                Err(error) if error.is_flush_stalled() => {
                    tracing::warn!(%error, "a writer's flush stalled; dropping it");
                    self.streaming.evict(&writer);
                    return Err(Error::from_memwal(error));
                }
                Err(error) => return Err(Error::from_memwal(error)),
            }
        }
        let idle_for = match claim {
            Claim::All => None,
            Claim::IdleFor(idle) => Some(idle),
        };
        for (path, held) in self.shards_without_writer(lineage) {
            let at = MemWalTable::on(&path, lineage);
            let tails: Vec<_> = self
                .wal_tails(&at, idle_for)
                .await?
                .into_iter()
                .filter(|tail| !held.contains(&tail.shard))
                .collect();
            if tails.is_empty() {
                continue;
            }
            let Some(enrolled) = enrollment(&self.store, &at, &self.settings.writer)
                .await
                .map_err(Error::from_memwal)?
            else {
                continue;
            };
            for tail in tails {
                refuse_gap(&at, &tail)?;
                tracing::info!(table = %at, shard = %tail.shard, "claiming a shard whose WAL holds unflushed rows");
                drain_claimed(&enrolled, tail.shard).await?;
            }
        }
        Ok(())
    }

    /// A load of a `@stream` type first folds what is pending — everything acknowledged
    /// before it by any process, claiming the shards of other writers if it must — so the
    /// load (newer) is never overwritten by an older acknowledged write folded after it.
    pub(crate) async fn fold_before_load(
        &self,
        turn: &WriteTurn,
        branch: &BranchName,
        types: &[&str],
    ) -> Result<()> {
        let streamed = types
            .iter()
            .any(|name| turn.catalog.get(name).is_some_and(|t| t.stream.is_some()));
        if streamed {
            self.fold_locked_with(turn, branch, self.settings.fold.policy, Claim::All)
                .await?;
        }
        Ok(())
    }

    /// Keep the last fold's failure where `ingest status` of any process finds it (a
    /// halted fold stays halted until the offending rows are dealt with).
    async fn record_fold_error(
        &self,
        branch: &BranchName,
        lineage: Option<&str>,
        error: Option<String>,
    ) {
        if !self.streaming.set_fold_error(branch, error.clone()) {
            return;
        }
        let path = fold_error_path(lineage);
        let written = match error {
            Some(message) => {
                let note = serde_json::json!({ "error": message, "time_micros": now_micros() });
                self.store.put(&path, note.to_string().into_bytes()).await
            }
            None => self.store.delete(&path).await,
        };
        if let Err(error) = written {
            tracing::warn!(%error, "could not record the fold's outcome for status");
        }
    }

    /// Why the last fold of the branch whose lineage is `lineage` failed, if it did
    /// (recorded by whichever process ran it; cleared by the next successful fold).
    pub(crate) async fn last_fold_error(&self, lineage: Option<&str>) -> Result<Option<String>> {
        let Some(bytes) = self
            .store
            .get(&fold_error_path(lineage))
            .await
            .context(StorageSnafu)?
        else {
            return Ok(None);
        };
        let note: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        Ok(note
            .get("error")
            .and_then(|e| e.as_str())
            .map(str::to_owned))
    }

    /// Whether a trigger of the graph's [`FoldTriggers`] says fold now.
    pub async fn fold_due(&self, branch: &str) -> Result<bool> {
        let triggers = &self.settings.triggers;
        let oldest = self.streaming.oldest_unfolded(branch);
        if oldest.is_some_and(|at| at.elapsed() >= triggers.max_lag) {
            return Ok(true);
        }
        let lineage = self.lineage_of(&branch_name(branch)?).await?;
        let mut generations = 0;
        let mut bytes = 0;
        let mut oldest_flush: Option<SystemTime> = None;
        for ty in self.catalog().types.iter().filter(|t| t.stream.is_some()) {
            let path = ty.table_path();
            if let Some(writer) = self.streaming.writer(&path, lineage.as_deref()) {
                bytes += writer.unflushed_bytes() as u64;
            }
            let at = MemWalTable::on(&path, lineage.as_deref());
            let Some(state) = table_state(&self.store, &at)
                .await
                .map_err(Error::from_memwal)?
            else {
                continue;
            };
            for shard in &state.shards {
                generations += shard.pending.len();
                bytes += shard.pending.iter().map(|g| g.bytes).sum::<u64>();
                oldest_flush = match (oldest_flush, shard.oldest_pending_at) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        let lagging = oldest_flush
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age >= triggers.max_lag);
        let generations_due =
            generations > 0 && (generations >= triggers.pending_generations || lagging);
        Ok(generations_due
            || bytes >= triggers.pending_bytes
            || self.stranded(lineage.as_deref()).await?)
    }

    /// Whether a shard no writer of this process holds has a WAL tail idle for
    /// `stranded_after`: rows a writer that is gone left behind.
    async fn stranded(&self, lineage: Option<&str>) -> Result<bool> {
        let idle_for = Some(self.settings.triggers.stranded_after);
        for (path, held) in self.shards_without_writer(lineage) {
            let tails = self
                .wal_tails(&MemWalTable::on(&path, lineage), idle_for)
                .await?;
            if tails.iter().any(|tail| !held.contains(&tail.shard)) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The `@stream` tables on `lineage` some of whose shards no writer of this process
    /// holds (all of them, unless it owns only some shards), each with the shards it does
    /// hold: WAL tails of the others, if any, were left by writers elsewhere (or gone).
    fn shards_without_writer(
        &self,
        lineage: Option<&str>,
    ) -> Vec<(TablePath, HashSet<uuid::Uuid>)> {
        self.catalog()
            .types
            .iter()
            .filter(|t| t.stream.is_some())
            .map(|t| t.table_path())
            .filter_map(|path| match self.streaming.writer(&path, lineage) {
                None => Some((path, HashSet::new())),
                Some(writer) if writer.holds_every_shard() => None,
                Some(writer) => {
                    let held = writer.shards().map(|(shard, _)| *shard).collect();
                    Some((path, held))
                }
            })
            .collect()
    }

    /// The shards of the table `at` whose WAL holds rows no generation does (with no
    /// append for `idle_for`, when given).
    /// Refuse to claim a shard of `at` whose WAL lost an entry below its newest (see
    /// [`refuse_gap`]): before any writer of this process opens one, which replays it.
    pub(crate) async fn refuse_wal_gaps(&self, at: &MemWalTable) -> Result<()> {
        for tail in self.wal_tails(at, None).await? {
            refuse_gap(at, &tail)?;
        }
        Ok(())
    }

    async fn wal_tails(
        &self,
        at: &MemWalTable,
        idle_for: Option<Duration>,
    ) -> Result<Vec<WalTail>> {
        Ok(wal_tails(&self.store, at, TailDepth::Presence, idle_for)
            .await
            .map_err(Error::from_memwal)?
            .unwrap_or_default())
    }

    /// Start folding `branch` in the background whenever a trigger fires (one folder per
    /// graph folds every branch it was started for, one after another; a branch deleted
    /// meanwhile leaves it). The folder holds no strong reference: it ends when the graph
    /// is dropped, or at [`Graph::close`].
    pub async fn start_folder(self: &Arc<Self>, branch: &str) -> Result<()> {
        let branch = branch_name(branch)?;
        let mut folder = self.streaming.folder.lock().await;
        if let Some(running) = folder.as_ref() {
            running.fold(branch);
            return Ok(());
        }
        let graph = Arc::downgrade(self);
        let (stop, mut stopped) = watch::channel(false);
        let branches = FolderBranches::default();
        branches.add(branch);
        let folding = branches.clone();
        let task = tokio::spawn(async move {
            // After a failed fold of a branch, that branch waits longer before its next
            // attempt (a halted fold fails the same way until someone acts); the others
            // keep their pace.
            let mut waits: HashMap<BranchName, (std::time::Instant, u32)> = HashMap::new();
            while let Some(poll) = graph.upgrade().map(|g| g.settings.triggers.poll) {
                tokio::select! {
                    _ = tokio::time::sleep(poll) => {}
                    _ = stopped.changed() => break,
                }
                let Some(graph) = graph.upgrade() else { break };
                for (branch, added) in folding.list() {
                    let now = std::time::Instant::now();
                    if waits.get(&branch).is_some_and(|(until, _)| now < *until) {
                        continue;
                    }
                    match graph.fold_if_due(&branch).await {
                        Ok(()) => {
                            waits.remove(&branch);
                        }
                        Err(error) if error.is_branch_gone() => {
                            tracing::info!(%branch, "the branch is gone; no longer folding it");
                            folding.remove(&branch, added);
                            waits.remove(&branch);
                        }
                        Err(error) => {
                            tracing::warn!(%error, %branch, "background fold failed");
                            let wait = waits.entry(branch).or_insert((now, 0));
                            wait.1 = (wait.1 * 2 + 1).min(40);
                            wait.0 = now + poll * wait.1;
                        }
                    }
                }
            }
        });
        *folder = Some(Folder {
            stop,
            task,
            branches,
        });
        Ok(())
    }

    /// One look of the background folder at `branch`: fold if a trigger says so.
    async fn fold_if_due(&self, branch: &BranchName) -> Result<()> {
        if self.fold_due(branch).await? {
            self.fold_in_background(branch).await?;
        }
        Ok(())
    }

    /// Stop the background folder, letting a fold in progress finish.
    pub async fn stop_folder(&self) {
        let folder = self.streaming.folder.lock().await.take();
        if let Some(folder) = folder {
            let _ = folder.stop.send(true);
            if let Err(error) = folder.task.await {
                tracing::warn!(%error, "the folder task ended abnormally");
            }
        }
    }

    /// Whether a background folder is running.
    pub async fn folder_running(&self) -> bool {
        self.streaming
            .folder
            .lock()
            .await
            .as_ref()
            .is_some_and(|f| !f.task.is_finished())
    }

    /// Stop the folder and flush every writer. What was acknowledged stays durable (and
    /// pending for the next fold).
    pub async fn close(&self) -> Result<()> {
        self.stop_folder().await;
        self.close_writers().await
    }

    /// What the folds of this process (this open graph) have published since it opened:
    /// what a run can say it folded, whatever other writers of the branch did meanwhile.
    pub fn folds_made(&self) -> FoldsMade {
        self.streaming
            .folds_made
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The dead letters visible at `at`: rows folds could not apply, with why.
    pub async fn rejects(&self, at: &At) -> Result<RecordBatch> {
        let snapshot = self.snapshot(at).await?;
        let Some(&version) = snapshot.tables.get(&REJECTS_PATH) else {
            return Ok(RecordBatch::new_empty(rejects_schema()));
        };
        let dataset = self
            .store
            .open_dataset_on(&REJECTS_PATH, snapshot.lineage.as_deref(), Some(version))
            .await
            .context(StorageSnafu)?;
        dataset.scan().try_into_batch().await.context(LanceSnafu {
            action: "read dead letters",
            table: REJECTS_PATH,
        })
    }
}

/// A replay stops at a missing entry, and the writer that replayed then writes over the
/// gap: claiming a shard whose WAL lost an entry below its newest would fold the rows
/// before the gap and silently drop the acknowledged ones after it. Refused instead,
/// naming the positions (`tributary check` reports them too).
fn refuse_gap(at: &MemWalTable, tail: &WalTail) -> Result<()> {
    if tail.missing.is_empty() {
        return Ok(());
    }
    WalEntriesMissingSnafu {
        table: at.to_string(),
        shard: tail.shard.to_string(),
        missing: tail.missing.clone(),
    }
    .fail()
}
