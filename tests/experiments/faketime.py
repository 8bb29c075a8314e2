"""Debian's libfaketime for the nemesis' real clock skew, installed with apt-get when
missing (as root, as CI runs; like ``tests/postgres.py``)."""

from __future__ import annotations

from experiments.faults import FAKETIME_LIB, faketime_available
from tests.debian import apt_install


def ensure_faketime() -> None:
    """Install the ``faketime`` package unless its library is already there."""
    if faketime_available():
        return
    apt_install("faketime")
    if not faketime_available():
        raise RuntimeError(f"apt-get installed faketime but {FAKETIME_LIB} is missing")
