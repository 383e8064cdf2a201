"""The Java client configuration names `warehouse mirror` lets through to MirrorMaker are
Kafka's own: those the producer, consumer and admin client of the kafka-clients jar
MirrorMaker runs on list, read from that jar by Java."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from warehouse.runtime import mirror
from warehouse.runtime.errors import MirrorError
from warehouse.runtime.java_client_configs import JAVA_CLIENT_CONFIGS, KAFKA_CLIENTS_VERSION

NAMES = """
import java.util.TreeSet;

public class Names {
  public static void main(String[] args) {
    TreeSet<String> names = new TreeSet<>();
    names.addAll(org.apache.kafka.clients.producer.ProducerConfig.configNames());
    names.addAll(org.apache.kafka.clients.consumer.ConsumerConfig.configNames());
    names.addAll(org.apache.kafka.clients.admin.AdminClientConfig.configNames());
    names.forEach(System.out::println);
  }
}
"""


def test_the_names_are_those_of_the_java_clients_mirrormaker_runs_on(tmp_path: Path) -> None:
    try:
        classpath = mirror.cached_classpath(os.environ)
    except MirrorError as e:  # a skip would pass without comparing anything
        pytest.fail(str(e), pytrace=False)
    jars = {Path(j).name for j in classpath.split(os.pathsep)}
    assert f"kafka-clients-{KAFKA_CLIENTS_VERSION}.jar" in jars, sorted(jars)
    source = tmp_path / "Names.java"
    source.write_text(NAMES)
    java = mirror.java_binary(os.environ)
    # Java runs a single source file itself (JEP 330).
    done = subprocess.run(
        [java, "-cp", classpath, str(source)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert set(done.stdout.split()) == JAVA_CLIENT_CONFIGS
