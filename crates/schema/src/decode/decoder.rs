//! The line decoder: envelope → type → validated row → column builders.

use std::borrow::Cow;
use std::collections::HashMap;

use super::table::{KeyValue, StagedRow, TableBuilder};
use super::{Decoded, LineError, TypeDeletes};
use crate::schema::json::{quote_name, Json};
use crate::schema::value::{convert_field, Cell};
use crate::schema::{Catalog, TypeDef, TypeKind};

/// Unknown-type errors list the declared types when there are at most this many.
const MAX_LISTED_TYPES: usize = 12;

const ENVELOPE_KEYS: &str = "type, edge, from, to, from_type, to_type, data, patch, delete, key";

/// Decodes NDJSON lines against a catalog into per-type Arrow builders.
pub struct Decoder<'c> {
    catalog: &'c Catalog,
    /// One builder per catalog type, made at the type's first row: a send of one row
    /// of one type builds nothing for the others.
    tables: Vec<Option<TableBuilder<'c>>>,
    table_by_name: HashMap<&'c str, usize>,
    rejects: Vec<LineError>,
    buffered_rows: usize,
    /// Per catalog type: the ids its delete lines name, and their lines.
    deletes: Vec<(Vec<String>, Vec<u64>)>,
    /// Per catalog type: its patch lines, made at the type's first patch.
    patches: Vec<Option<TableBuilder<'c>>>,
}

/// The type and row id a valid line writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineTarget {
    pub type_name: String,
    pub id: String,
}

/// A valid line: a row to write, a patch of one, or a key to delete.
enum Staged<'l> {
    Row(StagedRow<'l>),
    Patch(StagedRow<'l>),
    Delete { table: usize, id: String },
}

/// Why a line is rejected, before the line number is attached.
struct Reject {
    field: Option<String>,
    reason: String,
}

impl Reject {
    fn line(reason: impl Into<String>) -> Reject {
        Reject {
            field: None,
            reason: reason.into(),
        }
    }

    fn field(field: &str, reason: impl Into<String>) -> Reject {
        Reject {
            field: Some(field.to_owned()),
            reason: reason.into(),
        }
    }
}

/// The top-level members of a line, each still raw.
#[derive(Default)]
struct Envelope<'a> {
    node_type: Option<Json<'a>>,
    edge_type: Option<Json<'a>>,
    from: Option<Json<'a>>,
    to: Option<Json<'a>>,
    from_type: Option<Json<'a>>,
    to_type: Option<Json<'a>>,
    data: Option<Json<'a>>,
    patch: Option<Json<'a>>,
    delete: Option<Json<'a>>,
    key: Option<Json<'a>>,
}

impl<'a> Envelope<'a> {
    fn from_members(members: Vec<(Cow<'a, str>, Json<'a>)>) -> Result<Envelope<'a>, Reject> {
        let mut envelope = Envelope::default();
        for (key, value) in members {
            let slot = match key.as_ref() {
                "type" => &mut envelope.node_type,
                "edge" => &mut envelope.edge_type,
                "from" => &mut envelope.from,
                "to" => &mut envelope.to,
                "from_type" => &mut envelope.from_type,
                "to_type" => &mut envelope.to_type,
                "data" => &mut envelope.data,
                "patch" => &mut envelope.patch,
                "delete" => &mut envelope.delete,
                "key" => &mut envelope.key,
                _ => {
                    return Err(Reject::line(format!(
                        "unknown key {} (expected {ENVELOPE_KEYS})",
                        quote_name(&key)
                    )))
                }
            };
            if slot.is_some() {
                return Err(Reject::line(format!(
                    "key {} appears twice",
                    quote_name(&key)
                )));
            }
            *slot = Some(value);
        }
        Ok(envelope)
    }
}

impl<'c> Decoder<'c> {
    pub fn new(catalog: &'c Catalog) -> Self {
        let tables = catalog.types.iter().map(|_| None).collect();
        let table_by_name = catalog
            .types
            .iter()
            .enumerate()
            .map(|(index, ty)| (ty.name.as_str(), index))
            .collect();
        Decoder {
            catalog,
            tables,
            table_by_name,
            rejects: Vec::new(),
            buffered_rows: 0,
            deletes: catalog.types.iter().map(|_| Default::default()).collect(),
            patches: catalog.types.iter().map(|_| None).collect(),
        }
    }

    /// Decode one line (1-based `line_no`, chosen by the caller). A valid line becomes one
    /// row; an invalid line becomes one `LineError` and appends nothing. Blank lines are
    /// skipped.
    pub fn push_line(&mut self, line_no: u64, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        match self.stage(line) {
            Ok(Staged::Row(row)) => {
                if let Some(table) = self.tables[row.table].as_mut() {
                    table.append(line_no, row);
                }
                self.buffered_rows += 1;
            }
            Ok(Staged::Patch(row)) => {
                let def = &self.catalog.types[row.table];
                self.patches[row.table]
                    .get_or_insert_with(|| TableBuilder::for_patches(def))
                    .append(line_no, row);
                self.buffered_rows += 1;
            }
            Ok(Staged::Delete { table, id }) => {
                let (ids, lines) = &mut self.deletes[table];
                ids.push(id);
                lines.push(line_no);
                self.buffered_rows += 1;
            }
            Err(Reject { field, reason }) => self.rejects.push(LineError {
                line: line_no,
                field,
                reason,
            }),
        }
    }

    /// The type and row id a line writes (as a row, a patch or a delete), validated as
    /// `push_line` validates it but buffering nothing: lets a client send each line to
    /// the process that owns its key. `Ok(None)` for a blank line.
    pub fn target_of(&mut self, line_no: u64, line: &str) -> Result<Option<LineTarget>, LineError> {
        if line.trim().is_empty() {
            return Ok(None);
        }
        let (table, id) = match self.stage(line) {
            Ok(Staged::Row(row) | Staged::Patch(row)) => {
                let id = match (&row.key, &row.endpoints) {
                    (Some(key), _) => key.id(),
                    (None, Some((src, dst))) => super::edge_id(src, dst),
                    (None, None) => String::new(),
                };
                (row.table, id)
            }
            Ok(Staged::Delete { table, id }) => (table, id),
            Err(Reject { field, reason }) => {
                return Err(LineError {
                    line: line_no,
                    field,
                    reason,
                })
            }
        };
        Ok(Some(LineTarget {
            type_name: self.catalog.types[table].name.clone(),
            id,
        }))
    }

    /// Number of valid rows buffered so far (all types).
    pub fn buffered_rows(&self) -> usize {
        self.buffered_rows
    }

    /// Number of rejected lines buffered so far.
    pub fn buffered_rejects(&self) -> usize {
        self.rejects.len()
    }

    /// Take everything decoded so far; the decoder is left empty and reusable.
    pub fn finish(&mut self) -> Decoded {
        let batches = self
            .tables
            .iter_mut()
            .flatten()
            .filter(|table| table.row_count() > 0)
            .map(TableBuilder::finish)
            .collect();
        let deletes = self
            .deletes
            .iter_mut()
            .zip(&self.catalog.types)
            .filter(|((ids, _), _)| !ids.is_empty())
            .map(|((ids, lines), ty)| TypeDeletes {
                type_name: ty.name.clone(),
                ids: std::mem::take(ids),
                lines: std::mem::take(lines),
            })
            .collect();
        let patches = self
            .patches
            .iter_mut()
            .flatten()
            .filter(|table| table.row_count() > 0)
            .map(TableBuilder::finish_patches)
            .collect();
        let mut rejects = std::mem::take(&mut self.rejects);
        // Callers may push lines out of order (e.g. several readers); report in line order.
        rejects.sort_by_key(|reject| reject.line);
        self.buffered_rows = 0;
        Decoded {
            batches,
            deletes,
            patches,
            rejects,
        }
    }

    /// Validate and convert a whole line; appends nothing (it may make the type's builder).
    fn stage<'l>(&mut self, line: &'l str) -> Result<Staged<'l>, Reject> {
        let members = match Json::parse(line) {
            Ok(Json::Object(members)) => members,
            Ok(other) => {
                return Err(Reject::line(format!(
                    "expected a JSON object, found {}",
                    other.describe()
                )))
            }
            Err(error) => {
                return Err(Reject::line(format!(
                    "malformed JSON: {}",
                    json_error(&error)
                )))
            }
        };
        let envelope = Envelope::from_members(members)?;
        if envelope.delete.is_some() {
            return self.stage_delete(&envelope);
        }
        if envelope.key.is_some() {
            return Err(Reject::line(
                "\"key\" belongs to a delete line ({\"delete\": TYPE, \"key\": KEY}); a row's key is a field of its \"data\"",
            ));
        }
        let (table_index, def) = self.resolve_type(&envelope)?;
        let patching = envelope.patch.is_some();
        if patching && envelope.data.is_some() {
            return Err(Reject::line(
                "a line holds \"data\" (a whole row) or \"patch\" (its key and the fields to set), not both",
            ));
        }

        let endpoints = match def.kind {
            TypeKind::Edge => Some(check_endpoints(def, &envelope)?),
            TypeKind::Node => {
                let edge_only = [
                    ("from", &envelope.from),
                    ("to", &envelope.to),
                    ("from_type", &envelope.from_type),
                    ("to_type", &envelope.to_type),
                ];
                if let Some((key, _)) = edge_only.iter().find(|(_, value)| value.is_some()) {
                    return Err(Reject::line(format!(
                        "\"{key}\" only applies to edges, but {} is a node type",
                        def.name
                    )));
                }
                None
            }
        };

        let table = self.tables[table_index].get_or_insert_with(|| TableBuilder::new(def));
        let cells = if patching {
            stage_patch_fields(def, envelope.patch)?
        } else {
            stage_fields(table, envelope.data)?
        };
        let key = match table.key_index {
            Some(index) => {
                let key_field = &def.fields[index];
                let key = cells[index].as_ref().and_then(KeyValue::from_cell);
                match key {
                    Some(KeyValue::Text(text)) if text.is_empty() => {
                        return Err(Reject::field(&key_field.name, "key must not be empty"))
                    }
                    Some(key) => Some(key),
                    None if patching => {
                        return Err(Reject::field(
                            &key_field.name,
                            "a patch names its row by the key field, which is missing or null",
                        ))
                    }
                    None => return Err(Reject::field(&key_field.name, "key is missing or null")),
                }
            }
            None if def.kind == TypeKind::Node => {
                return Err(Reject::line(format!(
                    "node type {} declares no @key field",
                    def.name
                )))
            }
            None => None,
        };
        let row = StagedRow {
            table: table_index,
            key,
            endpoints,
            cells,
        };
        Ok(if patching {
            Staged::Patch(row)
        } else {
            Staged::Row(row)
        })
    }

    /// A delete line: `{"delete": T, "key": K}` for a node type or an edge type with its
    /// own `@key`, `{"delete": E, "from": A, "to": B}` for an edge type without one.
    fn stage_delete<'l>(&self, envelope: &Envelope<'l>) -> Result<Staged<'l>, Reject> {
        let others = [
            ("type", &envelope.node_type),
            ("edge", &envelope.edge_type),
            ("data", &envelope.data),
            ("patch", &envelope.patch),
            ("from_type", &envelope.from_type),
            ("to_type", &envelope.to_type),
        ];
        if let Some((member, _)) = others.iter().find(|(_, value)| value.is_some()) {
            return Err(Reject::line(format!(
                "a delete line holds only \"delete\" and \"key\" (or \"from\" and \"to\" for an edge), not \"{member}\""
            )));
        }
        let Some(Json::Str(name)) = &envelope.delete else {
            return Err(Reject::line(format!(
                "\"delete\" must be a type name string, found {}",
                envelope
                    .delete
                    .as_ref()
                    .map_or("nothing".to_owned(), Json::describe)
            )));
        };
        let Some(&table) = self.table_by_name.get(name.as_ref()) else {
            return Err(Reject::line(self.unknown_type(name)));
        };
        let def = &self.catalog.types[table];
        let key_field = def
            .key
            .as_ref()
            .and_then(|key| def.fields.iter().find(|field| field.name == *key));
        let id = match (key_field, def.kind) {
            (Some(field), _) => {
                if envelope.from.is_some() || envelope.to.is_some() {
                    return Err(Reject::line(format!(
                        "{} is deleted by its key: {{\"delete\": \"{}\", \"key\": ...}}, without \"from\"/\"to\"",
                        def.name, def.name
                    )));
                }
                let Some(value) = envelope.key.clone() else {
                    return Err(Reject::field(
                        "key",
                        format!("missing \"key\" (the {} to delete)", field.name),
                    ));
                };
                let cell =
                    convert_field(field, value).map_err(|reason| Reject::field("key", reason))?;
                match KeyValue::from_cell(&cell) {
                    Some(KeyValue::Text(text)) if text.is_empty() => {
                        return Err(Reject::field("key", "key must not be empty"))
                    }
                    Some(KeyValue::Text(text)) => text.into_owned(),
                    Some(KeyValue::Int(value)) => value.to_string(),
                    None => return Err(Reject::field("key", "key is missing or null")),
                }
            }
            (None, TypeKind::Edge) => {
                if envelope.key.is_some() {
                    return Err(Reject::line(format!(
                        "{} has no @key: delete its edge by {{\"delete\": \"{}\", \"from\": ..., \"to\": ...}}",
                        def.name, def.name
                    )));
                }
                let (from, to) = check_endpoints(def, envelope)?;
                super::edge_id(&from, &to)
            }
            (None, TypeKind::Node) => {
                return Err(Reject::line(format!(
                    "node type {} declares no @key field",
                    def.name
                )))
            }
        };
        Ok(Staged::Delete { table, id })
    }

    /// Find the type a line names and check it is used as the right kind.
    fn resolve_type(&self, envelope: &Envelope<'_>) -> Result<(usize, &'c TypeDef), Reject> {
        let (member, name_value, used_as) = match (&envelope.node_type, &envelope.edge_type) {
            (Some(name), None) => ("type", name, TypeKind::Node),
            (None, Some(name)) => ("edge", name, TypeKind::Edge),
            (Some(_), Some(_)) => {
                return Err(Reject::line(
                    "a line has \"type\" (a node) or \"edge\" (an edge), not both",
                ))
            }
            (None, None) => {
                return Err(Reject::line(
                    "expected a \"type\" (node) or \"edge\" (edge) key naming the row's type",
                ))
            }
        };
        let Json::Str(name) = name_value else {
            return Err(Reject::line(format!(
                "\"{member}\" must be a type name string, found {}",
                name_value.describe()
            )));
        };
        let Some(&index) = self.table_by_name.get(name.as_ref()) else {
            return Err(Reject::line(self.unknown_type(name)));
        };
        let def = &self.catalog.types[index];
        match (def.kind, used_as) {
            (TypeKind::Node, TypeKind::Edge) => Err(Reject::line(format!(
                "{} is a node type: write {{\"type\": \"{}\", ...}}, not \"edge\"",
                def.name, def.name
            ))),
            (TypeKind::Edge, TypeKind::Node) => Err(Reject::line(format!(
                "{} is an edge type: write {{\"edge\": \"{}\", \"from\": ..., \"to\": ...}}, not \"type\"",
                def.name, def.name
            ))),
            _ => Ok((index, def)),
        }
    }

    fn unknown_type(&self, name: &str) -> String {
        let names: Vec<&str> = self
            .catalog
            .types
            .iter()
            .map(|ty| ty.name.as_str())
            .collect();
        let meant = crate::nearest_name(name, names.iter().copied())
            .map(|meant| format!("did you mean {}? ", quote_name(meant)))
            .unwrap_or_default();
        if names.is_empty() {
            format!(
                "unknown type {} (the schema declares no types)",
                quote_name(name)
            )
        } else if names.len() <= MAX_LISTED_TYPES {
            format!(
                "unknown type {} ({meant}known types: {})",
                quote_name(name),
                names.join(", ")
            )
        } else {
            format!(
                "unknown type {}{}",
                quote_name(name),
                meant
                    .strip_suffix(' ')
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            )
        }
    }
}

/// `from`/`to` must be non-empty strings; optional `from_type`/`to_type` must match the
/// edge's declared endpoints.
fn check_endpoints<'l>(
    def: &TypeDef,
    envelope: &Envelope<'l>,
) -> Result<(Cow<'l, str>, Cow<'l, str>), Reject> {
    let (declared_from, declared_to) = match &def.edge {
        Some(ends) => (ends.from.as_str(), ends.to.as_str()),
        None => {
            return Err(Reject::line(format!(
                "edge type {} has no endpoints",
                def.name
            )))
        }
    };
    let endpoint = |member: &str, value: &Option<Json<'l>>| match value {
        Some(Json::Str(key)) if !key.is_empty() => Ok(key.clone()),
        Some(other) => Err(Reject::field(
            member,
            format!(
                "expected a non-empty node key string, found {}",
                other.describe()
            ),
        )),
        None => Err(Reject::field(
            member,
            format!("missing \"{member}\" (the key of the edge's node)"),
        )),
    };
    let from = endpoint("from", &envelope.from)?;
    let to = endpoint("to", &envelope.to)?;

    let given_type = |member: &str, value: &Option<Json<'l>>| match value {
        None => Ok(None),
        Some(Json::Str(name)) => Ok(Some(name.clone())),
        Some(other) => Err(Reject::field(
            member,
            format!(
                "expected a node type name string, found {}",
                other.describe()
            ),
        )),
    };
    let from_type = given_type("from_type", &envelope.from_type)?;
    let to_type = given_type("to_type", &envelope.to_type)?;
    let from_type = from_type.as_deref().unwrap_or(declared_from);
    let to_type = to_type.as_deref().unwrap_or(declared_to);
    if from_type != declared_from || to_type != declared_to {
        return Err(Reject::line(format!(
            "edge {} connects {declared_from} -> {declared_to}, not {from_type} -> {to_type}",
            def.name
        )));
    }
    Ok((from, to))
}

/// Convert the `data` object into one cell per declared field, checking unknown,
/// duplicate and required fields.
fn stage_fields<'l>(
    table: &TableBuilder<'_>,
    data: Option<Json<'l>>,
) -> Result<Vec<Option<Cell<'l>>>, Reject> {
    let def = table.def;
    let members = match data {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Object(members)) => members,
        Some(other) => {
            return Err(Reject::line(format!(
                "\"data\" must be an object, found {}",
                other.describe()
            )))
        }
    };
    let cells = convert_members(def, members, required)?;
    for (index, field) in def.fields.iter().enumerate() {
        if cells[index].is_none() && !field.nullable && !table.has_default(index) {
            return Err(Reject::field(&field.name, required(field)));
        }
    }
    Ok(cells)
}

/// Convert the `patch` object: the fields it names, each checked as in a whole row; a
/// field it leaves out is `None` (kept from the row it patches).
fn stage_patch_fields<'l>(
    def: &TypeDef,
    patch: Option<Json<'l>>,
) -> Result<Vec<Option<Cell<'l>>>, Reject> {
    let members = match patch {
        Some(Json::Object(members)) => members,
        other => {
            return Err(Reject::line(format!(
                "\"patch\" must be an object of the key and the fields to set, found {}",
                other.as_ref().map_or("nothing".to_owned(), Json::describe)
            )))
        }
    };
    convert_members(def, members, |field| {
        format!(
            "a patch cannot set a required field to null (expected {})",
            field.ty
        )
    })
}

/// One cell per declared field from an object's members (`None`: not named), checking
/// unknown and repeated fields, each value as its field's type; `null_refused` says why a
/// field that is not nullable cannot be null.
fn convert_members<'l>(
    def: &TypeDef,
    members: Vec<(Cow<'l, str>, Json<'l>)>,
    null_refused: impl Fn(&crate::schema::FieldDef) -> String,
) -> Result<Vec<Option<Cell<'l>>>, Reject> {
    let mut cells: Vec<Option<Cell<'l>>> = vec![None; def.fields.len()];
    for (name, value) in members {
        let Some(index) = def.fields.iter().position(|field| field.name == name) else {
            return Err(Reject::field(&name, unknown_field(def, &name)));
        };
        let field = &def.fields[index];
        if cells[index].is_some() {
            return Err(Reject::field(&field.name, "field appears twice"));
        }
        let cell = match value {
            Json::Null if field.nullable => Cell::Null,
            Json::Null => return Err(Reject::field(&field.name, null_refused(field))),
            value => {
                convert_field(field, value).map_err(|reason| Reject::field(&field.name, reason))?
            }
        };
        cells[index] = Some(cell);
    }
    Ok(cells)
}

fn required(field: &crate::schema::FieldDef) -> String {
    format!("required field is missing or null (expected {})", field.ty)
}

fn unknown_field(def: &TypeDef, name: &str) -> String {
    let names: Vec<&str> = def.fields.iter().map(|field| field.name.as_str()).collect();
    let meant = crate::nearest_name(name, names.iter().copied())
        .map(|meant| format!("did you mean `{meant}`? "))
        .unwrap_or_default();
    format!(
        "unknown field ({meant}{} has: {})",
        def.name,
        names.join(", ")
    )
}

/// serde_json's message without its "at line 1 column N" suffix (every line is line 1 to
/// serde_json), with the column kept.
fn json_error(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let message = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(message, _)| message);
    format!("{message} at column {}", error.column())
}
