//! Which publisher a graph commits through: chosen at init, recorded in the graph
//! ([`PUBLISHER`]; a graph without the record was made with the manifest publisher, the
//! first one), and refused by a process that does not know it.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use snafu::ResultExt;
use tributary_storage::layout::PUBLISHER;
use tributary_storage::GraphStore;

use crate::error::{Error, Result, StorageSnafu};
use crate::ids::{BranchName, CommitId};
use crate::manifest::ManifestCasPublisher;
use crate::record::{CommitRecord, PublishPlan, SchemaRecord, TablePath};
use crate::txn::RecordPublisher;
use crate::Publisher;

/// A graph's publisher, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PublisherKind {
    /// One compare-and-swap on the `__manifest` Lance table per commit.
    #[default]
    Manifest,
    /// One immutable record per transaction, created with put-if-absent.
    Record,
}

impl PublisherKind {
    pub const ALL: [PublisherKind; 2] = [PublisherKind::Manifest, PublisherKind::Record];

    /// The environment variable naming the publisher a new graph gets when `init` is not
    /// told one.
    pub const ENV: &'static str = "TRIBUTARY_PUBLISHER";

    /// The publisher a new graph gets when `init` is not told one: [`Self::ENV`]'s, or
    /// the manifest.
    pub fn default_for_init() -> Result<PublisherKind> {
        match std::env::var(Self::ENV) {
            Ok(name) if !name.is_empty() => name.parse(),
            _ => Ok(PublisherKind::default()),
        }
    }
}

impl fmt::Display for PublisherKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PublisherKind::Manifest => "manifest",
            PublisherKind::Record => "record",
        })
    }
}

impl FromStr for PublisherKind {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        match name {
            "manifest" => Ok(PublisherKind::Manifest),
            "record" => Ok(PublisherKind::Record),
            _ => Err(Error::UnknownPublisher {
                name: name.to_owned(),
            }),
        }
    }
}

/// What [`PUBLISHER`] holds.
#[derive(Serialize, Deserialize)]
struct Recorded {
    publisher: String,
}

/// The graph's publisher, whichever it is.
#[expect(
    clippy::large_enum_variant,
    reason = "one per open graph, never moved on a hot path"
)]
pub enum GraphPublisher {
    Manifest(Box<ManifestCasPublisher>),
    Record(RecordPublisher),
}

impl GraphPublisher {
    /// Create a new graph's commit chain with the publisher `kind`: its schema and the
    /// first commit of `main` pinning `tables`.
    pub async fn create(
        store: &GraphStore,
        kind: PublisherKind,
        schema: SchemaRecord,
        tables: BTreeMap<TablePath, u64>,
        actor: &str,
    ) -> Result<(Self, CommitRecord)> {
        if Self::exists(store).await? {
            return Err(Error::AlreadyExists {
                uri: store.location(),
            });
        }
        match kind {
            PublisherKind::Manifest => {
                let (publisher, first) =
                    ManifestCasPublisher::create(store, schema, tables, actor).await?;
                Ok((GraphPublisher::Manifest(Box::new(publisher)), first))
            }
            PublisherKind::Record => {
                // Recorded first: a process that finds records finds which publisher
                // made them.
                let recorded = Recorded {
                    publisher: kind.to_string(),
                };
                let bytes = serde_json::to_vec(&recorded).unwrap_or_default();
                if !crate::txn::create_once(store, PUBLISHER, bytes).await? {
                    return Err(Error::AlreadyExists {
                        uri: store.location(),
                    });
                }
                let (publisher, first) =
                    RecordPublisher::create(store, schema, tables, actor).await?;
                Ok((GraphPublisher::Record(publisher), first))
            }
        }
    }

    /// Open the publisher the graph at `store` was made with.
    pub async fn open(store: &GraphStore) -> Result<Self> {
        match Self::recorded(store).await? {
            Some(PublisherKind::Record) => Ok(GraphPublisher::Record(RecordPublisher::open(store))),
            Some(PublisherKind::Manifest) | None => Ok(GraphPublisher::Manifest(Box::new(
                ManifestCasPublisher::open(store).await?,
            ))),
        }
    }

    /// Whether a graph exists at `store` (a reader's check: nothing written).
    pub async fn exists(store: &GraphStore) -> Result<bool> {
        match Self::recorded(store).await? {
            // An init stopped between the record and the first transaction made none:
            // the location can take an init again.
            Some(PublisherKind::Record) => RecordPublisher::has_records(store).await,
            Some(PublisherKind::Manifest) | None => store
                .dataset_exists(crate::MANIFEST_PATH)
                .await
                .context(StorageSnafu),
        }
    }

    /// The publisher the graph records; `None` for a graph without the record (made with
    /// the manifest publisher before there was a choice), and an error for a name this
    /// version does not know.
    async fn recorded(store: &GraphStore) -> Result<Option<PublisherKind>> {
        let Some(bytes) = store.get(PUBLISHER).await.context(StorageSnafu)? else {
            return Ok(None);
        };
        let recorded: Recorded = serde_json::from_slice(&bytes).map_err(|e| Error::CorruptRow {
            key: PUBLISHER.to_owned(),
            source: e,
        })?;
        recorded.publisher.parse().map(Some)
    }

    pub fn kind(&self) -> PublisherKind {
        match self {
            GraphPublisher::Manifest(_) => PublisherKind::Manifest,
            GraphPublisher::Record(_) => PublisherKind::Record,
        }
    }

    /// The manifest publisher, when it is the graph's.
    pub fn as_manifest(&self) -> Option<&ManifestCasPublisher> {
        match self {
            GraphPublisher::Manifest(publisher) => Some(publisher),
            GraphPublisher::Record(_) => None,
        }
    }

    /// The record publisher, when it is the graph's.
    pub fn as_records(&self) -> Option<&RecordPublisher> {
        match self {
            GraphPublisher::Record(publisher) => Some(publisher),
            GraphPublisher::Manifest(_) => None,
        }
    }

    fn inner(&self) -> &dyn Publisher {
        match self {
            GraphPublisher::Manifest(publisher) => publisher.as_ref(),
            GraphPublisher::Record(publisher) => publisher,
        }
    }
}

#[async_trait]
impl Publisher for GraphPublisher {
    async fn publish(&self, plan: PublishPlan) -> Result<CommitRecord> {
        self.inner().publish(plan).await
    }

    async fn head(&self, branch: &BranchName) -> Result<CommitRecord> {
        self.inner().head(branch).await
    }

    async fn commit(&self, id: &CommitId) -> Result<CommitRecord> {
        self.inner().commit(id).await
    }

    async fn commit_by_key(&self, branch: &BranchName, key: &str) -> Result<Option<CommitRecord>> {
        self.inner().commit_by_key(branch, key).await
    }

    async fn log(&self, branch: &BranchName, limit: usize) -> Result<Vec<CommitRecord>> {
        self.inner().log(branch, limit).await
    }

    async fn branches(&self) -> Result<Vec<CommitRecord>> {
        self.inner().branches().await
    }

    async fn delete_branch(&self, branch: &BranchName, expected_head: &CommitId) -> Result<()> {
        self.inner().delete_branch(branch, expected_head).await
    }

    async fn schema(&self) -> Result<SchemaRecord> {
        self.inner().schema().await
    }
}
