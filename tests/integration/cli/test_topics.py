"""`warehouse produce` and `warehouse consume` as subprocesses against a real broker process
(the project's bootstrap points at it): what goes in by one comes out of the other, keyed,
and `consume` shows only committed transactions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from streams.kafka import end_offsets
from tests.unit.runtime.projects import write_project

pytestmark = [pytest.mark.kafka]


def warehouse(
    *args: str, project: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warehouse", *args, "--project", str(project)],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
    )


def test_produce_from_stdin_keyed_then_consume_prints_key_and_value(
    broker, unique, tmp_path: Path
) -> None:
    project = write_project(tmp_path / "proj", bootstrap=broker.bootstrap)
    topic = unique("events")
    rows = '{"id": "a", "n": 1}\n\n{"id": 2, "n": 2}\n{"id": "a", "n": 3}\n'
    done = warehouse("produce", "--topic", topic, "--key", "id", "-", project=project, stdin=rows)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"produced 3 record(s) to topic `{topic}` at {broker.bootstrap}, keyed by `id`"
    )
    out = warehouse(
        "consume", "--topic", topic, "--from-beginning", "--timeout", "3", project=project
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        'a\t{"id": "a", "n": 1}',
        '2\t{"id": 2, "n": 2}',
        'a\t{"id": "a", "n": 3}',
    ]
    assert f"consumed 3 record(s) from topic `{topic}`" in out.stderr
    first = warehouse(
        "consume", "--topic", topic, "--from-beginning", "--max", "1", project=project
    )
    assert first.stdout.splitlines() == ['a\t{"id": "a", "n": 1}']
    # Without --from-beginning only what comes later is printed: nothing here.
    later = warehouse("consume", "--topic", topic, "--timeout", "2", project=project)
    assert later.returncode == 0 and later.stdout == ""


def test_a_bad_line_sends_nothing(broker, unique, tmp_path: Path) -> None:
    project = write_project(tmp_path / "proj", bootstrap=broker.bootstrap)
    topic = unique("events")
    good = warehouse("produce", "--topic", topic, "-", project=project, stdin='{"n": 0}\n')
    assert good.returncode == 0, good.stderr
    data = tmp_path / "in.jsonl"
    data.write_text('{"n": 1}\n{"n": 2}\n{"n": 3,}\n{"n": 4}\n')
    bad = warehouse("produce", "--topic", topic, str(data), project=project)
    assert bad.returncode == 2
    assert "line 3: not valid JSON" in bad.stderr and "Traceback" not in bad.stderr
    assert end_offsets(broker.bootstrap, topic) == {topic: {0: 1}}


def test_consume_shows_committed_transactions_only(broker, unique, tmp_path: Path) -> None:
    project = write_project(tmp_path / "proj", bootstrap=broker.bootstrap)
    topic = unique("view")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("tx")})
    producer.init_transactions(30)
    for outcome, value in (("abort", b"aborted"), ("commit", b"committed")):
        producer.begin_transaction()
        producer.produce(topic, key=b"k", value=value)
        producer.flush(30)
        if outcome == "abort":
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    out = warehouse(
        "consume", "--topic", topic, "--from-beginning", "--timeout", "3", project=project
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["k\tcommitted"]


def test_consume_of_a_topic_that_never_appears_exits_1(broker, unique, tmp_path: Path) -> None:
    project = write_project(tmp_path / "proj", bootstrap=broker.bootstrap)
    topic = unique("mv.none")
    out = warehouse("consume", "--topic", topic, "--timeout", "2", project=project)
    assert out.returncode == 1
    assert f"Topic `{topic}`" in out.stderr and "warehouse plan" in out.stderr
    assert "Traceback" not in out.stderr


def test_produce_and_consume_name_a_cluster_and_leave_the_embedded_broker_stopped(
    broker, unique, tmp_path: Path
) -> None:
    eu = f'  clusters: {{eu: {{bootstrap: "{broker.bootstrap}"}}}}\n'
    project = write_project(tmp_path / "proj")  # the default cluster: `embedded`
    conf = project / "conf" / "local.yml"
    conf.write_text(conf.read_text().replace("engines:", eu + "engines:", 1))
    topic = unique("events")
    done = warehouse(
        "produce", "--topic", topic, "--cluster", "eu", "-", project=project, stdin='{"n": 1}\n'
    )
    assert done.returncode == 0, done.stderr
    assert f"to topic `{topic}` at {broker.bootstrap}" in done.stdout
    out = warehouse(
        "consume",
        "--topic",
        topic,
        "--cluster",
        "eu",
        "--from-beginning",
        "--max",
        "1",
        project=project,
    )
    assert out.stdout.splitlines() == ['null\t{"n": 1}']
    assert not (project / ".warehouse" / "broker").exists(), "the embedded broker started"
    wrong = warehouse(
        "produce", "--topic", topic, "--cluster", "us", "-", project=project, stdin=""
    )
    assert wrong.returncode == 2
    assert "`--cluster us`" in wrong.stderr and "`default`, `eu`" in wrong.stderr
