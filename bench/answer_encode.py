"""Benchmark of encoding one route answer: what ext ``routesVersion`` costs per answer.

Every GET_ROUTEINFO_BY_TOPIC answer carries the answering node's routes version in an ext
field. Its JSON header is built once per (code, remark, ext fields) and kept by
``remoting.frame``'s header cache, since the version stays the same until a route
changes. Three lines, one run:

1. baseline: the answer without ext fields (how every route answer was encoded before);
2. the answer with its routes version, through the header cache (what the node does);
3. the same answer with a new version each time (the cache misses: what every answer
   would cost without it).

Run: ``.venv/bin/python -m bench.answer_encode``.
"""

from __future__ import annotations

import itertools

from bench import _util
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.consistency import ROUTES_VERSION_FIELD
from remoting.frame import encode_frame

ROUTE_BODY_BYTES = 501
"""The gateway's answer for a topic routed by two broker groups (bench.route_query)."""


def main() -> int:
    """Print the three lines with their ratio to the baseline."""
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "BenchTopic"})
    body = b"x" * ROUTE_BODY_BYTES
    version = {ROUTES_VERSION_FIELD: "1234567"}
    versions = itertools.count(1)

    def bare() -> bytes:
        return encode_frame(make_response(request, ResponseCode.SUCCESS, body=body))

    def versioned() -> bytes:
        return encode_frame(
            make_response(request, ResponseCode.SUCCESS, body=body, ext_fields=version)
        )

    def changing() -> bytes:
        fields = {ROUTES_VERSION_FIELD: str(next(versions))}
        return encode_frame(
            make_response(request, ResponseCode.SUCCESS, body=body, ext_fields=fields)
        )

    print(_util.machine_notes())
    # The baseline is timed before and after the others; its best stands (warm-up and
    # neighbours only ever add time).
    first = _util.us_per_op(bare)
    cached = _util.us_per_op(versioned)
    fresh = _util.us_per_op(changing)
    baseline = min(first, _util.us_per_op(bare))
    rows = [
        ("no ext fields (baseline)", baseline, 1.0),
        ("routesVersion, header cached", cached, cached / baseline),
        ("routesVersion, new each answer", fresh, fresh / baseline),
    ]
    _util.print_table(
        "route answer encoding (µs per answer)", ("answer", "µs per answer", "ratio"), rows
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
