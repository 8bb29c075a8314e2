"""``cluster up``, ``status`` and ``down``, and the demo brokers."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from localcluster import broker_control
from localcluster.argv import (
    ClusterEnv,
    beat_argv,
    demo_argv,
    gateway_argv,
    node_tls,
    web_argv,
    worker_argv,
    write_node_config_file,
)
from localcluster.backups import check_restore, restore_argv, wait_restored
from localcluster.broker_control import BrokerSpec
from localcluster.demo import DEMO_TOPICS
from localcluster.plan import (
    CLUSTER_FILE_NAME,
    CONNECT_TIMEOUT_S,
    DEMO_BROKER_BASE_PORT,
    DEMO_BROKER_NAMES,
    DEMO_BROKER_PORT_STEP,
    DEMO_BROKER_SETTINGS,
    DEMO_TOPIC_QUEUE_NUMS,
    LOOPBACK,
    MIGRATE_TIMEOUT_S,
    MODE_RAFT,
    PROCESS_ORDER,
    PROJECT_DIR,
    READY_TIMEOUT_S,
    STOP_GRACE_S,
    STOP_STAGES,
    ClusterPlan,
    LauncherError,
    NodePlan,
    free_port,
)
from localcluster.processes import (
    PidRecord,
    is_alive,
    log_tail,
    process_start_ticks,
    read_pid_file,
    start_process,
    stop_processes,
    write_pid_file,
)
from localcluster.readiness import (
    accepts_connections,
    gateway_ready,
    node_status,
    redis_answers,
    wait_until,
)
from localcluster.run_folder import (
    find_redis_server,
    process_slots,
    read_cluster_file,
    read_secret,
    read_secrets,
    write_redis_config,
)
from localcluster.run_secrets import RunSecrets, create_run_secrets
from localcluster.tls_files import (
    BROKER_PROPERTIES,
    CA_NAME,
    CLIENT_PROPERTIES,
    TLS_DIR,
    ensure_run_tls,
)
from node import preparation, processes as node_processes
from node.files import atomic_write
from remoting.acl import Credentials
from remoting.model import MASTER_ID, PERM_READ, PERM_WRITE
from remoting.tls import TlsMode

# ------------------------------------------------------------------- orchestration

WORKER_READY_MARK = b" ready."


def running_processes(run_dir: Path, node_ids: Sequence[str]) -> list[PidRecord]:
    """The processes of the cluster in ``run_dir`` that are still alive."""
    alive = []
    for slot in process_slots(run_dir, node_ids):
        record = read_pid_file(slot.pid_path)
        if record is not None and is_alive(record):
            alive.append(record)
    return alive


def known_node_ids(run_dir: Path) -> list[str]:
    """Node ids from the cluster file, or from the node folders when it is missing."""
    cluster_file = Path(run_dir) / CLUSTER_FILE_NAME
    if cluster_file.exists():
        with contextlib.suppress(LauncherError):
            return [str(n["id"]) for n in read_cluster_file(cluster_file).get("nodes", [])]
    folders = sorted(p.name for p in Path(run_dir).glob("n*") if p.is_dir())
    return [name for name in folders if name[1:].isdigit()]


def _node_summary(
    plan: ClusterPlan, node: NodePlan, pids: Mapping[str, int | None]
) -> dict[str, Any]:
    """One node's entry of the cluster summary."""
    raft: dict[str, Any] = {"raft_port": node.raft_port, "raft_addr": node.raft_addr}
    if node.raft_dial:
        raft["raft_dial"] = dict(node.raft_dial)
    if node.skew_allowance_ms is not None:
        raft["skew_allowance_ms"] = node.skew_allowance_ms
    return {
        **(raft if plan.mode == MODE_RAFT else {}),
        "id": node.node_id,
        "host": LOOPBACK,
        "remoting_port": node.remoting_port,
        "web_port": node.web_port,
        "internal_port": node.internal_port,
        **(
            {"metrics_url": f"http://{LOOPBACK}:{node.metrics_port}/metrics"}
            if node.metrics_port
            else {}
        ),
        "metrics_port": node.metrics_port,
        "gateway_pid": pids.get(f"{node.node_id}-gateway"),
        "web_pid": pids.get(f"{node.node_id}-web"),
        "remoting_addr": f"{LOOPBACK}:{node.remoting_port}",
        "console_url": node_processes.console_url(
            node_tls(plan, node), f"{LOOPBACK}:{node.web_port}"
        ),
        "log_dir": str(plan.node_dir(node.node_id)),
    }


def _retired_summary(node: NodePlan) -> dict[str, Any]:
    """A retired node's entry (``cluster recover``): its id and ports, kept unused."""
    return {
        "id": node.node_id,
        "raft_addr": node.raft_addr,
        "raft_port": node.raft_port,
        "remoting_port": node.remoting_port,
        "web_port": node.web_port,
        "internal_port": node.internal_port,
        "metrics_port": node.metrics_port,
    }


def ensure_plan_tls(plan: ClusterPlan) -> None:
    """Make (or keep) the run's CA and certificates when the plan asks for TLS."""
    if plan.tls is not TlsMode.DISABLED:
        ensure_run_tls(plan.run_dir, {node.node_id: () for node in plan.nodes})


def tls_client_config(plan: ClusterPlan) -> Path | None:
    """The run's client TLS settings (tls/client.properties); None without TLS."""
    if plan.tls is TlsMode.DISABLED:
        return None
    return plan.run_dir / TLS_DIR / CLIENT_PROPERTIES


def tls_summary(plan: ClusterPlan) -> dict[str, Any]:
    """The summary's ``tls``: the mode, and with TLS the CA clients check the nodes
    against and the client settings file (``NAMESRV_TLS_CONFIG_FILE``)."""
    if plan.tls is TlsMode.DISABLED:
        return {"mode": plan.tls.value}
    folder = plan.run_dir / TLS_DIR
    return {
        "mode": plan.tls.value,
        "ca_file": str(folder / f"{CA_NAME}.pem"),
        "client_config": str(tls_client_config(plan)),
    }


def cluster_summary(plan: ClusterPlan, pids: Mapping[str, int | None]) -> dict[str, Any]:
    """The machine-readable summary ``up --json`` prints and cluster.json holds."""
    retired = [_retired_summary(node) for node in plan.retired]
    return {
        **({"retired": retired} if retired else {}),
        "run_dir": str(plan.run_dir),
        "mode": plan.mode,
        "acl": RunSecrets(plan.run_dir, "", plan.acl).summary(),
        "tls": tls_summary(plan),
        "redis": {
            "port": plan.redis_port,
            "pid": pids.get("redis"),
            "url": f"redis://{LOOPBACK}:{plan.redis_port}/0",
        },
        "celery": {"worker_pid": pids.get("worker"), "beat_pid": pids.get("beat")},
        "demo_pid": pids.get("demo"),
        "nodes": [_node_summary(plan, node, pids) for node in plan.nodes],
        "brokers": [
            {"label": b.spec.label, "addr": b.spec.addr, "pid": b.pid, "running": b.running}
            for b in broker_control.local_brokers(plan.run_dir)
        ],
    }


def demo_broker_specs(
    plan: ClusterPlan, base_port: int = DEMO_BROKER_BASE_PORT
) -> list[BrokerSpec]:
    """broker-a and broker-b, a master and a slave each, registering with every node
    (signed with the run's broker account when the ACL is on).

    ``base_port`` 0 takes free ports (two per broker: remoting and HA), so two local
    clusters with demo brokers can run side by side.
    """
    namesrv = tuple(f"{LOOPBACK}:{node.remoting_port}" for node in plan.nodes)
    secrets = RunSecrets(plan.run_dir, "", plan.acl)
    tls = {}
    if plan.tls is not TlsMode.DISABLED:
        tls["tlsConfigFile"] = str(plan.run_dir / TLS_DIR / BROKER_PROPERTIES)
    specs = []
    taken: set[int] = set()
    for index, name in enumerate(DEMO_BROKER_NAMES):
        for broker_id in (0, 1):
            if base_port == 0:
                port = free_port(avoid=taken)
                taken.add(port)
                ha_port = free_port(avoid=taken)
                taken.add(ha_port)
            else:
                port = base_port + (2 * index + broker_id) * DEMO_BROKER_PORT_STEP
                ha_port = port + 1
            settings = {**DEMO_BROKER_SETTINGS, **secrets.broker_settings(), **tls}
            specs.append(BrokerSpec(name, broker_id, port, ha_port, namesrv, settings=settings))
    return specs


def start_demo_brokers(plan: ClusterPlan, base_port: int = DEMO_BROKER_BASE_PORT) -> list[str]:
    """Start the real demo brokers (masters first, so slaves find them); their labels."""
    specs = demo_broker_specs(plan, base_port)
    busy = [s.addr for s in specs if accepts_connections(s.port) or accepts_connections(s.ha_port)]
    if busy:
        raise LauncherError(f"demo broker ports already in use: {', '.join(busy)}")
    started: list[str] = []
    try:
        for spec in sorted(specs, key=lambda s: (s.broker_id, s.broker_name)):
            broker_control.start_broker(plan.run_dir, spec)
            started.append(spec.label)
        admin = read_secrets(plan.run_dir, acl=plan.acl).admin_credentials()
        for spec in specs:
            if spec.broker_id == MASTER_ID:
                create_demo_topics(spec.addr, admin)
    except broker_control.BrokerControlError as exc:
        stop_brokers(plan.run_dir)
        raise LauncherError(str(exc)) from exc
    return started


def create_demo_topics(master_addr: str, admin: Credentials | None = None) -> None:
    """Create the demo topics on a master, as an operator would from the console (signed
    as the admin); the broker then registers them with every NameServer (and its slave
    syncs them)."""
    for topic in DEMO_TOPICS:
        broker_control.create_topic(
            master_addr,
            topic,
            read_queue_nums=DEMO_TOPIC_QUEUE_NUMS,
            write_queue_nums=DEMO_TOPIC_QUEUE_NUMS,
            perm=PERM_READ | PERM_WRITE,
            credentials=admin,
        )


def stop_brokers(run_dir: Path) -> list[str]:
    """Stop every running broker of the run (SIGTERM: they unregister); their labels."""
    stopped = []
    for broker in broker_control.local_brokers(run_dir):
        if broker.running and broker_control.stop_broker(run_dir, broker.spec.label):
            stopped.append(broker.spec.label)
    return stopped


def write_cluster_file(plan: ClusterPlan, pids: Mapping[str, int | None]) -> Path:
    """Write cluster.json; the gateways and Celery read it through NAMESRV_CLUSTER_FILE."""
    path = plan.run_dir / CLUSTER_FILE_NAME
    atomic_write(path, json.dumps(cluster_summary(plan, pids), indent=2) + "\n")
    return path


def refuse_running(run_dir: Path, node_ids: Sequence[str] = ()) -> None:
    """LauncherError naming the live processes when a cluster runs in ``run_dir`` (its
    recorded nodes and ``node_ids``); checked before ports, the clearer reason."""
    leftover = running_processes(run_dir, sorted(set(node_ids) | set(known_node_ids(run_dir))))
    if leftover:
        names = ", ".join(f"{r.name} (pid {r.pid})" for r in leftover)
        raise LauncherError(
            f"a cluster is already running in {run_dir}: {names}. "
            f"Run `manage.py cluster down --run-dir {run_dir}` first."
        )


def _prepare_run_dir(plan: ClusterPlan) -> None:
    """Refuse to start over a live cluster; clear what a dead one left behind."""
    node_ids = [n.node_id for n in plan.nodes]
    refuse_running(plan.run_dir, node_ids)
    # Owner only: the folder holds the secrets and the shared database (password hashes,
    # API tokens), whatever the umask.
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    plan.run_dir.chmod(0o700)
    for slot in process_slots(plan.run_dir, node_ids):
        slot.pid_path.unlink(missing_ok=True)
    for node in plan.nodes:
        folder = plan.node_dir(node.node_id)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "gateway.ready.json").unlink(missing_ok=True)
    (plan.run_dir / "celery").mkdir(parents=True, exist_ok=True)


def migrate_nodes(plan: ClusterPlan, env: ClusterEnv, timeout_s: float = MIGRATE_TIMEOUT_S) -> None:
    """Migrate the cluster's shared database once, then every node's projection at once;
    a database already migrated for this code, or fresh and copied from the template of
    its schema, is left alone (:mod:`node.preparation`)."""
    schema = preparation.schema_fingerprint()
    shared, projection = node_processes.migrate_argvs()
    first = plan.nodes[0]
    shared_db = preparation.sqlite_file(env.for_node(plan, first).get("DATABASE_URL", ""))
    _migrate(plan, env, [(first, shared_db)], shared, node_processes.SHARED_DB, schema, timeout_s)
    projections = [
        (node, Path(env.for_node(plan, node)[node_processes.PROJECTION_DB_ENV]))
        for node in plan.nodes
    ]
    _migrate(plan, env, projections, projection, node_processes.PROJECTION_DB, schema, timeout_s)


def prepare_nodes(plan: ClusterPlan, env: ClusterEnv, timeout_s: float = MIGRATE_TIMEOUT_S) -> None:
    """:func:`migrate_nodes`, while one ``collectstatic`` fills the run folder's static
    folder, which every node's web process serves (they all run this checkout's code);
    skipped when the folder was collected for this code, or copied from the template."""
    static = preparation.static_fingerprint()
    root = plan.run_dir / node_processes.STATIC_DIR_NAME
    if preparation.is_prepared(root, static) or preparation.static_from_template(root, static):
        migrate_nodes(plan, env, timeout_s)
        return
    log_path = plan.run_dir / "collectstatic.log"
    with open(log_path, "ab") as log:
        collecting = subprocess.Popen(
            node_processes.collectstatic_argv(),
            cwd=PROJECT_DIR,
            env=env.for_node(plan, plan.nodes[0]),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        migrate_nodes(plan, env, timeout_s)
        code = collecting.wait(timeout=timeout_s)
    except BaseException:
        collecting.kill()
        collecting.wait()
        raise
    if code != 0:
        raise LauncherError(
            f"collectstatic failed (exit {code}, {log_path}):\n{log_tail(log_path)}"
        )
    preparation.keep_static(root, static)


def _migrate(
    plan: ClusterPlan,
    env: ClusterEnv,
    targets: Sequence[tuple[NodePlan, Path | None]],
    argv: Sequence[str],
    alias: str,
    schema: str,
    timeout_s: float,
) -> None:
    """``argv`` (migrate ``alias``) for each node whose database (None: on a server) is
    not prepared for ``schema``, all at once; each stamped after."""
    running = []
    for node, db in targets:
        if preparation.database_ready(db, alias, schema):
            continue
        fresh = db is not None and not db.exists()
        log_path = plan.node_dir(node.node_id) / "migrate.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                argv,
                cwd=PROJECT_DIR,
                env=env.for_node(plan, node),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        running.append((node, db, fresh, proc, log_path))
    failures = []
    for node, db, fresh, proc, log_path in running:
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if code != 0:
            failures.append(f"{node.node_id} (exit {code}, {log_path}):\n{log_tail(log_path)}")
        elif db is not None:
            preparation.keep_database(db, alias, schema, template=fresh)
    if failures:
        raise LauncherError("migrating the node databases failed: " + "\n".join(failures))


class _Starter:
    """Starts the processes of one ``up`` and remembers them for a rollback."""

    def __init__(self, plan: ClusterPlan, env: ClusterEnv) -> None:
        self.plan = plan
        self.env = env
        self.slots = {
            s.name: s for s in process_slots(plan.run_dir, [n.node_id for n in plan.nodes])
        }
        self.records: dict[str, PidRecord] = {}

    def start(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> PidRecord:
        """Start one managed process in its slot."""
        slot = self.slots[name]
        record = start_process(name, argv, env=env, log_path=slot.log_path, pid_path=slot.pid_path)
        self.records[name] = record
        return record

    def wait(self, name: str, check: Callable[[], bool], what: str, timeout_s: float) -> None:
        """Wait until ``check`` holds for the process ``name``."""
        wait_until(
            check,
            what=what,
            timeout_s=timeout_s,
            alive=self.records[name],
            log_path=self.slots[name].log_path,
        )

    def rollback(self) -> None:
        """Stop everything started so far (used when ``up`` fails half-way)."""
        order = {kind: i for i, kind in enumerate(PROCESS_ORDER)}
        records = sorted(self.records.values(), key=lambda r: order[self.slots[r.name].kind])
        stop_processes(records)
        for record in records:
            self.slots[record.name].pid_path.unlink(missing_ok=True)

    def pids(self) -> dict[str, int | None]:
        """Name to pid of everything started."""
        return {name: record.pid for name, record in self.records.items()}


def _log_size(path: Path) -> int:
    """The bytes the log at ``path`` holds now (0 when there is none)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _log_contains(path: Path, mark: bytes, after: int = 0) -> bool:
    """True when the log at ``path`` contains ``mark`` past its first ``after`` bytes
    (a restart appends to the log: an earlier run's lines do not count)."""
    try:
        with path.open("rb") as log:
            log.seek(after)
            return mark in log.read()
    except OSError:
        return False


def _start_redis(starter: _Starter, timeout_s: float) -> None:
    """Start Redis with its own config and wait for PING."""
    plan = starter.plan
    secrets = starter.env.secrets
    password = None if secrets is None else secrets.redis_password()
    config = write_redis_config(plan.run_dir, plan.redis_port, password)
    starter.start("redis", [find_redis_server(), str(config)], starter.env.base())
    starter.wait("redis", lambda: redis_answers(plan.redis_port, password), "redis", timeout_s)


def _start_node_processes(starter: _Starter, gateway_extra: Sequence[str] = ()) -> None:
    """Start every gateway and web process (they import Django in parallel); each
    gateway is also given ``gateway_extra`` (a restore's ``--restore-state``)."""
    plan = starter.plan
    for node in plan.nodes:
        config = write_node_config_file(plan, node, starter.env)
        node_processes.reset_metrics_dir(config)
        env = starter.env.for_node(plan, node)
        argv = [*gateway_argv(plan, node, starter.env), *gateway_extra]
        starter.start(f"{node.node_id}-gateway", argv, env)
        starter.start(f"{node.node_id}-web", web_argv(node, plan), env)


def _wait_node_processes(starter: _Starter, timeout_s: float) -> None:
    """Wait until each gateway answers NODE_STATUS and each web port accepts connections."""
    plan = starter.plan
    secret = starter.env.secret
    for node in plan.nodes:
        ready_file = plan.node_dir(node.node_id) / "gateway.ready.json"
        starter.wait(
            f"{node.node_id}-gateway",
            functools.partial(gateway_ready, ready_file, node.internal_port, secret),
            f"{node.node_id} gateway",
            timeout_s,
        )
    for node in plan.nodes:
        starter.wait(
            f"{node.node_id}-web",
            functools.partial(accepts_connections, node.web_port),
            f"{node.node_id} web",
            timeout_s,
        )


def _start_celery(starter: _Starter, timeout_s: float) -> None:
    """Start the Celery worker and beat; wait until the worker reports ready."""
    run_dir = starter.plan.run_dir
    node_ids = [node.node_id for node in starter.plan.nodes]
    worker_log = starter.slots["worker"].log_path
    before = _log_size(worker_log)
    starter.start("worker", worker_argv(run_dir, node_ids), starter.env.base())
    starter.start("beat", beat_argv(run_dir), starter.env.base())
    starter.wait(
        "worker",
        lambda: _log_contains(worker_log, WORKER_READY_MARK, before),
        "celery worker",
        timeout_s,
    )


def cluster_up(
    plan: ClusterPlan,
    *,
    demo: bool = False,
    demo_sim: bool = False,
    demo_broker_base_port: int = DEMO_BROKER_BASE_PORT,
    extra_env: Mapping[str, str] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    restore: Path | None = None,
) -> dict[str, Any]:
    """Start a whole cluster as planned and return its summary once every part is ready.

    Order: Redis, node migrations (and the static files), gateways + web processes,
    Celery worker and beat, then the demo brokers: real ones with ``demo`` (two groups,
    master + slave each), simulated ones with ``demo_sim``. Anything that fails stops what was
    started before it. ``restore``: a backup every node starts from, checked with the run
    folder before anything starts (:mod:`localcluster.backups`).
    """
    restored = None if restore is None else check_restore(plan, restore)
    _prepare_run_dir(plan)
    run_secrets = create_run_secrets(plan.run_dir, acl=plan.acl)
    ensure_plan_tls(plan)
    cluster_file = write_cluster_file(plan, {})
    env = ClusterEnv(
        redis_url=f"redis://{LOOPBACK}:{plan.redis_port}/0",
        secret=run_secrets.internal,
        cluster_file=cluster_file,
        mode=plan.mode,
        extra=dict(extra_env or {}),
        secrets=run_secrets,
        tls_client_config=tls_client_config(plan),
    )
    starter = _Starter(plan, env)
    try:
        _start_redis(starter, ready_timeout_s)
        prepare_nodes(plan, env)
        _start_node_processes(starter, () if restore is None else restore_argv(restore))
        _start_celery(starter, ready_timeout_s)
        _wait_node_processes(starter, ready_timeout_s)
        if restore is not None:
            wait_restored(plan)
        if demo_sim:
            starter.start("demo", demo_argv(cluster_file), env.base())
        if demo:
            start_demo_brokers(plan, demo_broker_base_port)
    except BaseException:
        stop_brokers(plan.run_dir)
        starter.rollback()
        raise
    write_cluster_file(plan, starter.pids())
    summary = cluster_summary(plan, starter.pids())
    if restored is not None:
        summary["restored"] = {"file": str(restore), **restored.header.summary()}
    return summary


def cluster_status(run_dir: Path, *, ask_nodes: bool = True) -> dict[str, Any]:
    """Each managed process of the cluster in ``run_dir`` with its pid and liveness.

    With ``ask_nodes``, each live gateway's NODE_STATUS answer is included too
    (``None`` with an ``error`` when it does not answer).
    """
    run_dir = Path(run_dir).resolve()
    node_ids = known_node_ids(run_dir)
    processes = []
    for slot in process_slots(run_dir, node_ids):
        record = read_pid_file(slot.pid_path)
        if record is None:
            continue
        processes.append(
            {
                "name": slot.name,
                "pid": record.pid,
                "alive": is_alive(record),
                "log": str(slot.log_path),
            }
        )
    alive = {str(p["name"]) for p in processes if p["alive"]}
    return {
        "run_dir": str(run_dir),
        "processes": processes,
        "running": bool(processes) and all(p["alive"] for p in processes),
        "nodes": _node_statuses(run_dir, alive) if ask_nodes else [],
    }


def _node_statuses(run_dir: Path, alive: set[str]) -> list[dict[str, Any]]:
    """NODE_STATUS of every node whose gateway is alive."""
    from remoting.client import RemotingClientError

    cluster_file = run_dir / CLUSTER_FILE_NAME
    if not cluster_file.exists():
        return []
    nodes = []
    for node in read_cluster_file(cluster_file).get("nodes", []):
        entry: dict[str, Any] = {"id": node["id"], "status": None, "error": None}
        if f"{node['id']}-gateway" not in alive:
            entry["error"] = "gateway not running"
        else:
            try:
                entry["status"] = node_status(
                    int(node["internal_port"]), read_secret(run_dir), CONNECT_TIMEOUT_S
                )
            except (RemotingClientError, LauncherError, ValueError) as exc:
                entry["error"] = str(exc)
        nodes.append(entry)
    return nodes


def cluster_down(run_dir: Path, grace_s: float = STOP_GRACE_S) -> dict[str, Any]:
    """Stop every process the pid files of ``run_dir`` name, in order, and nothing else.

    Each stage of kinds (STOP_STAGES) gets SIGTERM and up to ``grace_s`` before SIGKILL;
    the pid files go away.
    """
    run_dir = Path(run_dir).resolve()
    slots = process_slots(run_dir, known_node_ids(run_dir))
    marker = run_dir / STOPPING_FILE
    # The foreground `up` reads this and does not report the exits as deaths.
    me = os.getpid()
    write_pid_file(marker, PidRecord("down", me, process_start_ticks(me) or 0))
    try:
        # Brokers first, while the gateways still hear their UNREGISTER_BROKER.
        stopped: list[str] = stop_brokers(run_dir)
        killed: list[str] = []
        for stage in STOP_STAGES:
            kind_slots = [s for s in slots if s.kind in stage]
            records = [r for s in kind_slots if (r := read_pid_file(s.pid_path)) is not None]
            live = [r for r in records if is_alive(r)]
            killed += [r.name for r in stop_processes(live, grace_s)]
            stopped += [r.name for r in live]
            for slot in kind_slots:
                slot.pid_path.unlink(missing_ok=True)
        if _end_foreground(run_dir):
            stopped.append("foreground")
    finally:
        marker.unlink(missing_ok=True)
    return {"run_dir": str(run_dir), "stopped": stopped, "killed": killed}


STOPPING_FILE = "stopping"
"""Present while a ``down`` stops the run folder's processes; it holds that ``down``'s pid
record (pid and start time, so a reused pid is not taken for it)."""


def stopping(run_dir: Path) -> bool:
    """True while a ``down`` (of a live process) is stopping ``run_dir``'s processes."""
    record = read_pid_file(Path(run_dir).resolve() / STOPPING_FILE)
    return record is not None and is_alive(record)


FOREGROUND_PID_FILE = "foreground.pid"
"""The ``cluster up --foreground`` process of a run folder (and so the ``make run``
around it): ``down`` from another shell ends it too, instead of leaving it waiting."""


def record_foreground(run_dir: Path) -> Path:
    """Record this process as the run folder's foreground ``up``; the pid file's path."""
    pid = os.getpid()
    path = Path(run_dir).resolve() / FOREGROUND_PID_FILE
    write_pid_file(path, PidRecord("foreground", pid, process_start_ticks(pid) or 0))
    return path


def _end_foreground(run_dir: Path) -> bool:
    """SIGTERM the recorded foreground ``up`` unless it is this process; True if signalled."""
    path = run_dir / FOREGROUND_PID_FILE
    record = read_pid_file(path)
    if record is None or record.pid == os.getpid():
        return False
    path.unlink(missing_ok=True)
    if not is_alive(record):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signal.SIGTERM)
    return True
