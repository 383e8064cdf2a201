"""Produce and Fetch rules checked on the wire: acks, unknown partitions, byte limits, names."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.produce.v9.response import ProduceResponse

from tests.support.broker_clients import create_topic
from tests.support.broker_wire import Wire, fetch_request, produce_request, record_batch

pytestmark = [pytest.mark.kafka]


def _batch(count: int, value_size: int) -> bytes:
    return record_batch([b"v" * value_size] * count)


def test_produce_errors_are_per_partition(broker, unique) -> None:
    topic = unique("perr")
    create_topic(broker.bootstrap, topic, partitions=1)
    with Wire(broker.bootstrap) as wire:
        bad_acks = wire.call(produce_request(topic, 0, _batch(1, 10), acks=2), ProduceResponse, 1)
        part = bad_acks.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.invalid_required_acks
        missing = wire.call(produce_request(topic, 7, _batch(1, 10)), ProduceResponse, 2)
        assert missing.responses[0].partition_responses[0].error_code == (
            ErrorCode.unknown_topic_or_partition
        )
        corrupt = bytearray(_batch(3, 10))
        corrupt[-1] ^= 0xFF  # breaks the CRC
        bad = wire.call(produce_request(topic, 0, bytes(corrupt)), ProduceResponse, 3)
        assert bad.responses[0].partition_responses[0].error_code == ErrorCode.corrupt_message
        good = wire.call(produce_request(topic, 0, _batch(3, 10)), ProduceResponse, 4)
        part = good.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.none and part.base_offset == 0  # nothing else landed


def test_fetch_byte_limits_first_batch_always_returned(broker, unique) -> None:
    topic = unique("limits")
    create_topic(broker.bootstrap, topic, partitions=2)
    with Wire(broker.bootstrap) as wire:
        for p in (0, 1):
            for i in range(3):  # three ~10 KB batches per partition
                response = wire.call(
                    produce_request(topic, p, _batch(10, 1000)), ProduceResponse, 10 + i
                )
                assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
        one = len(_batch(10, 1000))

        tiny = wire.call(
            fetch_request(topic, [0, 1], max_bytes=100, partition_max_bytes=100), FetchResponse
        )
        first, second = tiny.responses[0].partitions
        assert len(first.records) == one  # over both limits, still one whole batch
        assert len(second.records) == 0  # the response budget is spent

        per_partition = wire.call(
            fetch_request(topic, [0, 1], max_bytes=1 << 20, partition_max_bytes=2 * one + 10),
            FetchResponse,
            2,
        )
        assert [len(p.records) for p in per_partition.responses[0].partitions] == [2 * one, 2 * one]

        total = wire.call(
            fetch_request(topic, [0, 1], max_bytes=4 * one, partition_max_bytes=1 << 20),
            FetchResponse,
            3,
        )
        assert [len(p.records) for p in total.responses[0].partitions] == [3 * one, one]


def test_metadata_rejects_illegal_topic_names_without_touching_disk(broker_factory) -> None:
    proc = broker_factory()
    names = ["../escape", "a/b", "..", "x" * 250, "spaces here"]
    request = MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    with Wire(proc.bootstrap) as wire:
        response = wire.call(request, MetadataResponse)
    assert [t.error_code for t in response.topics] == [ErrorCode.invalid_topic_exception] * len(
        names
    )
    assert not (proc.data_dir.parent / "escape").exists()
    assert not (proc.data_dir / "a").exists()
    assert not any("escape" in p.name or "spaces" in p.name for p in proc.data_dir.iterdir())


def test_clients_cannot_write_or_delete_internal_topics(broker) -> None:
    from kio.schema.delete_topics.v6 import request as delete_req
    from kio.schema.delete_topics.v6.response import DeleteTopicsResponse

    with Wire(broker.bootstrap) as wire:
        metadata = wire.call(
            MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            MetadataResponse,
        )
        internal = sorted(t.name for t in metadata.topics if t.is_internal)
        # the broker always runs its coordinator, whose topics exist from the first start
        assert internal == ["__consumer_offsets", "__transaction_state"]
        for name in internal:
            produced = wire.call(produce_request(name, 0, _batch(1, 10)), ProduceResponse, 2)
            assert produced.responses[0].partition_responses[0].error_code == (
                ErrorCode.invalid_topic_exception
            )
            deleted = wire.call(
                delete_req.DeleteTopicsRequest(
                    topics=(delete_req.DeleteTopicState(name=name, topic_id=None),),
                    timeout=timedelta(seconds=5),
                ),
                DeleteTopicsResponse,
                3,
            )
            assert deleted.responses[0].error_code == ErrorCode.invalid_request


def _frame_of_size(topic: str, total: int, correlation_id: int) -> bytes:
    """A valid Produce frame of exactly `total` bytes (prefix included), padded via client_id."""
    from tests.support.broker_wire import encode_request

    request = produce_request(topic, 0, _batch(1, max(0, total - 400)))
    base = encode_request(request, correlation_id, client_id="")
    pad = total - len(base)
    assert 0 <= pad < 300, pad
    frame = encode_request(request, correlation_id, client_id="c" * pad)
    assert len(frame) == total
    return frame


@pytest.mark.parametrize("total", [65_535, 65_536, 65_537, 300_000, 1_500_000])
def test_frames_around_the_receive_buffer_size(broker, unique, total: int) -> None:
    from kio.serial import entity_reader

    topic = unique("frames")
    create_topic(broker.bootstrap, topic, config={"max.message.bytes": str(4 << 20)})
    frames = [_frame_of_size(topic, total, i) for i in (1, 2, 3)]
    with Wire(broker.bootstrap) as wire:
        wire.send_raw(frames[0] + frames[1])  # back to back in one write
        third = frames[2]
        # split inside the size prefix and inside the body
        pieces = [third[:3], third[3:7], third[7 : len(third) // 2], third[len(third) // 2 :]]
        for piece in pieces:
            wire.send_raw(piece)
        offsets = []
        for expected_id in (1, 2, 3):
            frame = wire.read_frame()
            assert frame is not None, "broker closed the connection"
            assert int.from_bytes(frame[:4], "big") == expected_id
            response, _ = entity_reader(ProduceResponse)(frame, 5)
            part = response.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.none
            offsets.append(part.base_offset)
    assert offsets == [0, 1, 2]


def test_a_response_carries_at_most_fetch_max_bytes(broker, unique) -> None:
    """The broker's `fetch.max.bytes` (4 MiB by default) caps a response whatever the
    request asks for; whole batches only."""
    from streams.broker.config import FETCH_MAX_BYTES

    topic = unique("cap")
    create_topic(broker.bootstrap, topic, partitions=1)
    batch = _batch(1000, 1000)  # ~1 MB
    with Wire(broker.bootstrap) as wire:
        for i in range(6):
            response = wire.call(produce_request(topic, 0, batch), ProduceResponse, 10 + i)
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
        answer = wire.call(
            fetch_request(topic, [0], max_bytes=64 << 20, partition_max_bytes=16 << 20),
            FetchResponse,
        )
    (part,) = answer.responses[0].partitions
    assert part.high_watermark == 6000
    assert len(part.records) == (FETCH_MAX_BYTES // len(batch)) * len(batch)


def test_min_bytes_above_fetch_max_bytes_counts_the_bytes_readable(broker_factory, unique) -> None:
    """With `fetch.min.bytes` above what one response may carry, a fetch answers once
    that much is readable (as Kafka's delayed fetch counts it), not at `max_wait`."""
    proc = broker_factory(**{"fetch.max.bytes": "50000"})
    topic = unique("minbytes")
    create_topic(proc.bootstrap, topic, partitions=2)
    one = len(_batch(10, 1000))
    request = fetch_request(topic, [0, 1], max_bytes=1 << 20, partition_max_bytes=1 << 20)
    request = replace(request, min_bytes=5 * one + 1, max_wait=timedelta(seconds=60))
    # the broker caps max_wait at fetch.max.wait.ms (30 s): a fetch that waited it out
    # would hit this socket timeout and fail the test
    with Wire(proc.bootstrap, timeout=20) as wire:
        for p in (0, 1):
            for i in range(3):
                response = wire.call(
                    produce_request(topic, p, _batch(10, 1000)), ProduceResponse, 10 + i
                )
                assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
        answer = wire.call(request, FetchResponse)
    # 6 batches readable, 4 fit in the 50 000 bytes: 3 of partition 0, then 1 of partition 1
    assert [len(p.records) for p in answer.responses[0].partitions] == [3 * one, one]
