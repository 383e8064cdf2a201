"""End to end through the command line, as a user runs it: `python -m warehouse ...` in a
subprocess (its own SparkSession), a real broker process, real Delta tables.

`run --layer all --once` moves the records through ODS and DWD; `status --json`
reports them; a continuous `run` picks up new records, refuses its tables to a second
`run`, and exits 0 on SIGTERM, stopped between batches; `optimize` and `vacuum` then compact the table's files and
delete the replaced ones, on the engine that wrote it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from streams.delta import table_info
from streams.kafka.admin import produce
from tests.integration.runtime.helpers import at, order, orders_project, rows, wait_for
from tests.integration.runtime.runs import REPO, java_children, stop, warehouse_run

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

DWD_COLS = ["order_id", "user_id", "amount", "event_time"]


def cli(project: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warehouse", "--project", str(project), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )


def test_run_once_status_then_continuous_run_stopped_by_sigterm(
    broker, unique, tmp_path: Path, engine: str
) -> None:
    topic, proj = orders_project(
        tmp_path / "proj", broker.bootstrap, unique, partitions=2, engine=engine
    )
    root = proj / ".warehouse"
    ods, dwd = root / "tables" / "ods_orders", root / "tables" / "dwd_orders"
    produce(
        broker.bootstrap,
        topic,
        [
            ("a", order("o1", "u1", 10.5, 0)),
            ("b", order("o2", "u2", 20.0, 1)),
            ("a", order("o1", "u1", 10.5, 0)),
            ("x", "{not json"),
        ],
    )

    once = cli(proj, "run", "--layer", "all", "--once")
    assert once.returncode == 0, once.stderr[-3000:]
    assert "ods_orders [ods]: 1 batch(es), 4 rows in, 3 written, 1 quarantined" in once.stdout
    assert rows(ods, ["order_id", "amount", "event_time"]) == [
        ("o1", 10.5, at(0)),
        ("o1", 10.5, at(0)),
        ("o2", 20.0, at(1)),
    ]
    assert rows(dwd, DWD_COLS) == [
        ("o1", "u1", Decimal("10.50"), at(0)),
        ("o2", "u2", Decimal("20.00"), at(1)),
    ]

    st = cli(proj, "status", "--json", timeout=120)
    assert st.returncode == 0, st.stderr
    tables = {t["table"]: t for t in json.loads(st.stdout)["tables"]}
    o = tables["ods_orders"]
    assert (o["layer"], o["path"], o["rows"], o["quarantine_rows"]) == ("ods", str(ods), 3, 1)
    assert o["last_batch"] == 0 and o["version"] == 0
    committed = {p: int(n) for p, n in o["committed_offsets"][topic].items()}
    assert sum(committed.values()) == 4
    assert o["lag"] == {"total": 0, "topics": {topic: 0}}
    assert tables["dwd_orders"]["rows"] == 2

    # Continuous: new records arrive while it runs; SIGTERM stops it between batches, also
    # when sent to its JVM as well.
    with warehouse_run(proj, tmp_path / "run.log") as proc:
        produce(
            broker.bootstrap,
            topic,
            [("c", order("o3", "u3", 30.0, 2)), ("b", order("o2", "u2", 20.0, 1))],
        )
        wait_for(
            lambda: (dwd / "_delta_log").is_dir() and ("o3",) in rows(dwd, ["order_id"]),
            timeout=400,
            what="o3 in dwd_orders",
            log=tmp_path / "run.log",
            proc=proc,
        )
        # A second process asking for a table the run holds is refused before its
        # Spark starts, naming the run; the run goes on.
        again = cli(proj, "run", "--table", "dwd_orders", "--once", timeout=120)
        assert again.returncode == 2, again.stderr[-3000:]
        assert "error: Table `dwd_orders` (" in again.stderr
        assert f"in use by another process: pid {proc.pid} on " in again.stderr
        assert "`warehouse --project " in again.stderr and ", run since " in again.stderr
        assert proc.poll() is None
        # Its Spark JVM ignores a SIGTERM of its own and goes on running batches; it ends
        # with the run.
        jvms = java_children(proc)
        assert len(jvms) == 1, jvms
        os.kill(jvms[0], signal.SIGTERM)
        produce(broker.bootstrap, topic, [("d", order("o4", "u4", 40.0, 3))])
        wait_for(
            lambda: ("o4",) in rows(dwd, ["order_id"]),
            timeout=400,
            what="o4 in dwd_orders after the JVM's SIGTERM",
            log=tmp_path / "run.log",
            proc=proc,
        )
        # Stopped as a service manager stops it: SIGTERM to the run and its JVM at once.
        code = stop(proc, group=True)
    output = (tmp_path / "run.log").read_text()
    assert code == 0, output[-3000:]
    assert "stopped: ods_orders [ods]" in output and "stopped: dwd_orders [dwd]" in output
    assert rows(dwd, DWD_COLS) == [
        ("o1", "u1", Decimal("10.50"), at(0)),
        ("o2", "u2", Decimal("20.00"), at(1)),
        ("o3", "u3", Decimal("30.00"), at(2)),
        ("o4", "u4", Decimal("40.00"), at(3)),
    ]
    assert len(rows(ods, ["_offset"])) == 6
    # The JVM ends with the run: its gateway exits when the run's pipe to it closes.
    deadline = time.monotonic() + 120
    while Path(f"/proc/{jvms[0]}").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not Path(f"/proc/{jvms[0]}").exists(), f"the run's JVM {jvms[0]} outlived it"
    # Stopped at a batch boundary: the table's last batch is committed in the checkpoint.
    for name in ("ods_orders", "dwd_orders"):
        last = table_info(root / "tables" / name)["last_commit"]["batch_id"]
        assert (root / "checkpoints" / name / "commits" / str(last)).is_file()

    # Maintenance on the engine that wrote the table: its batches' files compacted into
    # one, then the replaced files vacuumed; the rows stay.
    files = table_info(ods)["files"]
    assert files > 1
    optimized = cli(proj, "optimize", "--table", "ods_orders")
    assert optimized.returncode == 0, optimized.stderr[-3000:]
    assert optimized.stdout.splitlines() == [
        f"ods_orders: optimize compacted {files} file(s) into 1 in {ods} ({engine})"
    ]
    # Below Delta's minimum retention: forced (tests/integration/runtime/test_vacuum.py
    # has the refusals).
    vacuumed = cli(proj, "vacuum", "--table", "ods_orders", "--retention-hours", "0", "--force")
    assert vacuumed.returncode == 0, vacuumed.stderr[-3000:]
    # (delta-spark prints its own "Deleted N files and directories ..." line first.)
    assert vacuumed.stdout.splitlines()[-1] == (
        f"ods_orders: vacuum removed {files} file(s) from {ods} ({engine})"
    )
    assert len(rows(ods, ["_offset"])) == 6 and table_info(ods)["files"] == 1
