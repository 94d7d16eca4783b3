//! Recursive-descent parser: tokens → declarations with positions. Grammar checks only;
//! the rules that need the whole schema (keys, endpoints, defaults, …) live in `lower`.
//!
//! ```text
//! schema     := decl*
//! decl       := "node" Ident type_annot* body?
//!             | "edge" Ident ":" Ident "->" Ident type_annot* body?
//! body       := "{" (field [","|";"])* "}"
//! field      := Ident ":" type "?"? ("=" literal | field_annot)*
//! type       := String | Bool | I32 | I64 | F32 | F64 | Date | DateTime
//!             | "Vector" "(" Int ")" | "[" type "]" | "enum" "(" Ident ("," Ident)* ","? ")"
//! literal    := Int | Float | Str | true | false | Ident | "[" (literal ("," literal)*)? "]"
//! ```

use super::catalog::{Cardinality, FieldType, IndexKind, Number, RangeBound, TypeKind};
use super::error::{
    BadBoundsSnafu, DuplicateAnnotationSnafu, MisplacedAnnotationSnafu, Position, SchemaError,
    SyntaxSnafu,
};
use super::lexer::{tokenize, Tok, Token};

const TYPE_NAMES: &str =
    "a type (String, Bool, I32, I64, F32, F64, Date, DateTime, Vector(n), [T], enum(..))";
const FIELD_ANNOTATIONS: &str = "@key, @unique, @index, @range, @check or @embed";

/// A value paired with where it was written.
#[derive(Debug, Clone)]
pub(crate) struct Spanned<T> {
    pub value: T,
    pub at: Position,
}

#[derive(Debug)]
pub(crate) struct TypeDecl {
    pub kind: TypeKind,
    pub name: Spanned<String>,
    /// `(from, to)` for edges.
    pub ends: Option<(Spanned<String>, Spanned<String>)>,
    /// `Some(shards)` when `@stream` is present.
    pub stream: Option<Option<u32>>,
    pub card: Option<Cardinality>,
    pub fields: Vec<FieldDecl>,
}

#[derive(Debug)]
pub(crate) struct FieldDecl {
    pub name: Spanned<String>,
    pub ty: Spanned<FieldType>,
    pub nullable: bool,
    pub default: Option<Spanned<Literal>>,
    pub annotations: Vec<Spanned<FieldAnnotation>>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Literal {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A bare identifier: only meaningful as an enum variant.
    Ident(String),
    List(Vec<Literal>),
}

#[derive(Debug, Clone)]
pub(crate) enum FieldAnnotation {
    Key,
    Unique,
    Index(IndexKind),
    Range(RangeBound),
    Check(String),
    Embed(String),
}

impl FieldAnnotation {
    pub fn name(&self) -> &'static str {
        match self {
            FieldAnnotation::Key => "@key",
            FieldAnnotation::Unique => "@unique",
            FieldAnnotation::Index(_) => "@index",
            FieldAnnotation::Range(_) => "@range",
            FieldAnnotation::Check(_) => "@check",
            FieldAnnotation::Embed(_) => "@embed",
        }
    }
}

pub(crate) fn parse(source: &str) -> Result<Vec<TypeDecl>, SchemaError> {
    let mut parser = Parser {
        tokens: tokenize(source)?,
        index: 0,
    };
    let mut declarations = Vec::new();
    while parser.peek() != &Tok::Eof {
        declarations.push(parser.declaration()?);
    }
    Ok(declarations)
}

struct Parser {
    tokens: Vec<Token>,
    index: usize,
}

impl Parser {
    fn current(&self) -> &Token {
        // The token list always ends with Eof and `advance` never moves past it.
        &self.tokens[self.index.min(self.tokens.len() - 1)]
    }

    fn peek(&self) -> &Tok {
        &self.current().tok
    }

    fn at(&self) -> Position {
        self.current().at
    }

    fn advance(&mut self) -> Token {
        let token = self.current().clone();
        if token.tok != Tok::Eof {
            self.index += 1;
        }
        token
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == tok {
            self.advance();
            true
        } else {
            false
        }
    }

    fn unexpected<T>(&self, expected: &str) -> Result<T, SchemaError> {
        SyntaxSnafu {
            at: self.at(),
            expected,
            found: self.peek().to_string(),
        }
        .fail()
    }

    fn expect(&mut self, tok: &Tok) -> Result<Position, SchemaError> {
        let at = self.at();
        if self.eat(tok) {
            Ok(at)
        } else {
            self.unexpected(&tok.to_string())
        }
    }

    fn ident(&mut self, expected: &str) -> Result<Spanned<String>, SchemaError> {
        match self.peek() {
            Tok::Ident(name) => {
                let value = name.clone();
                let at = self.advance().at;
                Ok(Spanned { value, at })
            }
            _ => self.unexpected(expected),
        }
    }

    fn declaration(&mut self) -> Result<TypeDecl, SchemaError> {
        let keyword = self.ident("a declaration ('node' or 'edge')")?;
        let kind = match keyword.value.as_str() {
            "node" => TypeKind::Node,
            "edge" => TypeKind::Edge,
            _ => {
                return SyntaxSnafu {
                    at: keyword.at,
                    expected: "a declaration ('node' or 'edge')",
                    found: format!("'{}'", keyword.value),
                }
                .fail()
            }
        };
        let name = self.ident("a type name")?;
        let ends = if kind == TypeKind::Edge {
            self.expect(&Tok::Colon)?;
            let from = self.ident("the edge's source node type")?;
            self.expect(&Tok::Arrow)?;
            let to = self.ident("the edge's target node type")?;
            Some((from, to))
        } else {
            None
        };
        let mut declaration = TypeDecl {
            kind,
            name,
            ends,
            stream: None,
            card: None,
            fields: Vec::new(),
        };
        while self.peek() == &Tok::At {
            self.type_annotation(&mut declaration)?;
        }
        if self.eat(&Tok::LBrace) {
            while !self.eat(&Tok::RBrace) {
                declaration.fields.push(self.field()?);
                // Separators are optional: fields are usually one per line.
                let _ = self.eat(&Tok::Comma) || self.eat(&Tok::Semicolon);
            }
        }
        Ok(declaration)
    }

    fn type_annotation(&mut self, declaration: &mut TypeDecl) -> Result<(), SchemaError> {
        let at = self.expect(&Tok::At)?;
        let expected = match declaration.kind {
            TypeKind::Node => "a type annotation (@stream) or '{'",
            TypeKind::Edge => "a type annotation (@stream, @card) or '{'",
        };
        let name = self.ident(expected)?;
        match name.value.as_str() {
            "stream" => {
                if declaration.stream.is_some() {
                    return DuplicateAnnotationSnafu {
                        at,
                        annotation: "@stream",
                    }
                    .fail();
                }
                declaration.stream = Some(self.stream_arguments()?);
            }
            "card" => {
                if declaration.kind == TypeKind::Node {
                    return MisplacedAnnotationSnafu {
                        at,
                        annotation: "@card",
                        problem: "only applies to edge types",
                    }
                    .fail();
                }
                if declaration.card.is_some() {
                    return DuplicateAnnotationSnafu {
                        at,
                        annotation: "@card",
                    }
                    .fail();
                }
                declaration.card = Some(self.card_arguments(at)?);
            }
            _ => {
                return SyntaxSnafu {
                    at: name.at,
                    expected,
                    found: format!("'@{}'", name.value),
                }
                .fail()
            }
        }
        Ok(())
    }

    /// `@stream` or `@stream(shards = N)`.
    fn stream_arguments(&mut self) -> Result<Option<u32>, SchemaError> {
        if !self.eat(&Tok::LParen) {
            return Ok(None);
        }
        let option = self.ident("'shards'")?;
        if option.value != "shards" {
            return SyntaxSnafu {
                at: option.at,
                expected: "'shards'",
                found: format!("'{}'", option.value),
            }
            .fail();
        }
        self.expect(&Tok::Equals)?;
        let at = self.at();
        let shards = match self.peek() {
            Tok::Int(count) => *count,
            _ => return self.unexpected("a shard count"),
        };
        self.advance();
        self.expect(&Tok::RParen)?;
        match u32::try_from(shards) {
            Ok(count) if count >= 1 => Ok(Some(count)),
            _ => BadBoundsSnafu {
                at,
                what: "@stream(shards)",
                problem: format!(
                    "expected a shard count from 1 to {}, found {shards}",
                    u32::MAX
                ),
            }
            .fail(),
        }
    }

    /// `@card(min..max)` or `@card(min..)`.
    fn card_arguments(&mut self, at: Position) -> Result<Cardinality, SchemaError> {
        self.expect(&Tok::LParen)?;
        let min = self.count("a minimum edge count")?;
        self.expect(&Tok::DotDot)?;
        let max = match self.peek() {
            Tok::RParen => None,
            _ => Some(self.count("a maximum edge count or ')'")?),
        };
        self.expect(&Tok::RParen)?;
        let card = Cardinality { min, max };
        if max.is_some_and(|max| max < min) {
            return BadBoundsSnafu {
                at,
                what: card.to_string(),
                problem: "expected min <= max",
            }
            .fail();
        }
        Ok(card)
    }

    fn count(&mut self, expected: &str) -> Result<u64, SchemaError> {
        match self.peek() {
            Tok::Int(value) if *value >= 0 => {
                let value = *value as u64;
                self.advance();
                Ok(value)
            }
            _ => self.unexpected(expected),
        }
    }

    fn field(&mut self) -> Result<FieldDecl, SchemaError> {
        let name = self.ident("a field name or '}'")?;
        self.expect(&Tok::Colon)?;
        let ty = self.field_type()?;
        let nullable = self.eat(&Tok::Question);
        let mut field = FieldDecl {
            name,
            ty,
            nullable,
            default: None,
            annotations: Vec::new(),
        };
        loop {
            match self.peek() {
                Tok::Equals => {
                    let at = self.advance().at;
                    if field.default.is_some() {
                        return DuplicateAnnotationSnafu {
                            at,
                            annotation: "default '='",
                        }
                        .fail();
                    }
                    let value_at = self.at();
                    let value = self.literal()?;
                    field.default = Some(Spanned {
                        value,
                        at: value_at,
                    });
                }
                Tok::At => field.annotations.push(self.field_annotation()?),
                _ => return Ok(field),
            }
        }
    }

    fn field_type(&mut self) -> Result<Spanned<FieldType>, SchemaError> {
        let at = self.at();
        let ty = match self.peek().clone() {
            Tok::LBracket => {
                self.advance();
                let item = self.field_type()?;
                self.expect(&Tok::RBracket)?;
                FieldType::List(Box::new(item.value))
            }
            Tok::Ident(name) => {
                self.advance();
                match name.as_str() {
                    "String" => FieldType::String,
                    "Bool" => FieldType::Bool,
                    "I32" => FieldType::I32,
                    "I64" => FieldType::I64,
                    "F32" => FieldType::F32,
                    "F64" => FieldType::F64,
                    "Date" => FieldType::Date,
                    "DateTime" => FieldType::DateTime,
                    "Vector" => FieldType::Vector(self.vector_dimension()?),
                    "enum" => FieldType::Enum(self.enum_variants()?),
                    _ => {
                        return SyntaxSnafu {
                            at,
                            expected: TYPE_NAMES,
                            found: format!("'{name}'"),
                        }
                        .fail()
                    }
                }
            }
            _ => return self.unexpected(TYPE_NAMES),
        };
        Ok(Spanned { value: ty, at })
    }

    fn vector_dimension(&mut self) -> Result<usize, SchemaError> {
        self.expect(&Tok::LParen)?;
        let at = self.at();
        let dimension = match self.peek() {
            Tok::Int(value) => *value,
            _ => return self.unexpected("a vector dimension"),
        };
        self.advance();
        self.expect(&Tok::RParen)?;
        // Arrow's FixedSizeList length is an i32.
        match i32::try_from(dimension) {
            Ok(dimension) if dimension >= 1 => Ok(dimension as usize),
            _ => BadBoundsSnafu {
                at,
                what: format!("Vector({dimension})"),
                problem: format!("expected a dimension from 1 to {}", i32::MAX),
            }
            .fail(),
        }
    }

    fn enum_variants(&mut self) -> Result<Vec<String>, SchemaError> {
        self.expect(&Tok::LParen)?;
        let mut variants: Vec<String> = Vec::new();
        loop {
            let variant = self.ident("an enum variant")?;
            if variants.contains(&variant.value) {
                return SyntaxSnafu {
                    at: variant.at,
                    expected: "distinct enum variants",
                    found: format!("'{}' twice", variant.value),
                }
                .fail();
            }
            variants.push(variant.value);
            if !self.eat(&Tok::Comma) || self.peek() == &Tok::RParen {
                break;
            }
        }
        self.expect(&Tok::RParen)?;
        Ok(variants)
    }

    fn literal(&mut self) -> Result<Literal, SchemaError> {
        let literal = match self.peek().clone() {
            Tok::Int(value) => Literal::Int(value),
            Tok::Float(value) => Literal::Float(value),
            Tok::Str(text) => Literal::Str(text),
            Tok::Ident(name) if name == "true" => Literal::Bool(true),
            Tok::Ident(name) if name == "false" => Literal::Bool(false),
            Tok::Ident(name) => Literal::Ident(name),
            Tok::LBracket => {
                self.advance();
                let mut items = Vec::new();
                while !self.eat(&Tok::RBracket) {
                    items.push(self.literal()?);
                    if !self.eat(&Tok::Comma) {
                        self.expect(&Tok::RBracket)?;
                        break;
                    }
                }
                return Ok(Literal::List(items));
            }
            _ => {
                return self.unexpected(
                    "a default value (number, string, true/false, enum variant or [..])",
                )
            }
        };
        self.advance();
        Ok(literal)
    }

    fn field_annotation(&mut self) -> Result<Spanned<FieldAnnotation>, SchemaError> {
        let at = self.expect(&Tok::At)?;
        let name = self.ident(FIELD_ANNOTATIONS)?;
        let annotation = match name.value.as_str() {
            "key" => FieldAnnotation::Key,
            "unique" => FieldAnnotation::Unique,
            "index" => FieldAnnotation::Index(self.index_kind()?),
            "range" => FieldAnnotation::Range(self.range_arguments(at)?),
            "check" => {
                self.expect(&Tok::LParen)?;
                let pattern = match self.peek() {
                    Tok::Str(pattern) => pattern.clone(),
                    _ => return self.unexpected("a quoted regex pattern"),
                };
                self.advance();
                self.expect(&Tok::RParen)?;
                FieldAnnotation::Check(pattern)
            }
            "embed" => {
                self.expect(&Tok::LParen)?;
                let source = self.ident("the name of the String field to embed")?;
                self.expect(&Tok::RParen)?;
                FieldAnnotation::Embed(source.value)
            }
            "stream" | "card" => {
                return MisplacedAnnotationSnafu {
                    at,
                    annotation: format!("@{}", name.value),
                    problem: "applies to a type, not a field (write it after the type name)",
                }
                .fail()
            }
            other => {
                return SyntaxSnafu {
                    at: name.at,
                    expected: FIELD_ANNOTATIONS,
                    found: format!("'@{other}'"),
                }
                .fail()
            }
        };
        Ok(Spanned {
            value: annotation,
            at,
        })
    }

    fn index_kind(&mut self) -> Result<IndexKind, SchemaError> {
        if !self.eat(&Tok::LParen) {
            return Ok(IndexKind::Default);
        }
        const KINDS: &str = "an index kind (fts, btree or vector)";
        let kind = self.ident(KINDS)?;
        let kind = match kind.value.as_str() {
            "fts" => IndexKind::Fts,
            "btree" => IndexKind::BTree,
            "vector" => IndexKind::Vector,
            other => {
                return SyntaxSnafu {
                    at: kind.at,
                    expected: KINDS,
                    found: format!("'{other}'"),
                }
                .fail()
            }
        };
        self.expect(&Tok::RParen)?;
        Ok(kind)
    }

    /// `@range(a..b)`, `@range(a..)` or `@range(..b)`.
    fn range_arguments(&mut self, at: Position) -> Result<RangeBound, SchemaError> {
        self.expect(&Tok::LParen)?;
        let min = self.optional_number();
        if !self.eat(&Tok::DotDot) {
            return self.unexpected(if min.is_some() {
                "'..'"
            } else {
                "a number or '..'"
            });
        }
        let max = self.optional_number();
        if !self.eat(&Tok::RParen) {
            return self.unexpected(if max.is_some() {
                "')'"
            } else {
                "a number or ')'"
            });
        }
        let range = RangeBound { min, max };
        let problem = match (min, max) {
            (None, None) => Some("expected at least one bound"),
            (Some(min), Some(max)) if min.as_f64() > max.as_f64() => Some("expected min <= max"),
            _ => None,
        };
        if let Some(problem) = problem {
            return BadBoundsSnafu {
                at,
                what: range.to_string(),
                problem,
            }
            .fail();
        }
        Ok(range)
    }

    fn optional_number(&mut self) -> Option<Number> {
        let number = match self.peek() {
            Tok::Int(value) => Number::Int(*value),
            Tok::Float(value) => Number::Float(*value),
            _ => return None,
        };
        self.advance();
        Some(number)
    }
}
