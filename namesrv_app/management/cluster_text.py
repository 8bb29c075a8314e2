"""The text ``manage.py cluster`` prints for a person (``--json`` prints the data)."""

from __future__ import annotations

import time
from typing import Any

from localcluster import launcher
from raftstore.vocab import MODE_RAFT

RAFT_ONLY_FIELDS = frozenset(
    {"state", "leader", "term", "commit_index", "applied_index", "log_length", "has_quorum"}
)
"""NODE_STATUS fields that mean something in raft mode only (an eventual node reports
itself its own leader, term 0, with quorum: true and empty)."""


def up_text(summary: dict[str, Any]) -> str:
    """What ``cluster up`` started, where its logs are and how to log in."""
    lines = [f"NameServer cluster up ({summary['mode']} mode), run folder {summary['run_dir']}"]
    lines += launcher.restored_lines(summary)
    for node in summary["nodes"]:
        lines.append(
            f"  {node['id']}: remoting {node['remoting_addr']}  console {node['console_url']}"
            f"  logs {node['log_dir']}"
        )
    addrs = ";".join(node["remoting_addr"] for node in summary["nodes"])
    lines.append(f"  redis {summary['redis']['url']}  celery logs {summary['run_dir']}/celery")
    lines.append(f"  clients: namesrvAddr={addrs}")
    for broker in summary.get("brokers", []):
        lines.append(f"  broker {broker['label']}: {broker['addr']} (pid {broker['pid']})")
    acl = summary.get("acl") or {}
    if acl.get("enabled"):
        lines.append(
            f"  remoting ACL on: admin account {acl['admin_access_key']}, secret key in "
            f"{acl['admin_secret_file']}; accounts in {acl['file']}"
        )
    else:
        lines.append("  remoting ACL OFF (--no-acl): any local process may change routes")
    tls = summary.get("tls") or {}
    if tls.get("ca_file"):
        lines.append(
            f"  TLS {tls['mode']}: clients check the nodes against {tls['ca_file']}; "
            f"NAMESRV_TLS_CONFIG_FILE={tls['client_config']} makes a tool speak TLS"
        )
    if summary.get("demo_pid"):
        lines.append(f"  demo brokers (pid {summary['demo_pid']}): {summary['run_dir']}/demo")
    metrics = [n["metrics_url"] for n in summary["nodes"] if n.get("metrics_url")]
    if metrics:
        lines.append(f"  gateway metrics (Prometheus): {'  '.join(metrics)}")
    lines.append(
        "  console login: there are no default accounts. Accounts are shared by every node"
        " of the cluster; create an operator with\n"
        f"    .venv/bin/python manage.py create_operator alice --run-dir {summary['run_dir']}"
    )
    return "\n".join(lines)


def status_text(status: dict[str, Any]) -> str:
    """Each process alive or dead, each node's facts and alarms, and whether they agree."""
    if not status["processes"]:
        return f"no cluster processes recorded in {status['run_dir']}"
    rows = [
        f"{p['name']:<12} pid {p['pid']:<8} {'alive' if p['alive'] else 'DEAD'}"
        for p in status["processes"]
    ]
    now_ms = time.time_ns() // 1_000_000
    for node in status["nodes"]:
        facts = node["status"] or {}
        # An eventual node has no leader, term, log or quorum: its Raft words are left
        # out, and its own last scan said instead.
        raft = facts.get("mode") == MODE_RAFT
        scalars = ", ".join(
            f"{key}={value}"
            for key, value in sorted(facts.items())
            if not isinstance(value, (list, dict)) and (raft or key not in RAFT_ONLY_FIELDS)
        )
        last_scan = facts.get("last_scan")
        if facts and not raft:
            scalars += ", last_scan=" + (
                f"{max(0, now_ms - int(last_scan['at_ms'])) / 1000:.1f} s ago "
                f"({last_scan['expired']} expired)"
                if isinstance(last_scan, dict)
                else "none yet"
            )
        rows.append(f"{node['id']}: {scalars or node['error']}")
        # Raft safety alarms, the scan fallback, a Raft port that is not listening.
        rows.extend(f"{node['id']} ALARM: {alarm}" for alarm in facts.get("alarms", ()))
    indexes = [
        f"{node['id']} {(node['status'] or {}).get('applied_index', '-')}"
        for node in status["nodes"]
    ]
    if any((node["status"] or {}).get("mode") == "raft" for node in status["nodes"]):
        # Raft: after a lost majority, the node to keep is the one that applied the most
        # (`cluster recover --survivor ID`, docs/RAFT.md "Recovery after quorum loss").
        rows.append(f"applied index: {', '.join(indexes)}")
    if "agree" in status:
        rows.append(
            "the nodes agree on what clients see (routes, cluster info, topics, KV, config)"
            if status["agree"]
            else "THE NODES DISAGREE on what clients see (routes, cluster info, topics, "
            "KV or config)"
        )
        for node_id, missing in sorted(status.get("live_missing", {}).items()):
            rows.append(f"{node_id} does not (yet) count as alive: {', '.join(missing)}")
    return "\n".join([f"cluster in {status['run_dir']}:", *rows])


def down_text(result: dict[str, Any]) -> str:
    """What ``cluster down`` stopped."""
    stopped = ", ".join(result["stopped"]) or "nothing was running"
    killed = (
        f" (killed after the grace period: {', '.join(result['killed'])})"
        if result["killed"]
        else ""
    )
    return f"stopped in {result['run_dir']}: {stopped}{killed}"


def recover_text(summary: dict[str, Any]) -> str:
    """What ``cluster recover`` did, what the new cluster started from and what may be lost."""
    state, before, committed = summary["state"], summary["survivor_before"], summary["committed"]
    node, run_dir = summary["node"], summary["run_dir"]
    lines = [
        f"{summary['survivor']} recovered in {run_dir}: a new one-member raft cluster "
        "holding its applied state",
        f"  state taken at index {state['index']}, term {state['term']} ({state['taken_at']}, "
        f"read without a barrier), saved to {state['file']} (mode 0600)",
        f"  may be lost: whatever the old cluster committed after index {state['index']}; "
        f"{summary['survivor']} had learnt commit index {before['commit_index']} and "
        f"applied {before['applied_index']}, and entries the lost majority acknowledged "
        "after that (typically its last second of writes) never reached it",
    ]
    if before["started_to_read"]:
        started = ", ".join(
            f"{name} (pid {pid})" for name, pid in before["started_to_read"].items()
        )
        lines.append(f"  started first to read its state: {started}")
    for removed in summary["removed"]:
        stopped = ", ".join(removed["stopped"]) or "nothing was running"
        folder = removed["folder_moved_to"] or "not there"
        lines.append(f"  {removed['id']} taken out: stopped: {stopped}; folder moved to: {folder}")
    lines += [
        f"  old Raft folder kept at {summary['raft_dir_moved_to']}; marker {summary['marker']}",
        f"  the new cluster committed a write at index {committed['commit_index']}, term "
        f"{committed['term']}, {committed['after_s']} s after its start "
        f"(recover took {summary['timings_s']['total_s']} s)",
        f"  {node['id']}: remoting {node['remoting_addr']}  console {node['console_url']}",
        f"  grow it back: manage.py cluster add-node --run-dir {run_dir} (once per member)",
    ]
    return "\n".join(lines)
