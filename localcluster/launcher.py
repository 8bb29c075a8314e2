"""Start, watch and stop a local NameServer cluster: plain functions.

Nothing here loads Django (import-linter checks it): the launcher talks to the
gateways over their internal port and starts the Django processes as commands.

``manage.py cluster up|down|status`` is a thin shell over this module, and the
integration tests call the same functions. Everything a cluster owns lives in
one run folder::

    run/local/
      cluster.json            the summary (ports, pids); NAMESRV_CLUSTER_FILE
      secret, raft.secret,    the cluster's secrets, mode 0600 (localcluster.run_secrets)
      django.secret, redis.secret, ha.secret, acl/
      redis/                  redis.conf, redis.log, redis.pid
      celery/                 worker.{log,pid}, beat.{log,pid}, beat-schedule
      demo/                   demo.{log,pid} (only with --demo-sim: simulated brokers)
      brokers/<name>-<id>/    real demo brokers (--demo): spec, ready file, pid, log, store
      n1/ n2/ ...             namesrv.sqlite3, gateway.{log,pid,ready.json}, web.{log,pid},
                              raft/ (raft mode: the node's journal and snapshot)

In raft mode each node also gets a Raft port (``--raft-base-port``, default
7101 + i) and every gateway is given every member as a peer. ``add-node``
starts n(N+1) and asks the leader to add it; ``remove-node`` asks a member to
remove a node, then stops it; both rewrite cluster.json, which Celery beat and
the web processes read to know the members.

A pid file records the pid *and* the process start time read from ``/proc``, so
``down`` never signals a process that merely reused a pid: it stops exactly what
``up`` started and nothing else.

The code is split by job: :mod:`~localcluster.plan` (constants, nodes, ports),
:mod:`~localcluster.processes` (pid files, start/stop), :mod:`~localcluster.run_folder`,
:mod:`~localcluster.readiness`, :mod:`~localcluster.argv` (environments and command
lines), :mod:`~localcluster.lifecycle` (up/status/down, demo brokers) and
:mod:`~localcluster.membership` (add-node/remove-node). This module re-exports the
names callers use, so ``from localcluster import launcher`` stays the one entry point.
"""

from __future__ import annotations

from localcluster.argv import (
    ASGI_APP as ASGI_APP,
)
from localcluster.argv import (
    LIVE_EVENT_PUBLISHER as LIVE_EVENT_PUBLISHER,
)
from localcluster.argv import (
    WEB_WORKERS_ENV as WEB_WORKERS_ENV,
)
from localcluster.argv import (
    ClusterEnv as ClusterEnv,
)
from localcluster.argv import (
    asgi_server_argv as asgi_server_argv,
)
from localcluster.argv import (
    gateway_argv as gateway_argv,
)
from localcluster.argv import (
    web_argv as web_argv,
)
from localcluster.lifecycle import (
    _node_summary as _node_summary,
)
from localcluster.lifecycle import (
    cluster_down as cluster_down,
)
from localcluster.lifecycle import (
    cluster_status as cluster_status,
)
from localcluster.lifecycle import (
    cluster_up as cluster_up,
)
from localcluster.lifecycle import (
    record_foreground as record_foreground,
)
from localcluster.lifecycle import (
    write_cluster_file as write_cluster_file,
)
from localcluster.membership import (
    cluster_add_node as cluster_add_node,
)
from localcluster.membership import (
    cluster_remove_node as cluster_remove_node,
)
from localcluster.membership import (
    plan_from_cluster_file as plan_from_cluster_file,
)
from localcluster.plan import (
    CLUSTER_FILE_NAME as CLUSTER_FILE_NAME,
)
from localcluster.plan import (
    DEFAULT_BASE_PORT as DEFAULT_BASE_PORT,
)
from localcluster.plan import (
    DEFAULT_INTERNAL_BASE_PORT as DEFAULT_INTERNAL_BASE_PORT,
)
from localcluster.plan import (
    DEFAULT_METRICS_BASE_PORT as DEFAULT_METRICS_BASE_PORT,
)
from localcluster.plan import (
    DEFAULT_MODE as DEFAULT_MODE,
)
from localcluster.plan import (
    DEFAULT_NODES as DEFAULT_NODES,
)
from localcluster.plan import (
    DEFAULT_RAFT_BASE_PORT as DEFAULT_RAFT_BASE_PORT,
)
from localcluster.plan import (
    DEFAULT_REDIS_PORT as DEFAULT_REDIS_PORT,
)
from localcluster.plan import (
    DEFAULT_WEB_BASE_PORT as DEFAULT_WEB_BASE_PORT,
)
from localcluster.plan import (
    DEMO_BROKER_BASE_PORT as DEMO_BROKER_BASE_PORT,
)
from localcluster.plan import (
    LOOPBACK as LOOPBACK,
)
from localcluster.plan import (
    MODE_RAFT as MODE_RAFT,
)
from localcluster.plan import (
    NODE_DB_FILE_NAME as NODE_DB_FILE_NAME,
)
from localcluster.plan import (
    ClusterPlan as ClusterPlan,
)
from localcluster.plan import (
    LauncherError as LauncherError,
)
from localcluster.plan import (
    NodePlan as NodePlan,
)
from localcluster.plan import (
    PortInUseError as PortInUseError,
)
from localcluster.plan import (
    free_port as free_port,
)
from localcluster.plan import (
    parse_node_raft_dial as parse_node_raft_dial,
)
from localcluster.plan import (
    parse_node_skew_allowance as parse_node_skew_allowance,
)
from localcluster.plan import (
    plan_ports as plan_ports,
)
from localcluster.plan import (
    with_gateway_options as with_gateway_options,
)
from localcluster.processes import (
    PidRecord as PidRecord,
)
from localcluster.processes import (
    is_alive as is_alive,
)
from localcluster.processes import (
    process_start_ticks as process_start_ticks,
)
from localcluster.processes import (
    read_pid_file as read_pid_file,
)
from localcluster.processes import (
    reap_children as reap_children,
)
from localcluster.processes import (
    start_process as start_process,
)
from localcluster.processes import (
    write_pid_file as write_pid_file,
)
from localcluster.readiness import (
    accepts_connections as accepts_connections,
)
from localcluster.readiness import (
    gateway_ready as gateway_ready,
)
from localcluster.readiness import (
    redis_answers as redis_answers,
)
from localcluster.readiness import (
    wait_until as wait_until,
)
from localcluster.run_folder import (
    ProcessSlot as ProcessSlot,
)
from localcluster.run_folder import (
    cluster_node as cluster_node,
)
from localcluster.run_folder import (
    find_redis_server as find_redis_server,
)
from localcluster.run_folder import (
    process_slots as process_slots,
)
from localcluster.run_folder import (
    read_secret as read_secret,
)
from localcluster.run_folder import (
    read_secrets as read_secrets,
)
from localcluster.run_folder import (
    write_redis_config as write_redis_config,
)
