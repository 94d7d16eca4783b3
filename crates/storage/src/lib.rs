//! Opening Lance datasets of a graph the one right way.
//!
//! Every dataset, sidecar and listing of a graph goes through a [`GraphStore`], so that:
//! - on a local path, every write is fsynced (Lance's own local store never syncs); on S3
//!   a PUT is durable when it returns, and the store must honour conditional PUT;
//! - re-opened datasets keep the same store parameters (a plain `Dataset::open` would not);
//! - cost tests can count object-store operations with one [`OpCounter`], and reliability
//!   tests inject latency and failures with one [`Faults`].

mod counting;
mod disk;
mod error;
mod faults;
mod kind;
pub mod lance_text;
pub mod layout;
mod s3_settings;
mod wrapper;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::TryStreamExt;
use lance::dataset::builder::DatasetBuilder;
use lance::dataset::{WriteMode, WriteParams};
use lance::io::{ObjectStoreParams, StorageOptionsAccessor};
use lance::session::Session;
use lance::Dataset;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use snafu::ResultExt;

pub use counting::{CountingStore, OpCounter, OpCounts, OpKind, PathClass};
pub use disk::{role_of, DiskCondition, DiskRefusal, DiskStore};
pub use error::{Error, Result};
pub use faults::{FaultKind, FaultStore, Faults};
pub use kind::{lance_kind, store_access_kind, ErrorKind};
pub use wrapper::GraphStoreWrapper;

/// Requests to an object store that its client retried (a 5xx, a timeout, a dropped
/// connection), in this process. The S3 client retries inside itself and says so only in
/// its log ("retry N of M"); a process that keeps logs counts those lines here
/// ([`count_store_retry`]), so an operator sees a store failing before it fails writes.
static STORE_RETRIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The target of the S3 client's retry log lines.
pub const STORE_RETRY_TARGET: &str = "object_store::client::retry";

/// Count one retry the store's client logged.
pub fn count_store_retry() {
    STORE_RETRIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Retries the store's client made so far in this process.
pub fn store_retries() -> u64 {
    STORE_RETRIES.load(std::sync::atomic::Ordering::Relaxed)
}

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

/// How a graph's store is reached: settings for the object store, and the wrappers tests
/// and benchmarks put under a graph.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    /// Object-store settings as Lance takes them (`aws_endpoint`, `aws_region`,
    /// `aws_access_key_id`, `allow_http`, ...). On S3 the `AWS_*` environment fills what
    /// is not given here.
    pub settings: BTreeMap<String, String>,
    /// Count every object-store operation here.
    pub counter: Option<OpCounter>,
    /// Add latency and inject failures under every operation.
    pub faults: Option<Faults>,
    /// How much Lance may cache for this graph.
    pub caches: SessionCaches,
}

/// The bounds of a graph's Lance caches (least recently used entries go first). Lance's
/// own defaults are 1 GiB of metadata and 6 GiB of index pages per session: every fold
/// commit adds its new versions' metadata, so a long fold or a long-running server grew
/// towards those bounds whatever its work needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionCaches {
    /// Manifests, fragment and index metadata of the versions read.
    pub metadata_bytes: usize,
    /// Index pages (key lookups, full-text and vector search).
    pub index_bytes: usize,
}

impl Default for SessionCaches {
    fn default() -> Self {
        SessionCaches {
            metadata_bytes: 256 << 20,
            index_bytes: 512 << 20,
        }
    }
}

impl StoreOptions {
    /// Parse `key=value` settings (the CLI's `--store-option`).
    pub fn parse_setting(text: &str) -> std::result::Result<(String, String), String> {
        match text.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                Ok((key.trim().to_owned(), value.to_owned()))
            }
            _ => Err(format!("`{text}` is not a key=value store option")),
        }
    }
}

/// Where a graph lives.
#[derive(Debug, Clone)]
enum Root {
    /// An absolute, clean local directory, without a trailing slash.
    Local(std::path::PathBuf),
    /// An S3 URL (`s3://bucket/prefix`), without a trailing slash.
    S3(String),
}

/// The root of one graph: a local directory (plain path or `file://` URI) or an S3
/// prefix (`s3://bucket/prefix`).
#[derive(Debug, Clone)]
pub struct GraphStore {
    root: Root,
    params: ObjectStoreParams,
    session: Arc<Session>,
    /// The store for sidecars and listings, wrapped exactly like Lance's, and the path of
    /// the root in it; built on first use (an object store's client is made by Lance).
    raw: Arc<tokio::sync::OnceCell<(Arc<dyn ObjectStore>, Path)>>,
    /// Set once the store has been seen to honour conditional PUT.
    conditional_put: Arc<tokio::sync::OnceCell<()>>,
    counter: Option<OpCounter>,
}

impl GraphStore {
    /// Open the graph root `uri`. The directory or prefix need not exist.
    pub fn new(uri: &str) -> Result<Self> {
        Self::open(uri, StoreOptions::default())
    }

    /// Like [`GraphStore::new`], counting every object-store operation in `counter`.
    pub fn with_counter(uri: &str, counter: Option<OpCounter>) -> Result<Self> {
        Self::open(
            uri,
            StoreOptions {
                counter,
                ..Default::default()
            },
        )
    }

    /// Open the graph root `uri` with `options`.
    pub fn open(uri: &str, options: StoreOptions) -> Result<Self> {
        let root = parse_root(uri)?;
        let local = matches!(root, Root::Local(_));
        if !local {
            for key in s3_settings::unknown_keys(&options.settings) {
                tracing::warn!(
                    "the store option `{key}` is not a setting of S3, its HTTP client or \
                     Lance: it is ignored"
                );
            }
            let env = |key: &str| std::env::var(key).ok();
            if let Some(endpoint) = s3_settings::plain_http_endpoint(&options.settings, env) {
                return InvalidUriSnafu {
                    uri,
                    reason: format!(
                        "its endpoint {endpoint} is plain http, which the S3 client refuses \
                         unless allowed: set allow_http=true (`--store-option \
                         allow_http=true`, or AWS_ALLOW_HTTP=true)"
                    ),
                }
                .fail();
            }
        }
        let wrapper = Arc::new(GraphStoreWrapper::new(
            local,
            options.counter.clone(),
            options.faults,
        ));
        let raw = Arc::new(tokio::sync::OnceCell::new());
        if local {
            let _ = raw.set((wrapper.local_store(), Path::default()));
        }
        let settings: HashMap<String, String> = options.settings.into_iter().collect();
        let params = ObjectStoreParams {
            object_store_wrapper: Some(wrapper),
            storage_options_accessor: (!settings.is_empty())
                .then(|| Arc::new(StorageOptionsAccessor::with_static_options(settings))),
            ..Default::default()
        };
        Ok(Self {
            root,
            params,
            session: Arc::new(Session::new(
                options.caches.index_bytes,
                options.caches.metadata_bytes,
                Arc::default(),
            )),
            raw,
            conditional_put: Arc::default(),
            counter: options.counter,
        })
    }

    /// Bytes held by the Lance caches (index and metadata) of this graph's session.
    pub fn cache_bytes(&self) -> u64 {
        self.session.size_bytes()
    }

    /// Bytes held by each of the session's caches, as Lance counts them against their
    /// bounds: `(metadata, index)`.
    pub async fn cache_usage(&self) -> (usize, usize) {
        let metadata = self.session.metadata_cache_stats().await.size_bytes;
        let index = self.session.index_cache_stats().await.size_bytes;
        (metadata, index)
    }

    /// The graph's location as users name it: a local path or an `s3://` URL.
    pub fn location(&self) -> String {
        match &self.root {
            Root::Local(path) => path.display().to_string(),
            Root::S3(url) => url.clone(),
        }
    }

    /// Whether the graph lives on a local disk.
    pub fn is_local(&self) -> bool {
        matches!(self.root, Root::Local(_))
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
    /// A local root uses Lance's `file-object-store` scheme, not a plain path: for plain
    /// paths Lance writes data files, deletion files and transactions straight to disk,
    /// around the store wrapper, so they would be neither fsynced nor counted.
    pub fn uri_of(&self, relative: &str) -> String {
        match &self.root {
            Root::Local(path) => format!("file-object-store://{}/{relative}", path.display()),
            Root::S3(url) => format!("{url}/{relative}"),
        }
    }

    /// URI of a dataset below the root as another program opens it: a plain path on a
    /// local disk (the `file-object-store` scheme of [`GraphStore::uri_of`] is this
    /// process's own wrapper), the `s3://` URL otherwise.
    pub fn public_uri_of(&self, relative: &str) -> String {
        match &self.root {
            Root::Local(path) => path.join(relative).display().to_string(),
            Root::S3(url) => format!("{url}/{relative}"),
        }
    }

    /// Refuse a store that does not honour conditional PUT (`If-None-Match: *`): every
    /// commit of Lance and Tributary relies on exactly one of several racing creators
    /// winning. Local disks do (a link that fails if the name exists). Checked once per
    /// store, before its first write: reads write nothing.
    pub async fn check_conditional_put(&self) -> Result<()> {
        if self.is_local() {
            return Ok(());
        }
        self.conditional_put
            .get_or_try_init(|| self.probe_conditional_put())
            .await
            .map(|_| ())
    }

    async fn probe_conditional_put(&self) -> Result<()> {
        let probe = format!("{}/{}", layout::PROBE, uuid::Uuid::new_v4());
        let mine = uuid::Uuid::new_v4().to_string().into_bytes();
        let created = match self.put_if_absent(&probe, mine.clone()).await {
            Ok(created) => created,
            // A reader without write access can read; its writes would fail on their own.
            Err(Error::ObjectStore {
                source:
                    object_store::Error::PermissionDenied { .. }
                    | object_store::Error::Unauthenticated { .. },
                ..
            }) => return Ok(()),
            Err(error) => return Err(error),
        };
        // "Already exists" for a new name is our own create, whose response was lost and
        // retried: it holds what we wrote.
        let created = created || self.get(&probe).await?.as_deref() == Some(&mine[..]);
        let again = self.put_if_absent(&probe, b"second".to_vec()).await;
        // A probe left behind (a failed delete) is harmless clutter.
        let _ = self.delete(&probe).await;
        if created && !again? {
            return Ok(());
        }
        InvalidUriSnafu {
            uri: self.location(),
            reason: "the store does not honour conditional PUT (If-None-Match: *): a second \
                     create of one object succeeded, so racing commits could overwrite \
                     each other; use a store that supports conditional writes",
        }
        .fail()
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
        self.open_dataset_on(relative, None, version).await
    }

    /// Open a dataset on one of its Lance branches (`None`: its main lineage), at the
    /// branch's latest version or at `version` of it.
    pub async fn open_dataset_on(
        &self,
        relative: &str,
        branch: Option<&str>,
        version: Option<u64>,
    ) -> Result<Dataset> {
        let uri = self.uri_of(relative);
        let mut builder = DatasetBuilder::from_uri(&uri)
            .with_store_params(self.store_params())
            .with_session(self.session.clone());
        builder = match (branch, version) {
            (Some(branch), version) => builder.with_branch(branch, version),
            (None, Some(version)) => builder.with_version(version),
            (None, None) => builder,
        };
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
        let (raw, prefix) = self.raw_at(&format!("{relative}/_versions")).await?;
        let mut listing = raw.list(Some(&prefix));
        let first = listing.try_next().await.context(ObjectStoreSnafu {
            path: prefix.to_string(),
        })?;
        Ok(first.is_some())
    }

    /// Write a small object durably (sidecars).
    pub async fn put(&self, relative: &str, bytes: Vec<u8>) -> Result<()> {
        let (raw, path) = self.raw_at(relative).await?;
        raw.put(&path, PutPayload::from(bytes))
            .await
            .context(ObjectStoreSnafu {
                path: path.to_string(),
            })?;
        Ok(())
    }

    /// Read a small object, or `None` when it does not exist.
    pub async fn get(&self, relative: &str) -> Result<Option<Vec<u8>>> {
        let (raw, path) = self.raw_at(relative).await?;
        match raw.get(&path).await {
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
        let (raw, path) = self.raw_at(relative).await?;
        match raw.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(source).context(ObjectStoreSnafu {
                path: path.to_string(),
            }),
        }
    }

    /// Delete every object below `dir`, at any depth. Returns (objects, bytes) removed.
    pub async fn delete_tree(&self, dir: &str) -> Result<(u64, u64)> {
        let (raw, prefix) = self.raw_at(dir).await?;
        let mut listing = raw.list(Some(&prefix));
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
            match raw.delete(&meta.location).await {
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
        if let Root::Local(root) = &self.root {
            let _ = std::fs::remove_dir_all(root.join(dir));
        }
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

    /// What is directly below `dir`; `None` when `dir` is not there.
    async fn listing(&self, dir: &str) -> Result<Option<object_store::ListResult>> {
        let (raw, prefix) = self.raw_at(dir).await?;
        match raw.list_with_delimiter(Some(&prefix)).await {
            Ok(listing) => Ok(Some(listing)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(source).context(ObjectStoreSnafu {
                path: prefix.to_string(),
            }),
        }
    }

    /// The objects directly below `dir`: name, size and when each was last written.
    pub async fn entries(&self, dir: &str) -> Result<Vec<Entry>> {
        let Some(listing) = self.listing(dir).await? else {
            return Ok(Vec::new());
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

    /// Names of the folders (common prefixes) directly below `dir`, sorted.
    pub async fn folders(&self, dir: &str) -> Result<Vec<String>> {
        let Some(listing) = self.listing(dir).await? else {
            return Ok(Vec::new());
        };
        let mut names: Vec<String> = listing
            .common_prefixes
            .into_iter()
            .filter_map(|folder| folder.filename().map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Write a small object only if none exists at `relative` (the store arbitrates: of
    /// several processes racing, exactly one creates it). `false` when it already existed.
    pub async fn put_if_absent(&self, relative: &str, bytes: Vec<u8>) -> Result<bool> {
        let (raw, path) = self.raw_at(relative).await?;
        let options = object_store::PutOptions {
            mode: object_store::PutMode::Create,
            ..Default::default()
        };
        match raw.put_opts(&path, PutPayload::from(bytes), options).await {
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
        let (raw, path) = self.raw_at(relative).await?;
        match raw.head(&path).await {
            Ok(meta) => Ok(Some(meta.last_modified.into())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(source).context(ObjectStoreSnafu {
                path: path.to_string(),
            }),
        }
    }

    /// The earliest modification time of the objects directly below `dir`, if any.
    pub async fn modified(&self, dir: &str) -> Result<Option<std::time::SystemTime>> {
        let (raw, prefix) = self.raw_at(dir).await?;
        let listing = match raw.list_with_delimiter(Some(&prefix)).await {
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

    /// The store for sidecars and listings, and the path of `relative` in it.
    async fn raw_at(&self, relative: &str) -> Result<(Arc<dyn ObjectStore>, Path)> {
        let (store, base) = self
            .raw
            .get_or_try_init(|| async {
                let uri = self.uri_of("");
                let uri = uri.trim_end_matches('/');
                let (store, base) = lance::io::ObjectStore::from_uri_and_params(
                    self.session.store_registry(),
                    uri,
                    &self.params,
                )
                .await
                .context(LanceSnafu { uri })?;
                Ok::<_, Error>((store.inner.clone(), base))
            })
            .await?;
        let path = match &self.root {
            // The local store is rooted at `/`, like Lance's own.
            Root::Local(root) => {
                Path::from(format!("{}/{relative}", root.display()).trim_start_matches('/'))
            }
            // Below the base exactly as Lance places it (the base is not encoded again).
            Root::S3(_) => relative
                .split('/')
                .filter(|part| !part.is_empty())
                .fold(base.clone(), |path, part| path.join(part)),
        };
        Ok((store.clone(), path))
    }
}

/// Resolve a graph URI to an S3 prefix or an absolute local directory.
fn parse_root(uri: &str) -> Result<Root> {
    if let Some(rest) = uri.strip_prefix("s3://") {
        let rest = rest.trim_end_matches('/');
        let bucket = rest.split('/').next().unwrap_or_default();
        // Characters a URL or a store would read otherwise (`?`, `#`, `%`, spaces...) are
        // refused: the location must name the same objects for Lance and for us.
        let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=".contains(c);
        if bucket.is_empty()
            || rest
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
            || !rest.chars().all(plain)
        {
            return InvalidUriSnafu {
                uri,
                reason: "an S3 location is s3://bucket/prefix: letters, digits and `-_.=` in \
                         parts separated by `/`, none empty, `.` or `..`",
            }
            .fail();
        }
        return Ok(Root::S3(format!("s3://{rest}")));
    }
    let path = if let Some(rest) = uri.strip_prefix("file://") {
        std::path::PathBuf::from(rest)
    } else if uri.contains("://") {
        return InvalidUriSnafu {
            uri,
            reason: "only local paths, file:// and s3:// URIs are supported",
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
    Ok(Root::Local(clean))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_absolute_and_clean() {
        let store = GraphStore::new("file:///tmp/a/../b/./g").unwrap();
        assert_eq!(store.location(), "/tmp/b/g");
        assert_eq!(
            store.uri_of("nodes/P.lance"),
            "file-object-store:///tmp/b/g/nodes/P.lance"
        );
        let remote = GraphStore::new("s3://bucket/x/g/").unwrap();
        assert_eq!(remote.location(), "s3://bucket/x/g");
        assert_eq!(
            remote.uri_of("nodes/P.lance"),
            "s3://bucket/x/g/nodes/P.lance"
        );
        assert!(!remote.is_local());
        for bad in [
            "s3://",
            "s3:///x",
            "s3://b//x",
            "s3://b/../x",
            "gs://b/x",
            "",
        ] {
            assert!(GraphStore::new(bad).is_err(), "{bad}");
        }
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
