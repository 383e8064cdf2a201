"""Broker settings from Kafka-style `key=value` pairs.

Broker-level keys are parsed here and validated with messages naming the key;
topic-level defaults (`segment.bytes`, `retention.ms`, ... also accepted with
Kafka's broker prefix `log.`, e.g. `log.retention.ms`) are passed to the storage
as the default topic config; every pair is kept in `raw` so extensions (the
coordinator: `sasl.users`, transaction timeouts, ...) read their own keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BROKER_CONFIG_KEYS",
    "BrokerConfig",
    "ConfigError",
    "Listener",
    "SECURITY_PROTOCOLS",
    "FETCH_MAX_BYTES",
    "HIDDEN",
    "PASSWORD_CONFIG_KEYS",
    "TOPIC_CONFIG_KEYS",
    "is_sensitive",
    "loggable_value",
]

# The most one Fetch response carries (`fetch.max.bytes`; Kafka's default is 55 MiB).
# A client parses a response only once all of it has arrived, and asks for the next
# one only after that: answers of a few MiB keep the transfer and the parsing
# overlapping, and the client's receive buffer small enough to be reused.
FETCH_MAX_BYTES = 4 * 1024 * 1024

# Kafka's defaults of the settings that bound what clients make the broker hold: the largest
# request (`socket.request.max.bytes`), the largest frame before SASL authentication has
# completed (`sasl.server.max.receive.size`; Kafka's SaslServerAuthenticator), connections
# in all and per client address (`max.connections`, `max.connections.per.ip`: Int.MaxValue),
# and how long a connection may sit idle (`connections.max.idle.ms`, 10 minutes).
SOCKET_REQUEST_MAX_BYTES = 100 * 1024 * 1024
SASL_SERVER_MAX_RECEIVE_SIZE = 512 * 1024
MAX_CONNECTIONS = 2**31 - 1
CONNECTIONS_MAX_IDLE_MS = 600_000

# Topic-level configs the storage understands; `log.<key>` is the broker-wide default.
TOPIC_CONFIG_KEYS = frozenset(
    {
        "segment.bytes",
        "segment.ms",
        "retention.ms",
        "retention.bytes",
        "cleanup.policy",
        "delete.retention.ms",
        "min.compaction.lag.ms",
        "index.interval.bytes",
        "flush.messages",
        "flush.ms",
        "durability",
        "max.message.bytes",
        "message.timestamp.type",
        "compression.type",
        "min.insync.replicas",
        "min.cleanable.dirty.ratio",
    }
)
_BROKER_ALIASES = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.durability": "durability",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
}


# Broker configs holding a secret (Kafka's `ConfigDef.Type.PASSWORD`): `sasl.users` is
# `user:password` pairs, `ssl.keystore.key` a private key; Kafka types the inline PEM
# certificates as passwords too.
PASSWORD_CONFIG_KEYS = frozenset(
    {
        "sasl.users",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
    }
)

# The TLS settings of a listener (Kafka's names; PEM only), also taken per listener as
# `listener.name.<listener>.<key>`.
SSL_CONFIG_KEYS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.client.auth",
        "ssl.enabled.protocols",
    }
)

# Every broker-level config this broker reads, here and in the coordinator, besides the
# topic configs and their `log.` names above.
BROKER_CONFIG_KEYS = frozenset(
    {
        "node.id",
        "advertised.host",
        "auto.create.topics.enable",
        "num.partitions",
        "socket.request.max.bytes",
        "log.retention.check.interval.ms",
        "log.cleaner.backoff.ms",
        "log.flush.scheduler.interval.ms",
        "fetch.max.bytes",
        "fetch.max.wait.ms",
        "max.partitions.per.topic",
        "sasl.server.max.receive.size",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "connections.max.idle.ms",
        # the coordinator's (streams.broker.coordinator)
        "group.initial.rebalance.delay.ms",
        "group.min.session.timeout.ms",
        "group.max.session.timeout.ms",
        "transaction.max.timeout.ms",
        "coordinator.tick.ms",
        "producer.id.expiration.ms",
        "sasl.users",
        "sasl.users.file",
        "sasl.enabled.mechanisms",
        "listeners",
        "listener.security.protocol.map",
        *SSL_CONFIG_KEYS,
        # the authorizer's (streams.broker.security)
        "authorizer.class.name",
        "super.users",
        "allow.everyone.if.no.acl.found",
    }
)

HIDDEN = "[hidden]"
"""How a sensitive value is shown in logs and messages (Kafka's `loggableValue`)."""


def _base_key(key: str) -> str:
    """`listener.name.<listener>.ssl.key.password` -> `ssl.key.password` (Kafka's per-listener
    configs); any other key as it is."""
    prefix, _, rest = key.partition("listener.name.")
    if prefix or not rest:
        return key
    _listener, _, base = rest.partition(".")
    return base or key


def is_sensitive(key: str) -> bool:
    """Whether the value of broker config `key` must never be shown: a password, or a
    config this broker does not know, whose type it cannot tell (Kafka's
    `KafkaConfig.maybeSensitive`: "treat it as a sensitive config to be safe")."""
    key = _base_key(key)
    known = key in BROKER_CONFIG_KEYS or key in TOPIC_CONFIG_KEYS or key in _BROKER_ALIASES
    return key in PASSWORD_CONFIG_KEYS or not known


def loggable_value(key: str, value: object) -> str:
    """`value` as it may be printed or logged: `[hidden]` for a sensitive `key`."""
    return HIDDEN if is_sensitive(key) else str(value)


class ConfigError(ValueError):
    """A broker setting with a bad value; `key` names it (the value is `[hidden]` in the
    message when the setting is sensitive)."""

    def __init__(self, key: str, value: object, expected: str) -> None:
        self.key = key
        self.value = value
        shown = loggable_value(key, value)
        super().__init__(f"broker config `{key}`=`{shown}` is invalid: expected {expected}")


def _int(raw: Mapping[str, str], key: str, default: int, *, minimum: int = 0) -> int:
    value = raw.get(key)
    if value is None:
        return default
    try:
        number = int(str(value))
    except ValueError:
        raise ConfigError(key, value, "an integer") from None
    if number < minimum:
        raise ConfigError(key, value, f"an integer >= {minimum}")
    return number


def _overrides(raw: Mapping[str, str], key: str) -> dict[str, int]:
    """Kafka's `host:count,host:count` map (`max.connections.per.ip.overrides`)."""
    out: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in raw.get(key, "").split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ConfigError(
                key, raw[key], "`host:count` pairs, e.g. `127.0.0.1:10,client.example:5`"
            )
        out[host.strip()] = int(count)
    return out


def _bool(raw: Mapping[str, str], key: str, default: bool) -> bool:
    value = raw.get(key)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ConfigError(key, value, "true or false")


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_DEFAULT_PROTOCOL_MAP = {p: p for p in SECURITY_PROTOCOLS}


@dataclass(frozen=True)
class Listener:
    """One of Kafka's `listeners`: `NAME://host:port`, its security protocol from
    `listener.security.protocol.map` (a protocol's own name maps to itself)."""

    name: str
    security_protocol: str
    host: str
    port: int

    @property
    def sasl(self) -> bool:
        """Clients authenticate with SASL before any API but ApiVersions and SASL."""
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.security_protocol.endswith("SSL")

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def _protocol_map(raw: Mapping[str, str]) -> dict[str, str]:
    key = "listener.security.protocol.map"
    text = raw.get(key, "").strip()
    if not text:
        return dict(_DEFAULT_PROTOCOL_MAP)
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip() or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(
                key, text, f"`NAME:PROTOCOL` pairs, PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def _listener(item: str, protocols: Mapping[str, str]) -> Listener:
    expected = "`NAME://host:port` entries, e.g. `SASL_SSL://127.0.0.1:9093`"
    name, sep, address = item.partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not port.isdigit() or not int(port) < 65536:
        raise ConfigError("listeners", item, expected)
    name = name.strip().upper()
    if name not in protocols:
        raise ConfigError(
            "listeners",
            item,
            f"a listener name with a security protocol (`{name}` is not in "
            "listener.security.protocol.map)",
        )
    host = host.strip("[]") or "0.0.0.0"  # Kafka: an empty host binds every interface
    return Listener(name, protocols[name], host, int(port))


def _listeners(raw: Mapping[str, str], host: str, port: int) -> tuple[Listener, ...]:
    """Kafka's `listeners`; without it, one listener on `host:port`: SASL_PLAINTEXT when
    SASL/PLAIN users are configured, else PLAINTEXT."""
    text = raw.get("listeners", "").strip()
    if not text:
        sasl = bool(raw.get("sasl.users", "").strip() or raw.get("sasl.users.file", "").strip())
        protocol = "SASL_PLAINTEXT" if sasl else "PLAINTEXT"
        return (Listener(protocol, protocol, host, port),)
    protocols = _protocol_map(raw)
    listeners = tuple(
        _listener(item, protocols) for item in filter(None, (s.strip() for s in text.split(",")))
    )
    names = [x.name for x in listeners]
    ports = [x.port for x in listeners if x.port]
    if len(set(names)) != len(names) or len(set(ports)) != len(ports):
        raise ConfigError("listeners", text, "listeners of distinct names and ports")
    return listeners


@dataclass(frozen=True)
class BrokerConfig:
    """Everything the server needs to start; build with `BrokerConfig.from_pairs`."""

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    node_id: int = 0
    advertised_host: str | None = None
    auto_create_topics: bool = True
    num_partitions: int = 1
    socket_request_max_bytes: int = SOCKET_REQUEST_MAX_BYTES
    sasl_server_max_receive_size: int = SASL_SERVER_MAX_RECEIVE_SIZE
    max_connections: int = MAX_CONNECTIONS
    max_connections_per_ip: int = MAX_CONNECTIONS
    max_connections_per_ip_overrides: dict[str, int] = field(default_factory=dict)
    connections_max_idle_ms: int = CONNECTIONS_MAX_IDLE_MS
    retention_check_interval_ms: int = 300_000
    compaction_interval_ms: int = 15_000
    flush_interval_ms: int = 1_000
    fetch_max_bytes: int = FETCH_MAX_BYTES
    fetch_max_wait_ms: int = 30_000
    max_partitions_per_topic: int = 1_000
    topic_defaults: dict[str, str] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)
    listeners: tuple[Listener, ...] = ()

    def __post_init__(self) -> None:
        if not self.listeners:  # built directly, not by from_pairs: one PLAINTEXT listener
            listener = Listener("PLAINTEXT", "PLAINTEXT", self.host, self.port)
            object.__setattr__(self, "listeners", (listener,))

    @classmethod
    def from_pairs(
        cls,
        data_dir: str | Path,
        pairs: Mapping[str, object] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> BrokerConfig:
        raw = {str(k): str(v) for k, v in (pairs or {}).items()}
        topic_defaults: dict[str, str] = {}
        for key, value in raw.items():
            if key in TOPIC_CONFIG_KEYS:
                topic_defaults[key] = value
            elif key in _BROKER_ALIASES:
                topic_defaults[_BROKER_ALIASES[key]] = value
        num_partitions = _int(raw, "num.partitions", 1, minimum=1)
        listeners = _listeners(raw, host, port)
        return cls(
            data_dir=Path(data_dir),
            host=listeners[0].host,
            port=listeners[0].port,
            listeners=listeners,
            node_id=_int(raw, "node.id", 0),
            advertised_host=raw.get("advertised.host") or None,
            auto_create_topics=_bool(raw, "auto.create.topics.enable", True),
            num_partitions=num_partitions,
            socket_request_max_bytes=_int(
                raw, "socket.request.max.bytes", SOCKET_REQUEST_MAX_BYTES, minimum=1024
            ),
            sasl_server_max_receive_size=_int(
                raw, "sasl.server.max.receive.size", SASL_SERVER_MAX_RECEIVE_SIZE, minimum=1
            ),
            max_connections=_int(raw, "max.connections", MAX_CONNECTIONS),
            max_connections_per_ip=_int(raw, "max.connections.per.ip", MAX_CONNECTIONS),
            max_connections_per_ip_overrides=_overrides(raw, "max.connections.per.ip.overrides"),
            connections_max_idle_ms=_int(
                raw, "connections.max.idle.ms", CONNECTIONS_MAX_IDLE_MS, minimum=-1
            ),
            retention_check_interval_ms=_int(
                raw, "log.retention.check.interval.ms", 300_000, minimum=10
            ),
            compaction_interval_ms=_int(raw, "log.cleaner.backoff.ms", 15_000, minimum=10),
            flush_interval_ms=_int(raw, "log.flush.scheduler.interval.ms", 1_000, minimum=1),
            fetch_max_bytes=_int(raw, "fetch.max.bytes", FETCH_MAX_BYTES, minimum=1024),
            fetch_max_wait_ms=_int(raw, "fetch.max.wait.ms", 30_000, minimum=0),
            max_partitions_per_topic=_int(raw, "max.partitions.per.topic", 1_000, minimum=1),
            topic_defaults=topic_defaults,
            raw=raw,
        )

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.host

    def listener_config(self, listener: Listener, key: str) -> str | None:
        """`key` for `listener`: Kafka's `listener.name.<name>.<key>` over `<key>`."""
        own = self.raw.get(f"listener.name.{listener.name.lower()}.{key}")
        return own if own is not None else self.raw.get(key)
