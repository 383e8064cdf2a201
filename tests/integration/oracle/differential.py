"""Run one client scenario on both brokers and compare what the clients observed.

A scenario is a function `scenario(bootstrap) -> value` that creates its own uniquely
named topics and groups, drives a real client and returns what the client saw,
normalized: no topic or group names, member ids or wall-clock times, only what Kafka's
contract fixes (records, offsets, error codes, ...). `on_both` runs it on each broker;
the test asserts the two values are equal.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def unique(prefix: str) -> str:
    return f"oracle-{prefix}-{uuid.uuid4().hex[:8]}"


def on_both(brokers: dict[str, str], scenario: Callable[[str], T]) -> tuple[T, T]:
    """(result on the bundled broker, result on Apache Kafka); Kafka runs first, so a
    scenario that cannot run on Kafka fails before the bundled broker is blamed."""
    on_kafka = scenario(brokers["apache-kafka"])
    on_bundled = scenario(brokers["bundled"])
    return on_bundled, on_kafka
