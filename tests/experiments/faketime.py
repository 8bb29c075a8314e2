"""Debian's libfaketime for the nemesis' real clock skew, installed with apt-get when
missing (as root, as CI runs; like ``tests/postgres.py``)."""

from __future__ import annotations

import os
import shutil
import subprocess

from experiments.faults import FAKETIME_LIB, faketime_available

APT_TIMEOUT_S = 600


def ensure_faketime() -> None:
    """Install the ``faketime`` package unless its library is already there."""
    if faketime_available():
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError("libfaketime is missing and cannot be installed (needs root, apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "--no-upgrade", "faketime"]
    done = subprocess.run(install, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        subprocess.run(
            ["apt-get", "update"], env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False
        )
        subprocess.run(install, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=True)
    if not faketime_available():
        raise RuntimeError(f"apt-get installed faketime but {FAKETIME_LIB} is missing")
