"""A throwaway certificate authority and a loopback server certificate, for TLS tests.

    certs = make_certificates(tmp_path)
    async with HttpProxy(tls=certs.server_context()) as proxy: ...   # an https:// proxy
    ClientOptions(ca_file=certs.ca_file)                              # a client that trusts it

EC P-256 keys (fast to make), valid from an hour ago for a day. The extensions are the ones
strict verification (Python 3.13's VERIFY_X509_STRICT default) asks for: a critical CA basic
constraint, key identifiers on both certificates, and the server's names as subject alt names.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAMES = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class Certificates:
    """Where `make_certificates` wrote its PEM files."""

    ca_file: Path  # the CA certificate: what a client is told to trust
    cert_file: Path  # the server certificate
    key_file: Path  # the server's private key

    def server_context(self) -> ssl.SSLContext:
        """A server-side context presenting the loopback certificate."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _alt_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def make_certificates(directory: Path, names: tuple[str, ...] = SERVER_NAMES) -> Certificates:
    """Make a CA and a server certificate for `names` (IP addresses or DNS names), signed by
    it, and write them to `directory` as ca.pem, server.pem and server.key."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    server_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("kirod test CA")
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([_alt_name(n) for n in names]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(server_key.public_key()), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    written = Certificates(
        ca_file=directory / "ca.pem",
        cert_file=directory / "server.pem",
        key_file=directory / "server.key",
    )
    written.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    written.cert_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    written.key_file.touch(mode=0o600)  # a throwaway key, but still no world-readable one
    written.key_file.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return written
