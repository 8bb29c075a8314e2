"""The node config file: every problem is one line naming the key; a written file reads back."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import get_args

import pytest

from node import config_schema
from node.config import (
    Endpoint,
    NodeConfigError,
    load_node_config,
    parse_node_config,
    write_node_config,
)
from node.processes import cluster_document, gateway_argv, node_env
from raftstore import vocab

GOOD = """\
id = "n1"
mode = "raft"
data_dir = "data"

[remoting]
listen = "10.0.0.1:9876"
below_front_nice = 3

[web]
listen = "10.0.0.1:8080"

[internal]
port = 19876

[raft]
listen = "0.0.0.0:7101"
advertise = "10.0.0.1:7101"

[peers.n2]
remoting = "10.0.0.2:9876"
raft = "10.0.0.2:7101"
web = "10.0.0.2:8080"

[peers.n3]
remoting = "10.0.0.3:9876"
raft = "10.0.0.3:7101"

[secrets]
raft_file = "/etc/namesrv/raft.secret"
django_file = "/etc/namesrv/django.secret"

[acl]
file = "/etc/namesrv/plain_acl.yml"
access_key = "namesrv-admin"
secret_key_file = "/etc/namesrv/admin.secret"

[database]
url = "postgresql://namesrv@10.0.0.9:5432/namesrv"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "node.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_complete_file_gives_the_processes_their_addresses(tmp_path: Path) -> None:
    config = load_node_config(_write(tmp_path, GOOD))

    assert config.data_dir == tmp_path / "data"  # relative to the file's folder
    assert config.raft == Endpoint("10.0.0.1", 7101)  # the identity is the advertised one
    assert config.raft_bind_host == "0.0.0.0"  # written by the operator, so allowed
    assert config.raft_members() == ("10.0.0.1:7101", "10.0.0.2:7101", "10.0.0.3:7101")
    argv = gateway_argv(config)
    assert argv[argv.index("--raft-host") + 1] == "10.0.0.1"
    assert argv[argv.index("--raft-bind-host") + 1] == "0.0.0.0"
    assert argv[argv.index("--below-front-nice") + 1] == "3"
    env = node_env(config, {})
    assert env["DATABASE_URL"] == "postgresql://namesrv@10.0.0.9:5432/namesrv"
    assert env["NAMESRV_PROFILE"] == "production" and env["NAMESRV_DEBUG"] == "false"
    assert env["DJANGO_ALLOWED_HOSTS"] == "10.0.0.1"
    assert "REDIS_URL" not in env  # no Redis configured: no live updates, no Celery
    # Only this node's internal port is known: the others' are loopback on their hosts.
    members = cluster_document(config)["nodes"]
    assert [m["id"] for m in members] == ["n1", "n2", "n3"]
    assert [("internal_port" in m) for m in members] == [True, False, False]


def test_a_written_config_reads_back_the_same(tmp_path: Path) -> None:
    config = load_node_config(_write(tmp_path, GOOD))
    again = load_node_config(write_node_config(config, tmp_path / "copy" / "node.toml"))

    assert again.source != config.source
    assert again == replace(config, source=again.source)
    assert (tmp_path / "copy" / "node.toml").stat().st_mode & 0o077 == 0


BAD_EDITS = [
    ('id = "n1"', 'id = "n 1"', "id: 'n 1' is not a node id"),
    ('id = "n1"\n', "", "id: is required"),
    ('mode = "raft"', 'mode = "paxos"', "mode: must be one of eventual, raft"),
    (
        'listen = "10.0.0.1:9876"',
        'listen = "10.0.0.1"',
        "[remoting] listen: '10.0.0.1' is not host:port",
    ),
    ('listen = "10.0.0.1:9876"', 'listen = "10.0.0.1:99999"', "[remoting] listen: port 99999"),
    ('listen = "10.0.0.1:9876"', "listen = 9876", "[remoting] listen: must be a string"),
    (
        'listen = "10.0.0.1:9876"',
        'listen = "0.0.0.0:9876"',
        "[remoting] advertise: is required when listen binds every interface",
    ),
    (
        'advertise = "10.0.0.1:7101"',
        'advertise = "0.0.0.0:7101"',
        "[raft] advertise: must be an address others can reach",
    ),
    ("port = 19876", "port = 0", "[internal] port: must be a whole number from 1 to 65535"),
    (
        "below_front_nice = 3",
        "below_front_nice = 20",
        "[remoting] below_front_nice: must be a whole number from 0 to 19",
    ),
    (
        "below_front_nice = 3",
        "below_front_nice = -1",
        "[remoting] below_front_nice: must be a whole number",
    ),
    ("port = 19876", "port = 8080", "[internal] port and [web] listen: both use one port"),
    ("port = 19876", 'port = "19876"', "[internal] port: must be a whole number"),
    (
        'raft_file = "/etc/namesrv/raft.secret"\n',
        "",
        "[secrets] raft_file: is required in raft mode",
    ),
    (
        'file = "/etc/namesrv/plain_acl.yml"\n',
        "",
        "[acl] file: is required unless [acl] enabled = false",
    ),
    ('[database]\nurl = "postgresql://', '[database]\nurl = "postgresql:', "[database] url:"),
    ("[internal]", "[internl]", "[internl]: unknown section"),
    ("port = 19876", "port = 19876\nprot = 1", "[internal] prot: unknown key"),
    ('raft = "10.0.0.3:7101"\n', "", "[peers.n3] raft: is required"),
    ("[peers.n2]", '[peers."n 2"]', "[peers.n 2]: 'n 2' is not a node id"),
    ('id = "n1"', 'id = "n1"\nid = "n2"', "not valid TOML"),
    (
        "[web]\n",
        '[web]\nallowed_hosts = ["a", ""]\n',
        "[web] allowed_hosts[1]: must be a non-empty",
    ),
    ("[web]\n", "[web]\nworkers = true\n", "[web] workers: must be a whole number from 1 to 64"),
    (
        'advertise = "10.0.0.1:7101"',
        'advertise = "10.0.0.1:7101"\npropose_timeout_s = 0.001',
        "[raft] propose_timeout_s: must be a number from 0.05 to 600, not 0.001",
    ),
    ("[database]", '[tls]\nmode = "strict"\n[database]', "[tls] mode: must be one of disabled"),
    ('web = "10.0.0.2:8080"', 'web = "10.0.0.2:8080"\nwbe = 1', "[peers.n2] wbe: unknown key"),
    ("[peers.n3]\n", "[peers]\nn4 = 3\n[peers.n3]\n", "[peers.n4]: must be a table, not 3"),
]


@pytest.mark.parametrize(("old", "new", "message"), BAD_EDITS)
def test_a_bad_file_gets_one_line_naming_the_key(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))

    with pytest.raises(NodeConfigError) as caught:
        load_node_config(path)

    text = str(caught.value)
    assert message in text and text.startswith(str(path)) and "\n" not in text


def test_the_schemas_modes_are_the_nodes_modes() -> None:
    assert get_args(config_schema.Mode) == vocab.MODES


def test_a_raft_file_without_other_members_is_a_one_member_cluster(tmp_path: Path) -> None:
    """What recovery after quorum loss leaves until add-node grows it: the file reads;
    its first start on an empty Raft folder is refused where the folder is known
    (tests/node/test_force.py)."""
    text = GOOD.split("[peers.n2]")[0] + GOOD.split('raft = "10.0.0.3:7101"\n')[1]

    config = load_node_config(_write(tmp_path, text))

    assert config.peers == () and config.raft_members() == ("10.0.0.1:7101",)
    argv = gateway_argv(config)
    assert argv[argv.index("--raft-peers") + 1] == "10.0.0.1:7101"


def test_an_unreadable_or_binary_file_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(NodeConfigError, match="cannot read"):
        load_node_config(tmp_path / "missing.toml")
    binary = tmp_path / "node.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(NodeConfigError, match="not UTF-8"):
        load_node_config(binary)


def test_an_eventual_node_needs_no_raft_section(tmp_path: Path) -> None:
    config = parse_node_config(
        {
            "id": "a",
            "mode": "eventual",
            "data_dir": "/d",
            "remoting": {"listen": "127.0.0.1:1"},
            "web": {"listen": "127.0.0.1:2"},
            "internal": {"port": 3},
            "acl": {"enabled": False},
        },
        tmp_path / "x.toml",
    )
    assert config.raft is None and "--raft-port" not in gateway_argv(config)
