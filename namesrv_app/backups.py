"""The backup download the API and the console share: this node's backup file, as is.

Both ``GET /api/v1/backup/`` (an operator's token or session) and the Nodes page's
button (a signed-in operator) call :func:`download`: it asks this node's gateway for a
backup (the internal BACKUP request: raft mode commits a barrier first, so the state is
read at a linearizable point), checks the file's prefix, checksum and header (the
gateway built it; a file damaged on the way is refused, never handed out), and answers
it as an attachment named for the cluster, the log index and the UTC time it was read.
The audit log records each one: who, from which node, which index (``audit.record_read``).
"""

from __future__ import annotations

import io
from pathlib import Path

from django.http import FileResponse, HttpRequest

from namesrv_app import audit, gateway_client
from namesrv_app.conf import namesrv_settings
from namesrv_app.gateway_client import GatewayRefused
from raftstore.backup import BackupError, cluster_name_of, read_header
from remoting.codes import ResponseCode

AUDIT_ACTION = "backup"
CONTENT_TYPE = "application/octet-stream"


def cluster_name() -> str:
    """The name a backup taken through this node carries: the folder of the node's
    cluster file (a local cluster's run folder, as ``cluster backup`` names it; a host's
    data folder), else ``namesrv``."""
    conf = namesrv_settings()
    return cluster_name_of(Path(conf.CLUSTER_FILE).parent.name if conf.CLUSTER_FILE else "")


def download(request: HttpRequest) -> FileResponse:
    """This node's backup as an attachment; GatewayError when the gateway cannot take
    one (503 without a quorum or gateway, 502 when it refused or the file does not check)."""
    data = gateway_client.backup(cluster_name())
    try:
        header = read_header(data)
    except BackupError as exc:
        raise GatewayRefused(int(ResponseCode.SYSTEM_ERROR), f"bad backup: {exc}") from exc
    audit.note(
        request,
        result=(
            f"backup of {header.cluster} ({header.mode}) from {header.node} at index "
            f"{header.index}, term {header.term}: {len(data)} bytes, {header.file_name()}"
        ),
        action=AUDIT_ACTION,
    )
    response = FileResponse(
        io.BytesIO(data),
        as_attachment=True,
        filename=header.file_name(),
        content_type=CONTENT_TYPE,
    )
    # It holds the config and the KV entries: no cache keeps a copy.
    response["Cache-Control"] = "no-store"
    return response
