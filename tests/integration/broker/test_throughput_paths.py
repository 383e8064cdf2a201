"""The fast paths, with real clients: fetches sent from the segment files with sendfile
(record sets >= 64 KiB, read across segment boundaries, read_committed skipping
aborted transactions), and produce requests that do not page-fault their buffers in."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.produce.v9.response import ProduceResponse

from streams.broker.handlers.fetch import SENDFILE_MIN_BYTES
from streams.broker.storage import iter_batches
from tests.support.broker_clients import consume_all, create_topic, produce, read_all
from tests.support.broker_wire import (
    Wire,
    encode_request,
    fetch_request,
    produce_request,
    record_batch,
)

pytestmark = [pytest.mark.kafka]

SEGMENT = 256 * 1024  # ~250 records of 1 KB per segment


def _records(n: int, label: str = "r") -> list[tuple[bytes, bytes]]:
    return [(f"{label}{i}".encode(), f"{label}{i:06d}".encode() * 128) for i in range(n)]


def test_large_fetches_cross_segments_for_confluent_and_kafka_python(broker, unique) -> None:
    topic = unique("sendfile")
    create_topic(broker.bootstrap, topic, partitions=2, config={"segment.bytes": str(SEGMENT)})
    records = _records(3000)  # ~3 MB: ~6 segments per partition
    placed = produce(broker.bootstrap, topic, records, batch_size=200_000)
    expected = sorted((p, o, k, v) for (p, o), (k, v) in zip(placed, records, strict=True))

    got = consume_all(
        broker.bootstrap, topic, [0, 1], len(records), **{"max.partition.fetch.bytes": 1 << 20}
    )
    assert sorted(got) == expected

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        enable_auto_commit=False,
        max_partition_fetch_bytes=1 << 20,
        consumer_timeout_ms=10_000,
    )
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.seek_to_beginning()
        seen = []
        for msg in consumer:
            seen.append((msg.partition, msg.offset, msg.key, msg.value))
            if len(seen) == len(records):
                break
    finally:
        consumer.close()
    assert sorted(seen) == expected


def test_one_fetch_fills_its_budget_across_segments(broker, unique) -> None:
    topic = unique("fill")
    create_topic(broker.bootstrap, topic, partitions=1, config={"segment.bytes": str(SEGMENT)})
    produce(broker.bootstrap, topic, _records(1500), partition=0, batch_size=64_000)
    request = fetch_request(topic, [0], partition_max_bytes=1 << 20, max_bytes=4 << 20)
    with Wire(broker.bootstrap) as wire:
        response = wire.call(request, FetchResponse)
    (part,) = response.responses[0].partitions
    assert part.error_code == ErrorCode.none
    data = bytes(part.records)
    # sent from the files (over the sendfile threshold), from several segments, whole
    # batches in offset order from 0, filling the 1 MiB budget to within one batch
    assert len(data) > max(SENDFILE_MIN_BYTES, 2 * SEGMENT)
    assert (1 << 20) - 70_000 < len(data) <= 1 << 20
    headers = list(iter_batches(data))
    assert headers[0].base_offset == 0
    assert all(a.next_offset == b.base_offset for a, b in zip(headers, headers[1:], strict=False))
    assert sum(h.size for h in headers) == len(data)


def test_a_segment_truncated_mid_send_closes_the_connection(broker_factory, unique) -> None:
    """The size prefix is already out when sendfile finds the file shorter: the
    broker must close the connection, never leave the client waiting for bytes
    or send a frame of the wrong length."""
    # a response bigger than the socket buffers hold (the default fetch.max.bytes is 4 MiB)
    proc = broker_factory(**{"fetch.max.bytes": str(64 << 20)})
    topic = unique("shrink")
    create_topic(proc.bootstrap, topic, partitions=1)
    batch = record_batch([b"s" * 1000] * 1000)
    with Wire(proc.bootstrap) as wire:
        for i in range(16):  # ~16 MB: more than the broker's socket buffers hold
            answer = wire.call(produce_request(topic, 0, batch), ProduceResponse, i + 1)
            assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none
    host, port = proc.bootstrap.rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)  # before connect
    sock.settimeout(20)
    try:
        sock.connect((host, int(port)))
        sock.sendall(
            encode_request(
                fetch_request(topic, [0], partition_max_bytes=32 << 20, max_bytes=64 << 20)
            )
        )
        time.sleep(1.0)  # the broker fills the socket and waits inside sendfile
        (segment,) = (proc.data_dir / f"{topic}-0").glob("*.log")
        os.truncate(segment, 1 << 20)
        received = 0
        while chunk := sock.recv(1 << 20):  # until the broker closes (a timeout fails)
            received += len(chunk)
    finally:
        sock.close()
    assert 1 << 20 < received < 16_000_000


def test_read_committed_skips_aborted_transactions_in_sendfile_fetches(broker, unique) -> None:
    from tests.integration.broker.coordinator.test_transactions import txn_producer

    topic = unique("txn-sendfile")
    create_topic(broker.bootstrap, topic, partitions=1, config={"segment.bytes": str(SEGMENT)})
    producer = txn_producer(broker.bootstrap, unique("tid"), **{"batch.size": 200_000})
    outcome = {"a": True, "b": False, "c": True, "d": False, "e": True}
    for label, commit in outcome.items():  # ~400 KB per transaction: each spans segments
        producer.begin_transaction()
        for key, value in _records(400, label):
            producer.produce(topic, key=key, value=value, partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    def values(label: str) -> list[bytes]:
        return [v for _, v in _records(400, label)]

    committed = [v for _, _, v in read_all(broker.bootstrap, topic, 1, timeout=60)]
    assert committed == values("a") + values("c") + values("e")
    everything = [
        v for _, _, v in read_all(broker.bootstrap, topic, 1, isolation="read_uncommitted")
    ]
    assert everything == [v for label in outcome for v in values(label)]


def test_produce_requests_reuse_heap_pages(broker_factory, unique) -> None:
    """The broker process keeps freed request buffers (see `__main__._tune_allocator`):
    with glibc's defaults every 1 MB produce request faulted ~470 pages in per MB."""
    proc = broker_factory()
    topic = unique("faults")
    create_topic(proc.bootstrap, topic, partitions=1)
    batch = record_batch([b"x" * 1000] * 1000)  # one ~1 MB produce request

    def send(n: int, first_id: int) -> None:
        for i in range(n):
            answer = wire.call(produce_request(topic, 0, batch), ProduceResponse, first_id + i)
            assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none

    with Wire(proc.bootstrap) as wire:
        send(4, 1)  # warm up
        before = _minor_faults(proc.pid)
        send(16, 100)
        per_mb = (_minor_faults(proc.pid) - before) / 16
    assert per_mb < 120, f"{per_mb:.0f} minor page faults per MB produced"


def _minor_faults(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7])
