//! Opening Lance datasets of a graph the one right way.
//!
//! Every dataset, sidecar and listing of a graph goes through a [`GraphStore`], so that:
//! - on a local path, every write is fsynced (Lance's own local store never syncs);
//! - re-opened datasets keep the same store parameters (a plain `Dataset::open` would not);
//! - cost tests can count object-store operations with one [`OpCounter`].

mod counting;
mod error;
mod kind;
pub mod lance_text;
mod wrapper;

use std::sync::Arc;

use futures::TryStreamExt;
use lance::dataset::builder::DatasetBuilder;
use lance::dataset::{WriteMode, WriteParams};
use lance::io::ObjectStoreParams;
use lance::session::Session;
use lance::Dataset;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use snafu::ResultExt;

pub use counting::{CountingStore, OpCounter, OpCounts, OpKind, PathClass};
pub use error::{Error, Result};
pub use kind::{lance_kind, ErrorKind};
pub use wrapper::GraphStoreWrapper;

/// One object listed below a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub size: u64,
    pub modified: Option<std::time::SystemTime>,
}

/// A SQL string literal for Lance filters: `it's` → `'it''s'`.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

use error::{InvalidUriSnafu, LanceSnafu, ObjectStoreSnafu};

/// The root of one graph: a local directory (plain path or `file://` URI).
#[derive(Debug, Clone)]
pub struct GraphStore {
    /// Absolute filesystem path of the graph root, without a trailing slash.
    root: std::path::PathBuf,
    params: ObjectStoreParams,
    session: Arc<Session>,
    /// The store for sidecars and listings, wrapped exactly like Lance's.
    raw: Arc<dyn ObjectStore>,
    counter: Option<OpCounter>,
}

impl GraphStore {
    /// Open the graph root `uri` (a path or `file://` URI). The directory need not exist.
    pub fn new(uri: &str) -> Result<Self> {
        Self::with_counter(uri, None)
    }

    /// Like [`GraphStore::new`], counting every object-store operation in `counter`.
    /// Bytes held by the Lance caches (index and metadata) of this graph's session.
    pub fn cache_bytes(&self) -> u64 {
        self.session.size_bytes()
    }

    pub fn with_counter(uri: &str, counter: Option<OpCounter>) -> Result<Self> {
        let root = local_root(uri)?;
        let wrapper = Arc::new(GraphStoreWrapper::local(counter.clone()));
        let params = ObjectStoreParams {
            object_store_wrapper: Some(wrapper.clone()),
            ..Default::default()
        };
        let raw = wrapper.store();
        Ok(Self {
            root,
            params,
            session: Arc::new(Session::default()),
            raw,
            counter,
        })
    }

    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    pub fn counter(&self) -> Option<&OpCounter> {
        self.counter.as_ref()
    }

    /// The store parameters every Lance call of this graph must use.
    pub fn store_params(&self) -> ObjectStoreParams {
        self.params.clone()
    }

    /// URI of a dataset below the root, e.g. `nodes/Person.lance`, as Lance must open it.
    ///
    /// The scheme is Lance's `file-object-store`, not a plain path: for plain paths Lance
    /// writes data files, deletion files and transactions straight to disk, around the
    /// store wrapper, so they would be neither fsynced nor counted.
    pub fn uri_of(&self, relative: &str) -> String {
        format!("file-object-store://{}/{}", self.root.display(), relative)
    }

    /// Write parameters for a commit to this graph: the graph's store, its session, and no
    /// automatic cleanup (old versions stay readable until the graph's own cleanup says so,
    /// because graph commits pin them).
    pub fn write_params(&self, mode: WriteMode) -> WriteParams {
        WriteParams {
            mode,
            store_params: Some(self.store_params()),
            session: Some(self.session.clone()),
            auto_cleanup: None,
            skip_auto_cleanup: true,
            ..Default::default()
        }
    }

    /// Open a dataset at its latest version, or at `version`.
    pub async fn open_dataset(&self, relative: &str, version: Option<u64>) -> Result<Dataset> {
        let uri = self.uri_of(relative);
        let mut builder = DatasetBuilder::from_uri(&uri)
            .with_store_params(self.store_params())
            .with_session(self.session.clone());
        if let Some(version) = version {
            builder = builder.with_version(version);
        }
        builder.load().await.context(LanceSnafu { uri })
    }

    /// Create an empty dataset with `schema`. Fails if it exists.
    pub async fn create_dataset(
        &self,
        relative: &str,
        schema: arrow_schema::SchemaRef,
    ) -> Result<Dataset> {
        let uri = self.uri_of(relative);
        let reader = arrow_array::RecordBatchIterator::new(Vec::new(), schema);
        Dataset::write(
            reader,
            uri.as_str(),
            Some(self.write_params(WriteMode::Create)),
        )
        .await
        .context(LanceSnafu { uri })
    }

    /// Whether the dataset at `relative` exists (has at least one version).
    pub async fn dataset_exists(&self, relative: &str) -> Result<bool> {
        let prefix = self.path_of(&format!("{relative}/_versions"));
        let mut listing = self.raw.list(Some(&prefix));
        let first = listing.try_next().await.context(ObjectStoreSnafu {
            path: prefix.to_string(),
        })?;
        Ok(first.is_some())
    }

    /// Write a small object durably (sidecars).
    pub async fn put(&self, relative: &str, bytes: Vec<u8>) -> Result<()> {
        let path = self.path_of(relative);
        self.raw
            .put(&path, PutPayload::from(bytes))
            .await
            .context(ObjectStoreSnafu {
                path: path.to_string(),
            })?;
        Ok(())
    }

    /// Read a small object, or `None` when it does not exist.
    pub async fn get(&self, relative: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path_of(relative);
        match self.raw.get(&path).await {
            Ok(result) => {
                let bytes = result.bytes().await.context(ObjectStoreSnafu {
                    path: path.to_string(),
                })?;
                Ok(Some(bytes.to_vec()))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(source).context(ObjectStoreSnafu {
                path: path.to_string(),
            }),
        }
    }

    /// Delete an object; deleting a missing object is not an error.
    pub async fn delete(&self, relative: &str) -> Result<()> {
        let path = self.path_of(relative);
        match self.raw.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(source).context(ObjectStoreSnafu {
                path: path.to_string(),
            }),
        }
    }

    /// Delete every object below `dir`, at any depth. Returns (objects, bytes) removed.
    pub async fn delete_tree(&self, dir: &str) -> Result<(u64, u64)> {
        let prefix = self.path_of(dir);
        let mut listing = self.raw.list(Some(&prefix));
        let mut found = Vec::new();
        while let Some(meta) = listing.try_next().await.transpose() {
            match meta {
                Ok(meta) => found.push(meta),
                Err(object_store::Error::NotFound { .. }) => break,
                Err(source) => {
                    return Err(source).context(ObjectStoreSnafu {
                        path: prefix.to_string(),
                    })
                }
            }
        }
        let (mut objects, mut bytes) = (0, 0);
        for meta in found {
            match self.raw.delete(&meta.location).await {
                Ok(()) => {
                    objects += 1;
                    bytes += meta.size;
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(source) => {
                    return Err(source).context(ObjectStoreSnafu {
                        path: meta.location.to_string(),
                    })
                }
            }
        }
        // A local directory tree outlives its files; remove what is left of it.
        let _ = std::fs::remove_dir_all(self.root.join(dir));
        Ok((objects, bytes))
    }

    /// Sizes of the objects directly below `dir`, by name.
    pub async fn sizes(&self, dir: &str) -> Result<Vec<(String, u64)>> {
        Ok(self
            .entries(dir)
            .await?
            .into_iter()
            .map(|entry| (entry.name, entry.size))
            .collect())
    }

    /// The objects directly below `dir`: name, size and when each was last written.
    pub async fn entries(&self, dir: &str) -> Result<Vec<Entry>> {
        let prefix = self.path_of(dir);
        let listing = match self.raw.list_with_delimiter(Some(&prefix)).await {
            Ok(listing) => listing,
            Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(source) => {
                return Err(source).context(ObjectStoreSnafu {
                    path: prefix.to_string(),
                })
            }
        };
        Ok(listing
            .objects
            .into_iter()
            .filter_map(|meta| {
                Some(Entry {
                    name: meta.location.filename()?.to_owned(),
                    size: meta.size,
                    modified: Some(meta.last_modified.into()),
                })
            })
            .collect())
    }

    /// Write a small object only if none exists at `relative` (the store arbitrates: of
    /// several processes racing, exactly one creates it). `false` when it already existed.
    pub async fn put_if_absent(&self, relative: &str, bytes: Vec<u8>) -> Result<bool> {
        let path = self.path_of(relative);
        let options = object_store::PutOptions {
            mode: object_store::PutMode::Create,
            ..Default::default()
        };
        match self
            .raw
            .put_opts(&path, PutPayload::from(bytes), options)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(source) => Err(source).context(ObjectStoreSnafu {
                path: path.to_string(),
            }),
        }
    }

    /// Names (relative to `dir`) of the objects directly below `dir`, sorted.
    pub async fn list(&self, dir: &str) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .sizes(dir)
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        names.sort();
        Ok(names)
    }

    /// When the object at `relative` was last written, or `None` if it does not exist.
    pub async fn modified_at(&self, relative: &str) -> Result<Option<std::time::SystemTime>> {
        let path = self.path_of(relative);
        match self.raw.head(&path).await {
            Ok(meta) => Ok(Some(meta.last_modified.into())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(source).context(ObjectStoreSnafu {
                path: path.to_string(),
            }),
        }
    }

    /// The earliest modification time of the objects directly below `dir`, if any.
    pub async fn modified(&self, dir: &str) -> Result<Option<std::time::SystemTime>> {
        let prefix = self.path_of(dir);
        let listing = match self.raw.list_with_delimiter(Some(&prefix)).await {
            Ok(listing) => listing,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(source) => {
                return Err(source).context(ObjectStoreSnafu {
                    path: prefix.to_string(),
                })
            }
        };
        Ok(listing
            .objects
            .iter()
            .map(|meta| std::time::SystemTime::from(meta.last_modified))
            .min())
    }

    fn path_of(&self, relative: &str) -> Path {
        // The wrapped store is rooted at `/`, like Lance's own local store.
        Path::from(format!("{}/{}", self.root.display(), relative).trim_start_matches('/'))
    }
}

/// Resolve a graph URI to an absolute local directory.
fn local_root(uri: &str) -> Result<std::path::PathBuf> {
    let path = if let Some(rest) = uri.strip_prefix("file://") {
        std::path::PathBuf::from(rest)
    } else if uri.contains("://") {
        return InvalidUriSnafu {
            uri,
            reason: "only local paths and file:// URIs are supported",
        }
        .fail();
    } else {
        std::path::PathBuf::from(uri)
    };
    if path.as_os_str().is_empty() {
        return InvalidUriSnafu {
            uri,
            reason: "the path is empty",
        }
        .fail();
    }
    let absolute = if path.is_absolute() {
        path
    } else {
        std::env::current_dir()
            .map_err(|e| Error::InvalidUri {
                uri: uri.to_owned(),
                reason: e.to_string(),
            })?
            .join(path)
    };
    // Normalise `.`/`..` lexically; the directory may not exist yet.
    let mut clean = std::path::PathBuf::new();
    for part in absolute.components() {
        match part {
            std::path::Component::ParentDir => {
                clean.pop();
            }
            std::path::Component::CurDir => {}
            other => clean.push(other),
        }
    }
    Ok(clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_absolute_and_clean() {
        let store = GraphStore::new("file:///tmp/a/../b/./g").unwrap();
        assert_eq!(store.root(), std::path::Path::new("/tmp/b/g"));
        assert_eq!(
            store.uri_of("nodes/P.lance"),
            "file-object-store:///tmp/b/g/nodes/P.lance"
        );
        assert!(GraphStore::new("s3://bucket/x").is_err());
        assert!(GraphStore::new("").is_err());
    }

    #[test]
    fn path_classes() {
        assert_eq!(
            PathClass::of("g/__manifest.lance/_versions/1.manifest"),
            PathClass::Manifest
        );
        assert_eq!(
            PathClass::of("g/nodes/P.lance/data/x.lance"),
            PathClass::Data
        );
        assert_eq!(
            PathClass::of("g/nodes/P.lance/_mem_wal/0/wal/1.arrow"),
            PathClass::MemWal
        );
        assert_eq!(PathClass::of("g/__recovery/x.json"), PathClass::Recovery);
    }
}
