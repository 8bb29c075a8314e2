"""HTTPS on a node's web port: the web process ``run_node`` starts for a node whose
``[tls]`` section says ``web = true``, its command line and environment made by
node.processes from the config, serving the console with a certificate of a test CA.

The key is encrypted (``key_password_file``): the harder case, whose password must
reach uvicorn without appearing on any command line. Clients check the chain against
the CA and the name against the certificate, as a browser or ``curl --cacert`` does.
"""

from __future__ import annotations

import http.client
import os
import re
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from localcluster.readiness import accepts_connections
from localcluster.tls_files import CertFiles, issue_cert, make_ca
from node.config import Endpoint, NodeConfig, NodeTls
from node.files import write_secret_file
from node.processes import (
    PROJECT_DIR,
    SHARED_DB,
    manage_argv,
    node_env,
    reset_metrics_dir,
    web_argv,
)
from node.supervise import collect_static, collected, prepare_data_dir
from tests.waiting import wait_until
from tools import ports, process_facts

pytestmark = pytest.mark.slow
LOOPBACK = "127.0.0.1"
KEY_PASSWORD = "web-key-password-never-on-a-command-line"
OPERATOR = "https-viewer"
OPERATOR_PASSWORD = "an-https-console-password"
START_TIMEOUT_S = 90.0
HTTP_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 20.0
HSTS = "max-age=86400"
# migrate and create_operator in one process: Django starts once, not twice.
MAKE_ACCOUNT = (
    "from django.core.management import call_command; "
    f"call_command('migrate', database='{SHARED_DB}', interactive=False, verbosity=0); "
    f"call_command('create_operator', '{OPERATOR}', role='viewer', "
    "password_env='OPERATOR_PASSWORD')"
)
"""The local profile's HSTS over HTTPS (namesrv_site.settings.WEB_HTTPS_HSTS_SECONDS)."""


@dataclass(frozen=True, slots=True)
class HttpsWeb:
    """A running web process serving HTTPS."""

    port: int
    ca_file: Path
    pid: int

    @property
    def base(self) -> str:
        return f"https://{LOOPBACK}:{self.port}"

    def verified(self) -> ssl.SSLContext:
        """What a careful client does: the chain against the CA, and the name."""
        return ssl.create_default_context(cafile=str(self.ca_file))


def _encrypted_pair(folder: Path) -> tuple[CertFiles, Path, Path]:
    """A node certificate whose key is encrypted: (the pair, its password file, the CA)."""
    ca = CertFiles(folder / "ca.pem", folder / "ca.key")
    node = CertFiles(folder / "n1.pem", folder / "n1.key")
    issue_cert(make_ca(ca, "namesrv test web CA"), node, "n1")
    key = serialization.load_pem_private_key(node.key.read_bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
    )
    write_secret_file(node.key, encrypted.decode("ascii"))
    password_file = folder / "n1.key.password"
    write_secret_file(password_file, KEY_PASSWORD + "\n")
    return node, password_file, ca.cert


def _config(folder: Path, web_port: int) -> tuple[NodeConfig, Path]:
    pair, password_file, ca_file = _encrypted_pair(folder)
    tls = NodeTls(
        cert_file=pair.cert,
        key_file=pair.key,
        key_password_file=password_file,
        ca_file=ca_file,
        web=True,
    )
    config = NodeConfig(
        source=folder / "node.toml",
        node_id="n1",
        mode="eventual",
        data_dir=folder / "data",
        remoting=Endpoint(LOOPBACK, ports.free_port()),
        web=Endpoint(LOOPBACK, web_port),
        internal_port=ports.free_port(),
        web_profile="local",
        tls=tls,
    )
    return config, ca_file


def _clean_environment() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NAMESRV_", "DJANGO_", "DATABASE_", "REDIS_"))
    }


def _run(argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(
        argv,
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.fixture(scope="module")
def https_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsWeb]:
    """The web process of a node with ``[tls] web = true``, and an account in its database."""
    folder = tmp_path_factory.mktemp("web-https")
    config, ca_file = _config(folder, ports.free_port())
    # As run_node does: the internal secret, the member list, the web metrics folder,
    # the static files.
    prepare_data_dir(config)
    reset_metrics_dir(config)
    env = node_env(config, _clean_environment())
    collected(config, collect_static(config, env))
    log = folder / "web.log"
    with open(log, "wb") as out:
        web = subprocess.Popen(
            web_argv(config),
            cwd=PROJECT_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # While the web process starts: the shared database and one account in it.
        _run(
            manage_argv("shell", "-c", MAKE_ACCOUNT),
            {**env, "OPERATOR_PASSWORD": OPERATOR_PASSWORD},
        )

        def listening() -> bool:
            if accepts_connections(config.web.port):
                return True
            assert web.poll() is None, log.read_text(encoding="utf-8", errors="replace")[-3000:]
            return False

        wait_until(
            listening,
            what=lambda: (
                f"the web port\n{log.read_text(encoding='utf-8', errors='replace')[-3000:]}"
            ),
            timeout_s=START_TIMEOUT_S,
            interval_s=0.2,
        )
        yield HttpsWeb(config.web.port, ca_file, web.pid)
    finally:
        web.terminate()
        try:
            web.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            web.kill()
            web.wait()


def test_the_web_port_serves_https_to_a_client_that_checks_the_ca(https_web: HttpsWeb) -> None:
    url = f"{https_web.base}/healthz"
    with urllib.request.urlopen(
        url, timeout=HTTP_TIMEOUT_S, context=https_web.verified()
    ) as answer:
        assert (answer.status, answer.read()) == (200, b"ok\n")
        assert answer.headers["Strict-Transport-Security"] == HSTS

    curl = subprocess.run(
        ["curl", "--silent", "--show-error", "--fail", "--cacert", str(https_web.ca_file), url],
        capture_output=True,
        text=True,
        timeout=HTTP_TIMEOUT_S,
        check=False,
    )
    assert (curl.returncode, curl.stdout) == (0, "ok\n"), curl.stderr


def test_the_web_port_refuses_plain_http_and_a_client_that_does_not_trust_its_ca(
    https_web: HttpsWeb,
) -> None:
    plain = http.client.HTTPConnection(LOOPBACK, https_web.port, timeout=HTTP_TIMEOUT_S)
    with pytest.raises((OSError, http.client.HTTPException)):
        plain.request("GET", "/healthz")
        plain.getresponse()
    plain.close()

    # The system's CAs did not sign the node's certificate.
    with pytest.raises(urllib.error.URLError, match="certificate verify failed"):
        urllib.request.urlopen(f"{https_web.base}/healthz", timeout=HTTP_TIMEOUT_S)
    curl = subprocess.run(
        ["curl", "--silent", "--fail", f"{https_web.base}/healthz"],
        capture_output=True,
        timeout=HTTP_TIMEOUT_S,
        check=False,
    )
    assert curl.returncode == 60  # curl: "peer certificate cannot be authenticated"


def _cookie(headers: list[tuple[str, str]], name: str) -> str:
    found = [v for k, v in headers if k.lower() == "set-cookie" and v.startswith(f"{name}=")]
    assert len(found) == 1, headers
    return found[0]


def test_the_console_marks_its_session_and_csrf_cookies_secure(https_web: HttpsWeb) -> None:
    link = http.client.HTTPSConnection(
        LOOPBACK, https_web.port, timeout=HTTP_TIMEOUT_S, context=https_web.verified()
    )
    link.request("GET", "/accounts/login/")
    page = link.getresponse()
    body = page.read().decode("utf-8")
    csrf_cookie = _cookie(page.getheaders(), "csrftoken")
    assert "; Secure" in csrf_cookie
    form_token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body)
    assert form_token is not None

    form = (
        f"username={OPERATOR}&password={OPERATOR_PASSWORD}"
        f"&csrfmiddlewaretoken={form_token.group(1)}"
    )
    link.request(
        "POST",
        "/accounts/login/",
        body=form,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": csrf_cookie.split(";", 1)[0],
            "Origin": https_web.base,
            "Referer": f"{https_web.base}/accounts/login/",
        },
    )
    signed_in = link.getresponse()
    signed_in.read()
    link.close()
    assert signed_in.status == 302, signed_in.getheaders()
    session_cookie = _cookie(signed_in.getheaders(), "sessionid")
    assert "; Secure" in session_cookie and "; HttpOnly" in session_cookie


def test_the_key_password_is_on_no_command_line(https_web: HttpsWeb) -> None:
    lines = [" ".join(argv) for argv in process_facts.command_lines()]
    web_line = " ".join(process_facts.command_line(https_web.pid))
    assert "node.web_tls --ssl-keyfile-password-file" in web_line
    assert not [line for line in lines if KEY_PASSWORD in line]
