"""Idempotent producers: duplicates acknowledged without a second append, gaps refused."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse

from streams.broker.launcher import BrokerProcess
from tests.support.broker_clients import create_topic, read_all
from tests.support.broker_wire import Wire, producer_batch

pytestmark = pytest.mark.kafka


def _init_pid(client: Wire) -> tuple[int, int]:
    resp = client.call(
        InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        ),
        InitProducerIdResponse,
    )
    assert resp.error_code is ErrorCode.none
    return resp.producer_id, resp.producer_epoch


def _produce(client: Wire, topic: str, records: bytes) -> tuple[ErrorCode, int]:
    resp = client.call(
        ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout=timedelta(seconds=10),
            topic_data=(
                TopicProduceData(
                    name=topic, partition_data=(PartitionProduceData(index=0, records=records),)
                ),
            ),
        ),
        ProduceResponse,
    )
    (part,) = resp.responses[0].partition_responses
    return part.error_code, part.base_offset


def test_duplicate_batch_is_acked_at_its_offset_and_a_gap_is_refused_also_after_restart(
    broker_factory, unique, tmp_path
):
    topic = unique("idem")
    data_dir = tmp_path / "b"
    first = broker_factory(data_dir)
    create_topic(first.bootstrap, topic, 1)
    with Wire(first.bootstrap) as c:
        pid, epoch = _init_pid(c)
        b0 = producer_batch(pid, epoch, 0, [b"a", b"b", b"c"])
        b1 = producer_batch(pid, epoch, 3, [b"d", b"e"])
        assert _produce(c, topic, b0) == (ErrorCode.none, 0)
        assert _produce(c, topic, b1) == (ErrorCode.none, 3)
        assert _produce(c, topic, b0) == (ErrorCode.none, 0)  # retry of an old batch
        assert _produce(c, topic, b1) == (ErrorCode.none, 3)
        gap = producer_batch(pid, epoch, 9, [b"x"])
        assert _produce(c, topic, gap)[0] is ErrorCode.out_of_order_sequence_number
    first.stop()

    second = broker_factory(data_dir)  # producer state is rebuilt from the log's batch headers
    with Wire(second.bootstrap) as c:
        assert _produce(c, topic, b1) == (ErrorCode.none, 3)
        assert (
            _produce(c, topic, producer_batch(pid, epoch, 7, [b"z"]))[0]
            is ErrorCode.out_of_order_sequence_number
        )
        assert _produce(c, topic, producer_batch(pid, epoch, 5, [b"f"])) == (ErrorCode.none, 5)
        other_pid, _ = _init_pid(c)
        assert other_pid != pid  # producer ids are never handed out twice across restarts
    values = [v for _, _, v in read_all(second.bootstrap, topic, 1, isolation="read_uncommitted")]
    assert values == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_fenced_epoch_is_refused(broker, unique):
    topic = unique("fence")
    create_topic(broker.bootstrap, topic, 1)
    with Wire(broker.bootstrap) as c:
        pid, _ = _init_pid(c)
        assert _produce(c, topic, producer_batch(pid, 3, 0, [b"new"])) == (ErrorCode.none, 0)
        error, _ = _produce(c, topic, producer_batch(pid, 2, 1, [b"zombie"]))
        assert error is ErrorCode.invalid_producer_epoch


def test_idempotent_producer_retrying_across_a_broker_kill_writes_each_record_once(
    tmp_path, unique
):
    """librdkafka retries in-flight batches after the broker dies; none may land twice."""
    topic, n = unique("kill"), 4000
    proc = BrokerProcess(tmp_path / "d", config={"durability": "sync"}).start()
    restarted: BrokerProcess | None = None
    try:
        port = proc.port
        create_topic(proc.bootstrap, topic, 2)
        producer = Producer(
            {
                "bootstrap.servers": proc.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 2,
                "batch.num.messages": 50,
                "message.timeout.ms": 60000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
            }
        )
        delivered: list[bytes] = []
        errors: list[object] = []

        def on_delivery(err, msg) -> None:
            (errors if err else delivered).append(err or msg.value())

        def send() -> None:
            for i in range(n):
                while True:
                    try:
                        producer.produce(
                            topic, value=b"m%05d" % i, partition=i % 2, on_delivery=on_delivery
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                producer.poll(0)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        deadline = time.monotonic() + 30
        while len(delivered) < n // 4 and time.monotonic() < deadline:
            producer.poll(0.01)
        proc.kill()  # SIGKILL with batches in flight
        restarted = BrokerProcess(tmp_path / "d", port=port, config={"durability": "sync"}).start()
        sender.join(60)
        assert producer.flush(60) == 0
        assert not errors, errors[:5]
        assert len(delivered) == n
        values = [
            v for _, _, v in read_all(restarted.bootstrap, topic, 2, isolation="read_uncommitted")
        ]
        counts = Counter(values)
        assert [v for v, c in counts.items() if c > 1] == []
        assert sorted(counts) == [b"m%05d" % i for i in range(n)]
    finally:
        if restarted is not None:
            restarted.stop()
        proc.stop()


def test_kafka_python_idempotent_producer_by_default(broker, unique):
    from kafka import KafkaProducer

    topic = unique("kpi")
    create_topic(broker.bootstrap, topic, 1)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all"
    )
    for i in range(20):
        producer.send(topic, value=b"p%02d" % i)
    producer.flush(30)
    producer.close()
    assert [v for _, _, v in read_all(broker.bootstrap, topic, 1)] == [
        b"p%02d" % i for i in range(20)
    ]


def test_a_recreated_topic_starts_with_fresh_producer_state(broker, unique):
    from confluent_kafka.admin import AdminClient

    topic = unique("recreate")
    create_topic(broker.bootstrap, topic, 1)
    with Wire(broker.bootstrap) as c:
        pid, epoch = _init_pid(c)
        assert _produce(c, topic, producer_batch(pid, epoch, 0, [b"a", b"b"])) == (
            ErrorCode.none,
            0,
        )
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics([topic])[topic].result(30)
        create_topic(broker.bootstrap, topic, 1)
        # the old topic's sequences must not leak into the new one
        assert _produce(c, topic, producer_batch(pid, epoch, 0, [b"c"])) == (ErrorCode.none, 0)
