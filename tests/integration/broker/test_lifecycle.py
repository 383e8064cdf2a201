"""Broker processes: restart durability, SIGKILL durability, launcher contract."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from streams.broker.launcher import (
    PID_FILE,
    BrokerProcess,
    BrokerStartError,
    broker_status,
    ensure_broker,
    stop_broker,
)
from tests.support.broker_clients import consume_all, create_topic, produce

pytestmark = [pytest.mark.kafka]


def test_restart_on_the_same_data_dir_keeps_records_and_topic_configs(
    broker_factory, tmp_path, unique
) -> None:
    data = tmp_path / "restart"
    first = broker_factory(data)
    topic = unique("durable")
    create_topic(first.bootstrap, topic, partitions=2, config={"retention.bytes": "99999999"})
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(400)]
    delivered = produce(first.bootstrap, topic, records, acks="all")
    before = consume_all(first.bootstrap, topic, [0, 1], expected=400)
    assert first.stop() == 0  # graceful: flushed, closed
    assert not (data / PID_FILE).exists()

    second = broker_factory(data)
    after = consume_all(second.bootstrap, topic, [0, 1], expected=400)
    assert sorted(after) == sorted(before)
    assert {(p, o) for p, o, _, _ in after} == set(delivered)
    admin = AdminClient({"bootstrap.servers": second.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert (
        admin.describe_configs([resource])[resource].result(30)["retention.bytes"].value
        == "99999999"
    )
    # appends continue after the recovered end
    assert (
        produce(second.bootstrap, topic, [(None, b"more")], partition=0)[0][1]
        == max(o for p, o, _, _ in after if p == 0) + 1
    )


@pytest.mark.slow
def test_sigkill_with_per_batch_fsync_loses_no_acknowledged_record(
    broker_factory, tmp_path, unique
) -> None:
    data = tmp_path / "killed"
    proc = broker_factory(data, durability="sync")
    topic = unique("sync")
    create_topic(proc.bootstrap, topic, partitions=2)
    acked: list[tuple[int, int, bytes]] = []
    stop = threading.Event()

    def on_delivery(err, msg) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    def run() -> None:
        producer = Producer(
            {
                "bootstrap.servers": proc.bootstrap,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 4000,
                "retries": 0,
            }
        )
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, value=f"r{i}".encode(), on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            producer.poll(0.001 if i % 50 else 0.01)
        producer.flush(10)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while len(acked) < 1500 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.kill()  # SIGKILL while the producer is still sending
    finally:
        stop.set()
        thread.join(30)
    assert len(acked) >= 1500, "producer did not get going"
    survivors = list(acked)

    again = broker_factory(data)
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": again.bootstrap, "group.id": unique("g")})
    try:
        ends = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in (0, 1)
        ]
    finally:
        consumer.close()
    # read everything stored (acknowledged or not: a batch may be stored whose ack was lost)
    stored = consume_all(again.bootstrap, topic, [0, 1], expected=sum(ends), timeout=60)
    assert len(stored) == sum(ends)
    stored_at = {(p, o): v for p, o, _, v in stored}
    missing = [(p, o, v) for p, o, v in survivors if stored_at.get((p, o)) != v]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"


def test_ensure_status_and_stop_broker(tmp_path) -> None:
    data = tmp_path / "embedded"
    assert broker_status(data) is None
    bootstrap = ensure_broker(data, config={"num.partitions": 2})
    try:
        status = broker_status(data)
        assert status is not None and status["bootstrap"] == bootstrap
        assert ensure_broker(data) == bootstrap  # reused, not a second process
        assert broker_status(data)["pid"] == status["pid"]
        produce(bootstrap, "embedded-topic", [(None, b"x")])
        # a second broker on the same data dir refuses to start
        with pytest.raises(BrokerStartError, match="in use"):
            BrokerProcess(data, log_file=tmp_path / "second.log").start(timeout=30)
    finally:
        assert stop_broker(data) is True
    assert broker_status(data) is None
    assert not (data / PID_FILE).exists()
    assert stop_broker(data) is False


@pytest.mark.parametrize(
    ("config", "named"),
    [({"retention.ms": "soon"}, "retention.ms"), ({"num.partitions": "zero"}, "num.partitions")],
)
def test_bad_config_fails_start_naming_the_key(tmp_path, config, named) -> None:
    with pytest.raises(BrokerStartError, match=named):
        BrokerProcess(tmp_path / "bad", config=config).start(timeout=30)


def test_sigterm_during_a_long_poll_exits_cleanly(broker_factory, unique) -> None:
    import threading
    from datetime import timedelta

    from kio.schema.fetch.v12 import request as fetch_req
    from kio.schema.fetch.v12.response import FetchResponse

    from tests.support.broker_wire import Wire

    proc = broker_factory()
    topic = unique("shutdown")
    create_topic(proc.bootstrap, topic)
    request = fetch_req.FetchRequest(
        max_wait=timedelta(seconds=30),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        forgotten_topics_data=(),
        topics=(
            fetch_req.FetchTopic(
                topic=topic,
                partitions=(
                    fetch_req.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                    ),
                ),
            ),
        ),
    )
    wire = Wire(proc.bootstrap)
    outcome: dict[str, object] = {}

    def poll() -> None:
        try:
            outcome["response"] = wire.call(request, FetchResponse)
        except AssertionError as e:  # connection closed by the broker: expected
            outcome["closed"] = str(e)

    thread = threading.Thread(target=poll)
    thread.start()
    time.sleep(0.3)  # let the fetch reach the broker and park
    try:
        assert proc.stop(timeout=15) == 0  # graceful: not killed after the timeout
        assert not (proc.data_dir / PID_FILE).exists()
    finally:
        thread.join(30)
        wire.close()
    assert "closed" in outcome or "response" in outcome


def test_delete_records_advances_log_start_and_survives_restart(
    broker_factory, tmp_path, unique
) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    data = tmp_path / "deleterecords"
    proc = broker_factory(data)
    topic = unique("delrec")
    create_topic(proc.bootstrap, topic)
    produce(proc.bootstrap, topic, [(None, f"v{i}".encode()) for i in range(10)], acks="all")
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    result = admin.delete_records([TopicPartition(topic, 0, 6)])
    deleted = next(iter(result.values())).result(30)
    assert deleted.low_watermark == 6
    too_far = next(iter(admin.delete_records([TopicPartition(topic, 0, 99)]).values()))
    with pytest.raises(Exception, match="(?i)offset"):
        too_far.result(30)
    proc.stop()

    again = broker_factory(data)
    consumer = Consumer({"bootstrap.servers": again.bootstrap, "group.id": unique("g")})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30) == (6, 10)
    finally:
        consumer.close()
    left = consume_all(again.bootstrap, topic, [0], expected=4, **{"auto.offset.reset": "earliest"})
    assert [v for _, _, _, v in left] == [b"v6", b"v7", b"v8", b"v9"]
