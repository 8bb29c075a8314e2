"""Eventual mode's kvConfig.json: upstream's format, a .bak of the previous file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.kv_file import KvConfigFile
from remoting.errors import BodyDecodeError


def test_a_missing_file_is_an_empty_table(tmp_path: Path) -> None:
    assert KvConfigFile(tmp_path / "kvConfig.json").load() == {}


def test_it_saves_upstreams_format_and_loads_it_back(tmp_path: Path) -> None:
    kv_file = KvConfigFile(tmp_path / "kvConfig.json")
    kv_file.save({"ORDER_TOPIC_CONFIG": {"TopicTest": "broker-a:8"}})

    assert json.loads(kv_file.path.read_text()) == {
        "configTable": {"ORDER_TOPIC_CONFIG": {"TopicTest": "broker-a:8"}}
    }
    assert kv_file.load() == {"ORDER_TOPIC_CONFIG": {"TopicTest": "broker-a:8"}}


def test_the_previous_file_is_kept_as_bak(tmp_path: Path) -> None:
    kv_file = KvConfigFile(tmp_path / "kvConfig.json")
    kv_file.save({"ns": {"k": "old"}})
    kv_file.save({"ns": {"k": "new"}})

    backup = KvConfigFile(tmp_path / "kvConfig.json.bak")
    assert backup.load() == {"ns": {"k": "old"}}
    assert kv_file.load() == {"ns": {"k": "new"}}
    assert not (tmp_path / "kvConfig.json.tmp").exists()


def test_a_malformed_file_refuses_to_load(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    path.write_text("{not json")
    with pytest.raises(BodyDecodeError):
        KvConfigFile(path).load()
