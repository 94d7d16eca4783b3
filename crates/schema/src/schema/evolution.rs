//! Schema changes: which differences between a graph's schema and a new one can be applied
//! to the stored tables as they are, and which would break them.
//!
//! Applied in place (additive): a new type; a new field after a type's existing ones that
//! is nullable or has a default; an index on an existing field; `@stream` on a type, or
//! off it. Everything else that differs is refused, each difference named: a type or field
//! gone (or renamed), a changed field type, key, nullability, default or constraint,
//! changed edge ends or `@card`, a field added between existing ones, a dropped index, a
//! changed shard count.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::catalog::{Catalog, FieldDef, TypeDef};

/// What applying a new schema changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SchemaChange {
    /// Types the new schema adds.
    pub new_types: Vec<String>,
    /// `(type, field)` of each field added to an existing type.
    #[schema(value_type = Vec<Vec<String>>)]
    pub new_fields: Vec<(String, String)>,
    /// `(type, field)` of each existing field that gains an index.
    #[schema(value_type = Vec<Vec<String>>)]
    pub new_indexes: Vec<(String, String)>,
    /// Existing types that gain `@stream`.
    pub newly_streamed: Vec<String>,
    /// Existing types that lose `@stream`: folded to empty, their shards sealed.
    #[serde(default)]
    pub unstreamed: Vec<String>,
}

impl SchemaChange {
    pub fn is_empty(&self) -> bool {
        self.new_types.is_empty()
            && self.new_fields.is_empty()
            && self.new_indexes.is_empty()
            && self.newly_streamed.is_empty()
            && self.unstreamed.is_empty()
    }

    /// Existing types whose table changes (a column or an index).
    pub fn changed_types(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .new_fields
            .iter()
            .chain(&self.new_indexes)
            .map(|(ty, _)| ty.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// One difference the stored tables cannot take in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakingChange {
    pub type_name: String,
    pub field: Option<String>,
    pub reason: String,
}

impl fmt::Display for BreakingChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}.{field}: {}", self.type_name, self.reason),
            None => write!(f, "{}: {}", self.type_name, self.reason),
        }
    }
}

/// What applying `new` over `old` changes, or every difference that breaks the tables.
pub fn plan_change(old: &Catalog, new: &Catalog) -> Result<SchemaChange, Vec<BreakingChange>> {
    let mut change = SchemaChange::default();
    let mut breaking = Vec::new();
    for before in &old.types {
        let Some(after) = new.get(&before.name) else {
            breaking.push(type_level(
                before,
                "the type is gone (dropping or renaming a type is not supported)",
            ));
            continue;
        };
        compare_type(before, after, &mut change, &mut breaking);
    }
    for after in &new.types {
        if old.get(&after.name).is_none() {
            change.new_types.push(after.name.clone());
        }
    }
    if breaking.is_empty() {
        Ok(change)
    } else {
        Err(breaking)
    }
}

fn type_level(ty: &TypeDef, reason: impl Into<String>) -> BreakingChange {
    BreakingChange {
        type_name: ty.name.clone(),
        field: None,
        reason: reason.into(),
    }
}

fn field_level(ty: &TypeDef, field: &str, reason: impl Into<String>) -> BreakingChange {
    BreakingChange {
        type_name: ty.name.clone(),
        field: Some(field.to_owned()),
        reason: reason.into(),
    }
}

fn compare_type(
    before: &TypeDef,
    after: &TypeDef,
    change: &mut SchemaChange,
    breaking: &mut Vec<BreakingChange>,
) {
    if before.kind != after.kind {
        breaking.push(type_level(
            before,
            format!("was a {:?}, is a {:?}", before.kind, after.kind),
        ));
        return;
    }
    if before.key != after.key {
        breaking.push(type_level(
            before,
            format!(
                "the key changed from {} to {} (a key cannot change)",
                before.key.as_deref().unwrap_or("none"),
                after.key.as_deref().unwrap_or("none")
            ),
        ));
    }
    if before.edge.as_ref().map(|e| (&e.from, &e.to))
        != after.edge.as_ref().map(|e| (&e.from, &e.to))
    {
        breaking.push(type_level(before, "the edge's ends changed"));
    }
    if before.edge.as_ref().map(|e| e.card) != after.edge.as_ref().map(|e| e.card) {
        breaking.push(type_level(
            before,
            "@card changed (stored edges may not meet a new bound)",
        ));
    }
    match (&before.stream, &after.stream) {
        (None, Some(_)) => change.newly_streamed.push(after.name.clone()),
        (Some(_), None) => change.unstreamed.push(after.name.clone()),
        (Some(was), Some(is)) if was != is => breaking.push(type_level(
            before,
            "the shard count changed (an enrolled table keeps its shards)",
        )),
        _ => {}
    }
    // Existing fields keep their place; new ones come after them.
    let mut kept = 0;
    for (position, field) in before.fields.iter().enumerate() {
        match after.fields.iter().position(|f| f.name == field.name) {
            None => breaking.push(field_level(
                before,
                &field.name,
                "the field is gone (dropping or renaming a field is not supported)",
            )),
            Some(at) => {
                if at != position {
                    breaking.push(field_level(
                        before,
                        &field.name,
                        "the field moved (new fields go after the existing ones)",
                    ));
                }
                kept += 1;
                compare_field(before, field, &after.fields[at], change, breaking);
            }
        }
    }
    for field in after.fields.iter().skip(kept) {
        if before.field(&field.name).is_some() {
            continue;
        }
        if !field.nullable && field.default.is_none() {
            breaking.push(field_level(
                after,
                &field.name,
                "a new field must be nullable (`T?`) or have a default (`= value`): stored rows have no value for it",
            ));
        } else if field.unique {
            breaking.push(field_level(
                after,
                &field.name,
                "a new field cannot be @unique (stored rows would all share its default)",
            ));
        } else {
            change
                .new_fields
                .push((after.name.clone(), field.name.clone()));
        }
    }
}

fn compare_field(
    ty: &TypeDef,
    before: &FieldDef,
    after: &FieldDef,
    change: &mut SchemaChange,
    breaking: &mut Vec<BreakingChange>,
) {
    let mut refuse = |reason: String| breaking.push(field_level(ty, &before.name, reason));
    if before.ty != after.ty {
        refuse(format!(
            "the type changed from {} to {}",
            before.ty, after.ty
        ));
    }
    if before.nullable != after.nullable {
        refuse(if before.nullable {
            "the field became required (stored rows may hold nulls)".to_owned()
        } else {
            "the field became nullable (not supported yet)".to_owned()
        });
    }
    if before.default != after.default {
        refuse("the default changed".to_owned());
    }
    if before.unique != after.unique {
        refuse("@unique changed (stored rows may share a value)".to_owned());
    }
    if before.range != after.range {
        refuse("@range changed (stored rows may fall outside a new range)".to_owned());
    }
    if before.check != after.check {
        refuse("@check changed (stored rows may not match a new pattern)".to_owned());
    }
    if before.embed != after.embed {
        refuse("@embed changed".to_owned());
    }
    match (before.index, after.index) {
        (None, Some(_)) => change
            .new_indexes
            .push((ty.name.clone(), after.name.clone())),
        (Some(_), None) => refuse("the index is dropped (not supported yet)".to_owned()),
        (Some(was), Some(is)) if was != is => {
            refuse(format!("the index kind changed from {was:?} to {is:?}"))
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
node Person @stream {
  name: String @key
  age: I32?
  email: String? @unique
}
node Company { name: String @key }
edge WorksAt: Person -> Company @card(0..1)
"#;

    fn plan(new: &str) -> Result<SchemaChange, Vec<String>> {
        let old = Catalog::parse(BASE).unwrap();
        let new = Catalog::parse(new).unwrap();
        plan_change(&old, &new).map_err(|all| all.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn additive_changes_are_planned() {
        let change = plan(
            r#"
node Person @stream {
  name: String @key
  age: I32? @index
  email: String? @unique
  bio: String? @index(fts)
  status: enum(active, inactive) = active
}
node Company @stream {
  name: String @key
  size: I64?
}
edge WorksAt: Person -> Company @card(0..1) { since: Date? }
node City { name: String @key }
edge LivesIn: Person -> City
"#,
        )
        .unwrap();
        assert_eq!(change.new_types, ["City", "LivesIn"]);
        assert_eq!(
            change.new_fields,
            [
                ("Person".to_owned(), "bio".to_owned()),
                ("Person".to_owned(), "status".to_owned()),
                ("Company".to_owned(), "size".to_owned()),
                ("WorksAt".to_owned(), "since".to_owned()),
            ]
        );
        assert_eq!(
            change.new_indexes,
            [("Person".to_owned(), "age".to_owned())]
        );
        assert_eq!(change.newly_streamed, ["Company"]);
        assert_eq!(change.changed_types(), ["Company", "Person", "WorksAt"]);
        assert!(
            plan(BASE).unwrap().is_empty(),
            "the same schema changes nothing"
        );
    }

    #[test]
    fn every_breaking_change_is_listed() {
        let refused = plan(
            r#"
node Person {
  name: String @key
  age: String
  email: String?
  extra: I32
}
edge WorksAt: Person -> Person
"#,
        )
        .unwrap_err();
        let expected = [
            "Person.age: the type changed from I32 to String",
            "Person.age: the field became required",
            "Person.extra: a new field must be nullable",
            "Person.email: @unique changed",
            "Company: the type is gone",
            "WorksAt: the edge's ends changed",
            "WorksAt: @card changed",
        ];
        for wanted in expected {
            assert!(
                refused.iter().any(|r| r.starts_with(wanted)),
                "missing {wanted:?} in {refused:#?}"
            );
        }
        assert_eq!(refused.len(), expected.len(), "{refused:#?}");
    }

    #[test]
    fn a_key_a_moved_field_and_a_field_in_between_are_refused() {
        let refused = plan(
            r#"
node Person @stream {
  email: String? @unique
  name: String @key
  age: I32?
}
node Company { name: String @key }
edge WorksAt: Person -> Company @card(0..1)
"#,
        )
        .unwrap_err();
        assert!(refused.iter().all(|r| r.contains("moved")), "{refused:#?}");
        assert_eq!(refused.len(), 3, "{refused:#?}");
        let refused = plan(&BASE.replace("name: String @key", "name: String\n  id2: String @key"))
            .unwrap_err();
        assert!(
            refused.iter().any(|r| r.contains("the key changed")),
            "{refused:#?}"
        );
    }
}
