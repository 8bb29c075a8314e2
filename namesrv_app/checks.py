"""System checks for the NAMESRV settings (``manage.py check``), with stable ids.

* namesrv.E001: a port is not an integer in 0..65535 (PORT, INTERNAL_PORT).
* namesrv.E002: INTERNAL_SECRET is empty (the internal port would refuse every caller).
* namesrv.E003: MODE is not one of eventual / raft.
* namesrv.E004: CLUSTER_FILE is set but cannot be read as a JSON object.
* namesrv.E005: an interval (SCAN_INTERVAL_S) is not a positive integer.
* namesrv.E006: NODE_ID is empty.
* namesrv.E007: RAFT_PORT is not an integer in 0..65535 (0: given as run_gateway --raft-port).
* namesrv.E008: PROPOSE_TIMEOUT_S is not positive, or SKEW_ALLOWANCE_MS is negative.
* namesrv.E022: a secret file (DJANGO_SECRET_KEY_FILE, NAMESRV_INTERNAL_SECRET_FILE,
  the ACL file and its admin's secret key, the Raft secret) is readable or writable by
  group or others. ``NAMESRV_ALLOW_READABLE_SECRET_FILES=true`` accepts that for the
  files only this check guards; the ACL secret key and the Raft secret are refused by
  their readers whatever it says, so they are reported always.

Deployment checks (``manage.py check --deploy``):

* namesrv.E020: SECRET_KEY is random per process (neither DJANGO_SECRET_KEY_FILE nor
  DJANGO_SECRET_KEY is set): sessions die with the process and differ between workers.
* namesrv.E021: NAMESRV['INTERNAL_SECRET'] is random per process (neither
  NAMESRV_INTERNAL_SECRET_FILE nor NAMESRV_INTERNAL_SECRET is set): no other process
  of the node gets through the gateway's internal port.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register

from namesrv_app.conf import MODES, PORT_MAX, namesrv_settings


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _port_errors(conf: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for name in ("PORT", "INTERNAL_PORT"):
        value = getattr(conf, name)
        if not _is_int(value) or not 0 <= value <= PORT_MAX:
            errors.append(
                Error(
                    f"NAMESRV['{name}'] must be an integer port in 0..{PORT_MAX}, got {value!r}.",
                    hint="0 lets the OS pick a free port.",
                    id="namesrv.E001",
                )
            )
    return errors


def _secret_errors(conf: Any) -> list[CheckMessage]:
    if conf.INTERNAL_SECRET:
        return []
    return [
        Error(
            "NAMESRV['INTERNAL_SECRET'] is empty: the gateway's internal port refuses everyone.",
            hint=(
                "Set NAMESRV_INTERNAL_SECRET_FILE (or NAMESRV_INTERNAL_SECRET) to one random "
                "value for every process of a node."
            ),
            id="namesrv.E002",
        )
    ]


def _mode_errors(conf: Any) -> list[CheckMessage]:
    if conf.MODE in MODES:
        return []
    return [
        Error(
            f"NAMESRV['MODE'] must be one of {', '.join(MODES)}, got {conf.MODE!r}.",
            id="namesrv.E003",
        )
    ]


def _cluster_file_errors(conf: Any) -> list[CheckMessage]:
    if not conf.CLUSTER_FILE:
        return []
    try:
        data = json.loads(Path(conf.CLUSTER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [
            Error(
                f"NAMESRV['CLUSTER_FILE'] {conf.CLUSTER_FILE!r} is unreadable: {exc}",
                hint="The launcher writes it; start the cluster with `manage.py cluster up`.",
                id="namesrv.E004",
            )
        ]
    if not isinstance(data, dict):
        return [
            Error(
                f"NAMESRV['CLUSTER_FILE'] {conf.CLUSTER_FILE!r} must hold a JSON object.",
                id="namesrv.E004",
            )
        ]
    return []


def _interval_errors(conf: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for name in ("SCAN_INTERVAL_S",):
        value = getattr(conf, name)
        if not _is_int(value) or value <= 0:
            errors.append(
                Error(
                    f"NAMESRV['{name}'] must be a positive integer, got {value!r}.",
                    id="namesrv.E005",
                )
            )
    return errors


def _node_errors(conf: Any) -> list[CheckMessage]:
    if isinstance(conf.NODE_ID, str) and conf.NODE_ID.strip():
        return []
    return [Error("NAMESRV['NODE_ID'] must be a non-empty string.", id="namesrv.E006")]


def _raft_errors(conf: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    port = conf.RAFT_PORT
    # 0 means "given on the command line": run_gateway --raft-port overrides it, and
    # the gateway refuses raft mode without one.
    if not _is_int(port) or not 0 <= port <= PORT_MAX:
        errors.append(
            Error(
                f"NAMESRV['RAFT_PORT'] must be an integer in 0..{PORT_MAX}, got {port!r}.",
                id="namesrv.E007",
            )
        )
    timeout = conf.PROPOSE_TIMEOUT_S
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        errors.append(
            Error(
                f"NAMESRV['PROPOSE_TIMEOUT_S'] must be a positive number, got {timeout!r}.",
                id="namesrv.E008",
            )
        )
    allowance = conf.SKEW_ALLOWANCE_MS
    if not _is_int(allowance) or allowance < 0:
        errors.append(
            Error(
                f"NAMESRV['SKEW_ALLOWANCE_MS'] must be a non-negative integer, got {allowance!r}.",
                id="namesrv.E008",
            )
        )
    return errors


# The secret files of NAMESRV, by the variable an operator sets; whether the flag may
# excuse a loose mode (False: the reader refuses such a file itself, remoting.acl).
NAMESRV_SECRET_FILE_KEYS = {
    "ACL_FILE": ("NAMESRV_ACL_FILE", True),
    "ACL_SECRET_KEY_FILE": ("NAMESRV_ACL_SECRET_KEY_FILE", False),
    "RAFT_SECRET_FILE": ("NAMESRV_RAFT_SECRET_FILE", False),
}
LOOSE_MODE_BITS = stat.S_IRWXG | stat.S_IRWXO


def _secret_files(conf: Any) -> list[tuple[str, str, bool]]:
    """(variable, path, excusable) of every configured secret file."""
    files = [
        (name, str(path), True)
        for name, path in getattr(settings, "NAMESRV_SECRET_FILES", {}).items()
    ]
    for key, (name, excusable) in NAMESRV_SECRET_FILE_KEYS.items():
        path = getattr(conf, key, "")
        if path:
            files.append((name, str(path), excusable))
    return files


def _secret_file_mode_errors(conf: Any) -> list[CheckMessage]:
    allowed = bool(getattr(settings, "NAMESRV_ALLOW_READABLE_SECRET_FILES", False))
    errors: list[CheckMessage] = []
    for name, path, excusable in _secret_files(conf):
        if allowed and excusable:
            continue
        try:
            mode = Path(path).expanduser().stat().st_mode
        except OSError:
            continue  # a missing file is its reader's error, with its own message
        if mode & LOOSE_MODE_BITS:
            errors.append(
                Error(
                    f"{name}={path} is open to group or others (mode "
                    f"{stat.S_IMODE(mode):04o}): whoever reads it holds the secret.",
                    hint=f"chmod 600 {path}"
                    + (
                        " (or NAMESRV_ALLOW_READABLE_SECRET_FILES=true if that is intended)"
                        if excusable
                        else ""
                    ),
                    id="namesrv.E022",
                )
            )
    return errors


@register()
def check_namesrv_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Validate the NAMESRV settings; each problem has its own stable id."""
    conf = namesrv_settings()
    return [
        *_port_errors(conf),
        *_secret_errors(conf),
        *_mode_errors(conf),
        *_cluster_file_errors(conf),
        *_interval_errors(conf),
        *_node_errors(conf),
        *_raft_errors(conf),
        *_secret_file_mode_errors(conf),
    ]


EPHEMERAL_SECRET_ERRORS = {
    "SECRET_KEY": (
        "namesrv.E020",
        "SECRET_KEY is random per process: sessions and CSRF tokens end with the process "
        "and differ between web workers.",
        "Set DJANGO_SECRET_KEY_FILE to a file (mode 0600) holding a long random value, "
        "or DJANGO_SECRET_KEY to the value itself.",
    ),
    "INTERNAL_SECRET": (
        "namesrv.E021",
        "NAMESRV['INTERNAL_SECRET'] is random per process: no other process of the node "
        "gets through the gateway's internal port.",
        "Set NAMESRV_INTERNAL_SECRET_FILE (or NAMESRV_INTERNAL_SECRET) to the same random "
        "value for every process of the node.",
    ),
}


@register(Tags.security, deploy=True)
def check_ephemeral_secrets(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Deployment: every secret the settings made up because none was configured."""
    made_up = getattr(settings, "NAMESRV_EPHEMERAL_SECRETS", ())
    return [
        Error(message, hint=hint, id=check_id)
        for name, (check_id, message, hint) in EPHEMERAL_SECRET_ERRORS.items()
        if name in made_up
    ]
