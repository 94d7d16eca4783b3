//! Declarations → catalog types, enforcing the rules that the grammar cannot: keys,
//! reserved names, endpoints, where each annotation applies, and defaults.

use std::collections::HashMap;

use super::catalog::{
    CheckPattern, DefaultValue, EdgeEnds, FieldDef, FieldType, IndexKind, Number, StreamOptions,
    TypeDef, TypeKind,
};
use super::error::{
    BadBoundsSnafu, BadDefaultSnafu, BadEmbedSnafu, DuplicateAnnotationSnafu, DuplicateFieldSnafu,
    DuplicateTypeSnafu, EdgeKeyCountSnafu, InvalidKeySnafu, MisplacedAnnotationSnafu,
    NodeKeyCountSnafu, Position, ReservedNameSnafu, SchemaError, UnknownEndpointSnafu,
};
use super::parser::{FieldAnnotation, FieldDecl, Literal, Spanned, TypeDecl};
use super::value::{convert_field, default_as_json};

/// Names the storage layer owns: the system columns and anything `_`-prefixed.
const RESERVED_FIELD_NAMES: [&str; 3] = ["id", "src", "dst"];

/// How many type names an unknown-endpoint error lists before giving up.
const MAX_LISTED_TYPES: usize = 12;

pub(crate) fn lower(declarations: Vec<TypeDecl>) -> Result<Vec<TypeDef>, SchemaError> {
    // First pass: every name, so endpoints may refer to types declared later.
    let mut kinds: HashMap<&str, (TypeKind, Position)> = HashMap::new();
    for declaration in &declarations {
        let name = &declaration.name;
        if let Some((_, first)) = kinds.get(name.value.as_str()) {
            return DuplicateTypeSnafu {
                at: name.at,
                name: name.value.clone(),
                first: *first,
            }
            .fail();
        }
        kinds.insert(&name.value, (declaration.kind, name.at));
    }
    let node_names: Vec<&str> = declarations
        .iter()
        .filter(|declaration| declaration.kind == TypeKind::Node)
        .map(|declaration| declaration.name.value.as_str())
        .collect();

    let mut types = Vec::with_capacity(declarations.len());
    for declaration in &declarations {
        let edge = match &declaration.ends {
            Some((from, to)) => {
                check_endpoint(declaration, from, &kinds, &node_names)?;
                check_endpoint(declaration, to, &kinds, &node_names)?;
                Some(EdgeEnds {
                    from: from.value.clone(),
                    to: to.value.clone(),
                    card: declaration.card,
                })
            }
            None => None,
        };
        types.push(lower_type(declaration, edge)?);
    }
    Ok(types)
}

fn check_endpoint(
    declaration: &TypeDecl,
    endpoint: &Spanned<String>,
    kinds: &HashMap<&str, (TypeKind, Position)>,
    node_names: &[&str],
) -> Result<(), SchemaError> {
    let problem = match kinds.get(endpoint.value.as_str()) {
        Some((TypeKind::Node, _)) => return Ok(()),
        Some((TypeKind::Edge, _)) => "is an edge type",
        None => "is not declared",
    };
    let known = if node_names.is_empty() {
        String::new()
    } else if node_names.len() <= MAX_LISTED_TYPES {
        format!(": {}", node_names.join(", "))
    } else {
        format!(": {}, …", node_names[..MAX_LISTED_TYPES].join(", "))
    };
    UnknownEndpointSnafu {
        at: endpoint.at,
        edge: declaration.name.value.clone(),
        endpoint: endpoint.value.clone(),
        problem,
        known,
    }
    .fail()
}

fn lower_type(declaration: &TypeDecl, edge: Option<EdgeEnds>) -> Result<TypeDef, SchemaError> {
    let type_name = &declaration.name.value;
    let mut fields: Vec<FieldDef> = Vec::with_capacity(declaration.fields.len());
    for field in &declaration.fields {
        let name = &field.name;
        if RESERVED_FIELD_NAMES.contains(&name.value.as_str()) || name.value.starts_with('_') {
            return ReservedNameSnafu {
                at: name.at,
                field: name.value.clone(),
            }
            .fail();
        }
        if fields.iter().any(|existing| existing.name == name.value) {
            return DuplicateFieldSnafu {
                at: name.at,
                type_name: type_name.clone(),
                field: name.value.clone(),
            }
            .fail();
        }
        fields.push(lower_field(field)?);
    }

    let keys: Vec<(&FieldDecl, &FieldDef)> = declaration
        .fields
        .iter()
        .zip(&fields)
        .filter(|(_, field)| field.key)
        .collect();
    match declaration.kind {
        TypeKind::Node if keys.len() != 1 => {
            // Point at the second key when there are several, else at the type name.
            let at = keys
                .get(1)
                .map_or(declaration.name.at, |(decl, _)| decl.name.at);
            return NodeKeyCountSnafu {
                at,
                type_name: type_name.clone(),
                found: keys.len(),
            }
            .fail();
        }
        TypeKind::Edge if keys.len() > 1 => {
            return EdgeKeyCountSnafu {
                at: keys[1].0.name.at,
                type_name: type_name.clone(),
                found: keys.len(),
            }
            .fail();
        }
        _ => {}
    }
    for (decl, field) in &keys {
        check_key(decl, field)?;
    }

    for (decl, field) in declaration.fields.iter().zip(&fields) {
        if let Some(target) = &field.embed {
            check_embed(decl, field, target, &fields)?;
        }
    }

    Ok(TypeDef {
        name: type_name.clone(),
        kind: declaration.kind,
        stream: declaration.stream.map(|shards| StreamOptions { shards }),
        edge,
        key: keys.first().map(|(_, field)| field.name.clone()),
        fields,
    })
}

fn check_key(decl: &FieldDecl, field: &FieldDef) -> Result<(), SchemaError> {
    let problem = if field.nullable {
        format!(
            "must not be nullable (expected `{}`, not `{}?`)",
            field.ty, field.ty
        )
    } else if !matches!(
        field.ty,
        FieldType::String | FieldType::I32 | FieldType::I64
    ) {
        format!("must be String, I32 or I64, found {}", field.ty)
    } else if field.default.is_some() {
        "cannot have a default (expected every row to carry its key)".to_owned()
    } else {
        return Ok(());
    };
    InvalidKeySnafu {
        at: decl.name.at,
        field: field.name.clone(),
        problem,
    }
    .fail()
}

fn check_embed(
    decl: &FieldDecl,
    field: &FieldDef,
    target: &str,
    fields: &[FieldDef],
) -> Result<(), SchemaError> {
    let at = decl
        .annotations
        .iter()
        .find(|annotation| matches!(annotation.value, FieldAnnotation::Embed(_)))
        .map_or(decl.name.at, |annotation| annotation.at);
    let problem = match fields.iter().find(|field| field.name == target) {
        // Filled at fold time, after the row is acknowledged without it.
        _ if !field.nullable => format!(
            "an embedded field is filled when rows are folded, so it must be optional: `{}?`",
            field.ty
        ),
        None => {
            "expected the name of a String field of the same type, found no such field".to_owned()
        }
        Some(source) if source.ty != FieldType::String => {
            format!("expected a String field, but `{target}` is {}", source.ty)
        }
        Some(_) => return Ok(()),
    };
    BadEmbedSnafu {
        at,
        field: decl.name.value.clone(),
        target,
        problem,
    }
    .fail()
}

fn lower_field(decl: &FieldDecl) -> Result<FieldDef, SchemaError> {
    let ty = &decl.ty.value;
    let mut field = FieldDef {
        name: decl.name.value.clone(),
        ty: ty.clone(),
        nullable: decl.nullable,
        default: None,
        key: false,
        unique: false,
        index: None,
        range: None,
        check: None,
        embed: None,
    };
    let mut seen: Vec<&str> = Vec::new();
    for Spanned {
        value: annotation,
        at,
    } in &decl.annotations
    {
        let at = *at;
        if seen.contains(&annotation.name()) {
            return DuplicateAnnotationSnafu {
                at,
                annotation: annotation.name(),
            }
            .fail();
        }
        seen.push(annotation.name());
        let misplaced = |problem: String| {
            MisplacedAnnotationSnafu {
                at,
                annotation: annotation.name(),
                problem,
            }
            .fail()
        };
        match annotation {
            FieldAnnotation::Key => field.key = true,
            FieldAnnotation::Unique => field.unique = true,
            FieldAnnotation::Index(kind) => {
                let fits = match kind {
                    IndexKind::Default => true,
                    IndexKind::Fts => *ty == FieldType::String,
                    IndexKind::Vector => matches!(ty, FieldType::Vector(_)),
                    IndexKind::BTree => !matches!(ty, FieldType::Vector(_) | FieldType::List(_)),
                };
                if !fits {
                    let wanted = match kind {
                        IndexKind::Fts => "a String field",
                        IndexKind::Vector => "a Vector field",
                        _ => "a scalar field",
                    };
                    return MisplacedAnnotationSnafu {
                        at,
                        annotation: format!("@index({})", format!("{kind:?}").to_lowercase()),
                        problem: format!("expects {wanted}, found {ty}"),
                    }
                    .fail();
                }
                field.index = Some(*kind);
            }
            FieldAnnotation::Range(range) => {
                if !ty.is_numeric() {
                    return misplaced(format!(
                        "expects a numeric field (I32, I64, F32, F64), found {ty}"
                    ));
                }
                let has_float_bound = [range.min, range.max]
                    .iter()
                    .any(|bound| matches!(bound, Some(Number::Float(_))));
                if ty.is_integer() && has_float_bound {
                    return BadBoundsSnafu {
                        at,
                        what: range.to_string(),
                        problem: format!("expected integer bounds on {ty} field `{}`", field.name),
                    }
                    .fail();
                }
                field.range = Some(*range);
            }
            FieldAnnotation::Check(pattern) => {
                if *ty != FieldType::String {
                    return misplaced(format!("expects a String field, found {ty}"));
                }
                let compiled = CheckPattern::new(pattern).map_err(|error| SchemaError::BadRegex {
                    at,
                    pattern: pattern.clone(),
                    problem: first_line(&error.to_string()),
                });
                field.check = Some(compiled?);
            }
            FieldAnnotation::Embed(target) => {
                if !matches!(ty, FieldType::Vector(_)) {
                    return misplaced(format!("expects a Vector field, found {ty}"));
                }
                field.embed = Some(target.clone());
            }
        }
    }
    if let Some(default) = &decl.default {
        let value =
            literal_to_default(&default.value, ty).map_err(|problem| SchemaError::BadDefault {
                at: default.at,
                field: field.name.clone(),
                problem,
            })?;
        // Run the default through the decoder's own checks (type, enum, range, regex).
        if let Err(problem) = convert_field(&field, default_as_json(&value)) {
            return BadDefaultSnafu {
                at: default.at,
                field: field.name.clone(),
                problem,
            }
            .fail();
        }
        field.default = Some(value);
    }
    Ok(field)
}

/// Bare identifiers are only enum variants; everything else keeps its literal form.
fn literal_to_default(literal: &Literal, ty: &FieldType) -> Result<DefaultValue, String> {
    Ok(match literal {
        Literal::Bool(value) => DefaultValue::Bool(*value),
        Literal::Int(value) => DefaultValue::Int(*value),
        Literal::Float(value) => DefaultValue::Float(*value),
        Literal::Str(text) => DefaultValue::String(text.clone()),
        Literal::Ident(name) => match ty {
            FieldType::Enum(_) => DefaultValue::String(name.clone()),
            _ => {
                return Err(format!(
                    "expected a {ty} literal, found bare identifier '{name}' \
                     (only enum variants may be written unquoted)"
                ))
            }
        },
        Literal::List(items) => {
            let item_type = match ty {
                FieldType::List(item) => item.as_ref(),
                // Vector defaults are lists of numbers; convert_field checks them.
                FieldType::Vector(_) => &FieldType::F32,
                _ => return Err(format!("expected a {ty} literal, found a list")),
            };
            DefaultValue::List(
                items
                    .iter()
                    .map(|item| literal_to_default(item, item_type))
                    .collect::<Result<_, _>>()?,
            )
        }
    })
}

/// Regex errors are multi-line drawings; the summary line is enough in a one-line error.
fn first_line(text: &str) -> String {
    text.lines()
        .rev()
        .find(|line| line.starts_with("error:"))
        .or_else(|| text.lines().next())
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_owned()
}
