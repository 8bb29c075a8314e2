"""Benchmark of a backup of a 5,000-topic table, a restore from it, a recovery after quorum loss.

Four parts, each with its baseline measured in the same run:

1. **In process** (the codec alone): the backup file built from a table copy
   (``raftstore.backup.encode``: serialize, compress, hash) against the Raft snapshot
   the node already writes at every compaction (``RouteTable.snapshot``); a backup
   checked and decoded (``read_backup``) against a Raft snapshot restored
   (``RouteTable.restore``).
2. **Through a node** (three raft gateways, real processes): the internal BACKUP
   request on a follower (a barrier through the leader, the copy under the apply lock,
   the file built off the event loop, the answer over loopback) against NODE_STATUS
   with ``consistency=linearizable`` (the same barrier, then the state's digests: a
   whole-table pass of its own).
3. **Restore**: three new gateways started with ``--restore-state`` (each checks the
   file, copies it into its empty Raft folder and starts from it) until every ready
   file is written and every node answers the restored route, against three empty
   gateways started the same way until they answer (a route of their own).
4. **Recover** after quorum loss: a 3-node raft cluster launched as ``manage.py cluster
   up`` launches it (``localcluster``: gateways, web processes, Redis, Celery; free
   ports) holds the table; n2's and n3's gateway and web process are SIGKILLed and
   ``cluster_recover`` (``manage.py cluster recover --survivor n1``) makes n1 a
   one-member cluster; its ``timings_s`` step by step, then the time until n1 routes the
   table's last topic. Baseline: ``cluster restart n1`` (``cluster_restart_node``) of the
   same node holding the same table in the same cluster just before the loss, because
   recover's own restart step is that restart (with ``--restore-state`` and no peers); part
   3's bare gateways have no web process and no launcher, so they would not compare.

The table: 20 brokers, each registering 500 of the 5,000 topics (every topic served by
two brokers, 8 queues each), as ``bench/storm.py``'s large-table phase builds it.

Run: ``.venv/bin/python -m bench.backup [--part all|backup|recover] [--topics 5000]
[--brokers 20] [--repeats 10] [--restarts 3]`` (``backup``: parts 1 to 3; ``recover``:
part 4).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench import _util
from gateway.private_codes import InternalCode
from localcluster import launcher
from raftstore import backup
from raftstore.commands import RegisterBroker
from raftstore.route_table import RouteTable
from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.consistency import CONSISTENCY_FIELD, CONSISTENCY_LINEARIZABLE
from tools.cli import ExactArgumentParser

INTERNAL_SECRET = "bench-backup-internal-secret"
REQUEST_TIMEOUT_S = 60.0
ROUTE_WAIT_S = 60.0
POLL_S = 0.05
STOP_TIMEOUT_S = 30.0
GONE_TIMEOUT_S = 10.0


def build_table(topic_count: int, brokers: int) -> RouteTable:
    """The bench table, registered in process (no clock: the fixed bench times)."""
    table = RouteTable()
    per_broker = topic_count * 2 // brokers
    for index in range(brokers):
        topics = _util.broker_topics(index, per_broker, topic_count)
        table.apply(
            RegisterBroker(
                cluster_name=_util.CLUSTER,
                broker_addr=_util.broker_addr(index),
                broker_name=_util.broker_name(index),
                broker_id=0,
                ha_server_addr="",
                now_ms=_util.REGISTERED_AT_MS,
                topic_config_wrapper=_util.topic_wrapper(topics),
            )
        )
    return table


def header_of(table: RouteTable) -> backup.BackupHeader:
    return backup.BackupHeader(
        cluster="bench",
        mode="raft",
        node="n1",
        index=1,
        term=1,
        members=("127.0.0.1:1",),
        taken_at_ms=_util.REGISTERED_AT_MS,
        applied_version=table.applied_version,
        routes_version=table.routes_version,
    )


def in_process(table: RouteTable) -> bytes:
    """Part 1; returns the backup file (the later parts restore from it)."""
    timing = _util.Timing(repeats=3, min_batch_s=0.2)
    header = header_of(table)
    data = backup.encode(header, table.state_document())
    snapshot = table.snapshot()
    first = _util.us_per_op(table.snapshot, timing)
    encode = _util.us_per_op(lambda: backup.encode(header, table.state_document()), timing)
    snapshot_us = min(first, _util.us_per_op(table.snapshot, timing))
    install = _util.us_per_op(lambda: RouteTable.restore(snapshot), timing)
    read = _util.us_per_op(lambda: backup.read_backup(data), timing)
    _util.print_table(
        f"in process: {table.queue_row_count():,} queue entries, snapshot "
        f"{len(snapshot):,} bytes, backup file {len(data):,} bytes",
        ("step", "ms", "ratio"),
        [
            ("Raft snapshot of the table (baseline)", snapshot_us / 1000, 1.0),
            ("backup file: copy, serialize, compress, hash", encode / 1000, encode / snapshot_us),
            ("Raft snapshot restored (baseline)", install / 1000, 1.0),
            ("backup checked, inflated and decoded", read / 1000, read / install),
        ],
    )
    return data


def _internal(port: int, code: InternalCode, fields: dict[str, str]) -> RemotingCommand:
    request = RemotingCommand.request(int(code), {"secret": INTERNAL_SECRET, **fields})
    with BlockingClient(f"127.0.0.1:{port}", timeout_s=REQUEST_TIMEOUT_S) as client:
        answer = client.invoke(request)
    if answer.code != ResponseCode.SUCCESS:
        raise SystemExit(f"{code.name} answered {answer.code}: {answer.remark}")
    return answer


def _timed_ms(call: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def _stop(gateways: Sequence[_util.BenchGateway]) -> None:
    for gateway in gateways:
        gateway.proc.terminate()
    for gateway in gateways:
        try:
            gateway.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            gateway.proc.kill()
            gateway.proc.wait()


def _register_all(addr: str, topic_count: int, brokers: int) -> None:
    per_broker = topic_count * 2 // brokers
    with BlockingClient(addr, timeout_s=REQUEST_TIMEOUT_S) as client:
        for index in range(brokers):
            wrapper = _util.topic_wrapper(_util.broker_topics(index, per_broker, topic_count))
            answer = client.invoke(_util.register_request(index, wrapper))
            if answer.code != ResponseCode.SUCCESS:
                raise SystemExit(f"registration {index} refused: {answer.remark}")


def through_a_node(root: Path, args: argparse.Namespace) -> Path:
    """Part 2; returns a backup file taken from the cluster (part 3 restores it)."""
    env = {"NAMESRV_INTERNAL_SECRET": INTERNAL_SECRET}
    folder = root / "old"
    folder.mkdir()
    gateways = _util.start_gateways(folder, "raft", env=env)
    try:
        _register_all(gateways[0].addr, args.topics, args.brokers)
        follower = gateways[2]
        linearizable = {CONSISTENCY_FIELD: CONSISTENCY_LINEARIZABLE}
        status_ms = _timed_ms(
            lambda: _internal(follower.internal_port, InternalCode.NODE_STATUS, linearizable),
            args.repeats,
        )
        answers: list[bytes] = []
        backup_ms = _timed_ms(
            lambda: answers.append(
                _internal(follower.internal_port, InternalCode.BACKUP, {}).body or b""
            ),
            args.repeats,
        )
        status_ms += _timed_ms(
            lambda: _internal(follower.internal_port, InternalCode.NODE_STATUS, linearizable),
            args.repeats,
        )
    finally:
        _stop(gateways)
    read = backup.read_backup(answers[-1])
    path = root / "bench.nsbackup"
    backup.write_backup_file(path, answers[-1])
    base = statistics.median(status_ms)
    _util.print_table(
        f"through a follower of 3 raft gateways ({read.table.queue_row_count():,} queue "
        f"entries, index {read.header.index}; median of {args.repeats} and "
        f"{2 * args.repeats} calls)",
        ("request", "median ms", "max ms", "ratio"),
        [
            ("NODE_STATUS, linearizable (baseline)", base, max(status_ms), 1.0),
            (
                "BACKUP",
                statistics.median(backup_ms),
                max(backup_ms),
                statistics.median(backup_ms) / base,
            ),
        ],
    )
    return path


def _answers_route(addrs: Sequence[str], topic: str) -> float:
    """Seconds until every gateway (remoting address) routes ``topic``."""
    start = time.perf_counter()
    deadline = start + ROUTE_WAIT_S
    pending = list(addrs)
    while pending:
        if time.perf_counter() > deadline:
            raise SystemExit(f"{topic} not routed within {ROUTE_WAIT_S:.0f} s")
        with BlockingClient(pending[0], timeout_s=REQUEST_TIMEOUT_S) as client:
            answer = client.invoke(_util.route_request(topic))
        if answer.code == ResponseCode.SUCCESS:
            pending.pop(0)
        else:
            time.sleep(POLL_S)
    return time.perf_counter() - start


def restore(root: Path, path: Path, args: argparse.Namespace) -> None:
    """Part 3: restored gateways against empty ones, started the same way."""
    env = {"NAMESRV_INTERNAL_SECRET": INTERNAL_SECRET}
    rows = []
    for label, extra in (
        ("empty (baseline)", ()),
        ("--restore-state", ("--restore-state", str(path))),
    ):
        folder = root / label.split()[0].strip("-")
        folder.mkdir()
        start = time.perf_counter()
        gateways = _util.start_gateways(folder, "raft", args=extra, env=env)
        ready_s = time.perf_counter() - start
        try:
            if not extra:  # an empty cluster routes nothing until a broker registers
                _register_all(gateways[0].addr, 2, 2)
            routed_s = ready_s + _answers_route([g.addr for g in gateways], _util.topic_name(0))
        finally:
            _stop(gateways)
        rows.append((label, ready_s, routed_s))
    base = rows[0][2]
    _util.print_table(
        "restore: 3 raft gateways started (each migrates its databases first)",
        ("start", "ready s", "routing on all 3 s", "ratio"),
        [(label, ready, routed, routed / base) for label, ready, routed in rows],
    )


def _kill(pids: Sequence[int]) -> None:
    """SIGKILL ``pids`` and wait until each is gone (a zombie counts as gone)."""
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while any(launcher.process_start_ticks(pid) is not None for pid in pids):
        if time.monotonic() > deadline:
            raise SystemExit(f"{pids} still run {GONE_TIMEOUT_S:.0f} s after SIGKILL")
        time.sleep(POLL_S)
    launcher.reap_children()


def recover(root: Path, args: argparse.Namespace) -> dict[str, float]:
    """Part 4: ``cluster_recover`` of a launched 3-node raft cluster that lost n2 and n3,
    step by step, against ``cluster restart`` of the survivor; the figures, in seconds."""
    plan = launcher.plan_ports(
        root / "cluster",
        nodes=3,
        mode=launcher.MODE_RAFT,
        base_port=0,
        web_base_port=0,
        internal_base_port=0,
        redis_port=0,
        raft_base_port=0,
    )
    up = launcher.cluster_up(plan)
    try:
        survivor, *lost = up["nodes"]
        _register_all(survivor["remoting_addr"], args.topics, args.brokers)
        # Each restart waits until n1 applied the leader's commit index: by the loss,
        # the survivor holds the whole table.
        restart_s = []
        for _ in range(args.restarts):
            start = time.perf_counter()
            launcher.cluster_restart_node(plan.run_dir, survivor["id"])
            restart_s.append(time.perf_counter() - start)
        _kill([pid for node in lost for pid in (node["gateway_pid"], node["web_pid"])])
        summary = launcher.cluster_recover(plan.run_dir, survivor["id"])
        last_topic = _util.topic_name(args.topics - 1)
        routed_s = _answers_route([survivor["remoting_addr"]], last_topic)
    finally:
        launcher.cluster_down(plan.run_dir)
        launcher.reap_children()
    steps: dict[str, float] = summary["timings_s"]
    # recover's total_s also holds the wait for the snapshot (the steps are rounded to ms).
    timed = sum(steps[key] for key in ("state_s", "others_s", "restart_s", "commit_s"))
    snapshot_s = max(0.0, steps["total_s"] - timed)
    base = statistics.median(restart_s)
    figures = {"cluster_restart_s": base, **steps, "snapshot_s": snapshot_s, "routed_s": routed_s}
    state = summary["state"]
    steps_rows = [
        ("1. n1's state read (BACKUP, local) and saved", steps["state_s"]),
        ("2. n2, n3 taken out (folders renamed, cluster.json)", steps["others_s"]),
        ("3. n1 restarted alone with --restore-state", steps["restart_s"]),
        ("4. a write committed (linearizable NODE_STATUS)", steps["commit_s"]),
        ("5. the restored state compacted into its snapshot", snapshot_s),
        ("recover in all (cluster_recover's total_s)", steps["total_s"]),
        ("then: n1 routes the table's last topic", routed_s),
    ]
    _util.print_table(
        f"recover after quorum loss: 3 launched raft nodes, {args.topics:,} topics, n2 and "
        f"n3 SIGKILLed, n1 recovered from index {state['index']} term {state['term']} "
        f"(restarts: {', '.join(f'{s:.2f}' for s in restart_s)} s)",
        ("step", "s", "ratio"),
        [
            (f"cluster restart n1, median of {args.restarts} (baseline)", base, 1.0),
            *((label, seconds, seconds / base) for label, seconds in steps_rows),
        ],
    )
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=5000, help="topics in the table")
    parser.add_argument(
        "--brokers", type=int, default=20, help="brokers, each serving 2 x topics / brokers"
    )
    parser.add_argument(
        "--repeats", type=int, default=10, help="requests timed per kind through a node"
    )
    parser.add_argument(
        "--restarts", type=int, default=3, help="cluster restarts of n1 timed (recover's baseline)"
    )
    parser.add_argument(
        "--part",
        choices=("all", "backup", "recover"),
        default="all",
        help="backup: parts 1 to 3; recover: part 4 (recover after quorum loss)",
    )
    args = parser.parse_args(argv)
    if args.restarts < 1:
        parser.error("--restarts must be at least 1")
    print(_util.machine_notes())
    root = Path(tempfile.mkdtemp(prefix="bench-backup-"))
    try:
        if args.part in ("all", "backup"):
            in_process(build_table(args.topics, args.brokers))
            path = through_a_node(root, args)
            restore(root, path, args)
        if args.part in ("all", "recover"):
            recover(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
