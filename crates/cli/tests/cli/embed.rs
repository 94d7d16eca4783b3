//! `@embed` from the command line: the built-in embedder fills the example's embeddings,
//! `search --similar` reads them (embedded and through a server), `tributary embedder`
//! shows and sets the provider.

use crate::remote::serve;
use crate::{example_graph, ok, run};

fn first_row(ndjson: &str) -> serde_json::Value {
    serde_json::from_str(ndjson.lines().next().expect("a row")).expect("json row")
}

#[test]
fn similarity_search_and_the_embedder_from_the_command_line() {
    let (dir, graph) = example_graph();
    let shown = ok(&["embedder", &graph, "--format", "json"]);
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert!(
        shown["embedder"].as_str().unwrap().contains("not semantic"),
        "{shown}"
    );
    let schema = ok(&["schema", &graph]);
    assert!(schema.contains("lexical"), "{schema}");

    // The load filled every bio's vector: the nearest rows share the query's words.
    let similar = |extra: &[&str]| {
        let mut args = vec![
            "search",
            &graph,
            "Person",
            "--similar",
            "storage engines",
            "-k",
            "3",
            "--format",
            "ndjson",
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    let hits = similar(&[]);
    assert_eq!(hits.lines().count(), 3, "{hits}");
    for line in hits.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            row["bio"].as_str().unwrap().contains("storage engines"),
            "{hits}"
        );
    }
    // Through a server, the same rows.
    let served = serve(dir.path(), &[]);
    let remote = ok(&[
        "--server",
        &served.url,
        "search",
        "g",
        "Person",
        "--similar",
        "storage engines",
        "-k",
        "3",
        "--format",
        "ndjson",
    ]);
    assert_eq!(
        first_row(&remote)["_distance"],
        first_row(&hits)["_distance"]
    );
    // The embedder, shown and set through the server as embedded.
    let through = |args: &[&str]| {
        let mut all = vec!["--server", served.url.as_str()];
        all.extend_from_slice(args);
        ok(&all)
    };
    let remote_shown: serde_json::Value =
        serde_json::from_str(&through(&["embedder", "g", "--format", "json"])).unwrap();
    assert_eq!(remote_shown["embedder"], shown["embedder"]);
    through(&[
        "embedder",
        "g",
        "--provider",
        "openai",
        "--url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
    ]);
    let set_remotely = ok(&["embedder", &graph, "--format", "json"]);
    assert!(
        set_remotely.contains("model `m` at http://127.0.0.1:9/v1"),
        "{set_remotely}"
    );
    let refused = run(&[
        "--server",
        &served.url,
        "embedder",
        "g",
        "--provider",
        "openai",
        "--url",
        "localhost:9",
        "--model",
        "m",
    ]);
    assert_eq!(
        refused.status.code(),
        Some(65),
        "bad settings are invalid input"
    );
    through(&["embedder", "g", "--provider", "builtin"]);
    drop(served);

    // A provider needs a URL and a model (clap's usage error).
    let incomplete = run(&["embedder", &graph, "--provider", "openai"]);
    assert_eq!(incomplete.status.code(), Some(2));
    // An unreachable provider: a load of a new bio fails whole and says why.
    ok(&[
        "embedder",
        &graph,
        "--provider",
        "openai",
        "--url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--retries",
        "0",
        "--timeout-ms",
        "2000",
    ]);
    let dir2 = tempfile::tempdir().unwrap();
    let line = dir2.path().join("new.ndjson");
    std::fs::write(
        &line,
        r#"{"type":"Person","data":{"name":"zed","bio":"zed works on embeddings"}}"#,
    )
    .unwrap();
    let failed = run(&["load", &graph, &line.to_string_lossy()]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("could not be reached"), "{stderr}");
    let missing = run(&["get", &graph, "Person", "zed"]);
    assert_eq!(missing.status.code(), Some(66), "nothing was committed");
    // Back to the built-in embedder: the load goes through.
    ok(&["embedder", &graph, "--provider", "builtin"]);
    ok(&["load", &graph, &line.to_string_lossy()]);
    let zed = first_row(&ok(&["get", &graph, "Person", "zed", "--format", "ndjson"]));
    assert_eq!(zed["embedding"].as_array().unwrap().len(), 8, "{zed}");
}
