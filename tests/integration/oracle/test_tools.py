"""Kafka's own command-line tools (the `kafka-tools` jar, unchanged) against both brokers.

Each scenario runs a batch of tool commands on one broker and returns what they printed,
normalized; the test asserts the bundled broker's transcript equals Apache Kafka's.
What the normalization removes, and why it legitimately differs between the two:

- topic and group names: each run makes its own (`unique`), they become `<topic>`...;
- `TopicId`: a random UUID per topic on either broker;
- `Leader`/`Replicas`/`Isr` node ids and the coordinator's host, port and id: the bundled
  broker is node 0 on its own port, the Apache Kafka fixture node 1 on another;
- `min.insync.replicas=1` in `kafka-topics --describe`'s `Configs`: the fixture sets it in
  its `server.properties`, so Kafka lists it as a non-default (static broker) config;
- error messages: each broker words them itself (the bundled one names values in
  backticks); the exception class the tool reports, which is the error code, is compared.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.integration.oracle.differential import on_both, unique
from tests.support.kafka_tools import ToolResult, columns, run, table

pytestmark = pytest.mark.kafka

_EXCEPTION = re.compile(r"org\.apache\.kafka\.common\.errors\.(\w+)|java\.lang\.(\w+Exception)")


def _outcome(result: ToolResult) -> tuple[int, str | None]:
    """(exit code, the Kafka exception class the tool reported, if any)."""
    found = _EXCEPTION.search(result.stdout + result.stderr)
    return result.code, (found.group(1) or found.group(2)) if found else None


def _ok(result: ToolResult) -> ToolResult:
    assert result.code == 0, result.explain()
    return result


def _names(text: str, names: dict[str, str]) -> str:
    for name, placeholder in names.items():
        text = text.replace(name, placeholder)
    return text


def _describe_topic(text: str, names: dict[str, str]) -> list[dict[str, str]]:
    rows = []
    for line in _names(text, names).splitlines():
        if not line.strip():
            continue
        row = columns(line)
        row.pop("TopicId", None)
        for key in ("Leader", "Replicas", "Isr"):
            if key in row:
                row[key] = "<node>"
        if "Configs" in row:
            kept = [c for c in row["Configs"].split(",") if c and c != "min.insync.replicas=1"]
            row["Configs"] = ",".join(kept)
        rows.append(row)
    return rows


def topics_scenario(bootstrap: str) -> dict[str, Any]:
    """kafka-topics: create with a config, describe, alter the partition count, list,
    create an existing topic, delete, describe a missing topic."""
    topic, other = unique("tools-topic"), unique("tools-other")
    names = {topic: "<topic>", other: "<other>"}
    out: dict[str, Any] = {}
    created = _ok(
        run(
            "kafka-topics",
            [
                "--create",
                "--topic",
                topic,
                "--partitions",
                "2",
                "--replication-factor",
                "1",
                "--config",
                "retention.ms=100000",
                "--config",
                "cleanup.policy=compact",
            ],
            bootstrap,
        )
    )
    out["create"] = _names(created.stdout, names)
    _ok(run("kafka-topics", ["--create", "--topic", other, "--partitions", "1"], bootstrap))
    out["describe"] = _describe_topic(
        _ok(run("kafka-topics", ["--describe", "--topic", topic], bootstrap)).stdout, names
    )
    _ok(run("kafka-topics", ["--alter", "--topic", topic, "--partitions", "3"], bootstrap))
    out["describe_altered"] = _describe_topic(
        _ok(run("kafka-topics", ["--describe", "--topic", topic], bootstrap)).stdout, names
    )
    out["shrink"] = _outcome(
        run("kafka-topics", ["--alter", "--topic", topic, "--partitions", "1"], bootstrap)
    )
    # Other tests share the brokers: only this scenario's topics are compared.
    listed = _ok(run("kafka-topics", ["--list", "--exclude-internal"], bootstrap)).lines
    out["list"] = sorted(names[t] for t in listed if t in names)
    out["create_existing"] = _outcome(
        run("kafka-topics", ["--create", "--topic", other, "--partitions", "1"], bootstrap)
    )
    _ok(run("kafka-topics", ["--delete", "--topic", other], bootstrap))
    listed = _ok(run("kafka-topics", ["--list", "--exclude-internal"], bootstrap)).lines
    out["list_after_delete"] = sorted(names[t] for t in listed if t in names)
    out["describe_deleted"] = _outcome(
        run("kafka-topics", ["--describe", "--topic", other], bootstrap)
    )
    return out


def test_kafka_topics(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, topics_scenario)
    assert on_kafka["create"] == "Created topic <topic>.\n"
    assert [r["PartitionCount"] for r in on_kafka["describe_altered"][:1]] == ["3"]
    assert on_kafka["list"] == ["<other>", "<topic>"]
    assert on_kafka["list_after_delete"] == ["<topic>"]
    assert on_kafka["create_existing"] == (1, "TopicExistsException")
    assert on_bundled == on_kafka
