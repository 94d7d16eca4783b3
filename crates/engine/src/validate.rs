//! Load-time validation that needs more than one line: duplicate keys in one request, and
//! everything checked against the snapshot (existing keys, edge endpoints, `@unique`,
//! `@card`).

use std::collections::{BTreeMap, HashMap, HashSet};

use arrow_array::{Array, RecordBatch, StringArray, UInt32Array};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::DataType;
use ingest_core::{LineError, TypeBatch, TypeDef, TypeKind};
use lance::Dataset;
use tributary_publisher::CommitRecord;

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::load::LoadMode;

/// How many values one `IN (…)` filter carries.
const IN_LIST_CHUNK: usize = 512;

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

pub(crate) fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> &'a StringArray {
    // `id`, `src` and `dst` are non-null Utf8 in every table schema the catalog builds.
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .unwrap_or_else(|| panic!("column `{name}` is Utf8 in every table"))
}

fn display_values(column: &dyn Array) -> Result<Vec<Option<String>>> {
    let formatter = ArrayFormatter::try_new(column, &FormatOptions::default()).map_err(|e| {
        Error::InvalidRequest {
            what: "unique value".into(),
            message: e.to_string(),
        }
    })?;
    Ok((0..column.len())
        .map(|i| column.is_valid(i).then(|| formatter.value(i).to_string()))
        .collect())
}

#[derive(Clone, Copy)]
enum Literal {
    Quoted,
    Bare,
}

fn literal_kind(data_type: &DataType) -> Literal {
    if data_type.is_numeric() {
        Literal::Bare
    } else {
        Literal::Quoted
    }
}

pub(crate) fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// Which of `keys` exist in `column`.
async fn existing_ids(
    table: &Dataset,
    column: &str,
    keys: &[String],
    table_name: &str,
) -> Result<HashSet<String>> {
    Ok(
        lookup_values(table, column, keys, Literal::Quoted, table_name)
            .await?
            .into_iter()
            .map(|(_, value)| value)
            .collect(),
    )
}

/// `(id, value as text)` of the rows whose `column` is one of `values`.
async fn lookup_values(
    table: &Dataset,
    column: &str,
    values: &[String],
    literal: Literal,
    table_name: &str,
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if values.is_empty()
        || table
            .count_rows(None)
            .await
            .map_err(|source| lance_error(table_name, source))?
            == 0
    {
        return Ok(out);
    }
    for chunk in values.chunks(IN_LIST_CHUNK) {
        let list: Vec<String> = chunk
            .iter()
            .map(|v| match literal {
                Literal::Quoted => quote(v),
                Literal::Bare => v.clone(),
            })
            .collect();
        let mut scan = table.scan();
        scan.filter(&format!("`{column}` IN ({})", list.join(", ")))
            .and_then(|s| {
                if column == "id" {
                    s.project(&["id"])
                } else {
                    s.project(&["id", column])
                }
            })
            .map_err(|source| lance_error(table_name, source))?;
        let batch = scan
            .try_into_batch()
            .await
            .map_err(|source| lance_error(table_name, source))?;
        let ids = string_column(&batch, "id");
        let found = match batch.column_by_name(column) {
            Some(c) => display_values(c.as_ref())?,
            None => continue,
        };
        for (i, value) in found.into_iter().enumerate() {
            if let Some(value) = value {
                out.push((ids.value(i).to_owned(), value));
            }
        }
    }
    Ok(out)
}

fn lance_error(table: &str, source: lance::Error) -> Error {
    Error::Lance {
        action: "validate".to_owned(),
        table: table.to_owned(),
        source,
    }
}
