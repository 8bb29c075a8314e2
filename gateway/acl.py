"""The NameServer's remoting ACL: which request codes are admin codes, which are
broker codes (the engine and the accounts file are :mod:`remoting.acl_policy`).

* **admin** codes change routes, permissions, KV or config and never come from a
  broker: PUT_KV_CONFIG, DELETE_KV_CONFIG, WIPE_WRITE_PERM_OF_BROKER,
  DELETE_TOPIC_IN_NAMESRV, REGISTER_TOPIC_IN_NAMESRV, UPDATE_NAMESRV_CONFIG,
  ADD_WRITE_PERM_OF_BROKER. They need a valid signature of an *admin* account.
* **broker** codes are what brokers send: REGISTER_BROKER, UNREGISTER_BROKER,
  BROKER_HEARTBEAT, QUERY_DATA_VERSION. A signature of any account, or a peer on
  the white list (RocketMQ 4.x brokers do not sign their registrations).
* everything else is a read, open unless the accounts file closes reads.

REGISTER_BROKER, UNREGISTER_BROKER, BROKER_HEARTBEAT and QUERY_DATA_VERSION name a
broker (``brokerName``, which all four require): an account
with ``brokerNames`` may name only those brokers, and a broker name bound to an
account may be named only by the accounts bound to it (an admin account may still
unregister it, as the console does). Who may move a broker another connection holds
is :mod:`gateway.broker_holds`.

In raft mode the decision is made on the node the request reached, before anything
is proposed: a refused write never enters the Raft log.
"""

from __future__ import annotations

from pathlib import Path

from remoting.acl_policy import AclConfig, AclFile, RemotingAcl
from remoting.codes import RequestCode

ADMIN_CODES: frozenset[int] = frozenset(
    {
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.REGISTER_TOPIC_IN_NAMESRV,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
    }
)
BROKER_CODES: frozenset[int] = frozenset(
    {
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.BROKER_HEARTBEAT,
        RequestCode.QUERY_DATA_VERSION,
    }
)

NAMED_CODES: frozenset[int] = frozenset(
    {
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.BROKER_HEARTBEAT,
        RequestCode.QUERY_DATA_VERSION,
    }
)
"""Broker codes whose ``brokerName`` the accounts' ``brokerNames`` restrict."""
ADMIN_NAMED_CODES: frozenset[int] = frozenset({RequestCode.UNREGISTER_BROKER})
"""Named codes an admin account may send for any broker (the console's unregister)."""


def namesrv_acl(source: AclFile | AclConfig | Path | None) -> RemotingAcl:
    """The NameServer's ACL over ``source`` (a path is read and re-read when it
    changes; None: no accounts, loopback brokers only)."""
    if source is None:
        source = AclConfig.default()
    elif isinstance(source, Path):
        source = AclFile(source)
    return RemotingAcl(
        source,
        admin_codes=ADMIN_CODES,
        white_listable_codes=BROKER_CODES,
        named_codes=NAMED_CODES,
        admin_named_codes=ADMIN_NAMED_CODES,
    )
