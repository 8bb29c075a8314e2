"""Celery tasks: the periodic broker scan (RocketMQ's ``scanNotActiveBroker``).

The task holds no domain rule. It stamps the time, sends SCAN_NOT_ACTIVE_BROKER
with the cluster secret to one node's internal port, and the gateway proposes
the expiry through its replicator like any other write. The core,
:func:`scan_node_once`, is a plain function tests call directly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from celery import shared_task

from localcluster.plan import LOOPBACK
from localcluster.run_folder import cluster_node
from namesrv_app.conf import namesrv_settings, system_clock

logger = logging.getLogger(__name__)

SCAN_TIMEOUT_S = 3.0
UNREACHABLE = -1


class ScanFailed(RuntimeError):
    """The gateway refused or failed the scan request."""


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What one scan of one node did."""

    node_id: str
    now_ms: int
    expired: int


def scan_node_once(
    node_id: str,
    internal_addr: str,
    *,
    secret: str,
    now_ms: int,
    timeout_s: float = SCAN_TIMEOUT_S,
) -> ScanResult:
    """Ask the gateway at ``internal_addr`` to expire brokers silent at ``now_ms``."""
    from gateway.private_codes import InternalCode
    from remoting.blocking import BlockingClient
    from remoting.codes import ResponseCode
    from remoting.command import RemotingCommand
    from remoting.tls import ClientTls

    request = RemotingCommand.request(
        int(InternalCode.SCAN_NOT_ACTIVE_BROKER), {"secret": secret, "now_ms": str(now_ms)}
    )
    with BlockingClient(internal_addr, timeout_s=timeout_s, tls=ClientTls.PLAIN) as client:
        response = client.invoke(request)
    if response.code != ResponseCode.SUCCESS:
        raise ScanFailed(
            f"scan of {node_id} at {internal_addr} answered {response.code}: {response.remark}"
        )
    expired = int((response.ext_fields or {}).get("expired", 0))
    return ScanResult(node_id=node_id, now_ms=now_ms, expired=expired)


def cluster_file_path() -> Path:
    """The cluster file this process was started with."""
    configured = namesrv_settings().CLUSTER_FILE
    if not configured:
        raise ScanFailed("NAMESRV['CLUSTER_FILE'] is not set (env NAMESRV_CLUSTER_FILE)")
    return Path(configured)


@shared_task(name="namesrv_app.tasks.scan_node", ignore_result=True)  # type: ignore[untyped-decorator]
def scan_node(node_id: str) -> int:
    """Scan one node of the cluster for brokers whose heartbeat timed out.

    The time is taken here, once, and travels in the request: the gateway's
    apply path never reads a clock. A node that cannot be reached is logged and
    skipped (it may be stopped or partitioned on purpose); the next beat retries.
    Returns how many brokers were expired, or -1 when the node was unreachable.
    """
    from remoting.client import RemotingClientError

    node = cluster_node(cluster_file_path(), node_id)
    try:
        result = scan_node_once(
            node_id,
            f"{node.get('host', LOOPBACK)}:{node['internal_port']}",
            secret=namesrv_settings().INTERNAL_SECRET,
            now_ms=system_clock().now_ms(),
        )
    except RemotingClientError as exc:
        logger.warning("scan of %s skipped: %s", node_id, exc)
        return UNREACHABLE
    logger.info("scan of %s at %d expired %d broker(s)", node_id, result.now_ms, result.expired)
    return result.expired


@shared_task(name="namesrv_app.tasks.check_divergence", ignore_result=True)  # type: ignore[untyped-decorator]
def check_divergence() -> bool:
    """Compare every node's state digest; publish a divergence event to the consoles.

    Returns True when the nodes disagreed. In eventual mode they may disagree for
    minutes by design; in raft mode a lasting disagreement at equal applied index is
    an alarm.
    """
    from namesrv_app.live import check_divergence as publish_if_divergent

    return publish_if_divergent() is not None
