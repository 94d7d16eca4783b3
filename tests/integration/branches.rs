//! Branches: isolation both ways, folding `main` before a create, fast-forward and
//! three-way merges, conflicts, merges refused for a broken constraint, loads on two
//! branches at once, deletes, and cleanup with several branches.

use arrow_array::Int32Array;
use tributary::{
    At, CommitKind, CrashWindow, ErrorKind, Graph, LoadOptions, MergeKind, ReadOptions, Recovered,
    WriteKind, WriteStep,
};
use tributary_tests::{company, delete, edge, ndjson, person, person_with_email, temp_graph};

use crate::columns::{column, sorted_strings};

fn on(branch: &str) -> LoadOptions {
    LoadOptions {
        branch: tributary::branch(branch).unwrap(),
        ..LoadOptions::default()
    }
}

async fn load_on(graph: &Graph, branch: &str, lines: &[String]) -> tributary::LoadOutcome {
    graph.load(&ndjson(lines), &on(branch)).await.unwrap()
}

fn at(branch: &str) -> At {
    At::branch(branch).unwrap()
}

async fn ids_on(graph: &Graph, branch: &str, ty: &str) -> Vec<String> {
    let options = ReadOptions {
        at: at(branch),
        ..ReadOptions::default()
    };
    sorted_strings(&graph.read(ty, &options).await.unwrap(), "id")
}

async fn age_on(graph: &Graph, branch: &str, key: &str) -> Option<i32> {
    let row = graph.get("Person", key, at(branch)).await.unwrap()?;
    let ages = column::<Int32Array>(&row, "age");
    Some(ages.value(0))
}

/// The base most tests start from: two people, a company, an edge of each type.
async fn base_graph() -> (tempfile::TempDir, Graph) {
    let (dir, _uri, graph) = temp_graph().await;
    load_on(
        &graph,
        "main",
        &[
            person("ada", 36),
            person("bob", 40),
            company("acme"),
            edge("WorksAt", "ada", "acme"),
            edge("Knows", "ada", "bob"),
        ],
    )
    .await;
    (dir, graph)
}

#[tokio::test]
async fn a_branch_and_main_do_not_see_each_others_writes() {
    let (_dir, graph) = base_graph().await;
    let created = graph.create_branch("dev", &At::default()).await.unwrap();
    assert_eq!(created.kind, CommitKind::Branch);
    let main_head = graph.snapshot(&At::default()).await.unwrap();
    assert_eq!(
        created.parent,
        Some(main_head.id.clone()),
        "forked from main's head"
    );

    load_on(&graph, "dev", &[person("ada", 37), person("cy", 20)]).await;
    load_on(
        &graph,
        "main",
        &[person("dan", 50), delete("Person", "bob")],
    )
    .await;

    assert_eq!(ids_on(&graph, "main", "Person").await, ["ada", "dan"]);
    assert_eq!(ids_on(&graph, "dev", "Person").await, ["ada", "bob", "cy"]);
    assert_eq!(age_on(&graph, "main", "ada").await, Some(36));
    assert_eq!(age_on(&graph, "dev", "ada").await, Some(37));
    assert_eq!(ids_on(&graph, "main", "Knows").await, Vec::<String>::new());
    assert_eq!(ids_on(&graph, "dev", "Knows").await, ["ada->bob"]);

    // Rows main acknowledged but has not folded are in main's fresh reads only.
    let ack = graph
        .ingest("main")
        .unwrap()
        .send(1, &person("zed", 9))
        .await
        .unwrap();
    assert_eq!(ack.durable_rows, 1);
    let fresh_on = |branch: &'static str| ReadOptions {
        at: at(branch),
        fresh: true,
        ..ReadOptions::default()
    };
    let fresh_main = graph.read("Person", &fresh_on("main")).await.unwrap();
    assert_eq!(sorted_strings(&fresh_main, "id"), ["ada", "dan", "zed"]);
    // Flushed to a generation, not folded: still main's only.
    graph.close_writers().await.unwrap();

    // Every read works on the branch: neighbors, fresh reads, the log.
    let knows = graph
        .neighbors(
            "Person",
            "ada",
            "Knows",
            tributary::Direction::Out,
            at("dev"),
        )
        .await
        .unwrap();
    assert_eq!(sorted_strings(&knows, "id"), ["bob"]);
    let fresh = graph.read("Person", &fresh_on("dev")).await.unwrap();
    assert_eq!(sorted_strings(&fresh, "id"), ["ada", "bob", "cy"]);
    let log = graph.log("dev", 10).await.unwrap();
    let kinds: Vec<CommitKind> = log.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [
            CommitKind::Load,
            CommitKind::Branch,
            CommitKind::Load,
            CommitKind::Schema
        ],
        "the branch's commits, then main's from the fork back"
    );
    let names: Vec<String> = graph
        .branches()
        .await
        .unwrap()
        .iter()
        .map(|h| h.branch.to_string())
        .collect();
    assert_eq!(names, ["main", "dev"]);

    // Reopened elsewhere, the branch is there with its own rows.
    let reopened = Graph::open(&graph.store().location()).await.unwrap();
    assert_eq!(
        ids_on(&reopened, "dev", "Person").await,
        ["ada", "bob", "cy"]
    );
}

#[tokio::test]
async fn branch_names_main_and_missing_branches_are_refused_clearly() {
    let (_dir, graph) = base_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    let again = graph
        .create_branch("dev", &At::default())
        .await
        .unwrap_err();
    assert_eq!(again.kind(), ErrorKind::InvalidInput, "{again}");
    assert!(again.to_string().contains("`dev` exists"), "{again}");
    let main = graph
        .create_branch("main", &At::default())
        .await
        .unwrap_err();
    assert_eq!(main.kind(), ErrorKind::InvalidInput, "{main}");
    // Names Lance's own branch names would refuse are refused as names, before anything.
    for bad in ["../x", "x..y", "x.", ""] {
        let refused = graph.create_branch(bad, &At::default()).await.unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{bad}: {refused}");
        assert!(
            refused.to_string().contains("not a branch name"),
            "{refused}"
        );
    }
    let leases = graph.store().list("__leases").await.unwrap();
    assert!(leases.iter().all(|l| !l.contains("x.")), "{leases:?}");
    let from_nowhere = graph.create_branch("x", &at("nope")).await.unwrap_err();
    assert_eq!(from_nowhere.kind(), ErrorKind::NotFound, "{from_nowhere}");
    let undeletable = graph.delete_branch("main").await.unwrap_err();
    assert_eq!(undeletable.kind(), ErrorKind::InvalidInput, "{undeletable}");
    let missing = graph.delete_branch("nope").await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    let load = graph.load(&person("x", 1), &on("nope")).await.unwrap_err();
    assert_eq!(load.kind(), ErrorKind::NotFound, "{load}");
    let ingest = graph
        .ingest("nope")
        .unwrap()
        .send(1, &ndjson(&[person("x", 1)]))
        .await
        .unwrap_err();
    assert_eq!(ingest.kind(), ErrorKind::NotFound, "{ingest}");
}

#[tokio::test]
async fn a_deleted_branch_is_readable_by_commit_until_cleanup_and_its_name_starts_afresh() {
    let (_dir, graph) = base_graph().await;
    let first = graph.snapshot(&At::default()).await.unwrap();
    load_on(&graph, "main", &[person("cy", 20)]).await;
    graph
        .create_branch("old", &At::Commit(first.id.clone()))
        .await
        .unwrap();
    assert_eq!(ids_on(&graph, "old", "Person").await, ["ada", "bob"]);
    load_on(&graph, "old", &[person("dan", 1)]).await;
    let old_head = graph.snapshot(&at("old")).await.unwrap();
    // A branch of a branch outlives its parent.
    graph.create_branch("older", &at("old")).await.unwrap();
    graph.delete_branch("old").await.unwrap();
    let gone = graph.get("Person", "ada", at("old")).await;
    assert_eq!(gone.unwrap_err().kind(), ErrorKind::NotFound);
    let by_id = graph
        .read(
            "Person",
            &ReadOptions {
                at: At::Commit(old_head.id.clone()),
                ..ReadOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(sorted_strings(&by_id, "id"), ["ada", "bob", "dan"]);
    assert_eq!(
        ids_on(&graph, "older", "Person").await,
        ["ada", "bob", "dan"]
    );

    // Made again at one of its own commits: a lineage of its own, nothing shared.
    graph
        .create_branch("old", &At::Commit(old_head.id.clone()))
        .await
        .unwrap();
    load_on(&graph, "old", &[person("eve", 2)]).await;
    assert_eq!(
        ids_on(&graph, "old", "Person").await,
        ["ada", "bob", "dan", "eve"]
    );
    assert_eq!(
        ids_on(&graph, "older", "Person").await,
        ["ada", "bob", "dan"]
    );
    let remade = graph.snapshot(&at("old")).await.unwrap();
    assert_ne!(remade.lineage, old_head.lineage);

    // The first `old`'s lineage is still read by `older`: cleanup keeps it until then.
    let kept = graph.cleanup(std::time::Duration::ZERO).await.unwrap();
    assert_eq!(kept.branches, 0, "{kept:?}");
    assert_eq!(
        ids_on(&graph, "older", "Person").await,
        ["ada", "bob", "dan"]
    );
    graph.delete_branch("older").await.unwrap();
    // older's lineage goes; the first old's stays, as the new old was made from it.
    let freed = graph.cleanup(std::time::Duration::ZERO).await.unwrap();
    assert_eq!(freed.branches, 1, "{freed:?}");
    assert_eq!(
        ids_on(&graph, "old", "Person").await,
        ["ada", "bob", "dan", "eve"]
    );
}

/// An edge with a key of its own moved to another end on one side, whose old end that
/// side then deleted: the merge writes it at its new end, and is no stranded edge.
#[tokio::test]
async fn a_keyed_edge_moved_off_a_deleted_node_merges() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("g").to_string_lossy().into_owned();
    let schema = "node P { name: String @key }\nedge E: P -> P { tag: String @key }\n";
    let graph = Graph::init(&uri, schema).await.unwrap();
    let p = |name: &str| format!(r#"{{"type":"P","data":{{"name":"{name}"}}}}"#);
    let e = |from: &str, to: &str| {
        format!(r#"{{"edge":"E","from":"{from}","to":"{to}","data":{{"tag":"e1"}}}}"#)
    };
    load_on(&graph, "main", &[p("n"), p("m"), p("q"), e("n", "m")]).await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    load_on(&graph, "dev", &[e("q", "m"), delete("P", "n")]).await;
    let merged = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    assert_eq!(merged.kind, MergeKind::FastForward);
    assert_eq!(ids_on(&graph, "main", "P").await, ["m", "q"]);
    let edges = graph.read("E", &ReadOptions::default()).await.unwrap();
    assert_eq!(sorted_strings(&edges, "src"), ["q"]);
}

#[tokio::test]
async fn creating_a_branch_folds_what_main_acknowledged_first() {
    let (_dir, graph) = base_graph().await;
    let ingest = graph.ingest("main").unwrap();
    let ack = ingest
        .send(1, &ndjson(&[person("cy", 20), delete("Person", "bob")]))
        .await
        .unwrap();
    assert_eq!(ack.durable_rows, 2);
    graph.create_branch("dev", &At::default()).await.unwrap();
    assert_eq!(ids_on(&graph, "dev", "Person").await, ["ada", "cy"]);
    assert_eq!(ids_on(&graph, "main", "Person").await, ["ada", "cy"]);
    let status = graph.ingest_status("main").await.unwrap();
    assert!(
        status
            .tables
            .iter()
            .all(|t| t.pending_rows == 0 && t.unflushed_rows == 0 && t.wal_only_rows == 0),
        "nothing left unfolded: {status:?}"
    );
}

#[tokio::test]
async fn a_merge_into_a_branch_that_did_not_move_takes_every_change() {
    let (_dir, graph) = base_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    load_on(
        &graph,
        "dev",
        &[
            person("ada", 37),
            person("cy", 20),
            edge("Knows", "cy", "ada"),
            delete("Person", "bob"),
        ],
    )
    .await;
    let dev_head = graph.snapshot(&at("dev")).await.unwrap();
    let outcome = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    assert_eq!(outcome.kind, MergeKind::FastForward);
    assert_eq!(outcome.commit.kind, CommitKind::Merge);
    assert_eq!(outcome.commit.merged, Some(dev_head.id.clone()));
    assert_eq!(outcome.rows.get("Person"), Some(&2));
    assert_eq!(outcome.deleted.get("Person"), Some(&1));
    for ty in ["Person", "Knows", "WorksAt", "Company"] {
        assert_eq!(
            ids_on(&graph, "main", ty).await,
            ids_on(&graph, "dev", ty).await,
            "{ty}"
        );
    }
    assert_eq!(age_on(&graph, "main", "ada").await, Some(37));
    // Merging again finds nothing new; nor does merging a branch that changed nothing.
    let again = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    assert_eq!(again.kind, MergeKind::UpToDate);
    assert_eq!(again.commit.id, outcome.commit.id);
    graph.create_branch("idle", &At::default()).await.unwrap();
    load_on(&graph, "main", &[person("zed", 1)]).await;
    let head = graph.snapshot(&At::default()).await.unwrap();
    let idle = graph
        .merge_branch("idle", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    assert_eq!(idle.kind, MergeKind::UpToDate);
    assert_eq!(idle.commit.id, head.id, "no commit written");
}

#[tokio::test]
async fn a_three_way_merge_takes_each_sides_changes_and_lists_conflicts() {
    let (_dir, graph) = base_graph().await;
    load_on(&graph, "main", &[person("cy", 20), person("dan", 50)]).await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    load_on(
        &graph,
        "dev",
        &[person("bob", 41), delete("Person", "cy"), person("eve", 30)],
    )
    .await;
    load_on(&graph, "main", &[person("ada", 35), person("fay", 60)]).await;

    let outcome = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    assert_eq!(outcome.kind, MergeKind::ThreeWay);
    assert_eq!(
        ids_on(&graph, "main", "Person").await,
        ["ada", "bob", "dan", "eve", "fay"]
    );
    assert_eq!(
        age_on(&graph, "main", "ada").await,
        Some(35),
        "main's own change"
    );
    assert_eq!(
        age_on(&graph, "main", "bob").await,
        Some(41),
        "dev's change"
    );
    assert_eq!(
        ids_on(&graph, "dev", "Person").await,
        ["ada", "bob", "dan", "eve"],
        "the merged branch is untouched"
    );
    assert_eq!(age_on(&graph, "dev", "ada").await, Some(36));

    // The same change on both sides is no conflict; different ones are, and nothing is
    // written.
    load_on(&graph, "dev", &[person("dan", 51), person("eve", 31)]).await;
    load_on(
        &graph,
        "main",
        &[
            person("dan", 51),
            person("eve", 32),
            delete("Person", "bob"),
        ],
    )
    .await;
    load_on(&graph, "dev", &[person("bob", 42)]).await;
    let head = graph.snapshot(&At::default()).await.unwrap();
    let conflict = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap_err();
    // Retrying never settles it: a kind (and exit code) of its own, not `conflict`.
    assert_eq!(conflict.kind(), ErrorKind::MergeConflict, "{conflict}");
    assert_eq!(conflict.kind().exit_code(), 79);
    let text = conflict.to_string();
    assert!(text.contains("2 keys"), "{text}");
    assert!(text.contains("--prefer source"), "{text}");
    assert!(
        text.contains("Person `bob`: changed on the merged branch (name: bob, age: 42"),
        "{text}"
    );
    assert!(text.contains("deleted on the target"), "{text}");
    // Both values, and only the fields that differ.
    assert!(
        text.contains(
            "Person `eve`: changed on the merged branch (age: 31), changed on the target (age: 32)"
        ),
        "{text}"
    );
    assert!(!text.contains("`dan`"), "{text}");
    assert_eq!(graph.snapshot(&At::default()).await.unwrap().id, head.id);

    // Settled on dev as main has it: nothing is left to take, and no commit is written.
    load_on(&graph, "dev", &[person("eve", 32), delete("Person", "bob")]).await;
    let settled = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    assert_eq!(settled.kind, MergeKind::UpToDate);
    assert_eq!(settled.commit.id, head.id);
    assert_eq!(age_on(&graph, "main", "eve").await, Some(32));
    // A later change on dev alone goes through.
    load_on(&graph, "dev", &[person("gus", 5)]).await;
    let taken = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    assert_eq!(taken.kind, MergeKind::ThreeWay);
    assert_eq!(taken.rows.get("Person"), Some(&1));
    assert_eq!(age_on(&graph, "main", "gus").await, Some(5));
}

#[tokio::test]
async fn a_merge_conflict_settles_one_way_when_a_side_is_preferred() {
    use tributary::Prefer;
    let conflicted = || async {
        let (dir, graph) = base_graph().await;
        graph.create_branch("dev", &At::default()).await.unwrap();
        load_on(&graph, "dev", &[person("ada", 50), person("cy", 7)]).await;
        load_on(
            &graph,
            "main",
            &[person("ada", 60), delete("Person", "bob")],
        )
        .await;
        load_on(&graph, "dev", &[person("bob", 41)]).await;
        (dir, graph)
    };

    // The target's change stays for both keys; the rest of dev is taken.
    let (_dir, graph) = conflicted().await;
    let merged = graph
        .merge_branch("dev", "main", Prefer::Target)
        .await
        .unwrap();
    assert_eq!(merged.kind, MergeKind::ThreeWay);
    assert_eq!(merged.resolved, 2);
    assert_eq!(merged.rows.get("Person"), Some(&1), "only cy");
    assert_eq!(age_on(&graph, "main", "ada").await, Some(60));
    assert_eq!(age_on(&graph, "main", "bob").await, None);
    assert_eq!(age_on(&graph, "main", "cy").await, Some(7));

    // Only conflicts, all settled for the target: nothing to write, and it says so.
    let (_dir, graph) = base_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    load_on(&graph, "dev", &[person("ada", 50)]).await;
    load_on(&graph, "main", &[person("ada", 60)]).await;
    let head = graph.snapshot(&At::default()).await.unwrap();
    let kept = graph
        .merge_branch("dev", "main", Prefer::Target)
        .await
        .unwrap();
    assert_eq!((kept.kind, kept.resolved), (MergeKind::UpToDate, 1));
    assert_eq!(kept.commit.id, head.id);
    assert_eq!(age_on(&graph, "main", "ada").await, Some(60));

    // The merged branch's change wins for both: ada's age, and bob comes back.
    let (_dir, graph) = conflicted().await;
    let merged = graph
        .merge_branch("dev", "main", Prefer::Source)
        .await
        .unwrap();
    assert_eq!(merged.resolved, 2);
    assert_eq!(merged.rows.get("Person"), Some(&3), "ada, bob and cy");
    assert_eq!(age_on(&graph, "main", "ada").await, Some(50));
    assert_eq!(age_on(&graph, "main", "bob").await, Some(41));
    assert_eq!(age_on(&graph, "main", "cy").await, Some(7));
}

#[tokio::test]
async fn a_merge_that_would_break_an_endpoint_or_a_unique_value_is_refused_with_the_keys() {
    let (_dir, graph) = base_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    // dev deletes bob (and its edge); main adds an edge to bob meanwhile.
    load_on(&graph, "dev", &[delete("Person", "bob")]).await;
    load_on(
        &graph,
        "main",
        &[person("cy", 20), edge("Knows", "cy", "bob")],
    )
    .await;
    let head = graph.snapshot(&At::default()).await.unwrap();
    let refused = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{refused}");
    assert!(refused.to_string().contains("Knows `cy->bob`"), "{refused}");
    assert_eq!(graph.snapshot(&At::default()).await.unwrap().id, head.id);

    // The other way round: an edge on dev to a node main deleted.
    let (_dir2, graph) = base_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    load_on(&graph, "dev", &[edge("Knows", "bob", "ada")]).await;
    load_on(&graph, "main", &[delete("Person", "bob")]).await;
    let refused = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("Knows `bob->ada`"),
        "{refused}"
    );

    // Two sides giving one unique email to two people.
    let (_dir3, graph) = base_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    load_on(&graph, "dev", &[person_with_email("cy", "x@y.z")]).await;
    load_on(&graph, "main", &[person_with_email("dan", "x@y.z")]).await;
    let refused = graph
        .merge_branch("dev", "main", tributary::Prefer::Neither)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("Person `cy`"), "{refused}");
    assert_eq!(
        ids_on(&graph, "main", "Person").await,
        ["ada", "bob", "dan"]
    );
}

#[tokio::test]
async fn loads_on_two_branches_at_once_each_land_on_their_own() {
    let (_dir, graph) = base_graph().await;
    graph.create_branch("dev", &At::default()).await.unwrap();
    let graph = std::sync::Arc::new(graph);
    let mut tasks = Vec::new();
    for i in 0..8 {
        for branch in ["main", "dev"] {
            let graph = graph.clone();
            tasks.push(tokio::spawn(async move {
                let name = format!("{branch}{i}");
                graph.load(&person(&name, i), &on(branch)).await.map(|_| ())
            }));
        }
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let main = ids_on(&graph, "main", "Person").await;
    let dev = ids_on(&graph, "dev", "Person").await;
    assert_eq!(main.len(), 10);
    assert_eq!(dev.len(), 10);
    assert!(main.iter().all(|id| !id.starts_with("dev")), "{main:?}");
    assert!(dev.iter().all(|id| !id.starts_with("main")), "{dev:?}");
    assert_eq!(graph.log("dev", 100).await.unwrap().len(), 8 + 1 + 2);
}

#[tokio::test]
async fn cleanup_keeps_what_every_branch_reads_and_a_deleted_branch_frees_its_versions() {
    let (_dir, graph) = base_graph().await;
    graph.create_branch("a", &At::default()).await.unwrap();
    // b forks main at a version of its own, which only b's lineage keeps.
    load_on(&graph, "main", &[person("bob", 49)]).await;
    graph.create_branch("b", &At::default()).await.unwrap();
    for round in 0..3 {
        load_on(&graph, "a", &[person("ada", 40 + round)]).await;
        load_on(&graph, "b", &[person(&format!("b{round}"), round)]).await;
        load_on(&graph, "main", &[person("bob", 50 + round)]).await;
    }
    let first = graph.cleanup(std::time::Duration::ZERO).await.unwrap();
    assert!(first.versions > 0, "old versions went: {first:?}");
    assert_eq!(age_on(&graph, "a", "ada").await, Some(42));
    assert_eq!(
        ids_on(&graph, "b", "Person").await,
        ["ada", "b0", "b1", "b2", "bob"]
    );
    assert_eq!(age_on(&graph, "main", "bob").await, Some(52));
    // Merges still find their base after the cleanup.
    let merged = graph
        .merge_branch("a", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    assert_eq!(merged.kind, MergeKind::ThreeWay);
    assert_eq!(age_on(&graph, "main", "ada").await, Some(42));
    assert_eq!(age_on(&graph, "main", "bob").await, Some(52));
    // The next merge's base is `a`'s head as merged, older in `a`'s lineage than its head
    // once `a` moves on: cleanup keeps it.
    load_on(&graph, "a", &[person("ada", 60)]).await;
    load_on(&graph, "a", &[person("cy", 1)]).await;
    load_on(&graph, "main", &[person("bob", 70)]).await;
    graph.cleanup(std::time::Duration::ZERO).await.unwrap();
    let again = graph
        .merge_branch("a", "main", tributary::Prefer::Neither)
        .await
        .unwrap();
    assert_eq!(again.kind, MergeKind::ThreeWay);
    assert_eq!(
        again.rows.get("Person"),
        Some(&2),
        "ada and cy only: {again:?}"
    );
    assert_eq!(age_on(&graph, "main", "ada").await, Some(60));
    assert_eq!(age_on(&graph, "main", "bob").await, Some(70));

    let b_head = graph.snapshot(&at("b")).await.unwrap();
    graph.delete_branch("b").await.unwrap();
    let after = graph.cleanup(std::time::Duration::ZERO).await.unwrap();
    assert!(after.versions > 0, "b's versions went: {after:?}");
    assert_eq!(after.branches, 1, "{after:?}");
    let again = graph.cleanup(std::time::Duration::ZERO).await.unwrap();
    assert_eq!(
        (again.versions, again.branches),
        (0, 0),
        "one cleanup removes all it can: {again:?}"
    );
    let removed = graph
        .get("Person", "b0", At::Commit(b_head.id.clone()))
        .await
        .unwrap_err();
    assert_eq!(removed.kind(), ErrorKind::NotFound, "{removed}");
    assert!(
        removed.to_string().contains("a cleanup removes versions"),
        "{removed}"
    );
    assert_eq!(ids_on(&graph, "a", "Person").await, ["ada", "bob", "cy"]);
    assert_eq!(graph.branches().await.unwrap().len(), 2);
}

/// A merge stopped in each crash window of its commit is, after a reopen, either fully
/// published (recovery rolls it forward; merging again finds nothing new) or not at all
/// (merging again writes it): once, with both parents, never half.
#[tokio::test]
async fn a_merge_stopped_in_any_crash_window_lands_once_or_not_at_all() {
    for window in CrashWindow::all(WriteKind::Merge) {
        let point = window.name();
        let point = point.as_str();
        let (dir, graph) = base_graph().await;
        let uri = graph.store().location();
        graph.create_branch("dev", &At::default()).await.unwrap();
        load_on(
            &graph,
            "dev",
            &[
                person("ada", 37),
                company("zeta"),
                edge("WorksAt", "bob", "zeta"),
            ],
        )
        .await;
        let dev_head = graph.snapshot(&at("dev")).await.unwrap();
        {
            let _lock = crate::FAILPOINTS.lock().await;
            let scenario = fail::FailScenario::setup();
            fail::cfg(point, "return").unwrap();
            let error = graph
                .merge_branch("dev", "main", tributary::Prefer::Neither)
                .await
                .unwrap_err();
            assert!(error.to_string().contains(point), "{point}: {error}");
            scenario.teardown();
        }
        drop(graph);
        let graph = Graph::open(&uri).await.unwrap();
        let outcome = graph
            .merge_branch("dev", "main", tributary::Prefer::Neither)
            .await
            .unwrap();
        assert!(
            matches!(outcome.kind, MergeKind::UpToDate | MergeKind::FastForward),
            "{point}: {outcome:?}"
        );
        for ty in ["Person", "Company", "WorksAt", "Knows"] {
            assert_eq!(
                ids_on(&graph, "main", ty).await,
                ids_on(&graph, "dev", ty).await,
                "{point}: {ty}"
            );
        }
        let merges: Vec<_> = graph
            .log("main", 20)
            .await
            .unwrap()
            .into_iter()
            .filter(|c| c.kind == CommitKind::Merge)
            .collect();
        assert_eq!(merges.len(), 1, "{point}: {merges:#?}");
        assert_eq!(merges[0].merged, Some(dev_head.id.clone()), "{point}");
        assert!(graph.recover().await.unwrap().is_empty(), "{point}");
        drop(dir);
    }
}

/// A create stopped before its head is published leaves a lineage no branch has: the
/// name stays free, and cleanup removes it, with a deleted branch's.
#[tokio::test]
async fn a_create_stopped_midway_leaves_nothing_visible_and_cleanup_removes_it() {
    let (_dir, graph) = base_graph().await;
    {
        let _lock = crate::FAILPOINTS.lock().await;
        let scenario = fail::FailScenario::setup();
        fail::cfg("branch::before-publish", "return").unwrap();
        let error = graph
            .create_branch("half-made", &At::default())
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("branch::before-publish"),
            "{error}"
        );
        scenario.teardown();
    }
    let listed: Vec<String> = graph
        .branches()
        .await
        .unwrap()
        .iter()
        .map(|h| h.branch.to_string())
        .collect();
    assert_eq!(listed, ["main"]);
    graph.create_branch("gone", &At::default()).await.unwrap();
    graph.delete_branch("gone").await.unwrap();
    graph
        .create_branch("half-made", &At::default())
        .await
        .unwrap();
    load_on(&graph, "half-made", &[person("cy", 1)]).await;
    let report = graph
        .cleanup(std::time::Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(
        report.branches, 2,
        "the stopped create's and gone's: {report:?}"
    );
    assert_eq!(
        ids_on(&graph, "half-made", "Person").await,
        ["ada", "bob", "cy"]
    );
    let again = graph
        .cleanup(std::time::Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(again.branches, 0);
}

/// The branch names listed, `main` first.
async fn branch_names(graph: &Graph) -> Vec<String> {
    let heads = graph.branches().await.unwrap();
    heads.iter().map(|h| h.branch.to_string()).collect()
}

/// A create stopped in either of its crash windows is settled by the name's next write
/// turn: stopped before its publish it is dropped (nothing visible, its lineage's marker
/// removed), stopped after it the branch stands; either way no intent is left.
#[tokio::test]
async fn a_create_stopped_in_any_window_is_settled_by_the_next_write_turn() {
    for window in CrashWindow::all(WriteKind::Branch) {
        let point = window.name();
        let point = point.as_str();
        let (dir, graph) = base_graph().await;
        let uri = graph.store().location();
        {
            let _lock = crate::FAILPOINTS.lock().await;
            let scenario = fail::FailScenario::setup();
            fail::cfg(point, "return").unwrap();
            let error = graph
                .create_branch("dev", &At::default())
                .await
                .unwrap_err();
            assert!(error.to_string().contains(point), "{point}: {error}");
            scenario.teardown();
        }
        drop(graph);
        let graph = Graph::open(&uri).await.unwrap();
        let published = window.step == WriteStep::BeforeIntentDelete;
        let report = graph.recover().await.unwrap();
        assert_eq!(report.len(), 1, "{point}: {report:?}");
        assert!(
            matches!(
                (&report[0], published),
                (Recovered::AlreadyPublished { .. }, true) | (Recovered::Dropped { .. }, false)
            ),
            "{point}: {report:?}"
        );
        let store = graph.store();
        assert!(
            store.list("__recovery").await.unwrap().is_empty(),
            "{point}"
        );
        let markers = store.list("__lineages").await.unwrap();
        assert_eq!(markers.len(), usize::from(published), "{point}");
        if published {
            assert_eq!(branch_names(&graph).await, ["main", "dev"], "{point}");
            load_on(&graph, "dev", &[person("cy", 1)]).await;
            assert_eq!(ids_on(&graph, "dev", "Person").await, ["ada", "bob", "cy"]);
        } else {
            assert_eq!(branch_names(&graph).await, ["main"], "{point}");
        }
        drop(dir);
    }
}

/// A delete stopped in either of its crash windows (after its shards are sealed, before
/// or after its head goes) is finished by the branch's next write turn: the branch is
/// gone with its lineage's marker, no intent is left, and the name starts afresh.
#[tokio::test]
async fn a_delete_stopped_in_any_window_is_finished_by_the_next_write_turn() {
    for window in CrashWindow::all(WriteKind::Delete) {
        let point = window.name();
        let point = point.as_str();
        let (dir, graph) = base_graph().await;
        let uri = graph.store().location();
        graph.create_branch("dev", &At::default()).await.unwrap();
        load_on(&graph, "dev", &[person("cy", 1)]).await;
        {
            let _lock = crate::FAILPOINTS.lock().await;
            let scenario = fail::FailScenario::setup();
            fail::cfg(point, "return").unwrap();
            let error = graph.delete_branch("dev").await.unwrap_err();
            assert!(error.to_string().contains(point), "{point}: {error}");
            scenario.teardown();
        }
        let head_removed = window.step == WriteStep::BeforeIntentDelete;
        let expected: &[&str] = if head_removed {
            &["main"]
        } else {
            &["main", "dev"]
        };
        assert_eq!(branch_names(&graph).await, expected, "{point}");
        drop(graph);
        let graph = Graph::open(&uri).await.unwrap();
        let report = graph.recover().await.unwrap();
        assert_eq!(report.len(), 1, "{point}: {report:?}");
        assert!(
            matches!(
                (&report[0], head_removed),
                (Recovered::AlreadyPublished { .. }, true)
                    | (Recovered::RolledForward { .. }, false)
            ),
            "{point}: {report:?}"
        );
        assert_eq!(branch_names(&graph).await, ["main"], "{point}");
        let store = graph.store();
        assert!(
            store.list("__recovery").await.unwrap().is_empty(),
            "{point}"
        );
        assert!(
            store.list("__lineages").await.unwrap().is_empty(),
            "{point}"
        );
        graph.create_branch("dev", &At::default()).await.unwrap();
        assert_eq!(
            ids_on(&graph, "dev", "Person").await,
            ["ada", "bob"],
            "{point}"
        );
        drop(dir);
    }
}
