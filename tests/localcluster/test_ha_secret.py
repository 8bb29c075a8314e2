"""The local cluster's HA secret: made once per run folder, given to every demo broker,
and enough for a demo master and slave (started as ``cluster up --demo`` starts them)
to replicate."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_app.config import build_config
from localcluster import broker_control
from localcluster.broker_control import BrokerSpec
from localcluster.launcher import ClusterPlan, plan_ports
from localcluster.lifecycle import demo_broker_specs
from localcluster.plan import DEMO_BROKER_SETTINGS, free_port
from localcluster.run_secrets import HA_SECRET_FILE, create_run_secrets, read_run_secrets
from tests.broker_app.support import BROKER_WAIT_S, FakeNameServer, send
from tests.waiting import wait_until


def _plan(run_dir: Path) -> ClusterPlan:
    return plan_ports(
        run_dir, nodes=1, base_port=0, web_base_port=0, internal_base_port=0, redis_port=0
    )


@pytest.mark.parametrize("acl", [True, False], ids=["acl", "no-acl"])
def test_every_run_folder_gets_a_private_ha_secret_that_survives_a_restart(
    tmp_path: Path, acl: bool
) -> None:
    secrets = create_run_secrets(tmp_path, acl=acl)
    path = tmp_path / HA_SECRET_FILE
    assert secrets.ha_secret_file == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = path.read_bytes()
    assert len(first.strip()) >= 32
    create_run_secrets(tmp_path, acl=acl)  # the next `cluster up` of the same folder
    assert path.read_bytes() == first
    other = create_run_secrets(tmp_path / "other", acl=acl)
    assert other.ha_secret_file.read_bytes() != first

    settings = read_run_secrets(tmp_path, acl=acl).broker_settings()
    assert settings["haSecretFile"] == str(path)
    config = build_config({"store_dir": str(tmp_path / "store"), **settings})
    auth = config.ha_auth()
    assert auth.key is not None and not auth.refuses


def test_every_demo_broker_is_given_the_runs_ha_secret(tmp_path: Path) -> None:
    create_run_secrets(tmp_path)
    specs = demo_broker_specs(_plan(tmp_path), 0)
    assert len(specs) == 4 and {s.broker_id for s in specs} == {0, 1}
    assert {s.settings["haSecretFile"] for s in specs} == {str(tmp_path / HA_SECRET_FILE)}


@pytest.fixture
def namesrv() -> Iterator[FakeNameServer]:
    server = FakeNameServer().start()
    yield server
    server.stop()


@pytest.mark.integration
@pytest.mark.slow
def test_a_demo_master_and_slave_replicate_with_the_runs_settings(
    tmp_path: Path, namesrv: FakeNameServer
) -> None:
    secrets = create_run_secrets(tmp_path)
    settings = {**DEMO_BROKER_SETTINGS, **secrets.broker_settings()}
    specs = [
        BrokerSpec(
            "broker-a",
            broker_id,
            free_port(),
            free_port(),
            (namesrv.addr,),
            settings=dict(settings),
        )
        for broker_id in (0, 1)
    ]
    try:
        for spec in specs:
            broker_control.start_broker(tmp_path, spec)
        master, slave = (spec.addr for spec in specs)
        wait_until(
            lambda: broker_control.runtime_info(slave).get("haConnected") == "true",
            what="the demo slave's HA link",
            timeout_s=BROKER_WAIT_S,
        )
        assert send(master, "TopicA", b"replicated").code == 0
        wait_until(
            lambda: (
                broker_control.runtime_info(slave)["commitLogMaxOffset"]
                == broker_control.runtime_info(master)["commitLogMaxOffset"]
                != "0"
            ),
            what="the slave holding the master's log",
            timeout_s=BROKER_WAIT_S,
        )
        assert broker_control.runtime_info(master)["haRefusedConnections"] == "0"
    finally:
        for spec in specs:
            broker_control.stop_broker(tmp_path, spec.label, kill=True)
