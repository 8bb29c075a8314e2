"""HTTPS on a node's web port: uvicorn's TLS options, and a key password kept off ``ps``.

With ``[tls] web = true`` the web process serves HTTPS itself, with the node's
certificate and key (:func:`tls_args`). uvicorn takes an encrypted key's password
only as ``--ssl-keyfile-password``, which every user on the host could read in the
process list (``/proc/<pid>/cmdline`` is world-readable). So when the key has a
password, the web process is started as ``python -m node.web_tls`` with the
password's *file* (:data:`PASSWORD_FILE_OPTION`): :func:`main` reads the file
(mode 0600 or it refuses, as every secret file of the node) and hands the password
to uvicorn inside the process. uvicorn's worker processes get their copy of the
config over a pipe, never on a command line.

TLS 1.2 and 1.3 only, with Python's default ciphers (forward secret, AEAD), as
uvicorn leaves ``ssl.SSLContext`` when no ``--ssl-ciphers`` is given.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from remoting.acl import read_secret_file

MODULE = "node.web_tls"
PASSWORD_FILE_OPTION = "--ssl-keyfile-password-file"
"""Ours: the file holding the key's password (uvicorn never sees this option)."""
PASSWORD_OPTION = "--ssl-keyfile-password"
"""uvicorn's: the password itself, only ever given inside this process."""
USAGE_EXIT_STATUS = 2


@dataclass(frozen=True, slots=True)
class WebTls:
    """The web port's certificate chain and key (PEM files), and the key's password
    file when the key is encrypted."""

    cert_file: Path
    key_file: Path
    key_password_file: Path | None = None


def tls_args(tls: WebTls) -> list[str]:
    """uvicorn's options for ``tls`` (the password file is not one of them)."""
    return ["--ssl-certfile", str(tls.cert_file), "--ssl-keyfile", str(tls.key_file)]


def launcher_args(tls: WebTls) -> list[str]:
    """What runs uvicorn for ``tls``: ``-m uvicorn``, or this module with the
    password file when the key is encrypted."""
    if tls.key_password_file is None:
        return ["-m", "uvicorn"]
    return ["-m", MODULE, PASSWORD_FILE_OPTION, str(tls.key_password_file)]


def uvicorn_args(argv: Sequence[str]) -> list[str]:
    """``argv`` with :data:`PASSWORD_FILE_OPTION` FILE replaced by uvicorn's password
    option and the file's contents; ValueError (naming the file) when it cannot be read."""
    args = list(argv)
    if PASSWORD_FILE_OPTION not in args:
        return args
    at = args.index(PASSWORD_FILE_OPTION)
    if at + 1 >= len(args):
        raise ValueError(f"{PASSWORD_FILE_OPTION} needs a file name")
    password = read_secret_file(args[at + 1], "web TLS key password")
    return [*args[:at], *args[at + 2 :], PASSWORD_OPTION, password]


def main(argv: Sequence[str] | None = None) -> None:
    """Run uvicorn with ``argv`` (default: this process's), the password read from its file."""
    try:
        args = uvicorn_args(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"{MODULE}: {exc}", file=sys.stderr)
        raise SystemExit(USAGE_EXIT_STATUS) from None
    # Imported here: the launchers import this module for tls_args without needing uvicorn.
    from uvicorn.main import main as uvicorn_main

    uvicorn_main.main(args=args, prog_name="uvicorn")


if __name__ == "__main__":
    main()
