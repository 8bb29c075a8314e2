"""The accounts file's per-broker accounts (``brokerNames``) and its file-mode check."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from node.files import write_secret_file
from remoting.acl import Credentials, sign
from remoting.acl_policy import (
    Account,
    AclConfig,
    AclConfigError,
    AclFile,
    RemotingAcl,
    dump_acl,
    load_acl_file,
    parse_acl,
)
from remoting.codes import RequestCode
from remoting.command import RemotingCommand

ACCOUNTS = """\
globalWhiteRemoteAddresses: [127.0.0.1]
accounts:
  - accessKey: broker-a-key
    secretKey: broker-a-secret
    brokerNames: [broker-a, broker-a2]
  - accessKey: broker-b-key
    secretKey: broker-b-secret
    brokerNames: broker-b
  - accessKey: shared
    secretKey: shared-secret
  - accessKey: ops
    secretKey: ops-secret
    admin: true
"""
REGISTER = RequestCode.REGISTER_BROKER
UNREGISTER = RequestCode.UNREGISTER_BROKER
BROKER_A = Credentials("broker-a-key", "broker-a-secret")
SHARED = Credentials("shared", "shared-secret")
OPS = Credentials("ops", "ops-secret")


def accounts_file(folder: Path, text: str = ACCOUNTS, mode: int = 0o600) -> Path:
    path = folder / "plain_acl.yml"
    write_secret_file(path, text)
    path.chmod(mode)
    return path


def acl_of(config: AclConfig) -> RemotingAcl:
    """The NameServer's code classes, spelled out (this layer does not know the gateway)."""
    return RemotingAcl(
        config,
        admin_codes=frozenset({RequestCode.PUT_KV_CONFIG}),
        white_listable_codes=frozenset({REGISTER, UNREGISTER}),
        named_codes=frozenset({REGISTER, UNREGISTER}),
        admin_named_codes=frozenset({UNREGISTER}),
    )


def naming(code: int, broker_name: str) -> RemotingCommand:
    return RemotingCommand.request(code, {"brokerName": broker_name, "clusterName": "C"})


def test_an_account_names_the_brokers_it_may_register(tmp_path: Path) -> None:
    config = load_acl_file(accounts_file(tmp_path))

    assert config.accounts["broker-a-key"].broker_names == frozenset({"broker-a", "broker-a2"})
    assert config.accounts["broker-b-key"].broker_names == frozenset({"broker-b"})
    assert config.accounts["shared"].broker_names is None
    assert config.bindings == {
        "broker-a": ("broker-a-key",),
        "broker-a2": ("broker-a-key",),
        "broker-b": ("broker-b-key",),
    }


def test_per_broker_accounts_and_the_mode_switch_read_back_as_written(tmp_path: Path) -> None:
    config = load_acl_file(accounts_file(tmp_path, ACCOUNTS + "fileModeCheck: false\n"))

    import yaml

    assert parse_acl(yaml.safe_load(dump_acl(config))) == config
    assert not config.file_mode_check


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ("brokerNames: []", "accounts[0].brokerNames must name at least one broker"),
        ("brokerNames: ['']", "accounts[0].brokerNames must name at least one broker"),
        ("brokerNames: 7", "accounts[0].brokerNames must be a broker name, or a list"),
        ("brokerNames: [broker-a, 7]", "accounts[0].brokerNames must be a broker name"),
    ],
)
def test_a_malformed_broker_names_entry_is_refused_with_the_entry_named(
    tmp_path: Path, entry: str, words: str
) -> None:
    text = f"accounts:\n  - accessKey: a\n    secretKey: abcdefgh\n    {entry}\n"

    with pytest.raises(AclConfigError, match=r"plain_acl\.yml") as caught:
        load_acl_file(accounts_file(tmp_path, text))

    assert words in str(caught.value)


def test_the_mode_switch_must_be_a_boolean(tmp_path: Path) -> None:
    with pytest.raises(AclConfigError, match="fileModeCheck must be true or false"):
        load_acl_file(accounts_file(tmp_path, ACCOUNTS + "fileModeCheck: no thanks\n"))


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o660])
def test_a_file_group_or_others_may_read_or_write_is_refused_at_start(
    tmp_path: Path, mode: int
) -> None:
    path = accounts_file(tmp_path, mode=mode)

    with pytest.raises(AclConfigError) as caught:
        AclFile(path)

    message = str(caught.value)
    assert "\n" not in message
    assert f"mode {mode:04o}" in message and f"chmod 600 {path}" in message


def test_an_operator_may_turn_the_mode_check_off_in_the_file(tmp_path: Path) -> None:
    path = accounts_file(tmp_path, ACCOUNTS + "fileModeCheck: false\n", mode=0o644)

    assert set(load_acl_file(path).accounts) == {"broker-a-key", "broker-b-key", "shared", "ops"}


def test_a_reload_of_a_file_opened_to_others_keeps_the_last_good_accounts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = accounts_file(tmp_path)
    source = AclFile(path, check_s=0.0)
    newcomer = ACCOUNTS + "  - accessKey: newcomer\n    secretKey: newcomer-secret\n"

    with caplog.at_level(logging.ERROR, logger="remoting.acl_policy"):
        path.write_text(newcomer, encoding="utf-8")
        os.chmod(path, 0o644)  # a chmod alone changes no mtime: it must still be seen
        kept = source.current()
    assert "newcomer" not in kept.accounts
    assert "keeping the last good accounts" in caplog.text and "chmod 600" in caplog.text

    os.chmod(path, 0o600)
    assert "newcomer" in source.current().accounts


def test_a_bound_account_may_name_only_its_brokers(tmp_path: Path) -> None:
    acl = acl_of(load_acl_file(accounts_file(tmp_path)))

    assert acl.check(sign(naming(REGISTER, "broker-a2"), BROKER_A), "10.0.0.9") is None
    refusal = acl.check(sign(naming(REGISTER, "broker-b"), BROKER_A), "10.0.0.9")

    assert refusal is not None and refusal.reason == "broker-name"
    assert "may name only the brokers [broker-a, broker-a2], not 'broker-b'" in refusal.remark


def test_a_bound_broker_name_is_for_its_accounts_only(tmp_path: Path) -> None:
    acl = acl_of(load_acl_file(accounts_file(tmp_path)))

    unsigned = acl.check(naming(REGISTER, "broker-a"), "127.0.0.1")
    shared = acl.check(sign(naming(REGISTER, "broker-a"), SHARED), "127.0.0.1")
    admin_register = acl.check(sign(naming(REGISTER, "broker-a"), OPS), "127.0.0.1")

    for refusal in (unsigned, shared, admin_register):
        assert refusal is not None and refusal.reason == "broker-bound"
        assert "bound to AccessKey 'broker-a-key'" in refusal.remark
    assert unsigned is not None and "(unsigned)" in unsigned.remark
    assert acl.check(naming(REGISTER, "broker-z"), "127.0.0.1") is None
    assert acl.check(sign(naming(UNREGISTER, "broker-a"), OPS), "127.0.0.1") is None


def test_the_signer_is_the_account_whose_signature_holds(tmp_path: Path) -> None:
    acl = acl_of(load_acl_file(accounts_file(tmp_path)))
    request = naming(REGISTER, "broker-a")

    signer = acl.signer(sign(request, BROKER_A), "127.0.0.1")

    assert signer is not None and signer.binds("broker-a") and not signer.binds("broker-b")
    assert acl.signer(request, "127.0.0.1") is None
    assert acl.signer(sign(request, Credentials("broker-a-key", "guessed")), "127.0.0.1") is None


def test_accounts_without_broker_names_bind_nothing() -> None:
    config = AclConfig({"a": Account("a", "secret-a")})

    signed = sign(naming(REGISTER, "broker-a"), Credentials("a", "secret-a"))

    assert config.bindings == {}
    assert acl_of(config).check(signed, "10.0.0.9") is None
