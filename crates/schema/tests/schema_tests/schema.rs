//! Schema language: the DESIGN example, every construct, and the error messages.

use tributary_schema::{
    Cardinality, Catalog, DefaultValue, FieldType, IndexKind, Number, RangeBound, SchemaError,
    StreamOptions, TypeDef, TypeKind,
};

use super::DESIGN_SCHEMA;

fn parse(source: &str) -> Catalog {
    match Catalog::parse(source) {
        Ok(catalog) => catalog,
        Err(error) => panic!("schema should parse, got: {error}"),
    }
}

fn parse_error(source: &str) -> SchemaError {
    match Catalog::parse(source) {
        Ok(_) => panic!("schema should be rejected:\n{source}"),
        Err(error) => error,
    }
}

/// One line per column: `name: DataType [NOT NULL]`.
fn render_arrow_schema(ty: &TypeDef) -> String {
    let mut text = format!("{} ({})\n", ty.name, ty.table_path());
    for field in ty.arrow_schema().fields() {
        let null = if field.is_nullable() { "" } else { " NOT NULL" };
        text.push_str(&format!(
            "  {}: {:?}{null}\n",
            field.name(),
            field.data_type()
        ));
    }
    text
}

#[test]
fn design_example_catalog() {
    let catalog = parse(DESIGN_SCHEMA);
    insta::assert_yaml_snapshot!("design_catalog", catalog.types);
    let names = |types: Vec<&TypeDef>| types.iter().map(|ty| ty.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(catalog.nodes().collect()), ["Person", "Company"]);
    assert_eq!(names(catalog.edges().collect()), ["WorksAt", "Knows"]);
    assert_eq!(catalog.source, DESIGN_SCHEMA);
    let works_at = catalog.get("WorksAt").expect("declared");
    assert_eq!(
        works_at.edge.as_ref().and_then(|ends| ends.card),
        Some(Cardinality {
            min: 0,
            max: Some(1)
        })
    );
    assert!(catalog.get("Nobody").is_none());
}

#[test]
fn design_example_arrow_schemas() {
    let catalog = parse(DESIGN_SCHEMA);
    let rendered: String = catalog.types.iter().map(render_arrow_schema).collect();
    insta::assert_snapshot!("design_arrow_schemas", rendered);
}

#[test]
fn every_construct_parses() {
    let catalog = parse(
        r#"
        // types and nullability
        node Everything @stream(shards = 4) {
            key: I64 @key,
            text: String? @index
            flag: Bool = true; small: I32 = -3 @range(-10..10)
            real: F32 = 1 @range(..2.5)
            double: F64? @range(0.5..) @index(btree)
            day: Date = "2024-02-29"
            moment: DateTime? = "2024-02-29T12:00:00+02:00"
            vec: Vector(2) = [0, 1.5] @index(vector)
            tags: [String] = []
            nested: [[I32]]? = [[1, 2], []]
            mood: [enum(happy, sad)] = [happy, "sad"]
            escaped: String = "say \"hi\"" @check("^\w+ ")
        }
        edge Rated: Everything -> Everything @card(1..) { review: String @key }
        edge Loose: Everything -> Everything @stream @card(2..5)
        "#,
    );
    let everything = catalog.get("Everything").expect("declared");
    assert_eq!(everything.stream, Some(StreamOptions { shards: Some(4) }));
    assert_eq!(everything.key.as_deref(), Some("key"));
    let field = |name: &str| everything.field(name).expect("declared field");
    assert_eq!(field("text").index, Some(IndexKind::Default));
    assert_eq!(field("double").index, Some(IndexKind::BTree));
    assert_eq!(field("vec").index, Some(IndexKind::Vector));
    assert_eq!(
        field("small").range,
        Some(RangeBound {
            min: Some(Number::Int(-10)),
            max: Some(Number::Int(10))
        })
    );
    assert_eq!(
        field("real").range,
        Some(RangeBound {
            min: None,
            max: Some(Number::Float(2.5))
        })
    );
    assert_eq!(field("small").default, Some(DefaultValue::Int(-3)));
    assert_eq!(
        field("nested").ty,
        FieldType::List(Box::new(FieldType::List(Box::new(FieldType::I32))))
    );
    assert_eq!(
        field("mood").default,
        Some(DefaultValue::List(vec![
            DefaultValue::String("happy".into()),
            DefaultValue::String("sad".into())
        ]))
    );
    assert_eq!(
        field("escaped").default,
        Some(DefaultValue::String("say \"hi\"".into()))
    );
    assert_eq!(
        field("escaped").check.as_ref().map(|check| check.as_str()),
        Some(r"^\w+ ")
    );
    assert!(field("moment").nullable);

    let rated = catalog.get("Rated").expect("declared");
    assert_eq!(rated.kind, TypeKind::Edge);
    assert_eq!(rated.key.as_deref(), Some("review"));
    assert_eq!(
        rated.edge.as_ref().and_then(|ends| ends.card),
        Some(Cardinality { min: 1, max: None })
    );
    assert_eq!(rated.table_path(), "edges/Rated.lance");
    assert_eq!(
        catalog.get("Loose").and_then(|ty| ty.stream),
        Some(StreamOptions { shards: None })
    );
}

#[test]
fn edge_endpoints_may_be_declared_later() {
    let catalog = parse("edge E: A -> B\nnode A { k: String @key }\nnode B { k: I32 @key }");
    assert_eq!(catalog.types.len(), 3);
}

#[test]
fn empty_schema_is_an_empty_catalog() {
    assert!(parse("// nothing yet\n").types.is_empty());
}

/// Each case: a name, the source, and the variant it must produce. The messages are
/// snapshotted together so they can be reviewed side by side.
#[test]
fn schema_error_messages() {
    type Check = fn(&SchemaError) -> bool;
    let cases: &[(&str, &str, Check)] = &[
        (
            "bad token in type position",
            "node A {\n  k: String @key\n  age: @range(0..1)\n}",
            |e| matches!(e, SchemaError::Syntax { .. }),
        ),
        ("unknown type name", "node A { k: Strin @key }", |e| {
            matches!(e, SchemaError::Syntax { .. })
        }),
        ("stray character", "node A { k: String @key } #", |e| {
            matches!(e, SchemaError::Syntax { .. })
        }),
        (
            "unterminated string",
            "node A { k: String @key @check(\"abc) }",
            |e| matches!(e, SchemaError::Syntax { .. }),
        ),
        (
            "unknown annotation",
            "node A { k: String @key @primary }",
            |e| matches!(e, SchemaError::Syntax { .. }),
        ),
        ("missing key", "node A { name: String }", |e| {
            matches!(e, SchemaError::NodeKeyCount { .. })
        }),
        (
            "two keys on a node",
            "node A { a: String @key\n b: String @key }",
            |e| matches!(e, SchemaError::NodeKeyCount { .. }),
        ),
        (
            "two keys on an edge",
            "node A { k: String @key }\nedge E: A -> A { x: String @key\n y: I64 @key }",
            |e| matches!(e, SchemaError::EdgeKeyCount { .. }),
        ),
        ("nullable key", "node A { k: String? @key }", |e| {
            matches!(e, SchemaError::InvalidKey { .. })
        }),
        ("float key", "node A { k: F64 @key }", |e| {
            matches!(e, SchemaError::InvalidKey { .. })
        }),
        (
            "unknown endpoint type",
            "node Person { k: String @key }\nedge WorksAt: Person -> Compny",
            |e| matches!(e, SchemaError::UnknownEndpoint { .. }),
        ),
        (
            "edge as endpoint",
            "node A { k: String @key }\nedge E: A -> A\nedge F: A -> E",
            |e| matches!(e, SchemaError::UnknownEndpoint { .. }),
        ),
        (
            "reserved name id",
            "node A { k: String @key\n id: String }",
            |e| matches!(e, SchemaError::ReservedName { .. }),
        ),
        (
            "reserved underscore name",
            "node A { k: String @key\n _version: I64 }",
            |e| matches!(e, SchemaError::ReservedName { .. }),
        ),
        (
            "duplicate type",
            "node A { k: String @key }\nnode A { k: String @key }",
            |e| matches!(e, SchemaError::DuplicateType { .. }),
        ),
        (
            "duplicate field",
            "node A { k: String @key\n k: I32 }",
            |e| matches!(e, SchemaError::DuplicateField { .. }),
        ),
        (
            "default of the wrong type",
            "node A { k: String @key\n n: I32 = \"ten\" }",
            |e| matches!(e, SchemaError::BadDefault { .. }),
        ),
        (
            "default not an enum variant",
            "node A { k: String @key\n s: enum(on, off) = maybe }",
            |e| matches!(e, SchemaError::BadDefault { .. }),
        ),
        (
            "default outside its range",
            "node A { k: String @key\n n: I32 = 200 @range(0..150) }",
            |e| matches!(e, SchemaError::BadDefault { .. }),
        ),
        (
            "bare identifier default on a String",
            "node A { k: String @key\n s: String = hello }",
            |e| matches!(e, SchemaError::BadDefault { .. }),
        ),
        (
            "bad regex",
            "node A { k: String @key @check(\"[a-\") }",
            |e| matches!(e, SchemaError::BadRegex { .. }),
        ),
        (
            "range on a String",
            "node A { k: String @key @range(0..10) }",
            |e| matches!(e, SchemaError::MisplacedAnnotation { .. }),
        ),
        (
            "check on an integer",
            "node A { k: I64 @key @check(\"^1\") }",
            |e| matches!(e, SchemaError::MisplacedAnnotation { .. }),
        ),
        (
            "inverted range",
            "node A { k: String @key\n n: I32? @range(10..1) }",
            |e| matches!(e, SchemaError::BadBounds { .. }),
        ),
        (
            "float bound on an integer",
            "node A { k: String @key\n n: I32? @range(0..1.5) }",
            |e| matches!(e, SchemaError::BadBounds { .. }),
        ),
        (
            "zero-dimension vector",
            "node A { k: String @key\n v: Vector(0) }",
            |e| matches!(e, SchemaError::BadBounds { .. }),
        ),
        (
            "inverted cardinality",
            "node A { k: String @key }\nedge E: A -> A @card(3..1)",
            |e| matches!(e, SchemaError::BadBounds { .. }),
        ),
        (
            "zero shards",
            "node A @stream(shards = 0) { k: String @key }",
            |e| matches!(e, SchemaError::BadBounds { .. }),
        ),
        (
            "card on a node",
            "node A @card(0..1) { k: String @key }",
            |e| matches!(e, SchemaError::MisplacedAnnotation { .. }),
        ),
        (
            "embed of a missing field",
            "node A { k: String @key\n v: Vector(4)? @embed(bio) }",
            |e| matches!(e, SchemaError::BadEmbed { .. }),
        ),
        (
            "embed of a non-String field",
            "node A { k: String @key\n n: I32\n v: Vector(4)? @embed(n) }",
            |e| matches!(e, SchemaError::BadEmbed { .. }),
        ),
        (
            "embed into a required vector (it is filled at fold time)",
            "node A { k: String @key\n bio: String\n v: Vector(4) @embed(bio) }",
            |e| matches!(e, SchemaError::BadEmbed { .. }),
        ),
        (
            "duplicate annotation",
            "node A { k: String @key @key }",
            |e| matches!(e, SchemaError::DuplicateAnnotation { .. }),
        ),
        (
            "fts index on a number",
            "node A { k: String @key\n n: I32 @index(fts) }",
            |e| matches!(e, SchemaError::MisplacedAnnotation { .. }),
        ),
        ("missing closing brace", "node A { k: String @key", |e| {
            matches!(e, SchemaError::Syntax { .. })
        }),
    ];
    let mut report = String::new();
    for (name, source, is_expected_variant) in cases {
        let error = parse_error(source);
        assert!(
            is_expected_variant(&error),
            "{name}: unexpected variant {error:?}"
        );
        report.push_str(&format!("{name}:\n  {error}\n"));
    }
    insta::assert_snapshot!("schema_errors", report);
}

#[test]
fn error_positions_point_at_the_offending_token() {
    let error = parse_error("node Person {\n  name: String @key\n  age: @range(0..150)\n}");
    assert_eq!(
        error.to_string(),
        "line 3, column 8: expected a type (String, Bool, I32, I64, F32, F64, Date, DateTime, \
         Vector(n), [T], enum(..)), found '@'"
    );
    let position = error.position();
    assert_eq!((position.line, position.column), (3, 8));
}
