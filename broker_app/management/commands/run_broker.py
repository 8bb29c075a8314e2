"""``manage.py run_broker``: run one RocketMQ broker process until SIGTERM/SIGINT.

Settings come from ``--config FILE`` (JSON or broker.conf properties), then
flags, then ``--set KEY=VALUE`` overrides (any field or RocketMQ name, e.g.
``--set haSendHeartbeatInterval=200``). On SIGTERM the broker unregisters
from every NameServer before it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import CommandError, CommandParser

from broker_app.broker import BrokerController, write_ready_file
from broker_app.config import (
    BrokerConfig,
    ConfigError,
    build_config,
    read_config_file,
    split_address,
)
from broker_app.management.command import ProjectCommand
from broker_app.metadata import MetadataRepository
from broker_app.persistence import PROJECTION_DB, DjangoMetadataRepository
from remoting.listener import raise_open_files_limit

FLAG_SETTINGS = {
    "cluster": "cluster_name",
    "broker_name": "broker_name",
    "broker_id": "broker_id",
    "ha_port": "ha_port",
    "role": "role",
    "namesrv": "namesrv_addrs",
    "store_dir": "store_dir",
    "register_period_ms": "register_period_ms",
    "slave_timeout_ms": "slave_timeout_ms",
    "ready_file": "ready_file",
    "fast_heartbeat": "fast_heartbeat",
}


def settings_from_options(options: dict[str, Any]) -> dict[str, Any]:
    """Merge the config file, the flags and ``--set`` pairs, later ones winning."""
    settings: dict[str, Any] = {}
    if options.get("config"):
        settings.update(read_config_file(Path(options["config"])))
    for flag, name in FLAG_SETTINGS.items():
        if options.get(flag) is not None:
            settings[name] = options[flag]
    if options.get("address"):
        host, port = split_address(options["address"])
        settings["host"], settings["port"] = host, port
    for pair in options.get("set") or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {pair!r}")
        settings[key.strip()] = value.strip()
    return settings


class Command(ProjectCommand):
    """Run a broker: store, HA, registration with the NameServers."""

    help = "Run a RocketMQ broker (master or slave) that registers with the NameServers."
    # A broker process needs only its own app; the web stack's checks are not its concern.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        """The broker's flags."""
        parser.add_argument(
            "--config", help="a JSON or properties file (broker.conf names work); flags win over it"
        )
        parser.add_argument("--cluster", help="brokerClusterName (default: DefaultCluster)")
        parser.add_argument(
            "--broker-name", dest="broker_name", help="brokerName, the group (default: broker-a)"
        )
        parser.add_argument(
            "--broker-id",
            dest="broker_id",
            type=int,
            help="brokerId: 0 the master, 1 and up its slaves (default: 0)",
        )
        parser.add_argument(
            "--address",
            help="host:port of the remoting server; port 0 picks a free one (default: 127.0.0.1:0)",
        )
        parser.add_argument(
            "--ha-port",
            dest="ha_port",
            type=int,
            help="the master's HA port for its slaves; 0 picks a free one (default: 0)",
        )
        parser.add_argument(
            "--role",
            choices=["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"],
            help="brokerRole (default: ASYNC_MASTER)",
        )
        parser.add_argument(
            "--namesrv",
            help="NameServer addresses, ';'-separated "
            "(default: none, the broker registers nowhere)",
        )
        parser.add_argument(
            "--store-dir",
            dest="store_dir",
            help="storePathRootDir, the commit log's folder (required here or in --config)",
        )
        parser.add_argument(
            "--register-period-ms",
            dest="register_period_ms",
            type=int,
            help="how often the broker registers with every NameServer (default: 30000)",
        )
        parser.add_argument(
            "--slave-timeout-ms",
            dest="slave_timeout_ms",
            type=int,
            help="SYNC_MASTER: how long a send waits for a slave's ack (default: 3000)",
        )
        parser.add_argument(
            "--ready-file",
            dest="ready_file",
            help="write the broker's ports to this JSON file once it serves (default: none)",
        )
        parser.add_argument(
            "--fast-heartbeat",
            dest="fast_heartbeat",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="send a light heartbeat every heartbeatIntervalMs between the full "
            "registrations (default: off)",
        )
        parser.add_argument(
            "--set",
            action="append",
            metavar="KEY=VALUE",
            help="any other setting, by field or RocketMQ name, e.g. "
            "haSendHeartbeatInterval=200; repeatable, wins over the flags",
        )
        parser.add_argument(
            "--migrate",
            action="store_true",
            help="apply broker_app migrations to the database first",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Build the config, then serve until a signal arrives."""
        try:
            config = build_config(settings_from_options(options))
            config.namesrv_credentials()  # an unreadable secret fails here, not later
            config.ha_auth()
        except (ConfigError, OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s"
        )
        try:
            raise_open_files_limit()  # and size the connection cap from it
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if options["migrate"]:
            # skip_checks: a broker needs its own tables only, not the web stack checked.
            # Its tables live in the node-local database (namesrv_app.db_router).
            call_command(
                "migrate", "broker_app", database=PROJECTION_DB, verbosity=0, skip_checks=True
            )
        asyncio.run(serve(config))


async def serve(config: BrokerConfig) -> None:
    """Run the broker until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    repository = DjangoMetadataRepository(
        config.cluster_name, config.broker_name, config.broker_id, role=str(config.role)
    )
    await run_broker(config, repository, stop)


async def run_broker(
    config: BrokerConfig, repository: MetadataRepository, stop: asyncio.Event
) -> BrokerController:
    """Start a broker, write the ready file, serve until ``stop`` is set, shut down."""
    controller = BrokerController(config, repository)
    await controller.start()
    if config.ready_file is not None:
        write_ready_file(config.ready_file, controller)
    try:
        await stop.wait()
    finally:
        await controller.stop(unregister=True)
    return controller
