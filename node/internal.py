"""Asking this host's gateway over its loopback-only internal port (NODE_STATUS, BACKUP).

The one client of the internal requests a node's own tools send: the local-cluster
launcher (:mod:`localcluster.readiness`, :mod:`localcluster.backups`) and the node
supervisor's ``--force-new-cluster`` (:mod:`node.force`) both ask through here. The
internal port speaks plain remoting on 127.0.0.1 whatever the node's TLS, and every
request carries the node's internal secret.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.private_codes import InternalCode
from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.consistency import CONSISTENCY_FIELD, CONSISTENCY_LINEARIZABLE, CONSISTENCY_LOCAL
from remoting.tls import ClientTls

LOOPBACK = "127.0.0.1"
STATUS_TIMEOUT_S = 3.0
BACKUP_TIMEOUT_S = 60.0
"""A backup may commit a barrier, then copies, compresses and hashes the whole table."""


class InternalRequestError(RuntimeError):
    """The gateway answered, and refused: the message has its code and remark."""


def internal_request(
    internal_port: int,
    secret: str,
    code: InternalCode,
    fields: dict[str, str] | None = None,
    *,
    timeout_s: float = STATUS_TIMEOUT_S,
) -> RemotingCommand:
    """The gateway's SUCCESS answer to ``code``; InternalRequestError when it refused,
    RemotingClientError or OSError when it did not answer."""
    request = RemotingCommand.request(int(code), {"secret": secret, **(fields or {})})
    with BlockingClient(
        f"{LOOPBACK}:{internal_port}", timeout_s=timeout_s, tls=ClientTls.PLAIN
    ) as client:
        response = client.invoke(request)
    if response.code != ResponseCode.SUCCESS:
        raise InternalRequestError(
            f"{code.name} on port {internal_port} answered {response.code}: {response.remark}"
        )
    return response


def node_status(
    internal_port: int,
    secret: str,
    *,
    linearizable: bool = False,
    timeout_s: float = STATUS_TIMEOUT_S,
) -> dict[str, Any]:
    """NODE_STATUS as a dict; ``linearizable`` commits a barrier first (raft), so it is
    answered only once a write committed through a leader (a node without a quorum
    refuses)."""
    fields = {CONSISTENCY_FIELD: CONSISTENCY_LINEARIZABLE} if linearizable else {}
    response = internal_request(
        internal_port, secret, InternalCode.NODE_STATUS, fields, timeout_s=timeout_s
    )
    body: dict[str, Any] = json.loads(response.body or b"{}")
    return body


def backup(
    internal_port: int,
    secret: str,
    cluster: str,
    *,
    linearizable: bool = True,
    timeout_s: float = BACKUP_TIMEOUT_S,
) -> bytes:
    """The bytes of a BACKUP answer (a backup file, unchecked: the caller reads it):
    at a linearizable point, or with ``linearizable`` False the node's applied state
    read without a barrier (what a node that lost its quorum can still give)."""
    consistency = CONSISTENCY_LINEARIZABLE if linearizable else CONSISTENCY_LOCAL
    response = internal_request(
        internal_port,
        secret,
        InternalCode.BACKUP,
        {"cluster": cluster, CONSISTENCY_FIELD: consistency},
        timeout_s=timeout_s,
    )
    return response.body or b""
