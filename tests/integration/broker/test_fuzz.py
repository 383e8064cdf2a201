"""Random and mutated frames against a running broker (bounded), then real clients still work."""

from __future__ import annotations

import random
import socket
import struct
from datetime import timedelta

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7 import request as create_req
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.list_offsets.v7 import request as offsets_req
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9 import request as produce_req

from tests.support.broker_clients import consume_all, create_topic, produce
from tests.support.broker_wire import encode_request, record_batch

pytestmark = [pytest.mark.kafka]

CASES = 1000


def _batch(n: int) -> bytes:
    return record_batch([b"fuzz" * 8] * n, keys=[b"k%d" % i for i in range(n)])


def _valid_frames(decoy: str) -> list[bytes]:
    """Well-formed requests to mutate; none of them names the protected topic."""
    requests = [
        ApiVersionsRequest(client_software_name="fuzz", client_software_version="0"),
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=decoy),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        ),
        produce_req.ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout=timedelta(seconds=1),
            topic_data=(
                produce_req.TopicProduceData(
                    name=decoy,
                    partition_data=(produce_req.PartitionProduceData(index=0, records=_batch(3)),),
                ),
            ),
        ),
        fetch_req.FetchRequest(
            max_wait=timedelta(milliseconds=10),
            min_bytes=0,
            max_bytes=1 << 16,
            isolation_level=0,
            forgotten_topics_data=(),
            topics=(
                fetch_req.FetchTopic(
                    topic=decoy,
                    partitions=(
                        fetch_req.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 16
                        ),
                    ),
                ),
            ),
        ),
        offsets_req.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=(
                offsets_req.ListOffsetsTopic(
                    name=decoy,
                    partitions=(offsets_req.ListOffsetsPartition(partition_index=0, timestamp=-1),),
                ),
            ),
        ),
        create_req.CreateTopicsRequest(
            topics=(
                create_req.CreatableTopic(
                    name=decoy + "-made",
                    num_partitions=1,
                    replication_factor=1,
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=timedelta(seconds=1),
            validate_only=False,
        ),
    ]
    return [encode_request(r, correlation_id=i) for i, r in enumerate(requests)]


def _mutations(rng: random.Random, valid: list[bytes]) -> list[bytes]:
    cases: list[bytes] = []
    for i in range(CASES):
        kind = i % 6
        base = bytearray(rng.choice(valid))
        if kind == 0:  # random body with a consistent length prefix
            body = rng.randbytes(rng.randint(0, 300))
            cases.append(struct.pack(">i", len(body)) + body)
        elif kind == 1:  # truncated valid request (the prefix promises more)
            cases.append(bytes(base[: rng.randint(1, len(base) - 1)]))
        elif kind == 2:  # huge or negative length prefix
            size = rng.choice([2**31 - 1, 200 * 1024 * 1024, -rng.randint(1, 2**31)])
            cases.append(struct.pack(">i", size) + bytes(base[4:]))
        elif kind == 3:  # garbage api key / version in an otherwise valid frame
            struct.pack_into(">hh", base, 4, rng.randint(-32768, 32767), rng.randint(-32768, 32767))
            cases.append(bytes(base))
        elif kind == 4:  # flipped bytes after the size prefix
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(4, len(base))
                base[pos] ^= 1 << rng.randrange(8)
            cases.append(bytes(base))
        else:  # valid prefix for the body, bytes replaced by random ones
            pos = rng.randrange(8, len(base))
            base[pos:] = rng.randbytes(len(base) - pos)
            cases.append(bytes(base))
    return cases


def _throw(bootstrap: str, payload: bytes) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.settimeout(3)
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass  # a mutated long-poll may keep the broker busy; we do not wait for it


@pytest.mark.slow
def test_random_and_mutated_frames_leave_broker_and_data_intact(broker_factory, unique) -> None:
    proc = broker_factory()
    protected = unique("protected-topic-with-a-long-name")
    create_topic(proc.bootstrap, protected, partitions=2)
    records = [(f"key-{i}".encode(), f"value-{i}".encode()) for i in range(200)]
    produce(proc.bootstrap, protected, records, acks="all")
    before = sorted(consume_all(proc.bootstrap, protected, [0, 1], expected=200))
    assert len(before) == 200

    decoy = "dq"
    valid = _valid_frames(decoy)
    rng = random.Random(20261121)
    for payload in _mutations(rng, valid):
        _throw(proc.bootstrap, payload)
        assert proc._proc.poll() is None, "broker process died"

    after = sorted(consume_all(proc.bootstrap, protected, [0, 1], expected=200, timeout=60))
    assert after == before
    # well-behaved clients still work, on new and old topics
    fresh = unique("after-fuzz")
    produced = produce(proc.bootstrap, fresh, [(b"k", b"v%d" % i) for i in range(20)], acks="all")
    assert len(produced) == 20
    assert len(consume_all(proc.bootstrap, fresh, [0], expected=20)) == 20
    produce(proc.bootstrap, protected, [(b"late", b"late")], partition=0, acks="all")
    assert len(consume_all(proc.bootstrap, protected, [0, 1], expected=201)) == 201
