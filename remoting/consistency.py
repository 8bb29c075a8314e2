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

ROUTES_VERSION_FIELD = "routesVersion"
"""The ext field of every GET_ROUTEINFO_BY_TOPIC answer (found or TOPIC_NOT_EXIST): the
answering node's routes version, a count of the applied commands that could change a
route, read before the answer, so the answer's routes are at least that new. Raft nodes
apply one log, so their versions compare across nodes; an eventual-mode node counts its
own applies, so its versions compare only with its own. Clients that do not know the
field ignore it, as they ignore every ext field they do not read."""
