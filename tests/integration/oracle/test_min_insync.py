"""min.insync.replicas as a topic config, compared on both brokers: Apache Kafka accepts
it and, on a single-replica topic, writes acks=all records too (it checks acks=all
against the smaller of the config and the replica count)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from tests.integration.oracle.clients import admin, future_error, produce
from tests.integration.oracle.differential import on_both, unique

pytestmark = pytest.mark.kafka


def min_insync_replicas(bootstrap: str) -> dict[str, Any]:
    topic = unique("isr")
    a = admin(bootstrap)
    created = future_error(
        a.create_topics([NewTopic(topic, 1, 1, config={"min.insync.replicas": "2"})])[topic]
    )
    writes = []
    if created is None:
        for acks in ("all", "1"):
            writes += produce(
                bootstrap, topic, [{"value": b"v", "timestamp": 1}], acks=acks, retries=0
            )
    return {"create": created, "writes": writes}


def test_min_insync_replicas(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, min_insync_replicas)
    assert on_kafka["create"] is None and len(on_kafka["writes"]) == 2
    assert on_bundled == on_kafka
