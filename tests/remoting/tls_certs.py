"""Certificates made by tests (the ``cryptography`` package): a CA, a server certificate for
127.0.0.1 and localhost, and a client certificate, all PEM files in a temporary directory."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True, slots=True)
class CertificateFiles:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    """A CA that signed nothing here (a client trusting only it must refuse the server)."""
    encrypted_server_key: Path
    """The server key encrypted with :data:`KEY_PASSWORD`."""


KEY_PASSWORD = "key-password-1"


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    is_ca: bool,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if is_ca:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), True
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    else:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), False
        )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def make_certificates(directory: Path) -> CertificateFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _certificate("Bolide test CA", ca_key, _name("Bolide test CA"), ca_key, is_ca=True)
    paths = CertificateFiles(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        other_ca=directory / "other-ca.pem",
        encrypted_server_key=directory / "server-encrypted.key",
    )
    paths.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    for cert_path, key_path, subject, server in (
        (paths.server_cert, paths.server_key, "127.0.0.1", True),
        (paths.client_cert, paths.client_key, "bolide-client", False),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(subject, key, ca_cert.subject, ca_key, is_ca=False, server=server)
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
        if server:
            paths.encrypted_server_key.write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
                )
            )
    other_key = ec.generate_private_key(ec.SECP256R1())
    other = _certificate("Other CA", other_key, _name("Other CA"), other_key, is_ca=True)
    paths.other_ca.write_bytes(other.public_bytes(serialization.Encoding.PEM))
    return paths
