"""``manage.py run_gateway``: run one NameServer node's gateway until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from namesrv_app.checks import check_namesrv_settings
from namesrv_app.conf import MODES, namesrv_settings
from namesrv_app.events import load_publisher
from namesrv_app.gateway import GatewayConfigError, GatewayOptions, serve


class Command(BaseCommand):
    """Start the remoting servers of a node; every option defaults to settings.NAMESRV."""

    help = "Run a NameServer node's gateway (RocketMQ remoting server + internal port)."
    # The gateway serves no URLs: only the NAMESRV checks matter here, so a broken
    # web layer (URL config, DRF settings) cannot keep the routing service down.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        """The command line; defaults come from settings.NAMESRV."""
        conf = namesrv_settings()
        parser.add_argument("--node", default=conf.NODE_ID, help="node id, e.g. n1")
        parser.add_argument("--host", default=conf.HOST)
        parser.add_argument("--port", type=int, default=conf.PORT, help="0 picks a free port")
        parser.add_argument("--internal-port", type=int, default=conf.INTERNAL_PORT)
        parser.add_argument("--mode", choices=MODES, default=conf.MODE)
        parser.add_argument("--ready-file", type=Path, default=None)
        parser.add_argument(
            "--migrate", action="store_true", help="apply database migrations first"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Build the options and run until a stop signal."""
        conf = namesrv_settings()
        errors = check_namesrv_settings()
        if errors:
            raise CommandError("\n".join(f"{e.id}: {e.msg}" for e in errors))
        if options["migrate"]:
            call_command("migrate", interactive=False, verbosity=0, skip_checks=True)
        gateway_options = GatewayOptions(
            node_id=options["node"],
            host=options["host"],
            port=options["port"],
            internal_port=options["internal_port"],
            mode=options["mode"],
            internal_secret=conf.INTERNAL_SECRET,
            idle_timeout_s=float(conf.IDLE_TIMEOUT_S),
            notify_min_broker_id_changed=conf.NOTIFY_MIN_BROKER_ID_CHANGED,
            ready_file=options["ready_file"],
        )
        try:
            asyncio.run(serve(gateway_options, publisher=load_publisher(conf.EVENT_PUBLISHER)))
        except GatewayConfigError as exc:
            raise CommandError(str(exc)) from exc
