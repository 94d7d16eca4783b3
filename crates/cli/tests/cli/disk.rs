//! Real disks that refuse writes, with real processes: a small tmpfs filled to the last
//! byte, remounted read-only, and a graph written by a user who may not. (Mounting needs
//! root, which the machines this project is tested on give; the test says so if not.)

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::{bin, examples, ok, serve};

/// A tmpfs of a few MiB mounted on a temporary directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(mib: u64) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={mib}m,mode=1777"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            mounted.status.success(),
            "this test mounts a {mib} MiB tmpfs to fill (it needs root or CAP_SYS_ADMIN): {}",
            String::from_utf8_lossy(&mounted.stderr)
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn remount(&self, mode: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(self.path())
            .status()
            .unwrap();
        assert!(status.success(), "remount {mode}");
    }

    /// Fill every free byte with one file; its path, to free the space again.
    fn fill(&self) -> PathBuf {
        let path = self.path().join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let block = vec![7u8; 64 * 1024];
        loop {
            if let Err(error) = file.write_all(&block).and_then(|()| file.sync_all()) {
                assert_eq!(error.raw_os_error(), Some(28), "{error}");
                break;
            }
        }
        // The last partial block may have left a few bytes; take them too.
        let _ = file.write_all(&[7u8; 1]);
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}

fn people_lines(n: std::ops::Range<u32>) -> String {
    n.map(|i| {
        format!(
            "{{\"type\":\"Person\",\"data\":{{\"name\":\"d{i:03}\",\"age\":{}}}}}\n",
            i % 90
        )
    })
    .collect()
}

/// The names of Person rows starting with `d`, as read embedded; a name seen twice fails.
fn names(graph: &str) -> Vec<String> {
    let text = ok(&[
        "read", graph, "Person", "--format", "ndjson", "--limit", "100000",
    ]);
    let mut names: Vec<String> = text
        .lines()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .filter(|name| name.starts_with('d'))
        .collect();
    let count = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), count, "a row is there twice");
    names
}

fn refused(output: &Output, code: i32, words: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert!(stderr.contains(words), "{stderr}");
    assert!(
        !stderr.contains("os error") && !stderr.contains(".lance/"),
        "internal words: {stderr}"
    );
}

/// What `serve` printed on its way out; a server that starts instead fails the test.
fn refuses_to_serve(mut serve: Command) -> Output {
    let child = serve
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut child = child;
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("serve started on a disk it cannot write");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// A server and a CLI beside it on a disk that fills up: every write that cannot be made
/// durable is refused as unavailable (75) saying the disk is full — an ingest, a load
/// (remote and embedded), a fold — while reads go on; a producer that keeps retrying is
/// acknowledged once space is freed, by the same server, and after a fold every row
/// acknowledged before and after is there exactly once.
#[test]
fn a_server_on_a_full_disk_refuses_writes_and_carries_on_once_space_is_freed() {
    let disk = Tmpfs::mount(16);
    let root = disk.path().to_path_buf();
    let graph = root.join("g").to_string_lossy().into_owned();
    let schema = examples().join("schema.tg");
    ok(&["init", &graph, "--schema", &schema.to_string_lossy()]);
    let server = serve(&root, &[]);
    let remote = |args: &[&str]| {
        let mut command = bin();
        command.args(args).args(["--server", &server.url]);
        command.output().unwrap()
    };
    let before = root.join("before.ndjson");
    std::fs::write(&before, people_lines(0..50)).unwrap();
    let acked = remote(&["ingest", "g", &before.to_string_lossy(), "--format", "json"]);
    assert!(
        acked.status.success(),
        "{}",
        String::from_utf8_lossy(&acked.stderr)
    );

    let filler = disk.fill();
    let one = examples().join("update.ndjson");
    refused(
        &remote(&["load", "g", &one.to_string_lossy()]),
        75,
        "the disk is full (writing",
    );
    refused(
        &bin()
            .args(["load", &graph, &one.to_string_lossy()])
            .output()
            .unwrap(),
        75,
        "the disk is full (writing",
    );
    refused(
        &remote(&["ingest", "fold", "g"]),
        75,
        "the disk is full (writing",
    );
    // Reads go on, at the head and fresh.
    assert_eq!(names(&graph).len(), 0);
    let fresh = remote(&[
        "read", "g", "Person", "--fresh", "--format", "ndjson", "--limit", "1000",
    ]);
    assert!(
        fresh.status.success(),
        "{}",
        String::from_utf8_lossy(&fresh.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&fresh.stdout).lines().count(), 50);

    // A producer started on the full disk waits, retrying, and finishes once space is freed.
    let after = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(after.path(), people_lines(50..80)).unwrap();
    let mut producer = bin()
        .args(["ingest", "g"])
        .arg(after.path())
        .args(["--server", &server.url, "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        producer.try_wait().unwrap().is_none(),
        "the producer gave up on a full disk"
    );
    std::fs::remove_file(&filler).unwrap();
    let started = Instant::now();
    let finished = loop {
        if let Some(status) = producer.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the producer never finished"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = producer.wait_with_output().unwrap();
    assert!(
        finished.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // The same server folds, and every acknowledged row is there once.
    let folded = remote(&["ingest", "fold", "g"]);
    assert!(
        folded.status.success(),
        "{}",
        String::from_utf8_lossy(&folded.stderr)
    );
    let seen = names(&graph);
    let expected: Vec<String> = (0..80).map(|i| format!("d{i:03}")).collect();
    assert_eq!(seen, expected);
    drop(server);
}

/// A read-only disk: writes exit 77 saying so and naming what they were writing, reads
/// work, `serve` refuses to start; writable again, the same graph takes writes. A user who
/// may not write the graph's folder hears "permission denied", also 77, and so does a
/// `serve` started by that user.
#[test]
fn a_read_only_or_forbidden_graph_refuses_writes_by_name_and_serve_will_not_start() {
    let disk = Tmpfs::mount(16);
    let root = disk.path().to_path_buf();
    let graph = root.join("g").to_string_lossy().into_owned();
    let schema = examples().join("schema.tg");
    let data = examples()
        .join("data.ndjson")
        .to_string_lossy()
        .into_owned();
    let update = examples()
        .join("update.ndjson")
        .to_string_lossy()
        .into_owned();
    ok(&["init", &graph, "--schema", &schema.to_string_lossy()]);
    ok(&["load", &graph, &data]);
    let rows = ok(&[
        "read", &graph, "Person", "--format", "ndjson", "--limit", "100000",
    ]);

    disk.remount("ro");
    let run = |args: &[&str]| bin().args(args).output().unwrap();
    refused(
        &run(&["load", &graph, &update]),
        77,
        "the disk is read-only (writing",
    );
    refused(
        &run(&["ingest", &graph, &update]),
        77,
        "the disk is read-only (writing",
    );
    refused(
        &run(&["ingest", "fold", &graph]),
        77,
        "the disk is read-only (writing",
    );
    assert_eq!(
        ok(&["read", &graph, "Person", "--format", "ndjson", "--limit", "100000"]),
        rows
    );
    ok(&["log", &graph]);
    let mut serve = bin();
    serve
        .arg("serve")
        .arg(&root)
        .args(["--bind", "127.0.0.1:0"]);
    refused(
        &refuses_to_serve(serve),
        77,
        "the disk is read-only (writing the root folder)",
    );

    disk.remount("rw");
    ok(&["load", &graph, &update]);

    // Another user (nobody), who may read the graph but not write it.
    let nobody = |args: &[&str]| {
        use std::os::unix::process::CommandExt;
        let mut command = bin();
        command.args(args).uid(65534).gid(65534);
        command
    };
    let as_nobody = |args: &[&str]| nobody(args).output().unwrap();
    refused(
        &as_nobody(&["load", &graph, &update]),
        77,
        "permission denied (writing",
    );
    let read = as_nobody(&["read", &graph, "Company", "--format", "ndjson"]);
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    // The root is the tmpfs's, open to all (1777); the graph's folder is root's.
    let served = refuses_to_serve(nobody(&[
        "serve",
        &root.to_string_lossy(),
        "--bind",
        "127.0.0.1:0",
    ]));
    refused(
        &served,
        77,
        "permission denied (writing graph `g`'s folder)",
    );
}

/// `tributary check`: a clean graph checks clean (exit 0, `"ok": true`); one whose Person
/// data file is gone prints a record naming the branch, commit and table, then the
/// summary, and exits 70; reads of it exit 66 naming the table and the commit, and a
/// `get` is not taken for a bad filter. `check` runs where the files are, not through a
/// server.
#[test]
fn check_names_what_is_damaged_and_exits_70() {
    let (dir, graph) = crate::example_graph();
    let clean = ok(&["check", &graph, "--format", "ndjson"]);
    let summary: serde_json::Value = serde_json::from_str(clean.lines().last().unwrap()).unwrap();
    assert_eq!(summary["ok"], true, "{clean}");
    assert_eq!(summary["problems"], 0, "{clean}");
    assert!(summary["rows"].as_u64().unwrap() > 0, "{clean}");
    let head = ok(&["log", &graph, "--format", "ndjson", "--limit", "1"]);
    let head: serde_json::Value = serde_json::from_str(head.trim()).unwrap();
    let head = head["commit"].as_str().unwrap().to_owned();

    let data = dir.path().join("g/nodes/Person.lance/data");
    let file = std::fs::read_dir(&data)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(file).unwrap();
    let checked = bin()
        .args(["check", &graph, "--format", "ndjson"])
        .output()
        .unwrap();
    assert_eq!(checked.status.code(), Some(70));
    let stdout = String::from_utf8_lossy(&checked.stdout);
    let records: Vec<serde_json::Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let (problems, summary) = records.split_at(records.len() - 1);
    assert!(!problems.is_empty(), "{stdout}");
    for problem in problems {
        assert_eq!(problem["table"], "Person", "{stdout}");
        assert_eq!(problem["branch"], "main", "{stdout}");
        assert_eq!(problem["commit"], head.as_str(), "{stdout}");
    }
    assert_eq!(summary[0]["ok"], false, "{stdout}");
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(stderr.contains("the graph is damaged"), "{stderr}");

    let read = bin().args(["read", &graph, "Person"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&read.stderr);
    assert_eq!(read.status.code(), Some(66), "{stderr}");
    assert!(
        stderr.contains("Person") && stderr.contains(&head),
        "{stderr}"
    );
    let get = bin()
        .args(["get", &graph, "Person", "person-0001"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&get.stderr);
    assert_eq!(get.status.code(), Some(66), "{stderr}");
    assert!(!stderr.contains("invalid filter"), "{stderr}");

    let remote = bin()
        .args(["check", "g", "--server", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(remote.status.code(), Some(64));
}
