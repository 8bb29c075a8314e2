"""``[tls] web = true``: what the node's web process is started with, and how its
console URL is written (the running HTTPS port is tests/integration/test_web_https.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.config import load_node_config
from node.processes import cluster_document, node_env, web_argv
from node.web_tls import PASSWORD_FILE_OPTION, PASSWORD_OPTION, uvicorn_args

CONFIG = """\
id = "n1"
mode = "eventual"
data_dir = "data"

[remoting]
listen = "10.0.0.1:9876"

[web]
listen = "10.0.0.1:8443"

[internal]
port = 19876

[acl]
enabled = false

[peers.n2]
remoting = "10.0.0.2:9876"
web = "10.0.0.2:8443"
"""
TLS = """
[tls]
cert_file = "n1.pem"
key_file = "n1.key"
web = true
"""


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def _config_file(folder: Path, text: str) -> Path:
    path = folder / "node.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_node_with_tls_web_serves_https_with_its_certificate(tmp_path: Path) -> None:
    config = load_node_config(_config_file(tmp_path, CONFIG + TLS))

    argv = web_argv(config)

    assert argv[1:3] == ["-m", "uvicorn"]
    assert _option(argv, "--ssl-certfile") == str(tmp_path / "n1.pem")
    assert _option(argv, "--ssl-keyfile") == str(tmp_path / "n1.key")
    assert node_env(config, {})["NAMESRV_WEB_HTTPS"] == "true"
    urls = [node["console_url"] for node in cluster_document(config)["nodes"]]
    assert urls == ["https://10.0.0.1:8443/", "https://10.0.0.2:8443/"]


def test_without_tls_the_web_port_stays_plain_http(tmp_path: Path) -> None:
    config = load_node_config(_config_file(tmp_path, CONFIG))

    argv = web_argv(config)

    assert "--ssl-certfile" not in argv and "--ssl-keyfile" not in argv
    # Whatever the shell exported: cookies marked Secure would never come back over HTTP.
    assert node_env(config, {"NAMESRV_WEB_HTTPS": "true"})["NAMESRV_WEB_HTTPS"] == "false"
    assert cluster_document(config)["nodes"][0]["console_url"] == "http://10.0.0.1:8443/"


def test_an_encrypted_keys_password_travels_as_its_file_name_only(tmp_path: Path) -> None:
    password_file = tmp_path / "n1.key.password"
    password_file.write_text("the-key-password\n", encoding="utf-8")
    password_file.chmod(0o600)
    text = CONFIG + TLS + 'key_password_file = "n1.key.password"\n'
    argv = web_argv(load_node_config(_config_file(tmp_path, text)))

    assert argv[1:5] == ["-m", "node.web_tls", PASSWORD_FILE_OPTION, str(password_file)]
    assert not [arg for arg in argv if "the-key-password" in arg]
    # Inside the process, uvicorn gets the password itself and never sees our option.
    inside = uvicorn_args(argv[3:])
    assert inside[-2:] == [PASSWORD_OPTION, "the-key-password"]
    assert PASSWORD_FILE_OPTION not in inside and inside[0] == "namesrv_site.asgi:application"


def test_a_key_password_file_that_others_may_read_is_refused(tmp_path: Path) -> None:
    password_file = tmp_path / "n1.key.password"
    password_file.write_text("the-key-password\n", encoding="utf-8")
    password_file.chmod(0o644)

    with pytest.raises(ValueError, match="readable by others"):
        uvicorn_args([PASSWORD_FILE_OPTION, str(password_file), "app"])
