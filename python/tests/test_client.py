"""The client against a real `tributary serve` (the binary `TRIBUTARY_BIN` names, built by
`cargo xtask test`)."""

import json
import os
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

import tributary

SCHEMA = """
node Person @stream {
  name: String @key
  age: I32? @range(0..150)
  bio: String? @index(fts)
  embedding: Vector(8)? @embed(bio) @index
}
node Company { name: String @key }
edge WorksAt: Person -> Company @card(0..1) @stream { since: Date? }
"""

REPO = Path(__file__).resolve().parents[2]


def binary() -> str:
    return os.environ.get("TRIBUTARY_BIN", str(REPO / "target" / "debug" / "tributary"))


class Server:
    """A `tributary serve` over a fresh root holding graph `g`."""

    def __init__(self, *extra: str, schema_text: str = SCHEMA) -> None:
        self.dir = tempfile.TemporaryDirectory()
        root = Path(self.dir.name)
        schema = root / "schema.tg"
        schema.write_text(schema_text)
        graphs = root / "graphs"
        graphs.mkdir()
        self.graph_path = str(graphs / "g")
        subprocess.run(
            [binary(), "init", str(graphs / "g"), "--schema", str(schema)],
            check=True,
            capture_output=True,
        )
        self.process = subprocess.Popen(
            [binary(), "serve", str(graphs), "--bind", "127.0.0.1:0", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        first = self.process.stdout.readline().strip()
        assert first.startswith("listening on "), first
        self.url = first[len("listening on ") :]
        # Keep reading stdout so the server never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.dir.cleanup()


@pytest.fixture
def server():
    served = Server()
    yield served
    served.stop()


@pytest.fixture
def graph(server):
    with tributary.Client(server.url) as client:
        yield client.graph("g")


def person(name, age=None, bio=None):
    data = {"name": name}
    if age is not None:
        data["age"] = age
    if bio is not None:
        data["bio"] = bio
    return {"type": "Person", "data": data}


def ids(table: pa.Table):
    return sorted(table.column("id").to_pylist())


def test_the_server_describes_its_api_in_valid_openapi(server):
    from openapi_spec_validator import validate

    served = httpx.get(server.url + "/openapi.json").json()
    validate(served)
    assert served == json.loads(subprocess.check_output([binary(), "openapi"]))
    assert set(served["paths"]) >= {"/graphs/{id}/ingest", "/graphs/{id}/types/{type}"}


def test_every_error_kind_the_server_names_has_its_exception_class():
    # The server's description lists the kinds from its own error enum.
    document = json.loads(subprocess.check_output([binary(), "openapi"]))
    kinds = document["components"]["schemas"]["Error"]["properties"]["kind"]["enum"]
    assert set(kinds) == set(tributary.errors.KINDS)
    for kind, cls in tributary.errors.KINDS.items():
        assert issubclass(cls, tributary.TributaryError) and cls.kind == kind


def test_ingest_acknowledges_as_it_goes_and_reads_back_fresh_then_folded(graph):
    acks = []
    result = graph.ingest(
        (person(f"p{i}", i % 100) for i in range(25)), batch_lines=10, on_ack=acks.append
    )
    assert result.acked == 25
    assert result.through_line == 25
    assert result.rejected == []
    # One request per batch of 10 lines; offsets run across them.
    assert [a.through_line for a in acks][-1] == 25
    assert all(b.through_line > a.through_line for a, b in zip(acks, acks[1:]))
    fresh = graph.read("Person", fresh=True)
    assert isinstance(fresh, pa.Table)
    assert fresh.num_rows == 25
    outcome = graph.fold()
    assert outcome["rows"]["Person"] == 25
    table = graph.read("Person", filter="age >= 20", select=["name", "age"], limit=100)
    assert table.column_names == ["name", "age"]
    assert table.num_rows == 5
    status = graph.status()
    assert status["branch"] == "main"
    assert all(t["pending_rows"] == 0 for t in status["tables"])


def test_rejected_lines_are_named_by_their_line_in_the_whole_input(graph):
    lines = [person("ada", 36), person("bob", 400), "{not json", person("cy", 20)]
    result = graph.ingest(lines, batch_lines=2)
    assert result.acked == 2
    assert result.through_line == 4
    assert [r["line"] for r in result.rejected] == [2, 3]
    assert "age" in result.rejected[0]["error"]


def test_a_strict_stream_raises_at_its_first_invalid_line_in_the_callers_numbers(graph):
    lines = [person(f"p{i}", 30) for i in range(12)]
    lines[10] = person("bad", 400)
    with pytest.raises(tributary.InvalidInput) as raised:
        graph.ingest(lines, strict=True, batch_lines=4)
    error = raised.value
    assert "line 11" in str(error), error
    assert error.lines == [] or error.lines[0]["line"] == 11
    # Resume after `through_line`: the bad line is not settled.
    assert error.result.through_line == 10
    assert error.result.acked == 10


def test_lines_keys_and_arguments_a_user_may_get_wrong(graph, server):
    with pytest.raises(ValueError):
        graph.ingest(['{"type":"Person","data":{"name":"a"}}\n{"type":"Person","data":{"name":"b"}}'])
    odd = ["a/b", "a?b", "a#b", "a b", "..", "ä"]
    graph.load([person(key, 1) for key in odd] + [person("a", 2)])
    for key in odd:
        row = graph.get("Person", key)
        assert row is not None and row.column("id").to_pylist() == [key], key
    assert graph.read("Person", select="name").column_names == ["name"]
    with pytest.raises(tributary.NoRow):
        graph.neighbors("Person", "nobody", edge="WorksAt")
    with pytest.raises(ValueError):
        graph.ingest([person("x")], batch_lines=0)


def test_an_unreachable_server_is_unavailable_with_where_to_resume(server):
    graph = tributary.Client(server.url, retries=1).graph("g")
    graph.ingest([person("ada", 36)])
    server.process.terminate()
    server.process.wait(timeout=30)
    with pytest.raises(tributary.Unavailable) as raised:
        graph.read("Person")
    assert "could not be reached" in str(raised.value)
    with pytest.raises(tributary.Unavailable) as raised:
        graph.ingest([person("bob", 40)])
    assert raised.value.result.through_line == 0


def test_a_producer_resending_writes_each_line_once(graph):
    lines = [person("ada", 36), person("bob", 40)]
    first = graph.ingest(lines, producer="orders")
    assert (first.acked, first.duplicates) == (2, 0)
    again = graph.ingest(lines + [person("cy", 20)], producer="orders")
    assert (again.acked, again.duplicates) == (1, 2)
    assert again.through_line == 3


def test_load_get_neighbors_search_and_commits(graph):
    outcome = graph.load(
        [
            person("ada", 36, bio="writes the first programs"),
            person("bob", 40, bio="builds engines"),
            {"type": "Company", "data": {"name": "acme"}},
            {"edge": "WorksAt", "from": "ada", "to": "acme"},
        ]
    )
    assert outcome["rows"] == {"Company": 1, "Person": 2, "WorksAt": 1}
    # The shape `tributary load` prints.
    assert set(outcome) == {"commit", "rows", "deleted", "replayed"}
    assert isinstance(outcome["commit"], str) and outcome["replayed"] is False
    row = graph.get("Person", "ada")
    assert row.num_rows == 1 and row.column("age").to_pylist() == [36]
    assert graph.get("Person", "nobody") is None
    with pytest.raises(tributary.NoRow):
        graph.neighbors("Person", "nobody", edge="WorksAt")
    works = graph.neighbors("Person", "ada", edge="WorksAt")
    assert ids(works) == ["acme"]
    back = graph.neighbors("Company", "acme", edge="WorksAt", direction="in")
    assert ids(back) == ["ada"]
    found = graph.search("Person", text="engines", k=5)
    assert found.column("id").to_pylist()[0] == "bob"
    # The load filled `embedding` from `bio` with the built-in embedder.
    similar = graph.search("Person", similar="engines builds", k=1)
    assert similar.column("id").to_pylist() == ["bob"]
    assert graph.embedder() == {"provider": "builtin"}
    assert graph.publisher() == (os.environ.get("TRIBUTARY_PUBLISHER") or "manifest")
    with pytest.raises(tributary.InvalidInput):
        graph.set_embedder({"provider": "openai", "url": "localhost:1", "model": "m"})
    stored = graph.set_embedder({"provider": "openai", "url": "http://127.0.0.1:9/v1", "model": "m"})
    assert graph.embedder() == stored and stored["batch_size"] == 64
    graph.set_embedder({"provider": "builtin"})
    commits = graph.commits(limit=5)
    assert commits[0]["id"] == outcome["commit"]
    # Reads at a commit see what it pins.
    graph.load([person("cy", 20)])
    assert ids(graph.read("Person", commit=outcome["commit"])) == ["ada", "bob"]


def test_errors_are_typed_by_kind(graph, server):
    with pytest.raises(tributary.InvalidInput) as refused:
        graph.load([person("ada", 36), person("bob", 400)])
    assert refused.value.status == 400
    assert refused.value.lines and refused.value.lines[0]["line"] == 2
    with pytest.raises(tributary.NotFound):
        graph.read("Nope")
    with pytest.raises(tributary.NotFound):
        tributary.Client(server.url).graph("missing").read("Person")
    with pytest.raises(tributary.InvalidInput):
        graph.read("Person", filter="nope = 1")


def test_branches_take_reads_streams_and_merge(graph):
    graph.load([person("ada", 36)])
    created = graph.create_branch("dev")
    assert created["branch"] == "dev"
    assert [b["branch"] for b in graph.branches()] == ["main", "dev"]
    graph.ingest([person("bob", 40)], branch="dev")
    graph.fold(branch="dev")
    assert ids(graph.read("Person", branch="dev")) == ["ada", "bob"]
    assert ids(graph.read("Person")) == ["ada"]
    merged = graph.merge("dev")
    assert merged["kind"] == "fast_forward", merged
    assert ids(graph.read("Person")) == ["ada", "bob"]
    graph.load([person("ada", 37)], branch="dev")
    graph.load([person("ada", 38)])
    with pytest.raises(tributary.Conflict) as refused:
        graph.merge("dev")
    assert [(c["type_name"], c["key"]) for c in refused.value.conflicts] == [("Person", "ada")]
    graph.delete_branch("dev")
    with pytest.raises(tributary.NotFound):
        graph.read("Person", branch="dev")


def test_a_busy_server_is_retried_with_back_off_then_raised():
    calls = []

    def busy(request):
        calls.append(request)
        if len(calls) < 3:
            return httpx.Response(
                503,
                headers={"retry-after": "0.05"},
                json={"kind": "unavailable", "error": "busy"},
            )
        return httpx.Response(200, json={"branch": "main", "tables": []})

    client = tributary.Client("http://tributary.test", transport=httpx.MockTransport(busy))
    assert client.graph("g").status()["branch"] == "main"
    assert len(calls) == 3

    always = tributary.Client(
        "http://tributary.test",
        retries=2,
        transport=httpx.MockTransport(
            lambda request: httpx.Response(
                503,
                headers={"retry-after": "0.01"},
                json={"kind": "unavailable", "error": "busy"},
            )
        ),
    )
    with pytest.raises(tributary.Unavailable) as raised:
        always.graph("g").status()
    assert raised.value.status == 503


def test_a_token_is_sent_and_a_missing_one_is_unauthorized(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("secret write g\n")
    served = Server("--tokens", str(tokens))
    try:
        with pytest.raises(tributary.Unauthorized):
            tributary.Client(served.url).graph("g").read("Person")
        with pytest.raises(tributary.Forbidden):
            tributary.Client(served.url, token="secret").graph("other").read("Person")
        reader = tributary.Client(served.url, token="secret").graph("g")
        reader.ingest([person("ada", 36)])
        assert ids(reader.read("Person", fresh=True)) == ["ada"]
    finally:
        served.stop()


def test_a_node_table_reads_with_pylance_at_the_version_a_commit_pins(graph, server):
    import lance

    first = graph.load([person("ada", 36), person("bob", 40)])
    graph.load([person("cy", 20)])
    pinned = [c for c in graph.commits() if c["id"] == first["commit"]]
    version = pinned[0]["tables"]["nodes/Person.lance"]
    table = Path(server.dir.name) / "graphs" / "g" / "nodes" / "Person.lance"
    dataset = lance.dataset(str(table), version=version)
    assert sorted(dataset.to_table(columns=["id"]).column("id").to_pylist()) == ["ada", "bob"]


def test_a_producer_stream_that_breaks_goes_on_after_its_last_acknowledged_line():
    requests = []

    def server(request):
        requests.append(request)
        body = request.content.decode().splitlines()
        sequence = int(request.url.params["sequence"])
        if len(requests) == 1:
            def broken():
                yield b'{"acked":3,"through_line":3,"rows":3,"rejected":[{"line":2,"error":"bad"}]}\n'
                raise httpx.ReadError("connection reset")

            return httpx.Response(200, content=broken())
        assert sequence == 4, sequence
        n = len(body)
        return httpx.Response(
            200,
            content=(
                f'{{"acked":{n},"through_line":{n},"rows":{n},"rejected":[]}}\n'
                f'{{"summary":true,"acked":{n},"rejected":0,"through_line":{n}}}\n'
            ).encode(),
        )

    client = tributary.Client("http://tributary.test", transport=httpx.MockTransport(server))
    lines = [person(f"p{i}", 1) for i in range(10)]
    result = client.graph("g").ingest(lines, producer="orders")
    assert len(requests) == 2
    assert len(requests[1].content.decode().splitlines()) == 7
    assert (result.acked, result.through_line, result.duplicates) == (10, 10, 0)
    assert result.rejected == [{"line": 2, "error": "bad"}]


QUERY_SCHEMA = """
node P @stream { name: String @key  age: I32 }
edge K: P -> P @stream
"""


def trails(edges, start, hops, undirected=False):
    """Every trail (no edge twice) of exactly `hops` edges from `start`: its last node."""
    steps = {}
    for i, (src, dst) in enumerate(edges):
        steps.setdefault(src, []).append((i, dst))
        if undirected and src != dst:
            steps.setdefault(dst, []).append((i, src))
    ends = []

    def walk(node, used, left):
        if left == 0:
            ends.append(node)
            return
        for edge, nxt in steps.get(node, []):
            if edge not in used:
                walk(nxt, used | {edge}, left - 1)

    walk(start, frozenset(), hops)
    return ends


@pytest.fixture
def query_server():
    served = Server(schema_text=QUERY_SCHEMA)
    yield served
    served.stop()


def test_queries_match_plain_python_over_the_rows(query_server):
    import random

    rng = random.Random(36)
    names = [f"n{i}" for i in range(60)]
    ages = {name: rng.randrange(90) for name in names}
    edges = set()
    while len(edges) < 240:
        src, dst = rng.choice(names), rng.choice(names)
        if src != dst:
            edges.add((src, dst))
    edges = sorted(edges)
    with tributary.Client(query_server.url) as client:
        g = client.graph("g")
        g.load(
            [{"type": "P", "data": {"name": n, "age": ages[n]}} for n in names]
            + [{"edge": "K", "from": s, "to": d} for s, d in edges]
        )
        for _ in range(30):
            anchor = rng.choice(names)
            hops = rng.choice([2, 3])
            least = rng.randrange(90)
            undirected = rng.random() < 0.3
            arrow = "-" if undirected else "->"
            chain = "".join(f"-[:K]{arrow}(x{i})" for i in range(1, hops))
            text = (
                f"MATCH (a:P {{name: $anchor}}){chain}-[:K]{arrow}(c) "
                f"WHERE c.age >= $least RETURN c.name AS name"
            )
            got = g.query(text, params={"anchor": anchor, "least": least})
            expected = [
                n for n in trails(edges, anchor, hops, undirected) if ages[n] >= least
            ]
            assert sorted(got.column("name").to_pylist()) == sorted(expected), text
            counted = g.query(
                f"MATCH (a:P {{name: $anchor}}){chain}-[:K]{arrow}(c) RETURN count(*) AS n",
                params={"anchor": anchor},
            )
            assert counted.column("n").to_pylist() == [
                len(trails(edges, anchor, hops, undirected))
            ]
        # Variable length: the nodes some trail of 1 to 3 edges reaches.
        for anchor in rng.sample(names, 5):
            reached = g.query(
                "MATCH (a:P {name: $anchor})-[:K*1..3]->(c) RETURN DISTINCT c.name AS name",
                params={"anchor": anchor},
            )
            expected = {n for hops in (1, 2, 3) for n in trails(edges, anchor, hops)}
            assert set(reached.column("name").to_pylist()) == expected
        # Aggregates over the whole graph, and SQL over the same tables.
        older = g.query("MATCH (p:P)-[:K]->(q:P) WHERE q.age > 44 RETURN count(*) AS n")
        assert older.column("n").to_pylist() == [
            sum(1 for _, d in edges if ages[d] > 44)
        ]
        sql = g.sql('SELECT count(*) AS n FROM "K" k JOIN "P" p ON p.id = k.dst WHERE p.age > 44')
        assert sql.column("n").to_pylist() == older.column("n").to_pylist()

        # Embedded (the CLI on the graph's folder), remote and Python: the same rows.
        text = "MATCH (a:P)-[:K]->(b:P) WHERE a.age < 30 RETURN a.name AS a, b.name AS b ORDER BY a, b"
        here = subprocess.run(
            [binary(), "query", query_server.graph_path, text, "--format", "json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        there = subprocess.run(
            [binary(), "query", "g", text, "--format", "json", "--server", query_server.url],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert json.loads(here) == json.loads(there) == g.query(text).to_pylist()

        # Fresh: an ingested, unfolded edge is seen only when asked for.
        g.ingest([{"edge": "K", "from": "n0", "to": "n1"}, {"edge": "K", "from": "n1", "to": "n0"}])
        count = "MATCH (a:P {name: 'n0'})-[:K]->(b:P {name: 'n1'}) RETURN count(*) AS n"
        assert g.query(count, fresh=True).column("n").to_pylist() == [1]
        already = int(("n0", "n1") in edges)
        assert g.query(count).column("n").to_pylist() == [already]

        # Refusals are InvalidInput with the place; explain says what runs.
        with pytest.raises(tributary.InvalidInput, match="line 1, column 10: unknown node type `Q`"):
            g.query("MATCH (a:Q) RETURN a")
        with pytest.raises(tributary.InvalidInput, match="more than 3 rows"):
            g.query("MATCH (p:P) RETURN p.name", max_rows=3)
        plan = g.query(
            "MATCH (a:P {name: 'n0'})-[:K]->(b) RETURN count(b)", explain=True
        ).to_pydict()
        assert plan["step"][:2] == ["sql", "read by key"]
        assert "K AS __expanded__e1: src IN 1 key" in plan["plan"][1]


def test_a_snapshot_joins_in_duckdb_as_of_its_commit_while_writes_go_on(graph):
    import duckdb

    graph.load(
        [person(f"p{i}", 20 + i) for i in range(20)]
        + [{"type": "Company", "data": {"name": c}} for c in ("acme", "globex")]
        + [
            {"edge": "WorksAt", "from": f"p{i}", "to": "acme" if i % 2 else "globex"}
            for i in range(20)
        ]
    )
    snapshot = graph.snapshot()
    assert [t["type"] for t in snapshot["tables"]] == ["Person", "Company", "WorksAt"]
    works_at = snapshot["tables"][2]
    assert (works_at["role"], works_at["from"], works_at["to"]) == ("edge", "Person", "Company")
    pin = graph.pin("report", commit=snapshot["commit"])
    assert pin["commit"] == snapshot["commit"]
    assert [p["name"] for p in graph.pins()] == ["report"]

    # Writes keep committing while the snapshot is read: ingest, folds and loads.
    stop = threading.Event()

    def write():
        n = 0
        while not stop.is_set():
            graph.ingest([person(f"late{n}", 99)])
            graph.fold()
            graph.load([{"edge": "WorksAt", "from": f"late{n}", "to": "acme"}])
            n += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        datasets = graph.datasets(snapshot=snapshot)
        con = duckdb.connect()
        for name, dataset in datasets.items():
            con.register(name, dataset.to_table())
        joined = con.execute(
            'SELECT c.id AS company, count(*) AS people, sum(p.age) AS ages '
            'FROM Person p JOIN WorksAt w ON w.src = p.id JOIN Company c ON c.id = w.dst '
            'GROUP BY c.id ORDER BY c.id'
        ).fetchall()
    finally:
        stop.set()
        writer.join()
    # The snapshot's answer, not the head's: the same join by the graph at that commit.
    expected = graph.sql(
        "SELECT c.id AS company, count(*) AS people, sum(p.age) AS ages "
        "FROM Person p JOIN WorksAt w ON w.src = p.id JOIN Company c ON c.id = w.dst "
        "GROUP BY c.id ORDER BY c.id",
        commit=snapshot["commit"],
    )
    assert [tuple(r.values()) for r in expected.to_pylist()] == joined
    assert joined == [("acme", 10, sum(20 + i for i in range(1, 20, 2))),
                      ("globex", 10, sum(20 + i for i in range(0, 20, 2)))]
    head = graph.snapshot()
    assert head["commit"] != snapshot["commit"] and head["tables"][0]["rows"] > 20
    assert graph.unpin("report")["name"] == "report"
    assert graph.pins() == []
    with pytest.raises(tributary.NotFound):
        graph.unpin("report")
    with pytest.raises(tributary.NotFound):
        graph.snapshot(commit="no-such-commit")


def test_a_branch_snapshot_opens_on_its_lance_branch(graph):
    graph.load([person("ada", 36)])
    graph.create_branch("dev")
    graph.load([person("bob", 40)], branch="dev")
    snapshot = graph.snapshot(branch="dev")
    assert snapshot["tables"][0]["lance_branch"]
    people = graph.datasets(snapshot=snapshot)["Person"]
    assert sorted(people.to_table(columns=["id"]).column("id").to_pylist()) == ["ada", "bob"]
    main = graph.datasets()["Person"]
    assert main.to_table(columns=["id"]).column("id").to_pylist() == ["ada"]


def apply(mirror, change):
    """A consumer: (type, key) -> row, from one commit's batches."""
    for batch in change.batches:
        for row in batch.rows.to_pylist():
            key = (batch.type, row["id"])
            if batch.op == "insert":
                assert key not in mirror, key
                mirror[key] = row
            elif batch.op == "update":
                assert key in mirror, key
                mirror[key] = row
            else:
                assert mirror.pop(key, None) is not None, key


def test_a_consumer_of_the_change_feed_ends_equal_to_the_graph_and_resumes(graph):
    start = graph.commits(limit=1)[0]["id"]
    graph.load([person(f"p{i}", i) for i in range(10)]
               + [{"type": "Company", "data": {"name": c}} for c in ("acme", "globex")]
               + [{"edge": "WorksAt", "from": f"p{i}", "to": "acme"} for i in range(0, 5)])
    graph.ingest([person("p1", 50), {"delete": "Person", "key": "p2"},
                  {"type": "Person", "patch": {"name": "p3", "bio": "patched"}},
                  person("p10", 10)])
    graph.fold()
    graph.create_branch("side")
    graph.load([person("p11", 11), person("p4", 44),
                {"edge": "WorksAt", "from": "p11", "to": "globex"}], branch="side")
    graph.merge("side")
    graph.load([{"delete": "Person", "key": "p0"}])

    # The consumer stores its mirror with the last commit it applied; the first run
    # stops half-way through a commit (a crash) and the second resumes from what it stored.
    stored = ({}, start)
    mirror = {}
    for n, change in enumerate(graph.changes(stored[1])):
        if n == 2:
            half = CommitHalf(change)
            apply(mirror, half)
            break  # killed: the half-applied commit was never stored
        apply(mirror, change)
        stored = (dict(mirror), change.commit)
    mirror = dict(stored[0])
    kinds = []
    for change in graph.changes(stored[1]):
        apply(mirror, change)
        stored = (dict(mirror), change.commit)
        kinds.append(change.kind)
    assert stored[1] == graph.commits(limit=1)[0]["id"]
    assert "merge" in kinds and "load" in kinds

    expected = {}
    for ty in ("Person", "Company", "WorksAt"):
        for row in graph.read(ty).to_pylist():
            expected[(ty, row["id"])] = row
    assert len(expected) > 5
    assert mirror.keys() == expected.keys()
    for key, row in expected.items():
        got = mirror[key]
        for column, value in row.items():
            if isinstance(value, float) or (isinstance(value, list) and value
                                            and isinstance(value[0], float)):
                assert got[column] == pytest.approx(value), (key, column)
            else:
                assert got[column] == value, (key, column)

    people = next(graph.changes(start, types=["Person"]))
    assert {b.type for b in people.batches} == {"Person"}
    with pytest.raises(tributary.NotFound):
        next(graph.changes("000000000000"))


class CommitHalf:
    """The first half of a commit's batches: what a consumer killed mid-commit applied."""

    def __init__(self, change):
        self.batches = change.batches[: max(1, len(change.batches) // 2)]


def test_following_the_feed_yields_a_commit_once_it_is_published(graph):
    graph.load([person("ada", 36)])
    got = []

    def follow():
        for change in graph.changes("head", follow=True, limit=1, heartbeat_secs=1):
            got.append(change)

    follower = threading.Thread(target=follow)
    follower.start()
    import time

    time.sleep(1.5)
    graph.ingest([person("ada", 37), person("bob", 41)])
    graph.fold()
    follower.join(timeout=30)
    assert not follower.is_alive()
    assert len(got) == 1 and got[0].kind == "fold"
    ops = {(b.type, b.op): b.rows.column("id").to_pylist() for b in got[0].batches}
    assert ops == {("Person", "insert"): ["bob"], ("Person", "update"): ["ada"]}


def test_graphs_are_listed_created_exported_and_loaded_back(tmp_path):
    served = Server("--init")
    try:
        with tributary.Client(served.url) as client:
            assert client.graphs() == ["g"]
            source = client.graph("g")
            source.load(
                [
                    person("ada", 36, bio="writes"),
                    person("bob", 40),
                    {"type": "Company", "data": {"name": "acme"}},
                    {"edge": "WorksAt", "from": "ada", "to": "acme", "data": {"since": "2020-01-02"}},
                ]
            )
            copy = client.create_graph("copy", source.schema())
            assert client.graphs() == ["copy", "g"]
            lines = list(source.export())
            # Nodes first: a load of them in order finds every edge's ends.
            assert [json.loads(l).get("type") is not None for l in lines] == [True] * 3 + [False]
            written = source.export(tmp_path / "g.ndjson")
            assert written["rows"] == {"Person": 2, "Company": 1, "WorksAt": 1}
            assert written["commit"] == source.commits(limit=1)[0]["id"]
            loaded = copy.load((tmp_path / "g.ndjson").read_text().splitlines())
            assert loaded["rows"] == {"Company": 1, "Person": 2, "WorksAt": 1}
            for type_name in ["Person", "Company", "WorksAt"]:
                assert source.read(type_name).sort_by("id").equals(
                    copy.read(type_name).sort_by("id")
                ), type_name
            assert list(source.export(types=["Company"])) == ['{"type":"Company","data":{"name":"acme"}}']
            with pytest.raises(tributary.NotFound):
                list(source.export(types=["Compny"]))
            assert source.count("Person") == 2 and source.count("Person", filter="age > 38") == 1
            page = source.read("Person", order_by=["name:desc"], offset=1, limit=1, select=["name"])
            assert page.column("name").to_pylist() == ["ada"]
            # A value holding a line separator other than a newline stays one line.
            source.load([person("li\u2028ne", 1)])
            people = list(source.export(types="Person"))
            assert len(people) == 3 and all(json.loads(l)["type"] == "Person" for l in people)
            source.export(tmp_path / "p.ndjson", types="Person")
            assert copy.load(open(tmp_path / "p.ndjson"))["rows"] == {"Person": 3}
            assert copy.get("Person", "li\u2028ne") is not None
            with pytest.raises(tributary.NotFound):
                source.export(tmp_path / "p.ndjson", types="Persn")
            assert (tmp_path / "p.ndjson").exists(), "a failed export leaves the old file"
            cleaned = source.cleanup(older_than_s=0)
            assert isinstance(cleaned, dict)
    finally:
        served.stop()


def test_a_merge_conflict_names_both_values_and_a_preferred_side_settles_it(graph):
    graph.load([person("ada", 36)])
    graph.create_branch("dev")
    graph.load([person("ada", 37)], branch="dev")
    graph.load([person("ada", 38)])
    with pytest.raises(tributary.MergeConflict) as refused:
        graph.merge("dev")
    assert isinstance(refused.value, tributary.Conflict)
    assert refused.value.conflicts[0]["source_value"] == "age: 37"
    assert refused.value.conflicts[0]["target_value"] == "age: 38"
    merged = graph.merge("dev", prefer="source")
    assert merged["resolved"] == 1
    assert graph.get("Person", "ada").column("age").to_pylist() == [37]
