"""Test certificates made in the test: a CA, a broker certificate for 127.0.0.1 and
localhost, and a client certificate, written as PEM files (the `cryptography` package).

`make_certificates(folder)` returns the paths; nothing is cached between runs, and the keys
never leave the test's temporary directory.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY_PASSWORD = "broker-key-pw-5e2d"
"""The password the broker's encrypted key file is encrypted with."""


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA certificate: clients' truststore, the broker's for client certificates
    broker_keystore: Path  # the broker's key (encrypted with KEY_PASSWORD) and its chain
    broker_chain: Path  # the broker's certificate chain alone
    broker_key: Path  # the broker's key alone, unencrypted
    client_cert: Path  # a client certificate, subject CN=client,O=streams-tests
    client_key: Path
    other_ca: Path  # a CA that signed none of these


def _name(**parts: str) -> x509.Name:
    oids = {"O": NameOID.ORGANIZATION_NAME, "CN": NameOID.COMMON_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in parts.items()])


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def make_certificates(folder: Path) -> Certificates:
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, other_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    ca_name = _name(O="streams-tests", CN="test CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    other_name = _name(O="elsewhere", CN="other CA")
    other = _cert(other_name, other_key, other_name, other_key, ca=True)
    broker_key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.DNSName("localhost"),
    ]
    broker = _cert(_name(O="streams-tests", CN="broker"), broker_key, ca_name, ca_key, sans=sans)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert(_name(O="streams-tests", CN="client"), client_key, ca_name, ca_key)
    paths = Certificates(
        ca=folder / "ca.pem",
        broker_keystore=folder / "broker-keystore.pem",
        broker_chain=folder / "broker-chain.pem",
        broker_key=folder / "broker-key.pem",
        client_cert=folder / "client-cert.pem",
        client_key=folder / "client-key.pem",
        other_ca=folder / "other-ca.pem",
    )
    paths.ca.write_bytes(_pem(ca))
    paths.other_ca.write_bytes(_pem(other))
    chain = _pem(broker) + _pem(ca)
    paths.broker_keystore.write_bytes(_key_pem(broker_key, KEY_PASSWORD) + chain)
    paths.broker_chain.write_bytes(chain)
    paths.broker_key.write_bytes(_key_pem(broker_key))
    paths.client_cert.write_bytes(_pem(client) + _pem(ca))
    paths.client_key.write_bytes(_key_pem(client_key))
    for path in (paths.broker_keystore, paths.broker_key, paths.client_key):
        path.chmod(0o600)
    return paths
