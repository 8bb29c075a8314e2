"""Broker configuration from broker.conf properties, JSON and flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_app.config import BrokerRole, ConfigError, build_config, read_config_file
from broker_app.management.commands.run_broker import settings_from_options


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
    settings = settings_from_options({
        "config": str(conf), "broker_name": "from-flag", "address": "127.0.0.1:10911",
        "set": ["slaveTimeout=500"],
    })
    config = build_config(settings)
    assert (config.broker_name, config.port, config.slave_timeout_ms) == ("from-flag", 10911, 500)
    assert config.effective_register_period_ms == 10_000


def test_periodic_registrations_are_forced_unless_force_register_is_off() -> None:
    # Upstream's brokerConfig.forceRegister defaults to true: every period sends the
    # whole topic table, which is what brings back a topic deleted on NameServers only.
    assert build_config({"store_dir": "/tmp/s"}).force_register is True
    assert build_config({"store_dir": "/tmp/s", "forceRegister": "false"}).force_register is False


def test_the_register_period_is_clamped_to_sixty_seconds() -> None:
    config = build_config({"store_dir": "/tmp/s", "registerNameServerPeriod": "600000"})
    assert config.effective_register_period_ms == 60_000


@pytest.mark.parametrize("settings", [
    {"store_dir": "/tmp/s", "brokerRole": "SLAVE", "brokerId": "0"},
    {"store_dir": "/tmp/s", "brokerRole": "BOSS"},
    {"store_dir": "/tmp/s", "haSendHeartbeatInterval": "30000"},
    {"store_dir": "/tmp/s", "noSuchKey": "1"},
    {"brokerName": "no-store"},
])
def test_settings_that_cannot_work_are_refused(settings: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        build_config(settings)


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
