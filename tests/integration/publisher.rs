use std::collections::BTreeMap;

use tributary_publisher::{
    BranchName, CommitKind, CommitRecord, Error, ManifestCasPublisher, PublishPlan, Publisher,
    TablePath,
};
use tributary_storage::{GraphStore, OpCounter};
use tributary_tests::temp_graph;

fn plan_on(head: &CommitRecord, actor: &str) -> PublishPlan {
    PublishPlan {
        branch: BranchName::main(),
        expected_head: Some(head.id.clone()),
        tables: BTreeMap::new(),
        rows_written: BTreeMap::from([(TablePath::from_static("nodes/Person.lance"), 1)]),
        actor: actor.into(),
        kind: CommitKind::Load,
        intent: None,
        commit_id: None,
        folded: Vec::new(),
    }
}

#[tokio::test]
async fn two_publishers_racing_on_one_head_one_wins() {
    let (_dir, uri, _graph) = temp_graph().await;
    // Two independent handles, as two processes would have.
    let a = ManifestCasPublisher::open(&GraphStore::new(&uri).unwrap())
        .await
        .unwrap();
    let b = ManifestCasPublisher::open(&GraphStore::new(&uri).unwrap())
        .await
        .unwrap();
    let head = a.head(&BranchName::main()).await.unwrap();
    let (ra, rb) = tokio::join!(
        a.publish(plan_on(&head, "a")),
        b.publish(plan_on(&head, "b"))
    );
    let (winner, loser, loser_pub) = match (ra, rb) {
        (Ok(w), Err(l)) => (w, l, &b),
        (Err(l), Ok(w)) => (w, l, &a),
        (ra, rb) => panic!("exactly one must win: {ra:?} / {rb:?}"),
    };
    match &loser {
        Error::Conflict {
            expected, actual, ..
        } => {
            assert_eq!(expected.as_deref(), Some(head.id.as_str()));
            assert_eq!(
                actual.as_deref(),
                Some(winner.id.as_str()),
                "the conflict names the new head"
            );
        }
        other => panic!("the loser must get a conflict, got {other}"),
    }
    // The loser re-reads and succeeds on the new head.
    let new_head = loser_pub.head(&BranchName::main()).await.unwrap();
    assert_eq!(new_head.id, winner.id);
    let retried = loser_pub
        .publish(plan_on(&new_head, "retry"))
        .await
        .unwrap();
    assert_eq!(retried.parent.as_deref(), Some(winner.id.as_str()));
    let log = a.log(&BranchName::main(), 10).await.unwrap();
    let ids: Vec<&str> = log.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [retried.id.as_str(), winner.id.as_str(), head.id.as_str()]
    );
}

#[tokio::test]
async fn a_stale_expected_head_is_a_conflict_and_publishes_nothing() {
    let (_dir, _uri, graph) = temp_graph().await;
    let publisher = graph.publisher();
    let head = publisher.head(&BranchName::main()).await.unwrap();
    let next = publisher.publish(plan_on(&head, "first")).await.unwrap();
    let version = publisher.manifest_version().await.unwrap();
    let error = publisher
        .publish(plan_on(&head, "stale"))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Conflict { .. }), "{error}");
    assert_eq!(
        publisher.head(&BranchName::main()).await.unwrap().id,
        next.id
    );
    assert_eq!(
        publisher.manifest_version().await.unwrap(),
        version,
        "no manifest version was written"
    );
    assert!(matches!(
        publisher.head(&BranchName::new("nope").unwrap()).await,
        Err(Error::BranchNotFound { .. })
    ));
    assert!(matches!(
        publisher.commit(&"nope".into()).await,
        Err(Error::CommitNotFound { .. })
    ));
}

#[tokio::test]
async fn snapshot_resolution_pins_exact_table_versions() {
    let (_dir, _uri, graph) = temp_graph().await;
    let publisher = graph.publisher();
    let first = publisher.head(&BranchName::main()).await.unwrap();
    let mut plan = plan_on(&first, "t");
    plan.tables
        .insert(TablePath::from_static("nodes/Person.lance"), 7);
    let second = publisher.publish(plan).await.unwrap();
    assert_eq!(second.tables["nodes/Person.lance"], 7);
    // Tables the plan does not name keep the parent's versions.
    assert_eq!(
        second.tables["nodes/Company.lance"],
        first.tables["nodes/Company.lance"]
    );
    assert_eq!(publisher.commit(&first.id).await.unwrap(), first);
    assert_eq!(publisher.commit(&second.id).await.unwrap(), second);
}

/// Average object-store operations of one publish and of one snapshot resolution (the
/// head → table versions), over `window` commits.
async fn measure(
    publisher: &ManifestCasPublisher,
    counter: &OpCounter,
    head: &mut CommitRecord,
    window: usize,
) -> (f64, f64) {
    let (mut publish_ops, mut open_ops) = (0, 0);
    for _ in 0..window {
        let before = counter.snapshot();
        *head = publisher.publish(plan_on(head, "cost")).await.unwrap();
        let published = counter.snapshot();
        let resolved = publisher.head(&BranchName::main()).await.unwrap();
        assert_eq!(resolved.id, head.id);
        publish_ops += published.since(&before).total();
        open_ops += counter.snapshot().since(&published).total();
    }
    (
        publish_ops as f64 / window as f64,
        open_ops as f64 / window as f64,
    )
}

#[tokio::test]
async fn publish_and_snapshot_cost_stay_flat_with_history() {
    const WINDOW: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    let counter = OpCounter::new();
    let store = GraphStore::with_counter(
        &dir.path().join("g").to_string_lossy(),
        Some(counter.clone()),
    )
    .unwrap();
    let graph = tributary::Graph::builder_on(store)
        .init(tributary_tests::SCHEMA)
        .await
        .unwrap();
    let publisher = graph.publisher();
    let mut head = publisher.head(&BranchName::main()).await.unwrap();
    let mut depth = 1;
    while depth < 10 {
        head = publisher.publish(plan_on(&head, "fill")).await.unwrap();
        depth += 1;
    }
    let (publish_10, open_10) = measure(publisher, &counter, &mut head, WINDOW).await;
    depth += WINDOW;
    while depth < 1_000 {
        head = publisher.publish(plan_on(&head, "fill")).await.unwrap();
        depth += 1;
    }
    let (publish_1000, open_1000) = measure(publisher, &counter, &mut head, WINDOW).await;
    eprintln!(
        "object-store ops per publish: depth 10 = {publish_10:.1}, depth 1000 = {publish_1000:.1}; \
         per snapshot resolution: depth 10 = {open_10:.1}, depth 1000 = {open_1000:.1}"
    );
    assert!(
        publish_1000 <= publish_10 + 2.0,
        "publish cost grew: {publish_10} -> {publish_1000}"
    );
    assert!(
        open_1000 <= open_10 + 2.0,
        "snapshot cost grew: {open_10} -> {open_1000}"
    );
    assert_eq!(
        publisher
            .log(&BranchName::main(), 2_000)
            .await
            .unwrap()
            .len(),
        depth + WINDOW
    );
}

/// A branch name names manifest keys and lease folders: one that could leave its folder,
/// or read as an option, is refused where it enters, and a manifest never yields one.
#[test]
fn branch_names_that_could_leave_their_folder_are_refused() {
    for good in ["main", "dev-2", "feature.x", "a_b", "Z9"] {
        assert!(BranchName::new(good).is_ok(), "{good}");
    }
    let long = "b".repeat(65);
    for bad in [
        "",
        "../x",
        "a/b",
        ".hidden",
        "-rf",
        "a b",
        "é",
        long.as_str(),
    ] {
        let error = BranchName::new(bad).unwrap_err();
        assert!(error.to_string().contains("is not a branch name"), "{bad}");
    }
    let parsed: Result<BranchName, _> = serde_json::from_str("\"../up\"");
    assert!(parsed.is_err());
    let error = tributary::At::branch("../up").unwrap_err();
    assert_eq!(error.kind(), tributary::ErrorKind::InvalidInput);
}
