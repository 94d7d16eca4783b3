//! The documentation's commands stay true: every `tributary …` command in a shell block of
//! the README, the `docs/` pages and the Python client's README must parse — its commands,
//! options and option values as written (`--help` is added, so nothing runs).

use std::path::PathBuf;

use crate::bin;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The pages the commands are read from.
fn pages() -> Vec<PathBuf> {
    let root = repository();
    let mut pages = vec![root.join("README.md"), root.join("python/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The lines of the shell blocks (```sh) of `text`, continuation lines joined.
fn shell_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    let mut pending = String::new();
    for line in text.lines() {
        let fence = line.trim_start();
        if fence.starts_with("```") {
            inside = !inside && matches!(fence.trim_start_matches('`'), "sh" | "bash" | "shell");
            continue;
        }
        if !inside {
            continue;
        }
        let line = line.trim().trim_start_matches("$ ");
        match line.strip_suffix('\\') {
            Some(start) => pending.push_str(start),
            None => {
                pending.push_str(line);
                lines.push(std::mem::take(&mut pending));
            }
        }
    }
    lines
}

/// The words of every `tributary` command in a shell line: quotes removed, cut at a
/// comment, a pipe, a redirection or a command separator.
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    let end_word = |word: &mut Option<String>, commands: &mut Vec<Vec<String>>| {
        if let Some(word) = word.take() {
            commands.last_mut().unwrap().push(word);
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                let text = word.get_or_insert_with(String::new);
                for inner in chars.by_ref() {
                    if inner == c {
                        break;
                    }
                    text.push(inner);
                }
            }
            '#' if word.is_none() => break,
            ' ' | '\t' => end_word(&mut word, &mut commands),
            '|' | ';' | '&' | '>' | '<' | '(' | ')' => {
                end_word(&mut word, &mut commands);
                commands.push(Vec::new());
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    end_word(&mut word, &mut commands);
    commands
        .into_iter()
        .filter(|words| words.first().is_some_and(|w| w == "tributary"))
        .collect()
}

#[test]
fn every_documented_command_parses() {
    let mut checked = 0;
    let mut failed = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page
            .strip_prefix(repository())
            .unwrap_or(&page)
            .display()
            .to_string();
        for line in shell_lines(&text) {
            for words in commands(&line) {
                let output = bin().args(&words[1..]).arg("--help").output().unwrap();
                checked += 1;
                if !output.status.success() {
                    failed.push(format!(
                        "{name}: `{}`: {}",
                        words.join(" "),
                        String::from_utf8_lossy(&output.stderr).trim()
                    ));
                }
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {checked} commands do not parse:\n{}",
        failed.len(),
        failed.join("\n")
    );
    // The README's tour alone has more than this: the scan finds the blocks.
    assert!(checked > 40, "only {checked} commands found");
}

#[test]
fn the_scan_reads_quotes_comments_and_pipes() {
    let line =
        r#"tributary query g 'MATCH (a) RETURN a' --param "who=ada b" | head # tributary nope"#;
    assert_eq!(
        commands(line),
        vec![vec![
            "tributary",
            "query",
            "g",
            "MATCH (a) RETURN a",
            "--param",
            "who=ada b"
        ]]
    );
    assert_eq!(
        commands("tributary schema g > s.tg && tributary init h --schema s.tg"),
        vec![
            vec!["tributary", "schema", "g"],
            vec!["tributary", "init", "h", "--schema", "s.tg"]
        ]
    );
    assert!(commands("source <(tributary completions zsh)").len() == 1);
    assert_eq!(
        shell_lines("```sh\na \\\n b\n```\n```python\nc\n```"),
        vec!["a b".to_owned()]
    );
}
