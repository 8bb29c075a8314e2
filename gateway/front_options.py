"""What the gateway tells its read front (gateway/front.py) when it starts one.

Its own module because both processes read it: the gateway writes the options on the
front's command line (gateway/front_process.py) and the front reads them back.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from remoting.limits import (
    CONNECTIONS_PER_ADDRESS_MAX,
    FRAME_DEADLINE_S,
    IDLE_TIMEOUT_S,
    UNFINISHED_FRAMES_BYTES_MAX,
)

ROUTE_ANSWERS_MAX = 65_536


@dataclass(frozen=True, slots=True)
class FrontOptions:
    """What the gateway tells its front (JSON on the command line)."""

    listen_fd: int
    upstream_path: str
    versions_path: str
    parent_pid: int
    host: str = "127.0.0.1"
    port: int = 0
    idle_timeout_s: float = IDLE_TIMEOUT_S
    unfinished_frames_bytes_max: int = UNFINISHED_FRAMES_BYTES_MAX
    frame_deadline_s: float = FRAME_DEADLINE_S
    connections_per_address_max: int = CONNECTIONS_PER_ADDRESS_MAX
    connections_per_prefix_max: int | None = None
    """None: the process's setting (``NAMESRV_CONNECTIONS_PER_PREFIX_MAX``, which the
    front inherits from the gateway; remoting/limits.py)."""
    acl_enabled: bool = True
    acl_file: str | None = None
    route_answers_max: int = ROUTE_ANSWERS_MAX
    handoff_path: str | None = None
    """The gateway's hand-over socket (gateway/handoff.py); None: relay broker
    connections too."""
    tls_config_file: str | None = None
    """The node's tls.properties (remoting/tls.py): the public port's ``tls.server.mode``
    and certificate. A TLS connection is always relayed, never handed over (its session
    cannot move to another process)."""

    def to_json(self) -> str:
        """The options as one JSON object."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FrontOptions:
        """Options from :meth:`to_json`'s output; ValueError when malformed."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("front options must be a JSON object")
        return cls(**data)
