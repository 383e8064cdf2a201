"""The two brokers every oracle scenario runs on (the bundled one and Apache Kafka); the
compiled Java-client scenarios are the `java_client` fixture of tests/support/java_client.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.apache_kafka import (
    SASL_USERS,
    SCRAM_MECHANISMS,
    STANDARD_AUTHORIZER,
)


@pytest.fixture(scope="session")
def brokers(broker: object, apache_kafka: object) -> dict[str, str]:
    """Bootstrap address by broker name: `bundled` (streams.broker) and `apache-kafka`."""
    return {"bundled": broker.bootstrap, "apache-kafka": apache_kafka.bootstrap}  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def secure_brokers(
    secure_apache_kafka: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """Bootstrap of each broker's SASL_PLAINTEXT listener offering PLAIN (users `SASL_USERS`)
    and SCRAM, authorizing with ACLs, `User:alice` a super user: the bundled broker with
    Kafka's settings, and `secure_apache_kafka`."""
    from streams.broker.launcher import BrokerProcess

    bundled = BrokerProcess(
        tmp_path_factory.mktemp("secure-broker"),
        config={
            "sasl.users": ",".join(f"{u}:{p}" for u, p in SASL_USERS.items()),
            "sasl.enabled.mechanisms": SCRAM_MECHANISMS,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:alice",
            "allow.everyone.if.no.acl.found": "false",
        },
    ).start()
    try:
        yield {"bundled": bundled.bootstrap, "apache-kafka": secure_apache_kafka.sasl_bootstrap}
    finally:
        bundled.stop()
