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
the web processes read to know the members. ``restart ID`` (and ``up --node ID``)
starts one node's gateway and web process again from its node.toml, keeping its
folder (Raft journal, KV file), and records the new pids in cluster.json.
``recover --survivor ID`` starts the survivor of a lost majority again as a one-member
cluster from its applied state and takes the other nodes out (docs/RAFT.md, "Recovery
after quorum loss").

A pid file records the pid *and* the process start time read from ``/proc``, so
``down`` never signals a process that merely reused a pid: it stops exactly what
``up`` started and nothing else.

The code is split by job: :mod:`~localcluster.plan` (constants, nodes, ports),
:mod:`~localcluster.processes` (pid files, start/stop), :mod:`~localcluster.run_folder`,
:mod:`~localcluster.readiness`, :mod:`~localcluster.argv` (environments and command
lines), :mod:`~localcluster.lifecycle` (up/status/down, demo brokers),
:mod:`~localcluster.membership` (add-node/remove-node), :mod:`~localcluster.restart`
(restart, up --node: one node started again), :mod:`~localcluster.backups` (backup,
up --restore) and :mod:`~localcluster.recover` (recover: a one-member cluster from the
survivor of a lost majority). This module re-exports the names
callers use, so ``from localcluster import launcher`` stays the one entry point.
"""

from __future__ import annotations

from localcluster.argv import (
    ASGI_APP as ASGI_APP,
    LIVE_EVENT_PUBLISHER as LIVE_EVENT_PUBLISHER,
    WEB_WORKERS_ENV as WEB_WORKERS_ENV,
    ClusterEnv as ClusterEnv,
    asgi_server_argv as asgi_server_argv,
    gateway_argv as gateway_argv,
    web_argv as web_argv,
)
from localcluster.backups import (
    BACKUP_HELP as BACKUP_HELP,
    backup_arguments as backup_arguments,
    backup_text as backup_text,
    cluster_backup as cluster_backup,
    restore_argument as restore_argument,
    restored_lines as restored_lines,
)
from localcluster.lifecycle import (
    STOPPING_FILE as STOPPING_FILE,
    _node_summary as _node_summary,
    cluster_down as cluster_down,
    cluster_status as cluster_status,
    cluster_up as cluster_up,
    record_foreground as record_foreground,
    refuse_running as refuse_running,
    stopping as stopping,
    write_cluster_file as write_cluster_file,
)
from localcluster.membership import (
    cluster_add_node as cluster_add_node,
    cluster_remove_node as cluster_remove_node,
    plan_from_cluster_file as plan_from_cluster_file,
)
from localcluster.plan import (
    CLUSTER_FILE_NAME as CLUSTER_FILE_NAME,
    DEFAULT_BASE_PORT as DEFAULT_BASE_PORT,
    DEFAULT_INTERNAL_BASE_PORT as DEFAULT_INTERNAL_BASE_PORT,
    DEFAULT_METRICS_BASE_PORT as DEFAULT_METRICS_BASE_PORT,
    DEFAULT_MODE as DEFAULT_MODE,
    DEFAULT_NODES as DEFAULT_NODES,
    DEFAULT_RAFT_BASE_PORT as DEFAULT_RAFT_BASE_PORT,
    DEFAULT_REDIS_PORT as DEFAULT_REDIS_PORT,
    DEFAULT_WEB_BASE_PORT as DEFAULT_WEB_BASE_PORT,
    DEMO_BROKER_BASE_PORT as DEMO_BROKER_BASE_PORT,
    LOOPBACK as LOOPBACK,
    MODE_RAFT as MODE_RAFT,
    NODE_DB_FILE_NAME as NODE_DB_FILE_NAME,
    ClusterPlan as ClusterPlan,
    LauncherError as LauncherError,
    NodePlan as NodePlan,
    PortInUseError as PortInUseError,
    free_port as free_port,
    parse_node_raft_dial as parse_node_raft_dial,
    parse_node_skew_allowance as parse_node_skew_allowance,
    plan_ports as plan_ports,
    with_gateway_options as with_gateway_options,
)
from localcluster.processes import (
    PidRecord as PidRecord,
    is_alive as is_alive,
    process_start_ticks as process_start_ticks,
    read_pid_file as read_pid_file,
    reap_children as reap_children,
    start_process as start_process,
    write_pid_file as write_pid_file,
)
from localcluster.readiness import (
    accepts_connections as accepts_connections,
    gateway_ready as gateway_ready,
    redis_answers as redis_answers,
    wait_until as wait_until,
)
from localcluster.recover import (
    RECOVER_HELP as RECOVER_HELP,
    cluster_recover as cluster_recover,
    recover_arguments as recover_arguments,
)
from localcluster.restart import (
    cluster_restart_node as cluster_restart_node,
    cluster_start_node as cluster_start_node,
    restart_text as restart_text,
)
from localcluster.run_folder import (
    ProcessSlot as ProcessSlot,
    cluster_node as cluster_node,
    find_redis_server as find_redis_server,
    process_slots as process_slots,
    read_secret as read_secret,
    read_secrets as read_secrets,
    write_redis_config as write_redis_config,
)
