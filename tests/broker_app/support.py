"""The cast of the broker tests: a recording NameServer and real broker processes.

* :class:`FakeNameServer` is a real ``RemotingServer`` on 127.0.0.1 running in
  its own thread. It decodes every frame the way a NameServer must (crc32,
  compressed or JSON RegisterBrokerBody) and answers like upstream's
  ``DefaultRequestProcessor.registerBroker``:
  a master gets ``extFields {}``, a slave gets its master's ``masterAddr`` and
  ``haServerAddr``; QUERY_DATA_VERSION says ``changed`` when the stored
  DataVersion differs.
* :class:`BrokerProcess` runs ``manage.py run_broker`` in a subprocess with
  its own SQLite file and waits for its ready file. Every broker under one
  root shares that root's HA secret (``localcluster.run_secrets.ha_secret``), so a master and
  its slave replicate as a deployment's would.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcluster.run_secrets import ha_secret
from remoting.blocking import BlockingClient
from remoting.bodies import decode_data_version, encode_data_version
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.model import DataVersion, RegisterBrokerBody
from remoting.register_body import decode_register_broker_request_body
from remoting.server import RemotingServer
from tests.integration.gateway_harness import write_test_acl
from tests.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30.0
BROKER_WAIT_S = 15.0
"""How long a test waits for a broker (or the name server) to do something."""
STOP_TIMEOUT_S = 15.0
# Compressed intervals every broker test process uses.
FAST_HA = {
    "haSendHeartbeatInterval": "200",
    "haHousekeepingInterval": "3000",
    "reconnect_delay_ms": "200",
    "slave_sync_initial_delay_ms": "200",
    "slave_sync_interval_ms": "300",
    "segment_bytes": str(64 * 1024),
    "record_bytes_max": str(16 * 1024),
    "flush_interval_ms": "100",
}


@dataclass
class Received:
    """One request as the fake NameServer decoded it."""

    code: int
    ext: dict[str, str]
    body: bytes | None
    version: int
    oneway: bool
    register_body: RegisterBrokerBody | None = None
    crc_ok: bool | None = None


@dataclass
class FakeNameServer:
    """A recording NameServer on a background thread."""

    received: list[Received] = field(default_factory=list)
    versions: dict[tuple[str, str], DataVersion] = field(default_factory=dict)
    masters: dict[str, tuple[str, str]] = field(default_factory=dict)
    port: int = 0

    def start(self) -> FakeNameServer:
        """Bind a port and serve on a daemon thread."""
        self._loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = RemotingServer(self._handle, host="127.0.0.1", port=0)
            self._loop.run_until_complete(self._server.start())
            self.port = self._server.port
            started.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        started.wait(10)
        return self

    @property
    def addr(self) -> str:
        """``127.0.0.1:port``."""
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Close the server and end the thread."""
        future = asyncio.run_coroutine_threadsafe(self._server.close(1.0), self._loop)
        future.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def codes(self) -> list[int]:
        """The request codes received so far, in order."""
        return [r.code for r in list(self.received)]

    def of(self, code: int) -> list[Received]:
        """The requests of one code."""
        return [r for r in list(self.received) if r.code == code]

    def wait_for(
        self, code: int, count: int = 1, timeout_s: float = BROKER_WAIT_S
    ) -> list[Received]:
        """Block until ``count`` requests of ``code`` arrived."""

        def arrived() -> list[Received]:
            found = self.of(code)
            return found if len(found) >= count else []

        return wait_until(
            arrived,
            what=lambda: f"{count} x code {code} among the codes received {self.codes()}",
            timeout_s=timeout_s,
        )

    async def _handle(self, cmd: RemotingCommand, _conn: Connection) -> RemotingCommand | None:
        received = Received(
            cmd.code, dict(cmd.ext_fields or {}), cmd.body, cmd.version, cmd.is_oneway
        )
        self.received.append(received)
        if cmd.code == RequestCode.REGISTER_BROKER:
            return self._register(cmd, received)
        if cmd.code == RequestCode.QUERY_DATA_VERSION:
            return self._query_data_version(cmd, received)
        if cmd.is_oneway:
            return None
        return cmd.make_response(ResponseCode.SUCCESS)

    def _register(self, cmd: RemotingCommand, received: Received) -> RemotingCommand:
        ext = received.ext
        crc = int(ext.get("bodyCrc32", "0"))
        received.crc_ok = crc == (zlib.crc32(cmd.body or b"") & 0x7FFFFFFF)
        if not received.crc_ok:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        body = decode_register_broker_request_body(
            cmd.body, compressed=ext.get("compressed") == "true", version=cmd.version
        )
        received.register_body = body
        key = (ext["brokerAddr"], ext["brokerName"])
        self.versions[key] = body.topic_config_wrapper.data_version
        if ext["brokerId"] == "0":
            self.masters[ext["brokerName"]] = (ext["brokerAddr"], ext["haServerAddr"])
            return cmd.make_response(ResponseCode.SUCCESS, ext_fields={})
        master = self.masters.get(ext["brokerName"])
        fields = {} if master is None else {"masterAddr": master[0], "haServerAddr": master[1]}
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=fields)

    def _query_data_version(self, cmd: RemotingCommand, received: Received) -> RemotingCommand:
        key = (received.ext["brokerAddr"], received.ext["brokerName"])
        stored = self.versions.get(key)
        changed = stored is None or stored != decode_data_version(cmd.body)
        body = None if stored is None else encode_data_version(stored)
        return cmd.make_response(
            ResponseCode.SUCCESS, ext_fields={"changed": "true" if changed else "false"}, body=body
        )


class BrokerProcess:
    """``manage.py run_broker`` in a subprocess with its own store and database."""

    def __init__(
        self,
        root: Path,
        name: str,
        *,
        role: str,
        broker_id: int,
        namesrv: str = "",
        broker_name: str = "broker-a",
        extra: dict[str, str] | None = None,
    ) -> None:
        self.root = root / name
        self.root.mkdir(parents=True, exist_ok=True)
        self.store_dir = self.root / "store"
        self.ready_file = self.root / "ready.json"
        self.log_path = self.root / "broker.log"
        settings = dict(FAST_HA)
        # The broker port's ACL knows the test admin (topic creation needs its signature).
        settings["aclFile"] = str(write_test_acl(self.root))
        settings["haSecretFile"] = str(ha_secret(root))
        settings.update(extra or {})
        args = [
            sys.executable,
            str(REPO_ROOT / "manage.py"),
            "run_broker",
            "--migrate",
            "--broker-name",
            broker_name,
            "--broker-id",
            str(broker_id),
            "--role",
            role,
            "--address",
            "127.0.0.1:0",
            "--store-dir",
            str(self.store_dir),
            "--ready-file",
            str(self.ready_file),
        ]
        if namesrv:
            args += ["--namesrv", namesrv]
        for key, value in settings.items():
            args += ["--set", f"{key}={value}"]
        env = dict(os.environ, NAMESRV_DB_PATH=str(self.root / "db.sqlite3"))
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            args, cwd=REPO_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.info = self._wait_ready()

    def _wait_ready(self) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            if self.ready_file.exists():
                return dict(json.loads(self.ready_file.read_text()))
            assert self.proc.poll() is None, "the broker exited"
            return None

        try:
            return wait_until(ready, what="the broker's ready file", timeout_s=READY_TIMEOUT_S)
        except AssertionError as exc:
            self.kill()
            log = self.log_path.read_text()[-3000:]
            raise AssertionError(f"broker did not start ({exc}):\n{log}") from None

    @property
    def addr(self) -> str:
        """The broker's remoting address."""
        return str(self.info["addr"])

    @property
    def ha_port(self) -> int:
        """The broker's HA port."""
        return int(self.info["ha_port"])

    def commit_log_files(self) -> dict[str, bytes]:
        """Segment name -> file bytes."""
        directory = self.store_dir / "commitlog"
        return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO as a dict."""
        from remoting.bodies import decode_kv_table

        with BlockingClient(self.addr, timeout_s=5.0) as client:
            response = client.invoke(RemotingCommand.request(28))
        assert response.body is not None
        return dict(decode_kv_table(response.body).table)

    def pause(self) -> None:
        """SIGSTOP the process."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the process."""
        self.proc.send_signal(signal.SIGCONT)

    def terminate(self) -> int:
        """SIGTERM and wait for a graceful exit; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return int(self.proc.returncode)

    def kill(self) -> None:
        """SIGKILL (cleanup of a failed start)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def send(
    addr: str, topic: str, body: bytes, *, queue_id: int = 0, timeout_s: float = 10.0
) -> RemotingCommand:
    """One SEND_MESSAGE through a blocking client."""
    from broker_app.messages import build_send_request

    request = build_send_request(
        topic, body, queue_id=queue_id, producer_group="TEST_PG", tags="t", born_timestamp_ms=0
    )
    with BlockingClient(addr, timeout_s=timeout_s) as client:
        return client.invoke(request)
