"""The command line on a project whose `warehouse_root` is `s3a://bucket/wh`, with only
the standard AWS variables set (no `storage:` section), as a user runs it: `run --layer
all --once`, `status --json`, `check`, `recover`, `reset`, each its own process, on both
engines; exactly the right rows, and nothing of the tables on the local disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import streams.storage as storage
from streams.delta.faults import CRASH_POINT_ENV
from streams.kafka.admin import produce
from tests.integration.runtime.helpers import order, orders_project, rows
from tests.integration.runtime.runs import REPO

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.s3, pytest.mark.slow]


def cli(
    project: Path, *args: str, timeout: float = 600, **extra: str
) -> subprocess.CompletedProcess[str]:
    # Only the standard variables say where S3 is: nothing the framework exported.
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAREHOUSE")} | extra
    assert env["AWS_ENDPOINT_URL"] and env["AWS_ACCESS_KEY_ID"]
    return subprocess.run(
        [sys.executable, "-m", "warehouse", "--project", str(project), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=timeout,
    )


def test_run_status_check_recover_reset_on_s3_with_the_aws_variables_alone(
    broker, unique, tmp_path: Path, s3_root: str, engine: str
) -> None:
    topic, proj = orders_project(
        tmp_path / "proj", broker.bootstrap, unique, partitions=2, engine=engine,
        warehouse_root=s3_root,
    )  # fmt: skip
    ods, dwd = f"{s3_root}/tables/ods_orders", f"{s3_root}/tables/dwd_orders"
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
    assert rows(ods, ["order_id"]) == [("o1",), ("o1",), ("o2",)]
    assert rows(dwd, ["order_id"]) == [("o1",), ("o2",)]

    st = cli(proj, "status", "--json", timeout=120)
    assert st.returncode == 0, st.stderr
    tables = {t["table"]: t for t in json.loads(st.stdout)["tables"]}
    assert (tables["ods_orders"]["path"], tables["ods_orders"]["rows"]) == (ods, 3)
    assert tables["ods_orders"]["quarantine_rows"] == 1 and tables["dwd_orders"]["rows"] == 2

    check = cli(proj, "check", timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr[-2000:]
    assert f"report: {s3_root}/reports/check-" in check.stdout

    # A recover killed after it deleted the old checkpoint: the run is refused, naming
    # recover; a recover then rebuilds it, and the next run replays batch 0 (nothing of
    # it written again) and reads the new record.
    killed = cli(
        proj, "recover", "--table", "ods_orders", timeout=120, **{CRASH_POINT_ENV: "recover"}
    )
    assert killed.returncode == -9, killed.stderr
    # The dead recover's lease holds the table until it expires: a short lease here.
    short = {"WAREHOUSE__STORAGE__LEASE_SECONDS": "4"}
    deadline = time.monotonic() + 60
    while (
        "in use by another process"
        in (refused := cli(proj, "run", "--layer", "all", "--once", **short)).stderr
    ):
        assert time.monotonic() < deadline, refused.stderr[-3000:]
        time.sleep(1)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "`warehouse recover` stopped while it replaced the checkpoint" in refused.stderr
    assert "Run `warehouse recover --table ods_orders` again" in refused.stderr
    rec = cli(proj, "recover", "--table", "ods_orders", timeout=120)
    assert rec.returncode == 0, rec.stderr
    produce(broker.bootstrap, topic, [("c", order("o3", "u3", 1.0, 2))])
    again = cli(proj, "run", "--layer", "all", "--once")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "ods_orders [ods]: 2 batch(es), 5 rows in, 1 written" in again.stdout
    assert rows(ods, ["order_id"]) == [("o1",), ("o1",), ("o2",), ("o3",)]

    reset = cli(proj, "reset", "--table", "dwd_orders", "--yes", timeout=120)
    assert reset.returncode == 0, reset.stderr
    assert not storage.exists(dwd)
    rebuilt = cli(proj, "run", "--table", "dwd_orders", "--once")
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert rows(dwd, ["order_id"]) == [("o1",), ("o2",), ("o3",)]

    assert not (proj / ".warehouse").exists()  # nothing of the tables on the local disk
