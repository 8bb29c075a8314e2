"""What a launched web process must do with the console's static files (whitenoise,
collected by the launcher): every file the login page names resolves, under a hashed
name, with its content type and a Cache-Control that lets browsers keep it for good."""

from __future__ import annotations

import gzip
import re
import urllib.request

HTTP_TIMEOUT_S = 10.0
FOREVER = "max-age=315360000, public, immutable"
"""whitenoise's Cache-Control for a file whose name carries its content's hash."""
CONTENT_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}
STATIC_LINK = re.compile(r'(?:href|src)="(/static/[^"]+)"')
HASHED_NAME = re.compile(r"\.[0-9a-f]{12}\.[a-z]+$")


def console_static_links(base: str) -> list[str]:
    """The static files the login page at ``base`` links to."""
    with urllib.request.urlopen(f"{base}/accounts/login/", timeout=HTTP_TIMEOUT_S) as page:
        return STATIC_LINK.findall(page.read().decode("utf-8"))


def assert_served_for_good(base: str, link: str) -> None:
    """``link`` answers 200 with its type, cached for good, gzipped for a client that
    accepts it, and carries the security headers of every answer."""
    assert HASHED_NAME.search(link), f"{link} has no content hash in its name"
    request = urllib.request.Request(base + link, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:
        body = answer.read()
        headers = answer.headers
    suffix = link[link.rindex(".") :]
    assert headers["Content-Type"].startswith(CONTENT_TYPES[suffix]), (link, dict(headers))
    assert headers["Cache-Control"] == FOREVER, (link, dict(headers))
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Encoding"] == "gzip", (link, dict(headers))
    assert gzip.decompress(body), link
