use std::collections::BTreeMap;

use tributary_publisher::{
    BranchName, CommitKind, CommitRecord, Error, ManifestCasPublisher, PublishPlan, Publisher,
    PublisherKind, TablePath,
};
use tributary_storage::{GraphStore, OpCounter, StoreOptions};
use tributary_tests::temp_graph;

pub(crate) fn plan_on(head: &CommitRecord, actor: &str) -> PublishPlan {
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
        idempotency_key: None,
        producers: Default::default(),
        schema: None,
        fork: None,
        merged: None,
    }
}

#[tokio::test]
async fn two_publishers_racing_on_one_head_one_wins() {
    let (_dir, uri, _graph) = tributary_tests::temp_graph_on(PublisherKind::Manifest).await;
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
    let manifest = publisher.as_manifest();
    let version = match manifest {
        Some(manifest) => manifest.manifest_version().await.unwrap(),
        None => 0,
    };
    let error = publisher
        .publish(plan_on(&head, "stale"))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Conflict { .. }), "{error}");
    assert_eq!(
        publisher.head(&BranchName::main()).await.unwrap().id,
        next.id
    );
    if let Some(manifest) = manifest {
        assert_eq!(
            manifest.manifest_version().await.unwrap(),
            version,
            "no manifest version was written"
        );
    }
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

/// What one commit-point operation cost, averaged over a window.
#[derive(Debug, Default, Clone, Copy)]
struct Cost {
    ops: f64,
    bytes_read: f64,
}

impl std::fmt::Display for Cost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.1} ops, {:.0} B read", self.ops, self.bytes_read)
    }
}

#[derive(Debug, Default)]
struct CommitPointCosts {
    publish: Cost,
    /// The publishes that ran upkeep (compaction of the small fragments, index merge).
    upkeep: Cost,
    head: Cost,
    commit: Cost,
    log_10: Cost,
}

/// Per-operation cost of the commit point: a publish, a head read, one commit by id (a
/// snapshot open), and `log --limit 10`; and apart, the publishes that ran upkeep.
async fn measure(publisher: &ManifestCasPublisher, counter: &OpCounter) -> CommitPointCosts {
    // Upkeep runs on the ninth publish after the last one; the window holds two.
    const WINDOW: usize = 18;
    let main = BranchName::main();
    let mut head = publisher.head(&main).await.unwrap();
    let mut costs = CommitPointCosts::default();
    let add = |cost: &mut Cost, before: &tributary::OpCounts, window: usize| {
        let spent = counter.snapshot().since(before);
        cost.ops += spent.total() as f64 / window as f64;
        cost.bytes_read += spent.bytes_read() as f64 / window as f64;
    };
    for i in 1..=WINDOW {
        let before = counter.snapshot();
        head = publisher.publish(plan_on(&head, "cost")).await.unwrap();
        if i % 9 == 0 {
            add(&mut costs.upkeep, &before, WINDOW / 9);
        } else {
            add(&mut costs.publish, &before, WINDOW - WINDOW / 9);
        }
        let before = counter.snapshot();
        assert_eq!(publisher.head(&main).await.unwrap().id, head.id);
        add(&mut costs.head, &before, WINDOW);
        let parent = head.parent.clone().unwrap();
        let before = counter.snapshot();
        assert_eq!(publisher.commit(&parent).await.unwrap().id, parent);
        add(&mut costs.commit, &before, WINDOW);
        let before = counter.snapshot();
        assert_eq!(publisher.log(&main, 10).await.unwrap().len(), 10);
        add(&mut costs.log_10, &before, WINDOW);
    }
    costs
}

/// A graph of `depth` commits on `main` at `uri` (reached with `options`), its manifest
/// counted by `counter`, with every commit row indexed (as upkeep leaves it).
pub(crate) async fn graph_at_depth(
    uri: &str,
    options: StoreOptions,
    depth: usize,
    counter: &OpCounter,
) -> tributary::Graph {
    let graph = tributary::Graph::builder(uri)
        .store_options(options.clone())
        .publisher(PublisherKind::Manifest)
        .init(tributary_tests::SCHEMA)
        .await
        .unwrap();
    let publisher = graph.publisher();
    let mut head = publisher.head(&BranchName::main()).await.unwrap();
    // Nine publishes end on an upkeep, leaving every fragment indexed.
    for _ in 0..9 {
        head = publisher.publish(plan_on(&head, "fill")).await.unwrap();
    }
    drop(graph);
    let store = GraphStore::open(uri, options.clone()).unwrap();
    tributary_tests::history::grow_history_on(&store, depth.saturating_sub(10)).await;
    let counted = StoreOptions {
        counter: Some(counter.clone()),
        ..options
    };
    tributary::Graph::builder(uri)
        .store_options(counted)
        .open()
        .await
        .unwrap()
}

/// The commit point is flat: at 10,000 commits a publish, a head read, a snapshot open and
/// `log --limit 10` make the same object-store calls (within 10%) and read the same bytes
/// (give or take an index page) as at 10. Upkeep (one publish in nine) makes about the same
/// calls (within 10%); its bytes grow with the index, which it merges whole. (Time at 10 / 1,000 / 100,000 is the `commit_point` bench.)
#[tokio::test]
async fn the_commit_point_costs_the_same_at_10_and_10000_commits() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    assert_commit_point_is_flat(
        &at("shallow"),
        &at("deep"),
        StoreOptions::default(),
        16_384.0,
    )
    .await;
}

/// Graphs of 10 and of 10,000 commits at `shallow` and `deep`: the commit point makes the
/// same calls on both, and reads at most `more_bytes` more at depth.
pub(crate) async fn assert_commit_point_is_flat(
    shallow: &str,
    deep: &str,
    options: StoreOptions,
    more_bytes: f64,
) {
    let counter = OpCounter::new();
    let shallow = graph_at_depth(shallow, options.clone(), 10, &counter).await;
    let shallow = measure(shallow.publisher().as_manifest().unwrap(), &counter).await;
    let deep = graph_at_depth(deep, options, 10_000, &counter).await;
    assert_eq!(
        deep.publisher()
            .log(&BranchName::main(), 20_000)
            .await
            .unwrap()
            .len(),
        10_000
    );
    let deep = measure(deep.publisher().as_manifest().unwrap(), &counter).await;
    eprintln!("at 10 commits: {shallow:?}\nat 10,000 commits: {deep:?}");
    assert!(
        deep.upkeep.ops <= shallow.upkeep.ops * 1.1,
        "upkeep: {} at 10 commits, {} at 10,000",
        shallow.upkeep,
        deep.upkeep
    );
    for (name, at_10, at_10000) in [
        ("publish", shallow.publish, deep.publish),
        ("head", shallow.head, deep.head),
        ("commit", shallow.commit, deep.commit),
        ("log --limit 10", shallow.log_10, deep.log_10),
    ] {
        // Within 10%: the first read after an upkeep may need more of the merged index.
        assert!(
            at_10000.ops <= at_10.ops * 1.1,
            "{name}: {at_10} at 10 commits, {at_10000} at 10,000"
        );
        // The first read after an upkeep fetches the merged index: at most one more page
        // of keys per probe at depth (a page holds 4,096, so no more beyond 4,096 commits).
        assert!(
            at_10000.bytes_read <= at_10.bytes_read + more_bytes,
            "{name}: {at_10} at 10 commits, {at_10000} at 10,000"
        );
    }
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
