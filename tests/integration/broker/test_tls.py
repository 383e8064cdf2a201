"""TLS listeners (SSL, SASL_SSL) with a certificate the user gives, on a real broker process,
with confluent-kafka and the Java client; the certificates are made in the test
(tests/support/certs.py). Also: several listeners on one broker, each client told the
address of the listener it came in on; a client certificate as the principal; settings
that cannot work stop the broker with a message naming them; a listener other machines can
reach without SASL is warned about.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.support.certs import KEY_PASSWORD, Certificates, make_certificates
from tests.support.java_client import JavaClient

pytestmark = pytest.mark.kafka

USER_PASSWORD = "tls-user-pw-77a0"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def _ssl_broker_config(certs: Certificates, **extra: str) -> dict[str, str]:
    return {
        "listeners": "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.key.password": KEY_PASSWORD,
        **extra,
    }


def _round_trip(bootstrap: str, conf: dict[str, Any], topic: str) -> tuple[int, bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, **conf})
    p.produce(topic, value=b"over tls", partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", **conf})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        msg = c.poll(20)
        assert msg is not None and msg.error() is None, msg and msg.error()
        return msg.offset(), msg.value()
    finally:
        c.close()


def _fails_to_connect(bootstrap: str, conf: dict[str, Any]) -> list[str]:
    """The errors an AdminClient with `conf` reports while it cannot list topics."""
    errors: list[KafkaError] = []
    a = AdminClient({"bootstrap.servers": bootstrap, "error_cb": errors.append, **conf})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            a.list_topics(timeout=1)
        except KafkaException:
            a.poll(0.1)
        else:
            raise AssertionError(f"listed topics with {conf}")
        if any(e.code() != KafkaError._ALL_BROKERS_DOWN for e in errors):
            break
    return [e.str() for e in errors]


def test_an_ssl_listener_serves_confluent_kafka_with_the_users_certificate(
    broker_factory, certs: Certificates, unique
) -> None:
    broker = broker_factory(**_ssl_broker_config(certs))
    bootstrap = broker.listener_bootstrap("SSL")
    tls = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca), "log_level": 0}
    assert _round_trip(bootstrap, tls, unique("tls")) == (0, b"over tls")

    # the broker's certificate is what the client checked: a client trusting another CA fails
    untrusted = {**tls, "ssl.ca.location": str(certs.other_ca)}
    errors = _fails_to_connect(bootstrap, untrusted)
    assert any("certificate verify failed" in e for e in errors), errors
    # and the PLAINTEXT listener of the same broker is not TLS
    plain = broker.listener_bootstrap("PLAINTEXT")
    assert plain != bootstrap
    assert _round_trip(plain, {"log_level": 0}, unique("plain")) == (0, b"over tls")


def test_each_listener_is_told_its_own_address(broker_factory, certs: Certificates) -> None:
    """A client that bootstrapped on the SSL listener must be sent back to it by Metadata,
    not to the first listener (PLAINTEXT here), or it would speak TLS to a plain socket."""
    broker = broker_factory(
        **_ssl_broker_config(certs, listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0")
    )
    for name, conf in (
        ("SSL", {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}),
        ("PLAINTEXT", {}),
    ):
        bootstrap = broker.listener_bootstrap(name)
        metadata = AdminClient({"bootstrap.servers": bootstrap, **conf}).list_topics(timeout=30)
        assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [bootstrap]


def test_a_sasl_ssl_listener_with_inline_pem_and_hidden_key(
    broker_factory, certs: Certificates, unique
) -> None:
    """`ssl.keystore.certificate.chain` and `ssl.keystore.key` give the certificate inline;
    the key is a password config: DescribeConfigs hides it, and it is not in the log."""
    key = certs.broker_key.read_text()
    broker = broker_factory(
        **{
            "listeners": "SASL_SSL://127.0.0.1:0",
            "sasl.users": f"tls-user:{USER_PASSWORD}",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": certs.broker_chain.read_text(),
            "ssl.keystore.key": key,
        }
    )
    bootstrap = broker.listener_bootstrap("SASL_SSL")
    conf = {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certs.ca),
        "sasl.mechanism": "PLAIN",
        "sasl.username": "tls-user",
        "sasl.password": USER_PASSWORD,
        "log_level": 0,
    }
    assert _round_trip(bootstrap, conf, unique("sasl-ssl")) == (0, b"over tls")
    wrong = _fails_to_connect(bootstrap, {**conf, "sasl.password": "nope"})
    assert any("Invalid username or password" in e for e in wrong), wrong

    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(30)
    assert entries["ssl.keystore.key"].value is None
    assert entries["ssl.keystore.key"].is_sensitive is True
    assert entries["ssl.keystore.type"].value == "PEM"
    key_body = key.splitlines()[1]
    assert key_body not in broker.log_file.read_text()


def test_a_required_client_certificate_names_the_principal(
    broker_factory, certs: Certificates, unique
) -> None:
    broker = broker_factory(
        **_ssl_broker_config(
            certs, **{"ssl.client.auth": "required", "ssl.truststore.location": str(certs.ca)}
        )
    )
    bootstrap = broker.listener_bootstrap("SSL")
    tls = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca), "log_level": 0}
    with_cert = {
        **tls,
        "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key),
    }
    assert _round_trip(bootstrap, with_cert, unique("mtls")) == (0, b"over tls")
    assert "is User:CN=client,O=streams-tests" in broker.log_file.read_text()
    assert _fails_to_connect(bootstrap, tls)


def _java_props(path: Path, lines: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return str(path)


def test_the_java_client_on_ssl_and_sasl_ssl(
    broker_factory, certs: Certificates, tmp_path: Path, java_client: JavaClient
) -> None:
    broker = broker_factory(
        **_ssl_broker_config(
            certs,
            listeners="SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            **{"sasl.users": f"tls-user:{USER_PASSWORD}"},
        )
    )
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca)}
    ssl_props = _java_props(tmp_path / "ssl", {"security.protocol": "SSL", **trust})
    untrusted = _java_props(
        tmp_path / "untrusted",
        {"security.protocol": "SSL", **trust, "ssl.truststore.location": str(certs.other_ca)},
    )
    seen = java_client.run("secured", broker.listener_bootstrap("SSL"), ssl_props, untrusted)
    assert seen["ssl"]["offset"] == 0
    assert [r["offset"] for r in seen["ssl"]["read"]["records"]] == [0]
    assert seen["untrusted"][0] == "SslAuthenticationException"

    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="tls-user" password="{USER_PASSWORD}";'
    )
    sasl_ssl = _java_props(
        tmp_path / "sasl_ssl",
        {
            "security.protocol": "SASL_SSL",
            **trust,
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": jaas,
        },
    )
    seen = java_client.run("secured", broker.listener_bootstrap("SASL_SSL"), sasl_ssl)
    assert seen["sasl_ssl"]["offset"] == 0


def _start_failure(tmp_path: Path, config: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import json

    return subprocess.run(
        [sys.executable, "-m", "streams.broker", "--data-dir", str(tmp_path / "d"), "--port", "0"]
        + ["--config-stdin"],
        input=json.dumps(config),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_tls_settings_that_cannot_work_stop_the_broker_naming_them(
    tmp_path: Path, certs: Certificates
) -> None:
    jks = _start_failure(
        tmp_path,
        {
            "listeners": "SSL://127.0.0.1:0",
            "ssl.keystore.type": "JKS",
            "ssl.keystore.location": "/nowhere/keystore.jks",
            "ssl.keystore.password": "jks-pw-1f0a",
        },
    )
    assert jks.returncode == 2, jks.stderr
    assert "`ssl.keystore.type`=`JKS`" in jks.stderr and "openssl pkcs12" in jks.stderr
    assert "Traceback" not in jks.stderr and "jks-pw-1f0a" not in jks.stderr

    wrong_password = _start_failure(
        tmp_path,
        {
            "listeners": "SSL://127.0.0.1:0",
            "ssl.keystore.location": str(certs.broker_keystore),
            "ssl.key.password": "not-the-key-password",
        },
    )
    assert wrong_password.returncode == 2, wrong_password.stderr
    assert "ssl.keystore.location" in wrong_password.stderr
    assert "not-the-key-password" not in wrong_password.stderr

    no_keystore = _start_failure(tmp_path, {"listeners": "SSL://127.0.0.1:0"})
    assert no_keystore.returncode == 2 and "ssl.keystore.location" in no_keystore.stderr


def test_a_listener_other_machines_reach_without_sasl_is_warned_about(broker_factory) -> None:
    """The only test that binds beyond the loopback interface, on a port of the kernel's
    choosing, for as long as the broker takes to start and stop."""
    open_broker = broker_factory(listeners="PLAINTEXT://0.0.0.0:0")
    open_broker.stop()
    log = open_broker.log_file.read_text()
    assert "WARNING" in log and "without SASL authentication" in log
    assert "PLAINTEXT://0.0.0.0:" in log

    local = broker_factory(listeners="PLAINTEXT://127.0.0.1:0")
    sasl = broker_factory(
        **{"listeners": "SASL_PLAINTEXT://0.0.0.0:0", "sasl.users": f"u:{USER_PASSWORD}"}
    )
    local.stop()
    sasl.stop()
    assert "without SASL authentication" not in local.log_file.read_text()
    assert "without SASL authentication" not in sasl.log_file.read_text()
