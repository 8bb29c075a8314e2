"""The NameServer Django app: the node's projection of its route table and what reads it.

It holds the projection (``models`` and the ``projection`` package that writes them), the
console (``web``), the REST API (``api``), live updates (``live``), Celery tasks, the
management commands that start a node's processes (``run_gateway`` wires the gateway to
the projection), and the client the web process uses to reach its gateway
(``gateway_client``). The gateway itself is the framework-free ``gateway`` package.
"""
