"""A fault-injecting TCP proxy for Raft tests (asyncio).

Each *link* listens on one port and forwards to one target. Per link the test
chooses what the network does:

* ``pass``      - forward both ways (optionally ``delay_ms`` per chunk),
* ``drop``      - close live connections and refuse new ones (a crashed peer),
* ``blackhole`` - keep connections open but discard every byte (a silent
  partition: the peer only notices by timeout),
* ``cut_forward`` / ``cut_backward`` - discard one direction only (asymmetric
  partition; forward = from the connecting side to the target).

In-process use::

    proxy = FaultProxy()
    addr = await proxy.add_link("n1->n2", target="127.0.0.1:7002")
    proxy.set_mode("n1->n2", LinkMode.BLACKHOLE)

As a CLI (control over a TCP port, one JSON object per line)::

    python -m tools.faultproxy --link a=17001:127.0.0.1:7001 --control 17100
    echo '{"link": "a", "mode": "blackhole"}' | nc 127.0.0.1 17100
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from enum import StrEnum

from tools.cli import ExactArgumentParser

CHUNK_BYTES = 64 * 1024
CONTROL_LINE_BYTES_MAX = 4096


class LinkMode(StrEnum):
    """What a link does to the bytes crossing it."""

    PASS = "pass"
    DROP = "drop"
    BLACKHOLE = "blackhole"
    CUT_FORWARD = "cut_forward"
    CUT_BACKWARD = "cut_backward"


@dataclass(slots=True)
class _Link:
    name: str
    target_host: str
    target_port: int
    mode: LinkMode = LinkMode.PASS
    delay_ms: int = 0
    server: asyncio.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    forwarded_bytes: int = 0
    discarded_bytes: int = 0

    def dropped(self) -> bool:
        # A method, not an inline check: the mode changes while we await.
        return self.mode is LinkMode.DROP

    def discards(self, forward: bool) -> bool:
        if self.mode is LinkMode.BLACKHOLE:
            return True
        return self.mode is (LinkMode.CUT_FORWARD if forward else LinkMode.CUT_BACKWARD)


def _split(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


class FaultProxy:
    """A set of named links, each a listening port forwarding to one target."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._host = host
        self._links: dict[str, _Link] = {}

    async def add_link(self, name: str, target: str, listen_port: int = 0) -> str:
        """Start link ``name`` to ``target``; returns the ``host:port`` to dial."""
        if name in self._links:
            raise ValueError(f"link {name} exists")
        host, port = _split(target)
        link = _Link(name, host, port)
        link.server = await asyncio.start_server(
            lambda r, w: self._accept(link, r, w), self._host, listen_port
        )
        self._links[name] = link
        return f"{self._host}:{link.server.sockets[0].getsockname()[1]}"

    def set_mode(self, name: str, mode: LinkMode | str, delay_ms: int | None = None) -> None:
        """Change what link ``name`` does; ``drop`` also closes its live connections."""
        link = self._links[name]
        link.mode = LinkMode(mode)
        if delay_ms is not None:
            link.delay_ms = delay_ms
        if link.mode is LinkMode.DROP:
            for writer in list(link.writers):
                writer.close()

    def heal_all(self) -> None:
        """Every link back to ``pass`` with no delay."""
        for name in self._links:
            self.set_mode(name, LinkMode.PASS, delay_ms=0)

    def stats(self, name: str) -> tuple[int, int]:
        """(forwarded, discarded) byte counts of link ``name``."""
        link = self._links[name]
        return link.forwarded_bytes, link.discarded_bytes

    def links(self) -> list[str]:
        """Names of every link."""
        return sorted(self._links)

    async def close(self) -> None:
        """Stop listening and close every connection."""
        for link in self._links.values():
            if link.server is not None:
                link.server.close()
            for writer in list(link.writers):
                writer.close()
        for link in self._links.values():
            if link.server is not None:
                await link.server.wait_closed()
        self._links.clear()

    async def _accept(
        self, link: _Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if link.mode is LinkMode.DROP:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(link.target_host, link.target_port)
        except OSError:
            writer.close()
            return
        link.writers.update((writer, up_writer))
        if link.dropped():
            # Dropped while we were dialling the target.
            for w in (writer, up_writer):
                link.writers.discard(w)
                w.close()
            return
        try:
            await asyncio.gather(
                self._pump(link, reader, up_writer, forward=True),
                self._pump(link, up_reader, writer, forward=False),
            )
        finally:
            for w in (writer, up_writer):
                link.writers.discard(w)
                w.close()

    async def _pump(
        self,
        link: _Link,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        forward: bool,
    ) -> None:
        # One pump per direction; when either side ends, close the other so the
        # peers see the disconnect as they would through a real middlebox.
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                chunk = await reader.read(CHUNK_BYTES)
                if not chunk or link.dropped():
                    break
                if link.discards(forward):
                    link.discarded_bytes += len(chunk)
                    continue
                if link.delay_ms:
                    await asyncio.sleep(link.delay_ms / 1000)
                writer.write(chunk)
                await writer.drain()
                link.forwarded_bytes += len(chunk)
        writer.close()


# ------------------------------------------------------------------ CLI


async def _control(
    proxy: FaultProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    while line := await reader.readline():
        if len(line) > CONTROL_LINE_BYTES_MAX:
            break
        try:
            order = json.loads(line)
            if order.get("heal_all"):
                proxy.heal_all()
            else:
                proxy.set_mode(order["link"], order.get("mode", "pass"), order.get("delay_ms"))
            reply: dict[str, object] = {"ok": True}
        except (KeyError, ValueError) as exc:
            reply = {"ok": False, "error": str(exc)}
        writer.write(json.dumps(reply).encode() + b"\n")
        await writer.drain()
    writer.close()


async def _serve(links: list[str], control_port: int) -> None:
    proxy = FaultProxy()
    for spec in links:
        name, rest = spec.split("=", 1)
        listen, target = rest.split(":", 1)
        addr = await proxy.add_link(name, target, int(listen))
        print(json.dumps({"link": name, "listen": addr, "target": target}), flush=True)
    server = await asyncio.start_server(
        lambda r, w: _control(proxy, r, w), "127.0.0.1", control_port
    )
    print(json.dumps({"control": server.sockets[0].getsockname()[1]}), flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """CLI entry point: ``--link name=listen_port:host:port`` (repeatable)."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--link",
        action="append",
        default=[],
        required=True,
        help="name=listen_port:host:port, one link forwarding to host:port; repeatable",
    )
    parser.add_argument(
        "--control", type=int, default=0, help="the control port (0 picks a free one)"
    )
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.link, args.control))


if __name__ == "__main__":
    main()
