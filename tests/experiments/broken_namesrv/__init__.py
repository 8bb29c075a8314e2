"""A deliberately broken NameServer, for the analysis to catch (issue 46, "power").

What is broken: a raft follower answers GET_ROUTEINFO_BY_TOPIC with
``consistency=linearizable`` from a copy of its route answers that it refreshes at most
every :data:`REFRESH_ENV` seconds: it skips the barrier and serves the copy. The leader
answers honestly (a barrier, then its applied state), and so does every node for local
reads: the read front fetches its own copies with local reads, and the prober's local
samples are how the run sees the nodes agree before it starts. A follower is where a real
bug of this kind would hide: the leader's answers alone would pass any check.

The other broken mode issue 46 names, a leader that acknowledges a registration before it
commits, is not here. Every broker registers with every node, and a follower that got the
same registration waits at most a few commit latencies (0.1 to 3 s, docs/RAFT.md) for the
leader's entry before it proposes its own copy, so an early acknowledgement opens a
window of about a tenth of a second; catching it would need runs of its own, which the
suite's time does not have room for.

How it is switched on, and why that way: the patch is test code only. No shipped module
has a branch on it, and no command-line option or setting reaches it. A test runs an
experiment with :func:`launch_env` as ``ExperimentConfig.extra_env``, which the runner
passes to ``launcher.cluster_up`` (as it passes its own variables): that puts the folder
``site/`` first on PYTHONPATH, and Python imports the ``sitecustomize`` module it holds
at the start of every process of the cluster (the venv has no ``sitecustomize`` of its
own for it to shadow, and the gateways run ``python -m namesrv_site.cli run_gateway``,
which honours PYTHONPATH). That module acts only in a gateway process (``run_gateway`` in
``sys.orig_argv``; the read front, web, Celery and simulated broker processes are left
alone) and only when :data:`REFRESH_ENV` is set; there it calls :func:`install`, which
replaces two methods of :class:`gateway.dispatch.RequestDispatcher` when that module is
first imported (before any dispatcher exists, so the handler tables bind the broken
methods).

Linearizable route reads are never answered by the read front (it forwards them to the
gateway, ``gateway.front``), so patching the gateway's dispatcher reaches every read the
experiment makes with ``--read-consistency linearizable``.

Each gateway also writes a journal (:data:`JOURNAL_ENV`, one JSON line per route read it
answered on the patched path: its node, the time, whether it was leader, and the age of
the copy it served), so a test can tell which reads the patch made stale and that the
switch was on at all.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import IO, Any

SITE_DIR = Path(__file__).resolve().parent / "site"
"""The folder put on PYTHONPATH: it holds the ``sitecustomize`` that installs the patch."""
REPO_ROOT = Path(__file__).resolve().parents[3]
"""Where ``tests`` is importable from (the gateway's ``sys.path`` lacks it at start-up)."""
REFRESH_ENV = "BROKEN_NAMESRV_STALE_COPY_S"
"""Seconds between refreshes of a follower's copy of one route answer; set: broken."""
JOURNAL_ENV = "BROKEN_NAMESRV_JOURNAL_DIR"
"""Folder of the journals: ``<node>.jsonl`` per gateway."""
TARGET_MODULE = "gateway.dispatch"
GATEWAY_COMMAND = "run_gateway"


def launch_env(journal_dir: Path, refresh_s: float = 3.0) -> tuple[tuple[str, str], ...]:
    """``ExperimentConfig.extra_env`` that launches a cluster whose followers answer route
    reads from a copy at most ``refresh_s`` old (whatever PYTHONPATH held is kept after
    the patch's folder)."""
    path = [str(SITE_DIR), *filter(None, [os.environ.get("PYTHONPATH", "")])]
    return (
        ("PYTHONPATH", os.pathsep.join(path)),
        (REFRESH_ENV, f"{refresh_s:g}"),
        (JOURNAL_ENV, str(journal_dir)),
    )


def is_gateway(argv: Sequence[str]) -> bool:
    """True for a node's gateway process (``... namesrv_site.cli run_gateway ...``)."""
    return GATEWAY_COMMAND in argv


def node_of(argv: Sequence[str]) -> str:
    """The ``--node`` of a gateway's command line ('' if it has none)."""
    args = list(argv)
    if "--node" in args and args.index("--node") + 1 < len(args):
        return args[args.index("--node") + 1]
    return ""


# ------------------------------------------------------------------ the broken reads


@dataclass(frozen=True, slots=True)
class _Copy:
    """One route answer as a follower keeps it: what to answer, and when it was taken
    (monotonic seconds)."""

    taken_s: float
    code: int
    remark: str | None
    ext_fields: dict[str, str]
    body: bytes | None


class _Journal:
    """Appends one JSON line per patched answer to ``<dir>/<node>.jsonl``."""

    def __init__(self, folder: str, node: str) -> None:
        self.lock = threading.Lock()
        self.file: IO[str] | None = None
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            self.file = (Path(folder) / f"{node or 'gateway'}.jsonl").open("a", buffering=1)
        self.node = node

    def write(self, **row: Any) -> None:
        if self.file is None:
            return
        line = json.dumps({"node": self.node, "ts_ms": int(time.time() * 1000), **row})
        with self.lock:
            self.file.write(line + "\n")


def patch_dispatcher(dispatch: ModuleType, refresh_s: float, journal: _Journal) -> None:
    """Make ``dispatch.RequestDispatcher`` answer route reads from a stale copy on a raft
    follower (see the module doc); the leader, and eventual mode, stay honest."""
    from remoting.codes import ResponseCode
    from remoting.command import make_response

    cls = dispatch.RequestDispatcher
    honest_wait = cls.get_route_info_by_topic
    honest_now = cls.route_answer_now
    kept = (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST)
    copies: dict[tuple[Any, ...], _Copy] = {}

    def stale(self: Any, request: Any) -> Any:
        """The follower's stale answer, or None where the honest path answers."""
        if not dispatch.is_linearizable(request):
            # Local reads stay honest: the read front fetches its own copies this way
            # (a stale one would stay in it until the topic's next change), and the
            # prober's samples are how the run knows the nodes agree.
            return None
        leads = getattr(self.replicator, "is_leader", None)
        if leads is None:  # eventual mode: no leader, no follower
            return None
        if leads():
            journal.write(leader=True)
            return None
        ext = request.ext_fields or {}
        key = (ext.get("topic"), dispatch.wants_standard_json(request), *sorted(ext.items()))
        now = time.monotonic()
        copy = copies.get(key)
        if copy is None or now - copy.taken_s >= refresh_s:
            fresh = self.route_answer(request)  # this node's applied state, no barrier
            if fresh.code not in kept:  # not ready yet: answered as is, nothing kept
                return fresh
            copy = _Copy(now, fresh.code, fresh.remark, dict(fresh.ext_fields or {}), fresh.body)
            copies[key] = copy
        journal.write(
            leader=False, topic=ext.get("topic"), age_ms=round((now - copy.taken_s) * 1000)
        )
        return make_response(
            request, copy.code, remark=copy.remark, ext_fields=dict(copy.ext_fields), body=copy.body
        )

    async def get_route_info_by_topic(self: Any, request: Any, conn: Any) -> Any:
        answer = stale(self, request)
        return answer if answer is not None else await honest_wait(self, request, conn)

    def route_answer_now(self: Any, request: Any) -> Any:
        answer = stale(self, request)
        return answer if answer is not None else honest_now(self, request)

    cls.get_route_info_by_topic = get_route_info_by_topic
    cls.route_answer_now = route_answer_now
    cls.broken_namesrv = f"followers answer route reads from a copy up to {refresh_s:g} s old"


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches :data:`TARGET_MODULE` right after it is executed, wherever it is imported
    from (the gateway's modules are not imported yet when ``sitecustomize`` runs)."""

    def __init__(self, refresh_s: float, journal: _Journal) -> None:
        self.refresh_s = refresh_s
        self.journal = journal

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != TARGET_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        run_module = loader.exec_module  # type: ignore[attr-defined]

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            patch_dispatcher(module, self.refresh_s, self.journal)

        loader.exec_module = exec_module  # type: ignore[attr-defined]
        return spec


def install(argv: Sequence[str], environ: dict[str, str] | os._Environ[str]) -> bool:
    """In a gateway process with :data:`REFRESH_ENV` set: patch the dispatcher when it is
    imported. Returns whether it did."""
    raw = environ.get(REFRESH_ENV, "")
    if not raw or not is_gateway(argv):
        return False
    node = node_of(argv)
    journal = _Journal(environ.get(JOURNAL_ENV, ""), node)
    sys.meta_path.insert(0, _PatchOnImport(float(raw), journal))
    return True
