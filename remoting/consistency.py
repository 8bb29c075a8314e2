"""Read consistency levels: the one spelling of our ``consistency`` extension.

A client adds ext ``consistency=linearizable`` to GET_ROUTEINFO_BY_TOPIC (and the node's
own processes to NODE_STATUS) to be answered after a barrier committed through the Raft
leader; the REST API takes the same words in ``?consistency=``, and the experiments read
with either. Here, at the bottom layer, so every package may import it.
"""

from __future__ import annotations

CONSISTENCY_FIELD = "consistency"
"""The ext field (and the REST query parameter) that names the level."""
CONSISTENCY_LOCAL = "local"
"""Answer from this node's applied state (the default, as the original NameServer)."""
CONSISTENCY_LINEARIZABLE = "linearizable"
"""Answer after a no-op barrier committed through the leader (raft mode)."""
CONSISTENCY_LEVELS = (CONSISTENCY_LOCAL, CONSISTENCY_LINEARIZABLE)
