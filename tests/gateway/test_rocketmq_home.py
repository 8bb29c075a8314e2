"""``rocketmqHome``: one reason everywhere. Nothing here reads a RocketMQ home, so a start
refuses it unless empty, UPDATE_NAMESRV_CONFIG refuses it whatever the value (code 16,
upstream's fixed blacklist), and both say that reason, as the console's note does."""

from __future__ import annotations

import pytest

from namesrv_app.gateway_client import config_update_refusal
from raftstore.config import NamesrvConfig, key_notes
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.gateway.conftest import build_node

REASON = "this NameServer reads nothing from a RocketMQ home"


@pytest.mark.parametrize("value", ["/opt/rocketmq", ""])
async def test_update_namesrv_config_refuses_rocketmq_home_with_the_reason_a_start_gives(
    value: str,
) -> None:
    replicator, _, dispatcher = build_node()
    body = f"orderMessageEnable=true\nrocketmqHome={value}\n".encode()
    answer = await dispatcher.handle(
        RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
    )
    assert answer is not None and answer.code == ResponseCode.NO_PERMISSION
    assert answer.remark == (
        f"Can not update config in black list. rocketmqHome is refused: {REASON}."
    )
    assert replicator.read(lambda table: table.config) == NamesrvConfig()

    started = f"^rocketmqHome=/opt/rocketmq is refused: {REASON} \\(leave it empty\\)$"
    with pytest.raises(ValueError, match=started):
        NamesrvConfig(rocketmq_home="/opt/rocketmq").check_honoured()
    assert key_notes()["rocketmqHome"] == f"refused unless left at the default: {REASON}"
    console = config_update_refusal("rocketmqHome", value, NamesrvConfig().to_properties())
    assert console == f"rocketmqHome is refused: {REASON}"
