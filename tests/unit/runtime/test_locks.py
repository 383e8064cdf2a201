"""A table in use by one process is refused to another: real processes, real `flock`s."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.cli.main import main
from warehouse.runtime.errors import TableBusyError
from warehouse.runtime.locks import holding
from warehouse.spec.paths import lock_file

REPO = Path(__file__).resolve().parents[3]

HOLD = """\
import sys, time
from warehouse import Project
from warehouse.runtime.locks import holding
project = Project.load(sys.argv[1])
try:
    with holding(project, sys.argv[3:], doing=sys.argv[2]):
        print("held", flush=True)
        time.sleep(float(sys.stdin.readline() or 0))
except Exception as e:
    print(e, flush=True)
    sys.exit(2)
"""


def _python(*args: str, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLD, *args],
        cwd=REPO,
        text=True,
        **kw,  # type: ignore[call-overload]
    )


@contextmanager
def held_elsewhere(proj: Path, *names: str, doing: str = "run") -> Iterator[subprocess.Popen[str]]:
    """Another process holding `names` until the block ends."""
    proc = _python(str(proj), doing, *names, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.wait(30)


def try_elsewhere(proj: Path, *names: str) -> subprocess.CompletedProcess[str]:
    """Another process asking for `names` and letting them go at once."""
    return subprocess.run(
        [sys.executable, "-c", HOLD, str(proj), "run", *names],
        cwd=REPO,
        text=True,
        input="0\n",
        capture_output=True,
        timeout=60,
    )


def test_a_table_another_process_runs_is_refused_to_run_reset_and_recover(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = write_project(tmp_path / "proj")
    table = proj / ".warehouse" / "tables" / "ods_orders" / "_delta_log"
    checkpoint = proj / ".warehouse" / "checkpoints" / "ods_orders" / "offsets"
    for d in (table, checkpoint):
        d.mkdir(parents=True)
    with held_elsewhere(proj, "ods_orders") as holder:
        for args in (
            ["run", "--table", "ods_orders", "--once"],
            ["run", "--layer", "all", "--once"],
            ["reset", "--table", "ods_orders", "--yes"],
            ["recover", "--table", "ods_orders"],
        ):
            assert main(["--project", str(proj), *args]) == 2, args
            err = capsys.readouterr().err
            assert "error: Table `ods_orders` (layers/ods/orders.yml) is in use by another " in err
            assert f"process: pid {holder.pid} on " in err and ", run since " in err, err
            assert "dwd_orders" not in err
        # Nothing was removed, and the table the refused `--layer all` asked for as well
        # was let go at once.
        assert table.is_dir() and checkpoint.is_dir()
        assert try_elsewhere(proj, "dwd_orders").returncode == 0


def test_the_lock_goes_with_its_process_however_it_ends(tmp_path: Path) -> None:
    proj = write_project(tmp_path / "proj")
    project = Project.load(proj)
    with held_elsewhere(proj, "ods_orders", doing="reset") as holder:
        with pytest.raises(TableBusyError, match=f"pid {holder.pid} .*, reset since "):
            with holding(project, ["dwd_orders", "ods_orders"], doing="run"):
                pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
        with holding(project, ["ods_orders"], doing="run"):
            record = json.loads(Path(lock_file(project.checkpoint_path("ods_orders"))).read_text())
            assert record["pid"] == os.getpid() and record["doing"] == "run"
            assert try_elsewhere(proj, "ods_orders").returncode == 2
        assert Path(lock_file(project.checkpoint_path("ods_orders"))).read_text() == ""
        assert try_elsewhere(proj, "ods_orders").returncode == 0


def test_a_process_holds_a_table_again_until_its_outer_hold_ends(tmp_path: Path) -> None:
    proj = write_project(tmp_path / "proj")
    project = Project.load(proj)
    with holding(project, ["ods_orders"], doing="run"):
        with holding(project, ["ods_orders", "dwd_orders"], doing="run"):
            refused = try_elsewhere(proj, "ods_orders")
            assert refused.returncode == 2 and f"pid {os.getpid()} " in refused.stdout
        assert try_elsewhere(proj, "dwd_orders").returncode == 0
        assert try_elsewhere(proj, "ods_orders").returncode == 2
    assert try_elsewhere(proj, "ods_orders").returncode == 0
