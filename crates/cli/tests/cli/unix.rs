//! The command line as a Unix tool: help for every command, completions, manual pages,
//! structured logs, a progress line that fits the terminal, a byte-order mark, names a user
//! misspelt, exit statuses, and a reader that goes away.

use std::process::{Command, Stdio};

use crate::{bin, empty_graph, example_graph, examples, ok, run};

#[test]
fn every_command_has_help() {
    let top = ok(&["--help"]);
    for command in [
        "init",
        "load",
        "read",
        "get",
        "neighbors",
        "search",
        "query",
        "sql",
        "log",
        "schema",
        "rejects",
        "cleanup",
        "branch",
        "completions",
        "man",
        "openapi",
    ] {
        assert!(top.contains(command), "top-level help misses {command}");
        let help = ok(&[command, "--help"]);
        assert!(
            help.contains("--format"),
            "{command} --help lacks --format:\n{help}"
        );
        assert!(
            help.contains("Usage: tributary"),
            "{command} --help:\n{help}"
        );
    }
}

#[test]
fn completions_a_man_page_json_logs_and_a_watched_status_come_from_the_cli() {
    for shell in ["bash", "zsh", "fish"] {
        let script = ok(&["completions", shell]);
        assert!(
            script.contains("tributary") && script.contains("ingest"),
            "{shell}: {script}"
        );
    }
    let man = ok(&["man"]);
    assert!(
        man.starts_with(".ie") || man.contains(".TH tributary"),
        "{man}"
    );
    // A page per command, nested ones too, each naming how it is invoked.
    let pages = tempfile::tempdir().unwrap();
    ok(&["man", "--dir", &pages.path().to_string_lossy()]);
    for (page, usage) in [
        ("tributary.1", "tributary"),
        ("tributary-load.1", "tributary load"),
        ("tributary-ingest-status.1", "tributary ingest status"),
        ("tributary-branch-merge.1", "tributary branch merge"),
    ] {
        let text = std::fs::read_to_string(pages.path().join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}: {text}");
        assert!(
            text.contains(&usage.replace(' ', "\\ ")) || text.contains(usage),
            "{page} lacks `{usage}`: {text}"
        );
    }
    assert!(!pages.path().join("tributary-help.1").exists());
    let read_page = std::fs::read_to_string(pages.path().join("tributary-read.1")).unwrap();
    assert!(
        read_page.contains("format"),
        "global options belong on every page: {read_page}"
    );
    assert!(!read_page.contains("help(1)"), "{read_page}");
    // The API's description, from the server's own registrations.
    let openapi: serde_json::Value = serde_json::from_str(&ok(&["openapi"])).unwrap();
    assert!(
        openapi["paths"]["/graphs/{id}/ingest"]["post"].is_object(),
        "{openapi}"
    );
    let help = ok(&["--help"]);
    for status in ["64", "74", "77", "130"] {
        assert!(
            help.contains(status),
            "exit status {status} undocumented: {help}"
        );
    }

    let (dir, graph) = empty_graph();
    let data = dir.path().join("in.ndjson");
    std::fs::write(&data, "{\"type\":\"Person\",\"data\":{\"name\":\"a\"}}\n").unwrap();
    let logged = bin()
        .args([
            "ingest",
            &graph,
            &data.to_string_lossy(),
            "--log-format",
            "json",
        ])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert!(logged.status.success(), "{logged:?}");
    let stderr = String::from_utf8_lossy(&logged.stderr);
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["level"] == "INFO" && l["fields"]["message"] == "folded"),
        "{stderr}"
    );

    // `ingest status --watch` shows the status again and again until a signal stops it.
    let watching = bin()
        .args([
            "ingest", "status", &graph, "--watch", "0.2", "--format", "ndjson",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let sent = Command::new("kill")
        .args(["-INT", &watching.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let watched = watching.wait_with_output().unwrap();
    assert_eq!(watched.status.code(), Some(0), "{watched:?}");
    let views = String::from_utf8_lossy(&watched.stdout)
        .lines()
        .filter(|l| l.contains(r#""type":"Person""#))
        .count();
    assert!(views >= 2, "shown {views} times");
}

/// On a terminal (a pseudo-terminal made by util-linux's `script`), `ingest` of a file
/// draws a progress bar of bytes read of the file's size with the rows acknowledged, and
/// `load` a spinner it clears when done.
#[test]
fn ingest_and_load_of_a_file_show_progress_on_a_terminal() {
    let (dir, graph) = empty_graph();
    let data = dir.path().join("in.ndjson");
    let lines: String = (0..5000)
        .map(|i| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"p{i}\"}}}}\n"))
        .collect();
    std::fs::write(&data, &lines).unwrap();
    let bin = env!("CARGO_BIN_EXE_tributary");
    let on_a_terminal = |args: &str| {
        let command = if args.contains(bin) {
            args.to_owned()
        } else {
            format!("{bin} {args}")
        };
        let output = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let data = data.to_string_lossy();
    // At 80 columns every redraw of the progress line fits: a wrapped one would be
    // redrawn as a new line.
    let ingested = on_a_terminal(&format!(
        "stty cols 80 rows 24; {bin} ingest {graph} {data} --batch-lines 500"
    ));
    assert!(
        // The bar is cleared at the end, so its last redraw may show fewer rows than
        // the summary after it.
        ingested.contains("KiB/")
            && ingested.contains(" acked")
            && ingested.contains("5000 rows durable"),
        "{ingested}"
    );
    // What the terminal shows: escape sequences (ESC [ ... letter) take no room.
    let mut drawn = String::new();
    let mut chars = ingested.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            drawn.push(c);
        }
    }
    for line in drawn.split(['\r', '\n']).filter(|l| l.contains("KiB/")) {
        assert!(
            line.chars().count() <= 80,
            "a progress line over 80 columns: {line:?}"
        );
    }
    let loaded = on_a_terminal(&format!("load {graph} {data}"));
    assert!(loaded.contains("Person"), "{loaded}");
    // Piped, neither draws anything.
    let piped = run(&["ingest", &graph, &data]);
    assert!(!String::from_utf8_lossy(&piped.stderr).contains(" acked"));
}

#[test]
fn a_byte_order_mark_a_missing_node_and_a_misspelt_name_are_handled_as_a_user_expects() {
    let (dir, graph) = empty_graph();
    let bom = dir.path().join("bom.ndjson");
    std::fs::write(
        &bom,
        "\u{feff}{\"type\":\"Person\",\"data\":{\"name\":\"ada\"}}\n",
    )
    .unwrap();
    ok(&["load", &graph, &bom.to_string_lossy()]);
    ok(&["get", &graph, "Person", "ada"]);
    // A schema file an editor saved with a byte-order mark, too.
    let schema = std::fs::read_to_string(examples().join("schema.tg")).unwrap();
    let marked = dir.path().join("marked.tg");
    std::fs::write(&marked, format!("\u{feff}{schema}")).unwrap();
    let other = dir.path().join("other").to_string_lossy().into_owned();
    ok(&["init", &other, "--schema", &marked.to_string_lossy()]);
    // An ingest whose reader goes away stops, and says so: its unsent lines are not written.
    let many = dir.path().join("many.ndjson");
    let lines: String = (0..20_000)
        .map(|i| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"m{i}\"}}}}\n"))
        .collect();
    std::fs::write(&many, lines).unwrap();
    let mut child = bin()
        .args([
            "ingest",
            &graph,
            &many.to_string_lossy(),
            "--batch-lines",
            "100",
            "--format",
            "ndjson",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away at once
    let stopped = child.wait_with_output().unwrap();
    assert_eq!(stopped.status.code(), Some(74), "{stopped:?}");
    assert!(
        String::from_utf8_lossy(&stopped.stderr).contains("the reader of the output went away"),
        "{stopped:?}"
    );
    // `neighbors` of a node that is not there is "not found", as `get` is.
    let missing = run(&["neighbors", &graph, "Person", "nobody", "--edge", "Knows"]);
    assert_eq!(missing.status.code(), Some(66), "{missing:?}");
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("Person `nobody` not found"),
        "{missing:?}"
    );
    // A node with no edges has no neighbours: an empty answer.
    ok(&["neighbors", &graph, "Person", "ada", "--edge", "Knows"]);
    let misspelt = run(&["read", &graph, "Persn"]);
    assert_eq!(misspelt.status.code(), Some(66), "{misspelt:?}");
    assert!(
        String::from_utf8_lossy(&misspelt.stderr).contains("did you mean `Person`?"),
        "{misspelt:?}"
    );
    let line = dir.path().join("typo.ndjson");
    std::fs::write(
        &line,
        "{\"type\":\"Persn\",\"data\":{\"name\":\"x\"}}\n{\"type\":\"Person\",\"data\":{\"nmae\":\"x\"}}\n",
    )
    .unwrap();
    let refused = run(&["load", &graph, &line.to_string_lossy()]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    // Names are in backticks wherever they come from: the line, the schema, a flag.
    assert!(
        stderr.contains("did you mean `Person`?") && stderr.contains("did you mean `name`?"),
        "{stderr}"
    );
    let column = run(&["read", &graph, "Person", "--select", "nme"]);
    assert_eq!(column.status.code(), Some(65), "{column:?}");
    assert!(
        String::from_utf8_lossy(&column.stderr).contains("did you mean `name`?"),
        "{column:?}"
    );
}

/// A reader that goes away (`tributary read … | head`) stops the command quietly, with
/// exit 0, as Unix tools do.
#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    let (_dir, graph) = example_graph();
    let mut child = bin()
        .args(["read", &graph, "Knows", "--format", "ndjson"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Closed before the command has opened the graph, let alone written.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(output.stderr.is_empty(), "{output:?}");
}
