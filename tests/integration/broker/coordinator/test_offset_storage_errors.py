"""A group offset commit whose log append fails (a real full disk) changes nothing.

Kafka applies committed offsets in memory only in the callback of their append to
`__consumer_offsets`; a failed append leaves the cache as the log has it and tells
the client (NOT_COORDINATOR for a storage error). Here the broker's data dir is a
small tmpfs that is filled while a consumer commits: the commit that cannot be
written must fail, OffsetFetch must go on answering the last offset that was
written, and a restart on a disk with room must find that same offset.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streams.broker.launcher import BrokerProcess
from tests.support.broker_clients import committed, create_topic, produce
from tests.support.disks import SmallTmpfs, require_root

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

MIB = 1024 * 1024


def _commit(consumer: Consumer, topic: str, offset: int) -> KafkaError | None:
    """Commit `offset` of partition 0 synchronously; the error, if the commit failed."""
    try:
        (tp,) = consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    except KafkaException as e:
        return e.args[0]
    return tp.error


def test_a_commit_that_cannot_be_written_is_not_applied(tmp_path: Path, unique) -> None:
    require_root()
    topic, group = unique("offsets"), unique("group")
    with SmallTmpfs(tmp_path / "disk", 8 * MIB) as disk:
        data_dir = disk.mountpoint / "data"
        broker = BrokerProcess(data_dir, log_file=tmp_path / "broker-1.log")
        consumer: Consumer | None = None
        try:
            broker.start()
            create_topic(broker.bootstrap, topic)
            produce(broker.bootstrap, topic, [(None, b"%d" % i) for i in range(500)])
            consumer = Consumer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "group.id": group,
                    "enable.auto.commit": False,
                    "socket.timeout.ms": 10_000,
                }
            )
            assert _commit(consumer, topic, 1) is None
            last_written, error = 1, None
            disk.fill()
            # the segment's last page has room for a few commits; then the disk is full
            for offset in range(2, 400):
                error = _commit(consumer, topic, offset)
                if error is not None:
                    break
                last_written = offset
            assert error is not None, "every commit was written to a full disk?"
            # the coordinator's memory agrees with its log: the failed commit is not there
            assert committed(broker.bootstrap, group, topic, 1) == {0: last_written}
            # and the client was told why: Kafka's answer to a storage error
            assert error.code() == KafkaError.NOT_COORDINATOR, error
        finally:
            if consumer is not None:
                consumer.close()
            broker.stop()
        log = (tmp_path / "broker-1.log").read_text()
        assert "not committed, the log append failed" in log, log[-3000:]

        disk.free()
        with BrokerProcess(data_dir, log_file=tmp_path / "broker-2.log") as again:
            assert committed(again.bootstrap, group, topic, 1) == {0: last_written}
