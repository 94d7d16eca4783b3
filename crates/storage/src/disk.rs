//! A local disk that refuses a write: full, read-only, or not ours to write. The graph's
//! local store turns such an I/O error into a [`DiskRefusal`] that names what was being
//! written by its role ("the write-ahead log of Person"), not by its internal path, so the
//! error a user reads says what happened and what to do. Lance sometimes carries a store's
//! error up only as text, so the refusal is also found again in an error's message
//! ([`DiskRefusal::in_error`]); its wording is fixed here and pinned by this file's tests.

use std::fmt;
use std::io;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

use crate::counting::PathClass;
use crate::kind::ErrorKind;

/// What a disk said when it refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskCondition {
    /// No space (or quota) left: the write may succeed once space is freed.
    Full,
    /// The file system is mounted read-only.
    ReadOnly,
    /// The process may not write (or read) there.
    PermissionDenied,
}

impl DiskCondition {
    const ALL: [DiskCondition; 3] = [
        DiskCondition::Full,
        DiskCondition::ReadOnly,
        DiskCondition::PermissionDenied,
    ];

    /// The condition an I/O error reports, if it is one of these.
    pub fn of_io(error: &io::Error) -> Option<DiskCondition> {
        match error.kind() {
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => Some(DiskCondition::Full),
            io::ErrorKind::ReadOnlyFilesystem => Some(DiskCondition::ReadOnly),
            io::ErrorKind::PermissionDenied => Some(DiskCondition::PermissionDenied),
            _ => None,
        }
    }

    /// A full disk is worth a retry once space is freed; a disk that may not be written
    /// needs someone to change its mount or its permissions.
    pub fn kind(self) -> ErrorKind {
        match self {
            DiskCondition::Full => ErrorKind::Unavailable,
            DiskCondition::ReadOnly | DiskCondition::PermissionDenied => ErrorKind::Forbidden,
        }
    }

    fn words(self) -> &'static str {
        match self {
            DiskCondition::Full => "the disk is full",
            DiskCondition::ReadOnly => "the disk is read-only",
            DiskCondition::PermissionDenied => "permission denied",
        }
    }
}

/// A local disk's refusal of one operation on a graph's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskRefusal {
    pub condition: DiskCondition,
    /// What the file is to the graph, e.g. "the write-ahead log of Person".
    pub role: String,
    pub writing: bool,
}

impl fmt::Display for DiskRefusal {
    // "the disk is full (writing the write-ahead log of Person)": the parenthesis closes
    // the refusal, so it can be cut out of a longer message again.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.writing { "writing" } else { "reading" };
        write!(f, "{} ({verb} {})", self.condition.words(), self.role)
    }
}

impl std::error::Error for DiskRefusal {}

impl DiskRefusal {
    /// The refusal an I/O error on `path` (relative to the store's root) amounts to.
    pub fn of_io(error: &io::Error, path: &str, writing: bool) -> Option<DiskRefusal> {
        Some(DiskRefusal {
            condition: DiskCondition::of_io(error)?,
            role: role_of(path),
            writing,
        })
    }

    /// The refusal behind `error`: a [`DiskRefusal`] or an I/O error in its chain of
    /// sources, or else one written in the message of a store's error in that chain (Lance
    /// passes some store errors up only as text: its I/O errors, and the local store's
    /// own). Only those messages are read: others may quote a user's keys or filters. A
    /// bare OS error in the text gives the condition without a role.
    pub fn in_error(error: &(dyn std::error::Error + 'static)) -> Option<DiskRefusal> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(refusal) = error.downcast_ref::<DiskRefusal>() {
                return Some(refusal.clone());
            }
            if let Some(condition) = error
                .downcast_ref::<io::Error>()
                .and_then(DiskCondition::of_io)
            {
                return Some(DiskRefusal {
                    condition,
                    role: "the graph's files".to_owned(),
                    writing: true,
                });
            }
            let store_text = matches!(
                error.downcast_ref::<lance::Error>(),
                Some(lance::Error::IO { .. })
            ) || matches!(
                error.downcast_ref::<object_store::Error>(),
                Some(object_store::Error::Generic {
                    store: "LocalFileSystem",
                    ..
                })
            );
            if store_text {
                if let Some(refusal) = DiskRefusal::in_text(&error.to_string()) {
                    return Some(refusal);
                }
            }
            next = error.source();
        }
        None
    }

    fn in_text(text: &str) -> Option<DiskRefusal> {
        for condition in DiskCondition::ALL {
            for verb in ["writing", "reading"] {
                let opening = format!("{} ({verb} ", condition.words());
                if let Some(at) = text.find(&opening) {
                    let rest = &text[at + opening.len()..];
                    let role = &rest[..rest.find(')').unwrap_or(rest.len())];
                    return Some(DiskRefusal {
                        condition,
                        role: role.to_owned(),
                        writing: verb == "writing",
                    });
                }
            }
        }
        // Linux's errno numbers, as std prints them: ENOSPC, EDQUOT, EROFS, EACCES.
        let condition = [
            ("(os error 28)", DiskCondition::Full),
            ("(os error 122)", DiskCondition::Full),
            ("(os error 30)", DiskCondition::ReadOnly),
            ("(os error 13)", DiskCondition::PermissionDenied),
        ]
        .into_iter()
        .find(|(errno, _)| text.contains(errno))?
        .1;
        Some(DiskRefusal {
            condition,
            role: "the graph's files".to_owned(),
            writing: true,
        })
    }

    /// This refusal as an object-store error, the form the graph's store returns it in.
    pub fn into_store_error(self) -> object_store::Error {
        object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(self),
        }
    }
}

/// What a path under a graph's root is to the graph: a table's data, log or index, or one
/// of the graph's own records.
pub fn role_of(path: &str) -> String {
    let table = path
        .split('/')
        .collect::<Vec<_>>()
        .windows(2)
        .find_map(|pair| {
            let name = pair[1].strip_suffix(".lance")?;
            matches!(pair[0], "nodes" | "edges").then_some(name)
        });
    if let Some(table) = table {
        let part = match PathClass::of(path) {
            PathClass::MemWal => "the write-ahead log",
            PathClass::Data => "the data",
            PathClass::Manifest => "the version manifest",
            PathClass::Transaction => "the transaction log",
            PathClass::Deletion => "the deletion vectors",
            PathClass::Index => "an index",
            _ => "the table",
        };
        return format!("{part} of {table}");
    }
    let named = [
        ("__manifest.lance", "the graph's commit manifest"),
        ("_ingest_rejects.lance", "the ingest dead-letter table"),
        ("__leases/", "a branch's write lease"),
        ("__recovery/", "a recovery record"),
        ("__producers/", "the producers' sequence marks"),
        ("__schema", "the graph's schema"),
        ("__settings", "the graph's settings"),
        ("__status", "the ingest status"),
        ("__lineages", "the branches' lineage records"),
        ("__pins", "the snapshot pins"),
        ("__txn", "the commit records"),
        ("__probe", "a write probe"),
        ("__publisher.json", "the graph's publisher choice"),
    ];
    named
        .into_iter()
        .find(|(part, _)| path.contains(part))
        .map(|(_, role)| role.to_owned())
        .unwrap_or_else(|| "the graph's folder".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_role_and_is_found_again_in_text() {
        let full = io::Error::from_raw_os_error(28);
        let refusal =
            DiskRefusal::of_io(&full, "tmp/g/nodes/Person.lance/_mem_wal/abc/1.arrow", true)
                .unwrap();
        assert_eq!(
            refusal.to_string(),
            "the disk is full (writing the write-ahead log of Person)"
        );
        let wrapped = format!("MemWAL put on nodes/Person.lance failed: LanceError(IO): single PUT failed: Generic LocalFileSystem error: {refusal}, lance-14/src/x.rs:3:4");
        let as_lance = lance::Error::io(wrapped.clone());
        assert_eq!(DiskRefusal::in_error(&as_lance), Some(refusal.clone()));
        // Text outside a store's error is a user's, not the disk's: a key named so.
        let quoted = lance::Error::invalid_input(format!("no row `{refusal}` (os error 13)"));
        assert_eq!(DiskRefusal::in_error(&quoted), None);
        assert_eq!(DiskRefusal::in_text(&wrapped), Some(refusal));
        let lease = io::Error::from_raw_os_error(30);
        assert_eq!(
            DiskRefusal::of_io(&lease, "g/__leases/main/1.json", true)
                .unwrap()
                .to_string(),
            "the disk is read-only (writing a branch's write lease)"
        );
        let bare = "Unable to copy data to file: No space left on device (os error 28)";
        assert_eq!(
            DiskRefusal::in_text(bare).map(|r| r.condition),
            Some(DiskCondition::Full)
        );
        assert_eq!(DiskRefusal::in_text("connection reset"), None);
        assert_eq!(
            role_of("g/edges/Knows.lance/data/x.lance"),
            "the data of Knows"
        );
        assert_eq!(
            role_of("g/__manifest.lance/_versions/3.manifest"),
            "the graph's commit manifest"
        );
    }

    #[test]
    fn a_refusal_travels_as_a_store_error_and_is_found_in_the_chain() {
        let refusal = DiskRefusal {
            condition: DiskCondition::PermissionDenied,
            role: "the data of Person".to_owned(),
            writing: false,
        };
        let error = refusal.clone().into_store_error();
        assert_eq!(DiskRefusal::in_error(&error), Some(refusal));
        assert_eq!(DiskCondition::Full.kind(), ErrorKind::Unavailable);
        assert_eq!(DiskCondition::ReadOnly.kind(), ErrorKind::Forbidden);
    }
}

/// The graph's local store, with a disk's refusals turned into [`DiskRefusal`]s that name
/// the file's role. Listings and deletes pass through (their errors keep the OS's words,
/// which [`DiskRefusal::in_error`] still recognises).
#[derive(Debug)]
pub struct DiskStore {
    inner: Arc<dyn ObjectStore>,
}

impl DiskStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner }
    }
}

/// `error` (an operation on `path`) as a refusal, when a disk refused it.
fn refused(error: object_store::Error, path: &Path, writing: bool) -> object_store::Error {
    let condition = {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        let mut found = None;
        while let Some(error) = next {
            if let Some(io) = error.downcast_ref::<io::Error>() {
                found = DiskCondition::of_io(io);
                break;
            }
            next = error.source();
        }
        found
    };
    match condition {
        Some(condition) => DiskRefusal {
            condition,
            role: role_of(path.as_ref()),
            writing,
        }
        .into_store_error(),
        None => error,
    }
}

impl fmt::Display for DiskStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Disk({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for DiskStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        (self.inner.put_opts(location, payload, opts).await).map_err(|e| refused(e, location, true))
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        (self.inner.put_multipart_opts(location, opts).await)
            .map_err(|e| refused(e, location, true))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        (self.inner.get_opts(location, options).await).map_err(|e| refused(e, location, false))
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        (self.inner.get_ranges(location, ranges).await).map_err(|e| refused(e, location, false))
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        (self.inner.list_with_delimiter(prefix).await)
            .map_err(|e| refused(e, prefix.unwrap_or(&Path::default()), false))
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        (self.inner.copy_opts(from, to, options).await).map_err(|e| refused(e, to, true))
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        (self.inner.rename_opts(from, to, options).await).map_err(|e| refused(e, to, true))
    }
}
