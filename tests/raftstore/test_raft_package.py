"""The raft package keeps the names persisted data and callers depend on."""

from __future__ import annotations

import pickle
import pickletools

from raftstore.raft import DialNode
from raftstore.raft.glue import DIAL

# What a membership entry written before raftstore.raft became a package holds:
# protocol 4 pickle of DialNode("127.0.0.1:7101") as PySyncObj wrote it then.
OLD_ENTRY_GLOBAL = "raftstore.raft DialNode"


def _globals(data: bytes) -> list[str]:
    """Every class reference (module and name) in a pickle stream."""
    found, strings = [], []
    for opcode, arg, _ in pickletools.genops(data):
        if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(str(arg))
        elif opcode.name == "STACK_GLOBAL":
            found.append(f"{strings[-2]} {strings[-1]}")
        elif opcode.name == "GLOBAL":
            found.append(str(arg))
    return found


def test_new_membership_entries_name_the_node_class_by_its_old_path() -> None:
    data = pickle.dumps(DialNode("127.0.0.1:7101"), protocol=4)
    assert OLD_ENTRY_GLOBAL in _globals(data)


def test_an_entry_naming_the_old_path_loads_as_a_dialling_node() -> None:
    data = pickle.dumps(DialNode("127.0.0.1:7101"), protocol=4)
    DIAL["127.0.0.1:7101"] = "127.0.0.1:17101"
    try:
        node = pickle.loads(data)
        assert isinstance(node, DialNode)
        assert node.port == 17101
    finally:
        DIAL.pop("127.0.0.1:7101")
