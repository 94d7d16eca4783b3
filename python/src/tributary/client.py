"""The HTTP client: a `Client` per server, a `Graph` per graph id on it."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import httpx
import pyarrow as pa
import pyarrow.ipc

from .errors import TributaryError, Unavailable, from_body

ARROW_STREAM = "application/vnd.apache.arrow.stream"

#: The type name a load line starts with.
_LINE_TYPE = re.compile(rb'^\{"(?:type|edge)":("(?:[^"\\]|\\.)*")')

#: A line of NDJSON as the client takes it: a dict in one of the line shapes
#: (``{"type": ..., "data": ...}``, ``{"edge": ..., "from": ..., "to": ...}``,
#: ``{"delete": ...}``, ``{"type": ..., "patch": ...}``), or the line's text.
Line = Union[Dict[str, Any], str, bytes]


@dataclass
class Ack:
    """One acknowledgement: every line through ``through_line`` (counted from the first
    line given to :meth:`Graph.ingest`, 1-based) is durable or rejected."""

    acked: int
    through_line: int
    rows: int
    rejected: List[Dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0


@dataclass
class IngestResult:
    """What an :meth:`Graph.ingest` call made durable.

    ``through_line`` is the resumable offset: every line up to it is durable or rejected,
    so a producer that fails resumes after it. ``rejected`` lists refused lines as
    ``{"line": n, "error": "..."}`` with ``n`` counted from the first line given.
    """

    acked: int = 0
    through_line: int = 0
    rejected: List[Dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0


@dataclass
class ChangeBatch:
    """One type's changes of one kind in a commit. ``op`` is ``insert`` (keys the parent
    did not have) or ``update`` (keys it had; ``rows`` holds their new values, every
    column), or ``delete`` (``rows`` holds the deleted keys, in ``id``)."""

    type: str
    op: str
    rows: pa.Table


@dataclass
class CommitChanges:
    """What one commit changed, in the order to apply it: node rows before the edges
    that reach them, deleted edges before their nodes. Store ``commit`` with what you
    applied, and pass it as ``since`` to resume exactly after it."""

    commit: str
    parent: Optional[str]
    branch: str
    kind: str
    time: str
    inserted: int
    updated: int
    deleted: int
    batches: List[ChangeBatch] = field(default_factory=list)


def _commit_changes(end: Dict[str, Any], records: List[Dict[str, Any]]) -> CommitChanges:
    batches: List[ChangeBatch] = []
    group: List[Dict[str, Any]] = []

    def close() -> None:
        if not group:
            return
        first = group[0]
        if first["op"] == "delete":
            rows = pa.table({"id": pa.array([r["key"] for r in group], pa.string())})
        else:
            rows = pa.Table.from_pylist([r["row"] for r in group])
        batches.append(ChangeBatch(type=first["type"], op=first["op"], rows=rows))
        group.clear()

    for record in records:
        if group and (group[0]["type"], group[0]["op"]) != (record["type"], record["op"]):
            close()
        group.append(record)
    close()
    return CommitChanges(
        commit=end["commit"],
        parent=end.get("parent"),
        branch=end["branch"],
        kind=end["kind"],
        time=end["time"],
        inserted=end["inserted"],
        updated=end["updated"],
        deleted=end["deleted"],
        batches=batches,
    )


def _encode(line: Line) -> bytes:
    if isinstance(line, dict):
        return json.dumps(line, separators=(",", ":")).encode()
    if isinstance(line, str):
        line = line.encode()
    if isinstance(line, bytes):
        text = line[:-1] if line.endswith(b"\n") else line
        if b"\n" in text:
            # It would be two lines, and every later line number would be off by one.
            raise ValueError("a line holds a newline: give each NDJSON line on its own")
        return text
    raise TypeError(f"a line is a dict, str or bytes, not {type(line).__name__}")


def _segment(name: str) -> str:
    """One URL path segment: a key like `a/b`, `a?b` or `..` reaches the server whole
    (dots are quoted too, or a URL library would resolve `.` and `..` away)."""
    return urllib.parse.quote(name, safe="").replace(".", "%2E")


def _shift_lines(error: TributaryError, offset: int) -> TributaryError:
    """Renumber an error of one request's lines into the caller's line numbers."""
    if offset:
        error.lines = [dict(r, line=r["line"] + offset) for r in error.lines]
        shifted = re.sub(
            r"\bline (\d+)",
            lambda m: f"line {int(m.group(1)) + offset}",
            error.message,
            count=1,
        )
        error.message = shifted
        error.args = (shifted,)
    return error


def _batches(lines: Iterable[Line], size: int) -> Iterator[List[bytes]]:
    batch: List[bytes] = []
    for line in lines:
        batch.append(_encode(line))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _params(**given: Any) -> Dict[str, Any]:
    """Query parameters without the ones not given; booleans as the server reads them."""
    out: Dict[str, Any] = {}
    for name, value in given.items():
        if value is None or value is False:
            continue
        out[name] = "true" if value is True else value
    return out


class Client:
    """A Tributary server at ``url`` (e.g. ``http://127.0.0.1:8080``).

    ``token`` is sent as a bearer token. A request the server refuses as busy (503, with
    ``Retry-After``) is retried up to ``retries`` times, waiting longer each time, then
    raised as :class:`tributary.Unavailable`.
    """

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        *,
        timeout: float = 300.0,
        retries: int = 5,
        transport: Optional[httpx.BaseTransport] = None,
    ) -> None:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )
        self._retries = retries

    def graph(self, graph_id: str) -> "Graph":
        """The graph ``graph_id`` on this server (nothing is sent until it is used)."""
        return Graph(self, graph_id)

    def graphs(self) -> List[str]:
        """The ids of the graphs this server serves that the token may read, sorted."""
        response = self._send("GET", "/graphs")
        return [listed["graph"] for listed in response.json()]

    def create_graph(
        self, graph_id: str, schema: str, *, publisher: Optional[str] = None
    ) -> "Graph":
        """Create graph ``graph_id`` from ``schema`` (its source text) and return it. The
        server must run with ``--init``; ``publisher`` is ``"manifest"`` or ``"record"``."""
        self._send(
            "POST",
            f"/graphs/{_segment(graph_id)}",
            params=_params(publisher=publisher),
            content=schema.encode(),
        )
        return self.graph(graph_id)

    def healthy(self) -> bool:
        """Whether the server answers its health check."""
        try:
            return self._http.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, retried with back-off while the server answers 503 or cannot be
        reached (the request was never sent); other failures of the connection raise
        :class:`tributary.Unavailable` (the request may or may not have taken effect)."""
        attempt = 0
        while True:
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.ConnectError as error:
                if attempt >= self._retries:
                    raise _unreachable(error) from error
                attempt += 1
                time.sleep(0.5 * (2 ** (attempt - 1)))
                continue
            except httpx.TransportError as error:
                raise _unreachable(error) from error
            if response.status_code != 503 or attempt >= self._retries:
                _raise_for(response)
                return response
            attempt += 1
            time.sleep(_retry_after(response) * (2 ** (attempt - 1)))


def _unreachable(error: httpx.TransportError) -> Unavailable:
    return Unavailable(f"the server could not be reached or stopped answering: {error}")


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(float(response.headers.get("retry-after", "1")), 0.05)
    except ValueError:
        return 1.0


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = {"kind": "internal", "error": response.text or response.reason_phrase}
    if not isinstance(body, dict):
        body = {"kind": "internal", "error": str(body)}
    raise from_body(body, response.status_code)


def _table(response: httpx.Response) -> pa.Table:
    return pa.ipc.open_stream(response.content).read_all()


class Graph:
    """One graph on a server: writes, reads as ``pyarrow.Table``, status and folds.

    Reads take ``branch`` (default ``main``) or ``commit`` (a commit id), and ``fresh``
    to include what is acknowledged but not folded yet.
    """

    def __init__(self, client: Client, graph_id: str) -> None:
        self._client = client
        self.id = graph_id
        self._base = f"/graphs/{_segment(graph_id)}"

    # Writes

    def ingest(
        self,
        lines: Iterable[Line],
        *,
        branch: str = "main",
        producer: Optional[str] = None,
        first_sequence: int = 1,
        strict: bool = False,
        batch_lines: int = 1000,
        on_ack: Optional[Callable[[Ack], None]] = None,
    ) -> IngestResult:
        """Stream ``lines`` to the graph's MemWAL; each acknowledgement means durable.

        Lines go in requests of ``batch_lines``; ``on_ack`` is called with each
        acknowledgement as it arrives. With ``producer``, line ``n`` (1-based) carries
        sequence ``first_sequence + n - 1``, and lines the producer had acknowledged before
        are acknowledged again without being written: sending the same lines again after
        a failure writes each once. A ``strict`` stream stops at the first invalid line
        and raises :class:`tributary.InvalidInput` naming it.
        """
        if batch_lines < 1:
            raise ValueError("batch_lines must be at least 1")
        result = IngestResult()
        offset = 0
        try:
            for batch in _batches(lines, batch_lines):
                params = _params(branch=branch, strict=strict, producer=producer)
                self._ingest_batch(batch, params, offset, result, on_ack, first_sequence)
                offset += len(batch)
        except TributaryError as error:
            # Where to resume: every line through `result.through_line` is settled.
            error.result = result
            raise
        return result

    def _ingest_batch(
        self,
        lines: List[bytes],
        params: Dict[str, Any],
        offset: int,
        result: IngestResult,
        on_ack: Optional[Callable[[Ack], None]],
        first_sequence: int,
    ) -> None:
        """Send one request of lines (the caller's lines ``offset + 1`` on). A request
        refused before it started (503, or the server unreachable) is sent again after a
        pause. A producer's request whose stream broke, or that the server stopped, goes
        on with the lines after the last one acknowledged: its sequence numbers say which,
        so none is written twice."""
        producer = "producer" in params
        attempt = 0
        sent = 0  # lines of `lines` settled by earlier attempts
        while True:
            request = dict(params)
            if producer:
                request["sequence"] = first_sequence + offset + sent
            body = b"\n".join(lines[sent:]) + b"\n"
            try:
                self._stream_once(body, request, offset + sent, result, on_ack)
                return
            except (Unavailable, httpx.TransportError) as failure:
                refused = isinstance(failure, httpx.ConnectError) or (
                    isinstance(failure, Unavailable) and failure.status == 503
                )
                if attempt >= self._client._retries or not (refused or producer):
                    if isinstance(failure, Unavailable):
                        raise
                    raise _unreachable(failure) from failure
                attempt += 1
                wait = getattr(failure, "retry_after", 0.5)
                time.sleep(wait * (2 ** (attempt - 1)))
                sent = max(sent, result.through_line - offset)
                if sent >= len(lines):
                    return

    def _stream_once(
        self,
        body: bytes,
        params: Dict[str, Any],
        offset: int,
        result: IngestResult,
        on_ack: Optional[Callable[[Ack], None]],
    ) -> None:
        with self._client._http.stream(
            "POST",
            f"{self._base}/ingest",
            params=params,
            content=body,
            headers={"content-type": "application/x-ndjson"},
        ) as response:
            if response.status_code >= 400:
                response.read()
                try:
                    _raise_for(response)
                except Unavailable as busy:
                    busy.retry_after = _retry_after(response)
                    raise
            for text in response.iter_lines():
                if not text.strip():
                    continue
                record = json.loads(text)
                if record.get("summary"):
                    if record.get("error"):
                        raise _shift_lines(from_body(record["error"], None), offset)
                    return
                rejected = [
                    {"line": r["line"] + offset, "error": r["error"]}
                    for r in record.get("rejected", [])
                ]
                through = record["through_line"]
                if record.get("stopped_at") is not None:
                    # A strict stream's bad line is not settled: resume at it.
                    through = record["stopped_at"] - 1
                ack = Ack(
                    acked=result.acked + record.get("rows", 0),
                    through_line=through + offset,
                    rows=record.get("rows", 0),
                    rejected=rejected,
                    duplicates=record.get("duplicates", 0),
                )
                result.acked = ack.acked
                result.through_line = max(result.through_line, ack.through_line)
                result.rejected.extend(rejected)
                result.duplicates += ack.duplicates
                if on_ack is not None:
                    on_ack(ack)
            raise Unavailable("the ingest stream ended without its summary")

    def load(
        self,
        lines: Iterable[Line],
        *,
        branch: str = "main",
        mode: str = "upsert",
        idempotency_key: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Load ``lines`` as one graph commit (all or nothing). Returns what ``tributary
        load`` prints: ``commit`` (its id), ``rows`` and ``deleted`` per type, and
        ``replayed`` (an ``idempotency_key`` seen before: nothing was written again)."""
        body = b"\n".join(_encode(line) for line in lines) + b"\n"
        params = _params(branch=branch, mode=mode, idempotency_key=idempotency_key)
        outcome = self._client._send(
            "POST", f"{self._base}/load", params=params, content=body
        ).json()
        return {
            "commit": outcome["commit"]["id"],
            "rows": outcome.get("rows", {}),
            "deleted": outcome.get("deleted", {}),
            "replayed": outcome.get("replayed", False),
        }

    def export(
        self,
        file: Any = None,
        *,
        types: Optional[Union[str, Sequence[str]]] = None,
        branch: Optional[str] = None,
        commit: Optional[str] = None,
    ) -> Any:
        """The graph's rows at one commit (``branch``'s head, default ``main``, or
        ``commit``) as NDJSON load lines, node types first: what :meth:`load` of a graph
        made with the same :meth:`schema` takes back. Without ``file``, an iterator of
        the lines (``str``); with a path or a binary file, the lines are written there and
        what ``tributary export FILE`` prints is returned: ``{"commit": id, "rows": {type:
        n}}`` (a path is written under a temporary name and renamed once whole).
        ``types`` limits it to those types."""
        if isinstance(types, str):
            types = [types]
        params = _params(
            types=",".join(types) if types else None, branch=branch, commit=commit
        )
        if file is None:
            return (line.decode() for line, _ in self._export_lines(params))
        if isinstance(file, (str, bytes)) or hasattr(file, "__fspath__"):
            path = os.fsdecode(file)
            partial = path + ".partial"
            try:
                with open(partial, "wb") as out:
                    written = self.export(out, types=types, branch=branch, commit=commit)
                os.replace(partial, path)
            finally:
                if os.path.exists(partial):
                    os.remove(partial)
            return written
        rows: Dict[str, int] = {}
        commit_id = None
        for line, commit_id in self._export_lines(params):
            # Every line starts with its type: {"type":"T",… or {"edge":"E",…
            named = _LINE_TYPE.match(line)
            type_name = json.loads(named.group(1)) if named else "?"
            rows[type_name] = rows.get(type_name, 0) + 1
            file.write(line + b"\n")
        return {"commit": commit_id, "rows": rows}

    def _export_lines(self, params: Dict[str, Any]) -> Iterator[Any]:
        """Each exported line (bytes, without its newline) with the commit exported. Lines
        are split at newlines only: a value may hold other line separators (U+2028), which
        JSON leaves as they are."""
        with self._client._http.stream(
            "GET", f"{self._base}/export", params=params
        ) as response:
            if response.status_code >= 400:
                response.read()
                _raise_for(response)
            commit_id = response.headers.get("x-tributary-commit")
            rest = b""
            for chunk in response.iter_bytes():
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                for line in lines:
                    if line:
                        yield line, commit_id
            if rest:
                yield rest, commit_id

    # Schema and housekeeping

    def schema(self) -> str:
        """The graph's schema source (what :meth:`apply_schema` and ``tributary init``
        take)."""
        return self._client._send("GET", f"{self._base}/schema").text

    def apply_schema(self, source: str) -> Dict[str, Any]:
        """Change the schema to ``source`` as one commit (additive changes only; anything
        else raises :class:`tributary.InvalidInput` naming every difference)."""
        return self._client._send(
            "POST", f"{self._base}/schema", content=source.encode()
        ).json()

    def cleanup(self, *, older_than_s: int = 7 * 86_400) -> Dict[str, Any]:
        """Remove folded WAL state and table versions older than ``older_than_s`` seconds
        that no branch head or pin holds; returns what was removed."""
        return self._json("POST", "/cleanup", _params(older_than_s=older_than_s))

    # Branches

    def branches(self) -> List[Dict[str, Any]]:
        """The head commit of every branch, ``main`` first."""
        return self._json("GET", "/branches", {})

    def create_branch(
        self, name: str, *, from_branch: Optional[str] = None, at: Optional[str] = None
    ) -> Dict[str, Any]:
        """Create branch ``name`` at ``from_branch``'s head (default ``main``; what that
        branch acknowledged is folded first) or at commit ``at``; returns its first commit."""
        params = _params(branch=from_branch, commit=at)
        return self._json("POST", f"/branches/{_segment(name)}", params)

    def delete_branch(self, name: str) -> None:
        """Delete branch ``name`` (not ``main``)."""
        self._client._send("DELETE", f"{self._base}/branches/{_segment(name)}")

    def merge(
        self, source: str, *, into: str = "main", prefer: Optional[str] = None
    ) -> Dict[str, Any]:
        """Merge branch ``source`` into ``into`` as one commit (fast-forward or three-way).
        Keys both changed differently raise :class:`tributary.MergeConflict` (each with
        both values), unless ``prefer`` is ``"source"`` or ``"target"``: that side wins."""
        return self._json(
            "POST",
            f"/branches/{_segment(source)}/merge",
            _params(into=into, prefer=prefer),
        )

    # Reads

    def read(
        self,
        type_name: str,
        *,
        filter: Optional[str] = None,
        select: Optional[Sequence[str]] = None,
        limit: Optional[int] = None,
        offset: Optional[int] = None,
        order_by: Optional[Sequence[str]] = None,
        fresh: bool = False,
        branch: Optional[str] = None,
        commit: Optional[str] = None,
    ) -> pa.Table:
        """The rows of ``type_name``; ``filter`` is a SQL predicate (``age > 30``);
        ``order_by`` columns (``"age:desc"`` for descending), then ``offset`` and
        ``limit``."""
        if isinstance(select, str):
            select = [select]
        if isinstance(order_by, str):
            order_by = [order_by]
        params = _params(
            filter=filter,
            select=",".join(select) if select else None,
            limit=limit,
            offset=offset,
            order_by=",".join(order_by) if order_by else None,
            fresh=fresh,
            branch=branch,
            commit=commit,
        )
        return self._arrow(f"/types/{_segment(type_name)}", params)

    def count(
        self,
        type_name: str,
        *,
        filter: Optional[str] = None,
        fresh: bool = False,
        branch: Optional[str] = None,
        commit: Optional[str] = None,
    ) -> int:
        """How many rows of ``type_name`` match ``filter`` (every row without one)."""
        params = _params(filter=filter, fresh=fresh, branch=branch, commit=commit)
        return self._json("GET", f"/count/{_segment(type_name)}", params)["count"]

    def get(
        self,
        type_name: str,
        key: str,
        *,
        fresh: bool = False,
        branch: Optional[str] = None,
        commit: Optional[str] = None,
    ) -> Optional[pa.Table]:
        """The row of ``key`` (one row), or ``None`` when there is none: a lookup whose
        answer may be "nothing", like ``dict.get`` (the CLI, which has no ``None``, exits
        66). A graph or type that does not exist raises :class:`tributary.NotFound`."""
        from .errors import NoRow

        params = _params(fresh=fresh, branch=branch, commit=commit)
        try:
            return self._arrow(f"/types/{_segment(type_name)}/{_segment(key)}", params)
        except NoRow:
            return None

    def neighbors(
        self,
        type_name: str,
        key: str,
        *,
        edge: str,
        direction: str = "out",
        with_edges: bool = False,
        fresh: bool = False,
        branch: Optional[str] = None,
        commit: Optional[str] = None,
    ) -> pa.Table:
        """The nodes ``edge`` reaches from ``key`` (``direction="in"``: that reach it).
        A node without such edges gives an empty table; a node that does not exist raises
        :class:`tributary.NoRow` (an empty answer would hide a mistyped key). With
        ``with_edges=True``, one row per edge, its properties as ``Edge.field`` columns."""
        params = _params(
            edge=edge,
            direction=direction,
            edges=with_edges,
            fresh=fresh,
            branch=branch,
            commit=commit,
        )
        return self._arrow(f"/neighbors/{_segment(type_name)}/{_segment(key)}", params)

    def search(
        self,
        type_name: str,
        *,
        text: Optional[str] = None,
        nearest: Optional[Sequence[float]] = None,
        similar: Optional[str] = None,
        k: int = 10,
        fresh: bool = False,
        branch: Optional[str] = None,
        commit: Optional[str] = None,
    ) -> pa.Table:
        """Full-text (``text``), nearest-vector (``nearest``) or similar-text (``similar``:
        embedded by the graph's embedder, searched over the type's indexed ``@embed``
        field) search; best first. Give exactly one."""
        params = _params(
            text=text,
            nearest=json.dumps(list(nearest)) if nearest is not None else None,
            similar=similar,
            k=k,
            fresh=fresh,
            branch=branch,
            commit=commit,
        )
        return self._arrow(f"/search/{_segment(type_name)}", params)

    def query(
        self,
        text: str,
        *,
        params: Optional[Dict[str, Any]] = None,
        fresh: bool = False,
        branch: Optional[str] = None,
        commit: Optional[str] = None,
        explain: bool = False,
        max_rows: Optional[int] = None,
    ) -> pa.Table:
        """A Cypher query (a read-only subset) at one commit: ``MATCH (a:Person {name:
        $who})-[:Knows*1..2]->(b) RETURN DISTINCT b.name`` with ``params={"who": "ada"}``.
        ``fresh`` adds rows ingested and not folded yet; ``explain`` answers what the
        query would run (``step``, ``plan``) instead of its rows. More rows than
        ``max_rows`` (or the server's cap) raise :class:`tributary.InvalidInput`."""
        return self._query("/query", text, params, fresh, branch, commit, explain, max_rows)

    def sql(
        self,
        text: str,
        *,
        fresh: bool = False,
        branch: Optional[str] = None,
        commit: Optional[str] = None,
        explain: bool = False,
        max_rows: Optional[int] = None,
    ) -> pa.Table:
        """SQL at one commit over one table per node and edge type, named as the type
        (``SELECT name FROM Person``; an edge type's table has ``id``, ``src``, ``dst``)."""
        return self._query("/sql", text, None, fresh, branch, commit, explain, max_rows)

    def _query(
        self,
        path: str,
        text: str,
        params: Optional[Dict[str, Any]],
        fresh: bool,
        branch: Optional[str],
        commit: Optional[str],
        explain: bool,
        max_rows: Optional[int],
    ) -> pa.Table:
        body: Dict[str, Any] = {"query": text, "params": params or {}, "explain": explain}
        if max_rows is not None:
            body["max_rows"] = max_rows
        response = self._client._send(
            "POST",
            self._base + path,
            params=_params(fresh=fresh, branch=branch, commit=commit),
            content=json.dumps(body).encode(),
            headers={"content-type": "application/json", "accept": ARROW_STREAM},
        )
        return _table(response)

    def rejects(self, *, branch: Optional[str] = None) -> pa.Table:
        """The dead letters: rows folds could not apply, with why."""
        return self._arrow("/rejects", _params(branch=branch))

    def commits(self, *, branch: str = "main", limit: int = 50) -> List[Dict[str, Any]]:
        """The branch's commits, newest first."""
        return self._json("GET", "/commits", _params(branch=branch, limit=limit))

    # Snapshots for other engines

    def snapshot(
        self, *, branch: Optional[str] = None, commit: Optional[str] = None
    ) -> Dict[str, Any]:
        """The commit at ``branch``'s head (default ``main``) or ``commit`` as a snapshot:
        ``{"commit", "branch", "time", "tables": [{"type", "role", "uri", "version",
        "lance_branch"?, "key", "from"?, "to"?, "rows", "columns"}]}``, enough for any
        Lance reader to open exactly that commit."""
        return self._json("GET", "/snapshot", _params(branch=branch, commit=commit))

    def datasets(
        self,
        *,
        branch: Optional[str] = None,
        commit: Optional[str] = None,
        snapshot: Optional[Dict[str, Any]] = None,
    ) -> Dict[str, Any]:
        """Each type's ``lance.LanceDataset`` at the version the snapshot pins (``snapshot``
        if given, else the one at ``branch``/``commit``), by type name. Needs pylance and
        a view of the server's storage (the same machine, or the graph's S3 bucket)."""
        try:
            import lance
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError(
                "Graph.datasets needs pylance: pip install pylance"
            ) from error
        if snapshot is None:
            snapshot = self.snapshot(branch=branch, commit=commit)
        opened = {}
        for table in snapshot["tables"]:
            if table.get("lance_branch"):
                # Off ``main`` the version lives on a Lance branch of the table.
                at = (table["lance_branch"], table["version"])
                opened[table["type"]] = lance.dataset(table["uri"]).checkout_version(at)
            else:
                opened[table["type"]] = lance.dataset(
                    table["uri"], version=table["version"]
                )
        return opened

    def changes(
        self,
        since: str,
        *,
        branch: str = "main",
        types: Optional[Sequence[str]] = None,
        follow: bool = False,
        limit: Optional[int] = None,
        heartbeat_secs: Optional[int] = None,
    ) -> Iterator[CommitChanges]:
        """The commits of ``branch`` after ``since`` (a commit id, or ``"head"`` for the
        branch's head now), oldest first, each as a :class:`CommitChanges` of pyarrow
        batches. With ``follow=True`` it waits for new commits (folds, loads, merges) and
        yields them as they are published, until ``limit`` commits or the caller stops.

        A commit not in the branch's history, or one whose versions cleanup removed (the
        message names the oldest commit to resume after), raises
        :class:`tributary.NotFound`. A connection that breaks raises
        :class:`tributary.Unavailable`: resume after the last commit you stored."""
        params = _params(
            branch=branch,
            since=since,
            types=",".join(types) if types else None,
            follow=follow,
            limit=limit,
            heartbeat_secs=heartbeat_secs,
        )
        try:
            with self._client._http.stream(
                "GET", f"{self._base}/changes", params=params
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for(response)
                records: List[Dict[str, Any]] = []
                for text in response.iter_lines():
                    if not text.strip():
                        continue
                    record = json.loads(text)
                    op = record["op"]
                    if op == "heartbeat":
                        continue
                    if op == "error":
                        # The stream began, then could not go on.
                        raise from_body(record, None)
                    if op == "commit":
                        yield _commit_changes(record, records)
                        records = []
                    else:
                        records.append(record)
        except httpx.TransportError as error:
            raise _unreachable(error) from error

    def pin(
        self, name: str, *, branch: Optional[str] = None, commit: Optional[str] = None
    ) -> Dict[str, Any]:
        """Keep the snapshot at ``branch``'s head or ``commit`` from cleanup as ``name``
        until :meth:`unpin`; returns the pin."""
        params = _params(branch=branch, commit=commit)
        return self._json("POST", f"/pins/{_segment(name)}", params)

    def unpin(self, name: str) -> Dict[str, Any]:
        """Remove the pin ``name``; returns it."""
        return self._json("DELETE", f"/pins/{_segment(name)}", {})

    def pins(self) -> List[Dict[str, Any]]:
        """Every pin (``name``, ``commit``, ``branch``, ``pinned_at``), sorted by name."""
        return self._json("GET", "/pins", {})

    # Streaming state

    def status(self, *, branch: str = "main") -> Dict[str, Any]:
        """Per table: pending generations, rows and bytes, WAL-only rows, last fold."""
        return self._json("GET", "/ingest/status", _params(branch=branch))

    def fold(self, *, branch: str = "main", halt: bool = False) -> Dict[str, Any]:
        """Fold what is acknowledged into one graph commit now; returns the outcome."""
        return self._json("POST", "/ingest/fold", _params(branch=branch, halt=halt))

    def publisher(self) -> str:
        """How the graph's commits become visible, chosen when it was made: ``"manifest"``
        (a compare-and-swap on the ``__manifest`` table) or ``"record"`` (one immutable
        record per transaction)."""
        return self._json("GET", "/publisher", {})

    def embedder(self) -> Dict[str, Any]:
        """The graph's embedding provider settings (``{"provider": "builtin"}`` by
        default): what fills ``@embed`` fields and embeds ``similar`` searches."""
        return self._json("GET", "/embedder", {})

    def set_embedder(self, settings: Dict[str, Any]) -> Dict[str, Any]:
        """Name the graph's embedding provider, e.g. ``{"provider": "openai", "url":
        "http://localhost:11434/v1", "model": "nomic-embed-text"}``; returns what is stored."""
        body = json.dumps(settings).encode()
        return self._client._send(
            "POST",
            f"{self._base}/embedder",
            params={},
            content=body,
            headers={"content-type": "application/json"},
        ).json()

    def _arrow(self, path: str, params: Dict[str, Any]) -> pa.Table:
        response = self._client._send(
            "GET", self._base + path, params=params, headers={"accept": ARROW_STREAM}
        )
        return _table(response)

    def _json(self, method: str, path: str, params: Dict[str, Any]) -> Any:
        return self._client._send(method, self._base + path, params=params).json()
