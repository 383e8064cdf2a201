"""Secrets stay secret: DescribeConfigs answers a password config as Kafka does (value
null, `is_sensitive` true), and a broker started by the launcher has no password on its
command line, in its environment or in its log. A real broker process; confluent-kafka's
AdminClient asks, authenticated as a user the broker knows."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

pytestmark = pytest.mark.kafka

ALICE, BOB = "alice-pw-7f3a9c", "bob-pw-51d0e2"
USERS = f"alice:{ALICE},bob:{BOB}"


def _admin(bootstrap: str, user: str, password: str) -> AdminClient:
    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": password,
        }
    )


def test_describe_configs_hides_passwords_as_kafka_does(broker_factory) -> None:
    broker = broker_factory(**{"sasl.users": USERS, "num.partitions": "2"})
    admin = _admin(broker.bootstrap, "bob", BOB)
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(30)

    users = entries["sasl.users"]
    assert users.value is None
    assert users.is_sensitive is True
    assert [s.value for s in users.synonyms.values()] == [None]
    # what is not a secret is shown as it was set
    assert entries["num.partitions"].value == "2"
    assert entries["num.partitions"].is_sensitive is False


def test_a_config_the_broker_does_not_know_is_hidden_as_kafka_hides_it(broker_factory) -> None:
    """Kafka treats a config whose type it cannot tell as sensitive (`maybeSensitive`):
    a secret under a name this broker does not read (a plugin's, say) is not shown; nor is a
    TLS password it does read (`ssl.keystore.password`, Kafka's PASSWORD type)."""
    broker = broker_factory(
        **{"sasl.oauthbearer.client.secret": "oauth-pw-7d1c", "ssl.keystore.password": "ks-pw-0c4e"}
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(30)
    for key in ("sasl.oauthbearer.client.secret", "ssl.keystore.password"):
        assert entries[key].value is None
        assert entries[key].is_sensitive is True


def _proc_text(pid: int, name: str) -> str:
    return Path(f"/proc/{pid}/{name}").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def test_the_launcher_keeps_passwords_off_the_command_line(broker_factory) -> None:
    """`/proc/<pid>/cmdline` is readable by every user of the machine (`ps`); the broker
    gets its configs on stdin instead, and logs none of the passwords."""
    broker = broker_factory(**{"sasl.users": USERS})
    assert broker.pid is not None
    for name in ("cmdline", "environ"):
        text = _proc_text(broker.pid, name)
        assert ALICE not in text and BOB not in text, name
    # the users arrived all the same: bob authenticates with his password
    admin = _admin(broker.bootstrap, "bob", BOB)
    assert admin.list_topics(timeout=30).topics is not None
    log = broker.log_file.read_text()
    assert ALICE not in log and BOB not in log


def test_configs_on_stdin_that_do_not_parse_stop_the_broker_with_status_2(tmp_path) -> None:
    import subprocess
    import sys

    for text, expected in (("not json", "not a JSON object"), ('["a"]', "JSON `list`")):
        done = subprocess.run(
            [sys.executable, "-m", "streams.broker", "--data-dir", str(tmp_path / "d")]
            + ["--port", "0", "--config-stdin"],
            input=text, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert expected in done.stderr
        assert "Traceback" not in done.stderr
