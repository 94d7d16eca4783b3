//! Intents: the durable record of one graph write (`__recovery/<id>.json`), written
//! before its first change to any table, so that a crash before its publish is finished
//! or dropped, and cleared after it. Its kind says what the write is ([`IntentKind`]).
//!
//! An intent never holds rows: only which staged Lance transactions belong to one graph
//! commit, or what a schema change or a branch write is doing. The commit it publishes
//! records the intent's id, so recovery can tell whether the publish happened.

use std::collections::BTreeMap;

use lance::dataset::transaction::Transaction;
use lance_table::format::pb;
use prost::Message;
use serde::{Deserialize, Serialize};
use tributary_publisher::{
    BranchName, CommitId, CommitKind, FoldedShard, Fork, PublishPlan, SchemaRecord,
};
use tributary_schema::TablePath;

use crate::error::{Error, Result};

pub const RECOVERY_DIR: &str = tributary_storage::layout::RECOVERY;

/// How long another host's process may leave its lease object (heartbeat) or its sidecar
/// unchanged before it is taken for gone. Same-host owners are judged exactly (is the
/// process alive?), so this only matters across machines.
const FOREIGN_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// [`FOREIGN_GRACE`], or in a test build the milliseconds a failpoint gives.
fn foreign_grace() -> std::time::Duration {
    fail::fail_point!("intent::foreign-grace-ms", |ms| ms
        .and_then(|ms| ms.parse().ok())
        .map_or(FOREIGN_GRACE, std::time::Duration::from_millis));
    FOREIGN_GRACE
}

/// Each lease object of another host's process this process looked at, by its key: its
/// modification time at the store (a mark of change only), when this process first saw it
/// so, and when it last looked.
type Sightings = std::collections::HashMap<
    String,
    (
        Option<std::time::SystemTime>,
        std::time::Instant,
        std::time::Instant,
    ),
>;
static SIGHTINGS: std::sync::LazyLock<std::sync::Mutex<Sightings>> =
    std::sync::LazyLock::new(Default::default);

/// How long this process has seen the object `key` unchanged, on its own monotonic clock.
/// An object's time is never compared with this machine's clock: a clock that jumps
/// forward (or a machine whose clock runs ahead) would take a live holder's fresh
/// heartbeat for an old one, and a second writer would start beside it.
fn unchanged_for(key: &str, modified: Option<std::time::SystemTime>) -> std::time::Duration {
    let now = std::time::Instant::now();
    let mut sightings = SIGHTINGS.lock().unwrap_or_else(|e| e.into_inner());
    let unchanged = match sightings.get_mut(key) {
        Some((seen, since, looked)) if *seen == modified => {
            *looked = now;
            now.duration_since(*since)
        }
        _ => {
            sightings.insert(key.to_owned(), (modified, now, now));
            std::time::Duration::ZERO
        }
    };
    // Objects not looked at for long are gone or settled: forget them.
    let forget = foreign_grace() * 10;
    sightings.retain(|_, (_, _, looked)| now.duration_since(*looked) < forget);
    unchanged
}

/// Which process wrote a sidecar, so recovery never finishes a write that is still running.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Owner {
    pub host: String,
    /// The boot and pid namespace of the process, which tell apart two machines (or two
    /// containers) that share a host name. Absent in sidecars of older versions.
    #[serde(default)]
    pub machine: Option<String>,
    pub pid: u32,
    /// When the process started (clock ticks since boot), so a later process that reuses
    /// the pid is not taken for it. Absent in sidecars of older versions.
    #[serde(default)]
    pub started: Option<u64>,
}

impl Owner {
    pub fn this_process() -> Owner {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|h| h.trim().to_owned())
            .unwrap_or_default();
        let pid = std::process::id();
        Owner {
            host,
            machine: machine(),
            pid,
            started: process_start(pid),
        }
    }

    /// Whether `self` runs where this process runs: same host name and, when both know
    /// it, the same boot and pid namespace (so its pid can be checked here).
    fn is_here(&self, me: &Owner) -> bool {
        !me.host.is_empty()
            && self.host == me.host
            && match (&self.machine, &me.machine) {
                (Some(theirs), Some(mine)) => theirs == mine,
                _ => true,
            }
    }
}

/// This boot (`/proc/sys/kernel/random/boot_id`) and pid namespace (`/proc/self/ns/pid`).
fn machine() -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let namespace = std::fs::read_link("/proc/self/ns/pid").ok()?;
    Some(format!("{} {}", boot.trim(), namespace.display()))
}

/// A process's start time in clock ticks since boot (`/proc/<pid>/stat`, field 22), or
/// `None` when there is no such process (or no `/proc`).
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is parenthesized and may hold spaces: count after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Intents of writes (loads, folds) running in this process right now.
static IN_FLIGHT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Marks an intent in flight for as long as it lives (the write returning, by success,
/// error or a simulated crash, ends it).
pub struct InFlight(String);

impl InFlight {
    pub fn start(intent: &str) -> InFlight {
        IN_FLIGHT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(intent.to_owned());
        InFlight(intent.to_owned())
    }
}

impl Drop for InFlight {
    /// Ends this mark only: another handle of this process may hold a mark of the same
    /// id (two handles racing for one lease number), and that one still runs.
    fn drop(&mut self) {
        let mut running = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = running.iter().position(|id| id == &self.0) {
            running.swap_remove(at);
        }
    }
}

/// Whether the writer that wrote `intent` may still be running; `age` is how long ago, by
/// this machine's clock, its sidecar was written.
pub fn may_be_running(intent: &Intent, age: Option<std::time::Duration>) -> bool {
    owner_may_be_running(intent.owner.as_ref(), &intent.id, age)
}

/// Whether `owner`, working on intent `id` (a write, or a recovery's claim on it), may
/// still be running; `age` is how long ago it wrote what it left. A sidecar is written
/// once, so one of another host is judged by its age: the writer holds the branch's lease
/// while it runs, and a lease is never taken over by clock ([`holder_may_be_running`]).
pub fn owner_may_be_running(
    owner: Option<&Owner>,
    id: &str,
    age: Option<std::time::Duration>,
) -> bool {
    match owner.and_then(|owner| running_here(owner, id)) {
        Some(running) => running,
        None => age.is_none_or(|age| age < foreign_grace()),
    }
}

/// Whether the holder `owner` of the lease object `key` may still be running; `modified`
/// is when the store says the object was last written (its heartbeat). One of another
/// host is taken for gone once this process has seen the object unchanged for
/// [`FOREIGN_GRACE`] by its own monotonic clock.
pub fn holder_may_be_running(
    owner: &Owner,
    key: &str,
    modified: Option<std::time::SystemTime>,
) -> bool {
    match running_here(owner, key) {
        Some(running) => running,
        None => unchanged_for(key, modified) < foreign_grace(),
    }
}

/// Whether `owner`, working on `id`, runs, when it is a process of this machine (judged
/// exactly: its pid and start time); `None` for another machine's.
fn running_here(owner: &Owner, id: &str) -> Option<bool> {
    let me = Owner::this_process();
    if !owner.is_here(&me) {
        return None;
    }
    Some(if owner.pid == me.pid {
        IN_FLIGHT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|running| running == id)
    } else {
        match owner.started {
            Some(started) => process_start(owner.pid) == Some(started),
            None => std::path::Path::new(&format!("/proc/{}", owner.pid)).exists(),
        }
    })
}

/// What a graph write is, as its intent records it: the one thing recovery dispatches on.
/// A new kind of write is a new variant, its crash windows
/// ([`crate::CrashWindow::steps`]) and its stage and recovery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum IntentKind {
    /// Rows written by a load: the staged transactions commit, then publish.
    Load,
    /// Generations folded: as a load, with the fold's marks.
    Fold,
    /// One branch's changes written into another; `merged` is the merged branch's head,
    /// the commit's second parent.
    Merge { merged: CommitId },
    /// A new schema: tables created and columns added in place (never visible before the
    /// publish pins them), then the head and the schema published together. Recovery
    /// applies the schema again (each step skips what is there) and publishes it.
    Schema { schema: SchemaRecord },
    /// A new branch forked from commit `from` into the intent's lineage. Recovery drops
    /// it (the forked tables, read by no head, are cleanup's).
    Branch { from: CommitId },
    /// A branch's deletion, from its head `head`: its shards sealed, its marker and head
    /// removed. Recovery finishes it while the head is still `head`.
    Delete { head: CommitId },
}

impl IntentKind {
    /// The kind of write, which names its crash windows.
    pub fn write_kind(&self) -> crate::WriteKind {
        match self {
            IntentKind::Load => crate::WriteKind::Load,
            IntentKind::Fold => crate::WriteKind::Fold,
            IntentKind::Merge { .. } => crate::WriteKind::Merge,
            IntentKind::Schema { .. } => crate::WriteKind::Schema,
            IntentKind::Branch { .. } => crate::WriteKind::Branch,
            IntentKind::Delete { .. } => crate::WriteKind::Delete,
        }
    }

    /// The kind of commit the write publishes (a delete publishes none).
    pub fn commit_kind(&self) -> CommitKind {
        match self {
            IntentKind::Load => CommitKind::Load,
            IntentKind::Fold => CommitKind::Fold,
            IntentKind::Merge { .. } => CommitKind::Merge,
            IntentKind::Schema { .. } => CommitKind::Schema,
            IntentKind::Branch { .. } | IntentKind::Delete { .. } => CommitKind::Branch,
        }
    }
}

/// The durable intent of one graph write, recorded before its first change to any table
/// and cleared after its publish (see the crate's pipeline in [`crate::commit`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Intent {
    pub id: String,
    pub branch: BranchName,
    /// The head the write was built on; `None` for a branch's first commit.
    pub expected_head: Option<CommitId>,
    pub actor: String,
    #[serde(flatten)]
    pub kind: IntentKind,
    #[serde(default)]
    pub rows_written: BTreeMap<TablePath, u64>,
    #[serde(default)]
    pub tables: Vec<StagedTable>,
    #[serde(default)]
    pub owner: Option<Owner>,
    /// The commit id to publish under, when chosen up front (a fold's dead letters name it).
    #[serde(default)]
    pub commit_id: Option<CommitId>,
    #[serde(default)]
    pub folded: Vec<FoldedShard>,
    /// A load's idempotency key, published with its commit.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// A fold's producer marks, published with its commit.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub producers: BTreeMap<String, u64>,
    /// The Lance branch the tables were staged on (the head's `lineage`; `None` on
    /// `main`); for a new branch, the lineage it forks to. A branch deleted (and perhaps
    /// made again) since has another, or none: the intent can then only be dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<String>,
}

/// One table's staged transaction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StagedTable {
    pub path: TablePath,
    pub read_version: u64,
    pub transaction_uuid: String,
    /// The Lance transaction as protobuf, hex-encoded, so recovery can commit it.
    pub transaction: String,
}

impl Intent {
    /// An intent of `kind` on `branch` (of `lineage`), built on `expected_head`, by this
    /// process; the rest empty for the writer to fill.
    pub fn new(
        kind: IntentKind,
        branch: BranchName,
        lineage: Option<String>,
        expected_head: Option<CommitId>,
        actor: &str,
    ) -> Intent {
        Intent {
            id: Intent::new_id(),
            branch,
            expected_head,
            actor: actor.to_owned(),
            kind,
            rows_written: BTreeMap::new(),
            tables: Vec::new(),
            owner: Some(Owner::this_process()),
            commit_id: None,
            folded: Vec::new(),
            idempotency_key: None,
            producers: BTreeMap::new(),
            lineage,
        }
    }

    /// This write's crash window at `step`.
    pub fn window(&self, step: crate::WriteStep) -> crate::CrashWindow {
        crate::CrashWindow {
            kind: self.kind.write_kind(),
            step,
        }
    }

    pub fn new_id() -> String {
        uuid::Uuid::new_v4().simple().to_string()
    }

    /// The one place a publish is planned: what this write makes visible, built on
    /// `expected_head` (the head now, for a recovery), with the table versions it moved.
    pub fn plan(
        &self,
        expected_head: Option<CommitId>,
        tables: BTreeMap<TablePath, u64>,
    ) -> PublishPlan {
        let (schema, fork, merged) = match &self.kind {
            IntentKind::Schema { schema } => (Some(schema.clone()), None, None),
            IntentKind::Branch { from } => (
                None,
                self.lineage.clone().map(|lineage| Fork {
                    from: from.clone(),
                    lineage,
                }),
                None,
            ),
            IntentKind::Merge { merged } => (None, None, Some(merged.clone())),
            IntentKind::Load | IntentKind::Fold | IntentKind::Delete { .. } => (None, None, None),
        };
        PublishPlan {
            branch: self.branch.clone(),
            expected_head,
            tables,
            rows_written: self.rows_written.clone(),
            actor: self.actor.clone(),
            kind: self.kind.commit_kind(),
            intent: Some(self.id.clone()),
            commit_id: self.commit_id.clone(),
            folded: self.folded.clone(),
            idempotency_key: self.idempotency_key.clone(),
            producers: self.producers.clone(),
            schema,
            fork,
            merged,
        }
    }

    pub fn sidecar_path(id: &str) -> String {
        format!("{RECOVERY_DIR}/{id}.json")
    }

    #[expect(clippy::expect_used, reason = "an intent is plain strings and numbers")]
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("intent serializes")
    }

    pub fn from_bytes(id: &str, bytes: &[u8]) -> Result<Intent> {
        serde_json::from_slice(bytes).map_err(|e| Error::Recovery {
            intent: id.to_owned(),
            message: format!("unreadable sidecar: {e}"),
        })
    }
}

impl StagedTable {
    pub fn new(
        path: TablePath,
        read_version: u64,
        transaction: &Transaction,
    ) -> Result<StagedTable> {
        let message = pb::Transaction::try_from(transaction).map_err(|e| Error::Lance {
            action: "encode staged transaction".to_owned(),
            table: path.to_string(),
            source: e,
        })?;
        Ok(StagedTable {
            path,
            read_version,
            transaction_uuid: transaction.uuid.clone(),
            transaction: to_hex(&message.encode_to_vec()),
        })
    }

    pub fn decode(&self, intent: &str) -> Result<Transaction> {
        let fail = |message: String| Error::Recovery {
            intent: intent.to_owned(),
            message,
        };
        let bytes =
            from_hex(&self.transaction).ok_or_else(|| fail("bad transaction hex".into()))?;
        let message = pb::Transaction::decode(bytes.as_slice())
            .map_err(|e| fail(format!("bad transaction of {}: {e}", self.path)))?;
        Transaction::try_from(message)
            .map_err(|e| fail(format!("bad transaction of {}: {e}", self.path)))
    }
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[(byte >> 4) as usize] as char);
        out.push(DIGITS[(byte & 0xf) as usize] as char);
    }
    out
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_told_from_a_later_one_with_its_pid() {
        let me = Owner::this_process();
        assert!(me.started.is_some(), "this process has a start time");
        let parent = std::os::unix::process::parent_id();
        let mut other = Owner {
            pid: parent,
            started: process_start(parent),
            ..me.clone()
        };
        assert!(
            owner_may_be_running(Some(&other), "x", None),
            "the parent runs"
        );
        other.started = other.started.map(|t| t + 1);
        assert!(
            !owner_may_be_running(Some(&other), "x", None),
            "a live pid that started at another time is another process"
        );
    }

    #[test]
    fn two_marks_of_one_id_end_one_at_a_time() {
        let me = Owner::this_process();
        let first = InFlight::start("lease-7");
        let second = InFlight::start("lease-7");
        drop(second);
        assert!(
            owner_may_be_running(Some(&me), "lease-7", None),
            "ending one mark ended the other"
        );
        drop(first);
        assert!(!owner_may_be_running(Some(&me), "lease-7", None));
    }

    #[test]
    fn an_intent_reads_back_its_kind_and_one_of_an_older_version_reads_too() {
        let schema = SchemaRecord {
            version: 3,
            source: "node A { name: String @key }".to_owned(),
        };
        let written = Intent::new(
            IntentKind::Schema { schema },
            BranchName::main(),
            None,
            None,
            "tributary:schema",
        );
        let read = Intent::from_bytes("x", &written.to_bytes()).unwrap();
        assert_eq!(read.kind, written.kind);
        // An older version's merge sidecar: the kind and the second parent side by side,
        // the expected head always there.
        let older = br#"{"id":"i1","branch":"main","expected_head":"0123456789ab",
            "actor":"a","kind":"merge","merged":"ba9876543210","rows_written":{},
            "tables":[],"owner":null}"#;
        let read = Intent::from_bytes("i1", older).unwrap();
        assert_eq!(
            read.kind,
            IntentKind::Merge {
                merged: CommitId::from("ba9876543210")
            }
        );
        assert_eq!(read.expected_head, Some(CommitId::from("0123456789ab")));
        let load = br#"{"id":"i2","branch":"main","expected_head":"0123456789ab",
            "actor":"a","kind":"load","rows_written":{},"tables":[]}"#;
        assert_eq!(
            Intent::from_bytes("i2", load).unwrap().kind,
            IntentKind::Load
        );
    }

    #[test]
    fn hex_round_trips() {
        let bytes = vec![0u8, 1, 15, 16, 255, 128];
        assert_eq!(from_hex(&to_hex(&bytes)), Some(bytes));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }
}
