//! `Graph`: one graph root, its catalog and its commit chain.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_schema::{Field, Schema, SchemaRef};
use lance::dataset::WriteMode;
use lance::datatypes::LANCE_UNENFORCED_PRIMARY_KEY;
use lance::Dataset;
use snafu::ResultExt;
use tokio::sync::{Mutex, OwnedMutexGuard};
use tributary_publisher::{
    BranchName, CommitId, CommitRecord, GraphPublisher, Publisher, PublisherKind, SchemaRecord,
};
use tributary_schema::{Catalog, TypeDef, TypeKind};
use tributary_storage::{GraphStore, OpCounter, StoreOptions};
use tributary_write::Lease;

use crate::error::{
    InvalidBranchSnafu, LanceSnafu, PublishSnafu, Result, SchemaSnafu, StorageSnafu, WrongKindSnafu,
};
use crate::streaming::{FoldTriggers, Streaming};

const INIT_ACTOR: &str = "tributary:init";

/// Which commit a read or write starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// The head of a branch.
    Branch(BranchName),
    /// One commit, by id.
    Commit(CommitId),
}

impl Default for At {
    fn default() -> Self {
        At::Branch(BranchName::main())
    }
}

impl At {
    /// The head of the branch named `name` (checked: see [`BranchName`]).
    pub fn branch(name: &str) -> Result<At> {
        branch(name).map(At::Branch)
    }
}

/// The branch named `name`, or an invalid-input error that says what a name may hold.
pub fn branch(name: &str) -> Result<BranchName> {
    BranchName::new(name).context(InvalidBranchSnafu)
}

/// An open graph. Cheap to share behind an `Arc`; writes to one branch are serialized.
pub struct Graph {
    pub(crate) store: GraphStore,
    /// The schema this process writes and reads with, and its version. Replaced when a
    /// write turn finds the head at a newer schema (another process applied one); each
    /// operation takes it once, at its start.
    catalog: std::sync::RwLock<(Arc<Catalog>, u32)>,
    pub(crate) publisher: GraphPublisher,
    /// One write queue per branch: this process's loads and folds of a branch run one at a
    /// time, and each, once at the front, takes the branch's lease across processes.
    write_queues: Mutex<HashMap<BranchName, Arc<Mutex<()>>>>,
    /// Whether this process's first write turn of `main` has looked for a schema change
    /// an older version left (it recorded it apart from the intents).
    pub(crate) older_schema_change_checked: std::sync::atomic::AtomicBool,
    pub(crate) settings: GraphSettings,
    pub(crate) streaming: Streaming,
}

/// Tunables of an open graph. The writer settings are recorded in each table's MemWAL
/// index when the table is enrolled; from then on every process uses the recorded ones.
#[derive(Debug, Clone, Default)]
pub struct GraphSettings {
    pub writer: tributary_memwal_adapter::WriterSettings,
    /// How folds treat rows that fail fold-time validation, and their chunk size.
    pub fold: tributary_write::FoldSettings,
    /// When the background folder (see [`Graph::start_folder`]) folds.
    pub triggers: FoldTriggers,
    /// When tables get their derived indexes (`id`, `src`/`dst`, every `@index`).
    pub indexes: tributary_write::IndexSettings,
    /// The shards this process writes, by number (`@stream(shards = N)` numbers them
    /// 0..N; an unsharded type has shard 0); `None`: all. A send with a row of another
    /// shard is refused whole, naming the shard, so several processes can each own a
    /// share of the shards without fencing each other. Folds of any process still claim
    /// any shard to fold what it acknowledged.
    pub owned_shards: Option<std::collections::BTreeSet<u32>>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("root", &self.store.location())
            .finish_non_exhaustive()
    }
}

impl Graph {
    /// Create a graph at `uri` (a local path, `file://` or `s3://bucket/prefix` URI) with
    /// the schema `source`.
    pub async fn init(uri: &str, source: &str) -> Result<Graph> {
        Graph::builder(uri).init(source).await
    }

    /// Open the graph at `uri`. Opening writes nothing: writes an earlier process left
    /// half-done are resolved by the next load or fold (or [`Graph::recover`]). On S3 the
    /// first write of a process (or `init`) first creates and deletes one probe object, to
    /// refuse a store that does not honour conditional PUT.
    pub async fn open(uri: &str) -> Result<Graph> {
        Graph::builder(uri).open().await
    }

    /// Open or create the graph at `uri` with settings, a counted store or a store of
    /// the caller's: `Graph::builder(uri).settings(settings).open()`.
    pub fn builder(uri: &str) -> GraphBuilder {
        GraphBuilder {
            uri: uri.to_owned(),
            store: None,
            options: StoreOptions::default(),
            settings: GraphSettings::default(),
            publisher: None,
        }
    }

    /// [`Graph::builder`] over a store the caller configured (or wraps).
    pub fn builder_on(store: GraphStore) -> GraphBuilder {
        GraphBuilder {
            uri: store.location(),
            store: Some(store),
            options: StoreOptions::default(),
            settings: GraphSettings::default(),
            publisher: None,
        }
    }

    fn assemble(
        store: GraphStore,
        catalog: Catalog,
        version: u32,
        publisher: GraphPublisher,
        settings: GraphSettings,
    ) -> Graph {
        Graph {
            store,
            catalog: std::sync::RwLock::new((Arc::new(catalog), version)),
            publisher,
            write_queues: Mutex::new(HashMap::new()),
            older_schema_change_checked: std::sync::atomic::AtomicBool::new(false),
            settings,
            streaming: Streaming::default(),
        }
    }

    /// The schema as this process knows it now.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog_and_version().0
    }

    pub(crate) fn catalog_and_version(&self) -> (Arc<Catalog>, u32) {
        let held = self.catalog.read().unwrap_or_else(|e| e.into_inner());
        (held.0.clone(), held.1)
    }

    /// Take `catalog` at `version` as the schema (a newer one than held).
    pub(crate) fn set_catalog(&self, catalog: Arc<Catalog>, version: u32) {
        let mut held = self.catalog.write().unwrap_or_else(|e| e.into_inner());
        if version > held.1 {
            *held = (catalog, version);
        }
    }

    pub fn store(&self) -> &GraphStore {
        &self.store
    }

    /// The publisher this graph commits through.
    pub fn publisher_kind(&self) -> PublisherKind {
        self.publisher.kind()
    }

    /// The publisher, for callers that need the commit chain directly.
    pub fn publisher(&self) -> &GraphPublisher {
        &self.publisher
    }

    /// Where this graph's writes commit, for the shared commit protocol.
    pub(crate) fn target<'a>(&'a self, catalog: &'a Catalog) -> tributary_write::GraphTarget<'a> {
        tributary_write::GraphTarget {
            store: &self.store,
            publisher: &self.publisher,
            catalog,
            indexes: self.settings.indexes,
            lease: None,
        }
    }

    /// [`Graph::target`] for a write in `turn`, with the turn's schema: it confirms the
    /// turn's lease before its first table commit.
    pub(crate) fn target_in<'a>(&'a self, turn: &'a WriteTurn) -> tributary_write::GraphTarget<'a> {
        tributary_write::GraphTarget {
            lease: Some(&turn.lease),
            ..self.target(&turn.catalog)
        }
    }

    /// The schema's source text.
    pub fn schema_source(&self) -> String {
        self.catalog().source.clone()
    }

    /// Resolve a branch head or commit id to the commit that pins exact table versions.
    pub async fn snapshot(&self, at: &At) -> Result<CommitRecord> {
        match at {
            At::Branch(branch) => self.publisher.head(branch).await.context(PublishSnafu),
            At::Commit(id) => self.publisher.commit(id).await.context(PublishSnafu),
        }
    }

    /// Commits of `branch`, newest first.
    pub async fn log(&self, branch: &str, limit: usize) -> Result<Vec<CommitRecord>> {
        self.publisher
            .log(&self::branch(branch)?, limit)
            .await
            .context(PublishSnafu)
    }

    pub(crate) fn type_def(&self, name: &str) -> Result<TypeDef> {
        type_in(&self.catalog(), name).cloned()
    }

    pub(crate) fn node_type(&self, name: &str) -> Result<TypeDef> {
        let ty = self.type_def(name)?;
        if ty.kind != TypeKind::Node {
            return WrongKindSnafu {
                name,
                expected: "node type",
                actual: "edge type",
            }
            .fail();
        }
        Ok(ty)
    }

    pub(crate) fn edge_type(&self, name: &str) -> Result<TypeDef> {
        let ty = self.type_def(name)?;
        if ty.kind != TypeKind::Edge {
            return WrongKindSnafu {
                name,
                expected: "edge type",
                actual: "node type",
            }
            .fail();
        }
        Ok(ty)
    }

    /// The lineage `branch` writes its tables on: `None` for `main`, its head's otherwise.
    pub(crate) async fn lineage_of(&self, branch: &BranchName) -> Result<Option<String>> {
        if branch.is_main() {
            return Ok(None);
        }
        Ok(self
            .publisher
            .head(branch)
            .await
            .context(PublishSnafu)?
            .lineage)
    }

    /// Open a type's table at the version `snapshot` pins.
    pub(crate) async fn open_table(
        &self,
        snapshot: &CommitRecord,
        ty: &TypeDef,
    ) -> Result<Dataset> {
        snapshot
            .open_table(&self.store, &ty.table_path())
            .await
            .context(PublishSnafu)
    }

    /// The turn to write `branch`: its queue in this process, then its lease across
    /// processes (see [`tributary_write::lease`]), then the branch's intents resolved
    /// (the pipeline's first step; see [`tributary_write::commit`]). Hold it from before
    /// the write reads the head until after it publishes, and [`WriteTurn::end`] it.
    pub(crate) async fn write_turn(&self, branch: &BranchName) -> Result<WriteTurn> {
        let queue = {
            let mut queues = self.write_queues.lock().await;
            queues.entry(branch.clone()).or_default().clone()
        };
        let queued = queue.lock_owned().await;
        // Every graph write of this process starts here (or at a writer's open): a store
        // that cannot arbitrate racing commits is refused before the first.
        self.store
            .check_conditional_put()
            .await
            .context(StorageSnafu)?;
        let lease = Lease::branch(&self.store, branch).await?;
        let catalog = self.current_catalog().await?;
        let mut turn = WriteTurn {
            lease,
            catalog,
            recovered: Vec::new(),
            _queued: queued,
        };
        // Every write of the branch starts from a settled head: what earlier writes left
        // is finished or dropped first.
        let settled = async {
            if branch.is_main() {
                self.finish_older_schema_change(&mut turn).await?;
            }
            self.resolve_intents(&mut turn, branch).await
        }
        .await;
        match settled {
            Ok(recovered) => {
                turn.recovered = recovered;
                Ok(turn)
            }
            Err(error) => {
                turn.end().await;
                Err(error)
            }
        }
    }

    /// The manifest's schema, when it is newer than this process's (which it replaces).
    pub(crate) async fn newer_catalog(&self) -> Result<Option<Arc<Catalog>>> {
        let before = self.catalog_and_version().1;
        let catalog = self.current_catalog().await?;
        Ok((self.catalog_and_version().1 != before).then_some(catalog))
    }

    /// The schema as the manifest holds it now: a write turn writes with it. A newer one
    /// than this process held (another process applied a change) replaces it, and this
    /// process's warm writers, opened on the tables' older schema, are closed (what they
    /// acknowledged is flushed; the next send reopens them on the new one).
    pub(crate) async fn current_catalog(&self) -> Result<Arc<Catalog>> {
        let record = self.publisher.schema().await.context(PublishSnafu)?;
        let (held, version) = self.catalog_and_version();
        if record.version <= version {
            return Ok(held);
        }
        let catalog = Arc::new(Catalog::parse(&record.source).context(SchemaSnafu)?);
        tracing::info!(
            from = version,
            to = record.version,
            "the graph's schema changed; taking the new one"
        );
        self.set_catalog(catalog.clone(), record.version);
        self.close_writers().await?;
        Ok(catalog)
    }
}

/// One writer's turn on a branch (see [`Graph::write_turn`]). Dropped without
/// [`WriteTurn::end`] (a cancelled write), its lease is released in the background.
pub(crate) struct WriteTurn {
    lease: Lease,
    /// The schema current when the turn began.
    pub(crate) catalog: Arc<Catalog>,
    /// What resolving the branch's intents did as the turn began.
    pub(crate) recovered: Vec<tributary_write::Recovered>,
    _queued: OwnedMutexGuard<()>,
}

impl WriteTurn {
    /// Whether this process still holds the branch's lease (a holder stalled past the
    /// grace may have been taken over).
    pub(crate) async fn confirm(&self) -> Result<bool> {
        Ok(self.lease.confirm().await?)
    }

    /// Hand the branch on: the lease first, then this process's queue.
    pub(crate) async fn end(self) {
        self.lease.release().await;
    }
}

/// How to open or create a graph (see [`Graph::builder`]). Settings apply from the start:
/// to every write, fold and enrollment the graph makes.
#[derive(Debug, Clone)]
pub struct GraphBuilder {
    uri: String,
    store: Option<GraphStore>,
    options: StoreOptions,
    settings: GraphSettings,
    /// `None`: [`PublisherKind::default_for_init`].
    publisher: Option<PublisherKind>,
}

impl GraphBuilder {
    /// The publisher a graph made by [`GraphBuilder::init`] commits through (by default
    /// `TRIBUTARY_PUBLISHER`'s, or the manifest); an existing graph opens with the one it
    /// records.
    pub fn publisher(mut self, kind: PublisherKind) -> GraphBuilder {
        self.publisher = Some(kind);
        self
    }

    pub fn settings(mut self, settings: GraphSettings) -> GraphBuilder {
        self.settings = settings;
        self
    }

    /// Count every object-store operation in `counter` (cost tests and benchmarks).
    pub fn counted(mut self, counter: OpCounter) -> GraphBuilder {
        self.options.counter = Some(counter);
        self
    }

    /// Object-store settings (`aws_endpoint`, `aws_region`, ...; on S3 the `AWS_*`
    /// environment fills what is not given) and wrappers.
    pub fn store_options(mut self, options: StoreOptions) -> GraphBuilder {
        let counter = self.options.counter.take();
        self.options = options;
        self.options.counter = self.options.counter.take().or(counter);
        self
    }

    fn into_store(self) -> Result<(GraphStore, GraphSettings)> {
        let store = match self.store {
            Some(store) => store,
            None => GraphStore::open(&self.uri, self.options).context(StorageSnafu)?,
        };
        Ok((store, self.settings))
    }

    /// Whether a graph exists there (a reader's check: no probe, nothing written).
    pub async fn exists(&self) -> Result<bool> {
        let store = match &self.store {
            Some(store) => store.clone(),
            None => GraphStore::open(&self.uri, self.options.clone()).context(StorageSnafu)?,
        };
        GraphPublisher::exists(&store).await.context(PublishSnafu)
    }

    /// Open the existing graph.
    pub async fn open(self) -> Result<Graph> {
        // Tests hold an open here to show it holds up nothing else. A paused failpoint
        // blocks its thread: the runtime is told, so the thread's other tasks move on.
        #[cfg(feature = "failpoints")]
        if fail::list().iter().any(|(name, _)| name == "graph::open") {
            tokio::task::block_in_place(|| fail::fail_point!("graph::open"));
        }
        let (store, settings) = self.into_store()?;
        let publisher = GraphPublisher::open(&store).await.context(PublishSnafu)?;
        let schema = publisher.schema().await.context(PublishSnafu)?;
        let catalog = Catalog::parse(&schema.source).context(SchemaSnafu)?;
        Ok(Graph::assemble(
            store,
            catalog,
            schema.version,
            publisher,
            settings,
        ))
    }

    /// Create the graph with the schema `source`; refused if one exists there.
    pub async fn init(self, source: &str) -> Result<Graph> {
        let kind = match self.publisher {
            Some(kind) => kind,
            None => PublisherKind::default_for_init().context(PublishSnafu)?,
        };
        let (store, settings) = self.into_store()?;
        let catalog = Catalog::parse(source).context(SchemaSnafu)?;
        store.check_conditional_put().await.context(StorageSnafu)?;
        if GraphPublisher::exists(&store).await.context(PublishSnafu)? {
            return Err(tributary_publisher::Error::AlreadyExists {
                uri: store.location(),
            })
            .context(PublishSnafu);
        }
        // Tables left by an init that crashed before its manifest existed are overwritten:
        // without a manifest nothing of them was ever visible.
        let mut tables = BTreeMap::new();
        for ty in &catalog.types {
            let path = ty.table_path();
            let uri = store.uri_of(&path);
            let reader = arrow_array::RecordBatchIterator::new(Vec::new(), table_schema(ty));
            let dataset = Dataset::write(
                reader,
                uri.as_str(),
                Some(store.write_params(WriteMode::Overwrite)),
            )
            .await
            .context(LanceSnafu {
                action: "create table",
                table: path.clone(),
            })?;
            tables.insert(path, dataset.version().version);
        }
        let schema = SchemaRecord {
            version: 1,
            source: source.to_owned(),
        };
        let (publisher, _first) = GraphPublisher::create(&store, kind, schema, tables, INIT_ACTOR)
            .await
            .context(PublishSnafu)?;
        Ok(Graph::assemble(store, catalog, 1, publisher, settings))
    }
}

/// `name`'s definition in `catalog`, or an error naming the type it probably meant.
/// The ids of the graphs directly under `root` (a directory or an `s3://` prefix): the
/// folders that hold one, sorted. Folders that hold none are not listed.
pub async fn graphs_under(root: &str, options: StoreOptions) -> Result<Vec<String>> {
    let store = GraphStore::open(root, options.clone()).context(StorageSnafu)?;
    let mut graphs = Vec::new();
    for folder in store.folders("").await.context(StorageSnafu)? {
        let uri = format!("{}/{folder}", root.trim_end_matches('/'));
        if Graph::builder(&uri)
            .store_options(options.clone())
            .exists()
            .await?
        {
            graphs.push(folder);
        }
    }
    Ok(graphs)
}

pub(crate) fn type_in<'c>(catalog: &'c Catalog, name: &str) -> Result<&'c TypeDef> {
    catalog.get(name).ok_or_else(|| crate::Error::UnknownType {
        name: name.to_owned(),
        meant: tributary_schema::nearest_name(name, catalog.types.iter().map(|t| t.name.as_str()))
            .map(str::to_owned),
    })
}

/// The Lance schema of a type's table: the catalog's Arrow schema with `id` marked as
/// Lance's unenforced primary key (the MemWAL and merge-insert key on it).
pub(crate) fn table_schema(ty: &TypeDef) -> SchemaRef {
    let schema = ty.arrow_schema();
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|field| {
            if field.name() == "id" {
                let mut metadata = field.metadata().clone();
                metadata.insert(LANCE_UNENFORCED_PRIMARY_KEY.to_owned(), "true".to_owned());
                field.as_ref().clone().with_metadata(metadata)
            } else {
                field.as_ref().clone()
            }
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}
