//! The query table: each construct of the subset on a small graph held in memory, with
//! the rows it must answer; every refusal with its message. (Lance-backed tables, fresh
//! reads, branches and commits are the workspace tests'.)

use std::sync::Arc;

use arrow_array::{ArrayRef, Int32Array, RecordBatch, StringArray};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::datasource::MemTable;
use serde_json::json;
use tributary_schema::Catalog;

use crate::{prepare, Language, Params, Tables};

/// Prepare and run, as the engine does.
async fn run(
    tables: &Tables,
    language: Language,
    text: &str,
    catalog: &Catalog,
    params: &Params,
    max_rows: Option<usize>,
) -> crate::Result<RecordBatch> {
    let compiled = prepare(language, text, catalog, params)?;
    crate::run(tables, &compiled, max_rows).await
}

/// Prepare and explain.
async fn explain(
    tables: &Tables,
    language: Language,
    text: &str,
    catalog: &Catalog,
    params: &Params,
) -> crate::Result<RecordBatch> {
    let compiled = prepare(language, text, catalog, params)?;
    crate::explain(tables, &compiled).await
}

const SCHEMA: &str = "
node Person { name: String @key  age: I32? }
node Company { name: String @key }
edge Knows: Person -> Person { since: I32? }
edge WorksAt: Person -> Company
";

fn strings(values: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

fn graph() -> (Catalog, Tables) {
    graph_of(Tables::new())
}

fn graph_of(tables: Tables) -> (Catalog, Tables) {
    let catalog = Catalog::parse(SCHEMA).expect("the test schema parses");
    let people = ["ada", "bob", "cy", "dee", "eve"];
    let ages = Int32Array::from(vec![Some(36), Some(41), Some(29), None, Some(50)]);
    let companies = ["acme", "globex"];
    let knows = [
        ("ada", "bob", Some(2010)),
        ("ada", "cy", Some(2020)),
        ("bob", "cy", None),
        ("cy", "dee", None),
        ("dee", "ada", None),
        ("eve", "ada", None),
    ];
    let works = [("ada", "acme"), ("bob", "acme"), ("cy", "globex")];
    let edge_ids = |pairs: &[(&str, &str)]| -> Vec<String> {
        pairs.iter().map(|(s, d)| format!("{s}->{d}")).collect()
    };
    let knows_pairs: Vec<(&str, &str)> = knows.iter().map(|(s, d, _)| (*s, *d)).collect();
    let batches: Vec<(&str, Vec<ArrayRef>)> = vec![
        (
            "Person",
            vec![strings(&people), strings(&people), Arc::new(ages)],
        ),
        ("Company", vec![strings(&companies), strings(&companies)]),
        (
            "Knows",
            vec![
                Arc::new(StringArray::from(edge_ids(&knows_pairs))),
                strings(&knows_pairs.iter().map(|p| p.0).collect::<Vec<_>>()),
                strings(&knows_pairs.iter().map(|p| p.1).collect::<Vec<_>>()),
                Arc::new(Int32Array::from(
                    knows.iter().map(|k| k.2).collect::<Vec<_>>(),
                )),
            ],
        ),
        (
            "WorksAt",
            vec![
                Arc::new(StringArray::from(edge_ids(&works))),
                strings(&works.iter().map(|p| p.0).collect::<Vec<_>>()),
                strings(&works.iter().map(|p| p.1).collect::<Vec<_>>()),
            ],
        ),
    ];
    for (name, columns) in batches {
        let schema = catalog.get(name).expect("declared").arrow_schema();
        let batch = RecordBatch::try_new(schema.clone(), columns).expect("rows fit the schema");
        let table = MemTable::try_new(schema, vec![vec![batch]]).expect("a table");
        tables.register(name, Arc::new(table)).expect("registered");
    }
    (catalog, tables)
}

/// Each row as `a|b|c`.
fn lines(batch: &RecordBatch) -> Vec<String> {
    let options = FormatOptions::default().with_null("null");
    let formatters: Vec<ArrayFormatter> = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("formattable"))
        .collect();
    (0..batch.num_rows())
        .map(|row| {
            formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

async fn ask(language: Language, text: &str, params: &Params) -> crate::Result<Vec<String>> {
    ask_of(Tables::new(), language, text, params).await
}

async fn ask_of(
    tables: Tables,
    language: Language,
    text: &str,
    params: &Params,
) -> crate::Result<Vec<String>> {
    let (catalog, tables) = graph_of(tables);
    let batch = run(&tables, language, text, &catalog, params, Some(1000)).await?;
    Ok(lines(&batch))
}

/// Queries and their rows: in order when the query orders them, sorted otherwise.
const CYPHER: &[(&str, &[&str])] = &[
    ("MATCH (p:Person) WHERE p.age > 30 RETURN p.name ORDER BY p.name", &["ada", "bob", "eve"]),
    ("MATCH (a:Person {name: 'ada'})-[:Knows]->(b) RETURN b.name", &["bob", "cy"]),
    ("MATCH (a:Person {name: 'ada'})-[:Knows]->()-[:Knows]->(c) RETURN c.name", &["cy", "dee"]),
    ("MATCH (a:Person {name: 'ada'})-[:Knows*1..2]->(c) RETURN DISTINCT c.name", &["bob", "cy", "dee"]),
    ("MATCH (a:Person {name: 'ada'})-[:Knows*2]->(c) RETURN c.name", &["cy", "dee"]),
    ("MATCH (a:Person {name: 'eve'})-[:Knows*0..1]->(b) RETURN b.name", &["ada", "eve"]),
    ("MATCH (a:Person {name: 'ada'})<-[:Knows]-(b) RETURN b.name", &["dee", "eve"]),
    ("MATCH (a:Person {name: 'ada'})-[:Knows]-(b) RETURN b.name", &["bob", "cy", "dee", "eve"]),
    // Trail semantics: the walk back over the edge it came by is not a path.
    ("MATCH (a:Person {name: 'eve'})-[:Knows]-(b)-[:Knows]-(c) RETURN c.name", &["bob", "cy", "dee"]),
    ("MATCH (p:Person)-[:WorksAt]->(c:Company) RETURN c.name, count(*) AS n ORDER BY n DESC, c.name", &["acme|2", "globex|1"]),
    ("MATCH (p:Person)-[:WorksAt]->(c:Company {name: 'acme'}) RETURN size(collect(p.name)) AS people", &["2"]),
    ("MATCH (p:Person) WHERE p.age IS NULL RETURN p.name", &["dee"]),
    ("MATCH (p:Person) WHERE p.age IS NOT NULL AND p.name IN ['ada', 'eve', 'zed'] RETURN p.name", &["ada", "eve"]),
    ("MATCH (p:Person) WHERE p.name STARTS WITH 'd' OR p.name CONTAINS 'v' RETURN p.name", &["dee", "eve"]),
    ("MATCH (p:Person) WHERE p.name ENDS WITH 'y' XOR p.age > 40 RETURN p.name", &["bob", "cy", "eve"]),
    ("MATCH (p:Person) WHERE NOT p.age > 30 RETURN p.name", &["cy"]),
    ("MATCH (p:Person) RETURN p.name ORDER BY p.name SKIP 1 LIMIT 2", &["bob", "cy"]),
    ("MATCH (p:Person) WHERE p.age IS NOT NULL RETURN p.name ORDER BY p.age DESC LIMIT 1", &["eve"]),
    ("MATCH (a:Person)-[:WorksAt]->(c:Company), (b:Person)-[:WorksAt]->(c) WHERE a.name < b.name RETURN a.name, b.name", &["ada|bob"]),
    ("MATCH (a:Person {name: 'ada'}) MATCH (a)-[:WorksAt]->(c) RETURN c.name", &["acme"]),
    ("MATCH (c:Company {name: 'acme'}) RETURN c", &["acme"]),
    ("MATCH (p:Person {name: 'dee'}) RETURN p", &["dee|null"]),
    ("MATCH (a:Person)-[k:Knows]->(b:Person) WHERE k.since > 2015 RETURN a.name, b.name, k.since", &["ada|cy|2020"]),
    ("MATCH (a:Person {name: 'ada'})-[k:Knows]->(b:Person) RETURN k ORDER BY k.src, k.dst", &["ada|bob|2010", "ada|cy|2020"]),
    ("MATCH (p:Person) RETURN min(p.age), max(p.age), sum(p.age), count(p.age), count(*)", &["29|50|156|4|5"]),
    ("MATCH (a:Person)-[:Knows]->(b:Person) RETURN count(DISTINCT b.name) AS reached", &["4"]),
    ("MATCH (p {name: 'ada'})-[:WorksAt]->(c) RETURN c.name", &["acme"]),
    ("MATCH (:Person {name: 'ada'})-[r]->(:Company) RETURN type(r), id(r)", &["WorksAt|ada->acme"]),
    ("MATCH (p:Person {name: 'ada'}) RETURN id(p), toUpper(p.name) AS shout, p.age + 1 AS next", &["ada|ADA|37"]),
    ("MATCH (p:Person) WHERE p.age >= $min RETURN p.name", &["bob", "eve"]),
    ("MATCH (p:Person) WHERE p.name IN $names RETURN p.name", &["bob", "cy"]),
    ("MATCH (p:Person) WHERE p.age IN $ages RETURN p.name", &["ada"]),
    ("match (p:Person) where p.age < 30 return p.name as young", &["cy"]),
    // An undirected edge keeps its stored ends.
    ("MATCH (a:Person {name: 'bob'})-[r:Knows]-(b) RETURN b.name, r.src, r.dst", &["ada|ada|bob", "cy|bob|cy"]),
    ("MATCH (a:Person {name: 'ada'})-[:Knows*2..2]-(b) RETURN DISTINCT b.name", &["bob", "cy", "dee"]),
    ("MATCH (p:Person) RETURN p.name, 3 AS k, count(*) AS n ORDER BY 1, p.name LIMIT 1", &["ada|3|1"]),
    ("MATCH (p:Person {name: 'ada'}) RETURN 'caf\\u00e9' AS word", &["café"]),
    ("MATCH (a:Person)-[:Knows]->(b:Person) OPTIONAL MATCH (b)-[:WorksAt]->(c:Company {name: a.name}) RETURN count(c) AS n", &["0"]),
    // A variable-length path's edges are not reused by the clause's other relationships.
    ("MATCH (a:Person {name: 'ada'})-[:Knows*1..1]->(b)-[r:Knows]-(c) RETURN b.name, c.name", &["bob|cy", "cy|bob", "cy|dee"]),
    ("MATCH (p:Person) RETURN DISTINCT p.age ORDER BY p.age", &["29", "36", "41", "50", "null"]),
    ("MATCH (p:Person) RETURN DISTINCT toLower(p.name) ORDER BY toLower(p.name) LIMIT 2", &["ada", "bob"]),
    ("MATCH (p:Person) WHERE p.age IS NULL RETURN sum(p.age) AS s, count(p.age) AS n", &["0|0"]),
    ("MATCH (p:Person) WHERE 30 <= p.age <= 41 RETURN p.name", &["ada", "bob"]),
    ("MATCH (p:Person {name: 'ada'}) RETURN p.name + '!' AS shout", &["ada!"]),
    ("MATCH (p:Person) OPTIONAL MATCH (p)-[:WorksAt]->(c:Company) RETURN p.name, c.name", &["ada|acme", "bob|acme", "cy|globex", "dee|null", "eve|null"]),
    ("MATCH (p:Person) OPTIONAL MATCH (p)-[:WorksAt]->(c) RETURN p.name, count(c) AS jobs ORDER BY p.name", &["ada|1", "bob|1", "cy|1", "dee|0", "eve|0"]),
    ("MATCH (p:Person) OPTIONAL MATCH (p)-[:Knows]->(q:Person) WHERE q.age > 40 RETURN p.name, q.name", &["ada|bob", "bob|null", "cy|null", "dee|null", "eve|null"]),
    ("MATCH (c:Company {name: 'globex'}) OPTIONAL MATCH (p:Person)-[:WorksAt]->(c) RETURN c.name, p", &["globex|cy|29"]),
    ("MATCH (p:Person {name: 'dee'}) OPTIONAL MATCH (p)-[r:WorksAt]->(c) RETURN type(r) AS t, count(*) AS n", &["null|1"]),
    ("MATCH (a:Person)-[k:Knows]->(b:Person) OPTIONAL MATCH (b)-[:WorksAt]->(c) WHERE k.since > 2015 RETURN a.name, b.name, c.name", &["ada|bob|null", "ada|cy|globex", "bob|cy|null", "cy|dee|null", "dee|ada|null", "eve|ada|null"]),
    ("MATCH (c:Company) OPTIONAL MATCH (c)<-[:WorksAt]-(p:Person) OPTIONAL MATCH (p)-[:Knows]->(q {name: 'dee'}) RETURN c.name, p.name, q.name ORDER BY c.name, p.name", &["acme|ada|null", "acme|bob|null", "globex|cy|dee"]),
    ("MATCH (p:Person)-[:WorksAt]->(c:Company) RETURN c.name AS company, avg(p.age) AS age ORDER BY company", &["acme|38.5", "globex|29.0"]),
];

#[tokio::test]
async fn each_construct_answers_its_rows() {
    let params: Params = [
        ("min".to_owned(), json!(41)),
        ("names".to_owned(), json!(["bob", "cy"])),
        ("ages".to_owned(), json!([36, 7])),
        ("texts".to_owned(), json!(["x"])),
    ]
    .into_iter()
    .collect();
    // Edges read by key first (as at a commit), and whole (as fresh): the same rows.
    for indexed in [true, false] {
        for (query, expected) in CYPHER {
            let tables = if indexed {
                Tables::new()
            } else {
                Tables::new().unindexed()
            };
            let mut got = ask_of(tables, Language::Cypher, query, &params)
                .await
                .unwrap_or_else(|e| panic!("{query}: {e}"));
            let mut expected: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
            if !query.to_uppercase().contains("ORDER BY") {
                got.sort();
                expected.sort();
            }
            assert_eq!(got, expected, "{query} (indexed: {indexed})");
        }
    }
}

#[tokio::test]
async fn returned_columns_are_named_as_written_or_aliased() {
    let (catalog, tables) = graph();
    let names = |text: &'static str| {
        let (catalog, tables) = (&catalog, &tables);
        async move {
            let batch = run(
                tables,
                Language::Cypher,
                text,
                catalog,
                &Params::new(),
                None,
            )
            .await
            .expect("runs");
            batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        names("MATCH (p:Person) RETURN p.name, count(*) AS n").await,
        ["p.name", "n"]
    );
    assert_eq!(
        names("MATCH (p:Person) RETURN p").await,
        ["p.name", "p.age"]
    );
    assert_eq!(
        names("MATCH (:Person)-[k:Knows]->(:Person) RETURN k").await,
        ["k.src", "k.dst", "k.since"]
    );
}

/// Every refusal, by the words a user reads.
const REFUSALS: &[(&str, &str)] = &[
    ("MATCH (p:Person)-[:Knows*]->(q) RETURN q.name", "line 1, column 17: a variable-length relationship needs an upper bound: write `*1..3` (at most 8 hops)"),
    ("MATCH (p:Person)-[:Knows*2..]->(q) RETURN q.name", "needs an upper bound"),
    ("MATCH (p:Person)-[:Knows*1..20]->(q) RETURN q.name", "20 hops is more than the 8 a query may follow"),
    ("CREATE (p:Person {name: 'x'})", "line 1, column 1: `CREATE` writes, and queries are read-only: write with `tributary load` or `tributary ingest`"),
    ("MATCH (p:Person) SET p.age = 1 RETURN p", "`SET` writes"),
    ("MATCH (p:Person) DELETE p", "`DELETE` writes"),
    ("MATCH (p:Person) DETACH DELETE p", "`DETACH` writes"),
    ("MERGE (p:Person {name: 'x'})", "`MERGE` writes"),
    ("MATCH (p:Persn) RETURN p", "line 1, column 10: unknown node type `Persn` (did you mean `Person`?); node types: Person, Company"),
    ("MATCH (p:Person) RETURN p.nmae", "line 1, column 27: `p` is a Person: unknown field `nmae` of Person (did you mean `name`?); its fields: id, name, age"),
    ("MATCH (p:Person)-[:Knws]->(q) RETURN q.name", "unknown edge type `Knws` (did you mean `Knows`?)"),
    ("MATCH (p:Person) RETURN q.name", "line 1, column 25: unknown variable `q` (did you mean `p`?); the query binds p"),
    ("MATCH (p:Person) WITH p RETURN p", "`WITH` is not in the supported Cypher subset"),
    ("MATCH (p:Person) UNWIND [1] AS x RETURN x", "`UNWIND` is not in the supported Cypher subset"),
    ("MATCH (p:Person) WHERE p.age IN $texts RETURN p.name", "`p.age` is a number and `'x'` is text"),
    ("MATCH (p:Person) WHERE p.age > $min RETURN p.name", "parameter `$min` has no value: pass `--param min=VALUE`"),
    ("MATCH (p:Person) OPTIONAL MATCH (p)-[:WorksAt]->(c) MATCH (c)<-[:WorksAt]-(x) RETURN x.name", "line 1, column 53: a `MATCH` after an `OPTIONAL MATCH` is not in the supported subset"),
    ("OPTIONAL MATCH (p:Person) RETURN p.name", "a query starts with a `MATCH`"),
    ("MATCH (a:Person)-[k:Knows]->(b:Person) OPTIONAL MATCH (b)-[k]->(c) RETURN c.name", "may share nodes only"),
    ("MATCH (x) RETURN x", "the node `x` needs a type: write it as `(x:Person)`"),
    ("MATCH (a:Person)-[r]-(b) RETURN b", "line 1, column 17: this relationship needs a type (its ends do not say which)"),
    ("MATCH (a:Person)-[:Knows*1..2 {since: 2010}]->(b) RETURN b.name", "properties on a variable-length relationship are not in the supported subset"),
    ("MATCH (a:Person {name: 'ada'})-[:WorksAt*2..2]-(c) RETURN c.name", "an undirected variable-length path over it alternates the two"),
    ("MATCH (p:Person) RETURN size(p.age)", "`size` takes text or a list"),
    ("MATCH (p:Person) WHERE p.name = 1 RETURN p.age", "line 1, column 33: `p.name` is text and `1` is a number: they never compare"),
    ("MATCH (p:Person) WHERE p.age IN ['36'] RETURN p.name", "`p.age` is a number and `'36'` is text"),
    ("MATCH (p:Person) RETURN DISTINCT p.name ORDER BY p.age", "line 1, column 50: with `RETURN DISTINCT`, `ORDER BY` takes what is returned"),
    ("MATCH (p:Person {age: 'x'}) RETURN p.name", "`p.age` is a number and `'x'` is text"),
    ("MATCH (a:Person)-[:Knows]->(b) RETURN a.name, count(*) ORDER BY b.name", "with an aggregate in `RETURN`, `ORDER BY` takes what is returned"),
    ("MATCH (a:Person)-[:Knows*3..1]->(b) RETURN b.name", "`*3..1`: the least hops is more than the most"),
    ("MATCH (a:Person)-[:WorksAt*0..0]->(b) RETURN b.name", "a path of 0 hops over it never ends where it starts"),
    ("MATCH (__n1:Person) RETURN __n1.name", "a variable's name may not start with `__`"),
    ("MATCH (p:Person) WHERE c.name = 'acme' OPTIONAL MATCH (p)-[:WorksAt]->(c) RETURN p.name", "unknown variable `c`"),
    ("MATCH (p:Person) RETURN 1e999", "is not a number this query language takes"),
    ("MATCH (p:Person) RETURN 'caf\\u00zz'", "`\\u` takes four hex digits"),
    ("MATCH (p:Person) RETURN p.name, p", "two columns are named `p.name` (a node returned whole is a column per field)"),
    ("MATCH (p:Knows) RETURN p", "`Knows` is an edge type"),
    ("MATCH (p:Person)-[:Person]->(q) RETURN q", "`Person` is a node type: a relationship takes an edge type"),
    ("MATCH (p:Person) RETURN foo(p.name)", "unknown function `foo`"),
    ("MATCH (p:Person) WHERE p.name =~ 'a.*' RETURN p.name", "`=~` (regular expressions) is not in the supported subset"),
    ("MATCH (p:Person RETURN p", "line 1, column 17: expected `)`, found `RETURN`"),
    ("MATCH (c:Company)-[:Knows]->(p) RETURN p.name", "`Knows` goes from Person to Person, so this end is a Person, not a Company"),
    ("MATCH (p:Person)", "expected `MATCH`, `OPTIONAL MATCH`, `WHERE` or `RETURN`, found the end of the query"),
    ("MATCH (p:Person) RETURN *", "`RETURN *` is not in the supported subset"),
    ("MATCH path = (p:Person) RETURN p", "a path variable"),
    ("MATCH (p:Person:Company) RETURN p", "several labels"),
    ("MATCH (p:Person)-[:Knows|WorksAt]->(q) RETURN q", "several edge types"),
    ("MATCH (p:Person) RETURN p.name, p.name", "two columns are named `p.name`"),
    ("MATCH (p:Person)-[k:Knows*1..2]->(q) RETURN k.since", "names a variable-length relationship"),
    ("MATCH (p:Person)\nRETURN p.name LIMIT -1", "line 2, column 21: `LIMIT` takes a whole number of rows"),
    ("MATCH (p:Person) WHERE p.name = 'ada RETURN p", "a string that never ends"),
    ("MATCH (a:Person)-[:Knows]-(b:Company) RETURN b", "so this end is a Person, not a Company"),
    ("MATCH (c:Company)-[]-(d:Company) RETURN d", "no edge type goes between Company and Company"),
];

#[tokio::test]
async fn refusals_say_what_and_where() {
    let params: Params = [("texts".to_owned(), json!(["x"]))].into_iter().collect();
    for (query, message) in REFUSALS {
        let error = ask(Language::Cypher, query, &params)
            .await
            .err()
            .unwrap_or_else(|| panic!("{query}: answered, and should be refused"));
        assert!(error.is_invalid_input(), "{query}: {error}");
        let shown = error.to_string();
        assert!(
            shown.contains(message),
            "{query}:\n  said {shown}\n  want {message}"
        );
    }
}

#[tokio::test]
async fn sql_reads_the_tables_by_type_name_and_writes_nothing() {
    let none = Params::new();
    let rows = ask(
        Language::Sql,
        "SELECT p.name, count(*) AS friends FROM Person p JOIN Knows k ON k.src = p.id GROUP BY p.name ORDER BY friends DESC, p.name LIMIT 2",
        &none,
    )
    .await
    .expect("runs");
    assert_eq!(rows, ["ada|2", "bob|1"]);
    for statement in [
        "INSERT INTO Person VALUES ('zed', 'zed', 1)",
        "DROP TABLE Person",
        "CREATE TABLE t AS SELECT * FROM Person",
    ] {
        let error = ask(Language::Sql, statement, &none)
            .await
            .expect_err("refused");
        assert!(error.is_invalid_input(), "{statement}: {error}");
    }
    let error = ask(Language::Sql, "SELECT * FROM Persons", &none)
        .await
        .expect_err("refused");
    assert!(error.to_string().contains("Persons"), "{error}");
    let params: Params = [("x".to_owned(), json!(1))].into_iter().collect();
    let error = ask(Language::Sql, "SELECT 1", &params)
        .await
        .expect_err("refused");
    assert!(
        error.to_string().contains("parameters are for Cypher"),
        "{error}"
    );
}

#[tokio::test]
async fn more_rows_than_the_cap_is_an_error_not_a_cut() {
    let (catalog, tables) = graph();
    let error = run(
        &tables,
        Language::Cypher,
        "MATCH (p:Person) RETURN p.name",
        &catalog,
        &Params::new(),
        Some(3),
    )
    .await
    .expect_err("over the cap");
    assert!(error.to_string().contains("more than 3 rows"), "{error}");
}

#[tokio::test]
async fn an_anchored_start_reads_the_edge_table_filtered_on_its_key() {
    let (catalog, tables) = graph();
    let plan = explain(
        &tables,
        Language::Cypher,
        "MATCH (a:Person {name: 'ada'})-[:Knows]->(b) RETURN count(b)",
        &catalog,
        &Params::new(),
    )
    .await
    .expect("explains");
    let text = lines(&plan).join("\n");
    // No node table joined: the anchor is the edges' `src`, looked up before the join.
    assert!(!text.contains("FROM \"Person\""), "{text}");
    assert!(text.contains("\"__e1\".\"src\" = 'ada'"), "{text}");
    assert!(
        text.contains("read by key|Knows AS __expanded__e1: src IN 1 key -> 2 rows"),
        "{text}"
    );
    // A node table the query joins is read by the keys reached, through its `id`.
    let plan = explain(
        &tables,
        Language::Cypher,
        "MATCH (a:Person {name: 'ada'})-[:Knows]->(b) RETURN b.age",
        &catalog,
        &Params::new(),
    )
    .await
    .expect("explains");
    let text = lines(&plan).join("\n");
    assert!(
        text.contains("Person AS __nodes_b: id IN 2 keys -> 2 rows"),
        "{text}"
    );
}

#[test]
fn a_cypher_query_names_the_types_it_reads() {
    let catalog = Catalog::parse(SCHEMA).expect("parses");
    let types = |text: &str| {
        prepare(Language::Cypher, text, &catalog, &Params::new())
            .expect("compiles")
            .types
            .expect("Cypher names its types")
            .into_iter()
            .collect::<Vec<_>>()
    };
    assert_eq!(types("MATCH (c:Company) RETURN count(*)"), ["Company"]);
    assert_eq!(
        types("MATCH (a:Person {name: 'ada'})-[:Knows]->(b) RETURN count(b)"),
        ["Knows", "Person"]
    );
    assert_eq!(
        types("MATCH (c:Company) OPTIONAL MATCH (c)<-[:WorksAt]-(p) RETURN count(p)"),
        ["Company", "Person", "WorksAt"]
    );
    let sql = prepare(Language::Sql, "SELECT 1", &catalog, &Params::new()).expect("sql");
    assert_eq!(sql.types, None);
}

#[test]
fn parameters_from_the_command_line_read_as_json_or_as_strings() {
    let parse = |s: &str| crate::parse_assignment(s).expect("parses");
    assert_eq!(parse("age=36"), ("age".to_owned(), json!(36)));
    assert_eq!(parse("who=ada"), ("who".to_owned(), json!("ada")));
    assert_eq!(parse("$who=\"ada\""), ("who".to_owned(), json!("ada")));
    assert_eq!(
        parse("names=[\"a\",\"b\"]"),
        ("names".to_owned(), json!(["a", "b"]))
    );
    assert!(crate::parse_assignment("nothing").is_err());
    assert!(crate::parse_assignment("bad-name=1").is_err());
}

#[tokio::test]
async fn a_hostile_query_is_refused_not_a_crash() {
    let nested = format!(
        "MATCH (p:Person) RETURN {}1{}",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    let error = ask(Language::Cypher, &nested, &Params::new())
        .await
        .expect_err("refused");
    assert!(
        error.to_string().contains("deeper than 24 levels"),
        "{error}"
    );
    let deepest = format!(
        "MATCH (p:Person) RETURN {}1{} AS one LIMIT 1",
        "(".repeat(22),
        ")".repeat(22)
    );
    assert_eq!(
        ask(Language::Cypher, &deepest, &Params::new())
            .await
            .expect("runs"),
        ["1"]
    );
    let negated = format!("MATCH (p:Person) RETURN {}1", "- ".repeat(100_000));
    assert!(ask(Language::Cypher, &negated, &Params::new())
        .await
        .is_err());
    let many = (0..60)
        .map(|i| format!("p.age = {i}"))
        .collect::<Vec<_>>()
        .join(" OR ");
    let text = format!("MATCH (p:Person) WHERE {many} RETURN p.name");
    let error = ask(Language::Cypher, &text, &Params::new())
        .await
        .expect_err("refused");
    assert!(
        error.to_string().contains("more than 96 operators"),
        "{error}"
    );
    // Within the bounds, a long chain of ORs plans (the SQL writes it flat).
    let ors = (0..48)
        .map(|i| format!("p.age = {i}"))
        .collect::<Vec<_>>()
        .join(" OR ");
    let text = format!("MATCH (p:Person) WHERE {ors} RETURN p.name");
    let mut got = ask(Language::Cypher, &text, &Params::new())
        .await
        .expect("runs");
    got.sort();
    assert_eq!(got, ["ada", "bob", "cy"]);
}

#[test]
fn source_locations_are_not_in_messages() {
    let said = crate::error::without_locations(
        "Cast error: Cannot cast string 'x' to value of Int32 type, /root/.cargo/registry/src/lance-14.0.2/src/io/exec/filtered_read.rs:1666:33 (in a scan)",
    );
    assert_eq!(
        said,
        "Cast error: Cannot cast string 'x' to value of Int32 type (in a scan)"
    );
    assert_eq!(
        crate::error::without_locations("no location here"),
        "no location here"
    );
}
