"""One process at a time per table when the tables are on S3: the lease
(`streams.storage.Lease`) refuses a second process, and expires after its holder dies."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import streams.storage as storage
from tests.unit.runtime.projects import write_project
from tests.unit.runtime.test_locks import held_elsewhere, try_elsewhere
from warehouse.cli.main import main

pytestmark = [pytest.mark.s3]

LEASE = 20.0
"""Long enough that the process asked right after the holder's death (a new Python that
imports the framework and asks S3: over 4 s on a busy machine) still finds the lease."""


def test_a_table_on_s3_is_held_by_a_lease_that_expires_when_its_holder_dies(
    tmp_path: Path, s3_root: str, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = write_project(
        tmp_path / "proj",
        warehouse_root=s3_root,  # type: ignore[arg-type]
        extra_conf=f"storage: {{lease_seconds: {LEASE}}}\n",
    )
    ckpt = f"{s3_root}/checkpoints/ods_orders"
    storage.write_text(f"{ckpt}/offsets/0", "v1\n{}\n")
    with held_elsewhere(proj, "ods_orders") as holder:
        assert storage.list_names(f"{ckpt}.lock")  # the lease's generation object
        for args in (
            ["reset", "--table", "ods_orders", "--yes"],
            ["recover", "--table", "ods_orders"],
        ):
            assert main(["--project", str(proj), *args]) == 2, args
            err = capsys.readouterr().err
            assert "error: Table `ods_orders` (layers/ods/orders.yml) is in use by another " in err
            assert f"process: pid {holder.pid} on " in err and "its lease was renewed" in err
        assert storage.is_file(f"{ckpt}/offsets/0")  # nothing was reset
        assert try_elsewhere(proj, "dwd_orders").returncode == 0  # other tables are free
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
        died = time.monotonic()
        refused = try_elsewhere(proj, "ods_orders")
        assert refused.returncode == 2 and f"pid {holder.pid}" in refused.stdout
        while try_elsewhere(proj, "ods_orders").returncode != 0:
            assert time.monotonic() - died < LEASE + 20, "the dead holder's lease never expired"
            time.sleep(0.5)
    assert main(["--project", str(proj), "reset", "--table", "ods_orders", "--yes"]) == 0
    assert not storage.exists(ckpt)
    assert not (proj / ".warehouse").exists()
