"""The one REGISTER_BROKER builder (``register_body.register_broker_request``) that
our broker, the demo fleet and the benches share: what it puts on the wire is what
the NameServer side reads back, once (``register_request.RegisterBrokerRequest``)."""

from __future__ import annotations

import zlib

import pytest

from remoting.codes import CURRENT_VERSION, RequestCode
from remoting.errors import HeaderFieldError
from remoting.frame import decode_frame, encode_frame
from remoting.ha_report import HA_SLAVE_ACKS_FIELD
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_body import (
    body_crc32,
    decode_register_broker_request_body,
    register_broker_request,
)
from remoting.register_request import (
    CONFIRM_OFFSET_FIELD,
    MAX_OFFSET_FIELD,
    RAFT_FAILOVER_FIELD,
    ZONE_NAME_EXT_FIELD,
    BrokerRegistration,
    RegisterBrokerRequest,
)

WRAPPER = TopicConfigSerializeWrapper(
    data_version=DataVersion(timestamp=7, counter=3),
    topic_config_table={f"T{i}": TopicConfig(f"T{i}", read_queue_nums=2) for i in range(40)},
)
IDENTITY = {
    "cluster_name": "DefaultCluster",
    "broker_name": "broker-a",
    "broker_id": 1,
    "broker_addr": "10.0.0.1:10911",
    "ha_server_addr": "10.0.0.1:10912",
}


def test_the_header_names_the_broker_and_checks_the_body() -> None:
    request = decode_frame(encode_frame(register_broker_request(**IDENTITY, wrapper=WRAPPER)))
    fields = request.ext_fields or {}
    assert request.code == RequestCode.REGISTER_BROKER and request.version == CURRENT_VERSION
    assert fields == {
        "brokerAddr": "10.0.0.1:10911",
        "brokerId": "1",
        "brokerName": "broker-a",
        "clusterName": "DefaultCluster",
        "haServerAddr": "10.0.0.1:10912",
        "compressed": "false",
        "enableActingMaster": "false",
        "bodyCrc32": str(zlib.crc32(request.body or b"") & 0x7FFFFFFF),
    }
    body = decode_register_broker_request_body(
        request.body, compressed=False, version=request.version
    )
    assert body.topic_config_wrapper == WRAPPER


def test_a_body_over_the_threshold_is_compressed_and_still_decodes() -> None:
    small = register_broker_request(**IDENTITY, wrapper=WRAPPER, compress_over_bytes=10**9)
    large = register_broker_request(**IDENTITY, wrapper=WRAPPER, compress_over_bytes=100)
    assert (small.ext_fields or {})["compressed"] == "false"
    assert (large.ext_fields or {})["compressed"] == "true"
    assert len(large.body or b"") < len(small.body or b"")
    assert (large.ext_fields or {})["bodyCrc32"] == str(body_crc32(large.body))
    body = decode_register_broker_request_body(large.body, compressed=True, version=large.version)
    assert body.topic_config_wrapper == WRAPPER


def test_optional_fields_appear_only_when_given() -> None:
    old = register_broker_request(**IDENTITY, wrapper=WRAPPER, enable_acting_master=None)
    assert "enableActingMaster" not in (old.ext_fields or {})
    assert "heartbeatTimeoutMillis" not in (old.ext_fields or {})
    new = register_broker_request(
        **IDENTITY,
        wrapper=WRAPPER,
        enable_acting_master=True,
        heartbeat_timeout_ms=9000,
        extra_fields={"enableRaftFailover": "true"},
    )
    fields = new.ext_fields or {}
    assert fields["enableActingMaster"] == "true"
    assert fields["heartbeatTimeoutMillis"] == "9000"
    assert fields["enableRaftFailover"] == "true"
    assert body_crc32(None) == body_crc32(b"") == 0


def test_the_frame_is_read_once_into_one_typed_request() -> None:
    frame = decode_frame(
        encode_frame(
            register_broker_request(
                **IDENTITY,
                wrapper=WRAPPER,
                enable_acting_master=True,
                heartbeat_timeout_ms=9_000,
                extra_fields={
                    ZONE_NAME_EXT_FIELD: "zone-b",
                    MAX_OFFSET_FIELD: "4096",
                    CONFIRM_OFFSET_FIELD: "4000",
                    RAFT_FAILOVER_FIELD: "TRUE",
                    HA_SLAVE_ACKS_FIELD: "10.0.0.2:51001=4000",
                },
            )
        )
    )
    request = RegisterBrokerRequest.read(frame)
    assert request.frame is frame
    assert request.broker == BrokerRegistration(
        cluster_name="DefaultCluster",
        broker_addr="10.0.0.1:10911",
        broker_name="broker-a",
        broker_id=1,
        ha_server_addr="10.0.0.1:10912",
        zone_name="zone-b",
        heartbeat_timeout_ms=9_000,
        enable_acting_master=True,
        enable_raft_failover=True,
        max_offset=4096,
        confirm_offset=4000,
        slave_acks=(("10.0.0.2:51001", 4000),),
    )
    # What a registration for another connection's entry may say: no reports.
    guest = request.broker.without_reports()
    assert (guest.max_offset, guest.confirm_offset, guest.slave_acks) == (None, None, None)
    assert guest.broker_name == "broker-a" and guest.zone_name == "zone-b"


def test_a_missing_or_malformed_entry_field_is_named() -> None:
    frame = register_broker_request(**IDENTITY, wrapper=WRAPPER)
    assert frame.ext_fields is not None
    del frame.ext_fields["brokerName"]
    with pytest.raises(HeaderFieldError, match="brokerName"):
        RegisterBrokerRequest.read(frame)
    frame = register_broker_request(**IDENTITY, wrapper=WRAPPER)
    assert frame.ext_fields is not None
    frame.ext_fields["brokerId"] = "one"
    with pytest.raises(HeaderFieldError, match="brokerId"):
        RegisterBrokerRequest.read(frame)
