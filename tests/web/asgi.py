"""Requests to an ASGI application as uvicorn sends them, for tests that drive the web
process's HTTP application without a server."""

from __future__ import annotations

import asyncio
from typing import Any

Headers = list[tuple[bytes, bytes]]
Answer = tuple[int, Headers, bytes]
"""(status, headers, body)"""


def asgi_scope(
    path: str, headers: Headers, query: bytes = b"", host: bytes = b"127.0.0.1"
) -> dict[str, Any]:
    """A GET of ``path`` (decoded, as uvicorn gives it), ``headers`` after Host."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", host), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
    }


async def asgi_answer(app: Any, scope: dict[str, Any]) -> Answer:
    """``app``'s answer to ``scope`` (a request without a body)."""
    sent: list[dict[str, Any]] = []
    finished = asyncio.Event()
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    finished.set()
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return int(sent[0]["status"]), list(sent[0]["headers"]), body
