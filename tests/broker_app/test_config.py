"""Broker configuration from broker.conf properties, JSON and flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from broker_app.config import BrokerRole, ConfigError, build_config, read_config_file
from broker_app.management.commands.run_broker import settings_from_options
from broker_app.store.message_store import FlushDiskType


def test_a_rocketmq_broker_conf_is_understood(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName=ClusterX\nbrokerName=broker-b\nbrokerId=1\nbrokerRole=SLAVE\n"
        "namesrvAddr=127.0.0.1:9876;127.0.0.1:9877\nhaSendHeartbeatInterval=1000\n"
        f"storePathRootDir={tmp_path / 'store'}\n"
    )
    config = build_config(read_config_file(conf))
    assert config.role is BrokerRole.SLAVE and config.cluster_name == "ClusterX"
    assert config.namesrv_addrs == ("127.0.0.1:9876", "127.0.0.1:9877")
    assert config.ha.heartbeat_interval_ms == 1000


def test_flags_override_a_json_file(tmp_path: Path) -> None:
    conf = tmp_path / "broker.json"
    conf.write_text('{"brokerName": "from-file", "store_dir": "/tmp/s", "register_period_ms": 5}')
    settings = settings_from_options(
        {
            "config": str(conf),
            "broker_name": "from-flag",
            "address": "127.0.0.1:10911",
            "set": ["slaveTimeout=500"],
        }
    )
    config = build_config(settings)
    assert (config.broker_name, config.port, config.slave_timeout_ms) == ("from-flag", 10911, 500)
    assert config.effective_register_period_ms == 10_000


def test_periodic_registrations_are_forced_unless_force_register_is_off() -> None:
    # Upstream's brokerConfig.forceRegister defaults to true: every period sends the
    # whole topic table, which is what brings back a topic deleted on NameServers only.
    assert build_config({"store_dir": "/tmp/s"}).force_register is True
    assert build_config({"store_dir": "/tmp/s", "forceRegister": "false"}).force_register is False


def test_split_registration_is_off_by_default_with_upstreams_size() -> None:
    default = build_config({"store_dir": "/tmp/s"})
    assert (default.split_registration, default.split_registration_size) == (False, 800)
    split = build_config(
        {"store_dir": "/tmp/s", "enableSplitRegistration": "true", "splitRegistrationSize": "50"}
    )
    assert (split.split_registration, split.split_registration_size) == (True, 50)


def test_the_register_period_is_clamped_to_sixty_seconds() -> None:
    config = build_config({"store_dir": "/tmp/s", "registerNameServerPeriod": "600000"})
    assert config.effective_register_period_ms == 60_000


@pytest.mark.parametrize(
    "settings",
    [
        {"store_dir": "/tmp/s", "brokerRole": "SLAVE", "brokerId": "0"},
        {"store_dir": "/tmp/s", "brokerRole": "BOSS"},
        {"store_dir": "/tmp/s", "splitRegistrationSize": "0"},
        {"store_dir": "/tmp/s", "haSendHeartbeatInterval": "30000"},
        {"store_dir": "/tmp/s", "noSuchKey": "1"},
        {"brokerName": "no-store"},
    ],
)
def test_settings_that_cannot_work_are_refused(settings: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        build_config(settings)


def _config_file(folder: Path, form: str, settings: dict[str, object]) -> Path:
    """``settings`` (with a store folder) written as a broker.conf or as a JSON file."""
    settings = {"storePathRootDir": str(folder / "store"), **settings}
    if form == "json":
        path = folder / "broker.json"
        path.write_text(json.dumps(settings))
    else:
        path = folder / "broker.conf"
        path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


@pytest.mark.parametrize("form", ["properties", "json"])
@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ({"brokerId": "one"}, "brokerId must be a whole number, got 'one'"),
        (
            {"haSendHeartbeatInterval": "5s"},
            "haSendHeartbeatInterval must be a whole number, got '5s'",
        ),
        (
            {"ha.transfer_batch_bytes": "big"},
            "ha.transfer_batch_bytes must be a whole number, got 'big'",
        ),
        ({"brokerId": "5.0"}, "brokerId must be a whole number, got '5.0'"),
        (
            {"registerNameServerPeriod": "1e3"},
            "registerNameServerPeriod must be a whole number, got '1e3'",
        ),
        ({"forceRegister": "1"}, "forceRegister must be true or false, got '1'"),
        ({"aclEnable": "0"}, "aclEnable must be true or false, got '0'"),
        ({"slaveReadEnable": "yes"}, "slaveReadEnable must be true or false, got 'yes'"),
        ({"noSuchKey": "1"}, "unknown setting 'noSuchKey'"),
        ({"ha.noSuchKey": "1"}, "unknown setting 'ha.noSuchKey'"),
        (
            {"brokerRole": "BOSS"},
            "brokerRole must be one of ASYNC_MASTER, SYNC_MASTER, SLAVE, got 'BOSS'",
        ),
        (
            {"failoverMasterRole": "leader"},
            "failoverMasterRole must be one of ASYNC_MASTER, SYNC_MASTER, SLAVE, got 'leader'",
        ),
        (
            {"flushDiskType": "SOMETIMES"},
            "flushDiskType must be one of SYNC_FLUSH, ASYNC_FLUSH, got 'SOMETIMES'",
        ),
    ],
)
def test_a_value_that_does_not_fit_is_refused_naming_the_key_as_written(
    tmp_path: Path, form: str, setting: dict[str, str], says: str
) -> None:
    settings = read_config_file(_config_file(tmp_path, form, setting))
    with pytest.raises(ConfigError) as caught:
        build_config(settings)
    assert str(caught.value) == says


def test_a_broker_conf_value_is_read_in_any_case_and_without_its_blanks(tmp_path: Path) -> None:
    conf = _config_file(
        tmp_path,
        "properties",
        {
            "brokerId": "1 ",
            "brokerRole": "slave",
            "flushDiskType": "sync_flush",
            "forceRegister": "FALSE ",
            "aclEnable": "True",
            "namesrvAddr": "127.0.0.1:9876; ;127.0.0.1:9877 ",
            "haSecretFile": "",
            "haMasterAddress": "",
        },
    )
    config = build_config(read_config_file(conf))
    assert (config.broker_id, config.role, config.flush_disk_type) == (
        1,
        BrokerRole.SLAVE,
        FlushDiskType.SYNC_FLUSH,
    )
    assert (config.force_register, config.acl_enabled) == (False, True)
    assert config.namesrv_addrs == ("127.0.0.1:9876", "127.0.0.1:9877")
    assert (config.ha_secret_file, config.ha_master_address) == (None, None)
    assert config.store_dir == tmp_path / "store"


def test_a_json_value_is_held_to_the_rule_of_its_text(tmp_path: Path) -> None:
    conf = _config_file(
        tmp_path,
        "json",
        {
            "brokerId": 1,
            "brokerRole": "SLAVE",
            "forceRegister": False,
            "namesrvAddr": ["127.0.0.1:9876", " 127.0.0.1:9877 "],
            "ha.heartbeat_interval_ms": 200,
        },
    )
    config = build_config(read_config_file(conf))
    assert (config.broker_id, config.force_register, config.ha.heartbeat_interval_ms) == (
        1,
        False,
        200,
    )
    assert config.namesrv_addrs == ("127.0.0.1:9876", "127.0.0.1:9877")
    refused = {
        "forceRegister must be true or false, got '1'": {"forceRegister": 1},
        "brokerId must be a whole number, got True": {"brokerId": True},
        "brokerId must be a whole number, got 1.5": {"brokerId": 1.5},
        "brokerName must be a string, got ['a']": {"brokerName": ["a"]},
    }
    for says, settings in refused.items():
        with pytest.raises(ConfigError) as caught:
            build_config({"store_dir": str(tmp_path), **settings})
        assert str(caught.value) == says
    with pytest.raises(ConfigError) as caught:
        build_config({"brokerName": "no-store"})
    assert str(caught.value) == "storePathRootDir (store_dir) must be set"


def test_an_access_key_without_a_readable_private_secret_file_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared.secret"
    shared.write_text("broker-secret-key")
    shared.chmod(0o644)
    base = {"store_dir": str(tmp_path), "namesrvAccessKey": "brokers"}

    with pytest.raises(ConfigError, match="no secret key file"):
        build_config(base).namesrv_credentials()
    with pytest.raises(ConfigError, match="readable by others"):
        build_config({**base, "namesrvSecretKeyFile": str(shared)}).namesrv_credentials()
    assert build_config({"store_dir": str(tmp_path)}).namesrv_credentials() is None


def _secret_file(folder: Path, content: bytes, mode: int = 0o600) -> Path:
    path = folder / "ha.secret"
    path.write_bytes(content)
    path.chmod(mode)
    return path


def test_ha_secret_file_and_ha_auth_enable_are_read_from_a_broker_conf(tmp_path: Path) -> None:
    secret = _secret_file(tmp_path, b"0123456789abcdef0123456789abcdef\n")
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path}\nhaSecretFile={secret}\nhaAuthEnable=true\n")
    config = build_config(read_config_file(conf))
    assert config.ha_secret_file == secret and config.ha_auth_enabled
    auth = config.ha_auth()
    assert auth.enabled and auth.key is not None and not auth.refuses
    assert "0123456789" not in repr(auth)


def test_without_a_secret_file_ha_refuses_and_auth_off_is_the_classic_stream(
    tmp_path: Path,
) -> None:
    default = build_config({"store_dir": str(tmp_path)}).ha_auth()
    assert default.refuses and default.key is None
    blank = build_config({"store_dir": str(tmp_path), "haSecretFile": ""})
    assert blank.ha_secret_file is None and blank.ha_auth().refuses
    classic = build_config({"store_dir": str(tmp_path), "haAuthEnable": "false"}).ha_auth()
    assert not classic.enabled and not classic.refuses and classic.key is None
    secret = _secret_file(tmp_path, b"0123456789abcdef0123456789abcdef")
    with pytest.raises(ConfigError, match="haAuthEnable=false and haSecretFile are both set"):
        build_config(
            {"store_dir": str(tmp_path), "haAuthEnable": "false", "haSecretFile": str(secret)}
        )
    with pytest.raises(ConfigError, match="haAuthEnable must be true or false"):
        build_config({"store_dir": str(tmp_path), "haAuthEnable": "maybe"})


@pytest.mark.parametrize(
    ("content", "mode", "reason"),
    [
        (None, 0o600, "haSecretFile: cannot read .*missing"),
        (b"", 0o600, "haSecretFile: .* is empty"),
        (b"\n", 0o600, "haSecretFile: .* is empty"),
        (b"short\n", 0o600, "haSecretFile: .*5 bytes; use at least 16"),
        (b"0123456789abcdef0123456789abcdef", 0o644, "haSecretFile: .* readable by others"),
    ],
    ids=["missing", "empty", "only a newline", "too short", "readable by others"],
)
def test_an_unusable_ha_secret_file_is_a_config_error_naming_the_setting(
    tmp_path: Path, content: bytes | None, mode: int, reason: str
) -> None:
    path = tmp_path / "missing" if content is None else _secret_file(tmp_path, content, mode)
    config = build_config({"store_dir": str(tmp_path), "haSecretFile": str(path)})
    with pytest.raises(ConfigError, match=reason):
        config.ha_auth()


def test_run_broker_stops_before_serving_with_an_unusable_ha_secret_file(tmp_path: Path) -> None:
    empty = _secret_file(tmp_path, b"")
    with pytest.raises(CommandError, match=r"haSecretFile: .* is empty"):
        call_command(
            "run_broker", "--store-dir", str(tmp_path / "store"), "--set", f"haSecretFile={empty}"
        )
    assert not (tmp_path / "store").exists()  # it failed before opening the store


def test_the_ha_handshake_timeout_is_a_setting_and_must_be_positive() -> None:
    config = build_config({"store_dir": "/tmp/s", "handshake_timeout_ms": "2500"})
    assert config.ha.handshake_timeout_ms == 2500
    with pytest.raises(ConfigError, match="handshake timeouts must be positive"):
        build_config({"store_dir": "/tmp/s", "handshake_timeout_ms": "0"})
