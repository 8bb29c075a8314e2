"""Debian's libfaketime for the nemesis' real clock skew, installed with apt-get when
missing (as root, as CI runs; like ``tests/postgres.py``)."""

from __future__ import annotations

from experiments.faults import FAKETIME_LIB, faketime_available
from tests.debian import ensure_package


def ensure_faketime() -> None:
    """Install the ``faketime`` package unless its library is already there."""
    ensure_package("faketime", faketime_available, str(FAKETIME_LIB))
