"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on a real broker process, with real clients.

Credentials are created as on Kafka: with the Admin API (AlterUserScramCredentials, sent by
confluent-kafka's AdminClient, which salts the password itself) by a user who logged in
with PLAIN, or with Kafka's own `kafka-configs` tool. The broker keeps a salt, an iteration
count and the two derived keys, never the password: the data directory is searched for the
password and the salted password after a restart, which the credentials survive.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.support.kafka_tools import run as kafka_tool

pytestmark = pytest.mark.kafka

ADMIN_PASSWORD = "admin-pw-3b1e"
ALICE_PASSWORD = "alice-scram-pw-9d27"
MECHANISMS = {
    "SCRAM-SHA-256": (ScramMechanism.SCRAM_SHA_256, "sha256"),
    "SCRAM-SHA-512": (ScramMechanism.SCRAM_SHA_512, "sha512"),
}
BROKER_CONFIG = {
    "sasl.users": f"admin:{ADMIN_PASSWORD}",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
}


def _conf(mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "log_level": 0,
    }


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **_conf("PLAIN", "admin", ADMIN_PASSWORD)})


def _round_trip(bootstrap: str, conf: dict[str, Any], topic: str) -> tuple[int, bytes]:
    """Produce one record as `conf`'s user and read it back: (offset, value)."""
    p = Producer({"bootstrap.servers": bootstrap, **conf})
    p.produce(topic, value=b"scram", partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", **conf})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        msg = c.poll(20)
        assert msg is not None and msg.error() is None, msg and msg.error()
        return msg.offset(), msg.value()
    finally:
        c.close()


def _refusal(bootstrap: str, conf: dict[str, Any]) -> list[str]:
    """The authentication errors an AdminClient reports for `conf` (none if it lists topics)."""
    errors: list[KafkaError] = []
    a = AdminClient({"bootstrap.servers": bootstrap, "error_cb": errors.append, **conf})
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        refused = [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if refused:
            return refused
        try:
            a.list_topics(timeout=1)
        except KafkaException:
            a.poll(0.1)
        else:
            return []
    raise AssertionError("neither listed topics nor refused within 15 s")


def _upsert(admin: AdminClient, user: str, mechanism: str, password: str, iterations: int) -> None:
    info = ScramCredentialInfo(MECHANISMS[mechanism][0], iterations)
    upsertion = UserScramCredentialUpsertion(user, info, password.encode())
    admin.alter_user_scram_credentials([upsertion])[user].result(30)


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_a_scram_user_created_with_the_admin_api_produces_and_consumes(
    broker_factory, unique, mechanism: str
) -> None:
    broker = broker_factory(**BROKER_CONFIG)
    admin = _admin(broker.bootstrap)
    topic = unique("scram")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    _upsert(admin, "alice", mechanism, ALICE_PASSWORD, 8192)

    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (MECHANISMS[mechanism][0], 8192)
    ]
    alice = _conf(mechanism, "alice", ALICE_PASSWORD)
    assert _round_trip(broker.bootstrap, alice, topic) == (0, b"scram")

    wrong = _refusal(broker.bootstrap, _conf(mechanism, "alice", "not-her-password"))
    expected = (
        "SASL authentication error: Authentication failed during authentication due to "
        f"invalid credentials with SASL mechanism {mechanism}"
    )
    assert wrong and all(expected in e for e in wrong), wrong
    assert _refusal(broker.bootstrap, _conf(mechanism, "nobody", ALICE_PASSWORD))
    other = "SCRAM-SHA-512" if mechanism == "SCRAM-SHA-256" else "SCRAM-SHA-256"
    assert _refusal(broker.bootstrap, _conf(other, "alice", ALICE_PASSWORD)), (
        "a credential of one mechanism is not one of the other"
    )

    deletion = UserScramCredentialDeletion("alice", MECHANISMS[mechanism][0])
    admin.alter_user_scram_credentials([deletion])["alice"].result(30)
    assert _refusal(broker.bootstrap, alice)


def test_credentials_survive_a_restart_and_no_password_is_kept(
    broker_factory, tmp_path: Path, unique
) -> None:
    data_dir = tmp_path / "data"
    broker = broker_factory(data_dir, **BROKER_CONFIG)
    admin = _admin(broker.bootstrap)
    salt = b"fixed-salt-for-the-search"
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsertion = UserScramCredentialUpsertion("alice", info, ALICE_PASSWORD.encode(), salt)
    admin.alter_user_scram_credentials([upsertion])["alice"].result(30)
    broker.stop()

    broker = broker_factory(data_dir, **BROKER_CONFIG)
    topic = unique("scram-restart")
    admin = _admin(broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    alice = _conf("SCRAM-SHA-256", "alice", ALICE_PASSWORD)
    assert _round_trip(broker.bootstrap, alice, topic) == (0, b"scram")
    broker.stop()

    salted = hashlib.pbkdf2_hmac("sha256", ALICE_PASSWORD.encode(), salt, 4096)
    for path in data_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert ALICE_PASSWORD.encode() not in data, path
            assert salted not in data, path
            assert salted.hex().encode() not in data, path


def test_kafka_configs_adds_describes_and_deletes_scram_credentials(
    broker_factory, tmp_path: Path, unique
) -> None:
    """Kafka's own tool, passwords in files (`--command-config`, `--add-config-file`), never on
    its command line."""
    broker = broker_factory(**BROKER_CONFIG)
    admin_props = tmp_path / "admin.properties"
    admin_props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{ADMIN_PASSWORD}";\n'
    )
    scram = tmp_path / "scram.properties"
    # in a file the value has no brackets: `--add-config` strips them, Properties does not
    scram.write_text(f"SCRAM-SHA-512=iterations=8192,password={ALICE_PASSWORD}\n")
    common = ["--command-config", str(admin_props), "--entity-type", "users"]
    added = kafka_tool(
        "kafka-configs",
        [*common, "--entity-name", "alice", "--alter", "--add-config-file", str(scram)],
        broker.bootstrap,
    )
    assert added.code == 0, added.explain()
    assert added.lines == ["Completed updating config for user alice."]

    described = kafka_tool(
        "kafka-configs", [*common, "--entity-name", "alice", "--describe"], broker.bootstrap
    )
    assert described.code == 0, described.explain()
    assert "SCRAM-SHA-512=iterations=8192" in described.stdout, described.explain()
    assert ALICE_PASSWORD not in described.stdout

    topic = unique("scram-tool")
    admin = _admin(broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    alice = _conf("SCRAM-SHA-512", "alice", ALICE_PASSWORD)
    assert _round_trip(broker.bootstrap, alice, topic) == (0, b"scram")

    deleted = kafka_tool(
        "kafka-configs",
        [*common, "--entity-name", "alice", "--alter", "--delete-config", "SCRAM-SHA-512"],
        broker.bootstrap,
    )
    assert deleted.code == 0, deleted.explain()
    assert _refusal(broker.bootstrap, alice)


def test_the_java_client_authenticates_with_scram(
    broker_factory, tmp_path: Path, java_client
) -> None:
    broker = broker_factory(**BROKER_CONFIG)
    admin = _admin(broker.bootstrap)
    _upsert(admin, "alice", "SCRAM-SHA-256", ALICE_PASSWORD, 4096)
    files = []
    for name, password in (("right", ALICE_PASSWORD), ("wrong", "not-her-password")):
        path = tmp_path / name
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="alice" password="{password}";\n'
        )
        files.append(str(path))
    seen = java_client.run("secured", broker.bootstrap, *files)
    assert seen["right"]["offset"] == 0
    assert [r["offset"] for r in seen["right"]["read"]["records"]] == [0]
    assert seen["wrong"] == [
        "SaslAuthenticationException",
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256",
    ]
