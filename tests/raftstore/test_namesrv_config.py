"""NamesrvConfig: 5.x defaults, Java property names, the blacklist and UPDATE_NAMESRV_CONFIG."""

from __future__ import annotations

import pytest

from raftstore.commands import UpdateNamesrvConfig
from raftstore.config import JAVA_TO_FIELD, NamesrvConfig, key_notes
from raftstore.results import ConfigOutcome
from raftstore.route_table import RouteTable


def test_defaults_follow_rocketmq_5() -> None:
    props = NamesrvConfig().to_properties()
    assert props["orderMessageEnable"] == "false"
    assert props["returnOrderTopicConfigToBroker"] == "true"
    assert props["scanNotActiveBrokerInterval"] == "5000"
    assert props["unRegisterBrokerQueueCapacity"] == "3000"
    assert props["waitSecondsForService"] == "45"
    assert props["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
    assert props["listenPort"] == "9876"
    assert props["serverChannelMaxIdleTimeSeconds"] == "120"
    assert props["productEnvName"] == "center"


def test_every_field_has_a_java_name_and_round_trips_through_properties() -> None:
    config = NamesrvConfig(support_acting_master=True, wait_seconds_for_service=3)
    assert set(config.to_properties()) == set(JAVA_TO_FIELD)
    assert NamesrvConfig().updated(config.to_properties()) == config


def test_updated_merges_known_keys_and_ignores_unknown_ones() -> None:
    config = NamesrvConfig().updated({"enableTopicList": "FALSE", "{key": "value}"})
    assert config.enable_topic_list is False
    assert config == NamesrvConfig(enable_topic_list=False)


@pytest.mark.parametrize(("key", "value"), [("enableTopicList", "yes"), ("listenPort", "x")])
def test_updated_rejects_a_value_of_the_wrong_type(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=key):
        NamesrvConfig().updated({key: value})


def test_validate_rejects_out_of_range_values() -> None:
    with pytest.raises(ValueError, match="listenPort"):
        NamesrvConfig(listen_port=70_000).validate()
    with pytest.raises(ValueError, match="unRegisterBrokerQueueCapacity"):
        NamesrvConfig(un_register_broker_queue_capacity=0).validate()
    NamesrvConfig().validate()


def test_the_blacklist_is_upstreams_four_the_start_settings_and_the_configured_keys() -> None:
    keys = NamesrvConfig(config_black_list="a; b;;").blacklisted_keys()
    assert keys == {
        "configBlackList",
        "configStorePath",
        "kvConfigPath",
        "rocketmqHome",
        "listenPort",
        "serverChannelMaxIdleTimeSeconds",
        "scanNotActiveBrokerInterval",
        "a",
        "b",
    }


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("clusterTest", "true"),
        ("productEnvName", "test"),
        ("enableControllerInNamesrv", "true"),
        ("clientRequestThreadPoolNums", "4"),
        ("defaultThreadPoolNums", "32"),
        ("unRegisterBrokerQueueCapacity", "10"),
        ("rocketmqHome", "/opt/rocketmq"),
    ],
)
def test_a_key_it_cannot_honour_is_refused_with_its_reason_unless_left_at_the_default(
    key: str, value: str
) -> None:
    with pytest.raises(ValueError, match=rf"^{key}={value} is refused: .+ \(leave it (at |empty)"):
        NamesrvConfig().updated({key: value}).check_honoured()
    NamesrvConfig().updated({key: key_notes_default(key)}).check_honoured()


def key_notes_default(key: str) -> str:
    """The key's default, as GET_NAMESRV_CONFIG prints it."""
    return NamesrvConfig().to_properties()[key]


def test_every_key_has_one_note_and_every_refused_key_says_so() -> None:
    notes = key_notes()
    assert set(notes) == set(NamesrvConfig().to_properties())
    assert all(note and "\n" not in note for note in notes.values())
    assert notes["clusterTest"].startswith("refused unless left at the default: ")
    assert notes["listenPort"].startswith("start-time setting of each node")


def test_update_config_skips_a_value_it_cannot_honour() -> None:
    table = RouteTable()
    table.apply(UpdateNamesrvConfig((("clusterTest", "true"), ("enableTopicList", "false"))))
    assert table.config == NamesrvConfig(enable_topic_list=False)


@pytest.mark.parametrize(
    "key", ["configStorePath", "kvConfigPath", "configBlackList", "rocketmqHome"]
)
def test_update_config_refuses_a_blacklisted_key_and_changes_nothing(key: str) -> None:
    """RequestProcessorTest.testProcessRequest_UpdateConfigPath, at the table level."""
    table = RouteTable()
    result = table.apply(UpdateNamesrvConfig((("enableTopicList", "false"), (key, "test/path"))))
    assert result.outcome == ConfigOutcome(rejected_key=key)
    assert result.changes.empty and table.config == NamesrvConfig()


def test_update_config_merges_and_reports_a_config_change() -> None:
    table = RouteTable()
    result = table.apply(UpdateNamesrvConfig((("supportActingMaster", "true"),)))
    assert result.outcome == ConfigOutcome()
    assert result.changes.config and result.changes.affects_routes
    assert table.config.support_acting_master and table.routes_version == 1


def test_update_config_skips_unparsable_or_invalid_values() -> None:
    table = RouteTable()
    props = (
        ("kvConfigBytesMax", "nope"),
        ("waitSecondsForService", "-1"),
        ("enableTopicList", "false"),
    )
    table.apply(UpdateNamesrvConfig(props))
    assert table.config == NamesrvConfig(enable_topic_list=False)


def test_update_config_with_the_same_values_changes_nothing() -> None:
    """RequestProcessorTest.testUpdateConfig sends ``{key=value}``: an unknown key."""
    table = RouteTable()
    assert table.apply(UpdateNamesrvConfig((("{key", "value}"),))).changes.empty
    assert table.apply(UpdateNamesrvConfig((("enableTopicList", "true"),))).changes.empty
