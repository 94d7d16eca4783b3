"""Schemathesis hooks for fuzzing a Tributary server: send NDJSON request bodies as text,
check NDJSON answers line by line against their documented record, and seed the fuzzer with
realistic bodies and parameters. Used by `test_openapi_fuzz.py`."""
import json
import pathlib

import jsonschema_rs
import schemathesis


# The spec declares these bodies as `type: string` (the whole NDJSON text): send it as is, like text/plain.
schemathesis.serializer.alias("application/x-ndjson", "text/plain")


_DOC = None


@schemathesis.check
def ndjson_response_conformance(ctx, response, case):
    """Each line of a 2xx application/x-ndjson response must match the documented schema (one record per line)."""
    global _DOC
    ctype = response.headers.get("content-type", [""])
    ctype = (ctype[0] if isinstance(ctype, list) else ctype).split(";")[0].strip()
    if ctype != "application/x-ndjson" or not (200 <= response.status_code < 300):
        return
    op = case.operation
    responses = op.definition.raw.get("responses", {})
    media = responses.get(str(response.status_code), {}).get("content", {}).get("application/x-ndjson")
    if not media or "schema" not in media:
        return
    if _DOC is None:
        _DOC = op.schema.raw_schema
    root = {k: v for k, v in _DOC.items() if k in ("components",)}
    root.update(media["schema"])
    validator = jsonschema_rs.Draft202012Validator(root)
    for i, line in enumerate(response.content.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise AssertionError(f"line {i} is not JSON: {exc}: {line[:200]!r}")
        errors = list(validator.iter_errors(item))
        if errors:
            raise AssertionError(f"line {i} does not match the documented schema: {errors[0]}\n  line: {line[:400]}")


# Realistic values, as examples in the loaded description (the served one is unchanged),
# so loads, queries and schema changes get past input checks and reach the engine.
SCHEMA_TEXT = (pathlib.Path(__file__).resolve().parents[3] / "examples" / "schema.tg").read_text()
LOAD_NDJSON = (
    '{"type":"Person","data":{"name":"person-9001","age":30,"email":"f.1@example.org","bio":"fuzz works on storage"}}\n'
    '{"type":"Company","data":{"name":"company-900"}}\n'
    '{"edge":"WorksAt","from":"person-9001","to":"company-900","data":{"since":"2020-02-02"}}\n'
    '{"edge":"Knows","from":"person-9001","to":"person-0001"}\n'
)
INGEST_NDJSON = (
    '{"type":"Person","data":{"name":"river-91","age":31,"bio":"river streams sensor data"}}\n'
    '{"edge":"Knows","from":"river-91","to":"person-0001"}\n'
)
BODY_EXAMPLES = {
    ("/graphs/{id}", "post"): SCHEMA_TEXT,
    ("/graphs/{id}/schema", "post"): SCHEMA_TEXT.replace("node Company { name: String @key }",
                                                         "node Company { name: String @key\n  city: String? }"),
    ("/graphs/{id}/load", "post"): LOAD_NDJSON,
    ("/graphs/{id}/ingest", "post"): INGEST_NDJSON,
    ("/graphs/{id}/query", "post"): {"query": "MATCH (p:Person)-[:WorksAt]->(c:Company) WHERE p.age > $a RETURN p.name, c.name LIMIT 5", "params": {"a": 30}},
    ("/graphs/{id}/sql", "post"): {"query": "SELECT name, age FROM Person WHERE age > 30 ORDER BY name LIMIT 5"},
    ("/graphs/{id}/embedder", "post"): {"provider": "builtin"},
    ("/graphs/{id}/shards/{type}", "post"): {"keys": ["person-0001", "river-91"]},
}
PARAM_EXAMPLES = {
    "text": "operating systems",
    "nearest": "[0.7,0.3,0,0,0,0.3,-0.3,0]",
    "similar": "formal methods",
    "filter": "age > 40",
    "select": "name,age",
    "types": "Person,Knows",
    "edge": "Knows",
    "direction": "out",
    "into": "main",
    "mode": "upsert",
    "publisher": "manifest",
    "idempotency_key": "fuzz-load-1",
    "producer": "fuzzer-1",
    "older_than_s": 3600,
}


@schemathesis.hook
def before_load_schema(context, raw_schema):
    for (path, method), example in BODY_EXAMPLES.items():
        op = raw_schema["paths"].get(path, {}).get(method)
        if not op or "requestBody" not in op:
            continue
        for media in op["requestBody"]["content"].values():
            media["example"] = example
    for path, ops in raw_schema["paths"].items():
        for method, op in ops.items():
            if not isinstance(op, dict):
                continue
            for param in op.get("parameters", []):
                if param.get("in") == "query" and param["name"] in PARAM_EXAMPLES:
                    param["example"] = PARAM_EXAMPLES[param["name"]]
