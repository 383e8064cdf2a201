"""The two brokers every oracle scenario runs on: the bundled one and Apache Kafka."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def brokers(broker: object, apache_kafka: object) -> dict[str, str]:
    """Bootstrap address by broker name: `bundled` (streams.broker) and `apache-kafka`."""
    return {"bundled": broker.bootstrap, "apache-kafka": apache_kafka.bootstrap}  # type: ignore[attr-defined]
