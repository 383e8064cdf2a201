"""Kafka Connect itself against the bundled broker and Apache Kafka: Apache Kafka's own
`connect-runtime` workers (tests/support/kafka_connect.py) move lines of a file through a
topic into another file with the FileStream source and sink connectors.

- standalone: source offsets in a local file, records through the broker end to end;
- distributed: the worker creates its config, offset and status topics (compacted) on
  the broker, joins its group (Connect's own group protocol, `connect`), runs the
  connectors the REST API gave it; stopped and started again, a worker of the same group
  resumes from the offsets it committed: every line once in the topic and once in the
  output file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_groups.v5.response import DescribedGroup, DescribeGroupsResponse
from kio.schema.errors import ErrorCode

from tests.support.broker_clients import read_all
from tests.support.broker_wire import Wire
from tests.support.kafka_connect import FILE_SINK, FILE_SOURCE, ConnectWorker

pytestmark = pytest.mark.kafka


@pytest.fixture(params=["bundled", "apache-kafka"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    """The bootstrap of the broker this run of the test is on."""
    name = "broker" if request.param == "bundled" else "apache_kafka"
    return request.getfixturevalue(name).bootstrap


def lines(start: int, stop: int) -> list[str]:
    return [f"line {i:04d} {'x' * (i % 7)}" for i in range(start, stop)]


def append(path: Path, new: list[str]) -> None:
    with path.open("a") as f:
        f.write("".join(f"{line}\n" for line in new))


def wait_lines(path: Path, count: int, worker: ConnectWorker, timeout: float = 60) -> list[str]:
    """The lines of `path` once it holds `count` of them (or more); AssertionError at timeout."""
    deadline = time.monotonic() + timeout
    got: list[str] = []
    while time.monotonic() < deadline:
        got = path.read_text().splitlines() if path.exists() else []
        if len(got) >= count:
            return got
        time.sleep(0.2)
    raise AssertionError(
        f"{path}: {len(got)} of {count} lines after {timeout:.0f}s; worker log:\n{worker.tail()}"
    )


def topic_payloads(bootstrap: str, topic: str) -> list[str]:
    """Every value of `topic` (one partition) as the JsonConverter's `payload`, after checking
    it is the schema-ful envelope of a string."""
    out = []
    for _, _, value in read_all(bootstrap, topic, 1):
        envelope = json.loads(value)
        assert envelope["schema"] == {"type": "string", "optional": False}
        out.append(envelope["payload"])
    return out


def file_pipeline(worker: ConnectWorker, tmp_path: Path, topic: str) -> tuple[Path, Path]:
    """A FileStream source (`in.txt` -> `topic`) and sink (`topic` -> `out.txt`) on `worker`,
    both RUNNING; the two files."""
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.touch()
    worker.put_connector(
        f"{topic}-source",
        {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": str(source), "topic": topic},
    )
    worker.put_connector(
        f"{topic}-sink",
        {
            "connector.class": FILE_SINK,
            "tasks.max": "1",
            "file": str(sink),
            "topics": topic,
            "consumer.override.auto.offset.reset": "earliest",
        },
    )
    for name in (f"{topic}-source", f"{topic}-sink"):
        worker.wait_running(name)
    return source, sink


def test_standalone_worker_moves_lines_end_to_end(
    bootstrap: str, connect_workers: Callable[..., ConnectWorker], unique, tmp_path: Path
) -> None:
    worker = connect_workers(bootstrap, mode="standalone")
    topic = unique("connect-lines")
    source, sink = file_pipeline(worker, tmp_path, topic)

    append(source, lines(0, 50))
    assert wait_lines(sink, 50, worker) == lines(0, 50)
    append(source, lines(50, 120))
    assert wait_lines(sink, 120, worker) == lines(0, 120)
    assert topic_payloads(bootstrap, topic) == lines(0, 120)


def _config(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {name: entry.value for name, entry in entries.items()}


def describe_group(bootstrap: str, group: str) -> DescribedGroup:
    """DescribeGroups' answer for `group`, asked of the (single) broker on the wire:
    librdkafka's and kafka-python's admin clients refuse or misread a group whose members
    are not consumers."""
    with Wire(bootstrap) as wire:
        (described,) = wire.call(
            DescribeGroupsRequest(groups=(group,), include_authorized_operations=False),
            DescribeGroupsResponse,
        ).groups
    assert described.error_code == ErrorCode.none, described
    return described


def test_distributed_worker_keeps_its_state_on_the_broker_and_resumes_after_a_restart(
    bootstrap: str, connect_workers: Callable[..., ConnectWorker], unique, tmp_path: Path
) -> None:
    group = unique("connect-cluster")
    worker = connect_workers(bootstrap, mode="distributed", group=group)
    topic = unique("connect-lines")
    source, sink = file_pipeline(worker, tmp_path, topic)

    # Connect's internal topics, made by the worker through the admin API, compacted.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_topics(timeout=30).topics
    for role, name in worker.internal_topics.items():
        assert name in listed, f"{role} topic `{name}` not created"
        assert _config(bootstrap, name)["cleanup.policy"] == "compact", name
    assert len(listed[worker.internal_topics["config"]].partitions) == 1
    # The worker is a member of its group, under Connect's own protocol type.
    described = describe_group(bootstrap, group)
    assert (described.group_state, described.protocol_type) == ("Stable", "connect")
    assert described.protocol_data == "sessioned"  # Connect's default, incremental protocol
    assert [m.client_id for m in described.members] == [f"connect-127.0.0.1:{worker.port}"]

    append(source, lines(0, 60))
    assert wait_lines(sink, 60, worker) == lines(0, 60)

    # Stopped (it commits the source's file position and the sink's consumer offsets),
    # lines written meanwhile, a new worker of the same group: the connectors come back
    # from the config topic and go on from the committed offsets.
    worker.stop()
    append(source, lines(60, 150))
    again = connect_workers(bootstrap, mode="distributed", group=group)
    for name in (f"{topic}-source", f"{topic}-sink"):
        again.wait_running(name)
    assert wait_lines(sink, 150, again) == lines(0, 150)
    assert topic_payloads(bootstrap, topic) == lines(0, 150)
    status = again.status(f"{topic}-source")
    assert status["connector"]["worker_id"] == f"127.0.0.1:{again.port}"
