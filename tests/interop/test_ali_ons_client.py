"""ali-ons 3.12.0 (pure JavaScript, version 121) against a running node.

A small driver (``ali_ons_driver.js``) uses ali-ons' own MQClientAPI,
RemotingCommand and channel; it prints what came back and the tests check it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.interop.conftest import RunningNamesrv
from tools.interop_setup import InteropClients

pytestmark = [pytest.mark.interop, pytest.mark.slow]

DRIVER = Path(__file__).with_name("ali_ons_driver.js")
DRIVER_TIMEOUT_S = 60
KV_NAMESPACE = "ALI_ONS_INTEROP"


@pytest.fixture(scope="module")
def seen(interop_clients: InteropClients, namesrv: RunningNamesrv) -> dict[str, Any]:
    """Everything the ali-ons driver saw, in one run."""
    done = subprocess.run(
        [
            interop_clients.node_executable,
            str(DRIVER),
            namesrv.addr,
            namesrv.topic,
            KV_NAMESPACE,
            namesrv.admin.access_key,
            namesrv.admin.secret_key,
        ],
        env={**os.environ, "NODE_PATH": str(interop_clients.node_modules)},
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"ali-ons driver failed:\n{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_its_route_api_sees_the_registered_queues_and_both_brokers(
    seen: dict[str, Any], namesrv: RunningNamesrv
) -> None:
    route = seen["route"]
    assert route["queueDatas"] == [
        {
            "brokerName": "broker-a",
            "perm": 6,
            "readQueueNums": 4,
            "topicSysFlag": 0,
            "writeQueueNums": 4,
        }
    ]
    [broker] = route["brokerDatas"]
    assert broker["brokerName"] == "broker-a"
    assert broker["cluster"] == "DefaultCluster"
    assert broker["brokerAddrs"] == {"0": namesrv.master_addr, "1": namesrv.slave_addr}
    assert route["filterServerTable"] == {}


def test_a_version_121_request_gets_fastjson_keys_that_only_its_lenient_parser_reads(
    seen: dict[str, Any], namesrv: RunningNamesrv
) -> None:
    raw = seen["routeRaw"]
    assert raw["code"] == 0
    assert f'{{0:"{namesrv.master_addr}",1:"{namesrv.slave_addr}"}}' in raw["body"]["text"]
    assert raw["body"]["standard"] is None  # JSON.parse rejects the unquoted keys ...
    assert raw["body"]["standardError"]
    assert raw["body"]["lenient"]["brokerDatas"][0]["brokerAddrs"]["0"] == namesrv.master_addr


def test_accept_standard_json_only_gets_quoted_keys(
    seen: dict[str, Any], namesrv: RunningNamesrv
) -> None:
    standard = seen["routeStandard"]
    assert standard["code"] == 0
    assert standard["body"]["standardError"] is None
    addrs = standard["body"]["standard"]["brokerDatas"][0]["brokerAddrs"]
    assert addrs == {"0": namesrv.master_addr, "1": namesrv.slave_addr}


def test_an_unknown_topic_answers_topic_not_exist(seen: dict[str, Any]) -> None:
    missing = seen["routeMissing"]
    assert missing["code"] == 17
    assert missing["remark"].startswith("No topic route info in name server for the topic: ")
    assert missing["body"]["text"] is None


def test_cluster_info_lists_the_broker_group(seen: dict[str, Any], namesrv: RunningNamesrv) -> None:
    info = seen["clusterInfo"]
    assert info["code"] == 0
    table = info["body"]["lenient"]
    assert table["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    assert table["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {
        "0": namesrv.master_addr,
        "1": namesrv.slave_addr,
    }


def test_kv_config_can_be_put_read_and_deleted_when_ali_ons_signs(seen: dict[str, Any]) -> None:
    """ali-ons signs with its own code (it adds OnsChannel=ALIYUN to the signed fields)."""
    assert seen["kvPut"]["code"] == 0
    assert seen["kvGet"]["code"] == 0
    assert seen["kvGet"]["extFields"]["value"] == "ali-ons-value"
    assert seen["kvDelete"]["code"] == 0
    gone = seen["kvGetAfterDelete"]
    assert gone["code"] == 22
    assert gone["remark"] == f"No config item, Namespace: {KV_NAMESPACE} Key: ali-ons-key"


def test_an_unsigned_kv_put_is_refused_with_no_permission(seen: dict[str, Any]) -> None:
    refused = seen["kvPutUnsigned"]
    assert refused["code"] == 16
    assert "needs an ACL signature (no AccessKey)" in refused["remark"]


def test_the_topic_list_holds_the_registered_topic(
    seen: dict[str, Any], namesrv: RunningNamesrv
) -> None:
    topics = seen["topicList"]
    assert topics["code"] == 0
    assert namesrv.topic in topics["body"]["lenient"]["topicList"]
