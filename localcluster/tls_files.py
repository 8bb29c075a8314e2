"""Certificates for a local cluster's TLS: one CA per run folder, one certificate per node.

``cluster up --tls MODE`` calls :func:`ensure_run_tls`; the files land in the run folder::

    run/local/tls/
      ca.pem            the run's CA certificate (what clients trust: ``tls.ca_file``)
      ca.key            its key (mode 0600), kept so that a later ``up`` can add nodes
      n1.pem, n1.key    node n1's certificate and key, for every port of that node
      client.pem/.key   a client certificate (for ``tls.server.need.client.auth=require``)
      client.properties the client side in upstream's tls.properties keys
                        (``NAMESRV_TLS_CONFIG_FILE=run/local/tls/client.properties``
                        makes a tool, bench or experiment on this host speak TLS)
      broker.pem/.key   the demo brokers' certificate
      broker.properties the demo brokers' ``tlsConfigFile``: a permissive port, TLS
                        to the NameServers

Keys are RSA 2048 in unencrypted PKCS#8 PEM, the form netty's ``SslContextBuilder``
(and so RocketMQ's Java client and broker) reads. A node certificate names
``localhost``, ``127.0.0.1``, ``::1`` and the hosts given; RocketMQ's client checks
the chain only, our clients can check the name too (``tls.client.checkHostname``).
Files that exist and still load are kept, so a restarted run folder keeps its CA.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from node.files import write_secret_file
from remoting.properties import encode_properties

TLS_DIR = "tls"
CA_NAME = "ca"
CLIENT_NAME = "client"
CLIENT_PROPERTIES = "client.properties"
BROKER_NAME = "broker"
BROKER_PROPERTIES = "broker.properties"
RSA_KEY_BITS = 2048
CA_VALID_DAYS = 3650
CERT_VALID_DAYS = 825
# Not-before a little in the past: a peer whose clock is behind ours still accepts it.
BACKDATE = datetime.timedelta(hours=1)
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
_SERVER_AND_CLIENT = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
# A CA signs certificates and revocation lists, nothing else.
_CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


@dataclass(frozen=True, slots=True)
class CertFiles:
    """A certificate and its key on disk."""

    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class RunTls:
    """The TLS files of one run folder."""

    folder: Path
    ca: CertFiles
    nodes: dict[str, CertFiles]
    client: CertFiles
    broker: CertFiles

    @property
    def client_properties(self) -> Path:
        """The client side, in upstream's tls.properties keys."""
        return self.folder / CLIENT_PROPERTIES

    @property
    def broker_properties(self) -> Path:
        """The demo brokers' ``tlsConfigFile``."""
        return self.folder / BROKER_PROPERTIES


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _san(names: Iterable[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):  # in order, once each
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def _write(files: CertFiles, cert: x509.Certificate, key: rsa.RSAPrivateKey) -> None:
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_secret_file(files.key, _key_pem(key).decode("ascii"))


def load_pair(files: CertFiles) -> tuple[x509.Certificate, rsa.RSAPrivateKey] | None:
    """The pair on disk, or None when missing, unreadable or not a matching RSA pair."""
    try:
        cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
        key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
    except (OSError, ValueError):
        return None
    if not isinstance(key, rsa.RSAPrivateKey):
        return None
    public = cert.public_key()
    if not isinstance(public, rsa.RSAPublicKey):
        return None
    if public.public_numbers() != key.public_key().public_numbers():
        return None
    return cert, key


def make_ca(files: CertFiles, common_name: str) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    """Write a new self-signed CA certificate and key to ``files``."""
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=CA_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_KEY_USAGE, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(files, cert, key)
    return cert, key


def issue_cert(
    ca: tuple[x509.Certificate, rsa.RSAPrivateKey],
    files: CertFiles,
    common_name: str,
    names: Iterable[str] = LOCAL_NAMES,
) -> x509.Certificate:
    """Write a certificate for ``common_name`` (server and client use), signed by ``ca``,
    naming ``names`` (host names and addresses) as subject alternative names."""
    ca_cert, ca_key = ca
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=CERT_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(_SERVER_AND_CLIENT),
            critical=False,
        )
        .add_extension(_san(names), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write(files, cert, key)
    return cert


def _pair(folder: Path, name: str) -> CertFiles:
    return CertFiles(folder / f"{name}.pem", folder / f"{name}.key")


def _issued_by(cert: x509.Certificate, ca_cert: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def _covers(cert: x509.Certificate, names: Iterable[str]) -> bool:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(_san(names)) <= set(san)


def ensure_run_tls(run_dir: Path, nodes: dict[str, Iterable[str]]) -> RunTls:
    """The run folder's CA, a certificate per node (``nodes``: node id -> its host names
    or addresses, on top of the loopback ones) and a client certificate: kept when they
    are on disk, still load and still fit, made otherwise. Also writes
    ``client.properties``."""
    folder = run_dir / TLS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    ca_files = _pair(folder, CA_NAME)
    ca = load_pair(ca_files) or make_ca(ca_files, f"raft-namesrv local CA ({run_dir.name})")
    issued: dict[str, CertFiles] = {}
    for name, hosts in {**nodes, CLIENT_NAME: (), BROKER_NAME: ()}.items():
        wanted = (*LOCAL_NAMES, *hosts)
        files = _pair(folder, name)
        found = load_pair(files)
        if found is None or not _issued_by(found[0], ca[0]) or not _covers(found[0], wanted):
            issue_cert(ca, files, name, wanted)
        issued[name] = files
    client, broker = issued.pop(CLIENT_NAME), issued.pop(BROKER_NAME)
    run_tls = RunTls(folder=folder, ca=ca_files, nodes=issued, client=client, broker=broker)
    run_tls.client_properties.write_text(
        _properties("clients of this run folder's nodes", _client_keys(run_tls, client)),
        encoding="utf-8",
    )
    broker_keys = {
        "tls.server.mode": "permissive",
        "tls.server.certPath": str(broker.cert),
        "tls.server.keyPath": str(broker.key),
        **_client_keys(run_tls, broker),
    }
    run_tls.broker_properties.write_text(
        _properties("the demo brokers (their port and their client)", broker_keys),
        encoding="utf-8",
    )
    return run_tls


def _client_keys(run_tls: RunTls, own: CertFiles) -> dict[str, str]:
    return {
        "tls.enable": "true",
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(run_tls.ca.cert),
        "tls.client.certPath": str(own.cert),
        "tls.client.keyPath": str(own.key),
    }


def _properties(what: str, keys: dict[str, str]) -> str:
    header = f"# Written by `cluster up --tls`: TLS for {what}.\n"
    return header + encode_properties(keys, escape=True).decode("ascii")
