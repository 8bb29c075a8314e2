"""Which database each model lives in: the cluster-wide one or this node's projection.

* ``default`` is shared by every node of the cluster (PostgreSQL on hosts, one
  SQLite file for a local cluster): accounts, API tokens, sessions, login
  throttling, experiment runs and the audit log. A token made once works on
  every node, and every console lists the same experiment runs.
* ``projection`` is this node's own SQLite file: the route tables its gateway
  mirrors from the replicated state (:mod:`namesrv_app.projection`) and a
  broker's metadata (``broker_app``). Nodes never share it: each one shows what
  it itself serves, which is the point of comparing them.

Django asks this router for every query and every migration; a model lives in
exactly one of the two, and relations never cross them.
"""

from __future__ import annotations

from typing import Any

PROJECTION_DB = "projection"
SHARED_DB = "default"
SHARED_NAMESRV_MODELS = frozenset({"experimentrun", "auditentry", "apitoken"})
"""namesrv_app models that live in the shared database; the rest are the projection."""
PROJECTION_APPS = frozenset({"namesrv_app", "broker_app"})


def database_of(app_label: str, model_name: str | None) -> str:
    """The alias a model of ``app_label`` named ``model_name`` (lower case) lives in."""
    if app_label not in PROJECTION_APPS:
        return SHARED_DB
    if app_label == "namesrv_app" and model_name in SHARED_NAMESRV_MODELS:
        return SHARED_DB
    return PROJECTION_DB


def _of(model: Any) -> str:
    return database_of(model._meta.app_label, model._meta.model_name)


class ProjectionRouter:
    """Routes the projection's models to ``projection`` and everything else to ``default``."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return _of(model)

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return _of(model)

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return _of(type(obj1)) == _of(type(obj2))

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool:
        if model_name is None:
            # RunPython/RunSQL: they say where they belong (hints["target_db"]), else
            # they run with the shared database (e.g. creating the console's roles).
            return db == str(hints.get("target_db", SHARED_DB))
        return db == database_of(app_label, model_name)
