//! One writer per branch across processes: the branch write lease. Each `Graph` handle
//! stands for one process. Two writers that overlap must not both pass a check that the
//! pair breaks (`@unique`, `@card`, insert mode), and a lease whose holder is gone must
//! not block the graph.

use std::sync::Arc;
use std::time::Duration;

use tributary::{ErrorKind, Graph, LoadOptions, PathClass, ReadOptions};
use tributary_tests::{company, counted_graph, edge, ndjson, person_with_email, temp_graph};

use crate::columns::sorted_strings;
use crate::FAILPOINTS;

/// Run `first` and `second` as loads of two handles at once: `first` validates, then
/// waits before its table commits while `second` starts. Returns both results.
async fn two_loads_at_once(
    uri: &str,
    first: String,
    second: String,
) -> (tributary::Result<()>, tributary::Result<()>) {
    let a = Arc::new(Graph::open(uri).await.unwrap());
    let b = Arc::new(Graph::open(uri).await.unwrap());
    let _lock = FAILPOINTS.lock().await;
    let scenario = fail::FailScenario::setup();
    // Separate tasks: the failpoint's sleep blocks its thread.
    fail::cfg("load::before-table-commits", "1*sleep(2000)").unwrap();
    let slow =
        tokio::spawn(async move { a.load(&first, &LoadOptions::default()).await.map(|_| ()) });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let fast =
        tokio::spawn(async move { b.load(&second, &LoadOptions::default()).await.map(|_| ()) });
    let results = (slow.await.unwrap(), fast.await.unwrap());
    scenario.teardown();
    results
}

/// Exactly one of two results succeeded; the other is invalid input naming `needle`.
fn one_refused(results: (tributary::Result<()>, tributary::Result<()>), needle: &str) {
    let (ok, refused) = match results {
        (Ok(()), Err(e)) | (Err(e), Ok(())) => ((), e),
        other => panic!("expected one load to succeed and one to be refused: {other:?}"),
    };
    let () = ok;
    assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{refused}");
    assert!(refused.to_string().contains(needle), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_loads_at_once_cannot_share_a_unique_value() {
    let (_dir, uri, graph) = temp_graph().await;
    let results = two_loads_at_once(
        &uri,
        ndjson(&[person_with_email("ada", "x@example.com")]),
        ndjson(&[person_with_email("bob", "x@example.com")]),
    )
    .await;
    one_refused(results, "is not unique");
    let people = graph
        .read(
            "Person",
            &ReadOptions {
                filter: Some("email = 'x@example.com'".into()),
                ..ReadOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(people.num_rows(), 1, "two people share one @unique email");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_loads_at_once_cannot_exceed_a_cardinality() {
    let (_dir, uri, graph) = temp_graph().await;
    graph
        .load(
            &ndjson(&[
                person_with_email("ada", "ada@example.com"),
                company("acme"),
                company("initech"),
            ]),
            &LoadOptions::default(),
        )
        .await
        .unwrap();
    // WorksAt is @card(0..1): ada may work at one company.
    let results = two_loads_at_once(
        &uri,
        ndjson(&[edge("WorksAt", "ada", "acme")]),
        ndjson(&[edge("WorksAt", "ada", "initech")]),
    )
    .await;
    one_refused(results, "@card(0..1)");
    let edges = graph
        .read("WorksAt", &ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(edges.num_rows(), 1, "{:?}", sorted_strings(&edges, "id"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fold_and_a_load_at_once_cannot_share_a_unique_value() {
    let (_dir, uri, graph) = temp_graph().await;
    drop(graph);
    let streamer = Arc::new(Graph::open(&uri).await.unwrap());
    let ack = streamer
        .ingest("main")
        .unwrap()
        .send(1, &ndjson(&[person_with_email("cy", "y@example.com")]))
        .await
        .unwrap();
    assert_eq!(ack.durable_rows, 1);
    let loader = Arc::new(Graph::open(&uri).await.unwrap());
    let _lock = FAILPOINTS.lock().await;
    let scenario = fail::FailScenario::setup();
    // The fold validates its rows, then waits before its table commits; the load of
    // another person with the same email starts meanwhile.
    fail::cfg("fold::before-table-commits", "1*sleep(2000)").unwrap();
    let fold = tokio::spawn({
        let streamer = streamer.clone();
        async move { streamer.fold("main").await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let load = loader
        .load(
            &ndjson(&[person_with_email("dee", "y@example.com")]),
            &LoadOptions::default(),
        )
        .await;
    let folded = fold.await.unwrap();
    scenario.teardown();
    let folded = folded.unwrap();
    // The load waited for the fold's turn: cy is visible, dee is refused.
    assert_eq!(folded.rows.values().sum::<u64>(), 1, "{folded:?}");
    let refused = load.expect_err("the load shared cy's @unique email");
    assert!(refused.to_string().contains("is not unique"), "{refused}");
    let people = loader
        .read("Person", &ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(sorted_strings(&people, "id"), ["cy"]);
}

/// A load of one line, in a task of its own.
fn spawn_load(
    graph: &Arc<Graph>,
    line: String,
) -> tokio::task::JoinHandle<tributary::Result<tributary::LoadOutcome>> {
    let graph = graph.clone();
    tokio::spawn(async move { graph.load(&ndjson(&[line]), &LoadOptions::default()).await })
}

/// Write a lease object as another holder would have left it.
fn plant_lease(uri: &str, holder: serde_json::Value, age: Duration) -> std::path::PathBuf {
    let dir = std::path::Path::new(uri).join("__leases").join("main");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{:020}.json", 0));
    std::fs::write(&path, serde_json::to_vec(&holder).unwrap()).unwrap();
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(std::time::SystemTime::now() - age)
        .unwrap();
    path
}

fn held_by(host: &str, pid: u32, started: Option<u64>) -> serde_json::Value {
    serde_json::json!({
        "state": "held",
        "branch": "main",
        "owner": {"host": host, "pid": pid, "started": started},
    })
}

fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

#[tokio::test]
async fn a_lease_whose_holder_died_is_taken_over_at_once() {
    let (_dir, uri, graph) = temp_graph().await;
    // A process of this machine that has ended.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    plant_lease(&uri, held_by(&this_host(), pid, None), Duration::ZERO);
    let (text, options) = (ndjson(&[company("acme")]), LoadOptions::default());
    tokio::time::timeout(Duration::from_secs(30), graph.load(&text, &options))
        .await
        .expect("a dead holder's lease blocked the load")
        .unwrap();
    // The taker removed the dead holder's object and released its own; later writers
    // remove the ones before theirs, so lease objects never pile up.
    for name in ["initech", "globex"] {
        graph
            .load(&ndjson(&[company(name)]), &LoadOptions::default())
            .await
            .unwrap();
    }
    let dir = std::path::Path::new(&uri).join("__leases").join("main");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// A holder on another machine is judged by whether its heartbeat changes, on this
/// process's own clock, never by comparing the heartbeat's time with this machine's: here
/// every heartbeat reads two minutes old (the waiter's clock jumped ahead, or the holder's
/// runs behind), and still no second writer starts while it beats. Once it stops, the
/// waiter takes over after the grace (shortened here).
#[tokio::test]
async fn a_lease_of_another_machine_holds_while_its_heartbeat_changes_whatever_the_clocks_say() {
    let _lock = crate::FAILPOINTS.lock().await;
    fail::cfg("intent::foreign-grace-ms", "return(1500)").unwrap();
    let (_dir, uri, graph) = temp_graph().await;
    let graph = Arc::new(graph);
    let behind = Duration::from_secs(120);
    let lease = plant_lease(&uri, held_by("another-machine", 1, None), behind);
    let load = spawn_load(&graph, company("acme"));
    // Three grace periods of heartbeats, each two minutes old by this machine's clock.
    for beat in 0..30u64 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let file = std::fs::File::options().write(true).open(&lease).unwrap();
        file.set_modified(std::time::SystemTime::now() - behind - Duration::from_millis(beat))
            .unwrap();
    }
    assert!(!load.is_finished(), "a live foreign holder was overtaken");
    let companies = graph
        .read("Company", &ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(companies.num_rows(), 0);
    // The heartbeat stops: after the grace, the holder is taken for gone.
    tokio::time::timeout(Duration::from_secs(30), load)
        .await
        .expect("a silent foreign lease blocked the load")
        .unwrap()
        .unwrap();
    fail::remove("intent::foreign-grace-ms");
    let companies = graph
        .read("Company", &ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(companies.num_rows(), 1);
}

#[tokio::test]
async fn an_uncontended_write_takes_the_lease_in_seven_operations() {
    let (_dir, _uri, graph, counter) = counted_graph().await;
    let mut per_load = Vec::new();
    for name in ["acme", "initech", "globex"] {
        let before = counter.snapshot();
        graph
            .load(&ndjson(&[company(name)]), &LoadOptions::default())
            .await
            .unwrap();
        let ops = counter.snapshot().since(&before);
        per_load.push((ops.of_class(PathClass::Lease), ops.total()));
    }
    eprintln!("lease ops and all ops per 1-row load: {per_load:?}");
    // The first: list, create, check the win, confirm before committing, release. Later
    // ones also read the last holder's object and remove it.
    assert_eq!(per_load[0].0, 5, "{per_load:?}");
    assert!(
        per_load[1..].iter().all(|&(lease, _)| lease == 7),
        "{per_load:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_whose_lease_was_taken_over_commits_nothing() {
    let (_dir, uri, graph) = temp_graph().await;
    let graph = Arc::new(graph);
    let _lock = FAILPOINTS.lock().await;
    let scenario = fail::FailScenario::setup();
    // The load stalls after staging, holding lease 0; meanwhile a process elsewhere judges
    // it gone and takes lease 1.
    fail::cfg("load::before-table-commits", "1*sleep(1500)").unwrap();
    let load = spawn_load(&graph, company("acme"));
    let dir = std::path::Path::new(&uri).join("__leases").join("main");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !dir.join(format!("{:020}.json", 0)).exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the load took no lease"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let taker = dir.join(format!("{:020}.json", 1));
    std::fs::write(
        &taker,
        serde_json::to_vec(&held_by("another-machine", 1, None)).unwrap(),
    )
    .unwrap();
    let error = load
        .await
        .unwrap()
        .expect_err("a write went on after its lease was taken over");
    scenario.teardown();
    assert_eq!(error.kind(), ErrorKind::Conflict, "{error}");
    assert!(error.to_string().contains("took over"), "{error}");
    let companies = graph
        .read("Company", &ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(companies.num_rows(), 0, "the taken-over write committed");
    let sidecars =
        std::fs::read_dir(std::path::Path::new(&uri).join("__recovery")).map_or(0, |d| d.count());
    assert_eq!(sidecars, 0, "the refused write left its sidecar");
    // Once the taker is done, the next write goes through.
    std::fs::write(&taker, br#"{"state":"released"}"#).unwrap();
    graph
        .load(&ndjson(&[company("acme")]), &LoadOptions::default())
        .await
        .unwrap();
}
