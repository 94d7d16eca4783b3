//! Real processes stopping and starting around one graph: a server stopped by SIGTERM or
//! killed, a CLI ingest beside a server, an ingest stopped by a signal, input that is not
//! UTF-8. What was acknowledged must reach the graph, and no older write may overtake a
//! newer one.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{bin, empty_graph, ok, run, serve, Served};

fn person(name: &str, age: i32) -> String {
    format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"{name}\",\"age\":{age}}}}}\n")
}

/// Run `tributary` with `args` against `served`.
fn remote(served: &Served, args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.extend(["--server", &served.url]);
    ok(&all)
}

fn write_file(dir: &std::path::Path, name: &str, text: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// Rows durable only in some WAL, over every shard (`ingest status`).
fn wal_only_rows(graph: &str) -> i64 {
    ok(&["ingest", "status", graph, "--format", "ndjson"])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|row| row["wal_only_rows"].as_i64().unwrap())
        .sum()
}

/// The `age` of `name` as a read of `graph` shows it.
fn age(graph: &str, name: &str) -> String {
    let row = ok(&["get", graph, "Person", name, "--format", "ndjson"]);
    let row: serde_json::Value = serde_json::from_str(row.trim()).unwrap();
    row["age"].to_string()
}

fn person_ids(graph: &str) -> Vec<String> {
    let csv = ok(&["read", graph, "Person", "--select", "id", "--format", "csv"]);
    let mut ids: Vec<String> = csv.lines().skip(1).map(str::to_owned).collect();
    ids.sort();
    ids
}

fn sigterm(child: &std::process::Child) {
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Wait (bounded) for `child` to exit.
fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the process did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_server_stopped_by_sigterm_flushes_what_it_acknowledged_and_exits_0() {
    let (dir, graph) = empty_graph();
    let mut served = serve(dir.path(), &[]);
    let lines: String = (0..50).map(|i| person(&format!("p{i}"), 30)).collect();
    let file = write_file(dir.path(), "in.ndjson", lines.as_bytes());
    remote(&served, &["ingest", "g", &file]);
    sigterm(&served.child);
    let status = wait_exit(&mut served.child);
    assert!(status.success(), "serve exited with {status}");
    assert_eq!(wal_only_rows(&graph), 0, "rows were left only in the WAL");
    ok(&["ingest", "fold", &graph]);
    assert_eq!(person_ids(&graph).len(), 50);
}

#[test]
fn a_load_after_a_killed_server_is_not_overwritten_by_its_acknowledged_rows() {
    let (dir, graph) = empty_graph();
    let mut served = serve(dir.path(), &[]);
    let older = write_file(dir.path(), "older.ndjson", person("ada", 30).as_bytes());
    remote(&served, &["ingest", "g", &older]);
    // Killed before its folder (max lag 1 s) published the row: it is only in the WAL.
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    assert_eq!(
        wal_only_rows(&graph),
        1,
        "the scenario needs the row unflushed"
    );

    let newer = write_file(dir.path(), "newer.ndjson", person("ada", 31).as_bytes());
    ok(&["load", &graph, &newer]);
    assert_eq!(age(&graph, "ada"), "31");
    // A later ingest opens the shard the dead server wrote; its fold keeps 31.
    let later = write_file(dir.path(), "later.ndjson", person("bob", 40).as_bytes());
    ok(&["ingest", &graph, &later]);
    ok(&["ingest", "fold", &graph]);
    assert_eq!(age(&graph, "ada"), "31", "the older acknowledged write won");
    assert_eq!(age(&graph, "bob"), "40");
}

#[test]
fn an_ingest_beside_a_server_fences_it_once_and_the_server_heals() {
    let (dir, graph) = empty_graph();
    let served = serve(dir.path(), &[]);
    let first = write_file(dir.path(), "a.ndjson", person("a1", 1).as_bytes());
    remote(&served, &["ingest", "g", &first]);
    // An embedded ingest claims the shard the server writes.
    let beside = write_file(dir.path(), "b.ndjson", person("b1", 2).as_bytes());
    ok(&["ingest", &graph, &beside]);
    // The server's next send reopens the shard instead of failing with a fence.
    let again = write_file(dir.path(), "c.ndjson", person("a2", 3).as_bytes());
    remote(&served, &["ingest", "g", &again]);
    remote(&served, &["ingest", "fold", "g"]);
    assert_eq!(person_ids(&graph), ["a1", "a2", "b1"]);
}

#[test]
fn an_ingest_stopped_by_a_signal_flushes_its_writers() {
    let (_dir, graph) = empty_graph();
    let mut child = bin()
        .args(["ingest", &graph, "-", "--format", "json", "--no-fold"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut acks = BufReader::new(child.stdout.take().unwrap()).lines();
    for i in 0..20 {
        stdin
            .write_all(person(&format!("p{i}"), 1).as_bytes())
            .unwrap();
    }
    stdin.flush().unwrap();
    let mut through = 0;
    while through < 20 {
        let ack: serde_json::Value = serde_json::from_str(&acks.next().unwrap().unwrap()).unwrap();
        through = ack["through_line"].as_u64().unwrap();
    }
    sigterm(&child);
    let status = wait_exit(&mut child);
    assert_eq!(status.code(), Some(130), "{status}");
    assert_eq!(
        wal_only_rows(&graph),
        0,
        "acknowledged rows left in the WAL"
    );
    drop(stdin);
}

#[test]
fn a_line_that_is_not_utf8_is_rejected_alone_and_the_rest_goes_on() {
    let (dir, graph) = empty_graph();
    let mut input = person("p1", 1).into_bytes();
    input.extend_from_slice(b"{\"type\":\"Person\",\"data\":{\"name\":\"\xff\xfe\"}}\n");
    input.extend_from_slice(person("p3", 3).as_bytes());
    let file = write_file(dir.path(), "mixed.ndjson", &input);
    let output = run(&["ingest", &graph, &file, "--format", "json"]);
    assert!(output.status.success(), "{output:?}");
    let records: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rejected: Vec<&serde_json::Value> = records
        .iter()
        .flat_map(|r| r["rejected"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(rejected.len(), 1, "{records:?}");
    assert_eq!(rejected[0]["line"], 2);
    assert!(rejected[0]["error"].as_str().unwrap().contains("UTF-8"));
    let summary = records.last().unwrap();
    assert_eq!(summary["acked"], 2, "{summary}");
    assert_eq!(summary["through_line"], 3, "{summary}");
    assert_eq!(person_ids(&graph), ["p1", "p3"]);
}

#[test]
fn a_read_error_ends_ingest_with_a_failure_naming_the_line() {
    let (dir, graph) = empty_graph();
    // A directory opens as a file on Linux, and its first read fails.
    let output = run(&["ingest", &graph, &dir.path().to_string_lossy()]);
    assert_eq!(output.status.code(), Some(74), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot read line 1 of"), "{stderr}");
}

#[test]
fn two_load_processes_at_once_cannot_share_a_unique_email() {
    let (dir, graph) = empty_graph();
    let line = |name: &str| {
        format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"{name}\",\"email\":\"x@example.com\"}}}}\n")
    };
    let ada = write_file(dir.path(), "ada.ndjson", line("ada").as_bytes());
    let bob = write_file(dir.path(), "bob.ndjson", line("bob").as_bytes());
    // The first load validates, writes its sidecar and then waits before its table commits.
    let mut first = bin()
        .args(["load", &graph, &ada])
        .env("FAILPOINTS", "load::before-table-commits=sleep(2000)")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let recovery = std::path::Path::new(&graph).join("__recovery");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(&recovery).map_or(0, |d| d.count()) == 0 {
        assert!(Instant::now() < deadline, "the first load never staged");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The second, with the same @unique email, runs while the first is mid-write.
    let second = run(&["load", &graph, &bob]);
    let first_status = wait_exit(&mut first);
    assert!(first_status.success(), "the first load failed");
    assert_eq!(
        second.status.code(),
        Some(65),
        "the second load shared the first's @unique email"
    );
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("is not unique"), "{stderr}");
    assert_eq!(person_ids(&graph), ["ada"]);
}

#[test]
fn a_remote_ingest_of_a_file_goes_in_large_sends() {
    let (dir, graph) = empty_graph();
    let served = serve(dir.path(), &[]);
    let text: String = (0..2_000).map(|i| person(&format!("p{i}"), 30)).collect();
    let file = write_file(dir.path(), "many.ndjson", text.as_bytes());
    let out = remote(&served, &["ingest", "g", &file, "--format", "json"]);
    let records: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|r: &serde_json::Value| r.get("through_line").is_some())
        .collect();
    let last = records.last().expect("acknowledgements");
    assert_eq!(last["through_line"], 2_000, "{last}");
    // One acknowledgement per send; a send per line would make 2,000 of them. (How many
    // lines each send takes depends on how far the reader is ahead: under a loaded
    // machine a few hundred sends, alone here about twenty.)
    assert!(records.len() < 1_000, "{} acknowledgements", records.len());
    drop(served);
    ok(&["ingest", "fold", &graph]);
    assert_eq!(person_ids(&graph).len(), 2_000);
}

/// A holder on another machine whose heartbeat keeps changing holds the lease, though
/// every heartbeat reads two minutes old to the waiting process (its clock jumped ahead):
/// the load says whom it waits for, and takes over only once the heartbeat stops, after
/// the grace (shortened here) measured on its own clock.
#[test]
fn a_load_waiting_for_another_process_s_lease_says_so_and_a_clock_jump_does_not_end_the_wait() {
    let (dir, graph) = empty_graph();
    let leases = std::path::Path::new(&graph).join("__leases").join("main");
    std::fs::create_dir_all(&leases).unwrap();
    let lease = leases.join(format!("{:020}.json", 0));
    let holder = r#"{"state":"held","branch":"main","owner":{"host":"another-machine","pid":7}}"#;
    std::fs::write(&lease, holder).unwrap();
    let beating = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let heart = {
        let (lease, beating) = (lease.clone(), beating.clone());
        std::thread::spawn(move || {
            let behind = Duration::from_secs(120);
            let mut n = 0u64;
            while beating.load(std::sync::atomic::Ordering::Relaxed) {
                let file = std::fs::File::options().write(true).open(&lease).unwrap();
                file.set_modified(std::time::SystemTime::now() - behind - Duration::from_millis(n))
                    .unwrap();
                n += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let file = write_file(dir.path(), "ada.ndjson", person("ada", 30).as_bytes());
    let mut load = bin()
        .env("FAILPOINTS", "intent::foreign-grace-ms=return(3000)")
        .args(["load", &graph, &file])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(load.stderr.take().unwrap());
    let mut said = String::new();
    stderr.read_line(&mut said).unwrap();
    assert!(
        said.contains("waiting for the write lease of branch `main`")
            && said.contains("process 7 on another-machine"),
        "{said}"
    );
    // Past twice the grace since the load started, the holder still beats: no takeover.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        load.try_wait().unwrap().is_none(),
        "a live holder was taken over"
    );
    assert!(person_ids(&graph).is_empty());
    beating.store(false, std::sync::atomic::Ordering::Relaxed);
    heart.join().unwrap();
    let status = wait_exit(&mut load);
    assert!(status.success(), "{status}");
    assert_eq!(person_ids(&graph), ["ada"]);
}

/// A remote ingest the server refuses before the stream starts (here: the graph's one
/// stream place is taken) waits and sends the same lines again, and every line arrives.
#[test]
fn a_remote_ingest_refused_at_the_start_waits_and_retries() {
    let (dir, graph) = empty_graph();
    let served = serve(dir.path(), &["--max-ingest-streams", "1"]);
    // The first stream, fed by hand, holds the graph's one place.
    let mut first = bin()
        .args([
            "ingest",
            "g",
            "-",
            "--format",
            "json",
            "--server",
            &served.url,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut feed = first.stdin.take().unwrap();
    feed.write_all(person("first", 1).as_bytes()).unwrap();
    feed.flush().unwrap();
    let mut acks = BufReader::new(first.stdout.take().unwrap()).lines();
    let ack = acks.next().unwrap().unwrap();
    assert!(ack.contains("\"through_line\":1"), "{ack}");

    let text: String = (0..200).map(|i| person(&format!("p{i}"), 30)).collect();
    let file = write_file(dir.path(), "more.ndjson", text.as_bytes());
    let mut second = bin()
        .args([
            "ingest",
            "g",
            &file,
            "--format",
            "json",
            "--server",
            &served.url,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The second is refused and waits; ending the first frees the place.
    let mut errors = BufReader::new(second.stderr.take().unwrap()).lines();
    let waiting = errors.next().unwrap().unwrap();
    assert!(waiting.contains("sending again from line 1 "), "{waiting}");
    drop(feed);
    assert!(first.wait().unwrap().success());
    let out = second.wait_with_output().unwrap();
    assert!(out.status.success(), "the retried ingest failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["acked"], 200, "{stdout}");
    drop(served);
    ok(&["ingest", "fold", &graph]);
    assert_eq!(person_ids(&graph).len(), 201);
}

/// A remote ingest whose server stops mid-stream (it ends the stream with a record of kind
/// `unavailable` after acknowledgements went out) waits, and once a server is back on the
/// address sends the lines after the last acknowledged one: every line arrives exactly
/// once, and the records number the input's lines from its start.
#[test]
fn a_remote_ingest_resumes_after_its_server_stops_mid_stream() {
    let (dir, graph) = empty_graph();
    let mut served = serve(dir.path(), &[]);
    let address = served.url.trim_start_matches("http://").to_owned();
    let mut ingest = bin()
        .args([
            "ingest",
            "g",
            "-",
            "--format",
            "json",
            "--server",
            &served.url,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut feed = ingest.stdin.take().unwrap();
    let mut records = BufReader::new(ingest.stdout.take().unwrap()).lines();
    let first: String = (0..100).map(|i| person(&format!("p{i}"), 30)).collect();
    feed.write_all(first.as_bytes()).unwrap();
    feed.flush().unwrap();
    let mut seen = Vec::new();
    while seen.last() != Some(&100) {
        seen.push(super::through_line(&records.next().unwrap().unwrap()));
    }
    sigterm(&served.child);
    assert!(wait_exit(&mut served.child).success());
    // Lines written while no server is there wait in the client.
    let second: String = (100..200).map(|i| person(&format!("p{i}"), 31)).collect();
    feed.write_all(second.as_bytes()).unwrap();
    feed.flush().unwrap();
    let _back = serve(dir.path(), &["--bind", &address]);
    drop(feed);
    let mut rest: Vec<String> = records.map(Result::unwrap).collect();
    let summary: serde_json::Value = serde_json::from_str(&rest.pop().unwrap()).unwrap();
    seen.extend(rest.iter().map(|record| super::through_line(record)));
    let status = wait_exit(&mut ingest);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut ingest.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("sending again from line 101"), "{stderr}");
    assert_eq!(summary["acked"], 200, "{summary}");
    assert_eq!(summary["through_line"], 200, "{summary}");
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "records in order: {seen:?}"
    );
    assert_eq!(seen.last(), Some(&200));
    ok(&["ingest", "fold", &graph]);
    let ids = person_ids(&graph);
    assert_eq!(ids.len(), 200, "every line once");
    assert_eq!(age(&graph, "p150"), "31");
}

/// An input that cannot be read fails a remote ingest (as it fails an embedded one): the
/// client neither reports success nor waits for a server that did nothing wrong.
#[test]
fn a_remote_ingest_of_an_unreadable_input_fails() {
    let (dir, _graph) = empty_graph();
    let served = serve(dir.path(), &[]);
    let unreadable = dir.path().join("a-directory");
    std::fs::create_dir(&unreadable).unwrap();
    let output = bin()
        .args([
            "ingest",
            "g",
            &unreadable.to_string_lossy(),
            "--server",
            &served.url,
        ])
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("a-directory"), "{stderr}");
    assert!(!stderr.contains("sending again"), "{stderr}");
}

/// A remote load whose client goes away still runs on the server to its end, and may
/// commit after a write acknowledged since: here it waits before its turn (as behind a
/// fold), a later embedded load of the same key is acknowledged meanwhile, and the
/// abandoned one lands last. It overlapped the later write, so either order is allowed;
/// the torture test's oracle allows it until the server stops.
#[test]
fn an_abandoned_remote_load_still_commits_and_may_land_after_a_later_write() {
    let (dir, graph) = empty_graph();
    let mut command = bin();
    command.env("FAILPOINTS", "load::before-turn=sleep(1500)");
    let mut served = super::serve_by(command, &dir.path().to_string_lossy(), &[]);
    let early = write_file(dir.path(), "early.ndjson", person("ada", 1).as_bytes());
    let late = write_file(dir.path(), "late.ndjson", person("ada", 2).as_bytes());
    let mut abandoned = bin()
        .args(["load", "g", &early, "--server", &served.url])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The body is with the server, which holds the load before its turn.
    std::thread::sleep(Duration::from_millis(500));
    abandoned.kill().unwrap();
    assert!(
        !abandoned.wait().unwrap().success(),
        "the client was to go away first"
    );
    ok(&["load", &graph, &late]);
    assert_eq!(age(&graph, "ada"), "2", "the acknowledged load is visible");
    // The server finishes the abandoned load once its hold is over.
    std::thread::sleep(Duration::from_millis(2500));
    sigterm(&served.child);
    assert!(wait_exit(&mut served.child).success());
    assert_eq!(
        age(&graph, "ada"),
        "1",
        "the abandoned load landed after it"
    );
}
