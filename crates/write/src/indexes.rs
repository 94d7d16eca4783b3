//! Indexes are derived state. They are built on a table's committed version after a
//! graph write's data commit and before its publish, so the published version carries
//! them; a crash in between only delays them to the next write. The MemWAL maintains every
//! index of an enrolled table on its memtables and flushed generations (Lance's default
//! maintained set), so fresh search stays indexed over unfolded data too.

use std::collections::BTreeSet;

use lance::index::vector::VectorIndexParams;
use lance::index::DatasetIndexExt;
use lance::Dataset;
use lance_index::optimize::OptimizeOptions;
use lance_index::scalar::{InvertedIndexParams, ScalarIndexParams};
use lance_index::IndexType;
use lance_linalg::distance::DistanceType;
use snafu::ResultExt;
use tributary_schema::{FieldType, IndexKind, TypeDef, TypeKind};

use crate::error::{LanceSnafu, Result};

/// Vectors below this many rows get an exact IVF-flat index (PQ cannot be trained well on
/// a few hundred vectors); at or above it, IVF-PQ.
const PQ_MIN_ROWS: usize = 65_536;
/// Rows per IVF partition the vector indexes aim for.
const ROWS_PER_PARTITION: usize = 4_096;

/// When indexes are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexSettings {
    /// A table gets its indexes once it holds this many rows (below it a scan is as fast).
    /// Enrolled (`@stream`) tables get theirs at enrollment, whatever their size.
    pub min_rows: usize,
}

impl Default for IndexSettings {
    fn default() -> Self {
        IndexSettings { min_rows: 10_000 }
    }
}

/// The kind of a derived index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DerivedKind {
    /// BTree: key lookups, `src`/`dst` joins, `@index` on scalars.
    BTree,
    /// Inverted: `@index(fts)`.
    FullText,
    /// IVF-flat, then IVF-PQ as the table grows: `@index` on a `Vector(n)`.
    Vector { dimension: usize },
}

/// One index a type's table should carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    pub name: String,
    pub column: String,
    pub kind: DerivedKind,
}

/// What index maintenance did to one table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexReport {
    pub created: Vec<String>,
    pub optimized: Vec<String>,
}

impl IndexReport {
    pub fn changed(&self) -> bool {
        !self.created.is_empty() || !self.optimized.is_empty()
    }
}

/// The indexes of a type's table: `id` (and an edge's `src` and `dst`) plus every `@index`.
pub fn index_specs(ty: &TypeDef) -> Vec<IndexSpec> {
    let btree = |column: &str| IndexSpec {
        name: format!("{column}_idx"),
        column: column.to_owned(),
        kind: DerivedKind::BTree,
    };
    let mut specs = vec![btree("id")];
    if ty.kind == TypeKind::Edge {
        specs.push(btree("src"));
        specs.push(btree("dst"));
    }
    for field in &ty.fields {
        let Some(index) = field.index else {
            continue;
        };
        let kind = match (&field.ty, index) {
            (FieldType::Vector(dimension), _) => DerivedKind::Vector {
                dimension: *dimension,
            },
            (_, IndexKind::Fts) => DerivedKind::FullText,
            _ => DerivedKind::BTree,
        };
        specs.push(IndexSpec {
            name: format!("{}_idx", field.name),
            column: field.name.clone(),
            kind,
        });
    }
    specs
}

/// Bring `dataset`'s indexes up to date with `specs`: create the missing ones (when the
/// table holds `settings.min_rows` rows, or always with `force`), and fold fragments no
/// index covers yet into the existing ones. Leaves `dataset` at the resulting version.
pub async fn maintain_indexes(
    dataset: &mut Dataset,
    specs: &[IndexSpec],
    settings: IndexSettings,
    force: bool,
) -> Result<IndexReport> {
    let table = dataset.uri().to_owned();
    let lance = |action: &'static str| LanceSnafu {
        action,
        table: table.clone(),
    };
    let mut report = IndexReport::default();
    if specs.is_empty() {
        return Ok(report);
    }
    let rows = dataset
        .count_rows(None)
        .await
        .context(lance("count rows"))?;
    let existing = dataset
        .load_indices()
        .await
        .context(lance("load indexes"))?;
    let fragments: BTreeSet<u32> = dataset.fragments().iter().map(|f| f.id as u32).collect();
    let mut stale = Vec::new();
    let mut missing = Vec::new();
    for spec in specs {
        let segments: Vec<_> = existing.iter().filter(|i| i.name == spec.name).collect();
        if segments.is_empty() {
            missing.push(spec);
            continue;
        }
        let covers = |fragment: &u32| {
            segments.iter().any(|s| {
                s.fragment_bitmap
                    .as_ref()
                    .is_some_and(|bitmap| bitmap.contains(*fragment))
            })
        };
        if !fragments.iter().all(covers) {
            stale.push(spec.name.clone());
        }
    }
    if force || rows >= settings.min_rows {
        for spec in missing {
            create_index(dataset, spec, rows).await?;
            report.created.push(spec.name.clone());
        }
    }
    if !stale.is_empty() {
        // A new segment over the new fragments costs what they hold; merging into the
        // last segment would rewrite it whole on every write, whatever the write's size.
        dataset
            .optimize_indices(&OptimizeOptions::append().index_names(stale.clone()))
            .await
            .context(lance("optimize indexes"))?;
        // Every segment is probed on a lookup: past a few, merge them into one (a whole
        // rewrite, once every few writes).
        let crowded: Vec<String> = stale
            .iter()
            .filter(|name| {
                let segments = existing.iter().filter(|i| &i.name == *name).count();
                segments + 1 > MAX_SEGMENTS
            })
            .cloned()
            .collect();
        if !crowded.is_empty() {
            dataset
                .optimize_indices(&OptimizeOptions::merge(MAX_SEGMENTS + 1).index_names(crowded))
                .await
                .context(lance("merge index segments"))?;
        }
        report.optimized = stale;
    }
    Ok(report)
}

/// Segments an index may have before maintenance merges them into one.
const MAX_SEGMENTS: usize = 4;

async fn create_index(dataset: &mut Dataset, spec: &IndexSpec, rows: usize) -> Result<()> {
    let table = dataset.uri().to_owned();
    let columns = [spec.column.as_str()];
    let name = Some(spec.name.clone());
    let created = match spec.kind {
        DerivedKind::BTree => {
            let params = ScalarIndexParams::default();
            dataset
                .create_index(&columns, IndexType::BTree, name, &params, false)
                .await
        }
        DerivedKind::FullText => {
            let params = InvertedIndexParams::default();
            dataset
                .create_index(&columns, IndexType::Inverted, name, &params, false)
                .await
        }
        DerivedKind::Vector { dimension } => {
            let partitions = (rows / ROWS_PER_PARTITION).max(1);
            let params = if rows < PQ_MIN_ROWS {
                VectorIndexParams::ivf_flat(partitions, DistanceType::L2)
            } else {
                VectorIndexParams::ivf_pq(
                    partitions,
                    8,
                    sub_vectors(dimension),
                    DistanceType::L2,
                    50,
                )
            };
            dataset
                .create_index(&columns, IndexType::Vector, name, &params, false)
                .await
        }
    };
    created.map(|_| ()).context(LanceSnafu {
        action: "create index",
        table,
    })
}

/// PQ sub-vectors: the largest divisor of `dimension` up to 16 that leaves each sub-vector
/// at least two dimensions (one sub-vector for the smallest dimensions).
fn sub_vectors(dimension: usize) -> usize {
    (1..=16)
        .rev()
        .find(|n| dimension.is_multiple_of(*n) && dimension / n >= 2)
        .unwrap_or(1)
}
