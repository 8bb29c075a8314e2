"""The read front: a second process that owns a node's public remoting port, answers
route queries from its own copies of the gateway's route answers, and passes every
other request to the gateway.

Why a process of its own: the gateway process runs the event loop, the Raft thread
(PySyncObj's sending, decoding and applying of entries, journal flushes) and the
projection writer, and they share one interpreter lock. During a registration storm
the apply path holds that lock most of the time, so a route read, however cached,
waited behind other topics' registrations (docs/BENCHMARKS.md, "registration storm").
Here route reads run under their own interpreter lock and never wait for an apply.

How it stays correct (a front never serves an answer older than the gateway's):

* The front keeps the gateway's answers in the same store as the gateway keeps its own
  (:class:`~gateway.route_answers.RouteAnswers`), versioned by the same per-topic
  counters, which the gateway bumps in shared memory before the write that changed a
  topic's route is acknowledged. The front reads the counter *before* asking the
  gateway, so an answer fetched across a change carries the older counter and is
  fetched again at the next read.
* Requests whose answer is more than the cached body (linearizable reads, zone
  filtering, no topic) and every other request code go to the gateway.
* A broker's connection is not relayed for long: at its first request that only
  brokers send and the ACL admits, the connection itself is handed to the gateway
  (:mod:`gateway.handoff`), which then serves it directly. A TLS connection is the
  exception: its session lives in this process, so it is relayed like any other
  client's. A broker request the ACL refuses is answered here, as the gateway would
  (NO_PERMISSION with the ACL's remark, none for a one-way request, the connection
  kept): an unsigned peer cannot move its connections into the gateway.

The link: each client connection gets its own connection to the gateway's Unix socket
(a folder only this user can enter), opened at its first forwarded request. Its first
frame (``FRONT_PEER_CODE``, :mod:`gateway.private_codes`) tells the gateway the client's
address, so the ACL's white list, logs and a broker channel's close (which unregisters
the broker in eventual mode) work as if the client were connected to the gateway
itself. The client's opaques are renumbered on the link and restored on the answers.
Limits, idle timeouts and bad frames are the front's
:class:`~remoting.server.RemotingServer`'s, so a bad peer is cut here and the gateway
never sees it.

The gateway starts the front (:class:`~gateway.front_process.FrontProcess`, in
:mod:`gateway.server`), passes it the listening socket, restarts it if it dies, and
stops it first on shutdown; a front whose gateway is gone exits. The link's frames are
:mod:`gateway.front_link`'s, the options :mod:`gateway.front_options`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import socket
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from gateway import handoff
from gateway.acl import namesrv_acl
from gateway.front_link import Link, LinkClosedError
from gateway.front_options import FrontOptions
from gateway.front_process import PARENT_CHECK_S, READY_LINE, die_with_parent
from gateway.private_codes import FRONT_STATS_CODE, ROUTE_ANSWERS_FIELD
from gateway.route_answers import RouteAnswers, RouteVersions, Version
from gateway.route_request import RouteKey, shared_route_key
from remoting.acl_policy import RemotingAcl
from remoting.codes import FLAG_ONEWAY, RequestCode, ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.connection import Connection
from remoting.limits import RefusalLog
from remoting.listener import connect_unix, raise_open_files_limit
from remoting.server import RemotingServer
from remoting.tls import ServerTls, read_tls_properties
from tools.cli import ExactArgumentParser

log = logging.getLogger(__name__)

STATS_PERIOD_S = 1.0

_CACHEABLE = frozenset({int(ResponseCode.SUCCESS), int(ResponseCode.TOPIC_NOT_EXIST)})
_ROUTE = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)

_Answer = tuple[int, str | None, bytes | None]
"""(code, remark, body) of a gateway's route answer."""


class ReadFront:
    """The front's server: cached route answers here, everything else to the gateway."""

    def __init__(self, options: FrontOptions, *, acl: RemotingAcl | None) -> None:
        self.options = options
        self.acl = acl
        self.versions = RouteVersions(Path(options.versions_path), writable=False)
        tls = None
        if options.tls_config_file is not None:
            tls = ServerTls(read_tls_properties(Path(options.tls_config_file))[0])
        self.server = RemotingServer(
            self.handle,
            prepare=None if tls is None else tls.prepare,
            host=options.host,
            sock=socket.socket(fileno=options.listen_fd),
            on_connection_closed=self._client_closed,
            idle_timeout_s=options.idle_timeout_s,
            unfinished_frames_bytes_max=options.unfinished_frames_bytes_max,
            frame_deadline_s=options.frame_deadline_s,
            connections_per_address_max=options.connections_per_address_max,
            connections_per_prefix_max=options.connections_per_prefix_max,
        )
        self.answers: RouteAnswers[RouteKey, Version, _Answer] = RouteAnswers(
            options.route_answers_max
        )
        self._links: dict[Connection, asyncio.Future[Link]] = {}
        self.hits = 0
        self.fetches = 0
        self.handed_over = 0
        self.refused_before_handover = 0
        self._handoffs = asyncio.Semaphore(handoff.SENDS_IN_FLIGHT_MAX)
        self._refusals = RefusalLog(logger=log)

    # -- requests -------------------------------------------------------------------------

    def handle(
        self, request: RemotingCommand, conn: Connection
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | None] | None:
        """The public handler: a valid cached route answer now, else the gateway's.

        The ACL is the gateway's to apply (it sees the client's address through the
        link), so its refusal counts stay whole: when the accounts file closes reads,
        route queries go to the gateway as well. The one exception is a broker request
        that would move its connection: see :meth:`_broker_request`."""
        acl = self.acl
        if request.code == _ROUTE and (acl is None or not acl.guards(_ROUTE)):
            key = shared_route_key(request)
            if key is not None:
                # Read before the topic's version, as the gateway does before its body.
                answered = self.versions.answer_fields()
                version = self.versions.version(key[0])
                answer = self.answers.get(key, version)
                if answer is not None:
                    self.hits += 1
                    return make_response(
                        request,
                        answer[0],
                        remark=answer[1],
                        body=answer[2],
                        ext_fields=answered,
                    )
                return self._fetch_route(request, conn, key, version)
        if (
            request.code in handoff.BROKER_CODES
            and self.options.handoff_path is not None
            and not conn.is_tls
        ):
            return self._broker_request(request, conn, self.options.handoff_path)
        return self._forward(request, conn)

    def _broker_request(
        self, request: RemotingCommand, conn: Connection, path: str
    ) -> RemotingCommand | Coroutine[Any, Any, None] | None:
        """Hand the connection over at a broker request the ACL admits; answer one it
        refuses here, as the gateway would (``Gateway._handle``: NO_PERMISSION with the
        ACL's remark, nothing for a one-way request, the connection kept), so that a
        peer without a signature or a white-listed address cannot move connections into
        the gateway (its connection cap and the descriptors it keeps for Raft). The
        gateway checks the ACL again on the frame it adopts."""
        acl = self.acl
        if acl is not None:
            refusal = acl.check(request, conn.peer_host, conn.peer_subject)
            if refusal is not None:
                self.refused_before_handover += 1
                return acl.refuse(request, refusal)
        return self._hand_over(conn, conn.detach(request), path)

    async def _hand_over(
        self, conn: Connection, detaching: Coroutine[Any, Any, tuple[int, bytes]], path: str
    ) -> None:
        """Give a broker's connection to the gateway (gateway/handoff.py), which
        answers the request that moved it. When that fails the connection is lost
        (the broker connects again) and the refusal is logged."""
        try:
            fd, stream = await detaching  # ConnectionError: closed meanwhile
            try:
                async with self._handoffs:  # a burst waits here, not in the gateway's backlog
                    await handoff.send(path, fd, stream)
            finally:
                os.close(fd)
            self.handed_over += 1
        except OSError as exc:
            # Detached, it is no longer read here: closed, not left until its idle
            # timeout (os.dup failing for want of descriptors left it open).
            conn.close()
            now_s = asyncio.get_running_loop().time()
            self._refusals.warning(now_s, "%s not handed over: %s", conn.id, exc)

    async def _fetch_route(
        self, request: RemotingCommand, conn: Connection, key: RouteKey, version: Version
    ) -> RemotingCommand | None:
        self.fetches += 1
        answer = await self._forward(request, conn)
        if answer is not None and answer.code in _CACHEABLE:
            self.answers.put(key, version, (answer.code, answer.remark, answer.body))
        return answer

    async def _forward(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        link = await self._link(conn)
        try:
            future = link.forward(request)
            if future is None:
                return None
            answer = await future
        except LinkClosedError as exc:
            # The gateway closed this client's link mid-request (it is restarting, or
            # dropped the client): an answer the client can retry, and one log line.
            now_s = asyncio.get_running_loop().time()
            self._refusals.warning(now_s, "%s: code %d not relayed: %s", conn.id, request.code, exc)
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark=f"{exc}; ask again")
        return dataclasses.replace(answer, opaque=request.opaque)

    async def _link(self, conn: Connection) -> Link:
        pending = self._links.get(conn)
        if pending is not None:
            link = await asyncio.shield(pending)
            if not link.closed:
                return link
            if self._links.get(conn) is pending:
                del self._links[conn]
            return await self._link(conn)
        pending = asyncio.ensure_future(self._open_link(conn))
        self._links[conn] = pending
        try:
            return await asyncio.shield(pending)
        except BaseException:
            if self._links.get(conn) is pending:
                del self._links[conn]
            raise

    async def _open_link(self, conn: Connection) -> Link:
        loop = asyncio.get_running_loop()
        # connect_unix: asyncio's own connect takes a full backlog for a connection.
        sock = await connect_unix(self.options.upstream_path)
        _, link = await loop.create_unix_connection(lambda: Link(conn), sock=sock)
        if conn.is_closed:  # the client left while the link was opening
            link.close()
        return link

    def _client_closed(self, conn: Connection) -> None:
        pending = self._links.pop(conn, None)
        if pending is None:
            return
        if pending.done() and not pending.cancelled() and pending.exception() is None:
            pending.result().close()
        else:
            pending.add_done_callback(_close_when_open)

    # -- life -----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, ready_fd: int | None = None) -> None:
        """Serve until ``stop`` is set or the gateway process is gone."""
        await self.server.start()
        if ready_fd is not None:
            os.write(ready_fd, READY_LINE)
        watcher = asyncio.ensure_future(self._watch_parent(stop))
        reporter = asyncio.ensure_future(self._report(stop))
        try:
            await stop.wait()
        finally:
            watcher.cancel()
            reporter.cancel()
            await self.server.close()
            for pending in self._links.values():
                pending.add_done_callback(_close_when_open)
            self.versions.close()
            log.info(
                "read front stopped: %d route answers from copies, %d fetched, "
                "%d broker connections handed over, %d broker requests refused by the ACL",
                self.hits,
                self.fetches,
                self.handed_over,
                self.refused_before_handover,
            )

    async def _report(self, stop: asyncio.Event) -> None:
        """Tell the gateway, every second, how many route queries the copies answered."""
        reported = 0
        link: Link | None = None
        while not stop.is_set():
            await asyncio.sleep(STATS_PERIOD_S)
            hits = self.hits
            if hits == reported:
                continue
            try:
                if link is None or link.closed:
                    _, link = await asyncio.get_running_loop().create_unix_connection(
                        lambda: Link(None), self.options.upstream_path
                    )
                link.forward(
                    RemotingCommand(
                        code=FRONT_STATS_CODE,
                        flag=FLAG_ONEWAY,
                        ext_fields={ROUTE_ANSWERS_FIELD: str(hits - reported)},
                    )
                )
                reported = hits
            except OSError as exc:
                log.warning("cannot report to the gateway: %s", exc)

    async def _watch_parent(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if os.getppid() != self.options.parent_pid:
                log.error("the gateway process is gone: the read front stops")
                stop.set()
                return
            await asyncio.sleep(PARENT_CHECK_S)


def _close_when_open(pending: asyncio.Future[Link]) -> None:
    if not pending.cancelled() and pending.exception() is None:
        pending.result().close()


def main(argv: list[str] | None = None) -> int:
    """``python -m gateway.front OPTIONS_JSON``: run a front (the gateway starts it)."""
    parser = ExactArgumentParser(prog="python -m gateway.front", description=__doc__)
    parser.add_argument("options", help="FrontOptions as JSON")
    args = parser.parse_args(argv)
    die_with_parent()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s front %(name)s: %(message)s"
    )
    try:
        options = FrontOptions.from_json(args.options)
        if os.getppid() != options.parent_pid:
            return 1  # the gateway died before the death signal was set
        acl = None
        if options.acl_enabled:
            acl = namesrv_acl(None if options.acl_file is None else Path(options.acl_file))
        # Each client may hold a link to the gateway too: half the cap (remoting/listener.py).
        raise_open_files_limit(descriptors_per_connection=2)
        front = ReadFront(options, acl=acl)
    except (ValueError, TypeError, OSError) as exc:
        print(f"read front: {exc}", file=sys.stderr)
        return 2

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await front.run(stop, ready_fd=sys.stdout.fileno())

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
