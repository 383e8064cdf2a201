"""librdkafka settings translated for Spark's native (Java) Kafka source."""

from __future__ import annotations

import pytest

from streams.kafka.errors import KafkaConfigError
from streams.kafka.java_options import (
    FAILOVER_TIMEOUT_MS,
    for_spark_source,
    java_client_options,
    with_failover_timeouts,
)


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


def test_the_native_source_gives_up_on_a_dead_leader_sooner_unless_told_otherwise() -> None:
    short = str(FAILOVER_TIMEOUT_MS)
    assert with_failover_timeouts({"client.id": "x"}) == {
        "client.id": "x",
        "request.timeout.ms": short,
        "default.api.timeout.ms": short,
    }
    mine = {"request.timeout.ms": "45000", "default.api.timeout.ms": "90000"}
    assert with_failover_timeouts(mine) == mine


def test_one_timeout_set_moves_the_other_so_the_admin_client_accepts_them() -> None:
    # Kafka's admin client refuses an API timeout shorter than its request timeout.
    longer = with_failover_timeouts({"request.timeout.ms": "40000"})
    assert longer["default.api.timeout.ms"] == "40000"
    shorter = with_failover_timeouts({"default.api.timeout.ms": "4000"})
    assert shorter["request.timeout.ms"] == "4000"


def test_a_timeout_that_is_not_a_number_is_refused_naming_it() -> None:
    with pytest.raises(KafkaConfigError) as info:
        with_failover_timeouts({"request.timeout.ms": "30s"})
    assert info.value.option == "request.timeout.ms"
    assert "`request.timeout.ms` in `kafka.client`" in str(info.value)
    assert "'30s'" in str(info.value)


def test_the_spark_source_is_not_given_what_it_manages() -> None:
    options = java_client_options(
        {"enable.auto.commit": "false", "auto.offset.reset": "latest", "client.id": "c"}
    )
    assert for_spark_source(options) == {"client.id": "c"}
