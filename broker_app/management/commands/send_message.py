"""``manage.py send_message``: send N messages to a broker, print one JSON line each."""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import CommandError, CommandParser

from broker_app.management.command import ProjectCommand
from broker_app.messages import build_send_request
from remoting.blocking import BlockingClient
from remoting.client import RemotingClientError

SEND_TIMEOUT_S = 10.0


class Command(ProjectCommand):
    """Send messages to one broker over the remoting protocol."""

    help = "Send --count messages to --broker and print each SendResult as JSON."
    # A broker process needs only its own app; the web stack's checks are not its concern.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's flags."""
        parser.add_argument("--broker", required=True, help="the broker's host:port")
        parser.add_argument("--topic", required=True, help="the topic to send to")
        parser.add_argument("--count", type=int, default=1, help="how many messages to send")
        parser.add_argument("--body", default="hello", help="each message's body (UTF-8)")
        parser.add_argument(
            "--queue-id", dest="queue_id", type=int, default=0, help="the queue to send to"
        )
        parser.add_argument(
            "--tags", default=None, help="the messages' tag, e.g. TagA (default: no tag)"
        )
        parser.add_argument(
            "--producer-group",
            dest="producer_group",
            default="CLI_PRODUCER",
            help="the producer group named in each request",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Send and print."""
        with BlockingClient(options["broker"], timeout_s=SEND_TIMEOUT_S) as client:
            for index in range(options["count"]):
                request = build_send_request(
                    options["topic"],
                    options["body"].encode("utf-8"),
                    queue_id=options["queue_id"],
                    producer_group=options["producer_group"],
                    tags=options["tags"],
                    born_timestamp_ms=time.time_ns() // 1_000_000,
                )
                try:
                    response = client.invoke(request)
                except RemotingClientError as exc:
                    raise CommandError(f"message {index}: {exc}") from exc
                ext = response.ext_fields or {}
                self.stdout.write(
                    json.dumps(
                        {
                            "code": response.code,
                            "remark": response.remark,
                            "msgId": ext.get("msgId"),
                            "queueId": ext.get("queueId"),
                            "queueOffset": ext.get("queueOffset"),
                        }
                    )
                )
