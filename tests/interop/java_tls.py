"""RocketMQ's Java client TLS, for the TLS tests: ``tests/interop/java/TlsRouteQuery.java``.

RocketMQ's own jars are not reachable from here (no Maven repository), but what its
client does for TLS is small and lives in netty and the JDK: ``TlsHelper`` builds a
``SslContextBuilder.forClient().sslProvider(SslProvider.JDK)`` context, trusting
``tls.client.trustCertPath`` when ``tls.client.authServer`` is true, and
``NettyRemotingClient`` puts ``sslContext.newHandler(alloc)`` first in the pipeline.
The driver does exactly that with Debian's netty (``libnetty-java``) and the JDK, and
speaks the remoting frame itself. Both are installed with apt-get when missing (CI
runs as root, as for PostgreSQL and Chromium); a failed install fails the test with the
command's output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

APT_TIMEOUT_S = 900
RUN_TIMEOUT_S = 60
DRIVER = Path(__file__).resolve().parent / "java" / "TlsRouteQuery.java"
NETTY_DIR = Path("/usr/share/java")
NETTY_JARS = ("common", "buffer", "transport", "codec", "handler", "resolver")
NETTY_PACKAGE = "libnetty-java"
JDK_PACKAGE = "openjdk-17-jdk-headless"


def _classpath() -> str:
    return ":".join(str(NETTY_DIR / f"netty-{name}.jar") for name in NETTY_JARS)


def _missing() -> list[str]:
    """The packages to install: only what is missing. Naming an installed JDK would
    upgrade it under the Spark JVM the earlier tests started, whose next child process
    then fails ("Failed to exec spawn helper"), so an installed one is never named."""
    missing = []
    if not all((NETTY_DIR / f"netty-{name}.jar").is_file() for name in NETTY_JARS):
        missing.append(NETTY_PACKAGE)
    if shutil.which("javac") is None or shutil.which("java") is None:
        missing.append(JDK_PACKAGE)
    return missing


def ensure_installed() -> None:
    """Install the JDK and Debian's netty when either is missing."""
    packages = _missing()
    if not packages:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError("java/netty are missing and cannot be installed (needs root, apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "--no-upgrade", *packages]
    done = subprocess.run(install, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        subprocess.run(
            ["apt-get", "update"], env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False
        )
        done = subprocess.run(
            install, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False
        )
    if done.returncode != 0 or _missing():
        raise RuntimeError(f"`{' '.join(install)}` failed:\n{done.stderr.decode()[-2000:]}")


@dataclass(frozen=True, slots=True)
class JavaTlsClient:
    """The compiled driver."""

    classes: Path

    def route(
        self, host: str, port: int, topic: str, *, auth_server: bool, trust_cert: Path
    ) -> dict[str, str]:
        """One route query over TLS: the driver's ``key=value`` lines as a dict
        (``protocol``, ``code``, ``body``; or ``failed`` with the exception)."""
        argv = [
            "java",
            "-cp",
            f"{_classpath()}:{self.classes}",
            "TlsRouteQuery",
            host,
            str(port),
            topic,
            "true" if auth_server else "false",
            str(trust_cert),
        ]
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
        lines = [line.partition("=") for line in done.stdout.splitlines() if "=" in line]
        out = {key: value for key, _, value in lines}
        if not out:
            out["failed"] = f"exit {done.returncode}: {done.stderr[-2000:]}"
        return out


def java_tls_client(folder: Path) -> JavaTlsClient:
    """Install what is missing and compile the driver into ``folder``."""
    ensure_installed()
    done = subprocess.run(
        ["javac", "-cp", _classpath(), "-d", str(folder), str(DRIVER)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stderr[-2000:]}")
    return JavaTlsClient(folder)
