//! Property tests over hostile input: the schema parser and the NDJSON decoder take any
//! text — random, or a valid schema or line with bytes changed — without a panic, and every
//! refusal says where (a schema error's `line L, column C:`; a rejected line's number,
//! within the input, and a reason). Bounded so the whole file runs in seconds.

use proptest::prelude::*;

use crate::schema::Catalog;

/// Every kind of declaration, annotation and type the language has.
const SCHEMA: &str = r#"
node Person @stream {
  name: String @key
  age: I32? @range(0..150)
  status: enum(active, inactive) = active
  email: String? @unique @check("^[^@]+@[^@]+$")
  bio: String? @index(fts)
  score: F64 = 1.5
  born: Date?
  seen: DateTime?
  tags: [String]?
  embedding: Vector(8)? @embed(bio) @index
}
node Company { name: String @key }
edge WorksAt: Person -> Company @card(0..1) @stream { since: Date? }
edge Knows: Person -> Person @stream
"#;

/// Lines of every shape the decoder takes.
const LINES: [&str; 8] = [
    r#"{"type":"Person","data":{"name":"ada","age":36,"status":"inactive","email":"a@b.c","bio":"x","score":2.5,"born":"1990-01-02","seen":"2020-01-01T00:00:00Z","tags":["a"],"embedding":[1,2,3,4,5,6,7,8]}}"#,
    r#"{"type":"Company","data":{"name":"acme"}}"#,
    r#"{"edge":"WorksAt","from":"ada","to":"acme","data":{"since":"2020-05-01"}}"#,
    r#"{"edge":"Knows","from":"ada","to":"bob"}"#,
    r#"{"delete":"Person","key":"ada"}"#,
    r#"{"delete":"Knows","from":"ada","to":"bob"}"#,
    r#"{"type":"Person","patch":{"name":"ada","age":37}}"#,
    r#"{"type":"Person","data":{"name":"bob"}}"#,
];

/// `text` with each of `edits` applied: (where, what character, 0 insert / 1 replace / 2
/// delete), positions taken modulo the text's length in characters.
fn mutate(text: &str, edits: &[(usize, char, u8)]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for &(at, c, how) in edits {
        if chars.is_empty() {
            chars.push(c);
            continue;
        }
        let at = at % chars.len();
        match how % 3 {
            0 => chars.insert(at, c),
            1 => chars[at] = c,
            _ => {
                chars.remove(at);
            }
        }
    }
    chars.into_iter().collect()
}

/// Characters that matter to the grammars more often than chance would pick them.
fn interesting() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => prop::sample::select(vec![
            '{', '}', '(', ')', '<', '>', ':', ',', '.', '@', '?', '=', '"', '\\', '-', '[',
            ']', '0', '9', '\n', ' ', 'e', '\u{feff}', '\u{0}', 'é',
        ]),
        1 => any::<char>(),
    ]
}

fn edits() -> impl Strategy<Value = Vec<(usize, char, u8)>> {
    prop::collection::vec((any::<usize>(), interesting(), any::<u8>()), 1..8)
}

fn check_schema(text: &str) {
    if let Err(error) = Catalog::parse(text) {
        let message = error.to_string();
        assert!(message.starts_with("line "), "no position: {message}");
    }
}

fn check_lines(catalog: &Catalog, text: &str) {
    let decoded = crate::decode_str(catalog, text);
    let lines = text.lines().count() as u64;
    let mut last = 0;
    for reject in &decoded.rejects {
        assert!(
            (1..=lines).contains(&reject.line),
            "line {} of {lines}: {reject}",
            reject.line
        );
        assert!(reject.line >= last, "rejects in line order");
        last = reject.line;
        assert!(
            !reject.reason.trim().is_empty(),
            "an empty reason: {reject:?}"
        );
    }
    for batch in &decoded.batches {
        assert_eq!(batch.batch.num_rows(), batch.lines.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn the_parser_refuses_any_text_with_a_position(text in ".{0,200}") {
        check_schema(&text);
    }

    #[test]
    fn the_parser_refuses_a_damaged_schema_with_a_position(edits in edits()) {
        check_schema(&mutate(SCHEMA, &edits));
    }

    #[test]
    fn the_decoder_rejects_any_line_by_its_number(text in "(.{0,80}\n){0,4}") {
        let catalog = Catalog::parse(SCHEMA).unwrap();
        check_lines(&catalog, &text);
    }

    #[test]
    fn the_decoder_rejects_damaged_lines_by_their_number(
        line in 0..LINES.len(),
        edits in edits(),
    ) {
        let catalog = Catalog::parse(SCHEMA).unwrap();
        let damaged = mutate(LINES[line], &edits);
        let text = format!("{}\n{damaged}\n{}\n", LINES[0], LINES[1]);
        check_lines(&catalog, &text);
    }

    #[test]
    fn the_decoder_takes_any_json_value_as_a_field(value in json_value(), field in 0..10usize) {
        let catalog = Catalog::parse(SCHEMA).unwrap();
        let names = ["name", "age", "status", "email", "bio", "score", "born", "seen", "tags", "embedding"];
        let mut data = serde_json::json!({"name": "ada"});
        data[names[field]] = value;
        let line = serde_json::json!({"type": "Person", "data": data}).to_string();
        check_lines(&catalog, &line);
    }
}

/// JSON values of every kind, nested a little, with the numbers that break conversions.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        prop::sample::select(vec![
            i64::MIN,
            -1,
            0,
            1,
            149,
            150,
            151,
            i32::MAX as i64 + 1,
            i64::MAX,
        ])
        .prop_map(serde_json::Value::from),
        prop::sample::select(vec![f64::MIN, -0.0, 1e-300, 1.5, 1e300, f64::MAX])
            .prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        ".{0,12}".prop_map(serde_json::Value::from),
        prop::sample::select(vec![
            "2020-02-30",
            "1990-01-02",
            "0000-01-01",
            "2020-01-01T25:00:00Z",
            "active",
            "",
        ])
        .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..10).prop_map(serde_json::Value::from),
            prop::collection::btree_map(".{0,4}", inner, 0..3)
                .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
        ]
    })
}
