//! Graph queries beside Kuzu: one generated social graph (heavy-tailed in-degree) loaded
//! into Tributary and into Kuzu (the PyPI package, in the project's venv) in the same run;
//! anchored 1-, 2- and 3-hop counts, a filtered 2-hop, and whole-graph aggregates, each
//! the median of several runs, reported as a ratio to Kuzu's time. Both answer the same
//! counts (checked): the generated graph has no self-loops and no repeated edge, so
//! Tributary's trail semantics and Kuzu's walks agree on the directed queries but the
//! 3-hop, where a walk may come back over its first edge (both counts are reported).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use arrow_array::{Array, Int64Array};
use serde_json::{json, Value};
use tributary::{Graph, LoadOptions, QueryRequest};

use crate::report;

const SCHEMA: &str = "node Person { name: String @key  age: I32 }\nedge Knows: Person -> Person\n";

/// Lines per load: a few large commits, as a bulk import would make.
const LOAD_LINES: usize = 500_000;

/// A small deterministic generator (xorshift), so both engines get the same graph.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `edges` distinct edges between `nodes` people: sources uniform, destinations skewed
/// (u³: a few people are known by very many).
fn generate(nodes: usize, edges: usize) -> Vec<(usize, usize)> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut seen = HashSet::with_capacity(edges);
    let mut out = Vec::with_capacity(edges);
    while out.len() < edges {
        let src = (rng.next() % nodes as u64) as usize;
        let dst = ((rng.unit().powi(3)) * nodes as f64) as usize % nodes;
        if src != dst && seen.insert((src, dst)) {
            out.push((src, dst));
        }
    }
    out
}

fn age(i: usize) -> usize {
    (i * 7919) % 90
}

async fn load_tributary(graph: &Graph, nodes: usize, edges: &[(usize, usize)]) {
    let people = (0..nodes).map(|i| {
        format!(
            r#"{{"type":"Person","data":{{"name":"p{i}","age":{}}}}}"#,
            age(i)
        )
    });
    let knows = edges
        .iter()
        .map(|(src, dst)| format!(r#"{{"edge":"Knows","from":"p{src}","to":"p{dst}"}}"#));
    load_in_chunks(graph, people).await;
    load_in_chunks(graph, knows).await;
}

/// `lines` as loads of `LOAD_LINES` lines each.
async fn load_in_chunks(graph: &Graph, lines: impl Iterator<Item = String>) {
    let mut text = String::new();
    let mut count = 0;
    for line in lines {
        text.push_str(&line);
        text.push('\n');
        count += 1;
        if count == LOAD_LINES {
            graph
                .load(&text, &LoadOptions::default())
                .await
                .expect("load");
            text.clear();
            count = 0;
        }
    }
    if count > 0 {
        graph
            .load(&text, &LoadOptions::default())
            .await
            .expect("load");
    }
}

fn write_csv(dir: &Path, nodes: usize, edges: &[(usize, usize)]) {
    let mut people = String::from("name,age\n");
    for i in 0..nodes {
        let _ = writeln!(people, "p{i},{}", age(i));
    }
    std::fs::write(dir.join("persons.csv"), people).expect("persons.csv");
    let mut knows = String::from("src,dst\n");
    for (src, dst) in edges {
        let _ = writeln!(knows, "p{src},p{dst}");
    }
    std::fs::write(dir.join("knows.csv"), knows).expect("knows.csv");
}

/// The project's Python (with `kuzu`), as `cargo xtask bench` prepares it.
fn python() -> Option<String> {
    std::env::var("TRIBUTARY_BENCH_PYTHON").ok()
}

pub async fn versus_kuzu(nodes: usize, edges: usize, runs: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let anchor = "p17";
    // (name, Tributary's query, Kuzu's query): the same Cypher but where Kuzu needs
    // its own spelling.
    let queries: Vec<(&str, String)> = vec![
        ("1_hop", format!("MATCH (a:Person {{name: '{anchor}'}})-[:Knows]->(b) RETURN count(b)")),
        ("2_hop", format!("MATCH (a:Person {{name: '{anchor}'}})-[:Knows]->(b)-[:Knows]->(c) RETURN count(c)")),
        ("3_hop", format!("MATCH (a:Person {{name: '{anchor}'}})-[:Knows]->(b)-[:Knows]->(c)-[:Knows]->(d) RETURN count(d)")),
        ("2_hop_filtered", format!("MATCH (a:Person {{name: '{anchor}'}})-[:Knows]->(b)-[:Knows]->(c) WHERE c.age > 60 RETURN count(c)")),
        ("aggregate_nodes", "MATCH (p:Person) WHERE p.age >= 18 RETURN count(p)".to_owned()),
        ("aggregate_edges", "MATCH (a:Person)-[:Knows]->(b:Person) WHERE b.age < 20 RETURN count(*)".to_owned()),
    ];
    let generated = Instant::now();
    let edge_list = generate(nodes, edges);
    let generate_s = generated.elapsed().as_secs_f64();

    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let graph = Graph::init(&uri, SCHEMA).await.expect("init");
    let loaded = Instant::now();
    load_tributary(&graph, nodes, &edge_list).await;
    let load_s = loaded.elapsed().as_secs_f64();

    let mut ours: Vec<(f64, i64)> = Vec::new();
    for (_, text) in &queries {
        let mut times = Vec::with_capacity(runs);
        let mut value = 0;
        for _ in 0..runs {
            let started = Instant::now();
            let batch = graph
                .query(&QueryRequest::cypher(text.clone()))
                .await
                .unwrap_or_else(|e| panic!("{text}: {e}"));
            times.push(started.elapsed().as_secs_f64() * 1e3);
            let column = batch.column(0);
            value = column
                .as_any()
                .downcast_ref::<Int64Array>()
                .map_or(-1, |c| if c.is_empty() { 0 } else { c.value(0) });
        }
        times.sort_by(f64::total_cmp);
        ours.push((times[times.len() / 2], value));
    }

    let kuzu: Option<Value> = python().and_then(|python| {
        write_csv(dir.path(), nodes, &edge_list);
        let named: serde_json::Map<String, Value> = queries
            .iter()
            .map(|(name, text)| ((*name).to_owned(), Value::String(text.clone())))
            .collect();
        std::fs::write(
            dir.path().join("queries.json"),
            Value::Object(named).to_string(),
        )
        .expect("queries.json");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/scenarios/kuzu_queries.py");
        let output = std::process::Command::new(python)
            .arg(script)
            .arg(dir.path())
            .arg(runs.to_string())
            .output()
            .expect("run the Kuzu script");
        if !output.status.success() {
            eprintln!("kuzu: {}", String::from_utf8_lossy(&output.stderr));
            return None;
        }
        serde_json::from_slice(&output.stdout).ok()
    });
    let mut rows = Vec::new();
    for ((name, _), (ms, value)) in queries.iter().zip(&ours) {
        let peer = kuzu.as_ref().map(|k| &k["queries"][*name]);
        let kuzu_ms = peer.and_then(|p| p["median_ms"].as_f64());
        let kuzu_value = peer.and_then(|p| p["value"].as_i64());
        rows.push(json!({
            "query": name,
            "tributary_ms": ms,
            "tributary_count": value,
            "kuzu_ms": kuzu_ms,
            "kuzu_count": kuzu_value,
            "ratio_to_kuzu": kuzu_ms.map(|k| ms / k),
        }));
    }
    report(json!({
        "scenario": "queries_vs_kuzu",
        "nodes": nodes,
        "edges": edges,
        "runs": runs,
        "generate_s": generate_s,
        "tributary_load_s": load_s,
        "kuzu_load_s": kuzu.as_ref().and_then(|k| k["load_s"].as_f64()),
        "queries": rows,
    }));
}
