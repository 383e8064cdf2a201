"""Publishing survives SIGKILL inside and right after its Kafka transaction.

A child process runs `publish_changes` and kills itself (SIGKILL) at a crash point:
`publish_before_commit` (records produced, transaction open) or
`publish_after_commit` (committed, before returning). Whatever the kills, a
`read_committed` consumer sees every change of every table version exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from streams.cdc import read_ktable
from streams.cdc.changelog import encode_json
from tests.conftest import REPO_ROOT
from tests.integration.cdc import tables
from tests.integration.cdc.helpers import (
    decoded,
    expected_changes,
    read_records,
    snapshot,
    sort_changes,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _child(path: str, bootstrap: str, topic: str, table: str, crash: str | None) -> int:
    env = dict(os.environ)
    env.pop("WAREHOUSE_CRASH_POINT", None)
    if crash:
        env["WAREHOUSE_CRASH_POINT"] = crash
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration.cdc.publish_child",
            path,
            bootstrap,
            topic,
            table,
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr[-3000:]
    return proc.returncode


def test_sigkill_during_and_after_the_transaction(broker, tmp_path: Path, unique) -> None:
    path, topic, name = str(tmp_path / "dim"), unique("mv.dim"), unique("dim_users")
    bs = broker.bootstrap
    tables.create(path)
    tables.upsert(path, [tables.row(i, f"u{i}", i) for i in range(1, 21)])

    # killed with the transaction open: its records are in the log, but not committed
    assert _child(path, bs, topic, name, "publish_before_commit") == -signal.SIGKILL
    assert len(read_records(bs, topic, isolation="read_uncommitted")) == 20
    # the next publisher fences the dead one (its transaction is aborted), commits, dies
    assert _child(path, bs, topic, name, "publish_after_commit") == -signal.SIGKILL
    assert len(read_records(bs, topic)) == 20

    tables.upsert(path, [tables.row(i, f"v{i}", 100 + i) for i in range(5, 15)])
    tables.delete(path, [1, 2, 3])
    last = tables.upsert(path, [tables.row(2, "back", 500), tables.row(30, "new", 30)])
    assert _child(path, bs, topic, name, "publish_before_commit") == -signal.SIGKILL
    assert _child(path, bs, topic, name, "publish_after_commit") == -signal.SIGKILL
    # a replay after the committed kill finds nothing left to publish
    assert _child(path, bs, topic, name, None) == 0

    published = decoded(read_records(bs, topic))
    expected = expected_changes(path, 0, last, tables.KEYS)
    assert len(expected) == 20 + 10 + 3 + 2
    assert sort_changes(published) == sort_changes(expected)
    # and the aborted attempts really wrote records that read_committed skips
    assert len(read_records(bs, topic, isolation="read_uncommitted")) > len(published)

    got = read_ktable(None, bs, topic).to_pylist()
    assert {encode_json({"user_id": r["user_id"]}).decode(): r for r in got} == snapshot(
        path, last, tables.KEYS
    )
