"""What `warehouse run` says when it cannot run, as a user sees it: a subprocess, its exit
code, one `error:` line naming what to fix, no Python traceback.

- Spark cannot start (Java missing): exit 2, naming `JAVA_HOME`;
- a table's query cannot be built (its input table's Delta log is damaged): exit 1,
  naming the table, its input and the cause;
- the configured Kafka does not answer: exit 1 in seconds, naming the table and the
  bootstrap, before any query starts.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.runtime.projects import write_project

pytestmark = [pytest.mark.spark]

REPO = Path(__file__).resolve().parents[3]


def warehouse(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warehouse", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def test_spark_that_cannot_start_is_exit_2_naming_java_home(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", bootstrap="127.0.0.1:9")
    missing = str(tmp_path / "no-java")
    done = warehouse("--project", str(project), "run", "--once", env={"JAVA_HOME": missing})
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = error_lines(done.stderr)
    assert line.startswith("error: Spark could not start a session (master `local[2]`)")
    assert f"`JAVA_HOME` is `{missing}`" in line


CAUSE = {"python": "DeltaError: Kernel error: Json error", "native": "JsonParseException"}
"""How each engine's Delta reader says that a commit file is not JSON."""


def test_a_table_whose_input_is_unreadable_is_exit_1_naming_table_and_input(
    tmp_path: Path, engine: str
) -> None:
    project = write_project(tmp_path / "p", bootstrap="127.0.0.1:9", engine=engine)
    ods = project / ".warehouse" / "tables" / "ods_orders"
    (ods / "_delta_log").mkdir(parents=True)
    (ods / "_delta_log" / f"{0:020d}.json").write_text("not json\n")  # a commit cut short
    done = warehouse("--project", str(project), "run", "--layer", "dwd", "--once")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    [line] = error_lines(done.stderr)
    assert line.startswith("error: Table `dwd_orders` (layer `dwd`): its query could not be built")
    assert f"its inputs: table `ods_orders` at {ods}" in line
    assert CAUSE[engine] in line  # the cause, quoted
    assert not (project / ".warehouse" / "tables" / "dwd_orders").exists()


def test_a_kafka_that_does_not_answer_is_exit_1_naming_table_and_bootstrap(
    tmp_path: Path,
) -> None:
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bootstrap = f"127.0.0.1:{port}"
    # The native engine: Spark's Java client alone would take minutes to give up.
    project = write_project(tmp_path / "p", bootstrap=bootstrap, engine="native")
    done = warehouse("--project", str(project), "run", "--layer", "ods", "--once")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    [line] = error_lines(done.stderr)
    assert line.startswith(f"error: Table `ods_orders` reads Kafka at `{bootstrap}`, which did not")
    assert "`kafka.bootstrap` in conf/<env>.yml" in line
    assert not (project / ".warehouse" / "tables" / "ods_orders").exists()
