"""The KIP-848 consumer group protocol, which the bundled broker does not offer: a Java
consumer asking for it (`group.protocol=consumer`) gets the same error from the bundled
broker as from an Apache Kafka whose group coordinator offers only the classic protocol
(`group.coordinator.rebalance.protocols=classic`), and the classic protocol works on both.

The Kafka here is a node of its own (module scope): the session's `apache_kafka` offers
the consumer protocol, as Kafka 4.x does by default.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.oracle.differential import on_both
from tests.support.apache_kafka import ApacheKafka, ApacheKafkaError
from tests.support.java_client import JavaClient

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def classic_only_brokers(
    broker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    try:
        kafka = ApacheKafka(
            tmp_path_factory.mktemp("apache-kafka-classic"),
            overrides={"group.coordinator.rebalance.protocols": "classic"},
        ).start()
    except ApacheKafkaError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield {"bundled": broker.bootstrap, "apache-kafka": kafka.bootstrap}
    finally:
        kafka.stop()


def test_java_consumer_asking_for_the_consumer_protocol(
    classic_only_brokers: dict[str, str], java_client: JavaClient
) -> None:
    on_bundled, on_kafka = on_both(
        classic_only_brokers, lambda bootstrap: java_client.run("consumer_protocol", bootstrap)
    )
    assert on_kafka["consumer"][0] == "UnsupportedVersionException"
    assert "does not support the new CONSUMER group protocol" in on_kafka["consumer"][1]
    assert on_kafka["classic"] == "records"
    assert on_bundled == on_kafka
