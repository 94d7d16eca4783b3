//! Graph queries over Lance tables: at a commit, at a branch's head, and fresh (a row
//! ingested and not folded is seen only fresh; a streamed delete hides a row); SQL over
//! the same snapshot; refusals; and what runs (the anchor pushed into Lance's scan).

use arrow_array::{Array, Int64Array, RecordBatch};
use tributary::{At, ErrorKind, Graph, Language, LoadOptions, Params, QueryRequest, View};
use tributary_tests::{company, delete_edge, edge, ndjson, person, temp_graph};

use crate::columns::{sorted_strings, strings};

async fn ask(graph: &Graph, text: &str, view: View) -> RecordBatch {
    let request = QueryRequest {
        view,
        ..QueryRequest::cypher(text)
    };
    graph
        .query(&request)
        .await
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn count(batch: &RecordBatch) -> i64 {
    let column = batch.column(0);
    let column = column.as_any().downcast_ref::<Int64Array>().unwrap();
    column.value(0)
}

const TWO_HOPS: &str = "MATCH (a:Person {name: 'ada'})-[:Knows]->()-[:Knows]->(c) RETURN c.name";

#[tokio::test]
async fn a_query_reads_one_commit_a_branch_or_the_fresh_tier() {
    let (_dir, _uri, graph) = temp_graph().await;
    let first = graph
        .load(
            &ndjson(&[
                person("ada", 36),
                person("bob", 41),
                person("cy", 29),
                company("acme"),
                edge("Knows", "ada", "bob"),
                edge("Knows", "bob", "cy"),
                edge("WorksAt", "ada", "acme"),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    let head = View::default();
    assert_eq!(
        sorted_strings(&ask(&graph, TWO_HOPS, head.clone()).await, "c.name"),
        ["cy"]
    );

    // A later commit adds a path; the first commit still answers as it did.
    graph
        .load(
            &ndjson(&[person("dee", 50), edge("Knows", "bob", "dee")]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    let at_first = View::from(At::Commit(first.commit.id.clone()));
    assert_eq!(
        sorted_strings(&ask(&graph, TWO_HOPS, at_first.clone()).await, "c.name"),
        ["cy"]
    );
    assert_eq!(
        sorted_strings(&ask(&graph, TWO_HOPS, head.clone()).await, "c.name"),
        ["cy", "dee"]
    );
    let sql = |view: View| QueryRequest {
        view,
        ..QueryRequest::sql("SELECT count(*) FROM Knows")
    };
    assert_eq!(
        count(&graph.query(&sql(at_first.clone())).await.unwrap()),
        2
    );
    assert_eq!(count(&graph.query(&sql(head.clone())).await.unwrap()), 3);

    // Ingested and not folded: seen only fresh. A streamed delete hides its edge at once.
    let stream = graph.ingest("main").unwrap();
    stream
        .send(
            1,
            &ndjson(&[person("eve", 33), edge("Knows", "bob", "eve")]),
        )
        .await
        .unwrap();
    let fresh = View::fresh(At::default());
    assert_eq!(
        sorted_strings(&ask(&graph, TWO_HOPS, head.clone()).await, "c.name"),
        ["cy", "dee"]
    );
    assert_eq!(
        sorted_strings(&ask(&graph, TWO_HOPS, fresh.clone()).await, "c.name"),
        ["cy", "dee", "eve"]
    );
    stream
        .send(3, &ndjson(&[delete_edge("Knows", "bob", "cy")]))
        .await
        .unwrap();
    assert_eq!(
        sorted_strings(&ask(&graph, TWO_HOPS, fresh.clone()).await, "c.name"),
        ["dee", "eve"]
    );
    let fresh_sql = QueryRequest {
        view: fresh.clone(),
        ..QueryRequest::sql("SELECT count(*) FROM Knows")
    };
    assert_eq!(count(&graph.query(&fresh_sql).await.unwrap()), 3);
    // Fresh from a commit is refused: unfolded rows are newer than every commit.
    let refused = graph
        .query(&QueryRequest {
            view: View {
                at: At::Commit(first.commit.id.clone()),
                fresh: true,
            },
            ..QueryRequest::cypher(TWO_HOPS)
        })
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{refused}");
    graph.fold("main").await.unwrap();
    assert_eq!(
        sorted_strings(&ask(&graph, TWO_HOPS, head.clone()).await, "c.name"),
        ["dee", "eve"]
    );

    // A branch sees its own writes; main does not.
    graph
        .create_branch("dev", &At::branch("main").unwrap())
        .await
        .unwrap();
    graph
        .load(
            &ndjson(&[person("fay", 20), edge("Knows", "dee", "fay")]),
            &LoadOptions {
                branch: tributary::branch("dev").unwrap(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let dev = View::from(At::branch("dev").unwrap());
    let three = "MATCH (a:Person {name: 'ada'})-[:Knows*3]->(c) RETURN c.name";
    assert_eq!(
        sorted_strings(&ask(&graph, three, dev).await, "c.name"),
        ["fay"]
    );
    assert_eq!(ask(&graph, three, head).await.num_rows(), 0);
    graph.close_writers().await.unwrap();
}

#[tokio::test]
async fn refused_queries_are_invalid_input_with_their_place() {
    let (_dir, _uri, graph) = temp_graph().await;
    for (query, said) in [
        (
            "MATCH (p:Persn) RETURN p",
            "line 1, column 10: unknown node type `Persn` (did you mean `Person`?)",
        ),
        (
            "MATCH (p:Person)-[:Knows*]->(q) RETURN q.name",
            "needs an upper bound: write `*1..3`",
        ),
        (
            "CREATE (p:Person {name: 'x'})",
            "`CREATE` writes, and queries are read-only",
        ),
        (
            "MATCH (p:Person) RETURN p.agee",
            "unknown field `agee` of Person (did you mean `age`?)",
        ),
    ] {
        let error = graph.query(&QueryRequest::cypher(query)).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{query}: {error}");
        assert!(error.to_string().contains(said), "{query}: {error}");
    }
    let error = graph
        .query(&QueryRequest::sql("DELETE FROM Person"))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    let unknown = graph
        .query(&QueryRequest::sql("SELECT nope FROM Person"))
        .await
        .unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::InvalidInput, "{unknown}");
    assert!(unknown.to_string().contains("nope"), "{unknown}");
}

#[tokio::test]
async fn an_anchored_query_filters_the_edge_scan_on_its_key() {
    let (_dir, _uri, graph) = temp_graph().await;
    graph
        .load(
            &ndjson(&[
                person("ada", 36),
                person("bob", 41),
                edge("Knows", "ada", "bob"),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    let request = QueryRequest {
        explain: true,
        ..QueryRequest::cypher("MATCH (a:Person {name: 'ada'})-[:Knows]->(b) RETURN count(b)")
    };
    let plan = graph.query(&request).await.unwrap();
    let steps = strings(&plan, "step");
    assert_eq!(
        steps,
        ["sql", "read by key", "logical plan", "physical plan"]
    );
    let plans = strings(&plan, "plan");
    // The anchor's edges are read by key, through Lance's `src` index, before the join;
    // no node table is read at all.
    assert_eq!(plans[1], "Knows AS __expanded__e1: src IN 1 key -> 1 row");
    assert!(!plans[0].contains("\"Person\""), "{}", plans[0]);
    assert!(!plans[3].contains("Lance"), "{}", plans[3]);
    // Without an anchor, the filter and the columns go into Lance's scan.
    let request = QueryRequest {
        explain: true,
        ..QueryRequest::cypher("MATCH (p:Person) WHERE p.age > 40 RETURN p.name")
    };
    let physical = &strings(&graph.query(&request).await.unwrap(), "plan")[2];
    assert!(
        physical.contains("full_filter=age > Int32(40)"),
        "{physical}"
    );
    // Where the store keeps the table is not said: the table is.
    assert!(
        physical.contains("uri=nodes/Person.lance/data"),
        "{physical}"
    );
    assert!(!physical.contains("tmp"), "{physical}");
    let answer = graph
        .query(&QueryRequest::cypher(
            "MATCH (a:Person {name: 'ada'})-[:Knows]->(b) RETURN count(b)",
        ))
        .await
        .unwrap();
    assert_eq!(count(&answer), 1);
    let params: Params = [("who".to_owned(), serde_json::json!("ada"))]
        .into_iter()
        .collect();
    let request = QueryRequest {
        language: Language::Cypher,
        text: "MATCH (a:Person)-[:Knows]->(b) WHERE a.name = $who RETURN b.name, b.age".into(),
        params,
        ..Default::default()
    };
    let answer = graph.query(&request).await.unwrap();
    assert_eq!(strings(&answer, "b.name"), ["bob"]);
}

/// Object-store operations of `request` on the graph at `uri` opened afresh (cold caches).
async fn ops_of(uri: &str, request: &QueryRequest) -> u64 {
    let counter = tributary::OpCounter::new();
    let graph = Graph::builder(uri)
        .counted(counter.clone())
        .open()
        .await
        .unwrap();
    counter.reset();
    graph.query(request).await.unwrap();
    counter.snapshot().total()
}

#[tokio::test]
async fn a_cypher_query_opens_only_the_tables_it_reads() {
    let (_dir, uri, graph) = temp_graph().await;
    graph
        .load(
            &ndjson(&[
                person("ada", 36),
                company("acme"),
                edge("WorksAt", "ada", "acme"),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    // The same count of one type: Cypher names it, so only its table is opened; SQL may
    // name any, so every type's is.
    let cypher = ops_of(
        &uri,
        &QueryRequest::cypher("MATCH (c:Company) RETURN count(*)"),
    )
    .await;
    let sql = ops_of(&uri, &QueryRequest::sql("SELECT count(*) FROM Company")).await;
    eprintln!("object-store operations: Cypher {cypher}, SQL {sql}");
    assert!(cypher < sql, "Cypher {cypher} operations, SQL {sql}");
}
