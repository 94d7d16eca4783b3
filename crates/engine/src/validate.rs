//! Load-time validation that needs more than one line: duplicate keys in one request, and
//! everything checked against the snapshot (existing keys, edge endpoints, `@unique`,
//! `@card`).

use std::collections::{BTreeMap, HashMap, HashSet};

use arrow_array::{Array, RecordBatch, UInt32Array};
use ingest_core::{LineError, TypeBatch, TypeDef, TypeKind};
use lance::Dataset;
use tributary_fold::lookup::{
    display_values, existing_ids, literal_kind, lookup_values, string_column, Literal,
};
use tributary_publisher::CommitRecord;

use crate::error::Result;
use crate::graph::Graph;
use crate::load::LoadMode;

/// Within one request a key may appear once per type. Upsert keeps the last line's row
/// (the newest write wins); insert refuses duplicates.
pub(crate) fn dedupe_keys(
    batches: Vec<TypeBatch>,
    mode: LoadMode,
) -> Result<Vec<TypeBatch>, Vec<LineError>> {
    let mut errors = Vec::new();
    let mut out = Vec::with_capacity(batches.len());
    for batch in batches {
        let ids = string_column(&batch.batch, "id");
        let mut last: HashMap<&str, usize> = HashMap::with_capacity(ids.len());
        let mut first_line: HashMap<&str, u64> = HashMap::new();
        for i in 0..ids.len() {
            let id = ids.value(i);
            if let Some(previous) = last.insert(id, i) {
                if mode == LoadMode::Insert {
                    let first = *first_line.entry(id).or_insert(batch.lines[previous]);
                    errors.push(LineError {
                        line: batch.lines[i],
                        field: Some("id".to_owned()),
                        reason: format!("{} `{id}` appears again (first on line {first}); --mode insert refuses duplicates", batch.type_name),
                    });
                }
            }
        }
        if last.len() == ids.len() {
            out.push(batch);
            continue;
        }
        let mut keep: Vec<u32> = last.into_values().map(|i| i as u32).collect();
        keep.sort_unstable();
        let indices = UInt32Array::from(keep.clone());
        let columns = batch
            .batch
            .columns()
            .iter()
            .map(|c| arrow_select::take::take(c.as_ref(), &indices, None))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                vec![LineError {
                    line: 0,
                    field: None,
                    reason: format!("internal: {e}"),
                }]
            })?;
        let taken = RecordBatch::try_new(batch.batch.schema(), columns).map_err(|e| {
            vec![LineError {
                line: 0,
                field: None,
                reason: format!("internal: {e}"),
            }]
        })?;
        let lines = keep.iter().map(|&i| batch.lines[i as usize]).collect();
        out.push(TypeBatch {
            type_name: batch.type_name,
            batch: taken,
            lines,
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        errors.sort_by_key(|e| e.line);
        Err(errors)
    }
}

/// Check the request against the snapshot it will commit on. Returns every violation.
pub(crate) async fn against_snapshot(
    graph: &Graph,
    head: &CommitRecord,
    batches: &[TypeBatch],
    mode: LoadMode,
) -> Result<Vec<LineError>> {
    let mut errors = Vec::new();
    let by_type: HashMap<&str, &TypeBatch> =
        batches.iter().map(|b| (b.type_name.as_str(), b)).collect();
    for batch in batches {
        let ty = graph.type_def(&batch.type_name)?;
        let table = graph.open_table(head, ty).await?;
        let ids = string_column(&batch.batch, "id");
        if mode == LoadMode::Insert {
            let wanted: Vec<String> = ids.iter().flatten().map(str::to_owned).collect();
            let existing = existing_ids(&table, "id", &wanted, &ty.name).await?;
            for (i, id) in ids.iter().enumerate() {
                if let Some(id) = id.filter(|id| existing.contains(*id)) {
                    errors.push(line_error(
                        batch,
                        i,
                        "id",
                        format!("{} `{id}` already exists (--mode insert)", ty.name),
                    ));
                }
            }
        }
        if ty.kind == TypeKind::Edge {
            check_endpoints(graph, head, ty, batch, &by_type, &mut errors).await?;
            check_cardinality(&table, ty, batch, &mut errors).await?;
        }
        check_unique(&table, ty, batch, &mut errors).await?;
    }
    errors.sort_by_key(|e| e.line);
    Ok(errors)
}

async fn check_endpoints(
    graph: &Graph,
    head: &CommitRecord,
    ty: &TypeDef,
    batch: &TypeBatch,
    by_type: &HashMap<&str, &TypeBatch>,
    errors: &mut Vec<LineError>,
) -> Result<()> {
    let Some(ends) = &ty.edge else { return Ok(()) };
    for (column, node_type) in [("src", &ends.from), ("dst", &ends.to)] {
        let keys = string_column(&batch.batch, column);
        let in_request: HashSet<&str> = by_type
            .get(node_type.as_str())
            .map(|b| string_column(&b.batch, "id").iter().flatten().collect())
            .unwrap_or_default();
        let missing: Vec<String> = keys
            .iter()
            .flatten()
            .filter(|k| !in_request.contains(k))
            .map(str::to_owned)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if missing.is_empty() {
            continue;
        }
        let node_def = graph.node_type(node_type)?;
        let nodes = graph.open_table(head, node_def).await?;
        let found = existing_ids(&nodes, "id", &missing, node_type).await?;
        let field = if column == "src" { "from" } else { "to" };
        for (i, key) in keys.iter().enumerate() {
            if let Some(key) = key.filter(|k| !in_request.contains(k) && !found.contains(*k)) {
                errors.push(line_error(
                    batch,
                    i,
                    field,
                    format!(
                        "{node_type} `{key}` does not exist (edge {} needs it)",
                        ty.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `@card(min..max)` bounds the out-edges of each source node touched by the request.
async fn check_cardinality(
    table: &Dataset,
    ty: &TypeDef,
    batch: &TypeBatch,
    errors: &mut Vec<LineError>,
) -> Result<()> {
    let Some(card) = ty.edge.as_ref().and_then(|e| e.card.as_ref()) else {
        return Ok(());
    };
    let ids = string_column(&batch.batch, "id");
    let srcs = string_column(&batch.batch, "src");
    let mut edges: BTreeMap<String, HashSet<String>> = BTreeMap::new();
    let mut line_of_src: HashMap<String, usize> = HashMap::new();
    for i in 0..batch.batch.num_rows() {
        edges
            .entry(srcs.value(i).to_owned())
            .or_default()
            .insert(ids.value(i).to_owned());
        line_of_src.entry(srcs.value(i).to_owned()).or_insert(i);
    }
    let sources: Vec<String> = edges.keys().cloned().collect();
    for (id, src) in lookup_values(table, "src", &sources, Literal::Quoted, &ty.name).await? {
        edges.entry(src).or_default().insert(id);
    }
    for (src, set) in &edges {
        let n = set.len() as u64;
        let too_many = card.max.is_some_and(|max| n > max);
        if too_many || n < card.min {
            let row = line_of_src[src];
            let bound = match card.max {
                Some(max) => format!("{}..{max}", card.min),
                None => format!("{}..", card.min),
            };
            errors.push(line_error(
                batch,
                row,
                "from",
                format!("{} would have {n} {} edges; @card({bound})", src, ty.name),
            ));
        }
    }
    Ok(())
}

/// `@unique` values may not repeat across different keys, in the request or against the
/// snapshot (rows the request replaces do not count).
async fn check_unique(
    table: &Dataset,
    ty: &TypeDef,
    batch: &TypeBatch,
    errors: &mut Vec<LineError>,
) -> Result<()> {
    let ids = string_column(&batch.batch, "id");
    let replaced: HashSet<&str> = ids.iter().flatten().collect();
    for field in ty.fields.iter().filter(|f| f.unique) {
        let Some(column) = batch.batch.column_by_name(&field.name) else {
            continue;
        };
        let values = display_values(column.as_ref())?;
        let mut owner: HashMap<String, String> = HashMap::new();
        let mut wanted = Vec::new();
        for (i, value) in values.iter().enumerate() {
            let Some(value) = value else { continue };
            match owner.get(value) {
                Some(other) if other != ids.value(i) => errors.push(line_error(
                    batch,
                    i,
                    &field.name,
                    format!(
                        "{value:?} is not unique: {} `{other}` in this request has it too",
                        ty.name
                    ),
                )),
                Some(_) => {}
                None => {
                    owner.insert(value.clone(), ids.value(i).to_owned());
                    wanted.push(value.clone());
                }
            }
        }
        let literal = literal_kind(column.data_type());
        for (id, value) in lookup_values(table, &field.name, &wanted, literal, &ty.name).await? {
            if replaced.contains(id.as_str()) {
                continue;
            }
            if let Some(i) = values
                .iter()
                .position(|v| v.as_deref() == Some(value.as_str()))
            {
                errors.push(line_error(
                    batch,
                    i,
                    &field.name,
                    format!("{value:?} is not unique: {} `{id}` already has it", ty.name),
                ));
            }
        }
    }
    Ok(())
}

fn line_error(batch: &TypeBatch, row: usize, field: &str, reason: String) -> LineError {
    LineError {
        line: batch.lines[row],
        field: Some(field.to_owned()),
        reason,
    }
}
