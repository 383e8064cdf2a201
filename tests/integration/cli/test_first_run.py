"""The first run a new user reads in the README `warehouse init` writes, line by line as
subprocesses: init, produce the sample, run once, status, consume the published view.
Real embedded broker (started on demand by `produce`, on a free port), real Spark, real
Delta; the view's records must come out of `consume`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from streams.broker.launcher import stop_broker
from warehouse.templates import TEMPLATE_DIR

# `run --once` of three small tables: 8.5 min measured on 2 cores shared with other jobs.
pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(1800)]


def first_run_lines() -> list[str]:
    """The commands of the first code block of the scaffolded README."""
    text = (TEMPLATE_DIR / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.DOTALL)
    assert block, "the scaffolded README has no ```sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def warehouse(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    words = shlex.split(line)
    assert words[0] == "warehouse", line
    done = subprocess.run(
        [sys.executable, "-m", "warehouse", *words[1:]],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=1500,
    )
    assert done.returncode == 0, f"`{line}` exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def test_the_readme_first_run_ends_with_the_view_out_of_consume(tmp_path: Path) -> None:
    lines = first_run_lines()
    assert len(lines) == 5, lines
    init, cd = lines[0].split(" && ")
    assert cd.startswith("cd ")
    # A free port instead of 9092: other brokers may run on this machine.
    env = {**os.environ, "WAREHOUSE__KAFKA__EMBEDDED__PORT": "0"}
    warehouse(init, tmp_path, env)
    project = tmp_path / cd.split()[1]
    try:
        outputs = [warehouse(line, project, env).stdout for line in lines[1:]]
    finally:
        stop_broker(project / ".warehouse" / "broker")
    produced, ran, status, consumed = outputs
    assert "produced 6 record(s) to topic `events`" in produced
    assert "ads_event_totals [ads]:" in ran and "2 published" in ran
    assert re.search(r"^ads_event_totals\s+ads\s+\d+\s+2\s", status, re.MULTILINE), status
    # The sample has one event twice (dedupe keeps it once) and `Purchase` in capitals.
    assert sorted(consumed.splitlines()) == [
        '{"kind":"purchase"}\t{"kind":"purchase","events":2,"amount":"25.00"}',
        '{"kind":"view"}\t{"kind":"view","events":3,"amount":"0.00"}',
    ]
