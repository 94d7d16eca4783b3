//! The parsed, validated schema: what every other crate codes against.

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::{Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

use crate::TablePath;

/// All declared types, in declaration order, plus the source they came from (the
/// manifest stores the source text; the catalog is always re-derived from it).
#[derive(Debug, Clone, Serialize)]
pub struct Catalog {
    pub source: String,
    pub types: Vec<TypeDef>,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&TypeDef> {
        self.types.iter().find(|ty| ty.name == name)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &TypeDef> {
        self.types.iter().filter(|ty| ty.kind == TypeKind::Node)
    }

    pub fn edges(&self) -> impl Iterator<Item = &TypeDef> {
        self.types.iter().filter(|ty| ty.kind == TypeKind::Edge)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TypeKind {
    Node,
    Edge,
}

/// Endpoints of an edge type and the optional bound on out-edges per source node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EdgeEnds {
    pub from: String,
    pub to: String,
    pub card: Option<Cardinality>,
}

/// `@card(min..max)`: how many out-edges of this type one source node may have.
/// `max: None` is unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cardinality {
    pub min: u64,
    pub max: Option<u64>,
}

impl fmt::Display for Cardinality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.max {
            Some(max) => write!(f, "@card({}..{max})", self.min),
            None => write!(f, "@card({}..)", self.min),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TypeDef {
    pub name: String,
    pub kind: TypeKind,
    /// `Some` when the type is enrolled for streaming ingest (`@stream`).
    pub stream: Option<StreamOptions>,
    /// `Some` exactly for edges.
    pub edge: Option<EdgeEnds>,
    pub fields: Vec<FieldDef>,
    /// Name of the `@key` field, if any (always `Some` for nodes).
    pub key: Option<String>,
}

impl TypeDef {
    pub fn field(&self, name: &str) -> Option<&FieldDef> {
        self.fields.iter().find(|field| field.name == name)
    }

    /// Arrow schema of the type's Lance table. Nodes: `id: Utf8 NOT NULL` then every
    /// declared field in order. Edges: `id`, `src`, `dst` (all `Utf8 NOT NULL`), then
    /// properties. A field is nullable exactly when declared `T?`.
    pub fn arrow_schema(&self) -> SchemaRef {
        let system_columns: &[&str] = match self.kind {
            TypeKind::Node => &["id"],
            TypeKind::Edge => &["id", "src", "dst"],
        };
        let fields = system_columns
            .iter()
            .map(|name| Field::new(*name, DataType::Utf8, false))
            .chain(
                self.fields
                    .iter()
                    .map(|field| Field::new(&field.name, field.ty.arrow_type(), field.nullable)),
            )
            .collect::<Vec<_>>();
        Arc::new(Schema::new(fields))
    }

    /// Location of the type's table relative to the graph root.
    pub fn table_path(&self) -> TablePath {
        TablePath::new(match self.kind {
            TypeKind::Node => format!("nodes/{}.lance", self.name),
            TypeKind::Edge => format!("edges/{}.lance", self.name),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct StreamOptions {
    pub shards: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldDef {
    pub name: String,
    pub ty: FieldType,
    pub nullable: bool,
    /// Applied when the field is absent from a row (an explicit `null` stays null).
    pub default: Option<DefaultValue>,
    pub key: bool,
    pub unique: bool,
    pub index: Option<IndexKind>,
    pub range: Option<RangeBound>,
    pub check: Option<CheckPattern>,
    /// Name of the String field this vector is an embedding of.
    pub embed: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum FieldType {
    String,
    Bool,
    I32,
    I64,
    F32,
    F64,
    Date,
    DateTime,
    Vector(usize),
    List(Box<FieldType>),
    Enum(Vec<String>),
}

impl FieldType {
    pub fn is_integer(&self) -> bool {
        matches!(self, FieldType::I32 | FieldType::I64)
    }

    pub fn is_numeric(&self) -> bool {
        matches!(
            self,
            FieldType::I32 | FieldType::I64 | FieldType::F32 | FieldType::F64
        )
    }

    /// Column type in the type's Arrow schema. Nested items are always nullable.
    pub fn arrow_type(&self) -> DataType {
        match self {
            FieldType::String | FieldType::Enum(_) => DataType::Utf8,
            FieldType::Bool => DataType::Boolean,
            FieldType::I32 => DataType::Int32,
            FieldType::I64 => DataType::Int64,
            FieldType::F32 => DataType::Float32,
            FieldType::F64 => DataType::Float64,
            FieldType::Date => DataType::Date32,
            FieldType::DateTime => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            FieldType::Vector(dim) => DataType::FixedSizeList(
                Arc::new(Field::new("item", DataType::Float32, true)),
                // Dimensions beyond i32 cannot be represented by Arrow; lowering refuses them.
                i32::try_from(*dim).unwrap_or(i32::MAX),
            ),
            FieldType::List(item) => {
                DataType::List(Arc::new(Field::new("item", item.arrow_type(), true)))
            }
        }
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::String => f.write_str("String"),
            FieldType::Bool => f.write_str("Bool"),
            FieldType::I32 => f.write_str("I32"),
            FieldType::I64 => f.write_str("I64"),
            FieldType::F32 => f.write_str("F32"),
            FieldType::F64 => f.write_str("F64"),
            FieldType::Date => f.write_str("Date"),
            FieldType::DateTime => f.write_str("DateTime"),
            FieldType::Vector(dim) => write!(f, "Vector({dim})"),
            FieldType::List(item) => write!(f, "[{item}]"),
            FieldType::Enum(variants) => write!(f, "enum({})", variants.join(", ")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum IndexKind {
    /// Bare `@index`: the storage layer picks the kind from the column type.
    Default,
    Fts,
    BTree,
    Vector,
}

/// A numeric bound as written in the schema.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(value) => value as f64,
            Number::Float(value) => value,
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Int(value) => write!(f, "{value}"),
            // `{:?}` keeps the decimal point so `2.0` does not print as an integer.
            Number::Float(value) => write!(f, "{value:?}"),
        }
    }
}

/// `@range(min..max)`, both ends inclusive; either end may be open.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RangeBound {
    pub min: Option<Number>,
    pub max: Option<Number>,
}

impl RangeBound {
    /// Integer comparison, exact for the whole i64 domain.
    pub fn contains_int(&self, value: i64) -> bool {
        let above_min = match self.min {
            None => true,
            Some(Number::Int(min)) => value >= min,
            Some(Number::Float(min)) => value as f64 >= min,
        };
        let below_max = match self.max {
            None => true,
            Some(Number::Int(max)) => value <= max,
            Some(Number::Float(max)) => value as f64 <= max,
        };
        above_min && below_max
    }

    pub fn contains_float(&self, value: f64) -> bool {
        self.min.is_none_or(|min| value >= min.as_f64())
            && self.max.is_none_or(|max| value <= max.as_f64())
    }
}

impl fmt::Display for RangeBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("@range(")?;
        if let Some(min) = self.min {
            write!(f, "{min}")?;
        }
        f.write_str("..")?;
        if let Some(max) = self.max {
            write!(f, "{max}")?;
        }
        f.write_str(")")
    }
}

/// A default value, normalised: enum variants written as bare identifiers are `String`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum DefaultValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    List(Vec<DefaultValue>),
}

/// A compiled `@check` regex that remembers its source (for messages and serialization).
#[derive(Clone)]
pub struct CheckPattern {
    pattern: String,
    regex: regex::Regex,
}

impl CheckPattern {
    pub fn new(pattern: &str) -> Result<Self, regex::Error> {
        Ok(CheckPattern {
            pattern: pattern.to_owned(),
            regex: regex::Regex::new(pattern)?,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    pub fn regex(&self) -> &regex::Regex {
        &self.regex
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }
}

impl fmt::Debug for CheckPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CheckPattern({:?})", self.pattern)
    }
}

impl fmt::Display for CheckPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@check({:?})", self.pattern)
    }
}

impl PartialEq for CheckPattern {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern
    }
}

impl Serialize for CheckPattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.pattern)
    }
}
