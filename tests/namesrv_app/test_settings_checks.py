"""Settings helpers and the namesrv.E00x system checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.checks.registry import registry
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from namesrv_app.checks import check_ephemeral_secrets, check_namesrv_settings
from namesrv_site.settings import env_bool, env_int, env_secret, env_str


def check_ids(**namesrv: Any) -> list[str | None]:
    """The ids of the errors the NAMESRV checks report for these overrides."""
    from django.conf import settings

    merged = {**settings.NAMESRV, **namesrv}
    with override_settings(NAMESRV=merged):
        return [message.id for message in check_namesrv_settings()]


def test_the_development_settings_pass_every_check() -> None:
    """A fresh checkout's settings are valid."""
    assert check_ids() == []


def test_a_port_outside_the_tcp_range_is_e001() -> None:
    """namesrv.E001 for PORT and INTERNAL_PORT alike."""
    assert check_ids(PORT=70000, INTERNAL_PORT=-1) == ["namesrv.E001", "namesrv.E001"]


def test_an_empty_internal_secret_is_e002_whatever_debug_says() -> None:
    """namesrv.E002: an empty secret shuts the internal port for everyone, DEBUG or not."""
    for debug in (False, True):
        with override_settings(DEBUG=debug):
            assert check_ids(INTERNAL_SECRET="") == ["namesrv.E002"]


def deploy_ids(*ephemeral: str) -> list[str | None]:
    """The ids of the deployment checks when the settings made up ``ephemeral``."""
    with override_settings(NAMESRV_EPHEMERAL_SECRETS=ephemeral):
        return [message.id for message in check_ephemeral_secrets()]


def test_made_up_secrets_are_deployment_errors_e020_and_e021() -> None:
    """namesrv.E020 (SECRET_KEY) and namesrv.E021 (INTERNAL_SECRET), only with --deploy."""
    assert deploy_ids("SECRET_KEY", "INTERNAL_SECRET") == ["namesrv.E020", "namesrv.E021"]
    assert deploy_ids("INTERNAL_SECRET") == ["namesrv.E021"]
    assert deploy_ids() == []
    deploy_only = registry.get_checks(include_deployment_checks=True)
    assert check_ephemeral_secrets in deploy_only
    assert check_ephemeral_secrets not in registry.get_checks()


def test_a_secret_file_is_read_stripped_and_wins_over_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """env_secret: the file (stripped) before the value; None when neither is set."""
    secret = tmp_path / "secret"
    secret.write_text("  from-the-file\n")
    monkeypatch.setenv("NS_TEST_SECRET", " from-the-variable ")
    assert env_secret("NS_TEST_SECRET", "NS_TEST_SECRET_FILE") == "from-the-variable"
    monkeypatch.setenv("NS_TEST_SECRET_FILE", str(secret))
    assert env_secret("NS_TEST_SECRET", "NS_TEST_SECRET_FILE") == "from-the-file"
    monkeypatch.delenv("NS_TEST_SECRET")
    monkeypatch.delenv("NS_TEST_SECRET_FILE")
    assert env_secret("NS_TEST_SECRET", "NS_TEST_SECRET_FILE") is None


@pytest.mark.parametrize(("content", "complaint"), [(None, "cannot read"), ("  \n", "empty")])
def test_a_missing_or_empty_secret_file_is_an_error_naming_variable_and_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str | None, complaint: str
) -> None:
    secret = tmp_path / "secret"
    if content is not None:
        secret.write_text(content)
    monkeypatch.setenv("NS_TEST_SECRET_FILE", str(secret))
    with pytest.raises(ImproperlyConfigured, match=complaint) as raised:
        env_secret("NS_TEST_SECRET", "NS_TEST_SECRET_FILE")
    assert f"NS_TEST_SECRET_FILE={secret}" in str(raised.value)


def test_an_unknown_mode_is_e003() -> None:
    """namesrv.E003."""
    assert check_ids(MODE="paxos") == ["namesrv.E003"]


def test_an_unreadable_cluster_file_is_e004(tmp_path: Path) -> None:
    """namesrv.E004 for a missing file and for a file that is not a JSON object."""
    assert check_ids(CLUSTER_FILE=str(tmp_path / "missing.json")) == ["namesrv.E004"]
    listing = tmp_path / "cluster.json"
    listing.write_text("[1, 2]")
    assert check_ids(CLUSTER_FILE=str(listing)) == ["namesrv.E004"]
    listing.write_text(json.dumps({"nodes": [{"id": "n1", "port": 9876}]}))
    assert check_ids(CLUSTER_FILE=str(listing)) == []


def test_a_non_positive_interval_is_e005() -> None:
    """namesrv.E005."""
    assert check_ids(SCAN_INTERVAL_S=0) == ["namesrv.E005"]


def test_env_helpers_parse_typed_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """env_int and env_bool parse, defaults apply, garbage fails loudly."""
    monkeypatch.setenv("NS_TEST_INT", " 42 ")
    monkeypatch.setenv("NS_TEST_BOOL", "Yes")
    assert env_int("NS_TEST_INT", 1) == 42
    assert env_bool("NS_TEST_BOOL", False) is True
    assert env_str("NS_TEST_UNSET", "dflt") == "dflt"
    monkeypatch.setenv("NS_TEST_INT", "forty")
    with pytest.raises(ValueError, match="NS_TEST_INT"):
        env_int("NS_TEST_INT", 1)


def test_a_raft_port_outside_the_tcp_range_is_e007() -> None:
    """namesrv.E007; 0 means the port comes as run_gateway --raft-port."""
    assert check_ids(MODE="raft", RAFT_PORT=70000) == ["namesrv.E007"]
    assert check_ids(MODE="raft", RAFT_PORT=7101) == []
    assert check_ids(MODE="raft", RAFT_PORT=0) == []


def test_a_bad_proposal_bound_or_skew_allowance_is_e008() -> None:
    """namesrv.E008."""
    assert check_ids(PROPOSE_TIMEOUT_S=0) == ["namesrv.E008"]
    assert check_ids(SKEW_ALLOWANCE_MS=-1) == ["namesrv.E008"]
