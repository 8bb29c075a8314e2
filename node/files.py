"""Writing files that others read while they change: whole or not at all.

Shared by the node supervisor (secrets, member list, node.toml) and the local-cluster
launcher (pid files, cluster.json, run secrets), which sits above this package.
"""

from __future__ import annotations

import os
from pathlib import Path

SECRET_FILE_MODE = 0o600


def atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """Write ``text`` through a temporary sibling and a rename, created with ``mode``
    (a reader sees the old file or the new one, never half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.unlink(missing_ok=True)
    # O_EXCL after the unlink: the file is created here, with the mode, never reused
    # with wider permissions than asked.
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def write_secret_file(path: Path, text: str) -> None:
    """Create ``path`` with ``text``, readable by the owner only, not even for a moment
    by anyone else (the file is created with the mode, then renamed)."""
    atomic_write(path, text, SECRET_FILE_MODE)
