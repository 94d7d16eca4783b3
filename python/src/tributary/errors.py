"""Typed errors: one class per public error kind of the server (its `kind` field)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional


class TributaryError(Exception):
    """An error the server answered (or a stream ended with).

    ``kind`` is the server's machine-readable kind, ``status`` the HTTP status (``None``
    for an error a stream's summary reported), ``lines`` the rejected lines of a refused
    load as ``{"line": n, "error": "..."}``, ``conflicts`` the keys of a refused merge as
    ``{"type_name", "key", "source_change", "target_change"}``.
    """

    kind = "internal"

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        lines: Optional[List[Dict[str, Any]]] = None,
        conflicts: Optional[List[Dict[str, Any]]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.lines = lines or []
        self.conflicts = conflicts or []
        #: For an error raised by :meth:`Graph.ingest`: what was settled before it (its
        #: ``through_line`` is where to resume).
        self.result = None


class InvalidInput(TributaryError):
    kind = "invalid_input"


class TooLarge(TributaryError):
    kind = "too_large"


class Conflict(TributaryError):
    kind = "conflict"


class MergeConflict(Conflict):
    """A merge found keys both branches changed differently (``conflicts`` lists them
    with both values): retrying does not help; merge with ``prefer="source"`` or
    ``prefer="target"``, or settle the keys on one branch."""

    kind = "merge_conflict"


class Fenced(TributaryError):
    kind = "fenced"


class Unavailable(TributaryError):
    """The server is busy (or shutting down): retried with back-off, then raised."""

    kind = "unavailable"


class NotFound(TributaryError):
    kind = "not_found"


class NoRow(NotFound):
    """``get`` of a key with no row (the graph and type exist)."""

    kind = "no_row"


class Unauthorized(TributaryError):
    kind = "unauthorized"


class Forbidden(TributaryError):
    kind = "forbidden"


class Internal(TributaryError):
    kind = "internal"


KINDS = {
    cls.kind: cls
    for cls in (
        InvalidInput,
        TooLarge,
        Conflict,
        MergeConflict,
        Fenced,
        Unavailable,
        NotFound,
        NoRow,
        Unauthorized,
        Forbidden,
        Internal,
    )
}


def from_body(body: Dict[str, Any], status: Optional[int]) -> TributaryError:
    """The exception for an error body ``{"kind", "error", "lines"?}``."""
    cls = KINDS.get(str(body.get("kind")), TributaryError)
    return cls(
        str(body.get("error", "")),
        status=status,
        lines=body.get("lines") or [],
        conflicts=body.get("conflicts") or [],
    )
