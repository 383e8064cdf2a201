"""The Java client (`kafka-clients`, Apache Kafka's own): the same kinds of scenario as the
confluent-kafka and kafka-python ones, compared on both brokers.

Each scenario group runs in one JVM per broker (tests/support/java/oracle, driven by
tests/support/java_client.py) and returns what the client observed; the module runs each
group once and its tests compare the parts. Errors are the exception classes the Java
client throws. Byte arrays arrive base64-encoded (`b64`).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.oracle.differential import on_both
from tests.support.java_client import JavaClient, b64

pytestmark = pytest.mark.kafka

T0 = 1_700_000_000_000


def _group(brokers: dict[str, str], java_client: JavaClient, name: str) -> tuple[Any, Any]:
    return on_both(brokers, lambda bootstrap: java_client.run(name, bootstrap))


@pytest.fixture(scope="module")
def records(brokers: dict[str, str], java_client: JavaClient) -> tuple[Any, Any]:
    return _group(brokers, java_client, "records")


@pytest.fixture(scope="module")
def groups(brokers: dict[str, str], java_client: JavaClient) -> tuple[Any, Any]:
    return _group(brokers, java_client, "groups")


@pytest.fixture(scope="module")
def transactions(brokers: dict[str, str], java_client: JavaClient) -> tuple[Any, Any]:
    return _group(brokers, java_client, "transactions")


@pytest.fixture(scope="module")
def errors(brokers: dict[str, str], java_client: JavaClient) -> tuple[Any, Any]:
    return _group(brokers, java_client, "errors")


def _part(results: tuple[Any, Any], key: str) -> tuple[Any, Any]:
    on_bundled, on_kafka = results
    return on_bundled[key], on_kafka[key]


def test_records_round_trip(records: tuple[Any, Any]) -> None:
    """Keys, values (null, empty, 100 kB), headers (repeated, null, empty), CreateTime."""
    on_bundled, on_kafka = _part(records, "round_trip")
    assert on_kafka["ends"] == {"0": [0, 2], "1": [0, 2], "2": [0, 2]}
    first, tomb, older = on_kafka["records"][0], on_kafka["records"][2], on_kafka["records"][3]
    assert first["headers"] == [["h", b64("1")], ["h", b64("2")], ["empty", ""]]
    assert (first["timestamp_type"], first["timestamp"]) == ("CreateTime", T0)
    assert tomb["value"] is None and tomb["headers"] == [["null-value", None]]
    assert older["timestamp"] == T0 - 60_000 and older["key"] == ""
    assert on_bundled == on_kafka


def test_compressed_batches(records: tuple[Any, Any]) -> None:
    on_bundled, on_kafka = _part(records, "codecs")
    assert on_kafka["deliveries"]["zstd"] == list(range(200, 250))
    assert len(on_kafka["records"]) == 250
    assert on_bundled == on_kafka


def test_log_append_time(records: tuple[Any, Any]) -> None:
    """The broker's clock replaces the producer's timestamp, in the delivery and the record."""
    on_bundled, on_kafka = _part(records, "log_append_time")
    assert on_kafka == [
        ["delivered", 0, True],
        ["delivered", 1, True],
        ["read", 0, "LogAppendTime", True],
        ["read", 1, "LogAppendTime", True],
    ]
    assert on_bundled == on_kafka


def test_offsets(records: tuple[Any, Any]) -> None:
    """offsetsForTimes, beginning/end offsets, ListOffsets specs, DeleteRecords."""
    on_bundled, on_kafka = _part(records, "offsets")
    assert on_kafka["by_time"][2] == [1, T0 + 3000] and on_kafka["by_time"][4] is None
    assert on_kafka["listed"]["max_timestamp"] == [4, T0 + 5000]
    assert on_kafka["deleted_to"] == 2 and on_kafka["after_delete"]["ends"] == {"0": [2, 5]}
    assert on_bundled == on_kafka


def test_committed_offsets(groups: tuple[Any, Any]) -> None:
    """Offsets with metadata committed, read back by the consumer and the admin API; a new
    member resumes from them (from the start where none is committed)."""
    on_bundled, on_kafka = _part(groups, "committed")
    assert on_kafka["read_back"] == [[0, 3, "second", None], [1, 4, "", None], [2, None]]
    assert on_kafka["resumed_at"] == [3, 4, 0]
    assert on_bundled == on_kafka


def test_group_assignment(groups: tuple[Any, Any]) -> None:
    """Two members cover five partitions once; the survivor of a leave takes all five."""
    on_bundled, on_kafka = _part(groups, "assignment")
    assert on_kafka["two_members"] == [2, 3]
    assert on_kafka["two_members_group"] == ["Stable", "Classic", "range", [2, 3]]
    assert on_kafka["one_member"] == [0, 1, 2, 3, 4]
    assert on_kafka["after_close"][0] == "Empty" and on_kafka["after_close"][3] == []
    assert on_bundled == on_kafka


def test_isolation_levels(transactions: tuple[Any, Any]) -> None:
    """read_committed stops at the open transaction and skips the aborted one;
    read_uncommitted reads everything; both skip the control markers."""
    on_bundled, on_kafka = _part(transactions, "isolation")
    committed = [value for _, value in on_kafka["closed/read_committed"]["records"]]
    assert committed == [b64(v) for v in "abdef"]
    assert (
        on_kafka["open/read_committed"]["ends"]["0"][1]
        < on_kafka["open/read_uncommitted"]["ends"]["0"][1]
    )
    assert on_bundled == on_kafka


def test_offsets_in_transactions(transactions: tuple[Any, Any]) -> None:
    on_bundled, on_kafka = _part(transactions, "offsets")
    assert on_kafka == [[False, None], [True, 7, "in-txn"]]
    assert on_bundled == on_kafka


def test_fenced_producer(transactions: tuple[Any, Any]) -> None:
    on_bundled, on_kafka = _part(transactions, "fenced")
    assert on_kafka["first_commit"] == "ProducerFencedException"
    assert [v for _, v in on_kafka["read_committed"]["records"]] == [b64("from second")]
    assert on_bundled == on_kafka


def test_transaction_left_open_by_a_killed_producer(transactions: tuple[Any, Any]) -> None:
    """Connect's log reader (end offset listed read_uncommitted, read_committed consumer)
    under a transaction its producer left open: its position stops at the last stable
    offset, short of the end it waits for, on Apache Kafka as well; so a Connect worker
    restarted after a kill mid-transaction waits until the transaction ends. Fencing the
    transactional id ends it at once, aborted, and the reader reaches the end."""
    on_bundled, on_kafka = _part(transactions, "left_open")
    assert on_kafka["open"] == {
        "listed_end": 3,
        "listed_stable": 2,
        "position": 2,
        "values": [[0, "committed"]],
    }
    assert on_kafka["fenced"] == {
        "listed_end": 4,
        "listed_stable": 4,
        "position": 4,
        "values": [[0, "committed"]],
    }
    assert on_bundled == on_kafka


def test_unknown_topic(errors: tuple[Any, Any]) -> None:
    on_bundled, on_kafka = _part(errors, "unknown_topic")
    assert on_kafka["describe_topics"] == "UnknownTopicOrPartitionException"
    assert on_bundled == on_kafka


def test_invalid_topics(errors: tuple[Any, Any]) -> None:
    on_bundled, on_kafka = _part(errors, "invalid_topics")
    assert on_kafka["space"] == "InvalidTopicException"
    assert on_kafka["exists"] == "TopicExistsException"
    assert on_bundled == on_kafka


def test_record_too_large(errors: tuple[Any, Any]) -> None:
    on_bundled, on_kafka = _part(errors, "record_too_large")
    assert on_kafka == [[100, None, 0], [5000, "RecordTooLargeException", None], [100, None, 1]]
    assert on_bundled == on_kafka


def test_fetch_out_of_range(errors: tuple[Any, Any]) -> None:
    on_bundled, on_kafka = _part(errors, "out_of_range")
    assert on_kafka == {"past_end": ["OffsetOutOfRangeException", 10], "inside": [1, 2]}
    assert on_bundled == on_kafka
