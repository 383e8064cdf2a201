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
- `LatestCoordinatorEpoch` in `kafka-transactions describe-producers`: the bundled broker's
  producer state does not keep the coordinator epoch of a producer's latest marker (one
  coordinator writes them all), so it reports -1 where Kafka reports its epoch once a
  marker was written;
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
    """kafka-topics: create with configs, describe, alter the partition count, list,
    create an existing topic, delete, describe the deleted topic."""
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
    # Other tests share the brokers: only this scenario's topics are compared.
    listed = _ok(run("kafka-topics", ["--list", "--exclude-internal"], bootstrap)).lines
    out["list"] = sorted(names[t] for t in listed if t in names)
    out["create_existing"] = _outcome(
        run("kafka-topics", ["--create", "--topic", other, "--partitions", "1"], bootstrap)
    )
    _ok(run("kafka-topics", ["--delete", "--topic", other], bootstrap))
    out["describe_deleted"] = _outcome(
        run("kafka-topics", ["--describe", "--topic", other], bootstrap)
    )
    return out


def test_kafka_topics(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, topics_scenario)
    assert on_kafka["create"] == "Created topic <topic>.\n"
    assert [r["PartitionCount"] for r in on_kafka["describe_altered"][:1]] == ["3"]
    assert on_kafka["list"] == ["<other>", "<topic>"]
    assert on_kafka["describe_deleted"] == (1, "IllegalArgumentException")
    assert on_kafka["create_existing"] == (1, "TopicExistsException")
    assert on_bundled == on_kafka


def configs_scenario(bootstrap: str) -> dict[str, Any]:
    """kafka-configs on a topic: add and delete configs, describing the overrides (with
    Kafka's synonyms) after each; a bad value."""
    topic = unique("tools-configs")
    names = {topic: "<topic>"}
    out: dict[str, Any] = {}

    def configs(*args: str) -> ToolResult:
        return run(
            "kafka-configs", ["--entity-type", "topics", "--entity-name", topic, *args], bootstrap
        )

    _ok(
        run(
            "kafka-topics",
            ["--create", "--topic", topic, "--partitions", "1", "--config", "retention.ms=100000"],
            bootstrap,
        )
    )
    out["add"] = _names(
        _ok(
            configs("--alter", "--add-config", "cleanup.policy=compact,max.message.bytes=2000")
        ).stdout,
        names,
    )
    out["describe_added"] = _names(_ok(configs("--describe")).stdout, names)
    out["delete"] = _names(_ok(configs("--alter", "--delete-config", "retention.ms")).stdout, names)
    out["describe_deleted"] = _names(_ok(configs("--describe")).stdout, names)
    out["bad_value"] = _outcome(configs("--alter", "--add-config", "cleanup.policy=bogus"))
    return out


def test_kafka_configs(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, configs_scenario)
    assert "DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact" in on_kafka["describe_added"]
    assert "retention.ms" not in on_kafka["describe_deleted"]
    assert on_kafka["bad_value"] == (1, "InvalidConfigurationException")
    assert on_bundled == on_kafka


def _records(result: ToolResult) -> list[tuple[str, ...]]:
    """`Partition:1\tOffset:0\tkey\tvalue` lines in partition and offset order: the
    console consumer interleaves partitions as their fetches return."""
    rows = [tuple(line.split("\t")) for line in _ok(result).lines if line.startswith("Partition:")]
    return sorted(rows, key=lambda r: (int(r[0].split(":")[1]), int(r[1].split(":")[1])))


def console_and_groups_scenario(bootstrap: str) -> dict[str, Any]:
    """kafka-console-producer with keys into two partitions, kafka-console-consumer from the
    beginning in a group, then kafka-consumer-groups (list, describe, reset to earliest,
    describe again) and kafka-get-offsets (latest, earliest)."""
    topic, group = unique("tools-console"), unique("tools-group")
    names = {topic: "<topic>", group: "<group>"}
    out: dict[str, Any] = {}
    _ok(run("kafka-topics", ["--create", "--topic", topic, "--partitions", "2"], bootstrap))
    lines = "".join(f"key-{i % 3}:value-{i}\n" for i in range(6))
    _ok(
        run(
            "kafka-console-producer",
            [
                "--topic",
                topic,
                "--reader-property",
                "parse.key=true",
                "--reader-property",
                "key.separator=:",
            ],
            bootstrap,
            stdin=lines,
        )
    )
    consumed = run(
        "kafka-console-consumer",
        [
            "--topic",
            topic,
            "--group",
            group,
            "--from-beginning",
            "--max-messages",
            "6",
            "--timeout-ms",
            "30000",
            "--formatter-property",
            "print.key=true",
            "--formatter-property",
            "print.partition=true",
            "--formatter-property",
            "print.offset=true",
        ],
        bootstrap,
    )
    out["consumed"] = _records(consumed)
    listed = _ok(run("kafka-consumer-groups", ["--list"], bootstrap)).lines
    out["groups"] = [names[g] for g in listed if g in names]

    def describe(*extra: str) -> list[dict[str, str]]:
        text = _ok(
            run("kafka-consumer-groups", ["--describe", "--group", group, *extra], bootstrap)
        ).stdout
        rows = table(_names(text, names))
        for row in rows:
            if (
                "COORDINATOR" in row
            ):  # `COORDINATOR (ID)` splits into two columns of host:port and (id)
                row["COORDINATOR"] = row["(ID)"] = "<node>"
        return sorted(rows, key=lambda r: r.get("PARTITION", ""))

    out["describe"] = describe()
    out["state"] = describe("--state")
    reset = _ok(
        run(
            "kafka-consumer-groups",
            ["--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic],
            bootstrap,
        )
    )
    out["reset"] = sorted(table(_names(reset.stdout, names)), key=lambda r: r["PARTITION"])
    out["describe_reset"] = describe()
    out["offsets"] = {
        when: _ok(run("kafka-get-offsets", ["--topic", topic, "--time", when], bootstrap)).lines
        # Not -3 (max timestamp): the console producer stamps records with the wall
        # clock, so which record holds the largest time differs from run to run.
        for when in ("-1", "-2")
    }
    out["offsets"] = {k: [_names(x, names) for x in v] for k, v in out["offsets"].items()}
    return out


def test_console_tools_and_consumer_groups(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, console_and_groups_scenario)
    assert len(on_kafka["consumed"]) == 6
    assert on_kafka["groups"] == ["<group>"]
    assert [r["CURRENT-OFFSET"] for r in on_kafka["describe_reset"]] == ["0", "0"]
    assert on_bundled == on_kafka


def _txn_rows(result: ToolResult, names: dict[str, str]) -> list[dict[str, str]]:
    """kafka-transactions' tab-separated table; coordinator and producer ids (other tests
    share the brokers and take producer ids) and wall-clock times become placeholders,
    rows and partitions are sorted (Kafka lists them in its hash maps' order)."""
    lines = [line.split("\t") for line in _ok(result).stdout.splitlines() if line.strip()]
    header, *body = [[cell.strip() for cell in line] for line in lines]
    rows = []
    for cells in body:
        row = dict(zip(header, cells, strict=False))
        row.pop("", None)
        for key in ("Coordinator", "CoordinatorId", "ProducerId"):
            if key in row:
                row[key] = "<id>"
        for key in ("CurrentTransactionStartTimeMs", "TransactionDurationMs"):
            if row.get(key, "None") != "None":
                row[key] = "<time>"
        if row.get("TopicPartitions"):  # a hash set's order on Kafka
            row["TopicPartitions"] = ",".join(sorted(row["TopicPartitions"].split(",")))
        rows.append({k: _names(v, names) for k, v in row.items()})
    return sorted(rows, key=lambda r: r.get("TransactionalId", ""))


def transactions_scenario(bootstrap: str) -> dict[str, Any]:
    """kafka-transactions list and describe: one transaction left open, one committed,
    an unknown transactional id."""
    from confluent_kafka import Producer

    topic = unique("tools-txn")
    open_id, done_id = unique("tools-open"), unique("tools-done")
    names = {topic: "<topic>", open_id: "<open>", done_id: "<done>"}
    _ok(run("kafka-topics", ["--create", "--topic", topic, "--partitions", "2"], bootstrap))
    producers = []
    for tid, commit in ((open_id, False), (done_id, True)):
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"v", partition=0)
        producer.produce(topic, b"v", partition=1)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        producers.append(producer)
    listed = _txn_rows(run("kafka-transactions", ["list"], bootstrap), names)
    out: dict[str, Any] = {"list": [r for r in listed if r["TransactionalId"] in names.values()]}
    for tid in (open_id, done_id):
        out[names[tid]] = _txn_rows(
            run("kafka-transactions", ["describe", "--transactional-id", tid], bootstrap), names
        )
    out["unknown"] = run(
        "kafka-transactions", ["describe", "--transactional-id", unique("tools-none")], bootstrap
    ).code
    producers[0].abort_transaction(30)
    return out


def test_kafka_transactions(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, transactions_scenario)
    assert [r["TransactionState"] for r in on_kafka["list"]] == ["CompleteCommit", "Ongoing"]
    assert on_kafka["<open>"][0]["TopicPartitions"] == "<topic>-0,<topic>-1"
    assert on_kafka["unknown"] == 1
    assert on_bundled == on_kafka


def _ends(bootstrap: str, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0."""
    from confluent_kafka import Consumer, TopicPartition

    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": isolation}
        )
        try:
            ends.append(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
        finally:
            c.close()
    return ends[0], ends[1]


def _producers(result: ToolResult) -> list[dict[str, str]]:
    """`describe-producers` rows; the producer id and its last timestamp vary by run, and
    the bundled broker always reports -1 as `LatestCoordinatorEpoch` (see the module
    docstring)."""
    rows = []
    for row in table(_ok(result).stdout):
        row.pop("", None)
        row["ProducerId"], row["LastTimestamp"] = "<id>", "<time>"
        row["LatestCoordinatorEpoch"] = "<epoch>"
        rows.append(row)
    return rows


def abort_scenario(bootstrap: str) -> dict[str, Any]:
    """kafka-transactions describe-producers and abort: an administrator ends a producer's
    open transaction at its start offset; read_committed readers go past it, and the
    producer's own abort afterwards is answered as on Kafka."""
    from confluent_kafka import Producer

    topic = unique("tools-abort")
    names = {topic: "<topic>"}
    _ok(run("kafka-topics", ["--create", "--topic", topic, "--partitions", "1"], bootstrap))
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tools-tid")})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"a", partition=0)
    producer.produce(topic, b"b", partition=0)
    producer.flush(30)
    where = ["--topic", topic, "--partition", "0"]
    out: dict[str, Any] = {"open": _ends(bootstrap, topic)}
    out["producers"] = _producers(
        run("kafka-transactions", ["describe-producers", *where], bootstrap)
    )
    aborted = run("kafka-transactions", ["abort", *where, "--start-offset", "0"], bootstrap)
    out["abort"] = (aborted.code, _names(aborted.stdout, names))
    out["aborted"] = _ends(bootstrap, topic)
    out["after"] = _producers(run("kafka-transactions", ["describe-producers", *where], bootstrap))
    wrong = run("kafka-transactions", ["abort", *where, "--start-offset", "1"], bootstrap)
    out["no such transaction"] = _outcome(wrong)
    producer.abort_transaction(30)
    return out


def test_kafka_transactions_abort(brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(brokers, abort_scenario)
    assert on_kafka["open"] == (0, 2)
    assert on_kafka["producers"][0]["CurrentTransactionStartOffset"] == "0"
    assert on_kafka["abort"][0] == 0 and on_kafka["aborted"] == (3, 3)
    assert on_bundled == on_kafka
