"""A Python client of a Tributary server.

    import tributary

    client = tributary.Client("http://127.0.0.1:8080")
    people = client.graph("people")
    people.ingest([{"type": "Person", "data": {"name": "ada", "age": 36}}])
    table = people.read("Person", fresh=True)  # a pyarrow.Table
"""

from .client import Ack, ChangeBatch, Client, CommitChanges, Graph, IngestResult
from .errors import (
    Conflict,
    Fenced,
    Forbidden,
    Internal,
    InvalidInput,
    MergeConflict,
    NoRow,
    NotFound,
    TooLarge,
    TributaryError,
    Unauthorized,
    Unavailable,
)

__all__ = [
    "Ack",
    "ChangeBatch",
    "CommitChanges",
    "Client",
    "Graph",
    "IngestResult",
    "TributaryError",
    "InvalidInput",
    "TooLarge",
    "Conflict",
    "MergeConflict",
    "Fenced",
    "Unavailable",
    "NotFound",
    "NoRow",
    "Unauthorized",
    "Forbidden",
    "Internal",
]
