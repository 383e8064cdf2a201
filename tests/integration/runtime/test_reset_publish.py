"""`warehouse reset` of a published table, through the command line: the table built
again publishes from its start and tombstones the keys it no longer has, so the
compacted topic read back is the new table. Real broker process, `python -m warehouse`
subprocesses (their own Spark), real Delta tables; each engine.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from streams.cdc import latest_values
from streams.kafka import ensure_topic
from streams.kafka.admin import produce
from tests.integration.runtime.test_cli_e2e import cli

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

USERS = {
    "type": "object",
    "properties": {"user_id": {"type": "string"}, "city": {"type": "string"}},
    "required": ["user_id"],
}


def _project(root: Path, bootstrap: str, source: str, published: str, engine: str) -> Path:
    (root / "conf").mkdir(parents=True)
    (root / "schemas").mkdir()
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "conf" / "local.yml").write_text(
        f"warehouse_root: {root / '.warehouse'}\n"
        f'kafka: {{bootstrap: "{bootstrap}"}}\n'
        f"engines: {{kafka: {engine}, delta: {engine}}}\n"
        'spark: {master: "local[2]", conf: {spark.sql.shuffle.partitions: "2"}}\n'
    )
    (root / "schemas" / "users.json").write_text(json.dumps(USERS))
    (root / "layers" / "ods" / "users.yml").write_text(
        "table: ods_users\n"
        f"source: {{kafka: {{topic: {source}, format: upsert-json, schema: users}}}}\n"
        "sink: {mode: upsert, keys: [user_id]}\n"
        f"publish: {{kafka: {{topic: {published}}}}}\n"
    )
    return root


def _users(bootstrap: str, topic: str, ids: list[int]) -> None:
    records = [
        (json.dumps({"user_id": f"u{i}"}), json.dumps({"user_id": f"u{i}", "city": f"c{i}"}))
        for i in ids
    ]
    produce(bootstrap, topic, records)


def _recreate(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    ensure_topic(bootstrap, topic)


def _published(bootstrap: str, topic: str) -> dict[str, str]:
    return {
        json.loads(k)["user_id"]: json.loads(v)["city"]
        for k, v in latest_values(bootstrap, topic).items()
    }


def test_a_reset_table_built_again_leaves_only_its_keys_in_the_published_topic(
    broker, unique, tmp_path: Path, engine: str
) -> None:
    source, published = unique("users"), unique("mv.users")
    ensure_topic(broker.bootstrap, source)
    _users(broker.bootstrap, source, [1, 2, 3])
    proj = _project(tmp_path / "proj", broker.bootstrap, source, published, engine)
    run = cli(proj, "run", "--once")
    assert run.returncode == 0, run.stderr[-3000:]
    assert _published(broker.bootstrap, published) == {"u1": "c1", "u2": "c2", "u3": "c3"}

    # the source lost its records (created again): the table built again has u1 and u4
    _recreate(broker.bootstrap, source)
    _users(broker.bootstrap, source, [1, 4])
    reset = cli(proj, "reset", "--table", "ods_users", "--yes")
    assert reset.returncode == 0, reset.stderr[-3000:]
    run = cli(proj, "run", "--once")
    assert run.returncode == 0, run.stderr[-3000:]
    assert _published(broker.bootstrap, published) == {"u1": "c1", "u4": "c4"}
