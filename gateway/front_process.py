"""The read front's life as a process: the gateway binds the public port, starts the
front on it (``python -m gateway.front``), waits for its ready line, restarts it when it
dies and stops it first on shutdown; the front, for its part, dies with the gateway.

Both halves of that agreement live here (the ready line, the death signal, the parent
check), so the gateway's side and the front's (gateway/front.py) cannot drift apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import dataclasses
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from gateway.front_options import FrontOptions
from remoting.server import ACCEPT_BACKLOG

# The front's logger: the gateway's lines about its front kept the name they had before
# supervision had a module.
log = logging.getLogger("gateway.front")

PARENT_CHECK_S = 1.0
READY_LINE = b"ready\n"
FRONT_READY_TIMEOUT_S = 30.0
PR_SET_PDEATHSIG = 1
FRONT_RESTART_DELAY_S = 0.5


class FrontProcess:
    """The gateway's side: binds the public port, runs the front on it, restarts it when
    it dies, stops it first on shutdown.

    The listening socket stays open here for the gateway's whole life, so connections
    that arrive while a front restarts wait in its backlog instead of being refused.

    A front runs at the priority the gateway had when it started the first one: the
    gateway may lower its own afterwards (:func:`gateway.priority.lower_priority`), and
    a restarted front, which inherits the gateway's, is set back (when the user may:
    raising a priority again needs ``CAP_SYS_NICE``; otherwise it stays at the
    gateway's, with a warning).
    """

    def __init__(self, options: FrontOptions) -> None:
        self.options = options
        self.nice = os.getpriority(os.PRIO_PROCESS, 0)
        self._sock: socket.socket | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = False
        self.restarts = 0

    @property
    def port(self) -> int:
        """The bound public port."""
        if self._sock is None:
            return self.options.port
        return int(self._sock.getsockname()[1])

    @property
    def pid(self) -> int | None:
        """The running front's process id."""
        return None if self._process is None else self._process.pid

    async def start(self) -> None:
        """Bind the port, start the front and wait until it accepts; OSError if it cannot."""
        self._sock = bind_listener(self.options.host, self.options.port)
        self.options = dataclasses.replace(self.options, listen_fd=self._sock.fileno())
        await self._spawn()
        self._supervisor = asyncio.ensure_future(self._supervise())
        log.info("read front pid %s serves %s:%d", self.pid, self.options.host, self.port)

    async def _spawn(self) -> None:
        assert self._sock is not None
        root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (root, env.get("PYTHONPATH"))))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.front",
            self.options.to_json(),
            stdout=asyncio.subprocess.PIPE,
            pass_fds=(self._sock.fileno(),),
            cwd=root,
            env=env,
        )
        self._process = process
        self._keep_priority(process.pid)
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), FRONT_READY_TIMEOUT_S)
        except TimeoutError:
            line = b""
        if line != READY_LINE:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise OSError(f"the read front did not start (exit code {process.returncode})")

    def _keep_priority(self, pid: int) -> None:
        # A front that is already gone has no priority to keep.
        with contextlib.suppress(ProcessLookupError):
            if os.getpriority(os.PRIO_PROCESS, pid) == self.nice:
                return
            try:
                os.setpriority(os.PRIO_PROCESS, pid, self.nice)
            except PermissionError:
                log.warning(
                    "the restarted read front runs at the gateway's lower priority "
                    "(raising it back needs CAP_SYS_NICE); restart the node to undo"
                )

    async def _supervise(self) -> None:
        while not self._stopping:
            process = self._process
            assert process is not None
            code = await process.wait()
            if self._stopping:
                return
            self.restarts += 1
            log.error("read front pid %d exited with %s: restarting it", process.pid, code)
            await asyncio.sleep(FRONT_RESTART_DELAY_S)
            try:
                await self._spawn()
            except OSError as exc:
                log.error("%s; retrying", exc)

    async def stop(self, timeout_s: float) -> None:
        """Stop the front (it drains its clients) and close the port."""
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), timeout_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self._sock is not None:
            self._sock.close()


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (its first address), inheritable."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(ACCEPT_BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def die_with_parent() -> None:
    """Linux: be killed the moment the gateway dies (``PR_SET_PDEATHSIG``), so the port
    is free for its restart at once; elsewhere the parent check (1 s) does it."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
