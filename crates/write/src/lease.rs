//! Leases: one holder at a time, across processes, of a branch's graph writes (the
//! branch write lease) or of a producer's ingest stream (the producer lease).
//!
//! A graph write validates against the branch head, commits its tables on their latest
//! versions and then publishes. Two writers of one branch overlapping in that window can
//! each pass a check the pair breaks (`@unique`, `@card`), and a writer that commits while
//! another is between its table commits and its publish republishes the other's versions.
//! So every load, fold and recovery of a branch holds its lease from before it reads the
//! head until after it publishes. A producer's sends are checked against its mark and then
//! written, so one stream of a producer runs at a time.
//!
//! A lease is a sequence of small objects `<folder>/<n>.json`, each created with
//! put-if-absent, so the store decides who holds number `n`. The holder of the highest
//! number holds the lease while it runs; it hands the lease on by overwriting its object
//! with a release mark. A waiter takes over a lease whose holder is gone (released, or a
//! process that died: see [`holder_may_be_running`]) by creating `n + 1`. The highest
//! number is never deleted, so of all processes that judge `n` free exactly one creates
//! `n + 1`. The holder removes the objects below its own; a process acting on a listing
//! that old (it re-created a number that was already removed) sees a higher number when it
//! checks its win, and backs off. While held, the object is rewritten every few seconds,
//! so a holder on another machine is judged by the age of its last write.
//!
//! A holder that stalls past the grace on another machine may be taken over while it
//! still runs. So a write confirms its lease ([`Lease::confirm`]) just before its
//! first table commit and gives up, with nothing committed, when a higher number exists.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use snafu::ResultExt;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tributary_publisher::BranchName;
use tributary_storage::GraphStore;

use crate::error::{Result, StorageSnafu};
use crate::intent::{holder_may_be_running, InFlight, Owner};

pub const LEASE_DIR: &str = tributary_storage::layout::LEASES;
/// Producers' leases and marks: `__producers/<scope>/<producer>.json` holds a producer's
/// mark, `__producers/<scope>/<producer>/` its lease (the scope: `main`, or a branch's
/// lineage).
pub const PRODUCER_DIR: &str = tributary_storage::layout::PRODUCERS;

/// How often a holder rewrites its lease object (well inside the foreign grace).
const HEARTBEAT: Duration = Duration::from_secs(15);
/// Waiting starts short (an uncontended handover takes milliseconds) and backs off.
const FIRST_WAIT: Duration = Duration::from_millis(10);
const LONGEST_WAIT: Duration = Duration::from_millis(250);
/// After this long a waiter says whom it waits for.
const REPORT_AFTER: Duration = Duration::from_secs(5);
/// A release is retried: a lease left marked held blocks the branch until the process ends.
const RELEASE_ATTEMPTS: usize = 4;

/// What a lease object says.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum Mark {
    Held {
        owner: Owner,
        /// What the lease is of, for a person reading the object (named `branch`, as
        /// older versions read it).
        #[serde(rename = "branch")]
        what: String,
    },
    Released,
}

/// A lease, held until [`Lease::release`] (or drop).
pub struct Lease {
    store: GraphStore,
    path: String,
    _in_flight: InFlight,
    heartbeat: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The folder of `branch`'s write lease. Branch names are kept readable; any character
/// that could leave the folder is hex-escaped (`%xx`; only numbered objects are ever
/// listed in it, so the store's own escaping of `%` does not matter).
fn lease_dir(branch: &str) -> String {
    let mut name = String::with_capacity(branch.len());
    for ch in branch.chars() {
        if ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' {
            name.push(ch);
        } else {
            for byte in ch.to_string().bytes() {
                name.push_str(&format!("%{byte:02x}"));
            }
        }
    }
    format!("{LEASE_DIR}/{name}")
}

/// `name` as one path segment whose listed name reads back: lower-case letters, digits,
/// `-` and `_` kept, anything else (upper case too: a file system may not tell case
/// apart) hex-escaped as `=xx` (an object store escapes `%` itself).
pub fn path_segment(name: &str) -> String {
    let mut segment = String::with_capacity(name.len());
    for ch in name.chars() {
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-' || ch == '_' {
            segment.push(ch);
        } else {
            for byte in ch.to_string().bytes() {
                segment.push_str(&format!("={byte:02x}"));
            }
        }
    }
    segment
}

/// The folder of the producers of `scope` (`main`, or a branch's lineage): their marks,
/// and a folder of lease objects each.
pub fn producers_dir(scope: &str) -> String {
    format!("{PRODUCER_DIR}/{}", path_segment(scope))
}

/// What [`Lease::try_acquire`] found.
#[derive(Debug)]
pub enum Acquired {
    Held(Box<Lease>),
    /// A live holder kept it for the whole patience: who.
    Busy(Owner),
}

/// The number of a lease object's name: exactly 20 digits, so a stray name can never
/// be taken for one.
fn number_of(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The key of a lease object in this process's in-flight registry: the graph root too, as
/// one process may write several graphs.
fn registry_key(store: &GraphStore, path: &str) -> String {
    format!("{}/{path}", store.location())
}

fn object(dir: &str, number: u64) -> String {
    format!("{dir}/{number:020}.json")
}

impl Lease {
    /// Wait until this process holds `branch`'s write lease. Waits as long as a live
    /// holder holds it; a holder that died is taken over at once (same machine) or once its
    /// last heartbeat is older than the foreign grace (another machine).
    pub async fn branch(store: &GraphStore, branch: &BranchName) -> Result<Lease> {
        let what = format!("the write lease of branch `{branch}`: a load, fold or recovery");
        loop {
            // Without a patience only a lease that is held comes back.
            if let Acquired::Held(lease) =
                Self::try_acquire(store, &lease_dir(branch), &what, None).await?
            {
                return Ok(*lease);
            }
        }
    }

    /// Take the lease whose objects live in `dir`, waiting at most `patience` (forever if
    /// `None`) while a live holder holds it. `what` names the lease in a report of a long
    /// wait.
    pub async fn try_acquire(
        store: &GraphStore,
        dir: &str,
        what: &str,
        patience: Option<Duration>,
    ) -> Result<Acquired> {
        let started = tokio::time::Instant::now();
        let mut wait = FIRST_WAIT;
        let mut reported = false;
        loop {
            let entries = store.entries(dir).await.context(StorageSnafu)?;
            let top = entries
                .iter()
                .filter_map(|e| Some((number_of(&e.name)?, e.modified)))
                .max_by_key(|(n, _)| *n);
            let next = match top {
                None => 0,
                Some((n, modified)) => match holder(store, &object(dir, n), modified).await? {
                    Holder::Free => n + 1,
                    Holder::Gone => {
                        tokio::time::sleep(FIRST_WAIT).await;
                        continue;
                    }
                    Holder::Live(owner) => {
                        if patience.is_some_and(|patience| started.elapsed() >= patience) {
                            return Ok(Acquired::Busy(owner));
                        }
                        if !reported && started.elapsed() >= REPORT_AFTER {
                            tracing::warn!(
                                "waiting for {what} of process {} on {} holds it",
                                owner.pid,
                                owner.host
                            );
                            reported = true;
                        }
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(LONGEST_WAIT);
                        continue;
                    }
                },
            };
            if let Some(lease) = Self::try_take(store, dir, what, next).await? {
                return Ok(Acquired::Held(Box::new(lease)));
            }
        }
    }

    /// Create lease object `number`; `None` if another process created it first or a
    /// higher number exists by the time it is created.
    async fn try_take(
        store: &GraphStore,
        dir: &str,
        what: &str,
        number: u64,
    ) -> Result<Option<Lease>> {
        let path = object(dir, number);
        // Marked in flight before it exists, so a task of this process that finds it
        // knows its holder is alive.
        let in_flight = InFlight::start(&registry_key(store, &path));
        let mark = Mark::Held {
            owner: Owner::this_process(),
            what: what.to_owned(),
        };
        let bytes = serde_json::to_vec(&mark).unwrap_or_default();
        if !store
            .put_if_absent(&path, bytes.clone())
            .await
            .context(StorageSnafu)?
        {
            return Ok(None);
        }
        let numbers = match numbers_in(store, dir).await {
            Ok(numbers) => numbers,
            Err(error) => {
                // Never leave a created object marked held by nobody's turn.
                let _ = store.delete(&path).await;
                return Err(error);
            }
        };
        if numbers.iter().any(|&n| n > number) {
            // Acted on a listing from before a later holder: not ours.
            let _ = store.delete(&path).await;
            return Ok(None);
        }
        for n in numbers.into_iter().filter(|&n| n < number) {
            if let Err(error) = store.delete(&object(dir, n)).await {
                tracing::debug!(%error, "could not remove an old lease object");
            }
        }
        let heartbeat = spawn_heartbeat(store.clone(), path.clone(), bytes);
        Ok(Some(Lease {
            store: store.clone(),
            path,
            _in_flight: in_flight,
            heartbeat: Some(heartbeat),
        }))
    }

    /// Whether this process still holds the lease: no higher number exists (a waiter
    /// elsewhere took it over, judging this holder gone). One listing.
    pub async fn confirm(&self) -> Result<bool> {
        let dir = self.path.rsplit_once('/').map_or("", |(dir, _)| dir);
        let mine = self
            .path
            .rsplit_once('/')
            .and_then(|(_, name)| number_of(name));
        let numbers = numbers_in(&self.store, dir).await?;
        Ok(mine.is_some_and(|mine| numbers.iter().all(|&n| n <= mine)))
    }

    /// Hand the lease on. The heartbeat stops first (and finishes any rewrite it started),
    /// so nothing can overwrite the release mark. The release runs as a task of its own:
    /// a caller that stops waiting for it does not stop it.
    pub async fn release(mut self) {
        let heartbeat = self.heartbeat.take();
        let task = tokio::spawn(release(self.store.clone(), self.path.clone(), heartbeat));
        let _ = task.await;
    }
}

async fn numbers_in(store: &GraphStore, dir: &str) -> Result<Vec<u64>> {
    let names = store.list(dir).await.context(StorageSnafu)?;
    Ok(names.iter().filter_map(|n| number_of(n)).collect())
}

impl Drop for Lease {
    /// A lease dropped without [`Lease::release`] (a cancelled write) is released in
    /// the background; with no runtime left the process is ending, and a dead holder's
    /// lease is taken over anyway.
    fn drop(&mut self) {
        let Some(heartbeat) = self.heartbeat.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(release(
                self.store.clone(),
                self.path.clone(),
                Some(heartbeat),
            ));
        }
    }
}

async fn release(
    store: GraphStore,
    path: String,
    heartbeat: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
) {
    if let Some((stop, task)) = heartbeat {
        let _ = stop.send(());
        let _ = task.await;
    }
    let bytes = serde_json::to_vec(&Mark::Released).unwrap_or_default();
    let mut wait = FIRST_WAIT;
    for attempt in 1..=RELEASE_ATTEMPTS {
        match store.put(&path, bytes.clone()).await {
            Ok(()) => return,
            Err(error) if attempt == RELEASE_ATTEMPTS => {
                // The holder is this live process; the next writer here or elsewhere
                // waits until the process ends (same machine) or the foreign grace passes.
                tracing::error!(%error, lease = path, "could not release a lease");
            }
            Err(error) => {
                tracing::warn!(%error, lease = path, attempt, "releasing a lease failed; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 4).min(LONGEST_WAIT);
            }
        }
    }
}

fn spawn_heartbeat(
    store: GraphStore,
    path: String,
    bytes: Vec<u8>,
) -> (oneshot::Sender<()>, JoinHandle<()>) {
    let (stop, mut stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(HEARTBEAT) => {
                    if let Err(error) = store.put(&path, bytes.clone()).await {
                        tracing::warn!(%error, lease = path, "could not renew a lease");
                    }
                }
            }
        }
    });
    (stop, task)
}

enum Holder {
    /// Released, or its holder is gone: the next number may be taken.
    Free,
    /// Removed between the listing and the read: list again.
    Gone,
    Live(Owner),
}

async fn holder(
    store: &GraphStore,
    path: &str,
    modified: Option<std::time::SystemTime>,
) -> Result<Holder> {
    let Some(bytes) = store.get(path).await.context(StorageSnafu)? else {
        return Ok(Holder::Gone);
    };
    match serde_json::from_slice::<Mark>(&bytes) {
        Ok(Mark::Held { owner, .. }) => {
            if holder_may_be_running(&owner, &registry_key(store, path), modified) {
                Ok(Holder::Live(owner))
            } else {
                Ok(Holder::Free)
            }
        }
        Ok(Mark::Released) => Ok(Holder::Free),
        // A torn or foreign object cannot name a live holder.
        Err(error) => {
            tracing::warn!(%error, lease = path, "unreadable lease object; taken over");
            Ok(Holder::Free)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_folders_stay_inside_the_lease_dir() {
        assert_eq!(lease_dir("main"), "__leases/main");
        assert_eq!(lease_dir("../x"), "__leases/%2e%2e%2fx");
        assert_eq!(producers_dir("main"), "__producers/main");
        assert_eq!(path_segment("Ab/.c"), "=41b=2f=2ec");
        assert_eq!(number_of(&object("d", 7)[2..]), Some(7));
        assert_eq!(number_of("7.json"), None, "only the 20-digit form");
        assert_eq!(number_of("0000000000000000000x.json"), None);
    }
}
