//! Branches from the command line: the same output embedded and through a server (HTTP
//! parity), `--branch` on reads and writes, and the exit codes of a conflict and of
//! refusals.

use crate::remote::{mask_ids, serve};
use crate::{examples, ok, run};

/// The lines of an NDJSON file written under `dir`.
fn ndjson(dir: &std::path::Path, name: &str, lines: &[&str]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.to_string_lossy().into_owned()
}

/// Commit times (`"time":"…"`) replaced, so two graphs' outputs compare.
fn mask_times(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(r#""time":""#) {
        let (before, after) = rest.split_at(at + 8);
        out.push_str(before);
        out.push_str("<time>");
        rest = after.find('"').map_or("", |end| &after[end..]);
    }
    out.push_str(rest);
    out
}

#[test]
fn branch_commands_print_the_same_embedded_and_remote() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let served = serve(&root, &["--init"]);
    let schema = examples().join("schema.tg").to_string_lossy().into_owned();
    let embedded = root.join("e").to_string_lossy().into_owned();
    let base = ndjson(
        dir.path(),
        "base.ndjson",
        &[
            r#"{"type":"Person","data":{"name":"ada","age":36}}"#,
            r#"{"type":"Person","data":{"name":"bob","age":40}}"#,
            r#"{"edge":"Knows","from":"ada","to":"bob"}"#,
        ],
    );
    let on_dev = ndjson(
        dir.path(),
        "dev.ndjson",
        &[
            r#"{"type":"Person","data":{"name":"ada","age":37}}"#,
            r#"{"type":"Person","data":{"name":"cy","age":20}}"#,
            r#"{"delete":"Person","key":"bob"}"#,
        ],
    );
    let on_main = ndjson(
        dir.path(),
        "main.ndjson",
        &[r#"{"type":"Person","data":{"name":"ada","age":38}}"#],
    );
    ok(&["init", &embedded, "--schema", &schema]);
    ok(&["init", "g", "--schema", &schema, "--server", &served.url]);

    // The same commands on graph `g` through the server and on `e` embedded.
    let both = |args: &[&str]| -> String {
        let remote: Vec<&str> = args
            .iter()
            .map(|a| if *a == "G" { "g" } else { a })
            .chain(["--server", &served.url, "--format", "ndjson"])
            .collect();
        let here: Vec<&str> = args
            .iter()
            .map(|a| if *a == "G" { embedded.as_str() } else { a })
            .chain(["--format", "ndjson"])
            .collect();
        let (remote, here) = (ok(&remote), ok(&here));
        // The server writes as its own actor.
        assert_eq!(
            mask_times(&mask_ids(&remote)).replace("tributary:server", "tributary:load"),
            mask_times(&mask_ids(&here)),
            "{args:?}"
        );
        remote
    };
    both(&["load", "G", &base]);
    let created = both(&["branch", "create", "G", "dev"]);
    assert!(created.contains(r#""dev""#), "{created}");
    both(&["load", "G", &on_dev, "--branch", "dev"]);
    let on_branch = both(&[
        "read", "G", "Person", "--branch", "dev", "--select", "name,age",
    ]);
    assert!(
        on_branch.contains("cy") && !on_branch.contains("bob"),
        "{on_branch}"
    );
    let on_trunk = both(&["read", "G", "Person", "--select", "name,age"]);
    assert!(
        on_trunk.contains("bob") && !on_trunk.contains("cy"),
        "{on_trunk}"
    );
    both(&["get", "G", "Person", "cy", "--branch", "dev"]);
    both(&[
        "neighbors",
        "G",
        "Person",
        "ada",
        "--edge",
        "Knows",
        "--branch",
        "dev",
    ]);
    both(&[
        "read", "G", "Person", "--branch", "dev", "--fresh", "--select", "name",
    ]);
    let listed = both(&["branch", "list", "G"]);
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(
        listed.lines().next().unwrap().contains(r#""main""#),
        "{listed}"
    );
    let log = both(&["log", "G", "--branch", "dev"]);
    assert!(log.contains(r#""branch""#), "{log}");

    // A conflict: ada changed on both sides, differently. Exit 79 (retrying does not
    // help), both values named, nothing written.
    both(&["load", "G", &on_main]);
    for graph in ["g", embedded.as_str()] {
        let mut args = vec!["branch", "merge", graph, "dev", "--into", "main"];
        if graph == "g" {
            args.extend(["--server", &served.url]);
        }
        let refused = run(&args);
        assert_eq!(refused.status.code(), Some(79), "{refused:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            stderr.contains(
                "Person `ada`: changed on the merged branch (age: 37), changed on the target (age: 38)"
            ) && stderr.contains("--prefer"),
            "{stderr}"
        );
        // In JSON the keys are fields on stdout too, embedded and through a server alike.
        args.extend(["--format", "json"]);
        let refused = run(&args);
        assert_eq!(refused.status.code(), Some(79), "{refused:?}");
        let document: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
        assert_eq!(document["merged"], false, "{document}");
        assert_eq!(document["kind"], "merge_conflict", "{document}");
        assert_eq!(
            document["conflicts"][0]["source_value"], "age: 37",
            "{document}"
        );
        assert_eq!(
            document["conflicts"][0]["target_value"], "age: 38",
            "{document}"
        );
        assert_eq!(
            document["conflicts"][0]["key"], "ada",
            "{graph}: {document}"
        );
        assert_eq!(
            document["conflicts"][0]["type_name"], "Person",
            "{document}"
        );
    }
    // Settled in the merged branch's favour, the merge goes through: a three-way merge
    // with both parents, and dev's age for ada.
    let merged = both(&[
        "branch", "merge", "G", "dev", "--into", "main", "--prefer", "source",
    ]);
    assert!(
        merged.contains("three-way") && merged.contains(r#""resolved":1"#),
        "{merged}"
    );
    let after = both(&["read", "G", "Person", "--select", "name,age"]);
    assert!(after.contains("cy") && !after.contains("bob"), "{after}");
    assert!(after.contains(r#"{"name":"ada","age":37}"#), "{after}");
    let log = both(&["log", "G", "--limit", "1"]);
    assert!(log.contains(r#""merge""#), "{log}");
    // Merged again with nothing new: "up to date", the head it stays at, no commit.
    let again = both(&["branch", "merge", "G", "dev"]);
    let again: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["merge"], "up to date", "{again}");
    assert!(
        again["head"].is_string() && again.get("commit").is_none(),
        "{again}"
    );

    // Refusals: `main` cannot go (65); a missing branch is not found (66).
    let main = run(&["branch", "delete", &embedded, "main"]);
    assert_eq!(main.status.code(), Some(65), "{main:?}");
    let missing = run(&["branch", "delete", "g", "nope", "--server", &served.url]);
    assert_eq!(missing.status.code(), Some(66), "{missing:?}");
    // Streaming ingest on a branch: folded into that branch only.
    let streamed = ndjson(
        dir.path(),
        "stream.ndjson",
        &[r#"{"type":"Person","data":{"name":"dee","age":51}}"#],
    );
    ok(&["ingest", &embedded, &streamed, "--branch", "dev"]);
    ok(&[
        "ingest",
        "g",
        &streamed,
        "--branch",
        "dev",
        "--server",
        &served.url,
    ]);
    // The server folds in the background: fold now, so both compare.
    ok(&[
        "ingest",
        "fold",
        "g",
        "--branch",
        "dev",
        "--server",
        &served.url,
    ]);
    let streamed_in = both(&[
        "read", "G", "Person", "--branch", "dev", "--select", "name,age",
    ]);
    assert!(streamed_in.contains("dee"), "{streamed_in}");
    let trunk = both(&["read", "G", "Person", "--select", "name"]);
    assert!(!trunk.contains("dee"), "{trunk}");
    for graph in ["g", embedded.as_str()] {
        let mut args = vec!["ingest", "status", graph, "--branch", "dev"];
        if graph == "g" {
            args.extend(["--server", &served.url]);
        }
        let status = ok(&args);
        assert!(status.contains("Person"), "{status}");
    }

    both(&["branch", "delete", "G", "dev"]);
    let listed = both(&["branch", "list", "G"]);
    assert_eq!(listed.lines().count(), 1, "{listed}");
    let help = ok(&["branch", "merge", "--help"]);
    assert!(
        help.contains("fast-forward") && help.contains("--into"),
        "{help}"
    );
}
