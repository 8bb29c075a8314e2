"""RocketMQ ACL request signing (``AclClientRPCHook``), against fixed vectors.

Every expected signature below was computed outside this code base, by hand from
the algorithm (the values of the ext fields sorted by key, then the body, HmacSHA1
with the secret key, Base64), with::

    printf '%s' "$content" | openssl dgst -sha1 -hmac "$secret_key" -binary | base64
"""

from __future__ import annotations

import struct

import pytest

from remoting.acl import (
    Credentials,
    java_key_order,
    sign,
    signature,
    signature_matches,
    signing_content,
)
from remoting.codes import RequestCode, SerializeType
from remoting.command import RemotingCommand
from remoting.frame import FrameDecoder, decode_frame, encode_frame

ROCKETMQ = Credentials("RocketMQ", "12345678")
# content "RocketMQ" + "TopicTest" + "ORDER_TOPIC_CONFIG" + "broker-a:8"
PUT_KV_SIGNATURE = "OjlIt952QqlUomqhxf5dhqd8C94="
# content "ops-admin" + "Orders" + b'{"queueDatas":[]}'
REGISTER_TOPIC_SIGNATURE = "b/oxsh0LdtHUIGaUXBb786/HJGg="
# content "RocketMQ" + "tok-123" + "broker-a" (AccessKey < SecurityToken < brokerName)
WIPE_WITH_TOKEN_SIGNATURE = "gE3gq0A/BE0udOUY0vFxTjVtp30="


def put_kv() -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG,
        {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest", "value": "broker-a:8"},
    )


def test_the_content_is_the_values_sorted_by_key_then_the_body() -> None:
    fields = {"namespace": "N", "AccessKey": "A", "key": "K", "Signature": "ignored"}

    assert signing_content(fields, b"<body>") == b"AKN<body>"


def test_a_put_kv_request_is_signed_as_the_java_client_signs_it() -> None:
    signed = sign(put_kv(), ROCKETMQ)

    assert signed.ext_fields is not None
    assert signed.ext_fields["AccessKey"] == "RocketMQ"
    assert signed.ext_fields["Signature"] == PUT_KV_SIGNATURE
    assert signature_matches(signed, "12345678")


def test_the_body_is_part_of_the_signed_content() -> None:
    request = RemotingCommand.request(
        RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "Orders"}, b'{"queueDatas":[]}'
    )

    signed = sign(request, Credentials("ops-admin", "a-long-admin-secret"))

    assert signed.ext_fields is not None
    assert signed.ext_fields["Signature"] == REGISTER_TOPIC_SIGNATURE
    tampered = RemotingCommand.request(
        RequestCode.REGISTER_TOPIC_IN_NAMESRV,
        signed.ext_fields,
        b'{"queueDatas":[{"brokerName":"evil"}]}',
    )
    assert not signature_matches(tampered, "a-long-admin-secret")


def test_a_security_token_is_sent_and_signed() -> None:
    request = RemotingCommand.request(
        RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
    )

    signed = sign(request, Credentials("RocketMQ", "12345678", security_token="tok-123"))

    assert signed.ext_fields == {
        "brokerName": "broker-a",
        "AccessKey": "RocketMQ",
        "SecurityToken": "tok-123",
        "Signature": WIPE_WITH_TOKEN_SIGNATURE,
    }


def test_a_wrong_secret_a_changed_field_or_no_signature_does_not_match() -> None:
    signed = sign(put_kv(), ROCKETMQ)
    assert signed.ext_fields is not None

    assert not signature_matches(signed, "87654321")
    changed = RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {**signed.ext_fields, "value": "broker-b:8"}
    )
    assert not signature_matches(changed, "12345678")
    assert not signature_matches(put_kv(), "12345678")


def test_the_unique_key_query_flag_added_after_signing_is_not_signed() -> None:
    signed = sign(put_kv(), ROCKETMQ)
    assert signed.ext_fields is not None

    with_flag = RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {**signed.ext_fields, "_UNIQUE_KEY_QUERY": "true"}
    )

    assert signature_matches(with_flag, "12345678")


def test_signing_twice_gives_the_same_signature() -> None:
    once = sign(put_kv(), ROCKETMQ)

    assert sign(once, ROCKETMQ).ext_fields == once.ext_fields


def test_a_signature_survives_the_json_header_round_trip() -> None:
    signed = sign(put_kv(), ROCKETMQ)

    decoded = decode_frame(encode_frame(signed))

    assert signature_matches(decoded, "12345678")


def _binary_string(text: str, width: str) -> bytes:
    raw = text.encode()
    return struct.pack(width, len(raw)) + raw


def test_a_signed_rocketmq_binary_header_from_a_java_client_verifies() -> None:
    """The frame a Java client with serializeTypeCurrentRPC=ROCKETMQ sends, laid out by
    hand: fixed part, empty remark, then the ext map as int16 key / int32 value pairs."""
    ext = {
        "brokerName": "broker-a",
        "AccessKey": "RocketMQ",
        "SecurityToken": "tok-123",
        "Signature": WIPE_WITH_TOKEN_SIGNATURE,
    }
    ext_block = b"".join(
        _binary_string(key, ">h") + _binary_string(value, ">i") for key, value in ext.items()
    )
    header = (
        struct.pack(">hBhii", 205, 0, 479, 7, 0)
        + struct.pack(">i", 0)
        + struct.pack(">i", len(ext_block))
        + ext_block
    )
    frame = struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header

    (request,) = FrameDecoder().feed(frame)

    assert request.serialize_type == SerializeType.ROCKETMQ
    assert request.code == RequestCode.WIPE_WRITE_PERM_OF_BROKER
    assert signature_matches(request, "12345678")
    assert not signature_matches(request, "12345679")


def test_keys_sort_as_java_strings_do_by_utf16_code_units() -> None:
    # U+1F600 is a surrogate pair (D83D DE00) in UTF-16, so Java puts it before
    # U+FF21 (FULLWIDTH A); code point order would put it after.
    astral, fullwidth = "\U0001f600", "\uff21"

    assert sorted([fullwidth, astral], key=java_key_order) == [astral, fullwidth]
    assert signing_content({fullwidth: "2", astral: "1"}, None) == b"12"


def test_the_signature_is_base64_of_hmac_sha1() -> None:
    assert signature(b"RocketMQTopicTestORDER_TOPIC_CONFIGbroker-a:8", "12345678") == (
        PUT_KV_SIGNATURE
    )


@pytest.mark.parametrize(("access_key", "secret_key"), [("", "12345678"), ("ak", "")])
def test_an_account_needs_both_keys(access_key: str, secret_key: str) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        Credentials(access_key, secret_key)


def test_credentials_never_print_their_secret() -> None:
    assert "12345678" not in repr(ROCKETMQ)
