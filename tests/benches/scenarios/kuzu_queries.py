"""The query scenario's peer: the same graph in Kuzu (from PyPI), the same queries.

Reads `persons.csv` (name,age) and `knows.csv` (src,dst) from the folder given, loads them
with COPY, runs each query of `queries.json` (name -> Cypher) `runs` times, and prints
one JSON object: the load time and, per query, the median time and the first value of
the answer (a count, to check against Tributary's).
"""

import json
import statistics
import sys
import time
from pathlib import Path

import kuzu


def main() -> None:
    folder = Path(sys.argv[1])
    runs = int(sys.argv[2])
    queries = json.loads((folder / "queries.json").read_text())
    database = kuzu.Database(str(folder / "kuzu-db"))
    connection = kuzu.Connection(database)
    connection.execute("CREATE NODE TABLE Person(name STRING, age INT32, PRIMARY KEY (name))")
    connection.execute("CREATE REL TABLE Knows(FROM Person TO Person)")
    started = time.perf_counter()
    connection.execute(f"COPY Person FROM '{folder / 'persons.csv'}' (header=true)")
    connection.execute(f"COPY Knows FROM '{folder / 'knows.csv'}' (header=true)")
    load_s = time.perf_counter() - started
    answers = {}
    for name, text in queries.items():
        times = []
        value = None
        for _ in range(runs):
            started = time.perf_counter()
            result = connection.execute(text)
            rows = result.get_all()
            times.append(time.perf_counter() - started)
            value = rows[0][0] if rows else None
        answers[name] = {"median_ms": statistics.median(times) * 1e3, "value": value}
    print(json.dumps({"load_s": load_s, "queries": answers}))


if __name__ == "__main__":
    main()
