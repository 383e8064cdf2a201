"""`latest_values` reading a topic up to its end offsets, against a real broker process."""

from __future__ import annotations

import pytest

from streams.cdc import latest_values
from streams.kafka.admin import ensure_topic, produce
from tests.support.broker_clients import produce_transactions

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]


def test_reading_up_to_the_end_offsets_does_not_wait_for_more_records(broker, unique) -> None:
    # Nothing follows the end offsets to fill a larger `consume` request: with a poll
    # timeout longer than this test's own timeout, a reader asking for more records
    # than are left would never finish.
    topic = unique("ktable")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    produce(broker.bootstrap, topic, [(f"a{i}", f"v{i}") for i in range(30)], partition=0)
    produce(broker.bootstrap, topic, [(f"b{i}", f"w{i}") for i in range(5)], partition=1)
    produce(broker.bootstrap, topic, [("a1", "v1-again"), ("a2", None)], partition=0)
    got = latest_values(broker.bootstrap, topic, poll_timeout=600)
    expected = {f"a{i}".encode(): f"v{i}".encode() for i in range(30)}
    expected.update({f"b{i}".encode(): f"w{i}".encode() for i in range(5)})
    expected[b"a1"] = b"v1-again"
    del expected[b"a2"]  # its last record is a tombstone
    assert got == expected


def test_a_partition_ending_in_a_transaction_marker_ends_at_its_position(broker, unique) -> None:
    topic = unique("ktable-tx")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    records = [(f"k{i}", f"v{i}") for i in range(10)]
    produce_transactions(broker.bootstrap, unique("tx"), topic, [(records, True)])
    got = latest_values(broker.bootstrap, topic, poll_timeout=0.2)
    assert got == {f"k{i}".encode(): f"v{i}".encode() for i in range(10)}
