"""``manage.py check --deploy`` and the production profile, each in a fresh process.

Settings are read once per process from the environment, so every case runs
``manage.py`` in a subprocess with an environment made for it (nothing of the
caller's NAMESRV_* or DJANGO_* leaks in).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
HTTPS_WARNINGS = ("security.W004", "security.W008", "security.W012", "security.W016")
HOST = "namesrv.example.com"
TIMEOUT_S = 120
PRINT_SETTINGS = (
    "import json; from django.conf import settings as s; print(json.dumps({"
    "'key': s.SECRET_KEY, 'limit': s.AXES_FAILURE_LIMIT,"
    "'cool_off_s': s.AXES_COOLOFF_TIME.total_seconds(), 'debug': s.DEBUG,"
    "'proxy': s.SECURE_PROXY_SSL_HEADER, 'origins': s.CSRF_TRUSTED_ORIGINS,"
    "'hsts': s.SECURE_HSTS_SECONDS, 'redirect': s.SECURE_SSL_REDIRECT}))"
)


def secret_file(folder: Path, name: str) -> Path:
    """A generated secret in a file only its owner reads (as the launcher writes them)."""
    path = folder / name
    path.write_text(secrets.token_urlsafe(50) + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def manage(folder: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGS`` with only ``env`` on top of a clean environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NAMESRV_", "DJANGO_"))}
    clean |= {
        "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
        "NAMESRV_DB_PATH": str(folder / "db.sqlite3"),
        **env,
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def settings_of(folder: Path, env: dict[str, str]) -> dict[str, object]:
    """The settings a process started with ``env`` ends up with."""
    done = manage(folder, env, "shell", "-c", PRINT_SETTINGS)
    assert done.returncode == 0, done.stderr
    loaded: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


@pytest.fixture
def configured(tmp_path: Path) -> dict[str, str]:
    """What an operator provides: the hosts, the key file and the internal secret file."""
    return {
        "DJANGO_ALLOWED_HOSTS": HOST,
        "DJANGO_SECRET_KEY_FILE": str(secret_file(tmp_path, "django.secret")),
        "NAMESRV_INTERNAL_SECRET_FILE": str(secret_file(tmp_path, "internal.secret")),
        "DJANGO_CSRF_TRUSTED_ORIGINS": f"https://{HOST}",
    }


def test_the_production_profile_passes_check_deploy_without_a_warning(
    tmp_path: Path, configured: dict[str, str]
) -> None:
    env = {**configured, "NAMESRV_PROFILE": "production"}
    done = manage(tmp_path, env, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_without_the_profile_check_deploy_reports_the_https_warnings(
    tmp_path: Path, configured: dict[str, str]
) -> None:
    done = manage(tmp_path, configured, "check", "--deploy", "--fail-level", "WARNING")
    report = done.stdout + done.stderr
    assert done.returncode != 0
    assert all(warning in report for warning in HTTPS_WARNINGS), report
    assert "security.W009" not in report and "namesrv.E02" not in report


def test_a_fresh_checkout_runs_check_but_check_deploy_names_the_made_up_secrets(
    tmp_path: Path,
) -> None:
    plain = manage(tmp_path, {}, "check")
    deploy = manage(tmp_path, {}, "check", "--deploy")
    assert plain.returncode == 0, plain.stderr
    assert deploy.returncode != 0
    assert "namesrv.E020" in deploy.stderr and "DJANGO_SECRET_KEY_FILE" in deploy.stderr
    assert "namesrv.E021" in deploy.stderr and "NAMESRV_INTERNAL_SECRET_FILE" in deploy.stderr


@pytest.mark.parametrize(
    ("missing", "named"),
    [
        ("DJANGO_ALLOWED_HOSTS", "DJANGO_ALLOWED_HOSTS"),
        ("DJANGO_SECRET_KEY_FILE", "DJANGO_SECRET_KEY"),
    ],
)
def test_the_production_profile_refuses_to_start_without_hosts_or_key(
    tmp_path: Path, configured: dict[str, str], missing: str, named: str
) -> None:
    env = {k: v for k, v in configured.items() if k != missing}
    done = manage(tmp_path, {**env, "NAMESRV_PROFILE": "production"}, "check")
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and named in done.stderr.splitlines()[-1]


def test_each_process_makes_its_own_key_unless_one_is_configured(
    tmp_path: Path, configured: dict[str, str]
) -> None:
    first, second = settings_of(tmp_path, {}), settings_of(tmp_path, {})
    key_file = Path(configured["DJANGO_SECRET_KEY_FILE"])
    from_file = settings_of(tmp_path, {**configured, "DJANGO_SECRET_KEY": "shell-value"})
    assert first["key"] != second["key"] and len(str(first["key"])) >= 50
    assert from_file["key"] == key_file.read_text().strip()  # the file wins over the shell


def test_an_unreadable_key_file_stops_the_process_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.secret"
    done = manage(tmp_path, {"DJANGO_SECRET_KEY_FILE": str(missing)}, "check")
    assert done.returncode != 0
    last = done.stderr.splitlines()[-1]
    assert f"DJANGO_SECRET_KEY_FILE={missing}" in last and "cannot read" in last


def test_the_local_profile_is_plain_http_and_production_is_https_only(
    tmp_path: Path, configured: dict[str, str]
) -> None:
    local = settings_of(tmp_path, {})
    behind_proxy = {
        **configured,
        "NAMESRV_PROFILE": "production",
        "NAMESRV_SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto=https",
        "NAMESRV_LOGIN_FAILURE_LIMIT": "3",
        "NAMESRV_LOGIN_COOLOFF_MINUTES": "2",
    }
    production = settings_of(tmp_path, behind_proxy)
    assert (local["debug"], local["redirect"], local["hsts"], local["proxy"]) == (
        False,
        False,
        0,
        None,
    )
    assert (local["limit"], local["cool_off_s"]) == (5, 15 * 60)
    assert (production["redirect"], production["hsts"]) == (True, 31_536_000)
    assert production["proxy"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert production["origins"] == [f"https://{HOST}"]
    assert (production["limit"], production["cool_off_s"]) == (3, 120)
