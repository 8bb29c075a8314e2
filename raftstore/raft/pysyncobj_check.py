"""Is the installed PySyncObj the one the glue was checked against?

:mod:`raftstore.raft.glue` and :mod:`raftstore.raft.transport` override and read
PySyncObj's private methods and attributes (their docstrings list them). A private name
that an upgrade renames would not fail loudly: an override would simply stop being called
(a commit notice never held, an apply loop never sliced) or an attribute read would fail
deep inside a tick. So a node refuses, at start and with one clear message, a PySyncObj
version other than :data:`PYSYNCOBJ_CHECKED`, and the test suite checks every name below
against the installed package and a live object.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pysyncobj import SyncObj
from pysyncobj.journal import FileJournal
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.transport import TCPTransport

PYSYNCOBJ_CHECKED = "0.3.17"
"""The PySyncObj release every name below was read in."""

PRIVATE_METHODS: dict[type[Any], tuple[str, ...]] = {
    SyncObj: (
        "_SyncObj__applyLogEntries",
        "_SyncObj__doApplyCommand",
        "_SyncObj__generateRaftTimeout",
        "_SyncObj__getEntries",
        "_SyncObj__sendAppendEntries",
        "_isLeader",
        "_onTick",
        "_getEncryptor",
    ),
    TcpConnection: (
        "_TcpConnection__processRead",
        "_TcpConnection__trySendBuffer",
    ),
    TCPTransport: ("_onNewIncomingConnection", "_onTick", "_onMessageReceived"),
}
"""Methods the glue overrides or calls, by the class that defines them."""

SYNCOBJ_ATTRIBUTES = (
    "_SyncObj__raftLog",
    "_SyncObj__raftCommitIndex",
    "_SyncObj__raftLastApplied",
    "_SyncObj__raftState",
    "_SyncObj__raftLeader",
    "_SyncObj__raftElectionDeadline",
    "_SyncObj__commandsWaitingCommit",
    "_SyncObj__newAppendEntriesTime",
    "_SyncObj__lastResponseTime",
    "_SyncObj__otherNodes",
    "_SyncObj__selfNode",
    "_SyncObj__conf",
    "_SyncObj__transport",
    "_poller",
)
"""Attributes ``SyncObj.__init__`` sets on each object that the glue reads."""


class PySyncObjMismatch(RuntimeError):
    """The installed PySyncObj is not the one the glue was checked against."""


def installed_version() -> str | None:
    """The installed PySyncObj's version, or None when its metadata is missing."""
    try:
        return version("pysyncobj")
    except PackageNotFoundError:
        return None


def missing_methods() -> list[str]:
    """``Class.name`` of every private method in :data:`PRIVATE_METHODS` not found."""
    return [
        f"{cls.__name__}.{name}"
        for cls, names in PRIVATE_METHODS.items()
        for name in names
        if not callable(getattr(cls, name, None))
    ]


def missing_attributes(sync: Any) -> list[str]:
    """Every name of :data:`SYNCOBJ_ATTRIBUTES` (and the journal's file) ``sync`` lacks."""
    missing = [name for name in SYNCOBJ_ATTRIBUTES if not hasattr(sync, name)]
    journal = getattr(sync, "_SyncObj__raftLog", None)
    if isinstance(journal, FileJournal):
        handle = getattr(journal, "_FileJournal__journalFile", None)
        if handle is None or not hasattr(handle, "_ResizableFile__f"):
            missing.append("FileJournal._FileJournal__journalFile._ResizableFile__f")
    return missing


def check_pysyncobj() -> None:
    """Refuse to start on a PySyncObj other than :data:`PYSYNCOBJ_CHECKED`, or one
    whose private methods moved."""
    found = installed_version()
    if found != PYSYNCOBJ_CHECKED:
        raise PySyncObjMismatch(
            f"PySyncObj {found or 'of unknown version'} is installed, but this NameServer's "
            f"Raft glue (raftstore/raft/glue.py, transport.py) was checked against "
            f"{PYSYNCOBJ_CHECKED} only: it overrides private PySyncObj methods that another "
            f"release may rename without an error. Install pysyncobj=={PYSYNCOBJ_CHECKED} "
            f"(requirements.lock pins it)."
        )
    missing = missing_methods()
    if missing:
        raise PySyncObjMismatch(
            f"PySyncObj {found} lacks private methods the Raft glue relies on: "
            + ", ".join(missing)
        )
