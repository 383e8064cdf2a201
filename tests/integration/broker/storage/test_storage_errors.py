"""Storage errors on a real disk that fails: a broker process, real clients, no mocks.

`durability: sync` acknowledges acks=all only after an fsync. When that fsync
fails (thin-provisioned storage that filled up: ext4 accepted the write, the
device could not store it) the produce must fail with KAFKA_STORAGE_ERROR, the
log dir goes offline as in Kafka (every later produce and fetch answers
KAFKA_STORAGE_ERROR), and after a restart on a healthy disk the partition holds
exactly what was acknowledged.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import response as fetch_resp
from kio.schema.produce.v9 import response as produce_resp

from streams.broker.launcher import BrokerProcess
from tests.support.broker_clients import consume_all, create_topic, end_offsets, produce
from tests.support.broker_wire import Wire, fetch_request, produce_request, record_batch
from tests.support.disks import ThinExt4, require_root

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

MIB = 1024 * 1024


def _produce_one(bootstrap: str, topic: str, value: bytes) -> KafkaError | None:
    """One acks=all record with no retries; the error its delivery report carries."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "retries": 0,
            "linger.ms": 0,
            "message.timeout.ms": 20_000,
        }
    )
    outcome: list[KafkaError | None] = []
    producer.produce(topic, key=b"late", value=value, on_delivery=lambda e, m: outcome.append(e))
    assert producer.flush(30) == 0
    return outcome[0]


def test_failed_fsync_fails_the_produce_and_takes_the_log_dir_offline(
    tmp_path: Path, unique
) -> None:
    require_root()
    topic = unique("sync")
    with ThinExt4(tmp_path / "disk", image_size=256 * MIB, backing_size=48 * MIB) as disk:
        data_dir = disk.mountpoint / "data"
        broker = BrokerProcess(data_dir, log_file=tmp_path / "broker-1.log")
        try:
            broker.start()
            create_topic(broker.bootstrap, topic, config={"durability": "sync"})
            acked = [(b"k%d" % i, b"v%d" % i * 100) for i in range(20)]
            produce(broker.bootstrap, topic, acked, acks="all")

            disk.fail_writeback()
            # 512 KiB: its pages cannot all land in blocks the image already stores
            error = _produce_one(broker.bootstrap, topic, b"x" * (MIB // 2))
            assert error is not None, "acknowledged although its fsync failed"
            assert error.code() == KafkaError.KAFKA_STORAGE_ERROR, error

            with Wire(broker.bootstrap) as wire:
                later = wire.call(
                    produce_request(topic, 0, record_batch([b"after"]), acks=-1),
                    produce_resp.ProduceResponse,
                )
                (part,) = later.responses[0].partition_responses
                assert part.error_code == ErrorCode.kafka_storage_error
                fetched = wire.call(
                    fetch_request(topic, [0], max_bytes=MIB, partition_max_bytes=MIB),
                    fetch_resp.FetchResponse,
                )
                (fpart,) = fetched.responses[0].partitions
                assert fpart.error_code == ErrorCode.kafka_storage_error
                assert fpart.records in (b"", None)
        finally:
            broker.stop()
        log = (tmp_path / "broker-1.log").read_text()
        assert "is offline" in log and "fsync" in log, log[-3000:]

        disk.restore()
        with BrokerProcess(data_dir, log_file=tmp_path / "broker-2.log") as again:
            assert end_offsets(again.bootstrap, topic, 1) == {0: len(acked)}
            got = consume_all(again.bootstrap, topic, [0], expected=len(acked), timeout=30)
            assert [(k, v) for _, _, k, v in got] == acked
            # the directory is healthy again: appends work
            produce(again.bootstrap, topic, [(b"k", b"after restart")], acks="all")
