"""The KIP-848 consumer group protocol, which the bundled broker does not offer: a client
asking for it (`group.protocol=consumer`) gets the same error from the bundled broker as
from an Apache Kafka whose group coordinator offers only the classic protocol
(`group.coordinator.rebalance.protocols=classic`), and the classic protocol works on both.

Such a Kafka advertises ConsumerGroupHeartbeat (68) and answers every heartbeat
UNSUPPORTED_VERSION; the raw answer is compared field by field, then what the Java client
and confluent-kafka (librdkafka) make of it.

The Kafka here is a node of its own (module scope): the session's `apache_kafka` offers
the consumer protocol, as Kafka 4.x does by default.
"""

from __future__ import annotations

import dataclasses
import struct
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.consumer_group_heartbeat.v0 import request as heartbeat_v0
from kio.schema.consumer_group_heartbeat.v0 import response as heartbeat_v0_response
from kio.schema.consumer_group_heartbeat.v1 import request as heartbeat_v1
from kio.schema.consumer_group_heartbeat.v1 import response as heartbeat_v1_response
from kio.schema.errors import ErrorCode

from tests.integration.oracle.clients import QUIET, create_topic
from tests.integration.oracle.differential import on_both, unique
from tests.support.apache_kafka import ApacheKafka, ApacheKafkaError
from tests.support.broker_wire import Wire, encode_request
from tests.support.java_client import JavaClient

pytestmark = pytest.mark.kafka

CONSUMER_GROUP_HEARTBEAT = 68
FATAL_WITHIN_S = 30
"""How long the librdkafka consumer may poll for its fatal error before the scenario
reports that none came (it gets it on its first heartbeat, well within this)."""


@pytest.fixture(scope="module")
def classic_only_brokers(
    broker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    try:
        kafka = ApacheKafka(
            tmp_path_factory.mktemp("apache-kafka-classic"),
            overrides={"group.coordinator.rebalance.protocols": "classic"},
        ).start()
    except ApacheKafkaError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield {"bundled": broker.bootstrap, "apache-kafka": kafka.bootstrap}
    finally:
        kafka.stop()


def _heartbeats(group: str, topic: str) -> list[tuple[Any, type]]:
    """A joining member's first ConsumerGroupHeartbeat in v0 and v1, with its response class."""
    common = {
        "group_id": group,
        "member_epoch": 0,
        "rebalance_timeout": timedelta(seconds=30),
        "subscribed_topic_names": (topic,),
        "server_assignor": "uniform",
        "topic_partitions": (),
    }
    return [
        (
            heartbeat_v0.ConsumerGroupHeartbeatRequest(member_id="", **common),
            heartbeat_v0_response.ConsumerGroupHeartbeatResponse,
        ),
        (
            # from v1 the client makes up its member id (a UUID in base64)
            heartbeat_v1.ConsumerGroupHeartbeatRequest(
                member_id="jE2ZzEVyR7GnZ1vb2wLJvA", **common
            ),
            heartbeat_v1_response.ConsumerGroupHeartbeatResponse,
        ),
    ]


def _raw_heartbeat(bootstrap: str) -> dict[str, Any]:
    """The advertised versions of ConsumerGroupHeartbeat, every field of the answer to a
    v0 and a v1 heartbeat, and whether a v2 heartbeat (beyond both brokers' range) gets
    its connection closed, as an unsupported version of any API does."""
    topic = unique("kip848-raw")
    create_topic(bootstrap, topic)
    out: dict[str, Any] = {}
    with Wire(bootstrap) as wire:
        versions = wire.call(
            ApiVersionsRequest(client_software_name="oracle", client_software_version="1"),
            ApiVersionsResponse,
        )
        out["advertised"] = [
            (k.min_version, k.max_version)
            for k in versions.api_keys
            if k.api_key == CONSUMER_GROUP_HEARTBEAT
        ]
        for request, response_cls in _heartbeats(unique("kip848-raw"), topic):
            response = wire.call(request, response_cls)
            out[f"v{request.__version__}"] = dataclasses.asdict(response)
    with Wire(bootstrap) as wire:
        request, _ = _heartbeats(unique("kip848-raw"), topic)[1]
        frame = bytearray(encode_request(request))
        struct.pack_into(">h", frame, 6, 2)  # request_api_version, after size and api key
        wire.send_raw(bytes(frame))
        out["v2 closes the connection"] = wire.read_frame() is None
    return out


def test_raw_consumer_group_heartbeat(classic_only_brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(classic_only_brokers, _raw_heartbeat)
    unsupported = {
        "throttle_time": timedelta(0),
        "error_code": ErrorCode.unsupported_version,
        "error_message": None,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval": timedelta(0),
        "assignment": None,
    }
    assert on_kafka == {
        "advertised": [(0, 1)],
        "v0": unsupported,
        "v1": unsupported,
        "v2 closes the connection": True,
    }
    assert on_bundled == on_kafka


def _librdkafka_consumer_protocol(bootstrap: str) -> dict[str, Any]:
    """What a confluent-kafka consumer with `group.protocol=consumer` gets from `poll`:
    the first error (name, code, text) and the records before it, or no error within
    `FATAL_WITHIN_S`. A fatal error reaches a consumer as a `_FATAL` error whose text
    names the broker's error; `fatal()` is true only on the client's own error event."""
    topic = unique("kip848-librdkafka")
    create_topic(bootstrap, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("kip848-librdkafka"),
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            **QUIET,
        }
    )
    records = 0
    error: tuple[str, int, str] | None = None
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + FATAL_WITHIN_S
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is None:
                records += 1
            else:
                error = (err.name(), err.code(), err.str())
    finally:
        consumer.close()
    return {"records": records, "error": error}


def test_librdkafka_consumer_asking_for_the_consumer_protocol(
    classic_only_brokers: dict[str, str],
) -> None:
    on_bundled, on_kafka = on_both(classic_only_brokers, _librdkafka_consumer_protocol)
    assert on_kafka["records"] == 0
    assert on_kafka["error"] is not None, f"no error within {FATAL_WITHIN_S} s from Kafka"
    name, _, text = on_kafka["error"]
    assert name == "_FATAL"
    # librdkafka's words for UNSUPPORTED_VERSION (35), on the API that got it
    assert "Broker: API version not supported: ConsumerGroupHeartbeat" in text
    assert on_bundled == on_kafka


def test_java_consumer_asking_for_the_consumer_protocol(
    classic_only_brokers: dict[str, str], java_client: JavaClient
) -> None:
    on_bundled, on_kafka = on_both(
        classic_only_brokers, lambda bootstrap: java_client.run("consumer_protocol", bootstrap)
    )
    assert on_kafka["consumer"][0] == "UnsupportedVersionException"
    assert "does not support the new CONSUMER group protocol" in on_kafka["consumer"][1]
    assert on_kafka["classic"] == "records"
    assert on_bundled == on_kafka
