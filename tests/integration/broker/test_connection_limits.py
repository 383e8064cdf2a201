"""What a client may make the broker hold, with Kafka's settings: frames capped before SASL
authentication completes (`sasl.server.max.receive.size`, 512 KiB) and after it
(`socket.request.max.bytes`), no buffer for a frame before its bytes arrive, connections
limited (`max.connections`, `max.connections.per.ip`, `max.connections.per.ip.overrides`)
and idle ones closed (`connections.max.idle.ms`). Real broker processes, raw sockets for
what a client library would never send, confluent-kafka for what it does send; the
broker's memory is its resident set as the kernel counts it (`/proc/<pid>/status`)."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.response import ProduceResponse
from kio.serial import entity_reader

from tests.support.broker_clients import create_topic, read_all
from tests.support.broker_wire import Wire, encode_request, produce_request, record_batch

pytestmark = pytest.mark.kafka

API_VERSIONS = ApiVersionsRequest(client_software_name="wire", client_software_version="1")
CLAIMED_SIZE = 100_000_000  # under socket.request.max.bytes (104857600)
SOCKETS = 20
SASL = {"sasl.users": "alice:alice-pw"}
ALICE = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": "alice-pw",
}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def _closed_within(wire: Wire, seconds: float) -> bool:
    """Whether the broker closes `wire` within `seconds` (EOF or reset)."""
    wire.sock.settimeout(seconds)
    try:
        return wire.closed_by_peer()
    except TimeoutError:
        return False


def _answers(bootstrap: str) -> bool:
    """Whether a new connection gets an ApiVersions answer."""
    with Wire(bootstrap, timeout=10) as wire:
        try:
            return wire.call(API_VERSIONS, ApiVersionsResponse).error_code == 0
        except (AssertionError, ConnectionError, TimeoutError):
            return False


@contextmanager
def _claiming(bootstrap: str, n: int, size: int) -> Iterator[list[Wire]]:
    """`n` connections that each announce a frame of `size` bytes and send nothing else."""
    with ExitStack() as stack:
        wires = [stack.enter_context(Wire(bootstrap)) for _ in range(n)]
        for wire in wires:
            wire.send_raw(struct.pack(">i", size))
        yield wires


@pytest.mark.parametrize("config", [{}, SASL], ids=["plaintext", "sasl"])
def test_announced_frames_that_never_arrive_cost_the_broker_no_memory(
    broker_factory, config: dict[str, str]
) -> None:
    """The audit's finding: twenty unauthenticated sockets each sending a 4-byte size of
    100,000,000 grew the broker from 63 MB to 1.09 GB. Before SASL completes such a size
    is over 512 KiB and closes the connection; without SASL it is a legal size, and the
    broker holds only what arrives of it, not the size announced."""
    broker = broker_factory(**config)
    assert broker.pid is not None
    assert _answers(broker.bootstrap)  # served once: what a connection costs is loaded
    before = _rss_mb(broker.pid)
    with _claiming(broker.bootstrap, SOCKETS, CLAIMED_SIZE) as wires:
        peak = before
        for _ in range(20):  # 2 s: the broker has read every prefix long before
            peak = max(peak, _rss_mb(broker.pid))
            time.sleep(0.1)
        if config:
            assert all(_closed_within(w, 5) for w in wires)
        else:  # Kafka too waits for the rest of a frame within socket.request.max.bytes
            assert not any(_closed_within(w, 0.2) for w in wires)
        assert _answers(broker.bootstrap)
    assert peak - before < 64, f"RSS grew from {before:.0f} MB to {peak:.0f} MB"


def test_before_authentication_a_frame_over_512_kib_closes_the_connection(
    broker_factory, unique
) -> None:
    broker = broker_factory(**SASL)
    with Wire(broker.bootstrap) as over, Wire(broker.bootstrap) as at_cap:
        over.send_raw(struct.pack(">i", 512 * 1024 + 1))
        assert _closed_within(over, 5)
        at_cap.send_raw(struct.pack(">i", 512 * 1024))  # allowed; the rest never comes
        assert not _closed_within(at_cap, 0.5)
    # after authentication the limit is socket.request.max.bytes: a 2 MB record goes in
    topic = unique("big")
    create_topic(broker.bootstrap, topic, config={"max.message.bytes": "4000000"}, **ALICE)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "message.max.bytes": 4_000_000, **ALICE}
    )
    delivered: list[tuple[object, int | None]] = []
    producer.produce(
        topic,
        b"x" * 2_000_000,
        partition=0,
        on_delivery=lambda err, msg: delivered.append((err, msg.offset())),
    )
    assert producer.flush(30) == 0
    assert delivered == [(None, 0)]


def test_a_large_frame_that_arrives_slowly_is_received_whole(broker, unique) -> None:
    """The size prefix alone, then 3 MB in 32 KiB pieces: the frame's buffer starts small
    and grows as the bytes arrive; the record is appended and read back byte for byte."""
    topic = unique("dribble")
    create_topic(broker.bootstrap, topic, config={"max.message.bytes": str(8 << 20)})
    value = bytes(range(256)) * (3_000_000 // 256)
    frame = encode_request(produce_request(topic, 0, record_batch([value])), correlation_id=7)
    with Wire(broker.bootstrap) as wire:
        wire.send_raw(frame[:4])
        time.sleep(0.1)  # the broker reads the prefix by itself
        for start in range(4, len(frame), 32 * 1024):
            wire.send_raw(frame[start : start + 32 * 1024])
        answer = wire.read_frame()
    assert answer is not None and int.from_bytes(answer[:4], "big") == 7
    response, _ = entity_reader(ProduceResponse)(answer, 5)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
    [(_, offset, got)] = read_all(broker.bootstrap, topic, 1)
    assert offset == 0 and got == value


def test_sasl_server_max_receive_size_sets_the_cap(broker_factory) -> None:
    broker = broker_factory(**SASL, **{"sasl.server.max.receive.size": "1024"})
    with Wire(broker.bootstrap) as wire:
        wire.send_raw(struct.pack(">i", 1025))
        assert _closed_within(wire, 5)


def test_max_connections_per_ip_closes_the_connection_over_the_limit(broker_factory) -> None:
    broker = broker_factory(**{"max.connections.per.ip": "3"})
    with ExitStack() as stack:
        held = [stack.enter_context(Wire(broker.bootstrap)) for _ in range(3)]
        for wire in held:
            assert wire.call(API_VERSIONS, ApiVersionsResponse).error_code == 0
        with Wire(broker.bootstrap) as extra:
            assert _closed_within(extra, 5)
        held.pop().close()
        deadline = time.monotonic() + 5  # the broker sees the close, then counts one less
        while not _answers(broker.bootstrap) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _answers(broker.bootstrap)


def test_an_override_gives_one_address_its_own_limit(broker_factory) -> None:
    broker = broker_factory(
        **{"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "127.0.0.1:3"}
    )
    with ExitStack() as stack:
        held = [stack.enter_context(Wire(broker.bootstrap)) for _ in range(3)]
        for wire in held:
            assert wire.call(API_VERSIONS, ApiVersionsResponse).error_code == 0
        with Wire(broker.bootstrap) as extra:
            assert _closed_within(extra, 5)


def test_max_connections_limits_the_broker_as_a_whole(broker_factory) -> None:
    broker = broker_factory(**{"max.connections": "2"})
    with Wire(broker.bootstrap) as a, Wire(broker.bootstrap) as b:
        for wire in (a, b):
            assert wire.call(API_VERSIONS, ApiVersionsResponse).error_code == 0
        with Wire(broker.bootstrap) as extra:
            assert _closed_within(extra, 5)


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(broker_factory) -> None:
    broker = broker_factory(**{"connections.max.idle.ms": "1000"})
    with Wire(broker.bootstrap) as idle, Wire(broker.bootstrap) as busy:
        # a frame announced and never sent is idle too: it ends the same way
        idle.send_raw(struct.pack(">i", 1000))
        started = time.monotonic()
        for _ in range(8):  # 2.4 s of a request every 0.3 s keeps `busy` open
            assert busy.call(API_VERSIONS, ApiVersionsResponse).error_code == 0
            time.sleep(0.3)
        assert _closed_within(idle, 5)
        assert 0.9 < time.monotonic() - started < 6
        assert busy.call(API_VERSIONS, ApiVersionsResponse).error_code == 0


def test_a_bad_limit_is_refused_at_start_naming_it(tmp_path) -> None:
    from streams.broker.launcher import BrokerProcess, BrokerStartError

    for key, value in (
        ("max.connections.per.ip.overrides", "127.0.0.1"),
        ("connections.max.idle.ms", "soon"),
        ("max.connections", "-1"),
    ):
        proc = BrokerProcess(tmp_path / key, config={key: value})
        try:
            with pytest.raises(BrokerStartError, match=key.replace(".", r"\.")):
                proc.start(timeout=30)
        finally:
            proc.stop()  # a broker that started after all is not left running


def test_a_client_library_works_under_tight_limits(broker_factory, unique) -> None:
    """librdkafka keeps one connection per broker (two with a consumer group's
    coordinator); limits well above that change nothing for it."""
    broker = broker_factory(**{"max.connections.per.ip": "8", "connections.max.idle.ms": "5000"})
    topic = unique("limits")
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        producer.produce(topic, b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    assert len(read_all(broker.bootstrap, topic, 1)) == 100
