"""How gateway answers become HTTP statuses: no quorum is 503, other refusals 502."""

from __future__ import annotations

import pytest

from gateway.dispatch import replication_remark
from namesrv_app.gateway_client import GatewayRefused, NoQuorum, expect_success
from raftstore.replicator import NoQuorumError, ReplicationError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, make_response

REQUEST = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k"})


def test_a_write_without_raft_quorum_is_a_503() -> None:
    remark = replication_remark(NoQuorumError("no quorum: PutKV was not applied within 3.0 s"))
    answer = make_response(REQUEST, ResponseCode.SYSTEM_ERROR, remark=remark)

    with pytest.raises(NoQuorum) as caught:
        expect_success(answer)
    assert caught.value.http_status == 503


def test_any_other_replication_failure_is_a_503_too() -> None:
    remark = replication_remark(ReplicationError("leader lost"))
    with pytest.raises(NoQuorum):
        expect_success(make_response(REQUEST, ResponseCode.SYSTEM_ERROR, remark=remark))


def test_other_refusals_are_a_502_with_the_wire_code() -> None:
    answer = make_response(REQUEST, ResponseCode.NO_PERMISSION, remark="Can not update config")
    with pytest.raises(GatewayRefused) as caught:
        expect_success(answer)
    assert (caught.value.http_status, caught.value.code) == (502, ResponseCode.NO_PERMISSION)


def test_success_passes_through() -> None:
    answer = make_response(REQUEST, ResponseCode.SUCCESS)
    assert expect_success(answer) is answer
