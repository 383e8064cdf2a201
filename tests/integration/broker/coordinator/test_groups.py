"""Consumer groups with real clients (librdkafka, kafka-python) against a real broker process."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.broker_clients import (
    FAST_GROUP,
    committed,
    create_topic,
    end_offsets,
    produce_values,
)

pytestmark = pytest.mark.kafka

PARTITIONS = 6


class Member(threading.Thread):
    """One group member in its own thread; a record counts once its offset commit succeeded.

    Rebalance callbacks are registered so librdkafka waits for this thread's
    poll() before giving partitions up: the commit of a record returned by poll
    always happens while its partition is still owned. A commit the broker
    refuses (fenced generation, rebalance in progress) does not count the record;
    the member seeks back to it so it is read again.
    """

    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": strategy,
                **FAST_GROUP,
            }
        )
        self.topic = topic
        self.records: list[bytes] = []
        self.refused = 0
        self.owned: set[int] = set()
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
            while not self.stop_flag.is_set():
                msg = self.consumer.poll(0.1)
                if msg is None or msg.error():
                    continue
                try:
                    self.consumer.commit(message=msg, asynchronous=False)
                except KafkaException:
                    # fenced by a rebalance: read the record again while the partition is
                    # still ours; if it moves, the next owner starts at the committed offset
                    self.refused += 1
                    tp = TopicPartition(msg.topic(), msg.partition(), msg.offset())
                    try:
                        self.consumer.seek(tp)
                    except KafkaException:
                        pass  # already unassigned by librdkafka: the new owner reads it
                    continue
                self.records.append(msg.value())
        except BaseException as e:  # noqa: BLE001 -- a thread's failure, surfaced by the test through .error
            self.error = e
        finally:
            self.consumer.close()  # commits nothing (auto commit off) and leaves the group

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned |= {tp.partition for tp in partitions}

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned -= {tp.partition for tp in partitions}


def _wait(condition, what: str, timeout: float = 45) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_join_and_leave_every_record_consumed_exactly_once(broker, unique, strategy):
    topic, group = unique("grp"), unique("g")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    members = [Member(broker.bootstrap, group, topic, strategy) for _ in range(3)]

    def total() -> int:
        return sum(len(m.records) for m in members)

    def batch(start: int) -> list[tuple[int, bytes]]:
        return [(i % PARTITIONS, b"r%04d" % i) for i in range(start, start + 120)]

    try:
        members[0].start()
        members[1].start()
        produce_values(broker.bootstrap, topic, batch(0))
        _wait(lambda: total() == 120, "two members to consume the first 120 records")
        _wait(
            lambda: (
                len(members[0].owned | members[1].owned) == PARTITIONS
                and not (members[0].owned & members[1].owned)
            ),
            "a split of all partitions",
        )

        members[2].start()  # a third member joins: partitions move to it
        _wait(lambda: all(m.owned for m in members), "every member to own partitions")
        produce_values(broker.bootstrap, topic, batch(120))
        _wait(lambda: total() == 240, "three members to consume the next 120 records")
        assert members[2].records, "the member that joined got no records"

        members[0].stop_flag.set()  # a member leaves: its partitions go to the others
        members[0].join(30)
        produce_values(broker.bootstrap, topic, batch(240))
        _wait(lambda: total() == 360, "the remaining two members to consume the last 120 records")
    finally:
        for m in members:
            m.stop_flag.set()
        for m in members:
            if m.is_alive() or m.ident is not None:
                m.join(30)
    for m in members:
        assert m.error is None, m.error
    counts = Counter(v for m in members for v in m.records)
    assert sorted(counts) == sorted(v for _, v in batch(0) + batch(120) + batch(240))
    assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1]
    assert committed(broker.bootstrap, group, topic, PARTITIONS) == end_offsets(
        broker.bootstrap, topic, PARTITIONS
    )


def test_group_is_listed_described_and_deleted(broker, unique):
    topic, group = unique("adm"), unique("g")
    create_topic(broker.bootstrap, topic, 2)
    produce_values(broker.bootstrap, topic, [(0, b"a"), (1, b"b")])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **FAST_GROUP})
    consumer.subscribe([topic])
    try:
        _wait(
            lambda: consumer.poll(0.1) is None and len(consumer.assignment()) == 2, "an assignment"
        )
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = admin.list_consumer_groups().result(10)
        assert group in {g.group_id for g in listed.valid}
        desc = admin.describe_consumer_groups([group])[group].result(10)
        assert str(desc.state).endswith("STABLE")
        assert len(desc.members) == 1
        assert {tp.partition for tp in desc.members[0].assignment.topic_partitions} == {0, 1}
        # a group with members cannot be deleted
        with pytest.raises(KafkaException, match="NON_EMPTY_GROUP|not empty"):
            admin.delete_consumer_groups([group])[group].result(10)
    finally:
        consumer.close()
    admin.delete_consumer_groups([group])[group].result(10)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}


def test_kafka_python_group_consumer_commits_and_a_new_member_resumes(broker, unique):
    from kafka import KafkaConsumer, KafkaProducer

    topic, group = unique("kp"), unique("g")
    create_topic(broker.bootstrap, topic, 3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)  # idempotent by default in 3.x
    for i in range(30):
        producer.send(topic, value=b"k%02d" % i, partition=i % 3)
    producer.flush(30)
    producer.close()

    def consumer() -> KafkaConsumer:
        return KafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=3000,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )

    first = consumer()
    seen = []
    for msg in first:
        seen.append(msg.value)
        if len(seen) == 30:
            break
    first.commit()
    first.close()
    assert sorted(seen) == [b"k%02d" % i for i in range(30)]
    assert committed(broker.bootstrap, group, topic, 3) == {0: 10, 1: 10, 2: 10}

    produce_values(broker.bootstrap, topic, [(i % 3, b"n%02d" % i) for i in range(6)])
    second = consumer()
    later = [msg.value for msg in second]
    second.close()
    assert sorted(later) == [b"n%02d" % i for i in range(6)]


_CRASHING_MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 300, "partition.assignment.strategy": "range"})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
        break
while True:
    c.poll(0.1)
"""


def test_a_member_that_dies_is_expired_after_its_session_timeout(broker, unique):
    import subprocess
    import sys

    topic, group = unique("crash"), unique("g")
    create_topic(broker.bootstrap, topic, 4)
    child = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_MEMBER, broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
    )
    survivor = Member(broker.bootstrap, group, topic, "range")
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"assigned"
        survivor.start()
        _wait(lambda: len(survivor.owned) == 2, "the partitions to be split between two members")
        child.kill()  # no LeaveGroup: only the session timeout can free its partitions
        child.wait(10)
        _wait(lambda: len(survivor.owned) == 4, "the dead member's partitions to move", timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        survivor.stop_flag.set()
        if survivor.ident is not None:
            survivor.join(30)
    assert survivor.error is None, survivor.error
