"""TLS for SSL and SASL_SSL listeners, from Kafka's `ssl.*` settings (PEM only), with
Python's `ssl` module.

The broker's certificate and key come from `ssl.keystore.location` (a PEM file holding the
private key and the certificate chain, `ssl.keystore.type=PEM`) or inline from
`ssl.keystore.certificate.chain` and `ssl.keystore.key`; an encrypted key is opened with
`ssl.key.password`. Client certificates are asked for per `ssl.client.auth` (`none`,
`requested`, `required`) and checked against `ssl.truststore.location` or
`ssl.truststore.certificates` (PEM). Every key may be given for one listener as Kafka's
`listener.name.<listener>.<key>`; on a SASL_SSL listener `ssl.client.auth` counts only in
that form, as in Kafka. JKS and PKCS12 stores are refused with how to convert them.

A client that presented a certificate on an SSL listener is the principal of its subject,
as Kafka's default principal builder names it: `User:CN=client,O=example` (RFC 2253, most
specific first).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import ssl
import tempfile
from pathlib import Path
from typing import Any

from streams.broker.config import BrokerConfig, ConfigError, Listener

logger = logging.getLogger(__name__)

__all__ = ["insecure_listener_warnings", "peer_principal", "server_context"]

_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CONVERT = (
    "this broker reads PEM only: convert with `openssl pkcs12 -in store.p12 -nodes -out "
    "store.pem` (a JKS store first with `keytool -importkeystore -deststoretype PKCS12`) "
    "and set `{key}=PEM`"
)
# Kafka's default principal builder: X500Principal.getName() (RFC 2253) short names
_RDN_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "stateOrProvinceName": "ST",
    "localityName": "L",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _get(config: BrokerConfig, listener: Listener, key: str) -> str | None:
    value = config.listener_config(listener, key)
    return value.strip() if value is not None and value.strip() else None


def _store_type(config: BrokerConfig, listener: Listener, key: str) -> None:
    kind = (_get(config, listener, key) or "PEM").upper()
    if kind != "PEM":
        raise ConfigError(key, kind, "PEM; " + _CONVERT.format(key=key))


def _load_keystore(context: ssl.SSLContext, config: BrokerConfig, listener: Listener) -> None:
    _store_type(config, listener, "ssl.keystore.type")
    password = _get(config, listener, "ssl.key.password") or _get(
        config, listener, "ssl.keystore.password"
    )
    location = _get(config, listener, "ssl.keystore.location")
    chain = _get(config, listener, "ssl.keystore.certificate.chain")
    key = _get(config, listener, "ssl.keystore.key")
    try:
        if location is not None:
            context.load_cert_chain(location, password=password)
            return
        if chain is None or key is None:
            raise ConfigError(
                "ssl.keystore.location",
                None,
                f"a PEM file with the broker's key and certificate for listener `{listener}` "
                "(or both `ssl.keystore.certificate.chain` and `ssl.keystore.key`)",
            )
        _load_inline(context, chain, key, password)
    except (OSError, ssl.SSLError) as e:
        # the key's password is not in the message: only the file and what went wrong
        where = location or "ssl.keystore.certificate.chain/ssl.keystore.key"
        raise ConfigError(
            "ssl.keystore.location", where, f"a readable PEM key and certificate chain ({e})"
        ) from None


def _load_inline(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """`ssl` loads keys from files only: a private directory holds them for the call."""
    with tempfile.TemporaryDirectory(prefix="broker-tls-") as folder:
        os.chmod(folder, 0o700)
        cert_file, key_file = Path(folder) / "chain.pem", Path(folder) / "key.pem"
        for path, text in ((cert_file, chain), (key_file, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
        context.load_cert_chain(cert_file, key_file, password=password)


def _client_auth(config: BrokerConfig, listener: Listener) -> int:
    if listener.sasl:  # Kafka: on SASL_SSL only the listener's own setting counts
        raw = config.raw.get(f"listener.name.{listener.name.lower()}.ssl.client.auth")
    else:
        raw = config.listener_config(listener, "ssl.client.auth")
    mode = (raw or "none").strip().lower()
    if mode not in _CLIENT_AUTH:
        raise ConfigError("ssl.client.auth", raw, "one of none, requested, required")
    return _CLIENT_AUTH[mode]


def _load_truststore(context: ssl.SSLContext, config: BrokerConfig, listener: Listener) -> None:
    _store_type(config, listener, "ssl.truststore.type")
    location = _get(config, listener, "ssl.truststore.location")
    certificates = _get(config, listener, "ssl.truststore.certificates")
    if location is None and certificates is None:
        raise ConfigError(
            "ssl.truststore.location",
            None,
            f"the PEM certificates that sign clients' certificates, as listener `{listener}` "
            "asks clients for one (ssl.client.auth)",
        )
    try:
        context.load_verify_locations(cafile=location, cadata=certificates)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError("ssl.truststore.location", location, f"readable PEM ({e})") from None


def _protocols(context: ssl.SSLContext, config: BrokerConfig, listener: Listener) -> None:
    text = _get(config, listener, "ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [n for n in names if n not in _PROTOCOLS]
    if unknown or not names:
        raise ConfigError("ssl.enabled.protocols", text, "TLSv1.2 and/or TLSv1.3")
    versions = sorted(_PROTOCOLS[n] for n in names)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def server_context(config: BrokerConfig, listener: Listener) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener; `ConfigError` naming the setting
    that is missing or wrong."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(context, config, listener)
    _load_keystore(context, config, listener)
    context.verify_mode = _client_auth(config, listener)
    if context.verify_mode != ssl.CERT_NONE:
        _load_truststore(context, config, listener)
    return context


def _escape(value: str) -> str:
    out = "".join(f"\\{c}" if c in ',+"\\<>;' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" "):
        out = out[:-1] + "\\ "
    return out


def peer_principal(transport: Any) -> str | None:
    """`User:<subject>` of the client certificate the TLS handshake verified, else None."""
    cert = transport.get_extra_info("peercert")
    if not cert:
        return None
    rdns = []
    for rdn in reversed(cert.get("subject", ())):
        rdns.append("+".join(f"{_RDN_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(rdns) if rdns else None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def insecure_listener_warnings(listeners: tuple[Listener, ...]) -> list[str]:
    """A warning per listener that other machines can reach and that asks no SASL."""
    return [
        f"listener {listener} accepts connections from other machines without SASL "
        "authentication: anyone who reaches it may read and write every topic. Use a "
        "SASL_SSL (or SASL_PLAINTEXT) listener with `sasl.users` or SCRAM credentials, "
        "or bind it to 127.0.0.1."
        for listener in listeners
        if not listener.sasl and not _loopback(listener.host)
    ]
