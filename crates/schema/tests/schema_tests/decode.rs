//! NDJSON decoding: a valid mixed batch, then one test per rejection reason.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType,
};
use arrow_array::{Array, RecordBatch};
use tributary_schema::{decode_str, Catalog, Decoded, Decoder, LineError};

const SCHEMA: &str = r#"
node Person @stream {
  name: String @key
  age: I32? @range(0..150)
  status: enum(active, inactive) = active
  email: String? @unique @check("^[^@]+@[^@]+$")
  bio: String? @index(fts)
  embedding: Vector(3)? @embed(bio)
  tags: [String]?
  scores: [I64] = []
  joined: DateTime?
  weight: F64? @range(0.0..)
  verified: Bool = false
  visits: I64?
}
node Company { name: String @key  founded: Date? }
node Account { number: I64 @key }
edge WorksAt: Person -> Company @card(0..1) @stream { since: Date? }
edge Knows: Person -> Person @stream
edge Rated: Person -> Company { review: String @key  stars: I32 @range(1..5) }
"#;

fn catalog() -> Catalog {
    Catalog::parse(SCHEMA).expect("test schema parses")
}

fn batch<'d>(decoded: &'d Decoded, type_name: &str) -> &'d RecordBatch {
    &decoded
        .batch(type_name)
        .unwrap_or_else(|| panic!("no batch for {type_name}"))
        .batch
}

fn strings(batch: &RecordBatch, column: &str) -> Vec<Option<String>> {
    let array = batch.column_by_name(column).expect("column exists");
    array
        .as_string::<i32>()
        .iter()
        .map(|value| value.map(str::to_owned))
        .collect()
}

fn some(values: &[&str]) -> Vec<Option<String>> {
    values
        .iter()
        .map(|value| Some((*value).to_owned()))
        .collect()
}

#[test]
fn valid_mixed_batch() {
    let text = [
        r#"{"type":"Person","data":{"name":"ada","age":36,"email":"ada@x.io","bio":"math","embedding":[0.5,1,-2],"tags":["a",null],"scores":[1,2,3],"joined":"2024-05-01T12:00:00+02:00","weight":55,"verified":true,"visits":9007199254740993}}"#,
        "",
        r#"{"type":"Person","data":{"name":"bob","status":"inactive","age":null,"tags":null}}"#,
        r#"{"type":"Company","data":{"name":"acme","founded":"1999-12-31"}}"#,
        r#"{"edge":"WorksAt","from":"ada","to":"acme","data":{"since":"2020-01-01"}}"#,
        r#"{"edge":"Knows","from":"ada","to":"bob"}"#,
        r#"{"edge":"Rated","from":"bob","to":"acme","from_type":"Person","to_type":"Company","data":{"review":"r-1","stars":5}}"#,
        r#"{"type":"Account","data":{"number":42}}"#,
        r#"  {"data":{"name":"c\u00e9line"},"type":"Person"}  "#,
    ]
    .join("\n");
    let catalog = catalog();
    let decoded = decode_str(&catalog, &text);
    assert_eq!(decoded.rejects, vec![]);
    assert_eq!(decoded.row_count(), 8);

    // One batch per type, declaration order, each with exactly the declared schema.
    let order: Vec<&str> = decoded
        .batches
        .iter()
        .map(|b| b.type_name.as_str())
        .collect();
    assert_eq!(
        order,
        ["Person", "Company", "Account", "WorksAt", "Knows", "Rated"]
    );
    for type_batch in &decoded.batches {
        let def = catalog.get(&type_batch.type_name).expect("declared");
        assert_eq!(type_batch.batch.schema(), def.arrow_schema());
    }

    let people = batch(&decoded, "Person");
    assert_eq!(
        decoded.batch("Person").map(|b| b.lines.clone()),
        Some(vec![1, 3, 9])
    );
    assert_eq!(strings(people, "id"), some(&["ada", "bob", "céline"]));
    assert_eq!(strings(people, "name"), some(&["ada", "bob", "céline"]));
    let ages = people
        .column_by_name("age")
        .expect("age")
        .as_primitive::<Int32Type>();
    assert_eq!(ages.iter().collect::<Vec<_>>(), [Some(36), None, None]);
    // Absent → default; the default does not replace an explicit value.
    assert_eq!(
        strings(people, "status"),
        some(&["active", "inactive", "active"])
    );
    assert_eq!(
        strings(people, "email"),
        [Some("ada@x.io".to_owned()), None, None]
    );

    let embeddings = people
        .column_by_name("embedding")
        .expect("embedding")
        .as_fixed_size_list();
    assert!(embeddings.is_valid(0) && embeddings.is_null(1) && embeddings.is_null(2));
    let first = embeddings.value(0);
    let first: Vec<f32> = first.as_primitive::<Float32Type>().values().to_vec();
    assert_eq!(first, [0.5, 1.0, -2.0]);

    let tags = people
        .column_by_name("tags")
        .expect("tags")
        .as_list::<i32>();
    assert!(tags.is_valid(0) && tags.is_null(1) && tags.is_null(2));
    let first_tags = tags.value(0);
    let first_tags: Vec<Option<&str>> = first_tags.as_string::<i32>().iter().collect();
    assert_eq!(first_tags, [Some("a"), None]);

    let scores = people
        .column_by_name("scores")
        .expect("scores")
        .as_list::<i32>();
    assert_eq!(scores.null_count(), 0);
    let lengths: Vec<usize> = (0..3).map(|row| scores.value(row).len()).collect();
    assert_eq!(lengths, [3, 0, 0]); // `= []` default for the absent rows
    assert_eq!(
        scores
            .value(0)
            .as_primitive::<Int64Type>()
            .values()
            .to_vec(),
        [1, 2, 3]
    );

    let joined = people.column_by_name("joined").expect("joined");
    let joined = joined.as_primitive::<TimestampMicrosecondType>();
    // 2024-05-01T12:00:00+02:00 is 10:00 UTC.
    assert_eq!(joined.value(0), 1_714_557_600_000_000);
    assert!(joined.is_null(1));
    let weights = people
        .column_by_name("weight")
        .expect("weight")
        .as_primitive::<Float64Type>();
    assert_eq!(weights.iter().collect::<Vec<_>>(), [Some(55.0), None, None]);
    let verified = people
        .column_by_name("verified")
        .expect("verified")
        .as_boolean();
    assert_eq!(
        verified.iter().collect::<Vec<_>>(),
        [Some(true), Some(false), Some(false)]
    );
    let visits = people
        .column_by_name("visits")
        .expect("visits")
        .as_primitive::<Int64Type>();
    assert_eq!(visits.value(0), 9_007_199_254_740_993); // beyond f64 precision: kept exact

    let companies = batch(&decoded, "Company");
    let founded = companies.column_by_name("founded").expect("founded");
    assert_eq!(founded.as_primitive::<Date32Type>().value(0), 10_956); // 1999-12-31

    // An I64 key becomes its decimal string form.
    assert_eq!(strings(batch(&decoded, "Account"), "id"), some(&["42"]));

    let works_at = batch(&decoded, "WorksAt");
    assert_eq!(strings(works_at, "id"), some(&["ada->acme"]));
    assert_eq!(strings(works_at, "src"), some(&["ada"]));
    assert_eq!(strings(works_at, "dst"), some(&["acme"]));
    let since = works_at.column_by_name("since").expect("since");
    assert_eq!(since.as_primitive::<Date32Type>().value(0), 18_262); // 2020-01-01

    // No body, no data: just the system columns.
    let knows = batch(&decoded, "Knows");
    assert_eq!(knows.num_columns(), 3);
    assert_eq!(strings(knows, "id"), some(&["ada->bob"]));

    // An edge with its own @key uses it as id.
    let rated = batch(&decoded, "Rated");
    assert_eq!(strings(rated, "id"), some(&["r-1"]));
    let stars = rated
        .column_by_name("stars")
        .expect("stars")
        .as_primitive::<Int32Type>();
    assert_eq!(stars.value(0), 5);
}

#[test]
fn decoder_is_reusable_after_finish() {
    let catalog = catalog();
    let mut decoder = Decoder::new(&catalog);
    decoder.push_line(1, r#"{"type":"Person","data":{"name":"ada"}}"#);
    decoder.push_line(2, r#"{"type":"Person","data":{"name":""}}"#);
    assert_eq!(decoder.buffered_rows(), 1);
    let first = decoder.finish();
    assert_eq!((first.row_count(), first.rejects.len()), (1, 1));
    assert_eq!(decoder.buffered_rows(), 0);

    decoder.push_line(10, r#"{"type":"Company","data":{"name":"acme"}}"#);
    let second = decoder.finish();
    assert_eq!(second.rejects, vec![]);
    let order: Vec<&str> = second
        .batches
        .iter()
        .map(|b| b.type_name.as_str())
        .collect();
    assert_eq!(order, ["Company"]);
    assert_eq!(second.batches[0].lines, [10]);
    assert!(decoder.finish().batches.is_empty());
}

#[test]
fn rejects_are_reported_in_line_order() {
    let catalog = catalog();
    let mut decoder = Decoder::new(&catalog);
    decoder.push_line(5, "{");
    decoder.push_line(2, "[]");
    let lines: Vec<u64> = decoder.finish().rejects.iter().map(|r| r.line).collect();
    assert_eq!(lines, [2, 5]);
}

#[test]
fn line_error_display() {
    let with_field = LineError {
        line: 7,
        field: Some("age".into()),
        reason: "200 is outside @range(0..150)".into(),
    };
    assert_eq!(
        with_field.to_string(),
        "line 7, field `age`: 200 is outside @range(0..150)"
    );
    let decoded = decode_str(&catalog(), "\n\n{\"type\":");
    assert_eq!(
        decoded.rejects[0].to_string(),
        "line 3: malformed JSON: EOF while parsing a value at column 8"
    );
}

/// Decode `bad` between two valid lines and check it is the only reject, with the given
/// field and reason, and that it contributed no row while the others did.
fn assert_rejected(bad: &str, field: Option<&str>, reason: &str) {
    let text = format!(
        "{}\n{bad}\n{}",
        r#"{"type":"Person","data":{"name":"ada"}}"#, r#"{"edge":"Knows","from":"ada","to":"bob"}"#
    );
    let decoded = decode_str(&catalog(), &text);
    let expected = LineError {
        line: 2,
        field: field.map(str::to_owned),
        reason: reason.to_owned(),
    };
    assert_eq!(decoded.rejects, vec![expected]);
    let mut lines: Vec<u64> = decoded
        .batches
        .iter()
        .flat_map(|b| b.lines.clone())
        .collect();
    lines.sort_unstable();
    assert_eq!(lines, [1, 3], "only the valid lines produce rows");
    assert_eq!(decoded.row_count(), 2);
}

/// One `#[test]` per rejection reason: `name: line => field, reason;`
macro_rules! rejection_tests {
    ($($name:ident: $line:expr => $field:expr, $reason:expr;)*) => {
        $(
            #[test]
            fn $name() {
                assert_rejected($line, $field, $reason);
            }
        )*
    };
}

rejection_tests! {
    malformed_json: r#"{"type":"Person","data":{"name":"x"}"# => None,
        "malformed JSON: EOF while parsing an object at column 36";
    trailing_garbage: r#"{"type":"Person","data":{"name":"x"}} x"# => None,
        "malformed JSON: trailing characters at column 39";
    not_an_object: r#"["Person"]"# => None, "expected a JSON object, found array of 1 item";
    neither_type_nor_edge: r#"{"data":{"name":"x"}}"# => None,
        r#"expected a "type" (node) or "edge" (edge) key naming the row's type"#;
    both_type_and_edge: r#"{"type":"Person","edge":"Knows"}"# => None,
        r#"a line has "type" (a node) or "edge" (an edge), not both"#;
    type_not_a_string: r#"{"type":5}"# => None, r#""type" must be a type name string, found number 5"#;
    unknown_type: r#"{"type":"Persn","data":{"name":"x"}}"# => None,
        r#"unknown type `Persn` (did you mean `Person`? known types: Person, Company, Account, WorksAt, Knows, Rated)"#;
    node_type_used_as_edge: r#"{"edge":"Person","from":"a","to":"b"}"# => None,
        r#"Person is a node type: write {"type": "Person", ...}, not "edge""#;
    edge_type_used_as_node: r#"{"type":"Knows","data":{}}"# => None,
        r#"Knows is an edge type: write {"edge": "Knows", "from": ..., "to": ...}, not "type""#;
    unknown_envelope_key: r#"{"type":"Person","dat":{"name":"x"}}"# => None,
        r#"unknown key `dat` (expected type, edge, from, to, from_type, to_type, data, patch, delete, key)"#;
    edge_key_on_a_node: r#"{"type":"Person","from":"x","data":{"name":"x"}}"# => None,
        r#""from" only applies to edges, but Person is a node type"#;
    data_not_an_object: r#"{"type":"Person","data":["x"]}"# => None,
        r#""data" must be an object, found array of 1 item"#;
    unknown_field: r#"{"type":"Person","data":{"name":"x","nmae":"y"}}"# => Some("nmae"),
        "unknown field (did you mean `name`? Person has: name, age, status, email, bio, embedding, tags, scores, joined, weight, verified, visits)";
    field_given_twice: r#"{"type":"Person","data":{"name":"x","name":"y"}}"# => Some("name"),
        "field appears twice";
    wrong_json_type: r#"{"type":"Person","data":{"name":"x","age":"36"}}"# => Some("age"),
        r#"expected I32, found string "36""#;
    fraction_for_an_integer: r#"{"type":"Person","data":{"name":"x","age":36.5}}"# => Some("age"),
        "expected I32, found number 36.5";
    i32_overflow: r#"{"type":"Person","data":{"name":"x","age":3000000000}}"# => Some("age"),
        "3000000000 overflows I32";
    i64_overflow: r#"{"type":"Person","data":{"name":"x","visits":18446744073709551615}}"# => Some("visits"),
        "18446744073709551615 overflows I64";
    out_of_range: r#"{"type":"Person","data":{"name":"x","age":200}}"# => Some("age"),
        "200 is outside @range(0..150)";
    float_out_of_range: r#"{"type":"Person","data":{"name":"x","weight":-0.5}}"# => Some("weight"),
        "-0.5 is outside @range(0.0..)";
    regex_mismatch: r#"{"type":"Person","data":{"name":"x","email":"nope"}}"# => Some("email"),
        r#""nope" does not match @check("^[^@]+@[^@]+$")"#;
    bad_enum_value: r#"{"type":"Person","data":{"name":"x","status":"zombie"}}"# => Some("status"),
        r#"expected one of active, inactive, found "zombie""#;
    missing_required_field: r#"{"edge":"Rated","from":"a","to":"b","data":{"review":"r"}}"# => Some("stars"),
        "required field is missing or null (expected I32)";
    null_for_required_field: r#"{"type":"Person","data":{"name":"x","status":null}}"# => Some("status"),
        "required field is missing or null (expected enum(active, inactive))";
    missing_node_key: r#"{"type":"Person","data":{"age":3}}"# => Some("name"),
        "required field is missing or null (expected String)";
    missing_data_with_required_fields: r#"{"type":"Person"}"# => Some("name"),
        "required field is missing or null (expected String)";
    empty_node_key: r#"{"type":"Person","data":{"name":""}}"# => Some("name"), "key must not be empty";
    bad_date: r#"{"type":"Company","data":{"name":"c","founded":"1999-02-30"}}"# => Some("founded"),
        r#""1999-02-30" is not a valid Date (expected YYYY-MM-DD)"#;
    bad_datetime: r#"{"type":"Person","data":{"name":"x","joined":"yesterday"}}"# => Some("joined"),
        r#""yesterday" is not a valid DateTime (expected RFC 3339, e.g. 2024-05-01T12:00:00Z)"#;
    wrong_vector_length: r#"{"type":"Person","data":{"name":"x","embedding":[1,2]}}"# => Some("embedding"),
        "expected Vector(3) with 3 numbers, found 2";
    non_number_in_vector: r#"{"type":"Person","data":{"name":"x","embedding":[1,"x",3]}}"# => Some("embedding"),
        r#"element 1: expected a number, found string "x""#;
    wrong_list_item_type: r#"{"type":"Person","data":{"name":"x","tags":["a",1]}}"# => Some("tags"),
        "item 1: expected String, found number 1";
    list_given_a_scalar: r#"{"type":"Person","data":{"name":"x","tags":"a"}}"# => Some("tags"),
        r#"expected [String], found string "a""#;
    missing_from: r#"{"edge":"Knows","to":"bob"}"# => Some("from"),
        r#"missing "from" (the key of the edge's node)"#;
    empty_to: r#"{"edge":"Knows","from":"ada","to":""}"# => Some("to"),
        r#"expected a non-empty node key string, found string """#;
    non_string_from: r#"{"edge":"Knows","from":5,"to":"bob"}"# => Some("from"),
        "expected a non-empty node key string, found number 5";
    wrong_endpoint_types: r#"{"edge":"WorksAt","from":"ada","to":"acme","from_type":"Company"}"# => None,
        "edge WorksAt connects Person -> Company, not Company -> Company";
    missing_edge_required_field: r#"{"edge":"Rated","from":"a","to":"b"}"# => Some("review"),
        "required field is missing or null (expected String)";
}

#[test]
fn defaults_of_every_kind_fill_absent_fields() {
    let catalog = Catalog::parse(
        r#"
        node Thing {
            key: I64 @key
            day: Date = "2024-02-29"
            moment: DateTime = "2024-02-29T12:00:00+02:00"
            vec: Vector(2) = [0, 1.5]
            nested: [[I32]] = [[1, 2], []]
            moods: [enum(happy, sad)] = [happy, sad]
            ratio: F32 = 1
        }
        "#,
    )
    .expect("schema parses");
    // The escaped member name still matches the field `key`.
    let decoded = decode_str(
        &catalog,
        "{\"type\":\"Thing\",\"data\":{\"k\\u0065y\":-7}}\n\
         {\"type\":\"Thing\",\"data\":{\"key\":8,\"moods\":[\"happy\",\"meh\"]}}\n\
         {\"type\":\"Thing\",\"data\":{\"key\":9,\"ratio\":1e39}}",
    );
    assert_eq!(
        decoded.rejects,
        vec![
            LineError {
                line: 2,
                field: Some("moods".into()),
                reason: r#"item 1: expected one of happy, sad, found "meh""#.into(),
            },
            LineError {
                line: 3,
                field: Some("ratio".into()),
                reason: "1e39 overflows F32".into(),
            },
        ]
    );
    let things = batch(&decoded, "Thing");
    assert_eq!(
        things.schema(),
        catalog.get("Thing").expect("declared").arrow_schema()
    );
    assert_eq!(strings(things, "id"), some(&["-7"]));
    let day = things
        .column_by_name("day")
        .expect("day")
        .as_primitive::<Date32Type>();
    assert_eq!(day.value(0), 19_782); // 2024-02-29
    let moment = things.column_by_name("moment").expect("moment");
    assert_eq!(
        moment.as_primitive::<TimestampMicrosecondType>().value(0),
        1_709_200_800_000_000
    );
    let vec = things
        .column_by_name("vec")
        .expect("vec")
        .as_fixed_size_list()
        .value(0);
    assert_eq!(
        vec.as_primitive::<Float32Type>().values().to_vec(),
        [0.0, 1.5]
    );
    let nested = things
        .column_by_name("nested")
        .expect("nested")
        .as_list::<i32>()
        .value(0);
    let nested = nested.as_list::<i32>();
    assert_eq!(nested.len(), 2);
    assert_eq!(
        nested
            .value(0)
            .as_primitive::<Int32Type>()
            .values()
            .to_vec(),
        [1, 2]
    );
    assert_eq!(nested.value(1).len(), 0);
    let moods = things
        .column_by_name("moods")
        .expect("moods")
        .as_list::<i32>()
        .value(0);
    let moods: Vec<Option<&str>> = moods.as_string::<i32>().iter().collect();
    assert_eq!(moods, [Some("happy"), Some("sad")]);
    let ratio = things
        .column_by_name("ratio")
        .expect("ratio")
        .as_primitive::<Float32Type>();
    assert_eq!(ratio.value(0), 1.0);
}

#[test]
fn edge_ids_of_different_endpoints_never_collide() {
    use tributary_schema::edge_id;
    assert_eq!(
        edge_id("ada", "bob"),
        "ada->bob",
        "plain keys keep the plain id"
    );
    assert_ne!(edge_id("a", "b->c"), edge_id("a->b", "c"));
    // Every pair of keys up to three characters over the characters that matter.
    let alphabet = ['a', '-', '>', '\\'];
    let mut keys = vec![String::new()];
    for _ in 0..3 {
        let longer: Vec<String> = keys
            .iter()
            .flat_map(|k| alphabet.iter().map(move |c| format!("{k}{c}")))
            .collect();
        keys.extend(longer);
    }
    keys.sort();
    keys.dedup();
    let mut seen = std::collections::HashMap::new();
    for src in &keys {
        for dst in &keys {
            if let Some(other) = seen.insert(edge_id(src, dst), (src.clone(), dst.clone())) {
                panic!(
                    "{src:?}->{dst:?} and {other:?} share the id {}",
                    edge_id(src, dst)
                );
            }
        }
    }
}

/// Delete lines decode to the ids they name (an edge without `@key` by its ends, as its
/// rows' ids are made), in line order, and count as no rows.
#[test]
fn delete_lines_name_ids() {
    let text = [
        r#"{"delete":"Person","key":"ada"}"#,
        r#"{"delete":"Knows","from":"ada","to":"b->c"}"#,
        r#"{"type":"Person","data":{"name":"bob"}}"#,
        r#"{"delete":"Person","key":"cy"}"#,
    ]
    .join("\n");
    let decoded = decode_str(&catalog(), &text);
    assert!(decoded.rejects.is_empty(), "{:?}", decoded.rejects);
    assert_eq!(decoded.row_count(), 1);
    let deletes: Vec<(&str, Vec<String>, Vec<u64>)> = decoded
        .deletes
        .iter()
        .map(|d| (d.type_name.as_str(), d.ids.clone(), d.lines.clone()))
        .collect();
    assert_eq!(
        deletes,
        [
            (
                "Person",
                vec!["ada".to_owned(), "cy".to_owned()],
                vec![1, 4]
            ),
            (
                "Knows",
                vec![tributary_schema::edge_id("ada", "b->c")],
                vec![2]
            ),
        ]
    );
}

/// Patch lines decode to the key and the fields they set (no defaults, nothing required),
/// each field checked as in a whole row.
#[test]
fn patch_lines_set_only_the_fields_they_name() {
    let text = [
        r#"{"type":"Person","patch":{"name":"ada","age":31}}"#,
        r#"{"type":"Person","patch":{"name":"ada","email":null}}"#,
        r#"{"edge":"WorksAt","from":"ada","to":"acme","patch":{"since":"2020-01-01"}}"#,
    ]
    .join("\n");
    let decoded = decode_str(&catalog(), &text);
    assert!(decoded.rejects.is_empty(), "{:?}", decoded.rejects);
    assert_eq!(decoded.row_count(), 0, "a patch is not a whole row");
    let people = &decoded.patches[0];
    assert_eq!(people.rows.type_name, "Person");
    assert_eq!(people.rows.lines, [1, 2]);
    assert_eq!(strings(&people.rows.batch, "id"), some(&["ada", "ada"]));
    let fields: Vec<&str> = ["name", "age", "status", "email"].into();
    let person = catalog().get("Person").unwrap().clone();
    let index = |name: &str| person.fields.iter().position(|f| f.name == name).unwrap();
    let set =
        |row: usize| -> Vec<bool> { fields.iter().map(|f| people.set[row][index(f)]).collect() };
    assert_eq!(
        set(0),
        [true, true, false, false],
        "status keeps its row's value"
    );
    assert_eq!(
        set(1),
        [true, false, false, true],
        "null is a value a patch sets"
    );
    let status = people.rows.batch.column_by_name("status").unwrap();
    assert!(status.is_null(0), "no default in a patch");
    let works = &decoded.patches[1];
    assert_eq!(strings(&works.rows.batch, "id"), some(&["ada->acme"]));
}

#[test]
fn bad_patch_lines_name_their_line_and_field() {
    let text = [
        r#"{"type":"Person","patch":{"age":31}}"#,
        r#"{"type":"Person","patch":{"name":"ada","age":"old"}}"#,
        r#"{"type":"Person","patch":{"name":"ada","verified":null}}"#,
        r#"{"type":"Person","patch":{"name":"ada","nope":1}}"#,
        r#"{"type":"Person","patch":{"name":"ada"},"data":{"name":"ada"}}"#,
        r#"{"type":"Person","patch":[1]}"#,
        r#"{"delete":"Person","key":"ada","patch":{}}"#,
    ]
    .join("\n");
    let decoded = decode_str(&catalog(), &text);
    let got: Vec<(u64, Option<&str>)> = decoded
        .rejects
        .iter()
        .map(|e| (e.line, e.field.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (1, Some("name")),
            (2, Some("age")),
            (3, Some("verified")),
            (4, Some("nope")),
            (5, None),
            (6, None),
            (7, None),
        ],
        "{:?}",
        decoded.rejects
    );
    assert!(decoded.rejects[2]
        .reason
        .contains("cannot set a required field to null"));
    assert!(decoded.patches.is_empty());
}
