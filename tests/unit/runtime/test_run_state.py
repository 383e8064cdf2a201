"""How a reader judges a run's state record (`warehouse.runtime.run_state`): no Spark."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.runtime.run_state import STALE_SECONDS, RunStates, read_states
from warehouse.runtime.writer import BatchStats


def project(tmp_path: Path) -> Project:
    return Project.load(
        write_project(tmp_path / "proj", topic="t", bootstrap="127.0.0.1:1"), environ={}
    )


def test_records_follow_a_table_from_start_to_stop(tmp_path: Path) -> None:
    p = project(tmp_path)
    now = [1_000_000.0]
    states = RunStates(p, mode="continuous", clock=lambda: now[0])
    stats = BatchStats()
    states.started("ods_orders")
    assert read_states(p, ["ods_orders"], now=now[0])["ods_orders"]["state"] == "running"
    stats.rows_in, stats.rows_written, stats.quarantined = 5, 4, 1
    now[0] += 1
    states.batch("ods_orders", 0, stats)
    stats.rows_in, stats.rows_written = 7, 6
    now[0] += 1
    states.batch("ods_orders", 1, stats)
    got = read_states(p, ["ods_orders", "dwd_orders"], now=now[0])
    record = got["ods_orders"]["record"]
    assert [(b["batch_id"], b["rows_in"], b["rows_written"], b["quarantined"])
            for b in record["batches"]] == [(0, 5, 4, 1), (1, 2, 2, 0)]  # fmt: skip
    assert got["dwd_orders"] == {"state": "never run", "record": None}
    # No batch for a while, its process alive and beating: idle.
    now[0] += 20
    states.beat()
    assert read_states(p, ["ods_orders"], now=now[0])["ods_orders"]["state"] == "idle"
    states.stopped("ods_orders")
    assert read_states(p, ["ods_orders"], now=now[0])["ods_orders"]["state"] == "stopped"


def test_a_batch_of_a_table_with_a_dead_letter_topic_records_the_dead_letters_sent(
    tmp_path: Path,
) -> None:
    p = project(tmp_path)
    states = RunStates(p, mode="once")
    states.started("ods_orders")
    states.batch("ods_orders", 0, BatchStats(rows_in=5, quarantined=2, dead_letters=2))
    states.batch("ods_orders", 1, BatchStats(rows_in=9, quarantined=3, dead_letters=3))
    record = read_states(p, ["ods_orders"])["ods_orders"]["record"]
    assert [b["dead_letters"] for b in record["batches"]] == [2, 1]
    states.started("ods_orders")
    states.batch("ods_orders", 0, BatchStats(rows_in=5, quarantined=2))
    first = read_states(p, ["ods_orders"])["ods_orders"]["record"]["batches"][0]
    assert "dead_letters" not in first


def test_a_failure_is_kept_with_its_reason(tmp_path: Path) -> None:
    p = project(tmp_path)
    states = RunStates(p, mode="once")
    states.started("ods_orders")
    states.failed("ods_orders", RuntimeError("column `x` not found"))
    states.stop_all()  # the run's end does not hide the failure
    got = read_states(p, ["ods_orders"])["ods_orders"]
    assert (got["state"], got["reason"]) == ("failed", "column `x` not found")


def test_a_running_record_of_a_dead_process_is_failed(tmp_path: Path) -> None:
    p = project(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    states = RunStates(p, mode="continuous")
    states.started("ods_orders")
    path = Path(p.root) / "runs" / "ods_orders.json"
    record = json.loads(path.read_text())
    assert (record["pid"], record["host"]) == (os.getpid(), socket.gethostname())
    path.write_text(json.dumps({**record, "pid": int(dead.stdout)}))
    got = read_states(p, ["ods_orders"])["ods_orders"]
    assert got["state"] == "failed" and "ended without stopping" in got["reason"]
    # On another host only the heartbeat tells.
    path.write_text(json.dumps({**record, "host": "elsewhere"}))
    now = record["heartbeat"]
    assert read_states(p, ["ods_orders"], now=now + 1)["ods_orders"]["state"] == "running"
    assert (
        read_states(p, ["ods_orders"], now=now + STALE_SECONDS + 1)["ods_orders"]["state"]
        == "failed"
    )


def test_a_batchs_record_is_written_whole_without_a_sync(tmp_path: Path, monkeypatch) -> None:
    """A record is written inside every batch: replaced whole (no temporary file left),
    and not synced, which would hold the batch for the disk (a record is stale after a
    machine's crash anyway). Other whole-file writes still sync."""
    p = project(tmp_path)
    synced: list[int] = []
    fsync = os.fsync

    def counting(fd: int) -> None:
        synced.append(fd)
        fsync(fd)

    monkeypatch.setattr(os, "fsync", counting)
    states = RunStates(p, mode="continuous")
    states.started("ods_orders")
    for batch_id in range(3):
        states.batch("ods_orders", batch_id, BatchStats(rows_in=batch_id))
    states.stopped("ods_orders")
    assert synced == []
    record = read_states(p, ["ods_orders"])["ods_orders"]["record"]
    assert [b["batch_id"] for b in record["batches"]] == [0, 1, 2]
    folder = Path(p.root) / "runs"
    assert sorted(f.name for f in folder.iterdir()) == ["ods_orders.json"]

    from streams.storage import write_text

    write_text(str(tmp_path / "durable.json"), "{}")
    assert len(synced) == 1
