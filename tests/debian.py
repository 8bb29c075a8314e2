"""Debian packages the tests need, installed with apt-get on first use (CI runs as root
on a fresh machine): PostgreSQL, Prometheus, libfaketime, each checked for by its caller
first."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

APT_TIMEOUT_S = 900


def apt_install(package: str) -> None:
    """Install ``package``; a fresh image may have no package lists yet, so a failed
    install is retried once after ``apt-get update``. RuntimeError without root or
    apt-get; CalledProcessError when the retry fails too."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(f"{package} is missing and cannot be installed (needs root, apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "--no-upgrade", package]
    done = subprocess.run(install, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False)
    if done.returncode == 0:
        return
    subprocess.run(
        ["apt-get", "update"], env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False
    )
    subprocess.run(install, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=True)


def ensure_package(package: str, present: Callable[[], bool], what: str) -> None:
    """Install ``package`` unless ``present()`` already holds; RuntimeError naming
    ``what`` (the file the caller needs) when it still does not hold after the install."""
    if present():
        return
    apt_install(package)
    if not present():
        raise RuntimeError(f"apt-get installed {package} but {what} is missing")
