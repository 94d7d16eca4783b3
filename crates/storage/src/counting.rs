//! An object-store wrapper that counts operations by kind and by path class.
//!
//! Cost tests assert on these counts: unlike timings they are stable on a shared machine.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// The kind of an object-store call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    Get,
    Head,
    Put,
    PutMultipart,
    List,
    Delete,
    Copy,
    Rename,
}

/// Where in a graph an object lives, derived from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathClass {
    /// Lance version manifests (`_versions/`).
    Manifest,
    /// Lance transaction files (`_transactions/`).
    Transaction,
    /// Lance data files (`data/`).
    Data,
    /// Deletion vectors (`_deletions/`).
    Deletion,
    /// Index files (`_indices/`).
    Index,
    /// Everything under a table's `_mem_wal/`.
    MemWal,
    /// Recovery sidecars (`__recovery/`).
    Recovery,
    /// Branch write leases (`__leases/`).
    Lease,
    Other,
}

impl PathClass {
    pub fn of(path: &str) -> Self {
        // Order matters: MemWAL generations are Lance datasets with their own `data/`.
        if path.contains("_mem_wal/") {
            PathClass::MemWal
        } else if path.contains("__recovery/") {
            PathClass::Recovery
        } else if path.contains("__leases/") {
            PathClass::Lease
        } else if path.contains("_versions/") {
            PathClass::Manifest
        } else if path.contains("_transactions/") {
            PathClass::Transaction
        } else if path.contains("_deletions/") {
            PathClass::Deletion
        } else if path.contains("_indices/") {
            PathClass::Index
        } else if path.contains("/data/") || path.starts_with("data/") {
            PathClass::Data
        } else {
            PathClass::Other
        }
    }
}

/// Shared tally of operations and of the bytes they moved. Cheap to clone; all clones
/// count into the same maps.
#[derive(Debug, Clone, Default)]
pub struct OpCounter {
    tally: Arc<Mutex<Tally>>,
}

#[derive(Debug, Clone, Default)]
struct Tally {
    ops: BTreeMap<(OpKind, PathClass), u64>,
    bytes: BTreeMap<(OpKind, PathClass), u64>,
}

/// A point-in-time copy of an [`OpCounter`]: operations, and bytes read (gets) or written
/// (puts), by kind and path class.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpCounts {
    pub ops: BTreeMap<(OpKind, PathClass), u64>,
    pub bytes: BTreeMap<(OpKind, PathClass), u64>,
}

impl OpCounter {
    pub fn new() -> Self {
        Self::default()
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, kind: OpKind, path: &Path) {
        let class = PathClass::of(path.as_ref());
        *self.tally().ops.entry((kind, class)).or_default() += 1;
    }

    fn record_bytes(&self, kind: OpKind, path: &Path, bytes: u64) {
        let class = PathClass::of(path.as_ref());
        *self.tally().bytes.entry((kind, class)).or_default() += bytes;
    }

    pub fn snapshot(&self) -> OpCounts {
        let tally = self.tally();
        OpCounts {
            ops: tally.ops.clone(),
            bytes: tally.bytes.clone(),
        }
    }

    pub fn reset(&self) {
        *self.tally() = Tally::default();
    }
}

fn difference(
    now: &BTreeMap<(OpKind, PathClass), u64>,
    earlier: &BTreeMap<(OpKind, PathClass), u64>,
) -> BTreeMap<(OpKind, PathClass), u64> {
    let mut out = BTreeMap::new();
    for (key, n) in now {
        let before = earlier.get(key).copied().unwrap_or(0);
        if *n > before {
            out.insert(*key, n - before);
        }
    }
    out
}

impl OpCounts {
    pub fn total(&self) -> u64 {
        self.ops.values().sum()
    }

    /// Bytes that gets returned.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
            .iter()
            .filter(|((k, _), _)| *k == OpKind::Get)
            .map(|(_, n)| n)
            .sum()
    }

    /// Bytes that single puts sent (multipart parts are not tallied; the small objects
    /// cost tests look at never go multipart).
    pub fn bytes_written(&self) -> u64 {
        self.bytes
            .iter()
            .filter(|((k, _), _)| *k == OpKind::Put)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn of_kind(&self, kind: OpKind) -> u64 {
        self.ops
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|(_, n)| n)
            .sum()
    }

    /// Bytes moved by operations of `kind` on paths of `class`.
    pub fn bytes_of(&self, kind: OpKind, class: PathClass) -> u64 {
        self.bytes.get(&(kind, class)).copied().unwrap_or(0)
    }

    pub fn of_class(&self, class: PathClass) -> u64 {
        self.ops
            .iter()
            .filter(|((_, c), _)| *c == class)
            .map(|(_, n)| n)
            .sum()
    }

    /// Operations recorded in `self` but not in `earlier`.
    pub fn since(&self, earlier: &OpCounts) -> OpCounts {
        OpCounts {
            ops: difference(&self.ops, &earlier.ops),
            bytes: difference(&self.bytes, &earlier.bytes),
        }
    }
}

impl fmt::Display for OpCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ops ({} B read, {} B written)",
            self.total(),
            self.bytes_read(),
            self.bytes_written()
        )?;
        for ((kind, class), n) in &self.ops {
            write!(f, ", {kind:?}/{class:?}={n}")?;
        }
        Ok(())
    }
}

/// Forwards every call to `inner`, recording it in `counter` first.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    counter: OpCounter,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>, counter: OpCounter) -> Self {
        Self { inner, counter }
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.counter.record(OpKind::Put, location);
        self.counter
            .record_bytes(OpKind::Put, location, payload.content_length() as u64);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.counter.record(OpKind::PutMultipart, location);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let kind = if options.head {
            OpKind::Head
        } else {
            OpKind::Get
        };
        self.counter.record(kind, location);
        let result = self.inner.get_opts(location, options).await?;
        if kind == OpKind::Get {
            self.counter
                .record_bytes(kind, location, result.range.end - result.range.start);
        }
        Ok(result)
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.counter.record(OpKind::Get, location);
        let total = ranges.iter().map(|r| r.end - r.start).sum();
        self.counter.record_bytes(OpKind::Get, location, total);
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let counter = self.counter.clone();
        let counted = locations
            .map(move |location| {
                if let Ok(path) = &location {
                    counter.record(OpKind::Delete, path);
                }
                location
            })
            .boxed();
        self.inner.delete_stream(counted)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.counter
            .record(OpKind::List, prefix.unwrap_or(&Path::default()));
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.counter
            .record(OpKind::List, prefix.unwrap_or(&Path::default()));
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.counter
            .record(OpKind::List, prefix.unwrap_or(&Path::default()));
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.counter.record(OpKind::Copy, to);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.counter.record(OpKind::Rename, to);
        self.inner.rename_opts(from, to, options).await
    }
}
