"""An OpenAPI-driven fuzzer (schemathesis) against a real `tributary serve` holding the
example graph: every operation of the served description, with generated and realistic
inputs (`fuzz/hooks.py`), must answer without a 5xx, with a documented status, content type
and body (NDJSON answers line by line)."""

import json
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from test_client import REPO, binary

FUZZ = Path(__file__).resolve().parent / "fuzz"

CONFIG = """
hooks = "hooks"
# More workers trip a CPython 3.11 recursion check inside hypothesis.
workers = 1
request-timeout = 15

[checks]
ndjson_response_conformance.enabled = true

[parameters]
"path.id" = {{ dictionary = "graphs", probability = 0.9 }}
"path.type" = {{ dictionary = "types", probability = 0.9 }}
"path.key" = {{ dictionary = "keys", probability = 0.8 }}
"query.branch" = {{ dictionary = "branches", probability = 0.5 }}
"query.commit" = {{ dictionary = "commits", probability = 0.5 }}
"query.since" = {{ dictionary = "since", probability = 0.8 }}
"query.edge" = {{ dictionary = "edges", probability = 0.8 }}
# A followed change feed never ends (it sends heartbeats): nothing a fuzzer can consume.
"query.follow" = "false"

[dictionaries.graphs]
values = ["g"]
[dictionaries.types]
values = ["Person", "Company", "Knows", "WorksAt"]
[dictionaries.edges]
values = ["Knows", "WorksAt"]
[dictionaries.keys]
values = ["person-0001", "person-0000", "company-001", "company-022", "person-0000->person-0301", "person-0000->company-022"]
[dictionaries.branches]
values = ["main"]
[dictionaries.commits]
values = {commits}
[dictionaries.since]
values = {since}
"""


def test_a_fuzzer_driven_by_the_api_description_finds_no_5xx_and_no_undocumented_answer():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "graphs"
        root.mkdir()
        graph = str(root / "g")
        examples = REPO / "examples"
        subprocess.run([binary(), "init", graph, "--schema", str(examples / "schema.tg")], check=True, capture_output=True)
        subprocess.run([binary(), "load", graph, str(examples / "data.ndjson")], check=True, capture_output=True)
        log = subprocess.run([binary(), "log", graph, "--format", "ndjson"], check=True, capture_output=True, text=True)
        commits = [json.loads(line)["commit"] for line in log.stdout.splitlines()]
        config = Path(tmp) / "schemathesis.toml"
        config.write_text(CONFIG.format(commits=json.dumps(commits), since=json.dumps(["head", *commits])))
        server = subprocess.Popen(
            [binary(), "serve", str(root), "--bind", "127.0.0.1:0", "--init"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            first = server.stdout.readline().strip()
            assert first.startswith("listening on "), first
            url = first[len("listening on ") :]
            threading.Thread(target=server.stdout.read, daemon=True).start()
            log_lines = []
            threading.Thread(target=lambda: log_lines.extend(server.stderr), daemon=True).start()
            fuzzer = subprocess.run(
                [
                    str(Path(sys.executable).parent / "st"),
                    "--config-file",
                    str(config),
                    "run",
                    f"{url}/openapi.json",
                    "--checks",
                    "not_a_server_error,response_schema_conformance,status_code_conformance,"
                    "content_type_conformance,ndjson_response_conformance",
                    "--max-examples",
                    "30",
                    "--seed",
                    "1",
                    "--no-color",
                ],
                cwd=FUZZ,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert fuzzer.returncode == 0, (
                fuzzer.stdout[-6000:] + fuzzer.stderr[-2000:] + "\nserver log:\n" + "".join(log_lines)[-4000:]
            )
            assert "panicked" not in "".join(log_lines)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
