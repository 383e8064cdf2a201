"""A table's checkpoint lost or replaced, through the command line as a user meets it: a
run over a table that already holds batches never reads its input again from the start.

Real broker process, `python -m warehouse` subprocesses (their own Spark), real Delta
tables; each engine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streams.kafka.admin import produce
from tests.integration.runtime.helpers import order, orders_project, rows
from tests.integration.runtime.runs import REPO
from tests.integration.runtime.test_cli_e2e import cli

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

COORDINATES = ["_partition", "_offset"]
QUARANTINED = ["source_partition", "source_offset"]


def killed_run(project: Path, point: str) -> subprocess.CompletedProcess[str]:
    """`warehouse run --table ods_orders --once` that SIGKILLs itself at the crash point."""
    return killed(project, point, "run", "--table", "ods_orders", "--once")


def killed(project: Path, point: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`warehouse ARGS...` that SIGKILLs itself at the crash point `point`."""
    return _warehouse(project, args, {"WAREHOUSE_CRASH_POINT": point}, timeout=600)


def without_java(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`warehouse ARGS...` where no Java can start: what it answers, it answered before
    starting Spark."""
    return _warehouse(project, args, {"JAVA_HOME": str(project / "no-java")}, timeout=120)


def _warehouse(
    project: Path, args: tuple[str, ...], env: dict[str, str], *, timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warehouse", "--project", str(project), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        env={**os.environ, **env},
    )


def batch(first: int, good: int, bad: int) -> list[tuple[str, str]]:
    """`good` orders and `bad` records the table quarantines (a null `order_id`, or not
    JSON), from order number `first` on."""
    out = [(f"k{i}", order(f"o{i}", "u1", 1.0, 0)) for i in range(first, first + good)]
    for i in range(bad):
        out.append((f"b{i}", order(None, "u1", 1.0, 0) if i % 2 else "{not json"))
    return out


def test_run_over_a_table_with_a_lost_checkpoint_refuses_then_recover_goes_on(
    broker, unique, tmp_path: Path, engine: str
) -> None:
    topic, proj = orders_project(
        tmp_path / "proj", broker.bootstrap, unique, partitions=2, engine=engine
    )
    root = proj / ".warehouse"
    ods, dwd = root / "tables" / "ods_orders", root / "tables" / "dwd_orders"
    produce(broker.bootstrap, topic, [(f"k{i}", order(f"o{i}", "u1", 1.0, 0)) for i in range(1000)])
    first = cli(proj, "run", "--layer", "all", "--once")
    assert first.returncode == 0, first.stderr[-3000:]
    assert len(rows(ods, COORDINATES)) == 1000 and len(rows(dwd, ["order_id"])) == 1000

    for name in ("ods_orders", "dwd_orders"):
        shutil.rmtree(root / "checkpoints" / name)
    # Refused before Spark starts: the run is answered where no Java could start.
    again = without_java(proj, "run", "--layer", "all", "--once")
    assert again.returncode == 2, again.stdout[-2000:] + again.stderr[-3000:]
    assert "`warehouse recover --table ods_orders`" in again.stderr
    assert "`warehouse reset --table dwd_orders --yes`" in again.stderr
    assert len(rows(ods, COORDINATES)) == 1000 and len(rows(dwd, ["order_id"])) == 1000

    recovered = cli(proj, "recover", "--table", "ods_orders")
    assert recovered.returncode == 0, recovered.stderr[-3000:]
    produce(broker.bootstrap, topic, [(f"n{i}", order(f"n{i}", "u2", 2.0, 1)) for i in range(10)])
    resumed = cli(proj, "run", "--table", "ods_orders", "--once")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    landed = rows(ods, COORDINATES)
    assert len(landed) == 1010 and len(set(landed)) == 1010


def test_recover_after_a_crash_between_the_table_and_its_quarantine_loses_neither(
    broker, unique, tmp_path: Path, engine: str
) -> None:
    """A batch's table commit comes before its quarantine commit. Killed in between, then
    recovered: the rebuilt checkpoint replays the batch, whose table commit is kept and
    whose quarantine rows are written once."""
    topic, proj = orders_project(
        tmp_path / "proj", broker.bootstrap, unique, partitions=2, engine=engine, dwd=False
    )
    root = proj / ".warehouse"
    ods, quarantine = root / "tables" / "ods_orders", root / "tables" / "ods_orders__quarantine"
    produce(broker.bootstrap, topic, batch(0, 20, 2))
    first = cli(proj, "run", "--table", "ods_orders", "--once")
    assert first.returncode == 0, first.stderr[-3000:]
    assert (len(rows(ods, COORDINATES)), len(rows(quarantine, QUARANTINED))) == (20, 2)

    produce(broker.bootstrap, topic, batch(20, 20, 3))
    crashed = killed_run(proj, "after_commit")
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert (len(rows(ods, COORDINATES)), len(rows(quarantine, QUARANTINED))) == (40, 2)

    recovered = cli(proj, "recover", "--table", "ods_orders")
    assert recovered.returncode == 0, recovered.stderr[-3000:]
    resumed = cli(proj, "run", "--table", "ods_orders", "--once")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    landed, held = rows(ods, COORDINATES), rows(quarantine, QUARANTINED)
    assert len(landed) == len(set(landed)) == 40
    assert len(held) == len(set(held)) == 5
    assert "replays its newest batch (1, from" in recovered.stdout


def test_a_reset_cut_short_never_leaves_an_old_checkpoint_over_an_empty_table(
    broker, unique, tmp_path: Path
) -> None:
    """`reset` killed after its first removal: the next run either rebuilds the whole
    table or is refused, naming `reset`; it never goes on from the old checkpoint's
    position over a table that lost its rows. A second reset finishes the first."""
    topic, proj = orders_project(
        tmp_path / "proj", broker.bootstrap, unique, partitions=2, engine="python", dwd=False
    )
    ods = proj / ".warehouse" / "tables" / "ods_orders"
    produce(broker.bootstrap, topic, batch(0, 30, 0))
    first = cli(proj, "run", "--table", "ods_orders", "--once")
    assert first.returncode == 0, first.stderr[-3000:]

    cut = killed(proj, "reset", "reset", "--table", "ods_orders", "--yes")
    assert cut.returncode == -9, cut.stdout + cut.stderr[-3000:]
    after = without_java(proj, "run", "--table", "ods_orders", "--once")
    assert after.returncode == 2, after.stdout + after.stderr[-3000:]
    assert "`warehouse reset --table ods_orders --yes`" in after.stderr
    assert len(rows(ods, COORDINATES)) == 30

    again = cli(proj, "reset", "--table", "ods_orders", "--yes")
    assert again.returncode == 0, again.stderr[-3000:]
    rebuilt = cli(proj, "run", "--table", "ods_orders", "--once")
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    landed = rows(ods, COORDINATES)
    assert len(landed) == len(set(landed)) == 30
