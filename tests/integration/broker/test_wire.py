"""Protocol edges a normal client does not produce, over a raw socket."""

from __future__ import annotations

import struct
import threading
import time
from datetime import timedelta

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsV4
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.serial import entity_reader

from tests.support.broker_clients import create_topic, produce
from tests.support.broker_wire import Wire, encode_request, produce_request, record_batch

pytestmark = [pytest.mark.kafka]

API_VERSIONS_V3 = ApiVersionsRequest(client_software_name="wire", client_software_version="1")
METADATA_ALL = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def _fetch(topic: str, offset: int, *, max_wait_ms: int, min_bytes: int, isolation: int = 0):
    return fetch_req.FetchRequest(
        max_wait=timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=isolation,
        topics=(
            fetch_req.FetchTopic(
                topic=topic,
                partitions=(
                    fetch_req.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def test_api_versions_v4_is_answered_in_v4(broker) -> None:
    from kio.schema.api_versions.v4.response import ApiVersionsResponse as ApiVersionsV4Response

    request = ApiVersionsV4(client_software_name="w", client_software_version="1")
    with Wire(broker.bootstrap) as wire:
        response = wire.call(request, ApiVersionsV4Response)
    assert response.error_code == ErrorCode.none
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[18] == (0, 4)


def test_api_versions_fallback_answers_v0_format_with_supported_list(broker) -> None:
    # a version newer than any this broker knows: v4's bytes announced as v5
    frame = bytearray(
        encode_request(ApiVersionsV4(client_software_name="w", client_software_version="1"), 7)
    )
    struct.pack_into(">h", frame, 6, 5)
    with Wire(broker.bootstrap) as wire:
        wire.send_raw(bytes(frame))
        frame = wire.read_frame()
        assert frame is not None
        assert struct.unpack_from(">i", frame)[0] == 7
        response, used = entity_reader(ApiVersionsV0)(frame, 4)  # no header tags, v0 body
        assert used == len(frame) - 4
        assert response.error_code == ErrorCode.unsupported_version
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges[18] == (0, 4)
        # the connection stays usable: the client retries with a version we support
        ok = wire.call(API_VERSIONS_V3, ApiVersionsResponse, correlation_id=8)
        assert ok.error_code == ErrorCode.none


def test_api_versions_advertises_core_apis_and_no_telemetry(broker) -> None:
    with Wire(broker.bootstrap) as wire:
        response = wire.call(API_VERSIONS_V3, ApiVersionsResponse)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    expected = {
        0: (3, 9),
        1: (4, 12),
        2: (1, 7),
        3: (0, 12),
        18: (0, 4),
        21: (0, 2),
        19: (2, 7),
        20: (1, 6),
        29: (1, 3),
        30: (1, 3),
        31: (1, 3),
        32: (1, 4),
        33: (0, 2),
        37: (0, 3),
        44: (0, 1),
        68: (0, 1),  # ConsumerGroupHeartbeat: answered UNSUPPORTED_VERSION, as by Kafka
    }
    for key, versions in expected.items():
        assert ranges[key] == versions
    for absent in (71, 72):  # telemetry
        assert absent not in ranges
    if 8 in ranges:  # OffsetCommit from the coordinator: not the KIP-848 v9+
        assert ranges[8][1] <= 8
        assert ranges[47] == (0, 0)  # OffsetDelete


@pytest.mark.parametrize(
    "prefix",
    [
        struct.pack(">i", 100 * 1024 * 1024 + 1),  # over socket.request.max.bytes
        struct.pack(">i", -1),
        struct.pack(">i", 2),  # too short for a header
    ],
    ids=["oversized", "negative", "tiny"],
)
def test_bad_size_prefix_closes_only_that_connection(broker, prefix: bytes) -> None:
    with Wire(broker.bootstrap) as bystander, Wire(broker.bootstrap) as victim:
        bystander.call(API_VERSIONS_V3, ApiVersionsResponse)
        victim.send_raw(prefix + b"\0\0")
        assert victim.closed_by_peer()
        assert bystander.call(METADATA_ALL, MetadataResponse, correlation_id=2).brokers


def test_unknown_api_key_closes_the_connection(broker) -> None:
    with Wire(broker.bootstrap) as wire:
        wire.send_raw(struct.pack(">ihhi", 10, 999, 0, 1) + b"\xff\xff")
        assert wire.closed_by_peer()


def test_disconnect_mid_request_leaves_no_partial_state(broker, unique) -> None:
    topic = unique("partial")
    create_topic(broker.bootstrap, topic)
    frame = encode_request(produce_request(topic, 0, record_batch([b"half"] * 10)))
    with Wire(broker.bootstrap) as wire:
        wire.send_raw(frame[: len(frame) // 2])
    with Wire(broker.bootstrap) as wire:
        response = wire.call(_fetch(topic, 0, max_wait_ms=0, min_bytes=0), FetchResponse)
    part = response.responses[0].partitions[0]
    assert part.high_watermark == 0 and not part.records
    # the same frame sent whole is appended once
    with Wire(broker.bootstrap) as wire:
        wire.send_raw(frame)
        assert wire.read_frame() is not None
        response = wire.call(_fetch(topic, 0, max_wait_ms=0, min_bytes=0), FetchResponse, 3)
    assert response.responses[0].partitions[0].high_watermark == 10


def test_fetch_long_poll_returns_when_data_arrives(broker, unique) -> None:
    topic = unique("longpoll")
    create_topic(broker.bootstrap, topic)
    result: dict[str, object] = {}

    def fetch() -> None:
        with Wire(broker.bootstrap, timeout=90) as wire:
            result["response"] = wire.call(
                _fetch(topic, 0, max_wait_ms=60_000, min_bytes=1), FetchResponse
            )

    thread = threading.Thread(target=fetch)
    thread.start()
    produce(broker.bootstrap, topic, [(None, b"wake-up")])
    thread.join(90)
    part = result["response"].responses[0].partitions[0]
    assert part.error_code == ErrorCode.none
    assert part.high_watermark == 1 and b"wake-up" in bytes(part.records)


def test_fetch_edges_empty_out_of_range_and_read_committed(broker, unique) -> None:
    topic = unique("edges")
    create_topic(broker.bootstrap, topic)
    with Wire(broker.bootstrap) as wire:
        empty = wire.call(_fetch(topic, 0, max_wait_ms=50, min_bytes=1), FetchResponse)
        part = empty.responses[0].partitions[0]
        assert part.error_code == ErrorCode.none and not part.records
        produce(broker.bootstrap, topic, [(None, b"a"), (None, b"b")])
        out = wire.call(_fetch(topic, 5, max_wait_ms=0, min_bytes=0), FetchResponse, 2)
        assert out.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range
        assert out.responses[0].partitions[0].records == b""  # librdkafka rejects null
        committed = wire.call(
            _fetch(topic, 0, max_wait_ms=0, min_bytes=0, isolation=1), FetchResponse, 3
        )
        part = committed.responses[0].partitions[0]
        assert part.last_stable_offset == part.high_watermark == 2
        assert part.aborted_transactions == ()
        missing = wire.call(
            _fetch(topic + "-nope", 0, max_wait_ms=0, min_bytes=0), FetchResponse, 4
        )
        assert missing.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_list_offsets_max_timestamp(broker, unique) -> None:
    from confluent_kafka import Producer
    from kio.schema.list_offsets.v7 import request as lo_req
    from kio.schema.list_offsets.v7.response import ListOffsetsResponse

    topic = unique("maxts")
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    # A day ago: inside retention (older records may be deleted while the test runs).
    base = (int(time.time()) // 60 - 24 * 60) * 60_000
    for ts in (5_000, 9_000, 7_000, 9_000):
        producer.produce(topic, value=b"x", timestamp=base + ts)
        producer.flush(30)

    def ask(timestamp: int) -> tuple[int, int]:
        request = lo_req.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=(
                lo_req.ListOffsetsTopic(
                    name=topic,
                    partitions=(
                        lo_req.ListOffsetsPartition(partition_index=0, timestamp=timestamp),
                    ),
                ),
            ),
        )
        with Wire(broker.bootstrap) as wire:
            part = wire.call(request, ListOffsetsResponse).topics[0].partitions[0]
        assert part.error_code == ErrorCode.none
        return part.offset, part.timestamp

    assert ask(-3) == (1, base + 9_000)  # the first record holding the largest timestamp
    assert ask(-2)[0] == 0
    assert ask(-1)[0] == 4
    assert ask(base + 6_000) == (1, base + 9_000)
