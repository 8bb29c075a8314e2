"""The gateway's remoting ACL: the accounts file and who may send which code."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.acl import ADMIN_CODES, BROKER_CODES, namesrv_acl
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
    parse_address_pattern,
)
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand

ADMIN = Credentials("ops-admin", "admin-secret-key")
BROKERS = Credentials("brokers", "broker-secret-key")
PINNED = Credentials("pinned", "pinned-secret-key")
SAMPLE = """\
globalWhiteRemoteAddresses:
  - 10.0.1.*
  - 192.168.7.0/24
accounts:
  - accessKey: ops-admin
    secretKey: admin-secret-key
    admin: true
  - accessKey: brokers
    secretKey: broker-secret-key
  - accessKey: pinned
    secretKey: pinned-secret-key
    admin: true
    whiteRemoteAddress: 10.9.0.0/16
"""


@pytest.fixture
def acl(tmp_path: Path) -> RemotingAcl:
    path = tmp_path / "plain_acl.yml"
    write_secret_file(path, SAMPLE)
    return namesrv_acl(load_acl_file(path))


def put_kv() -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"}
    )


def register() -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.REGISTER_BROKER,
        {"brokerName": "broker-a", "brokerAddr": "10.0.1.5:10911", "clusterName": "C"},
    )


def test_the_sample_file_reads_as_upstreams_plain_acl(acl: RemotingAcl) -> None:
    config = acl.config

    assert set(config.accounts) == {"ops-admin", "brokers", "pinned"}
    assert config.accounts["ops-admin"].admin and not config.accounts["brokers"].admin
    assert [str(n) for n in config.global_white_list] == ["10.0.1.0/24", "192.168.7.0/24"]
    assert not config.reads_need_signature


def test_an_admin_code_signed_by_an_admin_passes(acl: RemotingAcl) -> None:
    assert acl.check(sign(put_kv(), ADMIN), "203.0.113.9") is None


@pytest.mark.parametrize(
    ("request_of", "peer", "reason", "words"),
    [
        (lambda: put_kv(), "10.0.1.5", "unsigned", "needs an ACL signature (no AccessKey)"),
        (lambda: sign(put_kv(), BROKERS), "10.0.1.5", "not-admin", "is not an admin account"),
        (
            lambda: sign(put_kv(), Credentials("ops-admin", "guessed-secret")),
            "10.0.1.5",
            "bad-signature",
            "signature does not match",
        ),
        (
            lambda: sign(put_kv(), Credentials("nobody", "whatever-secret")),
            "10.0.1.5",
            "unknown-key",
            "unknown AccessKey 'nobody'",
        ),
        (lambda: sign(put_kv(), PINNED), "10.0.1.5", "address", "not allowed from 10.0.1.5"),
    ],
)
def test_an_admin_code_is_refused_with_a_remark_saying_why(
    acl: RemotingAcl, request_of: object, peer: str, reason: str, words: str
) -> None:
    request = request_of()  # type: ignore[operator]

    refusal = acl.check(request, peer)

    assert refusal is not None and refusal.reason == reason
    assert words in refusal.remark and "PUT_KV_CONFIG" in refusal.remark
    answer = acl.refuse(request, refusal)
    assert answer is not None and answer.code == ResponseCode.NO_PERMISSION
    assert acl.refusals[reason] == 1


def test_a_white_listed_address_never_admits_an_admin_code(acl: RemotingAcl) -> None:
    for code in ADMIN_CODES:
        assert acl.check(RemotingCommand.request(code, {}), "10.0.1.5") is not None


def test_a_pinned_admin_account_works_from_its_own_network(acl: RemotingAcl) -> None:
    assert acl.check(sign(put_kv(), PINNED), "10.9.3.4") is None


def test_broker_codes_pass_unsigned_from_the_white_list_only(acl: RemotingAcl) -> None:
    for code in BROKER_CODES:
        request = RemotingCommand.request(code, {"brokerName": "broker-a"})
        assert acl.check(request, "10.0.1.5") is None
        assert acl.check(request, "::ffff:192.168.7.20") is None
        refusal = acl.check(request, "172.16.0.1")
        assert refusal is not None
        assert "needs a signature or a white-listed address" in refusal.remark


def test_broker_codes_pass_signed_by_any_account_from_anywhere(acl: RemotingAcl) -> None:
    assert acl.check(sign(register(), BROKERS), "172.16.0.1") is None


def test_a_bad_signature_is_refused_even_from_the_white_list(acl: RemotingAcl) -> None:
    forged = sign(register(), Credentials("brokers", "not-the-secret"))

    refusal = acl.check(forged, "10.0.1.5")

    assert refusal is not None and refusal.reason == "bad-signature"


def test_reads_are_open_unless_the_file_closes_them(acl: RemotingAcl) -> None:
    read = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert not acl.guards(read.code)
    assert acl.check(read, "172.16.0.1") is None

    closed = namesrv_acl(AclConfig(acl.config.accounts, (), reads_need_signature=True))
    assert closed.guards(read.code)
    assert closed.check(read, "127.0.0.1") is not None
    assert closed.check(sign(read, BROKERS), "127.0.0.1") is None


def test_a_one_way_request_is_refused_without_an_answer(acl: RemotingAcl) -> None:
    heartbeat = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, {}, oneway=True)

    refusal = acl.check(heartbeat, "172.16.0.1")

    assert refusal is not None and acl.refuse(heartbeat, refusal) is None


def test_no_file_means_no_accounts_and_loopback_brokers_only() -> None:
    acl = namesrv_acl(None)

    assert acl.check(register(), "127.0.0.1") is None
    assert acl.check(register(), "::1") is None
    assert acl.check(register(), "10.0.1.5") is not None
    assert acl.check(sign(put_kv(), ADMIN), "127.0.0.1") is not None


@pytest.mark.parametrize(
    ("pattern", "network"),
    [
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("10.1.2.3", "10.1.2.3/32"),
        ("10.10.*", "10.10.0.0/16"),
        ("10.10.*.*", "10.10.0.0/16"),
        ("*", "0.0.0.0/0"),
        ("fd00::/8", "fd00::/8"),
    ],
)
def test_white_list_entries_may_be_cidr_addresses_or_upstreams_wildcards(
    pattern: str, network: str
) -> None:
    assert str(parse_address_pattern(pattern)) == network


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("accounts: {}", "accounts must be a list"),
        ("accounts:\n  - secretKey: abcdefgh", "accounts[0].accessKey"),
        ("accounts:\n  - accessKey: a\n    secretKey: abc", "at least 6 characters"),
        (
            "accounts:\n  - accessKey: a\n    secretKey: abcdefg\n    admin: yes please",
            "accounts[0].admin must be true or false",
        ),
        ("globalWhiteRemoteAddresses: [10.*.1.2]", "'*' must end the address"),
        ("globalWhiteRemoteAddresses: [not-an-ip]", "is not an address"),
        (
            "accounts:\n  - {accessKey: a, secretKey: abcdefg}\n  - {accessKey: a, secretKey: "
            "abcdefh}",
            "repeats",
        ),
        ("readsNeedSignature: maybe", "readsNeedSignature must be true or false"),
        ("[1, 2", "not valid YAML"),
        ("- just a list", "mapping at its top level"),
    ],
)
def test_a_malformed_file_is_refused_with_the_entry_named(
    tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "plain_acl.yml"
    write_secret_file(path, text)

    with pytest.raises(AclConfigError, match=r"plain_acl\.yml") as caught:
        load_acl_file(path)

    assert words in str(caught.value)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AclConfigError, match="cannot read ACL file"):
        load_acl_file(tmp_path / "absent.yml")


def test_the_file_is_reread_when_it_changes_and_a_broken_edit_keeps_the_last_good(
    tmp_path: Path,
) -> None:
    path = tmp_path / "plain_acl.yml"
    write_secret_file(path, SAMPLE)
    source = AclFile(path, check_s=0.0)
    acl = namesrv_acl(source)
    newcomer = Credentials("newcomer", "newcomer-secret")
    assert acl.check(sign(put_kv(), newcomer), "127.0.0.1") is not None

    path.write_text(
        SAMPLE + "  - accessKey: newcomer\n    secretKey: newcomer-secret\n    admin: true\n"
    )
    assert acl.check(sign(put_kv(), newcomer), "127.0.0.1") is None

    path.write_text("accounts: [broken")
    assert acl.check(sign(put_kv(), newcomer), "127.0.0.1") is None
    path.unlink()
    assert acl.check(sign(put_kv(), ADMIN), "127.0.0.1") is None


def test_what_cluster_up_writes_reads_back_the_same() -> None:
    config = AclConfig(
        {
            "a": Account(
                "a",
                "secret-a",
                admin=True,
                white_remote_addresses=(parse_address_pattern("10.0.0.0/8"),),
            )
        },
        (parse_address_pattern("127.0.0.1"),),
    )

    import yaml

    from remoting.acl_policy import parse_acl

    assert parse_acl(yaml.safe_load(dump_acl(config))) == config
