from __future__ import annotations

import io
import struct
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from streams.broker import protocol
from streams.broker.protocol import FrameError
from tests.support.broker_wire import encode_request


def _request_frame(request: object, correlation_id: int, client_id: str | None) -> bytes:
    """The request bytes without their size prefix."""
    return encode_request(request, correlation_id, client_id)[4:]


def test_frame_size_accepts_limits_and_rejects_bad_prefixes() -> None:
    assert protocol.frame_size(struct.pack(">i", 100), max_bytes=100) == 100
    with pytest.raises(FrameError, match="socket.request.max.bytes"):
        protocol.frame_size(struct.pack(">i", 101), max_bytes=100)
    with pytest.raises(FrameError, match="negative"):
        protocol.frame_size(struct.pack(">i", -5), max_bytes=100)
    with pytest.raises(FrameError, match="too short"):
        protocol.frame_size(struct.pack(">i", 3), max_bytes=100)


@settings(max_examples=50, deadline=None)
@given(
    version=st.integers(min_value=3, max_value=9),
    correlation_id=st.integers(min_value=-(2**31), max_value=2**31 - 1),
    client_id=st.one_of(st.none(), st.text(max_size=20)),
    topic=st.from_regex(r"[a-zA-Z0-9._-]{1,30}", fullmatch=True),
    records=st.binary(min_size=0, max_size=200),
    acks=st.sampled_from([-1, 0, 1]),
)
def test_produce_request_round_trips_through_framing(
    version: int, correlation_id: int, client_id: str | None, topic: str, records: bytes, acks: int
) -> None:
    module = __import__(f"kio.schema.produce.v{version}.request", fromlist=["x"])
    request = module.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=timedelta(seconds=5),
        topic_data=(
            module.TopicProduceData(
                name=topic,
                partition_data=(module.PartitionProduceData(index=2, records=records),),
            ),
        ),
    )
    frame = _request_frame(request, correlation_id, client_id)
    assert protocol.peek_api(frame) == (0, version, correlation_id)
    decoded = protocol.parse_request(frame, 0, version)
    assert decoded.correlation_id == correlation_id
    assert decoded.client_id == client_id
    assert decoded.request.topic_data[0].name == topic
    assert bytes(decoded.request.topic_data[0].partition_data[0].records) == records
    assert decoded.request.acks == acks


def test_truncated_bytes_are_frame_errors_trailing_bytes_are_ignored() -> None:
    from kio.schema.metadata.v12.request import MetadataRequest

    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )
    frame = _request_frame(request, 7, "c")
    # as Kafka does: librdkafka sends stray bytes after an all-topics Metadata v12
    assert protocol.parse_request(frame + b"\1\0\0", 3, 12).request == request
    with pytest.raises(FrameError, match="cannot decode"):
        protocol.parse_request(frame[:-3], 3, 12)


@pytest.mark.parametrize("version", [0, 3])
def test_api_versions_response_header_has_no_tagged_fields(version: int) -> None:
    module = protocol.response_module(18, version)
    response = protocol.make(
        module.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=(module.ApiVersion(api_key=0, min_version=3, max_version=9),),
        throttle_time=timedelta(0),
    )
    frame = protocol.encode_response(42, response)
    (size, correlation) = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4
    assert correlation == 42
    decoded, used = entity_reader(type(response))(frame, 8)  # no tag byte after the header
    assert used == len(frame) - 8
    assert decoded.api_keys[0].max_version == 9


def test_flexible_response_header_carries_one_empty_tag_section() -> None:
    module = protocol.response_module(3, 12)
    response = module.MetadataResponse(
        throttle_time=timedelta(0), brokers=(), cluster_id="c", controller_id=0, topics=()
    )
    frame = protocol.encode_response(9, response)
    assert frame[8] == 0  # empty tagged fields of response header v1
    decoded, used = entity_reader(type(response))(frame, 9)
    assert used == len(frame) - 9 and decoded.cluster_id == "c"


def test_make_drops_fields_the_version_lacks() -> None:
    v0 = protocol.response_module(3, 0).MetadataResponseTopic
    topic = protocol.make(
        v0, error_code=ErrorCode.none, name="t", partitions=(), topic_id=None, is_internal=True
    )
    assert topic.name == "t"
    assert not hasattr(topic, "topic_id")


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=100_000), min_size=1, max_size=4),
    correlation_id=st.integers(min_value=0, max_value=2**31 - 1),
    version=st.sampled_from([4, 11, 12]),
)
def test_chunked_fetch_encoding_equals_kio_and_keeps_record_sets_by_reference(
    sizes: list[int], correlation_id: int, version: int
) -> None:
    module = protocol.response_module(1, version)
    record_sets = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    response = protocol.make(
        module.FetchResponse,
        throttle_time=timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(
            module.FetchableTopicResponse(
                topic="t",
                partitions=tuple(
                    protocol.make(
                        module.PartitionData,
                        partition_index=i,
                        error_code=ErrorCode.none,
                        high_watermark=10,
                        last_stable_offset=10,
                        log_start_offset=0,
                        aborted_transactions=None,
                        records=records,
                    )
                    for i, records in enumerate(record_sets)
                ),
            ),
        ),
    )
    chunks = protocol.encode_response_chunks(correlation_id, response)
    reference = io.BytesIO()
    entity_writer(type(response))(reference, response)
    frame = b"".join(chunks)
    header = 4 + 4 + (1 if version >= 12 else 0)
    assert frame[header:] == reference.getvalue()
    assert struct.unpack_from(">ii", frame) == (len(frame) - 4, correlation_id)
    large = [r for r in record_sets if len(r) >= 32 * 1024]
    assert sum(any(c is r for c in chunks) for r in large) == len(large)
