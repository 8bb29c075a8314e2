"""``raft-namesrv backup --from HOST:WEBPORT --token-env NAME FILE``: a node's backup, saved.

It GETs ``/api/v1/backup/`` of the node's web port with an operator's API token, read
from the environment variable NAME (never from the command line, where ``ps`` shows
it), checks every part of the answer (:func:`raftstore.backup.read_backup`: a damaged
or foreign answer is refused and nothing is written) and writes FILE whole or not at
all, mode 0600 (it holds the config and the KV entries).

``--from`` is ``HOST:PORT`` or a URL (``https://...``, ``http://...``). With a bare
``HOST:PORT`` the command first tries a TLS handshake, without sending anything: a web
port that answers it is spoken to over HTTPS, checked against ``--ca-file`` (else the
system's CAs); one that does not is spoken to in plain HTTP only on a loopback address,
since the token would cross the network in clear (give ``http://`` to mean it).
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from broker_app.management.command import ProjectCommand
from raftstore.backup import FILE_BYTES_MAX, BackupError, read_backup, write_backup_file

BACKUP_PATH = "/api/v1/backup/"
CONNECT_TIMEOUT_S = 5.0
FETCH_TIMEOUT_S = 120.0
"""A backup commits a barrier and copies the whole table: seconds for a large one."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _tls_context(ca_file: Path | None) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=None if ca_file is None else str(ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise CommandError(f"--ca-file {ca_file}: {exc}") from exc


def _speaks_tls(host: str, port: int, context: ssl.SSLContext) -> bool:
    """True when ``host:port`` completes a TLS handshake (nothing else is sent)."""
    try:
        raw = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise CommandError(f"cannot reach {host}:{port}: {exc.strerror or exc}") from exc
    with raw:
        try:
            with context.wrap_socket(raw, server_hostname=host):
                return True
        except ssl.SSLCertVerificationError as exc:
            raise CommandError(
                f"{host}:{port} speaks TLS with a certificate this command does not trust "
                f"({exc.verify_message}); give its CA with --ca-file"
            ) from exc
        except (ssl.SSLError, ConnectionError):
            return False  # a plain HTTP server answers a ClientHello with an error


def base_url(given: str, context: ssl.SSLContext) -> str:
    """The web port's URL (scheme, host and port) for ``--from``."""
    if "://" in given:
        parts = urllib.parse.urlsplit(given)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CommandError(f"--from {given!r}: give HOST:PORT, http://... or https://...")
        return f"{parts.scheme}://{parts.netloc}"
    host, sep, port_text = given.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise CommandError(f"--from {given!r} is not HOST:PORT")
    netloc = f"[{host}]:{port_text}" if ":" in host else f"{host}:{port_text}"
    if _speaks_tls(host, int(port_text), context):
        return f"https://{netloc}"
    if not _is_loopback(host):
        raise CommandError(
            f"{given} does not speak TLS, and the token would cross the network in clear; "
            f"give http://{netloc} if that is what you mean"
        )
    return f"http://{netloc}"


def fetch(url: str, token: str, context: ssl.SSLContext) -> bytes:
    """GET ``url`` with the token; the body, or CommandError with the node's reason."""
    request = urllib.request.Request(
        url,
        headers={"Authorization": f"Token {token}", "Accept": "application/octet-stream"},
    )
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S, context=context) as answer:
            data: bytes = answer.read(FILE_BYTES_MAX + 1)
    except urllib.error.HTTPError as exc:
        raise CommandError(f"{url} answered {exc.code}: {_detail(exc.read())}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CommandError(f"cannot GET {url}: {reason}") from exc
    return data


def _detail(body: bytes) -> str:
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace").strip()
    if isinstance(parsed, dict) and "detail" in parsed:
        return str(parsed["detail"])
    return str(parsed)[:200]


class Command(ProjectCommand):
    """Save a node's backup through its web API."""

    help = (
        "Save a consistent backup of a NameServer cluster (routes, brokers, KV, config) "
        "from a node's web API, with an operator's API token read from the environment."
    )
    # A client of a web port: the node's own processes run the settings checks.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        """Where from, the token's variable, the CA and the file."""
        parser.add_argument(
            "--from",
            dest="source",
            required=True,
            metavar="HOST:WEBPORT",
            help="a node's web port: HOST:PORT (HTTPS when it speaks TLS), or a URL",
        )
        parser.add_argument(
            "--token-env",
            required=True,
            metavar="NAME",
            help="the environment variable holding an operator's API token "
            "(create_operator NAME --token)",
        )
        parser.add_argument(
            "--ca-file",
            type=Path,
            default=None,
            metavar="FILE",
            help="the CA the node's HTTPS certificate is checked against (default: the "
            "system's CAs)",
        )
        parser.add_argument("--json", action="store_true", help="print the backup's header as JSON")
        parser.add_argument("file", type=Path, metavar="FILE", help="where to write the backup")

    def handle(self, *args: Any, **options: Any) -> None:
        """Fetch, check, write; one line (or JSON) saying what was saved."""
        token = os.environ.get(options["token_env"], "").strip()
        if not token:
            raise CommandError(
                f"--token-env {options['token_env']}: that environment variable is not set "
                "or empty; put an operator's API token in it"
            )
        path: Path = options["file"]
        if not path.parent.is_dir():
            raise CommandError(f"{path}: the folder {path.parent} does not exist")
        context = _tls_context(options["ca_file"])
        url = base_url(options["source"], context) + BACKUP_PATH
        data = fetch(url, token, context)
        try:
            header = read_backup(data).header
            write_backup_file(path, data)
        except BackupError as exc:
            raise CommandError(f"{url}: {exc}; nothing was written") from exc
        if options["json"]:
            self.stdout.write(
                json.dumps({"file": str(path), "bytes": len(data), **header.summary()})
            )
            return
        self.stdout.write(
            f"backup of {header.cluster} ({header.mode}: {header.source}) from {header.node} "
            f"at index {header.index}, term {header.term}, taken {header.summary()['taken_at']}: "
            f"{len(data)} bytes written to {path} (mode 0600)"
        )
