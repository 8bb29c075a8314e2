"""TLS on a remoting port (remoting/tls.py), over real sockets on 127.0.0.1.

The certificates come from the launcher's own CA code (localcluster/tls_files.py), so
what is tested here is what ``cluster up --tls`` serves.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from localcluster.tls_files import (
    CertFiles,
    RunTls,
    ensure_run_tls,
    issue_cert,
    load_pair,
    make_ca,
)
from remoting.blocking import BlockingClient
from remoting.client import RemotingClient, RemotingClientError
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.connection import Connection
from remoting.frame import encode_frame
from remoting.server import RemotingServer
from remoting.tls import (
    ClientAuth,
    ClientTls,
    ServerTls,
    TlsClientConfig,
    TlsConfigError,
    TlsMode,
    TlsServerConfig,
    client_context,
    parse_tls_properties,
    read_tls_properties,
)

ECHO = 9101


@pytest.fixture(scope="module")
def run_tls(tmp_path_factory: pytest.TempPathFactory) -> RunTls:
    return ensure_run_tls(tmp_path_factory.mktemp("tls"), {"n1": ()})


def server_config(
    run_tls: RunTls, mode: TlsMode, auth: ClientAuth = ClientAuth.NONE
) -> TlsServerConfig:
    node = run_tls.nodes["n1"]
    return TlsServerConfig(
        mode=mode,
        cert_path=node.cert,
        key_path=node.key,
        trust_cert_path=run_tls.ca.cert,
        need_client_auth=auth,
    )


def trusting(run_tls: RunTls, own: CertFiles | None = None) -> ssl.SSLContext:
    """A client context that checks the server against the run's CA."""
    return client_context(
        TlsClientConfig(
            enabled=True,
            trust_cert_path=run_tls.ca.cert,
            cert_path=None if own is None else own.cert,
            key_path=None if own is None else own.key,
        )
    )


def echo(request: RemotingCommand, conn: Connection) -> RemotingCommand:
    kind = "tls" if conn.is_tls else "plain"
    return make_response(request, ResponseCode.SUCCESS, ext_fields={"seen": kind})


Serve = Callable[[ServerTls | None], Awaitable[RemotingServer]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[RemotingServer] = []

    async def start(tls: ServerTls | None) -> RemotingServer:
        server = RemotingServer(
            echo, host="127.0.0.1", port=0, prepare=None if tls is None else tls.prepare
        )
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()


async def ask(port: int, tls: ssl.SSLContext | ClientTls) -> str:
    client = RemotingClient(tls=tls, connect_timeout_s=5.0)
    try:
        answer = await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 5.0)
        return (answer.ext_fields or {})["seen"]
    finally:
        await client.close()


async def test_a_permissive_port_serves_tls_and_plain_clients_alike(
    run_tls: RunTls, serve: Serve
) -> None:
    server = await serve(ServerTls(server_config(run_tls, TlsMode.PERMISSIVE)))

    assert await ask(server.port, trusting(run_tls)) == "tls"
    assert await ask(server.port, ClientTls.PLAIN) == "plain"


async def test_an_enforcing_port_closes_a_plain_client_and_serves_a_tls_one(
    run_tls: RunTls, serve: Serve
) -> None:
    server = await serve(ServerTls(server_config(run_tls, TlsMode.ENFORCING)))

    with pytest.raises(RemotingClientError):
        await ask(server.port, ClientTls.PLAIN)
    assert await ask(server.port, trusting(run_tls)) == "tls"


async def test_a_client_refuses_a_server_its_ca_did_not_sign(
    run_tls: RunTls, serve: Serve, tmp_path: Path
) -> None:
    server = await serve(ServerTls(server_config(run_tls, TlsMode.ENFORCING)))
    other = CertFiles(tmp_path / "other-ca.pem", tmp_path / "other-ca.key")
    make_ca(other, "another CA")
    stranger = client_context(TlsClientConfig(enabled=True, trust_cert_path=other.cert))

    with pytest.raises(RemotingClientError, match="CERTIFICATE_VERIFY_FAILED"):
        await ask(server.port, stranger)


async def test_a_port_that_requires_client_certificates_refuses_a_client_without_one(
    run_tls: RunTls, serve: Serve
) -> None:
    config = server_config(run_tls, TlsMode.ENFORCING, ClientAuth.REQUIRE)
    server = await serve(ServerTls(config))

    with pytest.raises(RemotingClientError):
        await ask(server.port, trusting(run_tls))
    assert await ask(server.port, trusting(run_tls, run_tls.client)) == "tls"


async def test_a_plain_port_does_not_speak_tls(run_tls: RunTls, serve: Serve) -> None:
    server = await serve(None)

    with pytest.raises(RemotingClientError):
        await ask(server.port, trusting(run_tls))


async def test_a_peer_that_never_sends_its_first_byte_is_closed(
    run_tls: RunTls, serve: Serve
) -> None:
    tls = ServerTls(server_config(run_tls, TlsMode.PERMISSIVE), first_byte_timeout_s=0.2)
    server = await serve(tls)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)

    assert await asyncio.wait_for(reader.read(1), 5.0) == b""
    writer.close()


async def test_new_certificate_files_are_served_to_new_connections(
    tmp_path: Path, serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = ensure_run_tls(tmp_path / "a", {"n1": ()}), ensure_run_tls(tmp_path / "b", {})
    live = CertFiles(tmp_path / "live.pem", tmp_path / "live.key")
    shutil.copy(first.nodes["n1"].cert, live.cert)
    shutil.copy(first.nodes["n1"].key, live.key)
    monkeypatch.setattr("remoting.tls.RELOAD_CHECK_INTERVAL_S", 0.0)
    tls = ServerTls(TlsServerConfig(TlsMode.ENFORCING, live.cert, live.key))
    server = await serve(tls)
    assert await ask(server.port, trusting(first)) == "tls"

    # A renewal signed by another CA: copied in, key first, as an operator would.
    renewed = CertFiles(tmp_path / "renewed.pem", tmp_path / "renewed.key")
    second_ca = load_pair(second.ca)
    assert second_ca is not None
    issue_cert(second_ca, renewed, "n1")
    shutil.copy(renewed.key, live.key)
    shutil.copy(renewed.cert, live.cert)
    os.utime(live.cert, ns=(1, 10**18))  # a new mtime even within the clock's tick

    assert await ask(server.port, trusting(second)) == "tls"
    assert tls.reloads == 1


async def test_files_that_do_not_load_keep_the_last_good_certificate(
    tmp_path: Path, serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = ensure_run_tls(tmp_path, {"n1": ()})
    live = CertFiles(tmp_path / "live.pem", tmp_path / "live.key")
    shutil.copy(run.nodes["n1"].cert, live.cert)
    shutil.copy(run.nodes["n1"].key, live.key)
    monkeypatch.setattr("remoting.tls.RELOAD_CHECK_INTERVAL_S", 0.0)
    tls = ServerTls(TlsServerConfig(TlsMode.ENFORCING, live.cert, live.key))
    server = await serve(tls)

    live.cert.write_text("half a certificate", encoding="ascii")

    assert await ask(server.port, trusting(run)) == "tls"
    assert tls.reloads == 0


def test_a_blocking_client_speaks_tls_and_reconnects_after_the_server_closed_it(
    run_tls: RunTls,
) -> None:
    async def main() -> None:
        tls = ServerTls(server_config(run_tls, TlsMode.ENFORCING))
        server = RemotingServer(echo, host="127.0.0.1", port=0, prepare=tls.prepare)
        await server.start()
        client = BlockingClient(f"127.0.0.1:{server.port}", timeout_s=5.0, tls=trusting(run_tls))
        try:
            first = await asyncio.to_thread(client.invoke, RemotingCommand.request(ECHO))
            for conn in server.connections:
                conn.close()
            await asyncio.sleep(0.2)
            second = await asyncio.to_thread(client.invoke, RemotingCommand.request(ECHO))
        finally:
            client.close()
            await server.close()
        assert (first.ext_fields or {})["seen"] == (second.ext_fields or {})["seen"] == "tls"

    asyncio.run(main())


def test_an_enforcing_port_answers_a_plain_frame_with_nothing(run_tls: RunTls) -> None:
    async def main() -> bytes:
        tls = ServerTls(server_config(run_tls, TlsMode.ENFORCING))
        server = RemotingServer(echo, host="127.0.0.1", port=0, prepare=tls.prepare)
        await server.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(encode_frame(RemotingCommand.request(ECHO)))
            try:
                # Closed with the frame unread: an end of stream or a reset, no answer.
                return await asyncio.wait_for(reader.read(), 5.0)
            except ConnectionResetError:
                return b""
            finally:
                writer.close()
        finally:
            await server.close()

    assert asyncio.run(main()) == b""


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"tls.server.mode": "strict"}, "tls.server.mode: must be one of"),
        ({"tls.server.mode": "enforcing"}, "tls.server.certPath and tls.server.keyPath"),
        ({"tls.enable": "yes"}, "tls.enable must be true or false"),
        (
            {
                "tls.server.mode": "permissive",
                "tls.server.certPath": "a",
                "tls.server.keyPath": "b",
                "tls.server.need.client.auth": "require",
            },
            "tls.server.trustCertPath is required",
        ),
        ({"tls.client.certPath": "a"}, "go together"),
    ],
)
def test_bad_tls_settings_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(TlsConfigError, match=message):
        parse_tls_properties(props)


def test_certificate_files_that_do_not_load_stop_the_server_at_start(tmp_path: Path) -> None:
    (tmp_path / "tls.properties").write_text(
        "tls.server.mode=enforcing\ntls.server.certPath=missing.pem\n"
        "tls.server.keyPath=missing.key\n",
        encoding="ascii",
    )
    server, _ = read_tls_properties(tmp_path / "tls.properties")

    assert server.cert_path == tmp_path / "missing.pem"
    with pytest.raises(TlsConfigError, match="cannot load the server's certificate"):
        ServerTls(server)


def test_a_process_speaks_tls_when_its_settings_file_says_so(
    run_tls: RunTls, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NAMESRV_TLS_CONFIG_FILE", str(run_tls.client_properties))
    assert BlockingClient("127.0.0.1:1").ssl_context is not None
    assert BlockingClient("127.0.0.1:1", tls=ClientTls.PLAIN).ssl_context is None
    monkeypatch.delenv("NAMESRV_TLS_CONFIG_FILE")
    assert BlockingClient("127.0.0.1:1").ssl_context is None
