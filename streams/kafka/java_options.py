"""librdkafka client settings translated for Spark's native (Java) Kafka source.

The project's settings speak librdkafka (`sasl.username`, `ssl.ca.location`), which
the Python source passes straight to confluent-kafka. The Java client ignores those
names: it takes credentials as a JAAS line and CA certificates as a trust store. So
the native engine translates them, or a SASL cluster would reject it as anonymous.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from streams.kafka.errors import KafkaConfigError

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
logger = logging.getLogger(__name__)

# Databricks ships the Kafka client relocated under this package prefix.
SHADED_PREFIX = "kafkashaded."


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_client_options(client: Mapping[str, str], *, shaded: bool = False) -> dict[str, str]:
    """Java Kafka client properties (without the `kafka.` option prefix) for `client`.

    `sasl.username`/`sasl.password` become `sasl.jaas.config` for the mechanism
    (PLAIN, SCRAM-SHA-256/512); `ssl.ca.location` becomes a PEM trust store.
    Other keys pass through unchanged (the Java client ignores ones it does not know).
    Raises `KafkaConfigError` (`option="sasl.mechanism"`) for a username or password with
    a mechanism that has no such login, unless `sasl.jaas.config` gives the login.
    """
    out: dict[str, str] = {}
    user = password = None
    mechanism = "PLAIN"
    for key, value in client.items():
        if key == "sasl.username":
            user = value
        elif key == "sasl.password":
            password = value
        elif key in ("sasl.mechanism", "sasl.mechanisms"):
            mechanism = value.upper()
            out["sasl.mechanism"] = mechanism
        elif key == "ssl.ca.location":
            out["ssl.truststore.type"] = "PEM"
            out["ssl.truststore.location"] = value
        else:
            out[key] = value
    if user is not None or password is not None:
        module = _LOGIN_MODULES.get(mechanism)
        if module is None:
            if "sasl.jaas.config" in out:
                out.setdefault("sasl.mechanism", mechanism)
                return out
            raise KafkaConfigError(
                f"SASL mechanism `{mechanism}` has no username/password login for the Java "
                "client (native Kafka engine); set the mechanism "
                "(`kafka.security.sasl_mechanism`, or `sasl.mechanism` in `kafka.client`) to "
                f"one of {', '.join(f'`{m}`' for m in _LOGIN_MODULES)}, or give the login "
                "yourself "
                "as `sasl.jaas.config` in `kafka.client`.",
                option="sasl.mechanism",
            )
        if "sasl.jaas.config" not in out:
            out["sasl.jaas.config"] = (
                f"{SHADED_PREFIX if shaded else ''}{module} required "
                f"username={_jaas_quote(user or '')} password={_jaas_quote(password or '')};"
            )
        out.setdefault("sasl.mechanism", mechanism)
    return out


SPARK_MANAGED = frozenset(
    {
        "auto.offset.reset",
        "enable.auto.commit",
        "key.deserializer",
        "value.deserializer",
        "interceptor.classes",
    }
)
"""Consumer settings Spark's Kafka source refuses as options, as it sets them itself
(where to start is `startingOffsets`; it commits nothing; it reads bytes)."""


def for_spark_source(options: Mapping[str, str]) -> dict[str, str]:
    """`options` (Java client properties) without `SPARK_MANAGED`'s: a project's client
    settings serve every client of both engines, and these mean nothing to a source that
    reads ranges by offset (the Python engine overrides them too), where Spark's source
    would refuse the query."""
    dropped = sorted(k for k in options if k in SPARK_MANAGED)
    if dropped:
        logger.info(
            "Kafka client setting(s) %s not given to Spark's Kafka source, which manages them",
            ", ".join(f"`{k}`" for k in dropped),
        )
    return {k: v for k, v in options.items() if k not in SPARK_MANAGED}


FAILOVER_TIMEOUT_MS = 10_000
"""The Java client's request and API timeouts on the native source, unless the project's
client settings give their own. When a partition's leader dies, Spark's offset lookup
waits for the dead node until the admin client's API timeout (60 s by default), and only
its next attempt asks the metadata again and finds the new leader."""


def with_failover_timeouts(options: Mapping[str, str]) -> dict[str, str]:
    """`options` (Java client properties) with `request.timeout.ms` and
    `default.api.timeout.ms` at `FAILOVER_TIMEOUT_MS` where they are not set. The admin
    client refuses an API timeout shorter than its request timeout, so a setting of one
    moves the default of the other with it."""
    out = dict(options)
    request, api = (_millis(out, k) for k in ("request.timeout.ms", "default.api.timeout.ms"))
    if request is None:
        request = FAILOVER_TIMEOUT_MS if api is None else min(api, FAILOVER_TIMEOUT_MS)
        out["request.timeout.ms"] = str(request)
    if api is None:
        out["default.api.timeout.ms"] = str(max(request, FAILOVER_TIMEOUT_MS))
    return out


def _millis(options: Mapping[str, str], key: str) -> int | None:
    if key not in options:
        return None
    try:
        return int(options[key])
    except ValueError:
        raise KafkaConfigError(
            f"`{key}` in `kafka.client` must be a whole number of milliseconds, "
            f"not {options[key]!r}",
            option=key,
        ) from None
