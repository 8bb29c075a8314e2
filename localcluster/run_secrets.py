"""The secrets of a local cluster, generated per run folder (every file mode 0600).

::

    run/local/
      secret                internal-port secret (new at every ``up``)
      redis.secret          Redis password (requirepass): Celery and the channel layer
      raft.secret           Raft cluster secret: every Raft peer proves it
      django.secret         Django SECRET_KEY of the web processes
      ha.secret             HA secret of the demo brokers: masters and slaves prove it
      acl/plain_acl.yml     the remoting ACL: accounts + loopback white list
      acl/admin.secret      secret key of the admin account (console, API, experiments)
      acl/broker.secret     secret key of the broker account (the demo brokers)

Only the internal secret is renewed by each ``cluster up``; the others are made
once and kept, so an operator's copy of the admin secret, the console's sessions
and any accounts added to ``plain_acl.yml`` survive a restart of the same run
folder (delete ``acl/`` to start over). ``cluster up --no-acl``
writes no ACL files and tells every gateway to run without the ACL.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from node.files import write_secret_file
from remoting.acl import Credentials, read_secret_file
from remoting.acl_policy import (
    LOOPBACK_WHITE_LIST,
    Account,
    AclConfig,
    dump_acl,
    parse_address_pattern,
)

INTERNAL_SECRET_FILE = "secret"
RAFT_SECRET_FILE = "raft.secret"
DJANGO_SECRET_FILE = "django.secret"
HA_SECRET_FILE = "ha.secret"
REDIS_SECRET_FILE = "redis.secret"
ACL_DIR = "acl"
ACL_FILE = "plain_acl.yml"
ADMIN_ACCESS_KEY = "namesrv-admin"
BROKER_ACCESS_KEY = "namesrv-broker"
SECRET_BYTES = 32


def _keep_or_make(path: Path) -> str:
    """The secret in ``path``, made first if the file is missing or unusable."""
    try:
        return read_secret_file(path, path.name)
    except ValueError:
        value = secrets.token_urlsafe(SECRET_BYTES)
        write_secret_file(path, value + "\n")
        return value


def ha_secret(folder: Path) -> Path:
    """``folder/ha.secret``, made (random, owner-only) unless a usable one is there: the
    ``haSecretFile`` that the brokers started from one folder share."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / HA_SECRET_FILE
    _keep_or_make(path)
    return path


@dataclass(frozen=True, slots=True)
class RunSecrets:
    """Where a run folder keeps its secrets, and what the processes are told of them."""

    run_dir: Path
    internal: str
    acl: bool = True

    @property
    def raft_secret_file(self) -> Path:
        """The Raft cluster secret."""
        return self.run_dir / RAFT_SECRET_FILE

    @property
    def django_secret_file(self) -> Path:
        """The web processes' SECRET_KEY."""
        return self.run_dir / DJANGO_SECRET_FILE

    @property
    def ha_secret_file(self) -> Path:
        """The brokers' HA secret (``haSecretFile``): a slave and its master prove it."""
        return self.run_dir / HA_SECRET_FILE

    @property
    def redis_secret_file(self) -> Path:
        """Redis's password."""
        return self.run_dir / REDIS_SECRET_FILE

    def redis_password(self) -> str:
        """The password Redis requires of every client."""
        return read_secret_file(self.redis_secret_file, "redis password")

    def authenticated_redis_url(self, url: str) -> str:
        """``url`` (``redis://host:port/db``) with the password in it."""
        scheme, sep, rest = url.partition("://")
        return f"{scheme}{sep}:{quote(self.redis_password(), safe='')}@{rest}"

    @property
    def acl_file(self) -> Path:
        """The gateways' accounts file."""
        return self.run_dir / ACL_DIR / ACL_FILE

    @property
    def admin_secret_file(self) -> Path:
        """The admin account's secret key."""
        return self.run_dir / ACL_DIR / "admin.secret"

    @property
    def broker_secret_file(self) -> Path:
        """The broker account's secret key."""
        return self.run_dir / ACL_DIR / "broker.secret"

    def env(self) -> dict[str, str]:
        """The variables every process of the cluster gets (paths, never secrets)."""
        env = {
            "NAMESRV_RAFT_SECRET_FILE": str(self.raft_secret_file),
            "DJANGO_SECRET_KEY_FILE": str(self.django_secret_file),
            "NAMESRV_ACL": "true" if self.acl else "false",
        }
        if self.acl:
            env |= {
                "NAMESRV_ACL_FILE": str(self.acl_file),
                "NAMESRV_ACL_ACCESS_KEY": ADMIN_ACCESS_KEY,
                "NAMESRV_ACL_SECRET_KEY_FILE": str(self.admin_secret_file),
            }
        return env

    def admin_credentials(self) -> Credentials | None:
        """The admin account (None without the ACL): console, API, experiments."""
        if not self.acl:
            return None
        return Credentials(ADMIN_ACCESS_KEY, read_secret_file(self.admin_secret_file, "admin"))

    def broker_settings(self) -> dict[str, str]:
        """The ``run_broker`` settings of a demo broker: masters and slaves prove the run's
        HA secret to each other; it signs its NameServer requests with the broker account,
        and its own port checks the same accounts file (``--no-acl`` turns off the ACL,
        not the HA secret)."""
        ha = {"haSecretFile": str(self.ha_secret_file)}
        if not self.acl:
            return {**ha, "aclEnable": "false"}
        return {
            **ha,
            "namesrvAccessKey": BROKER_ACCESS_KEY,
            "namesrvSecretKeyFile": str(self.broker_secret_file),
            "aclFile": str(self.acl_file),
        }

    def summary(self) -> dict[str, Any]:
        """The ``acl`` part of the cluster summary (``cluster up --json``)."""
        if not self.acl:
            return {"enabled": False}
        return {
            "enabled": True,
            "file": str(self.acl_file),
            "admin_access_key": ADMIN_ACCESS_KEY,
            "admin_secret_file": str(self.admin_secret_file),
            "broker_access_key": BROKER_ACCESS_KEY,
            "broker_secret_file": str(self.broker_secret_file),
        }


def create_run_secrets(run_dir: Path, *, acl: bool = True) -> RunSecrets:
    """Make what is missing (and a fresh internal secret); see the module docstring."""
    run_dir = Path(run_dir)
    internal = secrets.token_hex(SECRET_BYTES)
    write_secret_file(run_dir / INTERNAL_SECRET_FILE, internal + "\n")
    made = RunSecrets(run_dir, internal, acl)
    _keep_or_make(made.raft_secret_file)
    _keep_or_make(made.django_secret_file)
    _keep_or_make(made.redis_secret_file)
    _keep_or_make(made.ha_secret_file)
    if acl:
        admin = _keep_or_make(made.admin_secret_file)
        broker = _keep_or_make(made.broker_secret_file)
        config = AclConfig(
            {
                ADMIN_ACCESS_KEY: Account(ADMIN_ACCESS_KEY, admin, admin=True),
                BROKER_ACCESS_KEY: Account(BROKER_ACCESS_KEY, broker, admin=False),
            },
            tuple(parse_address_pattern(p) for p in LOOPBACK_WHITE_LIST),
        )
        # An operator's edits (more accounts, other addresses) survive a restart.
        if not made.acl_file.exists():
            write_secret_file(made.acl_file, ACL_FILE_HEADER + dump_acl(config))
    return made


def read_run_secrets(run_dir: Path, *, acl: bool = True) -> RunSecrets:
    """The secrets of a cluster that is up (nothing is created); ValueError if missing."""
    run_dir = Path(run_dir)
    internal = read_secret_file(run_dir / INTERNAL_SECRET_FILE, "internal secret")
    return RunSecrets(run_dir, internal, acl)


ACL_FILE_HEADER = """\
# The remoting ACL of this local cluster, written by `manage.py cluster up`.
# Admin request codes (topics, permissions, KV, config) need a signature of an
# admin account; brokers may register unsigned from the white-listed addresses.
# Edit and save: the gateways re-read it within a second (docs/SECURITY.md).
"""
