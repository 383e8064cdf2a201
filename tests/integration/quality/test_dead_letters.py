"""Dead letters survive SIGKILL between the quarantine commit and their Kafka commit.

`warehouse run --once` (its own Spark) of a table with `quarantine: {kafka: {topic}}`
is killed with the dead letters' transaction open (the batch's table and quarantine
committed, the records produced, not committed), then runs again: the replayed batch
finds its commits, and the dead letters are sent after the killed run's transaction
was aborted. The dead-letter topic holds each quarantined record once, as produced.
(A kill right after the transaction commits is the publisher's, tested with published
views in tests/integration/cdc/test_publish_crash.py.) Real broker process, real
Spark, real Delta.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.integration.projects import new_topic, start_project
from tests.integration.quality.dead_letters import assert_dead_letters
from tests.support.broker_clients import read_topic

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}, "v": {"type": "string"}}}


def _run(project: Path, crash: str | None) -> int:
    env = dict(os.environ)
    env.pop("WAREHOUSE_CRASH_POINT", None)
    if crash:
        env["WAREHOUSE_CRASH_POINT"] = crash
    proc = subprocess.run(
        [sys.executable, "-m", "warehouse", "--project", str(project), "run", "--once"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr[-3000:]
    return proc.returncode


def test_dead_letters_exactly_once_across_kills(
    broker, unique, tmp_path: Path, native_jars
) -> None:
    # One engine: what is killed here runs after the batch's commits, the same code on
    # both; the quarantine each engine commits is sent in test_arrow_checks. The native
    # one, whose runs start faster here (37-51 s for both lives, 84 s on the Python one).
    bs = broker.bootstrap
    topic, dlq = unique("orders"), unique("dlq.orders")
    records = [(f"k{i}", json.dumps({"id": i, "v": f"v{i}"})) for i in range(20)]
    records[3] = ("k3", json.dumps({"id": None, "v": "no id"}))
    records[8] = (None, json.dumps({"v": "no id, no key"}))
    records[13] = ("k13", "not json")
    new_topic(bs, topic, records)
    root = tmp_path / "proj"
    ods = start_project(
        root, bs, "ods", delta="native", kafka="native", schemas={"o.json": json.dumps(SCHEMA)}
    )
    (ods / "orders.yml").write_text(
        "table: ods_orders\n"
        f"source: {{kafka: {{topic: {topic}, format: json, schema: o}}}}\n"
        f"quarantine: {{kafka: {{topic: {dlq}}}}}\n"
        "expectations:\n"
        "  - expect_column_values_to_not_be_null: {column: id}\n"
        "    on_violation: quarantine\n"
    )
    quarantine = root / ".warehouse" / "tables" / "ods_orders__quarantine"

    assert _run(root, "publish_before_commit") == -signal.SIGKILL
    assert (quarantine / "_delta_log").is_dir()  # committed before the kill
    assert read_topic(bs, dlq) == []
    assert len(read_topic(bs, dlq, isolation="read_uncommitted")) == 3  # produced, open

    assert _run(root, None) == 0  # the batch replayed: its commits found, letters sent

    assert assert_dead_letters(bs, dlq, topic, quarantine, "ods_orders") == 3
    # the killed run's records are in the log, aborted: read_committed skips them
    assert len(read_topic(bs, dlq, isolation="read_uncommitted")) == 3 + 3
