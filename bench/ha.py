"""HA benchmark: master -> slave replication throughput and SYNC_MASTER send latency.

    .venv/bin/python -m bench.ha [--mib 64] [--messages 2000] [--body-bytes 1024]

1. Fills a master store with ``--mib`` MiB of messages, starts it (run_broker,
   ASYNC_MASTER) and an empty slave that follows it; times the slave's catch-up
   (MB/s). In the same run, copies the same segment bytes over a plain loopback
   socket (32 KiB writes, receiver writes a file) as the ceiling, and prints
   the ratio.
2. Starts a SYNC_MASTER + slave pair (and an ASYNC_MASTER for reference) and
   times ``--messages`` sequential SEND_MESSAGE round trips: p50 / p99.
No NameServer is involved: the slave is pointed at the master with haMasterAddress.
Every broker of one run proves the same HA secret (``haSecretFile``, made in the
run's folder), so the figures include the handshake as deployed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from broker_app.messages import build_send_request
from broker_app.store.message_store import MessageInput, MessageStore, StoreConfig
from localcluster.run_secrets import ha_secret
from remoting.blocking import BlockingClient
from remoting.bodies import decode_kv_table
from remoting.command import RemotingCommand
from tools.cli import ExactArgumentParser

REPO_ROOT = Path(__file__).resolve().parents[1]

SEGMENT_BYTES = 1024 * 1024 * 1024  # one segment, so an empty slave copies everything
COPY_CHUNK_BYTES = 32 * 1024
READY_TIMEOUT_S = 60.0
GET_BROKER_RUNTIME_INFO = 28
MIB = 1024 * 1024


class Broker:
    """A run_broker subprocess."""

    def __init__(self, root: Path, name: str, role: str, broker_id: int, extra: list[str]):
        self.root = root / name
        self.root.mkdir(parents=True, exist_ok=True)
        ready = self.root / "ready.json"
        args = [
            sys.executable,
            str(REPO_ROOT / "manage.py"),
            "run_broker",
            "--migrate",
            "--role",
            role,
            "--broker-id",
            str(broker_id),
            "--address",
            "127.0.0.1:0",
            "--store-dir",
            str(self.root / "store"),
            "--ready-file",
            str(ready),
            "--set",
            f"segment_bytes={SEGMENT_BYTES}",
            "--set",
            f"haSecretFile={ha_secret(root)}",
            *extra,
        ]
        env = dict(os.environ, NAMESRV_DB_PATH=str(self.root / "db.sqlite3"))
        self.log = (self.root / "broker.log").open("wb")
        self.proc = subprocess.Popen(
            args, cwd=REPO_ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{name} failed to start, see {self.root / 'broker.log'}")
            time.sleep(0.02)
        self.info = json.loads(ready.read_text())
        self.client = BlockingClient(self.info["addr"], timeout_s=10.0)

    def max_offset(self) -> int:
        """commitLogMaxOffset from GET_BROKER_RUNTIME_INFO."""
        body = self.client.invoke(RemotingCommand.request(GET_BROKER_RUNTIME_INFO)).body
        assert body is not None
        return int(decode_kv_table(body).table["commitLogMaxOffset"])

    def stop(self) -> None:
        """SIGTERM and wait."""
        self.client.close()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        self.log.close()


def fill_store(store_dir: Path, total_bytes: int, body_bytes: int) -> int:
    """Write messages until the log holds ``total_bytes``; returns the max offset."""
    store = MessageStore(StoreConfig(store_dir, segment_bytes=SEGMENT_BYTES))
    body = os.urandom(body_bytes)
    index = 0
    while store.max_offset < total_bytes:
        store.put_message(MessageInput("BenchTopic", index % 8, body), index)
        index += 1
    end = store.max_offset
    store.close()
    return end


def replication_mb_s(root: Path, mib: int) -> tuple[float, int]:
    """Slave catch-up throughput of ``mib`` MiB already on the master."""
    end = fill_store(root / "master" / "store", mib * MIB, 4096)
    master = Broker(root, "master", "ASYNC_MASTER", 0, [])
    try:
        slave = Broker(
            root,
            "slave",
            "SLAVE",
            1,
            ["--set", f"ha_master_address=127.0.0.1:{master.info['ha_port']}"],
        )
        try:
            # Timed from the slave's ready file on, so interpreter start-up is excluded;
            # whatever it copied before that is subtracted.
            start = time.perf_counter()
            copied_before = slave.max_offset()
            while slave.max_offset() < end:
                time.sleep(0.01)
            elapsed = time.perf_counter() - start
        finally:
            slave.stop()
    finally:
        master.stop()
    return (end - copied_before) / MIB / elapsed, end


def socket_copy_mb_s(source: Path, target: Path) -> float:
    """Copy ``source`` over a loopback TCP socket into ``target``, 32 KiB at a time."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def receive() -> None:
        conn, _ = listener.accept()
        with conn, target.open("wb") as out:
            while chunk := conn.recv(256 * 1024):
                out.write(chunk)

    receiver = threading.Thread(target=receive)
    receiver.start()
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as conn, source.open("rb") as src:
        while chunk := src.read(COPY_CHUNK_BYTES):
            conn.sendall(chunk)
    receiver.join()
    elapsed = time.perf_counter() - start
    listener.close()
    return source.stat().st_size / MIB / elapsed


def send_latencies_ms(addr: str, count: int, body_bytes: int) -> list[float]:
    """Sequential SEND_MESSAGE round trips, in milliseconds."""
    body = os.urandom(body_bytes)
    latencies = []
    with BlockingClient(addr, timeout_s=10.0) as client:
        for index in range(count):
            request = build_send_request(
                "BenchTopic",
                body,
                queue_id=index % 4,
                producer_group="BENCH",
                tags=None,
                born_timestamp_ms=0,
            )
            start = time.perf_counter()
            response = client.invoke(request)
            latencies.append((time.perf_counter() - start) * 1000)
            if response.code != 0:
                raise SystemExit(f"send failed: {response.code} {response.remark}")
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def latency_run(root: Path, role: str, messages: int, body_bytes: int) -> list[float]:
    """Latencies of ``messages`` sends to a ``role`` master that has one slave."""
    master = Broker(root, f"{role.lower()}-m", role, 0, [])
    slave = Broker(
        root,
        f"{role.lower()}-s",
        "SLAVE",
        1,
        ["--set", f"ha_master_address=127.0.0.1:{master.info['ha_port']}"],
    )
    try:
        time.sleep(1.0)  # let the slave connect and report
        send_latencies_ms(master.info["addr"], 50, body_bytes)  # warm-up
        return send_latencies_ms(master.info["addr"], messages, body_bytes)
    finally:
        slave.stop()
        master.stop()


def main() -> None:
    """Run both measurements and print the figures."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="MiB the slave catches up on")
    parser.add_argument(
        "--messages", type=int, default=2000, help="sequential sends timed per role"
    )
    parser.add_argument("--body-bytes", type=int, default=1024, help="each message's body")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ha-") as tmp:
        root = Path(tmp)
        ha_mb_s, end = replication_mb_s(root, args.mib)
        segment = next((root / "master" / "store" / "commitlog").iterdir())
        copy_mb_s = socket_copy_mb_s(segment, root / "copy.bin")
        print(
            f"replication: {end / MIB:.1f} MiB in catch-up at {ha_mb_s:.1f} MB/s "
            f"(from the slave's ready file)"
        )
        print(f"plain socket copy of the same bytes: {copy_mb_s:.1f} MB/s")
        print(f"ratio replication / socket copy: {ha_mb_s / copy_mb_s:.3f}")
        for role in ("SYNC_MASTER", "ASYNC_MASTER"):
            latencies = latency_run(root, role, args.messages, args.body_bytes)
            print(
                f"{role} send latency over {len(latencies)} x {args.body_bytes} B: "
                f"p50 {percentile(latencies, 0.5):.2f} ms, "
                f"p99 {percentile(latencies, 0.99):.2f} ms, "
                f"mean {statistics.fmean(latencies):.2f} ms"
            )


if __name__ == "__main__":
    main()
