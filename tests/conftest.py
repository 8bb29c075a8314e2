"""Suite-wide setup shared by every test group."""

from __future__ import annotations

import os

import pytest

from raftstore.raft import VERIFY_OWN_ENTRIES_ENV
from tools.ports import PORT_SHARE_ENV

# Every Raft node the suite starts, in this process or in a gateway subprocess
# (which inherits the environment), decodes the entries it proposed as well and
# raises an alarm if they differ from the commands it applied instead: the tests
# that assert "no alarms" then also prove the commands built anywhere round-trip
# exactly through the log codec.
os.environ.setdefault(VERIFY_OWN_ENTRIES_ENV, "1")

# `make test` runs the suite in pytest-xdist workers (the Makefile's TEST_WORKERS);
# each picks its listening ports, and its clusters theirs, in a slice of its own
# (tools.ports), so two workers never pick the same port between probe and bind.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ[PORT_SHARE_ENV] = "{}/{}".format(
        int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw")),
        int(os.environ["PYTEST_XDIST_WORKER_COUNT"]),
    )


def pytest_configure(config: pytest.Config) -> None:
    """The suite's own Django renders pages without a ``collectstatic``: its static files
    keep their plain names and whitenoise finds them in the apps' folders. Processes the
    tests launch collect and serve them as a node does (node.processes)."""
    from django.test.utils import override_settings

    override_settings(
        STORAGES={
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        },
        STATIC_ROOT=None,
        WHITENOISE_USE_FINDERS=True,
    ).enable()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules with a slow test first (each module's tests kept together and in
    order), so the longest ones start early and `make test`'s workers finish together
    (``--dist loadscope`` hands each worker whole modules, in this order); then
    :func:`_all_databases`."""
    slow_modules = {
        item.nodeid.partition("::")[0] for item in items if item.get_closest_marker("slow")
    }
    items.sort(key=lambda item: item.nodeid.partition("::")[0] not in slow_modules)
    _all_databases(items)


def _all_databases(items: list[pytest.Item]) -> None:
    """Every database test may use both databases: the shared one (accounts, runs)
    and the node's projection (namesrv_app.db_router). pytest-django allows only
    ``default`` unless told otherwise, so each ``django_db`` mark (or use of the
    ``db`` fixtures) gets ``databases="__all__"``, keeping its other arguments."""
    for item in items:
        marker = item.get_closest_marker("django_db")
        fixtures = set(getattr(item, "fixturenames", ()))
        if marker is None and not fixtures & DB_FIXTURES:
            continue
        kwargs = dict(marker.kwargs) if marker is not None else {}
        if "transactional_db" in fixtures or "live_server" in fixtures:
            kwargs["transaction"] = True
        kwargs.setdefault("databases", "__all__")
        item.add_marker(pytest.mark.django_db(**kwargs), append=False)


DB_FIXTURES = {
    "db",
    "transactional_db",
    "client",
    "admin_client",
    "django_user_model",
    "admin_user",
    "live_server",
}
