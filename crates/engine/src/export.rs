//! Export: a commit's rows as NDJSON load lines, nodes before edges, so `init` (with the
//! graph's schema) and `load` of them elsewhere rebuild the same graph. Only published
//! rows: what is acknowledged but not folded belongs to no commit yet.

use crate::error::{Error, Result};
use crate::graph::{At, Graph};
use crate::{GraphOps, ReadOptions};

/// What an export writes: the commit every type is read at, and the types in load order
/// (node types, then edge types, each in schema order) with their row counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportPlan {
    pub commit: String,
    pub types: Vec<(String, u64)>,
}

/// Resolve `at` to one commit and choose the types to export: all, or those `only` names
/// (a name the commit does not hold is refused with the one it probably meant).
pub async fn plan_export(
    ops: &(impl GraphOps + ?Sized),
    at: &At,
    only: &[String],
) -> Result<ExportPlan> {
    let snapshot = ops.snapshot(at).await?;
    let names = || snapshot.tables.iter().map(|t| t.type_name.as_str());
    if let Some(unknown) = only
        .iter()
        .find(|name| !names().any(|n| n == name.as_str()))
    {
        return Err(Error::UnknownType {
            name: unknown.clone(),
            meant: tributary_schema::nearest_name(unknown, names()).map(str::to_owned),
        });
    }
    let types = snapshot
        .tables
        .iter()
        .filter(|table| only.is_empty() || only.contains(&table.type_name))
        .map(|table| (table.type_name.clone(), table.rows))
        .collect();
    Ok(ExportPlan {
        commit: snapshot.commit.to_string(),
        types,
    })
}

impl Graph {
    /// The rows of `type_name` at `at` as load lines (see [`tributary_schema::load_lines`]);
    /// rows written under an older schema carry what the current one gives them.
    pub async fn export_type(&self, type_name: &str, at: &At) -> Result<String> {
        // The schema as published now, which a long-running server may not hold yet: a
        // field or type added beside it must not be left out of a copy.
        let catalog = self.current_catalog().await?;
        let ty = crate::graph::type_in(&catalog, type_name)?.clone();
        let options = ReadOptions {
            at: at.clone(),
            ..Default::default()
        };
        let rows = self.read(type_name, &options).await?;
        let rows = tributary_schema::conform(&ty, &rows).map_err(|source| Error::Arrow {
            action: "bringing exported rows to the current schema",
            source,
        })?;
        let mut lines = String::new();
        tributary_schema::load_lines(&ty, &rows, &mut lines)
            .map_err(|problem| Error::Export { problem })?;
        Ok(lines)
    }
}
