"""`warehouse vacuum` deletes no file that is still needed: it takes the table's lock, and
refuses a retention below Delta's minimum or below what a table reading this one as a
stream (`read: changes`) still needs, unless `--force`.

Real broker process, the shared Spark session for the runs, `python -m warehouse vacuum`
subprocesses, real Delta tables and a real lock held by another process; each engine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from streams.delta import delta_engine, table_info
from streams.kafka.admin import produce
from tests.integration.runtime.helpers import order, orders_project, rows
from tests.integration.runtime.runs import REPO
from tests.integration.runtime.test_cli_e2e import cli
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

CHANGES = """\
table: dwd_changes
source: {table: ods_orders, read: changes}
transform: {sql: "SELECT order_id, amount FROM source"}
sink: {mode: append}
"""

HOLD = """\
import sys, time
from warehouse import Project
from warehouse.runtime.locks import holding
with holding(Project.load(sys.argv[1]), ["ods_orders"], doing="run"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_vacuum_holds_the_lock_and_keeps_what_delta_and_readers_need(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    topic, proj = orders_project(
        tmp_path / "proj", broker.bootstrap, unique, engine=engine, dwd=False
    )
    (proj / "layers" / "dwd").mkdir()
    (proj / "layers" / "dwd" / "changes.yml").write_text(CHANGES)
    project = Project.load(proj)
    ods = Path(project.table_path("ods_orders"))
    produce(broker.bootstrap, topic, [(f"k{i}", order(f"o{i}", "u", 1.0, 0)) for i in range(5)])
    Pipeline(project, spark, layer="all").run(once=True)
    # The reader falls behind: new versions of ods_orders it has not read, and their
    # files removed by a compaction.
    produce(broker.bootstrap, topic, [(f"n{i}", order(f"n{i}", "u", 1.0, 0)) for i in range(5)])
    Pipeline(project, spark, tables=["ods_orders"]).run(once=True)
    files = table_info(ods)["files"]
    delta_engine(engine).optimize(spark, str(ods))

    # Below Delta's minimum: refused, naming the table, the retention and the minimum.
    low = cli(proj, "vacuum", "--table", "ods_orders", "--retention-hours", "0")
    assert low.returncode == 2, low.stdout + low.stderr[-3000:]
    assert (
        "error: Table `ods_orders` (layers/ods/orders.yml): vacuum with a retention of `0` "
        "hours is refused: the least it may keep is 168 hours, Delta's minimum, the table's "
        "`delta.deletedFileRetentionDuration` (`interval 1 week`)."
    ) in low.stderr
    assert "`--retention-hours 168` or more, or `--force`" in low.stderr

    # With Delta's minimum at 0, the reader's need is the floor.
    DeltaTable(str(ods)).alter.set_table_properties(
        {"delta.deletedFileRetentionDuration": "interval 0 hours"}
    )
    behind = cli(proj, "vacuum", "--table", "ods_orders", "--retention-hours", "0")
    assert behind.returncode == 2, behind.stdout + behind.stderr[-3000:]
    assert (
        "the least it may keep is 1 hours, what `dwd_changes` (layers/dwd/changes.yml, "
        "`read: changes`) still needs: its checkpoint has yet to read version "
    ) in behind.stderr

    # Another process holds the table: refused before anything is read, forced or not.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(proj)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        busy = cli(proj, "vacuum", "--table", "ods_orders", "--retention-hours", "0", "--force")
        assert busy.returncode == 2, busy.stdout + busy.stderr[-3000:]
        assert f"in use by another process: pid {holder.pid} on " in busy.stderr
        assert "Vacuum would delete files a running batch has written" in busy.stderr
    finally:
        holder.kill()
        holder.wait(30)
    assert table_info(ods)["files"] == 1 and len(list(ods.glob("*.parquet"))) > 1

    # The reader caught up: the compacted files go; every row stays.
    Pipeline(project, spark, tables=["dwd_changes"]).run(once=True)
    done = cli(proj, "vacuum", "--table", "ods_orders", "--retention-hours", "0")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == (
        f"ods_orders: vacuum removed {files} file(s) from {ods} ({engine})"
    )
    assert len(rows(ods, ["order_id"])) == 10
    assert len(rows(project.table_path("dwd_changes"), ["order_id"])) == 10
