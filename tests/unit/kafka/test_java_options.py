"""librdkafka settings translated for Spark's native (Java) Kafka source."""

from __future__ import annotations

import pytest

from streams.kafka.errors import KafkaConfigError
from streams.kafka.java_options import java_client_options


def test_sasl_plain_credentials_become_a_jaas_line() -> None:
    opts = java_client_options(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": 'pa"ss\\word',
            "ssl.ca.location": "/etc/ca.pem",
        }
    )
    assert opts == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="pa\\"ss\\\\word";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/ca.pem",
    }


def test_scram_and_the_databricks_shaded_client() -> None:
    opts = java_client_options(
        {"sasl.mechanisms": "scram-sha-512", "sasl.username": "u", "sasl.password": "p"},
        shaded=True,
    )
    assert opts["sasl.mechanism"] == "SCRAM-SHA-512"
    assert opts["sasl.jaas.config"] == (
        "kafkashaded.org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u" password="p";'
    )


def test_plain_settings_pass_through_and_an_explicit_jaas_line_wins() -> None:
    assert java_client_options({"security.protocol": "PLAINTEXT", "client.id": "x"}) == {
        "security.protocol": "PLAINTEXT",
        "client.id": "x",
    }
    mine = java_client_options(
        {"sasl.username": "u", "sasl.password": "p", "sasl.jaas.config": "custom;"}
    )
    assert mine["sasl.jaas.config"] == "custom;"


def test_a_mechanism_without_password_login_is_refused_naming_the_option() -> None:
    with pytest.raises(KafkaConfigError) as info:
        java_client_options({"sasl.mechanism": "GSSAPI", "sasl.username": "u"})
    assert info.value.option == "sasl.mechanism"
    message = str(info.value)
    assert "SASL mechanism `GSSAPI` has no username/password login" in message
    assert "`kafka.security.sasl_mechanism`" in message
    assert "`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`" in message
    assert "`sasl.jaas.config` in `kafka.client`" in message


def test_a_mechanism_without_password_login_takes_an_explicit_jaas_line() -> None:
    opts = java_client_options(
        {"sasl.mechanism": "OAUTHBEARER", "sasl.username": "u", "sasl.jaas.config": "mine;"}
    )
    assert opts == {"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": "mine;"}
