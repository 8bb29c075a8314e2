"""``manage.py consume``: consume a topic as a member of a consumer group, one JSON line each.

The client is :class:`broker_app.consumer.PushConsumer`: it reads the routes from the
NameServers, heartbeats every broker of them, takes its share of the queues
(AllocateMessageQueueAveragely over the group's clients), long-polls each queue and
commits its offsets, so several ``consume`` processes of one group split a topic and
a restarted one goes on where the group left off.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from django.core.management.base import CommandError, CommandParser

from broker_app.consumer import PushConsumer, default_client_id
from broker_app.management.command import ProjectCommand
from broker_app.store.record import TAGS_PROPERTY, parse_properties
from remoting.message_codec import MessageExt


class Command(ProjectCommand):
    """Consume messages of one topic and print each as JSON."""

    help = (
        "Consume --topic as a member of --group through the NameServers at --namesrv; print "
        "each message as one JSON line. Stops after --count messages or --idle seconds "
        "without one."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's flags."""
        parser.add_argument(
            "--namesrv", default="127.0.0.1:9876", help="NameServer addresses, ';'-separated"
        )
        parser.add_argument("--topic", required=True, help="the topic to consume")
        parser.add_argument("--group", default="CLI_CONSUMER", help="consumer group")
        parser.add_argument("--tags", default="*", help="'*' or 'TagA || TagB'")
        parser.add_argument("--count", type=int, default=0, help="stop after N messages (0: no)")
        parser.add_argument(
            "--idle",
            type=float,
            default=10.0,
            help="stop after this many seconds without a message (0: never)",
        )
        parser.add_argument(
            "--client-id",
            dest="client_id",
            default=None,
            help="this consumer's client id in its group "
            "(default: this host's IP@pid, as RocketMQ builds it)",
        )
        parser.add_argument(
            "--fail",
            action="append",
            default=[],
            metavar="BODY",
            help="answer 'reconsume later' for this body (it comes back from "
            "the retry topic); repeatable",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Consume until the count or the idle time is reached."""
        if options["count"] < 0 or options["idle"] < 0:
            raise CommandError("--count and --idle must not be negative")
        namesrv = [addr.strip() for addr in options["namesrv"].split(";") if addr.strip()]
        if not namesrv:
            raise CommandError("--namesrv names no address")
        logging.getLogger("broker_app").setLevel(logging.WARNING)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(self._consume(namesrv, options))

    async def _consume(self, namesrv: list[str], options: dict[str, Any]) -> None:
        received = 0
        arrived = asyncio.Event()
        done = asyncio.Event()
        fail = set(options["fail"])
        failed: set[str] = set()

        async def handler(message: MessageExt) -> bool:
            nonlocal received
            body = message.body.decode("utf-8", errors="replace")
            self.stdout.write(
                json.dumps(
                    {
                        "topic": message.topic,
                        "queueId": message.queue_id,
                        "queueOffset": message.queue_offset,
                        "msgId": message.msg_id,
                        "broker": message.store_host,
                        "tags": parse_properties(message.properties).get(TAGS_PROPERTY),
                        "reconsumeTimes": message.reconsume_times,
                        "body": body,
                    }
                )
            )
            if body in fail and body not in failed:
                failed.add(body)
                return False
            received += 1
            arrived.set()
            if options["count"] and received >= options["count"]:
                done.set()
            return True

        consumer = PushConsumer(
            namesrv,
            options["group"],
            options["topic"],
            handler,
            expression=options["tags"],
            client_id=options["client_id"] or default_client_id(),
        )
        await consumer.start()
        if not consumer.routes.get(options["topic"]):
            await consumer.stop()
            raise CommandError(
                f"no NameServer at {';'.join(namesrv)} has a route for {options['topic']}"
            )
        try:
            while not done.is_set():
                arrived.clear()
                idle = options["idle"] or None
                waiter = asyncio.ensure_future(arrived.wait())
                finished = asyncio.ensure_future(done.wait())
                got, _ = await asyncio.wait(
                    {waiter, finished}, timeout=idle, return_when=asyncio.FIRST_COMPLETED
                )
                for task in (waiter, finished):
                    task.cancel()
                if not got:
                    break
        finally:
            await consumer.stop()
        self.stderr.write(
            f"consumed {received} message(s) of {options['topic']} as {options['group']}"
        )
