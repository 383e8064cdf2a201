"""The two brokers every oracle scenario runs on (the bundled one and Apache Kafka), and
the compiled Java-client scenarios."""

from __future__ import annotations

import pytest

from tests.support.apache_kafka import ApacheKafkaError
from tests.support.java_client import JavaClient, JavaClientError


@pytest.fixture(scope="session")
def brokers(broker: object, apache_kafka: object) -> dict[str, str]:
    """Bootstrap address by broker name: `bundled` (streams.broker) and `apache-kafka`."""
    return {"bundled": broker.bootstrap, "apache-kafka": apache_kafka.bootstrap}  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def java_client(tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    """The Java scenarios (tests/support/java/oracle), compiled once for the run; a failed
    test, not a skipped one, when they cannot be compiled."""
    try:
        return JavaClient.compile(tmp_path_factory.mktemp("java-client"))
    except (ApacheKafkaError, JavaClientError) as e:
        reason = str(e)
    pytest.fail(reason, pytrace=False)
