"""SASL/PLAIN against a real broker, and committed offsets surviving a broker restart."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.support.broker_clients import (
    FAST_GROUP,
    committed,
    create_topic,
    produce_values,
    read_all,
)

pytestmark = pytest.mark.kafka


def _sasl(user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }


def test_sasl_plain_right_password_works_wrong_one_fails_cleanly(broker_factory, unique, tmp_path):
    users_file = tmp_path / "users.json"
    users_file.write_text(json.dumps({"bob": "pw2"}))
    b = broker_factory(**{"sasl.users": "alice:s3cret", "sasl.users.file": str(users_file)})
    topic = unique("sasl")
    create_topic(b.bootstrap, topic, 1, **_sasl("alice", "s3cret"))
    produce_values(b.bootstrap, topic, [(0, b"hello")], **_sasl("alice", "s3cret"))
    values = [v for _, _, v in read_all_sasl(b.bootstrap, topic, _sasl("bob", "pw2"))]
    assert values == [b"hello"]

    errors: list[KafkaError] = []
    bad = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "message.timeout.ms": 3000,
            "error_cb": errors.append,
            **_sasl("alice", "wrong"),
        }
    )
    bad.produce(topic, value=b"nope", partition=0)
    bad.flush(10)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors

    # a client that skips SASL gets its connection closed: it never sees metadata
    plain = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "x"})
    try:
        with pytest.raises(Exception):  # noqa: B017 - librdkafka raises KafkaException on timeout
            plain.list_topics(timeout=3)
    finally:
        plain.close()
    assert [v for _, _, v in read_all_sasl(b.bootstrap, topic, _sasl("alice", "s3cret"))] == [
        b"hello"
    ]


def test_kafka_python_sasl_plain(broker_factory, unique, caplog):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError

    b = broker_factory(**{"sasl.users": "carol:pw"})
    topic = unique("ksasl")
    conf = {
        "bootstrap_servers": b.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
    }
    producer = KafkaProducer(sasl_plain_username="carol", sasl_plain_password="pw", **conf)
    producer.send(topic, value=b"kp").get(timeout=30)
    producer.close()
    with pytest.raises(
        KafkaPythonError
    ):  # kafka-python gives up bootstrapping, naming the cause in its log
        KafkaProducer(
            sasl_plain_username="carol",
            sasl_plain_password="bad",
            bootstrap_timeout_ms=3000,
            **conf,
        )
    assert "SaslAuthenticationFailed" in caplog.text


def read_all_sasl(bootstrap: str, topic: str, conf: dict[str, str]) -> list[tuple[int, int, bytes]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "r", "enable.auto.commit": False, **conf}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            if consumer.position([TopicPartition(topic, 0)])[0].offset >= high:
                break
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                out.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    return out


def test_committed_offsets_survive_a_restart_and_a_new_member_resumes_after_them(
    broker_factory, unique, tmp_path
):
    topic, group = unique("resume"), unique("g")
    data_dir = tmp_path / "b"
    first = broker_factory(data_dir)
    create_topic(first.bootstrap, topic, 2)
    produce_values(first.bootstrap, topic, [(i % 2, b"%02d" % i) for i in range(20)])

    consumer = Consumer({"bootstrap.servers": first.bootstrap, "group.id": group, **FAST_GROUP})
    consumer.subscribe([topic])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 20 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            seen.append(msg)
    # commit only half of each partition
    consumer.commit(
        offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 6)], asynchronous=False
    )
    consumer.close()
    first.stop()

    second = broker_factory(data_dir)
    assert committed(second.bootstrap, group, topic, 2) == {0: 4, 1: 6}
    consumer = Consumer({"bootstrap.servers": second.bootstrap, "group.id": group, **FAST_GROUP})
    consumer.subscribe([topic])
    resumed = []
    deadline = time.monotonic() + 30
    while len(resumed) < 10 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            resumed.append((msg.partition(), msg.offset()))
    consumer.close()
    assert sorted(resumed) == [(0, o) for o in range(4, 10)] + [(1, o) for o in range(6, 10)]
    # the raw reader agrees these are the records after the committed positions
    assert len(read_all(second.bootstrap, topic, 2)) == 20
