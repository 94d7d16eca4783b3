//! A graph commit as a document any Lance reader can open: per node and edge type, where
//! its table is, the version the commit pins (and the Lance branch holding it, for a
//! graph branch other than `main`), its key and its columns.

use serde::{Deserialize, Serialize};
use snafu::ResultExt;
use tributary_publisher::{BranchName, CommitId, CommitRecord};
use tributary_schema::{Catalog, TypeKind};
use tributary_storage::GraphStore;

use crate::error::{CountRowsSnafu, OpenTableSnafu, Result};

/// One graph commit, table by table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Snapshot {
    pub commit: CommitId,
    pub branch: BranchName,
    /// When the commit was published (ISO 8601, UTC).
    pub time: String,
    /// Node types first, then edge types, each in schema order.
    pub tables: Vec<SnapshotTable>,
}

/// A node or an edge type's table at the snapshot's commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SnapshotTable {
    #[serde(rename = "type")]
    pub type_name: String,
    pub role: TableRole,
    /// The table's dataset URI (a path on the graph's machine, or `s3://…`).
    pub uri: String,
    /// The Lance version to open.
    pub version: u64,
    /// The Lance branch holding `version`: absent for `main`'s lineage; otherwise open
    /// the dataset on this branch (`lance.dataset(uri).checkout_version((branch,
    /// version))` or the reader's equivalent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lance_branch: Option<String>,
    /// The column holding each row's key (for an edge: its id; `src` and `dst` hold the
    /// keys of its ends).
    pub key: String,
    /// For an edge: the node types its `src` and `dst` name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Rows at this version.
    pub rows: u64,
    /// The table's columns at this version, as Lance reports them.
    pub columns: Vec<SnapshotColumn>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TableRole {
    Node,
    Edge,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SnapshotColumn {
    pub name: String,
    /// The Arrow type (`Utf8`, `Int64`, `FixedSizeList(8 x Float32)`, …).
    pub data_type: String,
    pub nullable: bool,
}

impl Snapshot {
    /// Describe `commit`: each type of `catalog` the commit pins, its table opened at the
    /// pinned version (so a snapshot that cleanup has removed is refused here, naming
    /// the table, rather than handed to a reader that would fail later).
    pub async fn describe(
        store: &GraphStore,
        commit: &CommitRecord,
        catalog: &Catalog,
    ) -> Result<Self> {
        let mut tables = Vec::new();
        let by_role = catalog
            .types
            .iter()
            .filter(|ty| ty.kind == TypeKind::Node)
            .chain(catalog.types.iter().filter(|ty| ty.kind == TypeKind::Edge));
        for ty in by_role {
            let path = ty.table_path();
            let Some(&version) = commit.tables.get(&path) else {
                continue;
            };
            let dataset = commit
                .open_table(store, &path)
                .await
                .context(OpenTableSnafu {
                    table: ty.name.clone(),
                    commit: commit.id.clone(),
                })?;
            let rows = dataset.count_rows(None).await.context(CountRowsSnafu {
                table: ty.name.clone(),
            })? as u64;
            let schema = arrow_schema::Schema::from(dataset.schema());
            let columns = schema
                .fields()
                .iter()
                .map(|field| SnapshotColumn {
                    name: field.name().clone(),
                    data_type: field.data_type().to_string(),
                    nullable: field.is_nullable(),
                })
                .collect();
            let edge = ty.edge.as_ref();
            tables.push(SnapshotTable {
                type_name: ty.name.clone(),
                role: match ty.kind {
                    TypeKind::Node => TableRole::Node,
                    TypeKind::Edge => TableRole::Edge,
                },
                uri: store.public_uri_of(&path),
                version,
                lance_branch: commit.lineage.clone(),
                key: "id".to_owned(),
                from: edge.map(|ends| ends.from.clone()),
                to: edge.map(|ends| ends.to.clone()),
                rows,
                columns,
            });
        }
        Ok(Snapshot {
            commit: commit.id.clone(),
            branch: commit.branch.clone(),
            time: chrono::DateTime::from_timestamp_micros(commit.time_micros)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
                .unwrap_or_default(),
            tables,
        })
    }
}
