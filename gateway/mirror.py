"""What keeps a copy of the route table outside the gateway, as the gateway sees it.

The gateway knows only the :class:`Mirror` shape; ``manage.py run_gateway`` injects the
Django projection, so this package never imports Django.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from raftstore.replicator import Replicator


class Mirror(Protocol):
    """What keeps a copy of the table outside the gateway (the Django projection).

    The gateway knows only this shape: ``manage.py run_gateway`` injects
    ``namesrv_app.projection.writer.ProjectionWriter``, so this package never imports Django.
    """

    def start(self, *, rebuild: bool = True) -> None:
        """Subscribe to the replicator; rebuild the whole copy first when asked."""

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until everything applied so far is mirrored; False on timeout."""

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop mirroring."""

    def request_rebuild(self) -> None:
        """Rebuild the whole copy (a snapshot replaced the table); any thread."""

    def lag_versions(self) -> int | None:
        """Table changes not yet in the copy (the projection-lag metric); None: no copy."""


MirrorFactory = Callable[[Replicator], Mirror]


class NoMirror:
    """The mirror of a gateway without a console: nothing to keep."""

    def __init__(self, replicator: Replicator) -> None:
        self.replicator = replicator

    def start(self, *, rebuild: bool = True) -> None:
        """Nothing to start."""

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Always up to date."""
        return True

    def stop(self, timeout_s: float = 10.0) -> None:
        """Nothing to stop."""

    def request_rebuild(self) -> None:
        """Nothing to rebuild."""

    def lag_versions(self) -> int | None:
        """No copy, so no lag."""
        return None
